"""Random valid TileLang programs, as descriptions (`spec.Program`), from a seed.

Families (each respects the public TileLang's rules, so every program is one it accepts):
  tile    copies global <-> shared <-> fragment (whole, corner, slice, `:`, unit extents,
          sub-tiles at offsets, ragged edges), T.Parallel bodies with row/column broadcasts,
          transposed shared tiles, casts, math and T.if_then_else, reductions on each dim,
          rows copied into T.alloc_local arrays (and back into shared vectors)
          with clear either way, T.cumsum, a T.Pipelined column sweep, alloc_var + `if`
  gemm    T.Pipelined(num_stages 0-3) + T.gemm over fp16/bf16/fp8/int8/fp32, transposes,
          warp policies, thread counts, shapes with block_N = 8 mod 16; the warp split is
          checked with the public rule (each warp owns a multiple of 16 rows and 8 columns;
          on sm_90 a wgmma-eligible gemm also needs a warpgroup split)
  thread  per-thread code: tx = T.get_thread_binding(), local arrays, T.serial / T.Parallel over them, alloc_var
  atomic  T.atomic_add of tiles from several blocks into one output
  multi   several `with T.Kernel` blocks sharing T.alloc_global workspaces   (families_ext)
  pipe    T.Pipelined(1-4 stages) gemms meant for the warp-specialized or the cp.async
          path on sm_90a, the intent recorded and asserted on the generated source
  trans   tiles read transposed from global in a T.Parallel, and gemm operands staged
          that way for transpose_A / transpose_B
  attn    two chained gemms with an online softmax between them             (families_attn)
  epi     a gemm, then reductions of its accumulator along either dim and row / column
          broadcasts over it; large tiles at 256-512 threads                (families_epi)

Symbolic dims (T.dynamic) appear in every family. `generate(seed)` is deterministic.
"""
from __future__ import annotations

import random

from .gen_base import FAMILIES, FLOATS, Gen, as_dtype, cond, expr, ragged, tile_ref
from .spec import Copy, CumSum, Ew, Fill, If, Lin, Pipelined, Program, Reduce, Ref, SetVar

__all__ = ["generate", "FAMILIES"]

# ---------------------------------------------------------------- tile family

class _Tiles:
    """Initialized tiles of one block: name -> (scope, shape kind, dtype)."""

    def __init__(self, g, BM, BN):
        self.g, self.BM, self.BN = g, BM, BN
        self.t: dict = {}

    def add(self, name, kind, dtype, scope):
        self.t[name] = (scope, kind, dtype)
        return name

    def new(self, scope, kind, dtype, base=None):
        """Allocate a tile of `kind`'s shape and register it as initialized (the caller writes it)."""
        return self.add(self.g.alloc(scope, self.shape(kind), dtype, base), kind, dtype, scope)

    def of(self, kind, scopes=("shared", "fragment")):
        return [n for n, (s, k, _) in self.t.items() if k == kind and s in scopes]

    def shape(self, kind):
        return {"2d": (self.BM, self.BN), "t": (self.BN, self.BM), "row": (self.BM,), "col": (self.BN,)}[kind]


def _leaves(T_: _Tiles, cd, gin=None):
    """Loads usable in a T.Parallel(BM, BN) body: (i, j), transposed, row/col broadcasts."""
    i, j = Lin.of(("i", 1)), Lin.of(("j", 1))
    out = []
    for n, (scope, kind, dt) in T_.t.items():
        if kind == "2d":
            out.append(as_dtype(dt, cd, ("ld", n, (i, j))))
        elif kind == "t" and scope == "shared":
            out.append(as_dtype(dt, cd, ("ld", n, (j, i))))
        elif kind == "row" and (scope == "shared" or n.startswith("R")):
            out.append(as_dtype(dt, cd, ("ld", n, (i,))))
        elif kind == "col" and (scope in ("shared", "local") or n.startswith("R")):
            out.append(as_dtype(dt, cd, ("ld", n, (j,))))
    if gin is not None:
        name, dt = gin
        out.append(as_dtype(dt, cd, ("ld", name, (Lin.of(("by", T_.BM), ("i", 1)), Lin.of(("bx", T_.BN), ("j", 1))))))
    return out


