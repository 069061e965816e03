"""Loads of tfloat32 buffers that hold only tf32 values skip the rounding (transform/cuda/tf32_loads.py).

The kernel is mhc_pre's gemm_sqrsum at a small size: bf16 x staged through a swizzled shared tile,
converted into a tf32 tile that is both read element by element (a sum of squares) and the A of an
mma.sync gemm against a tf32 B tile copied raw (cp.async) from a float32 tensor. The converted tile
is read as it is; the raw-copied one keeps its rounding. Numbers: host-run generated CUDA and the
CPU backend against float64 torch, with the tf32 B operand's error bound."""
import pytest

import tilelang
import tilelang.language as T
from tilelang.testing import kernels

TOKENS, HIDDEN, TB, HB = 64, 256, 32, 64
SM80 = "cuda -arch=sm_80"


def gemm_sqrsum():
    return kernels.gemm_sqrsum(TOKENS, HIDDEN, TB, HB)


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
    return kernels.gemm_sqrsum_inputs(TOKENS, HIDDEN, seed)


_check = kernels.gemm_sqrsum_check


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_converted_tile_read_without_rounding(arch):
    k = tilelang.compile(gemm_sqrsum(), target=f"cuda -arch={arch}")
    src = k.get_kernel_source()
    assert "tl::gemm_rs" in src  # xf stays in registers (offset_slices.py), the gemm's register A
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
    x, fn, out, sq = _inputs(3)
    prog.run("g", [x, fn, out, sq])
    _check(x, fn, out, sq)


def test_gemm_sqrsum_matches_float64_on_cpu():
    k = tilelang.compile(gemm_sqrsum(), target="cpu")
    x, fn, out, sq = _inputs(4)
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
    x, fn, out, sq = _inputs(5)
    host_cuda_mod.HostProgram({"g": k}).run("g", [x, fn, out, sq])
    _check(x, fn, out, sq)
