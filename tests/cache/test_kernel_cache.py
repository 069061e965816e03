"""The kernel cache: a new process loads a @tilelang.jit kernel without running its factory,
and anything that changes the code (closure constants, globals, pass configs, out_idx,
arguments, the factory's source) misses it."""
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

ROOT = Path(__file__).resolve().parents[2]  # the checkout whose tilelang the children import

PROGRAM = '''
import json, sys
import torch
import tilelang
import tilelang.language as T
import tilelang.backend.cpu.pipeline as cpu

SCALE, CLOSURE, N = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
CONFIGS = json.loads(sys.argv[4])  # the file's text is the same in every run: values come from argv
ran = []
real = cpu.run_passes
cpu.run_passes = lambda *a: (ran.append(1), real(*a))[1]


def make(scale_closure, configs):
    @tilelang.jit(out_idx=[-1], target="cpu", pass_configs=configs)
    def add(n, block=64):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        B[bx * block + i] = A[bx * block + i] * SCALE + scale_closure
        return main
    return add


k = make(CLOSURE, CONFIGS)(N)
a = torch.randn(N)
b = k(a)
ref = a.double() * SCALE + CLOSURE
compile_only = [m for m in ("tilelang.ir.stmt", "tilelang.frontend.parser", "tilelang.op.tile_ops",
                            "tilelang.transform.pass_manager", "tilelang.codegen.c") if m in sys.modules]
print(json.dumps({"lowered": len(ran), "err": (b.double() - ref).abs().max().item(),
                  "cached": k._prim_func is None, "compile_only": compile_only}))
'''


