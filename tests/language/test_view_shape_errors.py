"""T.reshape / T.view whose new shape does not cover the source's storage: a ShapeMismatchError that is
also an AssertionError (what the public TileLang raises), naming both shapes and pointing at the line."""
import pytest

import tilelang.language as T
from tilelang.errors import ShapeMismatchError, TileLangError
from tilelang.testing import line_of, raises_at

HERE = __file__


def test_shape_mismatch_is_an_assertion_error():
    assert issubclass(ShapeMismatchError, AssertionError)
    assert issubclass(ShapeMismatchError, TileLangError)


@pytest.mark.parametrize("op", ["reshape", "view"])
def test_reshape_and_view_size_mismatch(op):
    fn = getattr(T, op)
    with raises_at(AssertionError, "(32, 33) of float32 (33792 bits) does not cover the same storage as A(1024,)",
                   HERE, line_of(HERE, "# ERR" + "-size")) as info:
        @T.prim_func
        def k(A: T.Tensor((1024,), "float32"), B: T.Tensor((32, 33), "float32")):
            with T.Kernel(1) as _:
                R = fn(A, [32, 33])  # ERR-size
                T.copy(R, B)
    assert isinstance(info.value, ShapeMismatchError)
    assert f"T.{op}" in str(info.value)


def test_view_dtype_change_mismatch():
    with raises_at(AssertionError, "(32, 65) of float16 (33280 bits) does not cover the same storage as A(1024,) "
                   "of float32 (32768 bits)", HERE, line_of(HERE, "# ERR" + "-dt")) as info:
        @T.prim_func
        def k(A: T.Tensor((1024,), "float32"), B: T.Tensor((32, 65), "float16")):
            with T.Kernel(1) as _:
                R = T.view(A, [32, 65], dtype="float16")  # ERR-dt
                T.copy(R, B)
    assert isinstance(info.value, ShapeMismatchError)
