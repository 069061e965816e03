"""Readable TileLang-like text for expressions, statements and functions."""
from __future__ import annotations

import dataclasses

from .buffer import Buffer, BufferRegion
from .expr import Binary, BufferLoad, Call, Cast, Const, Select, Unary, Var
from . import stmt as S

_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
         "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10}


def expr_str(e, prec: int = 0) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        if isinstance(e.value, str):
            return f"T.StringImm({e.value!r})"
        if e.dtype.is_bool:
            return "True" if e.value else "False"
        if e.dtype.name in ("int32", "float32"):
            return repr(e.value)
        return f"T.{e.dtype.name}({e.value!r})"
    if isinstance(e, Binary):
        if e.op in ("min", "max"):
            return f"T.{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
        p = _PREC[e.op]
        op = {"&&": "and", "||": "or"}.get(e.op, e.op)
        s = f"{expr_str(e.a, p)} {op} {expr_str(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Unary):
        op = {"!": "not ", "-": "-", "~": "~"}[e.op]
        return f"{op}{expr_str(e.a, 11)}"
    if isinstance(e, Select):
        return f"T.if_then_else({expr_str(e.cond)}, {expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, Cast):
        return f"T.Cast({e.dtype.name!r}, {expr_str(e.value)})"
    if isinstance(e, Call):
        return f"T.{e.op}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Buffer):
        return e.name
    if isinstance(e, BufferRegion):
        return region_str(e)
    return repr(e)


def region_str(r: BufferRegion) -> str:
    """`A_s` for a whole buffer, else `A[by * 64:by * 64 + 64, k]` (unit extents print as an index)."""
    from ..arith.simplify import simplify

    shape = tuple(r.buffer.shape)
    if all(_is_zero(st) and _same(ext, dim) for (st, ext), dim in zip(r.ranges, shape)) \
            and len(r.ranges) == len(shape):
        return r.buffer.name
    parts = []
    for start, ext in r.ranges:
        if _is_one(ext):
            parts.append(expr_str(start))
        else:
            stop = simplify(start + ext) if hasattr(start, "dtype") else start + ext
            parts.append(f"{'' if _is_zero(start) else expr_str(start)}:{expr_str(stop)}")
    return f"{r.buffer.name}[{', '.join(parts)}]"


def _same(a, b) -> bool:
    va = a.value if isinstance(a, Const) else a
    vb = b.value if isinstance(b, Const) else b
    if isinstance(va, int) and isinstance(vb, int):
        return va == vb
    return a is b or a == b  # structural equality of expression dataclasses


def _is_one(x) -> bool:
    return x == 1 or (isinstance(x, Const) and x.value == 1)


def _shape(buf: Buffer) -> str:
    return "(" + ", ".join(expr_str(s) if not isinstance(s, int) else str(s) for s in buf.shape) + ("," if buf.ndim == 1 else "") + ")"


