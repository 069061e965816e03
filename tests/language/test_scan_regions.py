"""T.cumsum / T.cummax over a region of a tile (`T.cumsum(S[r0:r1, :], dim=0)`, `T.cumsum(src=S[a:b, c:d],
dst=D[...])`): only that box is scanned, from its own first element; the rest of the tile is untouched, as in the
public TileLang. They took whole buffers only ('expected buffers')."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip


def program(kind, reverse):
    M, N = 16, 24

    @T.prim_func
    def f(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((M, N), "float32")
            D = T.alloc_shared((M, N), "float32")
            T.copy(A, S)
            T.fill(D, -5.0)
            if kind == "sum":
                T.cumsum(S[3:11, :], dim=0, reverse=reverse)  # in place, rows 3..10
                T.cumsum(src=S[2:14, 4:20], dst=D[1:13, 0:16], dim=1, reverse=reverse)
            else:
                T.cummax(S[3:11, :], dim=0, reverse=reverse)
                T.cummax(src=S[2:14, 4:20], dst=D[1:13, 0:16], dim=1, reverse=reverse)
            T.copy(S, B)
            T.copy(D, C)

    return f


def reference(a, kind, reverse):
    def scan(x, dim):
        x = x.flip(dim) if reverse else x
        y = x.cumsum(dim) if kind == "sum" else x.cummax(dim).values
        return y.flip(dim) if reverse else y

    s = a.double().clone()
    s[3:11, :] = scan(s[3:11, :], 0)
    d = torch.full(a.shape, -5.0, dtype=torch.float64)
    d[1:13, 0:16] = scan(s[2:14, 4:20], 1)
    return s, d


@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_90a"])
def test_scan_of_regions(kind, reverse, target):
    a = torch.randn(16, 24)
    b, c = torch.zeros(16, 24), torch.zeros(16, 24)
    if target != "cpu":  # the sm_90a source on the host emulator
        host = host_cuda_or_skip()
        kc = tilelang.compile(program(kind, reverse), target=target)
        prog = host.HostProgram({"k": kc})
        try:
            prog.run("k", [a, b, c])
        finally:
            prog.close()
    else:
        tilelang.compile(program(kind, reverse), target="cpu")(a, b, c)
    rs, rd = reference(a, kind, reverse)
    torch.testing.assert_close(b.double(), rs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c.double(), rd, rtol=1e-5, atol=1e-5)
