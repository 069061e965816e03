"""Global accesses written in T.Parallel loops are guarded on ragged tiles, untouched when provable."""
import torch

import tilelang
import tilelang.language as T


def scale_kernel(M, N, bm=32, bn=64):
    @T.prim_func
    def scale(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] * 2 + 1
    return scale


def test_ragged_parallel_stores_stay_inside_the_tensor():
    M, N = 70, 100  # not multiples of 32 x 64
    k = tilelang.compile(scale_kernel(M, N), target="cpu")
    a = torch.randn(M, N)
    storage = torch.full((M * N + 4096,), 12345.0)  # sentinel after the tensor
    c = storage[: M * N].view(M, N)
    k(a, c)
    torch.testing.assert_close(c.double(), a.double() * 2 + 1)
    assert torch.all(storage[M * N:] == 12345.0), "a store landed past the end of C"


def test_aligned_accesses_get_no_guard():
    k = tilelang.compile(scale_kernel(64, 128), target="cpu")
    body = k.get_kernel_source().split("int32_t scale(")[1]
    assert "if (" not in body  # the analysis proved every access in range
    a = torch.randn(64, 128)
    c = torch.empty(64, 128)
    k(a, c)
    torch.testing.assert_close(c, a * 2 + 1)


def test_pass_config_turns_it_off():
    k = tilelang.compile(scale_kernel(70, 100), target="cpu", pass_configs={"tl.disable_safe_memory_legalize": True})
    guarded = tilelang.compile(scale_kernel(70, 100), target="cpu")
    assert k.get_kernel_source().count("if (") < guarded.get_kernel_source().count("if (")
