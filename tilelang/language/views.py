"""Buffers over memory that already exists: `T.make_tensor` (a pointer loaded at run time,
e.g. from a `T.Tensor([n], T.ptr)` table), `T.reshape` / `T.view` (another shape or dtype of
a buffer's storage), and the scoped annotations `T.SharedBuffer` / `T.FragmentBuffer` /
`T.LocalBuffer`, plus TVM's `T.alloc_buffer`.

A view of a fragment (`T.alloc_fragment`) aliases its registers: on CUDA layout inference
derives the view's layout from the source's (layout/fragment.py ReshapedFragment), or keeps both
in shared memory (with a PerformanceWarning) where it cannot.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arith.simplify import const_int, simplify
from ..errors import DSLTypeError, ShapeMismatchError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir.buffer import Buffer
from ..op.thread_ops import DeclBuffer
from .types import TensorSpec, TensorType


class PointerArg:
    """What `T.ptr()` gives outside a kernel body: the value of a `T.ptr` parameter when a kernel
    is only compiled (`f.compile(A=T.ptr(), ...)`, `f.par_compile([{"A": T.ptr(), ...}])`)."""

    def __repr__(self):
        return "T.ptr()"


def ptr(dtype=None, storage_scope="global", *, is_size_var=False):
    """A pointer, as a parameter annotation or an address table's element type.

    - `def main(a_ptr: T.ptr, ...)`: a parameter holding a device address (an int64 in the
      kernel); pass a torch.Tensor (its data_ptr() is taken) or an int. View it as a tensor with
      `A = T.make_tensor(a_ptr, (M, K), T.float16)`, before or inside `with T.Kernel`.
    - `T.Tensor([n], T.ptr)` declares a table of addresses (stored as int64, one per tensor;
      pass `torch.tensor([t.data_ptr() ...], dtype=torch.int64)`); T.make_tensor reads one.
    - `T.ptr()` called outside a kernel body stands for such an argument when only compiling.

    A pointer variable inside a body (`p = T.ptr()` there) is not supported."""
    if B.active() is not None:
        raise DSLTypeError("T.ptr(): pointer variables inside a kernel body are not supported; take the address as "
                           "a `name: T.ptr` parameter, or declare an address table `T.Tensor([n], T.ptr)` and read "
                           "it with T.make_tensor(table[i], shape, dtype)")
    return PointerArg()


def is_pointer_annotation(ann) -> bool:
    """`T.ptr` (the function itself) written as a parameter's annotation."""
    return getattr(ann, "tl_pointer_marker", False)


ptr.tl_pointer_marker = True  # T.Tensor(shape, T.ptr) stores int64 addresses (types.py)


def make_tensor(ptr, shape, dtype="float32", strides=None):
    """A global tensor of `shape` and `dtype` at the address `ptr` (an int64 value).

    Example::

        A = T.make_tensor(A_ptrs[g], (M, K), T.float16)
        T.copy(A[m0, k0], A_shared)

    strides (elements, one per dim): element (i, j, ...) lies at i * strides[0] + j * strides[1] + ...
    from `ptr` (a padded or transposed view); without them the tensor is row-major.
    """
    b = B.current("T.make_tensor")
    if b.kernel is None and (isinstance(ptr, Buffer) or b.eager is None):
        B.in_kernel("T.make_tensor")  # only a pointer parameter is viewed before the kernels
    if isinstance(ptr, Buffer):
        return _alias(ptr, shape, dtype, "T.make_tensor", strides)
    addr = E.as_expr(ptr)
    if not (addr.dtype.is_int and addr.dtype.bits == 64) and addr.dtype.name != "handle":
        raise DSLTypeError(f"T.make_tensor: the address must be a 64-bit integer or handle, got {addr.dtype} "
                           f"({addr}); pointer tables are T.Tensor([n], T.ptr)")
    shape = _shape(shape, "T.make_tensor")
    if strides is not None:
        strides = _shape(strides, "T.make_tensor strides")
        if len(strides) != len(shape):
            raise DSLTypeError(f"T.make_tensor: {len(strides)} strides for a {len(shape)}-d shape {tuple(shape)}")
        for st in strides:
            if not (isinstance(st, int) and not isinstance(st, bool) or isinstance(st, E.Expr) and st.dtype.is_int()):
                raise DSLTypeError(f"T.make_tensor: strides are integers (elements), got {st!r}")
        strides = tuple(E.as_expr(st) for st in strides)
    buf = Buffer(b.unique("tensor"), shape, dtype, "global", strides=strides)
    buf.auto_named = True
    buf.device_bound = True  # its address is known in the kernel only: no host-encoded TMA tensor map
    if b.kernel is None:  # a view of a `T.ptr` parameter: declared at the top of every kernel
        b.eager.pointer_views.append(DeclBuffer(buf, addr, span=b.span))
    else:
        b.emit(DeclBuffer(buf, addr))
    return buf


