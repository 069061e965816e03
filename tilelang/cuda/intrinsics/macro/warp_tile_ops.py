"""Per-thread IR pieces the mma.sync emitters share (TensorCoreIntrinEmitter and its Ladder
subclass): where a shared operand starts, one element of it, checks on the local arrays, one
ldmatrix call, an unrolled copy into local slots, and an unrolled per-thread loop.

    base, buf = operand_region(A_shared, "ldmatrix_a")        # (0, 0), A_shared
    emit_unrolled(i, warp_rows, ldmatrix_call(False, 4, operand_elem(buf, base, (r, c)), A_local, 8 * i, "ldmatrix_a"))
"""
from __future__ import annotations

from .... import dtypes as dt
from ....arith.simplify import simplify
from ....errors import DSLTypeError
from ....frontend import builder as B
from ....ir import expr as E
from ....ir import stmt as S
from ....ir.buffer import Buffer, BufferRegion
from ....op import ptx as P

THREAD_LOOP = (("tl.thread_loop", True),)  # one per-thread unit for the barrier planner


def operand_region(x, what):
    """(base indices, buffer) of a shared operand: a buffer, a region, or a corner element."""
    if isinstance(x, Buffer):
        return tuple(E.as_expr(0) for _ in x.shape), x
    if isinstance(x, BufferRegion):
        return tuple(x.starts), x.buffer
    if isinstance(x, E.BufferLoad):
        return tuple(x.indices), x.buffer
    raise DSLTypeError(f"TensorCoreIntrinEmitter.{what}: expected a shared buffer or region, got {x!r}")


def operand_elem(buf, base, at) -> E.BufferLoad:
    """buf at base + (0, .., 0, at[-2], at[-1]) (or all of `at` for a 4-d store)."""
    idx = list(base)
    lead = len(idx) - len(at)
    for d, v in enumerate(at):
        idx[lead + d] = simplify(E.as_expr(idx[lead + d]) + v)
    return E.BufferLoad(buf, tuple(idx), buf.dtype)


def check_local(buf, need, what, nm):
    """Raise unless `buf` is a T.alloc_local array of at least `need` elements (operand `nm`)."""
    if not isinstance(buf, Buffer) or buf.scope != "local":
        raise DSLTypeError(f"TensorCoreIntrinEmitter.{what}: {nm} must be a T.alloc_local array, got {buf!r}")
    if buf.numel() < need:
        raise DSLTypeError(f"TensorCoreIntrinEmitter.{what}: {nm} array {buf.name} has {buf.numel()} elements, "
                           f"the warp tile needs {need} per thread")


def ldmatrix_call(trans, num, src: E.BufferLoad, local: Buffer, at, what):
    """One ldmatrix of `num` 8x8 matrices from shared `src` into `local` from slot `at`."""
    if src.buffer.scope not in ("shared", "shared.dyn"):
        raise DSLTypeError(f"TensorCoreIntrinEmitter.{what}: ldmatrix reads shared memory; {src.buffer.name} is "
                           f"{src.buffer.scope}")
    dst = P.address_of(local[simplify(E.as_expr(at))])
    return P.PtxCall("ldmatrix", (bool(trans), num, P.address_of(src), dst), what=f"TensorCoreIntrinEmitter.{what}")


def fill_slots(local: Buffer, at, n, load):
    """for s in unroll(n): local[at + s] = load(s)."""
    s = E.Var("s", dt.int32)
    v = load(s)
    st = S.BufferStore(local, (simplify(E.as_expr(at) + s),), E.cast(local.dtype, v))
    return S.For(s, E.as_expr(0), E.as_expr(n), "unroll", st)


def emit_unrolled(v, n, body):
    """Emit `for v in unroll(n): body` as one per-thread unit."""
    B.current().emit(S.For(v, E.as_expr(0), E.as_expr(n), "unroll", body, THREAD_LOOP))
