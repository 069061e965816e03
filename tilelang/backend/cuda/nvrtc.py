"""Compile CUDA C++ to a cubin in-process with NVRTC (no CUDA toolkit needed).

Why NVRTC: the pip wheels `nvidia-cuda-nvrtc` + `nvidia-cuda-runtime` give us the
compiler and the fp16/bf16/fp8 headers without a toolkit install, and compiling
in-process costs ~0.1 s per kernel instead of spawning nvcc.  NVRTC also works on
a machine without a GPU, which is how CI checks the generated code.

One compile produces both the cubin (what the driver loads) and the PTX (what a
human reads), so `CompiledCuda` carries both.  Importing this module is cheap:
`cuda.bindings` is imported on first compile.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from tilelang.errors import CompileError

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d{2,3})([af]?)$")
# The folder that holds `tl/*.h`: kernels write `#include "tl/tl.h"`.
TL_INCLUDE_DIR = Path(__file__).resolve().parents[2] / "include"


@dataclass(frozen=True)
class CompiledCuda:
    """Result of one NVRTC compile.

    `log` holds NVRTC's warnings (and ptxas' report when `ptxas_verbose` was
    set); `compile_time_s` is wall time of create+compile+fetch.
    """

    cubin: bytes
    ptx: str
    log: str
    arch: str
    compile_time_s: float
    options: tuple[str, ...] = field(default=())

    def ptxas_info(self) -> dict:
        """Registers / spills parsed from a `ptxas_verbose=True` log ({} otherwise)."""
        return parse_ptxas_log(self.log)


def normalize_arch(arch: str | int | tuple) -> str:
    """Accept "sm_90a", "90a", 90, (9, 0) or "compute_80"; return "sm_XY[a]".

    Compute capability 9.0 means Hopper, whose wgmma/setmaxnreg live only in
    the arch-specific target, so a bare (9, 0) or 90 becomes "sm_90a".
    """
    if isinstance(arch, tuple):
        arch = f"{arch[0]}{arch[1]}"
    text = str(arch).strip().lower()
    m = _ARCH_RE.match(text)
    if m is None:
        raise CompileError(
            f"unknown CUDA architecture {arch!r}: expected a string like 'sm_80' or 'sm_90a'")
    num, suffix = m.group(1), m.group(2)
    if not suffix and num in ("90", "100") and not text.startswith("sm_"):
        suffix = "a"
    return f"sm_{num}{suffix}"


def _site_dirs() -> list[Path]:
    """site-packages folders that may hold the `nvidia/` wheels."""
    dirs = []
    for p in sys.path:
        if p and os.path.isdir(os.path.join(p, "nvidia")):
            dirs.append(Path(p))
    return dirs


@functools.lru_cache(maxsize=None)
def cuda_include_dirs() -> tuple[str, ...]:
    """Folders with cuda_fp16.h & co: pip wheel layouts first, then a toolkit.

    cu13 wheels put headers in nvidia/cu13/include, cu12 wheels in
    nvidia/cuda_runtime/include; a toolkit in $CUDA_HOME/include.
    """
    found: list[str] = []
    patterns = ["nvidia/cu*/include", "nvidia/cuda_runtime/include", "nvidia/*/include"]
    for site in _site_dirs():
        for pat in patterns:
            for inc in sorted(glob.glob(str(site / pat))):
                if os.path.isfile(os.path.join(inc, "cuda_fp16.h")) and inc not in found:
                    found.append(inc)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and os.path.isfile(os.path.join(root, "include", "cuda_fp16.h")):
            found.append(os.path.join(root, "include"))
    if os.path.isfile("/usr/local/cuda/include/cuda_fp16.h"):
        found.append("/usr/local/cuda/include")
    # Prefer the headers of NVRTC's own major version (cu12 and cu13 wheels can
    # sit side by side); keep only one: mixed versions break cuda_fp16.hpp.
    version = nvrtc_version()
    if version is not None:
        tag = f"{os.sep}cu{version[0]}{os.sep}"
        found.sort(key=lambda inc: tag not in inc + os.sep)
    return tuple(found[:1])


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except Exception as exc:  # ImportError, or the library failed to load
        raise CompileError(
            f"NVRTC is not available ({exc}); install `cuda-bindings` and "
            "`nvidia-cuda-nvrtc` (pip) or a CUDA toolkit") from exc
    return nvrtc


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int] | None:
    """(major, minor) of the NVRTC library, or None when it cannot be loaded."""
    try:
        nvrtc = _nvrtc()
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception:
        return None
    return (major, minor) if int(err) == 0 else None


def nvrtc_available() -> bool:
    return nvrtc_version() is not None


class ToolchainWarning(UserWarning):
    """The installed NVRTC has a known bug that can make a kernel compute wrong numbers."""


# (NVRTC version, lowest sm it hits, what goes wrong): found by the fuzzer, reproduced with the
# standalone ptxas of the same release on a 10-line kernel (tests/testing/test_fuzz_found.py)
KNOWN_MISCOMPILES = (
    ((13, 0), 90, "ptxas folds two int32 max/min into a 3-input VIMNMX3 and can read one operand "
                  "before its negation (e.g. max(0, -2*x*x) over a row gives 2*x*x); NVRTC 13.5 is "
                  "correct: pip install -U nvidia-cuda-nvrtc"),
)


@functools.lru_cache(maxsize=None)
def warn_known_miscompiles(arch: str) -> tuple[str, ...]:
    """Warn (once per process and arch) when this NVRTC has a known wrong-code bug for `arch`;
    returns the bugs' descriptions."""
    version, sm = nvrtc_version(), int(re.sub(r"\D", "", arch) or 0)
    found = tuple(what for v, lo, what in KNOWN_MISCOMPILES if version == v and sm >= lo)
    for what in found:
        warnings.warn(f"NVRTC {version[0]}.{version[1]} has a known miscompile on {arch}: {what}",
                      ToolchainWarning, stacklevel=3)
    return found


