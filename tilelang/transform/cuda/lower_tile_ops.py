"""Lower tile ops and T.Parallel to per-thread CUDA IR.

Expects: tile-level IR and a `LayoutPlan` (layout_inference.py).
Dispatch: each tile op lowers through its family's rule registered for "cuda" (op/registry.py;
the families are the modules of ops/); this module keeps what the rules share: the per-thread
element loops (slot_loop, flat_loop, per_thread_loop, elementwise), T.Parallel, the register
fragments and shared-memory demotion.
Guarantees: no TileOp or parallel loop remains; register fragments became per-thread
arrays indexed by unrolled slot loops; demoted fragments are shared memory;
`__syncthreads` separates block-level statements that race on shared memory.

    for i, j in T.Parallel(128, 128):          for l in T.unroll(128):        # C: mma layout
        C[i, j] = T.max(C[i, j], 0)      ->        i = <row(tid, l)>; j = <col(tid, l)>
                                                   C_reg[l] = max(C_reg[l], 0)
    T.copy(A[by*128, k*32], A_s)         ->    for l in T.unroll(n): e = l*T + tid; A_s[e//32, e%32] = A[...]
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ... import dtypes as dt
from ...arith.divisibility import is_multiple
from ...arith.ranges import Ranges, TrackRanges
from ...arith.simplify import const_int, simplify
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...ir.visitor import Mutator, ReplaceBuffers, collect, substitute
from ...layout.fragment import FlatFragment, LaneColFragment, LaneRowFragment, RowFragment, acc_of_rows
from ...op.regions import squeezed, tile_coords
from ...op.registry import lowering_rule
from . import ops  # noqa: F401 (importing the package registers the tile-op families' rules)
from .column_fragments import acc_column_slot, column_slot, loop_permutation
from .packed_columns import packed_slot
from .fragment_slices import LOOP_KINDS, fragment_slice, slice_slots, slot_runs
from .offset_slices import read_slot
from .layout_inference import LayoutPlan, infer_layouts
from .lower_async import AsyncLowering, async_accumulators
from .lower_copy import CopyLowering, bound_in, Hoist, copy_vector_width, unflatten  # noqa: F401 (re-exports)
from .ops.base import THREAD_LOCAL, THREAD_LOOP, addr_of, is_local, sync  # noqa: F401 (re-exported)
from .raw import Raw  # noqa: F401 (re-exported: passes import it from here)
from .row_copies import row_loop
from ..thread_dependence import parallel_nest, thread_local_loop
from .vectorize import atomic_vector_loop, cp_async_copy, plan_vectors, serial_vector_loop, vector_loop, vector_widths


@dataclass(frozen=True)
class AccStash(S.Stmt):
    """A float32 / int32 register accumulator stored to (add=False) or added from (add=True) slot
    `slot` of the global buffer `ws` (same dtype), in a per-thread layout that keeps every warp access one
    coalesced 128-byte line: thread t's register l is ws[slot, l * T + t] (n registers per
    thread, T threads). Lowered once the accumulator's layout is known."""

    acc: Buffer
    ws: Buffer
    slot: E.Expr
    add: bool
    span: object = field(default=None, compare=False, repr=False)


@dataclass
class CudaKernelInfo:
    threads: int
    regs: dict  # fragment uid -> register Buffer
    shared: list  # shared Buffers (incl. demoted fragments and scratch)
    swizzled: set  # uids of shared buffers with the gemm swizzle
    warnings: list
    tid: E.Var = None
    panels: set = field(default_factory=set)
    scope_changes: list = field(default_factory=list)
    sm: int = 80
    uses_wgmma: bool = False
    xor_swizzled: set = field(default_factory=set)  # swizzled tiles indexed by tl::swizzle_xor_offset
    tma_descs: list = field(default_factory=list)  # tensor maps of T.tma_copy (manual_ws.py)
    panel_xor: bool = True  # element accesses of panel tiles by tl::panel_xor_offset (tl.disable_panel_xor_index)
    thread_ranges: bool = True  # warp-group thread indices printed masked (tl.disable_thread_range_folding)
    tf32_exact: set = field(default_factory=set)  # tf32 buffers whose loads need no rounding (tf32_loads.py)
    mma_split_chains: bool = True  # tl::gemm_ss may split short-tile mma chains (TL_MMA_SPLIT_CHAINS)
    split_global_index: bool = True  # a global tensor's last index printed term by term (tl.disable_split_global_index)
    ldsm_lane_offsets: bool = True  # ldmatrix K-slice addresses from per-lane offsets (TL_LDSM_LANE_OFFSETS)
    bf16_pack_convert: bool = True  # bf16 -> float as one byte permute (TL_BF16_PACK_CVT)
    no_span_swizzle: bool = False  # element accesses of gemm tiles use tl::swizzle_offset, not swizzle_span_offset
    swizzle_row_split: bool = True  # row terms a multiple of 8 printed outside the swizzle (codegen/swizzle_rows.py)
    assume_tid_range: bool = True  # codegen states 0 <= tid < threads to nvcc (__builtin_assume)
    pow2_floor_shift: bool = True  # floor `//` / `%` by 2^k of unknown sign printed as `>>` / `&`
    reg_layouts: dict = field(default_factory=dict)  # register Buffer uid -> its fragment layout
    wgmma_clear_undef: bool = True  # a clearing wgmma gemm drops C's old values first (TL_WGMMA_CLEAR_UNDEF)
    shared_address_slots: bool = False  # {N:smem} arguments printed as smem_addr(tile) + byte terms (tl.disable_shared_address_slots)
    narrow_dims: bool = False  # int32 dims' bound checks in 32 bits (codegen/cuda.narrow_dims; tl.disable_narrow_dim_checks)
    barrier_ids: object = None  # named barrier ids clear of the program's own (barrier_ids.BarrierIds)


