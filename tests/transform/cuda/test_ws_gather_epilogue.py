"""A warp-specialized gather kernel shaped like sparse MLA's pipelined forward (three warp groups
split by `tx` branches, a producer gathering rows by index with a per-row flag tile, wgmma
consumers, an epilogue staged through a 64-column panel tile), run on the host emulator against
float64 with and without the passes that shape its code:

- thread_ranges (tl.disable_thread_range_folding): `tid / 128` of a fragment layout folded inside
  each warp group's branch; a warp group's `tid - lo` printed masked (`& 127`);
- panel_xor_offset (tl.disable_panel_xor_index): panel tiles' element accesses without division;
- proxy fences only before barriers after writes the async proxy may reach
  (tl.disable_proxy_fence_reach): the flag tile's barrier in the producer carries none;
- thread_sync.passes_apart (tl.disable_sync_pass_ranges): the producer's row loop, whose passes
  touch disjoint flag elements, has no barrier at the end of its body;
- thread_ranges again: the producer's `(tx - 256) // 8` and `% 8` (tx is the thread index of the
  one-dimensional block) print as `>> 3` and `& 7` of `tid - 256` (without it, and without the
  power-of-two floor shifts of tl.disable_pow2_floor_shift, as tl_floordiv_i32 / tl_floormod_i32);
- split global indices (tl.disable_split_global_index): the gather's last index `64 * u + c` is
  added term by term to the 64-bit offset;
- manual TMA stores (tl.disable_manual_tma_store): each consumer's copy of its half of the output
  tile (a T.tma_copy target, in 64-column panels) to global memory is TMA stores by one thread;
- one barrier setup (tl.disable_barrier_init_merge): the five consecutive T.alloc_barrier are
  initialised in one block by thread 0 with one fence and one __syncthreads (five without);
- tensor-map prefetch (tl.disable_tma_descriptor_prefetch): thread 0 prefetches the Q and O tensor
  maps before the barrier setup;
- the barrier waits' suspend-time hint (tl.disable_mbarrier_suspend_hint): every try_wait in the PTX
  carries it, and a failed probe sleeps (NANOSLEEP.SYNCS in the SASS) instead of probing again.
"""
import re

import pytest
import torch

import tilelang
import tilelang.language as T

H, D, BI, STAGES = 64, 128, 64, 2
OFF = {"tl.disable_thread_range_folding": True, "tl.disable_panel_xor_index": True,
       "tl.disable_proxy_fence_reach": True, "tl.disable_sync_pass_ranges": True,
       "tl.disable_split_global_index": True, "tl.disable_manual_tma_store": True,
       "tl.disable_pow2_floor_shift": True, "tl.disable_barrier_init_merge": True,
       "tl.disable_tma_descriptor_prefetch": True, "tl.disable_mbarrier_suspend_hint": True}


