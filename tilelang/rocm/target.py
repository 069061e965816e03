"""AMD (HIP / ROCm) target predicates, as the public `tilelang.rocm.target` names them.

A target is given as text ("hip -mcpu=gfx950"), a dict ({"kind": "hip", "mcpu": "gfx942"}), or
one of our targets (CUDA / CPU, never HIP). The predicates only read the text, so a program can
ask them anywhere:

    target_is_gfx950("hip -mcpu=gfx950")   # True
    target_is_cdna(Target("cuda"))         # False
    target_get_warp_size("hip -mcpu=gfx90a")   # 64 (CDNA wavefronts); RDNA: 32

Building or compiling for a HIP target is not possible here (no ROCm backend):
`with_rocm_target_attrs` / `normalize_rocm_target` of a HIP target raise TileLangError, and
`check_hip_availability()` is False.
"""
from __future__ import annotations

from ..errors import TileLangError

__all__ = ["ROCM_MTRIPLE", "normalize_rocm_arch", "target_get_mcpu", "rocm_warp_size_for_arch",
           "with_rocm_target_attrs", "check_hip_availability", "normalize_rocm_target", "target_is_hip",
           "target_is_cdna", "target_is_rdna", "target_is_gfx950", "target_get_warp_size",
           "target_get_rdna_generation"]

ROCM_MTRIPLE = "amdgcn-amd-amdhsa-hcc"


def _parse(target) -> tuple:
    """(kind, attrs) of a target in any accepted form."""
    if target is None:
        return None, {}
    if isinstance(target, dict):
        attrs = {k: v for k, v in target.items() if k != "kind"}
        return str(target.get("kind", "")), attrs
    if isinstance(target, str):
        words = target.split()
        attrs = {}
        for w in words[1:]:
            if w.startswith("-") and "=" in w:
                key, value = w.lstrip("-").split("=", 1)
                attrs[key] = value
        return (words[0] if words else ""), attrs
    kind = getattr(target, "kind", None)
    kind = getattr(kind, "name", kind)  # a TVM-style kind object
    return (str(kind) if kind is not None else None), dict(getattr(target, "attrs", None) or {})


def normalize_rocm_arch(arch) -> str | None:
    """"gfx942:sramecc+:xnack-" -> "gfx942"; None for anything that is not a gfx name."""
    if arch is None:
        return None
    name = str(arch).strip().split(":", 1)[0]
    return name if name.startswith("gfx") else None


def target_get_mcpu(target) -> str | None:
    """The target's -mcpu (normalized), or None."""
    return normalize_rocm_arch(_parse(target)[1].get("mcpu"))


def rocm_warp_size_for_arch(arch) -> int | None:
    """64 for gfx9 (CDNA / GCN), 32 for gfx10-12 (RDNA), None otherwise."""
    if arch is None:
        return None
    arch = str(arch)
    if arch.startswith("gfx9"):
        return 64
    if arch.startswith(("gfx10", "gfx11", "gfx12")):
        return 32
    return None


def _no_backend(what: str, target):
    raise TileLangError(f"tilelang.rocm.target.{what}({target!r}): HIP/ROCm targets are not supported by this "
                        "TileLang (it compiles for CUDA and the CPU only)")


def with_rocm_target_attrs(target):
    """Non-HIP targets come back unchanged; a HIP target cannot be built here (raises)."""
    if not target_is_hip(target):
        return target
    _no_backend("with_rocm_target_attrs", target)


def check_hip_availability() -> bool:
    """Whether this TileLang can compile for HIP: never (there is no ROCm backend)."""
    return False


def normalize_rocm_target(target):
    """None for non-HIP targets (as the public normalizer answers); HIP targets raise."""
    if not target_is_hip(target):
        return None
    _no_backend("normalize_rocm_target", target)


def target_is_hip(target) -> bool:
    return _parse(target)[0] in ("hip", "rocm")


def _mcpu(target) -> str:
    return str(_parse(target)[1].get("mcpu", "")) if target_is_hip(target) else ""


def target_is_cdna(target) -> bool:
    """A HIP target whose -mcpu is gfx9xx."""
    return _mcpu(target).startswith("gfx9")


def target_is_rdna(target) -> bool:
    """A HIP target whose -mcpu is gfx11xx or gfx12xx."""
    return _mcpu(target).startswith(("gfx11", "gfx12"))


def target_is_gfx950(target) -> bool:
    return "gfx950" in _mcpu(target)


def target_get_warp_size(target) -> int:
    """64 on CDNA, else 32."""
    return 64 if target_is_cdna(target) else 32


def target_get_rdna_generation(target) -> int:
    """11 or 12 for RDNA3 / RDNA4 targets, 0 otherwise."""
    m = _mcpu(target) if target_is_rdna(target) else ""
    return 11 if m.startswith("gfx11") else 12 if m.startswith("gfx12") else 0
