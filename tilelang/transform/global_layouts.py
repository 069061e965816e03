"""T.annotate_layout on a global tensor: the tensor's storage is laid out by the layout.

Takes: a PrimFunc whose kernels may hold `T.annotate_layout({G: T.Layout(G.shape, fn)})` with G a
global tensor (the public TileLang's flash-attention backward kernels lay out their dQ
accumulator so that a warp's atomics of one accumulator fragment hit 32 adjacent floats).
Gives: in each such kernel, a view `G_phys` of G's storage with the layout's output shape
(declared at the kernel's top), every element access `G[idx]` rewritten to `G_phys[fn(idx)]`,
and every T.copy / T.fill / tile T.atomic_* over a region of G turned into a T.Parallel element
loop over the region that does the same. G's entry leaves the annotation. Any other tile op
reading or writing G is an error naming it, as is a layout whose physical index space is larger
than G's storage or cannot be bounded.

    T.annotate_layout({dQ: Layout([B, L, H, D], lambda b, l, h, d: [b, l // 8, h, d // 8, d % 2,
                                                                   4 * (l % 8) + d % 8 // 2])})
    T.atomic_add(dQ[b, l, h, d], v)   ->   T.atomic_add(dQ_phys[b, l // 8, h, d // 8, d % 2, ...], v)

Both backends run it (before tile-op lowering), so the CPU and CUDA results agree element for
element on the tensor's memory, as with the public TileLang.
"""
from __future__ import annotations

import math

from ..arith.ranges import Ranges, TrackRanges
from ..arith.simplify import const_int, simplify
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.visitor import Mutator, collect
from ..layout.layout import Layout
from ..op import tile_ops as O
from ..op.regions import squeezed
from ..op.thread_ops import DeclBuffer
from .lower_tile_ops_cpu import in_bounds, region_indices, serial_loops
from .pass_config import get as config

_ELEMENTWISE = (O.Copy, O.Fill, O.AtomicTile)


def global_layouts_pass(func: S.PrimFunc, ctx) -> S.PrimFunc:
    from dataclasses import replace

    if not collect(func.body, _global_annotation):
        return func
    calls = ctx is None or not config(ctx.pass_configs, "tl.disable_minmax_call_ranges", False)
    return replace(func, body=_PerKernel(calls).visit(func.body))


def _global_annotation(n) -> bool:
    return isinstance(n, O.AnnotateLayout) and any(
        b.scope == "global" and isinstance(lay, Layout) for b, lay in n.layouts)


class _PerKernel(Mutator):
    def __init__(self, minmax_calls: bool):
        self.minmax_calls = minmax_calls

    def visit_KernelLaunch(self, k: S.KernelLaunch):
        from dataclasses import replace

        views = {}
        for ann in collect(k.body, _global_annotation):
            for buf, lay in ann.layouts:
                if buf.scope == "global" and isinstance(lay, Layout) and buf.uid not in views:
                    views[buf.uid] = (buf, lay, _physical_view(buf, lay, ann.span))
        if not views:
            return k
        rw = _Rewrite(views, self.minmax_calls)
        rw.ranges.kernel(k)
        body = rw.visit(k.body)
        decls = [DeclBuffer(view, buf) for buf, _, view in views.values()]
        return replace(k, body=S.seq(*decls, body))


def _physical_view(buf: Buffer, lay: Layout, span) -> Buffer:
    what = f"T.annotate_layout of the global tensor {buf.name}{tuple(buf.shape)}"
    if len(lay.shape) != buf.ndim or any(const_int(simplify(E.as_expr(a) - b)) != 0
                                         for a, b in zip(lay.shape, buf.shape)):
        raise LoweringError(f"{what}: the layout's shape {tuple(lay.shape)} is not the tensor's", span)
    if lay.is_table:
        raise LoweringError(f"{what}: a layout given by a table maps constant indices only", span)
    ranges = Ranges()
    scope = {v: (0, const_int(E.as_expr(s)) - 1) for v, s in zip(lay.forward_vars, buf.shape)
             if const_int(E.as_expr(s)) is not None}
    if buf.strides is not None:
        raise LoweringError(f"{what}: {buf.name} is a T.StridedTensor; a layout over its storage would "
                            "ignore the declared strides (pass a contiguous T.Tensor)", span)
    if len(scope) != buf.ndim:
        raise LoweringError(f"{what}: the tensor's shape must be constant to lay it out (its physical "
                            "extents come from the layout's largest index)", span)
    shape = []
    with ranges.scoped(scope):
        for n, out in enumerate(lay.forward_index):
            b = ranges.bounds(out)
            if b is None or b[0] < 0:
                raise LoweringError(f"{what}: physical index {n} ({out}) cannot be bounded to 0 .. n-1 "
                                    "over the tensor's shape", span)
            shape.append(b[1] + 1)
    numel = math.prod(const_int(E.as_expr(s)) for s in buf.shape)
    if math.prod(shape) > numel:
        raise LoweringError(f"{what}: the layout's physical shape {tuple(shape)} holds {math.prod(shape)} "
                            f"elements, more than the tensor's {numel}", span)
    view = Buffer(f"{buf.name}_phys", tuple(shape), buf.dtype, "global")
    view.auto_named = True
    view.view_base = getattr(buf, "view_base", buf)
    return view


