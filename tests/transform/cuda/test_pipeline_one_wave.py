"""A later copy (attention's V, after the scores gemm) joins the cp.async stages past the
occupancy rule when the grid is one wave (software_pipeline._later_producers, one_wave): with
at most one block per SM in the whole grid, how many blocks an SM could hold does not matter.
Flash decoding's split kernel (64 blocks, 113 KB before V's second stage) loaded V synchronously
every iteration.

Checks: with a one-wave grid V is staged (Vs_stages) and with many blocks it stays
synchronous, saying why; the one-wave kernel runs on the host emulator (wgmma, cp.async) and
matches float64."""
import warnings

import pytest
import torch

import tilelang
from tilelang.testing.kernels import attention

SM90 = "cuda -arch=sm_90a"
NO_WS = {"tl.disable_warp_specialized": True}


def _build(B, H, S):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k = tilelang.compile(attention(B, H, S, 128, 64, 128, 2), target=SM90, pass_configs=NO_WS)
    return k, [str(w.message) for w in rec]


@pytest.mark.nvrtc
def test_many_blocks_keep_v_synchronous(host):
    k, msgs = _build(8, 16, 1024)  # 2048 blocks
    assert "Vs_stages" not in k.get_kernel_source()
    assert any("T.copy V -> Vs stays a synchronous copy" in m for m in msgs), msgs


@pytest.mark.nvrtc
def test_one_wave_stages_v_and_matches_float64(run_on_host):
    B, H, S, D = 1, 2, 256, 128  # 8 blocks
    k, msgs = _build(B, H, S)
    assert "Vs_stages" in k.get_kernel_source(), msgs
    g = torch.Generator().manual_seed(41)
    q, kk, v = [torch.randn(B, S, H, D, generator=g).half() for _ in range(3)]
    o = torch.full_like(q, float("nan"))
    run_on_host(k, [q, kk, v, o])
    qd, kd, vd = (x.double().transpose(1, 2) for x in (q, kk, v))
    ref = (torch.softmax(qd @ kd.transpose(-1, -2) / D ** 0.5, dim=-1) @ vd).transpose(1, 2)
    assert (o.double() - ref).abs().max().item() <= 1e-2
