"""Lower T.gemm_sp to a decompression into a dense shared tile and a T.gemm (every target).

Expects: parsed IR with `GemmSp` tile ops (op/gemm_sp.py).
Guarantees: no GemmSp remains; each became Allocate(A_dense) ; T.Parallel fill ; Gemm, whose
results equal the dense product exactly. On CUDA this is not the sparse tensor-core path
(mma.sp / wgmma.sp), and the pass says so in a PerformanceWarning.

    T.gemm_sp(A_s, E_s, B_s, C)  ->  A_dense[...] = decompress(A_s, E_s) ; T.gemm(A_dense, B_s, C)
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.stmt import PrimFunc
from ..ir.visitor import Mutator
from ..op.gemm_sp import GemmSp, decompressed


class _LowerGemmSp(Mutator):
    def __init__(self):
        self.count = 0

    def visit_GemmSp(self, op: GemmSp):
        self.count += 1
        return decompressed(op, f"A_dense{self.count - 1}" if self.count > 1 else "A_dense")


def lower_gemm_sp(func: PrimFunc, ctx=None) -> PrimFunc:
    low = _LowerGemmSp()
    body = low.visit(func.body)
    if not low.count:
        return func
    target = getattr(ctx, "target", None)
    if ctx is not None and getattr(target, "kind", None) == "cuda":
        ctx.warnings.append(f"T.gemm_sp runs as decompress-then-T.gemm ({low.count} op(s)): the sparse tensor-core "
                            "path (mma.sp / wgmma.sp) is not implemented, so it does dense work")
    return replace(func, body=body)
