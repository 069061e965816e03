"""The oracle: a float64 torch interpreter of a program description.

It never looks at our compiler. Kernels run in order, and each one's blocks one after
another; workspaces (T.alloc_global) start as NaN; tile statements act on whole
tiles; thread-level statements (anything touching a `local` buffer, `T.serial` loops, an
`if` on `tx`) run once per thread. Every store rounds to the stored buffer's dtype (so the
interpreter sees the same fp16/bf16/fp8 values a kernel stores), arithmetic is float64.
Global elements outside a tensor read as 0 and are never written (T.copy's and
T.Parallel's documented edge behaviour). Uninitialized tiles start as NaN, so a program
that reads one gives a NaN reference, which the runner reports as an invalid program.

    outs = run_reference(prog, {"A": a, "B": b, "C": c0})   # float64 tensors per output
"""
from __future__ import annotations

import math

import torch

from .spec import (Atomic, Copy, CumSum, Ew, Fill, Flip, Gemm, GlobalLayout, If, Lin, Pipelined, Program, Reduce, Ref,
                   Scan, SetVar, Swizzle)

__all__ = ["run_reference", "round_to", "TORCH_DTYPES", "ReferenceError_"]

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                "float64": torch.float64, "float8_e4m3fn": torch.float8_e4m3fn,
                "float8_e5m2": torch.float8_e5m2, "int8": torch.int8, "int32": torch.int32}
_INT_RANGE = {"int8": 8, "int32": 32}


class ReferenceError_(Exception):
    """The description is not a valid program (a generator bug, not a compiler bug)."""


def round_to(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """float64 values as the buffer dtype stores them (ints truncate and wrap like C)."""
    if dtype in _INT_RANGE:
        bits = _INT_RANGE[dtype]
        v = torch.nan_to_num(x).trunc().to(torch.int64)
        half = 1 << (bits - 1)
        return (((v + half) % (1 << bits)) - half).to(torch.float64)
    if dtype == "float64":
        return x.to(torch.float64)
    if dtype == "tfloat32":  # float32 storage; reads take its 10-bit-mantissa value
        bits = x.to(torch.float32).view(torch.int32)
        return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).to(torch.float64)
    if dtype == "float8_e5m2":  # CUDA's conversion (and ours) saturates where torch's overflows to inf
        x = x.clamp(-57344, 57344)
    return x.to(TORCH_DTYPES[dtype]).to(torch.float64)


