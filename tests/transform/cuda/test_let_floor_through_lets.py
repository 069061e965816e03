"""let_floor_split through lets: `e = g * 1024 + tid * 8; i = e // 128; j = e % 128` (a swizzled
copy's element counter and its coordinates) become `i = g * 8 + tid // 16`, `j = (tid % 16) * 8`,
the same values for every g and tid (checked against Python's floor arithmetic)."""
import random

from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.testing.int_eval import int_value
from tilelang.transform.cuda.let_floor_split import split_let_floors

g, tid, e, i, j, w = (E.Var(n, dt.int32) for n in ("g", "tid", "e", "i", "j", "w"))


def _lets(body):
    return {s.var.name: s.value for s in body.stmts if isinstance(s, S.LetStmt)}


def _divisions(x):
    from tilelang.ir.visitor import collect
    return [n for n in collect(x, lambda n: isinstance(n, E.Binary) and n.op in ("//", "%"))]


def _body(e_value, *rest):
    return S.seq(S.LetStmt(e, e_value), *rest)


def test_coordinates_of_a_let_counter_split_and_keep_their_values():
    body = _body(g * 1024 + tid * 8, S.LetStmt(i, e // 128), S.LetStmt(j, e % 128), S.LetStmt(w, i * 64 + j))
    lets = _lets(split_let_floors(body))
    assert [str(d) for d in _divisions(lets["i"])] == [str(tid // 16)]
    assert [str(d) for d in _divisions(lets["j"])] == [str(tid % 16)]
    assert e not in set(_vars(lets["i"])) | set(_vars(lets["j"]))
    rng = random.Random(0)
    for _ in range(300):
        env = {"g": rng.randrange(0, 16), "tid": rng.randrange(0, 256)}
        env["e"] = int_value(lets["e"], env)
        for name in ("i", "j"):
            env[name] = int_value(lets[name], env)
        assert env["i"] == env["e"] // 128 and env["j"] == env["e"] % 128
        assert int_value(lets["w"], env) == env["i"] * 64 + env["j"]


def _vars(x):
    from tilelang.ir.visitor import collect
    return collect(x, lambda n: isinstance(n, E.Var))


def test_a_division_the_split_cannot_remove_keeps_the_let():
    body = _body(g * 1000 + tid * 8, S.LetStmt(i, e // 128))  # 1000 is no multiple of 128
    lets = _lets(split_let_floors(body))
    assert str(lets["i"]) == str(e // 128)


def test_switch_off_keeps_divisions_of_lets():
    body = _body(g * 1024 + tid * 8, S.LetStmt(i, e // 128))
    assert str(_lets(split_let_floors(body, through_lets=False))["i"]) == str(e // 128)


def test_no_inlining_past_a_rebinding_of_the_let_or_its_variables():
    loop = S.For(g, E.as_expr(0), E.as_expr(4), "unroll", S.seq(S.LetStmt(i, e // 128), S.LetStmt(j, i + 1)))
    body = _body(g * 1024 + tid * 8, loop)  # the loop rebinds g: e's g is not the loop's
    out = split_let_floors(body)
    inner = [s for s in out.stmts if isinstance(s, S.For)][0].body
    assert str(_lets(inner)["i"]) == str(e // 128)
    again = _body(g * 1024 + tid * 8, S.LetStmt(e, e + tid), S.LetStmt(i, e // 128))  # e's value reads e
    assert str(_lets(split_let_floors(again))["i"]) == str(e // 128)
    other = S.SeqStmt((S.SeqStmt((S.LetStmt(e, g * 1024 + tid * 8), S.LetStmt(w, e))), S.LetStmt(i, e // 128)))
    assert str(_lets(split_let_floors(other))["i"]) == str(e // 128)  # e's let is another sequence's
