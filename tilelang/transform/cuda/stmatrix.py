"""stmatrix for T.copy(register tile in the mma/wgmma accumulator layout, 16-bit shared tile).

Expects: a Copy from registers laid out as an MmaAccFragment or WgmmaAccFragment (a float32
accumulator, or its 16-bit twin) to a 16-bit shared tile, on sm_90+ (stmatrix is new there).
Guarantees: `stmatrix_store` writes every element of the tile with stmatrix.x4 (x2 for an odd
last atom), each value rounded once to the shared tile's type and packed two per register;
`stmatrix_unfit` says why a candidate cannot (the caller falls back to paired 4-byte stores).

Both layouts are stacks of 16x8 atoms per warp where lane l holds row l // 4 (and + 8), cols
2(l % 4), +1 in slots 4a + 0..3 of atom a: matrix m of one x4 is rows 8(m % 2).. of atom
2p + m // 2, its register holds slots 8p + 2m, 8p + 2m + 1, and lane 8m + q gives the address of
its row q (16 contiguous bytes: every shared layout here permutes whole 16-byte chunks). One
stmatrix.x4 replaces four 4-byte stores (the same bytes, a quarter of the instructions):

    T.copy(acc_s, S_s)     for l in unroll(16):  tl_store2(&S_s[i(l), j(l)], bf16(acc_s[2l]), bf16(acc_s[2l+1]))
                    ->     for p in unroll(4):   r, c = row/col of atom 2p + m // 2, half m % 2, lane row lane % 8
                                                 tl::stmatrix_pack<4>(&S_s[r, c], bf16(acc_s[8p]), .., bf16(acc_s[8p+7]))
"""
from __future__ import annotations

from ... import dtypes as dt
from ...arith.simplify import const_int, linear_form, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import substitute
from ...layout.fragment import MmaAccFragment, WgmmaAccFragment
from ..lower_tile_ops_cpu import region_indices

# float -> emulated 16-bit type, rounded once (as the paired store does)
_CONVERT = {"bfloat16": "tl_f32_to_bf16"}


def stmatrix_candidate(op, lay, dst_in_registers: bool, sm: int) -> bool:
    """A register accumulator-layout -> 16-bit shared copy on sm_90+ (what stmatrix could serve)."""
    dst = op.dst.buffer
    return sm >= 90 and isinstance(lay, (MmaAccFragment, WgmmaAccFragment)) and not dst_in_registers \
        and dst.scope in ("shared", "shared.dyn") and dst.dtype.bytes == 2


def stmatrix_unfit(op, lay) -> str | None:
    """None when stmatrix can write the accumulator-layout tile op.src whole into shared op.dst."""
    s, d = op.src.buffer, op.dst.buffer
    if not s.dtype.is_float:
        return f"{s.name} holds {s.dtype}, not floating-point values"
    if len(s.shape) != 2 or any(const_int(st) != 0 or const_int(e) != const_int(n)
                                for (st, e), n in zip(op.src.ranges, s.shape)):
        return f"the copy reads a part of {s.name}, not the whole tile"
    if d.strides is not None or d.ndim < 2:
        return f"{d.name} is not a row-major tile of 2 or more dims"
    ext = [const_int(e) for e in op.dst.extents]
    if any(e != 1 for e in ext[:-2]) or ext[-2:] != [const_int(x) for x in s.shape]:
        return f"the destination region is not a {tuple(s.shape)} box of {d.name}'s last two dims"
    row = const_int(d.shape[-1])
    if row is None or row % 8:
        return f"{d.name}'s rows are {d.shape[-1]} elements, not a multiple of 8 (16 bytes)"
    lin = linear_form(simplify(E.as_expr(op.dst.starts[-1])))
    if lin is None or lin[1] % 8 or any(c % 8 for c in lin[0].values()):
        return f"column offset {op.dst.starts[-1]} is not provably a multiple of 8"
    if lay.nlocal % 4:
        return f"{s.name} holds {lay.nlocal} slots per thread, not whole 16x8 atoms"
    return None


def _value(sreg, slot: E.Expr, dtype) -> E.Expr:
    """Slot `slot` of the register tile, as float where `_CONVERT` rounds it, else cast once."""
    v = E.BufferLoad(sreg, (slot,), sreg.dtype)
    return E.cast(dt.float32 if dtype.name in _CONVERT else dtype, v)


def stmatrix_store(op, sreg, lay, tid, raw, annotations) -> S.Stmt:
    """Every slot of the register tile `sreg` (layout `lay`) into shared op.dst, by stmatrix."""
    dst = op.dst.buffer
    atoms = lay.nlocal // 4
    p, lane = E.Var("stsm_p", dt.int32), tid % 32
    out = []
    for num, count, first in ((4, atoms // 2, lambda p: p * 2), (2, atoms % 2, lambda p: atoms - 1)):
        if not count:
            continue
        m = lane // 8 if num == 4 else (lane // 8) % 2  # x2: lanes 16..31 repeat valid addresses
        # the matrix's row lane % 8 is the row lane 0 of this warp holds there, + lane % 8
        row, col = lay.coords((tid // 32) * 32, (first(p) + m // 2) * 4 + (m % 2) * 2)
        row, col = simplify(row + lane % 8), simplify(col)
        r, c = E.Var("stsm_r", dt.int32), E.Var("stsm_c", dt.int32)  # not the user's names
        addr = E.Call("address_of", (E.BufferLoad(dst, region_indices(op.dst, (r, c)), dst.dtype),), dt.uint64)
        vals = tuple(_value(sreg, simplify(E.as_expr(first(p) * 4 + k)), dst.dtype) for k in range(2 * num))
        conv = _CONVERT.get(dst.dtype.name, "")
        holes = ", ".join(f"{conv}({{{k + 1}}})" for k in range(2 * num))
        store = raw(f"tl::stmatrix_pack<{num}>({{0}}, {holes});", (addr,) + vals, writes=(dst,))
        body = S.seq(S.LetStmt(r, row), S.LetStmt(c, col), store)
        out.append(S.For(p, E.as_expr(0), E.as_expr(count), "unroll", body, annotations) if num == 4
                   else substitute(body, {p: E.as_expr(0)}))
    return S.seq(*out)
