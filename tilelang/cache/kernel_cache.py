"""The kernel cache: a warm process gets a `@tilelang.jit` kernel without parsing or lowering.

The disk cache under `disk.py` is keyed on generated source, so a new process still runs
the factory, the parser and every pass before it can find the compiled library. This
cache sits in front of all that: its key is computed from what the factory *is* before it
runs, and its entry holds what a JITKernel needs to be called (parameters, C argument
kinds, the compiled artifact's launch data, the warnings the compile gave).

Takes: the factory, its bound arguments and the compile options. Gives: a key (or None
when the factory is not safe to key), and `load`/`save` of kernel records.

A stale hit is a silent wrong result, so the key covers everything that can change the
compiled code, and anything it cannot see through makes the key None (the slow path):
  * the factory's code (bytecode, names, constants, nested functions)
    and the text of the file that defines it;
  * every global and closure value the code (or a nested function, or a name inside a
    string annotation) can read: plain values by type and repr, functions and T.macro
    helpers recursively, modules only when they are tilelang's own or known-pure ones
    (math, torch); anything else (objects, lists, dicts, other modules) is not keyed;
  * the argument values (same rules), out_idx, the resolved target, pass configs and
    compile flags;
  * every TILELANG_* / TL_* / CUDA_* environment variable, the Python version, and the
    compiler itself: path, size and mtime of every file of the tilelang package
    (sources and device headers);
  * no source post-processing callback may be registered (it would rewrite the code).

Example::

    k = kernel_key(fn, bound_args, options, target)
    rec = load(k) if k else None
"""
from __future__ import annotations

import builtins
import hashlib
import os
import pickle
import re
import sys
import types

from . import disk

__all__ = ["kernel_key", "load", "save", "compiler_digest", "UNSAFE_PASS_CONFIGS"]

KIND = "jit_kernel"
SUFFIX = ".pkl"
FORMAT = "tilelang-kernel-record-v1"

# pass configs whose effect is a side effect of compiling (files, prints): a hit would skip it
UNSAFE_PASS_CONFIGS = frozenset({"tl.enable_dump_ir", "tl.dump_ir_path", "tl.enable_ptxas_verbose_output",
                                 "cuda.kernels_output_dir", "tl.enable_reducer_plan_verbose"})

_PLAIN = (int, float, complex, str, bytes, bool, type(None))
# modules whose attributes a factory may read without making the key unsafe: ours (covered
# by compiler_digest) and ones whose values do not change between processes
_TRUSTED_MODULES = ("tilelang", "math", "torch", "numpy", "operator", "functools", "itertools", "typing")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_PREFIXES = ("TILELANG_", "TL_", "CUDA_")
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_memo: dict = {}


class _Unsafe(Exception):
    """A value the key cannot see through: compile the slow way."""


