"""The integer/float simplifier: folds, identities, linear sums, floordiv/mod of linear sums.

Besides exact expected forms, a randomized check evaluates expressions before and after
simplification at random points (Python floor semantics for // and %, as the IR defines).
"""
import random

import pytest

from tilelang import dtypes as dt
from tilelang.arith.simplify import const_int, prove_lt, simplify, wrap_int
from tilelang.ir import expr as E

x, y, z = E.Var("x"), E.Var("y"), E.Var("z")


def c(v, d="int32"):
    return E.Const(v, dt.as_dtype(d))


def B(op, a, b):
    a, b = E.as_expr(a), E.as_expr(b)
    return E.Binary(op, a, b, dt.bool_ if op in E.CMP_OPS else a.dtype)


@pytest.mark.parametrize("expr,want", [
    (B("+", c(3), c(4)), "7"),
    (B("*", c(-3), c(4)), "-12"),
    (B("//", c(-7), c(2)), "-4"),     # floor division
    (B("%", c(-7), c(2)), "1"),       # floor modulo
    (B("/", c(-7), c(2)), "-3"),      # integer `/` truncates (C)
    (B("<", c(3), c(4)), "True"),
    (B("max", c(3), c(5)), "5"),
    (B("&&", B("<", x, c(4)), E.Const(True, dt.bool_)), "x < 4"),
    (B("||", B("<", x, c(4)), E.Const(True, dt.bool_)), "True"),
])
def test_constant_folding(expr, want):
    assert str(simplify(expr)) == want


@pytest.mark.parametrize("expr,want", [
    (x * 4 + 4 - 4, "x * 4"),
    ((x + 1) * 2 - 2 * x, "2"),
    (x - x, "0"),
    (x * 0, "0"),
    (x * 1, "x"),
    (x + y - (y + x), "0"),
    ((x * 2) * 3, "x * 6"),
    (2 * (x + 3), "x * 2 + 6"),
    (x * 3 + y - x * 3 + 1, "y + 1"),
    (E.binop("min", x, x), "x"),
])
def test_linear_sums(expr, want):
    assert str(simplify(expr)) == want


@pytest.mark.parametrize("expr,want", [
    ((x * 8 + 4) // 4, "x * 2 + 1"),
    ((x * 8 + 5) // 4, "x * 2 + 1"),
    ((x * 8 + 5) % 4, "1"),
    ((x * 3 + 1) // 3, "x"),
    ((x * 4 - 6) // 4, "x - 2"),        # floor(-6 / 4) = -2
    ((x * 4 - 6) % 4, "2"),             # -6 mod 4 = 2
    ((x * 4 + y * 8) % 4, "0"),
    ((x + y * 4) // 4, "(x + y * 4) // 4"),  # x's coefficient is not a multiple: left alone
    ((x // 4) * 4 + x % 4, "x"),
    ((x // 4) * 8 + (x % 4) * 2 + 1, "x * 2 + 1"),
    (((x + y) // 16) * 16 + (x + y) % 16 - y, "x"),
    ((x // 4) * 4 + x % 8, "x // 4 * 4 + x % 8"),  # different divisors: no merge
    (x // 1, "x"),
    (x % 1, "0"),
])
def test_floordiv_and_mod_of_linear_sums(expr, want):
    assert str(simplify(expr)) == want


def test_narrow_and_unsigned_constants_wrap_like_c():
    assert str(E.cast("int8", 300)) == "T.int8(44)"
    assert str(E.cast("uint8", -1)) == "T.uint8(255)"
    assert str(simplify(E.cast("int16", c(40000)))) == "T.int16(-25536)"
    assert str(simplify(B("<", E.cast("int8", 300), E.as_expr(100, dt.int8)))) == "True"
    assert wrap_int(2**31, dt.int32) == 2**31  # int32/int64 stay exact (overflow is a bug, not a value)
    assert str(simplify(B("+", E.as_expr(250, dt.uint8), E.as_expr(10, dt.uint8)))) == "T.uint8(4)"


def test_float_identities_respect_ieee():
    f = E.Var("f", dt.float32)
    assert str(simplify(f * 1.0)) == "f"
    assert str(simplify(f - 0.0)) == "f"
    assert str(simplify(f + 0.0)) == "f + 0.0"  # -0.0 + 0.0 is +0.0
    assert str(simplify(f * 0.0)) == "f * 0.0"  # NaN * 0 is NaN
    assert str(simplify(B("+", c(0.5, "float32"), c(0.25, "float32")))) == "0.75"


def test_select_and_cast_fold():
    assert simplify(E.select(B("<", c(1), c(2)), x, y)) == x
    assert simplify(E.select(B("<", c(2), c(1)), x, y)) == y
    assert str(simplify(E.Cast(dt.float32, c(3)))) == "3.0"


def test_const_int_and_prove_lt():
    assert const_int((x * 4 + 8) // 4 - x) == 2
    assert const_int(x + 1) is None
    assert prove_lt(x * 2, x * 2 + 1)
    assert not prove_lt(x, y)


def test_simplify_does_not_rebuild_unchanged_nodes():
    e = (x + y * 4) // 4
    s1 = simplify(e)
    assert simplify(s1) == s1


# ------------------------------------------------------------------ randomized: same value before and after

def _eval(e, env):
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.Const):
        return e.value
    if isinstance(e, E.Binary):
        a, b = _eval(e.a, env), _eval(e.b, env)
        if e.op == "/":
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else None, "%": a % b if b else None,
                "min": min(a, b), "max": max(a, b), "<": a < b}[e.op]
    raise TypeError(e)


def _random_expr(rng, depth):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([x, y, z, E.as_expr(rng.randint(-9, 9))])
    op = rng.choice(["+", "-", "*", "//", "%", "+", "*"])
    a = _random_expr(rng, depth - 1)
    if op in ("//", "%"):
        return E.binop(op, a, rng.choice([1, 2, 3, 4, 8, 16]))
    if op == "*":
        return E.binop(op, a, rng.randint(-4, 6))
    return E.binop(op, a, _random_expr(rng, depth - 1))


def test_random_integer_expressions_keep_their_value():
    rng = random.Random(1234)
    folded = 0
    for _ in range(400):
        e = _random_expr(rng, 4)
        s = simplify(e)
        folded += str(s) != str(e)
        for _ in range(6):
            env = {v: rng.randint(-50, 50) for v in (x, y, z)}
            assert _eval(s, env) == _eval(e, env), f"{e}  ->  {s}  at {env}"
    assert folded > 100  # the check exercised real rewrites
