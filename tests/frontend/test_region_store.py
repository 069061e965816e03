"""`A[r, 4:8] = B[r, 0:4]` (and `b = B[r, 0:4]; A[r, 4:8] = b`): a region stored into a region is the
element copy it reads as (T.copy), on the CPU backend and on the host emulator (sm_90a). Fresh random
inputs, NaN-poisoned outputs."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError
from tilelang.testing import host_cuda_or_skip


def shuffle_quarters(M):
    @T.prim_func
    def k(A: T.Tensor((M, 16), T.float32), B: T.Tensor((M, 16), T.float32)):
        with T.Kernel(M, threads=32) as r:
            S = T.alloc_shared((16,), T.float32)
            S[0:16] = A[r, 0:16]
            b = S[0:4]
            B[r, 12:16] = b
            B[r, 0:12] = S[4:16]
    return k


def reference(a):
    return torch.cat([a[:, 4:], a[:, :4]], dim=1).double()


def test_region_store_cpu():
    M = 5
    a = torch.randn(M, 16)
    b = torch.full((M, 16), float("nan"))
    tilelang.compile(shuffle_quarters(M), target="cpu")(a, b)
    torch.testing.assert_close(b.double(), reference(a), rtol=0, atol=0)


def test_region_store_host_cuda():
    host = host_cuda_or_skip()
    M = 5
    k = tilelang.compile(shuffle_quarters(M), target="cuda -arch=sm_90a")
    a = torch.randn(M, 16)
    b = torch.full((M, 16), float("nan"))
    prog = host.HostProgram({"k": k})
    try:
        prog.run("k", [a, b])
    finally:
        prog.close()
    torch.testing.assert_close(b.double(), reference(a), rtol=0, atol=0)


def test_region_store_extent_mismatch_is_an_error():
    with pytest.raises(TileLangError, match="T.copy"):
        @T.prim_func
        def k(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=32):
                B[0:8] = A[0:4]
        tilelang.compile(k, target="cpu")
