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
        parts = []
        for start, ext in e.ranges:
            parts.append(expr_str(start) if _is_one(ext) else f"{expr_str(start)}:{expr_str(start)} + {expr_str(ext)}")
        return f"{e.buffer.name}[{', '.join(parts)}]"
    return repr(e)


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
        else:  # tile ops and anything else: generic call syntax
            args = []
            for f in dataclasses.fields(s):
                if f.name == "span":
                    continue
                v = getattr(s, f.name)
                args.append(f"{f.name}={_arg(v)}")
            self.emit(d, f"T.{name}({', '.join(args)})")

    def p_SeqStmt(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def p_Evaluate(self, s, d):
        self.emit(d, expr_str(s.value))

    def p_BufferStore(self, s, d):
        self.emit(d, f"{s.buffer.name}[{', '.join(expr_str(i) for i in s.indices)}] = {expr_str(s.value)}")

    def p_LetStmt(self, s, d):
        self.emit(d, f"{s.var.name}: T.{s.var.dtype.name} = {expr_str(s.value)}")

    def p_Allocate(self, s, d):
        b = s.buffer
        fn = {"shared": "alloc_shared", "shared.dyn": "alloc_shared", "fragment": "alloc_fragment",
              "local": "alloc_local", "local.var": "alloc_var"}[b.scope]
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
        self.emit(d, f"with T.Kernel({grid}, threads={s.threads!r}) as ({names}):")
        self.stmt(s.body, d + 1)


def _is_zero(x) -> bool:
    return x == 0 or (isinstance(x, Const) and x.value == 0)


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
