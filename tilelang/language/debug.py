"""`T.print` and `T.device_assert`."""
from __future__ import annotations

from ..errors import DSLTypeError
from ..frontend import builder as B
from ..ir.expr import as_expr
from ..op import tile_ops as O


def print(obj=None, msg: str = "", warp_group_id: int = 0, warp_id: int = 0):  # noqa: A001  (the public name)
    """Print a scalar (from every thread that runs it), a buffer (once per block: on CUDA by
    thread warp_group_id * 128 + warp_id * 32; on CPU the whole tile) or, with obj None, `msg`.

    Example: `T.print(acc, msg="acc after k-loop")`, `T.print(msg="here")`.
    """
    B.in_kernel("T.print")
    if obj is None and not msg:
        raise DSLTypeError("T.print(): give an object to print or a msg")
    lane = int(warp_group_id) * 128 + int(warp_id) * 32
    if lane < 0 or lane >= _threads():
        raise DSLTypeError(f"T.print: warp_group_id={warp_group_id}, warp_id={warp_id} names thread {lane}, but the "
                           f"block has {_threads()} threads")
    if obj is not None and not hasattr(obj, "shape"):
        obj = as_expr(obj)
    B.current().emit(O.Print(obj, str(msg), lane=lane))


def _threads() -> int:
    t = B.in_kernel("T.print").threads
    return t[0] * t[1] * t[2]


def device_assert(cond, msg: str = ""):
    """Abort the kernel with `msg` when `cond` is false."""
    B.in_kernel("T.device_assert")
    B.current().emit(O.DeviceAssert(as_expr(cond), str(msg)))
