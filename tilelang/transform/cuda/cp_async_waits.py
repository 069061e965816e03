"""One cp.async wait for back-to-back global -> shared copies outside a pipeline.

Takes: lowered per-thread CUDA IR before barrier insertion (thread_sync.py runs next), where each
T.copy outside a T.Pipelined stage is a loop of cp.async vectors followed by its own
`tl::cp_async_commit(); tl::cp_async_wait<0>();`. Gives: in every statement sequence, each such
copy moved ahead of the independent statements before it (synchronous element copies: their
loads no longer hold the cp.async ones back), and its wait dropped (its commit kept) when the statements up to the next copy's commit + wait neither
read nor write what the pending copies write and hold no synchronisation or other async work:
the later wait drains every group. The last wait moves down to just before the first statement
that touches what the copies write (or synchronises, or writes global memory), ahead of the
barrier thread_sync puts before that reader. So `T.copy(K[..], K_s); T.copy(V[..], V_s)` issue both tiles' loads before one wait, one
memory round trip instead of two (the linear-attention chunk loop paid 3-4 a chunk: 16 and 80
chunks in its forward and backward kernels).

    cp K_s ; commit ; wait<0>              cp K_s ; commit
    cp V_s ; commit ; wait<0>      ->      cp V_s ; commit ; wait<0>
    gemm(K_s, V_s)                         gemm(K_s, V_s)

A copy also moves up past synchronous warp-level compute that touches none of what it writes
(`past_mma`; off: tl.disable_copy_hoist_past_mma): mma.sync gemms (tl::gemm_ss / tl::gemm_rs),
ldmatrix / stmatrix / mma_frag calls. Attention's V tile then joins its K tile's group instead of
being loaded after the scores and softmax (one memory round trip a block instead of two):

    cp K_s ; commit+wait ; gemm(Q_s, K_s) ; softmax ; cp V_s ; commit+wait ; gemm(P, V_s)
 -> cp K_s ; commit ; cp V_s ; commit ; wait<0> ; gemm(Q_s, K_s) ; softmax ; gemm(P, V_s)
"""
from __future__ import annotations

import re

from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import Mutator, buffers_used, collect
from ...op.thread_ops import DeclBuffer
from .lower_copy import COPY_COMMIT_WAIT
from .raw import Raw
from .thread_sync import accesses

COMMIT_WAIT = COPY_COMMIT_WAIT
COMMIT = "tl::cp_async_commit();"
WAIT = "tl::cp_async_wait<0>();"
# inline code that synchronises or starts other asynchronous work: a wait may not move past it
_ORDERING = ("sync", "barrier", "wait", "fence", "arrive", "wgmma", "gemm", "tma", "commit", "mbarrier")


# one call of a synchronous warp-level op (no barrier, no wait, no async work inside)
_SYNC_MMA = re.compile(r"tl::(gemm_ss|gemm_rs|ldmatrix_frag|ldmatrix_to|stmatrix_pack|mma_frag)<[^;]*\);?")


def merge_cp_async_waits(body: S.Stmt, past_mma: bool = True) -> S.Stmt:
    return _Merge(past_mma).visit(body)


def _sync_mma(r: Raw) -> bool:
    """r is one synchronous mma.sync-family call (a copy may pass it if their buffers are apart)."""
    return bool(_SYNC_MMA.fullmatch(r.fmt.strip()))


def _is_commit_wait(st) -> bool:
    return isinstance(st, Raw) and st.fmt == COMMIT_WAIT


def _cp_writes(stmts) -> dict:
    """The shared buffers the cp.async vectors among stmts write, by storage."""
    out = {}
    for st in stmts:
        for r in collect(st, lambda x: isinstance(x, Raw) and "cp_async_zfill" in x.fmt):
            for b in r.writes:
                out.setdefault(getattr(b, "view_base", b).uid, b)
    return out


def _orders(st, past_mma: bool = False) -> bool:
    """st synchronises threads or starts / waits for asynchronous work (other than a cp.async copy;
    with past_mma, other than synchronous mma.sync-family calls)."""
    if isinstance(st, (S.While, S.KernelLaunch)):
        return True
    for r in collect(st, lambda x: isinstance(x, Raw)):
        if "cp_async_zfill" in r.fmt or past_mma and _sync_mma(r):
            continue
        if any(w in r.fmt for w in _ORDERING):
            return True
    return False


