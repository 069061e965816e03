"""`tilelang.carver.template`: computations described by their parameters that recommend schedules
for an architecture. `MatmulTemplate` is implemented; the public carver's GEMV, elementwise,
reduction, flash-attention and convolution templates are not (they raise, naming themselves)."""
from .base import BaseTemplate  # noqa: F401
from .matmul import MatmulTemplate  # noqa: F401

_NOT_HERE = ("GEMVTemplate", "ElementwiseTemplate", "GeneralReductionTemplate", "FlashAttentionTemplate",
             "ConvTemplate")


def __getattr__(name):
    if name in _NOT_HERE:
        raise NotImplementedError(f"tilelang.carver.template.{name} is not implemented in this TileLang "
                                  "(only MatmulTemplate is)")
    raise AttributeError(f"module 'tilelang.carver.template' has no attribute {name!r}")
