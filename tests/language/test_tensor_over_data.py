"""T.Tensor(shape, dtype, buf.data) inside a kernel: another shape over a buffer's storage."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


def _flat_gemm(KH, C, F, block=16):
    @T.prim_func
    def main(W: T.Tensor((KH, KH, C, F), "float64"), X: T.Tensor((4, KH * KH * C), "float64"),
             Y: T.Tensor((4, 2, F // 2), "float64")):
        with T.Kernel(1, threads=1):
            W_flat = T.Tensor((KH * KH * C, F), "float64", W.data)
            Y_flat = T.Tensor((4, F), "float64", Y.data)
            for i, f in T.grid(4, F):
                acc = T.alloc_var("float64")
                acc = 0.0
                for k in T.serial(KH * KH * C):
                    acc += X[i, k] * W_flat[k, f]
                Y_flat[i, f] = acc

    return main


def test_tensor_over_data_is_a_reshaped_view():
    KH, C, F = 3, 2, 8
    k = tilelang.compile(_flat_gemm(KH, C, F), target="cpu")
    W = torch.randn(KH, KH, C, F, dtype=torch.float64)
    X = torch.randn(4, KH * KH * C, dtype=torch.float64)
    Y = torch.full((4, 2, F // 2), float("nan"), dtype=torch.float64)
    k(W, X, Y)
    ref = X @ W.reshape(KH * KH * C, F)
    torch.testing.assert_close(Y.reshape(4, F), ref, rtol=1e-12, atol=1e-12)


def test_tensor_over_data_of_another_size_is_an_error():
    with pytest.raises(TileLangError, match="same storage"):
        _bad_size()


def _bad_size():
    @T.prim_func
    def bad(W: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=1):
            V = T.Tensor((5, 4), "float32", W.data)
            V[0, 0] = 1.0

    return tilelang.compile(bad, target="cpu")


def test_tensor_over_data_with_an_offset_is_an_error():
    with pytest.raises(TileLangError, match="elem_offset"):
        _bad_offset()


def _bad_offset():
    @T.prim_func
    def bad(W: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=1):
            V = T.Tensor((16,), "float32", W.data, elem_offset=4)
            V[0] = 1.0

    return tilelang.compile(bad, target="cpu")