def _load(leaf):
    """The load node under a leaf's casts, or None."""
    while leaf[0] == "cast":
        leaf = leaf[2]
    return leaf if leaf[0] == "ld" else None


def _tile_step(g: Gen, T_: _Tiles, cd: str, body: list, gin):
    BM, BN = T_.BM, T_.BN
    i, j = Lin.of(("i", 1)), Lin.of(("j", 1))
    u = g.r.random()
    if u < 0.35:  # elementwise into a new or an existing 2-d tile
        leaves = _leaves(T_, cd, gin)
        existing = [n for n in T_.of("2d") if T_.t[n][2] == cd]
        if existing and g.coin(0.4):
            dst = g.pick(existing)  # reads of dst itself stay at (i, j)
            leaves = [lf for lf in leaves if _load(lf) is None or _load(lf)[1] != dst or _load(lf)[2] == (i, j)]
        else:
            dst = T_.new(g.pick(("shared", "fragment")), "2d", cd)
        body.append(Ew(dst, (i, j), expr(g, leaves, cd, 3, ("i", "j")), (BM, BN)))
    elif u < 0.5:  # reduction to a row or column vector
        src = g.pick(T_.of("2d"))
        dim = g.pick((0, 1))
        kind = "col" if dim == 0 else "row"
        rd = "int32" if cd.startswith("int") else "float32"
        op = g.pick(("sum", "max", "min", "absmax", "abssum"))
        clear = op == "abssum" or g.coin(0.6)
        scope = g.pick(("fragment", "shared")) if T_.t[src][0] == "fragment" else "fragment"
        dst = T_.new(scope, kind, rd, base="R")
        if not clear:
            body.append(Fill(dst, g.pick((0.0, 1.0, -2.0)) if rd == "float32" else g.pick((0, 1))))
        body.append(Reduce(op, src, dst, dim, clear))
    elif u < 0.6:  # cumsum
        src = g.pick([n for n in T_.of("2d") + T_.of("row") + T_.of("col")])
        scope, kind, dt = T_.t[src]
        if dt not in ("float32", "int32"):
            return
        dim = 0 if kind != "2d" else g.pick((0, 1))
        dst = src if g.coin(0.5) else T_.new(scope, kind, dt)
        body.append(CumSum(src, dst, dim, g.coin()))
    elif u < 0.72:  # tile -> tile copy: whole, or a sub-tile at offsets
        src = g.pick(T_.of("2d"))
        sscope, _, dt = T_.t[src]
        dscope = g.pick(("shared", "fragment"))
        dst = g.alloc(dscope, (BM, BN), dt)
        whole = g.coin(0.5)
        if whole:
            body.append(Copy(Ref(src), Ref(dst)))
        else:
            body.append(Fill(dst, g.pick((0.0, 1.0))))
            h, w = g.r.randint(1, BM), g.r.randint(1, BN)
            r0, c0 = g.r.randint(0, BM - h), g.r.randint(0, BN - w)
            r1, c1 = g.r.randint(0, BM - h), g.r.randint(0, BN - w)
            if sscope == "fragment" and dscope == "fragment":
                r0 = r1 = c0 = c1 = 0
            body.append(Copy(Ref(src, "slice", (Lin(r0), Lin(c0)), (h, w)),
                             Ref(dst, "slice", (Lin(r1), Lin(c1)), (h, w))))
        T_.add(dst, "2d", dt, dscope)
    elif u < 0.8:  # transposed shared tile
        src = [n for n in T_.of("2d", ("shared",))]
        if not src:
            return
        s = g.pick(src)
        dt = T_.t[s][2]
        dst = T_.new("shared", "t", dt)
        body.append(Ew(dst, (i, j), ("ld", s, (j, i)), (BN, BM)))
    elif u < 0.88:  # fill then a masked update
        dst = T_.new(g.pick(("shared", "fragment")), "2d", cd)
        body.append(Fill(dst, 0.0 if g.coin() else 2.0))
        leaves = _leaves(T_, cd, gin)
        body.append(Ew(dst, (i, j), ("ite", cond(g, ("i", "j")), expr(g, leaves, cd, 2, ("i", "j")),
                                     ("ld", dst, (i, j))), (BM, BN)))
    elif u < 0.94:  # a row into a T.alloc_local (every thread its own copy), used as a column broadcast
        _local_row(g, T_, cd, body)
    else:  # alloc_var + `if` on a runtime value
        flags = next((t.name for t in g.tensors if t.name.startswith("Flag")), None)
        if flags is None:
            flags = g.tensor("Flag", (4,), "int32")
        v = g.alloc("var", (1,), "int32")
        body.append(SetVar(v, ("ld", flags, (Lin.of(("bx", 1), const=g.r.randrange(0, 2)),))))
        dst = g.pick([n for n in T_.of("2d") if T_.t[n][2] == cd] or [None])
        if dst is None:
            return
        upd = Ew(dst, (i, j), ("bin", "+", ("ld", dst, (i, j)), ("c", 1 if cd.startswith("int") else 1.0)),
                 (BM, BN))
        body.append(If(("cmp", g.pick((">", "<=")), ("var", v), ("c", 0)), (upd,)))


