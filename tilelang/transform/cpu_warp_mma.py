"""ldmatrix and mma.sync on the CPU backend, as exchanges between a warp's threads (used by cpu_threads.py).

Takes: one `PtxCall` (op/ptx.py: T.ptx_ldmatrix, T.ptx_mma, TensorCoreIntrinEmitter's ldmatrix_a /
ldmatrix_b / mma) of a kernel whose threads cpu_threads runs one after another, the running thread's
index `thr` and the thread interval of the segment. Gives: (pre, post) item lists for cpu_threads:
`pre` has every thread store its inputs (ldmatrix: the 16-byte row its address names; mma: its A and
B fragment registers) in a per-block array indexed by thread; after a barrier, `post` has every
thread compute its own outputs from its warp's entries, by the PTX ISA's layouts (g = lane / 4,
t = lane % 4; P values per 32-bit register: 1, 2, 4 for 32-, 16-, 8-bit values):

- ldmatrix .x{1,2,4}: matrix i's row r is the row lane 8i + r addressed (lanes past 8 * num give
  none); lane l receives of each matrix row l / 4, values P (l % 4) .. + P - 1 (.trans, 16-bit
  only: column l / 4, rows 2 (l % 4), +1). A row is the 16 bytes from the address in the source
  buffer's row-major storage;
- mma.sync m16n8k16 (f16 / bf16 -> f32, f16 -> f16), m16n8k32 (s8 -> s32, e4m3 / e5m2 in any
  pairing -> f32), m16n8k8 (tf32 -> f32: the operands' low 13 mantissa bits dropped, P = 1) and
  m16n8k64 / m16n8k32 (int4 / uint4 -> s32, P = 8: two values a byte of int8 arrays, the even k in
  the low nibble; k32 is k64's first half): A register r holds
  row g + 8 (r % 2), k = P t + 4P (r / 2) + {0..P-1}; B register r holds k = P t + 4P r + {0..P-1},
  column g; accumulator element e is row g + 8 (e / 2), column 2t + e % 2. Products are summed
  in float64 (int64 for integers) from the accumulator's value and rounded once to its type.

Other shapes and dtypes (ldmatrix .trans of 8- or 32-bit values) raise a LoweringError naming
them. A warp must lie whole in the segment's threads.

    T.ptx_mma(..., A_l.data, 0, B_l.data, 0, C_l.data, 0)   ->   for thr: mma_a[thr, 0..8) = A_l[0..8); mma_b[thr, ..] = ..
                                                                 (barrier)
                                                                 for thr: for e: acc = C_l[e]; for k in 16: acc += A(row, k) B(k, col)
                                                                                 C_l[e] = acc   (A, B read from mma_a, mma_b)
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer

WARP = 32
# (A, B, accumulator) dtypes -> the K of the mma.sync m16n8k shapes this module computes
_MMA = {("float16", "float16", "float32"): (16,), ("bfloat16", "bfloat16", "float32"): (16,),
        ("float16", "float16", "float16"): (16,), ("int8", "int8", "int32"): (32,),
        ("float32", "float32", "float32"): (8,),  # tf32
        ("int4", "int4", "int32"): (32, 64), ("uint4", "uint4", "int32"): (32, 64),
        **{(a, b, "float32"): (32,) for a in ("float8_e4m3fn", "float8_e5m2") for b in ("float8_e4m3fn", "float8_e5m2")}}


def _i(x):
    return E.as_expr(x)


def _target(addr, what, op):
    """(buffer, indices) of an `address_of(BufferLoad)` argument."""
    if not (isinstance(addr, E.Call) and addr.op == "address_of" and isinstance(addr.args[0], E.BufferLoad)):
        raise LoweringError(f"internal: {op.what or op.op} {what} is not an element address: {addr!r}", op.span)
    load = addr.args[0]
    return load.buffer, tuple(load.indices)


def _flat(buf: Buffer, idx, op) -> E.Expr:
    """The row-major element offset of buf[idx]."""
    shape = buf.static_shape
    if shape is None:
        raise LoweringError(f"{op.what or op.op} on {buf.name} of symbolic shape is not supported on target cpu",
                            op.span)
    if len(idx) != len(shape):
        raise LoweringError(f"internal: {op.what or op.op} indexes {buf.name} with {len(idx)} indices", op.span)
    off, stride = _i(0), 1
    for i, n in reversed(list(zip(idx, shape))):
        off = off + E.cast(dt.int32, i) * stride
        stride *= n
    return off


def _at(buf: Buffer, flat) -> tuple:
    """Indices of buf's element at row-major offset `flat`."""
    shape = buf.static_shape
    out, stride = [], 1
    strides = []
    for n in reversed(shape):
        strides.append(stride)
        stride *= n
    strides.reverse()
    for d, (n, s) in enumerate(zip(shape, strides)):
        q = flat // s if s > 1 else flat
        out.append(q % n if d > 0 else q)
    return tuple(out)


