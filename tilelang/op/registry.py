"""The tile-op registry: which function lowers each tile-op type on each backend.

Takes: registrations from the op-family modules (`@register_lowering("cuda", O.Fill)` on a
function `rule(low, op) -> Stmt`, where `low` is the backend's lowering pass: the CUDA pass
gives its thread-partition helpers, see transform/cuda/lower_tile_ops.py).
Gives: `lowering_rule(backend, op)`, the rule the pass dispatches to (looked up along the op
class's MRO, so a subclass inherits its base's rule unless it registers its own).

    @register_lowering("cuda", O.Fill)                  lower_tile_ops visits a Fill:
    def lower_fill(low, op):                      ->        lowering_rule("cuda", op)(self, op)
        return low.elementwise(op.dst, ...)

An op type has at most one rule per backend: registering a second one is an error (a family
that means to replace a rule calls `unregister_lowering` first), so two modules cannot silently
race for the same op. The registry knows nothing about any backend; it imports nothing.
"""
from __future__ import annotations

from typing import Callable

BACKENDS = ("cuda", "cpu")

_RULES: dict = {backend: {} for backend in BACKENDS}  # backend -> {op type: rule}
_FOUND: dict = {backend: {} for backend in BACKENDS}  # backend -> {op type: rule or None}: MRO lookups


def _check_backend(backend: str) -> dict:
    if backend not in _RULES:
        raise ValueError(f"tile-op registry: unknown backend {backend!r}; expected one of {BACKENDS}")
    return _RULES[backend]


def register_lowering(backend: str, *op_types: type) -> Callable:
    """Decorator: `rule(low, op)` lowers every op of `op_types` on `backend`."""
    rules = _check_backend(backend)
    if not op_types or not all(isinstance(t, type) for t in op_types):
        raise TypeError(f"register_lowering({backend!r}, ...): expected one or more op classes, got {op_types!r}")

    def deco(rule: Callable) -> Callable:
        if not callable(rule):
            raise TypeError(f"register_lowering: {rule!r} is not callable")
        for t in op_types:
            old = rules.get(t)
            if old is not None and old is not rule:
                raise ValueError(f"tile-op registry: {t.__name__} already has a {backend} lowering "
                                 f"({old.__module__}.{old.__qualname__}); unregister_lowering it first")
        for t in op_types:
            rules[t] = rule
        _FOUND[backend].clear()
        return rule

    return deco


def unregister_lowering(backend: str, op_type: type) -> Callable | None:
    """Remove op_type's own rule on backend; returns it (None when it had none)."""
    rule = _check_backend(backend).pop(op_type, None)
    _FOUND[backend].clear()
    return rule


def lowering_rule(backend: str, op) -> Callable | None:
    """The rule for op (an instance) on backend: its class's own or its nearest base's; None if none."""
    found = _FOUND[backend]
    tp = type(op)
    try:
        return found[tp]
    except KeyError:
        pass
    rules = _check_backend(backend)
    rule = next((rules[c] for c in tp.__mro__ if c in rules), None)
    found[tp] = rule
    return rule


def registered(backend: str) -> dict:
    """{op type: rule} of backend's own registrations (a copy)."""
    return dict(_check_backend(backend))
