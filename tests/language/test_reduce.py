"""T.reduce_* (sum/max/min/abssum/absmax, both dims, clear=False), T.cumsum (incl. reverse),
and T.atomic_add/max/min on scalars and tiles. CPU target, float64 torch references."""
import pytest
import torch

import tilelang
import tilelang.language as T

REDUCERS = {
    "sum": (T.reduce_sum, lambda x, d: x.sum(d)),
    "max": (T.reduce_max, lambda x, d: x.amax(d)),
    "min": (T.reduce_min, lambda x, d: x.amin(d)),
    "abssum": (T.reduce_abssum, lambda x, d: x.abs().sum(d)),
    "absmax": (T.reduce_absmax, lambda x, d: x.abs().amax(d)),
}


def reduce_kernel(kind, dim, M, N, bm, bn, dtype, clear):
    fn = REDUCERS[kind][0]
    out_len = bm if dim == 1 else bn

    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), Init: T.Tensor((M // bm, N // bn, out_len), dtype),
          Out: T.Tensor((M // bm, N // bn, out_len), dtype)):
        with T.Kernel(N // bn, M // bm) as (bx, by):
            tile = T.alloc_fragment((bm, bn), dtype)
            red = T.alloc_fragment((out_len,), dtype)
            T.copy(A[by * bm, bx * bn], tile)
            T.copy(Init[by, bx, :], red)
            if clear:
                fn(tile, red, dim=dim)
            else:
                fn(tile, red, dim=dim, clear=False)
            T.copy(red, Out[by, bx, :])

    return k


# T.reduce_abssum has no clear argument
CASES = [(k, c) for k in REDUCERS for c in (True, False) if not (k == "abssum" and not c)]


@pytest.mark.parametrize("kind,clear", CASES)
@pytest.mark.parametrize("dim", [0, 1])
def test_reduce(kind, dim, clear):
    M, N, bm, bn = 32, 48, 16, 24
    kern = tilelang.compile(reduce_kernel(kind, dim, M, N, bm, bn, "float32", clear), target="cpu")
    a = torch.randn(M, N)
    out_len = bm if dim == 1 else bn
    init = torch.randn(M // bm, N // bn, out_len)
    out = torch.full_like(init, float("nan"))
    kern(a, init, out)
    tiles = a.double().reshape(M // bm, bm, N // bn, bn).permute(0, 2, 1, 3)  # [by, bx, bm, bn]
    ref = REDUCERS[kind][1](tiles, dim + 2)
    if not clear:
        i = init.double()
        ref = {"sum": ref + i, "max": torch.maximum(ref, i), "min": torch.minimum(ref, i),
               "absmax": torch.maximum(ref, i)}[kind]
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_reduce_int_and_half():
    M, N = 8, 40

    @T.prim_func
    def k(A: T.Tensor((M, N), "int32"), H: T.Tensor((M, N), "float16"), S: T.Tensor((M,), "int32"),
          X: T.Tensor((M,), "int32"), HS: T.Tensor((M,), "float32"), HM: T.Tensor((M,), "float16")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "int32")
            h = T.alloc_fragment((M, N), "float16")
            s = T.alloc_fragment((M,), "int32")
            x = T.alloc_fragment((M,), "int32")
            hs = T.alloc_fragment((M,), "float32")
            hm = T.alloc_fragment((M,), "float16")
            T.copy(A, a)
            T.copy(H, h)
            T.reduce_sum(a, s, dim=1)
            T.reduce_max(a, x, dim=1)
            T.reduce_sum(h, hs, dim=1)
            T.reduce_min(h, hm, dim=1)
            T.copy(s, S)
            T.copy(x, X)
            T.copy(hs, HS)
            T.copy(hm, HM)

    a = torch.randint(-1000, 1000, (M, N), dtype=torch.int32)
    h = torch.randn(M, N).half()
    s, x = torch.zeros(M, dtype=torch.int32), torch.zeros(M, dtype=torch.int32)
    hs, hm = torch.full((M,), float("nan")), torch.full((M,), float("nan")).half()
    tilelang.compile(k, target="cpu")(a, h, s, x, hs, hm)
    assert torch.equal(s, a.sum(1).int()) and torch.equal(x, a.amax(1))
    torch.testing.assert_close(hs.double(), h.double().sum(1), rtol=1e-5, atol=1e-5)
    assert torch.equal(hm, h.amin(1))


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(dim, reverse):
    M, N = 12, 20

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((M, N), "float32")
            d = T.alloc_shared((M, N), "float32")
            T.copy(A, s)
            T.cumsum(s, d, dim=dim, reverse=reverse)  # out of place
            T.copy(d, B)
            T.cumsum(s, dim=dim, reverse=reverse)  # in place
            T.copy(s, C)

    a = torch.randn(M, N)
    b, c = torch.full((M, N), float("nan")), torch.full((M, N), float("nan"))
    tilelang.compile(k, target="cpu")(a, b, c)
    ad = a.double()
    ref = ad.flip(dim).cumsum(dim).flip(dim) if reverse else ad.cumsum(dim)
    torch.testing.assert_close(b.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_atomic_scalar_and_tile(dtype):
    M, N, bm, bn = 37, 29, 8, 8  # ragged: edge tiles must not write out of range
    tdt = getattr(torch, dtype)

    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), Sum: T.Tensor((N,), dtype), Max: T.Tensor((M, N), dtype),
          Min: T.Tensor((M, N), dtype), Gmax: T.Tensor((1,), dtype), Gmin: T.Tensor((1,), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            t = T.alloc_fragment((bm, bn), dtype)
            T.copy(A[by * bm, bx * bn], t)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    T.atomic_add(Sum[bx * bn + j], t[i, j])  # scalar atomics
                    T.atomic_max(Gmax[0], t[i, j])
                    T.atomic_min(Gmin[0], t[i, j])
            T.atomic_max(Max[by * bm, bx * bn], t)  # tile atomics
            T.atomic_min(Min[by * bm, bx * bn], t)

    if dtype == "float32":
        a = torch.randn(M, N)
    else:
        a = torch.randint(-100, 100, (M, N), dtype=tdt)
    s = torch.zeros(N, dtype=tdt)
    mx, mn = torch.randn(M, N).to(tdt), torch.randn(M, N).to(tdt)
    gmax, gmin = torch.zeros(1, dtype=tdt), torch.zeros(1, dtype=tdt)
    mx0, mn0 = mx.clone(), mn.clone()
    tilelang.compile(k, target="cpu")(a, s, mx, mn, gmax, gmin)
    torch.testing.assert_close(s.double(), a.double().sum(0), rtol=1e-5, atol=1e-4)
    assert torch.equal(mx, torch.maximum(mx0, a)) and torch.equal(mn, torch.minimum(mn0, a))
    assert gmax.item() == max(a.max().item(), 0) and gmin.item() == min(a.min().item(), 0)
