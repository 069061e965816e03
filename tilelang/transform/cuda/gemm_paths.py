"""Which tensor-core path a T.gemm can take, and which operand regions those paths accept.

Takes: a Gemm op (its regions, dtypes, transposes, policy) and the thread count of its scope.
Gives: wgmma_ok / wgmma_rs_ok (the warpgroup split for sm_90a's SS / RS forms, or the reason it
cannot use them), wgmma_policy_grid (the split the gemm's GemmWarpPolicy asks for), grid_cost /
accumulator_folds (whether that split pays over the squarest one), mma_ok (the warp grid for mma.sync),
nibble_gemm (int4 / uint4 operands as byte tiles: mma.sync m16n8k64 only), and the region predicates layout
inference, the gemm lowering and warp specialization share (a whole tile, a panel slice, a box
of an accumulator that a store can copy out), mma_ws_ok (an mma.sync gemm in the consumers of
a warp-specialized TMA pipeline), and mma_rs_ok / mma_rs16_ok (an mma.sync gemm reading A from registers).

    T.gemm(A_s, B_s, C, transpose_B=True) at 256 threads, fp16 128 x 128 x 64
        wgmma_ok -> ((2, 1), None)     mma_ok -> (2, 4)
    ... policy=T.GemmWarpPolicy.FullCol at 512 threads, 256 x 128:
        wgmma_ok -> ((4, 1), None)     wgmma_policy_grid(op, 4, (4, 1)) -> ((1, 4), None)
        grid_cost(256, 128, (1, 4), ()) -> (0, 288) > grid_cost(256, 128, (4, 1), ()) -> (0, 192): (4, 1) stays
"""
from __future__ import annotations

from ...arith.simplify import aligned, const_int
from ...errors import LoweringError
from ...ir.buffer import Buffer
from ...ir.visitor import collect
from ...layout.fragment import choose_warpgroups, choose_warps, wgmma_widths
from ...op import tile_ops as O
from .lower_async import tile_pointer


def whole(region, buf: Buffer) -> bool:
    if region.buffer is not buf:
        return False
    for (start, ext), dim in zip(region.ranges, buf.shape):
        if const_int(start) != 0 or const_int(ext) != const_int(dim):
            return False
    return True


def nibble_gemm(op: O.Gemm) -> str | None:
    """"int4" / "uint4" when the gemm's operands are the byte tiles of 4-bit integer tiles
    (nibble_tiles.py: two values a byte, K counted in bytes), else None."""
    return op.packed or None


