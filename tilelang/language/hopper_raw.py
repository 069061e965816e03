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
"""
from __future__ import annotations

from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir.buffer import Buffer
from ..ir import expr as E
from ..ir.expr import as_expr
from ..ir.stmt import Allocate
from ..op import hopper as H
from ..op import hopper_raw as R
from .hopper import barrier_ref


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
    b.emit(Allocate(buf))
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
        raise DSLTypeError(f"{what}: data_type {data_type} ({R.TMA_DATA_TYPES[data_type][0]}) has {elem}-byte elements; "
                           f"{buf.name} is {buf.dtype}")
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
    for name, x, scopes in (("shared_ptr", shared_ptr, ("shared", "shared.dyn")), ("global_ptr", global_ptr, ("global",))):
        if not isinstance(x, Buffer) or x.scope not in scopes:
            raise DSLTypeError(f"{what}: {name} must be a {scopes[0]} buffer (X.data or X), got {x!r}")
    n = const_int(bytes)
    if n is not None and (n <= 0 or n % 16):
        raise DSLTypeError(f"{what}: bytes must be a positive multiple of 16, got {n}")
    buf, i = barrier_ref(barrier_id, what)
    B.current().emit(R.BulkCopy(_element(shared_ptr, shared_offset), _element(global_ptr, global_offset),
                                as_expr(bytes), buf, i))
