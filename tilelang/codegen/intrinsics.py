"""C text of the thread-level intrinsic calls (`E.Call` ops named tl_* / extern:* /
address_of), per target. The CPU and CUDA headers define the same helper names where both
targets give a call a meaning; `CPU_UNSUPPORTED` lists those the CPU target rejects
(transform/cpu_threads.py gives shuffles and votes their meaning there before codegen; these
are what it cannot: the active-lane mask and the like; the grid barrier runs the grid's blocks at once
there, codegen/c.py).
"""
from __future__ import annotations

from .c_expr import EMULATED, storage_type

# op -> the T.* name users wrote (for errors)
CPU_UNSUPPORTED = {"tl_shfl_xor": "T.shfl_xor", "tl_shfl_down": "T.shfl_down", "tl_shfl_up": "T.shfl_up",
                   "tl_shfl_idx": "T.shfl_sync / T.tvm_warp_shuffle", "tl_any_sync": "T.any_sync",
                   "tl_all_sync": "T.all_sync", "tl_ballot": "T.ballot_sync / T.ballot",
                   "tl_activemask": "T.activemask",
                   **{f"tl_warp_reduce_{k}": f"T.warp_reduce_{k}" for k in ("sum", "max", "min", "bitand", "bitor")},
                   "tl_match_any": "T.match_any_sync", "tl_match_all": "T.match_all_sync",
                   "tl_syncthreads_count": "T.syncthreads_count", "tl_syncthreads_and": "T.syncthreads_and",
                   "tl_syncthreads_or": "T.syncthreads_or"}
RNG_CALLS = {"tl_rng_init": "tl_rng_init_state", "tl_rng_rand": "tl_rng_next", "tl_rng_rand_float": "tl_rng_next_float",
             "tl_rng_rand_double": "tl_rng_next_double", "tl_rng_normal": "tl_rng_next_normal",
             "tl_rng_normal_double": "tl_rng_next_normal_double"}
# tl_rng_init's last argument (language/random.GENERATORS) -> the state type both headers declare
RNG_STATES = ("tl_philox", "tl_xorwow", "tl_mrg32k3a")
_ORDERS = ("__ATOMIC_RELAXED", "__ATOMIC_CONSUME", "__ATOMIC_ACQUIRE", "__ATOMIC_RELEASE",
           "__ATOMIC_ACQ_REL", "__ATOMIC_SEQ_CST")


CLUSTER_CALLS = {"tl_cluster_arrive": "tl::cluster_arrive()", "tl_cluster_arrive_relaxed": "tl::cluster_arrive_relaxed()",
                 "tl_cluster_wait": "tl::cluster_wait()", "tl_cluster_sync": "tl::cluster_sync()",
                 "tl_block_rank_in_cluster": "((int)tl::block_rank_in_cluster())"}  # language/cluster.py's calls


