"""Loop constructors take the public TileLang's positional and keyword arguments (language/loops.py)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect

N, BK = 256, 32


def summed(make_loop):
    """Out[i] = sum over k-blocks of A[k-block, i] for 32-wide rows, through a shared tile per k-block."""
    @T.prim_func
    def k(A: T.Tensor((N, BK), T.float32), Out: T.Tensor((BK,), T.float32)):
        with T.Kernel(1, threads=32) as b:
            A_s = T.alloc_shared((BK, BK), T.float32)
            acc = T.alloc_fragment((BK,), T.float32)
            T.clear(acc)
            for ko in make_loop():
                T.copy(A[ko * BK, 0], A_s)
                for j in T.Parallel(BK):
                    for i in T.serial(BK):
                        acc[j] += A_s[i, j]
            T.copy(acc, Out)
    return k


def stages_of(func):
    loops = collect(func.body, lambda n: isinstance(n, S.For) and n.kind == "pipelined")
    assert len(loops) == 1
    return loops[0].annotation("num_stages")


@pytest.mark.parametrize("make_loop,stages", [
    (lambda: T.Pipelined(0, N // BK, 2), 2),          # the third positional argument is num_stages
    (lambda: T.Pipelined(N // BK, num_stages=3), 3),
    (lambda: T.Pipelined(N // BK, order=[0, 1], stage=[0, 1]), 2),  # depth from the hand-written stages
    (lambda: T.Pipelined(N // BK, annotations={"note": 1}), 0),
])
def test_pipelined_arguments(make_loop, stages):
    func = summed(make_loop)
    assert stages_of(func) == stages
    a = torch.randn(N, BK)
    out = torch.zeros(BK)
    tilelang.compile(func, target="cpu")(a, out)
    torch.testing.assert_close(out.double(), a.double().sum(0), rtol=1e-5, atol=1e-4)


def test_pipelined_bad_arguments_say_what_was_expected():
    with pytest.raises(TileLangError, match="num_stages must be a non-negative constant"):
        summed(lambda: T.Pipelined(8, num_stages=-1))
    with pytest.raises(TileLangError, match="one entry per scheduled statement"):
        summed(lambda: T.Pipelined(8, order=[0, 1], stage=[0]))
