"""ldmatrix for T.copy(shared tile, 16-bit register tile in the mma/wgmma accumulator layout).

Expects: a Copy whose destination lives in registers with an MmaAccFragment or
WgmmaAccFragment layout (an accumulator's 16-bit twin, or the A tile of a register-A wgmma).
Guarantees: `ldmatrix_fill` loads every slot of every thread with ldmatrix.x4 (x2 for an odd
last atom); `ldmatrix_unfit` says why a candidate cannot (the caller warns and falls back
to element loads).

Both layouts are stacks of 16x8 atoms per warp where lane l holds row l // 4 (and + 8),
cols 2(l % 4), +1 in slots 4a + 0..3 of atom a. ldmatrix matrix m (its row addresses come
from lanes 8m..8m+7) delivers row l // 4, cols 2(l % 4), +1 to lane l, so matrix m of one
x4 is rows 8(m % 2).. of atom 2p + m // 2 and the four registers are slots 8p .. 8p + 7:

    T.copy(R_s, R_f)       for p in unroll(atoms / 2):
                    ->       r, c = row/col of atom 2p + m // 2, half m % 2, lane row lane % 8
                             tl::ldmatrix_to<4>(&R_f[8p], &R_s[r, c])
"""
from __future__ import annotations

from ... import dtypes as dt
from ...arith.simplify import const_int, linear_form, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import substitute
from ...layout.fragment import MmaAccFragment, WgmmaAccFragment
from ..lower_tile_ops_cpu import region_indices


def ldmatrix_candidate(op, lay, src_in_registers: bool) -> bool:
    """A shared -> 16-bit accumulator-layout register copy (what ldmatrix could serve)."""
    src = op.src.buffer
    return isinstance(lay, (MmaAccFragment, WgmmaAccFragment)) and src.scope in ("shared", "shared.dyn") \
        and not src_in_registers and src.dtype.bytes == 2


def ldmatrix_unfit(op, lay, threads: int) -> str | None:
    """None when ldmatrix can fill the accumulator-layout tile op.dst from shared op.src."""
    s, d = op.src.buffer, op.dst.buffer
    if s.dtype != d.dtype:
        return f"it converts {s.dtype} to {d.dtype}"
    if lay.threads != threads:
        return f"the tile's layout spans {lay.threads} of the block's {threads} threads"
    if s.strides is not None or s.ndim < 2:
        return f"{s.name} is not a row-major 2-d tile"
    ext = [const_int(e) for e in op.src.extents]
    if any(e != 1 for e in ext[:-2]) or ext[-2:] != [const_int(x) for x in d.shape]:
        return f"the source region is not a {tuple(d.shape)} box of {s.name}'s last two dims"
    row = const_int(s.shape[-1])
    if row is None or row % 8:
        return f"{s.name}'s rows are {s.shape[-1]} elements, not a multiple of 8 (16 bytes)"
    lin = linear_form(simplify(E.as_expr(op.src.starts[-1])))
    if lin is None or lin[1] % 8 or any(c % 8 for c in lin[0].values()):
        return f"column offset {op.src.starts[-1]} is not provably a multiple of 8"
    return None


def _addr(buf, indices) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(buf, tuple(indices), buf.dtype),), dt.uint64)


def ldmatrix_fill(op, dreg, lay, tid, raw, annotations) -> S.Stmt:
    """Every slot of the register tile `dreg` (layout `lay`) from shared op.src, by ldmatrix."""
    src = op.src.buffer
    atoms = lay.nlocal // 4
    p, lane = E.Var("p", dt.int32), tid % 32
    out = []
    for num, count, first in ((4, atoms // 2, lambda p: p * 2), (2, atoms % 2, lambda p: atoms - 1)):
        if not count:
            continue
        m = lane // 8 if num == 4 else (lane // 8) % 2  # x2: lanes 16..31 repeat valid addresses
        # the thread of this warp whose row (lane // 4) is lane % 8, at the matrix's first slot
        row, col = (simplify(c) for c in lay.coords(tid - lane + (lane % 8) * 4, (first(p) + m // 2) * 4 + (m % 2) * 2))
        r, c = E.Var("r", dt.int32), E.Var("c", dt.int32)
        load = raw(f"tl::ldmatrix_to<{num}>({{0}}, {{1}});",
                   (_addr(dreg, (first(p) * 4,)), _addr(src, region_indices(op.src, (r, c)))), reads=(src,))
        body = S.seq(S.LetStmt(r, row), S.LetStmt(c, col), load)
        out.append(S.For(p, E.as_expr(0), E.as_expr(count), "unroll", body, annotations) if num == 4
                   else substitute(body, {p: E.as_expr(0)}))
    return S.seq(*out)
