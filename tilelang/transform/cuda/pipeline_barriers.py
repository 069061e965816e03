"""Fewer barriers in a cp.async pipeline's iteration: stage waits and stage refills share the
barriers that thread_sync or another wait already put in the iteration.

Takes: lowered per-thread CUDA IR after barrier insertion (thread_sync.py) and fuse_mma_mainloops.
Gives, in every statement sequence of a serial loop body:
- wait hoisting: `tl::cp_async_wait<N>(); __syncthreads();` moves up onto the closest plain
  `__syncthreads();` before it when the statements between commit, wait for and synchronise
  nothing and write no shared or global memory, and the statements after it up to the next barrier
  of the sequence write nothing they read. Its barrier then ordered only the stage's landing,
  which the earlier barrier now does (the stage was issued S - 1 iterations before; waiting a
  little earlier costs nothing where it has landed).
- refill sinking: a plain barrier followed by a stage refill (`if (..) { cp.async .. }` then
  `tl::cp_async_commit();`) is dropped and the refill moves just after the next barrier of the
  sequence, when the statements it passes commit and wait for nothing, touch none of the tiles it
  writes and write no global memory, and do not race with those between the previous barrier and
  the dropped one (what the dropped barrier ordered). A wait the moved commit now follows counts
  one group fewer (wait<N - 1>): it still names the same group.

    wait<3>; sync                          wait<3>; sync
    x16 = x_s[..]                          x16 = x_s[..]
    sync                                   xf[..] = float(x16)
    refill x_s; commit                     wait<2>; sync
    xf[..] = float(x16)            ->      refill x_s; commit
    sync                                   sq += xf[..] * xf[..]
    sq += xf[..] * xf[..]                  gemm(xf, fn_s)
    wait<3>; sync                          sync
    gemm(xf, fn_s)                         refill fn_s; commit
    sync
    refill fn_s; commit

mhc_pre's gemm_sqrsum: 5 barriers an iteration -> 3. Off with pass_config `tl.disable_pipeline_barrier_merge`;
`tl.disable_pipeline_refill_sink` keeps the hoisting only (4 barriers): a sunk refill is issued later
(here after the bf16 -> tf32 conversion), so its stage has less time to land.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...ir import stmt as S
from ...ir.visitor import Mutator, collect
from .raw import Raw
from .thread_sync import accesses

_WAIT = re.compile(r"^tl::cp_async_wait<(\d+)>\(\); __syncthreads\(\);$")
_PLAIN = "__syncthreads();"
_COMMIT = "tl::cp_async_commit();"
# inline code that synchronises or starts / waits for asynchronous work
_ORDERING = ("sync", "barrier", "wait", "fence", "arrive", "wgmma", "tma", "commit", "mbarrier", "gemm_ss_pipe")


def merge_pipeline_barriers(body: S.Stmt, sink: bool = True) -> S.Stmt:
    """sink: refill sinking too (else wait hoisting only)."""
    return _Merge(sink).visit(body)


def _root(b) -> int:
    """The uid of the memory a buffer names (stage views and reshapes name their storage's)."""
    while True:
        nxt = getattr(b, "view_of", None) or getattr(b, "view_base", None)
        if nxt is None or nxt is b:
            return b.uid
        b = nxt


def _shared(stmts) -> tuple[set, set]:
    reads, writes = set(), set()
    for st in stmts:
        r, w = accesses(st)
        reads |= r
        writes |= w
    return reads, writes


def _raws(stmts) -> list:
    return [r for st in stmts for r in collect(st, lambda x: isinstance(x, Raw))]


def _orders(stmts) -> bool:
    """Some statement synchronises threads or starts / waits for asynchronous work (cp.async included)."""
    for r in _raws(stmts):
        if "cp_async_zfill" in r.fmt or any(w in r.fmt for w in _ORDERING):
            return True
    for st in stmts:
        if collect(st, lambda x: isinstance(x, S.Evaluate) and "sync" in str(getattr(x.value, "op", ""))):
            return True
    return False


def _writes_global(stmts) -> bool:
    if any(b.scope == "global" for r in _raws(stmts) for b in r.writes):
        return True
    return any(collect(st, lambda x: isinstance(x, S.BufferStore) and x.buffer.scope == "global") for st in stmts)


def _barrier_at(st) -> bool:
    return isinstance(st, Raw) and (st.fmt == _PLAIN or _WAIT.match(st.fmt) is not None)


def _refill_end(stmts: list, i: int) -> int | None:
    """Index of the commit ending a stage refill that starts at stmts[i], or None: statements that
    only issue cp.async vectors (and set stage views), then one commit."""
    j = i
    while j < len(stmts) and not (isinstance(stmts[j], Raw) and stmts[j].fmt == _COMMIT):
        st = stmts[j]
        raws = collect(st, lambda x: isinstance(x, Raw))
        if not any("cp_async_zfill" in r.fmt for r in raws):
            return None
        if any(w in r.fmt for r in raws for w in _ORDERING if "cp_async_zfill" not in r.fmt):
            return None
        if collect(st, lambda x: isinstance(x, S.BufferStore)):
            return None
        j += 1
    return j if j < len(stmts) and j > i else None


def _next_barrier(stmts: list, start: int) -> int | None:
    for k in range(start, len(stmts)):
        if _barrier_at(stmts[k]):
            return k
    return None


def hoist_waits(stmts: list) -> list:
    out = list(stmts)
    j = 0
    while j < len(out):
        m = isinstance(out[j], Raw) and _WAIT.match(out[j].fmt)
        i = next((x for x in range(j - 1, -1, -1) if _barrier_at(out[x])), None) if m else None
        k = _next_barrier(out, j + 1) if i is not None else None
        if i is None or k is None or out[i].fmt != _PLAIN:
            j += 1
            continue
        between, after = out[i + 1:j], out[j + 1:k]
        reads, writes = _shared(between)
        if _orders(between) or writes or _writes_global(between) or reads & _shared(after)[1]:
            j += 1
            continue
        out[i] = out[j]
        del out[j]
    return out


def sink_refills(stmts: list) -> list:
    out = list(stmts)
    i = 0
    while i < len(out):
        if not (isinstance(out[i], Raw) and out[i].fmt == _PLAIN):
            i += 1
            continue
        c = _refill_end(out, i + 1)
        p = next((x for x in range(i - 1, -1, -1) if _barrier_at(out[x])), None)
        k = _next_barrier(out, c + 1) if c is not None else None
        if c is None or p is None or k is None:
            i += 1
            continue
        refill, passed, before = out[i + 1:c + 1], out[c + 1:k], out[p + 1:i]
        tiles = {_root(b) for r in _raws(refill) for b in r.writes}
        pr, pw = _shared(passed)
        br, bw = _shared(before)
        races = bool(pw & (br | bw)) or bool(pr & bw)
        touched = {_root(b) for r in _raws(passed) for b in (*r.reads, *r.writes)}
        touched |= {_root(n.buffer) for st in passed for n in collect(st, lambda x: hasattr(x, "buffer"))}
        m = _WAIT.match(out[k].fmt)
        if _orders(passed) or _writes_global(passed) or races or tiles & touched or (m and int(m.group(1)) == 0):
            i += 1
            continue
        bar = out[k] if not m else replace(out[k], fmt=f"tl::cp_async_wait<{int(m.group(1)) - 1}>(); __syncthreads();")
        out[i:k + 1] = [*passed, bar, *refill]
        i += len(passed) + 1 + len(refill)
    return out


class _Merge(Mutator):
    def __init__(self, sink: bool):
        self.sink = sink

    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        if isinstance(body, S.SeqStmt) and s.kind == "serial":
            stmts = hoist_waits(list(body.stmts))
            stmts = sink_refills(stmts) if self.sink else stmts
            if len(stmts) != len(body.stmts) or any(a is not b for a, b in zip(stmts, body.stmts)):
                body = replace(body, stmts=tuple(stmts))
        return s if body is s.body else replace(s, body=body)
