"""ldmatrix / mma.sync written with TensorCoreIntrinEmitter (and T.ptx_*) run on the CPU backend
(transform/cpu_warp_mma.py), against a float64 (int64) torch matmul of fresh random inputs; the same
kernels on the host emulator (NVRTC-compiled sm_80 CUDA) against the same reference."""
from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics import make_mma_swizzle_layout
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
from tilelang.errors import TileLangError
from tilelang.testing import host_cuda_or_skip

TORCH = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "int8": torch.int8,
         "int32": torch.int32}


def emitter_gemm(M, N, K, dtype, acc, a_t, b_t, swizzle=True):
    """C = A @ B from ldmatrix_a / ldmatrix_b / mma / stmatrix of a 2x2-warp TensorCoreIntrinEmitter."""
    chunk = 64 if dtype in ("int8", "float8_e4m3fn", "float8_e5m2") else 32
    em = TensorCoreIntrinEmitter(a_dtype=dtype, b_dtype=dtype, accum_dtype=acc, a_transposed=a_t, b_transposed=b_t,
                                 block_row_warps=2, block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32,
                                 chunk=chunk)
    bm = bn = 64
    a_shape, b_shape = ((K, M) if a_t else (M, K)), ((N, K) if b_t else (K, N))
    as_shape, bs_shape = ((chunk, bm) if a_t else (bm, chunk)), ((bn, chunk) if b_t else (chunk, bn))

    @T.prim_func
    def gemm(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), acc)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared(as_shape, dtype)
            B_s = T.alloc_shared(bs_shape, dtype)
            C_s = T.alloc_shared((bm, bn), acc)
            A_l = T.alloc_local((em.warp_rows * em.local_size_a,), dtype)
            B_l = T.alloc_local((em.warp_cols * em.local_size_b,), dtype)
            C_l = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out,), acc)
            if swizzle:
                T.annotate_layout({A_s: make_mma_swizzle_layout(A_s), B_s: make_mma_swizzle_layout(B_s)})
            T.clear(C_l)
            for ko in T.Pipelined(K // chunk, num_stages=2):
                if a_t:
                    T.copy(A[ko * chunk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, ko * chunk], A_s)
                if b_t:
                    T.copy(B[bx * bn, ko * chunk], B_s)
                else:
                    T.copy(B[ko * chunk, bx * bn], B_s)
                for ki in T.serial(chunk // em.k_dim):
                    em.ldmatrix_a(A_l, A_s, ki)
                    em.ldmatrix_b(B_l, B_s, ki)
                    em.mma(A_l, B_l, C_l)
            em.stmatrix(C_l, C_s)
            T.copy(C_s, C[by * bm, bx * bn])
    return gemm


def _inputs(M, N, K, dtype, a_t, b_t, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == "int8":
        a = torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int32)
        b = torch.randint(-128, 128, (K, N), generator=g, dtype=torch.int32)
    else:
        a = torch.randn(M, K, generator=g)
        b = torch.randn(K, N, generator=g)
    a, b = a.to(TORCH[dtype]), b.to(TORCH[dtype])
    return (a.T.contiguous() if a_t else a), (b.T.contiguous() if b_t else b), a, b


def check_gemm(launch, M, N, K, dtype, acc, a_t, b_t, seed):
    A, B, a, b = _inputs(M, N, K, dtype, a_t, b_t, seed)
    C = torch.full((M, N), -7, dtype=TORCH[acc]) if acc == "int32" else torch.full((M, N), float("nan"),
                                                                                 dtype=TORCH[acc])
    launch(emitter_gemm(M, N, K, dtype, acc, a_t, b_t), [A, B, C])
    if acc == "int32":
        torch.testing.assert_close(C.long(), a.long() @ b.long(), rtol=0, atol=0)
        return
    if dtype == "float32":  # tf32 operands: the low 13 mantissa bits are not read
        a, b = ((x.view(torch.int32) & -8192).view(torch.float32) for x in (a, b))
    ref = a.double() @ b.double()
    tol = 2e-2 if acc == "float16" else 1e-4
    torch.testing.assert_close(C.double(), ref, rtol=tol, atol=tol * 4)


CASES = [("float16", "float32", False, True), ("float16", "float32", False, False),
         ("float16", "float32", True, True), ("float16", "float32", True, False),
         ("bfloat16", "float32", False, True), ("float16", "float16", False, True),
         ("int8", "int32", False, True), ("float8_e4m3fn", "float32", False, True),
         ("float8_e5m2", "float32", False, True), ("float32", "float32", False, True)]


@pytest.mark.parametrize("dtype,acc,a_t,b_t", CASES)
def test_emitter_gemm_on_cpu(dtype, acc, a_t, b_t):
    check_gemm(lambda f, args: tilelang.compile(f, target="cpu")(*args), 128, 64, 128, dtype, acc, a_t, b_t, seed=1)


@pytest.mark.nvrtc
@pytest.mark.parametrize("dtype,acc,a_t,b_t", CASES[:1] + CASES[3:5] + CASES[-1:])
def test_emitter_gemm_on_host_emulator(dtype, acc, a_t, b_t):
    host = host_cuda_or_skip()

    def launch(f, args):
        prog = host.HostProgram({"f": tilelang.compile(f, target="cuda -arch=sm_80")})
        try:
            prog.run("f", args)
        finally:
            prog.close()

    check_gemm(launch, 128, 64, 128, dtype, acc, a_t, b_t, seed=2)


def _one_warp(num, trans, mma_types=("fp16", "fp16", "fp32"), shape="m16n8k16"):
    """One warp: lane l's ldmatrix row address is S[l % 8 + 8 * (l // 8 % 2), 8 * (l // 16)] of a 16x16 tile
    (x4), its registers stored to O[l, :]; x1 / x2 use the first 8 / 16 lanes' addresses only."""
    per = 2 * num

    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), O: T.Tensor((32, per), "float16")):
        with T.Kernel(1, threads=32) as _:
            S = T.alloc_shared((16, 16), "float16")
            r = T.alloc_local((per,), "float16")
            tx = T.get_thread_binding()
            T.copy(A, S)
            T.ptx_ldmatrix(trans, num, T.access_ptr(S[tx % 8 + 8 * (tx // 8 % 2), 8 * (tx // 16)], "r"),
                           T.access_ptr(r[0], "w"))
            for s in T.unroll(per):
                O[tx, s] = r[s]
    return k


@pytest.mark.parametrize("num,trans", [(1, False), (2, False), (4, False), (4, True), (2, True)])
def test_ldmatrix_lane_values_on_cpu(num, trans):
    a = torch.randn(16, 16).half()
    out = torch.full((32, 2 * num), float("nan")).half()
    tilelang.compile(_one_warp(num, trans), target="cpu")(a, out)
    # matrix i: rows 8 * (i % 2) .., cols 8 * (i // 2) .. of A; lane l gets row l // 4, cols 2 (l % 4) + {0, 1}
    want = torch.empty(32, 2 * num).half()
    for lane in range(32):
        for i in range(num):
            m = a[8 * (i % 2):8 * (i % 2) + 8, 8 * (i // 2):8 * (i // 2) + 8]
            m = m.T if trans else m
            want[lane, 2 * i:2 * i + 2] = m[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2]
    assert torch.equal(out, want)


def test_unsupported_ldmatrix_on_cpu_is_named():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "int8"), O: T.Tensor((32, 4), "int8")):
        with T.Kernel(1, threads=32) as _:
            S = T.alloc_shared((16, 16), "int8")
            r = T.alloc_local((4,), "int8")
            tx = T.get_thread_binding()
            T.copy(A, S)
            T.ptx_ldmatrix(True, 1, T.access_ptr(S[tx % 8, 0], "r"), T.access_ptr(r[0], "w"))
            for s in T.unroll(4):
                O[tx, s] = r[s]

    with pytest.raises(TileLangError, match=r"T.ptx_ldmatrix .trans of int8 values is not supported on target cpu"):
        tilelang.compile(k, target="cpu")
