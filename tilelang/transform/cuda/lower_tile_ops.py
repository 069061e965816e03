"""Lower tile ops and T.Parallel to per-thread CUDA IR.

Expects: tile-level IR and a `LayoutPlan` (layout_inference.py).
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
from ...arith.ranges import Ranges, TrackRanges
from ...arith.simplify import const_int, simplify
from ...errors import LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...ir.visitor import Mutator, collect, substitute
from ...layout.fragment import (
    FlatFragment,
    MmaAccFragment,
    RowFragment,
    WgmmaAccFragment,
)
from ...op import tile_ops as O
from ...op.regions import matrix_coords, matrix_indices, squeezed, tile_coords
from ..lower_tile_ops_cpu import cumsum_scan, in_bounds, region_indices
from .layout_inference import LayoutPlan, infer_layouts, kmajor_panels, kmajor_rows_ok, wgmma_ok
from .lower_copy import CopyLowering, _bound_in, _Hoist, copy_vector_width, unflatten  # noqa: F401 (re-exports)
from .vectorize import plan_vectors, vector_loop, vector_widths
from .raw import Raw  # noqa: F401 (re-exported: passes import it from here)
from .lower_async import AsyncLowering, async_accumulators, not_wgmma, tile_pointer


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


THREAD_LOOP = (("tl.thread_loop", True),)
THREAD_LOCAL = ("local", "local.var")  # scopes each thread holds a whole copy of


def sync() -> Raw:
    return Raw("__syncthreads();")


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
    tma_descs: list = field(default_factory=list)  # tensor maps of T.tma_copy (manual_ws.py)


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
        self.annotated: dict = {}  # uid -> shared Buffer swizzled by T.annotate_layout
        self.where = None  # span of the T.Parallel being lowered (for warnings)
        self.ranges = Ranges()  # block, loop and element variables: proves bounds guards redundant
        self.loops: list = []  # enclosing serial loops, innermost last: _Hoist frames
        self.nhoisted = 0

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

    def visit_WarpGroupScope(self, s):
        """Tile ops inside `T.ws` are block-level over the scope's threads: tid - t_lo of T."""
        saved = self.T, self.tid
        self.T = s.threads
        pre = []
        if s.lo:
            self.tid = E.Var("tid_wg", dt.int32)
            pre = [S.LetStmt(self.tid, saved[1] - s.t_lo)]
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
        if vector and isinstance(layout, FlatFragment) and layout.vec > 1:
            out = self.try_vector(layout, lvar, cvars, body, vector)
            if out is not None:
                return out
            layout = scalar_layout or layout
        coords = layout.coords(self.tid, lvar)
        lets = [S.LetStmt(v, simplify(c)) for v, c in zip(cvars, coords)]
        if isinstance(layout, FlatFragment) and not layout.exact:
            body = S.IfThenElse(E.binop("<", layout.flat(self.tid, lvar), layout.numel), body)
        return S.For(lvar, E.as_expr(0), E.as_expr(layout.nlocal), "unroll", S.seq(*lets, body), THREAD_LOOP)

    def try_vector(self, layout, lvar, cvars, body, mode):
        plan = plan_vectors(body, cvars[-1], (lvar,), layout.vec)
        if plan.ok:
            self.vectorized += 1
            return vector_loop(plan, layout, self.tid, lvar, cvars, Raw, THREAD_LOOP)
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
        if s.kind != "parallel":
            kind = "serial" if s.kind in ("pipelined", "vectorized") else s.kind
            frame = _Hoist(s, _bound_in(s))
            self.loops.append(frame)
            try:
                with self.ranges.loop(s):
                    loop = S.For(s.var, s.start, s.extent, kind, self.visit(s.body), s.annotations, span=s.span)
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
        driver = None
        for ld in collect(body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
            if self.plan.in_registers(ld.buffer) and tuple(ld.indices) == tuple(vars_):
                driver = self.plan.layout(ld.buffer)
                break
        self.per_thread += 1  # inside: each element belongs to one thread (atomics run per element)
        self.where = s.span
        try:
            if driver is not None:
                def make(l, cvars):
                    b = self.visit(substitute(body, dict(zip(vars_, cvars))))
                    return _RegAccess(self, cvars, l, driver).visit(b)
                return self.slot_loop(driver, make, vector="warn")
            return self.flat_loop(exts, lambda cvars: self.visit(substitute(body, dict(zip(vars_, cvars)))),
                                  vector="warn")
        finally:
            self.per_thread -= 1

    # ------------------------------------------------------------ tile ops
    def elementwise(self, region: BufferRegion, make):
        """Loop over a region's elements; register regions drive their own layout.

        make(coords, reg_ref): coords run over the region's non-unit extents (region_indices's
        input) on both paths; a register layout's per-dim coordinates are mapped onto them."""
        r = self.reg(region.buffer)
        if r is not None:
            lay = self.plan.layout(region.buffer)
            return self.slot_loop(lay, lambda l, cv: make(tile_coords(region, cv), r[l]), vector="quiet")
        if region.buffer.scope in THREAD_LOCAL:
            return self.per_thread_loop(squeezed(region.extents), lambda cv: make(cv, None))
        return self.flat_loop(squeezed(region.extents), lambda cv: make(cv, None), vector="quiet")

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

    def per_thread_op(self, op):
        """A tile op on a thread's own local array (T.alloc_local) in SIMT code: every thread
        runs all of it on its own copy, as serial loops."""
        from ..lower_tile_ops_cpu import LowerTileOpsCPU

        low = LowerTileOpsCPU()
        low.ranges = self.ranges
        return getattr(low, "visit_" + type(op).__name__)(op)

    def visit_Copy(self, op: O.Copy):
        scopes = (op.src.buffer.scope, op.dst.buffer.scope)
        if (_is_local(op.src.buffer) or _is_local(op.dst.buffer)) and "fragment" not in scopes:
            return self.per_thread_op(op)
        return super().visit_Copy(op)

    def visit_Fill(self, op: O.Fill):
        if _is_local(op.dst.buffer):
            return self.per_thread_op(op)

        def make(cv, reg_ref):
            if reg_ref is not None:
                return S.BufferStore(reg_ref.buffer, reg_ref.indices, op.value)
            di = region_indices(op.dst, cv)
            st = S.BufferStore(op.dst.buffer, di, op.value)
            ok = in_bounds(op.dst, di, self.ranges)
            return st if ok is True else S.IfThenElse(ok, st)
        return self.elementwise(op.dst, make)

    def visit_Gemm(self, op: O.Gemm):
        creg = self.reg(op.C.buffer)
        lay = self.plan.layout(op.C.buffer) if creg is not None else None
        if id(op) in self.plan.mma_gemms and isinstance(lay, WgmmaAccFragment):
            out = self.wgmma_gemm(op, creg, lay)
            if out is not None:
                return out
        if op.wg_wait < 0:  # T.wgmma_gemm: wgmma or nothing
            why = wgmma_ok(op, self.T)[1] if self.sm >= 90 else f"the target is sm_{self.sm}, not sm_90a"
            if why is None and creg is None:
                why = f"its accumulator is not in registers ({self.plan.reasons.get(op.C.buffer.uid, '')})"
            raise not_wgmma(op, why or "its accumulator layout is not a wgmma one")
        if id(op) in self.plan.mma_gemms and isinstance(lay, MmaAccFragment):
            return self.mma_gemm(op, creg, lay)
        m, n, k = op.mnk
        self.warn(f"T.gemm {op.A.buffer.name} x {op.B.buffer.name} -> {op.C.buffer.name} runs on CUDA cores "
                  f"(no tensor-core path for {op.A.buffer.dtype}/{op.C.buffer.dtype}, shape {m}x{n}x{k}, "
                  f"C {'in registers' if creg is not None else 'in shared memory'})")
        acc = op.C.buffer.dtype
        kk = E.Var("kk", dt.int32)

        def make(cv, reg_ref):  # cv: C's tile coords; A, B, C are indexed through their matrix dims
            i, j = matrix_coords(op.C, cv)
            a = E.BufferLoad(op.A.buffer, matrix_indices(op.A, *((kk, i) if op.transpose_A else (i, kk))),
                             op.A.buffer.dtype)
            b = E.BufferLoad(op.B.buffer, matrix_indices(op.B, *((j, kk) if op.transpose_B else (kk, j))),
                             op.B.buffer.dtype)
            s = E.Var("acc", acc)
            ref = reg_ref if reg_ref is not None else E.BufferLoad(op.C.buffer, region_indices(op.C, cv), acc)
            init = E.const(0, acc) if op.clear_accum else ref
            tmp = Buffer("gacc", (1,), acc, "local.var")
            body = S.seq(
                S.Allocate(tmp, (init,)),
                S.For(kk, E.as_expr(0), E.as_expr(k), "serial",
                      S.BufferStore(tmp, (E.as_expr(0),), tmp[0] + E.cast(acc, a) * E.cast(acc, b))),
                S.BufferStore(ref.buffer, ref.indices, tmp[0]))
            _ = s
            return body

        return self.elementwise(op.C, make)

    def mma_gemm(self, op: O.Gemm, creg: Buffer, lay: MmaAccFragment):
        a, b = op.A.buffer, op.B.buffer
        for x in (a, b):
            if x.scope == "fragment":
                self.scope_changes.append((x, x.scope))
                x.scope = "shared.dyn"
            self.swizzled.add(x.uid)
        m, n, k = op.mnk
        t = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t"}[a.dtype.name]
        pre = []
        if op.clear_accum:
            pre.append(self.visit_Fill(O.Fill(op.C, E.const(0, op.C.buffer.dtype))))
        call = Raw(f"tl::gemm_ss<{m}, {n}, {k}, {lay.warps_m}, {lay.warps_n}, {str(op.transpose_A).lower()}, "
                   f"{str(op.transpose_B).lower()}, {a.shape[-1]}, {b.shape[-1]}, true, true, {t}>"
                   "({0}, {1}, {2});",
                   (_addr(a), _addr(b), _addr(creg)), reads=(a, b))
        return S.seq(*pre, call)

    def wgmma_gemm(self, op: O.Gemm, creg: Buffer, lay: WgmmaAccFragment):
        a, b = op.A.buffer, op.B.buffer
        areg = self.reg(a)
        if areg is not None:
            return self.wgmma_rs_gemm(op, areg, creg, lay)
        if a.scope == "fragment":  # demoted A: now shared memory
            self.scope_changes.append((a, a.scope))
            a.scope = "shared.dyn"
        if not kmajor_rows_ok(a):
            self.warn(f"T.gemm {a.name} x {b.name} runs on CUDA cores: A in shared memory has rows of "
                      f"{a.shape[-1]} elements, not a wgmma tile")
            return None
        (self.panels if kmajor_panels(a) else self.swizzled).add(a.uid)
        (self.swizzled if op.transpose_B and not kmajor_panels(b) else self.panels).add(b.uid)
        pa, _, _ = tile_pointer(op.A, kmajor_panels(a), "T.gemm A", op.span)
        pb, _, _ = tile_pointer(op.B, b.uid in self.panels, "T.gemm B", op.span)
        m, n, k = op.mnk
        t = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t", "float8_e4m3fn": "tl::float8_e4m3_t",
             "float8_e5m2": "tl::float8_e5m2_t", "int8": "int8_t"}[a.dtype.name]
        acc = {"int32": ", int32_t", "float16": ", tl::half_t"}.get(creg.dtype.name, "")  # default: float
        pre = []
        if op.clear_accum:
            pre.append(self.visit_Fill(O.Fill(op.C, E.const(0, op.C.buffer.dtype))))
        call = Raw(f"tl::gemm_ss_sm90<{m}, {n}, {k}, {lay.wg_m}, {lay.wg_n}, {str(op.transpose_B).lower()}, "
                   f"{a.shape[-1]}, {b.shape[-1]}, {t}, {int(op.wg_wait)}{acc}>" "({0}, {1}, {2});",
                   (pa, pb, _addr(creg)), reads=(a, b))
        self.uses_wgmma = True
        return S.seq(*pre, call)

    def wgmma_rs_gemm(self, op: O.Gemm, areg: Buffer, creg: Buffer, lay: WgmmaAccFragment):
        b = op.B.buffer
        (self.swizzled if op.transpose_B and not kmajor_panels(b) else self.panels).add(b.uid)
        pb, _, _ = tile_pointer(op.B, b.uid in self.panels, "T.gemm B", op.span)
        m, n, k = op.mnk
        t = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t"}[b.dtype.name]
        pre = []
        if op.clear_accum:
            pre.append(self.visit_Fill(O.Fill(op.C, E.const(0, op.C.buffer.dtype))))
        call = Raw(f"tl::gemm_rs_sm90<{m}, {n}, {k}, {lay.wg_m}, {str(op.transpose_B).lower()}, {b.shape[-1]}, "
                   f"{t}, {int(op.wg_wait)}>" "({0}, {1}, {2});",
                   (_addr(areg), pb, _addr(creg)), reads=(b,))
        self.uses_wgmma = True
        return S.seq(*pre, call)

    def row_reduce(self, op: O.Reduce, sreg: Buffer, dreg: Buffer, lay: RowFragment):
        """Rows of an accumulator: fold this thread's columns, then its quad with xor-shuffles."""
        dt_ = op.dst.dtype
        comb = {"sum": lambda x, y: x + y, "abssum": lambda x, y: x + y,
                "max": lambda x, y: E.call("max", x, y), "absmax": lambda x, y: E.call("max", x, y),
                "min": lambda x, y: E.call("min", x, y)}[op.kind]
        quad = {"sum": "sum", "abssum": "sum", "max": "max", "absmax": "max", "min": "min"}[op.kind]
        self.nreduce = getattr(self, "nreduce", 0) + 1
        tmp = Buffer(f"racc{self.nreduce}", (1,), dt_, "local.var")
        out = [S.Allocate(tmp)]
        zero = (E.as_expr(0),)
        for s in range(lay.nlocal):
            for n, l in enumerate(lay.acc_slots(s, self.plan.layout(op.src))):  # one statement per column: no nested ternaries
                v = E.cast(dt_, E.BufferLoad(sreg, (E.as_expr(l),), sreg.dtype))
                if op.kind in ("abssum", "absmax"):
                    v = E.call("abs", v)
                out.append(S.BufferStore(tmp, zero, v if n == 0 else comb(tmp[0], v)))
            # NOTE: the shuffle is a statement of its own, executed by every lane: inside a
            # select (T.max prints as a ternary) only some lanes would reach it and hang.
            out.append(S.BufferStore(tmp, zero, E.Call(f"tl_quad_{quad}", (tmp[0],), dt_)))
            total = tmp[0]
            if not op.clear:
                total = comb(E.BufferLoad(dreg, (E.as_expr(s),), dt_), total)
            out.append(S.BufferStore(dreg, (E.as_expr(s),), total))
        return S.seq(*out)

    def visit_Reduce(self, op: O.Reduce):
        src, dst = op.src, op.dst
        sreg, dreg = self.reg(src), self.reg(dst)
        if sreg is not None and dreg is not None and op.dim == src.ndim - 1:
            lay = self.plan.layout(dst)
            src_lay = self.plan.layout(src)
            if isinstance(lay, RowFragment) and isinstance(src_lay, (MmaAccFragment, WgmmaAccFragment)) \
                    and RowFragment.of(src_lay) == lay and dst.dtype.is_float:
                return self.row_reduce(op, sreg, dreg, lay)
        out = []
        if self.reg(src) is not None:
            scratch = self.scratch_of.get(src.uid)
            if scratch is None:
                scratch = Buffer(f"{src.name}_red", tuple(src.shape), src.dtype, "shared.dyn")
                self.scratch_of[src.uid] = scratch
                out.append(S.Allocate(scratch))
            lay = self.plan.layout(src)
            sreg = self.reg(src)
            out.append(self.slot_loop(lay, lambda l, cv: S.BufferStore(scratch, tuple(cv), sreg[l])))
            src_buf = scratch
        else:
            src_buf = src
        dt_ = dst.dtype
        if op.kind == "max":
            init = E.const(float("-inf"), dt_) if dt_.is_float else E.const(-(1 << (dt_.bits - 1)), dt_)
        elif op.kind == "min":
            init = E.const(float("inf"), dt_) if dt_.is_float else E.const((1 << (dt_.bits - 1)) - 1, dt_)
        else:
            init = E.const(0, dt_)
        red = src.shape[op.dim]
        comb = {"sum": lambda x, y: x + y, "abssum": lambda x, y: x + y,
                "max": lambda x, y: E.call("max", x, y), "absmax": lambda x, y: E.call("max", x, y),
                "min": lambda x, y: E.call("min", x, y)}[op.kind]

        def make(cv, reg_ref):
            keep = [c for c, s in zip(cv, dst.shape)] if len(cv) == dst.ndim else list(cv)
            ref = reg_ref if reg_ref is not None else E.BufferLoad(dst, tuple(keep), dt_)
            r = E.Var("r", dt.int32)
            sidx = [x for x in keep] if len(keep) == src.ndim - 1 else [x for x in keep if True][: src.ndim - 1]
            sidx.insert(op.dim, r)
            v = E.cast(dt_, E.BufferLoad(src_buf, tuple(sidx), src_buf.dtype))
            if op.kind in ("abssum", "absmax"):
                v = E.call("abs", v)
            tmp = Buffer("racc", (1,), dt_, "local.var")
            return S.seq(S.Allocate(tmp, (init if op.clear else ref,)),
                         S.For(r, E.as_expr(0), E.as_expr(red), "serial",
                               S.BufferStore(tmp, (E.as_expr(0),), comb(tmp[0], v))),
                         S.BufferStore(ref.buffer, ref.indices, tmp[0]))

        dreg = self.reg(dst)
        if dreg is not None:
            lay = self.plan.layout(dst)
            out.append(self.slot_loop(lay, lambda l, cv: make(cv, dreg[l])))
        else:
            out.append(self.flat_loop(tuple(dst.shape), lambda cv: make(cv, None)))
        return S.seq(*out)

    def visit_CumSum(self, op: O.CumSum):
        keep = [s for d, s in enumerate(op.src.shape) if d != op.dim]
        return self.flat_loop(tuple(keep) if keep else (1,), lambda cv: cumsum_scan(op, cv if keep else []))

    def visit_AtomicTile(self, op: O.AtomicTile):
        sreg = self.reg(op.src.buffer) if isinstance(op.src, BufferRegion) else None

        def make(cv, reg_ref):
            di = region_indices(op.dst, cv)
            if isinstance(op.src, BufferRegion):
                v = sreg[reg_ref.indices] if sreg is not None else \
                    E.BufferLoad(op.src.buffer, region_indices(op.src, cv), op.src.buffer.dtype)
                v = E.cast(op.dst.buffer.dtype, v)
            else:
                v = op.src
            target = E.BufferLoad(op.dst.buffer, di, op.dst.buffer.dtype)
            st = S.Evaluate(E.Call("atomic_" + op.kind, (target, v), op.dst.buffer.dtype))
            ok = in_bounds(op.dst, di, self.ranges)
            return st if ok is True else S.IfThenElse(ok, st)

        if isinstance(op.src, BufferRegion) and sreg is not None:
            lay = self.plan.layout(op.src.buffer)
            return self.slot_loop(lay, lambda l, cv: make(tile_coords(op.src, cv), sreg[l]))
        ext = squeezed(op.dst.extents)
        if not ext:
            if self.per_thread:  # one element per iteration of a T.Parallel body: every thread's own
                return make([], None)
            return S.IfThenElse(E.binop("==", self.tid, 0), make([], None))
        return self.flat_loop(ext, lambda cv: make(cv, None))

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
        return Raw(ptr + f"for (int l = 0; l < {n}; ++l) " + body, (s.slot, _addr(s.ws), _addr(r)))

    def visit_PtxCall(self, op):
        from ...op.ptx import cuda_text

        fmt, args, reads = cuda_text(op)
        return Raw(fmt, tuple(self.visit(a) for a in args), reads=reads, span=op.span)

    def visit_Swizzle(self, op):
        return S.seq()

    def visit_AnnotateLayout(self, op):
        """T.annotate_layout: a shared tile annotated with make_swizzled_layout is swizzled
        (indexed through tl::swizzle_offset); row-major needs nothing; any other layout is not
        implemented here and is reported (the tile stays row-major, results are unchanged)."""
        from ...layout.layout import Layout
        from ...layout.swizzle import make_swizzled_layout

        for buf, lay in op.layouts:
            what = f"T.annotate_layout of {buf.name}"
            if buf.scope not in ("shared", "shared.dyn"):
                self.warn(f"{what} is ignored: layouts are honoured for shared tiles only ({buf.name} is "
                          f"{buf.scope}; register fragments are laid out by layout inference)")
                continue
            shape = buf.static_shape
            if not isinstance(lay, Layout) or shape is None or len(shape) != 2 or tuple(lay.shape) != shape:
                self.warn(f"{what} is ignored: only a 2-d layout of the tile's shape {tuple(buf.shape)} "
                          f"(make_swizzled_layout) is implemented, got {lay}")
                continue
            if lay == Layout(shape, lambda i, j: (i, j)):
                continue
            if lay == make_swizzled_layout(buf) or _same_offsets(lay, make_swizzled_layout(buf)):
                self.swizzled.add(buf.uid)
                self.annotated[buf.uid] = buf
                continue
            self.warn(f"{what} is ignored: only row-major and make_swizzled_layout are implemented for "
                      f"shared tiles on CUDA; {buf.name} stays row-major")
        return S.seq()


