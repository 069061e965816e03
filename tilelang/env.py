"""Every environment variable TileLang reads, declared in one place as typed accessors.

Why one module: passes and backends must not call `os.environ` themselves (STYLE.md), so a
reader can see here, and only here, every knob that changes what the compiler does. Each
accessor reads the environment *at call time*, never at import, so tests can
`monkeypatch.setenv(...)` and a long-lived process picks up changes.

Example::

    from tilelang import env
    env.cache_dir()        # PosixPath('/home/me/.cache/tilelang')
    env.cache_disabled()   # False unless TILELANG_DISABLE_CACHE=1
    print(env.describe())  # a table of every variable, its value and its meaning
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "EnvVar", "VARIABLES", "cache_dir", "default_target", "dump_ir_dir", "cache_disabled",
    "c_compiler", "show_internal_frames", "describe", "perf_regression_format", "perf_regression_only",
    "bench_max_calls",
]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


@dataclass(frozen=True)
class EnvVar:
    """A declared variable: its name, what it does and its default as the user would read it."""

    name: str
    doc: str
    default: str

    def raw(self) -> str | None:
        """The variable's text, or None when unset or empty (empty means 'use the default')."""
        value = os.environ.get(self.name)
        if value is None or value.strip() == "":
            return None
        return value.strip()


CACHE_DIR = EnvVar(
    "TILELANG_CACHE_DIR",
    "Directory of the on-disk compile cache (compiled kernels, probe results).",
    "$XDG_CACHE_HOME/tilelang, else ~/.cache/tilelang",
)
DEFAULT_TARGET = EnvVar(
    "TILELANG_DEFAULT_TARGET",
    "Target used when a kernel is compiled with target='auto' or none ('cuda', 'cpu', 'auto').",
    "auto",
)
DUMP_IR = EnvVar(
    "TL_DUMP_IR",
    "Directory: when set, every pass writes the IR it produced there, one file per pass.",
    "unset (no dump)",
)
DISABLE_CACHE = EnvVar(
    "TILELANG_DISABLE_CACHE",
    "'1' (or true/yes/on): never read or write the disk cache; build into a temp dir each time.",
    "0",
)
CC = EnvVar(
    "TILELANG_CC",
    "C compiler for the CPU backend (a name on PATH or a path).",
    "cc, else gcc",
)

SHOW_INTERNAL_FRAMES = EnvVar(
    "TILELANG_SHOW_INTERNAL_FRAMES",
    "'1': keep the compiler's own frames in tracebacks of user errors (hidden by default).",
    "0",
)

PERF_REGRESSION_FORMAT = EnvVar(
    "TL_PERF_REGRESSION_FORMAT",
    "tilelang.testing.regression() output: 'text' (one 'name: latency' line per case) or 'json' (one "
    "__TILELANG_PERF_RESULTS_JSON__=[...] line for a collecting parent process).",
    "text",
)
PERF_REGRESSION_ONLY = EnvVar(
    "TL_PERF_REGRESSION_ONLY",
    "tilelang.testing.regression(): run only the cases matching these patterns (a JSON list or "
    "comma-separated; fnmatch globs or substrings, case-insensitive).",
    "unset (every case)",
)
KERNEL_CACHE = EnvVar(
    "TILELANG_KERNEL_CACHE",
    "'0' (or false/no/off): @tilelang.jit factories always run and lower in a new process (the disk "
    "cache of compiled code still applies); '1': a warm process loads the kernel without either.",
    "1",
)

AUTO_TUNING_CPU_UTILITIES = EnvVar(
    "TILELANG_AUTO_TUNING_CPU_UTILITIES",
    "Fraction of the CPUs that compile autotuning configs at once (threads), when CPU_COUNTS is unset.",
    "0.9",
)
AUTO_TUNING_CPU_COUNTS = EnvVar(
    "TILELANG_AUTO_TUNING_CPU_COUNTS",
    "Number of threads compiling autotuning configs at once; -1: from CPU_UTILITIES.",
    "-1",
)
AUTO_TUNING_MAX_CPU_COUNT = EnvVar(
    "TILELANG_AUTO_TUNING_MAX_CPU_COUNT",
    "Upper bound on the threads compiling autotuning configs; -1: no bound.",
    "-1",
)