def _check(nvrtc, result, what: str):
    err = result[0]
    if int(err) != 0:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"NVRTC {what} failed: {msg.decode(errors='replace')}")
    return result[1] if len(result) == 2 else result[1:]


def _get_blob(nvrtc, prog, size_fn, get_fn) -> bytes:
    size = _check(nvrtc, size_fn(prog), size_fn.__name__)
    # NOTE: NVRTC writes into this buffer, so it must be a fresh object: `b" " * 1` (an empty
    # log) is CPython's shared one-byte singleton, and writing its NUL corrupted every " ".
    buf = bytes(size + 16)
    _check(nvrtc, get_fn(prog, buf), get_fn.__name__)
    return buf[:size]


# nvcc flags NVRTC does not accept, and why dropping them changes nothing for our kernels.
_NVCC_ONLY = {
    "opt": "host optimisation level: NVRTC always optimises device code",
    "host": "a host-compiler flag: NVRTC compiles device code only",
    "lambda": "NVRTC compiles everything as device code (-default-device), which is what it enables",
    "arch": "the architecture comes from the target (tilelang.compile(..., target='cuda -arch=sm_XX'))",
}
_DROP_EXACT = {"--expt-relaxed-constexpr": "lambda", "-expt-relaxed-constexpr": "lambda",
               "--expt-extended-lambda": "lambda", "-expt-extended-lambda": "lambda",
               "--extended-lambda": "lambda", "-extended-lambda": "lambda", "-g": "host", "--debug": "host",
               "--keep": "host", "-keep": "host"}
_DROP_WITH_VALUE = {"-Xcompiler": "host", "--compiler-options": "host", "-ccbin": "host", "--compiler-bindir": "host",
                    "-arch": "arch", "--gpu-architecture": "arch", "-gencode": "arch", "--generate-code": "arch",
                    "-code": "arch", "--gpu-code": "arch"}
_PTXAS = ("--ptxas-options", "-Xptxas")


def nvrtc_flags(flags) -> tuple[list[str], list[str]]:
    """Translate nvcc-style device compile flags (a string, split like a shell, or a list) to NVRTC.

    Returns (flags for NVRTC, "flag: why it was dropped" notes). nvcc's comma-separated
    `--ptxas-options=-v,--register-usage-level=10` becomes one `--ptxas-options=` per item;
    flags only nvcc knows (-O3, -W..., -Xcompiler, --expt-relaxed-constexpr, -arch) are
    dropped with the reason; anything else is passed as given, so NVRTC reports what it rejects.
    """
    import shlex

    if flags is None:
        return [], []
    items = shlex.split(flags) if isinstance(flags, str) else [str(f) for f in flags]
    kept, dropped = [], []
    i = 0
    while i < len(items):
        f = items[i]
        name, eq, value = f.partition("=")
        if name in _PTXAS:
            if not eq and i + 1 < len(items):
                i, value = i + 1, items[i + 1]
            kept += [f"--ptxas-options={v}" for v in value.split(",") if v]
        elif f in _DROP_EXACT or (f.startswith("-O") and f[2:] in ("", "0", "1", "2", "3", "s", "fast")) or f.startswith("-W"):
            reason = _DROP_EXACT.get(f, "opt" if f.startswith("-O") else "host")
            dropped.append(f"{f}: {_NVCC_ONLY[reason]}")
        elif name in _DROP_WITH_VALUE:
            if not eq and i + 1 < len(items):
                i, f = i + 1, f"{f} {items[i + 1]}"
            dropped.append(f"{f}: {_NVCC_ONLY[_DROP_WITH_VALUE[name]]}")
        else:
            kept.append(f)
        i += 1
    return kept, dropped


