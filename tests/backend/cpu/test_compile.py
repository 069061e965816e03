"""compile_c: build + load + cache behaviour, readable compile errors, and the header's
integer/math/atomic helpers exercised through real compiled code.

Why: every CPU kernel goes through compile_c, so a cache hit must be cheap (a fresh process
loads a cached kernel in milliseconds) and a failure must point at the generated line.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tilelang.backend.cpu import compile as cc
from tilelang.backend.cpu.compile import compile_c
from tilelang.errors import CompileError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILELANG_CC", raising=False)
    return root


def unique_source(body: str) -> str:
    # A nonce comment: a fresh cache dir already guarantees a cold build; this guards the
    # in-process dlopen, which returns the old handle for an identical path.
    return f'#include "cpu/tl_cpu.h"\n/* {os.urandom(8).hex()} */\n{textwrap.dedent(body)}'


def test_compile_call_and_cache_hit(fresh_cache):
    src = unique_source("""
        int64_t axpy(int64_t n, float a, const float *x, float *y) {
            for (int64_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
            return n;
        }""")
    cold = compile_c(src)
    assert not cold.cache_hit and cold.compile_seconds > 0
    assert cold.path.is_relative_to(fresh_cache)
    fn = cold.function("axpy", ctypes.c_int64, [ctypes.c_int64, ctypes.c_float,
                                                ctypes.c_void_p, ctypes.c_void_p])
    x = np.random.randn(1000).astype(np.float32)
    y = np.random.randn(1000).astype(np.float32)
    want = np.float32(1.5) * x + y
    assert fn(1000, 1.5, x.ctypes.data, y.ctypes.data) == 1000
    np.testing.assert_array_equal(y, want)  # no fma contraction, so bit-exact with numpy

    hot = compile_c(src)
    assert hot.cache_hit and hot.compile_seconds == 0.0 and hot.path == cold.path
    assert hot.total_seconds < cold.total_seconds / 4  # (wall-clock bounds are for benchmarks: a loaded CI box)


def test_fresh_process_loads_cached_library_in_milliseconds(fresh_cache):
    src = unique_source("int answer(void) { return 42; }")
    compile_c(src)
    probe = textwrap.dedent(f"""
        from tilelang.backend.cpu.compile import compile_c
        lib = compile_c({src!r})
        assert lib.cache_hit and lib.answer() == 42
        print(lib.total_seconds)
    """)
    res = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    assert float(res.stdout) < 0.5  # measured ~3 ms; only a rebuild-sized regression fails on a loaded CI box


def test_compile_error_names_the_error_and_shows_the_line():
    src = unique_source("""
        float f(float x) {
            float y = x * 2.0f;
            return y + undefined_thing;
        }""")
    with pytest.raises(CompileError) as info:
        compile_c(src)
    msg = str(info.value)
    assert "undefined_thing" in msg and "undeclared" in msg
    line = src.splitlines().index("    return y + undefined_thing;") + 1
    assert f"kernel.c:{line}:" in msg
    assert f">{line:5d} |     return y + undefined_thing;" in msg
    assert not list(Path(os.environ["TILELANG_CACHE_DIR"]).rglob("*.so"))  # nothing cached


def test_missing_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TILELANG_CC", "no-such-compiler-xyz")
    with pytest.raises(CompileError, match="TILELANG_CC"):
        compile_c(unique_source("int f(void) { return 0; }"))


def test_falls_back_without_openmp(tmp_path, monkeypatch):
    """A compiler that rejects -fopenmp (clang without libomp) still compiles kernels."""
    real = shutil.which("cc") or shutil.which("gcc")
    wrapper = tmp_path / "cc-no-omp"
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp ] && exit 1; done\n'
                       f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("TILELANG_CC", str(wrapper))
    lib = compile_c(unique_source("""
        int nthreads(void) {
            int n = 0;
        #pragma omp parallel reduction(+ : n)
            n += 1;
            return n;
        }"""))
    assert "-fopenmp" not in lib.flags and "-march=native" in lib.flags
    assert lib.nthreads() == 1


def test_header_edit_changes_the_key(tmp_path, monkeypatch):
    inc = tmp_path / "include"
    shutil.copytree(cc.INCLUDE_DIR / "cpu", inc / "cpu")
    monkeypatch.setattr(cc, "INCLUDE_DIR", inc)
    before = cc.header_digest()
    with open(inc / "cpu" / "tl_cpu.h", "a") as f:
        f.write("\n/* edited */\n")
    assert cc.header_digest() != before


def test_disabled_cache_compiles_every_time(monkeypatch, fresh_cache):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    src = unique_source("int one(void) { return 1; }")
    a, b = compile_c(src), compile_c(src)
    assert not a.cache_hit and not b.cache_hit and a.path != b.path and b.one() == 1
    assert not list(fresh_cache.rglob("*.so"))


# ------------------------------------------------------------------ header helpers

HELPERS = unique_source("""
    #define BIN(NAME, T, F) void NAME(const T *a, const T *b, T *o, int64_t n) { \\
        for (int64_t i = 0; i < n; ++i) o[i] = F(a[i], b[i]); }
    BIN(fdiv32, int32_t, tl_floordiv_i32) BIN(fmod32, int32_t, tl_floormod_i32)
    BIN(cdiv32, int32_t, tl_ceildiv_i32)  BIN(fdiv64, int64_t, tl_floordiv)
    BIN(fmod64, int64_t, tl_floormod)     BIN(cdiv64, int64_t, tl_ceildiv)
    BIN(maxf, float, tl_max)              BIN(mind, double, tl_min)
    void unary(const float *x, float *o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
            o[4 * i] = tl_exp2f(x[i]); o[4 * i + 1] = tl_rsqrtf(x[i]);
            o[4 * i + 2] = tl_sigmoidf(x[i]); o[4 * i + 3] = (float)tl_sigmoid((double)x[i]);
        }
    }
    /* Contended atomics: 4 threads on 2 cores, all hitting the same few addresses. */
    void atomics(int64_t n, const float *v, float *f32, double *f64, int32_t *i32,
                 int64_t *i64, tl_half *f16, tl_bf16 *bf16, float *mx, float *mn,
                 int32_t *imx, int64_t *imn) {
    #pragma omp parallel for num_threads(4) schedule(static, 1)
        for (int64_t i = 0; i < n; ++i) {
            tl_atomic_add_f32(f32, 1.0f); tl_atomic_add_f64(f64, 0.5);
            tl_atomic_add_i32(i32, 3); tl_atomic_add_i64(i64, -2);
            if (i < 2048) tl_atomic_add_f16(f16, (tl_half)1.0f);
            if (i < 256) tl_atomic_add_bf16(bf16, tl_f32_to_bf16(1.0f));
            tl_atomic_max_f32(mx, v[i]); tl_atomic_min_f32(mn, v[i]);
            tl_atomic_max_i32(imx, (int32_t)(i * 7919 % 100003));
            tl_atomic_min_i64(imn, -(int64_t)(i * 7919 % 100003));
        }
    }""")


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return compile_c(HELPERS)


def _binary(lib, name, a, b):
    out = np.full_like(a, 0x5A5A5A5A)
    getattr(lib, name)(a.ctypes.data_as(ctypes.c_void_p), b.ctypes.data_as(ctypes.c_void_p),
                       out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(a.size))
    return out


@pytest.mark.parametrize("bits", [32, 64])
def test_integer_division_follows_python(helpers, bits):
    big = 2 ** (bits - 2)
    vals = [-big, -17, -8, -7, -3, -1, 0, 1, 3, 7, 8, 17, big]
    pairs = [(x, y) for x, y in itertools.product(vals, vals) if y != 0]
    dt = np.int32 if bits == 32 else np.int64
    a, b = np.array([p[0] for p in pairs], dt), np.array([p[1] for p in pairs], dt)
    assert _binary(helpers, f"fdiv{bits}", a, b).tolist() == [x // y for x, y in pairs]
    assert _binary(helpers, f"fmod{bits}", a, b).tolist() == [x % y for x, y in pairs]
    assert _binary(helpers, f"cdiv{bits}", a, b).tolist() == [-(-x // y) for x, y in pairs]


def test_float_helpers(helpers):
    nan, inf = np.nan, np.inf
    a = np.array([1.0, -0.5, nan, 2.0, -inf], np.float32)
    b = np.array([2.0, -1.5, 3.0, nan, 1.0], np.float32)
    assert _binary(helpers, "maxf", a, b).tolist() == [2.0, -0.5, 3.0, 2.0, 1.0]  # fmax: NaN ignored
    assert _binary(helpers, "mind", a.astype(np.float64), b.astype(np.float64)).tolist() == \
        [1.0, -1.5, 3.0, 2.0, -inf]
    x = np.array([0.0, 1.0, -3.0, 100.0, -100.0, 4.0, np.nan, np.inf, -np.inf], np.float32)
    out = np.full(4 * x.size, nan, np.float32)
    helpers.unary(x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
                  ctypes.c_int64(x.size))
    out = out.reshape(-1, 4).astype(np.float64)
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(out[:, 0], np.exp2(xd), rtol=1e-6)  # NaN == NaN here
        np.testing.assert_allclose(out[[1, 5], 1], 1 / np.sqrt(xd[[1, 5]]), rtol=1e-6)
        assert np.isinf(out[0, 1]) and np.isnan(out[2, 1])
        sig = 1 / (1 + np.exp(-xd))
    np.testing.assert_allclose(out[:, 2], sig, rtol=1e-6, atol=1e-45)  # -100: f32 denormal
    np.testing.assert_allclose(out[:, 3], sig, rtol=1e-6, atol=1e-45)
    assert out[4, 2] > 0  # sigmoid(-100) = 3.7e-44 must not flush to 0


def test_atomics_under_openmp_contention(helpers):
    assert "-fopenmp" in helpers.flags
    n = 200_000
    v = np.random.randn(n).astype(np.float32)
    f32, f64 = np.zeros(1, np.float32), np.zeros(1, np.float64)
    i32, i64 = np.zeros(1, np.int32), np.zeros(1, np.int64)
    f16, bf16 = np.zeros(1, np.float16), np.zeros(1, np.uint16)
    mx, mn = np.array([-np.inf], np.float32), np.array([np.inf], np.float32)
    imx, imn = np.array([-1], np.int32), np.array([1], np.int64)
    arrays = [v, f32, f64, i32, i64, f16, bf16, mx, mn, imx, imn]
    helpers.atomics(ctypes.c_int64(n), *[a.ctypes.data_as(ctypes.c_void_p) for a in arrays])
    assert f32[0] == n and f64[0] == n / 2 and i32[0] == 3 * n and i64[0] == -2 * n
    assert f16[0] == 2048 and bf16[0] == 0x4380  # 256.0 in bf16: every add landed
    assert mx[0] == v.max() and mn[0] == v.min()
    ks = np.arange(n, dtype=np.int64) * 7919 % 100003
    assert imx[0] == ks.max() and imn[0] == -ks.max()


def test_cuda_only_import_source_on_cpu_names_the_users_code():
    """A T.import_source text the C compiler rejects (CUDA C++ here) is reported as the kernel's imported
    code, not as a TileLang bug."""
    import tilelang
    import tilelang.language as T
    from tilelang.errors import CompileError

    cuda_src = "template <typename T> __device__ T twice(T x) { return x + x; }\n"

    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as _:
            T.import_source(cuda_src)
            A[0] = A[0] + 1.0

    with pytest.raises(CompileError) as e:
        tilelang.compile(k, target="cpu")
    assert "T.import_source code" in str(e.value) and "TileLang bug" not in str(e.value)


def test_every_shared_header_the_cpu_headers_include_is_in_the_cache_key():
    """An edit to a tl/ header the CPU headers include must miss the CPU compile cache: each such
    include is listed in SHARED_HEADERS, which header_digest hashes."""
    import re

    from tilelang.backend.cpu import compile as cpu_compile

    inc = cpu_compile.INCLUDE_DIR
    used = {m for p in (inc / "cpu").rglob("*.h") for m in re.findall(r'#include "(tl/[^"]+)"', p.read_text())}
    assert used and used <= set(cpu_compile.SHARED_HEADERS), used - set(cpu_compile.SHARED_HEADERS)
