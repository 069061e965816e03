"""arith.floor_split: `(M + R) // c` and `% c` split along the multiples of c in the dividend give the
same value as the unsplit floor division for random integers of either sign, and the shapes the
vector loops produce come out in the split form."""
import random

import pytest

from tilelang import dtypes as dt
from tilelang.arith.floor_split import split_floor
from tilelang.ir import expr as E
from tilelang.testing.int_eval import int_value

I32 = dt.int32


def _c(v):
    return E.Const(v, I32)


def _b(op, a, b):
    return E.Binary(op, a, b, I32)


X, Y, G = (E.Var(n, I32) for n in ("x", "y", "g"))


def _cases():
    rng = random.Random(5)
    out = []
    for _ in range(60):
        c = rng.choice([2, 4, 8, 16, 32, 128, 3, 6, 12])
        kx = rng.choice([1, 2, 4, 8, 3, 6, c, 2 * c, -c, -4])
        ky = rng.choice([c, 4 * c, 0, 1, 5, -2 * c])
        k0 = rng.randint(-3 * c, 3 * c)
        lin = _b("+", _b("+", _b("*", X, _c(kx)), _b("*", Y, _c(ky))), _c(k0))
        out.append((rng.choice(["//", "%"]), lin, c))
    return out


@pytest.mark.parametrize("op,lin,c", _cases())
def test_split_matches_floor_semantics(op, lin, c):
    e = _b(op, lin, _c(c))
    got = split_floor(e)
    rng = random.Random(hash((op, c)) & 0xFFFF)
    for _ in range(200):
        env = {"x": rng.randint(-1000, 1000), "y": rng.randint(-1000, 1000), "g": rng.randint(-50, 50)}
        assert int_value(got, env) == int_value(e, env), (str(e), str(got), env)


def test_vector_group_coordinates_split():
    flat = _b("+", _b("*", G, _c(1024)), _b("*", X, _c(8)))  # (g * 128 + tid) * 8 of a 128-column tile
    row, col = split_floor(_b("//", flat, _c(128))), split_floor(_b("%", flat, _c(128)))
    assert str(row) == "g * 8 + x // 16" and str(col) == "x % 16 * 8", (str(row), str(col))
    assert "g" not in {v.name for v in _vars(col)}, str(col)
    for g in range(16):
        for x in range(128):
            env = {"g": g, "x": x}
            e = g * 1024 + x * 8
            assert int_value(row, env) == e // 128 and int_value(col, env) == e % 128


def _vars(e):
    if isinstance(e, E.Var):
        return {e}
    if isinstance(e, E.Binary):
        return _vars(e.a) | _vars(e.b)
    return set()


def test_nothing_to_split_is_left_alone():
    e = _b("//", _b("+", _b("*", X, _c(3)), Y), _c(8))
    assert int_value(split_floor(e), {"x": -7, "y": 5}) == (-21 + 5) // 8
