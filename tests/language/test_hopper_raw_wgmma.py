"""wgmma by hand: T.alloc_wgmma_desc / T.initialize_wgmma_descriptor / T.increase_descriptor_offset,
T.ptx_wgmma_ss / T.ptx_wgmma_rs, T.warpgroup_fence_operand. One warp group computes a 64 x N tile
from descriptors over shared tiles (loaded by T.tma_load with the matching swizzle, or written
by the threads in the no-swizzle core-matrix layout), stepping K through the descriptors'
offsets; each thread writes its accumulator registers out in the wgmma D layout. Checked against
float64 torch (exact for int8) on the CPU backend and the host emulator of the sm_90a source."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError, LoweringError
from tilelang.testing import host_cuda_or_skip

K = 64


@T.macro
def store_d(C, C_local, tx, n):
    """Thread tx's accumulator elements to C (64 x n) in the wgmma D layout."""
    for j in T.serial(n // 8):
        for e in T.serial(4):
            C[16 * (tx // 32) + (tx % 32) // 4 + 8 * (e // 2), 8 * j + 2 * (tx % 4) + e % 2] = C_local[4 * j + e]


def ss_gemm(case):
    """case: "f16_mn" (B (K, N) row-major: an MN-major operand, both 128B-swizzled), "f16_k" (B given
    as (N, K): K-major), "i8_k" (int8, 64B swizzle, int32 accumulators), "f16_none" (no swizzle: the
    threads write A and B in the interleaved core-matrix layout)."""
    n = 64 if case != "f16_k" else 128
    dt, acc = ("int8", "int32") if case == "i8_k" else ("float16", "float32")
    b_shape = (K, n) if case in ("f16_mn", "f16_none") else (n, K)
    eb = 1 if dt == "int8" else 2
    kstep = 32 if dt == "int8" else 16  # K of one wgmma

    @T.prim_func
    def f(A: T.Tensor((64, K), dt), Bm: T.Tensor(b_shape, dt), C: T.Tensor((64, n), acc)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64 * K,), dt)
            B_s = T.alloc_shared((K * n,), dt)
            T.create_barriers(1)
            C_local = T.alloc_local((n // 2,), acc)
            desc_a = T.alloc_wgmma_desc()
            desc_b = T.alloc_descriptor("wgmma")
            tx = T.get_thread_binding()
            if tx == 0:
                T.ptx_init_barrier_thread_count(0, 1)
            T.ptx_fence_barrier_init()
            T.sync_threads()
            if case == "f16_none":
                # core matrices of 8 rows x 16 bytes: [mn / 8][k / 8][mn % 8][k % 8] (A: K-major) and
                # [k / 8][n / 8][k % 8][n % 8] (B: MN-major); LBO / SBO step between them
                for i in T.serial(32):
                    m, k = (tx * 32 + i) // K, (tx * 32 + i) % K
                    A_s[(m // 8) * 512 + (k // 8) * 64 + (m % 8) * 8 + k % 8] = A[m, k]
                    kb, nb = (tx * 32 + i) // n, (tx * 32 + i) % n
                    B_s[(kb // 8) * 512 + (nb // 8) * 64 + (kb % 8) * 8 + nb % 8] = Bm[kb, nb]
                T.fence_proxy_async()
                T.sync_threads()
                T.initialize_wgmma_descriptor(desc_a, T.access_ptr(A_s, "r"), 0, 8, 64)   # LBO 128 B, SBO 1024 B
                T.initialize_wgmma_descriptor(desc_b, T.access_ptr(B_s, "r"), 0, 64, 8)   # K groups 1024 B, N 128 B
            else:
                sw, sw_bytes = (2, 64) if dt == "int8" else (3, 128)
                da = T.create_tma_descriptor(6 if dt == "float16" else 0, 2, A.data, K, 64, eb, K * eb, K, 64, 1, 1, 0,
                                             sw, 2, 0)
                db = T.create_tma_descriptor(6 if dt == "float16" else 0, 2, Bm.data, b_shape[1], b_shape[0], eb,
                                             b_shape[1] * eb, min(b_shape[1], sw_bytes // eb), b_shape[0], 1, 1, 0,
                                             sw, 2, 0)
                if tx == 0:
                    T.ptx_arrive_barrier_expect_tx(0, (64 * K + K * n) * eb)
                    T.tma_load(da, 0, T.access_ptr(A_s, "w"), 0, 0, 0)
                    for p in T.serial(b_shape[1] * eb // sw_bytes):  # 128-byte wide panels of B's rows
                        T.tma_load(db, 0, T.access_ptr(B_s[p * b_shape[0] * sw_bytes // eb], "w"),
                                   p * (sw_bytes // eb), 0, 0)
                T.ptx_wait_barrier(0)
                sbo = 8 * sw_bytes // 16  # 8 rows of one swizzle span
                T.initialize_wgmma_descriptor(desc_a, A_s, 1 if sw == 3 else 2, 1, sbo)
                T.initialize_wgmma_descriptor(desc_b, B_s[0], 1 if sw == 3 else 2,
                                              K * sw_bytes // 16 if case == "f16_mn" else 1, sbo)
            T.warpgroup_fence_operand(C_local)
            T.warpgroup_arrive()
            for ki in T.unroll(K // kstep):
                if case == "f16_none":
                    a_off, b_off = ki * 16, ki * 128  # two core matrices of K; two 8-row K groups (1024 B each)
                elif case == "f16_mn":
                    a_off, b_off = ki * 2, ki * 128  # 32 bytes along A's rows; 16 B rows of B (128 B each)
                else:
                    a_off, b_off = ki * 2, ki * 2
                T.ptx_wgmma_ss(acc, f"m64n{n}k{kstep}", True, case not in ("f16_mn", "f16_none"),
                               "fp16" if dt == "float16" else "int8", dt, acc, desc_a.data, a_off, desc_b.data, b_off,
                               C_local.data, 0, ki > 0, True, True)
            T.warpgroup_commit_batch()
            T.warpgroup_wait(0)
            T.warpgroup_fence_operand(C_local, num_regs=n // 2)
            store_d(C, C_local, tx, n)
    return f, n, dt, acc, b_shape


def rs_gemm(n=64):
    """A from registers (each thread loads its mma.sync A fragments from global), B (K, n) by TMA,
    MN-major and 128B-swizzled; the descriptor moves by T.increase_descriptor_offset (forward per
    k-step, back after each batch); scale_in_b false negates B, and a second batch accumulates
    onto the first (scale_out 1): C = -2 A @ B."""
    @T.prim_func
    def f(A: T.Tensor((64, K), "float16"), Bm: T.Tensor((K, n), "float16"), C: T.Tensor((64, n), "float32")):
        with T.Kernel(1, threads=128) as bx:
            B_s = T.alloc_shared((K, n), "float16")
            bars = T.alloc_barrier(1)
            A_local = T.alloc_local((8 * (K // 16),), "float16")
            C_local = T.alloc_local((n // 2,), "float32")
            desc_b = T.alloc_wgmma_desc()
            tx = T.get_thread_binding()
            db = T.create_tma_descriptor(6, 2, Bm.data, n, K, 2, n * 2, 64, K, 1, 1, 0, 3, 2, 0)
            if tx == 0:
                T.mbarrier_arrive_expect_tx(bars[0], K * n * 2)
                for p in T.serial(n // 64):
                    T.tma_load(db, bars[0], B_s[p * K, 0], p * 64, 0)
            w, g, q = tx // 32, (tx % 32) // 4, tx % 4
            for ki in T.serial(K // 16):
                for r in T.serial(4):
                    for e in T.serial(2):
                        A_local[ki * 8 + r * 2 + e] = A[16 * w + g + 8 * (r % 2), 16 * ki + 8 * (r // 2) + 2 * q + e]
            T.mbarrier_wait_parity(bars[0], 0)
            T.initialize_wgmma_descriptor(desc_b, B_s, 1, K * 128 // 16, 64)
            T.warpgroup_fence_operand(A_local)
            T.warpgroup_fence_operand(C_local)
            for rep in T.serial(2):
                T.warpgroup_arrive()
                for ki in T.unroll(K // 16):
                    T.ptx_wgmma_rs("float32", f"m64n{n}k16", False, "fp16", "fp16", "fp32", A_local.data, ki * 8,
                                   desc_b.data, 0, C_local.data, 0, rep + ki > 0, True, False)
                    T.increase_descriptor_offset(desc_b, 2048)  # 16 rows of B: two 1024-byte row groups
                T.warpgroup_commit_batch()
                T.warpgroup_wait(0)
                T.increase_descriptor_offset(desc_b, -2048 * (K // 16))
            T.warpgroup_fence_operand(C_local)
            store_d(C, C_local, tx, n)
    return f


def compile_(f, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(f, target=target)


def inputs(dt, b_shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dt == "int8":
        return (torch.randint(-128, 128, (64, K), generator=g, dtype=torch.int8),
                torch.randint(-128, 128, b_shape, generator=g, dtype=torch.int8))
    return torch.randn(64, K, generator=g).half(), torch.randn(*b_shape, generator=g).half()


def expected(case, a, b):
    bb = b.double() if case in ("f16_mn", "f16_none") else b.double().T
    return a.double() @ bb


def check(case, c, ref):
    if case == "i8_k":
        assert torch.equal(c.long(), ref.long())
    else:
        torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-4)


CASES = ["f16_mn", "f16_k", "i8_k", "f16_none"]


@pytest.mark.parametrize("case", CASES)
def test_ss_on_cpu(case):
    f, n, dt, acc, b_shape = ss_gemm(case)
    a, b = inputs(dt, b_shape, CASES.index(case))
    c = torch.full((64, n), -7, dtype=getattr(torch, acc))
    compile_(f, "cpu")(a, b, c)
    check(case, c, expected(case, a, b))


@pytest.mark.nvrtc
@pytest.mark.parametrize("case", CASES)
def test_ss_sm90a_on_host_emulator(case):
    host = host_cuda_or_skip()
    f, n, dt, acc, b_shape = ss_gemm(case)
    k = compile_(f, "cuda -arch=sm_90a")
    src = k.get_kernel_source()
    assert "tl::wgmma_ss<" in src and "tl::wgmma_desc_encode(" in src and "tl::warpgroup_fence_operand<" in src
    a, b = inputs(dt, b_shape, 10 + CASES.index(case))
    c = torch.full((64, n), -7, dtype=getattr(torch, acc))
    prog = host.HostProgram({"f": k})
    prog.barrier_timeout = 10
    prog.run("f", [a, b, c])
    check(case, c, expected(case, a, b))


def test_rs_on_cpu():
    a, b = inputs("float16", (K, 64), 20)
    c = torch.full((64, 64), float("nan"))
    compile_(rs_gemm(), "cpu")(a, b, c)
    torch.testing.assert_close(c.double(), -2 * (a.double() @ b.double()), rtol=1e-5, atol=1e-4)


@pytest.mark.nvrtc
def test_rs_sm90a_on_host_emulator_and_sass():
    host = host_cuda_or_skip()
    k = compile_(rs_gemm(), "cuda -arch=sm_90a")
    assert "tl::wgmma_rs<tl::half_t, tl::half_t, float, 64, true, 1, -1>(" in k.get_kernel_source()
    a, b = inputs("float16", (K, 64), 21)
    c = torch.full((64, 64), float("nan"))
    host.HostProgram({"f": k}).run("f", [a, b, c])
    torch.testing.assert_close(c.double(), -2 * (a.double() @ b.double()), rtol=1e-5, atol=1e-4)
    try:
        text = k.artifact.sass()
    except Exception as e:  # noqa: BLE001 - cuobjdump missing on this machine
        pytest.skip(f"cuobjdump unavailable: {e}")
    assert "HGMMA" in text and "UTMALDG" in text


def test_below_sm90_is_an_error():
    f, *_ = ss_gemm("f16_k")
    with pytest.raises(LoweringError, match="needs sm_90a"):
        compile_(f, "cuda -arch=sm_80")


def test_argument_errors():
    def build(call):
        @T.prim_func
        def f(C: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                S_ = T.alloc_shared((64, 64), "float16")
                d = T.alloc_wgmma_desc()
                acc = T.alloc_local((32,), "float32")
                frag = T.alloc_fragment((64, 64), "float32")
                call(S_, d, acc, frag)
                C[T.get_thread_binding()] = 1.0
        return f

    def ss(shape="m64n64k16", a="fp16", c=None, off=0):
        return lambda S_, d, acc, frag: T.ptx_wgmma_ss("float32", shape, True, True, a, "fp16", "fp32", d.data, 0,
                                                       d.data, 0, (acc if c is None else frag).data, off, 1, True, True)

    build(ss())
    build(ss(shape="m64n24k16"))  # any multiple of 8 up to 256
    with pytest.raises(DSLTypeError, match="not one of our wgmma shapes"):
        build(ss(shape="m64n20k16"))
    with pytest.raises(DSLTypeError, match="not supported by our wgmma"):
        build(ss(a="tf32"))
    with pytest.raises(DSLTypeError, match="T.alloc_local buffer"):
        build(ss(c="fragment"))
    with pytest.raises(DSLTypeError, match="holds 32 elements"):
        build(ss(off=8))
    with pytest.raises(DSLTypeError, match="tcgen05"):
        build(lambda S_, d, acc, frag: T.alloc_descriptor("tcgen05_smem"))
    with pytest.raises(DSLTypeError, match="layout_type_ must be 0 .. 3"):
        build(lambda S_, d, acc, frag: T.initialize_wgmma_descriptor(d, S_, 4, 1, 64))


gpu = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                         reason="needs an sm_90 GPU")


@pytest.mark.cuda
@gpu
@pytest.mark.parametrize("case", CASES)
def test_ss_on_the_gpu(case):
    """The descriptor encoding (LBO / SBO, layouts, swizzles) against the hardware's wgmma."""
    f, n, dt, acc, b_shape = ss_gemm(case)
    a, b = inputs(dt, b_shape, 30 + CASES.index(case))
    c = torch.full((64, n), -7, dtype=getattr(torch, acc), device="cuda")
    compile_(f, "cuda")(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    check(case, c.cpu(), expected(case, a, b))


@pytest.mark.cuda
@gpu
def test_rs_on_the_gpu():
    a, b = inputs("float16", (K, 64), 31)
    c = torch.full((64, 64), float("nan"), device="cuda")
    compile_(rs_gemm(), "cuda")(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double().cpu(), -2 * (a.double() @ b.double()), rtol=1e-5, atol=1e-4)
