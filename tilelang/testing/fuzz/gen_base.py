"""Shared pieces of the program generators: the seeded chooser `Gen`, dims, tensor windows,
random expressions (`expr`) and conditions (`cond`), and the public warp-split rule."""
from __future__ import annotations

import random

from .spec import Alloc, Lin, Program, Ref, Tensor

__all__ = ["FAMILIES", "FLOATS", "Gen", "warp_split_ok", "ragged", "tile_ref", "expr", "cond", "as_dtype"]

FAMILIES = ("tile", "gemm", "thread", "atomic", "multi", "pipe", "trans", "attn", "epi", "branch")
FLOATS = ("float16", "bfloat16", "float32")


def warp_split_ok(policy: str, M: int, N: int, nwarps: int, group: int = 1) -> bool:
    """Is there an (m, n) warp grid, m*n = nwarps, m % group == 0, each warp 16k x 8k?"""
    if M % 16 or N % 8:
        return False
    return any(nwarps % m == 0 and m % group == 0 and M % (m * 16) == 0 and N % ((nwarps // m) * 8) == 0
               for m in range(1, nwarps + 1))


class Gen:
    def __init__(self, seed: int, single_thread: bool = False):
        self.seed = seed
        self.single_thread = single_thread  # thread family: threads=1 (no per-thread code paths)
        self.r = random.Random(seed)
        self.tensors: list = []
        self.allocs: list = []
        self.dims: dict = {}
        self.consts: dict = {}
        self.n = 0

    def pick(self, xs):
        return self.r.choice(list(xs))

    def coin(self, p=0.5) -> bool:
        return self.r.random() < p

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def dim(self, value: int, sym: str, const: str):
        """A tensor dim: a literal, a named constant, or a symbolic T.dynamic."""
        u = self.r.random()
        if u < 0.25:
            self.dims[sym] = value
            return sym
        if u < 0.5:
            self.consts[const] = value
            return const
        return value

    def alloc(self, scope, shape, dtype, base=None, init=None) -> str:
        nm = self.name(base or {"shared": "S", "fragment": "F", "local": "L", "var": "v"}[scope])
        self.allocs.append(Alloc(nm, scope, tuple(shape), dtype, init))
        return nm

    def view(self, src: str, shape, base=None) -> str:
        """`T.reshape(src, shape)` of an allocated tile (same scope and dtype)."""
        a = next(x for x in self.allocs if x.name == src)
        nm = self.name(base or f"{src}_v")
        self.allocs.append(Alloc(nm, a.scope, tuple(shape), a.dtype, None, src))
        return nm

    def tensor(self, base, shape, dtype, role="in") -> str:
        nm = self.name(base)
        self.tensors.append(Tensor(nm, tuple(shape), dtype, role))
        return nm

    def program(self, family, grid, threads, body, uses_tx=False, arch_min=80) -> Program:
        return Program(self.seed, family, tuple(self.tensors), tuple(grid), threads, tuple(self.allocs),
                       tuple(body), dict(self.dims), dict(self.consts), uses_tx, arch_min)


def ragged(g: Gen, block: int, count: int) -> int:
    """A dim covered by `count` blocks of `block`, ragged at the end half the time."""
    full = block * count
    return full if g.coin() or block == 1 else full - g.r.randrange(1, block)


def tile_ref(g: Gen, buf, rows, cols, BM, BN, rank2=True, whole_ok=False, full_cols=False) -> Ref:
    """The block's (BM, BN) window of a global tensor, as a corner, a slice or the whole."""
    if whole_ok and g.coin(0.3):
        return Ref(buf, "whole")
    s0, s1 = Lin.of(("by", BM)), Lin.of(("bx", BN))
    if g.coin(0.4):
        return Ref(buf, "corner", (s0, s1))
    return Ref(buf, "slice", (s0, s1), (BM, BN), (False, full_cols))


# ---------------------------------------------------------------- expressions

_CONSTS_F = (0.5, 1.0, 2.0, -1.5, 0.25, 3.0)
_CONSTS_I = (1, 2, 3, -2)


def cond(g: Gen, vars_):
    v = g.pick(vars_)
    lin = Lin.of((v, 1)) if g.coin(0.7) or len(vars_) < 2 else Lin.of((vars_[0], 1), (vars_[1], 1))
    return ("cmp", g.pick(("<", ">=", "==", "!=")), ("ix", lin), ("c", g.r.randrange(0, 8)))


def expr(g: Gen, leaves, cd: str, depth: int, vars_):
    """A random expression of compute dtype `cd` over `leaves` (each already of dtype cd)."""
    is_int = cd.startswith("int")
    if depth <= 0 or g.coin(0.3):
        u = g.r.random()
        if u < 0.75 and leaves:
            return g.pick(leaves)
        if u < 0.85 and not is_int:
            return ("cast", cd, ("ix", Lin.of((g.pick(vars_), 1))))
        return ("c", g.pick(_CONSTS_I) if is_int else g.pick(_CONSTS_F))
    u = g.r.random()
    if u < 0.45:
        return ("bin", g.pick(("+", "-", "*", "max", "min")), expr(g, leaves, cd, depth - 1, vars_),
                expr(g, leaves, cd, depth - 1, vars_))
    if u < 0.7:
        ops = ("neg", "abs") if is_int else ("neg", "abs", "sq", "expn", "sqrt1", "sigmoid")
        return ("un", g.pick(ops), expr(g, leaves, cd, depth - 1, vars_))
    if u < 0.85:
        return ("ite", cond(g, vars_), expr(g, leaves, cd, depth - 1, vars_),
                expr(g, leaves, cd, depth - 1, vars_))
    if not is_int and cd != "float32":  # through float32 and back
        return ("cast", cd, ("cast", "float32", expr(g, leaves, cd, depth - 1, vars_)))
    return expr(g, leaves, cd, depth - 1, vars_)


def as_dtype(dtype, cd, e):
    return e if dtype == cd else ("cast", cd, e)
