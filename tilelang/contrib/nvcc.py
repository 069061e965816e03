"""Compute-capability queries (`tilelang.contrib.nvcc`), for programs that check the GPU.

We compile with NVRTC, not nvcc, so the public module's nvcc driver functions
(compile_cuda, get_ptx_from_source, ...) are not here; the version queries are:

    get_target_compute_version("cuda -arch=sm_80")   # "8.0"
    get_target_compute_version()                     # the GPU's, e.g. "9.0"
    parse_compute_version("9.0")                     # (9, 0)
"""
from __future__ import annotations

__all__ = ["get_target_compute_version", "parse_compute_version", "get_target_arch", "have_fp16", "have_int8",
           "have_bf16", "have_fp8", "have_tensorcore", "have_tma", "is_hopper"]


def get_target_compute_version(target=None) -> str:
    """"major.minor" of `target`'s architecture ("cuda -arch=sm_90a", our Target), else of GPU 0
    (a plain "cuda" target resolves to the GPU's architecture, sm_90a where there is none).

    Raises ValueError when there is neither an architecture nor a GPU."""
    from ..backend.cuda import driver
    from ..backend.target import Target, resolve

    if target is not None:
        t = target if isinstance(target, Target) else resolve(target)
        digits = "".join(c for c in (t.arch or "") if c.isdigit())
        if t.kind != "cuda" or len(digits) not in (2, 3):
            raise ValueError(f"get_target_compute_version: {target!r} is not a CUDA target with an architecture")
        return f"{digits[:-1]}.{digits[-1]}"
    if driver.device_available():
        major, minor = driver.compute_capability(0)
        return f"{major}.{minor}"
    raise ValueError("No CUDA architecture was given and no GPU is usable: pass a target such as "
                     "'cuda -arch=sm_90a'")


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """(major, minor) of "9.0"; RuntimeError for text that is not major.minor."""
    parts = str(compute_version).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError) as err:
        raise RuntimeError(f"compute version {compute_version!r} is not 'major.minor'") from err


def get_target_arch(compute_version) -> str:
    """"90a" for "9.0" or (9, 0) (Hopper and later need the arch-specific target), "80" for "8.0"."""
    major, minor = parse_compute_version(compute_version) if isinstance(compute_version, str) else compute_version
    return f"{major * 10 + minor}" + ("a" if major >= 9 else "")


def have_fp16(compute_version) -> bool:
    major, minor = parse_compute_version(compute_version)
    return (major == 5 and minor >= 3) or major >= 6


def have_int8(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 6


def have_bf16(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 8


def have_fp8(compute_version) -> bool:
    return parse_compute_version(compute_version) >= (8, 9)


def have_tensorcore(compute_version=None, target=None) -> bool:
    if compute_version is None:
        compute_version = get_target_compute_version(target)
    return parse_compute_version(compute_version)[0] >= 7


def have_tma(target) -> bool:
    from ..backend.target import resolve

    t = resolve(target)
    return t.kind == "cuda" and parse_compute_version(get_target_compute_version(t))[0] >= 9


def is_hopper(target) -> bool:
    from ..backend.target import resolve

    t = resolve(target)
    return t.kind == "cuda" and parse_compute_version(get_target_compute_version(t)) == (9, 0)
