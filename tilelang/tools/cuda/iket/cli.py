"""Where IKET writes: the output directory (TL_IKET_OUTPUT_DIR), trace files, profiler command.

    iket.set_output_dir("/tmp/traces")      # also exported as TL_IKET_OUTPUT_DIR
    iket.output_path("kernel.cu")           # /tmp/traces/kernel.cu (directory created)
    iket.trace_files()                      # /tmp/traces/*.trace.json, largest first

`trace_files` first writes the traces of launches recorded so far (runtime.flush), so a program
can read its own traces right after running its kernels.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path

ENV_OUTPUT_DIR = "TL_IKET_OUTPUT_DIR"  # the public IKET's variable; shared with its profiler
_configured: list = [None]  # the directory set_output_dir chose (None: only the environment)


def set_output_dir(path) -> Path | None:
    """Make `path` (created) the IKET output directory of this process; None clears it."""
    if path is None:
        _configured[0] = None
        os.environ.pop(ENV_OUTPUT_DIR, None)
        return None
    p = Path(path).expanduser().absolute()
    p.mkdir(parents=True, exist_ok=True)
    _configured[0] = p
    os.environ[ENV_OUTPUT_DIR] = str(p)
    return p


def output_dir(default=None) -> Path | None:
    """The configured output directory, else TL_IKET_OUTPUT_DIR, else `default` (absolute), else None."""
    if _configured[0] is not None:
        return _configured[0]
    env = os.environ.get(ENV_OUTPUT_DIR)
    if env:
        return Path(env).expanduser().absolute()
    return Path(default).expanduser().absolute() if default is not None else None


def output_path(name: str, *, directory=None) -> Path:
    """`name` inside the output directory (or `directory` when none is configured), created."""
    base = output_dir(directory)
    if base is None:
        raise RuntimeError("iket.output_path: no IKET output directory is configured; use "
                           "iket.session(output_dir=...), iket.set_output_dir or TL_IKET_OUTPUT_DIR")
    base.mkdir(parents=True, exist_ok=True)
    return base / name


def trace_files(*, directory=None) -> list:
    """The `*.trace.json` files in the output directory, largest first (after writing pending traces)."""
    from .runtime import flush

    flush()
    base = output_dir(directory)
    if base is None or not base.exists():
        return []
    return sorted(base.glob("*.trace.json"), key=lambda p: p.stat().st_size, reverse=True)


def profile_command(command, *, directory, postprocess: str = "all", clobber: bool = True) -> str:
    """The shell command that runs `command` under the external IKET profiler (`python -m
    iket.cli.main`), exporting to `directory`; for users who have that tool installed."""
    parts = ["python", "-m", "iket.cli.main", "--output-dir", str(Path(directory).expanduser())]
    if clobber:
        parts.append("--clobber")
    parts += ["profile", "--postprocess", postprocess, "--"]
    head = " ".join(shlex.quote(p) for p in parts)
    if isinstance(command, str):
        return f"{head} {command}"
    return " ".join([head] + [shlex.quote(str(c)) for c in command])


def snapshot() -> tuple:
    """The output-directory state, for `restore` (what a session puts back on exit)."""
    return _configured[0], os.environ.get(ENV_OUTPUT_DIR)


def restore(state: tuple) -> None:
    _configured[0], env = state
    if env is None:
        os.environ.pop(ENV_OUTPUT_DIR, None)
    else:
        os.environ[ENV_OUTPUT_DIR] = env
