"""Loads of tfloat32 buffers that hold only tf32 values skip the rounding (transform/cuda/tf32_loads.py).

The kernel is mhc_pre's gemm_sqrsum at a small size: bf16 x staged through a swizzled shared tile,
converted into a tf32 tile that is both read element by element (a sum of squares) and the A of an
mma.sync gemm against a tf32 B tile copied raw (cp.async) from a float32 tensor. The converted tile
is read as it is; the raw-copied one keeps its rounding. Numbers: host-run generated CUDA and the
CPU backend against float64 torch, with the tf32 B operand's error bound."""
import pytest
import torch

import tilelang
import tilelang.language as T

TOKENS, HIDDEN, TB, HB = 64, 256, 32, 64
SM80 = "cuda -arch=sm_80"


def gemm_sqrsum():
    @T.prim_func
    def main(x: T.Tensor((TOKENS, HIDDEN), "bfloat16"), fn: T.Tensor((24, HIDDEN), "tfloat32"),
             out: T.Tensor((TOKENS, 24), "float32"), sqrsum: T.Tensor((TOKENS,), "float32")):
        with T.Kernel(TOKENS // TB, threads=128) as px:
            out_frag = T.alloc_fragment((TB, 32), "float32")
            part = T.alloc_fragment((TB, 4), "float32")
            T.clear(out_frag)
            T.clear(part)
            for pz in T.Pipelined(HIDDEN // HB, num_stages=2):
                x16 = T.alloc_shared((TB, HB), "bfloat16")
                fn_s = T.alloc_shared((32, HB), "tfloat32")
                T.annotate_layout({x16: tilelang.layout.make_swizzled_layout(x16)})
                T.copy(x[px * TB, pz * HB], x16)
                T.copy(fn[0, pz * HB], fn_s)
                xf16 = T.alloc_fragment((TB, HB), "bfloat16")
                T.copy(x16, xf16)
                xf = T.alloc_fragment((TB, HB), "tfloat32")
                T.copy(xf16, xf)
                for jj in T.serial(HB // 4):
                    for i, j in T.Parallel(TB, 4):
                        part[i, j] += xf[i, jj * 4 + j] * xf[i, jj * 4 + j]
                T.gemm(xf, fn_s, out_frag, transpose_B=True)
            sq = T.alloc_fragment(TB, "float32")
            T.reduce_sum(part, sq)
            for i in T.Parallel(TB):
                sqrsum[px * TB + i] = sq[i]
            for i, j in T.Parallel(TB, 32):
                if j < 24:
                    out[px * TB + i, j] = out_frag[i, j]

    return main


def raw_elementwise():
    """A tf32 tile filled by a raw copy (cp.async) from memory, then read element by element."""
    @T.prim_func
    def main(A: T.Tensor((32, 64), "tfloat32"), B: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared((32, 64), "tfloat32")
            T.copy(A, a_s)
            for i, j in T.Parallel(32, 64):
                B[i, j] = a_s[i, j] * 2.0

    return main


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(TOKENS, HIDDEN, generator=g).bfloat16()
    fn = torch.randn(24, HIDDEN, generator=g) * 0.1
    return x, fn


def _check(x, fn, out, sq):
    xd = x.double()
    ref_sq = (xd * xd).sum(-1)
    assert torch.allclose(sq.double(), ref_sq, rtol=1e-5, atol=1e-4), (sq.double() - ref_sq).abs().max()
    ref = xd @ fn.double().T  # x is exact in tf32; fn is rounded to tf32 (relative 2^-11 per product)
    tol = 2.0 ** -10 * (xd.abs() @ fn.double().abs().T) + 1e-5
    assert ((out.double() - ref).abs() <= tol).all(), (out.double() - ref).abs().max()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_converted_tile_read_without_rounding(arch):
    k = tilelang.compile(gemm_sqrsum(), target=f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert "tl::gemm_ss" in src
    assert "xf[" in src and "tl_tf32_to_f32(xf[" not in src  # the sum of squares reads xf's bits as they are
    off = tilelang.compile(gemm_sqrsum(), target=f"cuda -arch={arch}",
                           pass_configs={"tl.disable_tf32_exact_loads": True}).get_kernel_source()
    assert "tl_tf32_to_f32(xf[" in off


def test_raw_copied_tile_keeps_rounding():
    src = tilelang.compile(raw_elementwise(), target=SM80).get_kernel_source()
    assert "cp_async" in src and "tl_tf32_to_f32(a_s_v0[u])" in src  # its register copy too


def test_gemm_sqrsum_matches_float64_on_host(host_cuda_mod):
    k = tilelang.compile(gemm_sqrsum(), target=SM80)
    prog = host_cuda_mod.HostProgram({"g": k})
    x, fn = _inputs(3)
    out = torch.full((TOKENS, 24), 7.0)
    sq = torch.full((TOKENS,), 7.0)
    prog.run("g", [x, fn, out, sq])
    _check(x, fn, out, sq)


def test_gemm_sqrsum_matches_float64_on_cpu():
    k = tilelang.compile(gemm_sqrsum(), target="cpu")
    x, fn = _inputs(4)
    out = torch.full((TOKENS, 24), 7.0)
    sq = torch.full((TOKENS,), 7.0)
    k(x, fn, out, sq)
    _check(x, fn, out, sq)


@pytest.fixture(scope="module")
def host_cuda_mod():
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    return host_cuda


def test_span_swizzle_element_accesses():
    """Element accesses of the swizzled tiles index through tl::swizzle_span_offset (the same
    addresses as the gemm's tl::swizzle_offset: the host run above mixes both on one tile)."""
    src = tilelang.compile(gemm_sqrsum(), target=SM80).get_kernel_source()
    assert "tl::swizzle_span_offset<" in src
    off = tilelang.compile(gemm_sqrsum(), target=SM80,
                           pass_configs={"tl.disable_swizzle_span_offset": True}).get_kernel_source()
    assert "tl::swizzle_span_offset<" not in off and "tl::swizzle_offset<" in off


def test_gemm_sqrsum_without_span_swizzle_matches_float64_on_host(host_cuda_mod):
    k = tilelang.compile(gemm_sqrsum(), target=SM80, pass_configs={"tl.disable_swizzle_span_offset": True,
                                                                   "tl.disable_tf32_exact_loads": True,
                                                                   "tl.disable_mma_split_chains": True})
    x, fn = _inputs(5)
    out = torch.full((TOKENS, 24), 7.0)
    sq = torch.full((TOKENS,), 7.0)
    host_cuda_mod.HostProgram({"g": k}).run("g", [x, fn, out, sq])
    _check(x, fn, out, sq)
