"""`tvm.target.Target`: a compile target from its TVM-style text, usable as a `with` context.

    Target("cuda -arch=sm_90a"), Target("cuda"), Target("cpu"), Target("llvm") (= cpu)
    with Target("cpu"):
        tilelang.compile(func)       # target="auto" means the innermost `with` target

It is our backend's target (`tilelang.backend.target.Target`): `.kind` ("cpu" / "cuda"),
`.arch` ("sm_90a" ...). Targets we have no backend for (hip, metal ...) raise TileLangError.
"""
from __future__ import annotations

from ..backend import target as backend_target


class Target(backend_target.Target):
    """A target parsed from text (or a dict / another Target), like `tilelang.compile(target=...)`."""

    def __init__(self, target, host=None):
        t = backend_target.resolve(target)
        object.__setattr__(self, "kind", t.kind)
        object.__setattr__(self, "arch", t.arch)

    def __eq__(self, other):
        return isinstance(other, backend_target.Target) and (self.kind, self.arch) == (other.kind, other.arch)

    def __hash__(self):
        return hash((self.kind, self.arch))

    @staticmethod
    def current(allow_none: bool = True):
        """The innermost `with Target(...)` target, or None (allow_none) / an error."""
        return backend_target.current(allow_none)


__all__ = ["Target"]
