"""`tilelang.rocm`: what of the public TileLang's AMD side is pure description, usable without a
ROCm backend: the MFMA fragment lane maps (`rocm.intrinsics.mfma_layout`, `rocm.intrinsics.utils`)
and target predicates (`rocm.target`). This TileLang cannot compile for AMD GPUs: the MFMA
emitters and HIP targets raise, saying so."""
from . import intrinsics  # noqa: F401
from . import target  # noqa: F401
