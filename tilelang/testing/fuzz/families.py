"""The gemm, thread-level and atomic program families (the tile family is in generator.py).

gemm: A (M, K) or (K, M), B (K, N) or (N, K) through shared tiles in a T.Pipelined k-loop,
T.gemm into a fragment (or A through a fragment, the RS form), an epilogue (elementwise, a column
broadcast D[j], a row reduction) and a store.
Shapes follow the public rules: tile M a multiple of 16, N of 8, K of the instruction's k
(16 for 16-bit, 32 for 8-bit, 8 for fp32), a warp split that exists for the thread count
and, where sm_90a would pick wgmma, a warpgroup split too. 8-bit operands are K-major.
"""
from __future__ import annotations

import random

from .gen_base import Gen, as_dtype, expr, ragged, tile_ref, warp_split_ok
from .spec import Atomic, Copy, Ew, Fill, Flip, Gemm, If, Lin, Pipelined, Reduce, Ref, Scan, SetVar

__all__ = ["gen_gemm", "gen_thread", "gen_branch", "gen_atomic", "gemm_shape", "wgmma_eligible"]

_I, _J = Lin.of(("i", 1)), Lin.of(("j", 1))


def wgmma_eligible(dt, acc, ta, tb, BM, nw) -> bool:
    if BM < 64 or nw % 4:
        return False
    if dt in ("float16", "bfloat16"):
        return acc == "float32" or (dt == "float16" and acc == "float16")
    if dt.startswith("float8") or dt == "int8":
        return not ta and tb
    return False


