"""Row-block fission: a loop body of wgmma gemms and row-wise register work, run one 64-row block
of the warpgroup's rows after the other (sm_90, after tile-op lowering).

Expects: lowered CUDA IR in which a loop body holds at least two synchronous wgmma gemms
(`tl::gemm_ss_sm90` / `tl::gemm_rs_sm90`, kWait 0) over the same M with MI >= 2 row blocks per
warpgroup, and between them per-slot loops / reduction code on register tiles laid out as those
accumulators (WgmmaAccFragment of M rows) or their per-row values (RowFragment).
Guarantees: each such gemm becomes MI calls, one per row block (`row_block` argument); per-slot
loops spanning several blocks are split at block edges; the statements between the first and the
last gemm are reordered by a list schedule over their exact dependences (register slots, shared
tiles, mbarrier order) that runs row block 0's work first. Attention's loop body (S = Q K^T,
softmax rows, O = P V) on 128 rows per warpgroup then keeps 64 rows of S live instead of 128:
O (128 registers) + S (128) did not fit in 240, so ptxas spilled (FA forward, D128: ~130 spill
stores an iteration) and serialized the wgmmas.

    gemm_ss(Q, K, S)                    gemm_ss(Q, K, S, row_block=0); softmax(S rows 0..63)
    softmax(S)               ->         gemm_rs(P[0], V, O, row_block=0)
    gemm_rs(P, V, O)                    gemm_ss(Q, K, S, row_block=1); softmax(S rows 64..127)
                                        gemm_rs(P[1], V, O, row_block=1)

NOTE: a wait on a pipeline's full barrier (`tl_full*`) may move above an arrive on an empty
barrier (`tl_empty*`) of the same iteration: the warp-specialized producer fills iteration i's
buffers after waiting on empties of earlier iterations only, so that arrive never gates that wait.
Any other statement kind between the gemms (an unknown Raw, a branch, shared / global element
accesses, a gemm operand not laid out by the gemms' rows) leaves that loop as written; other
register tiles count as whole (every block), which only orders more.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...arith.simplify import const_int, simplify
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, Visitor
from ...layout.fragment import RowFragment, WgmmaAccFragment
from .raw import Raw

_GEMM = re.compile(r"^tl::gemm_(ss|rs)_sm90<([^>]*)>\((.*)\);$")
_REG_SCOPES = ("local", "local.var")


@dataclass
class _Gemm:
    kind: str  # "ss" | "rs"
    m: int
    wg_m: int
    mi: int


@dataclass
class _Node:
    stmt: S.Stmt
    index: int
    reads: set = field(default_factory=set)  # (uid, block or "*")
    writes: set = field(default_factory=set)
    smem: bool = False  # reads or writes shared memory
    sync: str | None = None  # "full_wait" | "empty_arrive" | "sync"
    barrier: bool = False
    block: int | None = None
    maps: tuple = ()  # (writes, reads) as uid -> blocks, for the dependence test


def _gemm_of(r) -> _Gemm | None:
    """M, WG_M, MI of a synchronous wgmma gemm Raw, else None."""
    if not isinstance(r, Raw):
        return None
    m = _GEMM.match(r.fmt)
    if m is None:
        return None
    t = [x.strip() for x in m.group(2).split(",")]
    kind = m.group(1)
    try:
        M, wg_m = int(t[0]), int(t[3])
        wait = int(t[9] if kind == "ss" else t[7])
    except (ValueError, IndexError):
        return None
    if wait != 0 or M % (wg_m * 64):
        return None
    return _Gemm(kind, M, wg_m, M // wg_m // 64)


def _split_gemm(r: Raw, g: _Gemm, mi: int) -> Raw:
    m = _GEMM.match(r.fmt)
    args = [a.strip() for a in m.group(3).split(",")]
    if len(args) == 3:
        args.append("false")
    return Raw(f"tl::gemm_{m.group(1)}_sm90<{m.group(2)}>({', '.join(args + [str(mi)])});", r.args, r.reads,
               r.writes, r.span)


def _arg_buffer(e):
    """The register tile of a gemm operand argument `address_of(buf[0])`."""
    if isinstance(e, E.Call) and e.op == "address_of" and isinstance(e.args[0], E.BufferLoad):
        return e.args[0].buffer
    return None


class _Accesses(Visitor):
    """Buffer accesses of a statement: (buffer, index tuple, is_write)."""

    def __init__(self):
        self.out = []
        self.other = False

    def visit_BufferStore(self, s):
        self.out.append((s.buffer, s.indices, True))
        self.visit(s.indices)
        self.visit(s.value)

    def visit_BufferLoad(self, e):
        self.out.append((e.buffer, e.indices, False))
        self.visit(e.indices)

    def visit_Raw(self, s):
        self.other = True

    def visit_IfThenElse(self, s):
        self.other = True


_INT_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
            "//": lambda a, b: a // b, "/": lambda a, b: a // b, "%": lambda a, b: a % b,
            ">>": lambda a, b: a >> b, "<<": lambda a, b: a << b, "&": lambda a, b: a & b, "|": lambda a, b: a | b}


def _int_at(e, env: dict) -> int | None:
    """The value of an integer index expression with loop variables bound in `env` (None: not one);
    slot indices are non-negative, so floor and C division agree wherever this answers."""
    if isinstance(e, int):
        return e
    if isinstance(e, E.Const):
        return e.value if isinstance(e.value, int) else None
    if isinstance(e, E.Var):
        return env.get(e)
    if isinstance(e, E.Binary) and e.op in _INT_OPS:
        a, b = _int_at(e.a, env), _int_at(e.b, env)
        if a is None or b is None or a < 0 or b < 0 or (b == 0 and e.op in ("//", "/", "%")):
            return None
        return _INT_OPS[e.op](a, b)
    return None


class _Plan:
    def __init__(self, layouts: dict, m: int, wg_m: int):
        self.layouts, self.m, self.wg_m = layouts, m, wg_m
        self.memo: dict = {}  # (buffer uid, slot) -> row block

    def block_of(self, buf, idx, env: dict | None = None) -> int | str | None:
        """Row block of element `idx` (loop variables bound by `env`) of register tile `buf`;
        "*" when unknown; None: not a tile of the gemms' rows."""
        lay = self.layouts.get(buf.uid)
        rows = isinstance(lay, WgmmaAccFragment) and lay.shape[0] == self.m and lay.wg_m == self.wg_m or \
            isinstance(lay, RowFragment) and lay.kind == "wgmma" and lay.rows == self.m and lay.groups == self.wg_m
        if not rows:
            return None
        i = _int_at(idx[0], env or {}) if len(idx) == 1 else None
        if i is None:
            return "*"
        key = (buf.uid, i)
        if key not in self.memo:
            row = lay.coords(0, i)[0]  # thread 0 (warpgroup 0): plain integers
            row = row if isinstance(row, int) else const_int(simplify(row))
            self.memo[key] = "*" if row is None else row // 64
        return self.memo[key]

    def node(self, s, index: int) -> _Node:
        n = _Node(s, index)
        if isinstance(s, Raw):
            return self._raw(n, s)
        if isinstance(s, S.Allocate):
            if s.buffer.scope in _REG_SCOPES:
                n.writes.add((s.buffer.uid, "*"))
            else:
                n.barrier = True
            return n
        if isinstance(s, S.For) and not self.plain_loop(s):
            n.barrier = True
            return n
        if not isinstance(s, (S.For, S.BufferStore, S.SeqStmt)):
            n.barrier = True
            return n
        acc = _Accesses()
        acc.visit(s)
        if acc.other:
            n.barrier = True
            return n
        values = self._loop_values(s)
        for buf, idx, write in acc.out:
            if buf.scope not in _REG_SCOPES:
                n.barrier = True
                return n
            blocks = {self.block_of(buf, idx, v) for v in values}
            for b in blocks:
                (n.writes if write else n.reads).add((buf.uid, "*" if b is None else b))
        found = {b for _, b in n.reads | n.writes if b != "*"}
        n.block = found.pop() if len(found) == 1 else None
        return n

    def _raw(self, n: _Node, s: Raw) -> _Node:
        if "tl::mbarrier_wait(&tl_full" in s.fmt and s.fmt.count(";") == 1:
            n.sync = "full_wait"
        elif s.fmt.startswith("__syncwarp(); if (tid % 32 == 0) tl::mbarrier_arrive(&tl_empty") and \
                s.fmt.count(";") == 2:
            n.sync = "empty_arrive"
        else:
            n.barrier = True
        return n

    @staticmethod
    def plain_loop(s: S.For) -> bool:
        body = s.body.stmts if isinstance(s.body, S.SeqStmt) else (s.body,)
        return s.kind == "unroll" and const_int(s.start) is not None and const_int(s.extent) is not None \
            and all(isinstance(x, (S.LetStmt, S.BufferStore)) for x in body)

    @staticmethod
    def _loop_values(s) -> list:
        if not isinstance(s, S.For):
            return [{}]
        a, n = const_int(s.start), const_int(s.extent)
        return [{s.var: v} for v in range(a, a + n)]

    def gemm_node(self, r: Raw, g: _Gemm, mi: int, index: int) -> _Node:
        n = _Node(_split_gemm(r, g, mi), index, smem=True, block=mi)
        a, _, c = (_arg_buffer(x) for x in r.args[:3])
        for b in (a, c):
            if b is not None and b.scope in _REG_SCOPES and self.block_of(b, (E.as_expr(0),)) is None:
                n.barrier = True  # a register operand this pass cannot split by rows
        if g.kind == "rs" and a is not None:
            n.reads.add((a.uid, mi))
        if c is not None:
            n.writes.add((c.uid, mi))
            if g.kind == "rs" or "true" not in r.fmt.rsplit("(", 1)[-1]:
                n.reads.add((c.uid, mi))
        for b in r.reads:
            n.reads.add((("smem", b.uid), "*"))
        return n

    def split_loop(self, s: S.For) -> list:
        """A per-slot loop cut where its slots change row block (one loop per block run)."""
        a, n = const_int(s.start), const_int(s.extent)
        acc = _Accesses()
        acc.visit(s.body)
        keys = []
        for v in range(a, a + n):
            bs = set()
            for buf, idx, _ in acc.out:
                b = self.block_of(buf, idx, {s.var: v})
                if b is not None:
                    bs.add(b)
            keys.append(bs.pop() if len(bs) == 1 and "*" not in bs else None)
        if None in keys or len(set(keys)) == 1:
            return [s]
        out, lo = [], a
        for v in range(a + 1, a + n + 1):
            if v == a + n or keys[v - a] != keys[lo - a]:
                out.append(S.For(s.var, E.as_expr(lo), E.as_expr(v - lo), s.kind, s.body, s.annotations, s.span))
                lo = v
        return out