class _Lower(AsyncLowering, CopyLowering, TrackRanges, Mutator):
    def __init__(self, plan: LayoutPlan, threads: int, tid: E.Var, warn):
        self.plan = plan
        self.T = threads
        self.tid = tid
        self.warn = warn
        self.regs: dict = {}  # fragment uid -> local Buffer
        self.scratch_of: dict = {}
        self.swizzled: set = set()
        self.panels: set = set()
        self.uses_wgmma = False
        self.per_thread = 0
        self.scope_changes: list = []  # (buffer, original scope): restored after codegen
        self.vectorized = 0  # element loops given vector accesses
        self.async_copy = self.async_done = False  # lowering a pipeline's staged element copy; cp.async taken
        self.annotated: dict = {}  # uid -> shared Buffer swizzled by T.annotate_layout
        self.where = None  # span of the T.Parallel being lowered (for warnings)
        self.ranges = Ranges()  # block, loop and element variables: proves bounds guards redundant
        self.loops: list = []  # enclosing serial loops, innermost last: Hoist frames
        self.tid_defs: dict = {}  # T.ws scopes' thread index (tid_wg) -> its value in the block's tid
        self.nhoisted = 0
        self.no_slice_pairs = False  # pass config tl.disable_slice_pair_stores
        self.rs_k_outer = False  # pass config tl.disable_wgmma_rows_outer: RS wgmmas k-step outermost
        self.sm = 80
        self.stmatrix = True  # pass config tl.disable_stmatrix_store: accumulator -> 16-bit shared by stmatrix
        self.unroll_vars: set = set()  # uids of loop variables that index register slices (offset_slices)

    def visit(self, node):
        """A tile op with a registered "cuda" rule (op/registry.py) lowers through it; the rest
        through this class's visit_* methods."""
        rule = lowering_rule("cuda", node)
        if rule is not None:
            return rule(self, node)
        return super().visit(node)

    # ------------------------------------------------------------ buffers
    def reg(self, buf: Buffer) -> Buffer | None:
        if not self.plan.in_registers(buf):
            return None
        r = self.regs.get(buf.uid)
        if r is None and getattr(buf, "view_base", None) is not None:
            return self.reg(buf.view_base)  # a T.reshape of a register tile: the same registers
        if r is None:
            lay = self.plan.layout(buf)
            r = Buffer(buf.name, (lay.nlocal,), buf.dtype, "local")
            if getattr(buf, "packed16", False):
                r.packed16 = True  # 16-bit values stored two per 32-bit word (see CudaCodegen.packed)
            self.regs[buf.uid] = r
        return r

    def visit_Allocate(self, s: S.Allocate):
        b = s.buffer
        if b.scope == "fragment":
            r = self.reg(b)
            if r is not None:
                return S.Allocate(r, None, span=s.span)
            self.scope_changes.append((b, b.scope))
            if b.uid in self.plan.per_thread:  # written by scalar code only: each thread its own copy
                b.scope = "local"
                return s
            b.scope = "shared.dyn"  # demoted: every thread may read any element
            reason = self.plan.reasons.get(b.uid, "")
            self.warn(f"fragment {b.name} is kept in shared memory, not registers: {reason}")
        return s

    def visit_DeclBuffer(self, s):
        """A view of a fragment: nothing to declare when it aliases registers (reg() answers the
        source's); when demoted it is a view of the source's shared (or per-thread) copy."""
        b = s.buffer
        if b.scope != "fragment":
            return s
        if self.reg(b) is not None:
            return S.seq()
        self.scope_changes.append((b, b.scope))
        b.scope = "local" if b.uid in self.plan.per_thread else "shared.dyn"
        return s

    def visit_Select(self, e: E.Select):
        """T.if_then_else whose condition the block, loop and element ranges decide is its branch
        (FlashAttention's `k * 128 + j >= seq_len` mask over a sequence of whole tiles: no
        compare and select per element)."""
        taken = self.ranges.decide(e.cond)
        if taken is None:
            return self.generic(e)
        return self.visit(e.a if taken else e.b)

    def visit_WarpGroupScope(self, s):
        """Tile ops inside `T.ws` are block-level over the scope's threads: tid - t_lo of T."""
        saved = self.T, self.tid
        self.T = s.threads
        pre = []
        if s.lo:
            self.tid = E.Var("tid_wg", dt.int32)
            pre = [S.LetStmt(self.tid, saved[1] - s.t_lo)]
            # bound inside every enclosing loop: what is declared before one says tid - t_lo instead
            self.tid_defs[self.tid] = saved[1] - s.t_lo
            for frame in self.loops:
                frame.inside.add(self.tid)
        try:
            with self.ranges.scoped({self.tid: (0, self.T - 1)}):
                body = self.visit(s.body)
        finally:
            self.T, self.tid = saved
        return replace(s, body=S.seq(*pre, body))

    # ------------------------------------------------------------ per-thread element loops
    def slot_loop(self, layout, make_body, names=None, vector=None, scalar_layout=None):
        """for l in unroll(nlocal): coords = layout.coords(tid, l); body.

        vector: None (scalar), "quiet" or "warn": try vector accesses when the layout gives
        each thread consecutive elements; "warn" reports why a candidate stays scalar.
        scalar_layout: the layout to use instead when the vectors are not taken."""
        lvar = E.Var("l", dt.int32)
        cvars = [E.Var(f"{(names or 'ijkm')[d] if names else 'ijkm'[d]}", dt.int32) for d in range(len(layout.shape))]
        with self.ranges.coords(cvars, layout.shape):  # NOTE: inexact layouts guard flat < numel
            body = make_body(lvar, cvars)
        if vector and (getattr(layout, "pair_cols", False) or isinstance(layout, FlatFragment) and layout.vec > 1):
            out = atomic_vector_loop(layout, body, self.tid, lvar, cvars, Raw, THREAD_LOOP)  # vector reductions
            if out is not None:
                self.vectorized += 1
                return out
        if vector and getattr(layout, "pair_cols", False):  # an accumulator's column pairs: 2-element vectors
            out = self.try_vector(layout, lvar, cvars, body, "quiet", vec=2)
            if out is not None:
                return out
        if vector and isinstance(layout, (FlatFragment, LaneColFragment)) and layout.vec > 1:
            out = self.try_vector(layout, lvar, cvars, body, vector)
            if out is not None:
                return out
            layout = scalar_layout or layout
        coords = layout.coords(self.tid, lvar)
        lets = [S.LetStmt(v, simplify(c)) for v, c in zip(cvars, coords)]
        if isinstance(layout, FlatFragment) and not layout.exact:
            body = S.IfThenElse(E.binop("<", layout.flat(self.tid, lvar), layout.numel), body)
        return S.For(lvar, E.as_expr(0), E.as_expr(layout.nlocal), "unroll", S.seq(*lets, body), THREAD_LOOP)

    def try_vector(self, layout, lvar, cvars, body, mode, vec=None):
        plan = plan_vectors(body, cvars[-1], (lvar,), vec or layout.vec)
        if plan.ok:
            self.vectorized += 1
            staged = self.async_copy and cp_async_copy(plan) is not None
            self.async_done = self.async_done or staged
            return vector_loop(plan, layout, self.tid, lvar, cvars, Raw, THREAD_LOOP, cp_async=staged)
        if plan.why and mode == "warn":
            where = f" (line {self.where.line})" if getattr(self.where, "line", None) else ""
            self.warn(f"T.Parallel{where} uses scalar accesses instead of {layout.vec}-element vectors: {plan.why}")
        return None

    def flat_loop(self, extents, make_body, vector=None):
        """Distribute the elements of an n-d domain over the block's threads (`vector`: see slot_loop)."""
        shape = tuple(const_int(e) for e in extents)
        if any(s is None for s in shape):
            return self.symbolic_loop(extents, make_body)
        vec = 1
        if vector and shape:
            probe = [E.Var("ijkm"[d], dt.int32) for d in range(len(shape))]
            vec = self.flat_vector_width(shape, make_body(probe), probe[-1])
        lay = FlatFragment(shape if shape else (1,), self.T, vec)
        return self.slot_loop(lay, lambda l, cv: make_body(cv if shape else []), vector=vector if vec > 1 else None,
                              scalar_layout=FlatFragment(lay.shape, self.T, 1))

    def flat_vector_width(self, shape, body, j) -> int:
        """Widest vec (at most 16 bytes per access, at least 4) dividing the row, one vector per thread."""
        sizes = vector_widths(body, j)
        if not sizes:
            return 1
        n = 1
        for s in shape:
            n *= s
        vec = 16 // max(sizes)
        while vec > 1 and (shape[-1] % vec or n < self.T * vec):
            vec //= 2
        return vec if vec > 1 and vec * min(sizes) >= 4 else 1

    def symbolic_loop(self, extents, make_body):
        total = E.as_expr(1)
        for e in extents:
            total = total * e
        e = E.Var("e", dt.int32)
        coords = unflatten(e, extents)
        cvars = [E.Var("ijkm"[d], dt.int32) for d in range(len(extents))]
        body = S.seq(*[S.LetStmt(v, c) for v, c in zip(cvars, coords)], make_body(cvars))
        k = E.Var("k", dt.int32)
        loop = S.For(k, E.as_expr(0), simplify((total + self.T - 1) // self.T), "serial",
                     S.seq(S.LetStmt(e, k * self.T + self.tid),
                           S.IfThenElse(E.binop("<", e, total), body)), THREAD_LOOP)
        return loop

    # ------------------------------------------------------------ T.Parallel
    def visit_For(self, s: S.For):
        if s.kind != "parallel" and self.carries_slice_offset(s):
            n, lo = const_int(s.extent), const_int(s.start)
            return self.visit(S.seq(*[substitute(s.body, {s.var: E.as_expr(lo + k)}) for k in range(n)]))
        if s.kind != "parallel":
            kind = "serial" if s.kind in ("pipelined", "vectorized") else s.kind
            frame = Hoist(s, bound_in(s))
            self.loops.append(frame)
            try:
                with self.ranges.loop(s):
                    body = self.visit(s.body)
                    # a T.vectorized loop is one thread's lanes: one unit for barrier insertion
                    ann = s.annotations + THREAD_LOOP if s.kind == "vectorized" else s.annotations
                    if s.var.uid in self.unroll_vars and kind == "serial":
                        kind = "unroll"  # it moves a register slice: a constant register index per copy
                    loop = S.For(s.var, s.start, s.extent, kind, body, ann, span=s.span)
                    if s.kind == "vectorized":
                        loop = self.vectorized_loop(loop, s.span)
            finally:
                self.loops.pop()
            return S.seq(*frame.decls.values(), loop)
        if s.annotation("prefer_async"):
            self.warn(f"T.Parallel(prefer_async=True) (line {getattr(s.span, 'line', '?')}) copies with ordinary loads "
                      "and stores, not cp.async: synchronous, so its T.ptx_wait_group has nothing to wait for")
        vars_, exts, body = [], [], s
        while isinstance(body, S.For) and body.kind == "parallel":
            vars_.append(body.var)
            exts.append(body.extent)
            body = body.body
        if thread_local_loop(body):  # each thread runs all of it, over its own registers
            for v, e, f in reversed(list(zip(vars_, exts, parallel_nest(s)))):
                body = S.For(v, f.start, e, "serial", body, f.annotations, span=f.span)
            return self.visit(body)
        sl = fragment_slice(vars_, exts, body, self.plan.in_registers)
        if sl is not None and not self.plain_slice(sl):
            return self.slice_loop(s, vars_, sl)
        driver, order = None, tuple(vars_)
        for ld in collect(body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
            if self.plan.in_registers(ld.buffer) and tuple(ld.indices) == tuple(vars_):
                driver = self.plan.layout(ld.buffer)
                break
        if driver is None:  # F[j, i] in a loop over (i, j): walk F's slots (layout inference allowed one order)
            for ld in collect(body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
                perm = loop_permutation(ld.indices, vars_) if self.plan.in_registers(ld.buffer) else None
                if perm is not None:
                    driver, order = self.plan.layout(ld.buffer), tuple(vars_[p] for p in perm)
                    break
        self.per_thread += 1  # inside: each element belongs to one thread (atomics run per element)
        self.where = s.span
        # a T.Pipelined stage (software_pipeline._element_copy): cp.async, completed by the pipeline's wait
        self.async_copy, self.async_done = bool(s.annotation("async_copy")), False
        try:
            if driver is not None:
                def make(l, cvars):
                    b = self.visit(substitute(body, dict(zip(order, cvars))))
                    return _RegAccess(self, cvars, l, driver).visit(b)
                return self.owned_loop(driver, make, vector="warn")
            out = self.flat_loop(exts, lambda cvars: self.visit(substitute(body, dict(zip(vars_, cvars)))),
                                 vector="warn")
            if self.async_copy and not self.async_done:  # still right (the stage's barrier orders it), not async
                self.warn(f"T.Pipelined: the T.Parallel element copy (line {getattr(s.span, 'line', '?')}) is "
                          "staged but copies with ordinary loads and stores, not cp.async (no 4-, 8- or 16-byte "
                          "vectors of one global load per shared store)")
            return out
        finally:
            self.per_thread -= 1
            self.async_copy = False

    def vectorized_loop(self, loop: S.For, span):
        """A thread's T.vectorized(n) loop (already lowered) as n-lane vector accesses of its
        global/shared elements, when they are contiguous and aligned; else the loop, with a warning."""
        n = const_int(loop.extent)
        if n is None or n < 2:
            return loop
        plan = plan_vectors(loop.body, loop.var, (), n, self.ranges.values)
        if plan.ok:
            if self.vectorized:  # its register copies sit in the enclosing scope: names of their own
                for acc in plan.accesses:
                    acc.regs.name = f"{acc.regs.name}_{self.vectorized}"
            self.vectorized += 1
            return serial_vector_loop(plan, loop, Raw)
        if plan.why:
            where = f" (line {span.line})" if getattr(span, "line", None) else ""
            self.warn(f"T.vectorized({n}){where} uses scalar accesses: {plan.why}")
        return loop

    def carries_slice_offset(self, s: S.For) -> bool:
        """A constant-extent loop whose variable offsets a register sub-block loop inside it: it is
        unrolled, so each copy's slice is a fixed set of slots (fragment_slices.py)."""
        if s.kind not in LOOP_KINDS or const_int(s.start) is None or const_int(s.extent) is None:
            return False
        for loop in collect(s.body, lambda n: isinstance(n, S.For) and n.kind == "parallel"):
            vars_, exts, body = [], [], loop
            while isinstance(body, S.For) and body.kind == "parallel":
                vars_.append(body.var)
                exts.append(body.extent)
                body = body.body
            sl = fragment_slice(vars_, exts, body, self.plan.in_registers)
            if sl is not None and any(v.uid == s.var.uid for o in sl.offsets for v in collect(o, lambda n: isinstance(n, E.Var))):
                return True
        return False

    def plain_slice(self, sl) -> bool:
        """A guarded loop over the whole tile whose guard does not fall on whole slots: the plain
        per-slot loop (the guard tested per slot) serves it."""
        offs = tuple(const_int(o) for o in sl.offsets)
        return sl.plain_at(offs) and slice_slots(self.plan.layout(sl.buffers[0]), offs, sl.box) is None

    def slice_loop(self, s: S.For, vars_, sl):
        """Each thread runs the body for its slots inside the slice; the loop variables are
        the slot's coordinates minus the offsets (the other side's indices follow them)."""
        lay = self.plan.layout(sl.buffers[0])
        offs = tuple(const_int(o) for o in sl.offsets)
        slots = slice_slots(lay, offs, sl.box) if None not in offs else None
        if slots is None:
            raise LoweringError(f"internal: the sub-block loop over {sl.buffers[0].name} has offsets {sl.offsets} "
                                "that layout inference did not accept", s.span)
        self.per_thread += 1
        self.where = s.span
        try:
            loops = []
            for first, count in slot_runs(slots):
                k = E.Var("l", dt.int32)
                l = k + first if first else k
                cvars = [E.Var("ijkm"[d], dt.int32) for d in range(len(vars_))]
                lets = [S.LetStmt(v, simplify(c - o)) for v, c, o in zip(cvars, lay.coords(self.tid, l), offs)]
                with self.ranges.scoped({v: b for v, b in zip(cvars, sl.box)}):
                    b = self.visit(substitute(sl.body, dict(zip(vars_, cvars))))
                b = _RegAccess(self, cvars, simplify(l), lay).visit(b)
                pairs = self.slice_pairs(lay, first, count, offs, cvars, k, b)
                loops.append(pairs or S.For(k, E.as_expr(0), E.as_expr(count), "unroll", S.seq(*lets, b), THREAD_LOOP))
            return S.seq(*loops)
        finally:
            self.per_thread -= 1

    def slice_pairs(self, lay, first: int, count: int, offs, cvars, k, body):
        """The slot run's body `tile[.., j] = F_reg[k + first]` (an accumulator's slots 2q, 2q + 1:
        columns j, j + 1 of one row) as one 2-element store per pair (`tl_store2`), like T.copy's
        pair_store: the sparse MLA backward's `stage[i, j] = acc[i + s * 16, j]` chunks (half the
        shared stores, and a pair store is what staging_swizzle swizzles against bank conflicts).
        None when the body is anything else (it stays one store per slot)."""
        if not getattr(lay, "pair_cols", False) or first % 2 or count % 2 or offs[-1] % 2 \
                or self.no_slice_pairs:
            return None
        if not (isinstance(body, S.BufferStore) and isinstance(body.value, E.BufferLoad)):
            return None
        dst, val, j = body.buffer, body.value, cvars[-1]
        if dst.scope not in ("shared", "shared.dyn") or dst.strides is not None or val.buffer.scope != "local" \
                or val.buffer.dtype != dst.dtype or dst.dtype.bits not in (16, 32) or len(val.indices) != 1:
            return None
        *outer, last = body.indices
        if not (isinstance(last, E.Var) and last is j) or any(j in collect(x, lambda n: isinstance(n, E.Var))
                                                            for x in outer):
            return None
        if not is_multiple(dst.shape[-1], 2) or collect(val.indices[0], lambda n: isinstance(n, E.Var)) != [k]:
            return None
        g = E.Var("l", dt.int32)
        lets = [S.LetStmt(v, simplify(c - o)) for v, c, o in zip(cvars, lay.coords(self.tid, g * 2 + first), offs)]
        v0 = E.BufferLoad(val.buffer, (simplify(substitute(val.indices[0], {k: g * 2})),), val.dtype)
        v1 = E.BufferLoad(val.buffer, (simplify(substitute(val.indices[0], {k: g * 2 + 1})),), val.dtype)
        addr = E.Call("address_of", (E.BufferLoad(dst, tuple(body.indices), dst.dtype),), dt.uint64)
        st = Raw("tl_store2({0}, {1}, {2});", (addr, v0, v1), writes=(dst,))
        return S.For(g, E.as_expr(0), E.as_expr(count // 2), "unroll", S.seq(*lets, st), THREAD_LOOP)

    # ------------------------------------------------------------ tile ops
    def elementwise(self, region: BufferRegion, make):
        """Loop over a region's elements; register regions drive their own layout.

        make(coords, reg_ref): coords run over the region's non-unit extents (region_indices's
        input) on both paths; a register layout's per-dim coordinates are mapped onto them."""
        r = self.reg(region.buffer)
        if r is not None:
            lay = self.plan.layout(region.buffer)
            return self.owned_loop(lay, lambda l, cv: make(tile_coords(region, cv), r[l]), vector="quiet")
        if region.buffer.scope in THREAD_LOCAL:
            return self.per_thread_loop(squeezed(region.extents), lambda cv: make(cv, None))
        return self.flat_loop(squeezed(region.extents), lambda cv: make(cv, None), vector="quiet")

    def owned_loop(self, layout, make_body, vector=None):
        """slot_loop; over a layout that keeps copies of each element (RowFragment), the stores other threads
        see are made by one of the row's threads (row_copies.py)."""
        if getattr(layout, "replicated", False):
            return row_loop(self, layout, make_body)
        return self.slot_loop(layout, make_body, vector=vector)

    def per_thread_loop(self, extents, make_body):
        """Every thread walks every element: a T.alloc_local tile is each thread's own, so a
        copy or fill into it gives each thread the whole tile (T.copy(A[0:4], q) then q[i // 64]
        in a T.Parallel(256) reads all four values on every thread)."""
        cvars = [E.Var("ijkm"[d], dt.int32) for d in range(len(extents))]
        with self.ranges.coords(cvars, extents):
            body = make_body(cvars)
        for v, e in reversed(list(zip(cvars, extents))):
            n = const_int(E.as_expr(e))
            body = S.For(v, E.as_expr(0), E.as_expr(e), "unroll" if n is not None and n <= 64 else "serial",
                         body, THREAD_LOOP)
        return body

    def visit_AccStash(self, s: AccStash):
        r = self.reg(s.acc)
        n = const_int(r.shape[0]) if r is not None else None
        ctype = {"float32": "float", "int32": "int"}.get(s.acc.dtype.name)
        if r is None or ctype is None:
            raise LoweringError(f"internal: {s.acc.name} is not a float32 / int32 register accumulator")
        T = self.T
        if n * T != const_int(s.ws.shape[-1]):
            raise LoweringError(f"internal: {s.acc.name} holds {n} x {T} registers, a workspace slot {s.ws.shape[-1]}")
        # 4-byte accesses: float2/float4 ones made ptxas spill beside a 128-register wgmma accumulator
        ptr = f"{{{{ {'const ' if s.add else ''}{ctype}* tl_w = {{1}} + (size_t)({{0}}) * {n * T} + tid;\n#pragma unroll\n"
        body = f"{{2}}[l] += __ldcg(tl_w + l * {T}); }}}}" if s.add else f"tl_w[l * {T}] = {{2}}[l]; }}}}"
        return Raw(ptr + f"for (int l = 0; l < {n}; ++l) " + body, (s.slot, addr_of(s.ws), addr_of(r)))


class _RegAccess(Mutator):
    """Inside a slot loop: F[i, j] (the loop's coords) -> F_reg[l] for register fragments."""

    def __init__(self, low: _Lower, cvars, l, driver=None):
        self.low, self.cvars, self.l, self.driver = low, tuple(cvars), l, driver
        self.unroll: set = set()  # variables of column-read slots: their serial loops unroll

    def visit_For(self, s: S.For):
        s = self.generic(s)
        if s.var in self.unroll and s.kind == "serial" and const_int(s.extent) is not None:
            return replace(s, kind="unroll")  # a constant register index per iteration
        return s

    def visit_BufferLoad(self, e: E.BufferLoad):
        r = self.low.reg(e.buffer)
        if r is not None:
            lay = self.low.plan.layout(e.buffer)
            acc = acc_of_rows(self.driver)
            if isinstance(lay, RowFragment) and acc is not None and RowFragment.of(acc) == lay:  # R[i] over an accumulator
                return E.BufferLoad(r, (simplify(lay.slot_of_acc(self.l, acc)),), e.dtype)
            col = acc_column_slot(self.driver, lay, self.l) if tuple(e.indices) == self.cvars[1:] else None
            if col is not None:  # D[j] / W[q, h] along the accumulator's columns
                return E.BufferLoad(r, (col,), e.dtype)
            if isinstance(lay, LaneRowFragment) and LaneRowFragment.of(self.driver) == lay:
                return E.BufferLoad(r, (simplify(lay.slot_of(self.l, self.driver)),), e.dtype)  # R[i], flat loop
            moved = read_slot(self.driver, e.indices, self.cvars, self.l) if self.driver is not None and \
                getattr(self.driver, "base", None) == lay else None
            if moved is not None:  # F[i, u * 4 + j] over its slice's layout: the enclosing loop over u unrolls
                self.low.unroll_vars.add(moved[1].uid)
                return E.BufferLoad(r, (moved[0],), e.dtype)
            packed = packed_slot(self.driver, lay, e.indices, self.cvars, self.l)
            if packed is not None:  # P[i, j // k]: one register serves a run of k of the driver's slots
                return E.BufferLoad(r, (simplify(packed),), e.dtype)
            col = column_slot(self.driver, lay, e.indices, self.cvars, self.l)
            if col is not None:  # F[x, j] / D[j] along the thread's own columns
                self.unroll |= {v for v in collect(col, lambda n: isinstance(n, E.Var))}
                return E.BufferLoad(r, (col,), e.dtype)
            return E.BufferLoad(r, (self.l,), e.dtype)
        return self.generic(e)

    def visit_BufferStore(self, s: S.BufferStore):
        r = self.low.reg(s.buffer)
        value = self.visit(s.value)
        if r is not None:
            lay = self.low.plan.layout(s.buffer)
            if isinstance(lay, LaneRowFragment) and LaneRowFragment.of(self.driver) == lay:  # a reducer's r[i] += v
                return S.BufferStore(r, (simplify(lay.slot_of(self.l, self.driver)),), value, span=s.span)
            return S.BufferStore(r, (self.l,), value, span=s.span)
        return S.BufferStore(s.buffer, tuple(self.visit(i) for i in s.indices), value, span=s.span)


def _detach_scope_changes(body, low: _Lower):
    """Lowering moved some fragments to shared memory by setting Buffer.scope; give the lowered
    IR its own shared-scope copies (same uid) and put the user's buffers back as they were, so
    one prim_func can be built again, for another target."""
    copies = {}
    for buf, _ in low.scope_changes:
        if buf.uid not in copies:
            c = Buffer(buf.name, buf.shape, buf.dtype, buf.scope, strides=buf.strides)
            c.uid = buf.uid
            for attr in ("view_base", "reducer_op"):  # a view's base; a reducer's updates become atomics
                if getattr(buf, attr, None) is not None:
                    setattr(c, attr, getattr(buf, attr))
            copies[buf.uid] = c
    for buf, old in reversed(low.scope_changes):
        buf.scope = old
    low.scope_changes = []
    return ReplaceBuffers(copies).visit(body) if copies else body


class _MmaPanels(Mutator):
    """An mma.sync gemm reading a tile that a wgmma gemm keeps in 64-column panels, or that warp
    specialization's TMA producer writes as 128-byte panels, reads it as panels (tl::gemm_ss's PRA /
    PRB, tl::gemm_rs's PRB): which tiles are panels is known only once every gemm is lowered."""

    def __init__(self, panels: set):
        self.panels = panels

    def visit_Raw(self, r: Raw):
        if not r.fmt.startswith(("tl::gemm_ss<", "tl::gemm_rs<")) or not any(b.uid in self.panels for b in r.reads):
            return r
        head, tail = r.fmt.split(">(", 1)
        if r.fmt.startswith("tl::gemm_rs<"):  # A in registers: only B's PRB
            b = r.reads[-1]
            return replace(r, fmt=f"{head}, {b.shape[0] if b.uid in self.panels else 0}>({tail}")
        a, b = r.reads
        rows = [x.shape[0] if x.uid in self.panels else 0 for x in (a, b)]
        return replace(r, fmt=f"{head}, {rows[0]}, {rows[1]}>({tail}")



def lower_kernel(k: S.KernelLaunch, warn, sm: int = 80, row_fragments: bool = False, replicate_inputs: bool = True,
                 rows_1d: bool = True, slice_pairs: bool = True, rs_rows_outer: bool = True,
                 stmatrix: bool = True,
                 slice_offsets: bool = True, mma_rs: bool = True, own_lines: bool = True,
                 ws_panels: frozenset = frozenset(), shared_offset_cp_async: bool = True,
                 shared_address_slots: bool = True, packed_reads: bool = True, wgmma_policy: bool = True,
                 split_segments: bool = True, row_store_hoist: bool = True, reduce_tree: bool = True,
                 policy_cost: bool = True, mma_rs16: bool = True):
    """-> (lowered kernel, CudaKernelInfo). row_fragments: keep per-row values of accumulators
    in registers with shuffle reductions (opt-in until it has run on the GPU tier).
    replicate_inputs: small read-only fragments every thread holds whole (layout_inference.replicated_inputs).
    rows_1d: F[x, j] read in a 1-d T.Parallel over j stays in registers (column_fragments.column_read).
    slice_pairs: an accumulator's row chunks stored to a shared tile go as column pairs (slice_pairs).
    rs_rows_outer: a register-A wgmma gemm runs one 64-row block's k-steps before the next (else
    k-steps outermost; tl::gemm_rs_sm90's kKOuter).
    stmatrix: on sm_90, accumulator tiles copied whole to 16-bit shared tiles go by stmatrix (stmatrix.py).
    slice_offsets: F[i, u * 4 + j] over an exact driver stays in registers when the slice's owners do
    not move with u (offset_slices.py). mma_rs: a tf32 mma.sync gemm's A fragment in registers (tl::gemm_rs).
    own_lines: a T.reduce whose every line lies in one thread's registers folds there (ops/reduce.own_lines).
    ws_panels: tiles warp specialization's producer writes as 128-byte panels (an mma.sync gemm reads them so).
    shared_offset_cp_async: T.ptx_cp_async into a shared tile addresses it as smem_addr(tile) + byte offset.
    shared_address_slots: a tile copy's cp.async destination is a 32-bit shared address slot ({0:smem}) indexed
    by the unrolled coordinates (lower_copy.vector_copy).
    packed_reads: a tile read as P[i, j // k] over a driver with k-column runs stays in registers
    (packed_columns.py).
    wgmma_policy: a wgmma gemm's warpgroup grid follows its GemmWarpPolicy (gemm_paths.wgmma_policy_grid).
    split_segments: T.reduce over the last dim of a (rows, Q, H) reshape of an accumulator whose columns are split
    over warps / warpgroups of whole segments stays in registers (fragment.segment_rows).
    row_store_hoist: a row loop that only stores, on one copy the same for every slot, tests the copy once around
    the loop (row_copies.row_loop).
    reduce_tree: a row reduction over an accumulator folds each thread's columns of a row in independent
    partial chains joined pairwise (ops/reduce.tree_fold), not one serial chain.
    policy_cost: a FullCol wgmma grid is taken only where it costs no more than the squarest split
    (gemm_paths.grid_cost); else whenever the shape allows it.
    mma_rs16: a 16-bit mma.sync gemm's A fragment laid out as an accumulator of its rows stays in registers
    (tl::gemm_rs; gemm_paths.mma_rs16_ok)."""
    threads = k.threads[0] * k.threads[1] * k.threads[2]
    plan = infer_layouts(k, sm, row_fragments, replicate_inputs, rows_1d, slice_offsets, mma_rs, packed_reads,
                         wgmma_policy, split_segments, policy_cost, mma_rs16)
    for note in plan.notes:
        warn(note)
    tid = E.Var("tid", dt.int32)
    low = _Lower(plan, threads, tid, warn)
    low.async_accs = async_accumulators(k.body)
    low.sm = sm
    low.no_slice_pairs = not slice_pairs
    low.rs_k_outer = not rs_rows_outer
    low.stmatrix = stmatrix
    low.own_line_reduce = own_lines
    low.shared_offset_cp_async = shared_offset_cp_async
    low.shared_address_slots = shared_address_slots
    low.first_copy_outside = row_store_hoist
    low.reduce_tree = reduce_tree
    low.ranges.kernel(k)
    body = low.visit(k.body)
    for uid, buf in low.annotated.items():
        if uid in low.panels:  # a wgmma B tile in 64-column panels: the codegen indexes panels
            warn(f"T.annotate_layout swizzle of {buf.name} is overridden: it is a wgmma B tile, kept in "
                 "64-column panels")
    body = _MmaPanels(low.panels | ws_panels).visit(body)
    body = _detach_scope_changes(body, low)
    # thread vars requested by T.get_thread_binding map onto threadIdx
    new = replace(k, body=body)
    shared = [a.buffer for a in collect(body, lambda n: isinstance(n, S.Allocate))
              if a.buffer.scope in ("shared", "shared.dyn")]
    info = CudaKernelInfo(threads, low.regs, shared, low.swizzled, [], tid=tid, panels=low.panels, sm=sm,
                          uses_wgmma=low.uses_wgmma, scope_changes=low.scope_changes,
                          reg_layouts={r.uid: plan.layouts.get(uid) for uid, r in low.regs.items()})
    return new, info
