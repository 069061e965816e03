"""`Hint`: one recommended schedule for a template (tile sizes, warps, pipeline depth, rasterization),
with the public carver's attribute names so autotuning code can read them."""
from __future__ import annotations

from .rasterization import NoRasterization

__all__ = ["Hint"]


class Hint:
    """A schedule: `block` (output tile per block), `warp` (output tile per warp, tensor cores) or
    `thread`, `rstep` (reduction tile), `pipeline_stage`, `use_async`, `rasterization_plan`,
    `split_k_factor`. `to_dict()` / `from_dict()` round-trip it."""

    def __init__(self) -> None:
        self.arch = None
        self.use_tc = None
        self.block: list = []
        self.thread: list = []
        self.warp: list = []
        self.rstep: list = []
        self.reduce_thread: list = []
        self.rasterization_plan = NoRasterization()
        self.cached_tensors: list = []
        self.output_strides: dict = {}
        self.schedule_stages = None
        self.block_reduction_depth = None
        self.split_k_factor: int = 1
        self.vectorize: dict = {}
        self.pipeline_stage: int = 1
        self.use_async: bool = False
        self.opt_shapes: dict = {}
        self.shared_scope: str = "shared"
        self.pass_context: dict = {}
        self.score: float = 0.0  # our ranking key (higher is better); not a public field

    def to_dict(self) -> dict:
        d = {"block": self.block}
        if self.use_tc:
            d["warp"] = self.warp
        else:
            d["thread"] = self.thread
        d["rstep"] = self.rstep
        if self.use_tc:
            d["use_tc"] = self.use_tc
        if self.vectorize:
            d["vectorize"] = self.vectorize
        if self.pipeline_stage != 1:
            d["pipeline_stage"] = self.pipeline_stage
        if self.block_reduction_depth is not None:
            d["block_reduction_depth"] = self.block_reduction_depth
        return d

    @classmethod
    def from_dict(cls, dic: dict) -> "Hint":
        hint = cls()
        for k, v in dic.items():
            setattr(hint, k, v)
        return hint

    def tensorcore_legalization(self) -> "Hint":
        """Keep only the last two (M, N) axes of block / warp."""
        self.warp = self.warp[-2:]
        self.block = self.block[-2:]
        return self

    @property
    def raxis_order(self) -> list:
        return list(range(len(self.rstep)))

    @property
    def step(self) -> list:
        return [1 for _ in self.block]

    def __repr__(self) -> str:
        return str(self.to_dict())
