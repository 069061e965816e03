"""K-major wgmma operands whose 16-bit rows span several 128-byte swizzles (block_K = 128, or
FlashAttention's Q and K at head dim 128) are kept as 64-column panels: every access goes
through tl::panel_offset, TMA loads one 64-column box per panel, and the wgmma descriptor of
each k16 slice points into the panel that holds it. Compile-only; results are checked on the
GPU tier (tests/backend/cuda/test_gemm_paths.py, the FlashAttention example)."""
import re
import sys
import warnings
from pathlib import Path

import tilelang
from tilelang.backend.cuda.pipeline import PerformanceWarning

from .conftest import gemm_nt

ROOT = Path(__file__).resolve().parents[3]


def _gemm_nt():
    """C = A @ B^T with A (256, 512) and B given as (256, 512): both tiles 128 x 128 K-major."""
    return gemm_nt(M=256, N=256, K=512, bM=128, bN=128, bK=128, threads=128, stages=2)


def _compile(func, **configs):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k = tilelang.compile(func, target="cuda -arch=sm_90a", pass_configs=configs)
    return k, [str(w.message) for w in rec if issubclass(w.category, PerformanceWarning)]


def test_block_k_128_runs_on_wgmma_with_panel_tiles():
    k, msgs = _compile(_gemm_nt())
    src = k.get_kernel_source()
    assert not msgs, msgs
    assert "tl::gemm_ss_sm90<128, 128, 128, 1, 1, true, 128, 128, tl::half_t" in src
    loads = re.findall(r"tl::tma_load\(&(tmap_\d), &tl_full\[tl_stage\], (\w+)_stages \+ \(tl_stage\) \* 16384 \+ (\d+)", src)
    assert loads == [("tmap_0", "A_s", "0"), ("tmap_0", "A_s", "8192"), ("tmap_1", "B_s", "0"), ("tmap_1", "B_s", "8192")]
    sass = k.export_sass()
    assert "HGMMA" in sass and " LDL" not in sass and " STL" not in sass


def test_cp_async_path_writes_panels():
    k, msgs = _compile(_gemm_nt(), **{"tl.disable_warp_specialized": True})
    src = k.get_kernel_source()
    assert not [m for m in msgs if "wgmma" in m], msgs
    # the cp.async destination, as a shared-address slot (tl::smem_addr(A_s...) + ... panel offset) or
    # as &A_s[tl::panel_offset...] (tl.disable_shared_address_slots)
    for t in ("A_s", "B_s"):
        assert re.search(rf"&\w*{t}\w*\[tl::panel_(?:xor_)?offset<128>\(", src) or \
            re.search(rf"smem_addr\(\w*{t}\w*\)[^;]*tl::panel_(?:xor_)?offset<128>\(", src), src
    assert "tl::gemm_ss_sm90<128, 128, 128, 1, 1, true, 128, 128," in src


def test_flash_attention_head_dim_128_runs_both_gemms_on_wgmma():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import flash_attention as fa
    finally:
        sys.path.pop(0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k = tilelang.jit(fa.flashattn.__wrapped__, target="cuda -arch=sm_90a")(2, 4, 1024, 128, False, 64, 64, 2, 128)
    msgs = [str(w.message) for w in rec if issubclass(w.category, PerformanceWarning)]
    assert not [m for m in msgs if "mma.sync" in m or "wgmma" in m], msgs
    src = k.get_kernel_source()
    assert "tl::gemm_ss_sm90<64, 64, 128, 1, 1, true, 128, 128, tl::half_t" in src  # Q K^T, both K-major panels
    assert "tl::gemm_rs_sm90<64, 128, 64, 1, false, 128, tl::half_t" in src        # P V
    # a tile per block (128 tiles): the producer loads Q as two 64-column panels by TMA
    assert len(re.findall(r"tl::tma_load\(&tmap_\d+, &tl_pre\[0\], Q_shared \+ (?:0|4096),", src)) == 2
