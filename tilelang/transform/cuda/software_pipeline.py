"""Multi-stage software pipelining of T.Pipelined loops with cp.async (sm_80+).

Expects: tile-level IR; a `T.Pipelined(n, num_stages=S)` loop (S >= 2) whose body starts
with T.copy ops global -> shared that can use 16-byte cp.async, followed by compute.
Guarantees: each copied shared tile gets S buffers; copies for iteration ko + S - 1 are
in flight while iteration ko computes; the wait + barrier before each iteration makes the
stage it reads complete and visible, and orders the refill after the previous readers.

    for ko in T.Pipelined(n, num_stages=3):      prologue: issue stages 0, 1 (commit each)
        T.copy(A[.., ko*32], A_s)          ->    for ko in range(n):
        T.gemm(A_s, B_s, C)                          wait_group<1>; __syncthreads()
                                                     A_r = A_st + (ko % 3) * |A_s|; A_w = A_st + ((ko + 2) % 3) * |A_s|
                                                     if ko + 2 < n: T.copy(A[.., (ko+2)*32], A_w)   (async)
                                                     commit; T.gemm(A_r, B_r, C)
"""
from __future__ import annotations

from dataclasses import replace

from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer
from ...ir.visitor import Mutator, substitute
from ...op import tile_ops as O
from .lower_tile_ops import Raw, copy_vector_width


class _ReplaceBuffers(Mutator):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit(self, node):
        if isinstance(node, Buffer):
            return self.mapping.get(node.uid, node)
        return super().visit(node)

    def visit_BufferLoad(self, e: E.BufferLoad):
        b = self.mapping.get(e.buffer.uid, e.buffer)
        return E.BufferLoad(b, tuple(self.visit(i) for i in e.indices), e.dtype)


class _Pipeline(Mutator):
    def __init__(self, warn):
        self.warn = warn
        self.views: list = []  # (storage, read_view, write_view)
        self.allocs: dict = {}  # original uid -> storage Buffer

    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        s = replace(s, body=body) if body is not s.body else s
        stages = s.annotation("num_stages", 0) or 0
        if s.kind != "pipelined" or stages < 2:
            return s
        stmts = list(body.stmts) if isinstance(body, S.SeqStmt) else [body]
        producers = []
        while stmts and isinstance(stmts[0], O.Copy) and stmts[0].src.buffer.scope == "global" \
                and stmts[0].dst.buffer.scope in ("shared", "shared.dyn"):
            producers.append(stmts.pop(0))
        if not producers:
            self.warn(f"T.Pipelined(num_stages={stages}) runs unpipelined: its body does not start with "
                      "global -> shared T.copy ops")
            return s
        for p in producers:
            vec, why = copy_vector_width(p)
            if vec == 1:
                self.warn(f"T.Pipelined(num_stages={stages}) runs unpipelined: T.copy {p.src.buffer.name} -> "
                          f"{p.dst.buffer.name} cannot use 16-byte cp.async ({why})")
                return s
        n = s.extent
        read_map, write_map, sets = {}, {}, []
        for p in producers:
            x = p.dst.buffer
            if x.uid in read_map:
                continue
            prev = [v for v in self.views if v[0] is x]
            if prev:  # a tile pipelined by an earlier loop keeps its stages and views
                _, storage, rv, wv = prev[0]
                if storage.shape[0] != stages * (x.numel() // const_int(x.shape[-1])):
                    self.warn(f"T.Pipelined runs unpipelined: {x.name} is pipelined by another loop with a "
                              "different num_stages")
                    return s
                read_map[x.uid], write_map[x.uid] = rv, wv
                sets.append((storage, rv, wv, x.numel()))
                continue
            rows = x.numel() // const_int(x.shape[-1])
            storage = Buffer(x.name + "_stages", (stages * rows, x.shape[-1]), x.dtype, "shared.dyn")
            rv = Buffer(x.name, x.shape, x.dtype, "shared.dyn")
            wv = Buffer(x.name + "_w", x.shape, x.dtype, "shared.dyn")
            for v in (rv, wv):
                v.view_of = storage
            self.allocs[x.uid] = storage
            read_map[x.uid], write_map[x.uid] = rv, wv
            self.views.append((x, storage, rv, wv))
            sets.append((storage, rv, wv, x.numel()))
        ko = s.var

        def issue(k_expr, guard):
            ps = [_ReplaceBuffers(write_map).visit(substitute(replace(p, async_group=True), {ko: k_expr}))
                  for p in producers]
            # stage of iteration k is (k - start) % stages, the same rule the readers use
            views = [Raw(f"{wv.name} = {st.name} + ({{0}}) * {numel};", (E.binop("%", k_expr - s.start, stages),))
                     for st, _, wv, numel in sets]
            body_ = S.seq(*views, *ps)
            if guard is not True:
                body_ = S.IfThenElse(guard, body_)
            return S.seq(body_, Raw("tl::cp_async_commit();"))

        prologue = [issue(s.start + k, E.binop("<", E.as_expr(k), n)) for k in range(stages - 1)]
        rest = _ReplaceBuffers(read_map).visit(S.seq(*stmts))
        ahead = ko + (stages - 1)
        loop_body = S.seq(
            Raw(f"tl::cp_async_wait<{stages - 2}>(); __syncthreads();"),
            *[Raw(f"{rv.name} = {st.name} + ({{0}}) * {numel};", (E.binop("%", ko - s.start, stages),))
              for st, rv, _, numel in sets],
            issue(ahead, E.binop("<", ahead - s.start, n)),
            rest)
        loop = S.For(ko, s.start, s.extent, "serial", loop_body, (), span=s.span)
        return S.seq(*prologue, loop, Raw("tl::cp_async_wait<0>(); __syncthreads();"))

    def visit_Allocate(self, a: S.Allocate):
        return a


def pipeline_kernel(k: S.KernelLaunch, warn) -> tuple[S.KernelLaunch, list]:
    p = _Pipeline(warn)
    body = p.visit(k.body)
    if not p.views:
        return k, []
    # storage replaces the original allocation of each pipelined tile
    out = []
    for st in (body.stmts if isinstance(body, S.SeqStmt) else (body,)):
        if isinstance(st, S.Allocate) and st.buffer.uid in p.allocs:
            x = st.buffer
            storage = p.allocs[x.uid]
            out.append(S.Allocate(storage, span=st.span))
            for orig, stg, rv, wv in p.views:
                if orig is x:
                    out.append(S.Allocate(rv))
                    out.append(S.Allocate(wv))
        else:
            out.append(st)
    return replace(k, body=S.seq(*out)), p.views
