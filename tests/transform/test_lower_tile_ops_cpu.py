"""lower_tile_ops_cpu: tile ops become plain serial loops with bounds guards on global tiles;
the gemm keeps the k order of a plain loop (bit-exact vs a sequential float32 reference)."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.backend.cpu.pipeline import PASSES
from tilelang.ir import expr as E
from tilelang.ir import stmt as S
from tilelang.ir.visitor import collect
from tilelang.transform.lower_tile_ops_cpu import lower_tile_ops_cpu
from tilelang.transform.pass_manager import PassContext, run_passes


def lowered(func):
    return run_passes(func, PASSES, PassContext())


def test_no_tile_ops_remain_and_loops_are_serial():
    @T.prim_func
    def k(A: T.Tensor((100, 70), "float16"), B: T.Tensor((70, 50), "float16"), C: T.Tensor((100, 50), "float32")):
        with T.Kernel(T.ceildiv(50, 32), T.ceildiv(100, 32)) as (bx, by):
            a = T.alloc_shared((32, 16), "float16")
            b = T.alloc_shared((16, 32), "float16")
            c = T.alloc_fragment((32, 32), "float32")
            r = T.alloc_fragment((32,), "float32")
            T.clear(c)
            for ko in T.Pipelined(T.ceildiv(70, 16), num_stages=3):
                T.copy(A[by * 32, ko * 16], a)
                T.copy(B[ko * 16, bx * 32], b)
                T.gemm(a, b, c)
            T.reduce_max(c, r, dim=1)
            T.cumsum(c, dim=1)
            for i, j in T.Parallel(32, 32):
                c[i, j] = c[i, j] - r[i]
            T.atomic_add(C[by * 32, bx * 32], c)

    f = lower_tile_ops_cpu(k)
    assert not collect(f.body, lambda n: isinstance(n, S.TileOp))
    kinds = {n.kind for n in collect(f.body, lambda n: isinstance(n, S.For))}
    assert kinds == {"serial"}


def test_copy_guards_only_what_can_be_out_of_range():
    @T.prim_func
    def k(A: T.Tensor((128, 100), "float32"), B: T.Tensor((128, 100), "float32")):
        with T.Kernel(1):
            s = T.alloc_shared((64, 64), "float32")
            T.copy(A[0, 50], s)   # rows 0..63 fit; columns 50..113 can pass 100: one guard
            T.copy(s, B[64, 36])  # rows 64..127 fit, columns 36..99 fit exactly: no guard at all

    f = lowered(k)
    selects = collect(f.body, lambda n: isinstance(n, E.Select))
    guards = collect(f.body, lambda n: isinstance(n, S.IfThenElse))
    assert len(selects) == 1 and not guards
    conds = collect(selects[0].cond, lambda n: isinstance(n, E.Binary) and n.op == "<")
    assert len(conds) == 1 and str(conds[0].b) == "100"


def _gemm_kernel(M, N, K, trans_a, trans_b):
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)

    @T.prim_func
    def k(A: T.Tensor(a_shape, "float32"), B: T.Tensor(b_shape, "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1):
            a = T.alloc_shared(a_shape, "float32")
            b = T.alloc_shared(b_shape, "float32")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(C, c)
            T.gemm(a, b, c, transpose_A=trans_a, transpose_B=trans_b)
            T.copy(c, C)

    return k


@pytest.mark.parametrize("K", [1, 3, 8, 12, 14, 32])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_matches_sequential_k_order_bit_for_bit(K, trans_a, trans_b):
    M, N = 5, 9
    kern = tilelang.compile(_gemm_kernel(M, N, K, trans_a, trans_b), target="cpu")
    a, b, c0 = torch.randn(M, K), torch.randn(K, N), torch.randn(M, N)
    c = c0.clone()
    kern(a.T.contiguous() if trans_a else a, b.T.contiguous() if trans_b else b, c)
    ref = c0.clone()
    for kk in range(K):  # float32, one k at a time: the order the lowering promises
        ref = ref + a[:, kk:kk + 1] * b[kk:kk + 1, :]
    assert torch.equal(c, ref)


def test_gemm_clear_accum_and_mixed_dtypes():
    M, N, K = 16, 8, 24

    @T.prim_func
    def k(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1):
            c = T.alloc_fragment((M, N), "float32")
            a_s = T.alloc_shared((M, K), "bfloat16")
            b_s = T.alloc_shared((K, N), "float16")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.fill(c, 123.0)
            T.gemm(a_s, b_s, c, clear_accum=True)  # tile ops take on-chip tiles, not global tensors
            T.copy(c, C)

    a, b = torch.randn(M, K).bfloat16(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan"))
    tilelang.compile(k, target="cpu")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("M,N,K", [(1, 9, 7), (5, 1, 7), (1, 1, 1), (1, 4, 16)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_gemm_with_unit_matrix_dims(M, N, K, trans_a, trans_b):
    kern = tilelang.compile(_gemm_kernel(M, N, K, trans_a, trans_b), target="cpu")
    a, b, c0 = torch.randn(M, K), torch.randn(K, N), torch.randn(M, N)
    c = c0.clone()
    kern(a.T.contiguous() if trans_a else a, b.T.contiguous() if trans_b else b, c)
    torch.testing.assert_close(c.double(), c0.double() + a.double() @ b.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_narrow_float_accumulator_rounds_once_per_k16_chunk(dtype):
    M, N, K = 8, 24, 768

    @T.prim_func
    def k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1):
            a_s = T.alloc_shared((M, K), dtype)
            b_s = T.alloc_shared((K, N), dtype)
            c = T.alloc_fragment((M, N), dtype)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(c)
            T.gemm(a_s, b_s, c)
            T.copy(c, C)

    tdt = getattr(torch, dtype)
    a, b = torch.randn(M, K).to(tdt), torch.randn(K, N).to(tdt)
    c = torch.full((M, N), float("nan"), dtype=tdt)
    tilelang.compile(k, target="cpu")(a, b, c)
    ref = torch.zeros(M, N, dtype=tdt)  # float32 sums over k16 chunks, rounded once per chunk
    rounding = torch.zeros(M, N, dtype=torch.float64)  # what those roundings can add up to
    for k0 in range(0, K, 16):
        part = ref.float()
        for kk in range(k0, k0 + 16):
            part = part + a[:, kk:kk + 1].float() * b[kk:kk + 1, :].float()
        ref = part.to(tdt)
        rounding += (part.double() - ref.double()).abs()
    assert torch.equal(c, ref)
    exact = a.double() @ b.double()  # and so it stays within the chunk roundings of the exact product
    assert ((c.double() - exact).abs() <= rounding + 1e-3).all()
