"""TVMScript-style statements: the names a kernel written in TVM's TIR style uses.

Frames are `with` blocks that build one statement from their body (the parser calls
`tl_frame_enter`, parses the body, then `tl_frame_exit(body)`):

    with T.If(i < n):                 # the same as `if i < n:` ... `else:`
        with T.Then():
            B[i] = A[i]
        with T.Else():
            B[i] = 0
    with T.While(k[0] < n): ...       # `while k[0] < n:`
    with T.Assert(n > 0, "n > 0"): ...  # a device assertion, then the body

Parameters typed `T.handle` become buffers by `T.match_buffer` (older TileLang programs):

    @T.prim_func
    def main(a: T.handle, b: T.handle):
        A = T.match_buffer(a, (M, N), "float16")
        B = T.match_buffer(b, (M, N), "float16")
        with T.Kernel(...): ...

Block-style scheduling (`T.sblock`, `T.axis`, `T.init`, `T.where`) is read as the loop nest it
describes: axes are their bindings, `T.init()`'s body runs where every reduction axis is at its
start, `T.where` guards the rest of the block; `T.reads` / `T.writes` are accepted and unused.
"""
from __future__ import annotations

from ... import dtypes as dt
from ...errors import DSLSyntaxError, DSLTypeError
from ...frontend import builder as B
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.buffer import Buffer, BufferRegion
from ...tvm.tirx_nodes import intrinsic
from ..thread import EMITTED

# ------------------------------------------------------------------ control-flow frames

class _Frame:
    """A `with` block building one statement; `tl_frame_enter`'s value is what `as` binds."""

    what = "frame"

    def tl_frame_enter(self):
        return None

    def tl_frame_exit(self, body):
        raise NotImplementedError


def _cond(c, what):
    if isinstance(c, E.ExprCompare) or isinstance(c, Buffer):
        c = c.as_load()
    if isinstance(c, bool) or isinstance(c, int):
        return E.const(bool(c), dt.bool_)
    if not isinstance(c, E.Expr):
        raise DSLTypeError(f"{what}: expected a condition (an expression such as `i < n`), got {c!r}")
    return c


def _is_empty(body) -> bool:
    return isinstance(body, S.SeqStmt) and not body.stmts


class IfFrame(_Frame):
    def __init__(self, cond):
        self.cond = _cond(cond, "T.If")
        self.then = self.other = None

    def tl_frame_enter(self):
        B.current("T.If").tir_frames.append(self)

    def tl_frame_exit(self, body):
        b = B.current("T.If")
        b.tir_frames.pop()
        if not _is_empty(body):
            raise DSLSyntaxError("T.If: its body holds only `with T.Then():` and `with T.Else():` blocks")
        if self.then is None:
            raise DSLSyntaxError("T.If: `with T.Then():` is missing inside `with T.If(...):`")
        b.emit(S.IfThenElse(self.cond, self.then, self.other))


class _Branch(_Frame):
    def __init__(self, name):
        self.name = name

    def tl_frame_enter(self):
        frames = B.current(f"T.{self.name}").tir_frames
        if not frames or not isinstance(frames[-1], IfFrame):
            raise DSLSyntaxError(f"T.{self.name}() must be directly inside `with T.If(cond):`")
        self.owner = frames[-1]
        if self.name == "Then" and self.owner.then is not None:
            raise DSLSyntaxError("T.If has two `with T.Then():` blocks")
        if self.name == "Else" and (self.owner.then is None or self.owner.other is not None):
            raise DSLSyntaxError("`with T.Else():` comes once, after `with T.Then():`")

    def tl_frame_exit(self, body):
        if self.name == "Then":
            self.owner.then = body
        else:
            self.owner.other = body


def If(condition):  # noqa: N802 - TVM's name
    """`with T.If(cond):` holding `with T.Then():` and optionally `with T.Else():` (an `if` statement)."""
    return IfFrame(condition)


def Then():  # noqa: N802 - TVM's name
    """The branch of the enclosing `with T.If(cond):` taken where cond holds."""
    return _Branch("Then")


def Else():  # noqa: N802 - TVM's name
    """The branch of the enclosing `with T.If(cond):` taken where cond does not hold."""
    return _Branch("Else")


class _While(_Frame):
    def __init__(self, cond):
        self.cond = _cond(cond, "T.While")

    def tl_frame_exit(self, body):
        B.current("T.While").emit(S.While(self.cond, body))


