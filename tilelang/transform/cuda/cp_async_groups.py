"""Which shared buffers each `cp_async_wait<N>` lands: a dataflow over cp.async commit groups.

Why: `proxy_fences` fences the barrier after a wait when the bytes that wait drains may next be
read by the async proxy (a wgmma operand). A two-stage dequant GEMM waits twice per k-step: the
first wait drains the packed B tile (read by plain shared loads only), the second the A tile (a
wgmma operand). Fencing every wait costs a `MEMBAR.ALL.CTA; FENCE.VIEW.ASYNC.S` pair where only
the second needs one.

Takes: a lowered CUDA kernel body (Raws for cp.async issues, `tl::cp_async_commit()` and
`tl::cp_async_wait<N>()`; a Raw's text may hold several, read in order).
Gives: `wait_lands(body)`: {id(wait Raw): set of buffer uids it may land, or None (unknown: any)}.
The state at each point is the thread's committed-but-maybe-pending groups, oldest first (each a
set of destination uids), plus the open (uncommitted) group. `wait<N>` lands every group but the N
newest. Where paths join, the sequences are aligned at their newest end and united element-wise,
so each position over-approximates every path's group there (a wait lands a superset of the truth).
A loop is iterated to a fixed point; more than MAX_GROUPS pending, or a statement this analysis
does not know that issues or waits, makes the state unknown and every later wait lands "any".

    cp_async(B_s) ; commit ; cp_async(A_s) ; commit        pending [ {B_s}, {A_s} ]
    wait<1>                                                  lands {B_s}
"""
from __future__ import annotations

import re

from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import collect
from .raw import Raw

MAX_GROUPS = 8
_EVENT = re.compile(r"cp_async_wait<(\d+)>|cp\.async\.wait_group\s+(\d+)|(cp_async_wait_all|cp\.async\.wait_all)"
                    r"|(cp_async_commit|cp\.async\.commit_group)"
                    r"|(cp_async_mbarrier\w*|cp\.async\.mbarrier\w*)"
                    r"|(cp_async(?:_\w+)?|cp\.async)")


def _targets(r: Raw) -> frozenset:
    """uids of the shared buffers (and their bases) a cp.async Raw may write."""
    out: set = set()

    def add(x):
        if isinstance(x, Buffer):
            if x.scope in ("shared", "shared.dyn"):
                for _ in range(4):  # a stage window's ring, a T.view's base
                    out.add(x.uid)
                    x = getattr(x, "view_base", None) or getattr(x, "view_of", None)
                    if x is None:
                        break
        elif isinstance(x, (tuple, list)):
            for y in x:
                add(y)
        elif hasattr(x, "__dataclass_fields__") and not isinstance(x, type):
            for f in x.__dataclass_fields__:
                add(getattr(x, f))
    add((r.writes, r.args))
    return frozenset(out)


def _join(a, b):
    if a is None or b is None:
        return None
    (pa, oa), (pb, ob) = a, b
    n = max(len(pa), len(pb))
    pa, pb = (frozenset(),) * (n - len(pa)) + pa, (frozenset(),) * (n - len(pb)) + pb
    return tuple(x | y for x, y in zip(pa, pb)), oa | ob


class _Groups:
    def __init__(self):
        self.lands: dict = {}

    def record(self, r, landed):
        key = id(r)
        if key in self.lands and (self.lands[key] is None or landed is None):
            self.lands[key] = None
        else:
            self.lands[key] = (self.lands.get(key) or frozenset()) | landed if landed is not None else None

    def raw(self, r: Raw, state):
        for m in _EVENT.finditer(r.fmt):
            if state is None:
                if m.group(1) or m.group(2) or m.group(3):
                    self.record(r, None)
                continue
            pending, open_ = state
            if m.group(1) or m.group(2) or m.group(3):
                n = 0 if m.group(3) else int(m.group(1) or m.group(2))
                k = max(len(pending) - n, 0)
                landed = frozenset().union(*pending[:k])
                if m.group(3):  # wait_all commits the open group and waits for it too
                    landed, open_ = landed | open_, frozenset()
                self.record(r, landed)
                state = (pending[k:], open_)
            elif m.group(4):
                pending = pending + (open_,)
                state = None if len(pending) > MAX_GROUPS else (pending, frozenset())
            elif m.group(5):
                continue  # completes on an mbarrier, never through a wait_group
            else:
                state = (pending, open_ | _targets(r))
        return state

    def walk(self, st, state):
        if isinstance(st, Raw):
            return self.raw(st, state)
        if not collect(st, lambda n: isinstance(n, Raw) and _EVENT.search(n.fmt)):
            return state
        if isinstance(st, S.SeqStmt):
            for x in st.stmts:
                state = self.walk(x, state)
            return state
        if isinstance(st, S.For):
            entry = state
            for _ in range(MAX_GROUPS + 2):
                end = self.walk(st.body, entry)
                new = _join(entry, end)
                if new == entry:
                    return new  # zero trips, or any number
                entry = new
            return self.walk(st.body, None)
        if isinstance(st, S.IfThenElse):
            a = self.walk(st.then_case, state)
            b = self.walk(st.else_case, state) if st.else_case is not None else state
            return _join(a, b)
        if type(st).__name__ == "WSSplit":  # two thread sets, each its own groups
            return _join(self.walk(st.producer, state), self.walk(st.consumer, state))
        if hasattr(st, "body") and isinstance(st.body, S.Stmt):
            return self.walk(st.body, state)
        for r in collect(st, lambda n: isinstance(n, Raw)):
            self.raw(r, None)
        return None


def wait_lands(body) -> dict:
    """{id(Raw): uids it may land (None: any)} for every Raw of `body` that waits on cp.async groups."""
    g = _Groups()
    g.walk(body, ((), frozenset()))
    return g.lands
