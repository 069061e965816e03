"""The multi-kernel, pipeline-path and transposed-tile program families.

multi  two or three `with T.Kernel` blocks in one prim_func, talking through T.alloc_global
       workspaces (written in full by one kernel before the next reads them, as
       transform/split_kernels.py launches them in order): per-block partial reductions
       combined by a second kernel; rows scaled into a workspace that a second kernel
       (another block shape and thread count) reads transposed; both chained (three kernels).
pipe   a gemm k-loop under T.Pipelined(num_stages 1-4) meant for one sm_90a lowering (sometimes
       with a second tile copied after the first gemm, for a second gemm; sometimes the whole step
       under `if Mask[by, k] > 0`, as block-sparse GEMMs do; on the cp.async path sometimes A staged
       by an element loop), which
       the program records (`Program.path`) and the compile check asserts from the source:
       "ws" (a wgmma gemm on TMA-able tiles, 128k threads: the warp-specialized producer)
       or "cp_async" (the same kind of gemm with tl.disable_warp_specialized, or a block of
       64 threads / a shape wgmma cannot take).
trans  tiles read transposed in a T.Parallel: from global into shared (S[i, j] = A[.. j ..,
       .. i ..]) and back out to global transposed; and gemm operands staged transposed that
       way inside a T.Pipelined loop, then multiplied with transpose_A / transpose_B.
"""
from __future__ import annotations

import random

from .families import gemm_shape
from .gen_base import FLOATS, Gen, as_dtype, expr, ragged, tile_ref, warp_split_ok
from .spec import Copy, Ew, Fill, Gemm, GlobalLayout, If, Kernel, Lin, Pipelined, Reduce, Ref, Swizzle, Tensor

__all__ = ["gen_multi", "gen_pipe", "gen_trans"]

_I, _J = Lin.of(("i", 1)), Lin.of(("j", 1))


def _lin_dim(d) -> Lin:
    return Lin.of((d, 1)) if isinstance(d, str) else Lin(d)


class _Kernels:
    """Collects kernel blocks: each one's allocations are its own (Gen.alloc appends to g.allocs)."""

    def __init__(self, g: Gen):
        self.g, self.done = g, []

    def start(self):
        self.g.allocs = []

    def end(self, grid, threads, body):
        self.done.append(Kernel(tuple(grid), threads, tuple(self.g.allocs), tuple(body)))


def _workspace(g: Gen, ws: list, shape, dtype) -> str:
    nm = g.name("W")
    ws.append(Tensor(nm, tuple(shape), dtype, "ws"))
    return nm


def _k_scale(g: Gen, A, in_dt, cd, M, N, Md, Nd, W):
    """Kernel: W (M, N) = f(A) tile by tile, f an elementwise expression with a row broadcast."""
    BM, BN = g.pick((4, 8, 16, 32)), g.pick((8, 16, 32))
    X = g.alloc(g.pick(("shared", "fragment")), (BM, BN), in_dt)
    Y = g.alloc("fragment", (BM, BN), cd)
    body = [Copy(tile_ref(g, A, M, N, BM, BN), Ref(X))]
    leaves = [as_dtype(in_dt, cd, ("ld", X, (_I, _J)))]
    if g.coin():  # a per-row factor: the row's max
        R = g.alloc("fragment", (BM,), cd, base="R")
        body.append(Copy(Ref(X), Ref(Y)) if in_dt == cd else
                    Ew(Y, (_I, _J), as_dtype(in_dt, cd, ("ld", X, (_I, _J))), (BM, BN)))
        body.append(Reduce(g.pick(("max", "absmax", "sum")), Y, R, 1, True))
        leaves.append(("ld", R, (_I,)))
    body.append(Ew(Y, (_I, _J), expr(g, leaves, cd, 2, ("i", "j")), (BM, BN)))
    body.append(Copy(Ref(Y), Ref(W, "corner", (Lin.of(("by", BM)), Lin.of(("bx", BN))))))
    return ((Nd, BN), (Md, BM)), g.pick((32, 64, 128)), body


