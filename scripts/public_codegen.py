"""The public TileLang's generated CUDA for a peer example's kernel, on a machine with no GPU.

Reading both implementations' kernels side by side costs no device time. The public wheel
(`.peer/tl-site.tar.xz`, from `bash ../shared/peer/prepare.sh --public`) needs Python 3.12 and
imports torch, which has no CPU build for 3.12 on this machine: the run uses a stand-in `torch`
module (written to a temporary folder) that is enough for lowering, never for running a kernel.
The public package is only run here, in its own interpreter; nothing imports it into ours.

    python scripts/public_codegen.py FOLDER MODULE FUNC ARGS KWARGS OUT.cu [--ptxas]
    python scripts/public_codegen.py flash_attention example_mha_fwd_bshd flashattn \\
        "(1, 32, 256, 128, False)" "dict(block_M=128, block_N=128, num_stages=1, threads=128)" /tmp/fa.cu --ptxas

FUNC is the example's @tilelang.jit (or autotuned) factory; ARGS / KWARGS are Python literals
passed to it. The kernel is lowered for sm_90a with the factory's pass_configs. --ptxas also
compiles OUT.cu with nvcc and prints ptxas's registers and spills. Environment: PY312 (the
interpreter, default the pyenv 3.12 one), TL_SITE (where the wheel is unpacked, /tmp/tlsite).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(ROOT, ".peer")
SITE = os.environ.get("TL_SITE", "/tmp/tlsite")

_STAND_IN = '''
class _Any:
    """Any attribute, call or base class: enough for modules that touch torch at import time."""
    def __init__(self, *a, **k): pass
    def __getattr__(self, n): return _Any()
    def __call__(self, *a, **k): return _Any()
    def __bool__(self): return False
    def __iter__(self): return iter(())
    def __mro_entries__(self, bases): return (_Base,)
class _Base:
    """What a class derived from a torch class (autograd.Function, nn.Module) gets: `apply` too."""
    @classmethod
    def apply(cls, *a, **k): return _Any()
__version__ = "2.8.0"
class dtype: pass
class Tensor: pass
class Size(tuple): pass
class Generator: pass
class device:
    def __init__(self, *a, **k): pass
def __getattr__(n):
    return _Any()
'''
_SUB = "def __getattr__(n):\n    from torch import _Any\n    return _Any()\n"

_LOWER = r'''
import importlib, os, sys
folder, mod, fn, args, kwargs, out = sys.argv[1:7]
here = os.path.join(sys.argv[7], folder)
sys.path.insert(0, here)
os.chdir(here)
import tilelang
from tvm import transform
from tvm.target import Target
f = getattr(importlib.import_module(mod), fn)
f = getattr(f, "jit_impl", f)
prog = f.get_tir(*eval(args), **eval(kwargs)) if hasattr(f, "get_tir") else f(*eval(args), **eval(kwargs))
tgt = Target({"kind": "cuda", "arch": "sm_90a"})
with transform.PassContext(opt_level=3, config=getattr(f, "pass_configs", None) or {}), tgt:
    art = tilelang.lower(prog, target=tgt)
open(out, "w").write(art.kernel_source)
print(out, len(art.kernel_source), "characters")
'''


# examples that pick their tiles by `torch.cuda.get_device_capability()` see the H200's (9, 0)
_CUDA = "def get_device_capability(*a, **k):\n    return (9, 0)\n" + _SUB


def stand_in(d: str) -> None:
    """Write the stand-in `torch` package (and triton, packaging, pytest last on the path) under d."""
    pkg = os.path.join(d, "torch")
    for sub in ("", "nn", "testing", "cuda", "utils"):
        os.makedirs(os.path.join(pkg, sub), exist_ok=True)
        with open(os.path.join(pkg, sub, "__init__.py"), "w") as f:
            f.write(_STAND_IN if not sub else _CUDA if sub == "cuda" else _SUB)
    with open(os.path.join(pkg, "nn", "functional.py"), "w") as f:
        f.write(_SUB)
    # deepseek_v32/utils.py imports triton and packaging, tilelang.testing pytest: stand-ins last on the
    # path, behind any real one
    for sub in ("triton", os.path.join("triton", "language"), "packaging", "pytest"):
        os.makedirs(os.path.join(d, "last", sub), exist_ok=True)
        with open(os.path.join(d, "last", sub, "__init__.py"), "w") as f:
            f.write(_SUB)


def _ptxas(cu: str) -> None:
    src = os.path.join(SITE, "tilelang", "src")
    cmd = ["nvcc", "-gencode", "arch=compute_90a,code=sm_90a", "-std=c++17", "-O3", "--use_fast_math", "-c",
           "-o", os.devnull, f"-I{src}", f"-I{os.path.join(SITE, 'tilelang', '3rdparty', 'cutlass', 'include')}",
           "-DENABLE_BF16", "-Xptxas", "-v", cu]
    r = subprocess.run(cmd, capture_output=True, text=True)
    for line in (r.stdout + r.stderr).splitlines():
        if "registers" in line or "spill" in line or "error" in line:
            print(line.strip())


def public_python(who: str) -> str | None:
    """The Python 3.12 interpreter that runs the public wheel, with the wheel unpacked at SITE; None (and
    why, on stderr) when either is missing."""
    py = os.environ.get("PY312", os.path.expanduser("~/.pyenv/versions/3.12.1/bin/python3.12"))
    if not os.path.exists(py):
        print(f"{who}: no Python 3.12 at {py} (set PY312)", file=sys.stderr)
        return None
    if not os.path.isdir(os.path.join(SITE, "tilelang")):
        wheel = os.path.join(PEER, "tl-site.tar.xz")
        if not os.path.exists(wheel):
            print(f"{who}: {wheel} is missing: run `bash ../shared/peer/prepare.sh --public`", file=sys.stderr)
            return None
        os.makedirs(SITE, exist_ok=True)
        with tarfile.open(wheel) as t:
            t.extractall(SITE)
    return py


def public_env(d: str) -> dict:
    """The environment of a public-wheel process whose stand-ins stand_in(d) wrote."""
    return dict(os.environ, PYTHONPATH=f"{SITE}:{d}:{os.path.join(d, 'last')}",
                CUDA_HOME=os.environ.get("CUDA_HOME", "/usr/local/cuda"))


def main(argv: list) -> int:
    if len(argv) < 6:
        print(__doc__)
        return 2
    py = public_python("public_codegen")
    if py is None:
        return 2
    with tempfile.TemporaryDirectory() as d:
        stand_in(d)
        r = subprocess.run([py, "-c", _LOWER, *argv[:6], os.path.join(PEER, "tilelang-examples")], env=public_env(d))
    if r.returncode == 0 and "--ptxas" in argv[6:]:
        _ptxas(os.path.abspath(argv[5]))
    return r.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
