"""wgmma at every width the instruction has: N any multiple of 8 up to 256 (int8: 8, 16, 24, 32, then multiples
of 16), a tile's columns a warpgroup.

Before, the lowering knew eight widths (8, 16, 32, 64, 96, 128, 192, 256): a gemm of 24, 40, 48, 80, 112 or 176
columns a warpgroup fell back to mma.sync, or (attention's P @ V at block_N 176) to CUDA cores, with a warning.
The widths outside that common set live in tl/wgmma_ops_ext.h, which NVRTC reads only where the kernel defines
TL_WGMMA_EXT (the codegen does when one of its wgmma calls needs it). Each gemm runs on the host emulator (the
sm_90a source) against float64; the SASS holds the wgmma of that width; the `cuda` tests run them on the GPU.
"""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T

from .conftest import example_attention, run_attention_on_host

SM90 = "cuda -arch=sm_90a"


def gemm(M, N, K, bM, bN, bK, dtype, acc, threads):
    @T.prim_func
    def f(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bN, bK), dtype)
            C_l = T.alloc_fragment((bM, bN), acc)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[bx * bN, k * bK], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bM, bx * bN])
    return f


def compile_quiet(prog):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(prog, target=SM90)
    return k, [str(x.message) for x in w]


def inputs(M, N, K, dtype, acc, seed, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    if dtype == "int8":
        a = torch.randint(-8, 8, (M, K), generator=g, dtype=torch.int8)
        b = torch.randint(-8, 8, (N, K), generator=g, dtype=torch.int8)
    else:
        a = torch.randn(M, K, generator=g).to(getattr(torch, dtype))
        b = torch.randn(N, K, generator=g).to(getattr(torch, dtype))
    c = torch.full((M, N), -7, dtype=getattr(torch, acc))
    return a.to(device), b.to(device), c.to(device), a.double() @ b.double().T


def check(c, ref, acc):
    err = (c.cpu().double() - ref).abs().max().item()
    # fp16 accumulators round every partial sum: about an ulp of the result's magnitude (|ref| <= ~40)
    assert err <= (0.1 if acc == "float16" else 1e-3), err


# (block_N, dtype, accumulator, threads, block_M): the width a warpgroup is block_N / (its column split)
CASES = [(24, "float16", "float32", 128, 64), (40, "bfloat16", "float32", 128, 64),
         (48, "float8_e4m3fn", "float32", 128, 64), (80, "int8", "int32", 128, 64),
         (112, "float16", "float16", 128, 64), (176, "float16", "float32", 128, 64),
         (176, "bfloat16", "float32", 256, 128),  # two warpgroups along M, 176 columns each
         (96, "float16", "float32", 256, 64)]  # 64 rows: the warpgroups split N, 48 columns each


@pytest.mark.nvrtc
@pytest.mark.parametrize("bN,dtype,acc,threads,bM", CASES)
def test_gemm_at_the_width_on_host(bN, dtype, acc, threads, bM, run_on_host):
    M, N, K = 128, 2 * bN, 128
    k, msgs = compile_quiet(gemm(M, N, K, bM, bN, 64, dtype, acc, threads))
    src = k.get_kernel_source()
    assert "tl::gemm_ss_sm90<" in src and not [m for m in msgs if "wgmma" in m], msgs
    assert "#define TL_WGMMA_EXT 1" in src
    a, b, c, ref = inputs(M, N, K, dtype, acc, bN + threads)
    run_on_host(k, [a, b, c])
    check(c, ref, acc)


@pytest.mark.nvrtc
def test_common_widths_do_not_read_the_extended_header():
    k, _ = compile_quiet(gemm(128, 256, 128, 64, 128, 64, "float16", "float32", 128))
    src = k.get_kernel_source()
    assert "tl::gemm_ss_sm90<" in src and "TL_WGMMA_EXT" not in src


@pytest.mark.nvrtc
def test_int8_width_the_instruction_lacks_warns_and_takes_mma_sync(run_on_host):
    """s8 wgmma has no n40: mma.sync, and a warning that says why."""
    k, msgs = compile_quiet(gemm(64, 80, 64, 64, 40, 64, "int8", "int32", 128))
    assert "tl::gemm_ss<" in k.get_kernel_source()
    assert [m for m in msgs if "mma.sync, not wgmma" in m and "64x40" in m], msgs
    a, b, c, ref = inputs(64, 80, 64, "int8", "int32", 3)
    run_on_host(k, [a, b, c])
    check(c, ref, "int32")


@pytest.mark.nvrtc
@pytest.mark.parametrize("bN,dtype,acc,op", [(176, "float16", "float32", "HGMMA.64x176x16.F32"),
                                             (24, "int8", "int32", "IGMMA.64x24x32.S8.S8"),
                                             (40, "float8_e4m3fn", "float32", "QGMMA.64x40x32.F32.E4M3.E4M3"),
                                             (112, "float16", "float16", "HGMMA.64x112x16.F16")])
def test_wgmma_of_the_width_in_sass(bN, dtype, acc, op):
    from tilelang.backend.cuda import sass
    if not sass.sass_available():
        pytest.skip("cuobjdump / nvdisasm wheels not installed")
    k, _ = compile_quiet(gemm(128, 2 * bN, 128, 64, bN, 64, dtype, acc, 128))
    text = sass.disassemble(k.artifact.compiled.cubin)
    assert op in text
    assert k.artifact.compiled.ptxas_info()["spill_stores"] == 0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="needs an sm_90 GPU")
@pytest.mark.parametrize("bN,dtype,acc,threads,bM", CASES)
def test_gemm_at_the_width_on_gpu(bN, dtype, acc, threads, bM):
    M, N, K = 256, 4 * bN, 512
    k = tilelang.compile(gemm(M, N, K, bM, bN, 64, dtype, acc, threads), target="cuda")
    a, b, c, ref = inputs(M, N, K, dtype, acc, bN, device="cuda")
    k(a, b, c)
    torch.cuda.synchronize()
    err = (c.cpu().double() - ref).abs().max().item()
    # fp8 wgmma on the hardware accumulates with fewer mantissa bits than float32 (the H100 run: 0.08 against
    # |ref| up to ~60 at K = 512, where the host emulator's exact sums give 1e-5): relative to the output there
    tol = 0.5 if acc == "float16" else 4e-3 * ref.abs().max().item() if dtype.startswith("float8") else 1e-2
    assert err <= tol, (err, tol)


@pytest.mark.nvrtc
@pytest.mark.parametrize("cfg,S,causal", [((128, 176, 2, 256), 352, False), ((192, 112, 2, 384), 384, True)])
def test_attention_at_the_width_on_host(cfg, S, causal, host):
    """examples/flash_attention.py with key tiles of 176 / 112 (two / three consumer warpgroups): both gemms on
    wgmma (Q K^T at n176 / n112, P V from registers), ragged key tiles, against float64."""
    k = example_attention(1, 1, S, 64, causal, cfg)
    src = k.get_kernel_source()
    assert "#define TL_WGMMA_EXT 1" in src and "tl::gemm_ss_sm90<" in src and "tl::gemm_rs_sm90<" in src
    run_attention_on_host(host, k, 1, 1, S, 64, causal, seed=cfg[1] + S)
