"""What a kernel body declares about its own signature, in the public TileLang's body style.

    def kernel(A, B):                      # parameters without annotations ...
        A: T.Tensor[[M, N], T.float32]     # ... declared by the body
        C = T.empty([M, N], T.float32)     # an output, allocated per call
        ...
        return C                           # the returned T.empty outputs, in return order

Both an eager `@tilelang.jit` body and a `@T.prim_func` read this way keep one
`BodyDeclarations` on the builder (`Builder.eager`) while they are parsed; the parser's
`X: T.Tensor(...)` statement and `T.empty` / `T.const` reach it there. `jit` tells the two
apart: `T.const` is eager-only. The first (symbolic) eager parse keeps every T.const a Var
(`symbols`) and skips kernel bodies (jit/eager.py).
"""
from __future__ import annotations

import linecache

from .. import dtypes as dt
from ..errors import DSLSyntaxError, DSLTypeError, Span
from ..ir.buffer import Buffer
from ..ir.expr import Var
from . import builder as B

FIRST_PARSE_ERROR = "<why the first parse failed>"  # a key no T.const name can be

OUT_IDX = "tilelang_out_idx"  # PrimFunc attr: the returned T.empty outputs, as negative parameter indices
POINTER_PARAMS = "tl.pointer_params"  # PrimFunc attr: names of the `p: T.ptr` parameters (int64 addresses)


class BodyDeclarations:
    """Parameters and outputs one parse of a body declares.

    `const_values`: the T.const values of this specialization; `tensor_params`: the parameter
    names the body may declare as tensors; `jit`: an eager @tilelang.jit body (T.const allowed).
    """

    def __init__(self, const_values: dict, tensor_params: list[str], symbolic: bool = False, jit: bool = True):
        self.values = dict(const_values)
        self.tensor_params = tensor_params
        self.params: dict[str, Buffer | Var] = {}  # Var: a scalar parameter (`n: T.int32`)
        self.outputs: list[Buffer] = []
        self.symbolic = symbolic
        self.symbols: dict[str, Var] = {}
        self.jit = jit
        self.pointer_views: list = []  # DeclBuffers of T.make_tensor(ptr_param, ...) written before the kernels

    def const(self, name: str, dtype=None):
        if not self.jit:
            raise DSLSyntaxError("T.const is only valid in an eager-mode @tilelang.jit function body; a "
                                 "@T.prim_func takes its sizes from Python values or T.dynamic")
        if self.symbolic:
            if name not in self.symbols:
                self.symbols[name] = Var(name, dtype or dt.int32)
            return self.symbols[name]
        if name not in self.values:
            why = self.values.get(FIRST_PARSE_ERROR)
            raise DSLTypeError(f"T.const {name!r} has no value: pass it to .compile({name}=...) or pass a tensor "
                               f"whose annotated shape or strides have {name!r} as an entry" +
                               (f" (the tensor declarations could not be read without the values: {why})"
                                if why is not None else ""))
        return self.values[name]

    def declare_param(self, name: str, spec, span: Span) -> Buffer:
        if name not in self.tensor_params:
            what = "an unannotated parameter" if not self.jit else "a parameter"
            raise DSLSyntaxError(f"`{name}: T.Tensor(...)` annotates a name that is not {what} of the function", span)
        if name in self.params:
            raise DSLSyntaxError(f"parameter {name!r} is declared twice", span)
        buf = Buffer(name, spec.shape, spec.dtype, "global", strides=getattr(spec, "strides", None))
        self.params[name] = buf
        return buf

    def declare_output(self, shape, dtype) -> Buffer:
        b = B.current()
        buf = Buffer(b.unique(_assign_target() or f"out{len(self.outputs)}"), shape, dtype, "global")
        self.outputs.append(buf)
        return buf

    def returned(self, value, span: Span | None) -> list[Buffer]:
        """The outputs a `return` names, checked: each a T.empty buffer of this body, once."""
        ret = list(value) if isinstance(value, (tuple, list)) else [value]
        for r in ret:
            if not isinstance(r, Buffer) or r not in self.outputs:
                raise DSLSyntaxError(f"a kernel body may only return tensors created with T.empty, got {r!r}", span)
        if len({id(r) for r in ret}) != len(ret):
            raise DSLSyntaxError("a kernel body returns the same T.empty tensor twice", span)
        return ret


def _assign_target() -> str | None:
    """`C` for `C = T.empty(...)` (the output's name), read from the line being parsed."""
    b = B.current()
    if b.span is None:
        return None
    line = linecache.getline(b.span.file, b.span.line).strip()
    lhs = line.split("=", 1)[0].strip() if "=" in line else ""
    return lhs if lhs.isidentifier() else None


def output_indices(decls: BodyDeclarations, returned, span: Span | None) -> list[int]:
    """The `tilelang_out_idx` of a body: per returned T.empty output (in return order) its index
    among the parameters, counted from the end (the outputs follow the inputs, in T.empty order).
    Every T.empty output must be returned: one that is not could never be read."""
    ret = [] if returned is None else decls.returned(returned, span)
    left = [o.name for o in decls.outputs if o not in ret]
    if left:
        raise DSLSyntaxError(f"T.empty output(s) {', '.join(left)} are not returned; return every tensor made with "
                             "T.empty (`return " + ", ".join(o.name for o in decls.outputs) + "`)", span)
    n = len(decls.outputs)
    return [decls.outputs.index(r) - n for r in ret]