def _local_row(g: Gen, T_: _Tiles, cd: str, body: list):
    """T.copy of one row (of a shared tile or of the block's rows of A) into a local array,
    a T.serial update, and half the time a copy of the array back into a shared vector."""
    BM, BN = T_.BM, T_.BN
    shared = T_.of("2d", ("shared",))
    if shared and g.coin():
        src = g.pick(shared)
        dt = T_.t[src][2]
        ref = Ref(src, "slice", (Lin(g.r.randrange(BM)), Lin(0)), (1, BN))
    else:
        src = g.tensors[0]
        dt = src.dtype
        ref = Ref(src.name, "slice", (Lin.of(("by", BM), const=g.r.randrange(BM)), Lin.of(("bx", BN))), (1, BN))
    L = g.alloc("local", (BN,), dt, base="loc")
    q = Lin.of(("q", 1))
    body.append(Copy(ref, Ref(L)))
    body.append(Ew(L, (q,), as_dtype(cd, dt, expr(g, [as_dtype(dt, cd, ("ld", L, (q,)))], cd, 2, ("q",))),
                   (BN,), "serial", ("q",)))
    T_.add(L, "col", dt, "local")
    if g.coin():
        S = g.alloc("shared", (BN,), dt)
        body.append(Copy(Ref(L), Ref(S)))
        T_.add(S, "col", dt, "shared")


