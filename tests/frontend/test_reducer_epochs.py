"""Reducer lifecycle (frontend/reducer_epochs.py): misuse of a T.alloc_reducer tile raises at the user's
line, saying what was expected; correct epochs (and the legacy syntax) compute the float64 reference."""
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import DSLTypeError, TileLangError
from tilelang.frontend.reducer_epochs import ReducerEpochError
from tilelang.testing import line_of, raises_at

HERE = __file__


def at(marker):
    return line_of(HERE, "# ERR" + "-" + marker)


def test_init_value_dtype_mismatch():
    with raises_at(DSLTypeError, "init value's dtype float16 does not match reducer `acc` dtype float32",
                   HERE, at("dtype")):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32", op="sum")
                T.reducer_init(acc, T.float16(1.0))  # ERR-dtype
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                r = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(acc, r)
                B[0] = r[0]


def test_update_before_init():
    with raises_at(ReducerEpochError, "T.reducer_update on reducer `acc` before T.reducer_init(acc)", HERE,
                   at("early")):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32", op="sum")
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])  # ERR-early
                r = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(acc, r)
                B[0] = r[0]


def test_missing_finalize():
    with raises_at(ReducerEpochError, "reducer `acc` is initialized but never finalized", HERE, at("open")):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32", op="sum")
                T.reducer_init(acc)  # ERR-open
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                B[0] = 0.0


def test_ordinary_store():
    with raises_at(ReducerEpochError, "illegal store to reducer `acc`: use T.reducer_update(acc[indices], value)",
                   HERE, at("store")):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32", op="sum")
                T.reducer_init(acc)
                for i in T.Parallel(8):
                    acc[0] += A[i]  # ERR-store
                r = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(acc, r)
                B[0] = r[0]


def test_read_before_finalize():
    with raises_at(ReducerEpochError, "illegal read of reducer `acc`", HERE, at("read")):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32", op="sum")
                T.reducer_init(acc)
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                B[0] = acc[0]  # ERR-read
                r = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(acc, r)


def test_clear_on_reducer():
    with raises_at(ReducerEpochError, "illegal store to reducer `acc` (T.fill / T.clear)", HERE, at("clear")):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32", op="sum")
                T.clear(acc)  # ERR-clear
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                r = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(acc, r)
                B[0] = r[0]