def _k_partial(g: Gen, src, src_dt, cd, M, N, Md, part, S, chunk, op):
    """Kernel: part[m, s] = op over the s-th chunk of row m of src (grid: S chunks x row blocks)."""
    BM = g.pick((4, 8, 16, 32))
    X = g.alloc(g.pick(("shared", "fragment")), (BM, chunk), src_dt)
    R = g.alloc("fragment", (BM,), cd, base="R")
    body = [Copy(Ref(src, "corner", (Lin.of(("by", BM)), Lin.of(("bx", chunk)))), Ref(X))]
    if src_dt != cd:
        Y = g.alloc("fragment", (BM, chunk), cd)
        body.append(Ew(Y, (_I, _J), as_dtype(src_dt, cd, ("ld", X, (_I, _J))), (BM, chunk)))
        X = Y
    body.append(Reduce(op, X, R, 1, True))
    # a guarded T.Parallel store into the workspace's column s
    body.append(Ew(part, (Lin.of(("by", BM), ("i", 1)), Lin.of(("bx", 1))), ("ld", R, (_I,)), (BM,), vars=("i",)))
    return ((S, 1), (Md, BM)), g.pick((32, 64, 128)), body


def _k_combine(g: Gen, part, cd, S, Md, O, op):
    """Kernel: O[m] = op over part[m, :] (a 1-d grid, its own block size and thread count)."""
    BM = g.pick((8, 16, 32, 64))
    P = g.alloc(g.pick(("shared", "fragment")), (BM, S), cd)
    R = g.alloc("fragment", (BM,), cd, base="R")
    body = [Copy(Ref(part, "slice", (Lin.of(("bx", BM)), Lin(0)), (BM, S), (False, True)), Ref(P)),
            Reduce(op, P, R, 1, True)]
    if g.coin():
        body.append(Ew(R, (_I,), expr(g, [("ld", R, (_I,))], cd, 1, ("i",)), (BM,), vars=("i",)))
    body.append(Copy(Ref(R), Ref(O, "corner", (Lin.of(("bx", BM)),))))
    return ((Md, BM),), g.pick((32, 64, 128)), body


def _k_transpose(g: Gen, W, cd, M, N, Md, Nd, O, out_dt):
    """Kernel: O (N, M) = W^T, W's (BM, BN) tile copied into shared and read transposed."""
    BM, BN = g.pick((8, 16, 32)), g.pick((8, 16, 32))
    S = g.alloc("shared", (BM, BN), cd)
    Tt = g.alloc(g.pick(("shared", "fragment")), (BN, BM), out_dt)
    body = [Copy(Ref(W, "corner", (Lin.of(("bx", BM)), Lin.of(("by", BN)))), Ref(S)),
            Ew(Tt, (_I, _J), as_dtype(cd, out_dt, ("ld", S, (_J, _I))), (BN, BM)),
            Copy(Ref(Tt), Ref(O, "corner", (Lin.of(("by", BN)), Lin.of(("bx", BM)))))]
    return ((Md, BM), (Nd, BN)), g.pick((32, 64, 128, 256)), body


def gen_multi(g: Gen):
    S, chunk = g.pick((1, 2, 3, 4)), g.pick((8, 16, 32))
    N = S * chunk
    M = g.r.randint(5, 70)
    Md, Nd = g.dim(M, "m", "M"), g.dim(N, "n", "N")
    cd = "int32" if g.coin(0.15) else "float32"
    in_dt = g.pick(("int8", "int32")) if cd == "int32" else g.pick(FLOATS)
    A = g.tensor("A", (Md, Nd), in_dt)
    ks, ws = _Kernels(g), []
    kind = g.pick(("partial", "transpose", "chain"))
    src, src_dt = A, in_dt
    lay = ()
    if kind in ("transpose", "chain"):
        W = _workspace(g, ws, (Md, Nd), cd)
        # a third of the workspaces laid out by T.annotate_layout in both kernels (drawn apart, so the
        # rest of the program is the one this seed always gave); constant shapes only
        side = random.Random(g.seed * 1000003 + 23)
        if side.random() < 1 / 3 and Md not in g.dims and Nd not in g.dims:
            lay = (GlobalLayout(W, "transposed") if side.random() < 0.5 else GlobalLayout(W, "blocked", chunk),)
        ks.start()
        grid, threads, body = _k_scale(g, A, in_dt, cd, M, N, Md, Nd, W)
        ks.end(grid, threads, list(lay) + list(body))
        src, src_dt = W, cd
    if kind == "transpose":
        out_dt = cd if g.coin() or cd == "int32" else g.pick(("float16", "bfloat16"))
        O = g.tensor("O", (Nd, Md), out_dt, "out")
        ks.start()
        grid, threads, body = _k_transpose(g, W, cd, M, N, Md, Nd, O, out_dt)
        ks.end(grid, threads, list(lay) + list(body))
    else:
        op1 = g.pick(("sum", "max", "min", "absmax"))
        op2 = "sum" if op1 == "sum" and g.coin(0.7) else g.pick(("sum", "max", "min"))
        part = _workspace(g, ws, (Md, S), cd)
        O = g.tensor("O", (Md,), cd, "out")
        ks.start()
        grid, threads, body = _k_partial(g, src, src_dt, cd, M, N, Md, part, S, chunk, op1)
        ks.end(grid, threads, list(lay) + list(body))
        ks.start()
        ks.end(*_k_combine(g, part, cd, S, Md, O, op2))
    first, rest = ks.done[0], ks.done[1:]
    g.allocs = list(first.allocs)
    p = g.program("multi", first.grid, first.threads, first.body)
    return p.with_(kernels=tuple(rest), workspaces=tuple(ws))


