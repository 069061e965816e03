"""exp2 of an accumulator loop split between MUFU.EX2 and tl_exp2_poly (transform/cuda/exp2_poly.py,
include/tl/exp2_poly.h; opt-in tl.enable_exp2_poly). The polynomial (scripts/exp2_poly_fit.py)
is checked in numpy and, as compiled by g++ from the shipped header, on the host emulator over a
dense grid of x in [-127, 0] plus -inf and very negative inputs; NVRTC builds check which slots
take it and the MUFU.EX2 count of attention's k-loop; the examples' flash attention (D64 / D128,
causal and not, ragged) matches float64 on the host emulator with the split on."""
import importlib.util
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.transform.cuda.exp2_poly import poly_fraction, poly_slot
from .conftest import consumer_loop_ops, example_attention, run_attention_on_host

ROOT = Path(__file__).resolve().parents[3]
SM90 = "cuda -arch=sm_90a"
KEY = "tl.enable_exp2_poly"


def _fit_script():
    spec = importlib.util.spec_from_file_location("exp2_poly_fit", ROOT / "scripts" / "exp2_poly_fit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _header_coeffs():
    text = (ROOT / "tilelang" / "include" / "tl" / "exp2_poly.h").read_text()
    found = dict(re.findall(r"#define TL_EXP2_POLY_C(\d) (\S+)f\b", text))
    return np.array([float.fromhex(found[str(k)]) for k in (1, 2, 3)], dtype=np.float32)


def test_header_coefficients_are_the_minimax_fit_and_degree_3_is_the_smallest_under_2_to_minus_12():
    fit = _fit_script()
    c = _header_coeffs()
    lawson = fit.fit(3)
    np.testing.assert_allclose(c, lawson, rtol=1e-5)  # the header's exact minimax, approached by the script
    err3 = fit.max_rel_error(c)
    assert err3 <= fit.max_rel_error(lawson)
    assert err3 < 2.0 ** -13 and err3 > 2.0 ** -14, err3  # measured 1.013e-04 (2^-13.27)
    assert fit.max_rel_error(fit.fit(2), points=200_001) > 2.0 ** -12  # degree 2: 2^-9
    x = np.array([-np.inf, -1e30, -200.0, -127.0, 0.0, -1.0, -126.0], dtype=np.float32)
    y = fit.exp2_poly32(x, c)
    assert y[:4].tolist() == [0.0, 0.0, 0.0, 0.0] and not np.signbit(y[:4]).any()
    assert y[4] == 1.0 and y[5] == 0.5 and y[6] == 2.0 ** -126  # integers are exact: p(0) = 1


def test_fraction_values():
    assert poly_fraction(None) is None and poly_fraction(False) is None and poly_fraction(0) is None
    assert poly_fraction(True) == Fraction(1, 4) and poly_fraction(0.5) == Fraction(1, 2)
    assert poly_fraction("3/8") == Fraction(3, 8) and poly_fraction(1) == 1
    with pytest.raises(Exception, match="fraction"):
        poly_fraction(1.5)
    for frac in (Fraction(1, 4), Fraction(3, 8), Fraction(1, 2), Fraction(1)):
        chosen = [s for s in range(64) if poly_slot(s, frac)]
        assert len(chosen) == 64 * frac and all(poly_slot(s ^ 1, frac) for s in chosen)  # whole column pairs
    assert [s for s in range(16) if poly_slot(s, Fraction(1, 4))] == [6, 7, 14, 15]


def _exp2_tile(M, N, blocks):
    """Out = exp2(X) per element, computed in a wgmma accumulator's loop (C = 0 @ 0 first)."""
    @T.prim_func
    def f(A: T.Tensor((M, 16), "float16"), B: T.Tensor((N, 16), "float16"), X: T.Tensor((blocks * M, N), "float32"),
          Out: T.Tensor((blocks * M, N), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            A_s = T.alloc_shared((M, 16), "float16")
            B_s = T.alloc_shared((N, 16), "float16")
            C = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(M, N):
                C[i, j] = T.exp2(C[i, j] + X[bx * M + i, j])
            T.copy(C, Out[bx * M:(bx + 1) * M, :])
    return f


@pytest.mark.nvrtc
@pytest.mark.parametrize("value", [1, 0.5])
def test_exp2_poly_on_host_dense_grid(host, run_on_host, value):
    import torch

    M, N, blocks = 64, 128, 8
    k = tilelang.compile(_exp2_tile(M, N, blocks), target=SM90, pass_configs={"tl.enable_fast_math": True, KEY: value})
    src = k.get_kernel_source()
    assert "tl_exp2_poly(" in src and ("exp2f(" in src) == (value != 1)
    n = blocks * M * N
    g = torch.Generator().manual_seed(7)
    x = torch.linspace(-127.0, 0.0, n - 16, dtype=torch.float64).float()
    x = x[torch.randperm(x.numel(), generator=g)]
    special = torch.tensor([-float("inf"), -1e30, -3e38, -1000.0, -128.0, -127.5, -127.0, -126.99, -126.7,
                            -126.5, -126.0, -1.0, -0.5, 0.0, -1e-7, -125.5])
    x = torch.cat([x, special]).reshape(blocks * M, N)
    a, b = torch.zeros(M, 16).half(), torch.zeros(N, 16).half()
    out = torch.full_like(x, float("nan"))
    run_on_host(k, [a, b, x, out])
    cols = torch.arange(N)
    # wgmma accumulator slot of column j: (j // 8) * 4 + j % 2 (+2 for rows 8..15 of a warp's 16)
    rows = torch.arange(blocks * M)
    slot = (cols // 8 * 4 + cols % 2)[None, :] + 2 * ((rows % 16) // 8)[:, None]
    frac = poly_fraction(value)
    poly = torch.tensor([[poly_slot(int(s), frac) for s in r] for r in slot])
    assert poly.float().mean().item() == pytest.approx(float(frac))
    xd, od = x.double(), out.double()
    ref = torch.exp2(xd)
    normal = xd >= -126
    rel = ((od - ref).abs() / ref)[normal]
    assert rel[poly[normal]].max().item() < 1.02e-4  # 1.013e-4 measured in numpy
    if value != 1:
        assert rel[~poly[normal]].max().item() < 2e-7  # the host's exp2f for the other slots
        assert rel[poly[normal]].max().item() > 5e-5  # and the polynomial really ran where expected
    low = poly & (xd < -126)
    assert (od[low] >= 0).all() and ((od - ref).abs()[low] <= 2.0 ** -126).all()
    assert (od[poly & (xd <= -127)] == 0).all() and not torch.signbit(out[poly & (xd <= -127)]).any()
    fit = _fit_script()
    want = torch.from_numpy(fit.exp2_poly32(x.numpy(), _header_coeffs()))
    assert torch.equal(out[poly].view(torch.int32), want[poly].view(torch.int32))  # the numpy model, bit for bit


@pytest.mark.nvrtc
@pytest.mark.parametrize("D", [64, 128])
def test_attention_moves_a_quarter_of_the_exp2_off_mufu(D):
    off = example_attention(16, 16, 2048, D, False, (128, 128, 2, 256))
    on = example_attention(16, 16, 2048, D, False, (128, 128, 2, 256), {KEY: True})
    src = on.get_kernel_source()
    assert src.count("tl_exp2_poly(") == 1 and "tl_exp2_poly(" not in off.get_kernel_source()
    assert "scores_scale[l_4] = exp2f(" in src  # a row fragment's exp2 stays on MUFU
    s_on, s_off = on.export_sass(), off.export_sass()
    assert consumer_loop_ops(s_off, "MUFU.EX2") == 66  # 64 scores + 2 rescales
    assert consumer_loop_ops(s_on, "MUFU.EX2") == 66 - 16
    assert consumer_loop_ops(s_on, "FFMA") == consumer_loop_ops(s_off, "FFMA") + 3 * 16
    assert "LDL" not in s_on and "STL" not in s_on


@pytest.mark.nvrtc
@pytest.mark.parametrize("S,D,causal,cfg,sms,seed", [
    (200, 64, False, (128, 128, 2, 256), 3, 21),   # ragged last k-step: masked -inf columns
    (200, 64, True, (128, 128, 2, 256), 3, 22),
    (330, 128, False, (128, 64, 2, 256), 3, 23),
    (330, 128, True, (128, 128, 2, 256), 2, 24),
])
@pytest.mark.parametrize("value", [True, 1])
def test_attention_matches_float64_on_host(host, monkeypatch, S, D, causal, cfg, sms, seed, value):
    import tilelang.backend.target as target

    monkeypatch.setattr(target, "num_sms", lambda default=132: sms)
    k = example_attention(1, 2, S, D, causal, cfg, {KEY: value})
    assert "tl_exp2_poly(" in k.get_kernel_source()
    run_attention_on_host(host, k, 1, 2, S, D, causal, seed)


@pytest.mark.nvrtc
@pytest.mark.parametrize("causal,seed", [(False, 31), (True, 32)])
def test_attention_on_mma_sync_matches_float64_on_host(host, causal, seed):
    k = example_attention(1, 2, 200, 64, causal, (64, 64, 1, 128), {KEY: 0.5}, target="cuda -arch=sm_80")
    assert "tl_exp2_poly(" in k.get_kernel_source()
    run_attention_on_host(host, k, 1, 2, 200, 64, causal, seed)
