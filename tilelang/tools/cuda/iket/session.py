"""IKET sessions: while one is enabled, every CUDA and C kernel compiled is instrumented.

    with iket.session(output_dir="/tmp/traces", runtime_payloads=True):
        kernel = tilelang.compile(program, out_idx=-1)   # built and compiled inside
    kernel(a, b)                                         # each launch's events are recorded
    iket.trace_files()                                   # -> [.../iket_<kernel>_<pid>_<n>.trace.json]

enable()/disable() nest; the outermost enable registers the instrumenting source callbacks
(engine.callback, CUDA and C) and disable() puts the previous ones back. A kernel keeps the
output directory and payload setting it was compiled with, so launches after the session still
record.
"""
from __future__ import annotations

import threading

from .cli import restore, set_output_dir, snapshot
from .codegen import instrument
from .frontend import events, reset

_lock = threading.RLock()
_depth = [0]
_previous: dict = {}  # language -> the callback an enable() replaced
_payloads = [False]


def enable_runtime_payloads() -> None:
    """Record payload values in kernels compiled from now on."""
    _payloads[0] = True


def disable_runtime_payloads() -> None:
    """Record events without their payload values in kernels compiled from now on."""
    _payloads[0] = False


def runtime_payloads_enabled() -> bool:
    return _payloads[0]


def _postproc(language):
    def run(code, target):
        prev = _previous.get(language)
        if prev is not None:
            code = prev(code, target)
        return instrument(code, events(), runtime_payloads=runtime_payloads_enabled(),
                          language="cuda" if language == "cuda" else "c")
    run.__name__ = f"iket_{language}_postproc"
    return run


def enable(*, override: bool = True) -> None:
    """Instrument the kernels compiled from now on (nests with `disable`). The previous source
    callbacks still run first; override=False refuses to enable over one."""
    from ....engine import callback as cb

    with _lock:
        _depth[0] += 1
        if _depth[0] > 1:
            return
        current = cb.registered()
        try:
            for lang, register in (("cuda", cb.register_cuda_postproc), ("c", cb.register_c_postproc)):
                if lang in current and not override:
                    raise RuntimeError(f"iket.enable(override=False): a {lang} post-processing callback "
                                       f"({current[lang].__name__}) is already registered")
                _previous[lang] = current.get(lang)
                register(_postproc(lang), True)
        except Exception:
            _depth[0] -= 1
            _restore_callbacks()
            raise


def disable(*, restore: bool = True) -> None:
    """Undo one `enable`; the last one unregisters IKET's callbacks (restore=True: the ones it
    replaced come back)."""
    with _lock:
        if not _depth[0]:
            return
        _depth[0] -= 1
        if not _depth[0]:
            _restore_callbacks(restore)


def _restore_callbacks(put_back: bool = True) -> None:
    from ....engine import callback as cb

    for lang in ("cuda", "c"):
        prev = _previous.pop(lang, None)
        if put_back and prev is not None:
            (cb.register_cuda_postproc if lang == "cuda" else cb.register_c_postproc)(prev, True)
        else:
            cb.unregister_postproc(lang)


def is_enabled() -> bool:
    return _depth[0] > 0


class Session:
    """The context manager `session()` returns (one entry at a time)."""

    def __init__(self, *, reset_events=True, override=True, disable_on_exit=True, output_dir=None,
                 runtime_payloads=None, disable_cache=True):
        self.reset_events, self.override, self.disable_on_exit = reset_events, override, disable_on_exit
        self.output_dir, self.runtime_payloads, self.disable_cache = output_dir, runtime_payloads, disable_cache
        self._saved = None
        self._enabled = False

    def __enter__(self):
        from .... import cache

        if self._saved is not None:
            raise RuntimeError("an iket session object cannot be entered twice at once")
        self._saved = (snapshot(), runtime_payloads_enabled(), cache.is_cache_enabled())
        try:
            if self.output_dir is not None:
                set_output_dir(self.output_dir)
            if self.runtime_payloads is not None:
                _payloads[0] = bool(self.runtime_payloads)
            if self.disable_cache:
                cache.disable_cache()
            enable(override=self.override)
            self._enabled = True
            if self.reset_events:
                reset()
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        from .... import cache
        from .runtime import flush

        try:
            if self._enabled and self.disable_on_exit:
                disable(restore=True)
            flush()
        finally:
            self._enabled = False
            out, payloads, cached = self._saved
            restore(out)
            _payloads[0] = payloads
            if self.disable_cache:
                (cache.enable_cache if cached else cache.disable_cache)()
            self._saved = None
        return False


def session(*, reset_events: bool = True, override: bool = True, disable_on_exit: bool = True,
            output_dir=None, runtime_payloads: bool | None = None, disable_cache: bool = True) -> Session:
    """A scope that instruments the kernels built and compiled in it: sets the output directory
    and payload setting, turns the disk cache off (disable_cache), enables IKET and (reset_events)
    numbers events from 1; exit puts everything back."""
    return Session(reset_events=reset_events, override=override, disable_on_exit=disable_on_exit,
                   output_dir=output_dir, runtime_payloads=runtime_payloads, disable_cache=disable_cache)
