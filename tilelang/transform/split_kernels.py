"""Split a prim_func into its kernel launches and the global workspaces they share.

Expects: tile-level IR (the parser's output) whose top level is a sequence of
`T.alloc_global` declarations (Allocate of a "global" buffer), lets on parameters and
dims, and `with T.Kernel` blocks.
Guarantees: `LaunchPlan.kernels` holds one single-kernel PrimFunc per `with T.Kernel`, in
program order, named `<func>_kernel_<i>` when there are several; each takes the function's
parameters followed by every workspace, and has the lets written before it substituted
into its body. `LaunchPlan.workspaces` are the buffers the host allocates per call.

    A, B, Out                                   kernel_0(A, B, Out, part):
    part = T.alloc_global((M, 4), f32)              with T.Kernel(...): ... part[...] = ...
    with T.Kernel(...): ... part[...] = ...  ->  kernel_1(A, B, Out, part):
    with T.Kernel(...): ... Out[...] = part[...]    with T.Kernel(...): ... Out[...] = part[...]
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import LoweringError
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..ir.visitor import collect, substitute


@dataclass(frozen=True)
class LaunchPlan:
    workspaces: tuple  # Buffers declared with T.alloc_global, allocated by the host per call
    kernels: tuple  # single-kernel PrimFuncs, launched in this order

    def __str__(self) -> str:
        ws = ", ".join(f"{b.name}({', '.join(str(d) for d in b.shape)}):{b.dtype}" for b in self.workspaces) or "none"
        return f"LaunchPlan(workspaces: {ws}; kernels: {', '.join(k.name for k in self.kernels)})"


def workspaces(func: PrimFunc) -> tuple:
    """The T.alloc_global buffers of `func` (top-level Allocates of global buffers), in order."""
    return tuple(s.buffer for s in S.top_level(func.body) if isinstance(s, S.Allocate) and s.buffer.scope == "global")


def is_multi_kernel(func: PrimFunc) -> bool:
    """Whether `func` needs the launch sequence: several kernels or host-allocated workspaces."""
    return len(collect(func.body, lambda n: isinstance(n, S.KernelLaunch))) > 1 or bool(workspaces(func))


def split_kernels(func: PrimFunc) -> LaunchPlan:
    ws = workspaces(func)
    lets: dict = {}
    launches = []
    for st in S.top_level(func.body):
        if isinstance(st, S.KernelLaunch):
            launches.append(substitute(st, lets) if lets else st)
        elif isinstance(st, S.LetStmt):
            lets[st.var] = substitute(st.value, lets) if lets else st.value
        elif isinstance(st, S.Allocate) and st.buffer.scope == "global":
            continue
        else:
            raise LoweringError(f"{func.name}: outside `with T.Kernel` a prim_func may only declare workspaces "
                                f"(T.alloc_global) and Python-level values; found a {type(st).__name__} statement",
                                getattr(st, "span", None) or func.span)
    if not launches:
        raise LoweringError(f"{func.name}: a prim_func needs at least one `with T.Kernel(...)`", func.span)
    params = tuple(func.params) + ws
    if len(launches) == 1:
        names = [func.name]
    else:
        names = [f"{func.name}_kernel_{i}" for i in range(len(launches))]
    kernels = tuple(PrimFunc(n, params, k, func.attrs, span=k.span or func.span) for n, k in zip(names, launches))
    return LaunchPlan(ws, kernels)
