"""Lower tile ops to plain loops for the CPU backend (one CPU thread runs a whole block;
cpu_threads has already turned thread-level code into loops over the block's threads).

Expects: parsed IR (tile ops, T.Parallel/T.Pipelined loops).
Guarantees: no TileOp remains except Print/DeviceAssert (handled by codegen); every loop
is serial; out-of-range global reads of copies give 0 and writes are skipped.

    T.copy(A[by*64, k*32], A_s)            for i in serial(64): for j in serial(32):
                                    ->        A_s[i, j] = A[by*64+i, k*32+j] if (by*64+i < M and k*32+j < K) else 0
    T.gemm(A_s, B_s, C)                    for i, k, j: C[i, j] += cast(A_s[i, k]) * cast(B_s[k, j])
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arith.ranges import Ranges, TrackRanges
from ..arith.simplify import const_int, simplify
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer, BufferRegion
from ..ir.visitor import Mutator, collect
from ..op import tile_ops as O
from ..op.reduce_rules import ABS_KINDS, combiner, identity
from ..op.regions import matrix_dims, squeezed
from ..op.registry import lowering_rule
from .cpu_threads import LOOP_MARK
from .hopper_cpu import HopperCPU, barrier_init

_GEMM_K_UNROLLS = (8, 4, 2)  # k steps per pass over a C row in the CPU gemm: fewer C loads/stores


def serial_loops(extents, make_body, kind="serial", prefix="i"):
    """Nest loops (serial by default) over `extents`; make_body(list_of_vars) -> Stmt."""
    vs = [E.Var(f"{prefix}{n}", dt.int32) for n in range(len(extents))]
    body = make_body(vs)
    for v, e in reversed(list(zip(vs, extents))):
        body = S.For(v, E.as_expr(0), E.as_expr(e), kind, body)
    return body


def region_indices(r: BufferRegion, vs) -> tuple:
    """Indices into r.buffer for loop vars `vs` running over r's non-unit extents."""
    out, k = [], 0
    for start, ext in r.ranges:
        if const_int(ext) == 1:
            out.append(start)
        else:
            out.append(simplify(start + vs[k]))
            k += 1
    return tuple(out)


def in_bounds(r: BufferRegion, idx, ranges: Ranges | None = None) -> E.Expr | bool:
    """Condition that `idx` (an element of region r) lies inside a global buffer, True when
    provable. Per dimension, `idx < dim` is dropped when the region's end provably fits
    (`ranges` bounds the block and loop variables in its start) or the index itself does;
    `idx >= 0` is added only where the start provably can be negative (a halo)."""
    if r.buffer.scope != "global":
        return True
    ranges = ranges or Ranges()
    out = True
    for (start, ext), i, dim in zip(r.ranges, idx, r.buffer.shape):
        last = simplify(E.as_expr(start) + ext - 1)
        fits = const_int(simplify(E.as_expr(dim) - last))
        lo = ranges.bounds(start)
        if lo is not None and lo[0] < 0 and not ranges.nonneg(i):
            out = E.logical_and(out, E.binop(">=", i, 0))
        if not (fits is not None and fits > 0 or ranges.below(last, dim) or ranges.below(i, dim)):
            out = E.logical_and(out, E.binop("<", i, dim))
    return out


