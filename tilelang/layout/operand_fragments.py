"""Register layouts of a gemm's A operand, and of the sub-block of a tile one loop step reads.

MmaAFragment: the tf32 A operand of mma.sync m16n8k8 (an M x K tile, K-contiguous) over a
(warps_m x warps_n) warp grid, the registers `tl::gemm_rs` reads. Within one 16 x 8 atom
(g = lane // 4, t = lane % 4) the 4 slots hold (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4):

             c0   c1   c2   c3   c4   c5   c6   c7          (lane:slot)
        r0: 0:0  1:0  2:0  3:0  0:2  1:2  2:2  3:2
        r8: 0:1  1:1  2:1  3:1  0:3  1:3  2:3  3:3

Warp w -> (wm = w % warps_m, wn = w // warps_m) holds the rows wm * M / warps_m ...; atom (mi, ks)
(row block mi, K slice ks) is slots (ks * MI + mi) * 4 + r. The warps of one row block (every
wn) hold copies: the mma of each column group reads the whole of its rows.

SliceFragment: the layout of a (box) loop whose fragments are the restriction of another layout
to a sub-block at an offset (fragment_slices / offset_slices): slot s of the driver is slot
first + (s // run) * stride + s % run of the base layout, its coordinates the base's minus the
offsets at the first value of the loop variable carrying them; at value v the base slot moves by
step * (v - v0) and the offsets by delta * (v - v0), the same element for every thread.

    MmaAFragment((32, 256), 2, 2) restricted to x[i, jj * 4 + j], (i, j) in (32, 4):
    jj = 0: slots 0, 1 (rows g, g + 8; column t)   jj = 1: slots 2, 3   ...  step 2
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import expr as E


@dataclass(frozen=True)
class MmaAFragment:
    shape: tuple  # (M, K)
    warps_m: int
    warps_n: int

    exact = True
    replicated = True

    @property
    def mi(self) -> int:
        return self.shape[0] // self.warps_m // 16

    @property
    def nlocal(self) -> int:
        return self.mi * (self.shape[1] // 8) * 4

    @property
    def threads(self) -> int:
        return self.warps_m * self.warps_n * 32

    @property
    def rows(self) -> int:  # extent of dim 0 (row_copies.py)
        return self.shape[0]

    def coords(self, tid, l) -> tuple:
        warp, lane = tid // 32, tid % 32
        wm = warp % self.warps_m
        atom, r = l // 4, l % 4
        ks, mi = atom // self.mi, atom % self.mi
        row = wm * (self.shape[0] // self.warps_m) + mi * 16 + lane // 4 + (r % 2) * 8
        col = ks * 8 + lane % 4 + (r // 2) * 4
        return row, col

    def first_copy(self, tid, l=None):
        """The copy in the first column group of warps stores to memory others see."""
        return E.binop("<", tid, 32 * self.warps_m)

    def key(self):
        return ("mma_a", self.shape, self.warps_m, self.warps_n)


@dataclass(frozen=True)
class SliceFragment:
    base: object  # the sliced tile's layout
    shape: tuple  # the loop's extents
    offsets: tuple  # per dim, at v = v0
    first: int
    run: int
    stride: int
    count: int
    v0: int = 0
    step: int = 0  # base slots per unit of the loop variable
    delta: tuple = ()  # offsets per unit of the loop variable

    exact = True

    @property
    def nlocal(self) -> int:
        return self.count

    @property
    def threads(self) -> int:
        return self.base.threads

    @property
    def replicated(self) -> bool:
        return bool(getattr(self.base, "replicated", False))

    @property
    def rows(self) -> int:
        return self.shape[0]

    def base_slot(self, s):
        """Slot of the base layout holding driver slot s at v = v0."""
        if self.run == self.count:
            return s + self.first if self.first else s
        return self.first + (s // self.run) * self.stride + s % self.run

    def coords(self, tid, s) -> tuple:
        return tuple(c - o for c, o in zip(self.base.coords(tid, self.base_slot(s)), self.offsets))

    def first_copy(self, tid, l=None):
        return self.base.first_copy(tid, l)

    def key(self):
        return ("slice", self.base.key(), self.shape, self.offsets, self.first, self.run, self.stride, self.count,
                self.v0, self.step, self.delta)
