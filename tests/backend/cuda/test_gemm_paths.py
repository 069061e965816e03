"""GEMM through every CUDA path (TMA + warp specialization, cp.async pipeline on wgmma,
mma.sync, unpipelined) against a float64 reference, including ragged M / N / K tiles."""
import warnings

import pytest
import torch

import tilelang
from tilelang.testing import kernels as tk

cuda = pytest.mark.cuda
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


def make(M, N, K, bM, bN, bK, threads, stages, dtype):
    return tk.gemm(M, N, K, bM, bN, bK, threads, stages, dtype, out_dtype=dtype, relu=True, swizzle=4)


def check_relu_gemm(k, M, N, K, what, dtype=torch.float16):
    """k(a, b) on fresh random fp16/bf16 inputs against relu(a @ b) in float64."""
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = k(a, b)
    ref = torch.relu(a.double() @ b.double())
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, f"{what}: relative error {err}"


PATHS = {
    "tma_ws": {},
    "cp_async_wgmma": {"tl.disable_warp_specialized": True},
    "mma_sync": {"tl.disable_wgmma": True},
    "unpipelined": {"tl.disable_pipeline": True, "tl.disable_warp_specialized": True},
}
CASES = [  # M, N, K, block_M, block_N, block_K, threads, stages
    (512, 512, 512, 128, 128, 64, 128, 3),
    (300, 264, 448, 128, 256, 64, 256, 3),   # ragged M and N tiles (TMA zero-fills, stores guarded)
    (256, 384, 200, 128, 128, 32, 128, 4),   # ragged K tile
    (256, 256, 320, 128, 128, 128, 128, 2),  # 256-byte K-major A rows: 64-column panels on wgmma
    (200, 260, 100, 128, 128, 32, 128, 3),   # 200- and 520-byte rows: 8-byte cp.async, no TMA
]


@cuda
@needs_gpu
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_relu_matches_float64(path, case, dtype):
    M, N, K, *cfg = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make(M, N, K, *cfg, dtype), out_idx=[-1], target="cuda", pass_configs=PATHS[path])
    tdt = getattr(torch, dtype)
    check_relu_gemm(k, M, N, K, f"{path} {case} {dtype}", tdt)


def make_nt(M, N, K, bM, bN, bK, threads, stages, dtype="float16", out_dtype="float16"):
    """C = A @ B^T with B given as (N, K): both operands K-major."""
    return tk.gemm(M, N, K, bM, bN, bK, threads, stages, dtype, out_dtype, transpose_B=True)


@cuda
@needs_gpu
@pytest.mark.parametrize("case", [(512, 512, 512, 128, 256, 128, 256, 3), (300, 256, 384, 128, 128, 128, 128, 2)])
def test_fp8_gemm_matches_float64(case):
    M, N, K, *cfg = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make_nt(M, N, K, *cfg, "float8_e4m3fn", "bfloat16"), out_idx=[-1], target="cuda")
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    c = k(a, b)
    ref = a.double() @ b.double().T
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, f"fp8 {case}: relative error {err}"


@cuda
@needs_gpu
@pytest.mark.parametrize("path", ["tma_ws", "cp_async_wgmma"])
@pytest.mark.parametrize("case", [(256, 256, 512, 128, 128, 128, 128, 2), (200, 136, 320, 64, 64, 256, 128, 2)])
def test_kmajor_panel_operands_match_float64(path, case):
    """K-major A and B tiles with 256- and 512-byte rows (64-column panels, wgmma descriptors per panel)."""
    M, N, K, *cfg = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make_nt(M, N, K, *cfg), out_idx=[-1], target="cuda", pass_configs=PATHS[path])
    assert "gemm_ss_sm90<" in k.get_kernel_source()
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = k(a, b)
    ref = a.double() @ b.double().T
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, f"{path} {case}: relative error {err}"


SK_CASES = [  # M, N, K, block_M, block_N, block_K, threads, stages: shapes whose last wave runs stream-K
    (1024, 1280, 8192, 128, 256, 64, 256, 4),   # 40 tiles on 132 blocks: every tile split along k
    (1000, 1000, 3000, 128, 128, 64, 128, 3),   # ragged M, N and K; 64 tiles in 132 ranges
    (3072, 3072, 1024, 128, 256, 64, 256, 4),   # 288 tiles: 2 whole waves, 24 tiles in 132 ranges
]


@cuda
@needs_gpu
@pytest.mark.parametrize("case", SK_CASES)
def test_stream_k_gemm_matches_float64_call_after_call(case):
    """Partials of the last wave are added once each: three calls on fresh inputs (a flag left
    raised by one launch would add a stale partial into the next)."""
    M, N, K, *cfg = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make(M, N, K, *cfg, "float16"), out_idx=[-1], target="cuda")
    assert "tl_sk_ws" in k.get_kernel_source()
    for _ in range(3):
        check_relu_gemm(k, M, N, K, str(case))


@cuda
@needs_gpu
@pytest.mark.parametrize("conf", [{}, {"tl.disable_stream_k": True},
                                  {"tl.disable_stream_k": True, "tl.disable_k_serpentine": True}],
                         ids=["serpentine-stream-k", "serpentine", "forward"])
