"""Compile generated C to a shared library with the system compiler, cached on disk.

Why a system compiler and not an in-process one: gcc/clang are always there on a CPU box,
vectorise well at -O3, and OpenMP gives us one thread per block for free.

Why these flags: `-O3 -march=native` for speed; *no* -ffast-math, because the CPU backend is
the numerical reference (results are compared with float64 torch, and NaN/inf/-0.0 must follow
IEEE); `-ffp-contract=off` so a*b+c is never fused into an fma, which would make results depend
on the host CPU; `-fno-math-errno` only lets sqrt etc. inline (errno is never read).
`-fopenmp` (and `-march=native`) are dropped when the compiler cannot use them (e.g. clang
without libomp): the probe result is cached on disk per compiler binary.

Cache key = source + flags + compiler `--version` + every header under include/cpu + the host
CPU (because of -march=native). A hit costs a hash, a stat and a dlopen: a few milliseconds
in a fresh process, since the compiler version is also cached on disk (keyed on the compiler
binary's path, size and mtime), so no subprocess runs on a hit.

Example::

    lib = compile_c('#include "cpu/tl_cpu.h"\\nint add(int a, int b) { return a + b; }')
    lib.add(2, 3)                    # 5   (attribute access goes to the ctypes.CDLL)
    lib.cache_hit, lib.compile_seconds
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import re
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tilelang import env
from tilelang.cache import disk
from tilelang.errors import CompileError

__all__ = ["INCLUDE_DIR", "BASE_FLAGS", "CLibrary", "CompilerInfo", "compiler_info",
           "compile_c", "header_digest", "host_flags"]

INCLUDE_DIR = Path(__file__).resolve().parents[2] / "include"
BASE_FLAGS: tuple[str, ...] = (
    "-O3", "-std=gnu11", "-shared", "-fPIC", "-fopenmp", "-march=native",
    "-fno-math-errno", "-ffp-contract=off",
)
# Flags the probe drops when this compiler cannot use them.
_OPTIONAL_FLAGS = ("-fopenmp", "-march=native")
_LIB_KIND = "cpu_so"
_INFO_KIND = "cc_info"
_MAX_STDERR = 6000

_PROBE_SOURCE = """
#ifdef _OPENMP
#include <omp.h>
#endif
int tl_probe(int n) {
    int s = 0;
#pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < n; ++i) s += i;
#ifdef _OPENMP
    s += omp_get_max_threads() * 0;
#endif
    return s;
}
"""


@dataclass(frozen=True)
class CompilerInfo:
    """The compiler as resolved for this process: argv prefix, version text, usable flags."""

    argv: tuple[str, ...]
    version: str
    flags: tuple[str, ...]

    @property
    def openmp(self) -> bool:
        return "-fopenmp" in self.flags


@dataclass
class CLibrary:
    """A loaded shared library plus how it was obtained.

    Attribute access falls through to the ctypes.CDLL, so `lib.my_kernel` is the C function.
    `compile_seconds` is time spent in the compiler (0.0 on a cache hit); `total_seconds` is
    the whole compile_c call (hashing, lookup or build, dlopen).
    """

    path: Path
    cdll: ctypes.CDLL
    key: str
    cache_hit: bool
    compile_seconds: float
    load_seconds: float
    total_seconds: float
    flags: tuple[str, ...] = ()
    compiler_output: str = field(default="", repr=False)

    def __getattr__(self, name: str):
        # Only reached for names that are not dataclass fields; guard dunders so copy/pickle
        # of a half-built object cannot recurse.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.cdll, name)

    def function(self, name: str, restype, argtypes: Sequence) -> ctypes._CFuncPtr:
        """The C function `name` with its ctypes signature set (so calls convert arguments)."""
        fn = getattr(self.cdll, name)
        fn.restype = restype
        fn.argtypes = list(argtypes)
        return fn


# ---------------------------------------------------------------- compiler discovery

_info_memo: dict[tuple, CompilerInfo] = {}
_cpu_id_memo: list[str] = []


def _resolve_argv() -> tuple[tuple[str, ...], str]:
    """Split TILELANG_CC (it may be `ccache gcc`) and resolve the program to a real path."""
    text = env.c_compiler()
    argv = tuple(shlex.split(text))
    exe = shutil.which(argv[0]) if argv else None
    if exe is None:
        raise CompileError(
            f"C compiler {text!r} was not found on PATH; the CPU backend needs a C compiler. "
            "Install gcc or clang, or set TILELANG_CC to the compiler's path."
        )
    return (exe,) + argv[1:], os.path.realpath(exe)


def compiler_info() -> CompilerInfo:
    """Version and usable flags of the configured compiler (memoised per process, on disk)."""
    argv, real = _resolve_argv()
    st = os.stat(real)
    # NOTE: the cache root is in the memo key so a new TILELANG_CACHE_DIR gets its own entry.
    ident = (argv, real, st.st_mtime_ns, st.st_size, str(disk.root()))
    info = _info_memo.get(ident)
    if info is None:
        k = disk.key("cc-info-2", *argv, real, str(st.st_mtime_ns), str(st.st_size), *BASE_FLAGS)
        path = disk.get_or_build(_INFO_KIND, k, ".json",
                                 lambda out: out.write_text(json.dumps(_probe(argv))))
        data = json.loads(path.read_text())
        info = _info_memo[ident] = CompilerInfo(argv, data["version"], tuple(data["flags"]))
    return info


def _probe(argv: tuple[str, ...]) -> dict:
    """Run `cc --version` and find which optional flags this compiler accepts."""
    import subprocess

    res = subprocess.run([*argv, "--version"], capture_output=True, text=True)
    version = (res.stdout or res.stderr).strip()
    with tempfile.TemporaryDirectory(prefix="tilelang-probe-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(_PROBE_SOURCE)

        def works(flags: Sequence[str]) -> bool:
            cmd = [*argv, *flags, str(src), "-o", str(Path(tmp) / "probe.so")]
            return subprocess.run(cmd, capture_output=True).returncode == 0

        flags = list(BASE_FLAGS)
        if not works(flags):  # usual case is one compile; else keep each flag that works alone
            base = [f for f in BASE_FLAGS if f not in _OPTIONAL_FLAGS]
            keep = {f for f in _OPTIONAL_FLAGS if works(base + [f])}
            flags = [f for f in BASE_FLAGS if f not in _OPTIONAL_FLAGS or f in keep]
        if "-march=native" in flags:
            # CPUs with AVX512-FP16 (Sapphire Rapids): gcc emits masked vmovsh for _Float16 code,
            # which binutils older than 2.38 cannot assemble; our fp16 arithmetic is scalar anyway
            res = subprocess.run([*argv, "-march=native", "-dM", "-E", "-x", "c", os.devnull],
                                 capture_output=True, text=True)
            if "__AVX512FP16__" in res.stdout:
                flags.append("-mno-avx512fp16")
    return {"version": version, "flags": flags}


def _cpu_id() -> str:
    """Host CPU model + feature flags: libraries built with -march=native only run there."""
    if not _cpu_id_memo:
        ident = ""
        try:
            with open("/proc/cpuinfo") as f:
                text = f.read(1 << 16)
            block = text.split("\n\n", 1)[0]
            ident = "\n".join(ln for ln in block.splitlines()
                              if ln.split(":")[0].strip() in ("model name", "flags", "Features",
                                                              "CPU part", "vendor_id"))
        except OSError:
            pass
        import platform

        _cpu_id_memo.append(f"{platform.machine()}\n{ident or platform.processor()}")
    return _cpu_id_memo[0]


SHARED_HEADERS = ("tl/rng_core.h", "tl/fp8_dir.h")  # headers under include/tl that the CPU headers include too


def header_digest() -> str:
    """Hash of every file under include/cpu and of SHARED_HEADERS: editing a header must miss the cache."""
    parts: list[str | bytes] = []
    for path in [*sorted((INCLUDE_DIR / "cpu").rglob("*")), *(INCLUDE_DIR / h for h in SHARED_HEADERS)]:
        if path.is_file():
            parts += [path.relative_to(INCLUDE_DIR).as_posix(), path.read_bytes()]
    return disk.key(*parts)


# ---------------------------------------------------------------- compile + load

# nvcc flags a C compiler does not take. Programs written for CUDA pass them as jit's
# compile_flags (the public MLA examples: --expt-relaxed-constexpr, --ptxas-options=...); they
# say nothing about host code, so the CPU target drops them (a debug log names each).
_NVCC_EXACT = {"--expt-relaxed-constexpr", "-expt-relaxed-constexpr", "--expt-extended-lambda",
               "-expt-extended-lambda", "--extended-lambda", "-extended-lambda", "--use_fast_math",
               "-use_fast_math", "-lineinfo", "--generate-line-info", "-rdc=true", "-rdc=false", "--keep", "-keep"}
_NVCC_PREFIX = ("--ptxas-options=", "-Xptxas=", "--gpu-architecture=", "-arch=", "--generate-code=", "-gencode=",
                "--gpu-code=", "-code=", "--relocatable-device-code=", "-maxrregcount=", "--maxrregcount=",
                "--register-usage-level=", "-ccbin=", "--compiler-bindir=")
_NVCC_WITH_VALUE = {"--ptxas-options", "-Xptxas", "--gpu-architecture", "-arch", "--generate-code", "-gencode",
                    "--gpu-code", "-code", "-maxrregcount", "--maxrregcount", "-ccbin", "--compiler-bindir"}
_HOST_PASS = ("-Xcompiler", "--compiler-options")  # nvcc's way to reach the host compiler: its value is for us


def host_flags(flags: Sequence[str]) -> tuple[list[str], list[str]]:
    """(flags for the C compiler, the nvcc-only ones dropped): `-Xcompiler a,b` gives a and b."""
    kept, dropped = [], []
    items = list(flags)
    i = 0
    while i < len(items):
        f = items[i]
        name, eq, value = f.partition("=")
        if name in _HOST_PASS:
            if not eq and i + 1 < len(items):
                i, value = i + 1, items[i + 1]
            kept += [v for v in value.split(",") if v]
        elif f in _NVCC_EXACT or f.startswith(_NVCC_PREFIX):
            dropped.append(f)
        elif f in _NVCC_WITH_VALUE:
            if i + 1 < len(items):
                i, f = i + 1, f"{f} {items[i + 1]}"
            dropped.append(f)
        else:
            kept.append(f)
        i += 1
    return kept, dropped


def compile_c(source: str, extra_flags: Sequence[str] = ()) -> CLibrary:
    """Compile C `source` to a shared library (cached) and load it with ctypes.

    Generated code includes our header as `#include "cpu/tl_cpu.h"`. Raises CompileError with
    the compiler's diagnostics and the offending source lines when compilation fails.
    """
    t0 = time.perf_counter()
    info = compiler_info()
    kept, dropped = host_flags(extra_flags)
    for f in dropped:
        logging.getLogger("tilelang").debug("compile flag %s dropped: nvcc-only, the CPU target compiles C", f)
    flags = info.flags + tuple(kept)
    k = disk.key("cpu-c", source, "\0".join(flags), info.version, header_digest(), _cpu_id())
    built: list[tuple[float, str]] = []

    def build(out: Path) -> None:
        t = time.perf_counter()
        log = _run_compiler(info.argv, flags, source, out)
        built.append((time.perf_counter() - t, log))

    path = disk.get_or_build(_LIB_KIND, k, ".so", build)
    t1 = time.perf_counter()
    cdll = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    t2 = time.perf_counter()
    compile_s, log = built[0] if built else (0.0, "")
    return CLibrary(path=path, cdll=cdll, key=k, cache_hit=not built, compile_seconds=compile_s,
                    load_seconds=t2 - t1, total_seconds=t2 - t0, flags=flags,
                    compiler_output=log)


def _run_compiler(argv: Sequence[str], flags: Sequence[str], source: str, out: Path) -> str:
    """Run the compiler in a scratch dir (so diagnostics say `kernel.c:LINE`); return stderr."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="tilelang-cc-") as tmp:
        (Path(tmp) / "kernel.c").write_text(source)
        cmd = [*argv, *flags, "-I", str(INCLUDE_DIR), "kernel.c", "-o", str(out), "-lm"]
        res = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    if res.returncode != 0:
        raise _compile_error(cmd, res.returncode, res.stderr, source)
    return res.stderr


