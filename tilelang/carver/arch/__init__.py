"""Device descriptions: `CUDA(target)`, `CPU`, `get_arch`, `auto_infer_current_arch`, `driver`.

`CUDA("cuda")` takes its architecture from the target (the GPU's, or sm_90a where there is
none; `CUDA("cuda -arch=sm_80")` names one), so it can be built on a machine without a GPU;
properties that only a device can tell (name, smem_cap, compute_max_core, l2_cache_size_bytes)
are read on first use and raise CudaDriverError (a RuntimeError) naming the property when
no GPU is usable.

    arch = CUDA("cuda -arch=sm_90a")
    arch.sm_version, arch.compute_capability   # 90, "90"
    arch.compute_max_core                      # the GPU's SM count (needs the GPU)

AMD (CDNA, RDNA) and Apple (METAL) descriptions raise: this TileLang has no such backend.
"""
from __future__ import annotations

import re

from . import driver  # noqa: F401 - `from tilelang.carver.arch import driver`

__all__ = ["TileDevice", "CUDA", "CPU", "CDNA", "RDNA", "METAL", "TensorInstruction", "get_arch",
           "auto_infer_current_arch", "driver", "is_cpu_arch", "is_cuda_arch", "is_volta_arch", "is_ampere_arch",
           "is_ada_arch", "is_hopper_arch", "has_mma_support", "is_tensorcore_supported_precision",
           "is_cdna_arch", "is_rdna_arch", "is_metal_arch", "check_sm_version"]

_SM = re.compile(r"^(?:sm_)?(\d+)[a-zA-Z]*$")


def check_sm_version(arch: str) -> int:
    """90 for "sm_90a" or "sm_90", 80 for "sm_80"; -1 for anything that is not an SM arch."""
    m = _SM.match(str(arch))
    return int(m.group(1)) if m else -1


class TileDevice:
    """What a device description provides (the attributes the public carver's devices have)."""

    platform: str = "unknown"
    warp_size: int = 32
    reg_cap: int = 0
    sm_partition: int = 1
    transaction_size: list = [32, 128]
    bandwidth: list = [750, 12080]  # MB/s [shared-ish, global]: only their ratio is meaningful

    def get_avaliable_tensorintrin_shapes(self) -> list:  # (sic) the public spelling
        return []


class TensorInstruction:
    def __init__(self, name: str, shape: list):
        self.name = name
        self.shape = shape  # [M, N] of one instruction


class CUDA(TileDevice):
    """An NVIDIA GPU described by a target ("cuda", "cuda -arch=sm_90a") or our Target."""

    platform = "CUDA"
    reg_cap = 65536
    sm_partition = 4

    def __init__(self, target="cuda"):
        self.target = _cuda_target(target)
        self.sm_version = check_sm_version(self.target.arch)
        self.compute_capability = str(self.sm_version)  # "90": what public programs slice with [:2]
        self.device = 0
        self.transaction_size = [32, 128]
        self.bandwidth = [750, 12080]
        self.available_tensor_instructions = None

    # the device's own numbers: read on first use (a GPU is needed)
    @property
    def name(self) -> str:
        return driver.get_device_name(self.device)

    @property
    def smem_cap(self) -> int:
        return driver.get_shared_memory_per_block(self.device)

    @property
    def max_smem_usage(self) -> int:
        return 2 * self.smem_cap

    @property
    def compute_max_core(self) -> int:
        return driver.get_num_sms(self.device)

    @property
    def l2_cache_size_bytes(self) -> int:
        return driver.get_l2_cache_size(self.device)

    def get_avaliable_tensorintrin_shapes(self) -> list:
        self.available_tensor_instructions = (TensorInstruction("mma", [16, 16]), TensorInstruction("wmma", [16, 16]))
        return [t.shape for t in self.available_tensor_instructions]

    def __repr__(self):
        return f"CUDA({self.target})"


