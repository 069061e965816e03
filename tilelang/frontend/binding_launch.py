"""TVM-style launches: `for v in T.thread_binding(n, thread="blockIdx.x")` outside any `with T.Kernel`.

The public TileLang accepts the TVM script form of a kernel: the body of a prim_func is a nest of
thread-binding loops, one per launched axis, and every statement inside runs on every thread (as a
`with T.Kernel` body does). This module reads such a nest as one launch:

    for bx in T.thread_binding(8, thread="blockIdx.x"):         with T.Kernel(8, 1, threads=(128, 2)) as (bx, _):
        for ty in T.thread_binding(2, thread="threadIdx.y"): ->      ty = <threadIdx.y>
            for tx in T.thread_binding(128, "threadIdx.x"):          tx = <threadIdx.x>
                body                                                 body

The grid comes from the blockIdx bindings (an axis not bound launches 1 block), the threads from the
threadIdx bindings (an axis not bound has 1 thread). Every binding loop in the outermost loop's body
is found before the body is parsed, so the T.* calls inside see the whole launch; a binding loop
inside the launch then only names that axis' index (language/thread.py checks its extent).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..errors import DSLSyntaxError, DSLTypeError, TileLangError
from ..ir import expr as E
from ..ir import stmt as S
from . import builder as B

BLOCK_AXES = {"blockIdx.x": 0, "blockIdx.y": 1, "blockIdx.z": 2}
THREAD_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


@dataclass(frozen=True)
class LaunchAxis:
    """What `T.thread_binding(...)` gives outside a kernel: one launched axis and its extent."""
    thread: str
    extent: object


def is_binding_call(parser, call) -> bool:
    """Whether the AST node `call` is a call of T.thread_binding (evaluating only its callee)."""
    from ..language.thread import thread_binding

    if not isinstance(call, ast.Call):
        return False
    try:
        return parser.eval(call.func) is thread_binding
    except TileLangError:
        return False


def launch_axes(parser, node) -> dict:
    """{axis name: extent} of every thread-binding loop in the loop nest `node` (outermost included)."""
    axes: dict = {}
    for n in ast.walk(node):
        if not (isinstance(n, ast.For) and is_binding_call(parser, n.iter)):
            continue
        ax = parser.eval(n.iter)
        if not isinstance(ax, LaunchAxis):
            raise parser.error(DSLSyntaxError, "T.thread_binding loops of a launch cannot be nested in a "
                               "`with T.Kernel`", n)
        prev = axes.setdefault(ax.thread, ax.extent)
        if str(const_int(prev) if const_int(prev) is not None else prev) != \
                str(const_int(ax.extent) if const_int(ax.extent) is not None else ax.extent):
            raise parser.error(DSLTypeError, f"{ax.thread} is bound twice in one launch with different extents "
                               f"({prev} and {ax.extent})", n)
    return axes


def launch_shape(axes: dict, parser, node) -> tuple:
    """(grid, threads) of the launch whose bound axes are `axes`."""
    used = [BLOCK_AXES[a] for a in axes if a in BLOCK_AXES]
    grid = tuple(axes.get(name, 1) for name in list(BLOCK_AXES)[:max(used, default=0) + 1])
    grid = tuple(const_int(g) if const_int(g) is not None else E.as_expr(g) for g in grid)
    threads = []
    for name in THREAD_AXES:
        t = const_int(axes.get(name, 1))
        if t is None or t <= 0:
            raise parser.error(DSLTypeError, f"T.thread_binding(..., thread={name!r}): the thread extent must be a "
                               f"positive integer constant, got {axes[name]!r}", node)
        threads.append(t)
    return grid, tuple(threads)


def parse_binding_launch(parser, node, axis: LaunchAxis) -> None:
    """Parse the thread-binding loop `node` (outside any kernel) and its body as one kernel launch."""
    builder = parser.builder
    if builder.eager is not None and builder.eager.symbolic:
        return  # the first eager parse only reads the declarations outside the kernels
    grid, threads = launch_shape(launch_axes(parser, node), parser, node)
    bvars = tuple(E.Var(builder.unique(("bx", "by", "bz")[i]), dt.int32) for i in range(len(grid)))
    builder.kernel = B.KernelContext(bvars, grid, threads)
    try:
        body = bind_and_parse(parser, node, parser.eval(node.iter))  # now inside the kernel: the axis' index
        k = builder.kernel
    finally:
        builder.kernel = None
    builder.emit(S.KernelLaunch(bvars, grid, threads, tuple(k.thread_vars), body, span=parser.span(node)))


def bind_and_parse(parser, node, index: E.Var):
    """Inside a kernel: the thread-binding loop `node` binds its target to `index` (the block or thread
    index T.thread_binding gave) and its body runs once on every thread, as the kernel's other statements."""
    if not isinstance(node.target, ast.Name):
        raise parser.error(DSLSyntaxError, "a T.thread_binding loop binds one name", node)
    if node.orelse:
        raise parser.error(DSLSyntaxError, "a T.thread_binding loop takes no `else`", node)
    parser.scope[node.target.id] = index
    return parser.block(node.body)
