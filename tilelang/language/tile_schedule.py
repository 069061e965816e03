"""Tile schedulers: `T.meta_class` helpers whose state lives in `T.alloc_var` scalars of the kernel.

`T.meta_class` turns a plain Python class into a kernel-time helper: every method that writes a
buffer element (`self._x[0] = ...`) is inlined where it is called, as a `T.inline` method, while the
others stay Python and return expressions (so they can sit in a `while` condition or be called on a
scheduler that holds no state). A constructor argument `name` names the helper's state buffers
`{name}_{attribute}` (leading underscores dropped) in the printed IR and the generated source.

`T.PersistentTileScheduler(num_m_tiles, num_n_tiles, num_workers, swizzle_size, column_major,
cluster_size, stateful, name)` hands the tiles of an `num_m_tiles x num_n_tiles` grid to
`num_workers` persistent blocks: worker `w` takes linear tiles `w, w + num_workers, ...`. A linear
tile index is decoded into `(m, n)` panel by panel: the slow axis (N when `column_major`, else M)
is cut into panels of `swizzle_size` tiles; inside a panel the index runs across the panel's
columns first, then down the fast axis; the last panel may be narrower. `cluster_size > 1` groups
the M tiles by `cluster_size` first, and `m_idx` is then the cluster row.

Example::

    with T.Kernel(num_workers, threads=128) as (worker,):
        sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=num_workers, swizzle_size=4)
        sched.init(worker)
        while sched.valid():
            compute_tile(sched.m_idx, sched.n_idx)
            sched.next_tile()
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from ..ir.buffer import Buffer
from .tir import InlineMethod, inline


def _writes_an_element(func) -> bool:
    """Whether `func`'s body assigns to a subscript (`self._x[0] = ...`, `+=` included)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return True  # source not readable: inline it, which is right for any method that writes
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        if any(isinstance(sub, ast.Subscript) for t in targets for sub in ast.walk(t)):
            return True
    return False


def _wrap_for_names(cls) -> None:
    """`self.<attr> = <Buffer>` names the buffer `{name}_{attr}` when the constructor got a `name`."""
    if cls.__dict__.get("_tl_names_state", False):
        return
    init = cls.__init__
    sig = inspect.signature(init)

    def __init__(self, *args, **kwargs):
        try:
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            prefix = bound.arguments.get("name")
        except TypeError:
            prefix = None
        if getattr(self, "_tl_name_prefix", None) is None:  # the outermost constructor decides
            object.__setattr__(self, "_tl_name_prefix", prefix)
        init(self, *args, **kwargs)

    def __setattr__(self, attr, value):
        object.__setattr__(self, attr, value)
        prefix = getattr(self, "_tl_name_prefix", None)
        if prefix and isinstance(value, Buffer) and attr.lstrip("_"):
            value.name = f"{prefix}_{attr.lstrip('_')}"

    __init__.__doc__ = init.__doc__
    cls.__init__ = __init__
    cls.__setattr__ = __setattr__
    cls._tl_names_state = True


def meta_class(cls):
    """Class decorator for kernel-time helpers with `T.alloc_var` state (tile schedulers).

    Methods whose body writes a buffer element are inlined at each call (as `T.inline`); dunders,
    properties, static/class methods and methods that only build expressions stay plain Python.
    A `name` constructor argument names the state buffers `{name}_{attr}`.
    """
    cls._is_meta_class = True
    _wrap_for_names(cls)
    for attr, value in list(cls.__dict__.items()):
        if attr.startswith("__") or isinstance(value, (InlineMethod, staticmethod, classmethod, property)):
            continue
        if inspect.isfunction(value) and _writes_an_element(value):
            setattr(cls, attr, inline(value))
    return cls


