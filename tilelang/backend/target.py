"""Targets: "cpu", "cuda" (with an arch), and "auto" resolution."""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import TileLangError


@dataclass(frozen=True)
class Target:
    kind: str  # "cpu" | "cuda"
    arch: str | None = None  # "sm_80", "sm_90a", ...

    def __str__(self):
        return self.kind if self.arch is None else f"{self.kind} -arch={self.arch}"

    @property
    def sm(self) -> int:
        digits = "".join(c for c in (self.arch or "") if c.isdigit())
        return int(digits) if digits else 0

    def __enter__(self):
        """`with target:` makes it what target="auto" resolves to, until the block ends."""
        _CURRENT.append(self)
        return self

    def __exit__(self, *exc):
        for i in range(len(_CURRENT) - 1, -1, -1):  # this very object, innermost first
            if _CURRENT[i] is self:
                del _CURRENT[i]
                break
        return False


_CURRENT: list[Target] = []


def current(allow_none: bool = True) -> Target | None:
    """The innermost `with Target(...)` target; None (or TileLangError unless allow_none) outside."""
    if _CURRENT:
        return _CURRENT[-1]
    if not allow_none:
        raise TileLangError("no target is active: use `with tvm.target.Target(...)` or pass target=")
    return None


def smem_per_block(sm: int) -> int:
    """Bytes of dynamic shared memory one block may opt into on compute capability `sm` (90 = 9.0):
    227 KB on sm_90, 163 KB on sm_80 / sm_87, 99 KB on the other sm_8x."""
    return 232448 if sm >= 90 else 166912 if sm in (80, 87) else 101376


def num_sms(default: int = 132) -> int:
    """Multiprocessors of CUDA device 0, or `default` (an H100/H200 SXM) when none is present:
    persistent kernels size their grid with it; any value is correct, the device's is fastest."""
    try:
        from .cuda import driver

        if driver.device_available():
            return int(driver.device_attribute("MULTIPROCESSOR_COUNT", 0))
    except Exception:  # noqa: BLE001 - no usable CUDA: the default
        pass
    return default


def cuda_arch() -> str | None:
    try:
        from .cuda import driver

        if not driver.device_available():
            return None
        major, minor = driver.compute_capability(0)
        return f"sm_{major}{minor}" + ("a" if major >= 9 else "")
    except Exception:  # noqa: BLE001 - any failure here means "no usable CUDA"
        return None


def resolve(target=None) -> Target:
    """Accepts None/"auto", "cpu", "c", "llvm", "cuda", "cuda -arch=sm_90a", a JSON dict or a Target."""
    from .. import env

    if isinstance(target, Target):
        return target
    if (target is None or target == "auto") and _CURRENT:
        return _CURRENT[-1]
    if target is None or target == "auto":
        target = env.default_target()
    if isinstance(target, str) and target.strip().startswith("{"):
        target = json.loads(target)
    if isinstance(target, dict):
        kind = target.get("kind", "cuda")
        arch = target.get("arch")
        return resolve(f"{kind} -arch={arch}" if arch else kind)
    if not isinstance(target, str):
        raise TileLangError(f"target: expected a string such as 'cpu' or 'cuda -arch=sm_90a', got {target!r}")
    parts = target.split()
    kind = parts[0] if parts else "auto"
    opts = dict(p.lstrip("-").split("=", 1) for p in parts[1:] if "=" in p)
    if kind == "auto":
        arch = cuda_arch()
        return Target("cuda", arch) if arch else Target("cpu")
    if kind in ("cpu", "c", "llvm"):
        return Target("cpu")
    if kind == "cuda":
        arch = opts.get("arch") or cuda_arch()
        if arch is None:
            arch = "sm_90a"
        if arch.isdigit():
            arch = f"sm_{arch}"
        return Target("cuda", arch)
    raise TileLangError(f"unknown target {target!r}; expected 'auto', 'cpu' or 'cuda [-arch=sm_XX]'")
