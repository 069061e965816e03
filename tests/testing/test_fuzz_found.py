"""Bugs the differential fuzzer found, as shrunk programs (strict xfail until fixed).

Each came out of `python -m tilelang.testing.fuzz`; the seed is named. When one starts to
pass, its xfail fails the suite: delete the marker and keep the test."""
import pytest
import torch

import tilelang
import tilelang.language as T


@pytest.mark.parametrize("dt, acc, bn", [("float8_e4m3fn", "float32", 32), ("int8", "int32", 16),
                                         ("int8", "int32", 32), ("float8_e5m2", "float32", 8),
                                         ("float16", "float16", 16)])
def test_8bit_gemm_small_n_compiles_for_sm90a(dt, acc, bn):
    """fuzz seeds 27, 171, 202: tl/wgmma_ops.h had no 8-bit (or f16-accumulator) wgmma below N = 64
    (NVRTC static_assert 'this (A, B, C, N) is not generated'); every WGMMA_N is generated now."""
    @T.prim_func
    def main(A: T.Tensor((128, 64), dt), B: T.Tensor((58, 64), dt), C: T.Tensor((128, 58), acc)):
        with T.Kernel(T.ceildiv(58, bn), 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), dt)
            B_s = T.alloc_shared((bn, 32), dt)
            C_l = T.alloc_fragment((64, bn), acc)
            T.clear(C_l)
            for k in T.Pipelined(2, num_stages=3):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[bx * bn, k * 32], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * 64, bx * bn])

    k = tilelang.compile(main, target="cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert f"tl::gemm_ss_sm90<64, {bn}, 32," in src, src[-3000:]  # the wgmma path, one warpgroup


def test_thread_level_local_copy_on_cpu():
    """fuzz seed 36 (the `thread` family): per-thread T.copy into a T.alloc_local (transform/cpu_threads.py)."""
    @T.prim_func
    def main(A: T.Tensor((64, 2), "int32"), O: T.Tensor((64, 2), "int32")):
        with T.Kernel(2, 1, threads=64) as (bx, by):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64, 1), "int32")
            loc = T.alloc_local((1,), "int32")
            T.copy(A[0:64, bx:bx + 1], S)
            T.copy(S[tx:tx + 1, 0:1], loc)
            for q in T.serial(1):
                loc[q] = loc[q] * 2
            T.copy(loc, O[tx:tx + 1, bx:bx + 1])

    k = tilelang.compile(main, target="cpu")
    a = torch.randint(-8, 8, (64, 2), dtype=torch.int32)
    o = torch.zeros_like(a)
    k(a, o)
    assert torch.equal(o, a * 2)


def _compile_body(kind):
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((16, 16), "float32")
            if kind == "reduce":
                R = T.alloc_fragment((16,), "float32")
                T.reduce_sum(A, R, dim=1)
            elif kind == "cumsum":
                T.cumsum(A, dim=0)
            elif kind == "gemm":
                C = T.alloc_fragment((16, 16), "float32")
                T.gemm(A, A, C)
            else:
                for j in T.Parallel(16):
                    S[16, j] = A[0, j]
                T.copy(S, B)

    return tilelang.compile(main, target="cpu")


_LINE = {"reduce": "T.reduce_sum(A, R, dim=1)", "cumsum": "T.cumsum(A, dim=0)", "gemm": "T.gemm(A, A, C)",
         "oob": "S[16, j] = A[0, j]"}


@pytest.mark.parametrize("kind", ["reduce", "cumsum", "gemm"])
def test_tile_op_on_global_buffer_is_an_error(kind):
    """fuzz --bad: tile ops on a global tensor were accepted; the public TileLang rejects them."""
    with pytest.raises(tilelang.errors.TileLangError) as ei:
        _compile_body(kind)
    msg = str(ei.value)
    assert "global tensor" in msg and "A" in msg and _LINE[kind] in msg, msg  # at the user's line


def test_constant_out_of_range_index_is_an_error():
    """fuzz --bad: S[16, j] on a 16-row tile compiled silently."""
    with pytest.raises(tilelang.errors.TileLangError) as ei:
        _compile_body("oob")
    msg = str(ei.value)
    assert "index 16 is out of range for dim 0" in msg and _LINE["oob"] in msg, msg


