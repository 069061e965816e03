"""Two chained gemms of a warp-specialized consumer in flight together (transform/cuda/ws_overlap.py):
the examples' flash attention on sm_90a (`tl.enable_ws_overlap`; off by default). NVRTC builds check where the scores gemm of the next tile
is issued, that the consumers' ring has the three stages the schedule needs, that shared memory is
planned as before and nothing spills, and (SASS under the installed NVRTC) that the held wait for the
output gemm stays after the whole softmax (tl.disable_wgmma_wait_hold: a plain wait); on the host emulator
(persistent blocks of several tiles) the kernels match float64 attention, held or not; marked cuda, the kernels (overlap on and off, causal and
not, a ragged sequence) are checked against float64 attention on fresh random inputs."""
import math
import re
import sys
from pathlib import Path

import pytest
import torch

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from flash_attention import flashattn  # noqa: E402
from .conftest import run_attention_on_host  # noqa: E402

SM90 = "cuda -arch=sm_90a"


def _build(target, B, H, S, D, causal, cfg, off=False, hold=True):
    configs = {"tl.enable_ws_overlap": not off, "tl.disable_wgmma_wait_hold": not hold}
    return tilelang.jit(flashattn.__wrapped__, target=target, pass_configs=configs)(B, H, S, D, causal, *cfg)


@pytest.mark.nvrtc
@pytest.mark.parametrize("causal", [False, True])
def test_next_scores_gemm_is_issued_before_the_output_gemm(causal):
    on = _build(SM90, 2, 4, 1024, 128, causal, (128, 128, 3, 256))
    off = _build(SM90, 2, 4, 1024, 128, causal, (128, 128, 3, 256), off=True)
    src = on.get_kernel_source()
    loop = src[src.index("const int32_t tl_it_n"):src.index("const int32_t tl_it_e")]
    issue_s = loop.index("tl::gemm_ss_sm90<")
    issue_o = loop.index("tl::gemm_rs_sm90<")
    assert issue_s < issue_o < loop.index("tl::warpgroup_wait<1>()") < loop.index("tl::warpgroup_wait<0>()")
    assert re.search(r"gemm_ss_sm90<[^>]*, -1>", loop) and re.search(r"gemm_rs_sm90<[^>]*, -1>", loop)
    # the stage of k + 1 is waited for before its scores gemm; the stage of k released after the wait
    assert loop.index("mbarrier_wait(&tl_full[tl_stage_n]") < issue_s
    assert loop.index("tl::warpgroup_wait<0>()") < loop.index("tl_empty[tl_stage_c]")
    # the softmax's register tiles are fenced before the wait, the P fragment after it
    wait0 = loop[loop.index("tl::warpgroup_wait<1>()"):]
    head, tail = wait0.split("tl::warpgroup_wait<0>();", 1)
    assert "fence_accumulator<64>(acc_s)" in head and "fence_accumulator<64>(acc_s_cast)" in tail.split("\n")[0]
    assert "warpgroup_wait<1>" not in off.get_kernel_source()
    assert "warpgroup_wait_held" not in src  # S + O + P = 160 registers a thread: not held (HOLD_MAX_REGS)
    for k in (on, off):
        assert k.artifact.compiled.ptxas_info().get("spill_stores", 0) == 0
    # the same tiles; the plain loop adds only V's own full / empty barrier arrays (_barrier_groups)
    assert 0 <= off.artifact.csource.smem_bytes - on.artifact.csource.smem_bytes <= 256


