"""Tile-level constructs not covered elsewhere: copy forms (buffer, slice, corner, 1-d, casts),
T.fill/T.clear on slices, 3-d grids, scalar parameters, alloc_local, nested loops inside
T.Parallel, chained comparisons, T.print. CPU target."""
import torch

import tilelang
import tilelang.language as T


def test_copy_forms_and_casts():
    M, N, bm, bn = 45, 70, 16, 32

    @T.prim_func
    def k(A: T.Tensor((M, N), "float16"), V: T.Tensor((N,), "float32"), B: T.Tensor((M, N), "float32"),
          W: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            s = T.alloc_shared((bm, bn), "float16")
            f = T.alloc_fragment((bm, bn), "float32")
            v = T.alloc_shared((bn,), "float32")
            T.copy(A[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], s)  # slice source
            T.copy(s, f)  # fp16 -> fp32
            T.copy(V[bx * bn], v)  # 1-d corner
            for i, j in T.Parallel(bm, bn):
                f[i, j] = f[i, j] * v[j]
            T.copy(f, B[by * bm, bx * bn])  # corner destination
            T.copy(f[0:bm, 0:bn], W[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])  # slice -> slice, -> bf16

    a, v = torch.randn(M, N).half(), torch.randn(N)
    b, w = torch.full((M, N), float("nan")), torch.full((M, N), float("nan")).bfloat16()
    tilelang.compile(k, target="cpu")(a, v, b, w)
    ref = a.float() * v
    assert torch.equal(b, ref)
    assert torch.equal(w, ref.bfloat16())


def test_copy_row_of_a_tile_and_fill_slices():
    M, N = 12, 10

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((M, N), "float32")
            T.fill(t, -1.0)
            T.fill(t[2:5, :], 7.0)
            T.clear(t[:, 8:10])
            T.copy(A[3, :], t[6, :])  # a single row: unit dims are squeezed away on both sides
            T.copy(A[:, 0], t[:, 1])  # a single column
            T.copy(t, B)

    a = torch.randn(M, N)
    b = torch.full((M, N), float("nan"))
    tilelang.compile(k, target="cpu")(a, b)
    ref = torch.full((M, N), -1.0)
    ref[2:5, :] = 7.0
    ref[:, 8:10] = 0.0
    ref[6, :] = a[3, :]
    ref[:, 1] = a[:, 0]
    assert torch.equal(b, ref)


def test_3d_grid_scalar_params_local_and_nested_loops():
    B_, H, S, D = 2, 3, 20, 8

    @T.prim_func
    def k(X: T.Tensor((B_, S, H, D), "float32"), Y: T.Tensor((B_, S, H), "float32"), alpha: T.float32,
          shift: T.int32):
        with T.Kernel(T.ceildiv(S, 8), H, B_, threads=(32, 4)) as (bx, by, bz):
            acc = T.alloc_local((8,), "float32")
            for i in T.Parallel(8):
                acc[i] = 0.0
                for d in T.serial(D):  # a serial loop nested in a parallel one
                    if 0 <= bx * 8 + i < S:  # a chained comparison on run-time values
                        acc[i] += X[bz, bx * 8 + i, by, d] * alpha
                if bx * 8 + i < S:
                    Y[bz, bx * 8 + i, by] = acc[i] + shift

    x = torch.randn(B_, S, H, D)
    y = torch.full((B_, S, H), float("nan"))
    tilelang.compile(k, target="cpu")(x, y, 0.5, 3)
    torch.testing.assert_close(y.double(), x.double().sum(-1) * 0.5 + 3, rtol=1e-5, atol=1e-5)


def test_print_tile_and_scalar(capfd):
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((4,), "float32")
            T.copy(A, t)
            T.print(t, msg="tile")
            T.print(A[2] * 2, msg="scalar")

    tilelang.compile(k, target="cpu")(torch.tensor([1.0, 2.5, -3.0, 4.0]))
    out = capfd.readouterr().out
    assert "tile" in out and "1 2.5 -3 4" in out
    assert "scalar -6" in out


def test_gemm_takes_public_keyword_names():
    """T.gemm(A=..., B=..., C=...) as the public TileLang spells its parameters (attention-sink bwd)."""
    @T.prim_func
    def k(A: T.Tensor((32, 48), "float16"), Bm: T.Tensor((48, 16), "float16"), C: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((32, 48), "float16")
            b = T.alloc_shared((48, 16), "float16")
            c = T.alloc_fragment((32, 16), "float32")
            T.copy(A, a)
            T.copy(Bm, b)
            T.gemm(A=a, B=b, C=c, clear_accum=True, annotations={})
            T.copy(c, C)

    a, b = torch.randn(32, 48).half(), torch.randn(48, 16).half()
    c = torch.full((32, 16), float("nan"))
    tilelang.compile(k, target="cpu")(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)
