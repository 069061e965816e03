"""transform/cuda/row_block_fission.py and tl::undef_accumulator (gemm_sm90.h): attention's loop
body on 128 rows per warpgroup runs one 64-row block after the other (tl.disable_row_block_fission),
and a clearing wgmma gemm does not keep its accumulator's previous values live
(tl.disable_wgmma_clear_undef). The generated CUDA runs on the host emulator against float64
softmax attention on fresh random inputs, the output poisoned with NaN; ptxas's report on the
D128 kernel shows the register effect."""
import re
import sys
from pathlib import Path

import pytest

import tilelang
from .conftest import run_attention_on_host

SM90 = "cuda -arch=sm_90a"
OFF = {"tl.disable_row_block_fission": True}
BOTH_OFF = {"tl.disable_row_block_fission": True, "tl.disable_wgmma_clear_undef": True}
NO_WS = {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}


def _flashattn():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import flashattn
    return flashattn


def _compile(B, H, S, D, causal, cfg, configs):
    return tilelang.compile(_flashattn().get_tir(B, H, S, D, causal, *cfg), target=SM90, pass_configs=dict(configs))


def _run(host, k, B, H, S, D, causal, seed):
    run_attention_on_host(host, k, B, H, S, D, causal, seed)


def _gemm_calls(src):
    """(kind, row_block or None) of every wgmma gemm call, in source order."""
    out = []
    for kind, args in re.findall(r"tl::gemm_(ss|rs)_sm90<[^>]*>\(([^;]*)\);", src):
        last = args.rsplit(",", 1)[-1].strip()
        out.append((kind, int(last) if last.isdigit() else None))
    return out


@pytest.mark.nvrtc
@pytest.mark.parametrize("causal", [False, True])
def test_attention_runs_row_block_by_row_block_on_host(host, causal):
    """S = Q K^T and O += P V split per 64-row block, block 0's softmax and P V before block 1's
    S; 200 ragged keys (a masked last tile), exact against float64."""
    B, H, S, D = 1, 2, 200, 64
    k = _compile(B, H, S, D, causal, (128, 128, 1, 128), {})
    assert _gemm_calls(k.get_kernel_source()) == [("ss", 0), ("rs", 0), ("ss", 1), ("rs", 1)]
    _run(host, k, B, H, S, D, causal, seed=31 + causal)


@pytest.mark.nvrtc
def test_switched_off_keeps_whole_tile_gemms_and_the_same_numbers(host):
    B, H, S, D = 1, 2, 200, 64
    k = _compile(B, H, S, D, False, (128, 128, 1, 128), BOTH_OFF)
    src = k.get_kernel_source()
    assert _gemm_calls(src) == [("ss", None), ("rs", None)]
    assert "#define TL_WGMMA_CLEAR_UNDEF 0" in src
    _run(host, k, B, H, S, D, False, seed=33)


@pytest.mark.nvrtc
def test_cp_async_attention_on_one_warpgroup_runs_on_host(host):
    """The pipeline without warp specialization: its loop body holds cp.async waits and block
    barriers, which the schedule does not cross; whatever it keeps, the numbers stay exact."""
    B, H, S, D = 1, 2, 200, 64
    k = _compile(B, H, S, D, False, (128, 64, 2, 128), NO_WS)
    _run(host, k, B, H, S, D, False, seed=34)


@pytest.mark.nvrtc
def test_d128_attention_loop_fits_in_registers():
    """The latency case (128 x 128 tiles, D128, one consumer warpgroup): whole-tile S (128
    registers) beside O (128) spilled and serialized the wgmmas; by row blocks nothing spills."""
    from tilelang.backend.cuda import nvrtc

    def report(configs):
        src = _compile(1, 4, 256, 128, False, (128, 128, 1, 128), configs).get_kernel_source()
        c = nvrtc.compile_cuda(src, "sm_90a", ptxas_verbose=True)
        return c.ptxas_info(), "C7512" in c.log  # ptxas: "wgmma.mma_async instructions are serialized"

    on, serial_on = report({})
    off, serial_off = report(BOTH_OFF)
    assert on.get("spill_stores", 0) == 0 and on.get("spill_loads", 0) == 0 and not serial_on, on
    assert off["spill_stores"] > 0 and serial_off, off
