"""The fuzzer's program description: plain data that both the TileLang source and the
float64 reference are derived from (independently: neither goes through our compiler).

A `Program` is one kernel: tensor parameters, a grid, threads, allocations and a list of
statements. Statements are small dataclasses; expressions are nested tuples:

    ("ld", buf, (Lin, ...))     load buf[idx...]          ("c", 1.5)            constant
    ("bin", op, a, b)           op in + - * max min       ("un", op, a)         op in UNARY
    ("cast", dtype, a)          T.Cast                    ("ite", cond, a, b)   T.if_then_else
    ("ix", Lin)                 an index value (int32)    ("var", name)         an alloc_var
    ("cmp", op, a, b)           a condition, op in < <= > >= == !=

`Lin` is an affine index `const + sum(coef * var)` over the names bx, by, tx, i, j, k, q.
`to_json`/`from_json` round-trip a program, so a shrunk failure is printed with its data.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace

__all__ = ["Lin", "Tensor", "Alloc", "Ref", "Kernel", "Copy", "Fill", "Ew", "Reduce", "CumSum", "Gemm", "Atomic",
           "Pipelined", "SetVar", "If", "Scan", "Flip", "Program", "STMT_TYPES", "UNARY", "to_json", "from_json",
           "walk", "map_bodies"]

UNARY = ("neg", "abs", "sq", "expn", "exp2n", "sqrt1", "sigmoid")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")
INT_DTYPES = ("int8", "int32")


@dataclass(frozen=True)
class Lin:
    """const + sum(coef * var): an index expression."""

    const: int = 0
    terms: tuple = ()  # ((var, coef), ...)

    @staticmethod
    def of(*terms, const=0) -> "Lin":
        return Lin(const, tuple((v, c) for v, c in terms if c))

    def emit(self) -> str:
        parts = [v if c == 1 else f"{v} * {c}" for v, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)

    def eval(self, env: dict):
        out = self.const
        for v, c in self.terms:
            out = out + env[v] * c
        return out

    def shift(self, d: int) -> "Lin":
        return Lin(self.const + d, self.terms)

    def vars(self) -> set:
        return {v for v, _ in self.terms}


@dataclass(frozen=True)
class Tensor:
    """A kernel parameter. `shape` holds ints and symbolic names (T.dynamic)."""

    name: str
    shape: tuple
    dtype: str
    role: str = "in"  # in | out (written; poisoned before the run) | ws (a workspace)


@dataclass(frozen=True)
class Alloc:
    name: str
    scope: str  # shared | fragment | local | var
    shape: tuple
    dtype: str
    init: float | None = None
    view_of: str | None = None  # `name = T.reshape(view_of, shape)`: the same elements, another shape


@dataclass(frozen=True)
class Ref:
    """A copy operand: the whole buffer, a corner `B[s0, s1]` or a slice `B[s0:s0+e0, ...]`."""

    buf: str
    form: str = "whole"  # whole | corner | slice
    starts: tuple = ()
    extents: tuple = ()
    full: tuple = ()  # per dim: emit `:` (slice form, start 0 and the whole dim)


@dataclass(frozen=True)
class Copy:
    src: Ref
    dst: Ref


@dataclass(frozen=True)
class Fill:
    buf: str
    value: float


@dataclass(frozen=True)
class Ew:
    """`for vars in T.Parallel(*extents)` (or T.serial, T.vectorized): dst[idx] = expr."""

    dst: str
    idx: tuple
    expr: tuple
    extents: tuple
    loop: str = "parallel"  # parallel | serial | vectorized (one thread's loop, as vector accesses)
    vars: tuple = ("i", "j")


@dataclass(frozen=True)
class Reduce:
    kind: str  # sum max min abssum absmax
    src: str
    dst: str
    dim: int
    clear: bool = True


@dataclass(frozen=True)
class CumSum:
    src: str
    dst: str
    dim: int
    reverse: bool = False


@dataclass(frozen=True)
class Gemm:
    a: str
    b: str
    c: str
    ta: bool = False
    tb: bool = False
    policy: str = "Square"
    clear_accum: bool = False


@dataclass(frozen=True)
class Atomic:
    dst: Ref  # a global corner
    src: str  # a tile


@dataclass(frozen=True)
class Pipelined:
    var: str
    extent: tuple  # (dim, block): T.ceildiv(dim, block) iterations; dim an int or a name
    stages: int
    body: tuple


@dataclass(frozen=True)
class SetVar:
    var: str
    expr: tuple


@dataclass(frozen=True)
class If:
    cond: tuple
    body: tuple


@dataclass(frozen=True)
class Swizzle:
    """`T.annotate_layout({buf: make_swizzled_layout(buf)})` of a shared tile (values unchanged)."""
    buf: str


@dataclass(frozen=True)
class GlobalLayout:
    """`T.annotate_layout({W: T.Layout(W.shape, fn)})` of a global workspace, in every kernel that
    touches it: its memory is laid out by fn, values unchanged. kind "transposed": fn(i, j) = [j, i];
    "blocked": [j // c, i, j % c] (c divides the row length)."""
    buf: str
    kind: str
    c: int = 1


@dataclass(frozen=True)
class Scan:
    """An inclusive prefix sum of the 1-d shared tile `buf` (n elements) written as SIMT code by the
    threads [lo, lo + n): `if tx >= lo and tx < lo + n:` around log2(n) rounds of `v = buf[t] + buf[t - 2^r]`
    (t = tx - lo, v the per-thread T.alloc_var `var`), each read and write between two barriers:
    `T.sync_threads(bar, n)`, a named barrier of those threads (bar > 0, as deepseek_v32's topk_selector),
    or with bar 0 `T.sync_threads()`, the branch's own barrier; with bar -1 none: the compiler must put
    them (thread_sync's branch barriers, cpu_threads' splits)."""
    buf: str
    var: str
    lo: int
    n: int
    bar: int = 0


@dataclass(frozen=True)
class Flip:
    """SIMT code of the threads [lo, lo + n) (any interval, warps or not): `buf[t] = x[t]` then
    `y[by, bx * n + t] = buf[n - 1 - t]` (t = tx - lo), with no barrier written: the compiler's (a barrier of
    those threads, or the branch cut around a __syncthreads; the CPU backend runs the two in order). let: the
    condition bound to a name first (`inside = tx < n`, then `if inside:`), the same branch."""
    x: str
    buf: str
    y: str
    lo: int
    n: int
    let: bool = False


STMT_TYPES = {c.__name__: c for c in (Copy, Fill, Ew, Reduce, CumSum, Gemm, Atomic, Pipelined, SetVar, If, Swizzle,
                                      GlobalLayout, Scan, Flip)}


@dataclass(frozen=True)
class Kernel:
    """A `with T.Kernel` block after a program's first one (a multi-kernel prim_func)."""

    grid: tuple
    threads: int
    allocs: tuple
    body: tuple
    uses_tx: bool = False


@dataclass(frozen=True)
class Program:
    """The first kernel (grid, threads, allocs, body) and any `kernels` launched after it, in
    order, sharing `workspaces` (global Tensors, role "ws", declared with T.alloc_global).
    `dims` gives each symbolic dim's value for the run, `consts` each named one's.
    `pass_configs` go to every tilelang.compile; `path` names the pipeline lowering sm_90a is
    meant to take ("ws": warp-specialized TMA, "cp_async": the cp.async pipeline; "" any),
    which the compile check asserts from the generated source."""

    seed: int
    family: str
    tensors: tuple
    grid: tuple  # per grid dim (dim, block): T.ceildiv(dim, block) blocks; dim an int or a name
    threads: int
    allocs: tuple
    body: tuple
    dims: dict = field(default_factory=dict)  # symbolic name -> value at run time
    consts: dict = field(default_factory=dict)  # name -> int, emitted before the kernel
    uses_tx: bool = False
    arch_min: int = 80  # the lowest sm this program is valid for (fp8 gemm: 89)
    kernels: tuple = ()  # Kernel blocks after the first
    workspaces: tuple = ()  # Tensor(role="ws"): T.alloc_global buffers
    pass_configs: dict = field(default_factory=dict)
    path: str = ""  # "" | ws | cp_async (sm_90a's intended pipeline lowering)

    def tensor(self, name: str) -> Tensor | None:
        return next((t for t in self.tensors + self.workspaces if t.name == name), None)

    def alloc(self, name: str) -> Alloc | None:
        allocs = self.allocs + tuple(a for k in self.kernels for a in k.allocs)
        return next((a for a in allocs if a.name == name), None)

    def launches(self) -> tuple:
        """Every kernel block in launch order, the first included, as Kernel records."""
        return (Kernel(self.grid, self.threads, self.allocs, self.body, self.uses_tx),) + tuple(self.kernels)

    def buffer(self, name: str):
        return self.tensor(name) or self.alloc(name)

    def value(self, d) -> int:
        """A dim (an int, or a const/symbolic name) as a number."""
        return d if isinstance(d, int) else {**self.consts, **self.dims}[d]

    def shape_of(self, name: str) -> tuple:
        return tuple(self.value(d) for d in self.buffer(name).shape)

    def with_(self, **kw) -> "Program":
        return replace(self, **kw)


def walk(body):
    """Every statement, nested ones included, in program order."""
    for s in body:
        yield s
        if isinstance(s, (Pipelined, If)):
            yield from walk(s.body)


def map_bodies(body, fn):
    """Rebuild `body` with fn applied to every statement list (innermost first)."""
    out = []
    for s in body:
        if isinstance(s, (Pipelined, If)):
            s = replace(s, body=map_bodies(s.body, fn))
        out.append(s)
    return fn(tuple(out))


# ---------------------------------------------------------------- JSON

def _enc(x):
    if isinstance(x, Lin):
        return {"_": "Lin", "c": x.const, "t": [list(t) for t in x.terms]}
    if hasattr(x, "__dataclass_fields__"):
        d = {"_": type(x).__name__}
        for f in fields(x):
            d[f.name] = _enc(getattr(x, f.name))
        return d
    if isinstance(x, (tuple, list)):
        return [_enc(v) for v in x]
    if isinstance(x, dict):
        return {k: _enc(v) for k, v in x.items()}
    return x


def _dec(x):
    if isinstance(x, list):
        return tuple(_dec(v) for v in x)
    if isinstance(x, dict):
        kind = x.get("_")
        if kind == "Lin":
            return Lin(x["c"], tuple((v, c) for v, c in x["t"]))
        classes = {**STMT_TYPES, "Ref": Ref, "Tensor": Tensor, "Alloc": Alloc, "Program": Program, "Kernel": Kernel}
        if kind in classes:
            kw = {k: _dec(v) for k, v in x.items() if k != "_"}
            if kind == "Program":
                kw["dims"] = dict(x["dims"])
                kw["consts"] = dict(x["consts"])
                kw["pass_configs"] = dict(x.get("pass_configs", {}))
            return classes[kind](**kw)
        return {k: _dec(v) for k, v in x.items()}
    return x


def to_json(p: Program) -> str:
    return json.dumps(_enc(p), separators=(",", ":"))


def from_json(text: str) -> Program:
    return _dec(json.loads(text))