def gemm_shape(g: Gen):
    """(dtype, acc, BM, BN, BK, threads, ta, tb, policy) satisfying the public rules."""
    while True:
        dt = g.r.choices(("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "float32"),
                         (40, 20, 10, 5, 10, 15))[0]
        acc = "int32" if dt == "int8" else ("float16" if dt == "float16" and g.coin(0.2) else "float32")
        threads = g.pick((32, 64, 128, 256))
        nw = threads // 32
        BM, BN = g.pick((16, 32, 64, 128)), g.pick((8, 16, 24, 32, 40, 48, 64, 96, 128))
        BK = g.pick({"float32": (8, 16, 32)}.get(dt, (32, 64) if dt in ("int8",) or dt.startswith("float8")
                                                  else (16, 32, 64)))
        if dt in ("int8",) or dt.startswith("float8"):
            ta, tb = False, True
        else:
            ta, tb = (False if dt == "float32" else g.coin(0.3)), g.coin(0.4)
        policy = g.pick(("Square", "FullRow", "FullCol"))
        if BM * BN > 8192 or BM * BN < threads // 2 or not warp_split_ok(policy, BM, BN, nw):
            continue
        if wgmma_eligible(dt, acc, ta, tb, BM, nw) and not warp_split_ok(policy, BM, BN, nw, group=4):
            continue
        return dt, acc, BM, BN, BK, threads, ta, tb, policy


def gen_gemm(g: Gen):
    dt, acc, BM, BN, BK, threads, ta, tb, policy = gemm_shape(g)
    gy, gx, kt = g.pick((1, 2)), g.pick((1, 2)), g.pick((1, 2, 3))
    M, N = ragged(g, BM, gy), ragged(g, BN, gx)
    single = kt == 1 and g.coin(0.3)  # one k-step, no loop, clear_accum=True
    K = BK * kt if single else ragged(g, BK, kt)
    Md, Nd, Kd = g.dim(M, "m", "M"), g.dim(N, "n", "N"), g.dim(K, "k_", "K")
    A = g.tensor("A", (Kd, Md) if ta else (Md, Kd), dt)
    B = g.tensor("B", (Nd, Kd) if tb else (Kd, Nd), dt)
    out_dt = acc if g.coin(0.6) or acc == "int32" else g.pick(("float16", "bfloat16", "float32"))
    O = g.tensor("O", (Md, Nd), out_dt, "out")
    sdt = "tfloat32" if dt == "float32" and g.coin(0.5) else dt  # tf32 tiles: the mma.sync m16n8k8 path
    As = g.alloc("shared", (BK, BM) if ta else (BM, BK), sdt, base="A_s")
    Bs = g.alloc("shared", (BN, BK) if tb else (BK, BN), sdt, base="B_s")
    C = g.alloc("fragment", (BM, BN), acc, base="C_l")
    rs = not ta and dt in ("float16", "bfloat16") and g.coin(0.2)
    Af = g.alloc("fragment", (BM, BK), dt, base="A_f") if rs else None
    body: list = []

    def kstep(kv):
        a_at = (Lin.of((kv, BK)), Lin.of(("by", BM))) if ta else (Lin.of(("by", BM)), Lin.of((kv, BK)))
        b_at = (Lin.of(("bx", BN)), Lin.of((kv, BK))) if tb else (Lin.of((kv, BK)), Lin.of(("bx", BN)))
        sa = (BK, BM) if ta else (BM, BK)
        sb = (BN, BK) if tb else (BK, BN)
        ra = Ref(A, "corner", a_at) if g.coin() else Ref(A, "slice", a_at, sa)
        rb = Ref(B, "corner", b_at) if g.coin() else Ref(B, "slice", b_at, sb)
        st = [Copy(ra, Ref(As)), Copy(rb, Ref(Bs))]
        if rs:
            st.append(Copy(Ref(As), Ref(Af)))
        st.append(Gemm(Af or As, Bs, C, ta, tb, policy, single))
        return st

    if single:
        body += [Copy(_const_k(s), s.dst) if isinstance(s, Copy) else s for s in kstep("k")]
    else:
        init = g.pick(("clear", "clear", "fill"))
        body.append(Fill(C, 0.0 if init == "clear" else 1.0))
        body.append(Pipelined("k", (Kd, BK), g.pick((0, 1, 2, 3)), tuple(kstep("k"))))
    cd = acc
    for _ in range(g.r.randint(0, 2)):
        u = g.r.random()
        if u < 0.4:
            body.append(Ew(C, (_I, _J), ("bin", "max", ("ld", C, (_I, _J)), ("c", 0 if acc == "int32" else 0.0)),
                           (BM, BN)))
        elif u < 0.7:
            body.append(Ew(C, (_I, _J), expr(g, [("ld", C, (_I, _J))], cd, 2, ("i", "j")) if cd == "float32"
                           else ("bin", "*", ("ld", C, (_I, _J)), ("c", 2 if acc == "int32" else 2.0)), (BM, BN)))
        elif u < 0.78 and cd == "float32" and [h for h in (8, 16, 32) if BN % h == 0 and BN // h > 1]:
            _segments(g, body, C, BM, BN, Md, Nd)
            break
        elif u < 0.85 and cd == "float32":  # a column broadcast: the thread's columns of D (AccColumnFragment)
            D = g.alloc("fragment", (BN,), "float32", base="D")
            Dg = g.tensor("D", (Nd,), "float32")
            body.append(Copy(Ref(Dg, "corner", (Lin.of(("bx", BN)),)), Ref(D)))
            body.append(Ew(C, (_I, _J), ("bin", g.pick(("+", "*")), ("ld", C, (_I, _J)), ("ld", D, (_J,))), (BM, BN)))
        elif gx == 1:
            rd = "int32" if acc == "int32" else "float32"
            R = g.alloc("fragment", (BM,), rd, base="R")
            body.append(Reduce(g.pick(("sum", "max")), C, R, 1, True))
            V = g.tensor("V", (Md,), rd, "out")
            if g.coin(0.3) and rd == "float32":  # a tile atomic from the row fragment: one add per row
                body.append(Atomic(Ref(V, "corner", (Lin.of(("by", BM)),)), R))
            else:
                body.append(Copy(Ref(R), Ref(V, "corner", (Lin.of(("by", BM)),))))
    if g.coin(0.25):  # staged through shared
        Cs = g.alloc("shared", (BM, BN), out_dt, base="C_s")
        body.append(Copy(Ref(C), Ref(Cs)))
        body.append(Copy(Ref(Cs), tile_ref(g, O, M, N, BM, BN)))
    else:
        ref = tile_ref(g, O, M, N, BM, BN)
        side = random.Random(g.seed * 1000003 + 31)  # (a side RNG: every seed keeps the rest of its program)
        if out_dt == "float32" and side.random() < 0.25:  # added from the accumulator: its column pairs as
            # 8-byte vector reductions (vectorize.atomic_vector_loop)
            body.append(Atomic(Ref(O, "corner", (Lin.of(("by", BM)), Lin.of(("bx", BN)))), C))
        else:
            body.append(Copy(Ref(C), ref))
    arch = 89 if dt.startswith("float8") else 80
    return g.program("gemm", ((Nd, BN), (Md, BM)), threads, body, arch_min=arch)


def _segments(g: Gen, body: list, C: str, BM: int, BN: int, Md, Nd):
    """The fp8 lighting indexer's epilogue: C seen as (BM, Q, H), scaled by a per-row and a per-column
    tile, reduced over H into L (BM, Q), stored transposed (a T.Parallel over (Q, BM) reading L[i, q])."""
    H = g.pick([h for h in (8, 16, 32) if BN % h == 0 and BN // h > 1])
    Q = BN // H
    V = g.view(C, (BM, Q, H), base="C3")
    i, q, h = Lin.of(("i", 1)), Lin.of(("q", 1)), Lin.of(("h", 1))
    ld = ("ld", V, (i, q, h))
    if g.coin(0.7):
        W = g.alloc("fragment", (Q, H), "float32", base="W")
        S = g.alloc("fragment", (BM,), "float32", base="Sc")
        body.append(Copy(Ref(g.tensor("Wg", (Q, H), "float32"), "whole"), Ref(W)))
        body.append(Copy(Ref(g.tensor("Sg", (Md,), "float32"), "corner", (Lin.of(("by", BM)),)), Ref(S)))
        val = ("bin", "*", ("bin", "*", ("bin", "max", ld, ("c", 0.0)), ("ld", W, (q, h))), ("ld", S, (i,)))
        body.append(Ew(V, (i, q, h), val, (BM, Q, H), vars=("i", "q", "h")))
    L = g.alloc("fragment", (BM, Q), "float32", base="L")
    body.append(Reduce(g.pick(("sum", "sum", "max")), V, L, 2, True))
    O2 = g.tensor("O2", (Nd, Md), "float32", "out")  # row q of block bx lands at row bx * Q + q
    body.append(Ew(O2, (Lin.of(("bx", Q), ("q", 1)), Lin.of(("by", BM), ("i", 1))), ("ld", L, (i, q)), (Q, BM),
                   vars=("q", "i")))


def _const_k(c: Copy) -> Ref:
    """The k-loop's copy source at k = 0 (the single-step form has no loop variable)."""
    r = c.src
    starts = tuple(Lin(s.const, tuple((v, w) for v, w in s.terms if v != "k")) for s in r.starts)
    return Ref(r.buf, r.form, starts, r.extents, r.full)


def gen_thread(g: Gen):
    threads = g.pick((32, 64, 128))
    BM = threads if g.coin() else threads // 2
    if g.single_thread:  # --no-thread-family: one thread per block (the same draws otherwise)
        threads = BM = 1
    L, gx, gy = g.pick((1, 2, 4, 8)), g.pick((1, 2)), g.pick((1, 2))
    M, N = ragged(g, BM, gy), L * gx
    Md, Nd = g.dim(M, "m", "M"), g.dim(N, "n", "N")
    dt = g.pick(("float32", "float16", "int32"))
    A = g.tensor("A", (Md, Nd), dt)
    O = g.tensor("O", (Md, Nd), dt, "out")
    S = g.alloc("shared", (BM, L), dt)
    loc = g.alloc("local", (L,), dt, base="loc")
    row = Lin.of(("by", BM), ("tx", 1))
    q = Lin.of(("q", 1))
    body = [Copy(tile_ref(g, A, M, N, BM, L), Ref(S))]
    t: list = []
    if g.coin():
        t.append(Copy(Ref(S, "slice", (Lin.of(("tx", 1)), Lin(0)), (1, L)), Ref(loc)))
    elif L > 1 and g.coin(0.4):  # one thread's T.vectorized loop: a vector load of its row of S
        t.append(Ew(loc, (q,), ("ld", S, (Lin.of(("tx", 1)), q)), (L,), "vectorized", ("q",)))
    else:
        t.append(Copy(Ref(A, "slice", (row, Lin.of(("bx", L))), (1, L)), Ref(loc)))
    e = expr(g, [("ld", loc, (q,))], dt, 2, ("q",))
    # T.Parallel over a thread's own local array runs whole in that thread, as T.serial does
    t.append(Ew(loc, (q,), e, (L,), "parallel" if g.coin(0.3) else "serial", ("q",)))
    acc_dt = "int32" if dt == "int32" else "float32"
    use_var = g.coin(0.6)
    if use_var:
        v = g.alloc("var", (1,), acc_dt, base="acc")
        t.append(SetVar(v, ("c", 0 if acc_dt == "int32" else 0.0)))
        t.append(Ew(v, (Lin(0),), ("bin", g.pick(("+", "max")), ("var", v), as_dtype(dt, acc_dt, ("ld", loc, (q,)))),
                    (L,), "serial", ("q",)))
    stage = g.coin(0.4)
    if stage:
        S2 = g.alloc("shared", (BM, L), dt)
        t.append(Copy(Ref(loc), Ref(S2, "slice", (Lin.of(("tx", 1)), Lin(0)), (1, L))))
    else:
        t.append(Copy(Ref(loc), Ref(O, "slice", (row, Lin.of(("bx", L))), (1, L))))
    if use_var:
        V = g.tensor("V", (Md, gx), acc_dt, "out")
        store = Ew(V, (row, Lin.of(("bx", 1))), ("var", v), (1,), "serial", ("q",))
        t.append(If(("cmp", "<", ("ix", row), ("ix", Lin.of((Md, 1)) if isinstance(Md, str) else Lin(Md))),
                    (store,)))
    body.append(If(("cmp", "<", ("ix", Lin.of(("tx", 1))), ("c", BM)), tuple(t)) if BM < threads else t[0])
    if BM == threads:
        body += t[1:]
    if stage:
        body.append(Copy(Ref(S2), tile_ref(g, O, M, N, BM, L)))
    return g.program("thread", ((Nd, L), (Md, BM)), threads, body, uses_tx=True)


def gen_branch(g: Gen):
    """Block-level ops in branches on the thread index: a shared tile loaded by the whole block, then
    `if tx < s:` and `if tx >= s:` (s whole warps or warp groups; 40 % of programs make one of them
    lanes of one warp, `if tx == c` or `if tx >= lo:` around `if tx < hi:`), each holding a T.Parallel
    loop into its own output tensor, a T.copy of the tile, or a row reduction of it (float32), which run over
    that branch's threads only;
    30 % first bump the tile in a T.Parallel under `if v > 0`, v a T.alloc_var read from a Flag tensor;
    30 % end with two more branches on one of those conditions, the second reading the tile the first
    wrote with its rows reversed (a barrier of those threads between them);
    30 % add a prefix sum written as SIMT code of one thread range between that range's barriers (spec.Scan:
    a named `T.sync_threads(id, n)` as topk_selector's, the branch's `T.sync_threads()`, or none written);
    25 % a shared tile written and read reversed by any interval of threads, no barrier written (spec.Flip; half
    of them with the condition bound to a name first)
    (transform/thread_scopes.py, cpu_threads.py). A loop such a branch kept as a plain `if` had its iterations dealt
    to threads that never take it (no output on CUDA, no error)."""
    if g.single_thread:  # --no-thread-family: no thread model, so no thread branches
        return gen_thread(g)
    threads = g.pick((64, 128, 256))
    unit = 128 if threads == 256 and g.coin() else 32
    split = g.r.randrange(1, threads // unit) * unit
    BM, BN = g.pick((8, 16, 32)), g.pick((8, 16, 32, 64))
    gx, gy = g.pick((1, 2)), g.pick((1, 2))
    exact = g.coin()  # whole tiles: a branch may hold only a T.Parallel loop into the output
    M, N = (BM * gy, BN * gx) if exact else (ragged(g, BM, gy), ragged(g, BN, gx))
    Md, Nd = g.dim(M, "m", "M"), g.dim(N, "n", "N")
    dt = g.pick(("float32", "float16"))
    A = g.tensor("A", (Md, Nd), dt)
    S = g.alloc("shared", (BM, BN), dt)
    body = [Copy(tile_ref(g, A, M, N, BM, BN), Ref(S))]
    if g.coin(0.3):  # a T.alloc_var with one value in every thread, and a block-level loop under `if` on it
        flags = g.tensor("Flag", (4,), "int32")
        v = g.alloc("var", (1,), "int32")
        body.append(SetVar(v, ("ld", flags, (Lin.of(("bx", 1), const=g.r.randrange(0, 2)),))))
        bump = ("bin", "+", ("ld", S, (_I, _J)), ("c", 1.0))
        body.append(If(("cmp", g.pick((">", "<=")), ("var", v), ("c", 0)), (Ew(S, (_I, _J), bump, (BM, BN)),)))
    tx = ("ix", Lin.of(("tx", 1)))
    conds = [(("cmp", "<", tx, ("c", split)),), (("cmp", ">=", tx, ("c", split)),)]
    lanes = [False, False]
    if g.coin(0.4):  # lanes of one warp instead: `if tx == c`, or `if tx >= lo:` around `if tx < hi:`
        lo = g.r.randrange(threads // 32) * 32 + g.r.randrange(32)
        hi = g.r.randrange(lo + 1, (lo // 32 + 1) * 32 + 1)
        k = g.r.randrange(2)
        lanes[k] = True
        conds[k] = ((("cmp", "==", tx, ("c", lo)),) if hi == lo + 1 and g.coin() else
                    (("cmp", ">=", tx, ("c", lo)), ("cmp", "<", tx, ("c", hi))))
    for cond in conds:  # (a reduction over n warps may start at any warp: fuzz seed 188's 6 warps at warp 2)
        O = g.tensor("O", (Md, Nd), dt, "out")
        e = expr(g, [("ld", S, (_I, _J))], dt, 2, ("i", "j"))
        u = g.r.random()
        if u < 0.25:  # the tile out by T.copy (clipped at ragged edges)
            ops = (Copy(Ref(S), tile_ref(g, O, M, N, BM, BN)),)
        elif exact and u < 0.6:  # only a T.Parallel loop, straight into the output
            ops = (Ew(O, (Lin.of(("by", BM), ("i", 1)), Lin.of(("bx", BN), ("j", 1))), e, (BM, BN)),)
        elif u < 0.75 and dt == "float32":  # a reduction of the tile's rows over the branch's threads
            R = g.alloc("fragment", (BM,), dt, base="R")
            V = g.tensor("V", (Md, gx), dt, "out")  # one column per block column: each block its own partial rows
            ops = (Reduce(g.pick(("sum", "max")), S, R, 1, True),
                   Copy(Ref(R), Ref(V, "slice", (Lin.of(("by", BM)), Lin.of(("bx", 1))), (BM, 1))))
        else:  # a T.Parallel loop into a shared tile, then T.copy out
            F = g.alloc("shared", (BM, BN), dt)
            ops = (Ew(F, (_I, _J), e, (BM, BN)), Copy(Ref(F), tile_ref(g, O, M, N, BM, BN)))
        for c in reversed(cond):
            ops = (If(c, ops),)
        body += ops
    if g.coin(0.3):  # two more branches over the same threads, the second reading the first's tile rows reversed
        cond = g.pick(conds)
        F = g.alloc("shared", (BM, BN), dt)
        O = g.tensor("O", (Md, Nd), dt, "out")
        first = (Ew(F, (_I, _J), expr(g, [("ld", S, (_I, _J))], dt, 2, ("i", "j")), (BM, BN)),)
        flip = ("ld", F, (Lin.of(("i", -1), const=BM - 1), _J))
        G = g.alloc("shared", (BM, BN), dt)
        second = (Ew(G, (_I, _J), flip, (BM, BN)), Copy(Ref(G), tile_ref(g, O, M, N, BM, BN)))
        for ops in (first, second):
            for c in reversed(cond):
                ops = (If(c, ops),)
            body += ops
    if g.coin(0.3):  # a prefix sum as SIMT code of one thread range, between barriers of those threads
        body += _scan(g, threads, gx, gy)
    if g.coin(0.25):  # a write and a reversed read of a shared tile by any interval of threads, no barrier written
        n = g.r.randrange(1, threads + 1)
        dt = g.pick(("float32", "int32"))
        X, P = g.tensor("X", (n,), dt), g.alloc("shared", (n,), dt, base="P")
        body.append(Flip(X, P, g.tensor("Y", (gy, gx * n), dt, "out"), g.r.randrange(threads - n + 1), n, g.coin()))
    return g.program("branch", ((Nd, BN), (Md, BM)), threads, body, uses_tx=True)


def _scan(g: Gen, threads: int, gx: int, gy: int) -> list:
    """A Scan (spec.py) of a 1-d shared tile loaded from X, then stored to block (by, bx)'s row piece of Y:
    named barriers over whole warps (half the time), or over whole warps or lanes of one warp the branch's
    T.sync_threads() or no barrier written (the compiler's)."""
    named = g.coin()
    if named or g.coin():
        n = g.pick([c for c in (32, 64, 128) if c <= threads])
        lo = g.r.randrange((threads - n) // 32 + 1) * 32
    else:
        n = g.pick((2, 4, 8, 16))
        lo = g.r.randrange(threads // 32) * 32 + g.r.randrange(32 - n + 1)
    dt = g.pick(("float32", "int32"))
    X = g.tensor("X", (n,), dt)
    P = g.alloc("shared", (n,), dt, base="P")
    v = g.alloc("var", (1,), dt, base="v")
    out = g.tensor("Y", (gy, gx * n), dt, "out")
    bar = g.pick((1, 2, 3, 5)) if named else g.pick((0, -1))  # -1: no barrier written, the compiler's
    return [Copy(Ref(X), Ref(P)), Scan(P, v, lo, n, bar),
            Copy(Ref(P), Ref(out, "slice", (Lin.of(("by", 1)), Lin.of(("bx", n))), (1, n)))]


def gen_atomic(g: Gen):
    BM, BN = g.pick((8, 16, 32)), g.pick((8, 16, 32))
    gx, gy = g.pick((2, 3, 4)), g.pick((1, 2))
    M, N = BM * gy, ragged(g, BN, gx)
    Md, Nd = g.dim(M, "m", "M"), g.dim(N, "n", "N")
    dt = g.pick(("float32", "int32"))
    A = g.tensor("A", (Md, Nd), dt)
    X = g.alloc(g.pick(("shared", "fragment")), (BM, BN), dt)
    body = [Copy(tile_ref(g, A, M, N, BM, BN), Ref(X))]
    if g.coin():
        body.append(Ew(X, (_I, _J), expr(g, [("ld", X, (_I, _J))], dt, 2, ("i", "j")), (BM, BN)))
    if g.coin():
        O = g.tensor("O", (Md, BN), dt, "out")
        body.append(Atomic(Ref(O, "corner", (Lin.of(("by", BM)), Lin(0))), X))
    else:
        R = g.alloc("fragment", (BM,), dt, base="R")
        body.append(Reduce("sum", X, R, 1, True))
        V = g.tensor("V", (Md,), dt, "out")
        body.append(Atomic(Ref(V, "corner", (Lin.of(("by", BM)),)), R))
    return g.program("atomic", ((Nd, BN), (Md, BM)), g.pick((32, 64, 128)), body)
