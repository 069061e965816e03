"""`tvm.testing`: the test decorators TileLang programs take from TVM's namespace.

    from tilelang import tvm
    @tvm.testing.requires_package("bitblas")     # skipped under pytest unless bitblas imports
    def test_ladder_gemm(): ...

They are tilelang.testing's: a pytest mark, so calling the function directly still runs it.
"""
from __future__ import annotations


def requires_package(*names: str):
    """Skip (under pytest) unless every named module imports."""
    from .. import testing

    return testing.requires_package(*names)


def requires_cuda(func=None):
    """Skip (under pytest) unless a CUDA device is usable (with or without ())."""
    from .. import testing

    return testing.requires_cuda(func)


__all__ = ["requires_package", "requires_cuda"]
