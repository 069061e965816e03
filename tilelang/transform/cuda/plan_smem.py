"""Place shared buffers in the dynamic shared array; buffers with disjoint lifetimes share bytes.

Expects: lowered per-thread CUDA IR with barriers already inserted (thread_sync.py runs
inside lower_cuda, before this pass). Lifetimes are spans of the kernel body's top-level
statements, first to last access, a loop or if counting as one statement.
Guarantees: every shared buffer (except pipeline/TMA stage views, which point into their
storage) gets a 1024-byte-aligned offset (swizzle patterns repeat every 1024 B), except buffers
under 1024 B that are not swizzled, which get 128-byte alignment and go after the large ones
(small row statistics and flags would otherwise cost up to 1 KB of padding each); two buffers
overlap in bytes only if their spans are disjoint and a top-level `__syncthreads()` lies
between the last access of the earlier one and the first access of the later one (this pass
inserts it when none does: thread_sync only sees buffers, not bytes; a plan that needs new
barriers is kept only when it saves at least 1024 B over reusing behind existing ones). The plan (offsets,
total bytes) is attached to the PrimFunc as attribute "tl.smem_plan"; codegen reads it.
Conservative (pinned for the whole kernel, never shared): warp-specialized kernels (all
buffers), pipeline stage storage and its views, buffers a Raw names in its text, buffers read
by a wgmma that is not waited for, buffers nothing accesses. Off with `tl.disable_smem_reuse`.

    x_s = alloc_shared(8 KB)  # @0          x_s = alloc_shared(8 KB)  # @0
    y_s = alloc_shared(8 KB)  # @8192  ->   y_s = alloc_shared(8 KB)  # @0
    for ...: x_s[...] = ...; ... = x_s[...] for ...: x_s[...] = ...; ... = x_s[...]
                                            __syncthreads()
    for ...: y_s[...] = ...; ... = y_s[...] for ...: y_s[...] = ...; ... = y_s[...]
    smem_bytes 16384                        smem_bytes 8192
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.stmt import PrimFunc
from ...ir.visitor import buffers_used, collect
from .lower_tile_ops import Raw, sync

ALIGN = 1024  # swizzle patterns repeat every 1024 B
SMALL_ALIGN = 128  # TMA (without swizzle) and 16-byte vectors: enough for a small plain buffer
ATTR = "tl.smem_plan"
_SHARED = ("shared", "shared.dyn")
_WGMMA_WAIT = re.compile(r"gemm_[rs]s_sm90<.*,\s*(-?\d+)>\(")


@dataclass(frozen=True)
class SmemSlot:
    name: str
    uid: int
    offset: int
    nbytes: int
    first: int  # top-level statement span, inclusive; pinned buffers span the whole body
    last: int
    pinned: str = ""  # why the buffer may not share bytes ("" when it may)


@dataclass(frozen=True)
class SmemPlan:
    slots: tuple  # SmemSlot, in allocation order
    total: int  # bytes of dynamic shared memory
    barriers: tuple = ()  # top-level indices (before insertion) that got a new barrier before them

    def offsets(self) -> dict:
        return {s.uid: s.offset for s in self.slots}

    def __str__(self):
        rows = [f"smem plan: {self.total} bytes, new barriers before statements {list(self.barriers)}"]
        for s in self.slots:
            why = f"  pinned: {s.pinned}" if s.pinned else ""
            rows.append(f"  {s.name:20s} @{s.offset:<7d} {s.nbytes:7d} B  stmts {s.first}..{s.last}{why}")
        return "\n".join(rows)


def shared_allocs(body) -> list[Buffer]:
    """Shared buffers that need bytes of their own (views point into their stage storage)."""
    out, seen = [], set()
    for a in collect(body, lambda n: isinstance(n, S.Allocate)):
        b = a.buffer
        if b.scope in _SHARED and b.uid not in seen and not hasattr(b, "view_of"):
            seen.add(b.uid)
            out.append(b)
    return out


def sequential_plan(buffers: list[Buffer], n: int = 1, why: str = "reuse off", wide=frozenset()) -> SmemPlan:
    """Every buffer its own slice (no reuse): 1024-aligned ones in allocation order, then small ones."""
    slots, off = [], 0
    for b in sorted(buffers, key=lambda b: _alignment(b, wide) != ALIGN):  # stable: allocation order kept
        off = _align(off, _alignment(b, wide))
        slots.append(SmemSlot(b.name, b.uid, off, _nbytes(b), 0, n - 1, why))
        off += _nbytes(b)
    order = [b.uid for b in buffers]
    return SmemPlan(tuple(sorted(slots, key=lambda s: order.index(s.uid))), off)


# ----------------------------------------------------------------------------- planning
def plan(kernel: S.KernelLaunch, allow_reuse: bool = True, wide=frozenset()) -> SmemPlan:
    """Lifetimes over the kernel's top-level statements, then first-fit packing. `wide`: uids of
    swizzled tiles (they keep 1024-byte alignment whatever their size)."""
    stmts = _top(kernel.body)
    buffers = shared_allocs(kernel.body)
    n = len(stmts)
    if not allow_reuse:
        return sequential_plan(buffers, n, wide=wide)
    if collect(kernel.body, lambda x: type(x).__name__ in ("WSSplit", "WarpGroupScope")):
        return sequential_plan(buffers, n, "warp-specialized kernel", wide)
    spans = _spans(stmts, buffers)
    pins = _pinned(kernel.body, buffers, spans)
    have = [i for i, st in enumerate(stmts) if isinstance(st, Raw) and "__syncthreads();" in st.fmt]
    slots = _pack(buffers, spans, pins, n, wide=wide)
    needs = _barrier_needs(slots, have)
    if needs:  # a new barrier must buy at least one 1024-byte unit over reuse behind existing ones
        free = _pack(buffers, spans, pins, n, have, wide)
        if _total(free) < _total(slots) + ALIGN:
            slots, needs = free, set()
    total = _total(slots)
    ordered = tuple(sorted(slots, key=lambda s: [b.uid for b in buffers].index(s.uid)))
    return SmemPlan(ordered, total, tuple(sorted(needs)))


def _top(body) -> tuple:
    return body.stmts if isinstance(body, S.SeqStmt) else (body,)


def _spans(stmts, buffers) -> dict:
    """uid -> [first, last] top-level index of any access (an Allocate with init writes)."""
    want = {b.uid for b in buffers}
    spans: dict = {}
    for i, st in enumerate(stmts):
        if isinstance(st, S.Allocate):
            used = [st.buffer] if st.init is not None else []
        else:
            used = buffers_used(st)
        for b in used:
            if b.uid in want:
                lo, _ = spans.get(b.uid, (i, i))
                spans[b.uid] = (lo, i)
    for uid, (lo, hi) in list(spans.items()):
        spans[uid] = (lo, _cp_async_end(stmts, uid, hi))
    return spans


def _cp_async_end(stmts, uid, last) -> int:
    """A buffer last written by cp.async lives until a cp_async_wait<0> has drained the writes."""
    st = stmts[last]
    raws = collect(st, lambda x: isinstance(x, Raw))
    writes = [k for k, r in enumerate(raws) if "cp_async" in r.fmt and any(b.uid == uid for b in r.writes)]
    if not writes or any("cp_async_wait<0>" in r.fmt for r in raws[writes[-1]:]):
        return last
    for j in range(last + 1, len(stmts)):
        if any("cp_async_wait<0>" in r.fmt for r in collect(stmts[j], lambda x: isinstance(x, Raw))):
            return j
    return len(stmts) - 1


def _pinned(body, buffers, spans) -> dict:
    """uid -> reason the buffer must keep bytes of its own for the whole kernel."""
    pins = {}
    raws = collect(body, lambda x: isinstance(x, Raw))
    text = " ".join(r.fmt for r in raws)
    storages = {v.view_of.uid for v in collect(body, lambda x: isinstance(x, S.Allocate))
                for v in [v.buffer] if hasattr(v, "view_of")}
    for b in buffers:
        if b.uid in storages:
            pins[b.uid] = "pipeline stage storage"
        elif b.uid not in spans:
            pins[b.uid] = "never accessed"
        elif re.search(rf"\b{re.escape(b.name)}\b", text):
            pins[b.uid] = "named in inline code"
    for r in raws:
        m = _WGMMA_WAIT.search(r.fmt)
        if m and int(m.group(1)) != 0:
            for b in r.reads:
                pins.setdefault(b.uid, "read by a wgmma still in flight")
    return pins


def _pack(buffers, spans, pins, n, barriers=None, wide=frozenset()) -> list[SmemSlot]:
    """Greedy first fit, largest first: the lowest aligned offset free over the buffer's span.

    With `barriers` (top-level indices), bytes are shared only across one of them.
    """
    order = sorted(buffers, key=lambda b: (_alignment(b, wide) != ALIGN, -_nbytes(b)))
    placed: list[SmemSlot] = []

    def apart(s, lo, hi):
        if s.last < lo:
            return barriers is None or any(s.last < k < lo for k in barriers)
        if hi < s.first:
            return barriers is None or any(hi < k < s.first for k in barriers)
        return False

    for b in order:
        why = pins.get(b.uid, "")
        lo, hi = (0, n - 1) if why else spans[b.uid]
        size, align = _nbytes(b), _alignment(b, wide)
        busy = sorted((s.offset, s.offset + s.nbytes) for s in placed if not apart(s, lo, hi))
        off = 0
        for a, e in busy:
            if off + size <= a:
                break
            off = max(off, _align(e, align))
        placed.append(SmemSlot(b.name, b.uid, off, size, lo, hi, why))
    return placed


def _barrier_needs(slots, have) -> set:
    """Top-level indices needing a new barrier before them so reused bytes are never raced on."""
    gaps = set()  # (last of the earlier buffer, first of the later one)
    for a in slots:
        for b in slots:
            if a.last < b.first and a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes:
                gaps.add((a.last, b.first))
    needs: set = set()
    for lo, hi in sorted(gaps, key=lambda g: g[1]):  # stab intervals by their right ends
        if not any(lo < k < hi for k in have) and not any(lo < k <= hi for k in needs):
            needs.add(hi)
    return needs


def _total(slots) -> int:
    return max((s.offset + s.nbytes for s in slots), default=0)


def _align(x: int, align: int = ALIGN) -> int:
    return (x + align - 1) // align * align


def _alignment(b: Buffer, wide) -> int:
    return ALIGN if b.uid in wide or _nbytes(b) >= ALIGN else SMALL_ALIGN


def _nbytes(b: Buffer) -> int:
    return b.numel() * b.dtype.bytes


# ----------------------------------------------------------------------------- the pass
def apply(kernel: S.KernelLaunch, p: SmemPlan) -> S.KernelLaunch:
    """Insert the barriers the plan asks for (before top-level statements, by index)."""
    if not p.barriers:
        return kernel
    out = []
    for i, st in enumerate(_top(kernel.body)):
        if i in p.barriers:
            out.append(sync())
        out.append(st)
    return replace(kernel, body=S.SeqStmt(tuple(out)))


def plan_smem_pass(func: PrimFunc, ctx) -> PrimFunc:
    from ..pass_config import get as config

    ks = collect(func.body, lambda n: isinstance(n, S.KernelLaunch))
    if len(ks) != 1:
        return func
    k = ks[0]
    info = getattr(ctx, "cuda_info", None)
    wide = frozenset(info.swizzled | info.panels) if info is not None else frozenset()
    p = plan(k, allow_reuse=not config(ctx.pass_configs, "tl.disable_smem_reuse", False), wide=wide)
    new = apply(k, p)
    body = func.body if new is k else _replace(func.body, k, new)
    return replace(func, body=body).with_attr(ATTR, p)


def _replace(body, old, new):
    if body is old:
        return new
    if isinstance(body, S.SeqStmt):
        return S.SeqStmt(tuple(_replace(s, old, new) for s in body.stmts))
    return body
