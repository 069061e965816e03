"""Summarize the per-tile timestamps of a kernel compiled with `tl.debug_timeline`.

    k = tilelang.compile(func, pass_configs={"tl.debug_timeline": True})
    k(a, b, c)
    print(tilelang.tools.timeline.summarize(k.timeline()))

`k.timeline()` is int64 [blocks, units, 4]: per block of the persistent grid and per unit it ran
(a tile, or a stream-K share of one), the globaltimer (ns) at the unit's start, at the end of its
k-loop and at its end, and the tile's linear index. Units a block did not run are zero.
The summary has one row per unit index (the j-th unit of every block: one wave), in
microseconds from the first start: when the wave starts, how long its k-loops and epilogues take
(median and spread over blocks) and when its last block ends.
"""
from __future__ import annotations

import statistics


def rows(tl) -> list[dict]:
    """One dict per unit index with the wave's figures in microseconds."""
    t = tl.tolist() if hasattr(tl, "tolist") else tl
    starts = [u[0] for blk in t for u in blk if u[0]]
    if not starts:
        return []
    t0 = min(starts)
    out = []
    for j in range(len(t[0])):
        units = [blk[j] for blk in t if blk[j][0]]
        if not units:
            break
        loop = [(u[1] - u[0]) / 1e3 for u in units]
        epi = [(u[2] - u[1]) / 1e3 for u in units]
        out.append({
            "unit": j, "blocks": len(units),
            "start_us": statistics.median((u[0] - t0) / 1e3 for u in units),
            "loop_us": statistics.median(loop), "loop_min_us": min(loop), "loop_max_us": max(loop),
            "epilogue_us": statistics.median(epi), "epilogue_max_us": max(epi),
            "end_max_us": max((u[2] - t0) / 1e3 for u in units),
        })
    return out


def summarize(tl) -> str:
    """A printable table of `rows(tl)`."""
    rs = rows(tl)
    if not rs:
        return "no units recorded"
    lines = ["unit  blocks  start(us)  k-loop med [min, max] (us)  epilogue med / max (us)  last end (us)"]
    for r in rs:
        lines.append(f"{r['unit']:4d}  {r['blocks']:6d}  {r['start_us']:9.2f}  "
                     f"{r['loop_us']:8.2f} [{r['loop_min_us']:7.2f}, {r['loop_max_us']:7.2f}]  "
                     f"{r['epilogue_us']:10.2f} / {r['epilogue_max_us']:6.2f}  {r['end_max_us']:12.2f}")
    return "\n".join(lines)
