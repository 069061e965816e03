"""Multi-stage software pipelining of T.Pipelined loops with cp.async (sm_80+).

Expects: tile-level IR; a `T.Pipelined(n, num_stages=S)` loop (S >= 2) whose body starts
with T.copy ops global -> shared that can use 16-byte cp.async, followed by compute.
Guarantees: each copied shared tile gets S buffers; copies for iteration ko + S - 1 are
in flight while iteration ko computes; the wait + barrier before each iteration makes the
stage it reads complete and visible, and orders the refill after the previous readers.

    for ko in T.Pipelined(n, num_stages=3):      prologue: issue stages 0, 1 (commit each)
        T.copy(A[.., ko*32], A_s)          ->    for ko in range(n):
        T.gemm(A_s, B_s, C)                          wait_group<1>; __syncthreads()
                                                     A_r = A_st + (ko % 3) * |A_s|; A_w = A_st + ((ko + 2) % 3) * |A_s|
                                                     if ko + 2 < n: T.copy(A[.., (ko+2)*32], A_w)   (async)
                                                     commit; T.gemm(A_r, B_r, C)

T.copy ops global -> shared right before the loop (an attention block's Q) join the prologue as
one more commit group, so their loads overlap stage 0's (`join_prologues`).

Also here: the k serpentine of one-block-per-SM kernels (`_wave_reverse`: blocks of odd waves
load their k-slices last first) and the staged epilogue (`stage_epilogue`: the final copy of
the accumulator goes out through a swizzled window onto a stage's storage, in 16-byte vectors).
"""
from __future__ import annotations

import re
from dataclasses import replace

from ... import dtypes as dt
from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...ir.visitor import Mutator, ReplaceBuffers, buffers_used, collect, substitute
from ...op import hopper as H
from ...op import tile_ops as O
from .lower_tile_ops import Raw, copy_vector_width
from .raise_copies import element_copy as _element_copy, store_of as _store_of
from .wgmma_inflight import inflight_gemms

_DRAIN = "tl::cp_async_wait<0>(); __syncthreads();"  # after a pipelined loop: every stage landed and read


