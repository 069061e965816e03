"""proxy_fences: `fence.proxy.async` before a barrier exactly when this thread may have written
shared memory through the generic proxy since the last fence (on some path, loops followed
around their back edge). Hand-built programs pin the placement; lowered FlashAttention kernels
keep the fence where P / dS / Q written by threads is next read by wgmma and drop the others."""
import re

import pytest

import tilelang
from tilelang import dtypes as dt
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.buffer import Buffer
from tilelang.testing import kernels as tk
from tilelang.transform.cuda.proxy_fences import place_proxy_fences
from tilelang.transform.cuda.raw import Raw

SM90 = "cuda -arch=sm_90a"
tid = E.Var("tid", dt.int32)
k = E.Var("k", dt.int32)
P_s = Buffer("P_s", (128,), "float16", "shared.dyn")
K_s = Buffer("K_s", (128,), "float16", "shared.dyn")
G = Buffer("G", (128,), "float32", "global")


def sync():
    return Raw("__syncthreads();")


def store(buf):
    return S.BufferStore(buf, (tid,), E.as_expr(1.0, buf.dtype))


def gemm(*bufs):
    return Raw("tl::gemm_ss_sm90<64, 64, 64, 1, 1, true, 64, 64, tl::half_t, 0>({0}, {1}, {2});", reads=bufs)


def tma_load(buf):
    return Raw("tl::tma_load(&tmap_0, &tl_full[0], K_s, 0, 0);", writes=(buf,))


def fenced(body, plan=None, all_writes=True, mma_generic=True) -> list:
    """Per barrier in program order: does it have a fence in front? (all_writes: every generic shared
    write dirties, the placement rules alone; False: only writes of memory the async proxy may reach;
    mma_generic: tiles only mma.sync gemms and stmatrix name are generic-only)"""
    out = []

    def go(st):
        if isinstance(st, Raw) and "__syncthreads();" in st.fmt:
            out.append("fence_proxy_async" in st.fmt)
        for f in ("stmts", "body", "then_case", "else_case"):
            x = getattr(st, f, None)
            for y in (x if isinstance(x, tuple) else (x,)):
                if isinstance(y, S.Stmt):
                    go(y)

    go(place_proxy_fences(body, plan, all_writes=all_writes, mma_generic=mma_generic))
    return out


def loop(*stmts):
    return S.For(k, E.as_expr(0), E.as_expr(4), "serial", S.seq(*stmts))


def test_a_barrier_after_a_shared_store_is_fenced_the_next_is_not():
    assert fenced(S.seq(store(P_s), sync(), gemm(P_s, K_s), sync())) == [True, False]


def test_global_writes_and_tma_loads_need_no_fence():
    assert fenced(S.seq(store(G), sync(), tma_load(K_s), sync(), gemm(K_s, K_s), sync())) == [False, False, False]


def test_loop_back_edge_carries_a_write_to_the_barrier_at_the_top():
    # sync ; gemm(P_s) ; store P_s  -- the next iteration's first barrier follows the store
    assert fenced(loop(sync(), gemm(P_s, K_s), store(P_s))) == [True]
    assert fenced(loop(sync(), gemm(P_s, K_s), store(G))) == [False]


def test_loop_end_barrier_after_only_global_atomics_is_not_fenced():
    # FlashAttention backward: dS -> shared, sync, dQ gemm, atomics to global, sync
    body = loop(store(P_s), sync(), gemm(P_s, K_s), store(G), sync())
    assert fenced(body) == [True, False]


def test_a_write_on_either_arm_of_an_if_dirties():
    cond = E.Binary("<", tid, E.as_expr(64), dt.bool_)
    then = S.IfThenElse(cond, store(P_s), None)
    assert fenced(S.seq(then, sync())) == [True]
    assert fenced(S.seq(S.IfThenElse(cond, store(G), store(P_s)), sync())) == [True]
    assert fenced(S.seq(S.IfThenElse(cond, store(G), store(G)), sync())) == [False]


