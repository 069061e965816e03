"""The CUDA target: pass list, CUDA codegen, NVRTC compile (disk-cached), driver launch."""
from __future__ import annotations

import logging
import os
import warnings
from dataclasses import replace

from ...arith.simplify import const_int, simplify
from ...codegen.cuda import CudaCodegen
from ...errors import CompileError, LoweringError
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.stmt import PrimFunc
from ...ir.visitor import collect, substitute
from ...op import tile_ops as O
from ...transform.cuda.lower_tile_ops import lower_kernel
from ...transform.cuda.fold_accum_clear import fold_accum_clears
from ...transform.cuda.plan_smem import plan_smem_pass
from ...transform.cuda.proxy_fences import place_proxy_fences
from ...transform.cuda.cp_async_waits import merge_cp_async_waits
from ...transform.cuda.thread_sync import insert_syncs
from ...transform.cuda.stream_k import MAX_FANIN
from ...transform.cuda.warp_specialize import PRODUCER_REGS, PRODUCER_REGS_WIDE, TIMELINE
from ...transform.check_dtypes import check_dtypes_pass
from ...transform.cuda.nibble_tiles import nibble_tiles_pass
from ...transform.check_index_ranges import check_index_ranges_pass
from ...transform.global_layouts import global_layouts_pass
from ...transform.widen_fragments import widen_fragments_pass
from ...transform.legalize_negative_index import legalize_negative_index
from ...transform.parallel_barriers import split_parallel_barriers
from ...transform.legalize_safe_memory import legalize_safe_memory
from ...transform.thread_scopes import thread_axes, thread_scopes_pass
from ...transform.cuda.thread_branches import thread_branches_pass
from ...transform.lower_gemm_sp import lower_gemm_sp
from ...transform.pass_manager import PassContext, run_passes, simplify_pass
from ..artifact import LowersOnDemand
from ..target import smem_per_block


_SMEM_LIMIT = smem_per_block(90)  # the most dynamic shared memory one block may use (sm_90; sm_80 allows less)


class PerformanceWarning(UserWarning):
    """A fast path (tensor cores, registers, vector/async copies) was not taken, with the reason."""


def _producer_regs(value) -> int | None:
    """tl.ws_producer_regs: the warp-specialized producer's setmaxnreg decrease (None unset:
    warp_specialize.default_producer_regs chooses)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not (24 <= value <= 256 and value % 8 == 0):
        raise ValueError(f"pass_configs['tl.ws_producer_regs']: expected a multiple of 8 from 24 to 256 "
                         f"(setmaxnreg's range), found {value!r}")
    return value


def _tristate(v):
    """A switch that has a default rule: None (unset, or "auto") leaves the choice to the pass."""
    if v is None or (isinstance(v, str) and v.strip().lower() in ("", "auto", "none")):
        return None
    if isinstance(v, str):
        return v.strip().lower() not in ("0", "false", "off", "no")
    return bool(v)


def _the_kernel(func: PrimFunc) -> S.KernelLaunch:
    ks = collect(func.body, lambda n: isinstance(n, S.KernelLaunch))
    if len(ks) != 1:
        raise LoweringError(f"a CUDA kernel needs exactly one `with T.Kernel(...)`, found {len(ks)}", func.span)
    return ks[0]


def _check_arch_calls(k: S.KernelLaunch, ctx: PassContext) -> None:
    """Calls the target's architecture lacks: a clear error rather than PTX that does not assemble."""
    from ...codegen.intrinsics import CLUSTER_CALLS

    if ctx.target.sm < 90:
        for c in collect(k.body, lambda n: isinstance(n, E.Call) and n.op in ("tl_pdl_sync", "tl_pdl_trigger")):
            raise LoweringError(f"T.{c.op[3:]} (programmatic dependent launch, griddepcontrol) needs sm_90 or newer; "
                                f"the target is {ctx.target.arch}", k.span)
    if tuple(k.cluster) != (1, 1, 1) and collect(k.body, lambda n: isinstance(n, E.Call) and n.op == "tl_sync_grid"):
        raise LoweringError("T.sync_grid in a thread-block cluster launch: a cooperative launch of clusters is not "
                            "supported; launch without cluster_dims or split the kernel at the grid barrier", k.span)
    if ctx.target.sm < 90:
        if tuple(k.cluster) != (1, 1, 1):
            raise LoweringError(f"a thread-block cluster launch (cluster_dims={tuple(k.cluster)!r}) needs sm_90 or "
                                f"newer; the target is {ctx.target.arch}", k.span)
        for c in collect(k.body, lambda n: isinstance(n, E.Call) and n.op in CLUSTER_CALLS):
            raise LoweringError(f"T.{c.op[3:]} (thread-block clusters) needs sm_90 or newer; the target is "
                                f"{ctx.target.arch}", k.span)
        for b in collect(k.body, lambda n: isinstance(n, S.Allocate) and getattr(n.buffer, "cluster_barrier", False)):
            raise LoweringError(f"T.alloc_cluster_barrier ({b.buffer.name}: thread-block clusters) needs sm_90 or "
                                f"newer; the target is {ctx.target.arch}", k.span)


def _rows_per_warpgroup(info, acc, ws) -> bool:
    """Consumer warpgroup w holds rows [64w, 64w + 64) of accumulator `acc`, whole (a (W, 1)
    wgmma grid over a 64 * W-row tile): what ws_epilogue.wg_chunk's per-warpgroup stores need."""
    from ...layout.fragment import WgmmaAccFragment

    reg = info.regs.get(acc.uid)
    lay = info.reg_layouts.get(reg.uid) if reg is not None else None
    W = ws.consumer_threads // 128
    return isinstance(lay, WgmmaAccFragment) and (lay.wg_m, lay.wg_n) == (W, 1) and lay.m_wg == 64