def _is_copy(st) -> bool:
    """A loop (or statement) of cp.async vectors and nothing that orders."""
    return bool(collect(st, lambda x: isinstance(x, Raw) and "cp_async_zfill" in x.fmt)) and not _orders(st)


def _writes_global(st) -> bool:
    return bool(collect(st, lambda x: isinstance(x, S.BufferStore) and x.buffer.scope == "global"
                        or isinstance(x, E.Call) and (x.op.startswith("atomic_") or x.op.startswith("extern:"))))


def _hoist_copies(stmts: list, past_mma: bool = False) -> list:
    """Each cp.async copy (its loop and the commit after it) moved up past the statements before it
    that it does not depend on: synchronous element copies that ran first kept the copy's loads
    from leaving until theirs had returned."""
    stmts = list(stmts)
    i = 0
    while i < len(stmts) - 1:
        st, nxt = stmts[i], stmts[i + 1]
        if _is_copy(st) and isinstance(nxt, Raw) and nxt.fmt in (COMMIT, COMMIT_WAIT):
            names = set(collect(st, lambda x: isinstance(x, E.Var)))
            bufs = {b.uid for b in buffers_used(st)}
            touched = accesses(st)[1]
            j = i
            while j > 0:
                prev = stmts[j - 1]
                # NOTE: never above the declaration of a buffer it uses (a T.Tensor view of a parameter)
                if isinstance(prev, S.LetStmt) and prev.var in names or \
                        isinstance(prev, (S.Allocate, DeclBuffer)) and prev.buffer.uid in bufs or \
                        _is_copy(prev) or isinstance(prev, Raw) and not (past_mma and _sync_mma(prev)) or \
                        _orders(prev, past_mma) or _writes_global(prev):
                    break
                reads, writes = accesses(prev)
                if (reads | writes) & touched:
                    break
                j -= 1
            if j < i:
                stmts[j:i + 2] = [st, nxt] + stmts[j:i]
            i += 2
            continue
        i += 1
    return stmts


class _Merge(Mutator):
    def __init__(self, past_mma: bool):
        self.past_mma = past_mma

    def visit_SeqStmt(self, s: S.SeqStmt):
        stmts = []
        for x in s.stmts:  # a copy lowers to a sequence of its own: its loop, then its commit + wait
            x = self.visit(x)
            stmts += x.stmts if isinstance(x, S.SeqStmt) else [x]
        stmts = _hoist_copies(stmts, self.past_mma)
        out = []
        pending = None  # index in out of a commit + wait that may yet become a commit alone
        written: dict = {}  # what the copies before it write (storage uid -> buffer)
        since = 0  # first statement after the last commit + wait
        for st in stmts:
            if _is_commit_wait(st):
                mine = _cp_writes(out[since:])
                if pending is not None:
                    out[pending] = Raw(COMMIT, span=out[pending].span)
                    written.update(mine)
                else:
                    written = mine
                pending, since = len(out), len(out) + 1
                out.append(st)
                continue
            if pending is not None:
                reads, writes = accesses(st)
                if (reads | writes) & written.keys() or _orders(st) or _writes_global(st):
                    out = _sink_wait(out, pending, written)
                    pending, written = None, {}
            out.append(st)
        if pending is not None:
            out = _sink_wait(out, pending, written)
        return S.seq(*out)


def _sink_wait(out: list, p: int, written: dict) -> list:
    """The wait of the commit + wait at p moved to the end of `out` (just before the statement that
    needs the copies, which the caller appends next): the statements between issue their own
    loads while the copies are in flight. The wait declares that it writes what the copies write:
    their data lands there, so thread_sync's barrier before a reader goes after the wait (a barrier
    it puts between a copy and the wait for other statements' sake orders nothing of the copy's)."""
    bufs = tuple(written.values())
    if p == len(out) - 1:
        return out[:p] + [Raw(out[p].fmt, writes=bufs, span=out[p].span)]
    return out[:p] + [Raw(COMMIT, span=out[p].span)] + out[p + 1:] + [Raw(WAIT, writes=bufs, span=out[p].span)]
