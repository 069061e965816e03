"""Put `fence.proxy.async` only before the barriers that need one.

Expects: the final lowered CUDA IR of a kernel with wgmma or warp specialization (barriers are
Raws containing `__syncthreads();`, every shared-memory write a thread makes is a BufferStore,
an atomic, or a Raw that declares it in `writes` -- what thread_sync relies on).
Guarantees: a barrier gets `tl::fence_proxy_async();` in front of it when, on some path since the
last fenced barrier (or the kernel's start), this thread may have written shared memory through
the generic proxy (stores, cp.async, atomics, extern calls): those bytes may next be read by
the async proxy (a wgmma operand, a TMA store's source) once the barrier has passed. A barrier
with no such write since the last fence needs none: what it orders is generic against generic,
or an async read already waited for (wgmma.wait_group, TMA store wait) against a later write.
TMA loads write through the async proxy and dirty nothing. Loops are followed around their back
edge; both arms of an if are taken.

    T.copy(P_l, P_s) ; sync ; gemm(P_s, ...)         fence ; sync     (P_s written: fenced)
    atomic_add(dQ, ...) ; sync  (loop end)           sync             (no shared write: none)
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...ir import stmt as S
from ...ir.visitor import Mutator, collect
from .raw import Raw
from .thread_sync import accesses
from .warp_specialize import WSSplit

_BARRIER = "__syncthreads();"
_FENCED = "tl::fence_proxy_async(); " + _BARRIER
_ASYNC_WRITE = re.compile(r"tl::tma_load|cp_async_bulk|tl::mbarrier")


def _is_barrier(st) -> bool:
    return isinstance(st, Raw) and _BARRIER in st.fmt


def _dirties(st) -> bool:
    """Whether a statement with no barrier inside may write shared memory through the generic proxy."""
    if isinstance(st, Raw) and _ASYNC_WRITE.search(st.fmt):
        return False
    return bool(accesses(st)[1])


def _walk(st, dirty: bool):
    """(statement with fences placed, dirty after it) for entry state `dirty`."""
    if _is_barrier(st):
        pre = st.fmt[: st.fmt.index(_BARRIER)]
        before = dirty or (bool(pre.strip()) and _dirties(replace(st, fmt=pre)))
        fmt = st.fmt.replace(_BARRIER, _FENCED, 1) if before and _FENCED not in st.fmt else st.fmt
        after = st.fmt[st.fmt.index(_BARRIER) + len(_BARRIER):]
        return replace(st, fmt=fmt), bool(after.strip()) and _dirties(st)
    if not collect(st, _is_barrier):
        return st, dirty or _dirties(st)
    if isinstance(st, S.SeqStmt):
        out = []
        for x in st.stmts:
            x, dirty = _walk(x, dirty)
            out.append(x)
        return replace(st, stmts=tuple(out)), dirty
    if isinstance(st, S.For):
        _, end = _walk(st.body, dirty)
        entry = dirty or end  # the back edge: the next iteration starts as this one ended
        body, end = _walk(st.body, entry)
        return replace(st, body=body), entry or end
    if isinstance(st, S.IfThenElse):
        then, d1 = _walk(st.then_case, dirty)
        other, d2 = _walk(st.else_case, dirty) if st.else_case is not None else (None, dirty)
        return replace(st, then_case=then, else_case=other), d1 or d2
    if isinstance(st, WSSplit):  # producer and consumer threads each start as the kernel did
        prod, d1 = _walk(st.producer, dirty)
        cons, d2 = _walk(st.consumer, dirty)
        return replace(st, producer=prod, consumer=cons), d1 or d2
    if hasattr(st, "body") and isinstance(st.body, S.Stmt):  # kernel launch, T.ws scope, ...
        body, d = _walk(st.body, dirty)
        return replace(st, body=body), d
    return _fence_all(st), True  # unknown shape: every barrier keeps its fence


class _FenceAll(Mutator):
    def visit_Raw(self, r):
        return replace(r, fmt=r.fmt.replace(_BARRIER, _FENCED, 1)) if _is_barrier(r) and _FENCED not in r.fmt else r


def _fence_all(st):
    return _FenceAll().visit(st)


def place_proxy_fences(body):
    """`body` with `tl::fence_proxy_async();` before each barrier that follows a generic shared write."""
    return _walk(body, False)[0]
