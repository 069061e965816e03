"""Call-time argument checks: every bad call is a TypeError/ValueError naming the parameter,
what was expected and what was given; nothing reaches the compiled code unchecked."""
import re

import pytest
import torch

import tilelang
import tilelang.language as T

m = T.dynamic("m")


@tilelang.jit(out_idx=[-1], target="cpu")
def add(M, N):
    @T.prim_func
    def add_k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
            for i, j in T.Parallel(16, N):
                if bx * 16 + i < M:
                    C[bx * 16 + i, j] = A[bx * 16 + i, j] + B[bx * 16 + i, j]
    return add_k


@tilelang.jit(target="cpu")
def scale_rows(N):
    @T.prim_func
    def scale_k(X: T.Tensor((m, N), "float32"), Y: T.Tensor((m, N), "float32"), s: T.Tensor((m,), "float32"),
                factor: T.float32, count: T.int8):
        with T.Kernel(T.ceildiv(m, 16), threads=128) as bx:
            for i, j in T.Parallel(16, N):
                if bx * 16 + i < m:
                    Y[bx * 16 + i, j] = X[bx * 16 + i, j] * s[bx * 16 + i] * factor + count
    return scale_k


@pytest.fixture(scope="module")
def k_add():
    return add(40, 24)


@pytest.fixture(scope="module")
def k_scale():
    return scale_rows(8)


