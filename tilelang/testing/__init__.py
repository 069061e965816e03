"""Test helpers: `requires_cuda`, `torch_assert_close`, `set_random_seed`, `main()`.

Example test file::

    import tilelang.testing

    @tilelang.testing.requires_cuda
    def test_gemm_on_gpu(): ...

    def test_gemm_on_cpu():
        tilelang.testing.set_random_seed(0)
        tilelang.testing.torch_assert_close(out, ref, atol=1e-2, rtol=1e-2)

    if __name__ == "__main__":
        tilelang.testing.main()
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import random
import re
import sys

from ..profiler.compare import torch_assert_close
from .perf_regression import process_func, regression

__all__ = ["main", "set_random_seed", "torch_assert_close", "requires_cuda", "requires_cuda_compute_version",
           "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt",
           "requires_cuda_compute_version_eq", "requires_cuda_compute_version_le",
           "requires_cuda_compute_version_lt", "requires_package", "requires_llvm", "requires_cuda_or_cdna",
           "requires_rocm", "requires_cdna", "requires_gfx950", "requires_metal", "requires_ascend",
           "process_func", "regression", "cuda_available", "line_of", "raises_at"]


def main() -> None:
    """Run the calling test file with pytest (for `if __name__ == "__main__":`)."""
    import pytest

    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file, *sys.argv[1:]]))


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, numpy's and torch's generators (all devices)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """True when torch has a CUDA device and our driver bindings can use it."""
    try:
        import torch

        if not torch.cuda.is_available():
            return False
    except Exception:  # noqa: BLE001 - a broken torch install means "no CUDA" here
        return False
    from ..backend.target import cuda_arch

    return cuda_arch() is not None


def _compute_version() -> tuple:
    if not cuda_available():
        return (0, 0)
    import torch

    return tuple(torch.cuda.get_device_capability(0))


def _apply(marks, func):
    for m in marks:
        func = m(func)
    return func


def requires_cuda(func=None):
    """Mark a test `cuda` and skip it where no CUDA device is usable (both with and without ())."""
    import pytest

    marks = [pytest.mark.cuda, pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")]
    if func is None:
        return lambda f: _apply(marks, f)
    return _apply(marks, func)


def requires_cuda_compute_version(major: int, minor: int = 0, mode: str = "ge"):
    """Skip unless the GPU's compute capability compares `mode` (ge/gt/eq/le/lt) to major.minor."""
    import pytest

    ops = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b, "eq": lambda a, b: a == b,
           "le": lambda a, b: a <= b, "lt": lambda a, b: a < b}
    if mode not in ops:
        raise ValueError(f"mode must be one of {sorted(ops)}, got {mode!r}")
    have = _compute_version()
    ok = cuda_available() and ops[mode](have, (major, minor))
    reason = f"needs CUDA compute capability {mode} {major}.{minor}, have {have[0]}.{have[1]}"
    return lambda f: _apply([pytest.mark.skipif(not ok, reason=reason)], requires_cuda(f))


def requires_cuda_compute_version_ge(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "ge")


def requires_cuda_compute_version_gt(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "gt")


def requires_cuda_compute_version_eq(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "eq")


def requires_cuda_compute_version_le(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "le")


def requires_cuda_compute_version_lt(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "lt")


def requires_cuda_or_cdna(func):
    """CUDA or AMD CDNA: here (no ROCm backend) the same as `requires_cuda`."""
    return requires_cuda(func)


def requires_llvm(func):
    """The host CPU backend: ours compiles C, so this skips only where no C compiler is found."""
    import shutil

    import pytest

    from .. import env

    ok = shutil.which(env.c_compiler()) is not None
    return pytest.mark.skipif(not ok, reason=f"needs a C compiler ({env.c_compiler()!r} not found)")(func)


def _unsupported_backend(name: str, what: str):
    def mark(func):
        import pytest

        return pytest.mark.skipif(True, reason=f"needs {what}: this TileLang has no {name} backend")(func)

    mark.__name__ = f"requires_{name}"
    mark.__doc__ = f"Always skips: tests for {what} need a {name} backend, which this TileLang does not have."
    return mark


requires_rocm = _unsupported_backend("rocm", "an AMD ROCm GPU")
requires_cdna = _unsupported_backend("cdna", "an AMD CDNA GPU")
requires_gfx950 = _unsupported_backend("gfx950", "an AMD gfx950 (CDNA4) GPU")
requires_metal = _unsupported_backend("metal", "an Apple Metal GPU")
requires_ascend = _unsupported_backend("ascend", "a Huawei Ascend NPU")


def requires_package(*names: str):
    """Skip unless every named module imports."""
    import importlib.util

    import pytest

    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


def host_cuda_or_skip():
    """The host emulator module (tilelang.testing.host_cuda) for a test that runs generated CUDA on the host;
    the test is skipped where NVRTC from the pip wheels or g++ is missing."""
    import pytest

    nvrtc = pytest.importorskip("tilelang.backend.cuda.nvrtc")
    if not nvrtc.nvrtc_available():
        pytest.skip("NVRTC from the pip wheels is not installed")
    host = pytest.importorskip("tilelang.testing.host_cuda")
    if not host.available():
        pytest.skip("g++ not installed")
    return host


def line_of(path: str, marker: str) -> int:
    """1-based number of the only line of `path` containing `marker` (for error-location tests)."""
    with open(path) as f:
        hits = [n for n, line in enumerate(f, start=1) if marker in line]
    if len(hits) != 1:
        raise ValueError(f"marker {marker!r} occurs {len(hits)} times in {path}; it must occur once")
    return hits[0]


@contextlib.contextmanager
def raises_at(exc_type, text: str, path: str, line: int):
    """Like pytest.raises, and the message must contain `text` and point at `path:line:`.

    Also checks the caret excerpt is present (a line of `^` under the user's code).
    """
    import pytest

    with pytest.raises(exc_type) as info:
        yield info
    msg = str(info.value)
    assert text in msg, f"expected {text!r} in the error message, got:\n{msg}"
    assert re.search(rf"{re.escape(path)}:{line}:\d+: ", msg), f"expected location {path}:{line}:COL in:\n{msg}"
    assert re.search(r"\n\s*\^+", msg), f"expected a caret excerpt in:\n{msg}"