def test_persistent_gemm_over_several_waves_matches_float64(conf):
    """204 tiles of 128x128 on 132 blocks, K = 1000 (a ragged last k-slice): blocks walk k
    backwards on their second tile, or (stream-K) on their second unit. (Rows of 16-byte
    multiples: TMA and warp specialization.)"""
    M, N, K = 1500, 2120, 1000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make(M, N, K, 128, 128, 64, 128, 3, "float16"), out_idx=[-1], target="cuda",
                             pass_configs=conf)
    assert ("tl_pdir" in k.get_kernel_source()) == ("tl.disable_k_serpentine" not in conf)
    check_relu_gemm(k, M, N, K, str(conf))


@cuda
@needs_gpu
@pytest.mark.parametrize("K", [64, 192, 1000])
def test_deferred_epilogue_gemm_matches_float64(K):
    """128x256 tiles on 2100 x 2120 (ragged edges, 153 tiles: blocks run one or two): each
    tile's output is stored during the next tile's k-loop, or after the block's last one; with
    1 and 3 k-iterations both chunks fall into the first iterations."""
    M, N = 2100, 2120  # rows of 16-byte multiples: TMA
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make(M, N, K, 128, 256, 64, 256, 4, "float16"), out_idx=[-1], target="cuda",
                             pass_configs={"tl.disable_stream_k": True})
    assert "tl_out_next" in k.get_kernel_source()
    for _ in range(2):
        check_relu_gemm(k, M, N, K, f"K={K}")


@cuda
@needs_gpu
@pytest.mark.parametrize("conf", [{}, {"tl.disable_k_serpentine": True, "tl.disable_staged_epilogue": True}],
                         ids=["reversed-waves-staged", "forward-registers"])
def test_mma_gemm_over_several_waves_matches_float64(conf):
    """The cp.async mma.sync GEMM (one 128x256 block per SM: 120 KB of stages) on 17 x 9 = 153
    blocks, K = 1000 (ragged): blocks of the second wave load their k-slices last first, and
    the output goes through the swizzled staging tile (ragged rows and columns guarded)."""
    M, N, K = 2100, 2200, 1000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make(M, N, K, 128, 256, 32, 256, 5, "float16"), out_idx=[-1], target="cuda",
                             pass_configs={"tl.disable_wgmma": True, **conf})
    src = k.get_kernel_source()
    assert ("tl_krev" in src) == ("C_stage" in src) == (not conf)
    check_relu_gemm(k, M, N, K, str(conf))


@cuda
@needs_gpu
def test_stream_k_with_a_symbolic_m_decides_per_call():
    """With M symbolic the tile count is known per call: the kernel splits the last wave where
    it is short (M = 1024: 40 tiles; M = 300: 15) and keeps whole tiles where the waves come out
    whole (M = 16896: 660 tiles, five waves of 132)."""
    m = tilelang.language.dynamic("m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(make(m, 1280, 2048, 128, 256, 64, 256, 4, "float16"), out_idx=[-1], target="cuda")
    assert "tl_sk_ranges" in k.get_kernel_source()
    for M in (1024, 16896, 300):
        check_relu_gemm(k, M, 1280, 2048, f"M={M}")


@cuda
@needs_gpu
@pytest.mark.parametrize("case", [(512, 512, 512, 128, 128, 64, 128, 3), (300, 264, 448, 128, 256, 64, 256, 4),
                                  (1024, 1280, 4096, 128, 256, 64, 256, 4)])  # 40 tiles: stream-K, int32 partials
def test_int8_gemm_is_exact(case):
    """int8 x int8 -> int32 on the k32 wgmma (both operands K-major): every entry exact."""
    M, N, K, *cfg = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(tk.gemm(M, N, K, *cfg, "int8", out_dtype="int32", acc_dtype="int32", transpose_B=True),
                             out_idx=[-1], target="cuda")
    assert "int8_t, 1, int32_t>" in k.get_kernel_source()
    for _ in range(2):
        a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
        c = k(a, b)
        ref = (a.cpu().long() @ b.cpu().long().T).int()
        assert torch.equal(c.cpu(), ref), f"{case}: {(c.cpu() != ref).sum().item()} entries differ"


@cuda
@needs_gpu
@pytest.mark.parametrize("case", [(512, 512, 256, 128, 128, 64, 128, 3), (300, 264, 192, 128, 256, 64, 256, 4)])
def test_fp16_accumulator_gemm_matches_float64(case):
    """fp16 x fp16 accumulated in fp16 (.f16 wgmma) against float64, to fp16-accumulation accuracy."""
    M, N, K, *cfg = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = tilelang.compile(tk.gemm(M, N, K, *cfg, "float16", out_dtype="float16", acc_dtype="float16"),
                             out_idx=[-1], target="cuda")
    assert "tl::half_t, 1, tl::half_t>" in k.get_kernel_source()
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = k(a, b)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 2e-2, f"{case}: relative error {err}"