def a(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def test_correct_call_runs(k_add, k_scale):
    x, y = a(40, 24), a(40, 24)
    torch.testing.assert_close(k_add(x, y), x + y)
    torch.testing.assert_close(k_add(A=x, B=y), x + y)  # by parameter name
    X, s, Y = a(33, 8), a(33), torch.full((33, 8), float("nan"))
    k_scale(X, Y, s, 2.0, 3)
    torch.testing.assert_close(Y, X * s[:, None] * 2.0 + 3)


def test_wrong_dtype(k_add):
    with pytest.raises(TypeError, match=re.escape(
            "argument 'A' (parameter 0 of add_k): expected dtype float32 (torch.float32), got torch.float16")):
        k_add(a(40, 24).half(), a(40, 24))


def test_wrong_shape(k_add):
    with pytest.raises(ValueError, match=re.escape(
            "argument 'B' (parameter 1 of add_k): expected shape (40, 24), got (40, 23) (dim 1 is 23, expected 24)")):
        k_add(a(40, 24), a(40, 23))


def test_wrong_rank(k_add):
    with pytest.raises(ValueError, match=re.escape("argument 'B' (parameter 1 of add_k): expected 2 dims (40, 24), "
                                                   "got shape (960,)")):
        k_add(a(40, 24), a(960))


def test_wrong_device(k_add):
    with pytest.raises(ValueError, match=re.escape("argument 'B' (parameter 1 of add_k): expected a tensor on cpu, "
                                                   "got one on meta (this kernel was compiled for target 'cpu')")):
        k_add(a(40, 24), torch.empty(40, 24, device="meta"))


def test_non_contiguous(k_add):
    with pytest.raises(ValueError, match=re.escape("argument 'B' (parameter 1 of add_k): expected a contiguous "
                                                   "(row-major) tensor, got strides (1, 40) for shape (40, 24)")):
        k_add(a(40, 24), a(24, 40).t())


def test_not_a_tensor(k_add):
    with pytest.raises(TypeError, match=re.escape("argument 'B' (parameter 1 of add_k): expected a torch.Tensor of "
                                                  "shape (40, 24) and dtype float32, got list")):
        k_add(a(40, 24), [[1.0] * 24] * 40)


def test_too_few_and_too_many_arguments(k_add):
    with pytest.raises(TypeError, match=re.escape("add_k expects 2 arguments (A, B), got 1; missing B")):
        k_add(a(40, 24))
    with pytest.raises(TypeError, match=re.escape("add_k expects 2 arguments (A, B), got 3 (outputs listed in "
                                                  "out_idx are allocated for you; do not pass them)")):
        k_add(a(40, 24), a(40, 24), a(40, 24))


def test_bad_keyword_arguments(k_add):
    with pytest.raises(TypeError, match="unexpected keyword argument 'Z'; its inputs are A, B"):
        k_add(a(40, 24), Z=a(40, 24))
    with pytest.raises(TypeError, match="unexpected keyword argument 'C'.*outputs in out_idx are allocated"):
        k_add(a(40, 24), C=a(40, 24))
    with pytest.raises(TypeError, match="multiple values for argument 'A'"):
        k_add(a(40, 24), A=a(40, 24))
    with pytest.raises(TypeError, match="missing argument\\(s\\) A"):
        k_add(B=a(40, 24))


def test_symbolic_dim_bound_inconsistently(k_scale):
    with pytest.raises(ValueError, match=re.escape("argument 'Y' (parameter 1 of scale_k): dim 0 is 31 but symbolic "
                                                   "dim 'm' was already bound to 33 by an earlier argument")):
        k_scale(a(33, 8), a(31, 8), a(33), 1.0, 1)
    with pytest.raises(ValueError, match="argument 's'.*dim 0 is 32 but symbolic dim 'm' was already bound to 33"):
        k_scale(a(33, 8), a(33, 8), a(32), 1.0, 1)


def test_scalar_arguments(k_scale):
    X, Y, s = a(16, 8), a(16, 8), a(16)
    with pytest.raises(TypeError, match=re.escape("argument 'factor' (parameter 3 of scale_k): expected a float "
                                                  "(float32), got str: 'x'")):
        k_scale(X, Y, s, "x", 1)
    with pytest.raises(TypeError, match=re.escape("argument 'count' (parameter 4 of scale_k): expected an int "
                                                  "(int8), got float: 1.5")):
        k_scale(X, Y, s, 1.0, 1.5)
    with pytest.raises(ValueError, match=re.escape("argument 'count' (parameter 4 of scale_k): 300 does not fit "
                                                   "int8 (range -128..127)")):
        k_scale(X, Y, s, 1.0, 300)
    k_scale(X, Y, s, torch.tensor(2.0), torch.tensor(1))  # 1-element tensors are accepted as scalars
    torch.testing.assert_close(Y, X * s[:, None] * 2.0 + 1)


def test_errors_do_not_show_compiler_frames(k_add):
    import traceback

    with pytest.raises(ValueError) as info:
        k_add(a(40, 24), a(40, 23))
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert not any("tilelang/jit/args.py" in f for f in frames), frames


def test_bad_calls_leave_the_kernel_usable(k_add):
    for bad in ((a(40, 24).half(), a(40, 24)), (a(40, 24),), (a(40, 24), a(24, 40).t())):
        with pytest.raises((TypeError, ValueError)):
            k_add(*bad)
    x, y = a(40, 24), a(40, 24)
    torch.testing.assert_close(k_add(x, y), x + y)


def test_output_with_unbound_symbolic_dim_is_an_error():
    n = T.dynamic("n")

    @T.prim_func
    def fill_k(A: T.Tensor((4,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(n):
                B[i] = A[0]

    k = tilelang.compile(fill_k, out_idx=[-1], target="cpu")
    with pytest.raises(ValueError, match="output 'B'.*symbolic dim that no input binds"):
        k(a(4))


def test_eager_call_errors():
    @tilelang.jit(target="cpu")
    def eager_add(A, B):
        N = T.const("N")
        A: T.Tensor((N,), "float32")
        B: T.Tensor((N,), "float32")
        C = T.empty((N,), "float32")
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                C[i] = A[i] + B[i]
        return C

    x = a(8)
    torch.testing.assert_close(eager_add(x, x), x + x)
    with pytest.raises(TypeError, match="eager_add\\(\\) is missing the tensor argument 'B'"):
        eager_add(x)
    with pytest.raises(TypeError, match="argument 'B' must be a torch.Tensor .*got int: 3"):
        eager_add(x, 3)
    with pytest.raises(ValueError, match=re.escape("argument 'B' (parameter 1 of eager_add): expected shape (8,), "
                                                   "got (9,)")):
        eager_add(x, a(9))
    with pytest.raises(TypeError, match="expected dtype float32 \\(torch.float32\\), got torch.float64"):
        eager_add(x, x.double())


def test_expression_dims_are_checked_whatever_the_argument_order():
    @T.prim_func
    def pairs(A: T.Tensor((m * 2,), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(m):
                B[i] = A[2 * i] + A[2 * i + 1]

    k = tilelang.compile(pairs, target="cpu")
    A, B = torch.arange(10.0), torch.zeros(5)
    k(A, B)
    torch.testing.assert_close(B, A.view(5, 2).sum(1))
    with pytest.raises(ValueError, match=re.escape("argument 'A' (parameter 0 of pairs): dim 0 is 4, "
                                                   "expected m * 2 = 10")):
        k(torch.arange(4.0), B)


def test_expression_only_dims_are_solved():
    n = T.dynamic("n")

    @T.prim_func
    def halves(A: T.Tensor((n * 2 + 2,), "float32"), B: T.Tensor((n * 2 + 2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(n * 2 + 2):
                B[i] = A[i] + 1.0

    k = tilelang.compile(halves, target="cpu")
    A, B = torch.randn(12), torch.zeros(12)
    k(A, B)
    torch.testing.assert_close(B, A + 1)
    with pytest.raises(ValueError, match="dim 0 is 11, which is not n \\* 2 \\+ 2 for any n"):
        k(torch.randn(11), torch.zeros(11))
    with pytest.raises(ValueError, match="argument 'B'.*dim 0 is 10, expected n \\* 2 \\+ 2 = 12"):
        k(torch.randn(12), torch.zeros(10))


def test_scalar_that_is_also_a_dim_must_agree():
    import dataclasses

    k = T.dynamic("k")

    @T.prim_func
    def uses_k(A: T.Tensor((k,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(k):
                A[i] = 1.0

    # the scalar parameter *is* the symbolic dim (the frontend never builds this; passes may)
    f = dataclasses.replace(uses_k, params=(uses_k.params[0], k))
    sym = tilelang.compile(f, target="cpu")
    A = torch.zeros(4)
    sym(A, 4)
    assert bool((A == 1).all())
    with pytest.raises(ValueError, match="argument 'k' .*is 6 but a tensor's shape already bound 'k' to 4"):
        sym(torch.zeros(4), 6)