def test_cp_async_wait_names_its_writes_so_the_barrier_after_it_is_fenced():
    cp = Raw("tl::cp_async_zfill<16>({0}, {1}, 1);", writes=(P_s,))
    wait = Raw("tl::cp_async_wait<0>();", writes=(P_s,))
    assert fenced(S.seq(cp, sync(), wait, sync())) == [True, True]


@pytest.mark.nvrtc
def test_attention_forward_fences_only_the_barrier_after_the_q_copy():
    # more tiles than SMs: a persistent kernel, whose consumers load Q themselves where the producer's
    # Q prefetch (ws_tile_prefix) is off
    src = tilelang.compile(tk.attention(4, 32, 1024, 64, 64, 64, stages=2), target=SM90,
                           pass_configs={"tl.disable_persistent_prefix_tma": True}).get_kernel_source()
    consumer = src.split("setmaxnreg_inc")[1]
    bars = re.findall(r"(tl::fence_proxy_async\(\); )?tl::barrier_sync<1, \d+>\(\);", consumer)
    # Q by cp.async then read by wgmma: fenced; the epilogue's barriers order generic accesses only
    assert bars[0] == "tl::fence_proxy_async(); "
    assert len(bars) >= 2 and not all(bars)
    q_copy = consumer.index("cp_async_wait<0>();")
    assert consumer.index("tl::fence_proxy_async();") > q_copy


@pytest.mark.nvrtc
def test_attention_forward_with_q_loaded_by_the_producer_needs_no_fence():
    src = tilelang.compile(tk.attention(1, 2, 256, 64, 64, 64, stages=2), target=SM90).get_kernel_source()
    consumer = src.split("setmaxnreg_inc")[1]
    # Q written by TMA and read by wgmma: both in the async proxy, ordered by the tl_pre wait; the
    # one fence orders the output tile's generic stores before its TMA store reads them
    assert "tl::mbarrier_wait(&tl_pre[0], 0);" in consumer and consumer.count("fence_proxy_async") == 1
    assert consumer.index("fence_proxy_async") > consumer.index("O_tma[") and \
        consumer.index("fence_proxy_async") < consumer.index("tl::tma_store(")


# ---- which writes dirty: memory the async proxy may reach (a buffer an inline statement names, or
# one sharing bytes with such a buffer in the shared-memory plan)
F_s = Buffer("F_s", (128,), "bool", "shared.dyn")  # a flag tile: plain element loads and stores only


def load(buf):
    return E.BufferLoad(buf, (tid,), buf.dtype)


def test_a_flag_tile_only_loaded_and_stored_needs_no_fence():
    body = S.seq(store(F_s), sync(), S.IfThenElse(load(F_s), store(G), None), store(P_s), sync(), gemm(P_s, K_s), sync())
    assert fenced(body, all_writes=False) == [False, True, False]
    assert fenced(body) == [True, True, False]  # tl.disable_proxy_fence_reach


def test_a_flag_tile_sharing_bytes_with_a_gemm_operand_is_fenced():
    from tilelang.transform.cuda.plan_smem import SmemPlan, SmemSlot

    body = S.seq(store(F_s), sync(), gemm(P_s, K_s), sync())
    apart = SmemPlan((SmemSlot("P_s", P_s.uid, 0, 256, 0, 3), SmemSlot("K_s", K_s.uid, 256, 256, 0, 3),
                      SmemSlot("F_s", F_s.uid, 512, 128, 0, 3)), 640)
    shared = SmemPlan((SmemSlot("P_s", P_s.uid, 0, 256, 0, 3), SmemSlot("K_s", K_s.uid, 256, 256, 0, 3),
                       SmemSlot("F_s", F_s.uid, 128, 128, 0, 3)), 512)
    assert fenced(body, apart, all_writes=False) == [False, False]
    assert fenced(body, shared, all_writes=False) == [True, False]


