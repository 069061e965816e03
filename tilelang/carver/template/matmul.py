"""`MatmulTemplate`: C[M, N] = A @ B (+ Bias) with tensor-core tile recommendations.

    t = MatmulTemplate(M=4096, N=4096, K=4096, in_dtype="float16", out_dtype="float16",
                       accum_dtype="float32").with_arch(CUDA("cuda -arch=sm_90a"))
    func = t.equivalent_function()      # a prim_func computing the product (any backend)
    for h in t.recommend_hints(topk=10):
        h.block, h.warp, h.rstep, h.pipeline_stage, h.rasterization_plan

Ranking (ours, a small roofline model, not the public roller's policy search): every block tile
(bm, bn) in {16 .. 256}^2, warp tile (wm, wn) with 1..8 warps, reduction tile bk in {16 .. 128}
and pipeline depth 1..4 whose staged A/B tiles fit the architecture's shared memory and whose
accumulator fits 128 registers a thread is costed as

    ceil(blocks / SMs) x (max(math, memory) + unhidden loads + K / bk x step overhead)
    math = 2 bm bn K' / tensor rate,  memory = (bm + bn) K' bytes / per-SM bandwidth

(K' = K rounded up to bk; the busiest SM runs ceil(blocks / SMs) blocks, so tiles that do not
divide M, N pay for their padding; one stage leaves half the loads exposed). Grids of more blocks than SMs get
a column-snake rasterization (better L2 reuse).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ... import dtypes as dt
from ..arch import CUDA, TileDevice
from ..roller.hint import Hint
from ..roller.rasterization import NoRasterization, Rasterization2DColumn
from .base import BaseTemplate

__all__ = ["MatmulTemplate"]

_STEP_COST = 64.0  # clocks of barrier / address work per reduction step, relative
_SMEM_BY_SM = {70: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
               90: 227 * 1024}


def _device_numbers(arch) -> tuple:
    """(shared bytes per block, SM count, sm version) of a CUDA description, GPU or not."""
    if not isinstance(arch, CUDA):
        raise ValueError(f"MatmulTemplate.recommend_hints: tensor-core hints need a CUDA architecture, got {arch!r}")
    sm = arch.sm_version
    try:
        smem = int(arch.smem_cap)
    except Exception:  # noqa: BLE001 - no GPU here: the architecture's documented limit
        smem = _SMEM_BY_SM.get(sm, 99 * 1024 if sm >= 80 else 48 * 1024)
    try:
        sms = int(arch.compute_max_core)
    except Exception:  # noqa: BLE001
        from ...backend.target import num_sms

        sms = num_sms()
    return smem, sms, sm


def _ceil(a, b):
    return -(-a // b)


@dataclass
class MatmulTemplate(BaseTemplate):
    """A GEMM: A is (M, K) or (K, M) with trans_A, B is (K, N) or (N, K) with trans_B."""

    M: int = None
    N: int = None
    K: int = None
    trans_A: bool = False
    trans_B: bool = True
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False

    def initialize_function(self) -> None:
        M, N, K = self.M, self.N, self.K
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (M, N, K)):
            raise ValueError(f"MatmulTemplate: M, N, K must be ints, got {M!r}, {N!r}, {K!r}")
        if min(M, N, K) <= 0:
            raise ValueError(f"MatmulTemplate: M, N, K must be positive, got {M}, {N}, {K}")
        self.set_function(_matmul_func(M, N, K, self.trans_A, self.trans_B, str(self.in_dtype),
                                       str(self.out_dtype), str(self.accum_dtype), self.with_bias))

    def get_hardware_aware_configs(self, arch: TileDevice = None, topk: int = 10) -> list:
        return rank_tiles(self.M, self.N, self.K, dt.as_dtype(str(self.in_dtype)).bytes,
                          dt.as_dtype(str(self.accum_dtype)).bytes, arch if arch is not None else self._arch, topk)

    def params_as_dict(self) -> dict:
        return {"M": self.M, "N": self.N, "K": self.K, "trans_A": self.trans_A, "trans_B": self.trans_B,
                "in_dtype": self.in_dtype, "out_dtype": self.out_dtype, "accum_dtype": self.accum_dtype,
                "with_bias": self.with_bias}

    @property
    def class_attributes(self) -> dict:
        return self.params_as_dict()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.params_as_dict().items())
        return f"MatmulTemplate({fields})"


def rank_tiles(M, N, K, in_bytes, acc_bytes, arch, topk=10) -> list:
    """The `topk` cheapest tensor-core tilings of an M x N x K GEMM on `arch` (see module docstring)."""
    smem_cap, sms, sm = _device_numbers(arch)
    tc_rate = 1024.0 if sm >= 90 else 512.0  # fp16 FMA x2 per SM per clock, relative
    bw = 16.0  # global bytes per SM per clock, relative
    scored = []
    sizes = (16, 32, 64, 128, 256)
    for bm, bn, bk in itertools.product(sizes, sizes, (16, 32, 64, 128)):
        if bk * in_bytes < 32 or bk > max(16, 2 * K):
            continue
        for wm, wn in itertools.product((16, 32, 64), (16, 32, 64)):
            if bm % wm or bn % wn:
                continue
            warps = (bm // wm) * (bn // wn)
            if warps not in (1, 2, 4, 8) or wm * wn * acc_bytes // 32 > 128 * 4:
                continue
            stage_bytes = (bm + bn) * bk * in_bytes
            stages = max((s for s in (1, 2, 3, 4) if s * stage_bytes <= smem_cap), default=0)
            if not stages:
                continue
            stages = min(stages, max(1, _ceil(K, bk)), 4 if sm >= 80 else 2)
            gm, gn = _ceil(M, bm), _ceil(N, bn)
            iters = _ceil(K, bk)
            block_math = 2.0 * bm * bn * iters * bk / tc_rate
            block_mem = (bm + bn) * iters * bk * in_bytes / bw
            exposed = 0.5 * block_mem if stages == 1 else 0.0  # loads not overlapped with math
            # the busiest SM runs ceil(blocks / SMs) blocks, sharing its tensor cores and bandwidth
            cost = _ceil(gm * gn, sms) * (max(block_math, block_mem) + exposed + iters * _STEP_COST)
            scored.append((cost, -(bm * bn) / (bm + bn), -warps, (bm, bn, bk, wm, wn, stages, gm, gn)))
    scored.sort()
    hints = []
    for cost, _, _, (bm, bn, bk, wm, wn, stages, gm, gn) in scored[:max(0, int(topk))]:
        h = Hint()
        h.arch = arch
        h.use_tc = True
        h.block, h.warp, h.rstep = [bm, bn], [wm, wn], [bk]
        h.pipeline_stage = stages
        h.use_async = sm >= 80 and stages > 1
        h.rasterization_plan = Rasterization2DColumn(10) if gm * gn > sms and gm > 1 and gn > 1 \
            else NoRasterization()
        h.score = -cost
        hints.append(h)
    return hints


def _matmul_func(M, N, K, trans_A, trans_B, in_dtype, out_dtype, accum_dtype, with_bias):
    """The reference prim_func: one 16 x 16 output tile per block, K reduced serially, bounds guarded."""
    import tilelang.language as T

    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)
    tile = 16


    def a_at(A, i, k):
        return A[k, i] if trans_A else A[i, k]

    def b_at(B, k, j):
        return B[j, k] if trans_B else B[k, j]

    @T.macro
    def product(A, B, acc, by, bx):
        T.clear(acc)
        for k in T.serial(K):
            for i, j in T.Parallel(tile, tile):
                if by * tile + i < M and bx * tile + j < N:
                    acc[i, j] += T.cast(a_at(A, by * tile + i, k), accum_dtype) * T.cast(
                        b_at(B, k, bx * tile + j), accum_dtype)

    if with_bias:
        @T.prim_func
        def matmul(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype), Bias: T.Tensor((N,), accum_dtype),
                   C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(T.ceildiv(N, tile), T.ceildiv(M, tile), threads=128) as (bx, by):
                acc = T.alloc_fragment((tile, tile), accum_dtype)
                product(A, B, acc, by, bx)
                for i, j in T.Parallel(tile, tile):
                    if by * tile + i < M and bx * tile + j < N:
                        C[by * tile + i, bx * tile + j] = T.cast(acc[i, j] + Bias[bx * tile + j], out_dtype)
    else:
        @T.prim_func
        def matmul(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype), C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(T.ceildiv(N, tile), T.ceildiv(M, tile), threads=128) as (bx, by):
                acc = T.alloc_fragment((tile, tile), accum_dtype)
                product(A, B, acc, by, bx)
                for i, j in T.Parallel(tile, tile):
                    if by * tile + i < M and bx * tile + j < N:
                        C[by * tile + i, bx * tile + j] = T.cast(acc[i, j], out_dtype)
    return matmul