class LowerTileOpsCPU(HopperCPU, TrackRanges, Mutator):
    def __init__(self):
        self.ranges = Ranges()  # block and loop variables: proves bounds guards redundant

    def visit(self, node):
        """A tile op with a registered "cpu" rule (op/registry.py) lowers through it, as
        rule(self, op) (self.ranges bounds the enclosing variables); the rest through visit_*."""
        rule = lowering_rule("cpu", node)
        if rule is not None:
            return rule(self, node)
        return super().visit(node)

    def visit_For(self, s: S.For):
        outer = self.threads_now
        if s.annotation(LOOP_MARK[0]):  # a cpu_threads segment: each iteration is one thread
            self.threads_now = 1
        try:
            with self.ranges.loop(s):
                body = self.visit(s.body)
        finally:
            self.threads_now = outer
        kind = "serial" if s.kind in ("parallel", "pipelined", "vectorized") else s.kind
        return S.For(s.var, s.start, s.extent, kind, body, (), span=s.span)

    def visit_Copy(self, op: O.Copy):
        ext = squeezed(op.dst.extents)

        def body(vs):
            si, di = region_indices(op.src, vs), region_indices(op.dst, vs)
            val = E.cast(op.dst.buffer.dtype, E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype))
            ok_src = in_bounds(op.src, si, self.ranges)
            if ok_src is not True:
                val = E.select(ok_src, val, E.const(0, op.dst.buffer.dtype))
            st = S.BufferStore(op.dst.buffer, di, val, span=op.span)
            ok_dst = in_bounds(op.dst, di, self.ranges)
            return st if ok_dst is True else S.IfThenElse(ok_dst, st, span=op.span)

        return serial_loops(ext, body)

    def visit_Fill(self, op: O.Fill):
        ext = squeezed(op.dst.extents)

        def body(vs):
            di = region_indices(op.dst, vs)
            st = S.BufferStore(op.dst.buffer, di, op.value, span=op.span)
            ok = in_bounds(op.dst, di, self.ranges)
            return st if ok is True else S.IfThenElse(ok, st)

        return serial_loops(ext, body)

    def visit_Gemm(self, op: O.Gemm):
        m, n, k = op.mnk
        acc = op.C.buffer.dtype
        i, j = E.Var("gi", dt.int32), E.Var("gj", dt.int32)
        cidx = _mat_at(op.C, i, j).indices
        prologue, b_at = _gemm_b_reader(op, j, k, n, acc)

        # a 16- or 8-bit float accumulator sums each unrolled k chunk in float32 and rounds once
        # per chunk, as a tensor-core MMA rounds once per k16 step; rounding every product-add
        # to fp16 drifted past 1e-2 over K=768
        narrow = acc.is_float and acc.bits < 32
        work = dt.float32 if narrow else acc

        def update(ks):
            # C + a(k0)*b(k0) + a(k1)*b(k1) ...: the k order (and so the rounding) of a plain
            # k loop, but C stays in a register across the unrolled ks.
            val = E.cast(work, E.BufferLoad(op.C.buffer, cidx, acc))
            for kx in ks:
                a = _mat_at(op.A, kx, i) if op.transpose_A else _mat_at(op.A, i, kx)
                val = val + E.cast(work, E.cast(acc, a)) * E.cast(work, b_at(kx))
            return S.BufferStore(op.C.buffer, cidx, E.cast(acc, val))

        unrolls = (16, *_GEMM_K_UNROLLS) if narrow else _GEMM_K_UNROLLS
        body = S.seq(prologue, _serial(i, m, _gemm_kj_loops(j, k, n, update, unrolls)))
        if op.clear_accum:
            body = S.seq(O_fill(op.C, acc), body)
        return body

    def visit_Reduce(self, op: O.Reduce):
        src, dst = op.src, op.dst
        keep = [s for d, s in enumerate(src.shape) if d != op.dim]
        red = src.shape[op.dim]
        dt_ = dst.dtype
        init_e = identity(op.kind, dt_)
        comb = combiner(op.kind, op.nan_propagate)

        # a sum into a 16- or 8-bit float accumulates in float32 and rounds once (rounding every add to bf16
        # drifted 0.7 over 128 values; CUDA's per-thread partials and float32 lane reduction round far less)
        wide = op.kind in ("sum", "abssum") and dt_.is_float and dt_.bits < 32

        def body(vs):
            didx = _dst_index(dst, vs)
            cur = E.BufferLoad(dst, didx, dt_)
            r = E.Var("r", dt.int32)
            sidx = list(vs)
            sidx.insert(op.dim, r)
            v = E.cast(dt.float32 if wide else dt_, E.BufferLoad(src, tuple(sidx), src.dtype))
            if op.kind in ABS_KINDS:
                v = E.call("abs", v)
            if wide:
                accb = Buffer("red_acc", (1,), dt.float32, "local")
                acc = E.BufferLoad(accb, (E.as_expr(0),), dt.float32)
                start = E.const(0.0, dt.float32) if op.clear else E.cast(dt.float32, cur)
                loop = S.For(r, E.as_expr(0), E.as_expr(red), "serial",
                             S.BufferStore(accb, (E.as_expr(0),), comb(acc, v)))
                return S.seq(S.Allocate(accb), S.BufferStore(accb, (E.as_expr(0),), start), loop,
                             S.BufferStore(dst, didx, E.cast(dt_, acc)))
            loop = S.For(r, E.as_expr(0), E.as_expr(red), "serial",
                         S.BufferStore(dst, didx, comb(cur, v)))
            first = S.BufferStore(dst, didx, init_e) if op.clear else None
            return S.seq(first, loop)

        return serial_loops(keep, body, prefix="ri") if keep else body([])

    def visit_CumSum(self, op: O.CumSum):
        keep = [s for d, s in enumerate(op.scan_extents()) if d != op.dim]
        return serial_loops(keep, lambda vs: cumsum_scan(op, vs), prefix="ci")

    def visit_AtomicTile(self, op: O.AtomicTile):
        ext = squeezed(op.dst.extents)

        def body(vs):
            di = region_indices(op.dst, vs)
            if isinstance(op.src, BufferRegion):
                si = region_indices(op.src, vs)
                v = E.cast(op.dst.buffer.dtype, E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype))
            else:
                v = op.src
            target = E.BufferLoad(op.dst.buffer, di, op.dst.buffer.dtype)
            st = S.Evaluate(E.Call("atomic_" + op.kind, (target, v), op.dst.buffer.dtype), span=op.span)
            ok = in_bounds(op.dst, di, self.ranges)
            return st if ok is True else S.IfThenElse(ok, st)

        return serial_loops(ext, body, prefix="ai") if ext else body([])

    def visit_Im2Col(self, op: O.Im2Col):
        from ..op.im2col import im2col_loop

        return self.visit(im2col_loop(op.src.buffer, op.dst.buffer, op.nhw, op.cblk, op.kernel, op.stride,
                                      op.dilation, op.pad, kind="serial"))

    def visit_Swizzle(self, op):
        return S.seq()

    def visit_AnnotateLayout(self, op):
        return S.seq()

    def visit_FinalizeReducer(self, op):  # one thread runs the block: the reducer already holds the result
        return S.seq()

    def visit_KernelLaunch(self, k: S.KernelLaunch):
        from ..op.ptx import PtxCall, cpu_error

        ptx = collect(k.body, lambda n: isinstance(n, PtxCall))
        if ptx:
            raise cpu_error(ptx[0])
        reject_thread_level(k)
        if k.thread_vars:  # one thread per block (reject_thread_level checked): every index is 0
            from dataclasses import replace

            from ..ir.visitor import substitute

            k = replace(k, thread_vars=(), body=substitute(k.body, {v: E.as_expr(0) for v in k.thread_vars}))
        self.ranges.kernel(k)
        self.threads_now = k.threads[0] * k.threads[1] * k.threads[2]
        return self.generic(k)

    def visit_Allocate(self, s: S.Allocate):
        if getattr(s.buffer, "barrier_counts", None) is not None:  # T.alloc_barrier: a fresh phase 0
            return S.seq(s, barrier_init(s.buffer))
        return s