def gather_attn(seq, rows, topk):
    NI = topk // BI

    @T.prim_func
    def main(Q: T.Tensor((seq, H, D), "bfloat16"), KV: T.Tensor((rows, D), "bfloat16"),
             Idx: T.Tensor((seq, topk), "int32"), O: T.Tensor((seq, H, D), "bfloat16")):
        with T.Kernel(seq, threads=384) as bx:
            Q_shared = T.alloc_shared([H, D], "bfloat16")
            KV_shared = T.alloc_shared([STAGES, BI, D], "bfloat16")
            O_shared = Q_shared
            valid = T.alloc_shared([STAGES, BI], "bool", scope="shared")
            S_shared = T.alloc_shared([H, BI], "bfloat16")
            acc_s = T.alloc_fragment([H, BI], "float32")
            acc_l = T.alloc_fragment([H, D // 2], "float32")
            acc_r = T.alloc_fragment([H, D // 2], "float32")
            idx = T.alloc_var("int32")
            bar_q = T.alloc_barrier(arrive_count=384)
            k_ready = T.alloc_barrier(arrive_count=[128] * STAGES)
            k_free = T.alloc_barrier(arrive_count=[256] * STAGES)
            s_ready = T.alloc_barrier(arrive_count=256)
            s_free = T.alloc_barrier(arrive_count=256)
            tx = T.get_thread_binding()
            T.tma_copy(Q[bx, 0:H, :], Q_shared, barrier=bar_q)
            T.barrier_arrive(bar_q)
            if tx < 128:
                T.set_max_nreg(240, 1)
                T.fill(acc_l, 0)
                T.barrier_wait(bar_q, 0)
                for i_i in T.serial(NI // STAGES):
                    for st in T.unroll(STAGES):
                        T.barrier_wait(k_ready[st], i_i & 1)
                        T.clear(acc_s)
                        T.wgmma_gemm(Q_shared, KV_shared[st, :, :], acc_s, transpose_B=True)
                        T.wait_wgmma(0)
                        if i_i != 0 or st != 0:
                            T.barrier_arrive(s_free)
                            T.barrier_wait(s_free, ((i_i * STAGES + st) & 1) ^ 1)
                        for h, b in T.Parallel(H, BI):
                            acc_s[h, b] = T.if_then_else(valid[st, b], acc_s[h, b] * 0.125, 0.0)
                        T.copy(acc_s, S_shared)
                        T.gemm(S_shared, KV_shared[st, :, : D // 2], acc_l)
                        T.barrier_arrive(s_ready)
                        T.barrier_arrive(k_free[st])
                T.copy(acc_l, O_shared[:, : D // 2])
                T.copy(O_shared[:, : D // 2], O[bx, 0:H, 0 : D // 2])
            elif tx >= 128 and tx < 256:
                T.set_max_nreg(168, 1)
                T.fill(acc_r, 0)
                for i_i in T.serial(NI // STAGES):
                    for st in T.unroll(STAGES):
                        T.barrier_arrive(s_ready)
                        T.barrier_wait(s_ready, (i_i * STAGES + st) & 1)
                        T.gemm(S_shared, KV_shared[st, :, D // 2 : D], acc_r)
                        T.barrier_arrive(k_free[st])
                        if st != STAGES - 1 or i_i != NI // STAGES - 1:
                            T.barrier_arrive(s_free)
                T.copy(acc_r, O_shared[:, D // 2 : D])
                T.copy(O_shared[:, D // 2 : D], O[bx, 0:H, D // 2 : D])
            elif tx >= 256:
                T.set_max_nreg(80, 0)
                for i_i in T.serial(NI // STAGES):
                    for st in T.unroll(STAGES):
                        T.barrier_wait(k_free[st], (i_i & 1) ^ 1)
                        for r in T.serial(4):
                            idx = Idx[bx, (i_i * STAGES + st) * BI + r * 16 + (tx - 256) // 8]
                            valid[st, r * 16 + (tx - 256) // 8] = idx < rows
                            if valid[st, r * 16 + (tx - 256) // 8]:
                                for u in T.serial(D // 64):
                                    T.ptx_cp_async(
                                        T.access_ptr(KV_shared[st, r * 16 + (tx - 256) // 8, 64 * u + (tx - 256) % 8 * 8], "w", 8),
                                        T.access_ptr(KV[idx, 64 * u + (tx - 256) % 8 * 8], "r", 8), 8)
                        T.cp_async_barrier_noinc(k_ready[st])

    return main


def _build(cfg):
    return tilelang.compile(gather_attn(2, 150, 256), target="cuda -arch=sm_90a", pass_configs=cfg)


def _producer(src):
    return src[src.index("if (tid >= 256"):]


def test_code_shape_with_and_without_the_passes():
    on, off = _build({}).get_kernel_source(), _build(OFF).get_kernel_source()
    # warp group indices: masked to their range; no `tid / 128` left inside the first warp group
    assert re.search(r"const int32_t tid_wg\w* = \(\(tid - 128\) & 127\);", on), on
    first = on[on.index("if (tid < 128) {"):on.index("if (tid >= 128 && tid < 256)")]
    assert "(tid / 128)" not in first and "(tid / 128)" in off
    assert "tl::panel_xor_offset<" in on and "tl::panel_xor_offset<" not in off
    # producer: one barrier per row pass (the flag's RAW), none at the loop end, no proxy fence
    prod_on, prod_off = _producer(on), _producer(off)
    assert "fence_proxy_async" not in prod_on and "fence_proxy_async" in prod_off
    r_on = prod_on[prod_on.index("for (int r = 0"):prod_on.index("cp_async_mbarrier_arrive")]
    r_off = prod_off[prod_off.index("for (int r = 0"):prod_off.index("cp_async_mbarrier_arrive")]
    assert r_on.count("barrier_sync<") == 1 and r_off.count("barrier_sync<") == 2, (r_on, r_off)
    # the consumers' S tile (read by wgmma) keeps its fence
    assert "tl::fence_proxy_async(); tl::barrier_sync<1, 128>();" in first
    # the gather's row and column: shifts and masks of tid - 256; its KV offset term by term
    assert "((tid - 256) >> 3)" in prod_on and "((tid - 256) & 7)" in prod_on and "tl_floordiv" not in prod_on
    assert "tl_floordiv_i32((tx - 256), 8)" in prod_off
    assert "&KV[(int64_t)idx[0] * 128 + (((tid - 256) & 7) * 8) + (u * 64)]" in prod_on, prod_on
    # the output: TMA stores of each consumer's panel, after the fence and barrier of its writes
    second = on[on.index("if (tid >= 128 && tid < 256)"):on.index("if (tid >= 256")]
    assert "tl::fence_proxy_async(); tl::barrier_sync<1, 128>();\n    if (tid == 0) { tl::tma_store(&tmap_1, Q_shared + 0, 0, 0, bx);" in first
    assert "if (tid == 128) { tl::tma_store(&tmap_1, Q_shared + 4096, 64, 0, bx);" in second
    assert "tl::tma_store_wait<0>();" in second and "copy_vec16" not in on
    assert "tma_store" not in off and "copy_vec16(&O[" in off
    # the barrier setup: one block, one fence, one __syncthreads for the five allocations (seven barriers)
    setup = on[:on.index("if (tid < 128) {")]
    assert setup.count("__syncthreads();") == 1 and setup.count("tl::fence_barrier_init();") == 1, setup
    assert len(re.findall(r"tl::mbarrier_init\(", setup)) == 7
    off_setup = off[:off.index("if (tid < 128) {")]
    assert off_setup.count("__syncthreads();") == 5 and off_setup.count("tl::fence_barrier_init();") == 5
    # the tensor maps: prefetched by thread 0 before the barriers are set up
    pre = "if (tid == 0) { tl::tma_prefetch_descriptor(&tmap_0); tl::tma_prefetch_descriptor(&tmap_1); }"
    assert pre in on and on.index(pre) < on.index("tl::mbarrier_init(") and "tma_prefetch" not in off



def test_barrier_waits_sleep_between_probes():
    k_on, k_off = _build({}), _build(OFF)
    assert "#define TL_MBAR_SUSPEND_HINT 0" in k_off.get_kernel_source()
    assert "TL_MBAR_SUSPEND_HINT" not in k_on.get_kernel_source()
    waits_on = re.findall(r"mbarrier\.try_wait\.parity\.shared::cta\.b64[^;]*;", k_on.artifact.compiled.ptx)
    waits_off = re.findall(r"mbarrier\.try_wait\.parity\.shared::cta\.b64[^;]*;", k_off.artifact.compiled.ptx)
    assert waits_on and all(w.endswith(", 10000000;") for w in waits_on), waits_on
    assert waits_off and not any("10000000" in w for w in waits_off), waits_off
    from tilelang.backend.cuda import sass
    if not sass.sass_available():
        pytest.skip("cuobjdump / nvdisasm not installed")
    assert "NANOSLEEP.SYNCS" in sass.disassemble(k_on.artifact.compiled.cubin)
    assert "NANOSLEEP" not in sass.disassemble(k_off.artifact.compiled.cubin)


@pytest.mark.parametrize("cfg", [{}, OFF], ids=["on", "off"])
def test_host_run_matches_float64(cfg, run_on_host):
    seq, rows, topk = 2, 150, 256
    k = _build(cfg)
    torch.manual_seed(7)
    q = (torch.randn(seq, H, D) / 4).bfloat16()
    kv = (torch.randn(rows, D) / 4).bfloat16()
    idx = torch.randint(0, rows, (seq, topk), dtype=torch.int32)
    # rows past the end are skipped (flag false): only in the second pass over each stage, whose
    # tile still holds the first pass's finite rows (the kernel never clears a skipped row)
    idx[0, 130:140] = rows + 3
    idx[1, 200:256] = rows
    o = torch.full((seq, H, D), float("nan")).bfloat16()
    run_on_host(k, [q, kv, idx, o])
    ok = (idx < rows).double()
    kk = kv.double()[idx.clamp(max=rows - 1).long()]  # (seq, topk, D)
    ref = torch.zeros(seq, H, D, dtype=torch.float64)
    for s in range(seq):
        for c in range(topk // BI):
            sl = slice(c * BI, (c + 1) * BI)
            p = (q.double()[s] @ kk[s, sl].T * 0.125 * ok[s, sl]).bfloat16().double()
            ref[s] += p @ kk[s, sl]
    torch.testing.assert_close(o.double(), ref, rtol=2e-2, atol=2e-2)
