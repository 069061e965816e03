"""A T.Parallel reading a register tile at a sub-block offset an enclosing loop moves
(transform/cuda/offset_slices.py; off with pass_config `tl.disable_fragment_slice_offsets`), and
the tf32 mma.sync gemm reading its A from registers (tl::gemm_rs; `tl.disable_mma_register_a`).

mhc_pre's gemm_sqrsum: `part[i, j] += xf[i, jj * 4 + j] ** 2` over (32, 4), xf also the gemm's A.
In the mma A layout the owner of xf[i, jj * 4 + j] does not depend on jj, so xf stays in registers
and the loop runs on each thread's own elements. With 2-column slices (jj * 2 + j) the owners move
with jj, and with a flat layout too: xf then lives in shared memory (the fallback). Numbers: the
generated CUDA run on the host and the CPU backend, against float64 torch on random inputs."""
import re
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import make_swizzled_layout
from tilelang.layout.fragment import FlatFragment
from tilelang.layout.operand_fragments import MmaAFragment, SliceFragment
from tilelang.testing import kernels
from tilelang.transform.cuda.offset_slices import OffsetRead, slice_driver

SM80 = "cuda -arch=sm_80"
TOKENS, HIDDEN, TB, HB = 64, 256, 32, 64
OFF = {"tl.disable_fragment_slice_offsets": True}
NO_RS = {"tl.disable_mma_register_a": True}


