"""`simplify_prim_func` / `apply_simplify`: our arithmetic simplifier over a whole prim_func.

    @simplify_prim_func
    def make_kernel(M, N):          # a factory returning a T.prim_func
        @T.prim_func
        def main(...): ...
        return main

    make_kernel(1024, 1024)         # the prim_func, with every expression simplified

As in the public TileLang, tensor parameters the body never reads, writes or views are dropped
from the simplified function's signature (scalar parameters stay), so a kernel written with an
optional `Bias` it does not use is called without it. A tensor whose shape alone names a
symbolic size the rest of the function needs is kept.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace

from ..errors import TileLangError
from ..ir.buffer import Buffer
from ..ir.expr import Var
from ..ir.stmt import PrimFunc
from ..ir.visitor import buffers_used, collect

__all__ = ["apply_simplify", "simplify_prim_func"]


def apply_simplify(func: PrimFunc, inline_let: bool = False) -> PrimFunc:
    """`func` with its body simplified (constant folding, index arithmetic, dead branches) and
    its unused tensor parameters removed.

    `inline_let` is accepted for source compatibility; let bindings are kept either way."""
    from ..arith.simplify import simplify

    if not isinstance(func, PrimFunc):
        raise TileLangError(f"apply_simplify: expected a T.prim_func, got {type(func).__name__}")
    body = simplify(func.body)
    return replace(func, params=_used_params(func.params, body), body=body)


def _shape_vars(buf: Buffer) -> set:
    dims = tuple(buf.shape) + tuple(buf.strides or ())
    return {v for d in dims for v in collect(d, lambda n: isinstance(n, Var))}


def _used_params(params: tuple, body) -> tuple:
    """`params` less the tensors `body` never references (scalars are always kept)."""
    used = {b.uid for b in buffers_used(body)}
    kept = [p for p in params if not isinstance(p, Buffer) or p.uid in used]
    defined = set().union(*(_shape_vars(p) for p in kept if isinstance(p, Buffer)))
    defined |= {p for p in kept if isinstance(p, Var)}
    needed = set(collect(body, lambda n: isinstance(n, Var)))
    for p in kept:
        if isinstance(p, Buffer):
            needed |= _shape_vars(p)
    out = []
    for p in params:
        if isinstance(p, Buffer) and p.uid not in used and not (_shape_vars(p) & (needed - defined)):
            continue
        out.append(p)
    return tuple(out)


def simplify_prim_func(factory: Callable) -> Callable:
    """Decorate a function returning a T.prim_func so that it returns the simplified one."""

    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        return apply_simplify(factory(*args, **kwargs))

    return wrapper
