"""Eager-mode @tilelang.jit: the decorated function body *is* the kernel.

Tensor parameters are annotated in the signature (`def f(A: T.Tensor((M, N), dtype))`) or
declared in the body (`A: T.Tensor((M, N), dtype)`), dims with `T.const`, outputs with
`T.empty` and returned. A parameter annotated with a dtype (`n: T.int32`) is a scalar argument
of the kernel; other parameters are Python values the kernel is specialized on. Calling the function with tensors
infers the T.const dims from their shapes, compiles once per specialization and runs.

T.const values come from, in order: a keyword of `.compile(N=...)`, a scalar parameter of
the function with the const's name, or the first tensor parameter whose declared shape has
the const as a dim of its own. Which tensor dim that is, is found by a first parse of the
body (`const_matcher`) with every T.const a symbolic dim and the kernels skipped, so shapes
built in Python (`shape = [batch, heads // g, dim]; Q: T.Tensor(shape, dt)`) count.
"""
from __future__ import annotations

import ast
import inspect

from .. import dtypes as dt
from ..errors import DSLSyntaxError, DSLTypeError, Span, TileLangError
from ..frontend import builder as B
from ..frontend.parser import Parser, ParsedReturn, SourceInfo, closure_scope
from ..ir.buffer import Buffer
from ..ir.expr import Var
from ..ir.stmt import PrimFunc, seq
from .mode import is_eager  # noqa: F401  (it was defined here)


class EagerState:
    """What one parse of an eager body declares. `symbolic`: the first parse, where T.const
    names are dims (`symbols`) and `with T.Kernel` bodies are skipped."""

    def __init__(self, const_values: dict, tensor_params: list[str], symbolic: bool = False):
        self.values = dict(const_values)
        self.tensor_params = tensor_params
        self.params: dict[str, Buffer | Var] = {}  # Var: a scalar parameter (`n: T.int32`)
        self.outputs: list[Buffer] = []
        self.symbolic = symbolic
        self.symbols: dict[str, Var] = {}

    def const(self, name: str, dtype=None):
        if self.symbolic:
            if name not in self.symbols:
                self.symbols[name] = Var(name, dtype or dt.int32)
            return self.symbols[name]
        if name not in self.values:
            why = self.values.get(FIRST_PARSE_ERROR)
            raise DSLTypeError(f"T.const {name!r} has no value: pass it to .compile({name}=...) or pass a tensor "
                               f"whose annotated shape has {name!r} as a dim" +
                               (f" (the tensor declarations could not be read without the values: {why})"
                                if why is not None else ""))
        return self.values[name]

    def declare_param(self, name: str, spec, span: Span) -> Buffer:
        if name not in self.tensor_params:
            raise DSLSyntaxError(f"`{name}: T.Tensor(...)` annotates a name that is not a parameter of the function")
        buf = Buffer(name, spec.shape, spec.dtype, "global", strides=getattr(spec, "strides", None))
        self.params[name] = buf
        return buf

    def declare_output(self, shape, dtype) -> Buffer:
        b = B.current()
        buf = Buffer(b.unique(_assign_target() or f"out{len(self.outputs)}"), shape, dtype, "global")
        self.outputs.append(buf)
        return buf


def _assign_target() -> str | None:
    b = B.current()
    if b.span is None:
        return None
    import linecache

    line = linecache.getline(b.span.file, b.span.line).strip()
    lhs = line.split("=", 1)[0].strip() if "=" in line else ""
    return lhs if lhs.isidentifier() else None


def _shape_names(annotation) -> list:
    """For `T.Tensor((M, N), dt)` / `T.Tensor[[M, N], dt]`: per dim, the plain name or None."""
    shape = None
    if isinstance(annotation, ast.Call) and annotation.args:
        shape = annotation.args[0]
    elif isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple) and annotation.slice.elts:
        shape = annotation.slice.elts[0]
    if isinstance(shape, (ast.Tuple, ast.List)):
        return [e.id if isinstance(e, ast.Name) else None for e in shape.elts]
    if isinstance(shape, ast.Name):
        return [shape.id]
    return []