def print_call(cx, e, args: list) -> str | None:
    """C text for `e` (a Call) with printed `args`, or None when `e.op` is not one of these."""
    op = e.op
    cuda = getattr(cx, "target", "c") == "cuda"
    if op.startswith("extern:"):
        return f"{op[len('extern:'):]}({', '.join(args)})"
    if op == "address_of":
        ld = e.args[0]
        return f"(&{cx.index_fn(ld.buffer, ld.indices)})"
    if op == "ldg":  # T.__ldg: CUDA's read-only cache load where __ldg has the element type; else plain
        ld = e.args[0]
        if not cuda or ld.buffer.dtype.name.startswith("float8") or ld.buffer.dtype.bits < 8:
            return cx(ld)
        text = f"__ldg(&{cx.index_fn(ld.buffer, ld.indices)})"
        k = EMULATED.get(ld.buffer.dtype.name)
        return f"tl_{k}_to_f32({text})" if k else text
    if op == "tl_sync_threads":
        if not cuda:
            return "((void)0)"  # one thread runs the block: every write is already visible
        return "__syncthreads()" if not args else f"tl::named_barrier_sync({args[0]}, {args[1]})"
    if op == "tl_named_barrier_arrive":  # CPU: the threads that wait run after the arrivers' segment
        return f"tl::named_barrier_arrive({args[0]}, {args[1]})" if cuda else "((void)0)"
    if op in ("tl_pdl_sync", "tl_pdl_trigger"):  # CPU: a kernel starts after the previous one ended
        return f"tl::{op[3:]}()" if cuda else "((void)0)"
    if op in CLUSTER_CALLS:  # CPU: transform/cluster_cpu.py lowered them before codegen
        return CLUSTER_CALLS[op] if cuda else None
    if op == "tl_tile_order":  # a persistent kernel's __constant__ tile table (codegen/cuda.py)
        return f"tl_tile_order[{args[0]}]" if cuda else None
    if op == "tl_sync_warp":
        return f"tl_sync_warp({args[0]})" if cuda else "((void)0)"
    if op == "tl_wgmma_desc_make":  # (start pointer, layout, lbo >> 4, sbo >> 4): op/hopper_raw.py
        return f"tl::wgmma_desc_encode({', '.join(args)})" if cuda else f"tl_cpu_wgmma_desc(tl_smem, {', '.join(args)})"
    if op == "tl_wgmma_desc_add":
        return f"tl::wgmma_desc_add({args[0]}, (uint32_t)({args[1]}))" if cuda else \
            f"tl_wgmma_desc_add({args[0]}, (uint32_t)({args[1]}))"
    if op == "tl_cpu_tma_load":  # (dst, g, elem, swizzle, rank, dims.., strides.., box.., coords..)
        r = int(e.args[4].value)
        group = lambda i, t: f"(const {t}[]){{{', '.join(args[5 + i * r:5 + (i + 1) * r])}}}"  # noqa: E731
        return (f"tl_cpu_tma_load(tl_smem, tl_smem_bytes, {', '.join(args[:5])}, {group(0, 'int64_t')}, "
                f"{group(1, 'int64_t')}, "
                f"{group(2, 'int32_t')}, {group(3, 'int32_t')})")
    if op == "tl_cpu_wgmma":  # transform/hopper_cpu.raw_wgmma's arguments; pointers as the header takes them
        a = list(args)
        a[8] = f"(const unsigned char*)({a[8]})"
        a[11] = f"(void*)({a[11]})"
        return f"tl_cpu_wgmma(tl_smem, tl_smem_bytes, {', '.join(a)})"
    if op == "tl_dp4a":
        return f"tl_dp4a({', '.join(args)})"
    if op in RNG_CALLS:
        # one more argument than the T.* call: the thread's state (transform/cpu_threads.py)
        # tl_rng_init: (seed, seq, off, generator); the generator only picks the state's type
        base = 4 if op == "tl_rng_init" else 0
        state = f"&tl_rng[{args[0]}]" if len(args) > base else ("&tl_rng[0]" if not cuda else "&tl_rng")
        rest = args[len(args) - base:len(args) - 1] if base else []
        return f"{RNG_CALLS[op]}({', '.join([state] + rest)})"
    if op in ("tl_atomic_load", "tl_atomic_store"):
        return _ordered(cx, e, args, cuda)
    if op.startswith("tl_shfl_") or op in ("tl_any_sync", "tl_all_sync", "tl_ballot", "tl_activemask"):
        return f"{op}({', '.join(args)})"  # CUDA only: the CPU pipeline rejects these first
    return None


def _ordered(cx, e, args, cuda):
    ld = e.args[0]
    ref = cx.index_fn(ld.buffer, ld.indices)
    order = int(e.args[-1].value)
    if cuda:
        if e.op == "tl_atomic_load":
            return f"tl_atomic_load(&{ref}, {order})"
        return f"tl_atomic_store(&{ref}, ({storage_type(ld.dtype)})({args[1]}), {order})"
    t = storage_type(ld.dtype)
    if e.op == "tl_atomic_load":
        return f"({{ {t} tl_v; __atomic_load(&{ref}, &tl_v, {_ORDERS[order]}); tl_v; }})"
    return f"({{ {t} tl_v = ({t})({args[1]}); __atomic_store(&{ref}, &tl_v, {_ORDERS[order]}); }})"
