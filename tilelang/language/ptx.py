"""Per-thread PTX tensor-core primitives: `T.ptx_ldmatrix` and `T.ptx_mma` (addresses from `T.access_ptr`).

Thin wrappers: each checks its arguments and appends an `op.ptx.PtxCall` statement. They are
warp-collective (every lane of the warp executes them together); the CPU backend runs them as
exchanges between the warp's threads (fp16 / bf16 / int8 shapes; others raise naming the shape). Most programs reach them through
`tilelang.cuda.intrinsics.TensorCoreIntrinEmitter` rather than directly.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir.buffer import Buffer, BufferRegion
from ..op import ptx as P
from .extern import access_ptr

_ABBREV = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "float32", "int8": "int8",
           "uint8": "uint8", "int32": "int32", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "int4": "int4",
           "uint4": "uint4", "s4": "int4", "u4": "uint4"}


def _element_address(x, what):
    if isinstance(x, E.Call) and x.op == "address_of":
        return x
    if isinstance(x, (E.BufferLoad, Buffer, BufferRegion)):
        return access_ptr(x)
    raise DSLTypeError(f"{what}: expected T.access_ptr(...) or a buffer element, got {x!r}")


def ptx_ldmatrix(trans, num, src_access_ptr, dst_access_ptr):
    """ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16: each lane gives the shared address of
    one 16-byte row (lanes 8m..8m+7 the rows of matrix m); lane l receives row l // 4, 16-bit
    columns 2 (l % 4), +1 of every matrix (the transpose with trans=True) into `num` 32-bit
    registers at the destination.

    Example::

        T.ptx_ldmatrix(False, 4, T.access_ptr(A_shared[tx % 16, 8 * (tx // 16)], "r"),
                       T.access_ptr(A_local[0], "w"))
    """
    B.in_kernel("T.ptx_ldmatrix")
    trans = E.const_value(trans)
    num = E.const_value(num)
    if not isinstance(trans, (bool, int)) or num not in (1, 2, 4):
        raise DSLTypeError(f"T.ptx_ldmatrix: trans must be a constant bool and num 1, 2 or 4, got {trans!r}, {num!r}")
    src = _element_address(src_access_ptr, "T.ptx_ldmatrix source")
    dst = _element_address(dst_access_ptr, "T.ptx_ldmatrix destination")
    if src.args[0].buffer.scope not in ("shared", "shared.dyn"):
        raise DSLTypeError(f"T.ptx_ldmatrix: the source must be shared memory, {src.args[0].buffer.name} is "
                           f"{src.args[0].buffer.scope}")
    if dst.args[0].buffer.scope != "local":
        raise DSLTypeError(f"T.ptx_ldmatrix: the destination must be a T.alloc_local array, "
                           f"{dst.args[0].buffer.name} is {dst.args[0].buffer.scope}")
    B.current().emit(P.PtxCall("ldmatrix", (bool(trans), int(num), src, dst), what="T.ptx_ldmatrix"))


def _dtype_of(abbrev, what):
    name = _ABBREV.get(str(abbrev), str(abbrev))
    try:
        return dt.as_dtype(name).name
    except Exception:  # noqa: BLE001 - re-raised with the argument named
        raise DSLTypeError(f"T.ptx_mma: unknown {what} dtype {abbrev!r}") from None


def ptx_mma(dtype, shape, A_layout, B_layout, A_dtype, B_dtype, C_dtype, multiplicand_a, a_index,
            multiplicand_b, b_index, accumulator, c_index, saturate=False, operator=None):
    """One mma.sync.aligned.{shape}.row.col: accumulator[c_index:] += A @ B for this warp, where this
    lane holds its A, B and C fragment elements (mma.h's lane layouts) in the local arrays
    `multiplicand_a` / `multiplicand_b` / `accumulator` from the given element offsets.

    Example (m16n8k16, f16 in, f32 accumulate)::

        T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32",
                  A_local.data, 0, B_local.data, 0, C_local.data, 0, False)
    """
    B.in_kernel("T.ptx_mma")
    if (A_layout, B_layout) != ("row", "col"):
        raise DSLTypeError(f"T.ptx_mma: only the row.col operand layout exists for mma.sync, got "
                           f"{A_layout}.{B_layout}")
    if saturate not in (False, 0) and E.const_value(saturate) not in (False, 0):
        raise DSLTypeError("T.ptx_mma: saturate=True is not supported")
    if operator is not None:
        raise DSLTypeError(f"T.ptx_mma: operator={operator!r} is not supported")
    ta, tb, tc = (_dtype_of(x, w) for x, w in ((A_dtype, "A"), (B_dtype, "B"), (C_dtype, "C")))
    shapes = {f"m{m}n{n}k{k}": (m, n, k) for m, n, k in P.mma_shapes(ta, tb, tc)}
    if str(shape) not in shapes:
        raise DSLTypeError(f"T.ptx_mma: {ta} x {tb} -> {tc} is mma.sync {' or '.join(shapes)}, got shape {shape!r}")
    m, n, k = shapes[str(shape)]
    addrs = []
    for buf, off, nm in ((multiplicand_a, a_index, "A"), (multiplicand_b, b_index, "B"), (accumulator, c_index, "C")):
        if not isinstance(buf, Buffer) or buf.scope != "local":
            raise DSLTypeError(f"T.ptx_mma: {nm} must be a T.alloc_local array (pass buf.data or buf), got {buf!r}")
        addrs.append(access_ptr(buf, offset=off))
    B.current().emit(P.PtxCall("mma", tuple(addrs), (ta, tb, tc, m, n, k), what="T.ptx_mma"))