def _shape(shape, what):
    if isinstance(shape, int) or isinstance(shape, E.Expr):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise DSLTypeError(f"{what}: expected a shape tuple, got {shape!r}")
    return tuple(shape)


def _bits(shape, dtype):
    n = E.as_expr(dtype.bits)
    for s in shape:
        n = n * s
    return simplify(n)


def _alias(src: Buffer, shape, dtype, what, strides=None):
    B.in_kernel(what)
    if not isinstance(src, Buffer):
        raise DSLTypeError(f"{what}: expected a buffer, got {src!r}")
    dtype = src.dtype if dtype is None else dt.as_dtype(dtype)
    shape = src.shape if shape is None else _shape(shape, what)
    if strides is not None:
        raise DSLTypeError(f"{what}: explicit strides are not supported")
    if getattr(src, "strides", None) is not None and src.scope == "global":
        raise DSLTypeError(f"{what}: {src.name} is a T.StridedTensor; a view of its storage would ignore the "
                           "declared strides (index it directly, or pass a contiguous T.Tensor)")
    a, b = _bits(shape, dtype), _bits(src.shape, src.dtype)
    if const_int(simplify(a - b)) != 0:
        raise ShapeMismatchError(f"{what}: {tuple(shape)} of {dtype} ({a} bits) does not cover the same storage as "
                                 f"{src.name}{tuple(src.shape)} of {src.dtype} ({b} bits)")
    base = getattr(src, "view_base", src)
    buf = Buffer(B.current().unique(src.name + "_view"), shape, dtype, src.scope)
    buf.auto_named = True
    buf.view_base = base  # the storage owner (for codegen and planners)
    B.current().emit(DeclBuffer(buf, base))
    return buf


def reshape(src, shape):
    """The same storage with another shape of equal size: `T.reshape(S_shared, (64, 2, 32))`.

    Of a register fragment it is the same registers indexed another way: element k (row-major)
    of the view is element k of the source, and layout inference gives the view the source's
    thread distribution (no data moves)."""
    return _alias(src, shape, None, "T.reshape")


def view(src, shape=None, dtype=None, strides=None):
    """The same storage with another shape and/or dtype of equal bit count."""
    return _alias(src, shape, dtype, "T.view", strides)


SharedBuffer = TensorType("SharedBuffer")
FragmentBuffer = TensorType("FragmentBuffer")
LocalBuffer = TensorType("LocalBuffer")


def alloc_buffer(shape, dtype="float32", scope="global", annotations=None, *, data=None, strides=None,
                 elem_offset=None, **_):
    """TVM's allocation: scope "global" (the default; outside `with T.Kernel`) is T.alloc_global,
    "shared"/"shared.dyn" T.alloc_shared, "local.fragment" T.alloc_fragment, "local" T.alloc_local,
    "local.var" T.alloc_var."""
    from . import alloc as A

    if data is not None or strides is not None:
        raise DSLTypeError("T.alloc_buffer: data= and strides= are not supported")
    if scope in ("shared", "shared.dyn"):
        return A.alloc_shared(shape, dtype, scope)
    if scope == "local.fragment":
        return A.alloc_fragment(shape, dtype)
    if scope == "local":
        return A.alloc_local(shape, dtype)
    if scope == "local.var":
        return A.alloc_var(dtype)
    if scope == "global":  # outside the kernels: a workspace they share (see T.alloc_global)
        return A.alloc_global(shape, dtype)
    raise DSLTypeError(f"T.alloc_buffer: scope {scope!r} is not supported here; use 'global' (outside "
                       "`with T.Kernel`), 'shared', 'local.fragment', 'local' or 'local.var'")


_ = TensorSpec
