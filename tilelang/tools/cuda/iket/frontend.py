"""Kernel-side IKET calls: `iket.mark`, `iket.range` (and push/pop), `iket.payload`.

Each call registers its event by (kind, name) in a process-wide table (ids from 1, 31 kept for
the range end as the public IKET numbers them) and lowers to one device call the generated
source defines once an IKET session instruments it (see codegen.py):

    iket.mark("load")                          ->  TL_IKET_EVENT(1)
    iket.mark("i", payload=iket.payload(i))    ->  TL_IKET_EVENT_PAYLOAD_U32(2, i)
    with iket.range("tile"): ...               ->  TL_IKET_EVENT(3); ...; TL_IKET_RANGE_END(3)

Outside an instrumented compile the calls are no-ops (a fallback definition travels with the
kernel as an imported source), so an instrumented program still compiles without IKET.
"""
from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Any

from .... import dtypes as dt
from ....errors import DSLSyntaxError, DSLTypeError
from ....frontend import builder as B
from ....ir import expr as E
from ....ir import stmt as S
from ....op.thread_ops import ImportSource

RANGE_END_EVENT_ID = 31
MAX_EVENT_NAME_BYTES = 32
PAYLOAD_IKET_IDS = {"int32": 5, "uint32": 6, "float32": 13}  # IKET's value-type codes
EVENT = "TL_IKET_EVENT"
RANGE_END = "TL_IKET_RANGE_END"
PAYLOAD_U32 = "TL_IKET_EVENT_PAYLOAD_U32"
PAYLOAD_F32 = "TL_IKET_EVENT_PAYLOAD_F32"

# What the calls mean where no IKET session instrumented the source: nothing.
NOOP_SOURCE = f"""#ifndef {EVENT}
#define {EVENT}(ID) ((void)0)
#define {RANGE_END}(ID) ((void)0)
#define {PAYLOAD_U32}(ID, VALUE) ((void)(VALUE))
#define {PAYLOAD_F32}(ID, VALUE) ((void)(VALUE))
#endif"""


@dataclass(frozen=True)
class Event:
    """One registered event: a marker or a range, with its payload type."""

    name: str
    event_id: int
    kind: str  # "mark" | "range"
    range_id: int = 0
    payload_type: str = "NoPayload"
    payload_iket_id: int = 0


@dataclass(frozen=True)
class PayloadSpec:
    """A scalar value recorded with an event: the expression, its dtype and IKET type code."""

    expr: Any
    dtype: str
    iket_id: int


_lock = threading.RLock()
_events: dict = {}  # (kind, name) -> Event
_next_id = [1]
_stacks = threading.local()  # the open ranges of the kernel being built, innermost last


def _open_ranges() -> list:
    if not hasattr(_stacks, "names"):
        _stacks.names = []
    return _stacks.names


def reset() -> None:
    """Forget every registered event; kernels built afterwards number theirs from 1 again."""
    with _lock:
        _events.clear()
        _open_ranges().clear()
        _next_id[0] = 1


def events() -> list:
    """The registered Events, by id."""
    with _lock:
        return sorted(_events.values(), key=lambda e: e.event_id)


def event_table() -> list:
    """One dict per registered event: name, event_id, kind, range_id, payload_type,
    payload_iket_id and runtime_payload_iket_id (0 unless runtime payloads are enabled)."""
    from .session import runtime_payloads_enabled

    on = runtime_payloads_enabled()
    return [{"name": e.name, "event_id": e.event_id, "kind": e.kind, "range_id": e.range_id,
             "payload_type": e.payload_type, "payload_iket_id": e.payload_iket_id,
             "runtime_payload_iket_id": e.payload_iket_id if on else 0} for e in events()]


def payload(expr: Any, dtype: str | None = None) -> PayloadSpec:
    """A payload for `mark` / `range`: `expr` recorded as int32, uint32 or float32 (default: its
    own dtype; a Python int is int32, a float float32, a bool uint32)."""
    name = _payload_dtype(dtype) if dtype is not None else _payload_dtype(_infer_dtype(expr))
    return PayloadSpec(expr=expr, dtype=name, iket_id=PAYLOAD_IKET_IDS[name])


def mark(name: str, payload: Any = None):
    """An instant event at this point of the kernel, recorded by every thread that reaches it.

    Example: `iket.mark("store_index", payload=iket.payload(idx, dtype="int32"))`.
    """
    spec = _as_payload(payload)
    return _call(_register(name, "mark", spec), spec)


def range_push(name: str, payload: Any = None):
    """The start of range `name` (ended by `range_pop`), recorded per thread."""
    spec = _as_payload(payload)
    event = _register(name, "range", spec)
    _open_ranges().append(name)
    return _call(event, spec)


