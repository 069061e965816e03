"""`T.Kernel`: the launch grid and threads per block; thread-index access."""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..arith.simplify import const_int
from ..errors import DSLTypeError, DSLValueError, NonConstantShapeError
from ..frontend import builder as B
from ..ir import expr as E
from ..ir.expr import Var, as_expr


@dataclass(frozen=True)
class KernelSpec:
    grid: tuple
    threads: tuple
    grid_given: bool = True  # False for `T.Kernel(threads=...)`: one block, and `as` binds no block index
    cluster: tuple = (1, 1, 1)  # blocks per thread-block cluster along x, y, z (T.ClusterKernel)
    prelude: str | None = None  # device source placed at the top of the generated file (T.import_source)


def Kernel(*blocks, threads=None, is_cpu=False, prelude=None, cluster_dims=None) -> KernelSpec:
    """Launch a grid of `blocks` (1-3 extents), each block with `threads` threads (128 when omitted).
    With no extents (`with T.Kernel(threads=128):`) it launches one block, as the public TileLang
    does; `as x` then binds an empty list (there is no block index to name).
    `cluster_dims` (an int n for (n, 1, 1), or 1-3 extents) launches thread-block clusters, as
    `T.ClusterKernel` does (language/cluster.py): CUDA sm_90+, each grid extent a multiple of it.

    `prelude`: device source (functions the body calls with T.call_extern) placed once at the top
    of the generated file, as T.import_source(prelude) at the start of the body.

    Example::

        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            ...
    """
    if len(blocks) == 1 and isinstance(blocks[0], (tuple, list)):
        blocks = tuple(blocks[0])
    if prelude is not None and not isinstance(prelude, str):
        raise DSLTypeError(f"T.Kernel prelude= takes the source text (a str), got {type(prelude).__name__}")
    grid_given = len(blocks) > 0
    if not grid_given:
        blocks = (1,)
    if len(blocks) > 3:
        raise DSLTypeError(f"T.Kernel takes at most 3 grid extents, got {len(blocks)}")
    grid = tuple(const_int(b) if const_int(b) is not None else as_expr(b) for b in blocks)
    cluster = _cluster_dims(cluster_dims, grid)
    if threads is None:
        threads = 128
    if not isinstance(threads, (list, tuple)):  # one extent (an int, or an expression refused below)
        threads = (threads,)
    threads = tuple(threads)
    if not 1 <= len(threads) <= 3:
        raise DSLTypeError(f"T.Kernel threads= takes an int or 1-3 extents, got {threads!r}")
    th = []
    for t in threads:
        c = const_int(t)
        if c is None:
            raise NonConstantShapeError(f"T.Kernel threads= must be positive integer constants, got {t!r}")
        if c <= 0:
            raise DSLValueError(f"T.Kernel: threads must be positive integer constants (a block of {c} threads "
                                f"launches nothing), got threads={threads!r}")
        th.append(c)
    th += [1] * (3 - len(th))
    return KernelSpec(grid, tuple(th), grid_given, cluster, prelude or None)


def _cluster_dims(cluster_dims, grid) -> tuple:
    """(cx, cy, cz) of `cluster_dims`, checked: positive constants of at most MAX_CLUSTER_BLOCKS
    blocks that divide the grid (a symbolic extent is checked at each call)."""
    from ..frontend.host_checks import host_launch_check
    from .cluster import MAX_CLUSTER_BLOCKS

    if cluster_dims is None:
        return (1, 1, 1)
    dims = tuple(cluster_dims) if isinstance(cluster_dims, (tuple, list)) else (cluster_dims,)
    vals = [const_int(d) if isinstance(d, (int, E.Expr)) and not isinstance(d, bool) else None for d in dims]
    if not 1 <= len(dims) <= 3 or any(v is None or v <= 0 for v in vals):
        raise DSLValueError(f"cluster_dims: expected an int or 1-3 positive integer constants, got {cluster_dims!r}")
    vals += [1] * (3 - len(vals))
    if vals[0] * vals[1] * vals[2] > MAX_CLUSTER_BLOCKS:
        raise DSLValueError(f"cluster_dims={cluster_dims!r}: a cluster of {vals[0] * vals[1] * vals[2]} blocks; "
                            f"at most {MAX_CLUSTER_BLOCKS} blocks per cluster are supported (the portable size)")
    for axis, (c, g) in enumerate(zip(vals, list(grid) + [1] * (3 - len(grid)))):
        if c == 1:
            continue
        name = "xyz"[axis]
        msg = (f"cluster_dims={tuple(vals)!r}: the grid's {name} extent must be a multiple of the cluster's "
               f"{name} extent {c} (a cluster launch forms whole clusters only)")
        n = const_int(g)
        if n is not None and n % c:
            raise DSLValueError(f"{msg}; got {n}")
        if n is None:
            host_launch_check(E.compare("==", E.binop("%", g, c), 0), msg)
    return tuple(vals)


def get_thread_binding(dim: int = 0) -> Var:
    """The thread index along `dim` inside the block (threadIdx.x for dim 0)."""
    k = B.in_kernel("T.get_thread_binding")
    for v in k.thread_vars:
        if v.name == f"tx{dim}" or v.name == ("tx", "ty", "tz")[dim]:
            return v
    v = Var(("tx", "ty", "tz")[dim], dt.int32)
    k.thread_vars.append(v)
    return v


def get_thread_bindings():
    return [get_thread_binding(i) for i in range(3)]


def get_block_binding(dim: int = 0) -> Var:
    k = B.in_kernel("T.get_block_binding")
    return k.block_vars[dim]


def get_block_bindings():
    k = B.in_kernel("T.get_block_bindings")
    return list(k.block_vars)


def get_thread_extent(dim: int = 0) -> int:
    """The number of threads along `dim` (0: x, 1: y, 2: z) of the enclosing T.Kernel, a Python int.

    Example: `for i in T.serial(N // T.get_thread_extent()): ...`.
    """
    k = B.in_kernel("T.get_thread_extent")
    if dim not in (0, 1, 2):
        raise DSLTypeError(f"T.get_thread_extent(dim): dim must be 0, 1 or 2, got {dim!r}")
    return int(k.threads[dim])


def get_thread_extents() -> list:
    """[x, y, z] threads per block of the enclosing T.Kernel (axes not given are 1)."""
    return [get_thread_extent(d) for d in range(3)]


def get_block_extent(dim: int = 0):
    """The number of blocks along `dim` of the enclosing T.Kernel's grid (1 for an axis not
    launched): a Python int, or the expression of a symbolic grid extent."""
    k = B.in_kernel("T.get_block_extent")
    if dim not in (0, 1, 2):
        raise DSLTypeError(f"T.get_block_extent(dim): dim must be 0, 1 or 2, got {dim!r}")
    if dim >= len(k.grid):
        return 1
    c = const_int(k.grid[dim])
    return k.grid[dim] if c is None else c


def get_block_extents() -> list:
    """[x, y, z] blocks of the enclosing T.Kernel's grid (axes not launched are 1)."""
    return [get_block_extent(d) for d in range(3)]