def build_options(arch: str, options=(), *, lineinfo: bool = False,
                  ptxas_verbose: bool = False) -> list[str]:
    """The full NVRTC option list; exposed so cache keys can hash it."""
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device",
            f"-I{TL_INCLUDE_DIR}"]
    opts += [f"-I{d}" for d in cuda_include_dirs()]
    if lineinfo:
        opts.append("-lineinfo")
    if ptxas_verbose:
        opts.append("--ptxas-options=-v")
    opts += [str(o) for o in options]
    return opts


def compile_cuda(source: str, arch: str = "sm_80", *, options=(), name: str = "kernel.cu",
                 lineinfo: bool = False, ptxas_verbose: bool = False) -> CompiledCuda:
    """Compile `source` for `arch` ("sm_80", "sm_90a", ...) and return cubin + PTX.

    Raises CompileError carrying NVRTC's full log and the source lines around
    the first error.  `options` are extra NVRTC flags (e.g. "-DFOO=1",
    "--use_fast_math", "-maxrregcount=128").
    """
    arch = normalize_arch(arch)
    nvrtc = _nvrtc()
    warn_known_miscompiles(arch)
    opts = build_options(arch, options, lineinfo=lineinfo, ptxas_verbose=ptxas_verbose)
    t0 = time.perf_counter()
    prog = _check(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []),
                  "nvrtcCreateProgram")
    try:
        enc = [o.encode() for o in opts]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(enc), enc)
        log = _get_blob(nvrtc, prog, nvrtc.nvrtcGetProgramLogSize,
                        nvrtc.nvrtcGetProgramLog).rstrip(b"\x00 ").decode(errors="replace")
        if int(err) != 0:
            raise CompileError(format_compile_error(source, name, arch, log, opts))
        cubin = _get_blob(nvrtc, prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        ptx = _get_blob(nvrtc, prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    elapsed = time.perf_counter() - t0
    return CompiledCuda(cubin=bytes(cubin), ptx=ptx.rstrip(b"\x00").decode(errors="replace"),
                        log=log.strip(), arch=arch, compile_time_s=elapsed, options=tuple(opts))


_ERR_LINE_RE = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?:catastrophic )?error")


def format_compile_error(source: str, name: str, arch: str, log: str, opts) -> str:
    """Message for a failed compile: NVRTC's log plus an excerpt of our source."""
    lines = source.splitlines()
    excerpt = ""
    for entry in log.splitlines():
        m = _ERR_LINE_RE.match(entry.strip())
        if m and os.path.basename(m.group("file")) == os.path.basename(name):
            excerpt = _excerpt(lines, int(m.group("line")), name)
            break
    if not excerpt:  # error inside a header (or no location): show the top
        excerpt = _excerpt(lines, 1, name, before=0, after=9)
    return (f"NVRTC failed to compile {name} for {arch}.\n"
            f"This is a code generator bug unless the kernel uses inline CUDA; "
            f"please report it with the log below.\n"
            f"--- NVRTC log ---\n{log.strip()}\n"
            f"--- source excerpt ---\n{excerpt}\n"
            f"--- options ---\n{' '.join(opts)}")


def _excerpt(lines: list[str], line_no: int, name: str, before: int = 4,
             after: int = 3) -> str:
    lo, hi = max(1, line_no - before), min(len(lines), line_no + after)
    out = [f"{name}:"]
    for i in range(lo, hi + 1):
        mark = ">>" if i == line_no and before else "  "
        out.append(f"{mark}{i:5d} | {lines[i - 1]}")
    return "\n".join(out)


_PTXAS_RE = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "smem": re.compile(r"(\d+) bytes smem"),
}


def spilled(info: dict) -> int:
    """Bytes per thread a parse_ptxas_log report says ptxas spilled (the larger of stores, loads)."""
    return max(info.get("spill_stores", 0), info.get("spill_loads", 0))


def parse_ptxas_log_by_entry(log: str) -> dict:
    """{entry name: parse_ptxas_log of its part} for a log that compiled several kernels."""
    out = {}
    parts = re.split(r"Compiling entry function '([^']+)'", log or "")
    for name, text in zip(parts[1::2], parts[2::2]):
        out[name] = parse_ptxas_log(text)
    return out


def parse_ptxas_log(log: str) -> dict:
    """{"registers": .., "spill_stores": .., ...} for the last function in the log."""
    info = {}
    for key, rx in _PTXAS_RE.items():
        hits = rx.findall(log)
        if hits:
            info[key] = int(hits[-1])
    return info


@functools.lru_cache(maxsize=1)
def find_nvcc() -> str | None:
    """Path of an nvcc binary (optional fallback; NVRTC is the normal path)."""
    import shutil

    for cand in [os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "nvcc"),
                 shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None
