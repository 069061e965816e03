"""A cp.async pipeline's stage waits and refills share barriers (transform/cuda/pipeline_barriers.py;
off with pass_config `tl.disable_pipeline_barrier_merge`).

The kernel is mhc_pre's gemm_sqrsum at a small size on sm_90a (two reader groups: the bf16 x tile
and the tf32 fn tile, each waited for before its first reader and refilled after its last). The
pass takes it from 5 barriers an iteration to 3, the fn wait counting one group fewer. Numbers:
the generated CUDA run on the host (cp.async bytes land at the wait of their group, so a wrong
count reads a stale stage) against float64 torch, with and without the pass; unit tests of the
two rewrites on hand-written statement lists."""
import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.testing import kernels
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.transform.cuda.pipeline_barriers import hoist_waits, sink_refills
from tilelang.transform.cuda.raw import Raw

TOKENS, HIDDEN, TB, HB = 64, 512, 32, 64
SM90 = "cuda -arch=sm_90a"
# xf through shared memory (the three reader groups this file was written for; with xf in registers,
# offset_slices.py, the x tile is the only one: test_offset_slices.py covers that kernel); the cp.async
# pipeline, not the warp-specialized TMA one sm_90a gives this tf32 loop (test_ws_mma_sync.py)
DEMOTED = {"tl.disable_fragment_slice_offsets": True}
BASE = {**DEMOTED, "tl.disable_ws_mma_sync": True}
OFF = {**BASE, "tl.disable_pipeline_barrier_merge": True}


def gemm_sqrsum():
    return kernels.gemm_sqrsum(TOKENS, HIDDEN, TB, HB)


def _loop_body(src: str) -> str:
    start = src.index("for (int pz = 0;")
    return src[start:src.index("tl::cp_async_wait<0>(); __syncthreads();", start)]


def test_five_barriers_an_iteration_become_three():
    on = _loop_body(tilelang.compile(gemm_sqrsum(), target=SM90, pass_configs=BASE).get_kernel_source())
    off = _loop_body(tilelang.compile(gemm_sqrsum(), target=SM90, pass_configs=OFF).get_kernel_source())
    assert off.count("__syncthreads();") == 5 and on.count("__syncthreads();") == 3
    assert re.findall(r"cp_async_wait<(\d)>", off) == ["3", "3"]
    assert re.findall(r"cp_async_wait<(\d)>", on) == ["3", "2"]
    # the x refill now follows the fn wait, and the sum of squares follows the x refill
    w2 = on.index("cp_async_wait<2>")
    assert w2 < on.index("x16_w = ") < on.index("part[")


def test_refill_sink_switch_keeps_the_hoist_only():
    cfg = {**BASE, "tl.disable_pipeline_refill_sink": True}
    body = _loop_body(tilelang.compile(gemm_sqrsum(), target=SM90, pass_configs=cfg).get_kernel_source())
    assert body.count("__syncthreads();") == 4
    assert re.findall(r"cp_async_wait<(\d)>", body) == ["3", "3"]
    # the x refill right after its reader's barrier; the fn wait hoisted above the sum of squares
    hoisted = body.rindex("cp_async_wait<3>(); __syncthreads();")
    assert body.index("x16_w = ") < body.index("&xf[") < hoisted < body.index("part[")


def _inputs(seed):
    return kernels.gemm_sqrsum_inputs(TOKENS, HIDDEN, seed)


_check = kernels.gemm_sqrsum_check


@pytest.mark.parametrize("configs,seed", [(None, 30), (BASE, 31), (OFF, 32),
                                          ({**BASE, "tl.disable_pipeline_refill_sink": True}, 33),
                                          (DEMOTED, 34)])  # (warp-specialized, xf in shared: tl::gemm_ss PRB)
def test_gemm_sqrsum_matches_float64_on_host(configs, seed):
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")
    k = tilelang.compile(gemm_sqrsum(), target=SM90, pass_configs=configs)
    x, fn, out, sq = _inputs(seed)
    host_cuda.HostProgram({"g": k}).run("g", [x, fn, out, sq])
    _check(x, fn, out, sq)


# --- the two rewrites on statement lists -------------------------------------------------------

A = Buffer("A", (64,), "float32", "shared.dyn")
B = Buffer("B", (64,), "float32", "shared.dyn")
ST = Buffer("St", (128,), "float32", "shared.dyn")
G = Buffer("G", (64,), "float32", "global")


def _bar():
    return Raw("__syncthreads();")


def _wait(n):
    return Raw(f"tl::cp_async_wait<{n}>(); __syncthreads();")


def _rd(buf):
    return Raw(f"r = {buf.name}[0];", reads=(buf,))


def _wr(buf):
    return Raw(f"{buf.name}[0] = r;", writes=(buf,))


def _refill():
    return [Raw("tl::cp_async_zfill<16>(&St[0], &G[0], true);", writes=(ST,)), Raw("tl::cp_async_commit();")]


def test_wait_moves_onto_the_barrier_before_a_read_only_stretch():
    stmts = [_wr(A), _bar(), _rd(A), _wait(1), _rd(B), _bar()]
    out = hoist_waits(stmts)
    assert [s.fmt for s in out] == [stmts[0].fmt, _wait(1).fmt, stmts[2].fmt, stmts[4].fmt, "__syncthreads();"]


def test_wait_stays_when_the_stretch_writes_shared_or_a_later_write_races():
    writes = [_wr(A), _bar(), _wr(B), _wait(1), _rd(B), _bar()]
    assert hoist_waits(writes) == writes
    war = [_wr(A), _bar(), _rd(A), _wait(1), _wr(A), _bar()]  # the wait's barrier orders A's read and write
    assert hoist_waits(war) == war
    tail = [_wr(A), _bar(), _rd(A), _wait(1), _rd(B)]  # no barrier after it: the next iteration may race
    assert hoist_waits(tail) == tail


def test_refill_sinks_to_the_next_wait_which_counts_one_group_fewer():
    stmts = [_wait(3), _rd(ST), _bar(), *_refill(), _wr(A), _wait(3), _rd(A)]
    out = sink_refills(stmts)
    assert [s.fmt for s in out] == [_wait(3).fmt, stmts[1].fmt, stmts[5].fmt, _wait(2).fmt,
                                    *[s.fmt for s in _refill()], stmts[7].fmt]


def test_refill_stays_when_the_dropped_barrier_orders_a_race():
    raw_race = [_wait(3), _wr(A), _bar(), *_refill(), _rd(A), _wait(3)]  # A written before, read after
    assert sink_refills(raw_race) == raw_race
    reads_tile = [_wait(3), _rd(B), _bar(), *_refill(), _rd(ST), _bar()]  # passes a read of the refilled tile
    assert sink_refills(reads_tile) == reads_tile
    first = [_bar(), *_refill(), _wait(1), _rd(ST)]  # issue-first loops: no barrier before to lean on
    assert sink_refills(first) == first
    zero = [_wait(1), _rd(B), _bar(), *_refill(), _wr(A), _wait(0)]
    assert sink_refills(zero) == zero
