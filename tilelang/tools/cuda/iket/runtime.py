"""Host side of IKET: read each launch's records back and write the trace files.

A backend gives every instrumented kernel a `Tracer` (`attach`); after each launch it calls
`collect_cuda` / `collect_cpu`, which waits for the kernel, copies its records (see codegen.py
for the record layout), resets the counter and decodes them into the launch's markers and
ranges. Files are written by `flush` (from `iket.trace_files()`, a session's exit, and the
process's exit) into the output directory the kernel was compiled with, one per kernel:

    <dir>/iket_<kernel>_<pid>_<n>.trace.json
    {"format": "tilelang-iket-v1", "kernel": ..., "backend": "cuda" | "cpu", "events": [...],
     "launches": [{"launch": 0, "grid": [..], "block": [..], "records": 96, "dropped": 0,
                   "markers": [{"name", "event_id", "t_ns", "block", "thread", "sm" | "worker",
                                "payload"?}],
                   "ranges": [{"name", "event_id", "range_id", "block", "thread", "start_ns",
                               "end_ns", "duration_ns", "payload"?}]}],
     "traceEvents": [...]}          # the same events for Perfetto / chrome://tracing

Ranges pair a begin with the next end of the same event on the same block and thread (CUDA)
or block (CPU), innermost first. At most MAX_LAUNCHES launches per kernel are kept.
"""
from __future__ import annotations

import atexit
import ctypes
import itertools
import json
import os
import struct
import threading

from .codegen import CAPACITY, FLOAT_BIT, HAS_PAYLOAD_BIT, ID_MASK, RANGE_END_BIT, RECORD_WORDS, read_meta
from .cli import output_dir

MAX_LAUNCHES = 64
NO_THREAD = 0xFFFFFFFF
_logs: list = []  # every Tracer of this process (their launches outlive the kernels)
_lock = threading.Lock()
_serial = itertools.count()


