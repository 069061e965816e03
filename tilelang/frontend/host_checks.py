"""`assert` outside `with T.Kernel`: a check the host makes before launching.

    @tilelang.jit
    def copy(A, B):
        n, m = T.dynamic("n, m")
        A: T.Tensor[[n], T.float32]
        B: T.Tensor[[m], T.float32]
        assert n == m, "A and B differ in length"     # host check: read at each call
        with T.Kernel(...): ...

A condition on Python values (or on T.const dims, which are numbers by then) is checked while
the kernel is built. One that is decided by the symbolic dims alone (`n == n`, `n * 2 >= n + n`)
is settled then as well. Any other is recorded on the PrimFunc (attr `tl.host_asserts`: a tuple
of (condition, message, span)) and evaluated by the call's argument binder once the arguments
have bound every symbolic dim (jit/args.py); a false one raises AssertionError with the message.

`T.assume(cond)` inside the kernel is a promise; when the host can evaluate it (it reads only
scalar parameters and symbolic dims) it is recorded the same way with kind "assume", checked at
each call, and a false one raises RuntimeError("Assume: cond"), as the public TileLang does. One
that reads device values (thread indices, buffers, local variables) stays an unchecked promise;
the argument binder tells the two apart, since it knows which values the arguments bind.
"""
from __future__ import annotations

from ..arith.simplify import const_int, const_value, simplify
from ..errors import DSLTypeError, Span
from ..ir import expr as E
from . import builder as B

HOST_ASSERTS = "tl.host_asserts"

_CMP = {"==": lambda d: d == 0, "!=": lambda d: d != 0, "<": lambda d: d < 0, "<=": lambda d: d <= 0,
        ">": lambda d: d > 0, ">=": lambda d: d >= 0}


def decide(cond) -> bool | None:
    """True/False when `cond` holds or fails whatever the symbolic dims are; None when it depends on them."""
    c = const_value(simplify(cond))
    if c is not None:
        return bool(c)
    if isinstance(cond, E.Binary) and cond.op in _CMP and cond.a.dtype.is_int and cond.b.dtype.is_int:
        d = const_int(simplify(cond.a - cond.b))
        if d is not None:
            return _CMP[cond.op](d)
    return None


def host_assert(cond: E.Expr, msg: str, span: Span | None) -> None:
    """Settle `assert cond, msg` now if the dims decide it, else record it for the host."""
    cond = B.inline_lets(cond)  # `n, = A.shape` names A's dim through a let
    verdict = decide(cond)
    if verdict is True:
        return
    if verdict is False:
        raise DSLTypeError(f"assert failed while building the kernel: {msg}", span)
    b = B.current("assert")
    if not (cond.dtype.is_int or cond.dtype.is_bool):
        raise DSLTypeError(f"assert outside `with T.Kernel`: expected a condition on integer dims, got `{cond}` "
                           f"({cond.dtype})", span)
    b.func_attrs = {**b.func_attrs, HOST_ASSERTS: tuple(b.func_attrs.get(HOST_ASSERTS, ())) + ((cond, msg, span),)}


def host_assume(cond, span: Span | None) -> None:
    """Record `T.assume(cond)` for the host to check at each call (unless the dims already decide it true)."""
    b = B.current("T.assume")
    cond = B.inline_lets(E.as_expr(cond))
    if not (cond.dtype.is_int or cond.dtype.is_bool) or decide(cond) is True:
        return
    entry = (cond, f"Assume: {cond}", span, "assume")
    b.func_attrs = {**b.func_attrs, HOST_ASSERTS: tuple(b.func_attrs.get(HOST_ASSERTS, ())) + (entry,)}


def host_launch_check(cond, msg: str) -> None:
    """Record a launch condition on the symbolic dims (a cluster launch's grid divisibility) for the
    host to check at each call; a false one raises ValueError(msg)."""
    b = B.current("a launch check")
    cond = B.inline_lets(E.as_expr(cond))
    if decide(cond) is True:
        return
    entry = (cond, msg, b.span, "launch")
    b.func_attrs = {**b.func_attrs, HOST_ASSERTS: tuple(b.func_attrs.get(HOST_ASSERTS, ())) + (entry,)}
