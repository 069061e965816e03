"""Profiler: assert_allclose passes on correct kernels and fails on wrong ones; inputs, timing. CPU target."""
import time

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError
from tilelang.profiler import TensorSupplyType, do_bench, torch_assert_close


@tilelang.jit(out_idx=[-1], target="cpu")
def matmul(M, N, K, bM=32, bN=32, bK=16, dtype="float16"):
    @T.prim_func
    def mm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bK, bN), dtype)
            C_l = T.alloc_fragment((bM, bN), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                T.copy(A[by * bM, ko * bK], A_s)
                T.copy(B[ko * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])
    return mm


def ref_mm(A, B):
    return (A.double() @ B.double()).to(A.dtype)


@tilelang.jit(target="cpu")
def rows_inplace(M, N, write_rows):
    """Y = 2X on the first `write_rows` rows (all rows when write_rows == M); no out_idx."""
    @T.prim_func
    def inplace(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(write_rows, N):
                Y[i, j] = X[i, j] * 2.0
    return inplace


def test_assert_allclose_passes_on_a_correct_kernel():
    prof = matmul(70, 50, 40).get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    prof.assert_allclose(ref_mm, atol=1e-2, rtol=1e-2)


def test_assert_allclose_fails_on_a_wrong_reference():
    prof = matmul(70, 50, 40).get_profiler()
    with pytest.raises(AssertionError, match=r"tilelang output 'C' and reference differ in \d+ of 3500 elements"):
        prof.assert_allclose(lambda A, B: ref_mm(A, B) + 0.5, atol=1e-2, rtol=1e-2)
    with pytest.raises(AssertionError):
        prof.assert_allclose(lambda A, B: ref_mm(B.t(), A.t()).t().contiguous() * 1.1)


def test_assert_allclose_fails_on_a_wrong_kernel():
    """A kernel that misses a K tile (wrong loop bound) must fail against the true reference."""
    @T.prim_func
    def short_k(A: T.Tensor((32, 64), "float32"), B: T.Tensor((64, 32), "float32"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, 1, threads=128) as (_bx, _by):
            A_s = T.alloc_shared((32, 16), "float32")
            B_s = T.alloc_shared((16, 32), "float32")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for ko in T.serial(3):  # should be 4
                T.copy(A[0, ko * 16], A_s)
                T.copy(B[ko * 16, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[0, 0])

    prof = tilelang.compile(short_k, out_idx=-1, target="cpu").get_profiler()
    with pytest.raises(AssertionError, match="differ in"):
        prof.assert_allclose(lambda A, B: A @ B)


def test_outputs_without_out_idx_are_the_written_parameters_and_are_poisoned():
    good = rows_inplace(16, 8, 16).get_profiler()
    good.assert_allclose(lambda X, Y: X * 2)                       # returns the output

    def in_place(X, Y):  # or writes it in place and returns nothing
        Y.copy_(X * 2)

    good.assert_allclose(in_place)
    partial = rows_inplace(16, 8, 12).get_profiler()               # forgets rows 12..15
    with pytest.raises(AssertionError, match="(?s)differ in 32 of 128.*contains NaN"):
        partial.assert_allclose(lambda X, Y: X * 2)


def test_reference_returning_the_wrong_number_of_outputs():
    prof = matmul(32, 32, 16).get_profiler()
    with pytest.raises(AssertionError, match=r"produced 1 output\(s\) \(C\) but the reference returned 2"):
        prof.assert_allclose(lambda A, B: (ref_mm(A, B), ref_mm(A, B)))


def test_given_input_tensors_are_used():
    prof = matmul(32, 32, 16, dtype="float32").get_profiler()
    A, B = torch.eye(32, 16), torch.ones(16, 32)
    prof.assert_allclose(lambda A, B: A @ B, input_tensors=[A, B])
    with pytest.raises(AssertionError):
        prof.assert_allclose(lambda A, B: torch.zeros(32, 32), input_tensors=[A, B])


@pytest.mark.parametrize("supply", list(TensorSupplyType))
def test_supply_types(supply):
    prof = matmul(64, 64, 32).get_profiler(tensor_supply_type=supply)
    A, B = prof._get_inputs()
    assert A.shape == (64, 32) and B.shape == (32, 64) and A.dtype == torch.float16
    if supply is TensorSupplyType.Zero:
        assert not A.any()
    elif supply is TensorSupplyType.One:
        assert (A == 1).all()
    elif supply is TensorSupplyType.Integer:
        assert (A == A.round()).all() and A.min() >= -2 and A.max() <= 2
    elif supply in (TensorSupplyType.Uniform, TensorSupplyType.Auto):  # Auto: uniform for fp16
        assert A.min() >= -1 and A.max() <= 1 and A.float().std() > 0.3  # fp16 rounds 0.9999 up to 1
    elif supply is TensorSupplyType.Normal:  # the public TileLang's Normal: mean -1, std 1
        assert -1.2 < A.float().mean() < -0.8 and 0.8 < A.float().std() < 1.2
    else:
        assert abs(A.float().mean()) < 0.2 and 0.8 < A.float().std() < 1.2
    prof.assert_allclose(ref_mm)


def test_supply_types_by_dtype():
    """Auto and Integer by dtype, and the int8 special case, as the public TileLang draws them."""
    from tilelang.profiler.supply import make_tensor
    u8 = make_tensor((4096,), "uint8", "cpu", TensorSupplyType.Auto)
    assert u8.min() >= 0 and u8.max() == 2
    f64 = make_tensor((4096,), "float64", "cpu", TensorSupplyType.Auto)
    assert (f64 == f64.round()).all() and f64.min() == -2 and f64.max() == 2
    f8 = make_tensor((4096,), "float8_e4m3", "cpu", TensorSupplyType.Auto).float()
    assert (f8 == f8.round()).all() and f8.abs().max() > 64
    assert (make_tensor((64,), "int8", "cpu", TensorSupplyType.Normal) == 1).all()
    assert make_tensor((64,), "bool", "cpu", TensorSupplyType.Integer).dtype == torch.bool


def test_supply_type_by_name_and_bad_value():
    assert tilelang.TensorSupplyType is TensorSupplyType
    assert matmul(32, 32, 16).get_profiler("integer").supply_type is TensorSupplyType.Integer
    with pytest.raises(ValueError, match="tensor_supply_type: expected a tilelang.TensorSupplyType member"):
        matmul(32, 32, 16).get_profiler("gaussian")


def test_symbolic_dims_need_constraints():
    m = T.dynamic("m")

    @T.prim_func
    def dyn(X: T.Tensor((m, 8), "float32"), Y: T.Tensor((m, 8), "float32")):
        with T.Kernel(T.ceildiv(m, 16), threads=32) as bx:
            for i, j in T.Parallel(16, 8):
                if bx * 16 + i < m:
                    Y[bx * 16 + i, j] = X[bx * 16 + i, j] + 1.0

    k = tilelang.compile(dyn, out_idx=[-1], target="cpu")
    with pytest.raises(TileLangError, match=r"symbolic dim m with no size; pass dynamic_symbolic_constraints=\{'m': "):
        k.get_profiler().assert_allclose(lambda X: X + 1)
    with pytest.raises(ValueError, match=r"symbolic dim m with no size"):  # a wrong name: still missing
        k.get_profiler().do_bench(dynamic_symbolic_constraints={"n": 64}, n_repeat=1)
    prof = k.get_profiler(dynamic_symbolic_constraints={"m": 50})
    assert prof._get_inputs()[0].shape == (50, 8)
    prof.assert_allclose(lambda X: X + 1)


def test_do_bench_returns_milliseconds():
    prof = matmul(64, 64, 64).get_profiler()
    ms = prof.do_bench(warmup=1, rep=5)
    assert 0 < ms < 5000
    ms_ref = prof.do_bench(ref_mm, n_warmup=1, n_repeat=2)
    assert ms_ref > 0
    lo, mid, hi = prof.do_bench(n_repeat=5, quantiles=[0.2, 0.5, 0.8])
    assert lo <= mid <= hi


def test_do_bench_counts_and_budget():
    n = [0]

    def fn():
        n[0] += 1
        time.sleep(0.002)

    ms = do_bench(fn, _n_warmup=2, _n_repeat=5)
    assert n[0] == 1 + 5 + 2 + 5  # a cold call, 5 estimate calls, warmup, timed calls
    assert 1.5 < ms < 50
    n[0] = 0
    do_bench(fn, n_warmup=2, n_repeat=5, backend="wall")  # the Profiler's spellings
    assert n[0] == 13
    n[0] = 0
    do_bench(fn, warmup=0, rep=20)
    assert 6 + 3 <= n[0] <= 6 + 12  # about rep / 2 ms calls fit the 20 ms budget
    n[0] = 0
    assert do_bench(fn, early_stop_baseline=0.5) > 1.5 and n[0] == 6  # the estimate already exceeds it
    assert do_bench(fn, n_repeat=3, return_mode="min") <= do_bench(fn, n_repeat=3, return_mode="max") + 5
    with pytest.raises(ValueError, match="return_mode"):
        do_bench(fn, return_mode="p90")
    with pytest.raises(ValueError, match="Ascend"):
        do_bench(fn, backend="msprof")
    with pytest.raises(ValueError, match="backend must be one of"):
        do_bench(fn, backend="nvprof")
    for backend in ("event", "cupti", "cudagraph", "wall"):  # CPU work: every backend times the host clock
        assert 1.5 < do_bench(fn, _n_repeat=3, backend=backend, device="cpu") < 50


def test_do_bench_call_cap(monkeypatch):
    n = [0]

    def fn():
        n[0] += 1
        time.sleep(0.001)

    monkeypatch.setenv("TILELANG_BENCH_MAX_CALLS", "2")
    assert do_bench(fn, warmup=200, rep=200) > 0.5
    assert n[0] == 1 + 2 + 2 + 2  # cold call, then estimate, warmup and timed passes of 2 calls each
    n[0] = 0
    do_bench(fn, _n_warmup=50, _n_repeat=50)
    assert n[0] == 7  # fixed counts are capped too
    for bad in ("0", "-3", "many"):
        monkeypatch.setenv("TILELANG_BENCH_MAX_CALLS", bad)
        with pytest.raises(ValueError, match="TILELANG_BENCH_MAX_CALLS must be a positive integer"):
            do_bench(fn)


def test_assert_consistent():
    matmul(40, 40, 40).get_profiler().assert_consistent(repeat=3)


# ------------------------------------------------------------------ torch_assert_close

def test_torch_assert_close_budget_and_messages():
    a = torch.zeros(1000)
    b = a.clone()
    b[:5] = 1.0
    torch_assert_close(a, b, max_mismatched_ratio=0.01)         # 0.5% allowed
    with pytest.raises(AssertionError, match=r"(?s)differ in 5 of 1000 elements \(0.50%, allowed 0.10%\).*\(0,\)"):
        torch_assert_close(a, b, max_mismatched_ratio=0.001)
    with pytest.raises(AssertionError, match=r"LHS has shape \(1000,\) but RHS has shape \(999,\)"):
        torch_assert_close(a, a[:999])
    nan = torch.tensor([float("nan"), 1.0])
    torch_assert_close(nan, nan.clone())
    with pytest.raises(AssertionError):
        torch_assert_close(nan, nan.clone(), equal_nan=False, max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError, match="dtype torch.float16 but RHS has dtype torch.float64"):
        torch_assert_close(torch.ones(4, dtype=torch.float16), torch.ones(4, dtype=torch.float64))
    torch_assert_close(torch.ones(4, dtype=torch.float16), torch.ones(4, dtype=torch.float64), check_dtype=False)
    with pytest.raises(AssertionError, match="stride"):
        torch_assert_close(torch.ones(4, 3), torch.ones(3, 4).t(), check_stride=True)
    torch_assert_close(torch.ones(4, 3), torch.ones(3, 4).t())
    sparse = torch.eye(3).to_sparse()
    with pytest.raises(AssertionError, match="layout"):
        torch_assert_close(sparse, torch.eye(3))
    torch_assert_close(sparse, torch.eye(3), check_layout=False)
    # the public default atol is 1e-3
    with pytest.raises(AssertionError):
        torch_assert_close(torch.full((10,), 0.005), torch.zeros(10), rtol=0.0)
