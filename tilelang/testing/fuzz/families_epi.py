"""The gemm-epilogue program family: a gemm k-loop, then reductions of the accumulator and
broadcasts over it.

epi   T.gemm into an accumulator C in a T.Pipelined k-loop: the gemm family's shapes, or (two in
      five) a large tile -- 128x256, 64x256, 256x128, 192x128, 128x192, 128x128, 256x64 at 256, 384
      or 512 threads, 16-bit or fp8 operands -- which sm_90a splits over 2-4 consumer warpgroups
      under the gemm's policy and the grid cost check. Then one to three epilogue steps over C:
      T.reduce_sum / max / min / absmax along dim 1 (rows) or dim 0 (columns), clear True or False
      (into a filled vector), into a fragment or a shared vector; the reduced vector broadcast back
      over C in a T.Parallel (C[i, j] op R[i] or R[j]); a per-row or per-column vector read from
      global and broadcast; a reduction of a (BM, Q, H) reshape of C over its H segments (H up to
      128, so segments may span warpgroups; a third of them under tl.disable_split_segment_reduce).
      Stores: C (T.copy, through shared, or a T.Parallel with a cast) and each reduced vector
      (guarded T.Parallel stores: rows into V (M, grid_x), columns into W (grid_y, N)).
The rules are the gemm family's (families.gemm_shape, gen_base.warp_split_ok, families.wgmma_eligible),
and a large tile's pipeline stages keep its shared memory under 160 KB.
"""
from __future__ import annotations

import random

from .families import gemm_shape, wgmma_eligible
from .gen_base import Gen, as_dtype, ragged, tile_ref, warp_split_ok
from .spec import Copy, Ew, Fill, Gemm, Lin, Pipelined, Reduce, Ref

__all__ = ["gen_epi", "big_shape"]

_I, _J = Lin.of(("i", 1)), Lin.of(("j", 1))
_BIG = ((128, 256), (64, 256), (256, 128), (192, 128), (128, 192), (128, 128), (256, 64),
        (128, 176), (192, 112), (128, 80))  # the last three: wgmma widths outside the common eight
