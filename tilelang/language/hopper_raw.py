"""The public TileLang's raw Hopper names (its TIR intrinsics), for programs that address
barriers, tensor maps and wgmma descriptors by hand.

Each call is one PTX instruction run by every thread that reaches it: guard it with
`if tx == 0:` where one thread should issue it. Thin wrappers: each checks its arguments and
appends an op/hopper_raw.py node (lowered by transform/cuda/manual_ws.py on sm_90a and
transform/hopper_cpu.py on the CPU backend).

Barriers by id (the TIR style)::

    T.create_barriers(2)                       # barriers 0 and 1 in shared memory, uninitialised
    if tx == 0:
        T.ptx_init_barrier_thread_count(0, 128)
        T.ptx_init_barrier_thread_count(1, 1)
    T.ptx_fence_barrier_init()
    T.sync_threads()
    T.ptx_arrive_barrier(0)                    # ids work wherever a barrier is taken
    T.ptx_wait_barrier(0)

TMA and wgmma from descriptors (one warp group; A 64 x 64 and B 64 x 64 fp16, both 128B-swizzled
by the tensor maps; K stepped through the descriptors' 16-byte offsets)::

    da = T.create_tma_descriptor(6, 2, A.data, 64, 64, 2, 128, 64, 64, 1, 1, 0, 3, 2, 0)
    if tx == 0:
        T.ptx_arrive_barrier_expect_tx(0, 8192)
        T.tma_load(da, 0, T.access_ptr(A_s, "w"), 0, 0, 0)
    T.ptx_wait_barrier(0)
    T.initialize_wgmma_descriptor(desc_a, T.access_ptr(A_s, "r"), 1, 1, 64)   # 128B swizzle, SBO 1024 B
    T.warpgroup_arrive()
    for ki in T.unroll(4):
        T.ptx_wgmma_ss("float32", "m64n64k16", True, False, "fp16", "fp16", "fp32", desc_a.data, ki * 2,
                       desc_b.data, ki * 128, C_local.data, 0, ki > 0, True, True)
    T.warpgroup_commit_batch()
    T.warpgroup_wait(0)
"""
from __future__ import annotations

import re

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.expr import as_expr
from ..op import hopper as H
from ..op import hopper_raw as R
from .alloc import alloc_local
from .hopper import barrier_ref
from .kernel import get_thread_binding


# ---------------------------------------------------------------- barriers by id
def create_barriers(barrier_count):
    """`barrier_count` mbarriers in shared memory, named by the ids 0 .. barrier_count - 1 in
    T.ptx_init_barrier_thread_count, T.ptx_arrive_barrier, T.ptx_wait_barrier, T.tma_load ... of
    this kernel. They start uninitialised: T.ptx_init_barrier_thread_count(id, count) sets each
    one's arrival count (then T.ptx_fence_barrier_init and T.sync_threads before other threads use
    them). Returns the barrier buffer (ids and `bars[i]` name the same barriers)."""
    k = B.in_kernel("T.create_barriers")
    n = const_int(barrier_count)
    if n is None or n < 1:
        raise DSLTypeError(f"T.create_barriers: barrier_count must be a compile-time integer of at least 1, "
                           f"got {barrier_count!r}")
    if k.barriers is not None:
        raise DSLTypeError("T.create_barriers: this kernel has its barriers already (one call per kernel; ask "
                           "for all of them at once)")
    b = B.current("T.create_barriers")
    buf = Buffer(b.unique("barrier"), (n,), "uint64", "shared.dyn")
    buf.barrier_counts = (0,) * n
    buf.explicit_init = True
    buf.auto_named = False
    b.emit(S.Allocate(buf))
    k.barriers = buf
    return buf


