"""Branches on the thread index that hold tile ops become warp-group scopes (`T.ws`).

Public TileLang programs specialize warp groups with plain `if` statements on
`tx = T.get_thread_binding()`::

    if tx < 128:                       # consumer: tile ops over threads [0, 128)
        T.gemm(...)
    elif tx >= 128 and tx < 256:       # second consumer: threads [128, 256)
        ...
    else:                              # producer: threads [256, 384)
        ...

and mean that the tile ops of each branch are block-level over that branch's threads.
Takes: a PrimFunc whose kernels may hold such IfThenElse chains. Gives: each branch whose
condition is a thread interval (`<`, `<=`, `>`, `>=`, `==` on tx, joined by `and`, possibly with
terms that do not depend on the thread: `if tx < 128 and k > 0`) and that holds a tile op, a
T.Parallel loop or a T.sync_threads() (in either branch of the `if`; the barrier is then the
branch's threads', as in the public TileLang) becomes a WarpGroupScope over that range
(op/hopper.py; unit 128 for whole warp groups, 32 for whole warps, 1 for a range inside one
warp: `if tx == 0`), the thread-free terms an `if` inside it, with the if/elif/else chain
flattened into consecutive scopes (the ranges are disjoint, so the order between them does
not matter). A range that holds tile ops but is neither whole warps nor inside one warp is a
LoweringError (no barrier can synchronize it on the GPU). A condition this pass cannot read as
one thread interval is left an ordinary `if` (thread_branches / cpu_threads then refuse block-level
tile ops under it). In a 2-d or 3-d block, bounds on tx, ty and tz together must make one interval of
the linear thread index tx + X (ty + Y tz): `if ty == 1` of (32, 4) threads is [32, 64), `if ty == 1 and
tx < 4` is [32, 36), `if tx < 4` is four pieces (left an `if`). A thread variable no longer used
afterwards is dropped from the kernel.

    if tx == 0:                         ->   WarpGroupScope(0, 1, unit=1):
        T.copy(S, B[bx, :])                       T.copy(S, B[bx, :])       # one thread copies all of S
"""
from __future__ import annotations

from dataclasses import replace

from ..arith.simplify import const_int
from ..errors import LoweringError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.visitor import Mutator, collect, substitute
from ..op import hopper as H

W = 32  # threads per warp
BIG = 1 << 30


def _bound(cond, tv) -> tuple | None:
    """[lo, hi) of tv where `cond` holds, or None when cond is not one bound test of tv."""
    if not (isinstance(cond, E.Binary) and cond.op in ("<", "<=", ">", ">=", "==")):
        return None
    op, a, b = cond.op, cond.a, cond.b
    if isinstance(b, E.Var) and b == tv:  # c < tv  ->  tv > c
        op, a, b = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op], b, a
    if not (isinstance(a, E.Var) and a == tv):
        return None
    c = const_int(b)
    if c is None:
        return None
    return {"<": (-BIG, c), "<=": (-BIG, c + 1), ">": (c + 1, BIG), ">=": (c, BIG), "==": (c, c + 1)}[op]


def _terms(cond) -> list:
    if isinstance(cond, E.Binary) and cond.op == "&&":
        return _terms(cond.a) + _terms(cond.b)
    return [cond]


def thread_interval(cond, axes: dict) -> tuple | None:
    """(lo, hi, rest): cond holds for the linear thread index in [lo, hi) where `rest` (the terms that read
    no thread variable, joined by &&; None when there are none) holds. axes: thread variable -> (its step
    in the linear index, its extent). None when cond has a term on a thread variable that is not a bound
    test of it, or its bounds are not one interval of the linear index: below the slowest axis with more
    than one value left, every axis must be whole (`if ty == 1 and tx < 4` of (32, 4) threads: [32, 36);
    `if tx < 4` there: four pieces, None)."""
    bounds = {v: (0, ext) for v, (_, ext) in axes.items()}
    rest, found = [], False
    for t in _terms(cond):
        for v in axes:
            b = _bound(t, v)
            if b is not None:
                bounds[v] = (max(bounds[v][0], b[0]), min(bounds[v][1], b[1]))
                found = True
                break
        else:
            if collect(t, lambda n: isinstance(n, E.Var) and n in axes):
                return None
            rest.append(t)
    if not found:
        return None
    if any(lo >= hi for lo, hi in bounds.values()):  # no thread takes it
        return 0, 0, _and(rest)
    order = sorted(axes, key=lambda v: -axes[v][0])  # slowest first
    base = 0
    for i, v in enumerate(order):
        (step, _), (lo, hi) = axes[v], bounds[v]
        if all(bounds[f] == (0, axes[f][1]) for f in order[i + 1:]):
            return base + lo * step, base + hi * step, _and(rest)
        if hi - lo != 1:
            return None
        base += lo * step
    return None


def _and(terms):
    out = terms[0] if terms else None
    for t in terms[1:]:
        out = E.logical_and(out, t)
    return out


def _has_tile_op(s) -> bool:
    """A tile op, a nested scope, a T.Parallel loop (spread over the branch's threads, as the tile ops),
    or a T.sync_threads() (a barrier of the branch's threads)."""
    return bool(collect(s, lambda n: isinstance(n, (S.TileOp, H.WarpGroupScope))
                        or isinstance(n, S.For) and n.kind == "parallel"
                        or isinstance(n, E.Call) and n.op == "tl_sync_threads" and not n.args))