def _run(tmp_path, cache, scale=2.0, closure=1.0, configs="null", n=200, extra_env=None):
    src = tmp_path / "prog.py"
    src.write_text(textwrap.dedent(PROGRAM))
    env = {**os.environ, "TILELANG_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("TILELANG_KERNEL_CACHE", None)
    env.update(extra_env or {})
    out = subprocess.run([sys.executable, str(src), str(scale), str(closure), str(n), configs], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def test_warm_process_skips_lowering(tmp_path):
    cache = tmp_path / "cache"
    first = _run(tmp_path, cache)
    assert first["lowered"] == 1 and not first["cached"] and first["err"] < 1e-5
    warm = _run(tmp_path, cache)
    assert warm["lowered"] == 0 and warm["cached"] and warm["err"] < 1e-5
    assert warm["compile_only"] == [], f"a warm process imported {warm['compile_only']}"
    assert set(first["compile_only"]) == {"tilelang.ir.stmt", "tilelang.frontend.parser", "tilelang.op.tile_ops",
                                          "tilelang.transform.pass_manager", "tilelang.codegen.c"}


SCALE = 2.0


def _make(closure, configs=None):
    @tilelang.jit(out_idx=[-1], target="cpu", pass_configs=configs)
    def add(n, block=64):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
                for i in T.Parallel(block):
                    if bx * block + i < n:
                        B[bx * block + i] = A[bx * block + i] * SCALE + closure
        return main
    return add


def test_changes_miss_the_cache(tmp_path, monkeypatch):
    """A fresh @tilelang.jit has an empty memory cache, as in a new process: what it gets
    comes from the kernel cache, and each change below must compile (and compute) anew."""
    import tilelang.backend.cpu.pipeline as cpu

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    ran = []
    real = cpu.run_passes
    monkeypatch.setattr(cpu, "run_passes", lambda *a: (ran.append(1), real(*a))[1])

    def check(closure=1.0, n=200, configs=None, lowered=1):
        ran.clear()
        k = _make(closure, configs)(n)
        a = torch.randn(n)
        torch.testing.assert_close(k(a).double(), a.double() * SCALE + closure, rtol=1e-6, atol=1e-6)
        assert len(ran) == lowered, (closure, n, configs, SCALE)
        return k

    check()
    assert check(lowered=0)._prim_func is None  # from the kernel cache
    check(closure=3.0)  # a closure constant
    check(n=333)  # an argument
    check(configs={"tl.disable_safe_memory_legalize": True})  # a pass config
    check(configs={"tl.disable_safe_memory_legalize": True}, lowered=0)
    monkeypatch.setitem(globals(), "SCALE", 5.0)  # a global the kernel body reads
    check()
    check(lowered=0)
    k = check(lowered=0)
    assert k.prim_func.name == "main" and k.artifact.lowered is not None  # rebuilt on demand


def test_kernel_cache_off(tmp_path, monkeypatch):
    import tilelang.backend.cpu.pipeline as cpu

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    _make(1.0)(64)
    monkeypatch.setenv("TILELANG_KERNEL_CACHE", "0")
    ran = []
    real = cpu.run_passes
    monkeypatch.setattr(cpu, "run_passes", lambda *a: (ran.append(1), real(*a))[1])
    _make(1.0)(64)
    assert ran == [1]


def _key(fn, **args):
    from tilelang.backend.target import resolve
    from tilelang.cache import kernel_cache

    return kernel_cache.kernel_key(fn, args, {"out_idx": None, "pass_configs": None}, resolve("cpu"))


def _factory(c):
    def f(n):
        return n * c
    return f


def test_key_sees_closures_globals_and_arguments():
    assert _key(_factory(1), n=4) == _key(_factory(1), n=4)
    assert _key(_factory(1), n=4) != _key(_factory(2), n=4)
    assert _key(_factory(1), n=4) != _key(_factory(1), n=5)
    assert _key(_factory(1), n=4) != _key(_factory(1.0), n=4)  # 1 and 1.0 are different kernels


CONFIG = {"block": 64}
SIZE = 64


def _uses_mutable_global(n):
    return n * CONFIG["block"]


def _uses_global_constant(n):
    return n * SIZE


def test_key_refuses_what_it_cannot_see_through(monkeypatch):
    assert _key(_uses_mutable_global, n=4) is None  # a dict can change after import
    assert _key(_factory(object()), n=4) is None
    assert _key(_factory(1), n=[1, 2]) is not None
    k = _key(_uses_global_constant, n=4)
    monkeypatch.setitem(globals(), "SIZE", 128)
    assert _key(_uses_global_constant, n=4) != k


def _uses_language(n):
    return T.ceildiv(n, 4)


def test_key_sees_the_target_and_through_tilelang_language():
    """`T` is a ModuleType subclass (its names load lazily): a factory reading it still gets a key,
    and the key changes with the target."""
    import types

    from tilelang.backend.target import resolve
    from tilelang.cache import kernel_cache

    assert type(T) is not types.ModuleType and _key(_uses_language, n=4) is not None
    opts = {"out_idx": None, "pass_configs": None}
    cpu = kernel_cache.kernel_key(_uses_language, {"n": 4}, opts, resolve("cpu"))
    cuda = kernel_cache.kernel_key(_uses_language, {"n": 4}, opts, resolve("cuda -arch=sm_90a"))
    sm80 = kernel_cache.kernel_key(_uses_language, {"n": 4}, opts, resolve("cuda -arch=sm_80"))
    assert len({cpu, cuda, sm80}) == 3 and None not in (cpu, cuda, sm80)


class _OtherModule(types.ModuleType):
    pass


FOREIGN = _OtherModule("somewhere_else")


def _uses_foreign_module(n):
    return FOREIGN.x * n


def test_key_refuses_an_untrusted_module_subclass():
    assert _key(_uses_foreign_module, n=4) is None


def test_key_sees_environment_and_callbacks(monkeypatch):
    from tilelang.engine import callback

    base = _key(_factory(1), n=4)
    monkeypatch.setenv("TILELANG_SOMETHING", "x")
    assert _key(_factory(1), n=4) != base
    monkeypatch.delenv("TILELANG_SOMETHING")
    assert _key(_factory(1), n=4) == base
    callback.register_c_postproc(lambda code, target: code)
    try:
        assert _key(_factory(1), n=4) is None
    finally:
        callback.unregister_postproc("c")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
