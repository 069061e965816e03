"""T.copy between a global region and an on-chip tile of other extents (`T.copy(g[0:n], S)`, n symbolic, S of 1024
elements): the copy runs over the on-chip tile's extents, as in the public TileLang; global elements past the
tensor's bounds read as zeros and are not written. It was a ShapeMismatchError at @T.prim_func. An on-chip tile
provably smaller than the global region, or a slice past the tile's own shape, stays an error."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import host_cuda_or_skip
from tilelang.errors import ShapeMismatchError

length = T.symbolic("len", dtype=T.int32)


@T.prim_func
def dyn_copy(g: T.Tensor[(length,), T.int32], out: T.Tensor[(1024,), T.int32], back: T.Tensor[(length,), T.int32]):
    with T.Kernel(1, threads=128):
        sh = T.alloc_shared((1024,), dtype=T.int32)
        T.copy(g[0:length], sh)
        T.copy(sh, out)
        T.copy(sh, back[0:length])


def check(run):
    for n in (5, 700, 1024):
        g = torch.randint(-100, 100, (n,), dtype=torch.int32)
        out = torch.full((1024,), 7, dtype=torch.int32)
        back = torch.zeros(n, dtype=torch.int32)
        run(g, out, back)
        ref = torch.zeros(1024, dtype=torch.int32)
        ref[:n] = g
        assert torch.equal(out, ref) and torch.equal(back, g), n


def test_dynamic_global_length_into_a_static_tile_on_the_cpu():
    check(tilelang.compile(dyn_copy, target="cpu"))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_dynamic_global_length_into_a_static_tile_on_the_host_emulator(arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(dyn_copy, target=f"cuda -arch={arch}")

    def run(g, out, back):
        prog = host.HostProgram({"k": k})
        try:
            prog.run("k", [g, out, back])
        finally:
            prog.close()

    check(run)


def test_a_smaller_tile_than_the_global_region_is_an_error():
    with pytest.raises(ShapeMismatchError, match="shapes must match"):
        @T.prim_func
        def f(g: T.Tensor[(256,), T.float32]):
            with T.Kernel(1, threads=32):
                sh = T.alloc_shared((128,), dtype=T.float32)
                T.copy(g[0:256], sh)


def test_a_slice_past_the_tiles_shape_is_an_error():
    with pytest.raises(ShapeMismatchError, match="past its shape"):
        @T.prim_func
        def f(g: T.Tensor[(16, 16), T.float32]):
            with T.Kernel(1, threads=32):
                sh = T.alloc_shared((16, 16), dtype=T.float32)
                T.copy(g, sh)
                T.copy(sh[0:24, 0:16], g)
