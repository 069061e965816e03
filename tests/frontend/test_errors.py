"""Errors in kernel code: exception type, message text, and the user's file:line:col with a caret.

Each failing kernel marks its offending line with a `# ERR-<name>` comment; the test finds
that line, so editing this file cannot silently break the location checks.
"""
import re
import traceback

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import (DSLNameError, DSLSyntaxError, DSLTypeError, NonConstantShapeError, ShapeMismatchError,
                             TileLangError)
from tilelang.testing import line_of, raises_at

HERE = __file__


def at(marker):
    return line_of(HERE, f"# ERR-{marker}")


def col_of(marker, text):
    """1-based column of `text` on the marked line."""
    with open(HERE) as f:
        line = f.read().splitlines()[at(marker) - 1]
    return line.index(text) + 1


def test_unknown_name_points_at_the_name():
    with raises_at(DSLNameError, "name 'undefined_thing' is not defined", HERE, at("unknown")) as info:
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    A[i] = undefined_thing + 1  # noqa: F821  # ERR-unknown
    msg = str(info.value)
    assert f"{HERE}:{at('unknown')}:{col_of('unknown', 'undefined_thing')}:" in msg
    # the caret sits under the name only
    assert re.search(r"\n {4}" + " " * (col_of("unknown", "undefined_thing") - 1) + r"\^{15}$", msg), msg


