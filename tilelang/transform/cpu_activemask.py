"""T.activemask() on the CPU backend, where it has a meaning: outside thread-dependent control flow.

Takes: a kernel in tile-level IR, before cpu_threads (thread variables still present). Gives: the
same kernel with every T.activemask() that no thread-dependent branch, loop bound or partial-warp
thread scope encloses replaced by the mask of its warp's lanes that exist: for the block's linear
thread index t of n threads, the lanes 32 * (t // 32) .. min(32 * (t // 32) + 32, n) - 1, as bits
0 .. 31 (0xFFFFFFFF for a full warp, upper 32 bits zero as on CUDA). Every lane of a warp runs
such a statement together on the GPU, so that is the mask CUDA's __activemask() gives there.
Under thread-dependent control flow which lanes run together is the hardware's choice (the
lanes that took the branch, or fewer): the call is left, and lower_tile_ops_cpu refuses it with a
clear error. A kernel that binds no thread variable gets one (its linear thread index).

    with T.Kernel(1, threads=48):            (threads 32 .. 47 form a partial warp)
        t = T.get_thread_binding()
        A[t] = T.activemask()         ->      A[t] = (1 << min(32, 48 - t // 32 * 32)) - 1
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtypes as dt
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.visitor import Mutator, collect
from .thread_dependence import ThreadDependence

WARP = 32


def _is_activemask(n) -> bool:
    return isinstance(n, E.Call) and n.op == "tl_activemask"


def lane_mask(k: S.KernelLaunch) -> tuple:
    """(mask expression, thread vars to add): the active-lane mask of a converged warp in kernel k."""
    X, Y, Z = k.threads
    n = X * Y * Z
    if n % WARP == 0:
        return E.Const(0xFFFFFFFF, dt.uint64), ()
    names = {v.name: v for v in k.thread_vars}
    if names.keys() & {"tx", "ty", "tz"} and (Y * Z == 1 or {"tx", "ty", "tz"} <= names.keys()):
        tx, ty, tz = (names.get(a, E.as_expr(0)) for a in ("tx", "ty", "tz"))
        t, added = tx + ty * X + tz * (X * Y), ()
    elif k.thread_vars and not names.keys() & {"tx", "ty", "tz"}:
        t, added = k.thread_vars[0], ()  # a thread variable of another name is the linear index (cpu_threads)
    else:
        t = E.Var("tl_lane_thread", dt.int32)
        added = (t,)
    lanes = E.binop("min", E.as_expr(WARP), E.as_expr(n) - (t // WARP) * WARP)
    one = E.Const(1, dt.uint64)
    return (one << E.Cast(dt.uint64, lanes)) - one, added


class _Replace(Mutator):
    def __init__(self, deps: ThreadDependence, mask):
        self.deps, self.mask, self.depth = deps, mask, 0

    def _inside(self, node, dependent: bool):
        self.depth += dependent
        try:
            return self.generic(node)
        finally:
            self.depth -= dependent

    def visit_IfThenElse(self, s):
        return self._inside(s, self.deps.dep(s.cond))

    def visit_While(self, s):
        return self._inside(s, self.deps.dep(s.cond))

    def visit_For(self, s):
        return self._inside(s, self.deps.dep((s.start, s.extent)))

    def visit_WarpGroupScope(self, s):
        unit = getattr(s, "unit", 128)
        return self._inside(s, (s.lo * unit) % WARP != 0 or (s.hi * unit) % WARP != 0)

    def visit_Call(self, c):
        if c.op == "tl_activemask" and self.depth == 0:
            return self.mask
        return self.generic(c)


def cpu_activemask(k: S.KernelLaunch) -> S.KernelLaunch:
    """k with its converged T.activemask() calls replaced (module docstring)."""
    if not collect(k.body, _is_activemask):
        return k
    mask, added = lane_mask(k)
    body = _Replace(ThreadDependence(k), mask).visit(k.body)
    if added and not collect(body, lambda n: any(n is v for v in added)):
        added = ()
    return replace(k, body=body, thread_vars=tuple(k.thread_vars) + added)
