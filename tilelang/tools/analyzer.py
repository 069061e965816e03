"""`Analyzer`: FLOPs, global-memory bytes and a roofline time estimate of a prim_func.

It walks our IR before lowering and counts, per block and times the grid and every
enclosing loop's trip count:

    T.gemm   2 * M * N * K FLOPs (the tile's M, N, K)
    T.copy   the bytes of its global side (a global -> shared/fragment load or a store back)

and estimates time as max(bytes / bandwidth, FLOPs / peak) with the device's numbers.
Element-wise global accesses inside T.Parallel and atomics are not counted, and both
branches of an `if` are, so this is an estimate of the tile program's main traffic, not a
profile.

    result = Analyzer.analysis(func, CUDA("cuda -arch=sm_90a"))
    result.total_flops, result.total_global_bytes, result.estimated_time   # seconds
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from ..arith.simplify import const_int, simplify
from ..errors import TileLangError
from ..ir import stmt as S
from ..ir.stmt import PrimFunc
from ..op import tile_ops as O

__all__ = ["Analyzer", "AnalysisResult", "ARCH_CONFIGS"]

logger = logging.getLogger("tilelang.tools.analyzer")

# compute capability -> (cores per SM, clock in GHz, FLOPs per core per cycle, SM count)
ARCH_CONFIGS = {"80": (128, 1.41, 2, 108), "86": (128, 1.70, 2, 84), "89": (128, 2.52, 2, 128),
                "90": (128, 1.98, 2, 132)}  # "90" (H100/H200 SXM) is ours


@dataclass(frozen=True)
class AnalysisResult:
    """total_flops, total_global_bytes; estimated_time in seconds; expected_tflops (the device's
    peak, None when unknown) and expected_bandwidth_GBps."""

    total_flops: int
    total_global_bytes: int
    estimated_time: float
    expected_tflops: float | None
    expected_bandwidth_GBps: float


class Analyzer:
    """Count a prim_func's FLOPs and global bytes (`ir_pass`) and estimate its time (`calculate`)."""

    def __init__(self, fn, device):
        self.fn = _the_func(fn)
        self.device = device
        self.total_flops = 0
        self.total_global_bytes = 0

    def ir_pass(self) -> "Analyzer":
        self.total_flops = 0
        self.total_global_bytes = 0
        self._visit(self.fn.body, 1)
        return self

    def _visit(self, node, mult: int) -> None:
        if isinstance(node, S.KernelLaunch):
            mult *= _product(node.grid, "grid extent")
        elif isinstance(node, S.For):
            mult *= _product((node.extent,), f"extent of loop {node.var.name}")
        elif isinstance(node, O.Gemm):
            m, n, k = (_static(d, "T.gemm extent") for d in node.mnk)
            self.total_flops += 2 * m * n * k * mult
            return
        elif isinstance(node, O.Copy):
            side = node.src if node.src.buffer.scope == "global" else (
                node.dst if node.dst.buffer.scope == "global" else None)
            if side is not None:
                elems = _product([ext for _, ext in side.ranges], "T.copy extent")
                self.total_global_bytes += elems * side.buffer.dtype.bits // 8 * mult
            return
        for child in _children(node):
            self._visit(child, mult)

    def calculate(self) -> AnalysisResult:
        bandwidth_gbps = self.device.bandwidth[1] / 1000
        peak = _peak_tflops(self.device)
        mem_time = self.total_global_bytes / (bandwidth_gbps * 1e9)
        est = mem_time if peak is None else max(mem_time, self.total_flops / (peak * 1e12))
        return AnalysisResult(self.total_flops, self.total_global_bytes, est, peak, bandwidth_gbps)

    @classmethod
    def analysis(cls, fn, device) -> AnalysisResult:
        """`Analyzer(fn, device).ir_pass().calculate()`."""
        return cls(fn, device).ir_pass().calculate()


def _peak_tflops(device) -> float | None:
    key = str(device.compute_capability)[:2]
    if key not in ARCH_CONFIGS:
        logger.info("no peak numbers for compute capability %s: the estimate is memory time only",
                    device.compute_capability)
        return None
    cores, clock, per_cycle, sms = ARCH_CONFIGS[key]
    return round(cores * sms * clock * per_cycle / 1e3, 1)


def _the_func(fn) -> PrimFunc:
    if isinstance(fn, PrimFunc):
        return fn
    funcs = list(fn.values()) if isinstance(fn, dict) else []
    if len(funcs) == 1 and isinstance(funcs[0], PrimFunc):
        return funcs[0]
    raise TileLangError(f"Analyzer: expected a T.prim_func (e.g. kernel.get_tir(...)), got {type(fn).__name__}")


def _static(e, what: str) -> int:
    v = e if isinstance(e, int) else const_int(simplify(e))
    if v is None:
        raise TileLangError(f"Analyzer: the {what} {e} is not a constant; analyze a prim_func with static shapes")
    return v


def _product(items, what: str) -> int:
    out = 1
    for e in items:
        out *= _static(e, what)
    return out


def _children(node) -> list:
    """Statements directly inside `node` (any statement type, so new ones need no case here)."""
    out = []
    if not dataclasses.is_dataclass(node):
        return out
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        if isinstance(v, S.Stmt):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, S.Stmt))
    return out
