"""Kernels in a module with `from __future__ import annotations` (annotations are strings)."""
from __future__ import annotations

import torch

import tilelang
import tilelang.language as T


def make(N, dtype="float32"):  # dtype is used only in the annotations
    @T.prim_func
    def double(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] * 2
    return double


def test_string_annotations_resolve_in_the_defining_scope():
    k = tilelang.compile(make(96), out_idx=[-1], target="cpu")
    a = torch.randn(96)
    torch.testing.assert_close(k(a).double(), a.double() * 2)
