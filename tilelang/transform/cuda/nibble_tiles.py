"""nibble_tiles: int4 / uint4 shared tiles that only move whole bytes become byte tiles (CUDA).

Takes a PrimFunc before `lower_cuda`; gives it back with every qualifying int4 / uint4 shared
tile replaced by an int8 / uint8 tile of half the last dim, the copies into and out of it by
copies of byte views of the global tensors (`X_bytes`, a DeclBuffer at the top of the kernel),
and its T.gemm operand regions by the byte tile's, the gemm marked `packed` with the sub-byte
dtype (gemm_paths.nibble_gemm): it takes mma.sync m16n8k64 (.s4 / .u4) on the bytes, whose 64 k a row are the 32 bytes an int8 m16n8k32 reads (ldmatrix moves them as
they are: the even k in each byte's low nibble, as the packed tensor stores them).

Why: element by element a sub-byte tile is a read-modify-write of half a byte per value (no
cp.async, no vectors, no swizzle, no ldmatrix, a CUDA-core gemm); as bytes it is an int8 tile.

    A_shared = T.alloc_shared((128, 64), T.int4)           A_shared = T.alloc_shared((128, 32), T.int8)
    T.copy(A[by * 128, ko * 64], A_shared)         ->      T.copy(A_bytes[by * 128, ko * 32], A_shared)
    T.gemm(A_shared, B_shared, C, transpose_B=True)        T.gemm(A_shared, B_shared, C, transpose_B=True)

A tile qualifies when every use is a T.copy with a global tensor or another such tile of the same
dtype over whole bytes (the last dim's start and extent even), an int32-accumulating T.gemm
whose operands are both such tiles, K-major (A M x K, B N x K with transpose_B=True) and whole,
or a T.annotate_layout of it as row-major or make_swizzled_layout (which then swizzles the bytes);
any other use (an element access, a fill, a fragment, a strided tensor) keeps it as nibbles.
"""
from __future__ import annotations

from dataclasses import replace

from ... import dtypes as dt
from ...arith.simplify import aligned, const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...ir.stmt import PrimFunc
from ...ir.visitor import Mutator, Visitor, collect
from ...layout.layout import Layout
from ...layout.swizzle import make_swizzled_layout
from ...op import tile_ops as O
from ...op.thread_ops import DeclBuffer

BYTE_OF = {"int4": "int8", "uint4": "uint8"}


def _candidates(body) -> dict:
    """uid -> the int4 / uint4 shared tiles allocated under body with a static, even last dim."""
    out = {}
    for a in collect(body, lambda n: isinstance(n, S.Allocate)):
        b = a.buffer
        last = const_int(b.shape[-1]) if b.ndim else None
        if b.dtype.name in BYTE_OF and b.scope in ("shared", "shared.dyn") and a.init is None \
                and last is not None and last % 2 == 0 and b.static_shape is not None \
                and getattr(b, "view_base", None) is None:
            out[b.uid] = b
    return out


def _whole_bytes(r: BufferRegion) -> bool:
    start, ext = r.ranges[-1]
    return aligned(start, 2) and const_int(ext) is not None and const_int(ext) % 2 == 0


def _global_ok(b: Buffer, dtype, params: set) -> bool:
    """A contiguous tensor parameter of the dtype (its byte view is declared at the kernel's top; the
    host check makes its last dim even: two values a byte)."""
    last = const_int(b.shape[-1]) if b.ndim else None
    return b.uid in params and b.scope == "global" and b.dtype == dtype and b.strides is None \
        and (last is None or last % 2 == 0)


def _gemm_ok(op: O.Gemm, tiles: dict) -> bool:
    a, b = op.A.buffer, op.B.buffer
    return (a.uid in tiles and b.uid in tiles and a.dtype == b.dtype and op.C.buffer.dtype.name == "int32"
            and not op.transpose_A and op.transpose_B and a.ndim == 2 and b.ndim == 2
            and all(_whole(r) for r in (op.A, op.B)))


def _whole(r: BufferRegion) -> bool:
    return all(const_int(s) == 0 and const_int(e) == const_int(d)
               for (s, e), d in zip(r.ranges, r.buffer.shape))


def _qualifying(body, tiles: dict, params: set) -> dict:
    """The candidates every use of which moves whole bytes (a fixpoint: a copy between two tiles, or a
    gemm over two, needs both)."""
    tiles = dict(tiles)
    uses: dict = {uid: [] for uid in tiles}

    class _Uses(Visitor):  # records the statement of each use; a tile op's regions count as one use
        def visit(self, node):
            if isinstance(node, (O.Copy, O.Gemm)):
                for b in {r.buffer.uid for r in _regions(node)} & tiles.keys():
                    uses[b].append(node)
                return
            if isinstance(node, O.AnnotateLayout):
                for b, _ in node.layouts:
                    if b.uid in tiles:
                        uses[b.uid].append(node)
                return
            if isinstance(node, S.Allocate) and node.buffer.uid in tiles:
                return
            if isinstance(node, Buffer) and node.uid in tiles:
                uses[node.uid].append(None)  # any other reference: an element access, a fill, a view ...
                return
            if isinstance(node, E.BufferLoad) and node.buffer.uid in tiles:
                uses[node.buffer.uid].append(None)
            super().visit(node)

    _Uses().visit(body)
    changed = True
    while changed:
        changed = False
        for uid in list(tiles):
            if not all(_use_ok(u, tiles, params) for u in uses[uid]):
                del tiles[uid]
                changed = True
    return tiles


