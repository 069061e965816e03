"""Runs a target's ordered pass list; can write the IR after every pass to a folder."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..ir.stmt import PrimFunc


@dataclass
class PassContext:
    """Options every pass may read; passes never read the environment themselves."""

    target: object = None
    pass_configs: dict = field(default_factory=dict)
    dump_dir: Path | None = None
    warnings: list = field(default_factory=list)
    compile_flags: tuple = ()  # extra flags for the backend compiler (NVRTC, or the C compiler)

    def config(self, key: str, default=None):
        return self.pass_configs.get(key, default)


Pass = Callable[[PrimFunc, PassContext], PrimFunc]


def run_passes(func: PrimFunc, passes: list[tuple[str, Pass]], ctx: PassContext) -> PrimFunc:
    if ctx.dump_dir is not None:
        ctx.dump_dir.mkdir(parents=True, exist_ok=True)
        (ctx.dump_dir / f"{func.name}.00_input.py").write_text(str(func) + "\n")
    for n, (name, fn) in enumerate(passes, start=1):
        func = fn(func, ctx)
        if ctx.dump_dir is not None:
            (ctx.dump_dir / f"{func.name}.{n:02d}_{name}.py").write_text(str(func) + "\n")
    return func


def simplify_pass(func: PrimFunc, ctx: PassContext) -> PrimFunc:
    from dataclasses import replace

    from ..arith.simplify import simplify

    return replace(func, body=simplify(func.body))
