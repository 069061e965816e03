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
TMA loads write through the async proxy and dirty nothing. cp.async writes through the generic
proxy, and its bytes land at the `cp_async_wait` that drains them, not where it is issued: a wait
dirties (when some cp.async target is reachable), so the barrier after it is fenced before a wgmma
reads the tile (a fence placed before the data landed orders nothing). Loops are followed around their back
edge; both arms of an if are taken.
Given the kernel's shared-memory plan, a write dirties only memory the async proxy may reach: a
buffer that some inline statement names (a wgmma operand, a TMA box, a staging tile: anything
but a plain element load or store) or whose bytes overlap such a buffer's. A proxy fence orders
accesses to the same locations through two proxies (PTX memory model, proxies); bytes only ever
touched by generic loads and stores (a flag tile such as sparse_mla's `is_kv_valid`) are ordered
by the barrier alone. Without a plan, buffers own their bytes (the codegen's sequential layout).

    T.copy(P_l, P_s) ; sync ; gemm(P_s, ...)         fence ; sync     (P_s written: fenced)
    atomic_add(dQ, ...) ; sync  (loop end)           sync             (no shared write: none)
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import replace

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, storage_root
from ...ir.visitor import Mutator, collect
from .cp_async_groups import wait_lands
from .raw import Raw
from .thread_sync import accesses
from .warp_specialize import WSSplit

_BARRIER = "__syncthreads();"
_FENCED = "tl::fence_proxy_async(); " + _BARRIER
_ASYNC_WRITE = re.compile(r"tl::tma_load|cp_async_bulk|tl::mbarrier")


def _is_barrier(st) -> bool:
    return isinstance(st, Raw) and _BARRIER in st.fmt


_CP_ASYNC_ISSUE = re.compile(r"cp_async(?!_wait|_commit|_mbarrier)|cp\.async(?!\.wait|\.commit|\.mbarrier)")
_CP_ASYNC_WAIT = re.compile(r"cp_async_wait|cp\.async\.wait")


def cp_async_lands(body, reach) -> bool:
    """Whether a cp.async in `body` writes memory the async proxy may reach (reach: uids, None: all)."""
    named: set = set()
    for r in collect(body, lambda n: isinstance(n, Raw) and _CP_ASYNC_ISSUE.search(n.fmt)):
        _buffers_in((r.writes, r.args), named)  # the destination is an address argument
    targets = {u for b in named if b.scope in ("shared", "shared.dyn") for u in (b.uid, _storage(b))}
    return bool(targets) if reach is None else bool(targets & reach)


def _dirties(st, reach, lands=False, orig=None) -> bool:
    """Whether a statement with no barrier inside may write shared memory through the generic proxy
    that the async proxy may reach (reach: storage uids, None: all; lands: a cp.async wait lands
    such bytes, or a dict {id(wait Raw): uids it lands, None: any} from cp_async_groups; orig: the
    Raw that `st` is the text of)."""
    waits = collect(st, lambda n: isinstance(n, Raw) and _CP_ASYNC_WAIT.search(n.fmt))
    if isinstance(lands, dict):
        for w in waits:
            got = lands.get(id(orig if orig is not None and w is st else w), None)
            if got is None or (bool(got) if reach is None else bool(got & reach)):
                return True
    elif lands and waits:
        return True
    if isinstance(st, Raw) and _ASYNC_WRITE.search(st.fmt):
        return False
    writes = accesses(st)[1]
    return bool(writes) if reach is None else bool(writes & reach)


def _storage(b: Buffer) -> int:
    """The uid of the memory a buffer names (ir.buffer.storage_root)."""
    return storage_root(b).uid


def _buffers_in(x, out: set) -> None:
    """Every Buffer reachable through x's fields, tuples and expressions."""
    if isinstance(x, Buffer):
        out.add(x)
        base = getattr(x, "view_base", None) or getattr(x, "view_of", None)
        if base is not None:
            out.add(base)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _buffers_in(y, out)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            _buffers_in(getattr(x, f.name), out)


# inline code that touches shared memory through the generic proxy only (cp.async included: PTX
# performs non-bulk cp.async in the generic proxy): the buffers it names are not async-reachable
_GENERIC_ONLY = re.compile(r"^\s*(tl::(cp_async_zfill|cp_async_gs|cp_async|load_vec|store_vec|copy_vec\d*)\s*<[^;]*;"
                           r"|tl_store2\s*\([^;]*;"
                           r"|\w+\s*=\s*\w+\s*\+\s*\(\{0\}\)\s*\*\s*\d+\s*;)\s*$")  # (the last: a stage window's pointer)
# the plain 16/8/4-byte copies (include/tl/c_compat.h), called without template arguments: the
# shared -> global store of an output tile through registers
_PLAIN_COPY = re.compile(r"^\s*tl::copy_vec(16|8|4)\s*\([^;]*;\s*$")

# warp-level mma.sync tiles: an sm80-path gemm (ldmatrix + mma.sync) reads, stmatrix writes, both
# through the generic proxy (the attention backward's dS tile, written by stmatrix and read by the
# mma.sync dQ gemm: its loop barrier needs no fence.proxy.async, MEMBAR.ALL.CTA included)
_GENERIC_MMA = re.compile(r"^\s*tl::(gemm_ss|gemm_rs|stmatrix_pack)\s*<[^;]*;\s*$")


def async_reach(body, plan=None, generic_only: bool = False, mma_generic: bool = False,
                bytewise: bool = False) -> set | None:
    """Uids of the shared buffers (and of their aliases) the async proxy may touch: named by an inline statement
    (its reads, writes, arguments or text), or sharing bytes with one in `plan` (a SmemPlan). None
    (every buffer) where a shared buffer has no slot in a given plan. `bytewise`: a plain copy_vecN
    is generic-proxy code too, and only a slot sharing bytes with a named one is added (a tile that
    overlaps such a slot only where no named tile lies -- a packed B ring under the output tile
    that also covers a wgmma operand -- is not: no async access reaches those bytes)."""
    shared = {b for a in collect(body, lambda n: isinstance(n, S.Allocate)) for b in (a.buffer,)
              if b.scope in ("shared", "shared.dyn")}
    raws = collect(body, lambda n: isinstance(n, Raw))
    handed = lambda n: isinstance(n, E.Call) and (n.op == "address_of" or n.op.startswith("extern:"))  # noqa: E731
    skip: set = set()
    if generic_only:
        generic = lambda r: (_GENERIC_ONLY.match(r.fmt) or (mma_generic and _GENERIC_MMA.match(r.fmt))  # noqa: E731
                             or (bytewise and _PLAIN_COPY.match(r.fmt)))
        skip = {id(c) for r in raws if generic(r) for c in collect(r, handed)}
        raws = [r for r in raws if not generic(r)]
    named: set = set()
    for r in raws:
        _buffers_in((r.reads, r.writes, r.args), named)
    for c in collect(body, handed):
        if id(c) not in skip:
            _buffers_in(c.args, named)  # an address handed to other code: whatever that code does with it
    text = "\n".join(r.fmt for r in raws)
    every: set = set()
    _buffers_in(body, every)
    reach = {_storage(b) for b in named if b.scope in ("shared", "shared.dyn")}
    reach |= {_storage(b) for b in shared | every
              if b.scope in ("shared", "shared.dyn") and re.search(rf"\b{re.escape(b.name)}\b", text)}
    if plan is not None:
        slots = {s.uid: s for s in plan.slots}
        if any(_storage(b) not in slots for b in shared):
            return None
        reach = _overlapping(reach, plan, transitive=not bytewise)
    # the uids statements name a write by (accesses(): a T.view alias's base, a stage window
    # itself) for every buffer whose memory is reachable
    return reach | {u for b in every if _storage(b) in reach for u in (b.uid, getattr(b, "view_base", b).uid)}


def _overlapping(reach: set, plan, transitive: bool = True) -> set:
    """reach plus the slots of `plan` whose bytes overlap a reachable slot's (transitive: also those
    overlapping an added slot, and so on; else only the named slots' bytes count)."""
    slots = {s.uid: s for s in plan.slots}
    named = set(reach)
    reach = set(reach)
    changed = True
    while changed:  # bytes shared with a reachable buffer are reachable
        changed = False
        for s in plan.slots:
            if s.uid in reach or not s.nbytes:
                continue
            if any(r in slots and slots[r].offset < s.offset + s.nbytes and s.offset < slots[r].offset + slots[r].nbytes
                   for r in (reach if transitive else named)):
                reach.add(s.uid)
                changed = transitive
    return reach


def _walk(st, dirty: bool, reach=None, lands: bool = False):
    """(statement with fences placed, dirty after it) for entry state `dirty`."""
    if _is_barrier(st):
        pre = st.fmt[: st.fmt.index(_BARRIER)]
        before = dirty or (bool(pre.strip()) and _dirties(replace(st, fmt=pre), reach, lands, st))
        fmt = st.fmt.replace(_BARRIER, _FENCED, 1) if before and _FENCED not in st.fmt else st.fmt
        after = st.fmt[st.fmt.index(_BARRIER) + len(_BARRIER):]
        return replace(st, fmt=fmt), bool(after.strip()) and _dirties(replace(st, fmt=after), reach, lands, st)
    if not collect(st, _is_barrier):
        return st, dirty or _dirties(st, reach, lands)
    if isinstance(st, S.SeqStmt):
        out = []
        for x in st.stmts:
            x, dirty = _walk(x, dirty, reach, lands)
            out.append(x)
        return replace(st, stmts=tuple(out)), dirty
    if isinstance(st, S.For):
        _, end = _walk(st.body, dirty, reach, lands)
        entry = dirty or end  # the back edge: the next iteration starts as this one ended
        body, end = _walk(st.body, entry, reach, lands)
        return replace(st, body=body), entry or end
    if isinstance(st, S.IfThenElse):
        then, d1 = _walk(st.then_case, dirty, reach, lands)
        other, d2 = _walk(st.else_case, dirty, reach, lands) if st.else_case is not None else (None, dirty)
        return replace(st, then_case=then, else_case=other), d1 or d2
    if isinstance(st, WSSplit):  # producer and consumer threads each start as the kernel did
        prod, d1 = _walk(st.producer, dirty, reach, lands)
        cons, d2 = _walk(st.consumer, dirty, reach, lands)
        return replace(st, producer=prod, consumer=cons), d1 or d2
    if hasattr(st, "body") and isinstance(st.body, S.Stmt):  # kernel launch, T.ws scope, ...
        body, d = _walk(st.body, dirty, reach, lands)
        return replace(st, body=body), d
    return _fence_all(st), True  # unknown shape: every barrier keeps its fence


class _FenceAll(Mutator):
    def visit_Raw(self, r):
        return replace(r, fmt=r.fmt.replace(_BARRIER, _FENCED, 1)) if _is_barrier(r) and _FENCED not in r.fmt else r


def _fence_all(st):
    return _FenceAll().visit(st)


def place_proxy_fences(body, plan=None, all_writes: bool = False, groups: bool = True, mma_generic: bool = True,
                       bytewise: bool = True):
    """`body` with `tl::fence_proxy_async();` before each barrier that follows a generic shared write
    of memory the async proxy may reach (`plan`: the kernel's SmemPlan; `all_writes`: any write;
    `groups`: a cp.async wait dirties only when the groups it drains hold such memory, and a tile
    only ever named by generic-proxy inline code is not reachable through it; `mma_generic`: with
    groups, mma.sync gemms and stmatrix stores count as such code; `bytewise`: with groups, plain
    copy_vecN copies too, and only bytes a named tile covers are reachable, see async_reach)."""
    reach = None if all_writes else async_reach(body, plan, generic_only=groups, mma_generic=mma_generic,
                                                bytewise=bytewise)
    lands = cp_async_lands(body, reach)
    if lands and groups:
        lands = wait_lands(body)
    return _walk(body, False, reach, lands)[0]
