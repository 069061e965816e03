"""The @tilelang.jit object's API: T.const binding (tensors, .compile keywords, scalar parameters),
get_kernel_source, get_tir, par_compile, and the attributes it exposes. CPU target, float64."""
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


@tilelang.jit(target="cpu")
def grouped_rows(A, B, scale: float = 1.0, transpose: bool = False, block: int = 8):
    """Row-block scale of A (G, R, N) by B (G,), with shapes built in Python before the annotation."""
    G, R, N = T.const("G, R, N")
    a_shape = [G, R, N] if not transpose else [G, N, R]
    A: T.Tensor(a_shape, T.float64)
    B: T.Tensor([G], T.float64)
    C = T.empty(a_shape, T.float64)
    rows = a_shape[1]
    with T.Kernel(G, T.ceildiv(rows, block), threads=32) as (g, bx):
        for i, j in T.Parallel(block, a_shape[2]):
            if bx * block + i < rows:
                C[g, bx * block + i, j] = A[g, bx * block + i, j] * B[g] * scale
    return C


def test_const_bound_from_a_shape_built_in_python():
    a, b = torch.randn(3, 13, 5, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    torch.testing.assert_close(grouped_rows(a, b, 0.5), a * b[:, None, None] * 0.5, rtol=0, atol=0)
    a2 = torch.randn(2, 4, 9, dtype=torch.float64)
    b2 = torch.randn(2, dtype=torch.float64)
    torch.testing.assert_close(grouped_rows(a2, b2, transpose=True), a2 * b2[:, None, None], rtol=0, atol=0)


def test_compile_binds_consts_by_keyword():
    k = grouped_rows.compile(G=2, R=7, N=3, scale=2.0)
    assert [tuple(p.shape) for p in k.params] == [(2, 7, 3), (2,), (2, 7, 3)]
    a, b = torch.randn(2, 7, 3, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    torch.testing.assert_close(k(a, b), a * b[:, None, None] * 2.0, rtol=0, atol=0)
    assert grouped_rows.compile(G=2, R=7, N=3, scale=2.0) is k
    with pytest.raises(TileLangError, match="T.const 'N' has no value"):
        grouped_rows.compile(G=2, R=7)


@tilelang.jit(target="cpu")
def head_split(Q, heads: int, groups: int = 2):
    """`heads` is both a Python parameter and a T.const; Q's second dim is heads // groups."""
    batch, heads = T.const("batch, heads")
    Q: T.Tensor([batch, heads // groups, 4], T.float64)
    O = T.empty([batch, heads], T.float64)
    with T.Kernel(batch, threads=32) as b:
        for h in T.serial(heads):
            O[b, h] = Q[b, h // groups, 0] + h
    return O


def test_scalar_parameter_binds_a_const_of_its_name():
    q = torch.randn(3, 4, 4, dtype=torch.float64)
    out = head_split(q, 8)
    ref = q[:, torch.arange(8) // 2, 0] + torch.arange(8, dtype=torch.float64)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    assert tuple(head_split.compile(q, 8).params[1].shape) == (3, 8)


def test_get_kernel_source_on_the_jit_object():
    src = grouped_rows.get_kernel_source(G=2, R=7, N=3)
    assert src == grouped_rows.compile(G=2, R=7, N=3).get_kernel_source()
    assert "grouped_rows" in src and "#pragma omp" in src
    a = torch.randn(2, 5, 3, dtype=torch.float64)
    src2 = grouped_rows.get_kernel_source(a, torch.randn(2, dtype=torch.float64))
    assert src2 != src  # another specialization (R=5)


@tilelang.jit(out_idx=[-1], target="cpu")
def lazy_add(M, block=16):
    @T.prim_func
    def lazy_add_k(A: T.Tensor((M,), "float64"), B: T.Tensor((M,), "float64")):
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    B[bx * block + i] = A[bx * block + i] + 1.0
    return lazy_add_k


def test_lazy_get_kernel_source_par_compile_and_attributes():
    assert "lazy_add_k" in lazy_add.get_kernel_source(40)
    ks = lazy_add.par_compile([{"M": 40}, (24, 8), {"M": 40, "block": 8}], num_workers=2)
    assert ks[0] is lazy_add.compile(40) and ks[1] is lazy_add(24, 8)
    for k, m in zip(ks, (40, 24, 40)):
        a = torch.randn(m, dtype=torch.float64)
        torch.testing.assert_close(k(a), a + 1, rtol=0, atol=0)
    assert lazy_add.mode == "lazy" and lazy_add.is_lazy_mode() and grouped_rows.mode == "eager"
    assert lazy_add.func.__name__ == "lazy_add" and lazy_add.out_idx == [-1]
    assert "def lazy_add" in lazy_add.func_source
    with pytest.raises(TypeError, match="par_compile"):
        lazy_add.par_compile([40])


def test_par_compile_ignore_error_and_eager_specs():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ks = lazy_add.par_compile([{"M": 40}, {"M": 40, "block": "x"}], ignore_error=True)
    assert ks[1] is None and ks[0] is not None and any("config 1 failed" in str(x.message) for x in w)
    specs = [{"A": T.Tensor((2, 6, 3), T.float64), "B": T.Tensor((2,), T.float64), "block": b} for b in (4, 8)]
    k4, k8 = grouped_rows.par_compile(specs)
    a, b = torch.randn(2, 6, 3, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    for k in (k4, k8):
        torch.testing.assert_close(k(a, b), a * b[:, None, None], rtol=0, atol=0)
    fs = tilelang.par_compile([lazy_add.get_tir(9), lazy_add.get_tir(10)], out_idx=[-1], target="cpu")
    a = torch.randn(10, dtype=torch.float64)
    torch.testing.assert_close(fs[1](a), a + 1, rtol=0, atol=0)


def test_eager_get_tir_parses_without_compiling():
    f = grouped_rows.get_tir(G=2, R=3, N=4)
    assert isinstance(f, T.PrimFunc) and [tuple(p.shape) for p in f.params] == [(2, 3, 4), (2,), (2, 3, 4)]


def test_eager_rejects_out_idx():
    @tilelang.jit(out_idx=[-1], target="cpu")
    def bad(A):
        M = T.const("M")
        A: T.Tensor((M,), T.float64)
        with T.Kernel(1, threads=32) as _:
            A[0] = 1.0

    with pytest.raises(TileLangError, match="out_idx is only for lazy"):
        bad.compile(M=4)


@tilelang.jit(target="cpu")
def shape_needs_value(A):
    N = T.const("N")
    shape = [N] * int(N)  # Python code that needs N's value before A is declared
    A: T.Tensor(shape, T.float64)
    with T.Kernel(1, threads=32) as _:
        A[(0,) * len(shape)] = 1.0


def test_unreadable_declarations_are_named_in_the_const_error():
    with pytest.raises(TileLangError, match=r"T.const 'N' has no value.*could not be read without the values"):
        shape_needs_value(torch.zeros(2, 2, dtype=torch.float64))
    k = shape_needs_value.compile(N=2)  # given as a keyword it works
    a = torch.zeros(2, 2, dtype=torch.float64)
    k(a)
    assert a[0, 0] == 1.0 and a.sum() == 1.0
