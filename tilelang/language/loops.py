"""Loop constructors: `T.Parallel`, `T.Pipelined`, `T.serial`, `T.unroll`, `T.grid`, `T.vectorized`."""
from __future__ import annotations

from dataclasses import dataclass

from ..arith.simplify import const_int
from ..errors import DSLTypeError
from ..ir import expr as E


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


def _given(start, stop, step, what):
    if stop is None:
        if step is not None:
            raise DSLTypeError(f"{what}: a step needs a stop (start, stop, step)")
        return (start,)
    return (start, stop) if step is None else (start, stop, step)


def _annotations(annotations) -> tuple:
    return tuple((str(k), v) for k, v in (annotations or {}).items() if isinstance(v, (bool, int, float, str)))


def serial(start, stop=None, step=None, *, annotations=None) -> ForSpec:
    """A sequential loop: `for k in T.serial(n)` (also `range(n)`, `T.serial(a, b, step)`)."""
    args = _given(start, stop, step, "T.serial")
    start, extent, step = _range_args(args, "T.serial")
    if step != 1:
        return ForSpec("serial", (start,), ((args[1] - args[0]),), (), step)
    return ForSpec("serial", (start,), (extent,))  # annotations: accepted, no effect here


def unroll(start, stop=None, step=None, *, explicit=False, unroll_factor=None, annotations=None) -> ForSpec:
    """A loop the compiler unrolls: `for i in T.unroll(n)`, `T.unroll(0, 16, step=4)`.

    `unroll_factor=k` unrolls by k (CUDA: `#pragma unroll k`) instead of fully; `explicit=True` asks
    for a full unroll and excludes `unroll_factor`, as in the public TileLang.
    Example: `for i in T.unroll(0, K, unroll_factor=4): acc += A[i]`."""
    ann = dict(annotations or {})
    if explicit:
        ann["pragma_unroll_explicit"] = True
    if unroll_factor is not None:
        ann["pragma_unroll_factor"] = unroll_factor
    factor = ann.get("pragma_unroll_factor")
    if ann.get("pragma_unroll_explicit") and factor is not None:
        raise ValueError("T.unroll's explicit and unroll_factor params are mutually exclusive.")
    if factor is not None and (const_int(factor) is None or const_int(factor) <= 0):
        raise DSLTypeError(f"T.unroll: unroll_factor must be a positive integer constant, got {factor!r}")
    keep = (("pragma_unroll_factor", const_int(factor)),) if factor is not None else ()
    start, extent, step = _range_args(_given(start, stop, step, "T.unroll"), "T.unroll")
    return ForSpec("unroll", (start,), (extent,), keep, step)


def vectorized(start, stop=None, *, annotations=None) -> ForSpec:
    start, extent, _ = _range_args(_given(start, stop, None, "T.vectorized"), "T.vectorized")
    return ForSpec("vectorized", (start,), (extent,))  # annotations: accepted, no effect here


def grid(*extents) -> ForSpec:
    """Nested serial loops: `for i, j in T.grid(M, N)`."""
    return ForSpec("serial", tuple(0 for _ in extents), tuple(extents))


def Parallel(*extents, coalesced_width=None, loop_layout=None, prefer_async=None, annotations=None) -> ForSpec:
    """Elementwise loops over a tile, spread over the block's threads: `for i, j in T.Parallel(M, N)`.

    prefer_async (CUDA): the loop's global -> shared element copies may use cp.async, completed
    by the program's own T.ptx_commit_group / T.ptx_wait_group; a hint (the compiler reports it
    when it copies synchronously instead, which changes no result)."""
    if not extents:
        raise DSLTypeError("T.Parallel needs at least one extent")
    ann = (("prefer_async", True),) if prefer_async else ()
    ann += _annotations(annotations)
    return ForSpec("parallel", tuple(0 for _ in extents), tuple(extents), ann)


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, annotations=None, *, sync=None,
              group=None) -> ForSpec:
    """A loop whose copies overlap with compute across `num_stages` buffers.

    Example: `for ko in T.Pipelined(T.ceildiv(K, 32), num_stages=3):`. As in the public TileLang, the
    third positional argument is `num_stages` (there is no step). `order` / `stage` (a hand-written
    schedule of the body's statements) are recorded but the compiler makes its own schedule; with
    `stage` given and `num_stages` 0, the depth is max(stage) + 1, as there.
    """
    if stop is None:
        start, extent = 0, start
    else:
        extent = stop - start if const_int(start) != 0 else stop
    stages = const_int(num_stages)
    if stages is None or stages < 0:
        raise DSLTypeError(f"T.Pipelined: num_stages must be a non-negative constant, got {num_stages!r}")
    if stage is not None and order is not None and len(stage) != len(order):
        raise DSLTypeError(f"T.Pipelined: order and stage must have one entry per scheduled statement, got "
                           f"{len(order)} and {len(stage)}")
    if stages == 0 and stage:
        stages = max(int(x) for x in stage) + 1
    ann = (("num_stages", stages),)
    if order is not None:
        ann += (("order", tuple(order)),)
    if stage is not None:
        ann += (("stage", tuple(stage)),)
    ann += _annotations(annotations)
    return ForSpec("pipelined", (start,), (extent,), ann)


