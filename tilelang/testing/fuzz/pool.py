"""A tiny process pool that survives crashing and hanging tasks.

Each worker is a spawned process running `serve`; a task is (function path, argument).
`map_unordered` yields (argument, outcome) where outcome is ("ok", value), ("crash",
exit code) when the worker died, or ("hang", seconds) when it ran past the timeout (the
worker is killed and replaced). The stdlib pools cannot tell a dead worker from a slow one.
A value that is a dict with "retire": True (e.g. its CUDA context is broken) makes the pool
replace that worker. With `deadline` (a time.monotonic() value) no task starts after it;
the arguments never started are left out. Pool(0) runs tasks in this process (no isolation).

    with Pool(2) as p:
        for seed, (kind, value) in p.map_unordered("tilelang.testing.fuzz.cli:run_seed", seeds, 120):
            ...
"""
from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait

__all__ = ["Pool", "serve"]

_DEAD = object()


def serve(conn) -> None:
    """Worker loop: receive (target, arg), send back the return value, until None arrives."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        target, arg = msg
        mod, fn = target.split(":")
        conn.send(getattr(importlib.import_module(mod), fn)(arg))


class _Worker:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.task = None
        self.started = 0.0

    def kill(self):
        self.proc.kill()
        self.proc.join(5)


class Pool:
    def __init__(self, jobs: int):
        self.ctx = mp.get_context("spawn")
        self.jobs = max(0, jobs)
        self.workers = [_Worker(self.ctx) for _ in range(self.jobs)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for w in self.workers:
            try:
                w.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            w.proc.join(2)
            if w.proc.is_alive():
                w.kill()

    def _in_process(self, target, args, deadline):
        mod, fn = target.split(":")
        f = getattr(importlib.import_module(mod), fn)
        for arg in args:
            if deadline is not None and time.monotonic() > deadline:
                return
            yield arg, ("ok", f(arg))

    def map_unordered(self, target: str, args, timeout: float, deadline: float | None = None):
        if not self.workers:
            yield from self._in_process(target, args, deadline)
            return
        todo = list(args)[::-1]
        busy: dict = {}
        while todo or busy:
            if deadline is not None and time.monotonic() > deadline:
                todo = []
            for i, w in enumerate(self.workers):
                if w.task is None and todo:
                    w.task, w.started = todo.pop(), time.monotonic()
                    w.conn.send((target, w.task))
                    busy[w.conn] = i
            ready = wait(list(busy), timeout=1.0)
            for conn in ready:
                i = busy.pop(conn)
                w = self.workers[i]
                arg, w.task = w.task, None
                try:
                    value = conn.recv()
                except (EOFError, OSError):
                    value = _DEAD
                if value is not _DEAD:
                    if isinstance(value, dict) and value.get("retire"):
                        w.conn.send(None)
                        w.proc.join(10)
                        if w.proc.is_alive():
                            w.kill()
                        self.workers[i] = _Worker(self.ctx)
                    yield arg, ("ok", value)
                else:
                    w.proc.join(5)
                    code = w.proc.exitcode
                    self.workers[i] = _Worker(self.ctx)
                    yield arg, ("crash", code)
            now = time.monotonic()
            for conn, i in list(busy.items()):
                w = self.workers[i]
                if now - w.started > timeout:
                    busy.pop(conn)
                    arg = w.task
                    w.kill()
                    self.workers[i] = _Worker(self.ctx)
                    yield arg, ("hang", now - w.started)
