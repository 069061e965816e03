"""`Raw`: a statement of inline device code, the last step of lowering before the codegen."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import stmt as S


@dataclass(frozen=True)
class Raw(S.Stmt):
    """Inline device code: `fmt.format(*printed args)`; reads/writes name the shared buffers touched."""

    fmt: str
    args: tuple = ()
    reads: tuple = ()
    writes: tuple = ()
    span: object = field(default=None, compare=False, repr=False)