def reject_thread_level(k: S.KernelLaunch):
    """Thread-level code left after cpu_threads (which runs a block's threads as loops and
    removes every thread index it can give a meaning): what the CPU still cannot mean."""
    from ..codegen.intrinsics import CPU_UNSUPPORTED
    from ..op.thread_ops import ThreadAllReduce

    threads = k.threads[0] * k.threads[1] * k.threads[2]
    if k.thread_vars and threads != 1:
        raise LoweringError(f"thread indices on target cpu in a kernel of {threads} threads reached tile-op "
                            "lowering (internal: the cpu_threads pass should have run)", k.span)
    for st in collect(k.body, lambda n: isinstance(n, S.Stmt) and not isinstance(n, S.SeqStmt)):
        if isinstance(st, ThreadAllReduce):
            raise LoweringError("T.tvm_thread_allreduce reached tile-op lowering on target cpu (internal: the "
                                "cpu_threads pass should have split it)", st.span)
        if isinstance(st, (S.For, S.IfThenElse, S.While, S.KernelLaunch)):
            continue  # their bodies are visited as statements of their own
        for c in collect(st, lambda n: isinstance(n, E.Call) and n.op in CPU_UNSUPPORTED):
            raise LoweringError(f"{CPU_UNSUPPORTED[c.op]} is not supported on target cpu: its block's threads run "
                                "one after another between barriers, so which lanes are active (or whether other "
                                "blocks run at the same time) has no meaning there", getattr(st, "span", None))