def _between_waits(sass: str):
    """(ops between the steady loop's wgmma wait 1 and its wait 0, ops from there to the loop's end)."""
    lines = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]+);", sass)]
    ops = [t.split()[1] if t.startswith("@") else t.split()[0] for t in lines]
    i1 = next(i for i, t in enumerate(lines) if t.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1"))
    i0 = next(i for i in range(i1, len(lines)) if lines[i].startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"))
    end = next(i for i in range(i0, len(lines)) if re.match(r"@P\d BRA", lines[i]))
    return ops[i1 + 1:i0], ops[i0 + 1:end]


@pytest.mark.nvrtc
def test_held_wait_keeps_the_softmax_beside_the_output_gemm():
    """D64 128x128 (the benchmark's config): with the hold every ex2 and row-sum add of the next
    tile sits between the two waits; a plain wait lets ptxas put it right after the row max."""
    from tilelang.backend.cuda.sass import sass_available
    if not sass_available():
        pytest.skip("cuobjdump / nvdisasm not installed")
    held = _build(SM90, 16, 16, 2048, 64, False, (128, 128, 2, 256))
    plain = _build(SM90, 16, 16, 2048, 64, False, (128, 128, 2, 256), hold=False)
    assert "tl::warpgroup_wait_held<0>()" in held.get_kernel_source()
    assert "warpgroup_wait_held" not in plain.get_kernel_source()
    mid, tail = _between_waits(held.export_sass())
    fadds = sum(o.startswith("FADD") for o in mid)
    assert mid.count("MUFU.EX2") >= 64 and fadds >= 60 and "MUFU.EX2" not in tail
    assert tail.count("F2FP.F16.F32.PACK_AB") == 32  # only P's cast waits for the output gemm
    mid, tail = _between_waits(plain.export_sass())
    assert mid.count("MUFU.EX2") < 8
    for k in (held, plain):
        assert k.artifact.compiled.ptxas_info().get("spill_stores", 0) == 0


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,D,causal,cfg,sms,hold,seed", [
    (200, 64, False, (128, 128, 2, 256), 3, True, 1),   # 4 tiles on 3 blocks: block 0 runs two
    (200, 64, True, (128, 128, 2, 256), 3, True, 2),
    (200, 64, False, (128, 128, 2, 256), 3, False, 3),
    (330, 128, False, (128, 64, 3, 256), 2, True, 4),   # 6 tiles, 6 k-steps, the last one ragged
    (330, 128, True, (128, 64, 3, 256), 2, True, 5),
])
def test_overlap_attention_matches_float64_on_host(host, monkeypatch, S, D, causal, cfg, sms, hold, seed):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: sms)
    B, H = 1, 2
    configs = {"tl.enable_ws_overlap": True, "tl.disable_wgmma_wait_hold": not hold}
    k = tilelang.compile(flashattn.get_tir(B, H, S, D, causal, *cfg), target=SM90, pass_configs=configs)
    src = k.get_kernel_source()
    assert "tl::warpgroup_wait<1>()" in src and ("warpgroup_wait_held<0>" in src) == hold
    run_attention_on_host(host, k, B, H, S, D, causal, seed)


@pytest.mark.nvrtc
def test_two_stage_ring_keeps_the_plain_loop():
    """With 2 stages of 64 KB the consumers could not hold k and k + 1 without stalling the producer."""
    src = _build(SM90, 2, 4, 1024, 128, False, (128, 128, 2, 256)).get_kernel_source()
    assert "warpgroup_wait<1>" not in src and "tl_it_n" not in src


@pytest.mark.nvrtc
def test_off_by_default():
    k = tilelang.jit(flashattn.__wrapped__, target=SM90)(2, 4, 1024, 128, False, 128, 128, 3, 256)
    assert "warpgroup_wait<1>" not in k.get_kernel_source()


def _reference(q, k, v, causal):
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))  # [B, H, S, D]
    s = qd @ kd.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ vd).transpose(1, 2)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("off", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S,D,cfg", [(1024, 128, (128, 128, 3, 256)), (1000, 64, (128, 64, 2, 256)),
                                     (384, 64, (64, 64, 2, 128))])
def test_attention_matches_float64_on_gpu(off, causal, S, D, cfg):
    B, H = 2, 3
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    _build("cuda", B, H, S, D, causal, cfg, off)(q, k, v, out)
    ref = _reference(q, k, v, causal)
    torch.testing.assert_close(out.double(), ref, atol=2e-2, rtol=2e-2)