class _Printer:
    def __init__(self):
        self.lines: list[str] = []

    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def stmt(self, s, d: int):
        name = type(s).__name__
        fn = getattr(self, "p_" + name, None)
        if fn is not None:
            fn(s, d)
        else:  # tile ops and anything else: call syntax, as users write them
            self.emit(d, _call_str(s))

    def p_SeqStmt(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def p_Evaluate(self, s, d):
        self.emit(d, expr_str(s.value))

    def p_BufferStore(self, s, d):
        self.emit(d, f"{s.buffer.name}[{', '.join(expr_str(i) for i in s.indices)}] = {expr_str(s.value)}")

    def p_LetStmt(self, s, d):
        # NOTE: `x = value` (not `x: T.int32 = ...`, which the frontend reads as T.alloc_var) so the
        # printed text parses back to the same IR; the dtype follows from the value.
        self.emit(d, f"{s.var.name} = {expr_str(s.value)}")

    def p_Allocate(self, s, d):
        b = s.buffer
        fn = {"shared": "alloc_shared", "shared.dyn": "alloc_shared", "fragment": "alloc_fragment",
              "local": "alloc_local", "local.var": "alloc_var", "global": "alloc_global"}[b.scope]
        if b.scope == "local.var":
            init = f", init={expr_str(s.init[0])}" if s.init else ""
            self.emit(d, f"{b.name} = T.alloc_var({b.dtype.name!r}{init})")
            return
        init = f", init={s.init}" if s.init is not None else ""
        self.emit(d, f"{b.name} = T.{fn}({_shape(b)}, {b.dtype.name!r}{init})")

    def p_For(self, s, d):
        kind = {"serial": "T.serial", "parallel": "T.Parallel", "pipelined": "T.Pipelined",
                "unroll": "T.unroll", "vectorized": "T.vectorized"}.get(s.kind, s.kind)
        ann = "".join(f", {k}={v!r}" for k, v in s.annotations)
        rng = expr_str(s.extent) if _is_zero(s.start) else f"{expr_str(s.start)}, {expr_str(s.start)} + {expr_str(s.extent)}"
        self.emit(d, f"for {s.var.name} in {kind}({rng}{ann}):")
        self.stmt(s.body, d + 1)

    def p_While(self, s, d):
        self.emit(d, f"while {expr_str(s.cond)}:")
        self.stmt(s.body, d + 1)

    def p_IfThenElse(self, s, d):
        self.emit(d, f"if {expr_str(s.cond)}:")
        self.stmt(s.then_case, d + 1)
        if s.else_case is not None:
            self.emit(d, "else:")
            self.stmt(s.else_case, d + 1)

    def p_Break(self, s, d):
        self.emit(d, "break")

    def p_Continue(self, s, d):
        self.emit(d, "continue")

    def p_KernelLaunch(self, s, d):
        grid = ", ".join(expr_str(g) if not isinstance(g, int) else str(g) for g in s.grid)
        names = ", ".join(v.name for v in s.block_vars)
        names = names if len(s.block_vars) == 1 else f"({names})"
        threads = list(s.threads)
        while len(threads) > 1 and threads[-1] == 1:
            threads.pop()
        th = str(threads[0]) if len(threads) == 1 else repr(tuple(threads))
        if tuple(s.cluster) != (1, 1, 1):
            self.emit(d, f"with T.ClusterKernel({grid}, threads={th}, cluster_dims={tuple(s.cluster)!r}) as {names}:")
        else:
            self.emit(d, f"with T.Kernel({grid}, threads={th}) as {names}:")
        self.stmt(s.body, d + 1)


def _is_zero(x) -> bool:
    return x == 0 or (isinstance(x, Const) and x.value == 0)


_OP_NAMES = {"Swizzle": "use_swizzle", "CumSum": "cumsum", "AtomicTile": "atomic", "DeviceAssert": "device_assert",
             "AnnotateLayout": "annotate_layout"}


def _call_str(s) -> str:
    """`T.copy(A[0:64, k], A_s)`: required fields positional, others only when not the default.

    A leading `kind` field ("max", "add") joins the name: Reduce(kind="max") -> T.reduce_max.
    """
    name = type(s).__name__
    fn = _OP_NAMES.get(name) or "".join("_" + c.lower() if c.isupper() and i else c.lower()
                                         for i, c in enumerate(name))
    args = []
    for f in dataclasses.fields(s):
        if f.name == "span":
            continue
        v = getattr(s, f.name)
        if f.name == "kind" and isinstance(v, str) and not args:
            fn = f"{fn}_{v}"
            continue
        has_default = f.default is not dataclasses.MISSING
        if has_default and _eq_default(v, f.default):
            continue
        args.append(f"{f.name}={_arg(v)}" if has_default else _arg(v))
    return f"T.{fn}({', '.join(args)})"


def _eq_default(v, default) -> bool:
    try:
        return bool(v == default) and type(v) is type(default)
    except Exception:  # noqa: BLE001 - IR nodes may refuse comparison; then print the value
        return False


def _arg(v) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(_arg(x) for x in v) + ")"
    if isinstance(v, (Buffer, BufferRegion)) or hasattr(v, "dtype") and not isinstance(v, type):
        try:
            return expr_str(v)
        except Exception:  # pragma: no cover - printer must never fail
            return repr(v)
    return repr(v)


def stmt_str(s, depth: int = 0) -> str:
    p = _Printer()
    p.stmt(s, depth)
    return "\n".join(p.lines)


def func_str(f: S.PrimFunc) -> str:
    p = _Printer()
    params = []
    for x in f.params:
        if isinstance(x, Buffer):
            params.append(f"{x.name}: T.Tensor({_shape(x)}, {x.dtype.name!r})")
        else:
            params.append(f"{x.name}: T.{x.dtype.name}")
    p.emit(0, "@T.prim_func")
    p.emit(0, f"def {f.name}({', '.join(params)}):")
    p.stmt(f.body, 1)
    return "\n".join(p.lines)
