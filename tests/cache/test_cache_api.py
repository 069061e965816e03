"""tilelang.disable_cache / enable_cache / clear_cache as public TileLang spells them."""
import tilelang
import tilelang.language as T


def kernel_prim():
    @T.prim_func
    def twice(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0
    return twice


def test_disable_enable_and_clear(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "0")  # restored after the test
    assert tilelang.is_cache_enabled()
    first = tilelang.compile(kernel_prim(), target="cpu")
    again = tilelang.compile(kernel_prim(), target="cpu")
    assert not first.artifact.lib.cache_hit and again.artifact.lib.cache_hit
    tilelang.disable_cache()
    assert not tilelang.is_cache_enabled()
    assert not tilelang.compile(kernel_prim(), target="cpu").artifact.lib.cache_hit
    tilelang.enable_cache()
    assert tilelang.compile(kernel_prim(), target="cpu").artifact.lib.cache_hit
    tilelang.clear_cache()
    assert not (tmp_path / "cache").exists()
    assert not tilelang.compile(kernel_prim(), target="cpu").artifact.lib.cache_hit


def test_set_log_level():
    import logging

    tilelang.set_log_level("INFO")
    assert logging.getLogger("tilelang").level == logging.INFO
    tilelang.set_log_level(logging.WARNING)
    assert logging.getLogger("tilelang").level == logging.WARNING