class _Rewrite(TrackRanges, Mutator):
    """Rewrites accesses of the laid-out tensors; block and loop ranges prove the element loops'
    bounds guards redundant (a dQ atomic under `if k * 32 + i < 512` cost ~15 instructions and a
    branch per element in the attention backward's k-loop)."""

    def __init__(self, views: dict, minmax_calls: bool = False):
        self.views = views
        self.ranges = Ranges(minmax_calls)

    def visit_For(self, s: S.For):
        with self.ranges.loop(s):
            return self.generic(s)

    def _phys(self, buf: Buffer, idx):
        _, lay, view = self.views[buf.uid]
        return view, tuple(simplify(x) for x in lay.map(*(self.visit(i) for i in idx)))

    def visit_BufferLoad(self, e: E.BufferLoad):
        if e.buffer.uid in self.views:
            view, idx = self._phys(e.buffer, e.indices)
            return E.BufferLoad(view, idx, e.dtype)
        return self.generic(e)

    def visit_BufferStore(self, s: S.BufferStore):
        if s.buffer.uid in self.views:
            view, idx = self._phys(s.buffer, s.indices)
            return S.BufferStore(view, idx, self.visit(s.value), span=s.span)
        return self.generic(s)

    def visit_AnnotateLayout(self, op: O.AnnotateLayout):
        from dataclasses import replace

        rest = tuple((b, lay) for b, lay in op.layouts if b.uid not in self.views)
        return replace(op, layouts=rest) if rest else S.seq()

    def generic(self, node):
        if isinstance(node, S.TileOp) and not isinstance(node, (O.AnnotateLayout, DeclBuffer)):
            touched = [b for b in node.buffers() if isinstance(b, Buffer) and b.uid in self.views]
            if touched:
                if isinstance(node, _ELEMENTWISE):
                    return self.visit(_element_loop(node, self.ranges))
                name = type(node).__name__
                raise LoweringError(f"{name} over {touched[0].name}, a global tensor with a T.annotate_layout, "
                                    "is not supported (T.copy, T.fill and T.atomic_* are)", node.span)
        return super().generic(node)


def _element_loop(op, ranges: Ranges) -> S.Stmt:
    """The tile op as a T.Parallel loop over its region's elements, accesses by logical index
    (guarded where `ranges`, the block and loop variables' bounds, cannot prove them in the tensor)."""
    if isinstance(op, O.Copy):
        def body(vs):
            si, di = region_indices(op.src, vs), region_indices(op.dst, vs)
            val = E.cast(op.dst.buffer.dtype, E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype))
            ok = in_bounds(op.src, si, ranges)
            if ok is not True:
                val = E.select(ok, val, E.const(0, op.dst.buffer.dtype))
            return _guarded(in_bounds(op.dst, di, ranges), S.BufferStore(op.dst.buffer, di, val, span=op.span))
        return serial_loops(squeezed(op.dst.extents), body, kind="parallel")
    if isinstance(op, O.Fill):
        def body(vs):
            di = region_indices(op.dst, vs)
            return _guarded(in_bounds(op.dst, di, ranges), S.BufferStore(op.dst.buffer, di, op.value, span=op.span))
        return serial_loops(squeezed(op.dst.extents), body, kind="parallel")

    def body(vs):  # AtomicTile
        di = region_indices(op.dst, vs)
        dtype = op.dst.buffer.dtype
        if isinstance(op.src, E.Expr):
            val = E.cast(dtype, op.src)
        else:
            si = region_indices(op.src, vs)
            val = E.cast(dtype, E.BufferLoad(op.src.buffer, si, op.src.buffer.dtype))
        at = E.Call(f"atomic_{op.kind}", (E.BufferLoad(op.dst.buffer, di, dtype), val), dtype)
        return _guarded(in_bounds(op.dst, di, ranges), S.Evaluate(at))
    return serial_loops(squeezed(op.dst.extents), body, kind="parallel")


def _guarded(ok, st: S.Stmt) -> S.Stmt:
    return st if ok is True else S.IfThenElse(ok, st)

