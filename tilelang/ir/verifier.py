"""IR invariants every pass must keep; `verify(func)` lists violations, `check(func)` raises.

Checked:
  * every Var is defined before use: a scalar parameter, a symbolic dim of a parameter's
    shape, a loop variable inside its loop, a LetStmt variable after it in its sequence, a
    block/thread variable inside its T.Kernel;
  * every Buffer is a parameter or allocated (Allocate) before use, in an enclosing scope;
  * loads, stores and regions index a buffer with exactly one index/range per dimension;
  * loop extents, indices and region bounds are integer expressions.

Tests run it after every pass of each target's pass list (tests/ir/test_verifier.py).

Example::

    problems = verify(func)      # [] when the IR is well formed
    check(func, after="lower_tile_ops_cpu")   # raises IRVerifyError listing every problem
"""
from __future__ import annotations

import dataclasses

from ..errors import TileLangError
from . import stmt as S
from .buffer import Buffer, BufferRegion
from .expr import BufferLoad, Expr, Var

_MAX_REPORTED = 20


class IRVerifyError(TileLangError):
    """A pass produced IR that breaks an invariant (a compiler bug)."""


class _Scope:
    def __init__(self, vars_=(), bufs=()):
        self.vars = set(vars_)
        self.bufs = set(bufs)

    def child(self) -> "_Scope":
        return _Scope(self.vars, self.bufs)


class _Verifier:
    def __init__(self):
        self.problems: list[str] = []

    def fail(self, msg: str, node=None) -> None:
        span = getattr(node, "span", None)
        self.problems.append(f"{msg}" + (f" (at {span})" if span is not None else ""))

    # ------------------------------------------------------------ statements
    def stmt(self, s, sc: _Scope) -> None:
        fn = getattr(self, "s_" + type(s).__name__, None)
        if fn is not None:
            fn(s, sc)
        else:
            self.generic(s, sc, s)

    def s_SeqStmt(self, s, sc):
        inner = sc.child()  # LetStmt/Allocate scope over the rest of this sequence only
        for x in s.stmts:
            self.stmt(x, inner)

    def s_LetStmt(self, s, sc):
        self.expr(s.value, sc, s)
        sc.vars.add(s.var)

    def s_Allocate(self, s, sc):
        if s.init is not None:
            self.generic(s.init, sc, s)
        sc.bufs.add(s.buffer.uid)

    def s_DeclBuffer(self, s, sc):
        if not hasattr(s.data, "uid"):
            self.expr(s.data, sc, s)
        sc.bufs.add(s.buffer.uid)

    def s_For(self, s, sc):
        for e in (s.start, s.extent):
            self.expr(e, sc, s)
            self.integer(e, f"loop {s.var.name}: bound {e}", s)
        inner = sc.child()
        inner.vars.add(s.var)
        self.stmt(s.body, inner)

    def s_KernelLaunch(self, s, sc):
        for g in s.grid:
            if isinstance(g, Expr):
                self.expr(g, sc, s)
        inner = sc.child()
        inner.vars.update(s.block_vars)
        inner.vars.update(s.thread_vars)
        self.stmt(s.body, inner)

    def s_IfThenElse(self, s, sc):
        self.expr(s.cond, sc, s)
        self.stmt(s.then_case, sc.child())
        if s.else_case is not None:
            self.stmt(s.else_case, sc.child())

    def s_While(self, s, sc):
        self.expr(s.cond, sc, s)
        self.stmt(s.body, sc.child())

    def s_BufferStore(self, s, sc):
        self.buffer_use(s.buffer, len(s.indices), sc, s, "store")
        for i in s.indices:
            self.expr(i, sc, s)
            self.integer(i, f"store to {s.buffer.name}: index {i}", s)
        self.expr(s.value, sc, s)

    def generic(self, node, sc: _Scope, owner) -> None:
        """Tile ops and statements this module does not know: check every IR value inside."""
        if isinstance(node, (tuple, list)):
            for x in node:
                self.generic(x, sc, owner)
        elif isinstance(node, S.Stmt) and node is not owner:
            self.stmt(node, sc.child())
        elif isinstance(node, Expr):
            self.expr(node, sc, owner)
        elif isinstance(node, BufferRegion):
            self.buffer_use(node.buffer, len(node.ranges), sc, owner, "region")
            for start, ext in node.ranges:
                for e in (start, ext):
                    if isinstance(e, Expr):
                        self.expr(e, sc, owner)
        elif isinstance(node, Buffer):
            self.buffer_use(node, None, sc, owner, "use")
        elif node is owner and dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                if f.name != "span":
                    self.generic(getattr(node, f.name), sc, owner)

    # ------------------------------------------------------------ expressions
    def expr(self, e, sc: _Scope, owner) -> None:
        if isinstance(e, Var):
            if e not in sc.vars:
                self.fail(f"variable {e.name!r} is used where it is not defined", owner)
            return
        if isinstance(e, BufferLoad):
            self.buffer_use(e.buffer, len(e.indices), sc, owner, "load")
            for i in e.indices:
                self.integer(i, f"load from {e.buffer.name}: index {i}", owner)
        if dataclasses.is_dataclass(e):
            for f in dataclasses.fields(e):
                v = getattr(e, f.name)
                for x in (v if isinstance(v, tuple) else (v,)):
                    if isinstance(x, Expr):
                        self.expr(x, sc, owner)

    def buffer_use(self, buf: Buffer, n_idx, sc: _Scope, owner, what: str) -> None:
        if buf.uid not in sc.bufs:
            self.fail(f"buffer {buf.name!r} ({buf.scope}) is used ({what}) where it is not allocated", owner)
        if n_idx is not None and n_idx != buf.ndim:
            self.fail(f"{what} of {buf.name!r} uses {n_idx} indices but the buffer has {buf.ndim} dims "
                      f"{tuple(buf.shape)}", owner)

    def integer(self, e, what: str, owner) -> None:
        dtype = getattr(e, "dtype", None)
        if dtype is not None and not (dtype.is_int or dtype.is_bool):
            self.fail(f"{what} has dtype {dtype}; indices and bounds must be integers", owner)


def _param_scope(func: S.PrimFunc) -> _Scope:
    sc = _Scope()
    for p in func.params:
        if isinstance(p, Buffer):
            sc.bufs.add(p.uid)
            for d in tuple(p.shape) + tuple(p.strides or ()):
                if isinstance(d, Expr):
                    _collect_vars(d, sc.vars)
        elif isinstance(p, Var):
            sc.vars.add(p)
    return sc


def _collect_vars(e, out: set) -> None:
    if isinstance(e, Var):
        out.add(e)
    elif dataclasses.is_dataclass(e):
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, Expr):
                    _collect_vars(x, out)


def verify(func: S.PrimFunc) -> list[str]:
    """Every invariant violation in `func`, as readable lines (empty when well formed)."""
    v = _Verifier()
    v.stmt(func.body, _param_scope(func))
    return v.problems


def check(func: S.PrimFunc, after: str = "") -> S.PrimFunc:
    """Raise IRVerifyError when `func` is malformed; returns `func` so it can sit in a pipeline."""
    problems = verify(func)
    if problems:
        where = f" after pass {after!r}" if after else ""
        shown = "\n  ".join(problems[:_MAX_REPORTED])
        more = f"\n  ... and {len(problems) - _MAX_REPORTED} more" if len(problems) > _MAX_REPORTED else ""
        raise IRVerifyError(f"malformed IR in {func.name}{where} (a compiler bug):\n  {shown}{more}")
    return func
