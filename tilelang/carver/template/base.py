"""`BaseTemplate`: a computation described by its parameters, the architecture it targets, an
equivalent prim_func, and `recommend_hints(topk)` (schedules ranked for that architecture)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ..arch import TileDevice, auto_infer_current_arch, is_ampere_arch, is_cdna_arch, is_rdna_arch, is_volta_arch

__all__ = ["BaseTemplate"]


@dataclass
class BaseTemplate(ABC):
    """Subclasses define `initialize_function` (sets the equivalent prim_func) and
    `get_hardware_aware_configs(arch, topk)` (-> list of Hint)."""

    _arch: TileDevice = field(default_factory=auto_infer_current_arch, init=False, repr=False)
    _func: object = field(default=None, init=False, repr=False)
    _output_nodes: list = field(default=None, init=False, repr=False)

    @abstractmethod
    def get_hardware_aware_configs(self, arch: TileDevice = None, topk: int = 10) -> list:
        ...

    def initialize_function(self) -> None:
        raise NotImplementedError(f"{type(self).__name__}.initialize_function is not implemented")

    def __post_init__(self):
        self.initialize_function()

    def with_arch(self, arch: TileDevice) -> "BaseTemplate":
        self._arch = arch
        return self

    def has_arch(self) -> bool:
        return self._arch is not None

    def is_volta_arch(self) -> bool:
        return self._arch is not None and is_volta_arch(self._arch)

    def is_ampere_arch(self) -> bool:
        return self._arch is not None and is_ampere_arch(self._arch)

    def is_cdna_arch(self) -> bool:
        return self._arch is not None and is_cdna_arch(self._arch)

    def is_rdna_arch(self) -> bool:
        return self._arch is not None and is_rdna_arch(self._arch)

    def equivalent_function(self):
        """The prim_func this template describes (it compiles and runs like any other)."""
        return self._func

    def set_function(self, func) -> "BaseTemplate":
        self._func = func
        return self

    def set_output_nodes(self, output_nodes: list) -> "BaseTemplate":
        self._output_nodes = output_nodes
        return self

    def recommend_hints(self, topk: int = 10) -> list:
        """Up to `topk` schedules for the template's architecture, best first."""
        return self.get_hardware_aware_configs(self._arch, topk)

    @property
    def arch(self) -> TileDevice:
        return self._arch

    @property
    def output_nodes(self) -> list:
        return self._output_nodes
