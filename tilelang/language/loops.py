"""Loop constructors: `T.Parallel`, `T.Pipelined`, `T.serial`, `T.unroll`, `T.grid`, `T.vectorized`."""
from __future__ import annotations

from dataclasses import dataclass

from ..arith.simplify import const_int
from ..errors import DSLTypeError


@dataclass(frozen=True)
class ForSpec:
    kind: str
    starts: tuple
    extents: tuple
    annotations: tuple = ()
    step: int = 1


def _range_args(args, what):
    if len(args) == 1:
        return 0, args[0], 1
    if len(args) == 2:
        return args[0], args[1] - args[0] if const_int(args[0]) != 0 else args[1], 1
    if len(args) == 3:
        step = const_int(args[2])
        if step is None or step == 0:
            raise DSLTypeError(f"{what}: the step must be a non-zero constant, got {args[2]!r}")
        return args[0], args[1] - args[0], step
    raise DSLTypeError(f"{what} takes 1 to 3 arguments (start, stop, step), got {len(args)}")


def serial(*args, annotations=None) -> ForSpec:
    """A sequential loop: `for k in T.serial(n)` (also `range(n)`, `T.serial(a, b, step)`)."""
    start, extent, step = _range_args(args, "T.serial")
    if step != 1:
        return ForSpec("serial", (start,), ((args[1] - args[0]),), (), step)
    return ForSpec("serial", (start,), (extent,))


def unroll(*args, explicit=False, unroll_factor=None) -> ForSpec:
    """A loop the compiler unrolls."""
    start, extent, step = _range_args(args, "T.unroll")
    return ForSpec("unroll", (start,), (extent,), (), step)


def vectorized(*args) -> ForSpec:
    start, extent, _ = _range_args(args, "T.vectorized")
    return ForSpec("vectorized", (start,), (extent,))


def grid(*extents) -> ForSpec:
    """Nested serial loops: `for i, j in T.grid(M, N)`."""
    return ForSpec("serial", tuple(0 for _ in extents), tuple(extents))


def Parallel(*extents, coalesced_width=None, loop_layout=None, prefer_async=False, annotations=None) -> ForSpec:
    """Elementwise loops over a tile, spread over the block's threads: `for i, j in T.Parallel(M, N)`.

    prefer_async (CUDA): the loop's global -> shared element copies may use cp.async, completed
    by the program's own T.ptx_commit_group / T.ptx_wait_group; a hint (the compiler reports it
    when it copies synchronously instead, which changes no result)."""
    if not extents:
        raise DSLTypeError("T.Parallel needs at least one extent")
    ann = (("prefer_async", True),) if prefer_async else ()
    ann += tuple((str(k), v) for k, v in (annotations or {}).items() if isinstance(v, (bool, int, float, str)))
    return ForSpec("parallel", tuple(0 for _ in extents), tuple(extents), ann)


def Pipelined(*args, num_stages=0, order=None, stage=None, sync=None, group=None) -> ForSpec:
    """A loop whose copies overlap with compute across `num_stages` buffers.

    Example: `for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=3):`
    """
    start, extent, _ = _range_args(args, "T.Pipelined")
    ann = (("num_stages", int(num_stages)),)
    if order is not None:
        ann += (("order", tuple(order)),)
    if stage is not None:
        ann += (("stage", tuple(stage)),)
    return ForSpec("pipelined", (start,), (extent,), ann)


def Persistent(domain, wave_size, index, group_size=8):
    raise DSLTypeError("T.Persistent is not supported yet")


Serial = serial
Unroll = unroll