def test_in_range_constant_indices_still_compile():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((16, 16), "float32")
            T.copy(A, S)
            for j in T.Parallel(16):
                S[15, j] = S[0, j] + A[15, j]
            T.copy(S, B)

    k = tilelang.compile(main, target="cpu")
    a = torch.randn(16, 16)
    b = torch.zeros(16, 16)
    k(a, b)
    want = a.clone()
    want[15] = a[0] + a[15]
    assert torch.allclose(b, want)


def test_cumsum_dim_out_of_range_is_an_error():
    """fuzz --bad (cumsum_dim): T.cumsum(S, dim=3) on a 2-d tile wrapped to dim 1 and compiled."""
    with pytest.raises(tilelang.errors.TileLangError) as ei:
        @T.prim_func
        def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as bx:
                S = T.alloc_shared((16, 16), "float32")
                T.copy(A, S)
                T.cumsum(S, dim=3)
                T.copy(S, B)

        tilelang.compile(main, target="cpu")
    assert "dim=3 is out of range for the 2-d buffer S" in str(ei.value)
    assert "T.cumsum(S, dim=3)" in str(ei.value)  # at the user's line


def test_cumsum_negative_dim_still_counts_from_the_end():
    @T.prim_func
    def main(A: T.Tensor((8, 16), "float32"), B: T.Tensor((8, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((8, 16), "float32")
            T.copy(A, S)
            T.cumsum(S, dim=-1)
            T.copy(S, B)

    k = tilelang.compile(main, target="cpu")
    a = torch.randint(-4, 5, (8, 16)).float()
    b = torch.zeros(8, 16)
    k(a, b)
    assert torch.equal(b, a.double().cumsum(1).float())


def test_fp16_min_on_avx512fp16_hosts(monkeypatch):
    """fuzz seed 180 (the `tile` family), on the GPU machine's Sapphire Rapids host: gcc
    -march=native emitted masked `vmovsh` for this _Float16 T.min, which its assembler rejected.
    The compiler probe now adds -mno-avx512fp16 where the native arch has AVX512-FP16. Here: the
    program computes right on the CPU backend, and the probe asks for the flag when gcc says so."""
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def main(A1: T.Tensor((m, n), "float16"), O: T.Tensor((m, n), "float16")):
        with T.Kernel(T.ceildiv(n, 8), T.ceildiv(m, 4), threads=32) as (bx, by):
            S3 = T.alloc_shared((4, 8), "float16")
            for i, j in T.Parallel(4, 8):
                S3[i, j] = T.min((A1[by * 4 + i, bx * 8 + j] - T.Cast("float16", j)) * 0.5, A1[by * 4 + i, bx * 8 + j])
            T.copy(S3, O[by * 4, bx * 8])

    a = torch.randn(8, 16, dtype=torch.float16)
    o = torch.empty_like(a)
    tilelang.compile(main, target="cpu")(a, o)
    j = torch.arange(16, dtype=torch.float64).remainder(8)
    ref = torch.minimum((a.double() - j) * 0.5, a.double())
    assert torch.allclose(o.double(), ref, atol=2e-3, rtol=2e-3)

    import subprocess

    from tilelang.backend.cpu import compile as cc

    real_run = subprocess.run

    def fake_run(cmd, *args, **kwargs):
        if "-dM" in cmd:
            return subprocess.CompletedProcess(cmd, 0, "#define __AVX512FP16__ 1\n", "")
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", fake_run)
    argv, _ = cc._resolve_argv()
    assert "-mno-avx512fp16" in cc._probe(argv)["flags"]


def _neg_max_rows():
    """fuzz seed 50 (the `thread` family), shrunk: per-row max(0, -2*x*x) of int32 rows."""
    @T.prim_func
    def main(A: T.Tensor((64, 4), "int32"), O: T.Tensor((64, 4), "int32"), V: T.Tensor((64, 1), "int32")):
        with T.Kernel(1, 2, threads=32) as (bx, by):
            tx = T.get_thread_binding()
            loc = T.alloc_local((4,), "int32")
            acc = T.alloc_var("int32")
            T.copy(A[by * 32 + tx:by * 32 + tx + 1, 0:4], loc)
            for q in T.serial(4):
                loc[q] = (-2 * loc[q]) * loc[q]
            acc = 0
            for q in T.serial(4):
                acc = T.max(acc, loc[q])
            T.copy(loc, O[by * 32 + tx:by * 32 + tx + 1, 0:4])
            V[by * 32 + tx, 0] = acc
    return main


def _neg_max_check(kern, device):
    a = torch.randint(-9, 10, (64, 4), dtype=torch.int32)
    o = torch.zeros_like(a)
    v = torch.zeros((64, 1), dtype=torch.int32)
    a, o, v = a.to(device), o.to(device), v.to(device)
    kern(a, o, v)
    ref = -2 * a.double() * a.double()
    return torch.equal(o.double(), ref), torch.equal(v[:, 0].double(), ref.max(1).values.clamp(min=0))


def test_int_max_of_negated_products_cpu():
    assert _neg_max_check(tilelang.compile(_neg_max_rows(), target="cpu"), "cpu") == (True, True)


def test_known_miscompile_warns_for_nvrtc_13_0(monkeypatch):
    """Seed 50 was right on the CPU and wrong on the H200: NVRTC 13.0's ptxas reads one operand of
    a VIMNMX3 before its negation (reproduced with the standalone ptxas 13.0 on CUDA C). A compile
    with that NVRTC for sm_90+ warns once; the same release for sm_80, or another release, does not."""
    from tilelang.backend.cuda import nvrtc

    for version, arch, hits in [((13, 0), "sm_90a", 1), ((13, 0), "sm_80", 0), ((13, 5), "sm_90a", 0)]:
        monkeypatch.setattr(nvrtc, "nvrtc_version", lambda v=version: v)
        nvrtc.warn_known_miscompiles.cache_clear()
        with pytest.warns(nvrtc.ToolchainWarning) if hits else __import__("contextlib").nullcontext():
            assert len(nvrtc.warn_known_miscompiles(arch)) == hits
    nvrtc.warn_known_miscompiles.cache_clear()


@tilelang.testing.requires_cuda
def test_int_max_of_negated_products_cuda():
    """Full optimisation, as the fuzz run that found it. Wrong with a known-bad NVRTC (strict xfail
    there, so a fixed or misjudged release fails this test); right with any other."""
    import warnings

    from tilelang.backend.cuda import nvrtc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nvrtc.ToolchainWarning)
        kern = tilelang.compile(_neg_max_rows(), target="cuda", compile_flags=())
    o_ok, v_ok = _neg_max_check(kern, "cuda")
    assert o_ok
    major, minor = torch.cuda.get_device_capability()
    if nvrtc.warn_known_miscompiles(f"sm_{major}{minor}"):
        assert not v_ok, "NVRTC listed as miscompiling this kernel got it right: update KNOWN_MISCOMPILES"
    else:
        assert v_ok


def test_view_and_base_reductions_share_one_scratch_on_sm90a():
    """fuzz seed 30058 (the `epi` family), shrunk: a 128x256 wgmma accumulator reduced over the
    segments of a (128, 2, 128) reshape (tl.disable_split_segment_reduce: through shared memory) and
    over dim 0. Each source got its own 128 KB `_red` scratch, both live in the persistent tile loop's
    one epilogue statement: 287880 bytes of shared memory on sm_90a, past the H200's 232448. One flat
    scratch per register storage now: 156808. Checked against float64 on the host emulator."""
    from tilelang.testing.fuzz import host_exec

    if not host_exec.available():
        pytest.skip("host_cuda needs g++")
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((14, 96), "bfloat16"), B: T.Tensor((n, 96), "bfloat16"), L: T.Tensor((14, 4), "float32"),
             W: T.Tensor((1, n), "float32")):
        with T.Kernel(T.ceildiv(n, 256), 1, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 32), "bfloat16")
            B_s = T.alloc_shared((256, 32), "bfloat16")
            C = T.alloc_fragment((128, 256), "float32")
            C3 = T.reshape(C, (128, 2, 128))
            Lf = T.alloc_fragment((128, 2), "float32")
            R = T.alloc_fragment((256,), "float32")
            T.clear(C)
            for k in T.Pipelined(3, num_stages=1):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[bx * 256, k * 32], B_s)
                T.gemm(A_s, B_s, C, transpose_B=True)
            T.reduce_min(C3, Lf, dim=2, clear=True)
            for i, q in T.Parallel(128, 2):
                L[i, bx * 2 + q] = Lf[i, q]
            T.reduce_sum(C, R, dim=0, clear=True)
            for j in T.Parallel(256):
                W[0, bx * 256 + j] = R[j]

    ck = tilelang.compile(main, target="cuda -arch=sm_90a", pass_configs={"tl.disable_split_segment_reduce": True})
    assert ck.artifact.csource.smem_bytes <= 232448, ck.artifact.csource.smem_bytes
    N = 500
    a = (torch.randint(-8, 9, (14, 96)) / 4).to(torch.bfloat16)
    b = (torch.randint(-8, 9, (N, 96)) / 4).to(torch.bfloat16)
    ins = {"A": a, "B": b, "L": torch.full((14, 4), 7.0), "W": torch.full((1, N), 7.0)}
    out = host_exec.run_on_host(ck, ins, ["A", "B", "L", "W"])
    c = torch.zeros(128, 512, dtype=torch.float64)
    c[:14, :N] = a.double() @ b.double().T
    lref = c.view(128, 4, 128).amin(2)[:14]
    torch.testing.assert_close(out["L"].double(), lref, rtol=0, atol=0)
    wref = c[:, :N].sum(0, keepdim=True)
    torch.testing.assert_close(out["W"].double(), wref, rtol=1e-6, atol=1e-4)


