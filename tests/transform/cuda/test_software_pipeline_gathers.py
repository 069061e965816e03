"""software_pipeline: T.Parallel element copies (row gathers through an index tensor) as cp.async stages.

The sparse-MLA shape: a register-only mask loop, then `KV_s[i, d] = KV[Idx[.., i], d]` loops,
then compute. The gathers are staged (issued one iteration ahead as cp.async with a zero-fill
predicate for rows the safe-memory guard rejects); the result is checked against float64 on
the CPU backend and, for the generated CUDA, on the host (tilelang/testing/host_cuda).
"""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect
from tilelang.transform.cuda.software_pipeline import pipeline_kernel

N, D, BI, NI, NB = 100, 32, 16, 4, 3  # table rows, row length, rows per step, steps, blocks


def gather_sum(stages, read_first=False):
    """O[b*BI + i, :] = sum_k (k + 1) * X[Idx[b, k*BI + i], :] for rows with Idx >= 0 (zeros past the table)."""

    @T.prim_func
    def gather_sum(X: T.Tensor((N, D), "float32"), Idx: T.Tensor((NB, NI * BI), "int32"),
                   O: T.Tensor((NB * BI, D), "float32")):
        with T.Kernel(NB, threads=128) as bx:
            X_s = T.alloc_shared((BI, D), "float32")
            mask = T.alloc_fragment((BI,), "bool")
            acc = T.alloc_fragment((BI, D), "float32")
            T.clear(acc)
            for k in T.Pipelined(NI, num_stages=stages):
                for i in T.Parallel(BI):
                    mask[i] = Idx[bx, k * BI + i] >= 0
                if read_first:
                    for i, d in T.Parallel(BI, D):
                        acc[i, d] += X_s[i, d]
                for i, d in T.Parallel(BI, D):
                    X_s[i, d] = X[Idx[bx, k * BI + i], d]
                for i, d in T.Parallel(BI, D):
                    acc[i, d] += T.if_then_else(mask[i], X_s[i, d] * (k + 1), 0.0)
            T.copy(acc, O[bx * BI, 0])

    return gather_sum


def inputs():
    x = torch.randn(N, D)
    idx = torch.randint(0, N, (NB, NI * BI), dtype=torch.int32)
    idx[0, 3], idx[1, 7], idx[2, 20] = -1, N, N + 5  # masked out / past the table (zero-filled)
    return x, idx


def reference(x, idx):
    ok = (idx >= 0) & (idx < N)
    rows = x.double()[idx.clamp(0, N - 1).long()] * ok[..., None]  # (NB, NI*BI, D)
    w = torch.arange(1, NI + 1, dtype=torch.float64).repeat_interleave(BI)[None, :, None] * (idx >= 0)[..., None]
    return (rows * w).reshape(NB, NI, BI, D).sum(1).reshape(NB * BI, D)


def _host():
    from tilelang.testing import host_cuda as host
    return host


