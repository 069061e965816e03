"""The attention program family: two chained gemms with an online softmax between them.

attn   S = Q K^T into a cleared or masked score tile (a ragged KV length masks its last tile
       to -1e30 before the gemm), a running row max folded in with T.reduce_max(clear=False),
       the shifted scores through exp(-|x|) (= exp(x) for x <= 0, the spec's only exponential),
       a running row sum, P = S cast to 16 bits, O = O * scale + P V, over a T.Pipelined KV loop
       (1-3 stages, the V copy at the top of the body or just before its gemm, as the public
       examples write it). The outputs are O and the row sums l, unnormalized (the spec has no
       division). On sm_90a this is the warp-specialized two-gemm consumer (wgmma SS then RS;
       consumer warpgroups taking turns at 256 threads with D = 128 and at 384 threads, 192-row
       tiles, where a ragged last tile leaves whole warpgroups past the end: half of those under
       tl.enable_ws_dead_rows);
       on sm_80 mma.sync with P in registers; on the CPU backend plain loops. A third of them set
       tl.enable_ws_overlap (the next scores gemm in flight beside the output gemm on sm_90a).
       Half of them (a draw apart from the rest) take the base-2 softmax, 2^-|x c' - m c'| with
       c' = c log2(e), and two thirds of those set tl.enable_exp2_poly (True, 1/2, 3/8 or 1: that
       share of the scores' exp2 as a polynomial on the FMA pipe).
"""
from __future__ import annotations

import math
import random

from .gen_base import Gen, ragged, tile_ref
from .spec import Copy, Ew, Fill, Gemm, Lin, Pipelined, Reduce, Ref

__all__ = ["gen_attn"]

_I, _J = Lin.of(("i", 1)), Lin.of(("j", 1))
NEG = -1e30  # a masked score: exp(-|NEG * c - m * c|) is 0, and it never wins a row max


def _mul(a, b):
    return ("bin", "*", a, b)


def _shifted_exp(x, m, c, op="expn"):
    """exp(x * c - m * c) for x <= m, as exp(-|.|) (op "exp2n": 2^(x * c - m * c), as 2^-|.|)."""
    return ("un", op, ("bin", "-", _mul(x, ("c", c)), _mul(m, ("c", c))))