def wgmma_ok(op: O.Gemm, threads: int) -> tuple[tuple | None, str | None]:
    """((wg_m, wg_n), None) when this gemm can run on wgmma (sm_90a), else (None, reason)."""
    a, b = op.A.buffer, op.B.buffer
    if nibble_gemm(op) is not None:
        return None, (f"wgmma has no 4-bit integer form, and sm_90 has no 4-bit mma.sync either ({nibble_gemm(op)} "
                      "m16n8k64 compiles to int8 IMMA steps on unpacked operands); int8 tiles would take wgmma")
    if eight_bit_wgmma(op):
        kind = "int8" if a.dtype.name == "int8" else "fp8"
        if not op.transpose_B or op.transpose_A:
            return None, f"{kind} operands must be K-major: A as (M, K) and B as (N, K) with transpose_B=True"
        if not (whole(op.A, a) and whole(op.B, b) and whole(op.C, op.C.buffer)):
            return None, "an operand is a slice of a tile"
    elif a.dtype.name == "tfloat32" and a.dtype == b.dtype:
        return None, "tf32 wgmma is not implemented (tf32 takes mma.sync m16n8k8)"
    elif not sixteen_bit_wgmma(op):
        return None, "it cannot use tensor cores at all"
    if threads % 128:
        return None, f"{threads} threads is not a whole number of warpgroups (128)"
    if a.scope == "fragment" or b.scope == "fragment":
        return None, "an operand is a register fragment"
    m, n, k = op.mnk
    if op.transpose_A:  # M-major A: a K x M tile in 64-column panels, read with tnspA
        if not whole(op.A, a) or (const_int(a.shape[-1]) or 0) % 64:
            return None, "a transposed (M-major) A must be a whole tile whose M is a multiple of 64"
    elif not kmajor_rows_ok(a):
        return None, (f"A's tile rows are {a.shape[-1]} elements; wgmma needs rows of 32, 64 or 128 bytes, "
                      "or 16-bit rows of a multiple of 128 bytes")
    if op.transpose_B and not kmajor_rows_ok(b):
        return None, f"B's tile rows are {b.shape[-1]} elements; wgmma needs 32, 64, 128 or (16-bit) k * 128 bytes"
    grid = choose_warpgroups(m, n, threads // 128, int8=a.dtype.name == "int8")
    if grid is None:
        return None, f"no split of a {m}x{n} tile over {threads // 128} warpgroups gives m64 rows and a wgmma width"
    if not op.transpose_B and (n // grid[1]) % 64:
        return None, "a K x N B needs a multiple of 64 columns per warpgroup"
    for r, panels in ((op.A, kmajor_panels(a) or op.transpose_A), (op.B, kmajor_panels(b) or not op.transpose_B)):
        try:
            tile_pointer(r, panels, "")
        except LoweringError as e:
            return None, str(e).split(": ", 1)[-1].split("\n")[0]
    return grid, None


def wgmma_policy_grid(op: O.Gemm, groups: int, fallback: tuple) -> tuple[tuple, str | None]:
    """The warpgroup grid of an SS wgmma gemm under its policy: FullRow puts all `groups` warpgroups
    along M ((groups, 1): each covers whole rows), FullCol along N ((1, groups)); Square (or a grid
    the policy already has) keeps `fallback`, wgmma_ok's squarest split. Where the shape does not
    allow the policy's grid, (fallback, why) -- the reason a warning gives.

        256 x 128 over 4 warpgroups: FullCol -> (1, 4), 32 columns each; FullRow -> (4, 1)
        128 x 128 over 4: FullRow -> fallback, "M = 128 is not 64 rows for each of 4 warpgroups"
    """
    if op.policy not in ("FullRow", "FullCol") or groups == 1:
        return fallback, None
    m, n, _ = op.mnk
    if op.policy == "FullRow":
        if m % (groups * 64):
            return fallback, f"M = {m} is not a multiple of 64 rows for each of {groups} warpgroups"
        want, width = (groups, 1), n
    else:
        if n % groups:
            return fallback, f"N = {n} does not split into {groups} equal column blocks"
        want, width = (1, groups), n // groups
    int8 = op.A.buffer.dtype.name == "int8"
    if width not in wgmma_widths(int8):
        return fallback, (f"{width} columns a warpgroup is not a wgmma width (a multiple of 8 up to 256"
                          + (", of 16 above 32 for int8)" if int8 else ")"))
    if not op.transpose_B and width % 64:
        return fallback, f"a K x N B needs a multiple of 64 columns a warpgroup, not {width}"
    return want, None


def grid_cost(m: int, n: int, grid: tuple, folds: tuple = ()) -> tuple[int, int]:
    """What a (wg_m, wg_n) warpgroup grid over an m x n SS-wgmma accumulator costs, compared as a tuple:
    (the accumulator's reductions whose lines cross warpgroups, rows + columns of one warpgroup's tile).

    A crossing reduction meets in shared memory behind a barrier each time it runs. Rows + columns
    measure the operand bytes each warpgroup's wgmma reads from shared memory per k-step (A's rows,
    B's columns; the MACs are the same for every grid): least for the squarest tile. FullCol's
    (1, 4) over 256 x 128 reads 256 + 32 rows a k-step where (4, 1) reads 64 + 128, with 4 times the
    wgmma instructions (m64n32); at fp8 an m64n32k32 reads 3 KB of shared memory for 16 cycles of
    tensor work, above the 128 bytes a cycle shared memory gives, so the gemm waits on shared memory.
    folds: ("n", seg) a reduction along N in lines of seg columns (a row reduction: seg = n; the
    (rows, Q, H) segment reduction: seg = H), ("m", m) one along M.

        256 x 128, folds (("n", 64),): (4, 1) -> (0, 192)   (1, 4) -> (1, 288)
    """
    rows, cols = m // grid[0], n // grid[1]
    cross = sum(1 for axis, seg in folds if (cols if axis == "n" else rows) % seg)
    return cross, rows + cols


def accumulator_folds(body, views: dict) -> dict:
    """fragment uid -> the ("n" | "m", line length) folds of grid_cost that T.reduce ops make of it:
    a 2-d tile reduced over dim 1 (rows) or 0 (columns), or a (rows, Q, H) view of a (rows, Q * H)
    tile reduced over its last dim (segments of H columns). views: view uid -> (view, source)."""
    out: dict = {}
    for op in collect(body, lambda x: isinstance(x, O.Reduce)):
        src, shape = op.src, tuple(const_int(d) for d in op.src.shape)
        if None in shape:
            continue
        if src.uid in views:
            src = views[src.uid][1]
            base = tuple(const_int(d) for d in src.shape)
            if len(shape) != 3 or op.dim != 2 or len(base) != 2 or base != (shape[0], shape[1] * shape[2]):
                continue
            fold = ("n", shape[2])
        elif len(shape) == 2:
            fold = ("n", shape[1]) if op.dim == 1 else ("m", shape[0])
        else:
            continue
        out.setdefault(src.uid, []).append(fold)
    return {uid: tuple(f) for uid, f in out.items()}


def sixteen_bit_wgmma(op: O.Gemm) -> bool:
    """f16 / bf16 operands into a float32 C (or f16 into f16), m, n, k known, k a multiple of 16."""
    a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
    if a.dtype != b.dtype or a.dtype.name not in ("float16", "bfloat16"):
        return False
    if c.dtype.name != "float32" and not (a.dtype.name == "float16" and c.dtype.name == "float16"):
        return False
    m, n, k = op.mnk
    return all(isinstance(x, int) for x in (m, n, k)) and k % 16 == 0


def eight_bit_wgmma(op: O.Gemm) -> bool:
    """The k32 wgmma forms: fp8 (e4m3 / e5m2) into float32, int8 into int32."""
    if nibble_gemm(op) is not None:
        return False
    a, b, c = op.A.buffer.dtype.name, op.B.buffer.dtype.name, op.C.buffer.dtype.name
    return a == b and ((a in ("float8_e4m3fn", "float8_e5m2") and c == "float32") or (a == "int8" and c == "int32"))


def kmajor_rows_ok(tile: Buffer) -> bool:
    """A K-major wgmma operand tile: rows of one swizzle span (32, 64 or 128 bytes), or 16-bit rows
    of several 128-byte spans, kept as 64-column panels (each k16 slice lies in one panel)."""
    row = const_int(tile.shape[-1]) * tile.dtype.bytes
    return row in (32, 64, 128) or (tile.dtype.bytes == 2 and row % 128 == 0)


def kmajor_panels(tile: Buffer) -> bool:
    """The K-major tile is kept as 64-column panels (its rows span several 128-byte swizzles)."""
    return const_int(tile.shape[-1]) * tile.dtype.bytes > 128


def wgmma_rs_ok(op: O.Gemm, threads: int) -> tuple[int | None, str | None]:
    """(wg_m, None) when this gemm can take A from registers (wgmma RS, warpgroups split M only)."""
    a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
    if a.scope != "fragment" or b.scope not in ("shared", "shared.dyn") or op.transpose_A:
        return None, "A is not a register tile"
    if a.dtype != b.dtype or a.dtype.name not in ("float16", "bfloat16") or c.dtype.name != "float32":
        return None, f"RS wgmma here takes f16/bf16 inputs and f32 accumulators ({a.dtype}, {c.dtype})"
    if not (whole(op.A, a) and whole(op.B, b) and whole(op.C, c)) or threads % 128:
        return None, "operands must be whole tiles and threads whole warpgroups"
    m, n, k = op.mnk
    groups = threads // 128
    if m % (groups * 64) or n not in wgmma_widths() or k % 16:
        return None, f"a {m}x{n}x{k} tile does not split over {groups} warpgroups as m64 rows x a wgmma width"
    if op.transpose_B and not kmajor_rows_ok(b):
        return None, "B's tile rows must be 32, 64 or 128 bytes, or 16-bit rows of a multiple of 128 bytes"
    if not op.transpose_B and n % 64:
        return None, "a K x N B needs a multiple of 64 columns"
    return groups, None


def mma_ok(op: O.Gemm, threads: int, half_acc: bool = False):
    """(warps_m, warps_n) when this gemm can run on mma.sync with C in registers, else None.
    half_acc: also accept fp16 x fp16 into a float16 C (the wgmma path has that form)."""
    a, b, c = op.A.buffer, op.B.buffer, op.C.buffer
    nibbles = nibble_gemm(op) is not None  # m16n8k64 .s4 / .u4 on the bytes: an int8 gemm's addressing
    if a.dtype != b.dtype or (a.dtype.name not in ("float16", "bfloat16", "tfloat32", "int8") and not nibbles):
        return None
    tf32 = a.dtype.name == "tfloat32"  # m16n8k8 on the fp32 bits (the mma reads their tf32 part)
    if a.dtype.name == "int8" or nibbles:  # m16n8k32.s32.s8.s8: both operands K-major (ldmatrix moves 16-bit pairs)
        if c.dtype.name != "int32" or op.transpose_A or not op.transpose_B or op.mnk[2] % 32:
            return None
    elif c.dtype.name != "float32" and not (half_acc and a.dtype.name == "float16" and c.dtype.name == "float16"):
        return None
    if a.scope not in ("shared.dyn", "shared", "fragment") or b.scope not in ("shared.dyn", "shared", "fragment"):
        return None
    if not (mma_operand_ok(op.A) and mma_operand_ok(op.B) and whole(op.C, c)) or a.ndim != 2 or b.ndim != 2:
        return None
    m, n, k = op.mnk
    if any(not isinstance(x, int) for x in (m, n, k)) or k % (8 if tf32 else 16) or threads % 32:
        return None
    return choose_warps(m, n, threads // 32, op.policy)


def mma_ws_ok(op: O.Gemm, threads: int, staged: set) -> str | None:
    """None when this gemm, which wgmma does not take, can run on mma.sync in the consumers of a
    warp-specialized TMA pipeline, else why not. Only tf32 (no tf32 wgmma here): its staged
    operands (tile uids in `staged`) must be K-major whole tiles -- A as M x K, B as N x K
    (transpose_B) -- which the mma template reads with ldmatrix in the layout TMA writes (one
    swizzled box, or 128-byte panels for rows longer than 128 bytes)."""
    a, b = op.A.buffer, op.B.buffer
    if a.dtype.name != "tfloat32" or b.dtype != a.dtype or op.C.buffer.dtype.name != "float32":
        return (f"mma.sync here takes tf32 operands into a float32 accumulator ({nibble_gemm(op) or a.dtype}, "
                f"{op.C.buffer.dtype})")
    if mma_ok(op, threads) is None:
        return "it cannot use mma.sync with its accumulator in registers"
    for r, kmajor in ((op.A, not op.transpose_A), (op.B, op.transpose_B)):
        if r.buffer.uid in staged and not (kmajor and whole(r, r.buffer) and r.buffer.ndim == 2):
            return f"the staged operand {r.buffer.name} is not a whole K-major tile"
    return None


def panel_slice(r) -> bool:
    """r takes whole rows and a range of 64-column panels of a 16-bit 2-d shared tile whose rows are
    longer than 128 bytes (sparse MLA's `Q_shared[:, :D]`): read as 64-column panels, it is a tile of its own."""
    x = r.buffer
    if x.ndim != 2 or x.dtype.bytes != 2 or x.scope not in ("shared", "shared.dyn") or not kmajor_panels(x):
        return False
    (r0, rn), (c0, cn) = r.ranges
    c0, cn = const_int(c0), const_int(cn)
    return const_int(r0) == 0 and const_int(rn) == const_int(x.shape[0]) and c0 is not None and cn is not None \
        and c0 % 64 == 0 and cn % 64 == 0


def mma_operand_ok(r) -> bool:
    """An mma.sync operand region: a whole tile, or a panel slice of one (`panel_slice`)."""
    return whole(r, r.buffer) or panel_slice(r)


def accumulator_box_ok(r) -> bool:
    """A box of a 2-d accumulator that the paired store can copy out: whole column pairs."""
    w = const_int(r.extents[-1]) if r.buffer.ndim == 2 else None
    return w is not None and w % 2 == 0 and aligned(r.starts[-1], 2)


def mma_rs_ok(op: O.Gemm) -> str | None:
    """None when this mma.sync gemm can read A from registers (tl::gemm_rs: a whole tf32 M x K
    fragment, B in shared memory), else why not. 16-bit A tiles: mma_rs16_ok."""
    a, b = op.A.buffer, op.B.buffer
    if a.scope != "fragment" or b.scope not in ("shared", "shared.dyn") or op.transpose_A:
        return "A is not a K-contiguous register tile"
    if a.dtype.name != "tfloat32" or b.dtype.name != "tfloat32" or op.C.buffer.dtype.name != "float32":
        return f"register A here takes tf32 inputs and a float32 accumulator ({a.dtype}, {op.C.buffer.dtype})"
    if not whole(op.A, a) or not whole(op.B, b) or a.ndim != 2:
        return "A and B must be whole 2-d tiles"
    return None


def mma_rs16_ok(op: O.Gemm, warps: tuple) -> str | None:
    """None when this 16-bit mma.sync gemm, on the (warps_m, warps_n) grid mma_ok chose, can read A
    from registers (tl::gemm_rs) in the m16n8 accumulator layout of an M x K tile over (warps_m, 1)
    warps: the k16 slice of a 16-row block is two accumulator atoms, whose 8 slots are the mma's
    a0..a7 in order. So a tile computed as an accumulator on the same rows (attention's P, a cast
    copy of S) is already in place. With warps_n > 1 every warp of a row block needs the whole
    rows: those A tiles stay on gemm_ss."""
    a, b = op.A.buffer, op.B.buffer
    if a.scope != "fragment" or b.scope not in ("shared", "shared.dyn") or op.transpose_A:
        return "A is not a K-contiguous register tile"
    if a.dtype.name not in ("float16", "bfloat16") or b.dtype != a.dtype:
        return f"register A here takes f16 / bf16 inputs ({a.dtype}, {b.dtype})"
    if not whole(op.A, a) or not whole(op.B, b) or a.ndim != 2:
        return "A and B must be whole 2-d tiles"
    if warps[1] != 1:
        return f"the gemm's warps split N ({warps[0]} x {warps[1]}): each warp needs whole rows of A"
    return None