# ---------------------------------------------------------------- pipe

def _ws_shape(g: Gen):
    """A gemm the warp-specialized pass takes: 16-bit wgmma, TMA-able tiles, 128k threads."""
    while True:
        dt = g.pick(("float16", "bfloat16"))
        threads = g.pick((128, 256))
        BM, BK = g.pick((64, 128)), g.pick((32, 64))
        tb = g.coin(0.4)
        BN = g.pick((16, 32, 64, 128)) if tb else g.pick((64, 128))
        policy = g.pick(("Square", "FullRow", "FullCol"))
        if BM * BN > 128 * 128 or not warp_split_ok(policy, BM, BN, threads // 32, group=4):
            continue
        if not tb and threads == 256 and BM == 64 and BN < 128:  # two warpgroups side by side: each
            continue  # needs 64 N-major columns of B for wgmma
        return dt, BM, BN, BK, threads, tb, policy


def gen_pipe(g: Gen):
    path = g.pick(("ws", "cp_async"))
    dt, BM, BN, BK, threads, tb, policy = _ws_shape(g)
    configs = {}
    if path == "cp_async":
        how = g.pick(("config", "config", "threads"))
        if how == "config":
            configs = {"tl.disable_warp_specialized": True}
        else:  # two warps: no warpgroup, no wgmma, no producer warpgroup
            threads, BM, BN, policy = 64, g.pick((32, 64)), min(BN, 64), "Square"
    acc = "float32"
    gy, gx, kt = g.pick((1, 2)), g.pick((1, 2)), g.pick((1, 2, 3, 4))
    M = ragged(g, BM, gy)
    N = BN * gx if g.coin() else BN * gx - 8 * g.r.randrange(1, max(2, BN // 8))
    K = BK * kt if g.coin() else BK * kt - 8 * g.r.randrange(1, BK // 8)  # rows stay 16-byte aligned
    Md, Nd, Kd = M, N, K
    if g.coin(0.3):  # named constants (no symbolic dims: TMA needs the row pitch known)
        g.consts.update(M=M, N=N, K=K)
        Md, Nd, Kd = "M", "N", "K"
    A = g.tensor("A", (Md, Kd), dt)
    B = g.tensor("B", (Nd, Kd) if tb else (Kd, Nd), dt)
    out_dt = g.pick(("float32", dt))
    O = g.tensor("O", (Md, Nd), out_dt, "out")
    As = g.alloc("shared", (BM, BK), dt, base="A_s")
    Bs = g.alloc("shared", (BN, BK) if tb else (BK, BN), dt, base="B_s")
    C = g.alloc("fragment", (BM, BN), acc, base="C_l")
    b_at = (Lin.of(("bx", BN)), Lin.of(("k", BK))) if tb else (Lin.of(("k", BK)), Lin.of(("bx", BN)))
    loop = (Copy(Ref(A, "corner", (Lin.of(("by", BM)), Lin.of(("k", BK)))), Ref(As)),
            Copy(Ref(B, "corner", b_at), Ref(Bs)),
            Gemm(As, Bs, C, False, tb, policy))
    if g.coin(0.3):  # a copy after the first gemm, read by a second one (both paths stage it)
        D = g.tensor("D", (Nd, Kd) if tb else (Kd, Nd), dt)
        Ds = g.alloc("shared", (BN, BK) if tb else (BK, BN), dt, base="D_s")
        loop = loop + (Copy(Ref(D, "corner", b_at), Ref(Ds)), Gemm(As, Ds, C, False, tb, policy))
    elif path == "cp_async" and M % BM == 0 and K % BK == 0 and g.coin(0.6):
        # A staged by an element loop (`A_s[i, j] = A[by*BM + i, k*BK + j]`, gemm_intrinsics): made a T.copy
        load = ("ld", A, (Lin.of(("by", BM), ("i", 1)), Lin.of(("k", BK), ("j", 1))))
        loop = (Ew(As, (_I, _J), load, (BM, BK)),) + loop[1:]
    elif path == "cp_async" and g.coin(0.3):  # block-sparse: the whole step under `if Mask[by, k] > 0`
        Mask = g.tensor("Mask", (-(-M // BM), -(-K // BK)), "float32")
        loop = (If(("cmp", ">", ("ld", Mask, (Lin.of(("by", 1)), Lin.of(("k", 1)))), ("c", 0.0)), loop),)
    side = random.Random(g.seed * 1000003 + 29)  # (a side RNG: every seed keeps the rest of its program)
    if path == "ws" and len(loop) == 3 and side.random() < 0.3:
        # block-sparse on the warp-specialized path: the producer loads only where the mask holds
        Mask = g.tensor("Mask", (-(-M // BM), -(-K // BK)), "float32")
        loop = (If(("cmp", ">", ("ld", Mask, (Lin.of(("by", 1)), Lin.of(("k", 1)))), ("c", 0.0)), loop),)
    swz = [Swizzle(t) for t in (As, Bs) if g.coin(0.25)]  # a swizzle the stages must keep
    stages = g.r.randint(1, 4)
    # every stage holds each staged tile: keep them within sm_80's shared memory (163 KB a block; the
    # accumulator's epilogue may stage through shared too), as a program written for both archs would
    size = 1 if dt.startswith("float8") or dt.endswith("int8") else 4 if dt in ("float32", "int32") else 2
    per_stage = BK * (BM + BN * (2 if len(loop) == 5 else 1)) * size  # A's tile, B's (and D's)
    stages = max(1, min(stages, (144 * 1024) // per_stage))
    body = [*swz, Fill(C, 0.0), Pipelined("k", (Kd, BK), stages, loop)]
    if g.coin(0.4):
        body.append(Ew(C, (_I, _J), ("bin", "max", ("ld", C, (_I, _J)), ("c", 0.0)), (BM, BN)))
    body.append(Copy(Ref(C), tile_ref(g, O, M, N, BM, BN)))
    p = g.program("pipe", ((Nd, BN), (Md, BM)), threads, body)
    return p.with_(pass_configs=configs, path=path)


# ---------------------------------------------------------------- trans

def _trans_tiles(g: Gen):
    """A tile read transposed from global into shared, computed on, and written back."""
    BM, BN = g.pick((4, 8, 16, 32)), g.pick((8, 16, 32))
    gy, gx = g.pick((1, 2, 3)), g.pick((1, 2))
    M, N = ragged(g, BM, gy), ragged(g, BN, gx)
    Md, Nd = g.dim(M, "m", "M"), g.dim(N, "n", "N")
    dt = g.pick(FLOATS + ("int32",))
    cd = "int32" if dt == "int32" else "float32"
    A = g.tensor("A", (Md, Nd), dt)
    St = g.alloc("shared", (BN, BM), dt)  # St[j, i] = A[by*BM + i, bx*BN + j]
    rows, cols = Lin.of(("by", BM), ("j", 1)), Lin.of(("bx", BN), ("i", 1))
    body = [Ew(St, (_I, _J), ("ld", A, (rows, cols)), (BN, BM))]
    fscope = g.pick(("shared", "fragment"))
    F = g.alloc(fscope, (BN, BM), cd)
    body.append(Ew(F, (_I, _J), expr(g, [as_dtype(dt, cd, ("ld", St, (_I, _J)))], cd, 2, ("i", "j")), (BN, BM)))
    out_dt = g.pick((dt, cd))
    if g.coin():  # O (N, M) = f(A)^T through a copy of the (BN, BM) tile
        O = g.tensor("O", (Nd, Md), out_dt, "out")
        if out_dt != cd:
            G = g.alloc("fragment", (BN, BM), out_dt)
            body.append(Ew(G, (_I, _J), as_dtype(cd, out_dt, ("ld", F, (_I, _J))), (BN, BM)))
            F = G
        at = (Lin.of(("bx", BN)), Lin.of(("by", BM)))
        body.append(Copy(Ref(F), Ref(O, "corner", at) if g.coin() else Ref(O, "slice", at, (BN, BM))))
    else:  # O (M, N) = f(A): the tile transposed back on the store
        if fscope == "fragment":  # fragments are not read transposed: through shared first
            Sh = g.alloc("shared", (BN, BM), cd)
            body.append(Copy(Ref(F), Ref(Sh)))
            F = Sh
        O = g.tensor("O", (Md, Nd), out_dt, "out")
        body.append(Ew(O, (Lin.of(("by", BM), ("i", 1)), Lin.of(("bx", BN), ("j", 1))),
                       as_dtype(cd, out_dt, ("ld", F, (_J, _I))), (BM, BN)))
    return g.program("trans", ((Nd, BN), (Md, BM)), g.pick((32, 64, 128, 256)), body)


def _trans_gemm(g: Gen):
    """A (M, K) and B (K, N) row-major in global; an operand gemm_shape wants transposed is
    staged with a transposed T.Parallel read, the others with T.copy."""
    dt, acc, BM, BN, BK, threads, ta, tb, policy = gemm_shape(g)
    gy, gx, kt = g.pick((1, 2)), g.pick((1, 2)), g.pick((1, 2, 3))
    M, N, K = ragged(g, BM, gy), ragged(g, BN, gx), ragged(g, BK, kt)
    Md, Nd, Kd = g.dim(M, "m", "M"), g.dim(N, "n", "N"), g.dim(K, "k_", "K")
    A = g.tensor("A", (Md, Kd), dt)
    B = g.tensor("B", (Kd, Nd), dt)
    out_dt = acc if acc == "int32" or g.coin(0.6) else g.pick(("float16", "bfloat16", "float32"))
    O = g.tensor("O", (Md, Nd), out_dt, "out")
    As = g.alloc("shared", (BK, BM) if ta else (BM, BK), dt, base="A_s")
    Bs = g.alloc("shared", (BN, BK) if tb else (BK, BN), dt, base="B_s")
    C = g.alloc("fragment", (BM, BN), acc, base="C_l")
    loop = []
    if ta:  # As[kk, m] = A[by*BM + m, k*BK + kk]
        loop.append(Ew(As, (_I, _J), ("ld", A, (Lin.of(("by", BM), ("j", 1)), Lin.of(("k", BK), ("i", 1)))), (BK, BM)))
    else:
        loop.append(Copy(Ref(A, "corner", (Lin.of(("by", BM)), Lin.of(("k", BK)))), Ref(As)))
    if tb:  # Bs[n, kk] = B[k*BK + kk, bx*BN + n]
        loop.append(Ew(Bs, (_I, _J), ("ld", B, (Lin.of(("k", BK), ("j", 1)), Lin.of(("bx", BN), ("i", 1)))), (BN, BK)))
    else:
        loop.append(Copy(Ref(B, "corner", (Lin.of(("k", BK)), Lin.of(("bx", BN)))), Ref(Bs)))
    loop.append(Gemm(As, Bs, C, ta, tb, policy))
    body = [Fill(C, 0.0), Pipelined("k", (Kd, BK), g.pick((0, 1, 2, 3)), tuple(loop)),
            Copy(Ref(C), tile_ref(g, O, M, N, BM, BN))]
    return g.program("trans", ((Nd, BN), (Md, BM)), threads, body, arch_min=89 if dt.startswith("float8") else 80)


def gen_trans(g: Gen):
    return _trans_tiles(g) if g.coin(0.55) else _trans_gemm(g)
