"""Statements of the IR (TIR-style names) and the base class of tile ops.

Statements are frozen dataclasses; `span` (the user's source position) is not part
of equality. Declarations (`Allocate`, `LetStmt`) are flat: they scope over the
rest of the enclosing `SeqStmt`, which keeps the builder and printers simple.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from ..errors import Span
from .buffer import Buffer
from .expr import Expr, Var


@dataclass(frozen=True)
class Stmt:
    def with_span(self, span):
        return replace(self, span=span)


def default_span():
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SeqStmt(Stmt):
    stmts: tuple
    span: Span | None = default_span()


@dataclass(frozen=True)
class Evaluate(Stmt):
    value: Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class BufferStore(Stmt):
    buffer: Buffer
    indices: tuple
    value: Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class LetStmt(Stmt):
    """Declare `var = value` for the rest of the enclosing sequence."""

    var: Var
    value: Expr
    span: Span | None = default_span()


@dataclass(frozen=True)
class Allocate(Stmt):
    """Declare a shared/fragment/local buffer for the rest of the enclosing sequence."""

    buffer: Buffer
    init: tuple | None = None  # initial values (alloc_var(init=...))
    span: Span | None = default_span()


@dataclass(frozen=True)
class For(Stmt):
    """kind: serial | parallel | pipelined | unroll | vectorized."""

    var: Var
    start: Expr
    extent: Expr
    kind: str
    body: Stmt
    annotations: tuple = ()  # ((key, value), ...)
    span: Span | None = default_span()

    def annotation(self, key, default=None):
        for k, v in self.annotations:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class While(Stmt):
    cond: Expr
    body: Stmt
    span: Span | None = default_span()


@dataclass(frozen=True)
class IfThenElse(Stmt):
    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None
    span: Span | None = default_span()


@dataclass(frozen=True)
class Break(Stmt):
    span: Span | None = default_span()


@dataclass(frozen=True)
class Continue(Stmt):
    span: Span | None = default_span()


@dataclass(frozen=True)
class KernelLaunch(Stmt):
    """`with T.Kernel(...)`: a grid of blocks, each running `body` with `threads` threads."""

    block_vars: tuple  # (Var, ...) one per grid dim, x first
    grid: tuple  # extents (Expr | int)
    threads: tuple  # (x, y, z) ints
    thread_vars: tuple  # (Var, ...) bound by T.get_thread_binding / thread_binding
    body: Stmt
    span: Span | None = default_span()
    cluster: tuple = (1, 1, 1)  # blocks per thread-block cluster along x, y, z (T.ClusterKernel, sm_90+)


@dataclass(frozen=True)
class TileOp(Stmt):
    """Base of block-level tile operations (copy, gemm, fill, reduce ...), one file each in op/."""

    def buffers(self) -> list:
        """Buffers this op touches (used by verifier and planners)."""
        out = []
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Buffer):
                out.append(v)
            elif hasattr(v, "buffer") and isinstance(getattr(v, "buffer"), Buffer):
                out.append(v.buffer)
        return out


class FuncAttrs(Mapping):
    """A PrimFunc's attributes: an immutable, hashable mapping from str keys to values
    (`"tilelang_out_idx" in f.attrs`, `f.attrs["tilelang_pass_configs"]`), as TVM's DictAttrs reads."""

    __slots__ = ("_items",)

    def __init__(self, items=()):
        pairs = items.items() if isinstance(items, Mapping) else items
        d = {}
        for k, v in pairs:
            d[k] = v
        object.__setattr__(self, "_items", tuple(d.items()))

    def __getitem__(self, key):
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self):
        return (k for k, _ in self._items)

    def __len__(self):
        return len(self._items)

    def __hash__(self):
        return hash(self._items)

    def __eq__(self, other):
        return isinstance(other, Mapping) and dict(self._items) == dict(other.items())

    def __repr__(self):
        return f"FuncAttrs({dict(self._items)!r})"


@dataclass(frozen=True)
class PrimFunc:
    """A kernel: parameters (Buffers and scalar Vars), body, and attributes (a FuncAttrs; a
    dict or ((key, value), ...) is converted)."""

    name: str
    params: tuple  # Buffer | Var
    body: Stmt
    attrs: FuncAttrs = field(default_factory=FuncAttrs)
    span: Span | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.attrs, FuncAttrs):
            object.__setattr__(self, "attrs", FuncAttrs(self.attrs))

    def attr(self, key, default=None):
        return self.attrs.get(key, default)

    def with_attr(self, key, value) -> "PrimFunc":
        return replace(self, attrs=FuncAttrs({**self.attrs, key: value}))

    @property
    def buffer_map(self) -> dict:
        """{parameter: its Buffer} for the tensor parameters (TVM's name; here they are the same object)."""
        return {p: p for p in self.params if isinstance(p, Buffer)}

    def __str__(self):
        from .printer import func_str

        return func_str(self)

    def script(self, **_options) -> str:
        """The kernel printed as T.* source (TVM's `PrimFunc.script()`; printing options are ignored)."""
        return str(self)


def seq(*stmts) -> Stmt:
    """Flatten into a SeqStmt (or the single statement)."""
    flat = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


def top_level(body):
    """The statements of `body` in order, nested SeqStmts flattened (a body's top level)."""
    if isinstance(body, SeqStmt):
        for st in body.stmts:
            yield from top_level(st)
    else:
        yield body