def _by_uid(keys) -> dict:
    out = {}
    for u, b in keys:
        out.setdefault(u, set()).add(b)
    return out


def _hit(p: dict, q: dict) -> bool:
    for u, bs in p.items():
        bs2 = q.get(u)
        if bs2 is not None and ("*" in bs or "*" in bs2 or bs & bs2):
            return True
    return False


def _conflict(x: _Node, y: _Node) -> bool:
    if not (x.writes or y.writes):
        return False
    xw, xr, yw, yr = x.maps[0], x.maps[1], y.maps[0], y.maps[1]
    return _hit(xw, yw) or _hit(xw, yr) or _hit(xr, yw)


def _depends(earlier: _Node, later: _Node) -> bool:
    if earlier.barrier or later.barrier:
        return True
    if earlier.sync and later.sync:
        return not (earlier.sync == "empty_arrive" and later.sync == "full_wait")
    if earlier.sync == "full_wait" and later.smem or later.sync == "empty_arrive" and earlier.smem:
        return True
    return _conflict(earlier, later)


def _schedule(nodes: list) -> list:
    """Topological order of `nodes`, row block 0's work first (then original order)."""
    n = len(nodes)
    for x in nodes:
        x.maps = (_by_uid(x.writes), _by_uid(x.reads))
    preds = [set() for _ in range(n)]
    for j in range(n):
        for i in range(j):
            if _depends(nodes[i], nodes[j]):
                preds[j].add(i)
    done, order = set(), []
    while len(order) < n:
        ready = [k for k in range(n) if k not in done and preds[k] <= done]
        k = min(ready, key=lambda k: (nodes[k].block or 0, k))
        done.add(k)
        order.append(nodes[k].stmt)
    return order