def _serial(v, extent, body):
    return S.For(v, E.as_expr(0), E.as_expr(extent), "serial", body)


def _mat_at(r: BufferRegion, a, b) -> E.BufferLoad:
    """Element (a, b) of a gemm operand region (its row and column dims, see matrix_dims)."""
    idx = list(r.starts)
    for d, v in zip(matrix_dims(r), (a, b)):
        idx[d] = simplify(idx[d] + v)
    return E.BufferLoad(r.buffer, tuple(idx), r.buffer.dtype)


def _gemm_b_reader(op: O.Gemm, j, k, n, acc):
    """(prologue, b_at): b_at(kx) is B[kx, j] as the accumulator dtype.

    With transpose_B, B is read along k; the prologue copies it once, transposed and
    converted, into a (K, N) scratch tile so the inner j loop streams contiguous rows.
    """
    kc, nc = const_int(k), const_int(n)
    if not (op.transpose_B and kc is not None and nc is not None):
        return None, lambda kx: E.cast(acc, _mat_at(op.B, j, kx) if op.transpose_B else _mat_at(op.B, kx, j))
    bt = Buffer("gemm_bt", (kc, nc), acc, "local")
    kk = E.Var("gk", dt.int32)
    fill = _serial(kk, k, _serial(j, n, S.BufferStore(bt, (kk, j), E.cast(acc, _mat_at(op.B, j, kk)))))
    return S.seq(S.Allocate(bt), fill), lambda kx: E.BufferLoad(bt, (kx, j), acc)


def _gemm_kj_loops(j, k, n, update, unrolls=_GEMM_K_UNROLLS):
    """k then j (i-k-j order: the inner loop streams B and C rows and vectorizes), with k
    unrolled by the first of `unrolls` (8/4/2) that divides K so each C element is loaded and
    stored less often."""
    kc = const_int(k)
    unroll = next((u for u in unrolls if kc is not None and kc % u == 0 and kc > u), None)
    if unroll is None:
        kk = E.Var("gk", dt.int32)
        return _serial(kk, k, _serial(j, n, update([kk])))
    ko = E.Var("gko", dt.int32)
    return _serial(ko, kc // unroll, _serial(j, n, update([ko * unroll + u for u in range(unroll)])))


def cumsum_scan(op: O.CumSum, vs) -> S.Stmt:
    """The serial scan along op.dim for one position `vs` of the other dims (all targets)."""
    src, dst = op.src, op.dst
    n = const_int(op.scan_extents()[op.dim])
    r = E.Var("c", dt.int32)
    pos = (n - 1 - r) if op.reverse else r
    prev = (pos + 1) if op.reverse else (pos - 1)

    def idx(p, start):
        lst = list(vs)
        lst.insert(op.dim, p)
        return tuple(lst) if not start else tuple(E.as_expr(a) + b for a, b in zip(start, lst))

    v = E.cast(dst.dtype, E.BufferLoad(src, idx(pos, op.src_start), src.dtype))
    before = E.BufferLoad(dst, idx(prev, op.dst_start), dst.dtype)
    acc = E.select(E.binop("==", r, 0), v, E.call("max", before, v) if op.kind == "max" else before + v)
    return S.For(r, E.as_expr(0), E.as_expr(n), "serial", S.BufferStore(dst, idx(pos, op.dst_start), acc))


def O_fill(region: BufferRegion, dtype):
    return LowerTileOpsCPU().visit_Fill(O.Fill(region, E.const(0, dtype)))


def _dst_index(dst: Buffer, vs):
    if len(vs) == dst.ndim:
        return tuple(vs)
    # destination with unit dims squeezed away / added
    out, k = [], 0
    for s in dst.shape:
        if const_int(s) == 1 and (len(vs) < dst.ndim):
            out.append(E.as_expr(0))
        else:
            out.append(vs[k])
            k += 1
    return tuple(out)


def lower_tile_ops_cpu(func: S.PrimFunc, ctx=None) -> S.PrimFunc:
    from dataclasses import replace

    return replace(func, body=LowerTileOpsCPU().visit(func.body))
