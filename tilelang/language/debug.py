"""`T.print` and `T.device_assert`."""
from __future__ import annotations

from ..frontend import builder as B
from ..ir.expr import as_expr
from ..op import tile_ops as O


def print(obj, msg: str = ""):  # noqa: A001  (mirrors the public API name)
    """Print a scalar or a buffer from the kernel (on CPU: the whole tile, once per block)."""
    B.in_kernel("T.print")
    B.current().emit(O.Print(obj if hasattr(obj, "shape") else as_expr(obj), str(msg)))


def device_assert(cond, msg: str = ""):
    """Abort the kernel with `msg` when `cond` is false."""
    B.in_kernel("T.device_assert")
    B.current().emit(O.DeviceAssert(as_expr(cond), str(msg)))