_SMEM = 160 * 1024
_BYTES = {"float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "float32": 4, "int32": 4}


def big_shape(g: Gen):
    """(dtype, acc, BM, BN, BK, threads, ta, tb, policy, stages) of a large tile at 256-512 threads,
    valid under the public rules (a warp split, and a warpgroup split where wgmma takes it)."""
    while True:
        dt = g.r.choices(("float16", "bfloat16", "float8_e4m3fn"), (45, 35, 20))[0]
        BM, BN = g.pick(_BIG)
        threads = g.pick((256, 384, 512))
        nw = threads // 32
        policy = g.pick(("Square", "FullRow", "FullCol"))
        eight = dt.startswith("float8")
        ta, tb = (False, True) if eight else (g.coin(0.2), g.coin(0.5))
        acc = "float32"
        BK = g.pick((32, 64))
        if not warp_split_ok(policy, BM, BN, nw):
            continue
        if wgmma_eligible(dt, acc, ta, tb, BM, nw) and not warp_split_ok(policy, BM, BN, nw, group=4):
            continue
        per_stage = (BM + BN) * BK * _BYTES[dt]
        stages = g.pick([s for s in (1, 2, 3) if s * per_stage <= _SMEM] or [1])
        return dt, acc, BM, BN, BK, threads, ta, tb, policy, stages


def gen_epi(g: Gen):
    big = g.coin(0.4)
    if big:
        dt, acc, BM, BN, BK, threads, ta, tb, policy, stages = big_shape(g)
    else:
        dt, acc, BM, BN, BK, threads, ta, tb, policy = gemm_shape(g)
        stages = g.pick((0, 1, 2, 3))
    gy, gx, kt = g.pick((1, 2)), g.pick((1, 2)), g.pick((1, 2, 3))
    M, N, K = ragged(g, BM, gy), ragged(g, BN, gx), ragged(g, BK, kt)
    if big:  # K-major rows stay 16-byte aligned for the TMA / cp.async loads
        K = BK * kt if g.coin() else BK * kt - 16 * g.r.randrange(1, BK // 16)
    Md, Nd, Kd = g.dim(M, "m", "M"), g.dim(N, "n", "N"), g.dim(K, "k_", "K")
    A = g.tensor("A", (Kd, Md) if ta else (Md, Kd), dt)
    B = g.tensor("B", (Nd, Kd) if tb else (Kd, Nd), dt)
    out_dt = acc if g.coin(0.6) or acc == "int32" else g.pick(("float16", "bfloat16", "float32"))
    O = g.tensor("O", (Md, Nd), out_dt, "out")
    As = g.alloc("shared", (BK, BM) if ta else (BM, BK), dt, base="A_s")
    Bs = g.alloc("shared", (BN, BK) if tb else (BK, BN), dt, base="B_s")
    C = g.alloc("fragment", (BM, BN), acc, base="C_l")
    a_at = (Lin.of(("k", BK)), Lin.of(("by", BM))) if ta else (Lin.of(("by", BM)), Lin.of(("k", BK)))
    b_at = (Lin.of(("bx", BN)), Lin.of(("k", BK))) if tb else (Lin.of(("k", BK)), Lin.of(("bx", BN)))
    body: list = [Fill(C, 0.0 if g.coin(0.8) else 1.0),
                  Pipelined("k", (Kd, BK), stages, (Copy(Ref(A, "corner", a_at), Ref(As)),
                                                     Copy(Ref(B, "corner", b_at), Ref(Bs)),
                                                     Gemm(As, Bs, C, ta, tb, policy)))]
    configs: dict = {}
    rd = "int32" if acc == "int32" else "float32"
    vecs: list = []  # (name, "row" | "col", dtype)
    for _ in range(g.r.randint(1, 3)):
        u = g.r.random()
        if u < 0.4:  # reduce C along a dim, maybe broadcast back at once
            dim = g.pick((1, 0))
            kind = "row" if dim == 1 else "col"
            scope = "shared" if g.coin(0.15) else "fragment"
            R = g.alloc(scope, (BM if kind == "row" else BN,), rd, base="R")
            clear = g.coin(0.6)
            if not clear:
                body.append(Fill(R, g.pick((0.0, 1.0, -2.0)) if rd == "float32" else g.pick((0, 1))))
            body.append(Reduce(g.pick(("sum", "max", "min", "absmax")), C, R, dim, clear))
            vecs.append((R, kind, rd))
            if g.coin(0.6):
                _broadcast(g, body, C, acc, BM, BN, vecs[-1])
        elif u < 0.52 and vecs:  # an earlier vector broadcast again (after C changed)
            _broadcast(g, body, C, acc, BM, BN, g.pick(vecs))
        elif u < 0.68:  # a per-row or per-column vector from global
            kind = g.pick(("row", "col"))
            vd = "int32" if acc == "int32" else "float32"
            if kind == "row":
                Vg = g.tensor("Dr", (Md,), vd)
                D = g.alloc("fragment", (BM,), vd, base="D")
                body.append(Copy(Ref(Vg, "corner", (Lin.of(("by", BM)),)), Ref(D)))
            else:
                Vg = g.tensor("Dc", (Nd,), vd)
                D = g.alloc("fragment", (BN,), vd, base="D")
                body.append(Copy(Ref(Vg, "corner", (Lin.of(("bx", BN)),)), Ref(D)))
            _broadcast(g, body, C, acc, BM, BN, (D, kind, vd), mul=True)
        elif u < 0.9 and acc == "float32" and [h for h in (8, 16, 32, 64, 128) if BN % h == 0 and BN // h > 1]:
            _segments(g, body, C, BM, BN, Md, Nd, gx)
            if random.Random(g.seed * 1000003 + 37).random() < 1 / 3:
                configs["tl.disable_split_segment_reduce"] = True
        else:  # elementwise: a relu or a scale
            op = g.pick(("max", "*"))
            c = (0 if op == "max" else 2) if acc == "int32" else (0.0 if op == "max" else 0.5)
            body.append(Ew(C, (_I, _J), ("bin", op, ("ld", C, (_I, _J)), ("c", c)), (BM, BN)))
    for R, kind, dtp in vecs:
        if g.coin(0.7):
            _store_vec(g, body, R, kind, dtp, BM, BN, Md, Nd, gx, gy)
    u = g.r.random()
    smem = (max(stages, 1)) * ((BM + BN) * BK * _BYTES[dt]) + BM * BN * _BYTES[out_dt]
    if u < 0.2 and smem <= 200 * 1024:  # staged through shared
        Cs = g.alloc("shared", (BM, BN), out_dt, base="C_s")
        body.append(Copy(Ref(C), Ref(Cs)))
        body.append(Copy(Ref(Cs), tile_ref(g, O, M, N, BM, BN)))
    elif u < 0.4:  # a guarded T.Parallel store with a cast
        body.append(Ew(O, (Lin.of(("by", BM), ("i", 1)), Lin.of(("bx", BN), ("j", 1))),
                       as_dtype(acc, out_dt, ("ld", C, (_I, _J))), (BM, BN)))
    else:
        body.append(Copy(Ref(C), tile_ref(g, O, M, N, BM, BN)))
    arch = 89 if dt.startswith("float8") else 80
    p = g.program("epi", ((Nd, BN), (Md, BM)), threads, body, arch_min=arch)
    return p.with_(pass_configs=configs) if configs else p


def _broadcast(g: Gen, body: list, C: str, acc: str, BM: int, BN: int, vec, mul: bool = False):
    """C[i, j] = C[i, j] op vec[i] (a row vector) or vec[j] (a column vector), in a T.Parallel;
    op * only for vectors read from global (small values), else + - max min."""
    R, kind, dtp = vec
    v = as_dtype(dtp, acc, ("ld", R, (_I,) if kind == "row" else (_J,)))
    op = g.pick(("+", "-", "max", "min") + (("*",) if mul else ()))
    c = ("ld", C, (_I, _J))
    if g.coin(0.3) and acc == "float32":  # softmax-like: exp(-|C - v|) scaled
        e = ("bin", "*", ("un", "expn", ("bin", "-", c, v)), ("c", 4.0))
    else:
        e = ("bin", op, c, v)
    body.append(Ew(C, (_I, _J), e, (BM, BN)))


def _store_vec(g: Gen, body: list, R: str, kind: str, dtp: str, BM, BN, Md, Nd, gx: int, gy: int):
    """A reduced vector out through a guarded T.Parallel: row vectors of block (bx, by) into column bx
    of V (M, gx); column vectors into row by of W (gy, N)."""
    if kind == "row":
        V = g.tensor("V", (Md, gx), dtp, "out")
        body.append(Ew(V, (Lin.of(("by", BM), ("i", 1)), Lin.of(("bx", 1))), ("ld", R, (_I,)), (BM,), vars=("i",)))
    else:
        W = g.tensor("W", (gy, Nd), dtp, "out")
        body.append(Ew(W, (Lin.of(("by", 1)), Lin.of(("bx", BN), ("j", 1))), ("ld", R, (_J,)), (BN,), vars=("j",)))


def _segments(g: Gen, body: list, C: str, BM: int, BN: int, Md, Nd, gx: int):
    """C seen as (BM, Q, H), scaled per row, reduced over H into L (BM, Q), stored into O2 (M, gx * Q)."""
    H = g.pick([h for h in (8, 16, 32, 64, 128) if BN % h == 0 and BN // h > 1])
    Q = BN // H
    V = g.view(C, (BM, Q, H), base="C3")
    i, q, h = Lin.of(("i", 1)), Lin.of(("q", 1)), Lin.of(("h", 1))
    ld = ("ld", V, (i, q, h))
    if g.coin(0.6):
        S = g.alloc("fragment", (BM,), "float32", base="Sc")
        body.append(Copy(Ref(g.tensor("Sg", (Md,), "float32"), "corner", (Lin.of(("by", BM)),)), Ref(S)))
        body.append(Ew(V, (i, q, h), ("bin", "*", ("bin", "max", ld, ("c", 0.0)), ("ld", S, (i,))), (BM, Q, H),
                       vars=("i", "q", "h")))
    L = g.alloc("fragment", (BM, Q), "float32", base="L")
    body.append(Reduce(g.pick(("sum", "max", "min", "absmax")), V, L, 2, True))
    O2 = g.tensor("O2", (Md, gx * Q), "float32", "out")
    body.append(Ew(O2, (Lin.of(("by", BM), ("i", 1)), Lin.of(("bx", Q), ("q", 1))), ("ld", L, (i, q)), (BM, Q),
                   vars=("i", "q")))