def While(condition):  # noqa: N802 - TVM's name
    """`with T.While(cond):` runs its body while cond holds (a `while` statement)."""
    return _While(condition)


class _Checked(_Frame):
    """The body of `with T.Assert(...):`, after the check (which T.Assert made when called)."""

    what = "T.Assert"

    def tl_frame_exit(self, body):
        B.current("T.Assert").emit(body)


def Assert(condition, message, error_kind="RuntimeError"):  # noqa: N802 - TVM's name
    """Check `condition` where this call stands (language/control.py: a device assert in a kernel, a
    build-time check outside), as a statement `T.Assert(cond, "message")` or as `with T.Assert(cond,
    "message"):` around a body that runs after the check. `message` may be a list of parts."""
    from ..control import Assert as check

    if isinstance(message, (list, tuple)):
        message = "".join(str(m) for m in message)
    if isinstance(condition, E.ExprCompare):
        condition = condition.as_load()
    check(condition, str(message), error_kind)
    return _Checked()


# ------------------------------------------------------------------ variables and bindings

def var(dtype, name=""):
    """A new variable of `dtype` (named by the assignment `n = T.var("int32")` when unnamed)."""
    return E.Var(str(name), dt.as_dtype(dtype))


def handle(dtype=None, storage_scope="global", *, is_size_var=False):
    """`a: T.handle` annotates a parameter that `T.match_buffer(a, shape, dtype)` makes a buffer;
    called, a new address variable. As a dtype it is "handle" (`T.call_extern(T.handle, ...)`)."""
    return E.Var("", dt.as_dtype("handle"))


handle.tl_handle_type = True
handle.tl_dtype = "handle"


def boolean(expr=None, is_size_var=False):
    """`expr` as a bool; without it, a new bool variable. As a dtype it is "bool"."""
    return E.Var("", dt.bool_) if expr is None else E.cast(dt.bool_, expr)


boolean.tl_dtype = "bool"


def void(expr=None, *, is_size_var=False):
    """Without `expr`: the void type's stand-in (T.func_ret(T.void())); with one: `expr`, whose value
    is discarded where it is a statement (T.evaluate)."""
    return _VOID if expr is None else E.as_expr(expr)


_VOID = E.Var("void", dt.as_dtype("handle"))


def let(v, value, body=None):
    """`T.let(v, value)`: bind `v` to `value` for the rest of the block (T.bind with a given Var);
    with `body`, the expression `body` where `v` stands for `value` (T.Let)."""
    if body is not None:
        from ...tvm.tirx_nodes import Let as _Let

        return _Let(v, value, body)
    return bind(value, var=v)


def bind(value, type_annotation=None, *, var=None):  # noqa: A002 - TVM's names
    """`x = T.bind(value)`: a variable holding `value` for the rest of the block (a let statement)."""
    b = B.current("T.bind")
    value = E.as_expr(value)
    if type_annotation is not None:
        value = E.cast(dt.as_dtype(type_annotation), value)
    if var is None:
        var = E.Var(b.unique("v"), value.dtype)
    elif not isinstance(var, E.Var):
        raise DSLTypeError(f"T.bind: var= must be a variable (T.var(dtype)), got {var!r}")
    elif var.name == "":
        var = E.Var(b.unique("v"), var.dtype)
    value = E.cast(var.dtype, value)
    b.emit(S.LetStmt(var, value))
    b.lets[var] = value
    return var


def Let(expr, where):  # noqa: N802 - TVM's name
    """`T.Let(expr, where={v: value})`: `expr` with `v` standing for `value`."""
    from ...tvm.tirx_nodes import Let as _Let

    if not isinstance(where, dict) or len(where) != 1:
        raise DSLTypeError("T.Let(expr, where): `where` is a dict of exactly one {var: value}")
    (v, value), = where.items()
    return _Let(v, value, expr)


class meta_var:  # noqa: N801 - TVM's name
    """`x = T.meta_var(value)`: `x` names `value` at parse time, with no variable in the kernel
    (a Python value, or an expression inlined wherever `x` is used)."""

    tl_meta_var = True

    def __init__(self, value):
        self.value = value

    def __iter__(self):
        return (meta_var(v) for v in self.value)


def likely(cond, span=None):
    """`cond`, marked as usually true (a hint: the value is unchanged)."""
    return cond


# ------------------------------------------------------------------ buffers