def test_a_buffer_whose_address_is_taken_or_named_in_inline_code_is_reached():
    addr = E.Call("address_of", (load(F_s),), dt.handle if hasattr(dt, "handle") else dt.int64)
    body = S.seq(store(F_s), sync(), S.Evaluate(E.Call("extern:f", (addr,), dt.int32)))
    assert fenced(body, all_writes=False) == [True]
    named = S.seq(store(F_s), sync(), Raw("tl::tma_store(&tmap_0, F_s, 0);"))
    assert fenced(named, all_writes=False) == [True]


# ---- cp.async: its bytes land at the wait that drains them, so the barrier after the wait is fenced
def cp_async(buf):
    """As lowered: the destination is an address argument, not a declared write."""
    dst = E.Call("address_of", (E.BufferLoad(buf, (tid,), buf.dtype),), dt.uint64)
    src = E.Call("address_of", (E.BufferLoad(G, (tid,), G.dtype),), dt.uint64)
    return Raw("tl::cp_async_zfill<16>({0}, {1}, true);", (dst, src))


def test_the_barrier_after_a_cp_async_wait_is_fenced_before_wgmma_reads_the_tile():
    # pipelined: the wait for stage k and its barrier, wgmma reads K_s, stage k+1 issued, the
    # loop-end barrier. The bytes land at the wait, so its barrier is fenced; the loop-end barrier
    # follows only the issue (nothing landed yet) and needs none.
    body = loop(Raw("tl::cp_async_wait<1>(); __syncthreads();"), gemm(P_s, K_s), cp_async(K_s),
                Raw("tl::cp_async_commit();"), sync())
    assert fenced(body) == [True, False]
    assert fenced(body, all_writes=False) == [True, False]  # K_s is a wgmma operand: reachable
    # a wait with no cp.async in the kernel (TMA loads only) lands nothing
    tma = loop(Raw("tl::cp_async_wait<1>(); __syncthreads();"), gemm(P_s, K_s), tma_load(K_s), sync())
    assert fenced(tma) == [False, False]


# ---- mma.sync tiles: stmatrix writes and ldmatrix / mma.sync reads go through the generic proxy
dS_s = Buffer("dS_s", (128,), "float16", "shared.dyn")


def stmatrix(buf):
    dst = E.Call("address_of", (E.BufferLoad(buf, (tid,), buf.dtype),), dt.uint64)
    return Raw("tl::stmatrix_pack<4>({0}, {1}, {1}, {1}, {1}, {1}, {1}, {1}, {1});",
               (dst, E.as_expr(0.0, dt.float16)), writes=(buf,))


def mma_gemm(*bufs):
    return Raw("tl::gemm_ss<32, 64, 128, 2, 4, true, false, 32, 64, true, true, tl::half_t>({0}, {1}, {2});",
               bufs, reads=bufs)


def mma_loop():
    """The attention backward's dQ step: wgmma reads K_s; dS_s is stored by stmatrix and read by the
    mma.sync gemm behind a barrier; the loop-end barrier guards the next iteration's store."""
    return loop(gemm(P_s, K_s), stmatrix(dS_s), sync(), mma_gemm(dS_s, K_s), sync())


def test_a_tile_only_mma_sync_gemms_and_stmatrix_touch_needs_no_fence():
    assert fenced(mma_loop(), all_writes=False, mma_generic=True) == [False, False]
    assert fenced(mma_loop(), all_writes=False, mma_generic=False) == [True, False]  # tl.disable_mma_sync_generic_reach


def test_an_mma_sync_tile_that_wgmma_also_reads_is_fenced():
    body = loop(stmatrix(dS_s), sync(), mma_gemm(dS_s, K_s), gemm(dS_s, K_s), sync())
    assert fenced(body, all_writes=False, mma_generic=True) == [True, False]
    # a store into K_s (a wgmma operand) before the barrier: fenced though an mma.sync gemm reads it too
    body = loop(stmatrix(K_s), sync(), mma_gemm(dS_s, K_s), sync(), gemm(P_s, K_s), sync())
    assert fenced(body, all_writes=False, mma_generic=True) == [True, False, False]