def test_gather_sum_on_the_cpu_backend_matches_float64():
    x, idx = inputs()
    o = torch.full((NB * BI, D), float("nan"))
    tilelang.compile(gather_sum(2), target="cpu")(x, idx, o)
    torch.testing.assert_close(o.double(), reference(x, idx), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("stages", [2, 3])
def test_gathers_are_staged_as_zero_filling_cp_async_and_run_right_on_host(stages):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(gather_sum(stages), target="cuda -arch=sm_80")
    msgs = [str(w.message) for w in got]
    assert not any("unpipelined" in m or "synchronous" in m or "ordinary loads" in m for m in msgs), msgs
    src = kern.get_kernel_source()
    loop = src.split("for (int k = 0; k < 4; ++k) {")[1]
    assert f"tl::cp_async_wait<{stages - 2}>" in loop and "X_s_w = X_s_stages +" in loop, src
    assert "tl::cp_async_zfill<16>(&X_s_w[" in loop and "+ (k * 16)]" in loop and "Idx[(int64_t)bx * 64 + " in loop, src
    assert "tl::load_vec" not in loop.split("tl::cp_async_commit();")[0], src  # no register round trip
    host = _host()
    if not host.available():
        pytest.skip("g++ not installed")
    x, idx = inputs()
    o = torch.full((NB * BI, D), float("nan"))
    host.HostProgram({"g": kern}).run("g", [x, idx, o])
    torch.testing.assert_close(o.double(), reference(x, idx), rtol=1e-5, atol=1e-4)


def test_gather_stages_only_with_a_shared_memory_limit(helpers):
    k = helpers.tile_kernel(gather_sum(2), "sm_80")
    msgs = []
    piped, views = pipeline_kernel(k, msgs.append)  # no limit: T.copy ops only, as before
    assert piped is k and not views and "runs unpipelined" in msgs[-1]
    piped, views = pipeline_kernel(k, [].append, smem_limit=232448)
    assert [v[0].name for v in views] == ["X_s"]
    staged = [f for f in collect(piped.body, lambda n: isinstance(n, S.For)) if f.annotation("async_copy")]
    assert len(staged) == 2  # the prologue's and the loop's issue


def test_gather_whose_tile_is_read_first_stays_synchronous(helpers):
    k = helpers.tile_kernel(gather_sum(2, read_first=True), "sm_80")
    msgs = []
    piped, views = pipeline_kernel(k, msgs.append, smem_limit=232448)
    assert not views
    assert "the T.Parallel element copy into X_s stays a synchronous copy: the body uses X_s before it" in msgs[0], msgs


def test_gather_past_the_block_limit_stays_synchronous(helpers):
    k = helpers.tile_kernel(gather_sum(2), "sm_80")
    msgs = []
    _, views = pipeline_kernel(k, msgs.append, smem_limit=2048 + 1024)  # X_s is 2 KB; a second stage does not fit
    assert not views
    assert any("its 2 stages would take the kernel's shared memory past 3 KB" in m for m in msgs), msgs


def sparse_mla(H=64, DV=128, DT=64, BI=64, NI=2, threads=256):
    """The DeepSeek v3.2 sparse MLA forward's shape (smaller dims): gathers feed wgmma gemms."""

    @T.prim_func
    def sparse_mla(Q: T.Tensor((8, H, DV + DT), "bfloat16"), KV: T.Tensor((512, DV + DT), "bfloat16"),
                   Idx: T.Tensor((8, BI * NI), "int32"), Out: T.Tensor((8, H, DV), "bfloat16")):
        with T.Kernel(8, threads=threads) as bx:
            Q_s = T.alloc_shared((H, DV + DT), "bfloat16")
            KV_s = T.alloc_shared((BI, DV), "bfloat16")
            K_tail = T.alloc_shared((BI, DT), "bfloat16")
            S_s = T.alloc_shared((H, BI), "bfloat16")
            mask = T.alloc_fragment((BI,), "bool")
            acc_s = T.alloc_fragment((H, BI), "float32")
            acc_o = T.alloc_fragment((H, DV), "float32")
            T.clear(acc_o)
            T.copy(Q[bx, 0:H, :], Q_s)
            for it in T.Pipelined(NI, num_stages=2):
                for i in T.Parallel(BI):
                    mask[i] = Idx[bx, it * BI + i] <= bx * 64
                for i, d in T.Parallel(BI, DV):
                    KV_s[i, d] = KV[Idx[bx, it * BI + i], d]
                for i, d in T.Parallel(BI, DT):
                    K_tail[i, d] = KV[Idx[bx, it * BI + i], DV + d]
                for h, i in T.Parallel(H, BI):
                    acc_s[h, i] = T.if_then_else(mask[i], 0, -T.infinity("float32"))
                T.gemm(Q_s[:, :DV], KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.gemm(Q_s[:, DV:], K_tail, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(acc_s, S_s)
                T.gemm(S_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc_o, Out[bx, 0:H, :])

    return sparse_mla


def weighted_gather(stages, read_before=False):
    """gather_sum with a per-row weight tile W_s copied (T.copy) right before the pipelined loop."""

    @T.prim_func
    def weighted_gather(X: T.Tensor((N, D), "float32"), Idx: T.Tensor((NB, NI * BI), "int32"),
                        W: T.Tensor((NB * BI, D), "float32"), O: T.Tensor((NB * BI, D), "float32")):
        with T.Kernel(NB, threads=128) as bx:
            W_s = T.alloc_shared((BI, D), "float32")
            X_s = T.alloc_shared((BI, D), "float32")
            acc = T.alloc_fragment((BI, D), "float32")
            T.clear(acc)
            if read_before:
                T.clear(W_s)
                for i, d in T.Parallel(BI, D):
                    acc[i, d] = W_s[i, d]
            T.copy(W[bx * BI, 0], W_s)
            for k in T.Pipelined(NI, num_stages=stages):
                for i, d in T.Parallel(BI, D):
                    X_s[i, d] = X[Idx[bx, k * BI + i], d]
                for i, d in T.Parallel(BI, D):
                    acc[i, d] += X_s[i, d] * W_s[i, d]
            T.copy(acc, O[bx * BI, 0])

    return weighted_gather


def _w_copy_at(src: str) -> int:
    """Where W_s's copy is written: its cp.async destination as a shared-address slot
    (tl::smem_addr(W_s) + ...) or as &W_s[...] (tl.disable_shared_address_slots, element copies)."""
    at = [src.find(t) for t in ("smem_addr(W_s)", "&W_s[") if t in src]
    assert at, src
    return min(at)


@pytest.mark.parametrize("stages", [2, 3])
def test_copy_before_the_loop_joins_its_prologue_and_runs_right_on_host(stages):
    kern = tilelang.compile(weighted_gather(stages), target="cuda -arch=sm_80")
    src = kern.get_kernel_source()
    head = src.split("for (int k = 0; k < 4; ++k) {")[0]
    # W_s's loads and stage 0's are in flight together: no wait or barrier before the loop's own
    assert "cp_async_wait" not in head and "__syncthreads" not in head, src
    assert head.count("tl::cp_async_commit();") == stages, src  # W_s's group and the prologue's stages - 1
    assert _w_copy_at(head) < head.index("X_s_w = X_s_stages + (0)")
    host = _host()
    if not host.available():
        pytest.skip("g++ not installed")
    x, idx = inputs()
    w = torch.randn(NB * BI, D)
    o = torch.full((NB * BI, D), float("nan"))
    host.HostProgram({"g": kern}).run("g", [x, idx, w, o])
    ok = ((idx >= 0) & (idx < N)).double()
    rows = x.double()[idx.clamp(0, N - 1).long()] * ok[..., None]
    ref = rows.reshape(NB, NI, BI, D).sum(1).reshape(NB * BI, D) * w.double()
    torch.testing.assert_close(o.double(), ref, rtol=1e-5, atol=1e-4)


def test_copy_into_a_tile_read_before_it_stays_synchronous():
    kern = tilelang.compile(weighted_gather(2, read_before=True), target="cuda -arch=sm_80")
    head = kern.get_kernel_source().split("for (int k = 0; k < 4; ++k) {")[0]
    w_copy = head[_w_copy_at(head):]
    # W_s lands before the loop reads it (its wait may follow the prologue's loads, not their commit)
    assert w_copy.index("tl::cp_async_wait<0>();") < w_copy.index("tl::cp_async_commit();", w_copy.index("X_s_w = X_s_stages + (0)")), head


def test_sparse_mla_shape_stages_its_gathers_for_wgmma_on_sm90a():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        kern = tilelang.compile(sparse_mla(), target="cuda -arch=sm_90a",
                                pass_configs={"tl.disable_warp_specialized": True, "tl.disable_tma_lower": True})
    msgs = [str(w.message) for w in got]
    assert not any("unpipelined" in m or "synchronous" in m for m in msgs), msgs
    src = kern.get_kernel_source()
    loop = src.split("for (int it = 0; it < 2; ++it) {")[1]
    assert "KV_s_stages" in src and "K_tail_stages" in src
    assert loop.count("tl::cp_async_zfill<16>(&KV_s_w[") == 1 and loop.count("tl::cp_async_zfill<16>(&K_tail_w[") == 1
    assert "gemm_ss_sm90" in loop and "tl::load_vec" not in loop, src
    # KV_s and K_tail are separate cp.async groups (sm_90): the first gemm waits for KV_s only, one
    # barrier before it; K_tail's wait comes after it, and each tile is refilled after its last reader
    first = loop.split("tl::gemm_ss_sm90")[0]
    assert first.count("__syncthreads();") == 1 and first.count("cp_async_wait<2>") == 1, src
    assert loop.split("tl::gemm_ss_sm90")[1].count("cp_async_wait<3>") == 1, src
    # Q's loads join the prologue: no wait before the loop's first
    assert "cp_async_wait" not in src.split("for (int it = 0; it < 2; ++it) {")[0], src


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("stages", [2, 3])
def test_gather_sum_on_gpu_matches_float64(stages):
    x, idx = inputs()
    o = torch.full((NB * BI, D), float("nan"), device="cuda")
    tilelang.compile(gather_sum(stages), target="cuda")(x.cuda(), idx.cuda(), o)
    torch.testing.assert_close(o.cpu().double(), reference(x, idx), rtol=1e-5, atol=1e-4)


def batched_gather():
    """gather_sum over symbolic (batch, seq) dims, one block per (s, b) as in sparse MLA:
    O[b, s, i, :] = sum_k (k + 1) * X[b, Idx[b, s, k*BI + i], :] (zeros for rows past the table)."""
    batch, seq, rows = T.dynamic("batch"), T.dynamic("seq"), T.dynamic("rows")

    @T.prim_func
    def batched_gather(X: T.Tensor((batch, rows, D), "float32"), Idx: T.Tensor((batch, seq, NI * BI), "int32"),
                       O: T.Tensor((batch, seq, BI, D), "float32")):
        with T.Kernel(seq, batch, threads=128) as (bx, by):
            X_s = T.alloc_shared((BI, D), "float32")
            mask = T.alloc_fragment((BI,), "bool")
            acc = T.alloc_fragment((BI, D), "float32")
            T.clear(acc)
            for k in T.Pipelined(NI, num_stages=2):
                for i in T.Parallel(BI):
                    mask[i] = Idx[by, bx, k * BI + i] >= 0
                for i, d in T.Parallel(BI, D):
                    X_s[i, d] = X[by, Idx[by, bx, k * BI + i], d]
                for i, d in T.Parallel(BI, D):
                    acc[i, d] += T.if_then_else(mask[i], X_s[i, d] * (k + 1), 0.0)
            T.copy(acc, O[by, bx, 0, 0])

    return batched_gather


def test_gather_index_over_a_symbolic_grid_is_read_unguarded_and_runs_right_on_host(run_on_host):
    """`by < batch` and `bx < seq` hold in a T.Kernel(seq, batch): the index load is not wrapped in a
    guard (`? Idx[..] : 0`, whose conditional loads nvcc issues one branch at a time before each
    cp.async); only the data-dependent row check stays."""
    kern = tilelang.compile(batched_gather(), target="cuda -arch=sm_80")
    src = kern.get_kernel_source()
    loop = src.split("for (int k = 0; k < 4; ++k) {")[1]
    assert "tl::cp_async_zfill<16>(&X_s_w[" in loop, src
    # (bound checks against a dim compare in 32 bits with its entry constant: i < n as i <= tl_n_lt)
    assert "? Idx[" not in src and "tl_batch_lt)" not in src and "tl_seq_lt)" not in src, src
    assert "<= tl_rows_lt" in loop, src  # the gathered row's own check
    b, s, rows = 2, 3, 40
    x = torch.randn(b, rows, D)
    idx = torch.randint(0, rows, (b, s, NI * BI), dtype=torch.int32)
    idx[0, 1, 3], idx[1, 2, 17], idx[1, 0, 40], idx[0, 2, 63] = -1, rows, rows + 9, -7
    o = torch.full((b, s, BI, D), float("nan"))
    run_on_host(kern, [x, idx, o])
    ok = (idx >= 0) & (idx < rows)
    got = x.double()[torch.arange(b)[:, None, None], idx.clamp(0, rows - 1).long()] * ok[..., None]
    w = torch.arange(1, NI + 1, dtype=torch.float64).repeat_interleave(BI)[None, None, :, None] * (idx >= 0)[..., None]
    ref = (got * w).reshape(b, s, NI, BI, D).sum(2)
    torch.testing.assert_close(o.double(), ref, rtol=1e-5, atol=1e-4)


def replicated_gather():
    """batched_gather with two blocks per query row, as sparse MLA at 128 heads (REPLICATE_H = 2):
    T.Kernel(seq * 2, batch), s = bx // 2, r = bx % 2; O[b, s, r] = (r + 1) * batched_gather's O[b, s]."""
    batch, seq, rows = T.dynamic("batch"), T.dynamic("seq"), T.dynamic("rows")

    @T.prim_func
    def replicated_gather(X: T.Tensor((batch, rows, D), "float32"), Idx: T.Tensor((batch, seq, NI * BI), "int32"),
                          O: T.Tensor((batch, seq, 2, BI, D), "float32")):
        with T.Kernel(seq * 2, batch, threads=128) as (bx, by):
            X_s = T.alloc_shared((BI, D), "float32")
            mask = T.alloc_fragment((BI,), "bool")
            acc = T.alloc_fragment((BI, D), "float32")
            s = bx // 2
            r = bx % 2
            T.clear(acc)
            for k in T.Pipelined(NI, num_stages=2):
                for i in T.Parallel(BI):
                    mask[i] = Idx[by, s, k * BI + i] >= 0
                for i, d in T.Parallel(BI, D):
                    X_s[i, d] = X[by, Idx[by, s, k * BI + i], d]
                for i, d in T.Parallel(BI, D):
                    acc[i, d] += T.if_then_else(mask[i], X_s[i, d] * (k + 1) * (r + 1), 0.0)
            T.copy(acc, O[by, s, r, 0, 0])

    return replicated_gather


def test_gather_index_of_a_replicated_symbolic_grid_is_read_unguarded_and_runs_right_on_host(run_on_host):
    """`bx // 2 < seq` in a T.Kernel(seq * 2, batch) (ranges bound a block variable divided by a
    constant): the index loads and the output copy carry no `< seq` guard."""
    kern = tilelang.compile(replicated_gather(), target="cuda -arch=sm_80")
    src = kern.get_kernel_source()
    loop = src.split("for (int k = 0; k < 4; ++k) {")[1]
    assert "tl::cp_async_zfill<16>(&X_s_w[" in loop, src
    assert "? Idx[" not in src and "tl_batch_lt)" not in src and "tl_seq_lt)" not in src, src
    assert "<= tl_rows_lt" in loop, src
    b, s, rows = 2, 3, 40
    x = torch.randn(b, rows, D)
    idx = torch.randint(0, rows, (b, s, NI * BI), dtype=torch.int32)
    idx[0, 1, 3], idx[1, 2, 17], idx[1, 0, 40], idx[0, 2, 63] = -1, rows, rows + 9, -7
    o = torch.full((b, s, 2, BI, D), float("nan"))
    run_on_host(kern, [x, idx, o])
    ok = (idx >= 0) & (idx < rows)
    got = x.double()[torch.arange(b)[:, None, None], idx.clamp(0, rows - 1).long()] * ok[..., None]
    w = torch.arange(1, NI + 1, dtype=torch.float64).repeat_interleave(BI)[None, None, :, None] * (idx >= 0)[..., None]
    ref = (got * w).reshape(b, s, NI, BI, D).sum(2)
    torch.testing.assert_close(o.double(), torch.stack([ref, 2 * ref], 2), rtol=1e-5, atol=1e-4)
