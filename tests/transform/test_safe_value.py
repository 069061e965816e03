"""T.annotate_safe_value({A: v}): out-of-range reads of A give v, in T.Parallel loads and in T.copy
(transform/legalize_safe_memory.py), on the CPU backend and in the CUDA source (NVRTC for sm_80 and
sm_90a, run on the host emulator). Fresh random inputs, outputs poisoned with NaN, float64 references.
"""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

TARGETS = ["cpu", "cuda -arch=sm_80", "cuda -arch=sm_90a"]


def shifted_rows(M, N, bM, bN, pad, dtype):
    """B[r, :] = A[r - 10, :], rows above the tensor reading `pad` (a T.Parallel load)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            S = T.alloc_shared((bM, bN), dtype)
            T.annotate_safe_value({A: pad})
            for i, j in T.Parallel(bM, bN):
                S[i, j] = A[by * bM + i - 10, bx * bN + j]
            for i, j in T.Parallel(bM, bN):
                B[by * bM + i, bx * bN + j] = S[i, j]
    return main


def padded_tiles(M, N, bM, bN, pad):
    """T.copy of partial tiles global -> shared -> fragment -> a padded output: the padding reads `pad`."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((T.ceildiv(M, bM) * bM, T.ceildiv(N, bN) * bN), "float32")):
        T.annotate_safe_value({A: pad})
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            S = T.alloc_shared((bM, bN), "float32")
            F = T.alloc_fragment((bM, bN), "float32")
            T.copy(A[by * bM, bx * bN], S)
            T.copy(S, F)
            T.copy(F, B[by * bM, bx * bN])
    return main


def row_max(M, K, bM, bK):
    """Row maxima over K in pipelined tiles: the padding must read -inf (0 would win for negative rows)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bM), threads=128) as bx:
            T.annotate_safe_value({A: -T.infinity("float32")})
            S = T.alloc_shared((bM, bK), "float32")
            F = T.alloc_fragment((bM, bK), "float32")
            m = T.alloc_fragment((bM,), "float32")
            acc = T.alloc_fragment((bM,), "float32")
            T.fill(acc, -T.infinity("float32"))
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[bx * bM, ko * bK], S)
                T.copy(S, F)
                T.reduce_max(F, m, dim=1)
                for i in T.Parallel(bM):
                    acc[i] = T.max(acc[i], m[i])
            T.copy(acc, Out[bx * bM])
    return main


def _run(kernel, target, tensors):
    if target == "cpu":
        kernel(*tensors)
        return
    host = host_cuda_or_skip()
    prog = host.HostProgram({"k": kernel})
    try:
        prog.run("k", tensors)
    finally:
        prog.close()


@pytest.mark.parametrize("target", TARGETS)
def test_parallel_load_reads_the_safe_value(target):
    M, N, pad = 100, 72, 10.0
    k = tilelang.compile(shifted_rows(M, N, 32, 32, pad, "float16"), target=target)
    a = torch.randn(M, N).half()
    b = torch.full((M, N), float("nan")).half()
    _run(k, target, [a, b])
    ref = torch.full((M, N), pad, dtype=torch.float64)
    ref[10:] = a[:-10].double()
    torch.testing.assert_close(b.double(), ref, rtol=0, atol=0)


@pytest.mark.parametrize("target", TARGETS)
def test_copy_pads_with_the_safe_value(target):
    M, N, pad = 45, 50, -3.5
    k = tilelang.compile(padded_tiles(M, N, 32, 16, pad), target=target)
    a = torch.randn(M, N)
    b = torch.full((64, 64), float("nan"))
    _run(k, target, [a, b])
    ref = torch.full((64, 64), pad, dtype=torch.float64)
    ref[:M, :N] = a.double()
    torch.testing.assert_close(b.double(), ref, rtol=0, atol=0)


@pytest.mark.parametrize("target", TARGETS)
def test_pipelined_copy_with_minus_infinity(target):
    M, K = 40, 50
    k = tilelang.compile(row_max(M, K, 32, 32), target=target)
    a = -torch.rand(M, K) - 0.5  # every element negative: a zero padding would be every row's max
    out = torch.full((64,), float("nan"))[:M]
    _run(k, target, [a, out])
    torch.testing.assert_close(out.double(), a.double().amax(dim=1), rtol=0, atol=0)


def test_zero_and_disable_keep_the_plain_behaviour():
    """Without the annotation (and with it set to 0) padding reads 0; with legalization disabled the
    copy still pads with the safe value."""
    M, N = 45, 50
    a = torch.randn(M, N)
    for pad, configs in ((0, {}), (2.0, {"tl.disable_safe_memory_legalize": True})):
        k = tilelang.compile(padded_tiles(M, N, 32, 16, pad), target="cpu", pass_configs=configs)
        b = torch.full((64, 64), float("nan"))
        k(a, b)
        ref = torch.full((64, 64), pad, dtype=torch.float64)
        ref[:M, :N] = a.double()
        torch.testing.assert_close(b.double(), ref, rtol=0, atol=0)


def nested_blocks(M, N, bM, bN, outer_pad, inner_pad):
    """Inside T.sblock("outer") the safe value of A is outer_pad, inside its T.sblock("inner") inner_pad:
    the inner block's copy and T.Parallel load pad with inner_pad, the outer block's with outer_pad, and
    the kernel outside both with 0."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((4, bM, bN), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((bM, bN), "float32")
            with T.sblock("outer"):
                T.annotate_safe_value({A: outer_pad})
                with T.sblock("inner"):
                    T.annotate_safe_value({A: inner_pad})
                    T.copy(A[0:bM, 0:bN], S)
                    T.copy(S, B[0, 0:bM, 0:bN])
                    for i, j in T.Parallel(bM, bN):
                        B[1, i, j] = A[i, j]
                T.copy(A[0:bM, 0:bN], S)
                T.copy(S, B[2, 0:bM, 0:bN])
            for i, j in T.Parallel(bM, bN):
                B[3, i, j] = A[i, j]
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_sblock_safe_values_are_lexically_scoped(target):
    M, N, bM, bN = 30, 20, 32, 32
    k = tilelang.compile(nested_blocks(M, N, bM, bN, -1.0, -99.0), target=target)
    a = torch.randn(M, N)
    b = torch.full((4, bM, bN), float("nan"))
    _run(k, target, [a, b])
    ref = torch.zeros(4, bM, bN, dtype=torch.float64)
    ref[0], ref[1], ref[2] = -99.0, -99.0, -1.0
    ref[:, :M, :N] = a.double()
    torch.testing.assert_close(b.double(), ref, rtol=0, atol=0)