def gen_attn(g: Gen):
    dt = g.pick(("float16", "bfloat16"))
    threads = g.pick((128, 256))
    if threads == 256 and random.Random(g.seed * 7368787 + 21).random() < 0.3:
        threads = 384  # three consumer warpgroups taking turns on sm_90a (drawn apart: other programs keep theirs)
    BM = threads // 2  # 16 rows a warp: FullRow keeps each row in one warp
    D = g.pick((32, 64, 128))
    BN = g.pick((32, 64, 128))
    stages = g.pick((1, 2, 2, 3)) if D * BN < 128 * 128 else g.pick((1, 2))
    if threads == 384:  # Q's 192 rows beside the K / V stages within sm_80's 163 KB of shared memory
        stages = max(1, min(stages, (160 * 1024 - BM * D * 2) // (2 * BN * D * 2)))
    gy, nkv = g.pick((1, 2)), g.pick((1, 2, 3, 4))
    Sq = ragged(g, BM, gy)
    ragged_kv = g.coin(0.5)
    Skv = BN * nkv - (8 * g.r.randrange(1, BN // 8) if ragged_kv else 0)
    c = round(1.0 / math.sqrt(D), 6)
    # half the seeds take the base-2 softmax (the scale folds in log2(e)), two thirds of those under
    # tl.enable_exp2_poly: drawn apart from g.r, so the rest of every program is what it was
    side = random.Random(g.seed * 7368787 + 20)
    exp_op, poly = "expn", None
    if side.random() < 0.5:
        exp_op, c = "exp2n", round(c * math.log2(math.e), 6)
        if side.random() < 2 / 3:
            poly = side.choice((True, "1/2", "3/8", 1.0))
    Q = g.tensor("Q", (Sq, D), dt)
    K = g.tensor("K", (Skv, D), dt)
    V = g.tensor("V", (Skv, D), dt)
    O = g.tensor("O", (Sq, D), g.pick(("float32", dt)), "out")
    L = g.tensor("L", (Sq,), "float32", "out")
    Qs = g.alloc("shared", (BM, D), dt, base="Q_s")
    Ks = g.alloc("shared", (BN, D), dt, base="K_s")
    Vs = g.alloc("shared", (BN, D), dt, base="V_s")
    Sf = g.alloc("fragment", (BM, BN), "float32", base="S_l")
    P = g.alloc("fragment", (BM, BN), dt, base="P_l")
    Of = g.alloc("fragment", (BM, D), "float32", base="O_l")
    m, mp, sc, rs, l = (g.alloc("fragment", (BM,), "float32", base=b) for b in ("m", "m_prev", "scale", "rsum", "l"))
    row = (_I,)
    kv_row = Lin.of(("k", BN))
    copy_k = Copy(Ref(K, "corner", (kv_row, Lin.of())), Ref(Ks))
    copy_v = Copy(Ref(V, "corner", (kv_row, Lin.of())), Ref(Vs))
    init, clear = [], False
    if ragged_kv or g.coin(0.3):  # masked scores: -1e30 past the KV length
        valid = ("cmp", "<", ("ix", Lin.of(("k", BN), ("j", 1))), ("c", Skv))
        init = [Ew(Sf, (_I, _J), ("ite", valid, ("c", 0.0), ("c", NEG)), (BM, BN))]
    elif g.coin():
        init = [Fill(Sf, 0.0)]
    else:
        clear = True
    late_v = g.coin(0.6)
    loop = [copy_k] + ([] if late_v else [copy_v]) + init + [
        Gemm(Qs, Ks, Sf, False, True, "FullRow", clear),
        Copy(Ref(m), Ref(mp)),
        Reduce("max", Sf, m, 1, False),
        Ew(sc, row, _shifted_exp(("ld", mp, row), ("ld", m, row), c, exp_op), (BM,), vars=("i",)),
        Ew(Sf, (_I, _J), _shifted_exp(("ld", Sf, (_I, _J)), ("ld", m, row), c, exp_op), (BM, BN)),
        Reduce("sum", Sf, rs, 1, True),
        Ew(l, row, ("bin", "+", _mul(("ld", l, row), ("ld", sc, row)), ("ld", rs, row)), (BM,), vars=("i",)),
        Copy(Ref(Sf), Ref(P)),
        Ew(Of, (_I, _J), _mul(("ld", Of, (_I, _J)), ("ld", sc, row)), (BM, D)),
    ] + ([copy_v] if late_v else []) + [Gemm(P, Vs, Of, False, False, "FullRow")]
    body = [Copy(Ref(Q, "corner", (Lin.of(("by", BM)), Lin.of())), Ref(Qs)),
            Fill(Of, 0.0), Fill(l, 0.0), Fill(m, NEG),
            Pipelined("k", (Skv, BN), stages, tuple(loop)),
            Copy(Ref(Of), tile_ref(g, O, Sq, D, BM, D)),
            Copy(Ref(l), Ref(L, "corner", (Lin.of(("by", BM)),)))]
    p = g.program("attn", ((D, D), (Sq, BM)), threads, body)
    configs = {}
    if g.coin(0.3):  # the opt-in schedule that keeps both gemms in flight (transform/cuda/ws_overlap.py)
        configs["tl.enable_ws_overlap"] = True
    if poly is not None:  # a share of the scores' exp2 on the FMA pipe (transform/cuda/exp2_poly.py)
        configs["tl.enable_exp2_poly"] = poly
    if threads == 384 and side.random() < 0.5:  # the opt-in skip of dead warpgroups (transform/cuda/ws_dead_rows.py)
        configs["tl.enable_ws_dead_rows"] = True
    return p.with_(pass_configs=configs) if configs else p
