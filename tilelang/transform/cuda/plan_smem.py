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
Warp-specialized kernels are planned over the consumers' statements instead (see `ws_plan`:
the producer runs concurrently, so stage storage is busy from the consumers' first statement
to their last use of it, and over the whole tile loop of a persistent kernel); the barriers
this pass adds there are the consumers' own. Kernels with T.ws scopes or mbarriers keep every buffer apart.
Conservative (pinned for the whole kernel, never shared): pipeline stage storage and its views
(outside warp specialization) unless its pipeline drains at the top level (`free_drained_stages`:
an epilogue tile after the loop then takes the stages' bytes), buffers a Raw names in its text, buffers read by a wgmma that is
not waited for. Buffers nothing references get no bytes. Off with `tl.disable_smem_reuse`.

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
from ...ir.visitor import Mutator, buffers_used, collect
from ...op.hopper import is_barrier
from .lower_tile_ops import Raw, sync
from .warp_specialize import WSSplit

ALIGN = 1024  # swizzle patterns repeat every 1024 B
SMALL_ALIGN = 128  # TMA (without swizzle) and 16-byte vectors: enough for a small plain buffer
ATTR = "tl.smem_plan"
UNUSED = "never accessed (no bytes)"
_SHARED = ("shared", "shared.dyn")
_WGMMA_WAIT = re.compile(r"gemm_[rs]s_sm90<.*,\s*(-?\d+)(?:,\s*true)?>\(")  # RS: kKOuter may follow


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
    barriers: tuple = ()  # indices (before insertion) of `where`'s statements that get a new barrier before them
    where: str = ""  # "": the kernel body; "consumer": a WSSplit's consumer branch; "tile": its tile loop's body

    def offsets(self) -> dict:
        return {s.uid: s.offset for s in self.slots}

    def __str__(self):
        at = f" of the {self.where} statements" if self.where else ""
        rows = [f"smem plan: {self.total} bytes, new barriers before statements {list(self.barriers)}{at}"]
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
def plan(kernel: S.KernelLaunch, allow_reuse: bool = True, wide=frozenset(), tma_spans: bool = True,
         stage_reuse: bool = True) -> SmemPlan:
    """Lifetimes over the kernel's top-level statements, then first-fit packing. `wide`: uids of
    swizzled tiles (they keep 1024-byte alignment whatever their size). tma_spans: see ws_plan.
    stage_reuse: see `free_drained_stages` (off: tl.disable_stage_smem_reuse)."""
    stmts = _top(kernel.body)
    buffers = shared_allocs(kernel.body)
    n = len(stmts)
    if not allow_reuse:
        return sequential_plan(buffers, n, wide=wide)
    if collect(kernel.body, lambda x: type(x).__name__ == "WarpGroupScope"):
        return sequential_plan(buffers, n, "warp-group scopes (T.ws): their own barriers order them", wide)
    if any(is_barrier(b) for b in buffers):  # raw TMA / wgmma reach tiles through addresses lifetimes miss
        return sequential_plan(buffers, n, "mbarriers: the program's own barriers order its tiles", wide)
    if collect(kernel.body, lambda x: isinstance(x, WSSplit)):
        return ws_plan(kernel, buffers, wide, tma_spans) or sequential_plan(buffers, n, "warp-specialized kernel", wide)
    spans = _spans(stmts, buffers)
    pins = _pinned(kernel.body, buffers, spans)
    if stage_reuse:
        free_drained_stages(kernel.body, stmts, spans, pins)
    return _solve(buffers, spans, pins, n, _barriers_in(stmts), wide)


def _solve(buffers, spans, pins, n, have, wide, wrap=False, where="") -> SmemPlan:
    """Pack, then add the barriers reuse needs (or reuse only behind `have` where that costs < 1 KB)."""
    slots = _pack(buffers, spans, pins, n, wide=wide, wrap=wrap)
    needs = _barrier_needs(slots, have, n, wrap)
    if needs:  # a new barrier must buy at least one 1024-byte unit over reuse behind existing ones
        free = _pack(buffers, spans, pins, n, have, wide, wrap)
        if _total(free) < _total(slots) + ALIGN:
            slots, needs = free, set()
    total = _total(slots)
    ordered = tuple(sorted(slots, key=lambda s: [b.uid for b in buffers].index(s.uid)))
    return SmemPlan(ordered, total, tuple(sorted(needs)), where)


def _barriers_in(stmts) -> list:
    return [i for i, st in enumerate(stmts) if isinstance(st, Raw) and "__syncthreads();" in st.fmt]


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
        elif re.search(rf"\b{re.escape(b.name)}\b", text):
            pins[b.uid] = "named in inline code"
        elif b.uid not in spans:
            pins[b.uid] = UNUSED
    for r in raws:
        m = _WGMMA_WAIT.search(r.fmt)
        if m and int(m.group(1)) != 0:
            for b in r.reads:
                pins.setdefault(b.uid, "read by a wgmma still in flight")
    return pins


_ASYNC_PROXY = re.compile(r"tma|mbarrier|wgmma|_sm90<|fence\.proxy")
_WGMMA_CALL = re.compile(r"^\s*(tl::)?gemm_[rs]s_sm90<")  # a wgmma tile gemm alone in its statement


def free_drained_stages(body, stmts, spans, pins) -> None:
    """Unpin cp.async pipeline stage storage whose pipeline is drained at the top level.

    A storage (and its read/write views) used only by top-level statements up to `last`,
    followed by a top-level `cp_async_wait<0>(); __syncthreads();` at j > last, is busy over
    (first, j - 1): every thread's stage writes have landed at the wait and every read is done
    at the barrier after it, so a buffer first used after j may take its bytes (the barrier is
    `_barriers_in`'s index j). Storage TMA or an mbarrier touches stays pinned; storage a wgmma reads
    is freed only where a top-level `warpgroup_wait<0>` after its last use (up to j) has retired
    every wgmma group, so no read of the async proxy is left in flight over the reused bytes.
    Updates `spans` and `pins` in place.
    """
    views: dict = {}
    for a in collect(body, lambda x: isinstance(x, S.Allocate)):
        home = getattr(a.buffer, "view_of", None)
        if home is not None:
            views.setdefault(home.uid, set()).update({a.buffer.uid, a.buffer.name, home.name})
    for uid, names in views.items():
        if pins.get(uid) != "pipeline stage storage":
            continue
        uids = {x for x in names if isinstance(x, int)} | {uid}
        words = {x for x in names if isinstance(x, str)}
        touching = [r.fmt for r in collect(body, lambda x: isinstance(x, Raw)) if _names_any(r, uids, words)]
        if any(_ASYNC_PROXY.search(f) for f in touching if not _WGMMA_CALL.search(f)):
            continue
        used = [i for i, st in enumerate(stmts) if not isinstance(st, S.Allocate) and _names_any(st, uids, words)]
        if not used:
            continue
        drain = next((j for j in range(used[-1] + 1, len(stmts)) if _drains(stmts[j])), None)
        if drain is None:
            continue
        if any(_WGMMA_CALL.search(f) for f in touching) and not _wgmma_waited(stmts[used[-1] + 1:drain + 1]):
            continue
        spans[uid] = (used[0], drain - 1)
        del pins[uid]


def _wgmma_waited(stmts) -> bool:
    """A top-level statement among `stmts` waits for every wgmma group (`warpgroup_wait<0>`)."""
    return any(isinstance(st, Raw) and "warpgroup_wait<0>" in st.fmt for st in stmts)


def _drains(st) -> bool:
    """st waits for every cp.async group, then barriers (in one inline statement)."""
    if not isinstance(st, Raw):
        return False
    w, b = st.fmt.find("cp_async_wait<0>"), st.fmt.rfind("__syncthreads();")
    return 0 <= w < b


def _names_any(node, uids, words) -> bool:
    """node accesses a buffer of `uids` or names one of `words` in inline code."""
    if any(b.uid in uids for b in buffers_used(node)):
        return True
    return any(set(re.findall(r"\b\w+\b", r.fmt)) & words for r in collect(node, lambda x: isinstance(x, Raw)))


def _pack(buffers, spans, pins, n, barriers=None, wide=frozenset(), wrap=False) -> list[SmemSlot]:
    """Greedy first fit, largest first: the lowest aligned offset free over the buffer's span.

    With `barriers` (indices of barrier statements), bytes are shared only across one of them
    (with `wrap`, the statements are a loop body: across one both ways round the loop).
    Buffers nothing references (UNUSED) get no bytes.
    """
    order = sorted(buffers, key=lambda b: (_alignment(b, wide) != ALIGN, -_nbytes(b)))
    placed: list[SmemSlot] = []
    for b in order:
        why = pins.get(b.uid, "")
        if why == UNUSED:
            placed.append(SmemSlot(b.name, b.uid, 0, 0, 0, n - 1, why))
            continue
        lo, hi = (0, n - 1) if why else spans[b.uid]
        size, align = _nbytes(b), _alignment(b, wide)
        busy = sorted((s.offset, s.offset + s.nbytes) for s in placed
                      if not _apart((s.first, s.last), (lo, hi), barriers, wrap))
        off = 0
        for a, e in busy:
            if off + size <= a:
                break
            off = max(off, _align(e, align))
        placed.append(SmemSlot(b.name, b.uid, off, size, lo, hi, why))
    return placed


def _apart(x, y, barriers, wrap) -> bool:
    """Spans x and y (first, last) are disjoint, and with `barriers` one lies between them."""
    if x[1] < y[0]:
        early, late = x, y
    elif y[1] < x[0]:
        early, late = y, x
    else:
        return False
    if barriers is None:
        return True
    if not any(early[1] < k < late[0] for k in barriers):
        return False
    return not wrap or any(k > late[1] or k < early[0] for k in barriers)


def _barrier_needs(slots, have, n=0, wrap=False) -> set:
    """Indices needing a new barrier before them (n: after the last statement) so reused bytes
    are never raced on; with `wrap` also round the loop the statements are the body of."""
    gaps, rounds = set(), set()  # (last of the earlier buffer, first of the later one)
    for a in slots:
        for b in slots:
            if a.last < b.first and a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes:
                gaps.add((a.last, b.first))
                rounds.add((b.last, a.first))  # the next iteration's a after this one's b
    needs: set = set()
    for lo, hi in sorted(gaps, key=lambda g: g[1]):  # stab intervals by their right ends
        if not any(lo < k < hi for k in have) and not any(lo < k <= hi for k in needs):
            needs.add(hi)
    for last, first in sorted(rounds) if wrap else ():
        if not any(k > last or k < first for k in have) and not any(k > last or k <= first for k in needs):
            needs.add(n)
    return needs


def _total(slots) -> int:
    return max((s.offset + s.nbytes for s in slots), default=0)


def _align(x: int, align: int = ALIGN) -> int:
    return (x + align - 1) // align * align


def _alignment(b: Buffer, wide) -> int:
    return ALIGN if b.uid in wide or _nbytes(b) >= ALIGN else SMALL_ALIGN


def _nbytes(b: Buffer) -> int:
    return b.numel() * b.dtype.bytes


# ----------------------------------------------------------------------------- warp-specialized kernels
def ws_plan(kernel: S.KernelLaunch, buffers: list[Buffer], wide=frozenset(), tma_spans: bool = True) -> SmemPlan | None:
    """Lifetimes over the consumers' program of a warp-specialized kernel, or None (then every
    buffer keeps its own bytes) where the kernel is not laid out as warp_specialize builds it.

    The statements planned over are the consumer branch's, or, in a persistent kernel, those of
    its tile loop's body (`wrap`: a buffer of a later statement shares bytes with one of an
    earlier only with a barrier both between them and round the loop). The producer runs
    concurrently and only writes stage storage, for iterations the consumers wait for: a
    storage is busy from the consumers' first statement (the producer starts at once) to their
    last use of it, and over the whole tile-loop body (the producer is already filling the next
    tile's stages during this one's epilogue). A tile the producer loads once before its ring
    (tl_pre: attention's Q in a kernel of a tile per block) is busy likewise from the consumers'
    first statement to their last use; the consumers wait for that load before their first use,
    and a tile taking its bytes later is behind a consumer barrier after the last wgmma reading
    it has been waited for, as for stage storage. Anything else the producer or code outside the
    planned statements touches, anything read by TMA stores (asynchronous reads) or named by
    other inline code keeps its own bytes, except (tma_spans; off: tl.disable_tma_store_reuse) a
    tile TMA stores read in a kernel of one tile per block whose consumers end waiting for every
    store: it is busy from its first access to their end, so it may take the bytes of tiles dead
    by then (attention's output staging tile in Q's: 192 -> 160 KB at D128). Barriers are consumer-only (`__syncthreads()` in the
    consumer branch prints as the consumers' named barrier).
    """
    split = [st for st in _top(kernel.body) if isinstance(st, WSSplit)]
    if len(split) != 1:
        return None
    split = split[0]
    cons = _top(split.consumer)
    holder = [st for st in cons if _holds_full_wait(st)]
    if len(holder) != 1:
        return None
    seq, where, wrap = cons, "consumer", False
    if not _waits_full(holder[0]):  # a persistent kernel: a tile loop around the k-loop
        if not isinstance(holder[0], S.For):
            return None
        seq, where, wrap = _top(holder[0].body), "tile", True
        inner = [st for st in seq if _holds_full_wait(st)]
        if len(inner) != 1 or not _waits_full(inner[0]):
            return None
    n = len(seq)
    home = {a.buffer.uid: a.buffer.view_of.uid for a in collect(kernel.body, lambda x: isinstance(x, S.Allocate))
            if hasattr(a.buffer, "view_of")}
    storages = set(home.values())
    by_name = {b.name: b.uid for b in buffers}
    by_name.update({a.buffer.name: home[a.buffer.uid] for a in collect(kernel.body, lambda x: isinstance(x, S.Allocate))
                    if a.buffer.uid in home})
    pins: dict = {}
    outside = [st for st in _top(kernel.body) if not isinstance(st, (S.Allocate, WSSplit))]
    outside += [st for st in cons if st is not holder[0]] if wrap else []
    for uid in _touched(S.seq(*outside), home, by_name) if outside else ():
        pins.setdefault(uid, "used outside the consumers' planned statements")
    early = {home.get(b.uid, b.uid) for r in collect(split.producer, _loads_first) for b in r.writes} - storages
    for uid in _touched(_DropLoadsFirst().visit(split.producer), home, by_name) | (early if wrap else set()):
        if uid not in storages:
            pins.setdefault(uid, "used by the producer")
    spans: dict = {}
    tma_read: set = set()
    for i, st in enumerate(seq):
        if isinstance(st, S.Allocate):
            used = {home.get(st.buffer.uid, st.buffer.uid)} if st.init is not None else set()
        elif tma_spans and not wrap and isinstance(st, Raw) and _STORE_WAIT.fullmatch(st.fmt):
            used = set()  # waits for the tile's earlier stores: no access of its bytes
        else:
            used = _touched(st, home, by_name)
        for uid in used:
            spans[uid] = (spans.get(uid, (i, i))[0], i)
        raws = collect(st, lambda x: isinstance(x, Raw))
        for q, r in enumerate(raws):
            for name in re.findall(r"\b\w+\b", r.fmt):
                uid = by_name.get(name)
                if uid is None or _view_assignment(r.fmt, name, home, by_name):
                    continue
                if "tma_store" in r.fmt and not wrap and tma_spans:
                    tma_read.add(uid)  # read asynchronously until the consumers' last statement
                else:
                    pins.setdefault(uid, "read by TMA stores" if "tma_store" in r.fmt else "named in inline code")
            m = _WGMMA_WAIT.search(r.fmt)
            if m and int(m.group(1)) != 0:  # its operands are read until a full wgmma wait
                inside = any("warpgroup_wait<0>" in x.fmt for x in raws[q + 1:])  # in the same statement
                end = i if inside else next((j for j in range(i + 1, n) if isinstance(seq[j], Raw)
                                             and "warpgroup_wait<0>" in seq[j].fmt), None)
                for b in r.reads:
                    uid = home.get(b.uid, b.uid)
                    if end is None:
                        pins.setdefault(uid, "read by a wgmma still in flight")
                    elif uid in spans:
                        spans[uid] = (spans[uid][0], max(spans[uid][1], end))
    for uid, (lo, hi) in list(spans.items()):
        spans[uid] = (0, n - 1 if wrap else hi) if uid in storages | early else (lo, _cp_async_end(seq, uid, hi))
    for uid in tma_read - set(pins):
        if uid not in spans or not _store_waited_at_end(seq):
            pins[uid] = "read by TMA stores"
        else:  # its bytes are free before its first access; TMA reads them until the final wait
            spans[uid] = (spans[uid][0], n - 1)
    for uid in early - set(spans):  # loaded by the producer, read by no consumer
        pins.setdefault(uid, "used by the producer")
    for uid in storages - set(spans):  # loaded by the producer, read by no consumer: busy throughout
        spans[uid] = (0, n - 1)
    for b in buffers:
        if b.uid not in spans and b.uid not in pins:
            pins[b.uid] = UNUSED
    return _solve(buffers, spans, pins, n, _barriers_in(seq), wide, wrap, where)


_STORE_WAIT = re.compile(r"if \(tid == 0\) tl::tma_store_wait<0>\(\);")


def _store_waited_at_end(seq) -> bool:
    """The consumers' last statement waits for every TMA store to have read its tile."""
    return bool(seq) and isinstance(seq[-1], Raw) and "tma_store_wait_all" in seq[-1].fmt


def _loads_first(x) -> bool:
    """x is a TMA load the producer issues before its ring, once (ws_loads.take_prefix_loads)."""
    return isinstance(x, Raw) and "&tl_pre[" in x.fmt and bool(x.writes)


class _DropLoadsFirst(Mutator):
    def visit_Raw(self, r):
        return Raw("") if _loads_first(r) else r


def _waits_full(st) -> bool:
    """st is the consumers' k-loop: a loop whose body waits on the full barriers itself, or the
    `if` holding ws_overlap's prologue, loop and epilogue (its own statements wait)."""
    body = st.body if isinstance(st, S.For) else st.then_case if isinstance(st, S.IfThenElse) else None
    return body is not None and any(isinstance(x, Raw) and "mbarrier_wait(&tl_full" in x.fmt for x in _top(body))


def _holds_full_wait(st) -> bool:
    return bool(collect(st, lambda x: isinstance(x, Raw) and "mbarrier_wait(&tl_full" in x.fmt))


def _touched(node, home, by_name) -> set:
    """uids of the shared buffers node accesses or names in inline code (views: their storage)."""
    out = {home.get(b.uid, b.uid) for b in buffers_used(node) if b.scope in _SHARED}
    for r in collect(node, lambda x: isinstance(x, Raw)):
        out |= {by_name[w] for w in re.findall(r"\b\w+\b", r.fmt) if w in by_name}
    return out


def _view_assignment(fmt: str, name: str, home, by_name) -> bool:
    """fmt is `view = storage + ...` (warp_specialize pointing a tile at its stage) and names `name` there."""
    m = re.match(r"\s*(\w+) = (\w+) \+ ", fmt)
    return bool(m) and name in m.groups() and by_name.get(m.group(1)) == by_name.get(m.group(2)) \
        and by_name.get(m.group(2)) in home.values()


# ----------------------------------------------------------------------------- the pass
def apply(kernel: S.KernelLaunch, p: SmemPlan) -> S.KernelLaunch:
    """Insert the barriers the plan asks for (before `p.where`'s statements, by index)."""
    if not p.barriers:
        return kernel
    if not p.where:
        return replace(kernel, body=_with_barriers(_top(kernel.body), p.barriers))
    out = []
    for st in _top(kernel.body):
        if isinstance(st, WSSplit):
            cons = _top(st.consumer)
            if p.where == "consumer":
                st = replace(st, consumer=_with_barriers(cons, p.barriers))
            else:
                body = [replace(c, body=_with_barriers(_top(c.body), p.barriers)) if _holds_full_wait(c) else c
                        for c in cons]
                st = replace(st, consumer=S.SeqStmt(tuple(body)))
        out.append(st)
    return replace(kernel, body=S.SeqStmt(tuple(out)))


def _with_barriers(stmts, at) -> S.SeqStmt:
    out = []
    for i, st in enumerate(stmts):
        if i in at:
            out.append(sync())
        out.append(st)
    if len(stmts) in at:
        out.append(sync())
    return S.SeqStmt(tuple(out))


def plan_smem_pass(func: PrimFunc, ctx) -> PrimFunc:
    from ..pass_config import get as config

    ks = collect(func.body, lambda n: isinstance(n, S.KernelLaunch))
    if len(ks) != 1:
        return func
    k = ks[0]
    info = getattr(ctx, "cuda_info", None)
    wide = frozenset(info.swizzled | info.panels) if info is not None else frozenset()
    p = plan(k, allow_reuse=not config(ctx.pass_configs, "tl.disable_smem_reuse", False), wide=wide,
             tma_spans=not config(ctx.pass_configs, "tl.disable_tma_store_reuse", False),
             stage_reuse=not config(ctx.pass_configs, "tl.disable_stage_smem_reuse", False))
    new = apply(k, p)
    body = func.body if new is k else _replace(func.body, k, new)
    return replace(func, body=body).with_attr(ATTR, p)


def _replace(body, old, new):
    if body is old:
        return new
    if isinstance(body, S.SeqStmt):
        return S.SeqStmt(tuple(_replace(s, old, new) for s in body.stmts))
    return body