def lower_cuda(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    k0 = k = _the_kernel(func)
    _check_arch_calls(k, ctx)
    msgs = []
    from ...transform.cuda.software_pipeline import (
        fuse_mma_mainloops,
        pipeline_kernel,
        stage_epilogue,
    )
    from ...transform.cuda.warp_specialize import warp_specialize
    from ...transform.cuda.ws_dead_rows import rows_owned
    from ...transform.pass_config import get as config

    from ...transform.cuda.manual_ws import has_warp_groups, manual_ws

    if not config(ctx.pass_configs, "tl.disable_unit_grid_fold", False):
        from ...transform.cuda.unit_grid import fold_unit_grid

        k = fold_unit_grid(k)
    from ...transform.cuda.barrier_ids import barrier_ids

    ids = barrier_ids(k, not config(ctx.pass_configs, "tl.disable_barrier_id_remap", False))
    ws = manual = None
    if has_warp_groups(k):  # warp specialization by hand: the user's barriers are the schedule
        from ...op import hopper as H
        from ...op import hopper_raw as R

        raw = collect(k.body, lambda n: isinstance(n, (R.TmaLoad, R.BulkCopy, R.RawWgmma)))
        if ctx.target.sm < 90 and raw:
            name = {"TmaLoad": "T.tma_load (cp.async.bulk.tensor)", "BulkCopy": "T.ptx_cp_async_bulk (cp.async.bulk)",
                    "RawWgmma": "T.ptx_wgmma_ss / T.ptx_wgmma_rs (wgmma.mma_async)"}[type(raw[0]).__name__]
            raise LoweringError(f"{name} needs sm_90a (Hopper); the target is {ctx.target.arch}", raw[0].span)
        hopper_only = collect(k.body, lambda n: isinstance(n, (H.TmaCopy, H.TmaStore, H.SetMaxNReg,
                                                               H.FenceProxyAsync, H.WaitWgmma, H.BarrierExpectTx,
                                                               H.AsyncStep)))
        if ctx.target.sm < 90 and hopper_only:  # branches over warps or warp groups (named barriers) work on sm_80
            what = {"TmaCopy": "T.tma_copy", "TmaStore": "T.tma_copy (a TMA store)", "SetMaxNReg": "T.set_max_nreg",
                    "FenceProxyAsync": "T.fence_proxy_async",
                    "WaitWgmma": "T.wait_wgmma", "BarrierExpectTx": "an mbarrier transaction count (expect_tx)",
                    "AsyncStep": "a TMA store step"}[type(hopper_only[0]).__name__]
            raise LoweringError(f"{what} in T.ws / warp specialization by hand needs sm_90a (Hopper); the target is "
                                f"{ctx.target.arch}", getattr(hopper_only[0], "span", None) or k.span)
        k_manual, manual = manual_ws(k, msgs.append, ctx.target.sm >= 90
                                     and not config(ctx.pass_configs, "tl.disable_manual_tma_store", False)
                                     and not config(ctx.pass_configs, "tl.disable_tma_lower", False),
                                     not config(ctx.pass_configs, "tl.disable_barrier_init_merge", False))
    elif ctx.target.sm >= 90 and not config(ctx.pass_configs, "tl.disable_warp_specialized", False) \
            and tuple(k.cluster) == (1, 1, 1) \
            and not config(ctx.pass_configs, "tl.disable_tma_lower", False) \
            and not config(ctx.pass_configs, "tl.disable_wgmma", False):
        from ..target import num_sms

        sms = None if config(ctx.pass_configs, "tl.disable_persistent", False) else num_sms()
        k_grid = k  # a T.Persistent loop as a grid of tiles: this path makes its own persistent schedule
        if sms is not None and not config(ctx.pass_configs, "tl.disable_persistent_grid", False):
            from ...transform.cuda.persistent_grid import persistent_grid

            k_grid, why = persistent_grid(k)
            if why is not None:
                msgs.append(f"no warp specialization (TMA pipeline): the T.Persistent loop stays as written ({why}); "
                            "its k-loop runs as a cp.async pipeline")
        k_ws, ws = warp_specialize(k_grid, msgs.append, sms, bool(config(ctx.pass_configs, "tl.enable_cluster", False)),
                                   not config(ctx.pass_configs, "tl.disable_stream_k", False),
                                   bool(config(ctx.pass_configs, "tl.debug_timeline", False)),
                                   not config(ctx.pass_configs, "tl.disable_k_serpentine", False),
                                   not config(ctx.pass_configs, "tl.disable_deferred_epilogue", False),
                                   not config(ctx.pass_configs, "tl.disable_deep_ring", False),
                                   not config(ctx.pass_configs, "tl.ws_no_setmaxnreg", False),
                                   bool(config(ctx.pass_configs, "tl.enable_ws_overlap", False)),
                                   not config(ctx.pass_configs, "tl.disable_ws_fragment_guard", False),
                                   not config(ctx.pass_configs, "tl.disable_fold_staged_store", False),
                                   not config(ctx.pass_configs, "tl.disable_tma_im2col", False),
                                   bool(config(ctx.pass_configs, "tl.enable_tma_im2col_small_tiles", False)),
                                   not config(ctx.pass_configs, "tl.disable_stream_k_promoted", False),
                                   not config(ctx.pass_configs, "tl.disable_ws_mma_sync", False),
                                   not config(ctx.pass_configs, "tl.disable_persistent_snake", False),
                                   _tristate(config(ctx.pass_configs, "tl.enable_ws_pingpong", None)),
                                   not config(ctx.pass_configs, "tl.disable_ring_trip_cap", False),
                                   not config(ctx.pass_configs, "tl.disable_persistent_prefix_tma", False),
                                   not config(ctx.pass_configs, "tl.disable_wgmma_wait_hold", False),
                                   not config(ctx.pass_configs, "tl.disable_ws_wg_epilogue", False), ids,
                                   _producer_regs(config(ctx.pass_configs, "tl.ws_producer_regs", None)),
                                   tile_table=bool(config(ctx.pass_configs, "tl.enable_persistent_tile_table", False)),
                                   skip_dead_rows=bool(config(ctx.pass_configs, "tl.enable_ws_dead_rows", False)),
                                   stream_k_fanin=int(config(ctx.pass_configs, "tl.stream_k_max_fanin", MAX_FANIN)))
    if ws is not None:
        k_piped, views = k_ws, []
    elif manual is not None:
        k_piped, views = k_manual, []
    else:
        from ..target import num_sms

        from ...transform.cuda.raise_copies import raise_element_copies

        serp = None if config(ctx.pass_configs, "tl.disable_k_serpentine", False) else num_sms()
        limit = 0 if config(ctx.pass_configs, "tl.disable_staged_element_copies", False) else \
            smem_per_block(ctx.target.sm)
        # sm_90 (T.gemm on wgmma): refill before the wait; mma.sync loops keep the order fuse_mma_mainloops needs
        issue_first = ctx.target.sm >= 90 and not config(ctx.pass_configs, "tl.disable_wgmma", False)
        inflight = issue_first and not config(ctx.pass_configs, "tl.disable_wgmma_inflight", False)
        single = issue_first and not config(ctx.pass_configs, "tl.disable_single_stage_pipeline", False)
        join = not config(ctx.pass_configs, "tl.disable_prologue_join_past_registers", False)
        peel = not config(ctx.pass_configs, "tl.disable_pipeline_tail_peel", False)
        k_piped, views = pipeline_kernel(raise_element_copies(k), msgs.append, serp, limit, issue_first, num_sms(),
                                         inflight, single, join, peel) \
            if not ctx.config("tl.disable_pipeline") else (k, [])
        if views and not config(ctx.pass_configs, "tl.disable_staged_epilogue", False):
            k_piped = stage_epilogue(k_piped, views)
    sm = ctx.target.sm
    if config(ctx.pass_configs, "tl.disable_wgmma", False) and sm >= 90:
        sm = 89  # measure / debug the portable mma.sync path on Hopper
    new, info = lower_kernel(k_piped, msgs.append, sm, bool(config(ctx.pass_configs, "tl.enable_row_fragments", True)),
                             not config(ctx.pass_configs, "tl.disable_replicated_inputs", False),
                             not config(ctx.pass_configs, "tl.disable_column_rows_1d", False),
                             not config(ctx.pass_configs, "tl.disable_slice_pair_stores", False),
                             not config(ctx.pass_configs, "tl.disable_wgmma_rows_outer", False),
                             not config(ctx.pass_configs, "tl.disable_stmatrix_store", False),
                             not config(ctx.pass_configs, "tl.disable_fragment_slice_offsets", False),
                             not config(ctx.pass_configs, "tl.disable_mma_register_a", False),
                             not config(ctx.pass_configs, "tl.disable_own_line_reduce", False),
                             frozenset(ws.panels) if ws is not None else frozenset(),
                             not config(ctx.pass_configs, "tl.disable_cp_async_shared_offset", False),
                             not config(ctx.pass_configs, "tl.disable_shared_address_slots", False),
                             not config(ctx.pass_configs, "tl.disable_packed_column_reads", False),
                             not config(ctx.pass_configs, "tl.disable_wgmma_policy", False),
                             not config(ctx.pass_configs, "tl.disable_split_segment_reduce", False),
                             not config(ctx.pass_configs, "tl.disable_row_store_hoist", False),
                             not config(ctx.pass_configs, "tl.disable_reduce_tree", False),
                             not config(ctx.pass_configs, "tl.disable_wgmma_policy_cost", False),
                             mma_rs16=not config(ctx.pass_configs, "tl.disable_mma_register_a16", False))
    info.barrier_ids = ids
    if ws is not None and ws.wg_epilogue is not None and not _rows_per_warpgroup(info, ws.wg_epilogue, ws):
        # the per-warpgroup epilogue assumed each consumer warpgroup owns 64 whole rows of the
        # accumulator; layout inference split it otherwise: build with the shared epilogue
        ctx.pass_configs = {**ctx.pass_configs, "tl.disable_ws_wg_epilogue": True}
        return lower_cuda(func, ctx)
    if ws is not None and ws.dead_rows is not None and not rows_owned(info, ws.dead_rows.tiles, ws.pingpong,
                                                                      ws.dead_rows.rows * ws.pingpong):
        # a fragment of the loop or the epilogue is not split by rows between the consumer warpgroups
        # as ws_dead_rows assumed: build with every warpgroup doing its work
        ctx.pass_configs = {**ctx.pass_configs, "tl.enable_ws_dead_rows": False}
        return lower_cuda(func, ctx)
    if info.uses_wgmma:
        new = replace(new, body=fold_accum_clears(new.body))
        if not config(ctx.pass_configs, "tl.disable_unmasked_tile_clear", False):
            from ...transform.cuda.unmasked_clear import POST_MASK_THREADS, fold_unmasked_tiles

            body, ctx.unmasked_tiles = fold_unmasked_tiles(
                new.body, info.tid, info.threads, new.block_vars,
                not config(ctx.pass_configs, "tl.disable_unmasked_post_mask", False),
                int(config(ctx.pass_configs, "tl.unmasked_post_mask_threads", POST_MASK_THREADS)))
            new = replace(new, body=body)
        if not config(ctx.pass_configs, "tl.disable_carried_accum_clear", False):
            from ...transform.cuda.carried_clear import carry_accum_clears

            new = replace(new, body=carry_accum_clears(new.body))
        if not config(ctx.pass_configs, "tl.disable_row_block_fission", False):
            from ...transform.cuda.row_block_fission import row_block_fission

            new = replace(new, body=row_block_fission(new.body, info.reg_layouts)[0])
    for _, _, rv, wv in views:  # both views of a staged tile share its layout
        for group in (info.swizzled, info.panels):
            if rv.uid in group or wv.uid in group:
                group |= {rv.uid, wv.uid}
    from ...transform.cuda.thread_allreduce import lower_thread_level

    new = lower_thread_level(new, info.tid)
    new = replace(new, body=merge_cp_async_waits(
        new.body, not config(ctx.pass_configs, "tl.disable_copy_hoist_past_mma", False)))
    if not config(ctx.pass_configs, "tl.disable_register_prefetch", False):
        from ...transform.cuda.register_prefetch import prefetch_element_copies

        new = replace(new, body=prefetch_element_copies(new.body))
    if not config(ctx.pass_configs, "tl.disable_thread_storage_sync", False):
        dims = [new.threads[{"tx": 0, "ty": 1, "tz": 2}.get(tv.name, 0)] for tv in new.thread_vars]  # as codegen binds them
        # branches the program writes on its thread index (not the compiler's guards on tid), outside
        # warp-specialized kernels (whose consumers hold barrier 1)
        axes = None if ws is not None or config(ctx.pass_configs, "tl.disable_branch_barriers", False) else \
            (thread_axes(new),)
        new = replace(new, body=insert_syncs(new.body, (info.tid, *new.thread_vars), (info.threads, *dims),
                                             not config(ctx.pass_configs, "tl.disable_sync_pass_ranges", False),
                                             axes))
    if ws is None and not info.uses_wgmma:
        new = replace(new, body=fuse_mma_mainloops(new.body))
    if ws is not None and ws.dead_rows is not None:
        from ...transform.cuda.ws_pingpong import dead_rows_without_block_barrier

        if not dead_rows_without_block_barrier(new.body):
            # a barrier across all consumer warpgroups landed inside the branch on the warpgroup's rows
            # (a consumer's cp.async of Q before the k-loop, D128): a dead warpgroup would never reach it
            ctx.pass_configs = {**ctx.pass_configs, "tl.enable_ws_dead_rows": False}
            return lower_cuda(func, ctx)
    if ws is not None and ws.pingpong:
        from ...transform.cuda.ws_pingpong import turns_without_block_barrier

        if not turns_without_block_barrier(new.body):
            if _tristate(config(ctx.pass_configs, "tl.enable_ws_pingpong", None)) is None:  # the default's choice
                ctx.pass_configs = {**ctx.pass_configs, "tl.enable_ws_pingpong": False}
                return lower_cuda(func, ctx)
            raise LoweringError("tl.enable_ws_pingpong: the consumers' k-loop needs a barrier across all consumer "
                                "warpgroups (a shared-memory exchange), which a warpgroup waiting for its turn at the "
                                "tensor cores would never reach; build this kernel without tl.enable_ws_pingpong",
                                k.span)
    if not config(ctx.pass_configs, "tl.disable_pipeline_barrier_merge", False) and \
            not config(ctx.pass_configs, "tl.disable_thread_storage_sync", False):
        from ...transform.cuda.pipeline_barriers import merge_pipeline_barriers

        new = replace(new, body=merge_pipeline_barriers(
            new.body, not config(ctx.pass_configs, "tl.disable_pipeline_refill_sink", False)))
    if not config(ctx.pass_configs, "tl.disable_shared_load_batch", False):
        from ...transform.cuda.shared_load_batch import batch_shared_loads

        new = replace(new, body=batch_shared_loads(new.body))
    if ws is not None:
        info.swizzled |= ws.swizzled
        info.panels |= ws.panels
    if manual is not None:
        info.swizzled |= manual.swizzled
        info.panels |= manual.panels
        info.tma_descs = list(manual.descs)
        for v in manual.views:  # a 3-d tile's stages share the layout its window onto one stage has
            for group in (info.swizzled, info.panels):
                if v.uid in group:
                    group.add(v.view_of.uid)
    info.panel_xor = not config(ctx.pass_configs, "tl.disable_panel_xor_index", False)
    info.thread_ranges = not config(ctx.pass_configs, "tl.disable_thread_range_folding", False)
    info.split_global_index = not config(ctx.pass_configs, "tl.disable_split_global_index", False)
    if not config(ctx.pass_configs, "tl.disable_atomic_runs", False):
        from ...transform.cuda.atomic_runs import merge_atomic_runs

        new = replace(new, body=merge_atomic_runs(
            new.body, not config(ctx.pass_configs, "tl.disable_atomic_vector_source", False)))
    if not config(ctx.pass_configs, "tl.disable_let_floor_split", False):
        from ...transform.cuda.let_floor_split import split_let_floors

        # through lets on wgmma kernels only: in mma.sync GEMM loops ptxas rebuilds the split swizzle
        # offsets of the refills every iteration (4096^3 128x128 sm_80: 68 -> 79 non-HMMA a k-step)
        new = replace(new, body=split_let_floors(
            new.body, info.uses_wgmma and not config(ctx.pass_configs, "tl.disable_let_floor_through_lets", False)))
    if not config(ctx.pass_configs, "tl.disable_index_divmod_folding", False):
        from ...transform.cuda.index_divmod import fold_index_divmod

        new = fold_index_divmod(new, info.tid, info.threads)
    if not config(ctx.pass_configs, "tl.disable_staging_swizzle", False):
        from ...transform.cuda.staging_swizzle import staging_swizzle

        staged = {u for _, _, rv, wv in views for u in (rv.uid, wv.uid)}
        if manual is not None:
            staged |= {u for v in manual.views for u in (v.uid, v.view_of.uid)}
        staging_swizzle(new.body, info, staged)
    if not config(ctx.pass_configs, "tl.disable_tf32_exact_loads", False):
        from ...transform.cuda.tf32_loads import exact_tf32_buffers

        info.tf32_exact = exact_tf32_buffers(new.body, func.params)
    if not config(ctx.pass_configs, "tl.disable_shared_index_split", False):
        from ...transform.cuda.shared_index_split import split_shared_indices

        laid = info.panels | info.swizzled | info.xor_swizzled
        new = replace(new, body=split_shared_indices(new.body, laid))
    info.mma_split_chains = not config(ctx.pass_configs, "tl.disable_mma_split_chains", False)
    info.ldsm_lane_offsets = not config(ctx.pass_configs, "tl.disable_ldsm_lane_offsets", False)
    info.bf16_pack_convert = not config(ctx.pass_configs, "tl.disable_bf16_pack_convert", False)
    info.wgmma_clear_undef = not config(ctx.pass_configs, "tl.disable_wgmma_clear_undef", False)
    info.mbarrier_suspend_hint = not config(ctx.pass_configs, "tl.disable_mbarrier_suspend_hint", False)
    info.no_span_swizzle = config(ctx.pass_configs, "tl.disable_swizzle_span_offset", False)
    info.swizzle_row_split = not config(ctx.pass_configs, "tl.disable_swizzle_row_split", False)
    info.shared_address_slots = not config(ctx.pass_configs, "tl.disable_shared_address_slots", False)
    info.narrow_dims = not config(ctx.pass_configs, "tl.disable_narrow_dim_checks", False)
    info.assume_tid_range = not config(ctx.pass_configs, "tl.disable_assume_tid_range", False)
    info.pow2_floor_shift = not config(ctx.pass_configs, "tl.disable_pow2_floor_shift", False)
    descs = ws.descs if ws is not None else manual.descs if manual is not None else ()
    if descs and not config(ctx.pass_configs, "tl.disable_tma_descriptor_prefetch", False):
        from ...transform.cuda.tma_prefetch import prefetch_tensor_maps

        new = replace(new, body=prefetch_tensor_maps(new.body, [d.name for d in descs]))
    for m in dict.fromkeys(msgs):  # once each (a copy lowered in a prologue and a loop says it twice)
        ctx.warnings.append(m)
    ctx.cuda_info = info
    ctx.ws_info = ws
    # T.tma_copy stores read their tile through the async proxy: the threads' writes need fences
    from ...op.hopper import TmaStore

    ctx.tma_store_fences = manual is not None and bool(collect(k0.body, lambda n: isinstance(n, TmaStore)))
    body = new if func.body is k0 else _replace_kernel(func.body, k0, new)
    return replace(func, body=body)


def launch_env(arg_kinds, values, index) -> dict:
    """The kernel's scalar parameters and the Var dims of its tensors -> their values at this launch
    (`values[index[id(param)]]`), as expressions for substitute."""
    env = {}
    for kind, obj in arg_kinds:
        if kind == "scalar" and id(obj) in index:
            env[obj] = E.as_expr(values[index[id(obj)]])
        elif kind == "buffer" and id(obj) in index:
            for d, s in enumerate(obj.shape):
                if isinstance(s, E.Var) and s not in env:
                    env[s] = E.as_expr(int(values[index[id(obj)]].shape[d]))
            for d, s in enumerate(obj.strides or ()):  # T.StridedTensor's symbolic strides
                if isinstance(s, E.Var) and s not in env:
                    env[s] = E.as_expr(int(values[index[id(obj)]].stride(d)))
    return env


def _replace_kernel(body, old, new):
    if body is old:
        return new
    if isinstance(body, S.SeqStmt):
        return S.SeqStmt(tuple(_replace_kernel(s, old, new) for s in body.stmts))
    return body


def legal_names_pass(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    from ...codegen.c import legal_buffer_names

    return legal_buffer_names(func)


def unique_names_pass(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    from ...codegen.c import unique_var_names

    return unique_var_names(func)


def fresh_index_pass(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    from ...transform.cuda.fresh_index import fresh_copy_indices
    from ...transform.pass_config import get as config

    if not config(ctx.pass_configs, "tl.fresh_copy_index", False):
        return func
    k = _the_kernel(func)
    new = fresh_copy_indices(k)
    return replace(func, body=new if func.body is k else _replace_kernel(func.body, k, new))


def thread_ranges_pass(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    """Divisions of the thread index that a warp group's branch decides, folded (thread_ranges.py)."""
    from ...transform.cuda.thread_ranges import fold_thread_ranges
    from ...transform.pass_config import get as config

    info = getattr(ctx, "cuda_info", None)
    if info is None or config(ctx.pass_configs, "tl.disable_thread_range_folding", False):
        return func
    k = _the_kernel(func)
    new = fold_thread_ranges(k, info.tid, info.threads)
    return replace(func, body=new if func.body is k else _replace_kernel(func.body, k, new))


def exp2_poly_pass(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    """tl.enable_exp2_poly: a share of an accumulator loop's exp2 on the FMA pipe (exp2_poly.py)."""
    from ...transform.cuda.exp2_poly import poly_fraction, split_exp2
    from ...transform.pass_config import get as config

    info = getattr(ctx, "cuda_info", None)
    frac = poly_fraction(config(ctx.pass_configs, "tl.enable_exp2_poly", None))
    if info is None or frac is None:
        return func
    body, _ = split_exp2(func.body, info.reg_layouts, frac)
    return func if body is func.body else replace(func, body=body)


def proxy_fences_pass(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    """wgmma / warp-specialized kernels, and T.tma_copy stores: fence.proxy.async before the barriers after
    generic smem writes."""
    info = getattr(ctx, "cuda_info", None)
    if info is None or not (info.uses_wgmma or getattr(ctx, "ws_info", None) is not None
                            or getattr(ctx, "tma_store_fences", False)):
        return func
    from ...transform.cuda.plan_smem import ATTR
    from ...transform.pass_config import get as config

    every = bool(config(ctx.pass_configs, "tl.disable_proxy_fence_reach", False))
    groups = not config(ctx.pass_configs, "tl.disable_cp_async_group_fences", False)
    mma = not config(ctx.pass_configs, "tl.disable_mma_sync_generic_reach", False)
    bytewise = not config(ctx.pass_configs, "tl.disable_proxy_fence_bytewise_reach", False)
    return replace(func, body=place_proxy_fences(func.body, func.attr(ATTR), all_writes=every, groups=groups,
                                                 mma_generic=mma, bytewise=bytewise))


PASSES = [
    ("legalize_negative_index", legalize_negative_index),
    ("check_dtypes", check_dtypes_pass),
    ("widen_fragments", widen_fragments_pass),
    ("check_index_ranges", check_index_ranges_pass),
    ("global_layouts", global_layouts_pass),
    ("legal_names", legal_names_pass),
    ("simplify", simplify_pass),
    ("parallel_barriers", split_parallel_barriers),  # a barrier in a T.Parallel body: no guarded __syncthreads
    ("thread_scopes", thread_scopes_pass),
    ("thread_branches", thread_branches_pass),
    ("lower_gemm_sp", lower_gemm_sp),
    ("legalize_safe_memory", legalize_safe_memory),
    ("nibble_tiles", nibble_tiles_pass),  # int4 / uint4 tiles that move whole bytes: byte tiles (mma.sync s4)
    ("lower_cuda", lower_cuda),
    ("simplify_lowered", simplify_pass),
    ("exp2_poly", exp2_poly_pass),
    ("unique_names", unique_names_pass),
    ("fresh_copy_index", fresh_index_pass),
    ("thread_ranges", thread_ranges_pass),  # after fresh_copy_index: its fresh indices have the thread's range
    ("plan_smem", plan_smem_pass),  # after barrier insertion: adds the barriers byte reuse needs
    ("proxy_fences", proxy_fences_pass),  # after every barrier exists
]


def swizzle_panel(func: PrimFunc) -> int | None:
    """The panel size of the kernel's enabled T.use_swizzle, if any."""
    swz = [op for op in collect(_the_kernel(func).body, lambda n: isinstance(n, O.Swizzle)) if op.enable]
    return swz[0].panel_size if swz else None


class CUDAArtifact(LowersOnDemand):
    """One compiled CUDA kernel: its lowered IR, source, module and launch (see launch())."""

    # launches through cuLaunchKernelEx where the driver has it; JITKernel clears it for
    # tl.disable_launch_kernel_ex
    launch_ex = True

    def __init__(self, func: PrimFunc, ctx: PassContext):
        self.target = ctx.target
        panel = swizzle_panel(func)
        try:
            self.lowered, self.csource, self.compiled = _lower_and_compile(func, ctx, panel)
        except CompileError as e:
            # a warp-specialized kernel that needs fewer registers than the producer's setmaxnreg
            # decrease names (ptxas C7406, seen with --Ofast-compile): the same kernel without it
            if "setmaxnreg.dec has register count" not in str(e):
                raise
            ctx = replace(ctx, pass_configs={**ctx.pass_configs, "tl.ws_no_setmaxnreg": True}, warnings=[])
            self.lowered, self.csource, self.compiled = _lower_and_compile(func, ctx, panel)
        from ...transform.pass_config import get as config

        def without(key, value=True):
            """The same compile with the optimisation `key` turns off: (ctx, lowered, csource, compiled)."""
            retry = replace(ctx, pass_configs={**ctx.pass_configs, key: value}, warnings=[])
            return (retry, *_lower_and_compile(func, retry, panel))

        if self.csource.smem_bytes > _SMEM_LIMIT and not config(ctx.pass_configs, "tl.disable_deep_ring", False):
            # the producer's ring is deepened before later passes add their scratch tiles (a
            # reduction's, a staging tile): where the total outgrows a block, keep num_stages
            got = without("tl.disable_deep_ring")
            if got[2].smem_bytes < self.csource.smem_bytes:
                ctx, self.lowered, self.csource, self.compiled = got
        if self.csource.smem_bytes > _SMEM_LIMIT and not config(ctx.pass_configs, "tl.disable_staged_element_copies",
                                                               False):
            # staged element copies fill a block's shared memory before later passes add their
            # scratch tiles (a reduction's): where the total outgrows a block, they stay synchronous
            got = without("tl.disable_staged_element_copies")
            if got[2].smem_bytes < self.csource.smem_bytes:
                ctx, self.lowered, self.csource, self.compiled = got
        if self.csource.smem_bytes > _SMEM_LIMIT and ctx.ws_info is not None and ctx.ws_info.workspace \
                and not config(ctx.pass_configs, "tl.disable_stream_k", False):
            # stream-K runs the epilogue in the branch of the unit that ends a tile, one statement to
            # the shared-memory plan: the epilogue's tiles (a staging tile, a reduction's scratch) keep
            # bytes of their own there. Where that outgrows a block, whole tiles
            got = without("tl.disable_stream_k")
            if got[2].smem_bytes < self.csource.smem_bytes:
                ctx, self.lowered, self.csource, self.compiled = got
        if self.csource.smem_bytes > _SMEM_LIMIT and ctx.ws_info is not None and ctx.ws_info.persistent \
                and not config(ctx.pass_configs, "tl.disable_persistent", False):
            # a persistent kernel's stage storage is busy over its whole tile loop (the producer fills
            # the next tile's stages during this one's epilogue): the epilogue's tiles cannot take its
            # bytes. Where that outgrows a block, a block per tile
            got = without("tl.disable_persistent")
            if got[2].smem_bytes < self.csource.smem_bytes:
                ctx, self.lowered, self.csource, self.compiled = got
        spill = _spill_note(self.compiled.ptxas_info())
        if ctx.ws_info is not None and ctx.ws_info.producer_regs in (PRODUCER_REGS, PRODUCER_REGS_WIDE) \
                and config(ctx.pass_configs, "tl.ws_producer_regs", None) is None \
                and (spill or "'setmaxnreg' ignored" in (self.compiled.log or "")):
            # the producer's count was the default's (24, or 40 for attention): where the kernel
            # spills or ptxas drops setmaxnreg, the build with the other count is kept if it spills
            # less, or keeps setmaxnreg where this one lost it (24 frees 8 registers a consumer thread)
            from .nvrtc import spilled

            other = PRODUCER_REGS_WIDE if ctx.ws_info.producer_regs == PRODUCER_REGS else PRODUCER_REGS
            got = without("tl.ws_producer_regs", other)
            lost, lost_other = ("'setmaxnreg' ignored" in (c.log or "") for c in (self.compiled, got[3]))
            fewer = spilled(got[3].ptxas_info()) < spilled(self.compiled.ptxas_info()) \
                and got[2].smem_bytes <= self.csource.smem_bytes
            if (lost and not lost_other) or (fewer and lost_other <= lost):
                ctx, self.lowered, self.csource, self.compiled = got
                spill = _spill_note(self.compiled.ptxas_info())
        if spill and ctx.ws_info is not None and ctx.ws_info.deferred_epilogue:
            # the deferred epilogue keeps the output tile in registers through the next k-loop:
            # where that spills, the epilogue stays between the k-loops
            got = without("tl.disable_deferred_epilogue")
            if _spill_note(got[3].ptxas_info()) is None:
                (ctx, self.lowered, self.csource, self.compiled), spill = got, None
        if spill and config(ctx.pass_configs, "tl.fresh_copy_index", None) is None:
            # tile-invariant copy addresses hoisted out of a persistent tile loop and spilled
            # (fresh_index.py): the build that spills less wins, if it needs no more shared memory
            from .nvrtc import spilled

            got = without("tl.fresh_copy_index")
            if spilled(got[3].ptxas_info()) < spilled(self.compiled.ptxas_info()) \
                    and got[2].smem_bytes <= self.csource.smem_bytes:
                ctx, self.lowered, self.csource, self.compiled = got
                spill = _spill_note(self.compiled.ptxas_info())
        if spill and getattr(ctx, "unmasked_tiles", 0):
            # a mask fill guarded per tile (unmasked_clear.py) can cost registers near the limit:
            # the build that spills less wins, if it needs no more shared memory
            from .nvrtc import spilled

            got = without("tl.disable_unmasked_tile_clear")
            if spilled(got[3].ptxas_info()) < spilled(self.compiled.ptxas_info()) \
                    and got[2].smem_bytes <= self.csource.smem_bytes:
                ctx, self.lowered, self.csource, self.compiled = got
                spill = _spill_note(self.compiled.ptxas_info())
        for m in ctx.warnings:
            warnings.warn(f"{func.name}: {m}", PerformanceWarning, stacklevel=4)
        self.source = self.csource.text
        if spill:
            warnings.warn(f"{func.name}: {spill}", PerformanceWarning, stacklevel=4)
        serial = _wgmma_serialized_note(self.compiled.log)
        if serial:
            warnings.warn(f"{func.name}: {serial}", PerformanceWarning, stacklevel=4)
        if "'setmaxnreg' ignored" in (self.compiled.log or ""):  # T.set_max_nreg below what the kernel needs
            regs = self.compiled.ptxas_info().get("registers", "?")
            warnings.warn(f"{func.name}: ptxas ignored setmaxnreg (T.set_max_nreg / dec_max_nreg): the kernel "
                          f"needs {regs} registers per thread, more than a lowered budget allows",
                          PerformanceWarning, stacklevel=4)
        self.ptx = self.compiled.ptx
        from ...transform.pass_config import get as config

        if config(ctx.pass_configs, "tl.enable_ptxas_verbose_output", False):
            print(self.compiled.log)
        out_dir = config(ctx.pass_configs, "cuda.kernels_output_dir", None)
        if out_dir:
            from pathlib import Path

            Path(out_dir).mkdir(parents=True, exist_ok=True)
            (Path(out_dir) / f"{self.csource.entry}.cu").write_text(self.source)
        self._module = None  # a shared-module loader, for kernels of a launch sequence
        self._init_launch_state()

    @classmethod
    def in_module(cls, lowered, csource, compiled, target, module) -> "CUDAArtifact":
        """One kernel of a module compiled from several (a launch sequence); `module()` loads it."""
        self = cls.__new__(cls)
        self.target, self.lowered, self.csource, self.compiled = target, lowered, csource, compiled
        self.source, self.ptx, self._module = csource.text, compiled.ptx, module
        self._init_launch_state()
        return self

    def record(self) -> dict | None:
        """What `from_record` needs to rebuild this artifact in another process (kernel cache);
        None for a kernel of a shared module (a launch sequence)."""
        if self._module is not None:
            return None
        return {"backend": "cuda", "target": self.target, "csource": self.csource, "compiled": self.compiled}

    @classmethod
    def from_record(cls, rec: dict) -> "CUDAArtifact":
        """The artifact of a kernel-cache record: the cubin is loaded on first launch."""
        self = cls.__new__(cls)
        self.target, self.csource, self.compiled = rec["target"], rec["csource"], rec["compiled"]
        self.source, self.ptx, self._module = self.csource.text, self.compiled.ptx, None
        self._init_launch_state()
        return self

    def _init_launch_state(self):
        self._fn = None
        self._tmaps: dict = {}
        self._flags: dict = {}  # device -> driver.AssertFlag, for kernels with T.device_assert
        self._workspaces: dict = {}  # (device, stream, name) -> torch tensor: the hidden global buffers
        self._ws_slots = [(i, obj) for i, (kind, obj) in enumerate(self.csource.arg_kinds) if kind == "workspace"]
        self.tracer = None  # tilelang.tools.cuda.iket: the kernel records events, read after each launch
        if "__tilelang_iket_tool__" in self.source:
            from ...tools.cuda.iket.runtime import attach

            self.tracer = attach(self.source, self.csource.entry, "cuda")

    def arg_value(self, kind, obj, values, index):
        """Per-call kernel arguments beyond tensors and scalars: TMA tensor maps, the assert flag."""
        if kind == "assert_flag":
            return self.assert_flag().ptr
        if kind == "workspace":
            return 0  # filled by launch(), which knows the stream
        if kind != "tensormap":
            raise LoweringError(f"internal: unknown kernel argument kind {kind}")
        base = getattr(obj.buffer, "view_base", obj.buffer)
        t = values[index[id(base)]]
        if obj.raw is not None:
            return self.raw_tensor_map(obj, t, values, index)
        key = (obj.name, t.data_ptr(), tuple(t.shape), tuple(t.stride()))
        cached = self._tmaps.get(key)
        if cached is None:
            from . import driver

            shape, elem = list(t.shape), t.element_size()
            strides = [int(s) * elem for s in t.stride()]
            if base is not obj.buffer:  # a T.view / T.Tensor(..., A.data) over a parameter: its own shape
                shape = list(obj.buffer.static_shape or ())
                if not shape or not t.is_contiguous():
                    raise LoweringError(f"TMA over the view {obj.buffer.name} of {base.name} needs a constant shape "
                                        f"and a contiguous {base.name}; got shape {obj.buffer.shape}, strides "
                                        f"{tuple(t.stride())}")
                strides, acc = [], max(1, obj.buffer.dtype.bits // 8)
                for d in reversed(shape):
                    strides.insert(0, acc)
                    acc *= d
            geo = obj.im2col  # an im2col map (transform/cuda/ws_im2col.py): corners and strides in (w, h)
            if geo is not None:
                cached = driver.encode_im2col_tensor_map(
                    obj.buffer.dtype.name, t.data_ptr(), list(reversed(shape)), list(reversed(strides))[1:],
                    geo.lower, geo.upper, geo.channels, geo.pixels, [1, *geo.strides, 1], swizzle=obj.swizzle)
            else:
                cached = driver.encode_tensor_map(obj.buffer.dtype.name, t.data_ptr(), list(reversed(shape)),
                                                  list(reversed(strides))[1:], list(reversed(obj.box)),
                                                  swizzle=obj.swizzle)
            if len(self._tmaps) > 64:
                self._tmaps.clear()
            self._tmaps[key] = cached
        return cached

    def raw_tensor_map(self, obj, t, values, index) -> bytes:
        """The tensor map of a T.create_tma_descriptor: its dims and byte strides evaluated for this launch."""
        dims, strides = obj.raw.geometry(launch_env(self.csource.arg_kinds, values, index))
        key = (obj.name, t.data_ptr(), tuple(dims), tuple(strides))
        cached = self._tmaps.get(key)
        if cached is None:
            from . import driver
            from ...op.hopper_raw import TMA_DATA_TYPES

            cached = driver.encode_tensor_map(TMA_DATA_TYPES[obj.raw.data_type][0], t.data_ptr(), dims, strides,
                                              list(obj.raw.box), swizzle=obj.raw.swizzle, l2_promotion=obj.raw.l2)
            if len(self._tmaps) > 64:
                self._tmaps.clear()
            self._tmaps[key] = cached
        return cached

    def sass(self) -> str:
        from .sass import disassemble

        return disassemble(self.compiled.cubin)

    def _function(self):
        if self._fn is None and self._module is not None:
            self._fn = self._module().get_function(self.csource.entry, self.csource.signature,
                                                   self.csource.smem_bytes)
        if self._fn is None:
            from . import driver

            self._fn = driver.load_kernel(self.compiled.cubin, self.csource.entry, self.csource.signature,
                                          self.csource.smem_bytes)
        if not self.launch_ex:
            self._fn.ex = False
        self._fn.cooperative = self.csource.cooperative
        return self._fn

    def grid(self, values) -> tuple:
        env = {}
        for (kind, obj), v in zip(self.csource.arg_kinds, values):
            if kind in ("scalar", "dim"):
                env[obj] = E.as_expr(v)
        out = []
        for g in self.csource.grid:
            c = g if isinstance(g, int) else const_int(simplify(substitute(E.as_expr(g), env)))
            if c is None:
                raise LoweringError(f"grid extent {g} could not be evaluated from the arguments")
            out.append(c)
        return tuple(out) + (1,) * (3 - len(out))

    def launch(self, values, stream=None):
        fn = self._function()
        grid = self.grid(values) if self._dynamic_grid() else self._static_grid()
        if min(grid) <= 0:
            from ...errors import empty_grid_error

            raise empty_grid_error(self.csource.entry, grid)
        if self._ws_slots:
            if stream is None:
                from .driver import current_stream

                stream = current_stream()
            values = list(values)
            for i, buf in self._ws_slots:
                t = self.workspace(buf, stream)
                values[i] = t.data_ptr()
                if buf.name == TIMELINE:  # this launch's records only
                    _zero_on(t, stream)
        fn.launch(grid, (self.csource.threads, 1, 1), self.csource.smem_bytes, values, stream)
        if self.tracer is not None:
            self.tracer.collect_cuda(fn.module.handle, grid, (self.csource.threads, 1, 1), stream)
        if self.csource.asserts:
            self.check_asserts(stream)

    def workspace(self, buf, stream: int):
        """The zeroed global buffer `buf` (stream-K partials or flags, the debug timeline) for the
        current device and `stream`: launches in flight on two streams at once must not share one."""
        import torch

        from . import driver

        dev = driver._torch_current_device()
        key = (dev, stream, buf.name)
        t = self._workspaces.get(key)
        if t is None:
            shape = [const_int(d) for d in buf.shape]
            t = self._workspaces[key] = torch.zeros(shape, dtype=buf.dtype.as_torch(),
                                                    device=torch.device("cuda", dev))
        return t

    def timeline(self, stream: int | None = None):
        """The per-block, per-unit timestamps of the last launch on `stream` (default: torch's
        current one), for a kernel built with tl.debug_timeline: a CPU int64 tensor
        [blocks, units, 4] (see warp_specialize.TIMELINE), or None before any launch."""
        from . import driver

        if stream is None:
            stream = driver.current_stream()
        t = self._workspaces.get((driver._torch_current_device(), stream, TIMELINE))
        if t is None:
            if not any(buf.name == TIMELINE for _, buf in self._ws_slots):
                raise ValueError("this kernel records no timeline: compile it with "
                                 "pass_configs={'tl.debug_timeline': True} (persistent warp-specialized kernels)")
            return None
        import torch

        torch.cuda.synchronize(t.device)
        return t.cpu()

    def assert_flag(self):
        """The device int this kernel's T.device_asserts write to (one per device, made on first use)."""
        from . import driver

        dev = driver._torch_current_device()
        flag = self._flags.get(dev)
        if flag is None:
            flag = self._flags[dev] = driver.AssertFlag(dev)
        return flag

    def check_asserts(self, stream=None):
        """After a launch: wait for it, read and reset the flag, raise like the CPU backend."""
        code = self.assert_flag().read_and_reset(stream)
        if code:
            raise_device_assert(code, self.csource.asserts, self.csource.entry)

    def _dynamic_grid(self) -> bool:
        return any(not isinstance(g, int) for g in self.csource.grid)

    def _static_grid(self) -> tuple:
        g = tuple(self.csource.grid)
        return g + (1,) * (3 - len(g))


def raise_device_assert(code: int, asserts: tuple, entry: str):
    """The CPU backend's error for a failed T.device_assert (1-based `code` into `asserts`)."""
    msg = asserts[code - 1] if 0 < code <= len(asserts) else f"code {code}"
    raise RuntimeError(f"T.device_assert failed in kernel {entry}: {msg}")


def device_options(pass_configs: dict) -> tuple[list[str], list[str]]:
    """NVRTC flags the pass configs ask for, and the notes on nvcc-only flags that were dropped.

    tl.enable_fast_math -> --use_fast_math (unless tl.disable_fast_math); tl.ptxas_register_usage_level
    -> ptxas --register-usage-level; tl.device_compile_flags (and jit's compile_flags) -> as given,
    translated from nvcc spelling by nvrtc.nvrtc_flags. TILELANG_LINEINFO=1 in the environment adds
    -lineinfo, so compute-sanitizer and ncu name lines of the generated kernel.cu.
    """
    from ...transform.pass_config import get as config
    from .nvrtc import nvrtc_flags

    opts = ["-lineinfo"] if os.environ.get("TILELANG_LINEINFO") == "1" else []
    if config(pass_configs, "tl.enable_fast_math", False) and not config(pass_configs, "tl.disable_fast_math", False):
        opts.append("--use_fast_math")
    level = config(pass_configs, "tl.ptxas_register_usage_level", None)
    if level is not None:
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 10:
            raise LoweringError(f"tl.ptxas_register_usage_level must be an integer in [0, 10], got {level!r}")
        opts.append(f"--ptxas-options=--register-usage-level={level}")
    kept, dropped = nvrtc_flags(config(pass_configs, "tl.device_compile_flags", None))
    return opts + kept, dropped


def compile_cached(source: str, arch: str, options=()):
    """NVRTC compile through the disk cache (cubin + ptx keyed on source, arch, options, NVRTC version)."""
    import pickle

    from ...cache import disk
    from . import nvrtc

    key = disk.key("cuda-v2", source, arch, repr(nvrtc.nvrtc_version()), _header_digest(), *options)
    hit = disk.lookup("cuda", key, ".pkl")
    if hit is not None:
        try:
            return pickle.loads(hit.read_bytes())
        except Exception:  # noqa: BLE001 - a damaged entry is rebuilt
            pass
    compiled = nvrtc.compile_cuda(source, arch, options=options, ptxas_verbose=True)  # its report names spills
    disk.store("cuda", key, ".pkl", pickle.dumps(compiled))
    return compiled


def _zero_on(t, stream: int) -> None:
    import torch

    with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=t.device)):
        t.zero_()


def _lower_and_compile(func: PrimFunc, ctx: PassContext, panel):
    """(lowered function, CudaSource, compiled module) for one set of pass configs."""
    lowered, csource = lower_to_source(func, ctx, panel)
    options, dropped = device_options(ctx.pass_configs)
    for note in dropped:  # harmless by construction (see nvrtc_flags), so not a warning
        logging.getLogger("tilelang").debug("%s: device compile flag dropped: %s", func.name, note)
    return lowered, csource, compile_cached(csource.text, ctx.target.arch, tuple(options))


def lower_to_source(func: PrimFunc, ctx: PassContext, panel):
    """(lowered function, CudaSource) of a single-kernel function: the pass list, codegen, then the
    register_cuda_postproc callbacks."""
    from ...engine.callback import postprocess

    lowered = run_passes(func, PASSES, ctx)
    csource = CudaCodegen(lowered, ctx.cuda_info, _the_kernel(lowered), panel, ctx.ws_info).generate()
    text = postprocess("cuda", csource.text, ctx.target)
    if text != csource.text:
        csource = replace(csource, text=text)
    return lowered, csource


def _wgmma_serialized_note(log: str | None) -> str | None:
    """A warning when ptxas serialized the wgmma instructions (its C75xx "Potential Performance Loss"
    notes): each then waits for the one before, and the tensor cores run one at a time."""
    import re

    notes = re.findall(r"\((C75\d\d)\) Potential Performance Loss: wgmma\.mma_async instructions are "
                       r"serialized(?: due to| because of)? ([^']*?) in the function", log or "")
    if not notes:
        return None
    codes = sorted({c for c, _ in notes})
    reason = notes[0][1].strip() or "a reason ptxas gives in its log"
    hint = ("fewer live registers a thread (a smaller tile per warpgroup, fewer stages, more consumer warpgroups) "
            "let them overlap" if "register" in reason else
            "pass_configs={'tl.enable_ptxas_verbose_output': True} prints ptxas' report")
    return f"ptxas serialized the wgmma instructions ({', '.join(codes)}: {reason}), so each waits for the one " \
           f"before; {hint}"


def _spill_note(info: dict) -> str | None:
    """A warning when ptxas put values in local memory (every access is then a trip through L1)."""
    spilled = max(info.get("spill_stores", 0), info.get("spill_loads", 0))
    if not spilled:
        return None
    return (f"ptxas spills {spilled} bytes per thread to local memory ({info.get('registers', '?')} registers "
            "used); fewer pipeline stages, a smaller tile per thread or more threads lower the register pressure")


_digest = []


def _header_digest() -> str:
    if not _digest:
        import hashlib
        from pathlib import Path

        h = hashlib.sha256()
        inc = Path(__file__).resolve().parents[2] / "include" / "tl"
        for p in sorted(inc.glob("*.h")):
            h.update(p.name.encode())
            h.update(p.read_bytes())
        _digest.append(h.hexdigest())
    return _digest[0]
