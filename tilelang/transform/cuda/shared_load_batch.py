"""Shared-memory vector loads of a short loop that stores into another shared tile, issued together ahead of it.

Why: a dequantizing loop (dequantize_gemm's bf16 fp4 example: eight times, load 4 packed bytes from
B_shared, unpack, store 8 halves into B_dequantize_shared) reads one shared tile and writes another
through two pointers into the same shared window. ptxas cannot tell the tiles apart, so each
iteration's LDS waits behind the previous STS and every iteration pays a full shared-memory round
trip. Both tiles are live in the loop, so their bytes are disjoint: the loads may go first.

Takes: a kernel's lowered per-thread CUDA IR after barrier insertion (vector accesses are
`tl::load_vec` / `tl::store_vec` Raws).
Gives: each loop of constant trip count N (2..MAX_TRIPS) with no barrier, wait or fence inside whose
body begins with vector loads of shared tiles into fresh registers (`X_v0[n]`, address from the loop
variable and values fixed before the loop) and later writes some other shared tile, and writes none
of the tiles it loads (no store, Raw write or address handed to other code), gets its loads in a
loop of their own ahead of it, into one register array of N * n elements (at most MAX_REGS 32-bit
registers a loop); the body copies its slice back into `X_v0`, which the compiler folds away.

    for i in T.serial(8):                             X_v0_b = T.alloc_local((32,), uint8)
        X_v0 = T.alloc_local((4,), uint8)             for i in T.unroll(8):
        load_vec<4>(X_v0, &S[i, tx])          ->          load_vec<4>(&X_v0_b[i * 4], &S[i, tx])
        ... unpack X_v0 ...                           for i in T.unroll(8):
        store_vec<8>(&D[i, tx], Y)                        X_v0 = T.alloc_local((4,), uint8)
                                                          for u in T.unroll(4): X_v0[u] = X_v0_b[i * 4 + u]
                                                          ... unpack X_v0 ... ; store_vec<8>(&D[i, tx], Y)
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, storage_root
from ...ir.visitor import Mutator, collect, substitute
from .raw import Raw

MAX_TRIPS = 16
MAX_REGS = 16  # 32-bit registers the batched loads of one loop may hold
_LOAD = re.compile(r"^\s*tl::load_vec<(\d+)>\(\{0\}, \{1\}, \{2\}\);\s*$")
_ORDERING = re.compile(r"__syncthreads|barrier|cp_async_wait|wait_group|mbarrier|fence|__syncwarp|membar")
_SHARED = ("shared", "shared.dyn")


def batch_shared_loads(body: S.Stmt) -> S.Stmt:
    """`body` with the leading shared vector loads of its short shared-to-shared loops issued ahead."""
    return _Batch().visit(body)


def _storage(b: Buffer) -> int:
    """The uid of the memory a buffer names (ir.buffer.storage_root)."""
    return storage_root(b).uid


def _shared_in(x, out: set) -> None:
    """Storage uids of the shared buffers named anywhere in x (a node, tuple or expression)."""
    for n in collect(x, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
        if n.buffer.scope in _SHARED:
            out.add(_storage(n.buffer))
    if isinstance(x, Buffer) and x.scope in _SHARED:
        out.add(_storage(x))
    elif isinstance(x, (tuple, list)):
        for y in x:
            _shared_in(y, out)


def _leading_loads(stmts: tuple) -> list:
    """[(Allocate of X_v0, its load Raw, lanes, shared load)] at the head of a loop body."""
    out = []
    i = 0
    while i + 1 < len(stmts):
        a, r = stmts[i], stmts[i + 1]
        if not (isinstance(a, S.Allocate) and a.init is None and a.buffer.scope == "local"
                and isinstance(r, Raw) and _LOAD.match(r.fmt) and len(r.args) == 3):
            break
        n = int(_LOAD.match(r.fmt).group(1))
        regs, mem, _ = r.args
        if not (isinstance(regs, E.Call) and regs.op == "address_of" and isinstance(regs.args[0], E.BufferLoad)
                and regs.args[0].buffer is a.buffer and const_int(regs.args[0].indices[0]) == 0
                and len(a.buffer.shape) == 1 and const_int(a.buffer.shape[0]) == n
                and isinstance(mem, E.Call) and mem.op == "address_of" and isinstance(mem.args[0], E.BufferLoad)
                and mem.args[0].buffer.scope in _SHARED):
            break
        src = mem.args[0]
        if any(collect(ix, lambda x: isinstance(x, E.BufferLoad)) for ix in src.indices) \
                or collect(r.args[2], lambda x: isinstance(x, E.BufferLoad)):
            break  # the address or guard reads memory the loop may change
        out.append((a, r, n, src))
        i += 2
    return out


def _writes(body) -> set | None:
    """Storage uids of the shared tiles `body` may write; None when it hands a shared address to
    code whose writes are unknown."""
    out: set = set()
    for n in collect(body, lambda n: isinstance(n, S.BufferStore)):
        if n.buffer.scope in _SHARED:
            out.add(_storage(n.buffer))
    for r in collect(body, lambda n: isinstance(n, Raw)):
        for b in r.writes:
            if b.scope in _SHARED:
                out.add(_storage(b))
        if not r.writes and not _LOAD.match(r.fmt):
            named: set = set()
            _shared_in(r.args, named)
            if named:
                return None  # a shared address in inline code that declares no writes
    for c in collect(body, lambda n: isinstance(n, E.Call) and n.op.startswith("extern:")):
        named = set()
        _shared_in(c.args, named)
        if named:
            return None
    return out


class _Batch(Mutator):
    def visit_For(self, loop: S.For):
        loop = replace(loop, body=self.visit(loop.body))
        trips = const_int(loop.extent)
        if loop.kind not in ("serial", "unroll") or trips is None or not 2 <= trips <= MAX_TRIPS \
                or not isinstance(loop.body, S.SeqStmt):
            return loop
        if collect(loop.body, lambda n: isinstance(n, Raw) and _ORDERING.search(n.fmt)):
            return loop
        loads = _leading_loads(loop.body.stmts)
        if not loads:
            return loop
        rest = loop.body.stmts[2 * len(loads):]
        written = _writes(S.SeqStmt(tuple(rest)))
        if not written:  # None (unknown) or no shared write at all: nothing for a load to wait behind
            return loop
        sources = {_storage(src.buffer) for _, _, _, src in loads}
        if sources & written:
            return loop
        if sum(trips * n * a.buffer.dtype.bytes for a, _, n, _ in loads) > 4 * MAX_REGS:
            return loop
        allocs, issue, refill = [], [], []
        i = loop.var
        for a, r, n, _src in loads:
            batch = Buffer(a.buffer.name + "_b", (trips * n,), a.buffer.dtype, "local")
            base = E.Binary("*", i, E.as_expr(n), i.dtype) if n != 1 else i
            allocs.append(S.Allocate(batch))
            dst = E.Call("address_of", (E.BufferLoad(batch, (base,), batch.dtype),), r.args[0].dtype)
            issue.append(replace(r, args=(dst, *r.args[1:])))
            u = E.Var(i.name + "_l", i.dtype)
            lane = E.Binary("+", base, u, i.dtype)
            refill += [a, S.For(u, E.as_expr(0), E.as_expr(n), "unroll",
                                S.BufferStore(a.buffer, (u,), E.BufferLoad(batch, (lane,), batch.dtype)))]
        j = E.Var(i.name + "_p", i.dtype)
        first = S.For(j, loop.start, loop.extent, "unroll", substitute(S.seq(*issue), {i: j}), span=loop.span)
        second = replace(loop, kind="unroll", body=S.SeqStmt(tuple(refill) + tuple(rest), span=loop.body.span))
        return S.SeqStmt(tuple(allocs) + (first, second), span=loop.span)
