"""FP8 dtype selection for the platform torch runs on.

`determine_fp8_type("e4m3")` is T.float8_e4m3fn and `determine_fp8_type("e5m2")` is
T.float8_e5m2 on CUDA (and on CPU). Under a ROCm build of torch it names AMD's formats
(float8_e4m3fnuz / float8_e5m2fnuz; the OCP ones on gfx950), as the public TileLang does;
our backends have no ROCm target, so kernels with those dtypes fail to compile with a
message naming them.

Example::

    from tilelang.language.fp8 import determine_fp8_type
    dtype = determine_fp8_type()                 # T.float8_e4m3fn
    a = torch.randn(64, 64).to(dtype.as_torch())
"""
from __future__ import annotations

from ..dtypes import DType


def determine_fp8_type(fp8_format: str = "e4m3", device=None) -> DType:
    """The FP8 dtype for `fp8_format` ("e4m3" or "e5m2") on this platform's GPU (`device`: ROCm only)."""
    import torch

    if fp8_format not in ("e4m3", "e5m2"):
        raise ValueError(f"determine_fp8_type: fp8_format must be 'e4m3' or 'e5m2', got {fp8_format!r}")
    ocp = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}[fp8_format]
    if getattr(torch.version, "hip", None) is None:
        return DType(ocp)
    arch = ""
    if torch.cuda.is_available():
        arch = getattr(torch.cuda.get_device_properties(device), "gcnArchName", "")
    amd = {"e4m3": "float8_e4m3fnuz", "e5m2": "float8_e5m2fnuz"}[fp8_format]
    return DType(ocp if arch.startswith("gfx950") else amd)


def determine_torch_fp8_type(fp8_format: str = "e4m3", device=None):
    """The torch dtype of `determine_fp8_type(fp8_format, device)`."""
    import torch

    name = determine_fp8_type(fp8_format, device).name
    t = getattr(torch, name, None)
    if t is None:
        raise RuntimeError(f"this torch ({torch.__version__}) has no dtype {name}")
    return t


__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]
