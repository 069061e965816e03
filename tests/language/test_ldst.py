"""T.ldg32 / stg32 / lds32 / sts32 (language/ldst.py): 4 bytes as a uint32, from and to global and
shared memory, on the CPU backend and the host emulator against numpy byte views (the 64/128-bit
vector forms: tests/frontend/test_vector.py)."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip

N = 64


def words():
    @T.prim_func
    def k(H: T.Tensor((2 * N,), "float16"), F: T.Tensor((N,), "float32"), W: T.Tensor((2, N), "uint32"),
          Z: T.Tensor((2 * N,), "float16"), G: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S = T.alloc_shared((2 * N,), "float16")
            w = T.ldg32(H[2 * tx:2 * tx + 2])
            W[0, tx] = w
            W[1, tx] = T.ldg32(F[tx], pred=tx % 3 != 0)
            T.sts32(S[2 * (N - 1 - tx):2 * (N - 1 - tx) + 2], w)
            T.sync_threads()
            T.stg32(Z[2 * tx:2 * tx + 2], T.lds32(S[2 * tx:2 * tx + 2]))
            T.stg32(G[tx], T.ldg32(F[N - 1 - tx]), pred=tx < N // 2)
    return k


def args():
    h, f = torch.randn(2 * N).half(), torch.randn(N)
    return h, f, torch.zeros(2, N, dtype=torch.uint32), torch.full((2 * N,), float("nan")).half(), torch.full((N,), -1.0)


def check(h, f, w, z, g):
    hw = h.numpy().view(np.uint32).astype(np.int64)
    fw = f.numpy().view(np.uint32).astype(np.int64)
    got = w.numpy().astype(np.int64)
    assert (got[0] == hw).all()
    assert (got[1] == np.where(np.arange(N) % 3 != 0, fw, 0)).all()
    assert (z.numpy().view(np.uint32) == h.numpy().view(np.uint32)[::-1]).all()
    assert (g[: N // 2] == f.flip(0)[: N // 2]).all() and (g[N // 2:] == -1.0).all()


def test_words_on_cpu():
    a = args()
    tilelang.compile(words(), target="cpu")(*a)
    check(*a)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_words_on_host(arch):
    host = host_cuda_or_skip()
    a = args()
    host.HostProgram({"k": tilelang.compile(words(), target=f"cuda -arch={arch}")}).run("k", list(a))
    check(*a)


def test_bad_regions_are_errors():
    with pytest.raises(tilelang.errors.TileLangError, match="must cover 16 bytes"):
        @T.prim_func
        def k(H: T.Tensor((16,), "float16"), W: T.Tensor((4,), "uint32")):
            with T.Kernel(1, threads=32):
                T.ldg128(H[0:4])
    with pytest.raises(tilelang.errors.TileLangError, match="must cover 4 bytes"):
        @T.prim_func
        def k2(H: T.Tensor((16,), "float16"), W: T.Tensor((4,), "uint32")):
            with T.Kernel(1, threads=32):
                W[0] = T.ldg32(H[0:1])
    with pytest.raises(tilelang.errors.TileLangError, match="works on shared"):
        @T.prim_func
        def k3(H: T.Tensor((16,), "float32"), W: T.Tensor((4,), "uint32")):
            with T.Kernel(1, threads=32):
                W[0] = T.lds32(H[0])