def sqrsum_w(w, gemm=True):
    """gemm_sqrsum with `w`-column slices: part (TB, w) += xf[i, jj * w + j] ** 2; without the gemm
    xf takes a flat layout."""
    @T.prim_func
    def main(x: T.Tensor((TOKENS, HIDDEN), "bfloat16"), fn: T.Tensor((24, HIDDEN), "tfloat32"),
             out: T.Tensor((TOKENS, 24), "float32"), sqrsum: T.Tensor((TOKENS,), "float32")):
        with T.Kernel(TOKENS // TB, threads=128) as px:
            out_frag = T.alloc_fragment((TB, 32), "float32")
            part = T.alloc_fragment((TB, w), "float32")
            T.clear(out_frag)
            T.clear(part)
            for pz in T.Pipelined(HIDDEN // HB, num_stages=2):
                x16 = T.alloc_shared((TB, HB), "bfloat16")
                fn_s = T.alloc_shared((32, HB), "tfloat32")
                T.annotate_layout({x16: make_swizzled_layout(x16)})
                T.copy(x[px * TB, pz * HB], x16)
                T.copy(fn[0, pz * HB], fn_s)
                xf16 = T.alloc_fragment((TB, HB), "bfloat16")
                T.copy(x16, xf16)
                xf = T.alloc_fragment((TB, HB), "tfloat32")
                T.copy(xf16, xf)
                for jj in T.serial(HB // w):
                    for i, j in T.Parallel(TB, w):
                        part[i, j] += xf[i, jj * w + j] * xf[i, jj * w + j]
                if gemm:
                    T.gemm(xf, fn_s, out_frag, transpose_B=True)
            sq = T.alloc_fragment(TB, "float32")
            T.reduce_sum(part, sq)
            for i in T.Parallel(TB):
                sqrsum[px * TB + i] = sq[i]
            for i, j in T.Parallel(TB, 32):
                if j < 24:
                    out[px * TB + i, j] = out_frag[i, j]

    return main


def _compile(func, target=SM80, configs=None):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target=target, pass_configs=configs)
    return k, " ".join(str(x.message) for x in w)


def _check(x, fn, out, sq, gemm=True):
    if gemm:
        kernels.gemm_sqrsum_check(x, fn, out, sq)
        return
    xd = x.double()
    assert torch.allclose(sq.double(), (xd * xd).sum(-1), rtol=1e-5, atol=1e-4)
    assert (out == 0).all()  # the cleared accumulator, stored


# ------------------------------------------------------------------ the rule on layouts

def test_mma_a_slices_are_offset_invariant():
    lay = MmaAFragment((32, 256), 2, 2)
    d = slice_driver(lay, OffsetRead(None, None, 0, 64, (0, 0), (0, 4)), (32, 4))
    assert isinstance(d, SliceFragment) and d.nlocal == 2 and d.step == 2 and d.replicated
    for t in range(128):  # rows g, g + 8 of the warp's row block, column t; the same at every jj
        wm, lane = (t // 32) % 2, t % 32
        assert [d.coords(t, s) for s in range(2)] == [(wm * 16 + lane // 4 + 8 * s, lane % 4) for s in range(2)]
        for jj in (0, 5, 63):
            for s in range(2):
                r, c = lay.coords(t, d.base_slot(s) + d.step * jj)
                assert (r, c - 4 * jj) == d.coords(t, s)


def test_moving_owners_are_rejected():
    lay = MmaAFragment((32, 256), 2, 2)
    assert slice_driver(lay, OffsetRead(None, None, 0, 128, (0, 0), (0, 2)), (32, 2)) is None  # t 0,1 then 2,3
    flat = FlatFragment((32, 256), 128, 4)
    assert slice_driver(flat, OffsetRead(None, None, 0, 64, (0, 0), (0, 4)), (32, 4)) is None


# ------------------------------------------------------------------ generated code

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tile_stays_in_registers(arch):
    k, warns = _compile(sqrsum_w(4), f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert "kept in shared memory" not in warns
    pr = ", 32" if arch == "sm_90a" else ""  # sm_90a: fn_s arrives by TMA in 32-column panels (test_ws_mma_sync)
    assert f"tl::gemm_rs<32, 32, 64, 2, 2, true, 64, true, float{pr}>(xf, fn_s, out_frag)" in src
    assert "float xf[32];" in src and "(jj * 2)" in src  # each jj: 2 registers a thread
    assert re.search(r"#pragma unroll\n *for \(int jj = 0; jj < 16; \+\+jj\)", src)


@pytest.mark.parametrize("cfg", [OFF, NO_RS])
def test_switches_put_the_tile_in_shared(cfg):
    k, warns = _compile(sqrsum_w(4), SM80, cfg)
    src = k.get_kernel_source()
    assert "fragment xf is kept in shared memory" in warns
    assert "tl::gemm_ss<" in src and "tl::gemm_rs<" not in src


@pytest.mark.parametrize("gemm", [True, False])
def test_moving_owners_fall_back_to_shared(gemm):
    k, warns = _compile(sqrsum_w(2, gemm) if gemm else sqrsum_w(4, False), SM80)
    assert "fragment xf is kept in shared memory" in warns
    assert "owns in the slice change with the offset" in warns
    src = k.get_kernel_source()
    assert "tl::gemm_rs<" not in src and "tl::store_vec<4>(&xf[" in src  # xf16 flat: vector stores, as before


# ------------------------------------------------------------------ numbers

@pytest.fixture(scope="module")
def host():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    cases = {"regs": (sqrsum_w(4), None), "off": (sqrsum_w(4), OFF), "no_rs": (sqrsum_w(4), NO_RS),
             "moving": (sqrsum_w(2), None), "flat": (sqrsum_w(4, False), None)}
    return host_cuda.HostProgram({n: _compile(f, SM80, c)[0] for n, (f, c) in cases.items()})


@pytest.mark.parametrize("name", ["regs", "off", "no_rs", "moving", "flat"])
def test_matches_float64_on_host(host, name):
    x, fn, out, sq = kernels.gemm_sqrsum_inputs(TOKENS, HIDDEN, 31)
    host.run(name, [x, fn, out, sq])
    _check(x, fn, out, sq, gemm=name != "flat")


@pytest.mark.parametrize("w,gemm", [(4, True), (2, True), (4, False)])
def test_matches_float64_on_cpu(w, gemm):
    k = tilelang.compile(sqrsum_w(w, gemm), target="cpu")
    x, fn, out, sq = kernels.gemm_sqrsum_inputs(TOKENS, HIDDEN, 32)
    k(x, fn, out, sq)
    _check(x, fn, out, sq, gemm)
