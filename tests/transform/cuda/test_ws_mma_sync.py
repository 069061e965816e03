"""A T.Pipelined loop whose gemm takes mma.sync on sm_90a (tf32: there is no tf32 wgmma here) is
warp-specialized like a wgmma loop (warp_specialize.py, gemm_paths.mma_ws_ok; off with
`tl.disable_ws_mma_sync`): a producer thread streams the tiles by TMA, tf32 rows longer than 128
bytes as 32-column 128B-swizzled panels, and the consumers' tl::gemm_rs / tl::gemm_ss read those
panels (PRA / PRB). mhc_pre's gemm_sqrsum (bf16 x converted to a tf32 register A; fn a tf32 B) and
a plain tf32 GEMM over staged tiles. Numbers: the generated CUDA run on the host emulator (TMA,
mbarriers, setmaxnreg) against float64 on fresh random inputs, outputs poisoned."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.testing import kernels

pytestmark = pytest.mark.nvrtc

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_ws_mma_sync": True}


def _compile(func, configs=None):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target=SM90, pass_configs=configs)
    return k, " ".join(str(w.message) for w in got)


def tf32_gemm(M, N, K, bk, tb=True, stages=2):
    """C = A @ B.T (or A @ B) over tf32 tiles that the pipelined loop stages whole."""
    b_shape, b_tile = ((N, K), (N, bk)) if tb else ((K, N), (bk, N))

    @T.prim_func
    def main(A: T.Tensor((M, K), "tfloat32"), B: T.Tensor(b_shape, "tfloat32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared((M, bk), "tfloat32")
            b_s = T.alloc_shared(b_tile, "tfloat32")
            c = T.alloc_fragment((M, N), "float32")
            T.clear(c)
            for ko in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[0, ko * bk], a_s)
                T.copy(B[0, ko * bk] if tb else B[ko * bk, 0], b_s)
                T.gemm(a_s, b_s, c, transpose_B=tb)
            T.copy(c, C)

    return main


def _tf32_check(a, b, c):
    """Each product rounds its inputs to tf32 (the mma reads their top 19 bits): relative 2^-10."""
    ref = a.double() @ b.double()
    bound = a.double().abs() @ b.double().abs()
    assert ((c.double() - ref).abs() <= 2.0 ** -9 * bound + 1e-6).all(), (c.double() - ref).abs().max()


# ------------------------------------------------------------------ generated code

def test_gemm_sqrsum_is_warp_specialized():
    k, warns = _compile(kernels.gemm_sqrsum(64, 512, hb=256))
    src = k.get_kernel_source()
    assert "no warp specialization" not in warns
    assert "cp_async" not in src and "tl::setmaxnreg_dec<24>();" in src
    # fn (24 x 256 tf32 a stage): eight 32-column panels; x (bf16): four 64-column panels
    assert src.count("tl::tma_load(&tmap_1,") == 8 and src.count("tl::tma_load(&tmap_0,") == 4
    assert "fn_s_stages + (tl_stage) * 8192 + 7168, ((pz * 256) + 224), 0);" in src
    assert "tl::gemm_rs<32, 32, 256, 2, 2, true, 256, true, float, 32>(xf, fn_s, out_frag);" in src
    assert "x16[tl::panel_xor_offset<32>(" in src
    # x's stage goes back to the producer once it is in registers, before the sum of squares and the gemm
    assert src.index("tl::mbarrier_arrive(&tl_empty[tl_stage])") < src.index("tl::mbarrier_wait(&tl_full1[")


def test_switch_keeps_the_cp_async_pipeline():
    k, warns = _compile(kernels.gemm_sqrsum(64, 512, hb=256), OFF)
    src = k.get_kernel_source()
    assert "tl::tma_load" not in src and "tl::cp_async_zfill<16>" in src
    assert "tl.disable_ws_mma_sync" in warns


def test_tf32_gemm_reads_panels_with_ldmatrix():
    from tilelang.backend.cuda import sass

    k, warns = _compile(tf32_gemm(64, 32, 256, 64))
    src = k.get_kernel_source()
    assert "no warp specialization" not in warns
    assert "tl::gemm_ss<64, 32, 64, 2, 2, false, true, 64, 64, true, true, float, 64, 32>(a_s, b_s, c);" in src
    if sass.sass_available():
        text = sass.disassemble(k.artifact.compiled.cubin)
        assert "UTMALDG" in text and "HMMA.1688.F32.TF32" in text and "LDSM" in text and "LDGSTS" not in text


def test_kxn_b_keeps_cp_async():
    """An N-contiguous tf32 B is read with 32-bit shared loads in the plain swizzle, not from panels."""
    k, warns = _compile(tf32_gemm(64, 32, 128, 32, tb=False))
    assert "tl::tma_load" not in k.get_kernel_source()
    assert "no warp specialization (TMA pipeline): T.gemm a_s x b_s" in warns


# ------------------------------------------------------------------ numbers

@pytest.mark.parametrize("hb,configs", [(256, None), (64, None), (256, OFF)])
def test_gemm_sqrsum_matches_float64_on_host(run_on_host, hb, configs):
    k, _ = _compile(kernels.gemm_sqrsum(96, 1024, hb=hb), configs)
    x, fn, out, sq = kernels.gemm_sqrsum_inputs(96, 1024, 40 + hb)
    run_on_host(k, [x, fn, out, sq])
    kernels.gemm_sqrsum_check(x, fn, out, sq)


@pytest.mark.parametrize("bk", [32, 64, 128])  # one swizzled 128-byte box; 2 and 4 panels
def test_tf32_gemm_matches_float64_on_host(run_on_host, bk):
    M, N, K = 64, 32, 512
    k, warns = _compile(tf32_gemm(M, N, K, bk))
    assert "tl::tma_load" in k.get_kernel_source()
    g = torch.Generator().manual_seed(bk)
    a, b = torch.randn(M, K, generator=g), torch.randn(N, K, generator=g)
    c = torch.full((M, N), float("nan"))
    run_on_host(k, [a, b, c])
    _tf32_check(a, b.T, c)