def test_double_init_update_outside_parallel_and_finalize_scope():
    with raises_at(ReducerEpochError, "double T.reducer_init on reducer `acc`", HERE, at("twice")):
        @T.prim_func
        def k1(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32")
                T.reducer_init(acc)
                T.reducer_init(acc)  # ERR-twice
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                r = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(acc, r)
                B[0] = r[0]
    with raises_at(ReducerEpochError, "outside any T.Parallel loop is not supported", HERE, at("uniform")):
        @T.prim_func
        def k2(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32")
                T.reducer_init(acc)
                T.reducer_update(acc[0], A[0])  # ERR-uniform
                r = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(acc, r)
                B[0] = r[0]
    with raises_at(ReducerEpochError, "is not in the scope of its T.reducer_init", HERE, at("scope")):
        @T.prim_func
        def k3(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32")
                r = T.alloc_fragment((1,), "float32")
                T.reducer_init(acc)
                for _ in T.serial(2):
                    for i in T.Parallel(8):
                        T.reducer_update(acc[0], A[i])
                    T.finalize_reducer(acc, r)  # ERR-scope
                B[0] = r[0]


def test_bitwise_reducer_needs_integer_dtype():
    with pytest.raises(AssertionError, match="needs an integer dtype") as info:
        T.alloc_reducer((1,), "float32", op="bitand")
    assert "got float32" in str(info.value) and isinstance(info.value, TileLangError)


def test_epoch_with_seed_and_stepped_loop_matches_float64():
    """Init with a seed, updates in a stepped serial loop around a T.Parallel (the parser rebuilds that
    body), finalize into a fragment, optional `if` refinement: the sums match float64."""
    M, N, seed = 16, 64, 3.5

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=64):
            acc = T.alloc_reducer((M,), "float32", op="sum")
            r = T.alloc_fragment((M,), "float32")
            T.reducer_init(acc, seed)
            for j0 in range(0, N, 16):
                for i, j in T.Parallel(M, 16):
                    T.reducer_update(acc[i], A[i, j0 + j] * 2.0)
            if M > 0:
                T.finalize_reducer(acc, r)
            T.copy(r, B)

    kern = tilelang.compile(k, target="cpu")
    a, b = torch.randn(M, N), torch.full((M,), float("nan"))
    kern(a, b)
    torch.testing.assert_close(b.double(), 2 * a.double().sum(1) + seed, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["bitand", "bitor", "bitxor", "max"])
def test_int_epoch_matches_reference(op):
    M, N = 8, 32

    @T.prim_func
    def k(A: T.Tensor((M, N), "int32"), B: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=32):
            acc = T.alloc_reducer((M,), "int32", op=op)
            r = T.alloc_fragment((M,), "int32")
            T.reducer_init(acc)
            for i, j in T.Parallel(M, N):
                T.reducer_update(acc[i], A[i, j])
            T.finalize_reducer(acc, r)
            T.copy(r, B)

    a = torch.randint(-2**31, 2**31 - 1, (M, N), dtype=torch.int64)
    b = torch.full((M,), 7, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(a.to(torch.int32), b)
    ref = a[:, 0].clone()
    for j in range(1, N):
        ref = {"bitand": ref & a[:, j], "bitor": ref | a[:, j], "bitxor": ref ^ a[:, j],
               "max": torch.maximum(ref, a[:, j])}[op]
    assert torch.equal(b.to(torch.int64), ref)


def test_legacy_syntax_without_v2_ops_still_compiles_and_computes():
    """No reducer op touches it: T.clear / `acc[i] +=` / in-place finalize / direct reads stay legal."""
    M, N = 32, 8

    @T.prim_func
    def k(G: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=64):
            g = T.alloc_fragment((M, N), "float32")
            o = T.alloc_fragment((M, N), "float32")
            red = T.alloc_reducer((M,), "float32")
            T.copy(G, g)
            T.clear(red)
            for i, j in T.Parallel(M, N):
                red[i] += g[i, j] * g[i, j]
            T.finalize_reducer(red)
            for i, j in T.Parallel(M, N):
                o[i, j] = g[i, j] - red[i]
            T.copy(o, O)

    g, o = torch.randn(M, N), torch.full((M, N), float("nan"))
    tilelang.compile(k, target="cpu")(g, o)
    gd = g.double()
    torch.testing.assert_close(o.double(), gd - (gd * gd).sum(1, keepdim=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch,exc,text", [
    (0, ValueError, "batch must be >= 1, got 0"), (-1, ValueError, "batch must be >= 1, got -1"),
    (128, ValueError, "batch=128 exceeds total output elements of reducer `o` (64)"),
    (3, ValueError, "batch=3 must evenly divide the 64 output elements of reducer `o`"),
    (2.0, TypeError, "batch must be a Python int, got 2.0")])
def test_finalize_batch_must_divide_the_reducer(batch, exc, text):
    with raises_at(exc, text, HERE, at("batch")):
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=256):
                o = T.alloc_reducer(64, "float32", op="sum", replication="all")
                T.clear(o)
                for i, j in T.Parallel(64, 64):
                    o[i] += A[i, j]
                T.finalize_reducer(o, batch=batch)  # ERR-batch
                T.copy(o, B)


@pytest.mark.parametrize("batch", [1, 4, 64])
def test_finalize_valid_batch_matches_float64(batch):
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            o = T.alloc_reducer(64, "float32", op="max", replication="all")
            T.fill(o, -T.infinity("float32"))
            for i, j in T.Parallel(64, 32):
                o[i] = T.max(o[i], A[i, j])
            T.finalize_reducer(o, batch=batch)
            T.copy(o, B)

    a, b = torch.randn(64, 32), torch.full((64,), float("nan"))
    tilelang.compile(k, target="cpu")(a, b)
    assert torch.equal(b.double(), a.double().amax(1))
