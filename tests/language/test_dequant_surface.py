"""Regression tests for what the dequantize_gemm / deepseek_v4 act_quant peer examples need:
T.call_extern(name, *args, dtype=...), T.reinterpret on every backend (a C++-valid bit cast on
CUDA), the uint/uchar/ushort names imported device code uses, and T.alloc_buffer's default
scope 'global' (a workspace shared by the prim_func's kernels)."""
import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang.errors import TileLangError

SM90 = "cuda -arch=sm_90a"

SRC_C = "static float axpb(float* p, int n, float a) { float s = 0; for (int i = 0; i < n; ++i) { p[i] = a * p[i] + 1; s += p[i]; } return s; }\n"


def _extern_kernel(n):
    @T.prim_func
    def k(A: T.Tensor((n,), "float32"), S: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1):
            T.import_source(SRC_C)
            v = T.alloc_local((n,), "float32")
            T.copy(A, v)
            S[0] = T.call_extern("axpb", T.access_ptr(v, "rw"), n, T.float32(2.0), dtype="float32")
            T.call_extern("axpb", T.access_ptr(v, "rw"), n, T.float32(-1.0), dtype="handle")
            T.copy(v, A)
    return k


def test_call_extern_dtype_keyword_cpu():
    f = tilelang.compile(_extern_kernel(8), target="cpu")
    a = torch.randn(8)
    ref = a.double() * 2 + 1
    s_ref = ref.sum()
    ref = -ref + 1
    s = torch.full((1,), float("nan"))
    f(a, s)
    torch.testing.assert_close(a.double(), ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(s.double(), s_ref.reshape(1), rtol=1e-5, atol=1e-5)


def test_call_extern_argument_errors():
    with pytest.raises(TileLangError, match="only dtype= may be given by name"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.call_extern("f", T.access_ptr(A, "r"), dtype="handle", lanes=2)
    with pytest.raises(TileLangError, match=r"expected \(dtype, func_name"):
        @T.prim_func
        def bad2(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.call_extern("handle")


def _reinterpret_kernel(n):
    @T.prim_func
    def k(F: T.Tensor((n,), "float32"), U: T.Tensor((n,), "uint32"), H: T.Tensor((n,), "bfloat16"),
          G: T.Tensor((n,), "int16"), Q: T.Tensor((n,), "uint8"), R: T.Tensor((n,), "int8"),
          P: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                U[i] = T.reinterpret(F[i], "uint32")
                G[i] = T.reinterpret(H[i], "int16")
                R[i] = T.reinterpret(Q[i] << T.uint8(4), "int8") >> T.int8(4)  # sign-extend a nibble
                # 2^ceil(log2 x) through the exponent bits, as act_quant's fast_round_scale does
                bits = T.reinterpret(F[i] * F[i] + 1.0, "uint32")
                e = T.Cast("int32", ((bits >> 23) & 0xFF) - 127 + T.if_then_else((bits & 0x7FFFFF) != 0, 1, 0))
                P[i] = T.reinterpret((e + 127) << 23, "float32")
    return k


def test_reinterpret_cpu_values():
    n = 64
    f = tilelang.compile(_reinterpret_kernel(n), target="cpu")
    F = torch.randn(n)
    F[0] = 1.0  # F*F+1 = 2: an exact power of two, whose mantissa test must say 0
    H = torch.randn(n).to(torch.bfloat16)
    Q = torch.randint(0, 256, (n,), dtype=torch.uint8)
    U = torch.zeros(n, dtype=torch.int64).to(torch.uint32)
    G = torch.zeros(n, dtype=torch.int16)
    R = torch.zeros(n, dtype=torch.int8)
    P = torch.full((n,), float("nan"))
    f(F, U, H, G, Q, R, P)
    np.testing.assert_array_equal(U.numpy(), F.numpy().view(np.uint32))
    np.testing.assert_array_equal(G.numpy(), H.view(torch.int16).numpy())
    lo = (Q.numpy() & 0xF).astype(np.int16)
    np.testing.assert_array_equal(R.numpy(), np.where(lo >= 8, lo - 16, lo))
    x = F.double() * F.double() + 1.0
    np.testing.assert_array_equal(P.double().numpy(), np.exp2(np.ceil(np.log2(x.float().double().numpy()))))


def test_reinterpret_compiles_for_sm90():
    src = tilelang.compile(_reinterpret_kernel(64), target=SM90).get_kernel_source()
    assert "union" not in src  # a C compound literal: not C++, NVRTC rejected it
    assert src.count("TL_BITCAST(") >= 4


SRC_CUDA = """
template <typename T1, typename T2>
__device__ void widen_u8(T1* in, T2* out, int n) {
  for (int i = 0; i < n; ++i) { uint w = (uint)(uchar)in[i]; ushort h = (ushort)w; out[i] = (T2)h; }
}
"""


def _cuda_extern_kernel():
    @T.prim_func
    def k(A: T.Tensor((128, 4), "int8"), B: T.Tensor((128, 4), "float16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            T.import_source(SRC_CUDA)
            a = T.alloc_local((4,), "int8")
            b = T.alloc_local((4,), "float16")
            for v in T.serial(4):
                a[v] = A[tx, v]
            T.call_extern("widen_u8", T.access_ptr(a, "r"), T.access_ptr(b, "w"), 4, dtype="float16")
            for v in T.serial(4):
                B[tx, v] = b[v]
    return k


def test_imported_source_short_unsigned_names_sm90():
    src = tilelang.compile(_cuda_extern_kernel(), target=SM90).get_kernel_source()
    assert "widen_u8((&a[0]), (&b[0]), 4);" in src


@tilelang.testing.requires_cuda
def test_imported_source_and_reinterpret_gpu():
    f = tilelang.compile(_cuda_extern_kernel(), target="cuda")
    a = torch.randint(-128, 128, (128, 4), dtype=torch.int8, device="cuda")
    b = torch.full((128, 4), float("nan"), dtype=torch.float16, device="cuda")
    f(a, b)
    torch.testing.assert_close(b.cpu().double(), (a.cpu().to(torch.int16) & 0xFF).double())
    n = 64
    g = tilelang.compile(_reinterpret_kernel(n), target="cuda")
    F = torch.randn(n, device="cuda")
    H = torch.randn(n, device="cuda").to(torch.bfloat16)
    U = torch.zeros(n, dtype=torch.int32, device="cuda").view(torch.uint32)
    G = torch.zeros(n, dtype=torch.int16, device="cuda")
    Q = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    R = torch.zeros(n, dtype=torch.int8, device="cuda")
    P = torch.full((n,), float("nan"), device="cuda")
    g(F, U, H, G, Q, R, P)
    np.testing.assert_array_equal(U.cpu().numpy(), F.cpu().numpy().view(np.uint32))
    np.testing.assert_array_equal(G.cpu().numpy(), H.cpu().view(torch.int16).numpy())
    lo = (Q.cpu().numpy() & 0xF).astype(np.int16)
    np.testing.assert_array_equal(R.cpu().numpy(), np.where(lo >= 8, lo - 16, lo))


def _split_sum_kernel(M, N, split, bm):
    @T.prim_func
    def k(A: T.Tensor((split, M, N), "float32"), C: T.Tensor((M, N), "float32")):
        W = T.alloc_buffer([split, M, N], "float32")  # default scope "global": a shared workspace
        with T.Kernel(T.ceildiv(M, bm), split, threads=1) as (bx, bz):
            for i, j in T.Parallel(bm, N):
                W[bz, bx * bm + i, j] = A[bz, bx * bm + i, j] * 2.0
        with T.Kernel(T.ceildiv(M, bm), threads=1) as bx:
            acc = T.alloc_fragment((bm, N), "float32")
            T.clear(acc)
            for s in range(split):
                for i, j in T.Parallel(bm, N):
                    acc[i, j] += W[s, bx * bm + i, j]
            T.copy(acc, C[bx * bm, 0])
    return k


def test_alloc_buffer_global_workspace_cpu():
    f = tilelang.compile(_split_sum_kernel(32, 16, 3, 8), target="cpu")
    a = torch.randn(3, 32, 16)
    c = torch.full((32, 16), float("nan"))
    f(a, c)
    torch.testing.assert_close(c.double(), 2 * a.double().sum(0), rtol=1e-5, atol=1e-5)


def test_alloc_buffer_global_inside_kernel_is_an_error():
    with pytest.raises(TileLangError, match="outside"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                W = T.alloc_buffer((4,), "float32")
                W[0] = A[0]
