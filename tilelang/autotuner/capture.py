"""`with set_autotune_inputs(a, b, c):` — tune on these tensors instead of generated ones.

Why: kernels whose inputs carry meaning (sequence offsets of a varlen batch, indices, masks)
cannot be checked or timed on random data. Inside the block, every autotuning that starts
uses the given tensors as the kernel's inputs (its non-output parameters, in order); the
contexts nest, the innermost wins, and each thread has its own stack.

    with set_autotune_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q):
        kernel = flashattn(batch, heads, dim)      # the @autotune'd factory
"""
from __future__ import annotations

import threading
from typing import Any

__all__ = ["AutotuneInputsCapture", "set_autotune_inputs", "get_autotune_inputs"]

_local = threading.local()


def _stack() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


class AutotuneInputsCapture:
    """The context manager `set_autotune_inputs` returns; `tensors` is the captured list."""

    __slots__ = ("tensors",)

    def __init__(self, tensors: list[Any]):
        self.tensors = tensors

    def __enter__(self) -> None:
        _stack().append(self)

    def __exit__(self, exc_type, exc, tb) -> None:
        _stack().pop()


def set_autotune_inputs(*args) -> AutotuneInputsCapture:
    """Tensors for autotuning: `set_autotune_inputs(a, b, c)` or `set_autotune_inputs([a, b, c])`."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return AutotuneInputsCapture(list(args[0]))
    return AutotuneInputsCapture(list(args))


def get_autotune_inputs() -> list[Any] | None:
    """The innermost active `set_autotune_inputs` tensors of this thread, or None outside one."""
    stack = _stack()
    return list(stack[-1].tensors) if stack else None
