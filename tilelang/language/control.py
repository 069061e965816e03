"""Control flow spelled as calls, for programs written against TVM's script builder:
`T.loop_break()`, `T.evaluate(T.break_loop())`, `T.evaluate(T.continue_loop())` (the same as
Python's `break` / `continue` in a T.serial / while loop), `T.Assert(cond, msg)` (a
T.device_assert inside a kernel) and `T.thread_return()` (not supported).

    for k in T.serial(n):          for k in T.serial(n):
        if A[k] < 0:         ==        if A[k] < 0:
            T.loop_break()                 break
"""
from __future__ import annotations

from ..arith.simplify import const_value
from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir import stmt as S
from ..ir.expr import as_expr
from .debug import device_assert
from .thread import EMITTED


def loop_break():
    """Leave the innermost loop, like Python's `break` there."""
    B.current("T.loop_break").emit(S.Break())
    return EMITTED


def break_loop(span=None):
    """TVM's spelling of `break` (`T.evaluate(T.break_loop())`)."""
    B.current("T.break_loop").emit(S.Break())
    return EMITTED


def continue_loop(span=None):
    """TVM's spelling of `continue` (`T.evaluate(T.continue_loop())`)."""
    B.current("T.continue_loop").emit(S.Continue())
    return EMITTED


def thread_return(span=None):
    """Ending one thread early is not supported: the threads of a block must all reach its
    barriers (and the CPU backend runs them in lockstep between barriers)."""
    raise DSLTypeError("T.thread_return() is not supported: guard the rest of the thread's work with "
                       "`if` (for example `if tx < n:`) instead of returning early")


def Assert(condition, message, error_kind="RuntimeError"):  # noqa: N802  (the public name)
    """Check `condition`: inside a kernel it is T.device_assert(condition, message); outside, a
    condition known when the kernel is built is checked then (a false one raises)."""
    b = B.current("T.Assert")
    if b.kernel is not None:
        device_assert(condition, str(message))
        return EMITTED
    c = condition if isinstance(condition, bool) else const_value(as_expr(condition))
    if c is None:
        raise DSLTypeError(f"T.Assert outside `with T.Kernel` needs a condition known when the kernel is built, got "
                           f"{condition}; move it inside the kernel (a device assert)")
    if not c:
        raise DSLTypeError(f"T.Assert failed ({error_kind}): {message}")
    return EMITTED
