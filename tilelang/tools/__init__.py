"""Developer tools: `plot_layout` (draw a Layout / Fragment), `gen_wgmma` (header generator)."""
from .plot_layout import plot_layout  # noqa: F401
