"""Developer tools: `plot_layout` (draw a Layout / Fragment), `Analyzer` (FLOPs, global bytes and a
roofline estimate of a prim_func), `gen_wgmma` (header generator), `timeline` (per-tile timestamps
of a kernel compiled with tl.debug_timeline)."""
from . import timeline  # noqa: F401
from .analyzer import AnalysisResult, Analyzer  # noqa: F401
from .plot_layout import plot_layout  # noqa: F401