PASS_CONFIGS = EnvVar(
    "TILELANG_PASS_CONFIGS",
    "Pass configs forced onto every kernel built in this process, over the program's own: "
    "'key=value,key=value' (values: true/false, integers, floats, else text), e.g. "
    "'tl.disable_tma_lower=true'. Ours, for A/B runs of unchanged programs; part of the cache key.",
    "unset (the programs' own)",
)

BENCH_MAX_CALLS = EnvVar(
    "TILELANG_BENCH_MAX_CALLS",
    "Cap on the calls of each do_bench pass (estimate, warmup, timed; at least one timed call), for runs "
    "under tools that slow each launch's host side (compute-sanitizer): the figures are then not "
    "measurements. Ours; scripts/sanitize.py sets 3.",
    "unset (no cap)",
)

VARIABLES: tuple[EnvVar, ...] = (CACHE_DIR, DEFAULT_TARGET, DUMP_IR, DISABLE_CACHE, CC, SHOW_INTERNAL_FRAMES,
                                 PERF_REGRESSION_FORMAT, PERF_REGRESSION_ONLY)
VARIABLES += (KERNEL_CACHE, AUTO_TUNING_CPU_UTILITIES, AUTO_TUNING_CPU_COUNTS, AUTO_TUNING_MAX_CPU_COUNT,
              PASS_CONFIGS, BENCH_MAX_CALLS)


def _parse_bool(var: EnvVar, default: bool) -> bool:
    """Read a flag; an unrecognised word is an error rather than a silent guess."""
    value = var.raw()
    if value is None:
        return default
    low = value.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    from tilelang.errors import TileLangError

    raise TileLangError(
        f"{var.name}={value!r} is not a flag: expected one of 1/0, true/false, yes/no, on/off."
    )


def cache_dir() -> Path:
    """Root of the disk cache: TILELANG_CACHE_DIR, else $XDG_CACHE_HOME/tilelang, else
    ~/.cache/tilelang (the XDG convention, so `rm -rf ~/.cache` clears it)."""
    value = CACHE_DIR.raw()
    if value is not None:
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    # NOTE: the XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "tilelang"
    return Path.home() / ".cache" / "tilelang"


def default_target() -> str:
    """The target name for target='auto' resolution ('auto' lets the backend pick cuda or cpu)."""
    value = DEFAULT_TARGET.raw()
    return "auto" if value is None else value.lower()


def dump_ir_dir() -> Path | None:
    """Directory for per-pass IR dumps, or None when dumping is off."""
    value = DUMP_IR.raw()
    return None if value is None else Path(value).expanduser()


def cache_disabled() -> bool:
    """True when TILELANG_DISABLE_CACHE asks for every build to start from scratch."""
    return _parse_bool(DISABLE_CACHE, default=False)


def kernel_cache_enabled() -> bool:
    """False when TILELANG_KERNEL_CACHE (or TILELANG_DISABLE_CACHE) turns the kernel cache off."""
    return not cache_disabled() and _parse_bool(KERNEL_CACHE, default=True)


def _number(var: EnvVar, kind):
    value = var.raw()
    if value is None:
        return kind(var.default)
    try:
        return kind(value)
    except ValueError:
        from tilelang.errors import TileLangError

        raise TileLangError(f"{var.name}={value!r} is not a number (default {var.default})") from None


def autotune_compile_workers() -> int:
    """Threads that compile autotuning configs at once (the public TileLang's three variables):
    CPU_COUNTS when > 0, else CPU_UTILITIES x the CPUs; at most MAX_CPU_COUNT when > 0; at least 1."""
    cpus = os.cpu_count() or 1
    counts = _number(AUTO_TUNING_CPU_COUNTS, int)
    n = min(counts, cpus) if counts > 0 else int(cpus * _number(AUTO_TUNING_CPU_UTILITIES, float))
    cap = _number(AUTO_TUNING_MAX_CPU_COUNT, int)
    if cap > 0:
        n = min(n, cap)
    return max(1, n)


def show_internal_frames() -> bool:
    """True when tracebacks of user errors should keep the compiler's frames."""
    return _parse_bool(SHOW_INTERNAL_FRAMES, default=False)


