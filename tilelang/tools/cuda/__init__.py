"""CUDA developer tools: `iket` (in-kernel event tracing; it works on the CPU backend too)."""
from . import iket  # noqa: F401
