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


def test_alloc_buffer_third_positional_is_the_scope():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float32), Out: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as b:
            s = T.alloc_buffer((64,), T.float32, "shared")
            T.copy(A, s)
            for i in T.Parallel(64):
                Out[i] = s[63 - i] * 2.0
    a = torch.randn(64)
    out = torch.zeros(64)
    tilelang.compile(k, target="cpu")(a, out)
    torch.testing.assert_close(out.double(), a.double().flip(0) * 2)


def test_kernel_threads_default_and_clusters_are_refused():
    @T.prim_func
    def k(Out: T.Tensor((256,), T.int32)):
        with T.Kernel(2, threads=None) as b:
            tx = T.get_thread_binding()
            Out[b * 128 + tx] = b * 1000 + tx
    out = torch.full((256,), -1, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(out)
    ref = torch.cat([torch.arange(128, dtype=torch.int32), 1000 + torch.arange(128, dtype=torch.int32)])
    assert torch.equal(out, ref)

    @T.prim_func
    def c(Out: T.Tensor((2,), T.int32)):
        with T.Kernel(2, threads=64, cluster_dims=(2, 1, 1)) as b:
            Out[b] = b * 10 + T.block_rank_in_cluster()
    out = torch.full((2,), -1, dtype=torch.int32)
    tilelang.compile(c, target="cpu")(out)
    assert out.tolist() == [0, 11]


def test_empty_takes_a_tuple_or_extents():
    @tilelang.jit(out_idx=None, target="cpu")
    def twice(A, block: int = 64):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B = T.empty(M, N, dtype=T.float32)
        C = T.empty((M, N), T.float32)
        with T.Kernel(T.ceildiv(M, block), threads=64) as bx:
            for i, j in T.Parallel(block, N):
                B[bx * block + i, j] = A[bx * block + i, j] * 2.0
                C[bx * block + i, j] = A[bx * block + i, j] + 1.0
        return B, C

    a = torch.randn(128, 16)
    b, c = twice(a)
    torch.testing.assert_close(b.double(), a.double() * 2)
    torch.testing.assert_close(c.double(), a.double() + 1)


def test_copy_hints_are_checked():
    with pytest.raises(TileLangError, match="prefer_instruction"):
        @T.prim_func
        def k(A: T.Tensor((64,), T.float32), Out: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as b:
                s = T.alloc_shared((64,), T.float32)
                T.copy(A, s, prefer_instruction="fast")
                T.copy(s, Out)