def _check_warps(op, rng):
    lo, hi = rng
    if lo % WARP or hi % WARP:
        raise LoweringError(f"{op.what or op.op} is a warp collective; on target cpu it runs over threads [{lo}, {hi}), "
                            "which are not whole warps of 32 threads", op.span)


def _local(buf, dtype, what, op):
    if buf.scope != "local":
        raise LoweringError(f"{op.what or op.op}: the {what} must be a T.alloc_local array, {buf.name} is {buf.scope}",
                            op.span)
    if buf.dtype.bits != dtype.bits:
        raise LoweringError(f"{op.what or op.op}: the {what} {buf.name} holds {buf.dtype} and the operation moves "
                            f"{dtype} values; on target cpu the array must hold {dtype.bits}-bit values", op.span)


def ldmatrix(op, thr, rng) -> tuple[list, list]:
    """(pre, post) items of one ldmatrix (module docstring)."""
    trans, num, src, dst = op.args
    sbuf, sidx = _target(src, "source", op)
    dbuf, didx = _target(dst, "destination", op)
    ty = sbuf.dtype
    if ty.bits not in (8, 16, 32) or trans and ty.bits != 16:
        raise LoweringError(f"{op.what or op.op}{' .trans' if trans else ''} of {ty} values is not supported on "
                            "target cpu (16-bit values, or 8- and 32-bit ones without .trans)", op.span)
    _check_warps(op, rng)
    _local(dbuf, ty, "destination", op)
    row, per = 128 // ty.bits, 32 // ty.bits  # values per 16-byte row, per 32-bit register
    n = rng[1]
    lane, base = thr % WARP, thr - thr % WARP
    tmp = Buffer("ldm_rows", (n, row), ty, "local")
    at = _flat(sbuf, sidx, op)
    v = E.Var("v", dt.int32)
    store = S.For(v, _i(0), _i(row), "unroll",
                  S.BufferStore(tmp, (thr, v), E.BufferLoad(sbuf, _at(sbuf, at + v), ty)))
    pre = [("s", S.Allocate(tmp)), ("s", S.IfThenElse(E.compare("<", lane, 8 * num), store, None, span=op.span))]
    r, p = E.Var("r", dt.int32), E.Var("p", dt.int32)
    if trans:  # column l / 4 of rows 2 (l % 4) + p
        val = E.BufferLoad(tmp, (base + 8 * r + 2 * (lane % 4) + p, lane // 4), ty)
    else:
        val = E.BufferLoad(tmp, (base + 8 * r + lane // 4, per * (lane % 4) + p), ty)
    d0 = E.cast(dt.int32, didx[-1]) if len(didx) == 1 else None
    if d0 is None:
        raise LoweringError(f"{op.what or op.op}: the destination {dbuf.name} must be a 1-d local array", op.span)
    put = S.BufferStore(dbuf, (d0 + r * per + p,), E.cast(dbuf.dtype, val), span=op.span)
    post = [("s", S.For(r, _i(0), _i(num), "unroll", S.For(p, _i(0), _i(per), "unroll", put)))]
    return pre, post


def mma(op, thr, rng) -> tuple[list, list]:
    """(pre, post) items of one mma.sync (module docstring)."""
    ta, tb, tc, m, n_, k = op.types
    if (m, n_) != (16, 8) or k not in _MMA.get((ta, tb, tc), ()):
        raise LoweringError(f"{op.what or op.op} m{m}n{n_}k{k} with A={ta}, B={tb}, accumulator={tc} is not supported "
                            "on target cpu (supported: m16n8k16 float16/bfloat16 -> float32, float16 -> float16; "
                            "m16n8k32 int8 -> int32, float8_e4m3fn/float8_e5m2 -> float32; m16n8k8 tf32 -> float32; "
                            "m16n8k32 / m16n8k64 int4 / uint4 -> int32)", op.span)
    _check_warps(op, rng)
    ta, tb, tc = (dt.as_dtype(x) for x in (ta, tb, tc))
    nibbles = ta.bits == 4  # 4-bit operands sit two a byte in int8 / uint8 arrays, the even k in the low nibble
    (abuf, aidx), (bbuf, bidx), (cbuf, cidx) = (_target(x, w, op) for x, w in zip(op.args, ("A", "B", "C")))
    held = (dt.int8, dt.int8) if nibbles else (ta, tb)
    for buf, ty, w in ((abuf, held[0], "A operand"), (bbuf, held[1], "B operand"), (cbuf, tc, "accumulator")):
        _local(buf, ty, w, op)
        if buf.ndim != 1:
            raise LoweringError(f"{op.what or op.op}: the {w} {buf.name} must be a 1-d local array", op.span)
    per = 8 if nibbles else k // 8  # values per 32-bit register
    na, nb = k // 2, k // 4  # A, B values per lane
    pack = 2 if nibbles else 1  # values per stored element
    n = rng[1]
    lane, base = thr % WARP, thr - thr % WARP
    a0, b0, c0 = (E.cast(dt.int32, x[0]) for x in (aidx, bidx, cidx))
    xa = Buffer("mma_a", (n, na // pack), abuf.dtype, "local")
    xb = Buffer("mma_b", (n, nb // pack), bbuf.dtype, "local")
    s = E.Var("s", dt.int32)
    pre = [("s", S.Allocate(xa)), ("s", S.Allocate(xb))]
    for x, buf, at in ((xa, abuf, a0), (xb, bbuf, b0)):
        pre.append(("s", S.For(s, _i(0), _i(x.shape[1]), "unroll",
                               S.BufferStore(x, (thr, s), E.BufferLoad(buf, (at + s,), buf.dtype)))))
    wide = dt.int64 if tc.name == "int32" else dt.float64
    acc = Buffer("mma_acc", (1,), wide, "local")
    e, kk = E.Var("e", dt.int32), E.Var("kk", dt.int32)
    row, col = lane // 4 + 8 * (e // 2), 2 * (lane % 4) + e % 2
    half = 4 * per  # the k the 4 lanes of a row (column) cover with one register each
    a_val = _value(xa, base + (row % 8) * 4 + (kk % half) // per, (row // 8 + 2 * (kk // half)) * per + kk % per, ta)
    b_val = _value(xb, base + col * 4 + (kk % half) // per, (kk // half) * per + kk % per, tb)
    cur = E.BufferLoad(acc, (_i(0),), wide)
    body = S.seq(
        S.BufferStore(acc, (_i(0),), E.cast(wide, E.BufferLoad(cbuf, (c0 + e,), cbuf.dtype))),
        S.For(kk, _i(0), _i(k), "unroll",
              S.BufferStore(acc, (_i(0),), cur + E.cast(wide, a_val) * E.cast(wide, b_val))),
        S.BufferStore(cbuf, (c0 + e,), E.cast(cbuf.dtype, cur), span=op.span))
    post = [("s", S.Allocate(acc)), ("s", S.For(e, _i(0), _i(4), "unroll", body))]
    return pre, post


def _value(x: Buffer, src, slot, ty):
    """Operand value `slot` of thread src's registers in scratch x: tf32 keeps its high 19 bits (as the
    tensor core reads it); a 4-bit value is nibble slot % 2 of byte slot // 2 (int4 sign-extended)."""
    if ty.bits != 4:
        v = E.BufferLoad(x, (src, slot), ty)
        return _tf32(v) if ty.name == "float32" else v
    byte = E.cast(dt.int32, E.cast(dt.uint8, E.BufferLoad(x, (src, slot // 2), x.dtype)))
    nib = E.binop("&", E.binop(">>", byte, 4 * (slot % 2)), E.const(15, dt.int32))
    return nib if ty.name == "uint4" else E.binop("^", nib, E.const(8, dt.int32)) - 8


def _tf32(x):
    bits = E.call("reinterpret", x, dtype=dt.uint32)
    return E.call("reinterpret", E.binop("&", bits, E.const(0xFFFFE000, dt.uint32)), dtype=dt.float32)


def warp_steps(op, thr, rng) -> tuple[list, list]:
    """(pre, post) items of a PtxCall: every thread stores its inputs, then (after a barrier) computes its outputs."""
    if op.op == "ldmatrix":
        return ldmatrix(op, thr, rng)
    if op.op == "mma":
        return mma(op, thr, rng)
    raise LoweringError(f"{op.what or op.op} (PTX {op.op}) is not supported on target cpu", op.span)