@dataclass(frozen=True)
class PersistentSpec:
    """`for c0, ..., cn in T.Persistent(domain, wave_size, index, group_size)`: the parser makes one serial
    loop `w` over the waves and binds the coordinates of tile `w * wave_size + index` (see `coords`)."""
    domain: tuple
    wave_size: object
    index: object
    group_size: object
    annotations: tuple = ()

    def layout(self):
        """(group, num_groups, virtual tile count, waves) of the grouped domain: the last dim is cut into
        groups of `group` (clamped to [1, its extent]); consecutive tiles walk a group of the last dim,
        then the groups, then the outer dims, slowest first."""
        from . import math as M
        last = self.domain[-1]
        group = M.max(1, M.min(self.group_size, last))
        num_groups = M.ceildiv(last, group)
        virtual = num_groups * group
        for d in self.domain[:-1]:
            virtual = virtual * d
        return group, num_groups, virtual, M.ceildiv(virtual, self.wave_size)

    def linear(self, w):
        """The tile index of wave `w`: w * wave_size + index."""
        return w * self.wave_size + self.index

    def coords(self, linear):
        """The domain coordinates of tile `linear` (see `linear`), and the guard it needs (None when every
        wave's tile lies in the domain: the waves tile the grouped domain exactly and the groups divide
        the last dim)."""
        group, num_groups, virtual, waves = self.layout()
        rem = linear // group
        last = (rem % num_groups) * group + linear % group
        rem = rem // num_groups
        outer = []
        for d in reversed(self.domain[1:-1]):
            outer.append(rem % d)
            rem = rem // d
        coords = ([rem] + outer[::-1] + [last]) if len(self.domain) > 1 else [last]
        total = 1
        for d in self.domain:
            total = total * d
        exact_waves = const_int(waves * self.wave_size) is not None and const_int(waves * self.wave_size) == \
            const_int(virtual)
        exact_groups = const_int(virtual) is not None and const_int(virtual) == const_int(total)
        guards = ([] if exact_waves else [linear < virtual]) + ([] if exact_groups else [last < self.domain[-1]])
        guard = None
        for g in guards:
            guard = g if guard is None else E.logical_and(guard, g)
        return coords, guard


def Persistent(domain, wave_size, index, group_size=8, num_stages=0, *, annotations=None) -> PersistentSpec:
    """A persistent loop over the tiles of `domain` (a list of extents): the block with index `index` of
    `wave_size` blocks takes tile `w * wave_size + index` in wave `w`, binding its coordinates;
    consecutive tiles run along groups of `group_size` in the last dim (for L2 reuse). Example:
    `for bx, by in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], sm_num, block_id):`."""
    domain = tuple(domain) if isinstance(domain, (list, tuple)) else (domain,)
    if not domain:
        raise DSLTypeError("T.Persistent: the domain needs at least one extent")
    if num_stages:
        raise DSLTypeError(f"T.Persistent(num_stages={num_stages}) is not supported: pipeline the k-loop inside "
                           "with T.Pipelined(..., num_stages=...) instead")
    group = 8 if group_size is None else group_size
    ann = _annotations(annotations)
    return PersistentSpec(domain, wave_size, index, group, ann)


Serial = serial
Unroll = unroll
