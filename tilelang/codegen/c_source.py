"""What the C code generator gives for one kernel: its text, entry point and C argument list.

Takes nothing (a plain record); `codegen/c.py` makes it and the CPU artifact keeps it, in
memory and in kernel-cache records. It lives apart from the code generator so that a kernel
loaded from the kernel cache unpickles it without importing the generator (and with it the
IR statements and tile ops).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CSource:
    """`text` exports `entry`; `arg_kinds` has one (kind, object) per C argument: ("buffer",
    Buffer) | ("scalar", Var) | ("dim", Var) | ("alloc_global", Buffer); `asserts` holds the
    messages of T.device_assert by index (the function returns index + 1 when one fails)."""

    text: str
    entry: str
    arg_kinds: tuple
    asserts: tuple