def _attention_rows(kv, threads, dt):
    """fuzz seed 81 (the `attn` family), shrunk: one 128-row block of an online-softmax attention whose
    P (a cast copy of S) is the A operand of the second gemm, FullRow over `threads` threads."""
    @T.prim_func
    def main(Q1: T.Tensor((256, 128), dt), K2: T.Tensor((kv, 128), dt), V3: T.Tensor((kv, 128), dt),
             O4: T.Tensor((256, 128), "float32"), L5: T.Tensor((256,), "float32")):
        with T.Kernel(1, 2, threads=threads) as (bx, by):
            Q_s = T.alloc_shared((128, 128), dt)
            K_s = T.alloc_shared((128, 128), dt)
            V_s = T.alloc_shared((128, 128), dt)
            S = T.alloc_fragment((128, 128), "float32")
            P = T.alloc_fragment((128, 128), dt)
            O = T.alloc_fragment((128, 128), "float32")
            m = T.alloc_fragment((128,), "float32")
            m_prev = T.alloc_fragment((128,), "float32")
            scale = T.alloc_fragment((128,), "float32")
            rsum = T.alloc_fragment((128,), "float32")
            lsum = T.alloc_fragment((128,), "float32")
            T.copy(Q1[by * 128, 0], Q_s)
            T.clear(O)
            T.clear(lsum)
            T.fill(m, -1e+30)
            for k in T.Pipelined(T.ceildiv(kv, 128), num_stages=2):
                T.copy(K2[k * 128, 0], K_s)
                T.copy(V3[k * 128, 0], V_s)
                for i, j in T.Parallel(128, 128):
                    S[i, j] = T.if_then_else(k * 128 + j < kv, 0.0, -1e+30)
                T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(128):
                    scale[i] = T.exp(-T.abs(m_prev[i] * 0.088388 - m[i] * 0.088388))
                for i, j in T.Parallel(128, 128):
                    S[i, j] = T.exp(-T.abs(S[i, j] * 0.088388 - m[i] * 0.088388))
                T.reduce_sum(S, rsum, dim=1, clear=True)
                for i in T.Parallel(128):
                    lsum[i] = lsum[i] * scale[i] + rsum[i]
                T.copy(S, P)
                for i, j in T.Parallel(128, 128):
                    O[i, j] = O[i, j] * scale[i]
                T.gemm(P, V_s, O, policy=T.GemmWarpPolicy.FullRow)
            T.copy(O, O4[by * 128, 0])
            T.copy(lsum, L5[by * 128])

    return main


