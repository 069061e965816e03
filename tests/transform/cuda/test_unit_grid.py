"""Block indices of extent-1 grid dimensions are 0 (transform/cuda/unit_grid.py): a kernel over
(rows, batch, heads) launched with one batch and one head block indexes without blockIdx.y / .z."""

import pytest
import torch

import tilelang
import tilelang.language as T

from .conftest import build_sm90 as build, nvrtc_or_skip

S, B, H, D = 8, 1, 1, 64


def gather_rows(b=B, h=H):
    @T.prim_func
    def k(X: T.Tensor((b, S, h, D), T.float32), Idx: T.Tensor((b, S, h, 4), T.int32),
          Y: T.Tensor((b, S, h, D), T.float32)):
        with T.Kernel(S, b, h, threads=64) as (s_i, by, bz):
            for d in T.Parallel(D):
                Y[by, s_i, bz, d] = X[by, Idx[by, s_i, bz, 0], bz, d] * 2.0 + by + bz
    return k




def _body(src):
    return src[src.index("{", src.index("__global__")):]


@pytest.mark.nvrtc
def test_unit_dims_index_without_their_block_vars():
    nvrtc_or_skip()
    body = _body(build(gather_rows()).get_kernel_source())
    uses = [ln for ln in body.splitlines() if "by" in ln.replace("by = ", "") or "bz" in ln.replace("bz = ", "")]
    assert not [ln for ln in uses if "blockIdx" not in ln], uses
    plain = _body(build(gather_rows(), {"tl.disable_unit_grid_fold": True}).get_kernel_source())
    assert "(int64_t)by *" in plain or "by *" in plain, plain
    two = _body(build(gather_rows(b=2)).get_kernel_source())  # a real batch dim keeps its index
    assert "by *" in two and "bz *" not in two, two


@pytest.mark.nvrtc
@pytest.mark.parametrize("b, h, configs", [(1, 1, {}), (2, 1, {}), (1, 2, {}), (1, 1, {"tl.disable_unit_grid_fold": True})])
def test_runs_right_on_host(b, h, configs):
    nvrtc_or_skip()
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    g = torch.Generator().manual_seed(5)
    x = torch.randn(b, S, h, D, generator=g)
    idx = torch.randint(0, S, (b, S, h, 4), generator=g, dtype=torch.int32)
    y = torch.full((b, S, h, D), float("nan"))
    host.HostProgram({"k": build(gather_rows(b, h), configs)}).run("k", [x, idx, y])
    ref = torch.empty(b, S, h, D, dtype=torch.float64)
    for bb in range(b):
        for s in range(S):
            for hh in range(h):
                ref[bb, s, hh] = x[bb, idx[bb, s, hh, 0], hh].double() * 2.0 + bb + hh
    torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)