def compiler_digest() -> str:
    """Hash of (path, size, mtime) of every file in the tilelang package: any edit misses."""
    d = _memo.get("compiler")
    if d is None:
        h = hashlib.sha256()
        stack = [_PACKAGE_DIR]
        while stack:
            top = stack.pop()
            with os.scandir(top) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        stack.append(e.path)
                elif not e.name.endswith((".pyc", ".lock")):
                    st = e.stat()
                    h.update(f"{e.path[len(_PACKAGE_DIR):]}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        d = _memo["compiler"] = h.hexdigest()
    return d


def _file_text(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        raise _Unsafe(f"cannot read {path}") from None


class _Hasher:
    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.seen: dict[int, int] = {}
        self.files: set[str] = set()

    def put(self, *parts: str | bytes) -> None:
        for p in parts:
            b = p.encode("utf-8", "surrogatepass") if isinstance(p, str) else p
            self.h.update(len(b).to_bytes(8, "little") + b)

    def value(self, v, depth: int = 0) -> None:
        if depth > 40:
            raise _Unsafe("too deep")
        t = type(v)
        if t in _PLAIN or isinstance(v, str):  # tilelang dtypes are str subclasses
            self.put("v", f"{t.__module__}.{t.__qualname__}", repr(v))
        elif t in (tuple, frozenset):
            items = sorted(v, key=repr) if t is frozenset else v
            self.put("(", t.__name__, str(len(v)))
            for x in items:
                self.value(x, depth + 1)
            self.put(")")
        elif isinstance(v, types.ModuleType):  # tilelang.language is a ModuleType subclass
            name = v.__name__
            if name.split(".")[0] not in _TRUSTED_MODULES:
                raise _Unsafe(f"module {name}")
            self.put("m", name)
        elif t is types.FunctionType:
            self.function(v, depth + 1)
        elif t is types.BuiltinFunctionType:
            mod = getattr(v, "__module__", None) or ""
            if mod != "builtins" and mod.split(".")[0] not in _TRUSTED_MODULES:
                raise _Unsafe(f"builtin {v!r}")
            self.put("b", mod, v.__qualname__)
        elif t.__module__ == "torch" and t.__name__ == "dtype":
            self.put("td", str(v))
        elif t.__module__ == "tilelang.language.macro" and t.__name__ == "Macro" and \
                isinstance(getattr(v, "fn", None), types.FunctionType):
            self.put("macro", repr(getattr(v, "hygienic", None)))
            self.function(v.fn, depth + 1)
        else:
            raise _Unsafe(f"{t.__module__}.{t.__qualname__}")

    def function(self, fn, depth: int) -> None:
        if id(fn) in self.seen:
            self.put("again", str(self.seen[id(fn)]))
            return
        self.seen[id(fn)] = len(self.seen)
        code = fn.__code__
        self.put("f", fn.__module__ or "", fn.__qualname__)
        self.code(code)
        fname = code.co_filename
        if fname not in self.files:
            self.files.add(fname)
            self.put("file", fname, _file_text(fname))
        self.value(fn.__defaults__, depth)
        self.value(tuple(sorted((fn.__kwdefaults__ or {}).items())), depth)
        for cell in fn.__closure__ or ():
            try:
                self.value(cell.cell_contents, depth)
            except ValueError:  # an empty cell (a name assigned later in the outer function)
                self.put("empty-cell")
        g = fn.__globals__
        for name in sorted(_names(code)):
            if name in g:
                self.put("g", name)
                self.value(g[name], depth)
            elif hasattr(builtins, name):
                self.put("builtin", name)


    def code(self, code) -> None:
        """Bytecode, names and constants (nested code recursively); not marshal.dumps, whose
        bytes depend on reference counts."""
        self.put("code", code.co_code, repr((code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                                             code.co_flags, code.co_names, code.co_varnames, code.co_freevars,
                                             code.co_cellvars, code.co_firstlineno)))
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                self.code(c)
            else:
                self.put("const", type(c).__name__, repr(c))


def _names(code) -> set[str]:
    """Names the code (and its nested code) may look up, string annotations included."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
        elif isinstance(c, str) and len(c) < 2000:
            out.update(_IDENT.findall(c))
        elif isinstance(c, tuple):
            out.update(n for s in c if isinstance(s, str) for n in _IDENT.findall(s))
    return out


def kernel_key(fn, arguments: dict, options: dict, target) -> str | None:
    """The cache key of `fn(**arguments)` compiled with `options` for `target`, or None."""
    from .. import env
    from ..engine import callback

    if not env.kernel_cache_enabled() or env.dump_ir_dir() is not None or callback.registered():  # any callback (a dict of them) turns the cache off
        return None
    configs = options.get("pass_configs") or {}
    if not isinstance(configs, dict) or UNSAFE_PASS_CONFIGS & set(configs):
        return None
    hs = _Hasher()
    try:
        hs.put(FORMAT, sys.version, compiler_digest(), str(target))
        hs.function(fn, 0)
        for k in sorted(arguments):
            hs.put("arg", k)
            hs.value(_plain(arguments[k]))
        for k in sorted(options):
            if k in ("pass_configs", "target", "verbose"):
                continue
            hs.put("opt", k)
            hs.value(_plain(options[k]))
        for k in sorted(configs, key=str):
            hs.put("cfg", str(k))
            hs.value(_plain(configs[k]))
        for k in sorted(os.environ):
            if k.startswith(_ENV_PREFIXES):
                hs.put("env", k, os.environ[k])
    except _Unsafe:
        return None
    return hs.h.hexdigest()


def _plain(v):
    """Lists and dicts as tuples (argument and option values are read, not kept)."""
    if isinstance(v, list):
        return ("list",) + tuple(_plain(x) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple((str(k), _plain(x)) for k, x in sorted(v.items(), key=lambda kv: str(kv[0])))
    return v


def load(key: str):
    """The record saved under `key`, or None (missing, unreadable, or from another format)."""
    path = disk.lookup(KIND, key, SUFFIX)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            rec = pickle.load(f)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss
        return None
    return rec if isinstance(rec, dict) and rec.get("format") == FORMAT else None


def save(key: str, record: dict) -> None:
    """Store `record` (a dict of picklable values) under `key`; failures only lose the entry."""
    try:
        data = pickle.dumps({**record, "format": FORMAT}, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - something in the record does not pickle: no entry
        return
    try:
        disk.store(KIND, key, SUFFIX, data)
    except OSError:
        pass