class _Pipeline(Mutator):
    def __init__(self, warn, reverse=None, smem_bytes=0, smem_limit=0, issue_first=False, one_wave=False,
                 inflight_threads=0):
        self.warn = warn
        self.inflight_threads = inflight_threads  # > 0: wgmma batches may stay in flight (wgmma_inflight.py)
        self.single_stage = False  # num_stages=1 loops with two reader groups or more are pipelined too
        self.join_past_registers = False  # copies before a loop join its prologue past register-only statements
        self.one_wave = one_wave  # the grid fits in one wave of one block per SM (see _later_producers)
        self.peel_tail = False  # issue-first loops of a constant trip count peel their last S - 1 iterations
        self.issue_first = issue_first  # refill before the wait (see visit_For)
        self.smem_limit = smem_limit  # a block's shared memory; 0: stage T.copy ops only (no element copies)
        self.smem_bytes = smem_bytes  # shared memory the kernel declares, stages included as they are made
        self.reverse = reverse  # (loop var, condition): that loop's loads walk k backwards where it holds
        self.pipelined: dict = {}  # id of a statement that replaced a pipelined loop -> tiles read before its first wait
        self.top = None  # the kernel's body: copies before its pipelined loops join their prologues
        self.views: list = []  # (storage, read_view, write_view)
        self.allocs: dict = {}  # original uid -> storage Buffer

    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        s = replace(s, body=body) if body is not s.body else s
        stages = s.annotation("num_stages", 0) or 0
        # num_stages=1 on sm_90: one buffer per tile, refilled for the next iteration right after its
        # last reader (_split_schedule)
        if s.kind != "pipelined" or stages < (1 if self.single_stage else 2):
            return s
        stmts = list(body.stmts) if isinstance(body, S.SeqStmt) else [body]
        # tiles declared (and laid out) at the top of the body: declared before the loop instead,
        # so the copies after them can be its stages (an Allocate holds no value to keep per iteration)
        lead = []
        while stmts and (isinstance(stmts[0], O.AnnotateLayout) or (
                isinstance(stmts[0], S.Allocate) and stmts[0].init is None
                and stmts[0].buffer.scope in ("shared", "shared.dyn", "fragment"))):
            lead.append(stmts.pop(0))
        # a body that is one `if` on the iteration (block-sparse GEMM: `if mask[by, bx, k]: copies; gemm`):
        # the copies for iteration k + S - 1 are issued under the condition at k + S - 1, the rest under
        # the condition at k; every iteration still commits one group, so the wait depth holds
        when = _guarded_body(stmts, s.var) if self.reverse is None or self.reverse[0] is not s.var else None
        if when is not None:
            when, stmts = when
        producers = []
        while stmts and _global_to_shared(stmts[0]):
            producers.append(stmts.pop(0))
        if all(copy_vector_width(p)[0] > 1 for p in producers if isinstance(p, O.Copy)):
            later = _later_producers(stmts, producers, stages, self.smem_bytes, self.warn, self.smem_limit,
                                     self.one_wave)
            producers += later
            stmts = [st for st in stmts if not any(st is p for p in later)]
            self.smem_bytes += (stages - 1) * sum(_tile_bytes(_dst(p)) for p in later)
        if stages < 2 and not producers:
            return s
        if not producers:
            self.warn(f"T.Pipelined(num_stages={stages}) runs unpipelined: its body does not start with "
                      "global -> shared T.copy ops, and no later copy (T.copy or T.Parallel element copy) can "
                      "be staged (its tile is used before it, written elsewhere, or its source reads values "
                      "the body computes)")
            return s
        for p in (p for p in producers if isinstance(p, O.Copy)):  # an Im2Col is always made of vectors
            vec, why = copy_vector_width(p)
            if vec == 1:
                self.warn(f"T.Pipelined(num_stages={stages}) runs unpipelined: T.copy {p.src.buffer.name} -> "
                          f"{p.dst.buffer.name} cannot use 4-, 8- or 16-byte cp.async ({why})")
                return s
            if why:
                self.warn(f"T.Pipelined: T.copy {p.src.buffer.name} -> {p.dst.buffer.name} uses "
                          f"{vec * p.src.buffer.dtype.bytes}-byte cp.async, not 16-byte ({why})")
        if stages < 2 and (not self.issue_first or when is not None or _reader_groups(stmts, producers, 1) is None):
            return s
        n = s.extent
        read_map, write_map, sets = {}, {}, []
        for p in producers:
            x = _dst(p)
            if x.uid in read_map:
                continue
            prev = [v for v in self.views if v[0] is x]
            if prev:  # a tile pipelined by an earlier loop keeps its stages and views
                _, storage, rv, wv = prev[0]
                if storage.shape[0] != stages * (x.numel() // const_int(x.shape[-1])):
                    self.warn(f"T.Pipelined runs unpipelined: {x.name} is pipelined by another loop with a "
                              "different num_stages")
                    return s
                read_map[x.uid], write_map[x.uid] = rv, wv
                sets.append((storage, rv, wv, x.numel()))
                continue
            rows = x.numel() // const_int(x.shape[-1])
            storage = Buffer(x.name + "_stages", (stages * rows, x.shape[-1]), x.dtype, "shared.dyn")
            rv = Buffer(x.name, x.shape, x.dtype, "shared.dyn")
            wv = Buffer(x.name + "_w", x.shape, x.dtype, "shared.dyn")
            for v in (rv, wv):
                v.view_of = storage
            self.allocs[x.uid] = storage
            read_map[x.uid], write_map[x.uid] = rv, wv
            self.views.append((x, storage, rv, wv))
            sets.append((storage, rv, wv, x.numel()))
        ko = s.var

        def issue(k_expr, guard, group=None):
            k_load = k_expr
            if self.reverse is not None and self.reverse[0] is ko:
                k_load = E.select(self.reverse[1], simplify(2 * s.start + n - 1 - k_expr), k_expr)
            mine = producers if group is None else group
            tiles = {id(read_map[_dst(p).uid]) for p in mine}
            ps = [ReplaceBuffers(write_map).visit(substitute(_async(p), {ko: k_load})) for p in mine]
            if when is not None:
                ps = [S.IfThenElse(substitute(when, {ko: k_load}), S.seq(*ps))]
            # stage of iteration k is (k - start) % stages, the same rule the readers use
            views = [Raw(f"{wv.name} = {st.name} + ({{0}}) * {numel};", (E.binop("%", k_expr - s.start, stages),))
                     for st, rv, wv, numel in sets if id(rv) in tiles]
            body_ = S.seq(*views, *ps)
            if guard is not True:
                body_ = S.IfThenElse(guard, body_)
            return S.seq(body_, Raw("tl::cp_async_commit();"))

        reads = [Raw(f"{rv.name} = {st.name} + ({{0}}) * {numel};", (E.binop("%", ko - s.start, stages),))
                 for st, rv, _, numel in sets]
        groups = _reader_groups(stmts, producers, 1 if stages < 2 else 2) \
            if self.issue_first and when is None else None
        if groups is not None:
            prologue, loop_body = _split_schedule(groups, stmts, read_map, reads, issue, ko, s.start, n, stages)
            loop = S.For(ko, s.start, s.extent, "serial", loop_body, (), span=s.span)
            out = S.seq(*lead, *prologue, loop, Raw(_DRAIN))
            # tiles the body touches before its first wait: a copy into one may not join the prologue
            self.pipelined[id(out)] = {b.uid for st in stmts[:min(g[0] for g in groups)]
                                       for b in buffers_used(st)}
            return out
        prologue = [issue(s.start + k, E.binop("<", E.as_expr(k), n)) for k in range(stages - 1)]
        inflight = inflight_gemms(stmts, self.inflight_threads, set(read_map)) \
            if self.inflight_threads and when is None else None
        if inflight is not None:
            stmts = [replace(st, wg_wait=1) if any(st is g for g in inflight) else st for st in stmts]
        rest = ReplaceBuffers(read_map).visit(S.seq(*stmts))
        if when is not None:
            rest = S.IfThenElse(when, rest)
        ahead = ko + (stages - 1)
        if inflight is not None:
            # gemm(ko) leaves its batch in flight and completes ko - 1's; after the barrier no warpgroup
            # reads the stage of ko - 1, which the refill overwrites while the tensor cores run ko
            loop_body = S.seq(
                Raw(f"tl::cp_async_wait<{stages - 2}>(); __syncthreads();"),
                *reads,
                rest,
                Raw("__syncthreads();"),
                issue(ahead, E.binop("<", ahead - s.start, n)))
            loop = S.For(ko, s.start, s.extent, "serial", loop_body, (), span=s.span)
            out = S.seq(*lead, *prologue, loop, H.WaitWgmma(0, span=s.span), Raw(_DRAIN))
            self.pipelined[id(out)] = set()  # the body starts with its wait
            return out
        if self.issue_first and self.peel_tail and when is None and const_int(n) is not None \
                and const_int(n) >= stages:
            return self.peeled(s, lead, prologue, issue, reads, rest, ahead)
        if self.issue_first:
            # the refill of the stage iteration ko - 1 read goes out before the wait for ko's stage,
            # so S loads are in flight while the block waits (S - 1 the other way round), for one
            # more barrier per iteration: latency-bound loops (few blocks, short k-steps) gain most
            loop_body = S.seq(
                Raw("__syncthreads();"),
                issue(ahead, E.binop("<", ahead - s.start, n)),
                Raw(f"tl::cp_async_wait<{stages - 1}>(); __syncthreads();"),
                *reads,
                rest)
        else:
            loop_body = S.seq(
                Raw(f"tl::cp_async_wait<{stages - 2}>(); __syncthreads();"),
                *reads,
                issue(ahead, E.binop("<", ahead - s.start, n)),
                rest)
        loop = S.For(ko, s.start, s.extent, "serial", loop_body, (), span=s.span)
        out = S.seq(*lead, *prologue, loop, Raw(_DRAIN))
        self.pipelined[id(out)] = set()  # the body starts with its wait
        return out

    def peeled(self, s: S.For, lead, prologue, issue, reads, rest, ahead):
        """The issue-first loop of a constant trip count n >= S, its last S - 1 iterations peeled:
        the main loop refills unconditionally (no `if (ko + S - 1 < n)` per iteration), the tail
        issues nothing, so it needs no barrier before its wait. Groups complete in order, so at
        tail iteration j of S - 1 the stage it reads is complete once at most S - 2 - j groups are
        pending: S = 2 waits for all; S > 2 keeps one loop with an empty commit per iteration so
        the constant depth S - 1 holds, as the guarded loop does."""
        stages, ko = s.annotation("num_stages"), s.var
        main = const_int(s.extent) - (stages - 1)
        loop_body = S.seq(
            Raw("__syncthreads();"),
            issue(ahead, True),
            Raw(f"tl::cp_async_wait<{stages - 1}>(); __syncthreads();"),
            *reads,
            rest)
        loop = S.For(ko, s.start, E.as_expr(main), "serial", loop_body, (), span=s.span)
        kt = E.Var(ko.name, ko.dtype)
        wait = Raw("tl::cp_async_wait<0>(); __syncthreads();") if stages == 2 else \
            S.seq(Raw("tl::cp_async_commit();"), Raw(f"tl::cp_async_wait<{stages - 1}>(); __syncthreads();"))
        tail_body = substitute(S.seq(wait, *reads, rest), {ko: kt})
        tail = S.For(kt, simplify(s.start + main), E.as_expr(stages - 1), "serial", tail_body, (), span=s.span)
        out = S.seq(*lead, *prologue, loop, tail, Raw(_DRAIN))
        self.pipelined[id(out)] = set()  # the body starts with its barrier and refill
        return out

    def visit_SeqStmt(self, s: S.SeqStmt):
        stmts = [self.visit(x) for x in s.stmts]
        if self.smem_limit and s is self.top:
            stmts = self.join_prologues(stmts)
        same = len(stmts) == len(s.stmts) and all(a is b for a, b in zip(stmts, s.stmts))
        return s if same else replace(s, stmts=tuple(stmts))

    def join_prologues(self, stmts: list) -> list:
        """T.copy ops global -> shared right before a pipelined loop (Q of an attention block) are
        issued as one more cp.async group ahead of the loop's prologue instead of waiting for
        themselves: groups complete in order, so the wait before the first iteration, which
        completes stage 0, completes them too (and the drain after the loop, if it runs no
        iteration). Nothing runs between them and the loop but, with `join_past_registers`,
        statements that touch no shared memory and none of the copies' tensors."""
        out = list(stmts)
        for st in stmts:
            if id(st) not in self.pipelined:
                continue
            i = next(k for k, x in enumerate(out) if x is st)  # earlier joins inserted commits
            j, copies = i, []
            while j > 0 and (_joinable(out[j - 1], self.allocs) or self.join_past_registers
                             and _passable(out[j - 1])):
                j -= 1
                if _joinable(out[j], self.allocs):
                    copies.insert(0, j)
            copies = _unread_between(out, copies, i)
            j = copies[0] if copies else i  # the run starts at its first copy
            # NOTE: the copies' writes are not seen by barrier insertion (a pipeline's are not): no
            # statement before them may touch their tiles, and they are in no loop (the kernel's top)
            decls = (S.Allocate, O.AnnotateLayout)
            before = {b.uid for b in buffers_used(S.seq(*[x for x in out[:j] if not isinstance(x, decls)]))}
            keep = [c for c in copies if out[c].dst.buffer.uid not in before | self.pipelined[id(st)]]
            if copies and len(keep) == len(copies):
                for c in copies:
                    out[c] = replace(out[c], async_group=True)
                out.insert(copies[-1] + 1, Raw("tl::cp_async_commit();"))
        return out

    def visit_Allocate(self, a: S.Allocate):
        return a


def pipeline_kernel(k: S.KernelLaunch, warn, num_sms: int | None = None,
                    smem_limit: int = 0, issue_first: bool = False, sms: int | None = None,
                    wgmma_inflight: bool = False, single_stage: bool = False,
                    join_past_registers: bool = False, peel_tail: bool = False) -> tuple[S.KernelLaunch, list]:
    """num_sms: walk k backwards in the blocks of every other wave (see `_wave_reverse`).
    smem_limit: a block's shared memory in bytes; with it, T.Parallel element copies (row gathers)
    and copies after register-only statements are staged too while the stages fit (0: not).
    issue_first: each iteration refills a stage before it waits for its own (barrier, issue,
    wait<S - 1>, barrier, compute) instead of after (wait<S - 2>, barrier, issue, compute): one
    more load in flight, one more barrier. Not for loops fuse_mma_mainloops rewrites (it expects
    the wait first). sms: the GPU's SMs; a constant grid of at most that many blocks may stage
    later copies past the occupancy rule (see _later_producers). wgmma_inflight: a loop whose gemms
    may keep their wgmma batch in flight (wgmma_inflight.py) refills a stage after its gemms, beside
    their batch, instead of before its wait (sm_90a). single_stage: with issue_first, a num_stages=1
    loop whose staged tiles have two first readers or more keeps one buffer per tile, refilled for the
    next iteration right after the tile's last reader (the gemm on the next tile runs beside the load).
    join_past_registers: T.copy ops before a loop join its prologue across statements that touch no
    shared memory (`T.fill(acc_o, 0)` between Q's copy and the loop), see `join_prologues`.
    peel_tail: with issue_first, a loop of a constant trip count runs its last S - 1 iterations after
    the loop, without refills, so the loop's refill needs no guard (see `_Pipeline.peeled`)."""
    rev = _wave_reverse(k, num_sms) if num_sms else None
    smem = sum(a.buffer.numel() * a.buffer.dtype.bytes for a in collect(k.body, lambda n: isinstance(n, S.Allocate))
               if a.buffer.scope in ("shared", "shared.dyn") and const_int(a.buffer.numel()) is not None)
    blocks = 1
    for g in k.grid:
        blocks = None if blocks is None or const_int(g) is None else blocks * const_int(g)
    one_wave = sms is not None and blocks is not None and blocks <= sms
    threads = k.threads[0] * k.threads[1] * k.threads[2] if wgmma_inflight else 0
    p = _Pipeline(warn, rev[:2] if rev else None, smem, smem_limit, issue_first, one_wave, threads)
    p.single_stage = single_stage and issue_first
    p.join_past_registers = join_past_registers
    p.peel_tail = peel_tail and issue_first
    p.top = k.body
    body = p.visit(k.body)
    if not p.views:
        return k, []
    if rev is not None:
        body = S.seq(rev[2], body)
    return replace(k, body=_StageAllocs(p).visit(body)), p.views


def _reader_groups(stmts: list, producers: list, least: int = 2):
    """[(first reader, last reader, producers)] in issue order (by last reader), one group per
    first reader of the staged tiles among the body's statements; None unless the tiles have
    `least` first readers or more (all read by one statement: one group, nothing to gain over the
    plain schedule; at num_stages=1 one group is the schedule: refill after the last reader)."""
    uses = [{b.uid for b in buffers_used(st)} for st in stmts]
    by_first: dict = {}
    for p in producers:
        at = [i for i, u in enumerate(uses) if _dst(p).uid in u]
        if not at:
            return None
        g = by_first.setdefault(at[0], [at[-1], []])
        g[0] = max(g[0], at[-1])
        g[1].append(p)
    if len(by_first) < least:
        return None
    return sorted(((f, last, ps) for f, (last, ps) in by_first.items()), key=lambda g: g[1])


def _split_schedule(groups, stmts, read_map, reads, issue, ko, start, n, stages):
    """(prologue, loop body) with one cp.async group per reader group: stages 0..S-1 issued ahead,
    each group waited for (wait + barrier) right before its first reader and refilled for iteration
    ko + S right after its last reader (barrier, issue, commit), so a gemm on K does not wait for V
    and up to S loads of each tile are in flight. A group's wait depth counts the groups committed
    after it: those issued after it in its iteration, S - 1 whole iterations, and those issued
    before its first reader in the iteration that reads it; the prologue commits in the same order."""
    count = len(groups)
    prologue = [issue(start + k, E.binop("<", E.as_expr(k), n), ps)
                for k in range(stages) for _, _, ps in groups]
    waits, refills = {}, {}
    for i, (first, last, ps) in enumerate(groups):
        depth = (count - 1 - i) + (stages - 1) * count + sum(1 for _, l2, _ in groups if l2 < first)
        waits.setdefault(first, []).append(depth)
        refills.setdefault(last, []).append(ps)
    ahead = ko + stages
    body = list(reads)
    for i, st in enumerate(stmts):
        if i in waits:
            body.append(Raw(f"tl::cp_async_wait<{min(waits[i])}>(); __syncthreads();"))
        body.append(ReplaceBuffers(read_map).visit(st))
        if i in refills:
            body.append(Raw("__syncthreads();"))  # every thread is done reading the stage it refills
            body += [issue(ahead, E.binop("<", ahead - start, n), ps) for ps in refills[i]]
    return prologue, S.seq(*body)


def _written(st) -> set:
    """uids of the buffers `st` stores to or a tile op in it writes (its dst)."""
    out = {n.buffer.uid for n in collect(st, lambda n: isinstance(n, S.BufferStore))}
    return out | {n.dst.buffer.uid for n in collect(st, lambda n: isinstance(n, O.TileOp)
                                                    and isinstance(getattr(n, "dst", None), BufferRegion))}


def _guarded_body(stmts: list, ko: E.Var):
    """(condition, the branch's statements) for a body that is one `if` (no else) whose branch starts
    with a global -> shared copy and whose condition reads nothing the body writes; else None."""
    if len(stmts) != 1 or not isinstance(stmts[0], S.IfThenElse) or stmts[0].else_case is not None:
        return None
    st = stmts[0]
    inner = list(st.then_case.stmts) if isinstance(st.then_case, S.SeqStmt) else [st.then_case]
    if not inner or not _global_to_shared(inner[0]):
        return None
    written = _written(st.then_case)
    if any(n.buffer.uid in written for n in collect(st.cond, lambda n: isinstance(n, E.BufferLoad))):
        return None
    return st.cond, inner


def _global_to_shared(st) -> bool:
    return isinstance(st, (O.Copy, O.Im2Col)) and st.src.buffer.scope == "global" \
        and st.dst.buffer.scope in ("shared", "shared.dyn")


_LATER_SMEM = 99 * 1024  # later copies get stages while the kernel's declared shared memory stays under this
_SMEM_MARGIN = 4096  # room below a block's limit for what plan_smem adds (alignment, staging windows)


def same_occupancy(smem: int, grown: int, limit: int) -> bool:
    """Growing a kernel's shared memory from `smem` to `grown` bytes keeps it within a block's `limit`
    (less a margin) and keeps the number of blocks an SM can hold by shared memory (an SM holds
    `limit` + 1 KB, and each block reserves 1 KB more: sm_80's 163 KB, sm_90's 227 KB). A kernel
    already at one block per SM (flash attention's GQA backward at 123 KB) stages its later copies."""
    if grown + _SMEM_MARGIN > limit:
        return False
    per_sm = limit + 1024
    return per_sm // (grown + 1024) == per_sm // (smem + 1024)


def _joinable(st, staged: dict) -> bool:
    """A synchronous T.copy global -> shared in cp.async vectors into a tile no loop stages."""
    return isinstance(st, O.Copy) and _global_to_shared(st) and not st.async_group \
        and st.dst.buffer.uid not in staged and getattr(st.dst.buffer, "view_of", None) is None \
        and copy_vector_width(st)[0] > 1


def _passable(st) -> bool:
    """A statement that copies joined to a prologue may pass (they land at the loop's first wait
    instead of their own): it touches no shared memory (fills of register tiles, lets)."""
    return isinstance(st, (S.LetStmt, S.Allocate, O.AnnotateLayout)) or _registers_only(st) \
        and not collect(st, lambda n: isinstance(n, Raw))


def _unread_between(stmts: list, copies: list, end: int) -> list:
    """The copies (indices into `stmts`, a run ending at `end`) from the last one whose source or tile
    a later statement of the run uses: a copy may not pass a statement that touches what it reads
    or writes."""
    keep = []
    for c in reversed(copies):
        mine = {stmts[c].src.buffer.uid, stmts[c].dst.buffer.uid}
        if any(mine & {b.uid for b in buffers_used(x)} for x in stmts[c + 1:end] if not _joinable(x, {})):
            break
        keep.insert(0, c)
    return keep


def _dst(p) -> Buffer:
    """The shared tile a producer (T.copy, T.im2col or element copy) fills."""
    return p.dst.buffer if isinstance(p, O.TileOp) else _store_of(p).buffer


def _tile_bytes(x: Buffer) -> int:
    return x.numel() * x.dtype.bytes


def _async(p):
    """The producer as a pipeline stage: completed by the pipeline's wait + barrier."""
    if isinstance(p, S.For):
        return replace(p, annotations=p.annotations + (("async_copy", True),))
    return replace(p, async_group=True)


def _registers_only(st) -> bool:
    """Touches no shared memory (a mask loaded into a fragment): a staged copy may move past it."""
    return not any(b.scope in ("shared", "shared.dyn") for b in buffers_used(st))


def _later_producers(stmts: list, producers: list, stages: int, smem: int, warn=None, limit: int = 0,
                     one_wave: bool = False) -> list:
    """Global -> shared copies further down the body that can join the stage group (issued
    `stages - 1` iterations ahead): nothing in the body before them uses their tile, nothing else
    writes it, and their source reads nothing the body computes or writes (flash attention's
    backward: dO, lse and Delta after the first gemm). With `limit` (a block's shared memory),
    T.Parallel element copies count too, and a copy preceded only by staged copies and
    register-only statements (sparse MLA: a mask loop, then the KV row gathers) is staged while
    the kernel fits in `limit`, as copies at the top of the body are; others while it stays under
    _LATER_SMEM, or while an SM holds as many of its blocks as before (same_occupancy), or, with
    `one_wave` (the grid has no more blocks than the GPU has SMs), while the block fits: how many
    blocks an SM could hold does not matter then (flash decoding's split kernel: 64 blocks, V).
    A later copy that cannot join stays where it is, synchronous, and `warn` says why."""

    def keep(st, why):
        if warn is not None:
            if isinstance(st, O.Copy):
                name = f"T.copy {st.src.buffer.name} -> {st.dst.buffer.name}"
            elif isinstance(st, S.For):
                name = f"the T.Parallel element copy into {_dst(st).name}"
            else:
                name = f"T.im2col into {st.dst.buffer.name}"
            warn(f"T.Pipelined(num_stages={stages}): {name} stays a synchronous copy: {why}")

    body = S.seq(*stmts)
    bound = {st.var for st in collect(body, lambda n: isinstance(n, (S.LetStmt, S.For)))}
    written = _written(body)
    taken = {_dst(p).uid for p in producers}
    out = []
    for i, st in enumerate(stmts):
        elem = bool(limit) and _element_copy(st)
        if not (_global_to_shared(st) or elem) or _dst(st).uid in taken:
            continue
        x = _dst(st)
        if isinstance(st, O.Copy) and copy_vector_width(st)[0] == 1:
            keep(st, f"it cannot use 4-, 8- or 16-byte cp.async ({copy_vector_width(st)[1]})")
            continue
        if any(b.uid == x.uid for b in buffers_used(S.seq(*stmts[:i]))):
            keep(st, f"the body uses {x.name} before it")
            continue
        own = _store_of(st) if elem else None
        others = [n for n in collect(body, lambda n: isinstance(n, O.TileOp) and hasattr(n, "dst")
                                     and getattr(getattr(n, "dst", None), "buffer", None) is x) if n is not st]
        stores = [n for n in collect(body, lambda n: isinstance(n, S.BufferStore)) if n.buffer.uid == x.uid
                  and n is not own]
        if others or stores:
            keep(st, f"the body also writes {x.name}")
            continue
        where = st.src if isinstance(st, O.Copy) else own if elem else st  # an Im2Col's block coordinates too
        mine = {n.var for n in collect(st, lambda n: isinstance(n, S.For))} if elem else set()
        src_vars = set(collect(where, lambda n: isinstance(n, E.Var))) - mine
        src_reads = {n.buffer.uid for n in collect(where, lambda n: isinstance(n, E.BufferLoad))}
        src = own.value if elem else st.src
        src_buf = (src.a if isinstance(src, E.Select) else src).buffer if elem else st.src.buffer
        if src_vars & (bound - mine) or src_reads & written or src_buf.uid in written:
            keep(st, "its source reads values the body computes or writes")
            continue
        lead = bool(limit) and all(any(s_ is p for p in out) or _registers_only(s_) for s_ in stmts[:i])
        cap = limit if lead else _LATER_SMEM
        size = _tile_bytes(x)
        grown = smem + (stages - 1) * size
        top = (stages - 1) * sum(_tile_bytes(_dst(p)) for p in producers)  # the leading copies' stages
        fits = one_wave and grown + top + _SMEM_MARGIN <= limit
        if grown > cap and not (limit and (fits or same_occupancy(smem + top, grown + top, limit))):
            keep(st, f"its {stages} stages would take the kernel's shared memory past {cap // 1024} KB")
            continue
        smem += (stages - 1) * size
        taken.add(x.uid)
        out.append(st)
    return out


class _StageAllocs(Mutator):
    """The stages' storage and its read / write views replace the allocation of each pipelined
    tile, wherever it is declared (the kernel's top, or just before its loop), and take its
    T.annotate_layout (a swizzle the tile was given holds for every stage)."""

    def __init__(self, p: _Pipeline):
        self.p = p

    def visit_AnnotateLayout(self, op: O.AnnotateLayout):
        views = {orig.uid: (rv, wv) for orig, _stg, rv, wv in self.p.views}
        if not any(b.uid in views for b, _ in op.layouts):
            return op
        out = []
        for b, lay in op.layouts:
            out += [(v, lay) for v in views[b.uid]] if b.uid in views else [(b, lay)]
        return replace(op, layouts=tuple(out))

    def visit_Allocate(self, st: S.Allocate):
        x = st.buffer
        if x.uid not in self.p.allocs:
            return st
        out = [S.Allocate(self.p.allocs[x.uid], span=st.span)]
        for orig, _stg, rv, wv in self.p.views:
            if orig is x:
                out += [S.Allocate(rv), S.Allocate(wv)]
        return S.seq(*out)


# ----------------------------------------------------------------------------- mma.sync mainloop
_VIEW_RE = re.compile(r"^(\w+) = (\w+) \+ \(\{0\}\) \* (\d+);$")
_GEMM_RE = re.compile(r"^tl::gemm_ss<(\d+), (\d+), (\d+), ([^>]*)>\(\{0\}, \{1\}, \{2\}\);$")
_WAIT_RE = re.compile(r"^tl::cp_async_wait<(\d+)>\(\); __syncthreads\(\);$")


def fuse_mma_mainloops(body: S.Stmt) -> S.Stmt:
    """Lowered IR: a cp.async-pipelined loop whose compute is one mma.sync gemm_ss on the staged
    tiles becomes the register-double-buffered mainloop (tl::gemm_ss_pipe): the stage wait and
    barrier move from the loop top into the gemm's last K slice, after which it loads the next
    stage's first fragments. The stage views rotate (`X_w = X; X = tl_X_next;` at the bottom):
    the loop computes only the next stage's address. Loops of any other shape are left as they are."""
    counter = [0]

    def rewrite(stmts: list) -> list:
        out = []
        for st in stmts:
            fused = _fuse(st, out, counter) if isinstance(st, S.For) else None
            if fused is None:
                out.append(_recurse(st, rewrite))
            else:
                out.extend(fused)
        return out

    return _recurse(body, rewrite)


def _recurse(st, rewrite):
    if isinstance(st, S.SeqStmt):
        return S.seq(*rewrite(list(st.stmts)))
    if isinstance(st, S.KernelLaunch):
        return replace(st, body=_recurse(st.body, rewrite))
    if isinstance(st, S.Allocate) and getattr(st, "body", None) is not None:
        return replace(st, body=_recurse(st.body, rewrite))
    return st


def _fuse(loop: S.For, before: list, counter: list):
    """[state decl, stage-0 wait + views + preload, fused loop] or None."""
    stmts = list(loop.body.stmts) if isinstance(loop.body, S.SeqStmt) else [loop.body]
    if len(stmts) < 3 or not all(isinstance(x, Raw) for x in (stmts[0], stmts[-1])):
        return None
    wait = _WAIT_RE.match(stmts[0].fmt)
    gemm = _GEMM_RE.match(stmts[-1].fmt)
    # gemm_ss_pipe takes an even number of K slices: 2 x 16 (16-bit), 2 x 32 (int8; int4 / uint4 bytes)
    byte_k = "int8_t" in gemm.group(4) or "int4x2_t" in gemm.group(4) if gemm is not None else False
    if wait is None or gemm is None or int(gemm.group(3)) % (64 if byte_k else 32):
        return None
    views = {}  # read view name -> (storage name, numel, stage expr)
    i = 1
    while i < len(stmts) - 1 and isinstance(stmts[i], Raw) and _VIEW_RE.match(stmts[i].fmt):
        m = _VIEW_RE.match(stmts[i].fmt)
        views[m.group(1)] = (m.group(2), int(m.group(3)), stmts[i].args[0])
        i += 1
    a_addr, b_addr, c_addr = stmts[-1].args
    names = []
    for addr in (a_addr, b_addr):
        ld = addr.args[0] if isinstance(addr, E.Call) and addr.op == "address_of" else None
        if ld is None or ld.buffer.name not in views or any(const_int(x) != 0 for x in ld.indices):
            return None
        names.append(ld.buffer.name)
    middle = S.seq(*stmts[i:-1])
    read_bufs = {ld.buffer.name for ld in (a_addr.args[0], b_addr.args[0])}
    touched = {n.buffer.name for n in collect(middle, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore)))}
    if touched & read_bufs or any("__syncthreads" in r.fmt or "gemm" in r.fmt
                                  for r in collect(middle, lambda n: isinstance(n, Raw))):
        return None
    (sa, na, ea), (sb, nb, eb) = views[names[0]], views[names[1]]
    m, n, k = (int(gemm.group(g)) for g in (1, 2, 3))
    warps_m, warps_n = (int(x) for x in gemm.group(4).split(", ")[:2])
    threads = warps_m * warps_n * 32
    # Register budget: the double-buffered fragments stay live across the loop beside the
    # accumulator and the 64-bit source addresses of this thread's cp.async copies; past
    # about 255 registers ptxas spills and the fused loop loses to the plain one.
    words = (m // warps_m // 16) * 4 + (n // warps_n // 8) * 2
    copies = (na + nb) * 2 // 16 // threads
    if m * n // threads + 2 * words + 2 * copies + 40 > 255:
        return None
    ko = loop.var
    first = {ko: loop.start}
    nxt = {ko: ko + 1}
    targs = f"{gemm.group(1)}, {gemm.group(2)}, {gemm.group(3)}, {gemm.group(4)}"
    state = f"tl_mma_state{'' if counter[0] == 0 else counter[0]}"
    counter[0] += 1
    writes = _write_views(middle, views, ko, loop.start)
    prologue = [
        Raw(f"tl::GemmPipeState<{targs}> {state};"),
        Raw(stmts[0].fmt),
        *[Raw(r.fmt, tuple(substitute(a, first) for a in r.args)) for r in stmts[1:i]],
        Raw(f"tl::gemm_ss_preload<{targs}>({{0}}, {{1}}, {state});", (a_addr, b_addr)),
    ]
    if writes is None:
        call = Raw(f"tl::gemm_ss_pipe<{targs}, {wait.group(1)}>({{0}}, {{1}}, {{2}}, {sa} + ({{3}}) * {na}, "
                   f"{sb} + ({{4}}) * {nb}, {state});",
                   (a_addr, b_addr, c_addr, substitute(ea, nxt), substitute(eb, nxt)), reads=stmts[-1].reads)
        return prologue + [replace(loop, body=S.seq(*stmts[1:-1], call))]
    # Rotating views: iteration ko + 1 reads the stage ko called next and refills the one ko read
    # ((ko + S - 1) % S == ((ko - 1) % S)), so the loop computes one stage index, not three.
    nx = {r: f"tl_{r}_next" for r in views}
    call = Raw(f"tl::gemm_ss_pipe<{targs}, {wait.group(1)}>({{0}}, {{1}}, {{2}}, {nx[names[0]]}, {nx[names[1]]}, "
               f"{state});", (a_addr, b_addr, c_addr), reads=stmts[-1].reads)
    body = [Raw(f"auto* {nx[r]} = {st} + ({{0}}) * {n};", (substitute(e, nxt),)) for r, (st, n, e) in views.items()]
    body += [_DropRaws(set(writes.values())).visit(middle), call]
    body += [Raw(" ".join(f"{writes[st].fmt.split()[0]} = {r}; {r} = {nx[r]};" for r, (st, _, _) in views.items()))]
    prologue[-1:-1] = [Raw(w.fmt, tuple(substitute(a, first) for a in w.args)) for w in writes.values()]
    return prologue + [replace(loop, body=S.seq(*body))]


def _write_views(middle, views, ko, start):
    """{storage: the refill's `X_w = X_stages + (stage) * n` Raw} when each staged tile read by
    the loop has exactly one, refilling at ko + 1 the stage read at ko, else None."""
    out = {}
    reads = {st: e for st, _, e in views.values()}
    for r in collect(middle, lambda n: isinstance(n, Raw) and _VIEW_RE.match(n.fmt) is not None):
        st = _VIEW_RE.match(r.fmt).group(2)
        if st in out or st not in reads or not _rotates(r.args[0], reads[st], ko, start):
            return None
        out[st] = r
    return out if len(out) == len(views) else None


def _rotates(write, read, ko, start) -> bool:
    """write(ko + 1) == read(ko) over 16 iterations from a constant start (stages are at most 16)."""
    c = const_int(start)
    at = lambda e, k: const_int(simplify(substitute(e, {ko: E.as_expr(k)})))  # noqa: E731
    return c is not None and all(at(write, k + 1) is not None and at(write, k + 1) == at(read, k)
                                 for k in range(c, c + 16))


class _DropRaws(Mutator):
    def __init__(self, raws):
        self.raws = raws

    def visit(self, node):
        if isinstance(node, Raw):
            return S.seq() if any(node is r for r in self.raws) else node
        return super().visit(node)


def _wave_reverse(k: S.KernelLaunch, num_sms: int):
    """(loop var, condition, its LetStmt) making a one-block-per-SM kernel's plain k-reduction load its
    k-slices last first in the blocks of odd waves (blocks num_sms .. 2 * num_sms - 1 of the
    launch order, ...), as the persistent warp-specialized kernels do on odd tiles: a wave then
    starts on the k-slices the last wave read most recently, which L2 still holds. Launch
    order is blockIdx.y * gridDim.x + blockIdx.x, recovered from the block variables through
    the T.use_swizzle panels. None where it does not apply: more than two block variables, a
    loop that is not a plain reduction, a grid of one wave, or a kernel that may fit two
    blocks per SM (shared memory and accumulator registers decide), whose waves this order
    would split."""
    from .raster import panel_rank
    from .stream_k import plain_reduction
    from .warp_specialize import top_pipelined

    stmts, loops = top_pipelined(k.body)
    if len(loops) != 1 or not 1 <= len(k.block_vars) <= 2:
        return None
    loop = stmts[loops[0]]
    body = list(loop.body.stmts) if isinstance(loop.body, S.SeqStmt) else [loop.body]
    producers = [b for b in body if isinstance(b, O.Copy) and b.src.buffer.scope == "global"
                 and b.dst.buffer.scope in ("shared", "shared.dyn")]
    rest = [b for b in body if not any(b is p for p in producers)]
    gemms = collect(S.seq(*rest), lambda n: isinstance(n, O.Gemm))
    acc = plain_reduction(loop, rest, gemms, stmts[:loops[0]], k.block_vars)
    stages = loop.annotation("num_stages", 0) or 0
    T = k.threads[0] * k.threads[1] * k.threads[2]
    if acc is None or stages < 2:
        return None
    staged = stages * sum(p.dst.buffer.numel() * p.dst.buffer.dtype.bytes for p in producers)
    regs = acc.numel() * acc.dtype.bytes // 4 // T + 40  # accumulators and a floor for the rest
    if staged <= 116 * 1024 and T * regs <= 32768:
        return None
    blocks = 1
    for g in k.grid:
        blocks = blocks * E.as_expr(g)
    n = const_int(simplify(blocks))
    if n is not None and n <= num_sms:  # one wave
        return None
    gx = E.as_expr(k.grid[0])
    bx = k.block_vars[0]
    if len(k.block_vars) == 1:
        lin = bx
    else:
        by, gy = k.block_vars[1], E.as_expr(k.grid[1])
        swz = [op for op in collect(k.body, lambda n: isinstance(n, O.Swizzle)) if op.enable]
        if swz:
            lin = panel_rank(bx, by, gx, gy, swz[0].panel_size)
        else:
            lin = by * gx + bx
    rev = E.Var("tl_krev", dt.int32)  # 1 in the blocks of odd waves
    return loop.var, E.compare("==", rev, 1), S.LetStmt(rev, simplify((lin // num_sms) % 2))


# ----------------------------------------------------------------------------- staged epilogue
def stage_epilogue(k: S.KernelLaunch, views: list) -> S.KernelLaunch:
    """The kernel's final T.copy of a gemm accumulator to a 2-d 16-bit global tile, through a
    swizzled shared tile: the fragments' pair stores go to shared memory (conflict-free under the
    16-byte XOR swizzle), then the tile is copied out in 16-byte vectors, whole 128-byte lines
    per warp. Straight from registers, each warp store writes 16 bytes of 8 rows (half sectors).
    The staging tile is a window onto the storage of a pipelined tile of the same dtype that
    holds it (after the loop's drain and barrier nothing reads the stages), so it costs no
    shared memory; without such a storage the copy stays as it is.

        T.copy(C_l, C[by*128, bx*256])   ->   T.copy(C_l, C_stage); T.copy(C_stage, C[by*128, bx*256])"""
    from ...layout.swizzle import make_swizzled_layout

    stmts = list(k.body.stmts) if isinstance(k.body, S.SeqStmt) else [k.body]
    accs = {g.C.buffer.uid for g in collect(k.body, lambda n: isinstance(n, O.Gemm))}
    hits = [i for i, st in enumerate(stmts) if isinstance(st, O.Copy) and st.src.buffer.uid in accs
            and st.src.buffer.scope == "fragment" and st.dst.buffer.scope == "global"]
    if len(hits) != 1:
        return k
    op = stmts[hits[0]]
    f, c = op.src.buffer, op.dst.buffer
    shape = [const_int(x) for x in f.shape]
    if f.ndim != 2 or c.ndim != 2 or c.dtype.bytes != 2 or None in shape or \
            [const_int(x) for x in op.src.starts] != [0, 0] or [const_int(x) for x in op.src.extents] != shape or \
            [const_int(x) for x in op.dst.extents] != shape or shape[1] % 64:
        return k
    room = [st for _, st, _, _ in views if st.dtype == c.dtype and st.numel() >= shape[0] * shape[1]]
    drains = [i for i, st in enumerate(stmts) if collect(st, lambda n: isinstance(n, Raw) and n.fmt == _DRAIN)]
    if not room or not drains or drains[-1] > hits[0]:
        return k
    from .thread_sync import accesses

    for st in stmts[drains[-1] + 1:hits[0]]:  # nothing may touch shared memory between the drain and the copy
        r, w = accesses(st)
        if r or w or collect(st, lambda n: isinstance(n, (O.Copy, O.Gemm, O.Reduce))):
            return k
    stage = Buffer(f"{c.name}_stage", tuple(shape), c.dtype, "shared.dyn")
    stage.view_of = room[0]
    whole = tuple((E.as_expr(0), x) for x in shape)
    new = [S.Allocate(stage), O.AnnotateLayout(((stage, make_swizzled_layout(stage)),)),
           replace(op, dst=BufferRegion(stage, whole)), replace(op, src=BufferRegion(stage, whole))]
    return replace(k, body=S.seq(*stmts[:hits[0]], *new, *stmts[hits[0] + 1:]))
