"""T.copy of two regions whose extents differ (tilelang/op/regions.py), as the public TileLang accepts them.

Both sides must have as many non-unit dims; these pair up in order. The copy runs over the extents of the side
nearer the threads (fragment / local, then shared, then global; the source when both sit at the same level) and
both sides are indexed from their own starts. Rejected, with both shapes in the message: a destination base smaller
than the source, a different number of non-unit dims (no broadcasting, not even of one element), two whole buffers
of other shapes, and an on-chip side walked past its own shape.

Each accepted form runs on the CPU backend and, compiled for sm_80 / sm_90a by NVRTC, on the host emulator,
against a float64 torch reference on fresh random inputs.
"""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import ShapeMismatchError
from tilelang.testing import host_cuda_or_skip


@T.prim_func
def smaller_global_source(A: T.Tensor[(8, 6), T.float32], B: T.Tensor[(8, 6), T.float32]):
    with T.Kernel(1, threads=32):
        T.copy(A[:, 0:2], B[:, 0:3])  # runs over A's (8, 2): B[:, 2] keeps its value


def ref_smaller_global_source(A, B):
    B[:, 0:2] = A[:, 0:2]


@T.prim_func
def larger_global_source(A: T.Tensor[(8, 6), T.float32], B: T.Tensor[(8, 4), T.float32]):
    with T.Kernel(1, threads=32):
        T.copy(A[0:8, 1:6], B[0:8, 0:3])  # runs over A's (8, 5); B's columns past 4 are not written


def ref_larger_global_source(A, B):
    B[:, 0:4] = A[:, 1:5]


@T.prim_func
def fragment_into_larger_shared(A: T.Tensor[(16, 16), T.float32], O: T.Tensor[(16, 16), T.float32]):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((16, 16), T.float32)
        F = T.alloc_fragment((16, 8), T.float32)
        T.copy(A, S)
        T.copy(A[0:16, 8:16], F)
        for i, j in T.Parallel(16, 8):
            F[i, j] = F[i, j] * 2.0
        T.copy(F, S[0:16, 0:16])  # the fragment is the base: S[:, 0:8] only
        T.copy(S, O)


def ref_fragment_into_larger_shared(A, O):
    O[:] = A
    O[:, 0:8] = 2.0 * A[:, 8:16]


@T.prim_func
def shared_into_larger_fragment_in_bounds(A: T.Tensor[(16, 16), T.float32], O: T.Tensor[(16, 16), T.float32]):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((32, 16), T.float32)
        F = T.alloc_fragment((16, 16), T.float32)
        T.copy(A, S[0:16, 0:16])
        T.copy(A, S[16:32, 0:16])
        T.copy(S[8:16, 0:16], F)  # the fragment is the base: reads S[8:24]
        for i, j in T.Parallel(16, 16):
            F[i, j] = F[i, j] * 2.0
        T.copy(F, O)


def ref_shared_into_larger_fragment_in_bounds(A, O):
    O[0:8] = 2.0 * A[8:16]
    O[8:16] = 2.0 * A[0:8]


@T.prim_func
def smaller_shared_into_shared(A: T.Tensor[(8, 8), T.float32], B: T.Tensor[(8, 8), T.float32],
                               O: T.Tensor[(8, 8), T.float32]):
    with T.Kernel(1, threads=64):
        S1 = T.alloc_shared((4, 8), T.float32)
        S2 = T.alloc_shared((8, 8), T.float32)
        T.copy(A[4:8, 0:8], S1)
        T.copy(B, S2)
        T.copy(S1, S2[0:8, 0:8])  # same level: the source is the base, S2[0:4] only
        T.copy(S2, O)


def ref_smaller_shared_into_shared(A, B, O):
    O[:] = B
    O[0:4] = A[4:8]


@T.prim_func
def unit_dims_and_corners(X: T.Tensor[(2, 16, 8), T.float32], Y: T.Tensor[(16, 3, 8), T.float32],
                          O: T.Tensor[(16, 8), T.float32]):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((16, 8), T.float32)
        T.copy(X[1, 0, 0], S)  # a corner takes the other side's extents, leading dims 1
        T.copy(S, O)
        T.copy(X[0, 0:16, 0:8], Y[0:16, 2, 0:8])  # unit dims are squeezed on either side