def _regions(op) -> tuple:
    return (op.src, op.dst) if isinstance(op, O.Copy) else (op.A, op.B, op.C)


def _use_ok(op, tiles: dict, params: set) -> bool:
    if isinstance(op, O.Gemm):
        return _gemm_ok(op, tiles)
    if isinstance(op, O.AnnotateLayout):
        return all(_layout_kind(b, lay) is not None for b, lay in op.layouts if b.uid in tiles)
    if not isinstance(op, O.Copy) or op.no_wait:
        return False
    s, d = op.src.buffer, op.dst.buffer
    if s.dtype != d.dtype or not (_whole_bytes(op.src) and _whole_bytes(op.dst)):
        return False
    return all(b.uid in tiles or _global_ok(b, s.dtype, params) for b in (s, d))


class _Rewrite(Mutator):
    def __init__(self, tiles: dict):
        self.tiles = {uid: _bytes_of(b, b.name) for uid, b in tiles.items()}
        self.views: dict = {}  # global uid -> its byte view

    def byte_buffer(self, b: Buffer) -> Buffer:
        if b.uid in self.tiles:
            return self.tiles[b.uid]
        if b.uid not in self.views:
            v = _bytes_of(b, b.name + "_bytes")
            v.view_base = b
            v.auto_named = True
            self.views[b.uid] = v
        return self.views[b.uid]

    def region(self, r: BufferRegion) -> BufferRegion:
        (start, ext), rest = r.ranges[-1], r.ranges[:-1]
        last = (simplify(E.as_expr(start) // 2), const_int(ext) // 2)
        return BufferRegion(self.byte_buffer(r.buffer), tuple(rest) + (last,))

    def visit_Copy(self, op: O.Copy):
        if op.src.buffer.uid in self.tiles or op.dst.buffer.uid in self.tiles:
            return replace(op, src=self.region(op.src), dst=self.region(op.dst))
        return op

    def visit_Gemm(self, op: O.Gemm):
        if op.A.buffer.uid in self.tiles:
            return replace(op, A=self.region(op.A), B=self.region(op.B), packed=op.A.buffer.dtype.name)
        return op

    def visit_AnnotateLayout(self, op: O.AnnotateLayout):
        out = []
        for b, lay in op.layouts:
            kind = _layout_kind(b, lay) if b.uid in self.tiles else None
            if kind is None:
                out.append((b, lay))
                continue
            t = self.tiles[b.uid]
            shape = t.static_shape
            out.append((t, make_swizzled_layout(t) if kind == "swizzled" else Layout(shape, lambda i, j: (i, j))))
        return replace(op, layouts=tuple(out))

    def visit_Allocate(self, a: S.Allocate):
        b = self.tiles.get(a.buffer.uid)
        return a if b is None else replace(a, buffer=b)


def _layout_kind(b: Buffer, lay) -> str | None:
    """"row-major" / "swizzled" for an annotation of a 2-d tile that its byte tile can keep, else None."""
    shape = b.static_shape
    if not isinstance(lay, Layout) or shape is None or len(shape) != 2 or tuple(lay.shape) != shape:
        return None
    if lay == Layout(shape, lambda i, j: (i, j)):
        return "row-major"
    return "swizzled" if lay == make_swizzled_layout(b) else None


def _bytes_of(b: Buffer, name: str) -> Buffer:
    """A buffer of b's bytes: b's shape with the last dim halved, int8 (int4) or uint8 (uint4)."""
    last = b.shape[-1]
    half = const_int(last) // 2 if const_int(last) is not None else simplify(E.as_expr(last) // 2)
    return Buffer(name, tuple(b.shape[:-1]) + (half,), dt.as_dtype(BYTE_OF[b.dtype.name]), b.scope)


class _Kernels(Mutator):
    def __init__(self, params: set):
        self.params = params

    def visit_KernelLaunch(self, k: S.KernelLaunch):
        tiles = _qualifying(k.body, _candidates(k.body), self.params)
        if not tiles:
            return k
        rw = _Rewrite(tiles)
        body = rw.visit(k.body)
        decls = [DeclBuffer(v, v.view_base, span=k.span) for v in rw.views.values()]
        return replace(k, body=S.seq(*decls, body))


def nibble_tiles(func: PrimFunc) -> PrimFunc:
    params = {p.uid for p in func.params if isinstance(p, Buffer)}
    body = _Kernels(params).visit(func.body)
    return func if body is func.body else replace(func, body=body)


def nibble_tiles_pass(func: PrimFunc, ctx) -> PrimFunc:
    return nibble_tiles(func)
