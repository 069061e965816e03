"""What the CPU and CUDA artifacts share: a kernel loaded from the kernel cache has no lowered IR.

Takes: an artifact class built either by compiling (it sets `lowered`) or from a kernel-cache
record (it does not; the JIT sets `relower`, a callable that compiles the program again).
Gives: `lowered` on first read, from `relower()`, so only someone who asks for the IR pays.
"""
from __future__ import annotations


class LowersOnDemand:
    def __getattr__(self, name):
        if name == "lowered" and "relower" in self.__dict__:
            self.lowered = self.relower()
            return self.lowered
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
