"""Warp-level tensor-core primitives written per thread: ldmatrix and mma.sync on register arrays.

Takes: `PtxCall` statements made by `T.ptx_ldmatrix` / `T.ptx_mma` (language/ptx.py) and by the
`TensorCoreIntrinEmitter` (tilelang/cuda/intrinsics); each names the primitive and carries
element addresses (`address_of(BufferLoad)`) into shared tiles and per-thread `local` arrays.
Gives: the CUDA text each lowers to (`cuda_text`, a call into include/tl/mma_frag.h). The CPU
backend runs them as exchanges between a warp's threads (transform/cpu_warp_mma.py, from
cpu_threads); `cpu_error` is lower_tile_ops_cpu's error for one that reached it unsplit.

    T.ptx_ldmatrix(False, 4, T.access_ptr(A_s[r, c], "r"), T.access_ptr(A_l[8 * i], "w"))
        -> tl::ldmatrix_frag<4, false>(&A_l[8 * i], (tl::smem_addr(A_s) + static_cast<uint32_t>(r * 32 + c) * 2u));
    T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32", A_l.data, 0, B_l.data, 0, C_l.data, 0, False)
        -> tl::mma_frag<tl::half_t, tl::half_t, float, 16, 8, 16>(C_l, A_l, B_l);
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import LoweringError, Span
from ..ir import expr as E
from ..ir.stmt import Stmt, default_span

# the C++ element types of include/tl (what tl::mma_sync dispatches on)
CXX_TYPE = {"float16": "tl::half_t", "bfloat16": "tl::bfloat16_t", "float32": "float", "int8": "int8_t",
            "uint8": "uint8_t", "int32": "int32_t", "float8_e4m3fn": "tl::float8_e4m3_t",
            "float8_e5m2": "tl::float8_e5m2_t", "int4": "tl::int4x2_t", "uint4": "tl::uint4x2_t"}

# (A dtype, B dtype, accumulator dtype) -> (M, N, K) of the mma.sync shape the header provides
MMA_SHAPES = {
    ("float16", "float16", "float32"): (16, 8, 16), ("bfloat16", "bfloat16", "float32"): (16, 8, 16),
    ("float16", "float16", "float16"): (16, 8, 16), ("int8", "int8", "int32"): (16, 8, 32),
    ("float32", "float32", "float32"): (16, 8, 8),
    ("float8_e4m3fn", "float8_e4m3fn", "float32"): (16, 8, 32), ("float8_e5m2", "float8_e5m2", "float32"): (16, 8, 32),
    ("float8_e4m3fn", "float8_e5m2", "float32"): (16, 8, 32), ("float8_e5m2", "float8_e4m3fn", "float32"): (16, 8, 32),
    # 4-bit integers (fragments are bytes holding two values, the even k in the low nibble)
    ("int4", "int4", "int32"): (16, 8, 64), ("uint4", "uint4", "int32"): (16, 8, 64),
}
# shapes a combination has besides MMA_SHAPES' (4-bit integers: m16n8k32, half the k64 fragments)
MMA_OTHER_SHAPES = {("int4", "int4", "int32"): ((16, 8, 32),), ("uint4", "uint4", "int32"): ((16, 8, 32),)}


@dataclass(frozen=True)
class PtxCall(Stmt):
    """One warp-collective primitive executed by every thread of the block.

    op: "ldmatrix" (args: trans, num, src address, dst address) or "mma" (args: A, B, C
    addresses; dtypes and shape in `types`). `what` is the user-facing name for messages.
    """

    op: str
    args: tuple
    types: tuple = ()  # mma: (a dtype, b dtype, acc dtype, m, n, k)
    what: str = ""
    span: Span | None = default_span()

    def buffers(self) -> list:
        return [a.args[0].buffer for a in self.args if isinstance(a, E.Call) and a.op == "address_of"]


def address_of(load: E.BufferLoad) -> E.Call:
    """The address of one element, as the CUDA codegen prints it (`&buf[flat index]`)."""
    return E.Call("address_of", (load,), dt.uint64)


def mma_shape(a, b, acc) -> tuple:
    key = (dt.as_dtype(a).name, dt.as_dtype(b).name, dt.as_dtype(acc).name)
    if key not in MMA_SHAPES:
        supported = ", ".join(f"{x}x{y}->{z}" for x, y, z in MMA_SHAPES)
        raise LoweringError(f"no mma.sync for A={key[0]}, B={key[1]}, accumulator={key[2]}; supported: {supported}")
    return MMA_SHAPES[key]


def mma_shapes(a, b, acc) -> tuple:
    """Every (M, N, K) of mma.sync for these operand and accumulator dtypes (MMA_SHAPES' first)."""
    key = (dt.as_dtype(a).name, dt.as_dtype(b).name, dt.as_dtype(acc).name)
    return (mma_shape(*key),) + MMA_OTHER_SHAPES.get(key, ())


def cuda_text(op: PtxCall) -> tuple[str, tuple, tuple]:
    """(format, args, shared buffers read) of the Raw statement `op` lowers to on CUDA."""
    if op.op == "ldmatrix":
        trans, num, src, dst = op.args
        reads = tuple(b for b in (src.args[0].buffer,) if b.scope in ("shared", "shared.dyn"))
        # {1:smem}: the CUDA codegen may pass the source as a 32-bit shared address (tl.disable_shared_address_slots)
        return f"tl::ldmatrix_frag<{num}, {'true' if trans else 'false'}>({{0}}, {{1:smem}});", (dst, src), reads
    if op.op == "mma":
        a, b, c = op.args
        ta, tb, tc, m, n, k = op.types
        tmpl = f"{CXX_TYPE[ta]}, {CXX_TYPE[tb]}, {CXX_TYPE[tc]}, {m}, {n}, {k}"
        return f"tl::mma_frag<{tmpl}>({{0}}, {{1}}, {{2}});", (c, a, b), ()
    raise LoweringError(f"internal: unknown PTX primitive {op.op!r}", op.span)


def cpu_error(op: PtxCall) -> LoweringError:
    return LoweringError(
        f"internal: {op.what or op.op} (PTX {op.op}) reached lower_tile_ops_cpu; the CPU backend runs it only "
        "through cpu_threads, which splits a block's threads at warp exchanges",
        op.span)
