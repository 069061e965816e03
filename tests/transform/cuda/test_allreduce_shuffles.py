"""T.tvm_thread_allreduce over threadIdx.x of a power-of-two extent of at most 32 lowers to an xor
butterfly of warp shuffles (thread_allreduce._shuffles): its groups are aligned runs of lanes of
one warp. The dequantized GEMV (32 reduce threads x 4) reduced through a shared scratch row, a
barrier and a 32-step serial loop per thread.

Checks: the CUDA source has log2(x) shuffles and no scratch or barrier for x = 32 and 16 (two
groups per warp); x = 24 keeps the scratch row; host-emulated runs of each match float64."""
import pytest
import torch

import tilelang
import tilelang.language as T


def row_dot(N, K, RX, RY, accum="float32"):
    """C[n] = A . B[n]: RX threads (threadIdx.x) split each row's K, RY rows per block."""
    TILE = 4

    @T.prim_func
    def main(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // RY, threads=(RX, RY)) as bn:
            kr = T.thread_binding(0, RX, thread="threadIdx.x")
            ni = T.thread_binding(0, RY, thread="threadIdx.y")
            acc = T.alloc_local((1,), accum)
            red = T.alloc_local((1,), accum)
            T.clear(acc)
            for ko in T.serial(K // (RX * TILE)):
                for v in T.serial(TILE):
                    acc[0] += A[ko * RX * TILE + kr * TILE + v].astype(accum) * \
                        B[bn * RY + ni, ko * RX * TILE + kr * TILE + v].astype(accum)
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, accum)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], kr, dtype="handle"))
            if kr == 0:
                C[bn * RY + ni] = red[0]

    return main


CASES = {"x32": (64, 512, 32, 4), "x16": (64, 512, 16, 8), "x24": (48, 480, 24, 4)}


@pytest.mark.nvrtc
@pytest.mark.parametrize("name", list(CASES))
def test_allreduce_over_lanes(run_on_host, name):
    N, K, RX, RY = CASES[name]
    k = tilelang.compile(row_dot(N, K, RX, RY), target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    if RX & (RX - 1) == 0:
        assert src.count("tl_shfl_xor(4294967295u") == RX.bit_length() - 1
        assert "tl_red_scratch" not in src and "__syncthreads" not in src
    else:
        assert "tl_red_scratch1[tid]" in src
    g = torch.Generator().manual_seed(RX)
    a, b = torch.randn(K, generator=g).half(), torch.randn(N, K, generator=g).half()
    c = torch.full((N,), float("nan"))
    run_on_host(k, [a, b, c])
    ref = b.double() @ a.double()
    assert (c.double() - ref).abs().max().item() <= 1e-4 * ref.abs().max().item() + 1e-4