def ref_unit_dims_and_corners(X, Y, O):
    O[:] = X[1]
    Y[:, 2, :] = X[0]


ACCEPTED = [
    (smaller_global_source, ref_smaller_global_source, [(8, 6), (8, 6)]),
    (larger_global_source, ref_larger_global_source, [(8, 6), (8, 4)]),
    (fragment_into_larger_shared, ref_fragment_into_larger_shared, [(16, 16), (16, 16)]),
    (shared_into_larger_fragment_in_bounds, ref_shared_into_larger_fragment_in_bounds, [(16, 16), (16, 16)]),
    (smaller_shared_into_shared, ref_smaller_shared_into_shared, [(8, 8), (8, 8), (8, 8)]),
    (unit_dims_and_corners, ref_unit_dims_and_corners, [(2, 16, 8), (16, 3, 8), (16, 8)]),
]


def check(run, ref, shapes):
    for _ in range(2):
        args = [torch.randn(s, dtype=torch.float32) for s in shapes]
        want = [a.double().clone() for a in args]
        ref(*want)
        run(args)
        for got, exp in zip(args, want):
            torch.testing.assert_close(got.double(), exp, rtol=0, atol=0)


@pytest.mark.parametrize("prog,ref,shapes", ACCEPTED, ids=[r.__name__[4:] for _, r, _ in ACCEPTED])
def test_accepted_on_the_cpu(prog, ref, shapes):
    k = tilelang.compile(prog, target="cpu")
    check(lambda args: k(*args), ref, shapes)


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("prog,ref,shapes", ACCEPTED, ids=[r.__name__[4:] for _, r, _ in ACCEPTED])
def test_accepted_on_the_host_emulator(prog, ref, shapes, arch):
    host = host_cuda_or_skip()
    k = tilelang.compile(prog, target=f"cuda -arch={arch}")

    def run(args):
        p = host.HostProgram({"k": k})
        try:
            p.run("k", args)
        finally:
            p.close()

    check(run, ref, shapes)


def test_a_source_walked_past_its_shape_is_an_error():
    with pytest.raises(ShapeMismatchError, match=r"source S \(8, 16\) and destination F \(16, 16\).*past its shape"):
        @T.prim_func
        def f(A: T.Tensor[(16, 16), T.float32], O: T.Tensor[(16, 16), T.float32]):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((16, 16), T.float32)
                F = T.alloc_fragment((16, 16), T.float32)
                T.copy(A, S)
                T.copy(S[2:10, 0:16], F)  # the fragment is the base: S[2:18] would be read, S has 16 rows
                T.copy(F, O)


def mismatch(body):
    """Parse a kernel whose one statement is body(A, S, F, S2) and return the error's message."""
    with pytest.raises(ShapeMismatchError) as info:
        @T.prim_func
        def f(A: T.Tensor[(16, 16), T.float32]):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((16, 16), T.float32)
                F = T.alloc_fragment((16, 8), T.float32)
                S2 = T.alloc_shared((8, 8), T.float32)
                body(A, S, F, S2)
    return str(info.value)


@pytest.mark.parametrize("body,src,dst", [
    # the destination is the base and is smaller than the source: data would be dropped
    (lambda A, S, F, S2: T.copy(S[0:16, 0:16], F), "S has extents (16, 16)", "F has (16, 8)"),
    (lambda A, S, F, S2: T.copy(A[0:16, 0:16], S2), "A has extents (16, 16)", "S2 has (8, 8)"),
    # no broadcasting: a row, or one element, into a 2-d tile
    (lambda A, S, F, S2: T.copy(A[3:4, 0:16], S), "A has extents (16,)", "S has (16, 16)"),
    (lambda A, S, F, S2: T.copy(A[3:4, 5:6], S), "A has extents ()", "S has (16, 16)"),
    (lambda A, S, F, S2: T.copy(S, A[0:16, 7:8]), "S has extents (16, 16)", "A has (16,)"),
    # two whole buffers of other shapes
    (lambda A, S, F, S2: T.copy(S2, S), "S2 has extents (8, 8)", "S has (16, 16)"),
])
def test_still_rejected(body, src, dst):
    msg = mismatch(body)
    assert "T.copy: source tile " + src in msg and "destination " + dst in msg, msg