def _cuda_target(target):
    """Our Target for a CUDA description: "-arch=" when given, else GPU 0's arch, else sm_90a.

    Parsed here rather than by backend.target.resolve: a description names hardware, whatever
    the default compile target (TILELANG_DEFAULT_TARGET) is."""
    from ...backend.cuda import driver as cuda_driver
    from ...backend.target import Target

    if isinstance(target, Target):
        if target.kind != "cuda":
            raise ValueError(f"CUDA(...): expected a CUDA target, got {target}")
        return target
    words = str(target).split()
    if not words or words[0] != "cuda":
        raise ValueError(f"CUDA(...): expected a target such as 'cuda' or 'cuda -arch=sm_90a', got {target!r}")
    opts = dict(w.lstrip("-").split("=", 1) for w in words[1:] if "=" in w)
    arch = opts.get("arch") or (cuda_driver.arch_of(0) if cuda_driver.device_available() else "sm_90a")
    return Target("cuda", arch if arch.startswith("sm_") else f"sm_{arch}")


class CPU(TileDevice):
    """The host, for the C backend."""

    platform = "CPU"

    def __init__(self, target="cpu"):
        from ...backend.target import resolve

        self.target = resolve(target)
        self.device = None

    def __repr__(self):
        return "CPU()"


def _unsupported(cls_name: str, what: str):
    def __init__(self, target=None):
        raise ValueError(f"tilelang.carver.arch.{cls_name}: {what} devices are not supported by this TileLang "
                         "(it has CUDA and CPU backends only)")

    return type(cls_name, (TileDevice,), {"__init__": __init__, "__doc__": f"{what}: unsupported here (raises)."})


CDNA = _unsupported("CDNA", "AMD CDNA")
RDNA = _unsupported("RDNA", "AMD RDNA")
METAL = _unsupported("METAL", "Apple Metal")


def get_arch(target="cuda") -> TileDevice:
    """The description of `target` ("cuda ...", "cpu", or our Target)."""
    from ...backend.target import resolve

    t = resolve(target)
    return CUDA(t) if t.kind == "cuda" else CPU(t)


def auto_infer_current_arch() -> TileDevice:
    """CUDA when a GPU is usable, else the CPU."""
    from ...backend.target import resolve

    return get_arch(resolve("auto"))


def is_cpu_arch(arch) -> bool:
    return isinstance(arch, CPU)


def is_cuda_arch(arch) -> bool:
    return isinstance(arch, CUDA)


def is_volta_arch(arch) -> bool:
    return is_cuda_arch(arch) and 70 <= arch.sm_version < 80


def is_ampere_arch(arch) -> bool:
    return is_cuda_arch(arch) and 80 <= arch.sm_version < 89


def is_ada_arch(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 89


def is_hopper_arch(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 90


def has_mma_support(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version >= 80


def is_cdna_arch(arch) -> bool:
    return False


def is_rdna_arch(arch) -> bool:
    return False


def is_metal_arch(arch) -> bool:
    return False


_VOLTA = {("float16", "float32"), ("float16", "float16")}
_AMPERE = {("bfloat16", "float32"), ("float16", "float32"), ("float16", "float16"), ("int8", "int32"),
           ("int4", "int32"), ("int2", "int32"), ("int1", "int32")}
_ADA = {("bfloat16", "float32"), ("float16", "float32"), ("float16", "float16"), ("int8", "int32"),
        ("float8_e5m2", "float32"), ("float8_e4m3", "float32")}


def is_tensorcore_supported_precision(in_dtype: str, accum_dtype: str, arch) -> bool:
    """Whether `arch`'s tensor cores multiply `in_dtype` into `accum_dtype` (Volta..Hopper)."""
    for test, table in ((is_volta_arch, _VOLTA), (is_ampere_arch, _AMPERE), (is_ada_arch, _ADA),
                        (is_hopper_arch, _ADA)):
        if test(arch):
            return (str(in_dtype), str(accum_dtype)) in table
    raise ValueError(f"is_tensorcore_supported_precision: unsupported architecture {arch}")
