"""Read the machine code NVRTC produced: SASS text and per-kernel resources.

Why: "the Hopper path really uses HGMMA / UTMALDG" and "this kernel does not
spill" are facts about the cubin, checkable on a machine without a GPU.  We
shell out to `cuobjdump` (which runs `nvdisasm` for -sass), found in
the pip wheels `nvidia-cuda-cuobjdump` / `nvidia-cuda-nvdisasm` (cu12:
nvidia/cuda_*/bin, cu13: nvidia/cu13/bin), on PATH, or in a toolkit.
"""
from __future__ import annotations

import collections
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from tilelang.errors import TileLangError


class ToolNotFoundError(TileLangError):
    """A CUDA binary tool (cuobjdump) is not installed."""


def _find_tool(name: str) -> str | None:
    cands: list[str] = []
    for site in sys.path:
        if site and os.path.isdir(os.path.join(site, "nvidia")):
            cands += sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", name)))
    cands.append(shutil.which(name) or "")
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "bin", name))
    cands.append(f"/usr/local/cuda/bin/{name}")
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


@functools.lru_cache(maxsize=None)
def find_cuobjdump() -> str | None:
    """Path of a cuobjdump binary, or None."""
    return _find_tool("cuobjdump")


@functools.lru_cache(maxsize=None)
def find_nvdisasm() -> str | None:
    """Path of nvdisasm (cuobjdump -sass runs it; wheel: nvidia-cuda-nvdisasm)."""
    return _find_tool("nvdisasm")


def sass_available() -> bool:
    """True when disassemble() can work (both tools present)."""
    return find_cuobjdump() is not None and find_nvdisasm() is not None


def _run_cuobjdump(cubin: bytes, flag: str) -> str:
    tool = find_cuobjdump()
    if tool is None:
        raise ToolNotFoundError(
            "cuobjdump not found: pip install nvidia-cuda-cuobjdump, or put a CUDA "
            "toolkit's bin/ on PATH")
    env = dict(os.environ)
    if flag == "-sass":
        disasm = find_nvdisasm()
        if disasm is None:
            raise ToolNotFoundError(
                "nvdisasm not found (cuobjdump -sass needs it): pip install "
                "nvidia-cuda-nvdisasm, or put a CUDA toolkit's bin/ on PATH")
        # cuobjdump looks nvdisasm up on PATH; the wheels keep it elsewhere.
        env["PATH"] = os.path.dirname(disasm) + os.pathsep + env.get("PATH", "")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        proc = subprocess.run([tool, flag, path], capture_output=True, text=True, timeout=60,
                              env=env)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise TileLangError(f"cuobjdump {flag} failed (exit {proc.returncode}): "
                            f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def disassemble(cubin: bytes) -> str:
    """The SASS listing of every kernel in `cubin` (cuobjdump -sass)."""
    return _run_cuobjdump(cubin, "-sass")


# "        /*0040*/                   HMMA.16816.F32 R4, R4, R8, RZ ;"
_INSN_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(?:\.[\w.]+)?\b")


def opcodes(sass: str) -> collections.Counter:
    """Count SASS mnemonics (without modifiers): {"HMMA": 8, "LDSM": 4, ...}."""
    return collections.Counter(m.group(1) for m in _INSN_RE.finditer(sass))


def has_opcode(sass: str, prefix: str) -> bool:
    """True if an instruction whose mnemonic starts with `prefix` appears.

    A prefix so that "SYNCS" matches SYNCS.ARRIVE.TRANS64, SYNCS.PHASECHK, ...
    and "UTMALDG" matches UTMALDG.2D.
    """
    return any(op.startswith(prefix) for op in opcodes(sass))


@dataclass(frozen=True)
class ResourceUsage:
    """Per-kernel resources from `cuobjdump -res-usage`.

    `local` is local memory per thread: nonzero usually means register spills
    (or a stack array); the ptxas log (compile_cuda(..., ptxas_verbose=True))
    separates the two.
    """

    function: str
    registers: int
    shared: int
    local: int
    stack: int
    constant0: int


_RES_FN_RE = re.compile(r"Function\s+(\S+?):?\s*$")
_RES_KV_RE = re.compile(r"(REG|STACK|SHARED|LOCAL|CONSTANT\[0\]):(\d+)")


def resource_usage(cubin: bytes) -> dict[str, ResourceUsage]:
    """{kernel name: ResourceUsage} for every function in the cubin."""
    text = _run_cuobjdump(cubin, "-res-usage")
    out: dict[str, ResourceUsage] = {}
    current = None
    for line in text.splitlines():
        m = _RES_FN_RE.search(line.strip())
        if m:
            current = m.group(1)
            continue
        kv = dict(_RES_KV_RE.findall(line))
        if current and "REG" in kv:
            out[current] = ResourceUsage(
                function=current, registers=int(kv["REG"]), shared=int(kv.get("SHARED", 0)),
                local=int(kv.get("LOCAL", 0)), stack=int(kv.get("STACK", 0)),
                constant0=int(kv.get("CONSTANT[0]", 0)))
            current = None
    return out
