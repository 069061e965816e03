"""A persistent warp-specialized kernel's producer loading each tile's Q by TMA into two buffers
(transform/cuda/ws_tile_prefix.py; off: `tl.disable_persistent_prefix_tma`): the examples' flash
attention on sm_90a. NVRTC builds check that the consumers no longer load Q themselves (no
cp.async, and no 256-thread consumer barrier left where each consumer warpgroup stores its own
rows: the cp.async build needs two a tile, Q landed and Q read before the next tile's refill; one
fewer than the cp.async build with the shared epilogue, whose barriers also order the refill) and
that the switch restores their load; on the host emulator, persistent blocks of three and four
tiles (both buffers reused, their barriers' phases flipping) match float64 attention on fresh random
inputs, D64 and D128, causal and not, ragged sequences, also with ws_pingpong's turns."""
import re
import sys
from pathlib import Path

import pytest

import tilelang
from .conftest import run_attention_on_host

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_persistent_prefix_tma": True}
NO_WG = {"tl.disable_ws_wg_epilogue": True}  # the shared epilogue: its 256-thread barriers end a tile


def _build(B, H, S, D, causal, cfg, configs=None):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import flashattn
    return tilelang.compile(flashattn.get_tir(B, H, S, D, causal, *cfg), target=SM90, pass_configs=configs or {})


def _consumer_bar_syncs(sass: str) -> int:
    return len(re.findall(r"BAR\.SYNC\.DEFER_BLOCKING 0x1, 0x100", sass))


def _warpgroup_bar_syncs(sass: str) -> list:
    """The per-warpgroup epilogue's named barriers of two consumer warpgroups (ws_epilogue.wg_chunk):
    ids 4 and 5 of 128 threads, their counts."""
    return [len(re.findall(rf"BAR\.SYNC\.DEFER_BLOCKING 0x{4 + w}, 0x80", sass)) for w in (0, 1)]


@pytest.mark.nvrtc
def test_producer_loads_q_per_tile(monkeypatch):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 132)  # persistent, as on the H200
    k = _build(16, 16, 2048, 64, False, (128, 128, 2, 256))
    src = k.get_kernel_source()
    producer = src[src.index("if ((tid == 256))"):src.index("} else {")]
    consumer = src[src.index("} else {"):]
    # the producer: per tile, wait for the buffer's release, then one TMA box of Q on tl_tpre
    assert re.search(r"if \(tl_tpre_pn\[0\] >= 2\) tl::mbarrier_wait\(&tl_tpre_empty\[\(tl_tpre_pn\[0\] & 1\)\], "
                     r"\(\(tl_tpre_pn\[0\] / 2\) - 1\) & 1\);", producer)
    assert producer.index("tl::tma_load(&tmap_3, &tl_tpre[") < producer.index("for (int k = 0;")
    # the consumers: point Q at the tile's buffer, wait for it, release it after the epilogue
    assert "cp_async" not in consumer
    assert consumer.index("Q_shared = Q_shared_tiles + ((tl_tpre_cn[0] & 1)) * 8192;") \
        < consumer.index("tl::mbarrier_wait(&tl_tpre[") < consumer.index("for (int k = 0;") \
        < consumer.index("tl::tma_store(&tmap_2") < consumer.index("tl::mbarrier_arrive(&tl_tpre_empty[")
    assert "tl::mbarrier_init(&tl_tpre_empty[1], 8);" in src
    sass = k.export_sass()
    off = _build(16, 16, 2048, 64, False, (128, 128, 2, 256), OFF)
    osrc, osass = off.get_kernel_source(), off.export_sass()
    assert "tl_tpre" not in osrc and "cp_async_zfill" in osrc
    assert "LDGSTS" not in sass and "LDGSTS" in osass
    # each warpgroup stores its own rows behind its own barriers (2 a tile), in both builds; the
    # cp.async build's consumers still meet twice a tile: after the Q load (source: the barrier after
    # cp_async_wait) and before the next tile's refill overwrites the Q both warpgroups read (the
    # barrier after the stores); the TMA prefix needs neither
    assert _warpgroup_bar_syncs(sass) == _warpgroup_bar_syncs(osass) == [2, 2]
    assert _consumer_bar_syncs(sass) == 0 and _consumer_bar_syncs(osass) == 2
    assert re.search(r"tl::cp_async_wait<0>\(\);\s*tl::fence_proxy_async\(\); tl::barrier_sync<1, 256>\(\);", osrc)
    assert re.search(r"tl::tma_store_commit\(\); }\s*tl::barrier_sync<1, 256>\(\);", osrc)
    # with the shared epilogue, whose two consumer barriers also order the refill: the one after the Q load is gone
    shared, shared_off = (_build(16, 16, 2048, 64, False, (128, 128, 2, 256), {**c, **NO_WG}).export_sass()
                          for c in ({}, OFF))
    assert _warpgroup_bar_syncs(shared) == [0, 0]
    assert _consumer_bar_syncs(shared) == _consumer_bar_syncs(shared_off) - 1 == 2
    for kk in (k, off):
        info = kk.artifact.compiled.ptxas_info()
        assert info.get("spill_stores", 0) == 0 and info.get("spill_loads", 0) == 0


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,D,causal,cfg,sms,seed,configs", [
    (700, 64, False, (128, 128, 2, 256), 3, 11, None),   # 12 tiles on 3 blocks: 4 each; S ragged
    (700, 64, True, (128, 128, 2, 256), 3, 12, None),
    (330, 64, True, (128, 64, 2, 256), 2, 13, None),     # 6 tiles on 2 blocks: 3 each
    (330, 128, False, (128, 128, 2, 256), 2, 14, None),
    (700, 64, True, (128, 128, 2, 256), 3, 15, {"tl.enable_ws_pingpong": True}),
])
def test_tile_prefix_attention_matches_float64_on_host(host, monkeypatch, S, D, causal, cfg, sms, seed, configs):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: sms)
    B, H = 1, 2
    k = _build(B, H, S, D, causal, cfg, configs)
    assert "tl::mbarrier_wait(&tl_tpre[" in k.get_kernel_source()
    run_attention_on_host(host, k, B, H, S, D, causal, seed)