class Tracer:
    """The recorded launches of one instrumented kernel."""

    def __init__(self, source: str, entry: str, backend: str):
        meta = read_meta(source)
        if meta is None:
            raise ValueError(f"iket: the source of {entry} is not instrumented")
        self.events = {e["event_id"]: e for e in meta["events"]}
        self.entry, self.backend = entry, backend
        self.directory = output_dir()  # where this kernel's traces go: fixed when it is compiled
        self.launches: list = []
        self.skipped = 0
        self.dirty = False
        self.path = None
        if self.directory is not None:
            self.path = self.directory / f"iket_{entry}_{os.getpid()}_{next(_serial)}.trace.json"
        self._globals = {}  # CUDA module handle -> (count ptr, records ptr)
        with _lock:
            _logs.append(self)

    # ---- readout
    def collect_cuda(self, module_handle, grid, block, stream=None) -> None:
        """After a launch on `stream`: its records, and the counter reset for the next one."""
        import numpy as np
        from cuda.bindings import driver as cu

        from ....backend.cuda.driver import check, current_stream

        if stream is None:
            stream = current_stream()
        key = int(module_handle)
        if key not in self._globals:
            count_ptr = check(cu.cuModuleGetGlobal(module_handle, b"tl_iket_count"), "cuModuleGetGlobal")[0]
            rec_ptr = check(cu.cuModuleGetGlobal(module_handle, b"tl_iket_records"), "cuModuleGetGlobal")[0]
            self._globals[key] = (count_ptr, rec_ptr)
        count_ptr, rec_ptr = self._globals[key]
        s = cu.CUstream(stream)
        check(cu.cuStreamSynchronize(s), "cuStreamSynchronize (iket readout)")
        if len(self.launches) < MAX_LAUNCHES:
            n = ctypes.c_uint32(0)
            check(cu.cuMemcpyDtoH(ctypes.addressof(n), count_ptr, 4), "cuMemcpyDtoH (iket count)")
            kept = min(n.value, CAPACITY)
            words = np.zeros(kept * RECORD_WORDS, dtype=np.uint32)
            if kept:
                check(cu.cuMemcpyDtoH(words.ctypes.data, rec_ptr, words.nbytes), "cuMemcpyDtoH (iket records)")
            self.add(words.reshape(kept, RECORD_WORDS), n.value, grid, block)
        else:
            self.skipped += 1
        check(cu.cuMemsetD32Async(count_ptr, 0, 1, s), "cuMemsetD32Async (iket count)")
        check(cu.cuStreamSynchronize(s), "cuStreamSynchronize (iket reset)")

    def collect_cpu(self, cdll, grid, block) -> None:
        """After a CPU launch: the records of the library's buffer, and its counter reset."""
        import numpy as np

        count = ctypes.c_uint32.in_dll(cdll, "tl_iket_count")
        n = count.value
        if len(self.launches) < MAX_LAUNCHES:
            kept = min(n, CAPACITY)
            buf = (ctypes.c_uint32 * (kept * RECORD_WORDS)).in_dll(cdll, "tl_iket_records")
            words = np.ctypeslib.as_array(buf).copy().reshape(kept, RECORD_WORDS)
            self.add(words, n, grid, block)
        else:
            self.skipped += 1
        count.value = 0

    @staticmethod
    def static_launch_dims(func) -> tuple:
        """(grid, block) of a single-kernel function's `T.Kernel`, None where not constant."""
        from ....arith.simplify import const_int
        from ....ir import stmt as S
        from ....ir.visitor import collect

        ks = collect(func.body, lambda n: isinstance(n, S.KernelLaunch))
        if len(ks) != 1:
            return None, None
        dims = [[const_int(d) if not isinstance(d, int) else d for d in ext] for ext in (ks[0].grid, ks[0].threads)]
        return tuple(None if any(d is None for d in ds) else ds for ds in dims)

    # ---- decoding
    def add(self, words, count: int, grid, block) -> None:
        """Decode one launch's records (uint32 [n, 8], in slot order; `count` were written)."""
        markers, ranges, open_ranges = [], [], {}
        for rec in words.tolist():
            word = rec[4]
            event = self.events.get(word & ID_MASK)
            if event is None:
                continue
            thread = None if rec[3] == NO_THREAD else rec[3]
            base = {"name": event["name"], "event_id": event["event_id"]}
            t = rec[0] | (rec[1] << 32)
            payload = _payload(word, rec[5], event["payload_type"])
            if word & RANGE_END_BIT:
                stack = open_ranges.get((rec[2], thread, event["event_id"]))
                if stack:
                    r = stack.pop()
                    r["end_ns"], r["duration_ns"] = t, t - r["start_ns"]
                continue
            unit = {"sm": rec[6]} if self.backend == "cuda" else {"worker": rec[6]}
            if event["kind"] == "range":
                r = {**base, "range_id": event["range_id"], "block": rec[2], "thread": thread, "start_ns": t,
                     "end_ns": None, "duration_ns": None, **unit}
                if payload is not None:
                    r["payload"] = payload
                ranges.append(r)
                open_ranges.setdefault((rec[2], thread, event["event_id"]), []).append(r)
            else:
                m = {**base, "t_ns": t, "block": rec[2], "thread": thread, **unit}
                if payload is not None:
                    m["payload"] = payload
                markers.append(m)
        self.launches.append({"launch": len(self.launches), "grid": _dims(grid), "block": _dims(block),
                              "records": len(words), "dropped": max(0, count - len(words)),
                              "markers": markers, "ranges": ranges})
        self.dirty = True

    # ---- output
    def document(self) -> dict:
        """The trace file's content."""
        return {"format": "tilelang-iket-v1", "kernel": self.entry, "backend": self.backend, "pid": os.getpid(),
                "events": sorted(self.events.values(), key=lambda e: e["event_id"]),
                "launches": self.launches, "launches_not_recorded": self.skipped,
                "displayTimeUnit": "ns", "traceEvents": self.chrome_events()}

    def chrome_events(self) -> list:
        """Perfetto / chrome://tracing events: one process per (launch, block), one track per thread."""
        starts = [m["t_ns"] for L in self.launches for m in L["markers"]]
        starts += [r["start_ns"] for L in self.launches for r in L["ranges"]]
        if not starts:
            return []
        t0, out = min(starts), []
        for L in self.launches:
            for m in L["markers"]:
                out.append({"name": m["name"], "ph": "i", "s": "t", "ts": (m["t_ns"] - t0) / 1e3,
                            "pid": _pid(L, m), "tid": _tid(m), "args": _args(L, m)})
            for r in L["ranges"]:
                if r["end_ns"] is not None:
                    out.append({"name": r["name"], "ph": "X", "ts": (r["start_ns"] - t0) / 1e3,
                                "dur": r["duration_ns"] / 1e3, "pid": _pid(L, r), "tid": _tid(r), "args": _args(L, r)})
        return out

    def write(self) -> None:
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.document()))
        tmp.replace(self.path)
        self.dirty = False


def flush() -> None:
    """Write the trace file of every kernel with launches not yet written."""
    with _lock:
        logs = list(_logs)
    for log in logs:
        log.write()


def attach(source: str, entry: str, backend: str) -> Tracer | None:
    """A Tracer for an instrumented kernel source, None for any other."""
    if read_meta(source) is None:
        return None
    return Tracer(source, entry, backend)


def _dims(d):
    return None if d is None else [int(x) for x in d]


def _payload(word: int, bits: int, ptype: str):
    if not word & HAS_PAYLOAD_BIT:
        return None
    if word & FLOAT_BIT:
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    if ptype == "int32":
        return bits - (1 << 32) if bits & 0x80000000 else bits
    return bits


def _pid(launch, ev) -> int:
    return launch["launch"] * 1_000_000 + ev["block"] + 1


def _tid(ev) -> int:
    return ev["thread"] if ev["thread"] is not None else ev.get("worker", 0)


def _args(launch, ev) -> dict:
    args = {"launch": launch["launch"], "block": ev["block"]}
    if "payload" in ev:
        args["payload"] = ev["payload"]
    return args


atexit.register(flush)
