"""Dynamic dims compiled as 16-byte multiples, checked per call, with a general kernel as fallback.

Takes: a prim_func whose global tensors have `T.dynamic` dims, and its CUDA target. Gives an
`AlignedDims` plan: for every dynamic dim that is the last (contiguous) dim of a parameter
tensor, a divisor that makes that tensor's rows a multiple of 16 bytes (8 for fp16, 4 for
fp32, 16 for int8; the lcm where one dim serves several tensors).

The JIT compiles the kernel under those divisors (`arith.divisibility.assume_divisors`), so
row-length checks in the CUDA passes can use 16-byte vectors, cp.async and TMA as they do for
static shapes; ragged tiles at the tensor's edge stay guarded as before. Each call checks the
bound values (`holds`); a call that breaks one gets the same program compiled without the
assumption, built on first need, with a PerformanceWarning that says which dim and value.
`tl.disable_dynamic_alignment` turns the plan off.
"""
from __future__ import annotations

import math
import warnings

from ..ir.buffer import Buffer
from ..ir.expr import Var, const_value


class AlignedDims:
    def __init__(self, divisors: dict):
        self.divisors = divisors  # Var -> int
        self.checks = tuple(divisors.items())
        self.warned = False

    @staticmethod
    def plan(func, target, pass_configs) -> "AlignedDims | None":
        from ..transform.pass_config import get as config

        if target.kind != "cuda" or config(pass_configs or {}, "tl.disable_dynamic_alignment", False):
            return None
        divisors: dict = {}
        for p in func.params:
            if not isinstance(p, Buffer) or p.scope != "global" or not p.shape or p.strides:
                continue
            last = p.shape[-1]
            if not isinstance(last, Var) or const_value(last) is not None or p.dtype.bits < 8:
                continue
            need = 16 // p.dtype.bytes if p.dtype.bytes < 16 else 1
            if need > 1:
                divisors[last] = math.lcm(divisors.get(last, 1), need)
        return AlignedDims(divisors) if divisors else None

    def holds(self, env: dict) -> bool:
        """Do the bound dims of this call meet every assumed divisor?"""
        for v, d in self.checks:
            x = _int(env.get(v))
            if x is not None and x % d:
                return False
        return True

    def broken(self, env: dict) -> str:
        return ", ".join(f"{v.name}={_int(env.get(v))} is not a multiple of {d}" for v, d in self.checks
                         if _int(env.get(v)) is not None and _int(env.get(v)) % d)

    def warn_fallback(self, name: str, env: dict) -> None:
        if self.warned:
            return
        self.warned = True
        from ..backend.cuda.pipeline import PerformanceWarning

        warnings.warn(f"{name}: {self.broken(env)}; this call runs the kernel compiled for any row length "
                      "(scalar or narrower loads, no TMA). Rows of 16-byte multiples take the fast kernel.",
                      PerformanceWarning, stacklevel=4)


def _int(x):
    if x is None or isinstance(x, int):
        return x
    c = const_value(x)
    return int(c) if c is not None else None
