"""Block rasterization plans: the order in which a 2-d grid of output tiles is visited, for L2 reuse.

    NoRasterization()             blocks run in launch order
    Rasterization2DColumn(w)      the grid is cut into panels of `w` rows of blocks (blockIdx.y);
                                  inside a panel blocks go down the rows first, and every other
                                  panel walks the columns backwards (a snake), so consecutive
                                  blocks share A rows / B columns in L2
    Rasterization2DRow(w)         declared for compatibility; its code is not defined (raises, as
                                  in the public carver)

`remap(bx, by, grid_x, grid_y)` is the plan as integer math (what `get_code`'s CUDA text computes
per block); `get_code()` gives that CUDA text (a device function and the line that rebinds
`blockIdx`), for hand-written kernels that want it.
"""
from __future__ import annotations

__all__ = ["Rasterization", "NoRasterization", "Rasterization2DRow", "Rasterization2DColumn"]


class Rasterization:
    """A block visiting order; `panel_width` is its panel size (None: no panels)."""

    panel_width_ = None

    def get_code(self) -> list:
        raise NotImplementedError(f"{type(self).__name__}.get_code is not defined")

    def remap(self, bx: int, by: int, grid_x: int, grid_y: int) -> tuple:
        raise NotImplementedError(f"{type(self).__name__}.remap is not defined")

    @property
    def panel_width(self):
        if self.panel_width_ is None:
            raise ValueError(f"{type(self).__name__} has no panel width")
        return self.panel_width_


class NoRasterization(Rasterization):
    def __repr__(self) -> str:
        return "<NoRasterization>"

    def get_code(self) -> list:
        return []

    def remap(self, bx, by, grid_x, grid_y):
        return bx, by


class Rasterization2DRow(Rasterization):
    """Row panels of `panel_width` (code not defined, as in the public carver)."""

    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width_ = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DRow({self.panel_width_})>"

    def get_code(self) -> list:
        raise NotImplementedError("Rasterization2DRow.get_code: row rasterization has no code (use "
                                  "Rasterization2DColumn or T.use_swizzle)")


class Rasterization2DColumn(Rasterization):
    """Column-snake panels of `panel_width` block rows (see the module docstring)."""

    def __init__(self, panel_width: int = 4) -> None:
        self.panel_width_ = panel_width

    def __repr__(self) -> str:
        return f"<Rasterization2DColumn({self.panel_width_})>"

    def remap(self, bx, by, grid_x, grid_y, panel_width=None):
        """Block (bx, by) of a grid_x x grid_y launch computes tile (x, y)."""
        w = self.panel_width_ if panel_width is None else panel_width
        linear = bx + grid_x * by
        per_panel = w * grid_x
        panels = (grid_x * grid_y + per_panel - 1) // per_panel
        panel = linear // per_panel
        inside = linear - panel * per_panel
        rows = w if panel + 1 < panels else (grid_x * grid_y - panel * per_panel) // grid_x  # last: shorter
        x = inside // rows
        if panel % 2:
            x = grid_x - 1 - x
        return x, inside % rows + panel * w

    def get_device_function(self) -> str:
        return (
            "__device__ __inline__ dim3 rasterization2DColumn(const int panel_width) {\n"
            "    const unsigned linear = blockIdx.x + gridDim.x * blockIdx.y;\n"
            "    const unsigned total = gridDim.x * gridDim.y;\n"
            "    const unsigned per_panel = panel_width * gridDim.x;\n"
            "    const unsigned panels = (total + per_panel - 1) / per_panel;\n"
            "    const unsigned panel = linear / per_panel;\n"
            "    const unsigned inside = linear - panel * per_panel;\n"
            "    const unsigned rows = panel + 1 < panels ? panel_width : (total - panel * per_panel) / gridDim.x;\n"
            "    unsigned x = inside / rows;\n"
            "    if (panel & 1) x = gridDim.x - 1 - x;\n"
            "    return dim3(x, inside % rows + panel * panel_width, blockIdx.z);\n"
            "}\n")

    def get_code(self, panel_width: int = None) -> list:
        w = self.panel_width_ if panel_width is None else panel_width
        return [self.get_device_function(), f"const dim3 blockIdx = rasterization2DColumn({w});\n"]
