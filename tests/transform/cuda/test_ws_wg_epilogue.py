"""Per-warpgroup output stores of warp-specialized attention (ws_epilogue.wg_chunk; off:
`tl.disable_ws_wg_epilogue`): each consumer warpgroup waits for its own last TMA store's read of
its staging rows (the thread that issued it), meets its 128 threads on a named barrier, stages its
64 rows, fences and meets again, and one of its threads stores them. NVRTC builds check the source
(no 256-thread consumer barrier left at the tile's end) and SASS (BAR.SYNC 0x4/0x5 of 128 threads,
no spills); the host emulator, whose TMA stores read their tile only at the issuing thread's
wait_group.read (so a tile overwritten before that wait stores the new bytes), runs persistent
blocks of several tiles (more tiles than blocks, the staging tile reused) against float64
attention on fresh random inputs: D64 and D128, causal and not, ragged lengths, a tile whose
second warpgroup's rows all lie past the end."""
import re
import sys
from pathlib import Path

import pytest

import tilelang
from .conftest import run_attention_on_host

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_ws_wg_epilogue": True}


def _flashattn():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import PASS_CONFIGS, flashattn
    return flashattn, PASS_CONFIGS


def _build(B, H, S, D, causal, cfg, configs=None):
    fa, base = _flashattn()
    return tilelang.compile(fa.get_tir(B, H, S, D, causal, *cfg), target=SM90, pass_configs={**base, **(configs or {})})


def _tile_end(src):
    return src[src.index("tl_cbase[0] = (tl_cbase[0] +"):]


@pytest.mark.nvrtc
@pytest.mark.parametrize("D,causal", [(64, False), (64, True), (128, False)])
def test_each_warpgroup_stores_its_rows(D, causal, monkeypatch):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 132)  # persistent, as on the H200
    k = _build(8, 16, 2048, D, causal, (128, 128, 2, 256))
    end = _tile_end(k.get_kernel_source())
    assert "barrier_sync<1, 256>" not in end and "tid == 0" not in end
    wait, bar = end.index("if (tid % 128 == 0) tl::tma_store_wait<0>();"), end.index("warpgroup_bar_sync<4, 2>(tid >> 7)")
    stsm, fence = end.index("tl::stmatrix_pack<4>"), end.index("tl::fence_proxy_async(); tl::warpgroup_bar_sync<4, 2>")
    store = end.index("if (tid % 128 == 0) { tl::tma_store(&tmap_")
    assert wait < bar < stsm < fence < store
    assert "(tid >> 7) * 4096" in end[store:] and "+ (tid >> 7) * 64" in end[store:]
    assert end.count("tl::tma_store(") == D // 64
    assert "if (tid % 128 == 0) tl::tma_store_wait_all();" in end
    sass = k.export_sass()
    assert "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100" not in sass
    assert sass.count("BAR.SYNC.DEFER_BLOCKING 0x4, 0x80") == 2 and sass.count("BAR.SYNC.DEFER_BLOCKING 0x5, 0x80") == 2
    info = k.artifact.compiled.ptxas_info()
    assert info.get("spill_stores", 0) == 0 and info.get("spill_loads", 0) == 0
    old = _tile_end(_build(8, 16, 2048, D, causal, (128, 128, 2, 256), OFF).get_kernel_source())
    assert old.count("tl::barrier_sync<1, 256>();") == 2 and "warpgroup_bar_sync" not in old


@pytest.mark.nvrtc
def test_one_warpgroup_keeps_the_shared_epilogue():
    src = _build(1, 2, 512, 64, False, (64, 64, 2, 128)).get_kernel_source()
    assert "warpgroup_bar_sync" not in src and "if (tid == 0) tl::tma_store_wait<0>();" in src


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,D,causal,cfg,sms,seed", [
    (200, 64, False, (128, 128, 2, 256), 3, 1),   # 4 tiles on 3 blocks: block 0 runs two
    (200, 64, True, (128, 128, 2, 256), 1, 2),    # one block runs all 4: the staging tile reused 3 times
    (150, 64, False, (128, 128, 2, 256), 1, 3),   # tile 1's second warpgroup: rows 192..255, all past 150
    (330, 128, False, (128, 64, 2, 256), 2, 4),   # 6 tiles on 2 blocks, two 64-column panels a row
    (330, 128, True, (128, 128, 2, 256), 4, 5),
    (400, 64, True, (192, 128, 2, 384), 2, 6),    # three warpgroups
])
def test_wg_epilogue_attention_matches_float64_on_host(host, monkeypatch, S, D, causal, cfg, sms, seed):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: sms)
    B, H = 1, 2
    k = _build(B, H, S, D, causal, cfg)
    W = cfg[3] // 128
    assert f"tl::warpgroup_bar_sync<{2 + W}, {W}>(tid >> 7)" in k.get_kernel_source()
    run_attention_on_host(host, k, B, H, S, D, causal, seed)
    run_attention_on_host(host, _build(B, H, S, D, causal, cfg, OFF), B, H, S, D, causal, seed + 100)
