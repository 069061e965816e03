"""Fold the zero fill of a wgmma accumulator into the gemm that overwrites it.

Expects: lowered per-thread CUDA IR (lower_tile_ops): a `T.clear(C)` / `T.fill(C, 0)` / parallel
store of 0 into a register accumulator is a thread loop `for l: C[l] = 0` over all of C's
registers, and a wgmma gemm is a Raw `tl::gemm_{ss,rs}_sm90<M, N, K, WG_M, ...>(A, B, C);`.
Guarantees: when such a fill is followed, in the same statement sequence, by a wgmma gemm into
the whole of C with only statements that do not mention C in between, the fill is dropped and
the gemm is asked to clear (`..., true)`: its first k-step runs with scale-d = 0 and writes
every register of C, so nothing can observe the difference. Anything else is left alone.
FlashAttention's `T.clear(acc_s); T.gemm(Q_s, K_s, acc_s)` saves one register move per
accumulator element per iteration.

    for l in unroll(64): acc_s[l] = 0.0f          ->
    tl::mbarrier_wait(&tl_full[s], phase);            tl::mbarrier_wait(&tl_full[s], phase);
    tl::gemm_ss_sm90<...>(Q_s, K_s, acc_s);           tl::gemm_ss_sm90<...>(Q_s, K_s, acc_s, true);
"""
from __future__ import annotations

import re
from dataclasses import replace

from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, buffers_used, collect
from .raw import Raw

_GEMM = re.compile(r"^tl::gemm_(ss|rs)_sm90<(\d+), (\d+), (\d+), (\d+), (\d+|true|false),")
GEMM_HEAD = _GEMM  # kind, M, N, K, WG_M, WG_N (ss) / transpose (rs) of a wgmma gemm Raw
_CALL = "({0}, {1}, {2});"
_CLEAR_CALL = "({0}, {1}, {2}, true);"


def wgmma_elems(fmt: str) -> int | None:
    """Accumulator elements per thread of a wgmma gemm Raw (every one written by each k-step)."""
    m = _GEMM.match(fmt)
    if m is None or not fmt.endswith(_CALL):
        return None
    M, N, wg_m = int(m.group(2)), int(m.group(3)), int(m.group(5))
    wg_n = int(m.group(6)) if m.group(1) == "ss" else 1
    return (M // wg_m // 64) * (N // wg_n) // 2


def clearing_call(fmt: str) -> str:
    """The same gemm text, asked to overwrite C rather than accumulate into it."""
    return fmt[: -len(_CALL)] + _CLEAR_CALL


def whole_register_store(st):
    """(lets, store) of a loop that stores every element of a 1-d register buffer once, in order
    (`for l in [0, n): <lets>; C[l] = v` with n = C's length), or None."""
    if not isinstance(st, S.For) or const_int(st.start) != 0:
        return None
    body = st.body.stmts if isinstance(st.body, S.SeqStmt) else (st.body,)
    *lets, store = body
    if not isinstance(store, S.BufferStore) or any(not isinstance(x, S.LetStmt) for x in lets):
        return None
    b = store.buffer
    if b.scope != "local" or len(b.shape) != 1 or const_int(b.shape[0]) != const_int(st.extent):
        return None
    if len(store.indices) != 1 or store.indices[0] != st.var:
        return None
    return lets, store


def zero_fill(st):
    """The register buffer a statement sets entirely to zero (`for l in [0, n): C[l] = 0`), or None."""
    found = whole_register_store(st)
    if found is None:
        return None
    b, v = found[1].buffer, found[1].value
    if not isinstance(v, E.Const) or v.value != 0 or b.dtype.name not in ("float32", "int32", "float16"):
        return None
    return b


def accumulator(raw: Raw):
    """The register buffer a wgmma gemm Raw writes from its element 0, or None."""
    if not isinstance(raw, Raw) or wgmma_elems(raw.fmt) is None or len(raw.args) != 3:
        return None
    c = raw.args[2]
    if not (isinstance(c, E.Call) and c.op == "address_of" and isinstance(c.args[0], E.BufferLoad)):
        return None
    ld = c.args[0]
    return ld.buffer if all(const_int(i) == 0 for i in ld.indices) else None


def mentions(st, b) -> bool:
    if any(x.uid == b.uid for x in buffers_used(st)):
        return True
    word = re.compile(rf"\b{re.escape(b.name)}\b")
    return any(word.search(r.fmt) for r in collect(st, lambda n: isinstance(n, Raw)))


def _fold(stmts: tuple) -> tuple:
    out, drop = list(stmts), set()
    for i, st in enumerate(stmts):
        b = zero_fill(st)
        if b is None:
            continue
        for j in range(i + 1, len(stmts)):
            nxt = stmts[j]
            acc = accumulator(nxt)
            if acc is not None and acc.uid == b.uid and wgmma_elems(nxt.fmt) == const_int(b.shape[0]):
                drop.add(i)
                out[j] = replace(nxt, fmt=clearing_call(nxt.fmt))
                break
            if mentions(nxt, b):
                break
    return tuple(s for k, s in enumerate(out) if k not in drop)


class _Fold(Mutator):
    def visit_SeqStmt(self, s: S.SeqStmt):
        inner = self.generic(s)
        stmts = _fold(inner.stmts)
        if len(stmts) == len(inner.stmts):
            return inner
        return S.seq(*stmts) if stmts else S.SeqStmt((), span=s.span)


def fold_accum_clears(body):
    """`body` with every zero fill that a wgmma gemm overwrites folded into that gemm."""
    return _Fold().visit(body)