def match_buffer(param, shape=None, dtype="float32", data=None, strides=None, elem_offset=None, scope="global",
                 align=-1, offset_factor=0, buffer_type="default", axis_separators=None):
    """`A = T.match_buffer(a, (M, N), "float16")`: the buffer of the `a: T.handle` parameter
    (symbolic dims from `m = T.int32()` or T.dynamic bind at call time). Of a buffer: a view of
    it with another shape (T.view)."""
    b = B.current("T.match_buffer")
    _check_layout("T.match_buffer", data, elem_offset, axis_separators)
    if isinstance(param, E.Var) and param in b.handle_params:
        if b.handle_params[param] is not None:
            raise DSLSyntaxError(f"T.match_buffer: parameter {param.name!r} is already bound to "
                                 f"{b.handle_params[param].name}")
        if shape is None:
            raise DSLTypeError(f"T.match_buffer({param.name}, ...): the shape is required for a parameter")
        if scope != "global":
            raise DSLTypeError(f"T.match_buffer: a parameter's scope is 'global', got {scope!r}")
        buf = Buffer(param.name, _shape(shape), dtype, "global", strides=tuple(strides) if strides else None)
        buf.auto_named = True
        b.handle_params[param] = buf
        return buf
    if isinstance(param, Buffer):
        from ..views import view

        return view(param, param.shape if shape is None else _shape(shape), dtype if shape is not None else None)
    if isinstance(param, (BufferRegion, E.BufferLoad)):
        raise DSLTypeError("T.match_buffer of a region (a sub-buffer of a block) is not supported; index the "
                           "buffer with the region's offset, or T.copy the region into a tile")
    raise DSLTypeError(f"T.match_buffer: expected a `T.handle` parameter of this kernel, got {param!r}")


def _shape(shape):
    if isinstance(shape, (int, E.Expr)):
        return (shape,)
    if not isinstance(shape, (tuple, list)):
        raise DSLTypeError(f"expected a shape tuple such as (M, N), got {shape!r}")
    return tuple(shape)


def _check_layout(what, data, elem_offset, axis_separators):
    if data is not None and what == "T.match_buffer":
        raise DSLTypeError(f"{what}: data= is not supported (the parameter is the data)")
    if elem_offset is not None and E.const_value(elem_offset) != 0:
        raise DSLTypeError(f"{what}: a non-zero elem_offset is not supported; index with the offset instead")
    if axis_separators:
        raise DSLTypeError(f"{what}: axis_separators (multi-dimensional physical storage) are not supported")


def buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=0,
           offset_factor=0, buffer_type="", axis_separators=None):
    """TVM's buffer declaration: a parameter annotation (as T.Buffer(shape, dtype)), or with `data`
    (inside a kernel) a buffer over existing storage (as T.Tensor(shape, dtype, data))."""
    from ..types import Buffer as _Buffer

    _check_layout("T.buffer", None, elem_offset, axis_separators)
    return _Buffer(_shape(shape), dtype, data, strides)


buffer_decl = buffer  # TVM's older name


def decl_buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=0,
                offset_factor=0, buffer_type="", axis_separators=None):
    """A buffer declared inside the body: without `data` a new allocation in `scope` (as
    T.alloc_buffer), with it a buffer over that storage (as T.Tensor(shape, dtype, data))."""
    _check_layout("T.decl_buffer", None, elem_offset, axis_separators)
    if data is None:
        if strides is not None:
            raise DSLTypeError("T.decl_buffer: strides= of a new allocation are not supported")
        from ..views import alloc_buffer

        return alloc_buffer(_shape(shape), dtype, scope)
    return buffer(shape, dtype, data, strides)


def allocate(shape, dtype="float32", scope="global", annotations=None):
    """TVM's statement-level allocation: T.alloc_buffer(shape, dtype, scope)."""
    from ..views import alloc_buffer

    return alloc_buffer(_shape(shape), dtype, scope, annotations)


def buffer_store(buffer, value, indices, predicate=None):  # noqa: A002 - TVM's name
    """`buffer[indices] = value` as a call."""
    if predicate is not None:
        raise DSLTypeError("T.buffer_store: a predicated (masked vector) store is not supported")
    if not isinstance(buffer, Buffer):
        raise DSLTypeError(f"T.buffer_store: expected a buffer, got {buffer!r}")
    idx = tuple(E.as_expr(i) for i in indices)
    if len(idx) != buffer.ndim:
        raise DSLTypeError(f"T.buffer_store: {buffer.name} has {buffer.ndim} dims, got {len(idx)} indices")
    B.current("T.buffer_store").emit(S.BufferStore(buffer, idx, E.cast(buffer.dtype, E.as_expr(value, buffer.dtype))))
    return EMITTED


