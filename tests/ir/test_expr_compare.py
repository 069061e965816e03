"""`==` / `!=` on expressions outside kernel text (a plain Python helper that a kernel calls) build IR
comparisons where a value is expected, and mean structural equality where Python asks for a bool.
The block-causal attention example masks tiles with such a helper (`T.if_then_else(q_blk == k_blk, 1, 0)`);
comparing structurally there made every mask constant and the result silently wrong."""
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import expr as E


def _same_block(i, j, blk):
    return T.if_then_else(i // blk == j // blk, 1.0, 0.0)


def _other_block(i, j, blk):
    return T.if_then_else(i // blk != j // blk, 1.0, 0.0)


def test_helper_comparisons_are_ir():
    n, blk = 32, 4

    @T.prim_func
    def k(A: T.Tensor((n, n), "float32"), B: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(n, n):
                A[i, j] = _same_block(i, j, blk)
                B[i, j] = _other_block(i, j, blk)

    a, b = torch.full((n, n), float("nan")), torch.full((n, n), float("nan"))
    tilelang.compile(k, target="cpu")(a, b)
    idx = torch.arange(n) // blk
    want = (idx[:, None] == idx[None, :]).double()
    torch.testing.assert_close(a.double(), want)
    torch.testing.assert_close(b.double(), 1 - want)


def test_bool_of_compare_is_structural():
    x, y = E.Var("x"), E.Var("y")
    assert bool(x + 1 == x + 1) and not bool(x + 1 == y + 1)
    assert bool(x + 1 != y + 1) and not bool(x + 1 != x + 1)
    assert not bool(E.const(0) == 0)  # a Python int is not an expression node: unequal, as before
    assert {x + 1: "a"}[x + 1] == "a" and (x * 2) in [x * 2]
    c = E.as_expr(x == y)
    assert isinstance(c, E.Binary) and c.op == "==" and c.dtype == "bool"
