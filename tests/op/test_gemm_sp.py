"""T.gemm_sp: 2:4 (1:2 for float32) sparse A with row-major metadata, on the CPU backend against
a float64 dense product; the CUDA source (decompress then tensor-core T.gemm) compiles."""
import warnings

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics.sparse_layout import get_e_factor
from tilelang.errors import TileLangError


def compress(dense: np.ndarray, meta_bits: int, f32: bool):
    """Independent reference compressor: kept values and packed 4-bit position fields."""
    m, k = dense.shape
    kept, group = (1, 2) if f32 else (2, 4)
    fields = meta_bits // 4
    vals = np.zeros((m, k // group * kept), dense.dtype)
    meta = np.zeros((m, k // group // fields), np.int64)
    for r in range(m):
        for g in range(k // group):
            nz = [p for p in range(group) if dense[r, g * group + p] != 0]
            if kept == 2:
                pos = (nz + [p for p in range(4) if p not in nz])[:2]
                pos.sort()
                field = pos[0] | (pos[1] << 2)
            else:
                pos = nz[:1] or [0]
                field = 0b0100 if pos[0] == 0 else 0b1110
            for j, p in enumerate(pos):
                vals[r, g * kept + j] = dense[r, g * group + p]
            meta[r, g // fields] |= field << (4 * (g % fields))
    meta = meta.astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[meta_bits]).view(
        {8: np.int8, 16: np.int16, 32: np.int32}[meta_bits])
    return vals, meta


def semi_sparse(rng, m, k, f32):
    group = 2 if f32 else 4
    a = rng.integers(-8, 8, (m, k)).astype(np.float32) / 4
    a[a == 0] = 0.25
    for r in range(m):
        for g in range(k // group):
            drop = rng.choice(group, group // 2, replace=False)
            a[r, g * group + drop] = 0
    return a


def sp_kernel(M, N, K, a_dtype, e_dtype, bm=32, bn=32, bk=64, stages=2):
    ef = get_e_factor(a_dtype, e_dtype)

    @T.prim_func
    def gemm_sp(A: T.Tensor((M, K // 2), a_dtype), E: T.Tensor((M, K // ef), e_dtype), B: T.Tensor((K, N), a_dtype),
                C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk // 2), a_dtype)
            E_s = T.alloc_shared((bm, bk // ef), e_dtype)
            B_s = T.alloc_shared((bk, bn), a_dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk // 2], A_s)
                T.copy(E[by * bm, k * bk // ef], E_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm_sp(A_s, E_s, B_s, C_l, transpose_A=False, transpose_E=False, transpose_B=False)
            T.copy(C_l, C[by * bm, bx * bn])
    return gemm_sp


@pytest.mark.parametrize("a_dtype,e_dtype", [("float16", "int16"), ("float16", "int8"), ("float16", "int32"),
                                             ("float32", "int16")])
def test_gemm_sp_cpu_matches_dense(a_dtype, e_dtype):
    rng = np.random.default_rng(1)
    M, N, K = 64, 64, 256
    f32 = a_dtype == "float32"
    dense = semi_sparse(rng, M, K, f32)
    vals, meta = compress(dense, {"int8": 8, "int16": 16, "int32": 32}[e_dtype], f32)
    b = (rng.integers(-8, 8, (K, N)) / 4).astype(np.float32)
    tdt = torch.float32 if f32 else torch.float16
    kern = tilelang.compile(sp_kernel(M, N, K, a_dtype, e_dtype), target="cpu")
    c = torch.full((M, N), float("nan"))
    kern(torch.from_numpy(vals).to(tdt), torch.from_numpy(meta), torch.from_numpy(b).to(tdt), c)
    np.testing.assert_allclose(c.numpy(), dense.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=1e-6)


def test_gemm_sp_cuda_warns_and_uses_tensor_cores():
    for arch in ("sm_80", "sm_90a"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            src = tilelang.compile(sp_kernel(256, 256, 256, "float16", "int16", 128, 128, 64),
                                   target=f"cuda -arch={arch}").get_kernel_source()
        msgs = [str(x.message) for x in w]
        assert any("sparse tensor-core path (mma.sp / wgmma.sp) is not implemented" in m for m in msgs), msgs
        assert "tl::gemm_ss" in src and "A_dense" in src


def test_gemm_sp_checks_metadata_shape():
    with pytest.raises(TileLangError, match="metadata E_s is"):
        @T.prim_func
        def bad(A: T.Tensor((32, 32), "float16"), E: T.Tensor((32, 8), "int16"), B: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((32, 32), "float16")
                E_s = T.alloc_shared((32, 8), "int16")
                B_s = T.alloc_shared((64, 32), "float16")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.gemm_sp(A_s, E_s, B_s, C_l)