def signature_tensors(fn) -> dict:
    """{parameter: TensorSpec} for parameters annotated as tensors in the signature
    (`def f(A: T.Tensor((M, N), T.float16))`), in signature order. A string annotation
    (`from __future__ import annotations`) is evaluated where `fn` was defined; one that
    cannot be (it names a T.const of the body) is left to a body declaration.
    """
    from ..language.types import TensorSpec

    return {n: a for n, a in _signature_annotations(fn).items() if isinstance(a, TensorSpec)}


def signature_scalars(fn) -> dict:
    """{parameter: DType} for parameters annotated with a TileLang dtype (`n: T.int32`): scalar
    arguments of the kernel, passed at each call rather than compiled in."""
    return {n: a for n, a in _signature_annotations(fn).items() if isinstance(a, dt.DType)}


def _signature_annotations(fn) -> dict:
    anns = getattr(fn, "__annotations__", None) or {}
    scope = None
    out = {}
    for name in inspect.signature(fn).parameters:
        ann = anns.get(name)
        if isinstance(ann, str) and not isinstance(ann, dt.DType):
            scope = closure_scope(fn) if scope is None else scope
            try:
                ann = eval(ann, scope)  # noqa: S307 - the user's own annotation, as typing.get_type_hints does
            except Exception:  # noqa: BLE001 - not a signature tensor, then
                continue
        if ann is not None:
            out[name] = ann
    return out


def _declare_signature_params(fn, state: EagerState, parser: Parser) -> None:
    """Bind the signature-annotated parameters before the body is parsed: tensors as buffers,
    dtype-annotated scalars as scalar parameters of the kernel."""
    for name, spec in signature_tensors(fn).items():
        if name in state.tensor_params:
            parser.scope[name] = state.declare_param(name, spec, parser.span(parser.src.node))
    for name, dtype in signature_scalars(fn).items():
        parser.scope[name] = state.params[name] = Var(name, dtype)


def tensor_params(fn) -> list[str]:
    """Tensor parameters: those annotated `A: T.Tensor(...)` in the signature, in signature
    order, then those the body declares so, in declaration order."""
    params = inspect.signature(fn).parameters
    out = list(signature_tensors(fn))
    for st in ast.walk(SourceInfo.of(fn).node):
        if (isinstance(st, ast.AnnAssign) and st.value is None and isinstance(st.target, ast.Name)
                and st.target.id in params and st.target.id not in out):
            out.append(st.target.id)
    return out


def check_tensor_args(fn, values: dict, need_all: bool, names: list | None = None) -> None:
    """Check that every declared tensor parameter got a torch.Tensor (TypeError).

    Compiling without running (`need_all=False`) also takes a `T.Tensor(shape, dtype)` spec
    or nothing for a tensor parameter.
    """
    from ..language.types import TensorSpec

    for name in tensor_params(fn) if names is None else names:
        v = values.get(name)
        if v is None:
            if need_all:
                raise TypeError(f"{fn.__name__}() is missing the tensor argument {name!r}")
            continue
        if not need_all and isinstance(v, TensorSpec):
            continue
        if not (type(v).__module__.startswith("torch") and hasattr(v, "shape")):
            raise TypeError(f"{fn.__name__}(): argument {name!r} must be a torch.Tensor (the body declares "
                            f"`{name}: T.Tensor(...)`), got {type(v).__name__}: {v!r}")


def tensor_shape(v):
    """The shape of a tensor argument: a torch.Tensor, or a `T.Tensor(shape, dtype)` spec (par_compile)."""
    from ..language.types import TensorSpec

    if isinstance(v, TensorSpec):
        return tuple(v.shape)
    if type(v).__module__.startswith("torch") and hasattr(v, "shape"):
        return tuple(v.shape)
    return None


