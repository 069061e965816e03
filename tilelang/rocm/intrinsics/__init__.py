"""AMD matrix-core (MFMA) fragment maps and helpers: pure index arithmetic, usable on ints and on IR
expressions (for Fragment / Layout definitions and plots). The MFMA code emitters are not
implemented (there is no ROCm backend here)."""
from .mfma_layout import make_mfma_swizzle_layout  # noqa: F401
from .utils import get_mma_micro_size, mfma_store_index_map, mfma_store_index_map_32x32  # noqa: F401

_EMITTERS = ("MatrixCoreIntrinEmitter", "MatrixCorePreshuffleIntrinEmitter", "WMMAIntrinEmitter")


def __getattr__(name):
    if name in _EMITTERS:
        raise NotImplementedError(f"tilelang.rocm.intrinsics.{name}: AMD MFMA / WMMA code emission is not supported "
                                  "by this TileLang (it has CUDA and CPU backends only)")
    raise AttributeError(f"module 'tilelang.rocm.intrinsics' has no attribute {name!r}")