def range_pop(name: str | None = None):
    """The end of the innermost open range (which must be `name` when given)."""
    stack = _open_ranges()
    if not stack:
        raise DSLSyntaxError("iket.range_pop() without an open iket.range_push()")
    started = stack.pop()
    if name is not None and name != started:
        stack.append(started)
        raise DSLSyntaxError(f"iket.range_pop({name!r}) does not match the open range {started!r}")
    with _lock:
        event = _events[("range", started)]
    _fallback()
    return E.Call("extern:" + RANGE_END, (E.const(event.event_id, dt.int32),), dt.as_dtype("handle"))


def range_start(name: str, payload: Any = None):
    """Another name for `range_push`."""
    return range_push(name, payload=payload)


def range_end(name: str | None = None):
    """Another name for `range_pop`."""
    return range_pop(name)


class RangeScope:
    """`with iket.range(name):` in a kernel: the range covers the body. Also usable as an item of
    the kernel's own `with`: `with T.Kernel(n) as bx, iket.range("block"):`."""

    inline_with = True  # the parser enters it around the body (see frontend/parser.stmt_With)

    def __init__(self, name: str, payload: Any = None):
        self.name, self.payload = name, payload
        self.node = self

    def enter(self):
        B.current("iket.range").emit(S.Evaluate(range_push(self.name, payload=self.payload)))

    def exit(self):
        B.current("iket.range").emit(S.Evaluate(range_pop(self.name)))

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.exit()
        return False


def range(name: str, payload: Any = None) -> RangeScope:  # noqa: A001 - the public IKET name
    """A scope whose body is the range `name`: `with iket.range("k_loop"): ...`."""
    return RangeScope(name, payload)


# ----------------------------------------------------------------- internals

def _register(name, kind, spec) -> Event:
    if not isinstance(name, str) or not name:
        raise DSLTypeError(f"iket: an event name must be a non-empty string, got {name!r}")
    if len(name.encode("utf-8")) > MAX_EVENT_NAME_BYTES:
        raise DSLTypeError(f"iket: event name {name!r} is longer than {MAX_EVENT_NAME_BYTES} UTF-8 bytes")
    if not name.isprintable():
        raise DSLTypeError(f"iket: event name {name!r} has non-printable characters")
    ptype = spec.dtype if spec is not None else "NoPayload"
    with _lock:
        event = _events.get((kind, name))
        if event is not None:
            if event.payload_type != ptype:
                raise DSLTypeError(f"iket: event {name!r} was registered with payload type "
                                   f"{event.payload_type!r} and is now used with {ptype!r}")
            return event
        if _next_id[0] == RANGE_END_EVENT_ID:
            _next_id[0] += 1
        if _next_id[0] > 0xFFFF:
            raise DSLTypeError("iket: more than 65535 events registered; call iket.reset()")
        rid = (zlib.crc32(name.encode("utf-8")) or 1) if kind == "range" else 0
        event = Event(name, _next_id[0], kind, rid, ptype, spec.iket_id if spec is not None else 0)
        _next_id[0] += 1
        _events[(kind, name)] = event
        return event


def _call(event: Event, spec: PayloadSpec | None) -> E.Call:
    _fallback()
    ident = E.const(event.event_id, dt.int32)
    handle = dt.as_dtype("handle")
    if spec is None:
        return E.Call("extern:" + EVENT, (ident,), handle)
    value = E.cast(dt.as_dtype(spec.dtype), E.as_expr(spec.expr))
    return E.Call("extern:" + (PAYLOAD_F32 if spec.dtype == "float32" else PAYLOAD_U32), (ident, value), handle)


def _fallback() -> None:
    B.in_kernel("iket.mark / iket.range")
    B.current().emit(ImportSource(NOOP_SOURCE))


def _as_payload(value) -> PayloadSpec | None:
    if value is None or isinstance(value, PayloadSpec):
        return value
    return payload(value)


def _infer_dtype(expr) -> str:
    if isinstance(expr, bool):
        return "uint32"
    if isinstance(expr, int):
        return "int32"
    if isinstance(expr, float):
        return "float32"
    if isinstance(expr, E.Expr):
        return str(expr.dtype)
    raise DSLTypeError(f"iket.payload: cannot infer the dtype of {expr!r}; pass dtype='int32', 'uint32' "
                       "or 'float32'")


def _payload_dtype(dtype) -> str:
    name = {"int": "int32", "uint": "uint32", "float": "float32"}.get(str(dtype).lower(), str(dtype).lower())
    if name not in PAYLOAD_IKET_IDS:
        raise DSLTypeError(f"iket.payload: payloads are int32, uint32 or float32, got {dtype!r}")
    return name