_DIAG_RE = re.compile(r"^kernel\.c:(\d+):(?:(\d+):)?\s*(?:fatal )?error", re.MULTILINE)


def _compile_error(cmd: Sequence[str], rc: int, stderr: str, source: str) -> CompileError:
    """Build a CompileError that shows the diagnostics and the source lines they point at."""
    diag = stderr.strip()
    if len(diag) > _MAX_STDERR:
        diag = diag[:_MAX_STDERR] + f"\n... ({len(stderr) - _MAX_STDERR} more characters)"
    spots = []
    for m in _DIAG_RE.finditer(stderr):
        spot = (int(m.group(1)), int(m.group(2) or 0))
        if spot not in spots:
            spots.append(spot)
    excerpt = "\n".join(_excerpt(source, line, col) for line, col in spots[:5])
    if spots and all(_in_imported(source, line) for line, _ in spots):
        msg = (
            f"the C compiler failed (exit {rc}) on the kernel's T.import_source code, which target cpu compiles as C: "
            f"CUDA-only code (templates, __device__ functions, inline PTX) needs target cuda.\n"
            f"command: {shlex.join(cmd)}\n--- compiler output ---\n{diag}"
        )
    else:
        msg = (
            f"the C compiler failed (exit {rc}) on generated CPU code; this is a TileLang bug, "
            f"please report it with the text below.\ncommand: {shlex.join(cmd)}\n"
            f"--- compiler output ---\n{diag}"
        )
    if excerpt:
        msg += f"\n--- source at the error ---\n{excerpt}"
    err = CompileError(msg)
    err.stderr, err.source = stderr, source
    return err


def _in_imported(source: str, line: int) -> bool:
    """Line `line` (1-based) of the C source lies inside a T.import_source text."""
    from ...codegen.c import IMPORTED

    inside = False
    for n, text in enumerate(source.splitlines(), 1):
        if text == IMPORTED[0]:
            inside = True
        elif text == IMPORTED[1]:
            inside = False
        if n == line:
            return inside
    return False


def _excerpt(source: str, line: int, col: int, context: int = 2) -> str:
    """Numbered lines around `line` with a caret under `col` (1-based, 0 = unknown)."""
    lines = source.splitlines()
    lo, hi = max(1, line - context), min(len(lines), line + context)
    out = []
    for n in range(lo, hi + 1):
        mark = ">" if n == line else " "
        out.append(f"{mark}{n:5d} | {lines[n - 1]}")
        if n == line and col > 0:
            out.append(f"       | {' ' * (col - 1)}^")
    return "\n".join(out)
