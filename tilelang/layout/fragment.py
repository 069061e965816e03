"""Fragment layouts: how a block-level register tile is spread over the block's threads.

A fragment layout answers, for thread `tid` and register slot `l` (a compile-time
constant after unrolling), which logical element `(i, j, ...)` that slot holds.
Lowering a `T.Parallel` loop over a register tile iterates `l` per thread.

The user-facing `Fragment` class (fragment_layout.py) is importable from here too, where the
public TileLang defines it (`from tilelang.layout.fragment import Fragment`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import expr as E
from .fragment_layout import Fragment  # noqa: F401


@dataclass(frozen=True)
class FlatFragment:
    """Row-major elements dealt to threads `vec` at a time, thread-fastest (coalesced).

        element e = (l // vec) * threads * vec + tid * vec + l % vec
        threads=4, vec=2, 16 elements:  e:  0 1 | 2 3 | 4 5 | 6 7 | 8 9 ...
                                        t:  0 0 | 1 1 | 2 2 | 3 3 | 0 0 ...
    """

    shape: tuple
    threads: int
    vec: int = 1

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nlocal(self) -> int:
        per = self.threads * self.vec
        return -(-self.numel // per) * self.vec

    @property
    def exact(self) -> bool:
        return self.numel % (self.threads * self.vec) == 0

    def flat(self, tid, l: int):
        return (l // self.vec) * self.threads * self.vec + tid * self.vec + (l % self.vec)

    def group_start(self, g, tid):
        """Flat index of the first element of thread tid's vector group g (slots g*vec ...)."""
        return (g * self.threads + tid) * self.vec

    def coords(self, tid, l: int) -> tuple:
        per = self.threads * self.vec
        if len(self.shape) >= 2 and self.shape[-1] % per == 0:
            # whole passes per row: the row is the slot group's alone (0 <= tid < threads), so
            # `(l // 4) * 512 + tid * 4 + l % 4 >> 9` is written `l // 4`: a constant once unrolled
            k = self.shape[-1] // per
            g = l // self.vec
            out = [(g % k) * per + tid * self.vec + l % self.vec]
            e = g // k
            for s in reversed(self.shape[1:-1]):
                out.append(e % s)
                e = e // s
            out.append(e)
            return tuple(reversed(out))
        e = self.flat(tid, l)
        out = []
        for s in reversed(self.shape[1:]):
            out.append(e % s)
            e = e // s
        out.append(e)
        return tuple(reversed(out))

    def key(self):
        return ("flat", self.shape, self.threads, self.vec)


@dataclass(frozen=True)
class MmaAccFragment:
    """The mma.sync m16n8 accumulator layout tiled over a (warps_m x warps_n) warp grid.

    Within one 16x8 atom (g = lane // 4, t = lane % 4):
        slot 0, 1 -> (row g,     cols 2t, 2t+1)
        slot 2, 3 -> (row g + 8, cols 2t, 2t+1)
    Atom (mi, ni) of warp (wm, wn) covers rows wm*WM + mi*16 and cols wn*WN + ni*8;
    slot l = (mi * NI + ni) * 4 + r.
    """

    shape: tuple  # (M, N)
    warps_m: int
    warps_n: int

    @property
    def wm_tile(self) -> int:
        return self.shape[0] // self.warps_m

    @property
    def wn_tile(self) -> int:
        return self.shape[1] // self.warps_n

    @property
    def mi(self) -> int:
        return self.wm_tile // 16

    @property
    def ni(self) -> int:
        return self.wn_tile // 8

    @property
    def nlocal(self) -> int:
        return self.mi * self.ni * 4

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * 32

    exact = True
    pair_cols = True  # slots 2q, 2q + 1: columns c, c + 1 (c even) of one row

    def warp_coords(self, tid):
        warp = tid // 32
        return warp % self.warps_m, warp // self.warps_m, tid % 32

    def coords(self, tid, l: int) -> tuple:
        wm, wn, lane = self.warp_coords(tid)
        atom, r = l // 4, l % 4
        mi, ni = atom // self.ni, atom % self.ni
        row = wm * self.wm_tile + mi * 16 + lane // 4 + 8 * (r // 2)
        col = wn * self.wn_tile + ni * 8 + (lane % 4) * 2 + (r % 2)
        return row, col

    def key(self):
        return ("mma", self.shape, self.warps_m, self.warps_n)


@dataclass(frozen=True)
class WgmmaAccFragment:
    """The Hopper wgmma accumulator layout over a (wg_m x wg_n) grid of warpgroups.

    Warpgroup wg = tid // 128 -> (wgm = wg % wg_m, wgn = wg // wg_m) owns an (M/wg_m) x (N/wg_n)
    block computed as MI = (M/wg_m)/64 stacked m64 instructions. In warp w (of 4) of the group,
    lane (g = lane // 4, t = lane % 4), slot (mi * NI + ni) * 4 + r holds
        row wgm*M_wg + mi*64 + 16w + g + 8*(r // 2),   col wgn*N_wg + ni*8 + 2t + r % 2.
    """

    shape: tuple
    wg_m: int
    wg_n: int

    @property
    def m_wg(self) -> int:
        return self.shape[0] // self.wg_m

    @property
    def n_wg(self) -> int:
        return self.shape[1] // self.wg_n

    @property
    def nlocal(self) -> int:
        return (self.m_wg // 64) * (self.n_wg // 8) * 4

    @property
    def threads(self) -> int:
        return self.wg_m * self.wg_n * 128

    exact = True
    pair_cols = True  # slots 2q, 2q + 1: columns c, c + 1 (c even) of one row

    def coords(self, tid, l) -> tuple:
        wg = tid // 128
        wgm, wgn = wg % self.wg_m, wg // self.wg_m
        warp, lane = (tid // 32) % 4, tid % 32
        ni_count = self.n_wg // 8
        atom, r = l // 4, l % 4
        mi, ni = atom // ni_count, atom % ni_count
        row = wgm * self.m_wg + mi * 64 + warp * 16 + lane // 4 + 8 * (r // 2)
        col = wgn * self.n_wg + ni * 8 + (lane % 4) * 2 + (r % 2)
        return row, col

    def key(self):
        return ("wgmma", self.shape, self.wg_m, self.wg_n)


def acc_ni(acc) -> int:
    """8-column atoms of an mma/wgmma accumulator in each of its row blocks, per thread."""
    return acc.ni if isinstance(acc, MmaAccFragment) else acc.n_wg // 8


def column_groups_of(acc) -> int:
    """How many warps (mma) / warpgroups (wgmma) split each row's columns."""
    return acc.warps_n if isinstance(acc, MmaAccFragment) else acc.wg_n


@dataclass(frozen=True)
class RowFragment:
    """Per-row values (a 1-d tile over the rows of an mma/wgmma accumulator), in registers.

    Each thread keeps the rows it owns in the accumulator: for row block mi, rows g and
    g + 8 of its 16-row slice, so slot s = 2*mi + h. The 4 lanes of a quad (same g) hold
    copies; a row reduction combines a thread's own columns, then the quad with two
    xor-shuffles. Only the row split matters, so accumulators of any width share it.
    Where the columns are split over warps (warps_n / wg_n > 1) the warps of one row block
    hold copies too: a row reduction then also combines their partials through a small
    shared scratch (ops/reduce.py).
    """

    kind: str  # "mma" | "wgmma"
    rows: int
    groups: int  # warps_m (mma) or wg_m (wgmma)

    exact = True

    @staticmethod
    def of(acc) -> RowFragment:
        if isinstance(acc, MmaAccFragment):
            return RowFragment("mma", acc.shape[0], acc.warps_m)
        return RowFragment("wgmma", acc.shape[0], acc.wg_m)

    @property
    def shape(self) -> tuple:
        return (self.rows,)

    @property
    def _mi(self) -> int:
        return (self.rows // self.groups) // (16 if self.kind == "mma" else 64)

    @property
    def nlocal(self) -> int:
        return 2 * self._mi

    def coords(self, tid, s) -> tuple:
        lane = tid % 32
        tile = self.rows // self.groups
        if self.kind == "mma":
            wm = (tid // 32) % self.groups
            return (wm * tile + (s // 2) * 16 + lane // 4 + 8 * (s % 2),)
        wgm = (tid // 128) % self.groups
        return (wgm * tile + (s // 2) * 64 + ((tid // 32) % 4) * 16 + lane // 4 + 8 * (s % 2),)

    replicated = True

    def first_copy(self, tid, l=None):
        """True on exactly one of the threads holding each row (lane 0 of the quad, in the first
        warps / warpgroups of the column split): the one that stores a row to memory others see."""
        split = E.binop("<", tid // (32 if self.kind == "mma" else 128), self.groups)
        return E.binop("&&", E.binop("==", tid % 4, 0), split)

    def slot_of_acc(self, l, acc):
        """Row slot holding the row of accumulator slot l."""
        return (l // (4 * acc_ni(acc))) * 2 + (l % 4) // 2

    def acc_slots(self, s: int, acc) -> list:
        """Accumulator slots (python ints) in row slot s."""
        mi, h = divmod(s, 2)
        ni = acc_ni(acc)
        return [(mi * ni + n) * 4 + h * 2 + c for n in range(ni) for c in range(2)]

    def key(self):
        return ("row", self.kind, self.rows, self.groups)


def _col_group(acc, tid):
    """(column group of thread tid, its first column, its row group)."""
    if isinstance(acc, MmaAccFragment):
        wm, wn, _ = acc.warp_coords(tid)
        return wn, wn * acc.wn_tile, wm
    wg = tid // 128
    return wg // acc.wg_m, (wg // acc.wg_m) * acc.n_wg, wg % acc.wg_m


@dataclass(frozen=True)
class AccColumnFragment:
    """Per-column values of an mma/wgmma accumulator (a 1-d tile over its columns, read as D[j]
    in a T.Parallel over the accumulator, or W[q, h] over a (rows, Q, H) reshape of it).

    Each thread keeps the columns it holds in the accumulator, two per 8-column atom:
        slot s = 2 * ni + c  ->  column (its column group's first) + 8 * ni + 2 * (lane % 4) + c
    Every thread of the rows of a column group holds copies; the threads of the group's first
    row (lane // 4 == 0 of its first warp) store them.
    """

    acc: object

    exact = True
    replicated = True

    @property
    def shape(self) -> tuple:
        return (self.acc.shape[1],)

    @property
    def rows(self) -> int:  # extent of dim 0 (row_copies.py)
        return self.acc.shape[1]

    @property
    def nlocal(self) -> int:
        return 2 * acc_ni(self.acc)

    @property
    def threads(self) -> int:
        return self.acc.threads

    def coords(self, tid, s) -> tuple:
        _, base, _ = _col_group(self.acc, tid)
        return (base + (s // 2) * 8 + ((tid % 32) % 4) * 2 + s % 2,)

    def slot_of_acc(self, l):
        """Slot holding the column of accumulator slot l."""
        return ((l // 4) % acc_ni(self.acc)) * 2 + l % 2

    def first_copy(self, tid, l=None):
        _, _, rg = _col_group(self.acc, tid)
        in_warp = (tid % 32) // 4 if isinstance(self.acc, MmaAccFragment) else (tid % 128) // 4
        return E.binop("&&", E.binop("==", in_warp, 0), E.binop("==", rg, 0))

    def key(self):
        return ("acc_cols", self.acc.key())


@dataclass(frozen=True)
class RowBlockFragment:
    """(rows, width) values per row of an mma/wgmma accumulator: T.reduce over the last dim of a
    (rows, width, H) reshape of an accumulator, H a multiple of 8 (each 8-column atom inside one
    segment). Its columns are unsplit (cols = 1), or split over `cols` column groups (warps_n /
    wg_n) that each hold whole segments (the group's columns a multiple of H; span = 1), or that
    each lie inside one segment of `span` = H / (group's columns) groups.

    Column group cg owns segments of the "segment group" sg = cg // span; each thread keeps, for
    every row slot s of its RowFragment, the wq = width * span / cols values of sg: slot s * wq + j
    holds (row of s, sg * wq + j). The 4 lanes of a quad hold copies (and, with span > 1, the span
    groups of one segment group); lane j % 4 of the quad stores value j (first_copy), in the first
    group of the span, so a warp's stores of one slot cover 8 rows x 4 values instead of 8 rows.
        256 x 128 wgmma accumulator over 1 x 4 warpgroups, seen as (256, 4, 32): wq = 1, warpgroup
        g keeps segment g of its 8 rows (the fp8 lighting indexer's logits under FullCol);
        seen as (256, 2, 64): span 2, warpgroups 0, 1 keep segment 0 and 2, 3 segment 1
    """

    row: RowFragment
    width: int
    cols: int = 1
    span: int = 1

    exact = True
    replicated = True

    @property
    def shape(self) -> tuple:
        return (self.row.rows, self.width)

    @property
    def rows(self) -> int:
        return self.row.rows

    @property
    def per_group(self) -> int:
        """Values of a row each thread keeps (its segment group's segments)."""
        return self.width * self.span // self.cols

    @property
    def nlocal(self) -> int:
        return self.row.nlocal * self.per_group

    def col_group(self, tid):
        """Column group (warp / warpgroup column of the accumulator) of thread tid."""
        return ((tid // (32 if self.row.kind == "mma" else 128)) // self.row.groups) % self.cols

    def coords(self, tid, l) -> tuple:
        wq = self.per_group
        sg = self.col_group(tid) // self.span if self.span > 1 else self.col_group(tid)
        return (self.row.coords(tid, l // wq)[0], sg * wq + l % wq)

    def first_copy(self, tid, l=None):
        lane = 0 if l is None else (l % self.per_group) % 4
        quad = E.binop("==", tid % 4, lane)
        if self.span > 1:  # the first group of the span stores
            return E.binop("&&", quad, E.binop("==", self.col_group(tid) % self.span, 0))
        if self.cols > 1:  # each column group holds its own segments: no other copies
            return quad
        split = E.binop("<", tid // (32 if self.row.kind == "mma" else 128), self.row.groups)
        return E.binop("&&", quad, split)

    def key(self):
        return ("rowblock", self.row.key(), self.width, self.cols, self.span)


def acc_of_rows(layout):
    """The mma/wgmma accumulator whose rows `layout` keeps along dim 0: the accumulator itself, or
    a T.reshape of it that only splits its columns ((R, C) seen as (R, Q, H)); else None."""
    if isinstance(layout, (MmaAccFragment, WgmmaAccFragment)):
        return layout
    if isinstance(layout, ReshapedFragment) and isinstance(layout.inner, (MmaAccFragment, WgmmaAccFragment)) \
            and layout.shape[0] == layout.inner.shape[0]:
        return layout.inner
    return None


def segment_rows(src_layout, shape: tuple, split: bool = True):
    """The RowBlockFragment of T.reduce over the last dim of a tile of `shape` laid out as
    `src_layout`, when that is a (rows, Q, H) reshape of an accumulator reducible in registers.
    split: also where the accumulator's columns are split over warps / warpgroups whose column
    tiles hold whole segments (H divides each group's columns) or lie inside one (each group's
    columns divide H); else only unsplit columns."""
    acc = acc_of_rows(src_layout)
    if acc is None or len(shape) != 3 or shape[2] % 8 or shape[1] * shape[2] != acc.shape[1]:
        return None
    cols = column_groups_of(acc)
    if cols == 1:
        return RowBlockFragment(RowFragment.of(acc), shape[1])
    tile, h = acc.shape[1] // cols, shape[2]
    if not split or (tile % h and h % tile):
        return None
    return RowBlockFragment(RowFragment.of(acc), shape[1], cols, h // tile if h > tile else 1)


@dataclass(frozen=True)
class ReshapedFragment:
    """Another fragment's registers seen with another shape (T.reshape of a register tile).

    Slot l of thread tid holds the same element of storage as in `inner`: the element whose
    row-major flat index is flat(inner.coords(tid, l)), here unflattened over `shape`.
        inner = mma 16x8 (thread 0 holds (0,0) (0,1) (8,0) (8,1)), shape (16, 2, 4):
        thread 0 holds (0,0,0) (0,0,1) (8,0,0) (8,0,1): no data moves, only the indexing.
    """

    inner: object
    shape: tuple

    @staticmethod
    def of(layout, shape):
        """`layout` seen with `shape` (same element count), or None where that is not a layout
        the lowering can use (an inexact flat layout whose vectors do not fit the new rows)."""
        shape = tuple(shape)
        if isinstance(layout, ReshapedFragment):
            layout = layout.inner
        if tuple(layout.shape) == shape:
            return layout
        if isinstance(layout, FlatFragment):
            # flat layouts deal the row-major order out: the same deal under any shape
            if shape and shape[-1] % layout.vec == 0:
                return FlatFragment(shape, layout.threads, layout.vec)
            if not layout.exact:
                return None
        if not getattr(layout, "exact", False):
            return None
        return ReshapedFragment(layout, shape)

    @property
    def nlocal(self) -> int:
        return self.inner.nlocal

    @property
    def threads(self) -> int:
        return self.inner.threads

    exact = True

    def coords(self, tid, l) -> tuple:
        inner = tuple(self.inner.coords(tid, l))
        k = 0  # leading dims both shapes share pass through (a reshape that splits only the columns)
        while k < min(len(inner), len(self.shape)) - 1 and self.inner.shape[k] == self.shape[k]:
            k += 1
        e = 0
        for c, s in zip(inner[k:], self.inner.shape[k:]):
            e = e * s + c
        out = []
        for s in reversed(self.shape[k + 1:]):
            out.append(e % s)
            e = e // s
        out.append(e)
        return inner[:k] + tuple(reversed(out))

    @property
    def replicated(self) -> bool:
        return getattr(self.inner, "replicated", False)

    @property
    def rows(self) -> int:
        return self.shape[0]

    def first_copy(self, tid, l=None):
        return self.inner.first_copy(tid, l)

    def key(self):
        return ("reshape", self.inner.key(), self.shape)


def column_run(layout) -> int:
    """How many consecutive slots of `layout` hold consecutive columns of one row, starting at a
    column that is a multiple of that count: 2 for an mma / wgmma accumulator's column pairs, vec
    for an exact flat layout whose rows are whole vectors; else 1."""
    if getattr(layout, "pair_cols", False) and not getattr(layout, "replicated", False):
        return 2
    if isinstance(layout, FlatFragment) and layout.exact and len(layout.shape) >= 2 and \
            layout.shape[-1] % layout.vec == 0:
        return layout.vec
    return 1


@dataclass(frozen=True)
class PackedFragment:
    """A tile read as P[i, j // k] in a T.Parallel over a laid-out (R, C) tile (packed values: two
    4-bit weights a byte, read once per unpacked element). When the driver's slots come in runs of
    k consecutive columns of one row (column_run % k == 0), the k slots of a run read one element
    of P; the thread keeps it in one slot:

        slot s  ->  (i, j // k) with (i, j) = driver.coords(tid, s * k);  nlocal = driver.nlocal // k
        driver = wgmma accumulator (128, 128), k = 2: thread 0 holds P[0, 0], P[8, 0], P[0, 4] ...
        P[i, j // 2] in the driver's slot l  ->  P_reg[l // 2]
    Every element of P is held by exactly one thread, as every element of the driver is."""

    driver: object
    k: int

    exact = True

    @property
    def shape(self) -> tuple:
        return tuple(self.driver.shape[:-1]) + (self.driver.shape[-1] // self.k,)

    @property
    def nlocal(self) -> int:
        return self.driver.nlocal // self.k

    @property
    def threads(self) -> int:
        return self.driver.threads

    def coords(self, tid, s) -> tuple:
        c = tuple(self.driver.coords(tid, s * self.k))
        return c[:-1] + (c[-1] // self.k,)

    def key(self):
        return ("packed", self.driver.key(), self.k)


@dataclass(frozen=True)
class LaneRowFragment:
    """Per-row values of a flat (H, W) loop layout, each row held by the `lanes` threads it is
    dealt to (a reducer's per-thread partials: `r[i] += a[i, j] * x[j]`).

    FlatFragment((H, W), T, vec) with T*vec a multiple of W deals each row to L = W / vec
    consecutive threads, P = T / L rows per pass; with W a multiple of T*vec every thread holds
    a piece of every row (L = T, P = 1). Thread tid keeps row s*P + tid // L in slot s:
        H=4, W=8, T=8, vec=2 (L=4, P=2):  slot 0: tid 0-3 -> row 0, tid 4-7 -> row 1
                                          slot 1: tid 0-3 -> row 2, tid 4-7 -> row 3
    The L copies of a row hold partials until a T.finalize_reducer combines them.
    """

    rows: int
    threads: int
    lanes: int

    exact = True

    @staticmethod
    def of(driver) -> LaneRowFragment | None:
        """The row layout of a flat 2-d driver whose threads keep their rows, or None."""
        if not isinstance(driver, FlatFragment) or len(driver.shape) != 2 or not driver.exact:
            return None
        h, w = driver.shape
        per_pass = driver.threads * driver.vec
        if w % driver.vec == 0 and per_pass % w == 0:
            lanes = w // driver.vec
        elif w % per_pass == 0:
            lanes = driver.threads
        else:
            return None
        # the copies are combined with full-warp xor shuffles: whole warps, rows aligned in them
        ok = lanes == 1 or (driver.threads % 32 == 0 and (32 % lanes == 0 if lanes < 32 else lanes % 32 == 0))
        return LaneRowFragment(h, driver.threads, lanes) if ok else None

    @property
    def shape(self) -> tuple:
        return (self.rows,)

    @property
    def per_pass(self) -> int:
        return self.threads // self.lanes

    @property
    def nlocal(self) -> int:
        return self.rows // self.per_pass

    def coords(self, tid, s) -> tuple:
        return (s * self.per_pass + tid // self.lanes,) if self.per_pass > 1 else (s,)

    def slot_of(self, l, driver):
        """Row slot holding the row of driver slot l."""
        groups_per_row = max(1, driver.shape[1] // (driver.threads * driver.vec))
        return (l // driver.vec) // groups_per_row

    replicated = True

    def first_copy(self, tid, l=None):
        return E.binop("==", tid % self.lanes, 0)

    def key(self):
        return ("lanerow", self.rows, self.threads, self.lanes)


@dataclass(frozen=True)
class LaneColFragment:
    """A 1-d tile over the columns of a flat (H, W) loop layout that deals each row to
    L = W / vec threads: thread tid keeps columns (tid % L) * vec + u, u < vec, so the T / L
    thread groups of a pass each hold a copy (x in `o[i] += a[i, j] * x[j]`).
        W=8, T=8, vec=2:  tid 0, 4 -> x[0:2]   tid 1, 5 -> x[2:4]   ...
    """

    width: int
    threads: int
    vec: int

    exact = True

    @property
    def shape(self) -> tuple:
        return (self.width,)

    @property
    def lanes(self) -> int:
        return self.width // self.vec

    @property
    def rows(self) -> int:  # extent of dim 0 (row_copies.py)
        return self.width

    @property
    def nlocal(self) -> int:
        return self.vec

    def group_start(self, g, tid):
        """Flat index of thread tid's vector (its one group, g = 0)."""
        return (tid % self.lanes) * self.vec

    def coords(self, tid, l) -> tuple:
        return ((tid % self.lanes) * self.vec + l % self.vec,)

    replicated = True

    def first_copy(self, tid, l=None):
        return E.binop("<", tid, self.lanes)

    def key(self):
        return ("lanecol", self.width, self.threads, self.vec)


def row_fragment_ok(acc) -> bool:
    """Any mma / wgmma accumulator's rows can be kept as a RowFragment (a row split over column
    groups is combined by the reduce lowering through a small shared scratch)."""
    return isinstance(acc, (MmaAccFragment, WgmmaAccFragment))


WGMMA_N = tuple(range(8, 257, 8))  # the widths of wgmma.mma_async, m64nNk*: multiples of 8 up to 256
WGMMA_N_S8 = tuple(n for n in WGMMA_N if n <= 32 or n % 16 == 0)  # s8 operands: multiples of 16 above 32
# the widths tl/wgmma_ops.h holds; the others are in wgmma_ops_ext.h, which a kernel reads under TL_WGMMA_EXT
WGMMA_COMMON_N = (8, 16, 32, 64, 96, 128, 192, 256)


def wgmma_widths(int8: bool = False) -> tuple:
    """The N a wgmma instruction takes: WGMMA_N, or WGMMA_N_S8 for int8 operands."""
    return WGMMA_N_S8 if int8 else WGMMA_N


def choose_warpgroups(m: int, n: int, groups: int, int8: bool = False) -> tuple[int, int] | None:
    """(wg_m, wg_n) splitting an m x n tile over warpgroups: m64 rows each, N a wgmma width
    (`wgmma_widths(int8)`).

    The squarest per-warpgroup tile wins: on the H200, 128 x 256 on two warpgroups ran 3 %
    faster as two 128 x 128 halves (two m64n128 per k-step) than as two 64 x 256 halves."""
    best = None
    for wg_m in range(1, groups + 1):
        if groups % wg_m:
            continue
        wg_n = groups // wg_m
        if m % (wg_m * 64) or n % wg_n or (n // wg_n) not in wgmma_widths(int8):
            continue
        score = (abs(m // wg_m - n // wg_n), -wg_m)
        if best is None or score < best[0]:
            best = (score, wg_m, wg_n)
    return None if best is None else (best[1], best[2])


def choose_warps(m: int, n: int, warps: int, policy: str = "Square") -> tuple[int, int] | None:
    """A (warps_m, warps_n) grid whose warp tiles are multiples of 16x8, as square as allowed."""
    best = None
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if m % (wm * 16) or n % (wn * 8):
            continue
        if policy == "FullRow" and wn != 1:
            continue
        if policy == "FullCol" and wm != 1:
            continue
        tm, tn = m // wm, n // wn
        score = abs(tm - tn)
        if best is None or score < best[0]:
            best = (score, wm, wn)
    return None if best is None else (best[1], best[2])


_ = E
