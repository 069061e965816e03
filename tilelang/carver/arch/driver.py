"""Properties of the CUDA device at hand (`from tilelang.carver.arch import driver`).

Every function takes a `device_id` (default 0) and raises `CudaDriverError` (a RuntimeError)
naming the property when no CUDA device is usable; importing this module needs no GPU.

    driver.get_num_sms()                       # 132 on an H100/H200 SXM
    driver.get_shared_memory_per_block("kb")   # 48
"""
from __future__ import annotations

__all__ = ["get_cuda_device_properties", "get_device_name", "get_shared_memory_per_block", "get_device_attribute",
           "get_max_dynamic_shared_size_bytes", "get_persisting_l2_cache_max_size", "get_num_sms",
           "get_registers_per_block", "get_l2_cache_size"]

_FORMATS = {"bytes": 1, "kb": 1 << 10, "mb": 1 << 20}


def _need_device(what: str, device_id: int):
    from ...backend.cuda import driver

    if not driver.device_available() or device_id >= driver.device_count():
        raise driver.CudaDriverError(f"{what} needs CUDA device {device_id}, and none is usable on this machine "
                                     "(no GPU, or no CUDA driver)")
    return driver


def _scaled(value: int, fmt: str) -> int:
    if fmt not in _FORMATS:
        raise ValueError(f"format must be one of {sorted(_FORMATS)}, got {fmt!r}")
    return value // _FORMATS[fmt]


def get_device_attribute(attr, device_id: int = 0) -> int:
    """A device attribute by CUdevice_attribute suffix ("MULTIPROCESSOR_COUNT") or number."""
    driver = _need_device(f"device attribute {attr!r}", device_id)
    if isinstance(attr, int):  # a cudaDeviceAttr / CUdevice_attribute number (the two enums agree)
        from cuda.bindings import driver as cu

        attr = cu.CUdevice_attribute(attr).name[len("CU_DEVICE_ATTRIBUTE_"):]
    return driver.device_attribute(attr, device_id)


def get_cuda_device_properties(device_id: int = 0):
    """torch's device properties object, or None where torch sees no CUDA device."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(device_id)


def get_device_name(device_id: int = 0) -> str:
    _need_device("the device name", device_id)
    import torch

    return torch.cuda.get_device_properties(device_id).name


def get_num_sms(device_id: int = 0) -> int:
    """Number of streaming multiprocessors."""
    return get_device_attribute("MULTIPROCESSOR_COUNT", device_id)


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:  # noqa: A002 - public name
    """Static shared memory a block may use without opting in (48 KiB on current GPUs)."""
    return _scaled(get_device_attribute("MAX_SHARED_MEMORY_PER_BLOCK", device_id), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:  # noqa: A002
    """Shared memory per multiprocessor (the most one block can opt into, plus the 1 KiB reserve)."""
    return _scaled(get_device_attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", device_id), format)


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int:
    return get_device_attribute("MAX_PERSISTING_L2_CACHE_SIZE", device_id)


def get_l2_cache_size(device_id: int = 0) -> int:
    return get_device_attribute("L2_CACHE_SIZE", device_id)


def get_registers_per_block(device_id: int = 0) -> int:
    return get_device_attribute("MAX_REGISTERS_PER_BLOCK", device_id)
