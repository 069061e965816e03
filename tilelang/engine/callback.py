"""Source post-processing hooks: edit generated code before it is compiled.

A callback takes `(code: str, target)` and returns the code to compile. The CUDA one sees
each CUDA kernel's source after code generation and before NVRTC (and what it returns is
what `kernel.get_kernel_source()` shows); the C one sees the C source of the CPU backend
before the C compiler. One callback per language: registering replaces the previous one,
unless `override=False`, which refuses to. HIP and Metal callbacks are kept for source
compatibility but never called: this TileLang has no HIP or Metal backend.

    @register_cuda_postproc_callback
    def tilelang_callback_cuda_postproc(code, target):
        return code.replace("__launch_bounds__(128, 1)", "__launch_bounds__(128, 2)")
"""
from __future__ import annotations

from typing import Callable

from ..errors import TileLangError

__all__ = ["register_cuda_postproc", "register_hip_postproc", "register_c_postproc", "register_metal_postproc",
           "register_cuda_postproc_callback", "register_hip_postproc_callback", "register_c_postproc_callback",
           "register_metal_postproc_callback", "unregister_postproc", "registered", "postprocess"]

_LANGS = ("cuda", "hip", "c", "metal")
_callbacks: dict[str, Callable] = {}


def _register(lang: str, func: Callable, override: bool) -> None:
    if not callable(func):
        raise TypeError(f"register_{lang}_postproc: expected a function (code, target) -> code, got {func!r}")
    if lang in _callbacks and not override:
        raise TileLangError(f"a {lang} post-processing callback is already registered "
                            f"({_callbacks[lang].__name__}); pass override=True to replace it")
    _callbacks[lang] = func


def register_cuda_postproc(func: Callable, override: bool = True) -> None:
    """Call `func(code, target) -> code` on every generated CUDA source before NVRTC compiles it."""
    _register("cuda", func, override)


def register_hip_postproc(func: Callable, override: bool = True) -> None:
    """Kept for source compatibility; never called (no HIP backend here)."""
    _register("hip", func, override)


def register_c_postproc(func: Callable, override: bool = True) -> None:
    """Call `func(code, target) -> code` on the CPU backend's C source before it is compiled."""
    _register("c", func, override)


def register_metal_postproc(func: Callable, override: bool = True) -> None:
    """Kept for source compatibility; never called (no Metal backend here)."""
    _register("metal", func, override)


def _decorator(register: Callable, func, override: bool):
    """`@deco`, `@deco()` and `@deco(override=False)` (or `@deco(False)`) all work."""
    if callable(func):
        register(func, override)
        return func
    if func is None or isinstance(func, bool):
        chosen = func if isinstance(func, bool) else override

        def wrap(fn):
            register(fn, chosen)
            return fn

        return wrap
    raise TypeError(f"{register.__name__}_callback: use it as @decorator, @decorator() or "
                    f"@decorator(override=...), not with {func!r}")


def register_cuda_postproc_callback(func=None, override: bool = True):
    """Decorator form of `register_cuda_postproc`."""
    return _decorator(register_cuda_postproc, func, override)


def register_hip_postproc_callback(func=None, override: bool = True):
    """Decorator form of `register_hip_postproc` (never called here)."""
    return _decorator(register_hip_postproc, func, override)


def register_c_postproc_callback(func=None, override: bool = True):
    """Decorator form of `register_c_postproc`."""
    return _decorator(register_c_postproc, func, override)


def register_metal_postproc_callback(func=None, override: bool = True):
    """Decorator form of `register_metal_postproc` (never called here)."""
    return _decorator(register_metal_postproc, func, override)


def unregister_postproc(lang: str) -> None:
    """Remove the `lang` ("cuda", "c", ...) callback, if any."""
    if lang not in _LANGS:
        raise ValueError(f"unregister_postproc: lang must be one of {_LANGS}, got {lang!r}")
    _callbacks.pop(lang, None)


def registered() -> dict:
    """{lang: callback} registered now (a copy), so a tool can chain to or restore them."""
    return dict(_callbacks)


def postprocess(lang: str, code: str, target) -> str:
    """What the backends call: `code` passed through the `lang` callback (unchanged without one)."""
    fn = _callbacks.get(lang)
    if fn is None:
        return code
    out = fn(code, target)
    if not isinstance(out, str):
        raise TileLangError(f"the {lang} post-processing callback {getattr(fn, '__name__', fn)!r} returned "
                            f"{type(out).__name__}; it must return the (edited) source code as a str")
    return out