# ------------------------------------------------------------------ function attributes

def func_attr(attrs):
    """Attributes of the kernel: "global_symbol" names it; others are kept on the PrimFunc."""
    b = B.current("T.func_attr")
    if not isinstance(attrs, dict):
        raise DSLTypeError(f"T.func_attr: expected a dict, got {type(attrs).__name__}")
    for k, v in attrs.items():
        if k == "global_symbol":
            func_name(v)
        else:
            b.func_attrs[str(k)] = v


def func_name(name):
    """The kernel's name (its symbol in the generated code)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise DSLTypeError(f"T.func_name: expected an identifier, got {name!r}")
    B.current("T.func_name").func_name = name


def func_ret(ret_type):
    """The kernel's return type: only void (kernels write results into their tensors)."""
    if ret_type is not _VOID and ret_type is not void and ret_type not in ("void", None):
        raise DSLTypeError(f"T.func_ret: a kernel returns nothing (T.void()), got {ret_type!r}; write results "
                           "into an output tensor")
    return None  # (a statement: nothing to emit)


def ret(val, span=None):
    """TVM's return of a value from a host function; kernels have none."""
    raise DSLSyntaxError("T.ret: a kernel cannot return a value; write the result into an output tensor")


# ------------------------------------------------------------------ calls

def call_intrin(dtype, func_name, *args, annotations=None, span=None):  # noqa: A002
    """Call TVM intrinsic `func_name` ("tirx.exp", "tir.exp" or "exp"): the math intrinsics,
    call_extern, if_then_else and likely; others are an error naming them."""
    return intrinsic(dtype, func_name, args, "T.call_intrin")


def call_pure_extern(dtype, func_name, *args, span=None):  # noqa: A002
    """Call device function `func_name(*args)` (no side effects): as T.call_extern."""
    from ..extern import call_extern

    return call_extern(dtype, func_name, *args)


def address_of(obj, span=None):
    """The address of a buffer element (`T.address_of(A[i, j])`) or of a buffer's first element."""
    if isinstance(obj, Buffer):
        obj = E.BufferLoad(obj, tuple(E.as_expr(0) for _ in obj.shape) or (E.as_expr(0),), obj.dtype)
    if not isinstance(obj, E.BufferLoad):
        raise DSLTypeError(f"T.address_of: expected a buffer or a buffer element, got {obj!r}")
    if obj.buffer.scope == "fragment":
        raise DSLTypeError(f"T.address_of: {obj.buffer.name} is a fragment, whose elements are spread over threads")
    return E.Call("address_of", (obj,), dt.as_dtype("handle"))


def type_annotation(dtype):
    """A value of `dtype` that only says its type (an argument of intrinsics that take one)."""
    return E.Call("type_annotation", (), dt.as_dtype(dtype))


def tvm_storage_sync(storage_scope):
    """A barrier over the threads sharing `storage_scope`: "shared" (the block, as T.sync_threads)
    or "warp" (as T.sync_warp). The grid ("global") needs a cooperative launch, not performed here."""
    B.in_kernel("T.tvm_storage_sync")
    scope = getattr(storage_scope, "value", storage_scope)
    if scope in ("shared", "shared.dyn"):
        return E.Call("tl_sync_threads", (), dt.int32)
    if scope == "warp":
        return E.Call("tl_sync_warp", (E.const(0xFFFFFFFF, dt.uint32),), dt.int32)
    if scope == "global":
        return E.Call("tl_sync_grid", (), dt.int32)
    raise DSLTypeError(f"T.tvm_storage_sync: scope {scope!r} is not supported; use 'shared' or 'warp'")


def inline(func):
    """A method whose body is inlined where it is called in a kernel (a @T.macro with `self`)."""
    return InlineMethod(func)


class InlineMethod:
    def __init__(self, func):
        from ..macro import Macro

        self.macro = Macro(func)
        self.__name__ = getattr(func, "__name__", "inline")
        self.__doc__ = getattr(func, "__doc__", None)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return lambda *args, **kwargs: self.macro(obj, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.macro(*args, **kwargs)
