"""What every CUDA tile-op family module shares with the pass that dispatches to it.

Takes nothing (imports only the IR). Gives: `THREAD_LOOP` (the annotation of a per-thread
element loop), `THREAD_LOCAL` (scopes of which each thread holds a whole copy), `sync()` (a
`__syncthreads()` statement), `addr_of(buf)` (the address of a buffer's first element, the
argument our header's tile templates take) and `is_local(buf)`.
"""
from __future__ import annotations

from ....dtypes import uint64
from ....ir import expr as E
from ....ir.buffer import Buffer
from ..raw import Raw

THREAD_LOOP = (("tl.thread_loop", True),)
THREAD_LOCAL = ("local", "local.var")  # scopes each thread holds a whole copy of


def sync() -> Raw:
    return Raw("__syncthreads();")


def is_local(buf: Buffer) -> bool:
    return buf.scope in THREAD_LOCAL


def addr_of(buf: Buffer) -> E.Expr:
    return E.Call("address_of", (E.BufferLoad(buf, tuple(E.as_expr(0) for _ in buf.shape), buf.dtype),), uint64)
