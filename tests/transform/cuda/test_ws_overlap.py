"""Two chained gemms of a warp-specialized consumer in flight together (transform/cuda/ws_overlap.py):
the examples' flash attention on sm_90a (`tl.enable_ws_overlap`; off by default). NVRTC builds check where the scores gemm of the next tile
is issued, that the consumers' ring has the three stages the schedule needs, that shared memory is
planned as before and nothing spills; marked cuda, the kernels (overlap on and off, causal and
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

SM90 = "cuda -arch=sm_90a"


def _build(target, B, H, S, D, causal, cfg, off=False):
    return tilelang.jit(flashattn.__wrapped__, target=target,
                        pass_configs={"tl.enable_ws_overlap": not off})(B, H, S, D, causal, *cfg)


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
    for k in (on, off):
        assert k.artifact.compiled.ptxas_info().get("spill_stores", 0) == 0
    # the same tiles; the plain loop adds only V's own full / empty barrier arrays (_barrier_groups)
    assert 0 <= off.artifact.csource.smem_bytes - on.artifact.csource.smem_bytes <= 256


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