class _Scopes(Mutator):
    def __init__(self, axes: dict, threads: int):
        self.axes = axes  # thread variable -> (its step in the linear thread index, its extent)
        self.threads = threads
        self.range = (0, threads)

    def scope(self, lo, hi, body, span=None, cond=None):
        """body on threads [lo, hi) (where `cond` holds): a scope, or the scopes of its own thread branches
        (`if tx >= 16:` around `if tx < 32:`), or a plain `if cond` when body holds no tile op and no scope fits."""
        if lo >= hi:
            return None
        fits = H.scope_unit(lo, hi) is not None
        if not fits and not _has_tile_op(body):
            return S.IfThenElse(cond, body, None, span=span)
        outer, self.range = self.range, (lo, hi)
        try:
            inner = self.visit(body)
        finally:
            self.range = outer
        parts = inner.stmts if isinstance(inner, S.SeqStmt) else (inner,)
        if parts and all(isinstance(p, H.WarpGroupScope) for p in parts):
            return inner  # an elif chain, or nested branches: their scopes are narrower
        if not fits:
            raise LoweringError(f"a tile op or T.Parallel loop inside a branch over threads [{lo}, {hi}): such a branch "
                                f"must cover whole warps (threads [{lo // W * W}, {-(-hi // W) * W})) or lie inside "
                                "one warp, so that its threads can synchronize between its tile ops", span)
        return H.scope_over(lo, hi, inner, span=getattr(body, "span", None))

    def visit_IfThenElse(self, s: S.IfThenElse):
        iv = thread_interval(s.cond, self.axes)
        has_else = s.else_case is not None and _has_tile_op(s.else_case)
        if iv is None or not (_has_tile_op(s.then_case) or has_else):
            return self.generic(s)
        lo, hi = self.range
        t_lo, t_hi, rest = max(lo, iv[0]), min(hi, iv[1]), iv[2]
        span = s.span
        if rest is not None:  # `if tx < 128 and k > 0`: the scope, and the thread-free test inside it
            if s.else_case is not None:
                return self.generic(s)  # the else branch is not one interval of threads
            return self.scope(t_lo, t_hi, S.IfThenElse(rest, s.then_case, None, span=span), span, s.cond) or S.seq()
        if t_lo >= t_hi:  # the branch never runs in this range
            e_ranges = [(lo, hi)]
        else:
            e_ranges = [r for r in ((lo, t_lo), (t_hi, hi)) if r[0] < r[1]]
        parts = [self.scope(t_lo, t_hi, s.then_case, span, s.cond)]
        if s.else_case is not None:
            if len(e_ranges) == 1:
                parts.append(self.scope(*e_ranges[0], s.else_case, span, E.logical_not(s.cond)))
            elif has_else:  # the else branch would be two intervals
                return self.generic(s)
            else:  # per-thread code on the threads outside [t_lo, t_hi)
                parts.append(S.IfThenElse(E.logical_not(s.cond), s.else_case, None, span=span))
        return S.seq(*[p for p in parts if p is not None])


def thread_axes(k: S.KernelLaunch) -> dict:
    """The kernel's thread variables -> (step in the linear thread index tx + X (ty + Y tz), extent): the
    `axes` of thread_interval."""
    X, Y, Z = k.threads
    steps = {"tx": (1, X), "ty": (X, Y), "tz": (X * Y, Z)}
    return {v: steps[v.name if v.name in ("ty", "tz") else "tx"] for v in k.thread_vars}


def thread_scopes(k: S.KernelLaunch) -> S.KernelLaunch:
    if not k.thread_vars:
        return k
    X, Y, Z = k.threads
    body = _Scopes(thread_axes(k), X * Y * Z).visit(_conditions_read_through_lets(k.body, thread_axes(k)))
    if body is k.body:
        return k
    used = {v.uid for v in collect(body, lambda n: isinstance(n, E.Var))}
    return replace(k, body=body, thread_vars=tuple(tv for tv in k.thread_vars if tv.uid in used))


class _LetConditions(Mutator):
    def __init__(self, values: dict, axes: dict):
        self.values, self.axes = values, axes

    def visit_IfThenElse(self, s: S.IfThenElse):
        s = self.generic(s)
        cond = substitute(s.cond, self.values)
        if cond is s.cond or not collect(cond, lambda n: isinstance(n, E.Var) and n in self.axes):
            return s
        return replace(s, cond=cond)


def _conditions_read_through_lets(body, axes: dict):
    """`c = tx < 64` then `if c:` is a branch on threads [0, 64): an if's condition gets the values of the
    lets it names, where those read no buffer and call nothing (the same value wherever it is read), so that
    this pass, thread_sync and cpu_threads see the thread interval (before, such a branch was an opaque one:
    no barrier for a race inside it on either backend). Only conditions that then read a thread variable
    change."""
    values = {}
    for s in collect(body, lambda n: isinstance(n, S.LetStmt)):  # in program order: a let of a let reads through
        if not collect(s.value, lambda n: isinstance(n, (E.BufferLoad, E.Call))):
            values[s.var] = substitute(s.value, values)
    return _LetConditions(values, axes).visit(body) if values else body


class _Kernels(Mutator):
    def visit_KernelLaunch(self, k: S.KernelLaunch):
        return thread_scopes(k)


def thread_scopes_pass(func: S.PrimFunc, ctx=None) -> S.PrimFunc:
    return replace(func, body=_Kernels().visit(func.body))
