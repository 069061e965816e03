"""Makes `import tvm` give `tilelang.tvm` when no real TVM is installed.

Why: public TileLang bundles TVM and puts it on the path, so user programs write
`from tvm import DataType` or `from tvm import tirx` after `import tilelang`. We have
no TVM; a finder placed first on `sys.meta_path` answers for "tvm" and "tvm.*" with the
modules of `tilelang.tvm`, but only after every other finder failed to find a real
"tvm" (an installed TVM always wins). Installing it costs nothing at `import tilelang`;
the search for a real TVM happens on the first `import tvm`.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys


class _AliasLoader:  # the importlib Loader protocol (no importlib.abc: keeps import light)
    """Loads "tvm.X" as the already-importable module "tilelang.tvm.X" (one module object, two names)."""

    def __init__(self, real: str):
        self.real = real

    def create_module(self, spec):
        module = importlib.import_module(self.real)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec  # importlib overwrote it with the alias spec


class TvmAliasFinder:  # the importlib MetaPathFinder protocol
    """Answers "tvm" / "tvm.*" with tilelang.tvm when no other finder has a real "tvm"."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tvm" and not fullname.startswith("tvm."):
            return None
        if fullname == "tvm":
            if self._real_tvm_exists():
                return None
        elif getattr(sys.modules.get("tvm"), "__name__", None) != "tilelang.tvm":
            return None
        real = "tilelang." + fullname
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        return None if found is None else importlib.util.spec_from_loader(fullname, _AliasLoader(real))

    def _real_tvm_exists(self) -> bool:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is not self and find is not None and find("tvm", None) is not None:
                return True
        return False


def install() -> None:
    """Put the finder first on sys.meta_path (once)."""
    if not any(isinstance(f, TvmAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TvmAliasFinder())
