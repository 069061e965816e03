"""`simplify_prim_func` / `apply_simplify`: our arithmetic simplifier over a whole prim_func.

    @simplify_prim_func
    def make_kernel(M, N):          # a factory returning a T.prim_func
        @T.prim_func
        def main(...): ...
        return main

    make_kernel(1024, 1024)         # the prim_func, with every expression simplified
"""
from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable

from ..errors import TileLangError
from ..ir.stmt import PrimFunc

__all__ = ["apply_simplify", "simplify_prim_func"]


def apply_simplify(func: PrimFunc, inline_let: bool = False) -> PrimFunc:
    """`func` with its body simplified (constant folding, index arithmetic, dead branches).

    `inline_let` is accepted for source compatibility; let bindings are kept either way."""
    from ..arith.simplify import simplify

    if not isinstance(func, PrimFunc):
        raise TileLangError(f"apply_simplify: expected a T.prim_func, got {type(func).__name__}")
    return replace(func, body=simplify(func.body))


def simplify_prim_func(factory: Callable) -> Callable:
    """Decorate a function returning a T.prim_func so that it returns the simplified one."""

    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        return apply_simplify(factory(*args, **kwargs))

    return wrapper