def test_misspelt_local_suggests_the_right_name():
    with raises_at(DSLNameError, "name 'A_shred' is not defined (did you mean A_shared?)", HERE, at("typo")):
        @T.prim_func
        def k(A: T.Tensor((128, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_shared = T.alloc_shared((128, 64), "float32")
                T.copy(A, A_shred)  # noqa: F821  # ERR-typo


def test_misspelt_language_function():
    with raises_at(DSLNameError, "T.cpy does not exist (did you mean T.copy?)", HERE, at("T-typo")):
        @T.prim_func
        def k(A: T.Tensor((128, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_shared = T.alloc_shared((128, 64), "float32")
                T.cpy(A, A_shared)  # ERR-T-typo


def test_wrong_argument_type_to_copy():
    with raises_at(DSLTypeError, "T.copy dst: expected a buffer, slice or corner, got int: 3", HERE, at("copy-type")):
        @T.prim_func
        def k(A: T.Tensor((128, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.copy(A, 3)  # ERR-copy-type


def test_wrong_argument_type_to_fill_and_reduce():
    with raises_at(DSLTypeError, "T.fill: expected a buffer", HERE, at("fill-type")):
        @T.prim_func
        def k(A: T.Tensor((128, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.fill(3.0, 0)  # ERR-fill-type
    with raises_at(DSLTypeError, "T.reduce_sum: expected two buffers (src, dst)", HERE, at("reduce-type")):
        @T.prim_func
        def k2(A: T.Tensor((128, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_fragment((64, 32), "float32")
                T.reduce_sum(a, 5, dim=1)  # ERR-reduce-type


def test_unknown_dtype():
    with raises_at(DSLTypeError, "unknown dtype 'floaty'", HERE, at("dtype")):
        @T.prim_func
        def k(A: T.Tensor((128, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((128, 64), "floaty")  # ERR-dtype


def test_mismatched_copy_extents():
    with raises_at(ShapeMismatchError, "T.copy: source tile A has extents (64, 64) but destination S has (64, 32)",
                   HERE, at("copy-shape")):
        @T.prim_func
        def k(A: T.Tensor((128, 128), "float32")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((64, 32), "float32")
                T.copy(A[0:64, 0:64], S)  # ERR-copy-shape


def test_mismatched_gemm_k():
    with raises_at(ShapeMismatchError, "T.gemm: K of A (a: 32) does not match K of B (b: 16)", HERE, at("gemm-k")):
        @T.prim_func
        def k(A: T.Tensor((128, 128), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((16, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # ERR-gemm-k


def test_mismatched_gemm_output():
    with raises_at(ShapeMismatchError, "T.gemm: A@B is (64, 64) but C (c) is (64, 32)", HERE, at("gemm-c")):
        @T.prim_func
        def k(A: T.Tensor((128, 128), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((32, 64), "float16")
                c = T.alloc_fragment((64, 32), "float32")
                T.gemm(a, b, c)  # ERR-gemm-c


def test_non_constant_tile_shape():
    m = T.dynamic("m")
    with raises_at(NonConstantShapeError, "T.alloc_shared: tile shapes must be compile-time constants, got m",
                   HERE, at("dyn-shape")):
        @T.prim_func
        def k(A: T.Tensor((m, 128), "float32")):
            with T.Kernel(T.ceildiv(m, 64), threads=128) as bx:
                a = T.alloc_shared((m, 32), "float32")  # ERR-dyn-shape


def test_store_with_wrong_number_of_indices():
    with raises_at(DSLTypeError, "A has 2 dims but the store uses 1 indices", HERE, at("rank")):
        @T.prim_func
        def k(A: T.Tensor((128, 128), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    A[i] = 1.0  # ERR-rank


def test_tile_op_outside_kernel():
    with raises_at(DSLSyntaxError, "T.copy must be used inside `with T.Kernel(...)`", HERE, at("outside")):
        @T.prim_func
        def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
            T.copy(A, B)  # ERR-outside


def test_unsupported_statement():
    with raises_at(DSLSyntaxError, "`Try` statements are not supported in kernels", HERE, at("try")):
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                try:  # ERR-try
                    A[0] = 1.0
                except Exception:
                    pass


def test_nested_function_in_kernel():
    with raises_at(DSLSyntaxError, "nested functions are not supported inside a kernel", HERE, at("nested")):
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                def helper():  # ERR-nested
                    pass


def test_runtime_value_used_as_python_bool():
    # Python's max() compares with `>` and then needs a bool: T.max is the kernel's max
    with raises_at(DSLTypeError, "was used where Python needs a bool", HERE, at("bool")):
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A[1] = max(A[0], 1.0)  # ERR-bool


def test_missing_parameter_annotation():
    with raises_at(DSLTypeError, "parameter 'A' needs an annotation", HERE, at("annot")):
        @T.prim_func
        def k(A):  # ERR-annot
            with T.Kernel(1, threads=128) as bx:
                pass


@T.macro
def bad_macro(buf):
    T.copy(buf, 7)  # ERR-macro


def test_error_inside_a_macro_points_at_the_macro_line():
    with raises_at(DSLTypeError, "T.copy dst: expected a buffer", HERE, at("macro")):
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                bad_macro(A)


def test_error_in_a_lazy_jit_factory_hides_compiler_frames():
    @tilelang.jit(target="cpu")
    def factory(n):
        @T.prim_func
        def k(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.copy(A, A_missing)  # noqa: F821  # ERR-jit
        return k

    with raises_at(DSLNameError, "name 'A_missing' is not defined", HERE, at("jit")) as info:
        factory(128)
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert HERE in frames  # the user's own frames stay
    internal = [f for f in frames if "/tilelang/" in f and not f.endswith("tilelang/errors.py")]
    assert len(internal) <= 2, frames  # at most the entry points the error passed through
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_error_in_an_eager_kernel_points_at_its_line():
    @tilelang.jit(target="cpu")
    def eager_add(A, B):
        N = T.const("N")
        A: T.Tensor((N,), "float32")
        B: T.Tensor((N,), "float32")
        C = T.empty((N,), "float32")
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(N):
                C[i] = A[i] + B[i] * missing_scale  # noqa: F821  # ERR-eager
        return C

    import torch

    with raises_at(DSLNameError, "name 'missing_scale' is not defined", HERE, at("eager")):
        eager_add(torch.ones(8), torch.ones(8))


def test_every_user_error_is_a_tilelang_error():
    for cls in (DSLNameError, DSLSyntaxError, DSLTypeError, NonConstantShapeError, ShapeMismatchError):
        assert issubclass(cls, TileLangError)


def test_internal_frames_can_be_shown(monkeypatch):
    monkeypatch.setenv("TILELANG_SHOW_INTERNAL_FRAMES", "1")
    with pytest.raises(DSLTypeError) as info:
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.copy(A, 3)
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    assert any(f.endswith("frontend/parser.py") for f in frames)


def test_error_from_a_call_names_the_call():
    with raises_at(DSLTypeError, "T.Kernel: expected a number or an expression, got str: 'x'", HERE, at("kernel")):
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads="x") as bx:  # ERR-kernel
                pass