def ptx_init_barrier_thread_count(barrier_id, thread_count):
    """mbarrier.init: barrier `barrier_id` (of T.create_barriers) starts its phase 0 waiting for
    `thread_count` arrivals. Every thread that runs it initialises the barrier: guard it with
    `if tx == 0:`."""
    B.in_kernel("T.ptx_init_barrier_thread_count")
    buf, i = barrier_ref(barrier_id, "T.ptx_init_barrier_thread_count")
    if not H.explicit_init(buf):
        raise DSLTypeError(f"T.ptx_init_barrier_thread_count: {buf.name} comes from T.alloc_barrier, which "
                           "initialises its barriers with their arrive_count; this call initialises the "
                           "barriers of T.create_barriers")
    c = const_int(thread_count)
    if c is not None and not 1 <= c < (1 << 20):
        raise DSLTypeError(f"T.ptx_init_barrier_thread_count: thread_count must be in [1, 2^20), got {c}")
    B.current().emit(R.BarrierInit(buf, i, as_expr(thread_count)))


# ---------------------------------------------------------------- TMA by hand
def _const_arg(v, what, name) -> int:
    if isinstance(v, bool):
        return int(v)
    c = const_int(v)
    if c is None:
        raise DSLTypeError(f"{what}: the {name} must be a compile-time integer, got {v!r}")
    return c