def const_matcher(fn, bound: dict) -> dict:
    """{T.const name: (tensor parameter, dim)}: where each const is read off a tensor's shape.

    The first parse of the body with Python args `bound` (tensor parameters as None), every
    T.const a symbolic dim and the kernels skipped; a const matches the first declared
    tensor dim that *is* it (not `N * 2`). Names that parse cannot settle (Python code that
    needs the value, e.g. `range(N)` before the kernel) fall back to the names written
    directly in `X: T.Tensor((M, N), ...)` annotations.
    """
    out = {}
    names = [n for n in inspect.signature(fn).parameters]
    try:
        state = _first_parse(fn, bound)
    except TileLangError as e:
        state, out[FIRST_PARSE_ERROR] = None, e
    if state is not None:
        for n in names:
            buf = state.params.get(n)
            for i, d in enumerate(buf.shape if isinstance(buf, Buffer) else ()):
                if isinstance(d, Var) and state.symbols.get(d.name) is d and d.name not in out:
                    out[d.name] = (n, i)
    for st in ast.walk(SourceInfo.of(fn).node):
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id in names:
            for i, c in enumerate(_shape_names(st.annotation)):
                if c is not None and c not in out:
                    out[c] = (st.target.id, i)
    return out


FIRST_PARSE_ERROR = "<why the first parse failed>"  # a key no T.const name can be


def _first_parse(fn, bound: dict) -> EagerState:
    tensors = [n for n, v in bound.items() if v is None or tensor_shape(v) is not None]
    state = EagerState({}, tensors, symbolic=True)
    builder = B.Builder(mode="eager")
    builder.eager = state
    scope = closure_scope(fn)
    scope.update(bound)
    parser = Parser(fn, builder, scope)
    with B.activate(builder):
        _declare_signature_params(fn, state, parser)
        try:
            parser.body(parser.src.node.body)
        except ParsedReturn:
            pass
    return state


def const_names(fn) -> set:
    """Names declared by string-literal `T.const("M, N")` calls in the body."""
    out = set()
    for st in ast.walk(SourceInfo.of(fn).node):
        if isinstance(st, ast.Call) and st.args and isinstance(st.args[0], ast.Constant) \
                and isinstance(st.args[0].value, str) and isinstance(st.func, ast.Attribute) \
                and st.func.attr == "const":
            out.update(p for p in st.args[0].value.replace(",", " ").split() if p)
    return out


def infer_consts(matcher: dict, tensors: dict) -> dict:
    """T.const values read off the shapes of the tensors passed for annotated parameters."""
    out = {}
    for name, (param, i) in ((k, v) for k, v in matcher.items() if k != FIRST_PARSE_ERROR):
        shape = tensor_shape(tensors[param]) if param in tensors else None
        if shape is not None and i < len(shape):
            out[name] = int(shape[i])
    return out


def parse_eager(fn, bound: dict, const_values: dict) -> tuple[PrimFunc, list[int]]:
    """Parse an eager body with Python args `bound`; returns (prim_func, out_idx)."""
    tensor_params = [n for n, v in bound.items() if v is None or tensor_shape(v) is not None]
    state = EagerState(const_values, tensor_params)
    builder = B.Builder(mode="eager")
    builder.eager = state
    scope = closure_scope(fn)
    scope.update(bound)
    parser = Parser(fn, builder, scope)
    returned = None
    with B.activate(builder):
        _declare_signature_params(fn, state, parser)
        try:
            parser.body(parser.src.node.body)
        except ParsedReturn as r:
            returned = r.value
    while len(builder.frames) > 1:
        inner = builder.pop()
        builder.emit(inner)
    body = seq(*builder.frames[0])
    ins = [state.params[n] for n in inspect.signature(fn).parameters if n in state.params]
    outs = list(state.outputs)
    if returned is not None:
        ret = list(returned) if isinstance(returned, (tuple, list)) else [returned]
        for r in ret:
            if not isinstance(r, Buffer) or r not in outs:
                raise DSLSyntaxError("an eager kernel may only return buffers created with T.empty", parser.span(
                    parser.src.node))
        outs = ret + [o for o in outs if o not in ret]
    func = PrimFunc(fn.__name__, tuple(ins + outs), body, span=parser.span(parser.src.node))
    n_ret = len(list(returned) if isinstance(returned, (tuple, list)) else ([returned] if returned is not None else []))
    return func, list(range(len(ins), len(ins) + n_ret)) if n_ret else list(range(len(ins), len(ins) + len(outs)))