class _Interp:
    def __init__(self, prog: Program, globals_: dict):
        self.p = prog
        self.g = globals_
        self.env: dict = {}
        self.tiles: dict = {}

    # ------------------------------------------------------------ buffers
    def scope(self, name):
        a = self.p.alloc(name)
        return "global" if a is None else a.scope

    def dtype(self, name):
        return self.p.buffer(name).dtype

    def data(self, name):
        if name in self.g:
            return self.g[name]
        a = self.p.alloc(name)
        if a.scope in ("local", "var"):  # per thread; block-uniform code reads thread 0's
            tx = self.env.get("tx")
            return self.tiles[name][0 if tx is None else tx]
        return self.tiles[name]

    def new_block(self, kernel):
        self.tiles = {}
        self.threads = kernel.threads
        for a in kernel.allocs:
            shape = tuple(a.shape)
            if a.view_of is not None:  # T.reshape: the source tile's elements (row-major), shared
                self.tiles[a.name] = self.tiles[a.view_of].view(shape)
                continue
            if a.scope in ("local", "var"):
                shape = (self.threads,) + shape
            t = torch.full(shape, math.nan, dtype=torch.float64)
            if a.init is not None:
                t.fill_(a.init)
            self.tiles[a.name] = t

    def load(self, name, idx):
        t = self.data(name)
        idx = [torch.as_tensor(i) for i in idx]
        idx = torch.broadcast_tensors(*idx) if idx else idx
        if self.scope(name) == "global":
            ok = torch.ones(idx[0].shape, dtype=torch.bool)
            for d, i in enumerate(idx):
                ok &= (i >= 0) & (i < t.shape[d])
            safe = [torch.where(ok, i, 0) for i in idx]
            return torch.where(ok, t[tuple(safe)], 0.0)
        self._check(name, t, idx)
        return t[tuple(idx)]

    def store(self, name, idx, val):
        t = self.data(name)
        idx = [torch.as_tensor(i) for i in idx]
        shape = torch.broadcast_shapes(*(i.shape for i in idx), torch.as_tensor(val).shape)
        idx = [i.expand(shape) for i in idx]
        val = round_to(torch.as_tensor(val, dtype=torch.float64).expand(shape), self.dtype(name))
        if self.scope(name) == "global":
            ok = torch.ones(shape, dtype=torch.bool)
            for d, i in enumerate(idx):
                ok &= (i >= 0) & (i < t.shape[d])
            idx = [i[ok] for i in idx]
            val = val[ok]
        else:
            self._check(name, t, idx)
        t[tuple(idx)] = val

    @staticmethod
    def _check(name, t, idx):
        for d, i in enumerate(idx):
            if i.numel() and (int(i.min()) < 0 or int(i.max()) >= t.shape[d]):
                raise ReferenceError_(f"index out of range on tile {name} dim {d}")

    # ------------------------------------------------------------ expressions
    def ev(self, e):
        op = e[0]
        if op == "ld":
            return self.load(e[1], [i.eval(self.env) for i in e[2]])
        if op == "c":
            return torch.tensor(float(e[1]), dtype=torch.float64)
        if op == "ix":
            return torch.as_tensor(e[1].eval(self.env), dtype=torch.float64)
        if op == "var":
            return self.data(e[1])[0].clone()
        if op == "bin":
            a, b = self.ev(e[2]), self.ev(e[3])
            return {"+": torch.add, "-": torch.sub, "*": torch.mul, "max": torch.maximum,
                    "min": torch.minimum}[e[1]](a, b)
        if op == "un":
            a = self.ev(e[2])
            return {"neg": lambda x: -x, "abs": torch.abs, "sq": lambda x: x * x,
                    "expn": lambda x: torch.exp(-x.abs()), "exp2n": lambda x: torch.exp2(-x.abs()),
                    "sqrt1": lambda x: torch.sqrt(x.abs() + 1.0),
                    "sigmoid": torch.sigmoid}[e[1]](a)
        if op == "cast":
            return round_to(self.ev(e[2]), e[1])
        if op == "ite":
            return torch.where(self.ev(e[1]).bool(), self.ev(e[2]), self.ev(e[3]))
        if op == "cmp":
            a, b = self.ev(e[2]), self.ev(e[3])
            return {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq,
                    "!=": torch.ne}[e[1]](a, b).to(torch.float64)
        raise ReferenceError_(f"unknown expression {e!r}")

    # ------------------------------------------------------------ regions
    def region(self, r: Ref, other_ext=None):
        shape = tuple(self.data(r.buf).shape)
        if r.form == "whole":
            return [0] * len(shape), list(shape)
        starts = [s.eval(self.env) for s in r.starts]
        if r.form == "corner":
            if other_ext is None or len(other_ext) != len(starts):
                raise ReferenceError_(f"corner {r.buf} needs a same-rank tile on the other side")
            return starts, list(other_ext)
        return starts, list(r.extents)

    def read_region(self, name, starts, ext):
        grids = torch.meshgrid(*[torch.arange(s, s + e) for s, e in zip(starts, ext)], indexing="ij")
        return self.load(name, list(grids))

    def write_region(self, name, starts, ext, val):
        grids = torch.meshgrid(*[torch.arange(s, s + e) for s, e in zip(starts, ext)], indexing="ij")
        self.store(name, list(grids), val)

    def copy(self, s: Copy):
        src_first = s.src.form != "corner"
        if src_first:
            ss, se = self.region(s.src)
            ds, de = self.region(s.dst, se)
        else:
            ds, de = self.region(s.dst)
            ss, se = self.region(s.src, de)
        if [e for e in se if e != 1] != [e for e in de if e != 1]:
            raise ReferenceError_(f"copy extents differ: {se} vs {de}")
        v = self.read_region(s.src.buf, ss, se).reshape(de)
        self.write_region(s.dst.buf, ds, de, v)

    # ------------------------------------------------------------ statements
    def thread_level(self, s) -> bool:
        if isinstance(s, Copy):
            return "local" in (self.scope(s.src.buf), self.scope(s.dst.buf))
        if isinstance(s, Ew):
            return s.loop in ("serial", "vectorized") or self.scope(s.dst) == "local"
        if isinstance(s, If):
            return _uses(s.cond, "tx")
        return False

    def run(self, body):
        for s in body:
            if self.thread_level(s) and self.env.get("tx") is None:
                for t in range(self.threads):
                    self.env["tx"] = t
                    self.stmt(s)
                self.env["tx"] = None
            else:
                self.stmt(s)

    def stmt(self, s):
        if isinstance(s, Copy):
            self.copy(s)
        elif isinstance(s, Fill):
            t = self.data(s.buf)
            t.copy_(round_to(torch.full_like(t, float(s.value)), self.dtype(s.buf)))
        elif isinstance(s, Ew):
            self.ew(s)
        elif isinstance(s, Reduce):
            self.reduce(s)
        elif isinstance(s, CumSum):
            x = self.data(s.src)
            y = x.flip(s.dim).cumsum(s.dim).flip(s.dim) if s.reverse else x.cumsum(s.dim)
            self.data(s.dst).copy_(round_to(y, self.dtype(s.dst)))
        elif isinstance(s, Gemm):
            a, b, c = self.data(s.a), self.data(s.b), self.data(s.c)
            a = a.T if s.ta else a
            b = b.T if s.tb else b
            acc = a @ b if s.clear_accum else c + a @ b
            c.copy_(round_to(acc, self.dtype(s.c)))
        elif isinstance(s, Atomic):
            src = self.data(s.src)
            starts, ext = self.region(s.dst, tuple(src.shape))
            cur = self.read_region(s.dst.buf, starts, ext)
            self.write_region(s.dst.buf, starts, ext, cur + src.reshape(ext))
        elif isinstance(s, (Swizzle, GlobalLayout)):
            pass  # a layout: where the values live, not what they are
        elif isinstance(s, Pipelined):
            dim, block = s.extent
            for k in range(-(-self.p.value(dim) // block)):
                self.env[s.var] = k
                self.run(s.body)
        elif isinstance(s, SetVar):
            v = self.ev(s.expr)
            t = self.tiles[s.var]
            if self.env.get("tx") is None:
                t[:, 0] = round_to(v.expand(t.shape[0]), self.dtype(s.var))
            else:
                t[self.env["tx"], 0] = round_to(v, self.dtype(s.var))
        elif isinstance(s, If):
            if bool(self.ev(s.cond)):
                self.run(s.body)
        elif isinstance(s, Flip):
            x = round_to(self.data(s.x)[:s.n], self.dtype(s.buf))
            self.data(s.buf)[:s.n] = x
            by, bx = self.env["by"], self.env["bx"]
            self.data(s.y)[by, bx * s.n:(bx + 1) * s.n] = round_to(x.flip(0), self.dtype(s.y))
        elif isinstance(s, Scan):  # the threads' rounds, as a whole-tile prefix sum (adds rounded as the tile stores)
            t = self.data(s.buf)
            for r in range(s.n.bit_length() - 1):
                d = 1 << r
                t[d:s.n] = round_to(t[d:s.n] + t[:s.n - d], self.dtype(s.buf))
        else:
            raise ReferenceError_(f"unknown statement {s!r}")

    def ew(self, s: Ew):
        if s.loop in ("serial", "vectorized"):
            for q in range(s.extents[0]):
                self.env[s.vars[0]] = q
                self.store(s.dst, [i.eval(self.env) for i in s.idx], self.ev(s.expr))
            return
        n = len(s.extents)
        for d, (v, e) in enumerate(zip(s.vars, s.extents)):
            shape = [1] * n
            shape[d] = e
            self.env[v] = torch.arange(e).reshape(shape)
        val = self.ev(s.expr)
        self.store(s.dst, [i.eval(self.env) for i in s.idx], val)
        for v in s.vars[:n]:
            self.env.pop(v, None)

    def reduce(self, s: Reduce):
        x = self.data(s.src)
        if s.kind in ("abssum", "absmax"):
            x = x.abs()
        if s.kind in ("sum", "abssum"):
            r = x.sum(s.dim)
        elif s.kind in ("max", "absmax"):
            r = x.amax(s.dim)
        else:
            r = x.amin(s.dim)
        dst = self.data(s.dst)
        r = r.reshape(dst.shape)
        if not s.clear and s.kind != "abssum":
            r = {"sum": torch.add, "max": torch.maximum, "absmax": torch.maximum,
                 "min": torch.minimum}[s.kind](dst, r)
        dst.copy_(round_to(r, self.dtype(s.dst)))


def _uses(e, var) -> bool:
    if isinstance(e, Lin):
        return var in e.vars()
    if isinstance(e, tuple):
        if e and e[0] == "var":
            return False
        return any(_uses(x, var) for x in e)
    return False


def run_reference(prog: Program, inputs: dict) -> dict:
    """Run `prog` on float64 copies of `inputs` (every tensor parameter); return the outputs."""
    g = {k: v.detach().to("cpu", torch.float64).clone() for k, v in inputs.items()}
    for w in prog.workspaces:  # T.alloc_global: contents undefined until a kernel writes them
        g[w.name] = torch.full(prog.shape_of(w.name), math.nan, dtype=torch.float64)
    it = _Interp(prog, g)
    for k in prog.launches():  # kernels in order; each one's blocks one after another
        counts = [-(-prog.value(d) // b) for d, b in k.grid]
        for flat in range(math.prod(counts)):
            env = {**prog.consts, **prog.dims, "tx": None}
            for name, n in zip(("bx", "by", "bz"), counts):
                env[name], flat = flat % n, flat // n
            it.env = env
            it.new_block(k)
            it.run(k.body)
    return {t.name: g[t.name] for t in prog.tensors if t.role == "out"}