@meta_class
class BaseTileScheduler:
    """State and loop protocol of a tile scheduler: `init(start)`, `valid()`, `next_tile(step)`.

    State: `m_idx` / `n_idx` (the current tile), `linear_idx` (the worker's linear cursor) and
    `current_iter` (tiles advanced past, from 0), each an int32 `T.alloc_var` read through a
    property. Subclasses decode a linear index in `update_current_idx` and set `_total_tiles`.
    """

    def __init__(self, stateful: bool = True, name: str | None = None):
        from .alloc import alloc_var

        self._stateful = stateful
        if stateful:
            self._m_idx = alloc_var("int32")
            self._n_idx = alloc_var("int32")
            self._linear_idx = alloc_var("int32")
            self._current_iter = alloc_var("int32")
        self._total_tiles = 0

    def _state(self, attr):
        if not self._stateful:
            raise AttributeError(f"{type(self).__name__}(stateful=False) holds no {attr.lstrip('_')}; "
                                 "use coord(tile_id), or make it with stateful=True")
        return getattr(self, attr)

    @property
    def m_idx(self):
        """The current tile's row (the cluster row when cluster_size > 1)."""
        return self._state("_m_idx")[0]

    @property
    def n_idx(self):
        """The current tile's column."""
        return self._state("_n_idx")[0]

    @property
    def linear_idx(self):
        """This worker's linear tile cursor."""
        return self._state("_linear_idx")[0]

    @property
    def current_iter(self):
        """How many tiles this worker has advanced past (0 at the first tile)."""
        return self._state("_current_iter")[0]

    def update_current_idx(self, linear_idx):
        raise NotImplementedError(f"{type(self).__name__} must define update_current_idx(linear_idx)")

    def init(self, linear_init):
        self._current_iter[0] = 0
        self._linear_idx[0] = linear_init
        self.update_current_idx(self._linear_idx[0])

    def next_tile(self, step):
        self._current_iter[0] = self._current_iter[0] + 1
        self._linear_idx[0] = self._linear_idx[0] + step
        self.update_current_idx(self._linear_idx[0])

    def valid(self):
        """Whether the cursor is still on a tile of the grid (a `while` condition)."""
        return self._state("_linear_idx")[0] < self._total_tiles


@meta_class
class PersistentTileScheduler(BaseTileScheduler):
    """Grid-strided persistent tile scheduler with panel swizzle and clustering along M.

    num_workers defaults to the device's SM count // cluster_size; swizzle_size=1 is plain
    column-major (M fastest) or, with column_major=False, row-major order. stateful=False makes no
    state: only `coord(tile_id) -> (m, n)` is available.
    """

    def __init__(self, num_m_tiles, num_n_tiles, num_workers=None, swizzle_size: int = 1,
                 column_major: bool = True, cluster_size: int = 1, stateful: bool = True,
                 name: str | None = None):
        from .math import ceildiv

        if not isinstance(swizzle_size, int) or swizzle_size < 1:
            raise ValueError(f"T.PersistentTileScheduler: swizzle_size must be a positive int, got {swizzle_size!r}")
        if not isinstance(cluster_size, int) or cluster_size < 1:
            raise ValueError(f"T.PersistentTileScheduler: cluster_size must be a positive int, got {cluster_size!r}")
        super().__init__(stateful=stateful, name=name)
        if num_workers is None:
            from ..carver.arch import driver

            num_workers = driver.get_num_sms() // cluster_size
        self.num_workers = num_workers
        self.cluster_size = cluster_size
        self.swizzle_size = swizzle_size
        self._column_major = column_major
        m_rows = ceildiv(num_m_tiles, cluster_size)
        self._total_tiles = m_rows * num_n_tiles
        self._fast, self._slow = (m_rows, num_n_tiles) if column_major else (num_n_tiles, m_rows)

    def coord(self, tile_id):
        """(m, n) of linear tile `tile_id` (expressions; reads no state)."""
        from .math import max as tmax
        from .math import min as tmin

        panel_tiles = self._fast * self.swizzle_size
        panel = tile_id // panel_tiles
        first = panel * self.swizzle_size  # first slow-axis tile of the panel
        width = tmax(1, tmin(self.swizzle_size, self._slow - first))  # >= 1 past the grid's end too
        offset = tile_id - panel * panel_tiles
        fast, slow = offset // width, first + offset % width
        return (fast, slow) if self._column_major else (slow, fast)

    def update_current_idx(self, linear_idx):
        m, n = self.coord(linear_idx)
        self._m_idx[0] = m
        self._n_idx[0] = n

    def init(self, worker_id):
        self._current_iter[0] = 0
        self._linear_idx[0] = worker_id
        self.update_current_idx(self._linear_idx[0])

    def next_tile(self):
        self._current_iter[0] = self._current_iter[0] + 1
        self._linear_idx[0] = self._linear_idx[0] + self.num_workers
        self.update_current_idx(self._linear_idx[0])