def c_compiler() -> str:
    """The C compiler command for the CPU backend: TILELANG_CC, else `cc`, else `gcc`.

    Returns the name as given (not resolved), so error messages show what the user typed.
    """
    value = CC.raw()
    if value is not None:
        return value
    return "cc" if shutil.which("cc") else "gcc"


def perf_regression_format() -> str:
    """'json' or 'text' (the default); anything else is an error naming the choices."""
    value = (PERF_REGRESSION_FORMAT.raw() or "text").lower()
    if value not in ("text", "json"):
        from tilelang.errors import TileLangError

        raise TileLangError(f"{PERF_REGRESSION_FORMAT.name}={value!r}: expected 'text' or 'json'")
    return value


def perf_regression_only() -> list[str]:
    """The case filters of TL_PERF_REGRESSION_ONLY (empty: run every case)."""
    import json

    value = PERF_REGRESSION_ONLY.raw()
    if value is None:
        return []
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value.split(",")
    if isinstance(parsed, str):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return []
    return [str(p).strip() for p in parsed if str(p).strip()]


def bench_max_calls() -> int | None:
    """TILELANG_BENCH_MAX_CALLS as a positive int, or None when unset; anything else is an error."""
    value = BENCH_MAX_CALLS.raw()
    if value is None:
        return None
    try:
        cap = int(value)
    except ValueError:
        cap = 0
    if cap < 1:
        raise ValueError(f"{BENCH_MAX_CALLS.name} must be a positive integer, got {value!r}")
    return cap


def pass_config_overrides() -> dict:
    """TILELANG_PASS_CONFIGS as a dict ({} when unset). A malformed item is an error naming it."""
    value = PASS_CONFIGS.raw()
    out: dict = {}
    if value is None:
        return out
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key:
            from tilelang.errors import TileLangError

            raise TileLangError(f"{PASS_CONFIGS.name}: expected 'key=value' items separated by commas, got {item!r}")
        low = text.lower()
        if low in ("true", "yes", "on"):
            out[key] = True
        elif low in ("false", "no", "off"):
            out[key] = False
        else:
            for kind in (int, float):
                try:
                    out[key] = kind(text)
                    break
                except ValueError:
                    continue
            else:
                out[key] = text
    return out


def describe() -> str:
    """A readable table of every variable, its current value and what it does."""
    lines = []
    for var in VARIABLES:
        current = os.environ.get(var.name)
        shown = repr(current) if current is not None else f"(unset; default {var.default})"
        lines.append(f"{var.name} = {shown}\n    {var.doc}")
    return "\n".join(lines)


def _public_values() -> dict:
    """Public TileLang reads variables as `tilelang.env.NAME` (a string): their current values."""
    return {
        CACHE_DIR.name: lambda: str(cache_dir()),
        DEFAULT_TARGET.name: default_target,
        DISABLE_CACHE.name: lambda: "1" if cache_disabled() else "0",
        DUMP_IR.name: lambda: DUMP_IR.raw(),
        CC.name: c_compiler,
        SHOW_INTERNAL_FRAMES.name: lambda: "1" if show_internal_frames() else "0",
        PERF_REGRESSION_FORMAT.name: perf_regression_format,
        PERF_REGRESSION_ONLY.name: lambda: PERF_REGRESSION_ONLY.raw(),
        KERNEL_CACHE.name: lambda: "1" if kernel_cache_enabled() else "0",
        PASS_CONFIGS.name: lambda: PASS_CONFIGS.raw(),
        BENCH_MAX_CALLS.name: lambda: BENCH_MAX_CALLS.raw(),
        **{v.name: (lambda v=v: v.raw() or v.default)
           for v in (AUTO_TUNING_CPU_UTILITIES, AUTO_TUNING_CPU_COUNTS, AUTO_TUNING_MAX_CPU_COUNT)},
    }


def __getattr__(name: str):
    # NOTE: read at access time, like every accessor here: `tilelang.env.TILELANG_CACHE_DIR`.
    getter = _public_values().get(name)
    if getter is None:
        raise AttributeError(f"module 'tilelang.env' has no attribute {name!r}; the variables TileLang reads "
                             f"are {', '.join(v.name for v in VARIABLES)}")
    return getter()