def _flat(stmts) -> list:
    """Nested sequences inlined: their declarations already scope over the enclosing C block."""
    out = []
    for s in stmts:
        out += _flat(s.stmts) if isinstance(s, S.SeqStmt) else [s]
    return out


def _fission(stmts: tuple, layouts: dict) -> tuple | None:
    gemms = [(i, _gemm_of(s)) for i, s in enumerate(stmts)]
    gemms = [(i, g) for i, g in gemms if g is not None]
    if len(gemms) < 2 or not any(g.kind == "ss" for _, g in gemms):
        return None
    shapes = {(g.m, g.wg_m, g.mi) for _, g in gemms}
    if len(shapes) != 1 or gemms[0][1].mi < 2:
        return None
    first, last = gemms[0][0], gemms[-1][0]
    plan = _Plan(layouts, gemms[0][1].m, gemms[0][1].wg_m)
    nodes = []
    for s in _flat(stmts[first:last + 1]):
        g = _gemm_of(s)
        if g is not None:
            for mi in range(g.mi):
                nodes.append(plan.gemm_node(s, g, mi, len(nodes)))
            continue
        for part in (plan.split_loop(s) if isinstance(s, S.For) and plan.plain_loop(s) else [s]):
            nodes.append(plan.node(part, len(nodes)))
    if any(x.barrier for x in nodes):
        return None
    return stmts[:first] + tuple(_schedule(nodes)) + stmts[last + 1:]


class _Fission(Mutator):
    def __init__(self, layouts):
        self.layouts = layouts
        self.count = 0

    def visit_For(self, s: S.For):
        s = self.generic(s)
        if s.kind == "unroll" or not isinstance(s.body, S.SeqStmt):
            return s
        new = _fission(s.body.stmts, self.layouts)
        if new is None:
            return s
        self.count += 1
        return S.For(s.var, s.start, s.extent, s.kind, S.SeqStmt(new), s.annotations, s.span)


def row_block_fission(body, layouts: dict):
    """-> (body with eligible loop bodies run row block by row block, number of loops changed).
    `layouts`: register tile uid -> its fragment layout (the layout plan)."""
    f = _Fission(layouts)
    return f.visit(body), f.count