def create_tma_descriptor(*args):
    """A tensor map over a global tensor, for T.tma_load (cuTensorMapEncodeTiled's arguments):

        T.create_tma_descriptor(data_type, rank, global_addr, *global_shape, *global_stride,
                                *smem_box, *smem_stride, interleave, swizzle, l2_promotion, oob_fill)

    Per-dim lists have `rank` entries, innermost (contiguous) dim first; global_stride is in
    bytes (its first entry, the element size, is not used); data_type, interleave, swizzle,
    l2_promotion and oob_fill are the CUtensorMap enum values (swizzle 0 none, 1 = 32 B,
    2 = 64 B, 3 = 128 B). global_addr is the tensor (`A.data` or `A`). The map is encoded on the
    host at each launch; the returned value names it in T.tma_load. Not supported (errors):
    interleaved maps, element strides other than 1, NaN out-of-bounds fill, tf32 / FTZ types.

    Example (a 64x64 fp16 box of A (M, K), 128-byte swizzle)::

        desc = T.create_tma_descriptor(6, 2, A.data, K, M, 2, K * 2, 64, 64, 1, 1, 0, 3, 2, 0)
    """
    what = "T.create_tma_descriptor"
    B.in_kernel(what)
    if len(args) < 3:
        raise DSLTypeError(f"{what}: expected data_type, rank, global_addr, ... (7 + 4 * rank arguments)")
    data_type, rank = _const_arg(args[0], what, "data_type"), _const_arg(args[1], what, "rank")
    if not 1 <= rank <= 5 or len(args) != 7 + 4 * rank:
        raise DSLTypeError(f"{what}: rank {rank} needs 7 + 4 * rank = {7 + 4 * rank} arguments (rank 1 .. 5), "
                           f"got {len(args)}")
    if data_type not in R.TMA_DATA_TYPES or data_type >= 10:
        raise DSLTypeError(f"{what}: data_type {data_type} is not supported (CUtensorMapDataType 0 .. 9: integer, "
                           "float16/32/64 and bfloat16 maps; tf32 and FTZ maps are not)")
    buf = args[2]
    if not isinstance(buf, Buffer) or buf.scope != "global":
        raise DSLTypeError(f"{what}: global_addr must be a global tensor (A.data or A), got {buf!r}")
    elem = R.TMA_DATA_TYPES[data_type][1]
    if max(1, buf.dtype.bits // 8) != elem:
        raise DSLTypeError(f"{what}: data_type {data_type} ({R.TMA_DATA_TYPES[data_type][0]}) has {elem}-byte "
                           f"elements; {buf.name} is {buf.dtype}")
    per = [args[3 + i * rank:3 + (i + 1) * rank] for i in range(4)]
    dims, strides = tuple(as_expr(x) for x in per[0]), tuple(as_expr(x) for x in per[1])
    box = tuple(_const_arg(x, what, "smem_box entries") for x in per[2])
    estr = [_const_arg(x, what, "smem_stride entries") for x in per[3]]
    interleave, swizzle, l2, oob = (_const_arg(x, what, n) for x, n in
                                    zip(args[-4:], ("interleave", "swizzle", "l2_promotion", "oob_fill")))
    if any(e != 1 for e in estr):
        raise DSLTypeError(f"{what}: element strides {estr} are not supported (only 1)")
    if interleave != 0 or oob != 0:
        raise DSLTypeError(f"{what}: interleave {interleave} / oob_fill {oob} are not supported (only 0: no "
                           "interleave, zero fill)")
    if swizzle not in R.TMA_SWIZZLE_BYTES or l2 not in R.TMA_L2_BYTES:
        raise DSLTypeError(f"{what}: swizzle must be 0 .. 3 and l2_promotion 0 .. 3, got {swizzle}, {l2}")
    sw = R.TMA_SWIZZLE_BYTES[swizzle]
    if any(not 1 <= b <= 256 for b in box) or (box[0] * elem) % 16 or (sw and box[0] * elem > sw):
        raise DSLTypeError(f"{what}: box {list(box)}: dims in [1, 256], the inner one a multiple of 16 bytes"
                           + (f" and at most the {sw}-byte swizzle span" if sw else ""))
    return R.RawTmaDesc(buf, data_type, dims, strides, box, sw, R.TMA_L2_BYTES[l2])


def _shared_pointer(p, what):
    """address_of(shared element) of `T.access_ptr(X[...])`, `X[...]`, or a shared buffer X."""
    if isinstance(p, Buffer):
        p = E.BufferLoad(p, tuple(as_expr(0) for _ in p.shape), p.dtype)
    if isinstance(p, E.BufferLoad):
        p = E.Call("address_of", (p,), p.buffer.dtype)
    if not (isinstance(p, E.Call) and p.op == "address_of" and p.args[0].buffer.scope in ("shared", "shared.dyn")):
        raise DSLTypeError(f"{what}: expected a shared-memory address (T.access_ptr(X_shared, 'w'), X_shared[i, j] "
                           f"or X_shared), got {p!r}")
    return p


def tma_load(*args):
    """cp.async.bulk.tensor by every thread that runs it (guard with `if tx == 0:`):

        T.tma_load(descriptor, mbarrier, smem_addr, coord_0, ..., coord_{rank-1}[, eviction_policy])

    The box of `descriptor` (T.create_tma_descriptor) at element coordinates coord_0 (innermost)
    ... lands at `smem_addr` densely, innermost dim first, with the map's swizzle applied to the
    shared byte address; elements outside the tensor are zero. Its bytes complete on `mbarrier`
    (a barrier id of T.create_barriers, or mbars[i]): arm it with
    T.ptx_arrive_barrier_expect_tx(mbarrier, box bytes). eviction_policy is an L2 cache hint
    (0 normal, 1 evict first, 2 evict last): accepted; it changes no values and is not applied."""
    what = "T.tma_load"
    B.in_kernel(what)
    if len(args) < 3 or not isinstance(args[0], R.RawTmaDesc):
        raise DSLTypeError(f"{what}: expected (descriptor from T.create_tma_descriptor, mbarrier, smem_addr, "
                           "coordinates..., eviction_policy)")
    desc = args[0]
    coords = args[3:]
    if len(coords) == desc.rank + 1:
        policy = _const_arg(coords[-1], what, "eviction_policy")
        if policy not in (0, 1, 2):
            raise DSLTypeError(f"{what}: eviction_policy must be 0, 1 or 2, got {policy}")
        coords = coords[:-1]
    if len(coords) != desc.rank:
        raise DSLTypeError(f"{what}: a rank-{desc.rank} map takes {desc.rank} coordinates (innermost first), "
                           f"got {len(coords)}")
    buf, i = barrier_ref(args[1], what)
    dst = _shared_pointer(args[2], what)
    B.current().emit(R.TmaLoad(desc, buf, i, dst, tuple(as_expr(c) for c in coords)))


def _element(buf: Buffer, offset) -> E.Expr:
    """address_of the element `offset` elements past buf's first (row-major)."""
    idx, rest = [], as_expr(offset)
    for d in reversed(buf.shape[1:]):
        idx.insert(0, E.binop("%", rest, d))
        rest = E.binop("//", rest, d)
    return E.Call("address_of", (E.BufferLoad(buf, (rest, *idx), buf.dtype),), buf.dtype)


def ptx_cp_async_bulk(dtype, shared_ptr, shared_offset, global_ptr, global_offset, bytes, barrier_id):
    """cp.async.bulk by every thread that runs it: `bytes` bytes (a multiple of 16; both addresses
    16-byte aligned) from global_ptr + global_offset to shared_ptr + shared_offset (offsets in
    elements of each buffer), completing on barrier `barrier_id` (of T.create_barriers). `dtype`,
    the call's own type, is not used."""
    what = "T.ptx_cp_async_bulk"
    B.in_kernel(what)
    for name, x, scopes in (("shared_ptr", shared_ptr, ("shared", "shared.dyn")),
                            ("global_ptr", global_ptr, ("global",))):
        if not isinstance(x, Buffer) or x.scope not in scopes:
            raise DSLTypeError(f"{what}: {name} must be a {scopes[0]} buffer (X.data or X), got {x!r}")
    n = const_int(bytes)
    if n is not None and (n <= 0 or n % 16):
        raise DSLTypeError(f"{what}: bytes must be a positive multiple of 16, got {n}")
    buf, i = barrier_ref(barrier_id, what)
    B.current().emit(R.BulkCopy(_element(shared_ptr, shared_offset), _element(global_ptr, global_offset),
                                as_expr(bytes), buf, i))


# ---------------------------------------------------------------- wgmma by hand
def alloc_descriptor(kind="wgmma", dtype="uint64"):
    """A 64-bit wgmma shared-memory matrix descriptor in a register of each thread (a one-element
    local buffer): set it with T.initialize_wgmma_descriptor, move it with
    T.increase_descriptor_offset, pass `desc.data` to T.ptx_wgmma_ss / T.ptx_wgmma_rs. Only
    kind "wgmma" (Hopper); the tcgen05 kinds (Blackwell) are not supported."""
    if kind != "wgmma":
        raise DSLTypeError(f"T.alloc_descriptor(kind={kind!r}): only 'wgmma' descriptors (Hopper) are supported; "
                           "tcgen05 (Blackwell) descriptors are not")
    if str(dtype) != "uint64":
        raise DSLTypeError(f"T.alloc_descriptor: a wgmma descriptor is uint64, got dtype {dtype}")
    return alloc_local((1,), "uint64")


def alloc_wgmma_desc(dtype="uint64"):
    """`T.alloc_descriptor("wgmma", dtype)`."""
    return alloc_descriptor("wgmma", dtype)


def _desc_slot(descriptor, what):
    """(buffer, index) of a descriptor: its one-element buffer, `desc.data`, or `desc[0]`."""
    if isinstance(descriptor, Buffer) and descriptor.numel() == 1:
        return descriptor, (as_expr(0),) * descriptor.ndim
    if isinstance(descriptor, E.BufferLoad):
        return descriptor.buffer, descriptor.indices
    raise DSLTypeError(f"{what}: expected a descriptor from T.alloc_wgmma_desc (a one-element buffer), "
                       f"got {descriptor!r}")


def initialize_wgmma_descriptor(descriptor, start_address, layout_type_=0, leading_byte_offset=0,
                                stride_byte_offset=0):
    """descriptor <- a wgmma matrix descriptor of the operand at `start_address` (a shared address:
    T.access_ptr(X_shared) or X_shared[i, j]): layout_type_ 0 no swizzle, 1 = 128 B, 2 = 64 B,
    3 = 32 B swizzle; leading / stride byte offsets (LBO, SBO) given already divided by 16;
    base offset 0. The canonical layouts they describe: cpu/tl_smem_desc.h."""
    what = "T.initialize_wgmma_descriptor"
    B.in_kernel(what)
    buf, idx = _desc_slot(descriptor, what)
    ptr = _shared_pointer(start_address, what)
    layout = _const_arg(layout_type_, what, "layout_type_")
    lbo, sbo = (_const_arg(x, what, n) for x, n in ((leading_byte_offset, "leading_byte_offset"),
                                                    (stride_byte_offset, "stride_byte_offset")))
    if layout not in (0, 1, 2, 3) or not (0 <= lbo < 1 << 14 and 0 <= sbo < 1 << 14):
        raise DSLTypeError(f"{what}: layout_type_ must be 0 .. 3 and the offsets 14-bit (in 16-byte units), got "
                           f"{layout}, {lbo}, {sbo}")
    call = E.Call("tl_wgmma_desc_make", (ptr, as_expr(layout), as_expr(lbo), as_expr(sbo)), dt.uint64)
    B.current().emit(S.BufferStore(buf, tuple(idx), call))


def increase_descriptor_offset(descriptor, offset):
    """Advance the descriptor's start address by `offset` bytes (a multiple of 16): its low 32 bits
    grow by offset >> 4, as the hardware descriptor's low word is advanced."""
    what = "T.increase_descriptor_offset"
    B.in_kernel(what)
    buf, idx = _desc_slot(descriptor, what)
    units = E.binop(">>", as_expr(offset), 4)
    call = E.Call("tl_wgmma_desc_add", (E.BufferLoad(buf, tuple(idx), buf.dtype), units), dt.uint64)
    B.current().emit(S.BufferStore(buf, tuple(idx), call))


_ABBRV = {"float16": ("float16", "fp16", ".f16"), "bfloat16": ("bfloat16", "bf16"),
          "float32": ("float32", "fp32", ".f32"), "float8_e4m3": ("float8_e4m3", "float8_e4m3fn", "e4m3", ".e4m3"),
          "float8_e5m2": ("float8_e5m2", "e5m2", ".e5m2"), "int8": ("int8", ".s8"), "int32": ("int32", ".s32")}
_SHAPES = {("float16", "float16", "float32"), ("float16", "float16", "float16"), ("bfloat16", "bfloat16", "float32"),
           ("float8_e4m3", "float8_e4m3", "float32"), ("float8_e5m2", "float8_e5m2", "float32"),
           ("int8", "int8", "int32")}


def _abbrv(x, what):
    s = str(x)
    for name, spellings in _ABBRV.items():
        if s in spellings:
            return name
    raise DSLTypeError(f"{what}: element type {s!r} is not supported by our wgmma (float16, bfloat16, float8_e4m3, "
                       "float8_e5m2, int8; accumulators float32, float16, int32)")


def _wgmma_types(what, prefix, a, b, c):
    a, b, c = (_abbrv(x, what) for x in (a, b, c))
    m = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", str(prefix))
    if m is None:
        raise DSLTypeError(f"{what}: wgmma_prefix must read 'm64n<N>k<K>', got {prefix!r}")
    mm, n, k = (int(g) for g in m.groups())
    want_k = 16 if a in ("float16", "bfloat16") else 32
    from ..layout.fragment import wgmma_widths  # on first use: importing tilelang.language stays light

    if (a, b, c) not in _SHAPES or mm != 64 or k != want_k or n not in wgmma_widths(a == "int8"):
        raise DSLTypeError(f"{what}: {prefix} {a} x {b} -> {c} is not one of our wgmma shapes: m64, k{want_k} for "
                           f"{a}, n a multiple of 8 up to 256 (for int8 8, 16, 24, 32 or a multiple of 16), "
                           f"types {sorted(_SHAPES)}")
    return n, k, a, b, c


def _local_pointer(buf, offset, dtype_name, regs, what, name):
    """address_of buf[offset] of a T.alloc_local buffer holding `regs` elements of `dtype_name` from there."""
    if not isinstance(buf, Buffer) or buf.scope != "local":
        raise DSLTypeError(f"{what}: {name} must be a T.alloc_local buffer (each thread's registers, `X.data`); a "
                           f"T.alloc_fragment's register layout is the compiler's. Got {buf!r}")
    if buf.dtype.name != dtype_name:
        raise DSLTypeError(f"{what}: {name} {buf.name} is {buf.dtype}, the instruction's type is {dtype_name}")
    off = const_int(offset)
    if off is not None and (off < 0 or off + regs > buf.numel()):
        raise DSLTypeError(f"{what}: {name} {buf.name} holds {buf.numel()} elements; the instruction uses {regs} from "
                           f"element {off}")
    return _element(buf, offset)


def _descriptor_value(x, what):
    if isinstance(x, Buffer):
        buf, idx = _desc_slot(x, what)
        return E.BufferLoad(buf, tuple(idx), buf.dtype)
    return as_expr(x)


def _thread_index():
    """The flat thread index (T.get_thread_binding over the block's used dims)."""
    k = B.in_kernel("T.ptx_wgmma")
    X, Y, Z = k.threads
    t = get_thread_binding(0)
    if Y > 1:
        t = t + get_thread_binding(1) * X
    if Z > 1:
        t = t + get_thread_binding(2) * (X * Y)
    return t


def _scale(x, what, name):
    return 1 if _const_arg(x, what, name) else -1


def ptx_wgmma_ss(dtype, wgmma_prefix, a_is_k_major, b_is_k_major, a_dtype_abbrv, b_dtype_abbrv, accum_dtype_abbrv,
                 A_desc, A_offset, B_desc, B_offset, C_data, C_offset, scale_out, scale_in_a, scale_in_b):
    """wgmma.mma_async (SS) issued by the executing thread's warp group
    (all 128 threads run it together): D (+)= A @ B with A (64 x K) and B (K x N) read from shared
    memory through the descriptors A_desc + A_offset and B_desc + B_offset (offsets in 16-byte
    units, added to the descriptors' low words), D the N / 2 accumulator elements per thread at
    C_data[C_offset] (a T.alloc_local buffer; tl/wgmma.h shows which thread holds which). scale_out
    0 overwrites D; scale_in_a / scale_in_b false negate A / B. Order it with
    T.warpgroup_arrive / T.warpgroup_commit_batch / T.warpgroup_wait. `dtype` is not used."""
    what = "T.ptx_wgmma_ss"
    B.in_kernel(what)
    n, k, a, b, c = _wgmma_types(what, wgmma_prefix, a_dtype_abbrv, b_dtype_abbrv, accum_dtype_abbrv)
    ak, bk = bool(_const_arg(a_is_k_major, what, "a_is_k_major")), bool(_const_arg(b_is_k_major, what, "b_is_k_major"))
    if a != "float16" and a != "bfloat16" and not (ak and bk):
        raise DSLTypeError(f"{what}: {a} operands must be K-major (only 16-bit types transpose)")
    da = E.Call("tl_wgmma_desc_add", (_descriptor_value(A_desc, what), as_expr(A_offset)), dt.uint64)
    db = E.Call("tl_wgmma_desc_add", (_descriptor_value(B_desc, what), as_expr(B_offset)), dt.uint64)
    d = _local_pointer(C_data, C_offset, c, n // 2, what, "C_data")
    B.current().emit(R.RawWgmma(n, k, a, b, c, False, ak, bk, da, db, d, as_expr(scale_out), _thread_index(),
                                _scale(scale_in_a, what, "scale_in_a"), _scale(scale_in_b, what, "scale_in_b")))


def ptx_wgmma_rs(dtype, wgmma_prefix, b_is_k_major, a_dtype_abbrv, b_dtype_abbrv, accum_dtype_abbrv, A_buf, A_offset,
                 B_desc, B_offset, C_data, C_offset, scale_out, scale_in_a, scale_in_b):
    """wgmma.mma_async (RS): as T.ptx_wgmma_ss, with A from registers: each thread's 4 32-bit
    registers of the A fragment (the mma.sync m16n8k16 / k32 A layout per warp, tl/wgmma.h) at
    A_buf[A_offset] (a T.alloc_local buffer of A's type)."""
    what = "T.ptx_wgmma_rs"
    B.in_kernel(what)
    n, k, a, b, c = _wgmma_types(what, wgmma_prefix, a_dtype_abbrv, b_dtype_abbrv, accum_dtype_abbrv)
    bk = bool(_const_arg(b_is_k_major, what, "b_is_k_major"))
    if a != "float16" and a != "bfloat16" and not bk:
        raise DSLTypeError(f"{what}: {a} operands must be K-major (only 16-bit types transpose)")
    pa = _local_pointer(A_buf, A_offset, a, 16 // dt.as_dtype(a).bytes, what, "A_buf")  # 4 registers
    db = E.Call("tl_wgmma_desc_add", (_descriptor_value(B_desc, what), as_expr(B_offset)), dt.uint64)
    d = _local_pointer(C_data, C_offset, c, n // 2, what, "C_data")
    B.current().emit(R.RawWgmma(n, k, a, b, c, True, True, bk, pa, db, d, as_expr(scale_out), _thread_index(),
                                _scale(scale_in_a, what, "scale_in_a"), _scale(scale_in_b, what, "scale_in_b"),
                                a_regs_elems=A_buf.numel()))


def warpgroup_fence_operand(buffer_or_ptr, offset=0, num_regs=None, dtype=None):
    """A compiler fence on `num_regs` 32-bit registers of a T.alloc_local buffer from element
    `offset` (default: all of it): the compiler neither moves their reads and writes across the
    wgmma ops nor copies them (no instruction; no effect on the CPU backend)."""
    what = "T.warpgroup_fence_operand"
    B.in_kernel(what)
    if isinstance(buffer_or_ptr, E.Call) and buffer_or_ptr.op == "address_of":
        buffer_or_ptr = buffer_or_ptr.args[0]
    if isinstance(buffer_or_ptr, E.BufferLoad):
        buf, idx = buffer_or_ptr.buffer, buffer_or_ptr.indices
        start = idx[-1] if buf.ndim == 1 else None
        if start is None:
            raise DSLTypeError(f"{what}: pass a 1-d T.alloc_local buffer or one of its elements")
        offset = start + as_expr(offset)
    else:
        buf = buffer_or_ptr
    if not isinstance(buf, Buffer) or buf.scope != "local":
        raise DSLTypeError(f"{what}: expected a T.alloc_local buffer (per-thread registers), got {buffer_or_ptr!r}")
    if dtype is not None and str(dtype) != buf.dtype.name:
        raise DSLTypeError(f"{what}: dtype {dtype} does not match {buf.name}'s {buf.dtype}")
    if buf.dtype.bits not in (16, 32):
        raise DSLTypeError(f"{what}: {buf.name} is {buf.dtype}; registers of 16- or 32-bit elements are fenced")
    per = 32 // buf.dtype.bits
    count = num_regs if num_regs is not None else buf.numel() // per
    count = _const_arg(count, what, "num_regs")
    B.current().emit(R.FenceOperand(_element(buf, offset), count, buf.dtype.name == "float32"))