# ---- bytewise reach: the two-stage dequant GEMM's plan puts the output tile C over both the
# dequantized operand (a wgmma operand) and the packed-B ring (plain loads only); C itself is
# written by stmatrix and stored out by copy_vec16. Only bytes a named tile covers are reachable.
Bp_s = Buffer("Bp_s", (128,), "uint8", "shared.dyn")  # packed B: cp.async in, plain loads out
C_s = Buffer("C_s", (256,), "float16", "shared.dyn")


def copy_vec16(buf):
    src = E.Call("address_of", (E.BufferLoad(buf, (tid,), buf.dtype),), dt.uint64)
    dst = E.Call("address_of", (E.BufferLoad(G, (tid,), G.dtype),), dt.uint64)
    return Raw("tl::copy_vec16({0}, {1}, {2});", (dst, src, E.as_expr(True, dt.bool_)))


def dequant_plan():
    from tilelang.transform.cuda.plan_smem import SmemPlan, SmemSlot

    # K_s (wgmma operand) [0, 256), Bp_s [256, 384), C_s [0, 512): C overlaps both
    return SmemPlan((SmemSlot("K_s", K_s.uid, 0, 256, 0, 3), SmemSlot("Bp_s", Bp_s.uid, 256, 128, 0, 3),
                     SmemSlot("P_s", P_s.uid, 512, 256, 0, 3), SmemSlot("C_s", C_s.uid, 0, 512, 0, 3)), 768)


def dequant_body():
    """wait for the packed tile, barrier, dequantize it into K_s, barrier, wgmma; then the epilogue."""
    k_step = loop(Raw("tl::cp_async_wait<0>(); __syncthreads();"), S.Evaluate(load(Bp_s)), store(K_s),
                  sync(), gemm(P_s, K_s), sync(), cp_async(Bp_s), Raw("tl::cp_async_commit();"))
    return S.seq(k_step, stmatrix(C_s), sync(), copy_vec16(C_s))


def test_a_packed_ring_under_the_output_tile_needs_no_fence_bytewise():
    plan = dequant_plan()
    # the wait lands only Bp_s (plain loads): unfenced; the barrier after the K_s stores: fenced;
    # the epilogue barrier after the stmatrix into C_s (it shares bytes with K_s): fenced
    assert fenced_bytewise(dequant_body(), plan, True) == [False, True, False, True]
    # tl.disable_proxy_fence_bytewise_reach: copy_vec16 names C_s, so Bp_s (under C_s) is reached
    assert fenced_bytewise(dequant_body(), plan, False) == [True, True, False, True]


def test_bytewise_reach_still_fences_a_tile_sharing_bytes_with_a_wgmma_operand():
    plan = dequant_plan()
    from tilelang.transform.cuda.proxy_fences import async_reach

    reach = async_reach(dequant_body(), plan, generic_only=True, mma_generic=True, bytewise=True)
    assert {K_s.uid, P_s.uid, C_s.uid} <= reach and Bp_s.uid not in reach
    old = async_reach(dequant_body(), plan, generic_only=True, mma_generic=True, bytewise=False)
    assert Bp_s.uid in old


def fenced_bytewise(body, plan, bytewise):
    out = []

    def go(st):
        if isinstance(st, Raw) and "__syncthreads();" in st.fmt:
            out.append("fence_proxy_async" in st.fmt)
        for f in ("stmts", "body", "then_case", "else_case"):
            x = getattr(st, f, None)
            for y in (x if isinstance(x, tuple) else (x,)):
                if isinstance(y, S.Stmt):
                    go(y)

    go(place_proxy_fences(body, plan, all_writes=False, bytewise=bytewise))
    return out
