"""INT4TensorCoreIntrinEmitter: int8 byte tiles multiplied as packed signed 4-bit integers.

A kernel written with the emitter (ldmatrix_a / ldmatrix_b / mma / stmatrix, as the bitnet
prefill example writes it) is compiled for sm_80 and sm_90a with NVRTC and run on the host
emulator (generated CUDA on the CPU, mma.sync m16n8k32 .s4 as a warp collective). The result is
checked exactly against an int64 torch matmul of the unpacked, sign-extended nibbles.
"""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics.macro.mma_macro_generator import INT4TensorCoreIntrinEmitter
from tilelang.errors import TileLangError

pytestmark = pytest.mark.nvrtc


@pytest.fixture(scope="module")
def run_on_host():
    """run_on_host(kernel, tensors): one launch on tilelang.testing.host_cuda (skipped without g++)."""
    from tilelang.testing import host_cuda
    if not host_cuda.available():
        pytest.skip("g++ not installed")

    def run(kernel, tensors):
        prog = host_cuda.HostProgram({"k": kernel})
        try:
            prog.run("k", tensors)
        finally:
            prog.close()

    return run


def int4_gemm(M, N, K, brw=2, bcw=2, wrt=32, wct=32, chunk=64):
    """C (M, N) int32 = A (M, K bytes) x B (N, K bytes)^T, every byte two int4 values."""
    em = INT4TensorCoreIntrinEmitter(a_dtype=T.int8, b_dtype=T.int8, accum_dtype=T.int32, a_transposed=False,
                                     b_transposed=True, block_row_warps=brw, block_col_warps=bcw,
                                     warp_row_tiles=wrt, warp_col_tiles=wct, chunk=chunk)
    bM, bN, bK = brw * wrt, bcw * wct, chunk
    wr, wc = wrt // 16, wct // 16

    @T.prim_func
    def k(A: T.Tensor((M, K), T.int8), B: T.Tensor((N, K), T.int8), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=32 * brw * bcw) as (bx, by):
            As = T.alloc_shared((bM, bK), T.int8)
            Bs = T.alloc_shared((bN, bK), T.int8)
            Cs = T.alloc_shared((bM // 16, bN // 16, 16, 16), T.int32)
            Af = T.alloc_local((wr * em.local_size_a,), T.int8)
            Bf = T.alloc_local((wc * em.local_size_b,), T.int8)
            Cf = T.alloc_local((wr * wc * em.local_size_out,), T.int32)
            T.clear(Cf)
            for ko in T.Pipelined(K // bK, num_stages=2):
                for i, kk in T.Parallel(bM, bK):
                    As[i, kk] = A[by * bM + i, ko * bK + kk]
                for j, kk in T.Parallel(bN, bK):
                    Bs[j, kk] = B[bx * bN + j, ko * bK + kk]
                for ki in T.serial(bK // em.micro_size_k):
                    em.ldmatrix_a(Af, As, ki)
                    em.ldmatrix_b(Bf, Bs, ki)
                    em.mma(Af, Bf, Cf)
            em.stmatrix(Cf, Cs)
            for i, j in T.Parallel(bM, bN):
                C[by * bM + i, bx * bN + j] = Cs[i // 16, j // 16, i % 16, j % 16]

    return k


def nibbles(x):
    """(rows, 2 * bytes) int64: byte b's low nibble at 2b, high at 2b + 1, sign-extended."""
    u = x.to(torch.int64) & 0xFF
    lo, hi = u & 0xF, u >> 4
    v = torch.stack([lo, hi], dim=-1).reshape(x.shape[0], -1)
    return torch.where(v >= 8, v - 16, v)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_int4_emitter_compiles_to_s4_mma(arch):
    src = tilelang.compile(int4_gemm(128, 128, 128), target=f"cuda -arch={arch}").get_kernel_source()
    n = src.count("tl::mma_frag<tl::int4x2_t, tl::int4x2_t, int32_t, 16, 8, 32>")
    assert n >= 4 and n % 4 == 0  # four m16n8k32 per (i, j) tile (sm_90a's pipeline may copy the loop body)
    assert "tl::mma_frag<int8_t" not in src
    assert "tl::ldmatrix_frag<4, false>" in src


@pytest.mark.parametrize("shape", [(64, 64, 64), (128, 64, 192)])
def test_int4_emitter_runs_on_host_exactly(run_on_host, shape):
    M, N, K = shape
    kern = tilelang.compile(int4_gemm(M, N, K), target="cuda -arch=sm_80")
    g = torch.Generator().manual_seed(M * 7 + K)
    a = torch.randint(-128, 128, (M, K), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (N, K), dtype=torch.int8, generator=g)
    c = torch.full((M, N), 7, dtype=torch.int32)
    run_on_host(kern, [a, b, c])
    ref = nibbles(a) @ nibbles(b).T
    assert torch.equal(c.long(), ref)
    # the bytes are not multiplied as int8 (that would be a different GEMM)
    assert not torch.equal(ref, a.long() @ b.long().T)


def test_small_values_multiply_as_int8(run_on_host):
    """Bytes 0..7 (high nibble 0), as the bitnet example feeds: the int8 product."""
    kern = tilelang.compile(int4_gemm(64, 64, 128), target="cuda -arch=sm_80")
    g = torch.Generator().manual_seed(5)
    a = torch.randint(0, 8, (64, 128), dtype=torch.int8, generator=g)
    b = torch.randint(0, 8, (64, 128), dtype=torch.int8, generator=g)
    c = torch.zeros(64, 64, dtype=torch.int32)
    run_on_host(kern, [a, b, c])
    assert torch.equal(c.long(), a.long() @ b.long().T)


def test_ptx_mma_int4_k32_one_warp(run_on_host):
    """T.ptx_mma("int32", "m16n8k32", ..., "int4", "int4", "int32"): lane fragments by the PTX layout."""
    @T.prim_func
    def k(A: T.Tensor((16, 16), T.int8), B: T.Tensor((8, 16), T.int8), C: T.Tensor((16, 8), T.int32)):
        with T.Kernel(1, threads=32) as _:
            a = T.alloc_local((8,), T.int8)
            b = T.alloc_local((4,), T.int8)
            c = T.alloc_local((4,), T.int32)
            tx = T.get_thread_binding()
            g, t = tx // 4, tx % 4
            for i in T.unroll(8):  # reg i // 4: row g + 8 (i // 4), bytes 4t..4t+3 (nibbles 8t..8t+7)
                a[i] = A[g + 8 * (i // 4), 4 * t + i % 4]
            for i in T.unroll(4):
                b[i] = B[g, 4 * t + i]
            for s in T.unroll(4):
                c[s] = C[g + 8 * (s // 2), 2 * t + s % 2]
            T.ptx_mma(T.int32, "m16n8k32", "row", "col", "int4", "int4", "int32", a.data, 0, b.data, 0, c.data, 0,
                      T.bool(False))
            for s in T.unroll(4):
                C[g + 8 * (s // 2), 2 * t + s % 2] = c[s]

    kern = tilelang.compile(k, target="cuda -arch=sm_80")
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-128, 128, (16, 16), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (8, 16), dtype=torch.int8, generator=g)
    c = torch.randint(-1000, 1000, (16, 8), dtype=torch.int32, generator=g)
    c0 = c.clone()
    run_on_host(kern, [a, b, c])
    assert torch.equal(c.long(), nibbles(a) @ nibbles(b).T + c0.long())


def test_bad_configurations_raise():
    with pytest.raises(TileLangError, match="int8 operand tiles"):
        INT4TensorCoreIntrinEmitter(a_dtype=T.float16, b_dtype=T.float16, accum_dtype=T.float32,
                                    b_transposed=True, warp_row_tiles=32, warp_col_tiles=32, chunk=32)
    with pytest.raises(TileLangError, match="multiple of 16"):
        INT4TensorCoreIntrinEmitter(a_dtype=T.int8, b_dtype=T.int8, accum_dtype=T.int32,
                                    b_transposed=True, warp_row_tiles=32, warp_col_tiles=8, chunk=64)
    with pytest.raises(TileLangError, match="INT4TensorCoreIntrinEmitter"):
        from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
        TensorCoreIntrinEmitter(a_dtype=T.int4, b_dtype=T.int4, accum_dtype=T.int32, b_transposed=True,
                                warp_row_tiles=32, warp_col_tiles=32, chunk=64)


# 2-bit weights expanded to int8 in threads by a device function of the kernel's prelude
# (plain C++ here, so the host emulator runs it): 4 packed bytes -> 16 int8 values, value v of
# byte b (bits 2v, 2v + 1) landing at 4b + v.
DECODE_2BIT = """
template <typename T1, typename T2>
__device__ void unpack_2bit_to_i8(T1 *packed, T2 *out) {
  for (int i = 0; i < 16; ++i) out[i] = (T2)((((unsigned)(unsigned char)packed[i / 4]) >> (2 * (i % 4))) & 3u);
}
"""


def int8_x_int2_gemm(M, N, K, brw=2, bcw=2, wrt=32, wct=32, chunk=64):
    """C (M, N) = A (M, K int8) x W (N, K 2-bit values 0..3, packed 4 a byte)^T through the int4 mma:
    the decoded weight bytes have a zero high nibble, so every byte product is A's low nibble
    (sign-extended) times the weight."""
    from tilelang.cuda.intrinsics import make_mma_swizzle_layout

    em = INT4TensorCoreIntrinEmitter(a_dtype=T.int8, b_dtype=T.int8, accum_dtype=T.int32, a_transposed=False,
                                     b_transposed=True, block_row_warps=brw, block_col_warps=bcw,
                                     warp_row_tiles=wrt, warp_col_tiles=wct, chunk=chunk)
    bM, bN, bK = brw * wrt, bcw * wct, chunk
    wr, wc = wrt // 16, wct // 16
    threads = 32 * brw * bcw
    per_thread = bN * bK // 4 // (threads * 4)  # 4 packed bytes -> 16 values per call

    @T.prim_func
    def k(A: T.Tensor((M, K), T.int8), W: T.Tensor((N, K // 4), T.int8), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads, prelude=DECODE_2BIT) as (bx, by):
            As = T.alloc_shared((bM, bK), T.int8)
            Ws = T.alloc_shared((bN, bK // 4), T.int8)
            Bs = T.alloc_shared((bN, bK), T.int8)
            Cs = T.alloc_shared((bM // 16, bN // 16, 16, 16), T.int32)
            Af = T.alloc_local((wr * em.local_size_a,), T.int8)
            Bf = T.alloc_local((wc * em.local_size_b,), T.int8)
            Cf = T.alloc_local((wr * wc * em.local_size_out,), T.int32)
            packed = T.alloc_local((4,), T.int8)
            vals = T.alloc_local((16,), T.int8)
            tx = T.get_thread_binding()
            T.annotate_layout({As: make_mma_swizzle_layout(As), Bs: make_mma_swizzle_layout(Bs)})
            T.clear(Cf)
            for ko in T.Pipelined(K // bK, num_stages=2):
                for i, kk in T.Parallel(bM, bK):
                    As[i, kk] = A[by * bM + i, ko * bK + kk]
                for j, kk in T.Parallel(bN, bK // 4):
                    Ws[j, kk] = W[bx * bN + j, ko * (bK // 4) + kk]
                for r in T.serial(per_thread):
                    for v in T.vectorized(4):
                        e = (r * threads + tx) * 4 + v
                        packed[v] = Ws[e // (bK // 4), e % (bK // 4)]
                    T.call_extern("handle", "unpack_2bit_to_i8", T.access_ptr(packed, "r"), T.access_ptr(vals, "w"))
                    for v in T.vectorized(16):
                        e = (r * threads + tx) * 16 + v
                        Bs[e // bK, e % bK] = vals[v]
                for ki in T.serial(bK // em.micro_size_k):
                    em.ldmatrix_a(Af, As, ki)
                    em.ldmatrix_b(Bf, Bs, ki)
                    em.mma(Af, Bf, Cf)
            em.stmatrix(Cf, Cs)
            for i, j in T.Parallel(bM, bN):
                C[by * bM + i, bx * bN + j] = Cs[i // 16, j // 16, i % 16, j % 16]

    return k


@pytest.mark.parametrize("shape", [(128, 128, 128), (64, 128, 256)])
def test_int8_activation_x_2bit_weight_through_int4_mma(run_on_host, shape):
    M, N, K = shape
    kern = tilelang.compile(int8_x_int2_gemm(M, N, K), target="cuda -arch=sm_80")
    g = torch.Generator().manual_seed(N + K)
    a = torch.randint(-8, 8, (M, K), dtype=torch.int8, generator=g)
    w = torch.randint(0, 4, (N, K), dtype=torch.int64, generator=g)
    packed = (w.reshape(N, K // 4, 4) << torch.tensor([0, 2, 4, 6])).sum(-1)
    packed = torch.where(packed >= 128, packed - 256, packed).to(torch.int8)
    c = torch.full((M, N), 7, dtype=torch.int32)
    run_on_host(kern, [a, packed, c])
    assert torch.equal(c.long(), a.long() @ w.T)


def test_int4_emitter_runs_on_cpu_exactly():
    """The same kernel on the CPU backend (transform/cpu_warp_mma.py): the s4 products of the nibbles."""
    kern = tilelang.compile(int4_gemm(64, 64, 128), target="cpu")
    g = torch.Generator().manual_seed(11)
    a = torch.randint(-128, 128, (64, 128), dtype=torch.int8, generator=g)
    b = torch.randint(-128, 128, (64, 128), dtype=torch.int8, generator=g)
    c = torch.full((64, 64), 7, dtype=torch.int32)
    kern(a, b, c)
    assert torch.equal(c.long(), nibbles(a) @ nibbles(b).T)
