"""A tiny process pool that survives crashing and hanging tasks.

Each worker is a *spawned* process (never forked: a fork of a process that touched CUDA,
OpenMP or torch's thread pools inherits locks and contexts it cannot use) running `serve`;
a task is (function path, argument). `map_unordered` yields (argument, outcome):

    ("ok", value)       the function returned value
    ("crash", text)     the worker died (e.g. "SIGSEGV", "SIGABRT", "exit code 3"); it is replaced
    ("hang", seconds)   it ran past `timeout`; the worker is killed and replaced
    ("cut", seconds)    it was still running at `hard_deadline`; killed, not a verdict

and, when nothing finished for `tick` seconds, (None, ("tick", busy count)) so a caller can
print progress while long tasks run. A value that is a dict with "retire": True (e.g. its
CUDA context is broken) makes the pool replace that worker. With `deadline` (a
time.monotonic() value) no task starts after it; arguments never started are left out.
Pool(0) runs tasks in this process (no isolation, no hard deadline).

Worker i gets the environment `worker_env(i)` (a dict merged over os.environ at spawn: e.g.
OMP_NUM_THREADS=1 and CUDA_VISIBLE_DEVICES=i % gpus); `threads=1` also caps torch's pool.

    with Pool(2, worker_env=lambda i: {"OMP_NUM_THREADS": "1"}) as p:
        for seed, (kind, value) in p.map_unordered("tilelang.testing.fuzz.cli:run_seed", seeds, 120):
            ...
"""
from __future__ import annotations

import ctypes
import importlib
import multiprocessing as mp
import os
import signal
import time
from multiprocessing.connection import wait

__all__ = ["Pool", "serve", "selftest_task", "describe_exit"]

_DEAD = object()
_READY = "tilelang-fuzz-pool-ready"


def serve(conn, threads: int = 1, preload=()) -> None:
    """Worker loop: import `preload`, say "ready", then receive (target, arg) and send back the
    return value, until None arrives."""
    if threads:
        try:
            import torch

            torch.set_num_threads(threads)
        except Exception:  # noqa: BLE001 - a worker without torch still serves
            pass
    for mod in preload:
        importlib.import_module(mod)
    conn.send(_READY)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        target, arg = msg
        mod, fn = target.split(":")
        conn.send(getattr(importlib.import_module(mod), fn)(arg))


def selftest_task(arg):
    """A task for testing the pool itself: "segv" dereferences NULL, "abort" calls abort(),
    "exit" exits with code 3, "hang" sleeps, anything else comes back as it is."""
    if arg == "segv":
        ctypes.string_at(0)
    elif arg == "abort":
        os.abort()
    elif arg == "exit":
        os._exit(3)
    elif arg == "hang":
        time.sleep(3600)
    return arg


def describe_exit(code) -> str:
    """A worker's exit code as words: a negative code is the signal that killed it."""
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class _Worker:
    """One spawned worker; `ready` once it has imported what it needs (a task's timeout
    counts from when it was sent to a ready worker, never the start-up)."""

    def __init__(self, ctx, env: dict, threads: int, preload=()):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, threads, tuple(preload)), daemon=True)
        self.ready = False
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # spawn passes this process's environment to the child
        try:
            self.proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
        self.task = None
        self.started = 0.0

    def kill(self):
        self.proc.kill()
        self.proc.join(5)

    def stop(self):
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(2)
        if self.proc.is_alive():
            self.kill()


class Pool:
    def __init__(self, jobs: int, worker_env=None, threads: int = 1, preload=()):
        self.ctx = mp.get_context("spawn")
        self.jobs = max(0, jobs)
        self.worker_env = worker_env or (lambda i: {})
        self.threads = threads
        self.preload = tuple(preload)
        self.failed_starts = 0
        self.workers = [self._spawn(i) for i in range(self.jobs)]

    def _spawn(self, i: int) -> _Worker:
        return _Worker(self.ctx, dict(self.worker_env(i)), self.threads, self.preload)

    def _starting(self) -> dict:
        return {w.conn: i for i, w in enumerate(self.workers) if not w.ready}

    def _started(self, conn, i: int) -> None:
        """A message from a worker that is not ready yet: its ready signal, or its death."""
        w = self.workers[i]
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            msg = _DEAD
        if msg == _READY:
            w.ready = True
            return
        w.kill()
        self.failed_starts += 1
        if self.failed_starts > 2 * self.jobs + 2:
            raise RuntimeError(f"pool workers keep dying while starting ({describe_exit(w.proc.exitcode)})")
        self._replace(i)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for w in self.workers:
            if w.task is not None:  # still busy: do not wait for it
                w.kill()
            else:
                w.stop()
        self.workers = []

    def _in_process(self, target, args, deadline):
        mod, fn = target.split(":")
        f = getattr(importlib.import_module(mod), fn)
        for arg in args:
            if deadline is not None and time.monotonic() > deadline:
                return
            yield arg, ("ok", f(arg))

    def _replace(self, i: int) -> None:
        self.workers[i] = self._spawn(i)

    def map_unordered(self, target: str, args, timeout: float, deadline: float | None = None,
                      hard_deadline: float | None = None, tick: float | None = None):
        if not self.workers:
            yield from self._in_process(target, args, deadline)
            return
        todo = list(args)[::-1]
        busy: dict = {}
        last = time.monotonic()
        while todo or busy:
            now = time.monotonic()
            if deadline is not None and now > deadline:
                todo = []
            if hard_deadline is not None and now > hard_deadline:
                for conn, i in list(busy.items()):
                    w = self.workers[i]
                    arg, w.task = w.task, None
                    w.kill()
                    self._replace(i)
                    yield arg, ("cut", now - w.started)
                return
            for i, w in enumerate(self.workers):
                if w.ready and w.task is None and todo:
                    w.task, w.started = todo.pop(), time.monotonic()
                    try:
                        w.conn.send((target, w.task))
                    except (BrokenPipeError, OSError):  # died while idle: replace, retry the task
                        todo.append(w.task)
                        w.task = None
                        w.kill()
                        self._replace(i)
                        continue
                    busy[w.conn] = i
            starting = self._starting()
            ready = wait(list(busy) + list(starting), timeout=0.5)
            for conn in ready:
                if conn in starting:
                    self._started(conn, starting[conn])
                    continue
                i = busy.pop(conn)
                w = self.workers[i]
                arg, w.task = w.task, None
                try:
                    value = conn.recv()
                except (EOFError, OSError):
                    value = _DEAD
                last = time.monotonic()
                if value is not _DEAD:
                    if isinstance(value, dict) and value.get("retire"):
                        w.stop()
                        self._replace(i)
                    yield arg, ("ok", value)
                else:
                    w.proc.join(5)
                    code = w.proc.exitcode
                    self._replace(i)
                    yield arg, ("crash", describe_exit(code))
            now = time.monotonic()
            for conn, i in list(busy.items()):
                w = self.workers[i]
                if now - w.started > timeout:
                    busy.pop(conn)
                    arg, w.task = w.task, None
                    w.kill()
                    self._replace(i)
                    last = now
                    yield arg, ("hang", now - w.started)
            if tick and (busy or todo) and now - last > tick:
                last = now
                yield None, ("tick", len(busy))