def _same_offsets(a, b) -> bool:
    """Both layouts put every element at the same flat (row-major over the output shape) offset,
    e.g. a (col_tile, row, col) swizzle whose tiles are whole rows and our (row, col) one."""
    import numpy as np

    def flat(lay):
        t, shape = lay.table(), lay.output_shape()
        return np.ravel_multi_index(tuple(np.moveaxis(t, -1, 0)), shape)
    try:
        return bool((flat(a) == flat(b)).all())
    except Exception:  # noqa: BLE001 - a layout that cannot be enumerated is not this one
        return False


class _RegAccess(Mutator):
    """Inside a slot loop: F[i, j] (the loop's coords) -> F_reg[l] for register fragments."""

    def __init__(self, low: _Lower, cvars, l, driver=None):
        self.low, self.cvars, self.l, self.driver = low, tuple(cvars), l, driver

    def visit_BufferLoad(self, e: E.BufferLoad):
        r = self.low.reg(e.buffer)
        if r is not None:
            lay = self.low.plan.layout(e.buffer)
            if isinstance(lay, RowFragment) and isinstance(self.driver, (MmaAccFragment, WgmmaAccFragment)) \
                    and RowFragment.of(self.driver) == lay:  # R[i] in a loop over an accumulator
                return E.BufferLoad(r, (simplify(lay.slot_of_acc(self.l, self.driver)),), e.dtype)
            return E.BufferLoad(r, (self.l,), e.dtype)
        return self.generic(e)

    def visit_BufferStore(self, s: S.BufferStore):
        r = self.low.reg(s.buffer)
        value = self.visit(s.value)
        if r is not None:
            return S.BufferStore(r, (self.l,), value, span=s.span)
        return S.BufferStore(s.buffer, tuple(self.visit(i) for i in s.indices), value, span=s.span)


