"""`tilelang.carver.roller`: schedule hints and block rasterization plans. The public roller's
policy search over TVM compute graphs (`DefaultPolicy`, `TensorCorePolicy`, `PrimFuncNode`) is not
implemented; `carver.template.MatmulTemplate` ranks GEMM tiles itself."""
from .hint import Hint  # noqa: F401
from .rasterization import NoRasterization, Rasterization, Rasterization2DColumn, Rasterization2DRow  # noqa: F401
from ..arch import CUDA, TileDevice  # noqa: F401