def _epilogue_scratch_gemm(M, N, K, BM, BN, dt, stages, staged):
    """A gemm whose epilogue reduces the accumulator over dim 0 (a BM x BN float `_red` scratch in
    shared memory), then stores it (through a BM x BN float staging tile where `staged`)."""
    k_ = T.dynamic("k_")

    @T.prim_func
    def main(A: T.Tensor((M, k_), dt), B: T.Tensor((N, k_), dt), O: T.Tensor((M, N), "float32"),
             W: T.Tensor((T.ceildiv(M, BM), N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=256) as (bx, by):
            A_s = T.alloc_shared((BM, 64), dt)
            B_s = T.alloc_shared((BN, 64), dt)
            C = T.alloc_fragment((BM, BN), "float32")
            R = T.alloc_fragment((BN,), "float32")
            T.clear(C)
            for k in T.Pipelined(T.ceildiv(k_, 64), num_stages=stages):
                T.copy(A[by * BM, k * 64], A_s)
                T.copy(B[bx * BN, k * 64], B_s)
                T.gemm(A_s, B_s, C, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.fill(R, 1.0)
            T.reduce_max(C, R, dim=0, clear=False)
            for j in T.Parallel(BN):
                W[by, bx * BN + j] = R[j]
            if staged:
                C_s = T.alloc_shared((BM, BN), "float32")
                T.copy(C, C_s)
                T.copy(C_s, O[by * BM, bx * BN])
            else:
                T.copy(C, O[by * BM, bx * BN])

    return main


def _attention_rows_ref(q, k, v, dt):
    """Float64 attention rows as the program computes them, P rounded to the tile's dtype; k, v:
    zero rows past their end up to a whole 128-row tile (out-of-range reads are zero)."""
    kv = k.shape[0]
    n = -(-kv // 128) * 128
    kp, vp = torch.zeros(n, 128, dtype=torch.float64), torch.zeros(n, 128, dtype=torch.float64)
    kp[:kv], vp[:kv] = k.double(), v.double()
    o = torch.zeros(256, 128, dtype=torch.float64)
    lsum = torch.zeros(256, dtype=torch.float64)
    m = torch.full((256,), -1e30, dtype=torch.float64)
    for t in range(n // 128):
        s = q.double() @ kp[t * 128:(t + 1) * 128].T
        s[:, torch.arange(t * 128, (t + 1) * 128) >= kv] += -1e30
        m_prev, m = m, torch.maximum(m, s.max(1).values)
        scale = torch.exp(-(m_prev * 0.088388 - m * 0.088388).abs())
        s = torch.exp(-(s * 0.088388 - m[:, None] * 0.088388).abs())
        lsum = lsum * scale + s.sum(1)
        p = s.to(dt).double()
        o = o * scale[:, None] + p @ vp[t * 128:(t + 1) * 128]
    return o, lsum


@pytest.mark.parametrize("kv, threads, dt", [(24, 256, "bfloat16"), (200, 128, "float16")])
def test_attention_p_stays_in_registers_on_sm80(kv, threads, dt):
    """fuzz seed 81: P, the 16-bit A operand of the second mma.sync gemm, went to shared memory ("used as a
    T.gemm A/B operand"): 196608 bytes on sm_80, over its 166912 a block. A cast copy of the accumulator S
    on the gemm's (warps_m, 1) rows is the m16n8k16 A layout already: P stays in registers (tl::gemm_rs),
    163840 bytes. Against float64 on the CPU backend and on the host emulator (the sm_80 source)."""
    from tilelang.backend.target import smem_per_block
    from tilelang.testing.fuzz import host_exec

    main = _attention_rows(kv, threads, dt)
    tdt = getattr(torch, dt)
    q, k, v = (torch.randn(r, 128).to(tdt) for r in (256, kv, kv))
    o_ref, l_ref = _attention_rows_ref(q, k, v, tdt)
    ins = {"Q1": q, "K2": k, "V3": v, "O4": torch.full((256, 128), float("nan")),
           "L5": torch.full((256,), float("nan"))}  # outputs poisoned
    order = ["Q1", "K2", "V3", "O4", "L5"]
    outs = []
    cpu = tilelang.compile(main, target="cpu")
    got = {n: t.clone() for n, t in ins.items()}
    cpu(*(got[n] for n in order))
    outs.append(got)
    sm80 = tilelang.compile(main, target="cuda -arch=sm_80")
    src = sm80.get_kernel_source()
    assert sm80.artifact.csource.smem_bytes <= smem_per_block(80), sm80.artifact.csource.smem_bytes
    assert sm80.artifact.csource.smem_bytes == 163840  # Q, and K and V twice (2 stages): no P
    warps = threads // 32
    assert f"tl::gemm_rs<128, 128, 128, {warps}, 1, false, 128, true," in src, src[-3000:]
    assert f" P[{128 * 128 // threads}];" in src  # registers, not a shared tile
    if host_exec.available():
        outs.append(host_exec.run_on_host(sm80, ins, order))
    for out in outs:
        torch.testing.assert_close(out["L5"].double(), l_ref, rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(out["O4"].double(), o_ref, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("seed, M, N, K, BM, BN, dt, stages, staged", [
    (51032, 345, 256, 96, 256, 128, "float8_e4m3fn", 1, True),
    (51114, 256, 512, 192, 128, 256, "float16", 3, False)])
def test_persistent_epilogue_scratch_fits_a_block_on_sm90a(seed, M, N, K, BM, BN, dt, stages, staged):
    """fuzz seeds 51032 and 51114 (`--family epi`), reduced: a 128 KB `_red` scratch in the epilogue of
    a persistent warp-specialized gemm. 51032: stream-K runs the epilogue inside the branch of the unit
    ending a tile, one statement to the shared-memory plan, so the scratch and the 128 KB staging tile
    both kept their bytes (286856 B); 51114: the persistent kernel's three stages (144 KB) are busy over
    the whole tile loop (278680 B), past the H200's 232448. Such kernels are rebuilt without stream-K,
    then with a block per tile. Checked against float64 on the host emulator."""
    from tilelang.testing.fuzz import host_exec

    if not host_exec.available():
        pytest.skip("host_cuda needs g++")
    ck = tilelang.compile(_epilogue_scratch_gemm(M, N, K, BM, BN, dt, stages, staged), target="cuda -arch=sm_90a")
    assert ck.artifact.csource.smem_bytes <= 232448, ck.artifact.csource.smem_bytes
    g = torch.Generator().manual_seed(seed)
    a = (torch.randint(-8, 9, (M, K), generator=g) / 4).to(getattr(torch, dt))
    b = (torch.randint(-8, 9, (N, K), generator=g) / 4).to(getattr(torch, dt))
    gm = -(-M // BM)
    ins = {"A": a, "B": b, "O": torch.full((M, N), 7.0), "W": torch.full((gm, N), 7.0)}
    out = host_exec.run_on_host(ck, ins, ["A", "B", "O", "W"])
    c = a.double() @ b.double().T
    torch.testing.assert_close(out["O"].double(), c, rtol=1e-6, atol=1e-4)
    pad = torch.zeros(gm * BM, N, dtype=torch.float64)
    pad[:M] = c
    wref = torch.maximum(pad.view(gm, BM, N).amax(1), torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(out["W"].double(), wref, rtol=0, atol=0)


def _small_staged_tile(rows):
    @T.prim_func
    def main(A: T.Tensor((rows, 32), "bfloat16"), X: T.Tensor((160,), "float32"), O: T.Tensor((rows, 16), "float32"),
             Y: T.Tensor((160,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            P = T.alloc_shared((160,), "float32")  # 640 bytes, placed before the stages
            S = T.alloc_shared((rows, 16), "bfloat16")  # 32-byte rows: TMA's 32-byte swizzle
            F = T.alloc_fragment((rows, 16), "float32")
            T.copy(X, P)
            T.clear(F)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 16], S)
                for i, j in T.Parallel(rows, 16):
                    F[i, j] += S[i, j]
            for i in T.Parallel(160):
                Y[i] = P[i] * 2.0
            T.copy(F, O)

    return main


@pytest.mark.parametrize("rows", [8, 4])
def test_small_swizzled_tma_stages_start_on_their_pattern_on_sm90a(rows):
    """fuzz seed 42230 (the `tile` family), shrunk: a (4, 16) bf16 tile loaded by the warp-specialized
    producer with a 32-byte swizzle. TMA swizzles by shared address, so a box must start on its
    256-byte pattern: 4 rows put stage 1 at +128 B, and stage storage under 1 KB could start at any
    128-byte offset (here 640, after a 640-byte tile). Swizzled stage storage now starts on a 1024-byte
    boundary and tiles whose rows are not a multiple of 8 stay on cp.async. Host emulator vs float64."""
    from tilelang.testing.fuzz import host_exec

    if not host_exec.available():
        pytest.skip("host_cuda needs g++")
    ck = tilelang.compile(_small_staged_tile(rows), target="cuda -arch=sm_90a")
    assert ("tma_load" in ck.get_kernel_source()) == (rows == 8)
    g = torch.Generator().manual_seed(42230)
    a = torch.randn(rows, 32, generator=g).to(torch.bfloat16)
    x = torch.randn(160, generator=g)
    out = host_exec.run_on_host(ck, {"A": a, "X": x, "O": torch.full((rows, 16), 7.0), "Y": torch.full((160,), 7.0)},
                                ["A", "X", "O", "Y"])
    torch.testing.assert_close(out["O"].double(), a.double()[:, :16] + a.double()[:, 16:], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out["Y"].double(), 2 * x.double(), rtol=0, atol=0)
