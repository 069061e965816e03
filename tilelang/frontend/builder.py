"""The statement builder the parser and the T.* functions append to.

One builder is active while a kernel is being parsed; T.* calls reach it through
`current()`. Frames are statement lists: entering a loop/if body pushes one.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..errors import DSLSyntaxError, Span
from ..ir.stmt import Stmt, seq

_state = threading.local()


@dataclass
class KernelContext:
    """What T.* functions need to know about the enclosing `with T.Kernel`."""

    block_vars: tuple
    grid: tuple
    threads: tuple
    thread_vars: list = field(default_factory=list)
    barriers: object = None  # T.create_barriers' buffer: what integer barrier ids name (language/hopper_raw.py)


class Builder:
    def __init__(self, mode: str = "prim_func"):
        self.frames: list[list[Stmt]] = [[]]
        self.span: Span | None = None
        self.kernel: KernelContext | None = None
        self.mode = mode
        self.names: dict[str, int] = {}
        self.eager = None  # EagerState while parsing an eager-mode function
        self.lets: dict = {}  # Var -> value of the kernel's `name = expr` bindings (LetStmt)
        self.handle_params: dict = {}  # TVM style: a `T.handle` parameter Var -> its T.match_buffer Buffer
        self.func_name: str | None = None  # T.func_name / T.func_attr({"global_symbol": ...})
        self.func_attrs: dict = {}  # T.func_attr's other keys, and the kernel annotations (annotations.py)
        self.tir_frames: list = []  # open T.If / T.sblock frames (language/tir/)

    def emit(self, stmt: Stmt):
        if getattr(stmt, "span", None) is None and self.span is not None and hasattr(stmt, "span"):
            stmt = stmt.with_span(self.span)
        self.frames[-1].append(stmt)

    def push(self):
        self.frames.append([])

    def pop(self) -> Stmt:
        return seq(*self.frames.pop()) if True else None

    def unique(self, name: str) -> str:
        """A C-safe name not used before in this kernel."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"


def current(what: str = "this call") -> Builder:
    b = getattr(_state, "builder", None)
    if b is None:
        raise DSLSyntaxError(f"{what} can only be used inside a @T.prim_func or @tilelang.jit kernel body")
    return b


def in_kernel(what: str) -> KernelContext:
    b = current(what)
    if b.kernel is None:
        raise DSLSyntaxError(f"{what} must be used inside `with T.Kernel(...)`", b.span)
    return b.kernel


def active() -> Builder | None:
    return getattr(_state, "builder", None)


class activate:
    """Context manager making `builder` the current one (re-entrant for macros)."""

    def __init__(self, builder: Builder):
        self.builder = builder

    def __enter__(self):
        self.prev = getattr(_state, "builder", None)
        _state.builder = self.builder
        return self.builder

    def __exit__(self, *exc):
        _state.builder = self.prev
        return False


def inline_lets(e):
    """`e` with the kernel's let-bound names (`H1 = H0 + 64`) replaced by their values, as far as
    the builder being used knows them (unchanged outside a parse)."""
    b = getattr(_state, "builder", None)
    lets = getattr(b, "lets", None)
    if not lets:
        return e
    from ..ir.visitor import substitute

    for _ in range(8):  # lets of lets
        new = substitute(e, lets)
        if new is e or new == e:
            return new
        e = new
    return e
