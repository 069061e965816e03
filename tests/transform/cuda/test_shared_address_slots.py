"""Shared address slots (tl.disable_shared_address_slots): an ldmatrix source of the mma.sync emitter
and a tile copy's cp.async destination are printed as tl::smem_addr(tile) plus 32-bit byte terms,
the copy indexed by its unrolled coordinates. The unrolled rows and tiles are then constants ptxas
folds into LDSM / LDGSTS immediates (the emitter GEMM's k-loop: 168 -> 142 SASS instructions, 224 ->
207 registers under NVRTC 13.0). The kernel is compiled for sm_80 and sm_90a and run on the host
emulator against float64, with the slots and without."""
import re
import warnings

import pytest

import tilelang
from tilelang.testing.kernels import emitter_gemm

nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
if not nvrtc.nvrtc_available():
    pytest.skip("NVRTC from the pip wheels is not installed", allow_module_level=True)

OFF = {"tl.disable_shared_address_slots": True}


def _compile(arch, off=False, M=256, N=256, K=128):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(emitter_gemm(M, N, K), target=f"cuda -arch={arch}", pass_configs=OFF if off else None)


@pytest.mark.nvrtc
def test_source_prints_byte_terms():
    src = _compile("sm_90a").get_kernel_source()
    # ldmatrix: the warp's and tile's rows (multiples of 8) are one byte term, the swizzle of the lane's row another
    assert re.search(r"tl::ldmatrix_frag<4, false>\(&A_local\[\(mi \* 8\)\], \(tl::smem_addr\(A_shared\) \+ "
                     r"static_cast<uint32_t>\(\(.*mi \* 16.*\) \* 32\) \* 2u \+ static_cast<uint32_t>\("
                     r"tl::swizzle_offset<32, sizeof\(tl_half\)>\(", src), src
    # the refill: the unroll step's 32 rows leave the swizzle, whose row is the thread's (tid >> 2)
    assert re.search(r"tl::cp_async_zfill<16>\(\(tl::smem_addr\(A_shared_w\) \+ static_cast<uint32_t>\(\(\((v\w*) \* 32\)\) "
                     r"\* 32\) \* 2u \+ static_cast<uint32_t>\(tl::swizzle_offset<32, sizeof\(tl_half\)>\(\(tid >> 2\), ",
                     src), src
    off = _compile("sm_90a", off=True).get_kernel_source()
    assert "smem_addr(A_shared" not in off and "smem_addr(B_shared" not in off
    assert re.search(r"tl::ldmatrix_frag<4, false>\(&A_local\[\(mi \* 8\)\], &A_shared\[", off)
    assert re.search(r"tl::cp_async_zfill<16>\(&A_shared_w\[tl::swizzle_offset<32, sizeof\(tl_half\)>\(i\w*, j\w*\)\]", off)


def _ldsm_immediates(kernel) -> tuple[int, int]:
    """(LDSM with an immediate offset, all LDSM) in the kernel's SASS."""
    from tilelang.backend.cuda.sass import sass_available

    if not sass_available():
        pytest.skip("cuobjdump / nvdisasm not installed")
    sass = kernel.export_sass()
    # [R], [R+0x..], and the uniform-register forms [R+UR], [R+UR+0x..] (NVRTC 13.0's ptxas prints
    # these for the generic-pointer form); every LDSM of the kernel must be one of them
    every = re.findall(r"LDSM\.16\.M88\.4 R\d+, \[[^\]]*\]", sass)
    ldsm = re.findall(r"LDSM\.16\.M88\.4 R\d+, \[R\d+(?:\+UR\d+)?(\+0x[0-9a-f]+)?\]", sass)
    assert len(ldsm) == len(every), every
    return sum(1 for imm in ldsm if imm), len(ldsm)


@pytest.mark.nvrtc
def test_sass_folds_ldmatrix_offsets():
    # a k-loop of 32 steps, which stays a loop (one k-step's 16 LDSM)
    on, total = _ldsm_immediates(_compile("sm_90a", K=1024))
    off, total_off = _ldsm_immediates(_compile("sm_90a", off=True, K=1024))
    assert total == total_off >= 16
    # 4 tiles of A and of B a k-slice: every tile past the first is its slice's base plus an immediate
    # (NVRTC 13.5 folds the generic-pointer form too, NVRTC 13.0 -- the H200's -- folds none of it)
    assert on >= total * 3 // 4 - 2, (on, off, total)
    if nvrtc.nvrtc_version() < (13, 5):
        assert on > off, (on, off, total)


@pytest.mark.nvrtc
def test_slots_cost_no_instructions_or_registers():
    """The slot form's kernel is no longer and needs no more registers than the generic-pointer
    form, under whichever NVRTC is installed (13.0: 480 vs 536 instructions, 204 vs 222 registers;
    13.5: 472 vs 472, 204 vs 209)."""
    from tilelang.backend.cuda.sass import sass_available

    if not sass_available():
        pytest.skip("cuobjdump / nvdisasm not installed")
    counts = []
    for off in (False, True):
        k = _compile("sm_90a", off=off, K=1024)
        ins = re.findall(r"^\s+/\*[0-9a-f]{4}\*/", k.export_sass(), re.M)
        regs = int(re.search(r"Used (\d+) registers", k.artifact.compiled.log).group(1))
        counts.append((len(ins), regs))
    assert counts[0][0] <= counts[1][0] and counts[0][1] <= counts[1][1], counts


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("off", [False, True])
def test_host_gemm_matches_float64(run_on_host, arch, off):
    import torch

    M, N, K = 256, 256, 128
    g = torch.Generator().manual_seed(1234 + 7 * off + (arch == "sm_90a"))
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, K, generator=g).half()
    c = torch.full((M, N), 7.0)
    run_on_host(_compile(arch, off, M, N, K), [a, b, c])
    ref = a.double() @ b.double().T
    # fp32 accumulation of 128 exact fp16 products
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-4), (c.double() - ref).abs().max()
