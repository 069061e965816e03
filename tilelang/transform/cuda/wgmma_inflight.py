"""Which gemms of a cp.async-pipelined loop body may leave their wgmma batch in flight.

Takes: the statements of a `T.Pipelined` body after its staged copies (tile-level IR, before
layout inference), the block's thread count and the uids of the tiles the pipeline stages.
Gives: the body's gemms, each to be issued with `wg_wait=1` (tl::gemm_ss_sm90<..., 1>: the
call returns with its own batch in flight and the previous one complete), or None when a batch
must finish inside its iteration. software_pipeline.py then orders the iteration as

    wait cp.async(ko); barrier            wait cp.async(ko); barrier
    refill stage of ko - 1          ->    gemm(ko)   (wgmma(ko) in flight, wgmma(ko - 1) done)
    gemm(ko)   (waits for wgmma(ko))      barrier    (every warpgroup's wgmma(ko - 1) done)
                                          refill stage of ko - 1   (address math beside wgmma(ko))

and waits for the last batch after the loop, so the tensor cores run while the threads compute
the next loads' addresses (an im2col's index math, a gather's).

A batch may stay in flight only while nothing else touches what it uses: no other statement
of the body (another gemm included) reads or writes its accumulator, or writes a shared tile it
reads that the pipeline does not stage; it accumulates (no clear_accum) and runs on wgmma
(wgmma_ok). A gemm nested in a loop or branch of the body keeps the batch waited for.
"""
from __future__ import annotations

from ...ir import stmt as S
from ...ir.buffer import BufferRegion
from ...ir.visitor import buffers_used, collect
from ...op import tile_ops as O
from .gemm_paths import wgmma_ok


def _uid(b) -> int:
    """A T.reshape / T.view of a tile is the tile."""
    base = getattr(b, "view_base", None)
    return b.uid if base is None else base.uid


def _writes(st) -> set:
    """uids of the buffers `st` stores to or a tile op in it writes (its dst, a gemm's C)."""
    out = {_uid(n.buffer) for n in collect(st, lambda n: isinstance(n, S.BufferStore))}
    for n in collect(st, lambda n: isinstance(n, O.TileOp)):
        for r in (getattr(n, "dst", None), getattr(n, "C", None)):
            if isinstance(r, BufferRegion):
                out.add(_uid(r.buffer))
    return out


def inflight_gemms(stmts: list, threads: int, staged: set) -> list | None:
    """The gemms of `stmts` that may stay in flight across iterations (module docstring), or None."""
    gemms = [st for st in stmts if isinstance(st, O.Gemm)]
    if not gemms or len(collect(S.seq(*stmts), lambda n: isinstance(n, O.Gemm))) != len(gemms):
        return None
    for g in gemms:
        if g.wg_wait != 0 or g.clear_accum or wgmma_ok(g, threads)[0] is None:
            return None
        if g.C.buffer.scope != "fragment":
            return None
    for g in gemms:
        acc = _uid(g.C.buffer)
        tiles = {_uid(r.buffer) for r in (g.A, g.B)} - staged
        for st in stmts:
            if st is g:
                continue
            if acc in {_uid(b) for b in buffers_used(st)} or tiles & _writes(st):
                return None
    return gemms
