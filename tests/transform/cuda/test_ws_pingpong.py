"""Consumer warpgroups taking turns at the tensor cores (transform/cuda/ws_pingpong.py,
`tl.enable_ws_pingpong`; unset, the rule of ws_pingpong.pingpong_plan): the examples' flash attention on sm_90a. NVRTC builds check
where the turns are waited for and passed (source and SASS: BAR.SYNC / BAR.ARV on barriers 2 and 3),
that the output gemm's wait moved past the next scores gemm, that nothing spills, and that one
consumer warpgroup, the chained-gemm overlap or a loop exchanging data through shared memory get no
turns; on the host emulator (persistent blocks of several tiles, so the turn left over at a tile's end
must carry into the next one) the kernels match float64 attention on fresh random inputs, D64 and D128,
causal and not, ragged sequences, two and three consumer warpgroups."""
import re
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from .conftest import run_attention_on_host

SM90 = "cuda -arch=sm_90a"
ON = {"tl.enable_ws_pingpong": True}


def _flashattn():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import flashattn
    return flashattn


def _build(B, H, S, D, causal, cfg, configs=ON):
    return tilelang.compile(_flashattn().get_tir(B, H, S, D, causal, *cfg), target=SM90, pass_configs=configs)


@pytest.mark.nvrtc
@pytest.mark.parametrize("D,cfg", [(64, (128, 128, 2, 256)), (128, (128, 64, 2, 256))])
def test_turns_surround_the_gemm_issues(D, cfg, monkeypatch):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 132)  # persistent, as on the H200
    k = _build(8, 16, 2048, D, False, cfg)
    src = k.get_kernel_source()
    loop = src[src.rindex("for (int k = 0;"):src.index("tl_cbase[0] = (tl_cbase[0] +")]
    ss, rs = loop.index("tl::gemm_ss_sm90<"), loop.index("tl::gemm_rs_sm90<")
    # the scores gemm issued, the turn passed on, then the wait that also completes P @ V of k - 1
    assert re.search(r"gemm_ss_sm90<[^>]*, -1>", loop) and re.search(r"gemm_rs_sm90<[^>]*, -1>", loop)
    assert ss < loop.index("if ((k > 0)) { tl::warpgroup_turn_pass<2, 2>(tid >> 7); }") \
        < loop.index("tl::warpgroup_wait<0>();") < loop.index("tl_empty1[(tl_it + 3) % 4]")
    assert loop.index("tl::warpgroup_turn_wait<2, 2>(tid >> 7);") < rs
    assert loop[rs:].split("\n")[1].strip() == "}"  # P @ V ends the iteration, in flight into the next
    after = src[src.index("tl_cbase[0] = (tl_cbase[0] +") - 400:]
    assert re.search(r"tl::warpgroup_turn_pass<2, 2>\(tid >> 7\);\s+tl::warpgroup_wait<0>\(\);", after)
    # warpgroup 1 passes the first turn once, warpgroup 0 takes the last one once
    assert src.count("if ((tid >> 7) == 1) { tl::warpgroup_turn_pass<2, 2>(tid >> 7); }") == 1
    assert src.count("if ((tid >> 7) == 0) { tl::warpgroup_turn_wait<2, 2>(tid >> 7); }") == 1
    info = k.artifact.compiled.ptxas_info()
    assert info.get("spill_stores", 0) == 0 and info.get("spill_loads", 0) == 0
    assert "C751" not in (k.artifact.compiled.log or "")  # no wgmma serialized, no wait injected
    sass = k.export_sass()
    for text in ("BAR.ARV 0x2, 0x100", "BAR.ARV 0x3, 0x100", "BAR.SYNC.DEFER_BLOCKING 0x2, 0x100",
                 "BAR.SYNC.DEFER_BLOCKING 0x3, 0x100"):
        assert text in sass
    # in the loop: the last scores HGMMA (64 x N x 16 with gsb0), a turn passed, then its wait
    lines = [ln for ln in sass.splitlines() if "HGMMA" in ln or "BAR.ARV" in ln or "WARPGROUP.DEPBAR" in ln]
    first = next(i for i, ln in enumerate(lines) if "HGMMA" in ln and "gsb0" in ln)
    assert "BAR.ARV" in lines[first + 1] and "WARPGROUP.DEPBAR" in lines[first + 3]


@pytest.mark.nvrtc
def test_no_turns_without_two_warpgroups_or_with_the_overlap():
    cfg = (128, 128, 2, 256)
    assert "warpgroup_turn" not in _build(2, 4, 1024, 64, False, cfg, {}).get_kernel_source()
    assert "warpgroup_turn" not in _build(2, 4, 1024, 64, False, (64, 64, 2, 128)).get_kernel_source()
    both = _build(2, 4, 1024, 128, False, (128, 128, 3, 256), {**ON, "tl.enable_ws_overlap": True})
    src = both.get_kernel_source()
    assert "warpgroup_turn" not in src and "warpgroup_wait<1>" in src


