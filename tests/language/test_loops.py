"""Loops and control flow in kernels: T.serial/unroll/grid, range with a step, while,
break/continue, if/else on run-time values, T.if_then_else, alloc_var. CPU target."""
import torch

import tilelang
import tilelang.language as T


def build(func, **kw):
    return tilelang.compile(func, target="cpu", **kw)


def nan_like(shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


def test_serial_unroll_grid_sum():
    M, N = 7, 13

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), S: T.Tensor((3, M), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(M):
                acc = T.alloc_var("float32")
                acc = 0.0
                for j in T.serial(N):
                    acc += A[i, j]
                S[0, i] = acc
            for i in T.unroll(M):
                S[1, i] = 0.0
            for i, j in T.grid(M, N):
                S[1, i] = S[1, i] + A[i, j] * 2.0
            for i in range(M):
                S[2, i] = 0.0
                for j in T.unroll(N):
                    S[2, i] += A[i, j] * A[i, j]

    a = torch.randn(M, N)
    s = nan_like((3, M))
    build(k)(a, s)
    ad = a.double()
    torch.testing.assert_close(s.double(), torch.stack([ad.sum(1), 2 * ad.sum(1), (ad * ad).sum(1)]),
                               rtol=1e-5, atol=1e-5)


def test_range_with_step_and_start():
    N = 20

    @T.prim_func
    def k(A: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(N):
                A[i] = 0
            for i in range(1, N, 3):  # 1, 4, 7, ..., 19
                A[i] += 1
            for i in T.serial(2, 11, 4):  # 2, 6, 10
                A[i] += 10
            for i in range(N - 1, -1, -5):  # 19, 14, 9, 4
                A[i] += 100
            for i in range(15, 18):  # 15, 16, 17
                A[i] += 1000

    a = torch.full((N,), -7, dtype=torch.int32)
    build(k)(a)
    want = torch.zeros(N, dtype=torch.int32)
    for i in range(1, N, 3):
        want[i] += 1
    for i in range(2, 11, 4):
        want[i] += 10
    for i in range(N - 1, -1, -5):
        want[i] += 100
    for i in range(15, 18):
        want[i] += 1000
    assert torch.equal(a, want)


def test_range_as_keywords():
    """T.Pipelined(start=, stop=, num_stages=) (the public NSA backward example writes it so), and
    T.serial / T.unroll with start= / stop= / step=: a suffix sum over rows lo.. of a run-time lo,
    against float64."""
    N, D = 24, 8

    @T.prim_func
    def k(A: T.Tensor((N, D), "float32"), S: T.Tensor((3, D), "float32"), lo: T.int32):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_fragment((D,), "float32")
            T.clear(acc)
            for i in T.Pipelined(start=lo, stop=N, num_stages=0):
                for j in T.Parallel(D):
                    acc[j] += A[i, j]
            T.copy(acc, S[0, :])
            for j in T.serial(start=0, stop=D):
                S[1, j] = 0.0
            for i in T.serial(start=1, stop=N, step=5):  # 1, 6, 11, 16, 21
                for j in T.unroll(start=0, stop=D):
                    S[1, j] += A[i, j]
            for j in T.serial(D):
                S[2, j] = 0.0
                for i in T.unroll(start=0, stop=4):
                    S[2, j] += A[i, j]

    a = torch.randn(N, D)
    kern = build(k)
    for lo in (0, 5, 23):
        s = nan_like((3, D))
        kern(a, s, lo)
        torch.testing.assert_close(s[0].double(), a[lo:].double().sum(0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(s[1].double(), a[1::5].double().sum(0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(s[2].double(), a[:4].double().sum(0), rtol=1e-5, atol=1e-5)


def test_range_keywords_bind_as_the_public_signature():
    """(start, stop=None, step=None): a keyword stop after a positional start is the range start..stop;
    a lone start is the extent; a step needs a stop."""
    import pytest
    from tilelang.errors import DSLTypeError

    assert T.Pipelined(4, stop=8) == T.Pipelined(4, 8)
    assert T.serial(start=2) == T.serial(2)
    with pytest.raises(DSLTypeError, match="a step needs a stop"):
        T.serial(0, step=2)


def test_runtime_range_bounds_with_step():
    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), lo: T.int32, hi: T.int32):
        with T.Kernel(1) as bx:
            for i in T.serial(64):
                A[i] = 0
            for i in range(lo, hi, 3):
                A[i] = 1

    kern = build(k)
    for lo, hi in [(0, 64), (5, 6), (7, 7), (10, 3), (2, 40)]:
        a = torch.full((64,), 9, dtype=torch.int32)
        kern(a, lo, hi)
        want = torch.zeros(64, dtype=torch.int32)
        want[list(range(lo, hi, 3))] = 1
        assert torch.equal(a, want), (lo, hi)


def test_if_else_on_runtime_values():
    N = 64

    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 16)) as bx:
            for i in T.Parallel(16):
                x = A[bx * 16 + i]
                if x > 1.0:
                    B[bx * 16 + i] = x * 2.0
                elif x < -1.0 or x == 0.5:
                    B[bx * 16 + i] = -x
                else:
                    if not (x >= 0.0):
                        B[bx * 16 + i] = 0.0
                    else:
                        B[bx * 16 + i] = T.if_then_else(x < 0.25, 100.0, x + 1.0)

    a = torch.randn(N) * 2
    a[3] = 0.5
    b = nan_like((N,))
    build(k)(a, b)
    ad = a.double()
    want = torch.where(ad > 1, ad * 2, torch.where((ad < -1) | (ad == 0.5), -ad,
                       torch.where(ad < 0, 0.0, torch.where(ad < 0.25, 100.0, ad + 1))))
    torch.testing.assert_close(b.double(), want, rtol=1e-6, atol=1e-6)


def test_if_then_else_python_ternary_and_select():
    N = 33

    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(N):
                B[i] = A[i] * 3 if A[i] % 2 == 0 else T.if_then_else(A[i] > 0, A[i], -A[i])

    a = torch.randint(-50, 50, (N,), dtype=torch.int32)
    b = torch.zeros(N, dtype=torch.int32)
    build(k)(a, b)
    want = torch.where(a % 2 == 0, a * 3, a.abs())
    assert torch.equal(b, want)


def test_while_break_continue_alloc_var():
    N = 16

    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), Steps: T.Tensor((N,), "int32"), Odd: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(N):
                # Collatz steps to reach 1 (capped at 500 with break)
                x = T.alloc_var("int32")
                n = T.alloc_var("int32", init=0)
                x = A[i]
                while x != 1:
                    if x % 2 == 0:
                        x = x // 2
                    else:
                        x = 3 * x + 1
                    n += 1
                    if n >= 500:
                        break
                Steps[i] = n
                # count odd j < A[i] with continue
                c = T.alloc_var("int32", init=0)
                for j in T.serial(A[i]):
                    if j % 2 == 0:
                        continue
                    c[0] = c[0] + 1
                Odd[i] = c

    a = torch.randint(1, 60, (N,), dtype=torch.int32)
    steps, odd = torch.full((N,), -1, dtype=torch.int32), torch.full((N,), -1, dtype=torch.int32)
    build(k)(a, steps, odd)

    def collatz(x):
        n = 0
        while x != 1 and n < 500:
            x = x // 2 if x % 2 == 0 else 3 * x + 1
            n += 1
        return n

    assert steps.tolist() == [collatz(int(x)) for x in a]
    assert odd.tolist() == [int(x) // 2 for x in a]


def test_python_values_resolve_at_parse_time():
    N = 8

    def make(flag, scale):
        @T.prim_func
        def k(A: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.serial(N):
                    if flag:
                        A[i] = i * scale
                    else:
                        A[i] = -1.0
                for s in [1, 2]:  # a Python loop: unrolled while parsing
                    A[s] += 0.5
        return k

    a = nan_like((N,))
    build(make(True, 3.0))(a)
    want = torch.arange(N, dtype=torch.float32) * 3
    want[1:3] += 0.5
    assert torch.equal(a, want)
    a = nan_like((N,))
    build(make(False, 3.0))(a)
    assert a.tolist() == [-1.0, -0.5, -0.5] + [-1.0] * 5
