"""A hand-written persistent loop (`T.Persistent`) back into a grid of tiles, for the warp-specialized path.

Why: `for bx, by in T.Persistent(domain, sm_num, block_id)` inside `T.Kernel(sm_num)` walks the tiles in
waves, one tile a block per wave. The warp-specialized Hopper path (TMA producer, wgmma consumers)
takes a grid of tiles and makes it persistent itself (`persistent.persistent_tiles`: ring counters
running across a block's tiles, stream-K on the last wave, the next tile's loads under this one's
epilogue); it does not see a k-loop nested in the user's wave loop, and the kernel fell to the
cp.async path. Each tile's work is the same whichever block runs it, so the kernel is rewritten as
one block per tile, and the warp-specialized path makes its own persistent schedule.

Expects: a KernelLaunch before lowering whose grid is 1-d, whose body is allocations without
initial values and then one loop the parser made from T.Persistent (parser.persistent_for: annotation
"persistent" = (wave_size, index, domain, guarded); its body is the let `tile = w * wave_size + index`,
one let per coordinate, then the body, inside the guard `if` when guarded), with wave_size equal to the
grid's extent, index the block variable, at most 3 domain dims, and the body reading neither the block
variable nor the tile index.
Gives: (kernel, why): the same kernel with the domain as its grid, the coordinates' variables as its
block variables and the loop replaced by its body (no guard: every block's tile lies in the domain),
why None; the tiles are visited in the warp-specialized path's own order (T.Persistent's is row-major
over the domain). Any other kernel with a T.Persistent loop comes back unchanged with the reason (the
loop then runs as written); one without comes back unchanged, why None. Off switch: pass config
`tl.disable_persistent_grid`.
"""
from __future__ import annotations

from dataclasses import replace

from ...arith.simplify import const_int
from ...ir import expr as E
from ...ir import stmt as S
from ...ir.visitor import collect


def _parts(body: S.Stmt) -> list:
    return list(body.stmts) if isinstance(body, S.SeqStmt) else [body]


def persistent_grid(k: S.KernelLaunch) -> tuple:
    """(kernel, why): k with its T.Persistent loop turned into a grid of tiles and why None; or k unchanged
    and why None when it has no T.Persistent loop, else the reason it stays as written."""
    parts = _parts(k.body)
    loop = parts[-1] if parts else None
    if not isinstance(loop, S.For) or loop.annotation("persistent") is None:
        return k, None
    if len(k.block_vars) != 1:
        return k, "the kernel's grid has more than one dim"
    b, extent = k.block_vars[0], const_int(E.as_expr(k.grid[0]))
    if any(not (isinstance(p, S.Allocate) and p.init is None) for p in parts[:-1]):
        return k, "statements other than buffer allocations run before the T.Persistent loop"
    wave_size, index, domain, guarded = loop.annotation("persistent")
    n = len(domain)
    if extent is None or const_int(E.as_expr(wave_size)) != extent or index is not b:
        return k, "its wave size is not the grid's (constant) size or its index is not the block index"
    if n > 3:
        return k, f"its domain has {n} dims (a grid has at most 3)"
    inner = _parts(loop.body)
    if len(inner) != n + 2 or not all(isinstance(p, S.LetStmt) for p in inner[:n + 1]):
        return k, "the loop is not the parser's T.Persistent shape"
    tile, coords = inner[0], inner[1:n + 1]
    if not E.structurally_equal(tile.value, loop.var * wave_size + index):
        return k, "the loop is not the parser's T.Persistent shape"
    rest = inner[-1]
    if guarded:
        if not isinstance(rest, S.IfThenElse) or rest.else_case is not None:
            return k, "the loop is not the parser's T.Persistent shape"
        rest = rest.then_case
    if collect(rest, lambda x: x is b or x is loop.var or x is tile.var):
        return k, "its body reads the block index itself, not only its tile's coordinates"
    body = S.seq(*parts[:-1], rest)
    return replace(k, block_vars=tuple(c.var for c in coords), grid=tuple(domain), body=body), None