def _shared_p(S=512, D=64, bM=128, bN=64):
    """Attention-like loop whose P goes through shared memory (an exchange among all consumers)."""

    @T.prim_func
    def fa(Q: T.Tensor((S, D), "float16"), K: T.Tensor((S, D), "float16"), V: T.Tensor((S, D), "float16"),
           O: T.Tensor((S, D), "float16")):
        with T.Kernel(T.ceildiv(S, bM), threads=256) as bx:
            Q_s = T.alloc_shared((bM, D), "float16")
            K_s = T.alloc_shared((bN, D), "float16")
            V_s = T.alloc_shared((bN, D), "float16")
            P_s = T.alloc_shared((bM, bN), "float16")
            s = T.alloc_fragment((bM, bN), "float")
            o = T.alloc_fragment((bM, D), "float")
            T.copy(Q[bx * bM, 0], Q_s)
            T.clear(o)
            for k in T.Pipelined(T.ceildiv(S, bN), num_stages=2):
                T.copy(K[k * bN, 0], K_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                T.copy(s, P_s)
                T.copy(V[k * bN, 0], V_s)
                T.gemm(P_s, V_s, o)
            T.copy(o, O[bx * bM, 0])

    return fa


@pytest.mark.nvrtc
def test_loop_through_shared_memory_gets_no_turns():
    k = tilelang.compile(_shared_p(), target=SM90, pass_configs=ON)
    src = k.get_kernel_source()
    assert "tl_full1" in src and "warpgroup_turn" not in src  # warp-specialized, without turns


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,D,causal,cfg,sms,seed", [
    (200, 64, False, (128, 128, 2, 256), 3, 1),   # 4 tiles on 3 blocks: block 0 runs two
    (200, 64, True, (128, 128, 2, 256), 3, 2),
    (330, 128, False, (128, 64, 2, 256), 3, 3),   # 6 tiles, 6 k-steps, the last one ragged
    (330, 128, True, (128, 128, 2, 256), 2, 4),
    (400, 64, True, (192, 128, 2, 384), 3, 5),    # three warpgroups: turns 0 -> 1 -> 2 -> 0
])
def test_pingpong_attention_matches_float64_on_host(host, monkeypatch, S, D, causal, cfg, sms, seed):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: sms)
    B, H = 1, 2
    k = _build(B, H, S, D, causal, cfg)
    W = cfg[3] // 128
    assert f"tl::warpgroup_turn_wait<2, {W}>" in k.get_kernel_source()
    run_attention_on_host(host, k, B, H, S, D, causal, seed)


@pytest.mark.nvrtc
def test_causal_three_warpgroups_keep_their_wgmma_pipeline(monkeypatch):
    """A causal loop's trip count is not constant: the wait after the k-loop is unconditional (only
    the last turn pass and stage release test it). Behind `if (loop_range > 0)` ptxas saw a path to
    the epilogue with P @ V in flight and serialized every wgmma at 192x64 (C7514; 195 TFLOP/s on the
    H200 at D64, against 334 at 128x128)."""
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 132)
    k = _build(16, 16, 2048, 64, True, (192, 64, 2, 384))
    src = k.get_kernel_source()
    tail = src[src.rindex("tl::gemm_rs_sm90<"):]
    assert tail.index("tl::warpgroup_turn_pass<2, 3>") < tail.index("tl::warpgroup_wait<0>();") \
        < tail.rindex("if ((loop_range > 0)) {") < tail.index("tl_empty1[")
    assert "C7514" not in (k.artifact.compiled.log or "")


@pytest.mark.nvrtc
@pytest.mark.parametrize("D,cfg,configs,turns", [
    (128, (128, 128, 2, 256), None, True),   # unset: on where the output tile has >= 128 columns
    (128, (128, 128, 2, 256), {"tl.enable_ws_pingpong": "auto"}, True),
    (64, (128, 128, 2, 256), None, False),   # D64 with two warpgroups: measured no faster, left as it was
    (64, (192, 128, 2, 384), None, True),    # three warpgroups take turns at any width
    (64, (192, 128, 2, 384), {"tl.enable_ws_pingpong": False}, False),
    (128, (128, 128, 2, 256), {"tl.enable_ws_pingpong": False}, False),
    (64, (128, 128, 2, 256), ON, True),
])
def test_default_rule_by_output_columns(D, cfg, configs, turns, monkeypatch):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: 132)
    src = _build(8, 16, 2048, D, False, cfg, configs).get_kernel_source()
    W = cfg[3] // 128
    assert (f"tl::warpgroup_turn_wait<2, {W}>(tid >> 7);" in src) == turns
    assert (f"tl::warpgroup_turn_pass<2, {W}>(tid >> 7);" in src) == turns