def _detach_scope_changes(body, low: _Lower):
    """Lowering moved some fragments to shared memory by setting Buffer.scope; give the lowered
    IR its own shared-scope copies (same uid) and put the user's buffers back as they were, so
    one prim_func can be built again, for another target."""
    from .software_pipeline import _ReplaceBuffers

    copies = {}
    for buf, _ in low.scope_changes:
        if buf.uid not in copies:
            c = Buffer(buf.name, buf.shape, buf.dtype, buf.scope, strides=buf.strides)
            c.uid = buf.uid
            if getattr(buf, "view_base", None) is not None:
                c.view_base = buf.view_base
            copies[buf.uid] = c
    for buf, old in reversed(low.scope_changes):
        buf.scope = old
    low.scope_changes = []
    return _ReplaceBuffers(copies).visit(body) if copies else body


class _MmaPanels(Mutator):
    """An mma.sync gemm reading a tile that a wgmma gemm keeps in 64-column panels reads it as panels
    (tl::gemm_ss's PRA / PRB): which tiles are panels is known only once every gemm is lowered."""

    def __init__(self, panels: set):
        self.panels = panels

    def visit_Raw(self, r: Raw):
        if not r.fmt.startswith("tl::gemm_ss<") or not any(b.uid in self.panels for b in r.reads):
            return r
        a, b = r.reads
        rows = [x.shape[0] if x.uid in self.panels else 0 for x in (a, b)]
        head, tail = r.fmt.split(">(", 1)
        return replace(r, fmt=f"{head}, {rows[0]}, {rows[1]}>({tail}")

