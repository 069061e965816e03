"""Swizzle the shared tiles an accumulator is staged through (CUDA codegen layout choice).

Why: `T.copy(acc, tile_s)` from an mma/wgmma accumulator stores column pairs (`tl_store2`), 8 rows
of 4 lanes per warp instruction (on sm_90 stmatrix: 8 rows of 16 bytes per matrix). In a row-major
tile with rows of a multiple of 128 bytes those 8 rows start in the same bank, so every pair store
is an 8-way bank conflict (the attention backward's dV / dK epilogue: 32 + 48 stores a thread at 8
wavefronts each, ~5000 shared-store cycles per block, more than a k-iteration). Swizzled (16-byte
chunk c of row r at c ^ (r % 8), indexed by `tl::swizzle_xor_offset`: the same layout as the gemm
tiles' `tl::swizzle_offset`, cheaper here) the 8 rows hit 8 different chunks: one wavefront per
store; the 16-byte vector reads of the copy out of the tile stay whole chunks.

Expects: the lowered kernel body (Raw statements) and its CudaKernelInfo, every group
(swizzled / panels of lowering, warp specialization, T.ws) merged in.
Guarantees: adds to `info.swizzled` (and `info.xor_swizzled`) each shared 2-d tile whose rows are a multiple of 128 bytes that
is written by at least one accumulator pair store and is otherwise touched only element-wise through
the codegen's indexing (BufferLoad / BufferStore, `tl_store2`, `tl::stmatrix_pack`, `tl::copy_vec*`, `tl::load_vec`,
`tl::store_vec`, the vector reductions `tl_atomic_add_v*` reading it, at an element's address): no base pointer, gemm, ldmatrix, TMA, cp.async or inline
code names it, and no layout (annotation, gemm operand, TMA box) was chosen for it already.
"""
from __future__ import annotations

import dataclasses

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Visitor, collect

# inline statements that touch at most 16 bytes at the element address they are given
_ELEMENTWISE = ("tl_store2(", "tl::copy_vec16(", "tl::copy_vec8(", "tl::copy_vec4(", "tl::load_vec<",
                "tl::store_vec<", "tl_atomic_add_v", "tl::stmatrix_pack<")
# the accumulator stores (a stmatrix row is one whole 16-byte chunk: any chunk swizzle keeps it)
_ACC_STORES = ("tl_store2(", "tl::stmatrix_pack<")


def _candidate(b: Buffer, taken: set) -> bool:
    shape = b.static_shape
    if b.scope not in ("shared", "shared.dyn") or shape is None or len(shape) != 2 or b.uid in taken:
        return False
    if getattr(b, "view_base", None) is not None or getattr(b, "view_of", None) is not None:
        return False
    if b.dtype.bits not in (16, 32):
        return False
    row = shape[1] * b.dtype.bytes
    return row % 128 == 0 and shape[0] >= 8


class _Uses(Visitor):
    def __init__(self, cands: dict):
        self.cands = cands
        self.bad: set = set()
        self.pair_stores: set = set()
        self.ok_addr = False  # inside an element-wise Raw's arguments

    def _buffers(self, node):
        """Candidate buffers named directly by node's fields."""
        out = []
        for f in dataclasses.fields(node) if dataclasses.is_dataclass(node) else ():
            v = getattr(node, f.name)
            for x in (v if isinstance(v, (tuple, list)) else (v,)):
                if isinstance(x, Buffer) and x.uid in self.cands:
                    out.append(x.uid)
        return out

    def visit_Raw(self, r):
        fmt = r.fmt.lstrip()
        if fmt.startswith(_ELEMENTWISE):
            if fmt.startswith(_ACC_STORES) and r.args:
                a = r.args[0]
                if isinstance(a, E.Call) and a.op == "address_of" and isinstance(a.args[0], E.BufferLoad) \
                        and a.args[0].buffer.uid in self.cands:
                    self.pair_stores.add(a.args[0].buffer.uid)
            prev, self.ok_addr = self.ok_addr, True
            self.visit(r.args)
            self.ok_addr = prev
            return  # reads / writes only name the tiles for barrier placement
        # any other inline code: its buffers are off limits (base pointers, layouts of its own)
        for x in (*r.reads, *r.writes):
            if isinstance(x, Buffer):
                self.bad.add(x.uid)
        for n in _all_loads(r.args):
            self.bad.add(n)

    def visit_Call(self, c):
        if c.op == "address_of":
            inner = c.args[0] if c.args else None
            if not self.ok_addr or not isinstance(inner, E.BufferLoad) or \
                    (inner.buffer.uid in self.cands and all(_is_zero(i) for i in inner.indices)):
                # a base pointer (or an address outside an element-wise statement)
                for n in _all_loads(c.args):
                    self.bad.add(n)
        prev = self.ok_addr
        if c.op != "address_of":
            self.ok_addr = False
        self.generic(c)
        self.ok_addr = prev

    def generic(self, node):
        if not isinstance(node, (E.BufferLoad, S.BufferStore, S.Allocate)):
            self.bad.update(self._buffers(node))
        super().generic(node)


def _is_zero(e) -> bool:
    return isinstance(e, E.Const) and e.value == 0


def _all_loads(node) -> list:
    out = []
    for n in collect(node, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
        out.append(n.buffer.uid)
    return out


def staging_swizzle(body, info, exclude=frozenset()) -> list:
    """Add the accumulator staging tiles of `body` to info.swizzled; returns those buffers.
    exclude: uids whose layout is tied to another tile's (staged views)."""
    taken = set(info.swizzled) | set(info.panels) | set(exclude)
    allocs = [a.buffer for a in collect(body, lambda n: isinstance(n, S.Allocate))]
    cands = {b.uid: b for b in allocs if _candidate(b, taken)}
    if not cands:
        return []
    u = _Uses(cands)
    u.visit(body)
    chosen = [b for uid, b in cands.items() if uid in u.pair_stores and uid not in u.bad]
    for b in chosen:
        info.swizzled.add(b.uid)
        info.xor_swizzled.add(b.uid)
    return chosen
