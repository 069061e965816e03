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
from ..errors import TileLangError
from ..frontend import builder as B
from ..frontend.declarations import FIRST_PARSE_ERROR, OUT_IDX, POINTER_PARAMS, BodyDeclarations, output_indices
from ..frontend.parser import Parser, ParsedReturn, SourceInfo, closure_scope
from ..frontend.reducer_epochs import check_reducer_epochs
from ..ir.buffer import Buffer
from ..ir.expr import Var
from ..ir.stmt import PrimFunc, seq
from .mode import is_eager  # noqa: F401  (it was defined here)


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
    """{parameter: DType} for parameters annotated with a TileLang dtype (`n: T.int32`) or as a
    pointer (`p: T.ptr`, an int64 address): scalar arguments of the kernel, passed at each call
    rather than compiled in."""
    return {n: dt.int64 if _is_pointer(a) else a for n, a in _signature_annotations(fn).items()
            if isinstance(a, dt.DType) or _is_pointer(a)}


def signature_pointers(fn) -> list:
    """The `p: T.ptr` parameters, in signature order."""
    return [n for n, a in _signature_annotations(fn).items() if _is_pointer(a)]


def _is_pointer(ann) -> bool:
    return getattr(ann, "tl_pointer_marker", False)


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


def _declare_signature_params(fn, state: BodyDeclarations, parser: Parser) -> None:
    """Bind the signature-annotated parameters before the body is parsed: tensors as buffers,
    dtype-annotated scalars as scalar parameters of the kernel."""
    for name, spec in signature_tensors(fn).items():
        if name in state.tensor_params:
            parser.scope[name] = state.declare_param(name, spec, parser.span(parser.src.node))
    for name, dtype in signature_scalars(fn).items():
        parser.scope[name] = state.params[name] = Var(name, dtype)
    pointers = tuple(signature_pointers(fn))
    if pointers:
        parser.builder.func_attrs[POINTER_PARAMS] = pointers


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
        for kind in ("shape", "stride"):  # a dim first; then a T.StridedTensor's stride
            for n in names:
                buf = state.params.get(n)
                if not isinstance(buf, Buffer):
                    continue
                for i, d in enumerate((buf.shape if kind == "shape" else buf.strides) or ()):
                    if isinstance(d, Var) and state.symbols.get(d.name) is d and d.name not in out:
                        out[d.name] = (n, kind, i, _values_per_byte(buf.dtype))
    for st in ast.walk(SourceInfo.of(fn).node):
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id in names:
            for i, c in enumerate(_shape_names(st.annotation)):
                if c is not None and c not in out:
                    out[c] = (st.target.id, "shape", i, 1)
    return out


def _values_per_byte(dtype) -> int:
    """How many values of `dtype` a torch byte holds (2 for float4_e2m1fn, else 1)."""
    bits = dtype.bits * getattr(dtype, "lanes", 1)
    return 8 // bits if bits < 8 else 1


def _first_parse(fn, bound: dict) -> BodyDeclarations:
    tensors = [n for n, v in bound.items() if v is None or tensor_shape(v) is not None]
    state = BodyDeclarations({}, tensors, symbolic=True)
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
    """T.const values read off the shapes (and strides) of the tensors passed for annotated
    parameters, counted in values: a packed sub-byte tensor's last dim and other strides are
    its torch ones times the values per byte."""
    out = {}
    for name, (param, kind, i, per_byte) in ((k, v) for k, v in matcher.items() if k != FIRST_PARSE_ERROR):
        t = tensors.get(param)
        shape = tensor_shape(t)
        if shape is None or i >= len(shape):
            continue
        if not type(t).__module__.startswith("torch"):  # a T.Tensor spec counts values already
            per_byte = 1
        if kind == "shape":
            out[name] = int(shape[i]) * (per_byte if i == len(shape) - 1 else 1)
            continue
        strides = _strides(t)
        if strides is not None:
            out[name] = int(strides[i]) * (per_byte if i < len(shape) - 1 else 1)
    return out


def _strides(v):
    """A torch tensor's element strides; a spec's declared ones when they are numbers; else None."""
    if type(v).__module__.startswith("torch") and hasattr(v, "stride"):
        return tuple(v.stride())
    st = getattr(v, "strides", None)
    return tuple(st) if st is not None and all(isinstance(x, int) for x in st) else None


def parse_eager(fn, bound: dict, const_values: dict) -> tuple[PrimFunc, list[int]]:
    """Parse an eager body with Python args `bound`; returns (prim_func, out_idx)."""
    tensor_params = [n for n, v in bound.items() if v is None or tensor_shape(v) is not None]
    state = BodyDeclarations(const_values, tensor_params)
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
    check_reducer_epochs(body)
    ins = [state.params[n] for n in inspect.signature(fn).parameters if n in state.params]
    span = parser.span(parser.src.node)
    out_idx = output_indices(state, returned, span)
    attrs = dict(builder.func_attrs)
    if out_idx:
        attrs[OUT_IDX] = tuple(out_idx)
    func = PrimFunc(builder.func_name or fn.__name__, tuple(ins + state.outputs), body, attrs, span=span)
    return func, [i % len(func.params) for i in out_idx]