def _is_local(buf: Buffer) -> bool:
    return buf.scope in ("local", "local.var")


def _addr(buf: Buffer) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(buf, tuple(E.as_expr(0) for _ in buf.shape), buf.dtype),), dt.uint64)


def lower_kernel(k: S.KernelLaunch, warn, sm: int = 80, row_fragments: bool = False):
    """-> (lowered kernel, CudaKernelInfo). row_fragments: keep per-row values of accumulators
    in registers with shuffle reductions (opt-in until it has run on the GPU tier)."""
    threads = k.threads[0] * k.threads[1] * k.threads[2]
    plan = infer_layouts(k, sm, row_fragments)
    for note in plan.notes:
        warn(note)
    tid = E.Var("tid", dt.int32)
    low = _Lower(plan, threads, tid, warn)
    low.async_accs = async_accumulators(k.body)
    low.sm = sm
    low.ranges.kernel(k)
    body = low.visit(k.body)
    for uid, buf in low.annotated.items():
        if uid in low.panels:  # a wgmma B tile in 64-column panels: the codegen indexes panels
            warn(f"T.annotate_layout swizzle of {buf.name} is overridden: it is a wgmma B tile, kept in "
                 "64-column panels")
    body = _MmaPanels(low.panels).visit(body)
    body = _detach_scope_changes(body, low)
    # thread vars requested by T.get_thread_binding map onto threadIdx
    new = replace(k, body=body)
    shared = [a.buffer for a in collect(body, lambda n: isinstance(n, S.Allocate))
              if a.buffer.scope in ("shared", "shared.dyn")]
    info = CudaKernelInfo(threads, low.regs, shared, low.swizzled, [], tid=tid, panels=low.panels, sm=sm,
                          uses_wgmma=low.uses_wgmma, scope_changes=low.scope_changes)
    return new, info