def _gen_tile(g: Gen) -> Program:
    BM = g.pick((1, 4, 8, 16, 32))
    BN = g.pick((8, 16, 32, 64)) if BM < 32 else g.pick((8, 16, 32))
    gy, gx = g.pick((1, 2, 3)), g.pick((1, 2))
    M, N = ragged(g, BM, gy), ragged(g, BN, gx)
    Md, Nd = g.dim(M, "m", "M"), g.dim(N, "n", "N")
    cd = g.pick(FLOATS + ("int32",)) if g.coin(0.85) else "int32"
    in_dt = g.pick(("int8", "int32")) if cd == "int32" else g.pick(FLOATS)
    out_dt = cd if g.coin(0.6) else ("int32" if cd == "int32" else g.pick(FLOATS))
    A = g.tensor("A", (Md, Nd), in_dt)
    O = g.tensor("O", (Md, Nd), out_dt, "out")
    body: list = []
    T_ = _Tiles(g, BM, BN)
    whole = gx == gy == 1 and M == BM and N == BN and not g.dims  # a symbolic dim is not BM/BN
    xscope = g.pick(("shared", "fragment"))
    X = g.alloc(xscope, (BM, BN), in_dt)
    sweep = g.coin(0.2) and gx == 1
    if sweep:  # a pipelined sweep over column chunks, summed
        ch = g.pick([c for c in (8, 16) if c <= BN])
        ad = "int32" if cd == "int32" else "float32"
        acc, sh = g.alloc("fragment", (BM, ch), ad), g.alloc("shared", (BM, ch), in_dt)
        i, j = Lin.of(("i", 1)), Lin.of(("j", 1))
        body.append(Fill(acc, 0.0))
        body.append(Pipelined("k", (Nd, ch), g.pick((0, 1, 2, 3)), (
            Copy(Ref(A, "corner", (Lin.of(("by", BM)), Lin.of(("k", ch)))), Ref(sh)),
            Ew(acc, (i, j), ("bin", "+", ("ld", acc, (i, j)), as_dtype(in_dt, ad, ("ld", sh, (i, j)))), (BM, ch)))))
        red = T_.new("fragment", "row", ad, base="R")
        body.append(Reduce("sum", acc, red, 1, True))
    full = gx == 1 and N == BN and Nd not in g.dims  # `:` of a symbolic dim is not BN wide
    body.append(Copy(tile_ref(g, A, M, N, BM, BN, whole_ok=whole, full_cols=full), Ref(X)))
    T_.add(X, "2d", in_dt, xscope)
    for _ in range(g.r.randint(1, 5)):
        _tile_step(g, T_, cd, body, (A, in_dt) if g.coin(0.3) else None)
    finals = [n for n in T_.of("2d") if n != X] or [X]
    fin = g.pick(finals)
    if g.coin(0.25):  # store with a T.Parallel straight into the tensor (edges are guarded)
        i, j = Lin.of(("i", 1)), Lin.of(("j", 1))
        body.append(Ew(O, (Lin.of(("by", BM), ("i", 1)), Lin.of(("bx", BN), ("j", 1))),
                       as_dtype(T_.t[fin][2], out_dt, ("ld", fin, (i, j))), (BM, BN)))
    else:
        body.append(Copy(Ref(fin), tile_ref(g, O, M, N, BM, BN, whole_ok=whole, full_cols=full)))
    rows = T_.of("row")
    if rows and g.coin(0.6):  # a row vector out: 1-d corner
        R = g.tensor("V", (Md,), T_.t[rows[0]][2], "out")
        if gx == 1:
            body.append(Copy(Ref(rows[0]), Ref(R, "corner", (Lin.of(("by", BM)),))))
    cols = T_.of("col")
    if cols and g.coin(0.6):  # a column vector out through a unit-extent slice
        W = g.tensor("W", (gy, Nd), T_.t[cols[0]][2], "out")
        body.append(Copy(Ref(cols[0]), Ref(W, "slice", (Lin.of(("by", 1)), Lin.of(("bx", BN))), (1, BN))))
    threads = g.pick((32, 64, 128, 256))
    return g.program("tile", ((Nd, BN), (Md, BM)), threads, body)


from .families import gen_atomic, gen_branch, gen_gemm, gen_thread  # noqa: E402
from .families_attn import gen_attn  # noqa: E402
from .families_epi import gen_epi  # noqa: E402
from .families_ext import gen_multi, gen_pipe, gen_trans  # noqa: E402

_GENS = {"tile": _gen_tile, "gemm": gen_gemm, "thread": gen_thread, "atomic": gen_atomic,
         "multi": gen_multi, "pipe": gen_pipe, "trans": gen_trans, "attn": gen_attn,
         "epi": gen_epi, "branch": gen_branch}
# the later families (multi-kernel, pipeline paths, transposed tiles) are a quarter of the mix
_WEIGHTS = (34, 22, 12, 7, 9, 8, 8)
# attention takes this share of the seeds, drawn apart from the mix above, so every other seed
# keeps the program it had before the family existed (regression tests name seeds)
_ATTN_SHARE = 0.06
# the gemm-epilogue family (families_epi.py) likewise, from its own draw
_EPI_SHARE = 0.07
# block-level ops in thread-index branches (families.gen_branch), from a third draw
_BRANCH_SHARE = 0.04


def generate(seed: int, family: str | None = None, single_thread: bool = False) -> Program:
    """The program for `seed` (family chosen by the seed unless given). single_thread: the
    thread family launches one thread per block (for a backend without a thread model)."""
    r = random.Random(seed * 7919 + 1)
    fam = family or r.choices(FAMILIES[:len(_WEIGHTS)], weights=_WEIGHTS)[0]
    if family is None and random.Random(seed * 104729 + 19).random() < _ATTN_SHARE:
        fam = "attn"
    elif family is None and random.Random(seed * 15485863 + 45).random() < _EPI_SHARE:
        fam = "epi"
    elif family is None and random.Random(seed * 32452843 + 7).random() < _BRANCH_SHARE:
        fam = "branch"
    return _GENS[fam](Gen(seed, single_thread))
