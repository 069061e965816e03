"""tilelang.env: public `tilelang.env.NAME` reads give the current values."""
import pytest

import tilelang
import tilelang.env


def test_public_names_read_live_values(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "c"))
    assert tilelang.env.TILELANG_CACHE_DIR == str(tmp_path / "c")
    monkeypatch.delenv("TILELANG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tilelang.env.TILELANG_CACHE_DIR == str(tmp_path / "tilelang")
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "CPU")
    assert tilelang.env.TILELANG_DEFAULT_TARGET == "cpu"
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "yes")
    assert tilelang.env.TILELANG_DISABLE_CACHE == "1"


def test_unknown_name_lists_the_declared_ones():
    with pytest.raises(AttributeError, match="TILELANG_CACHE_DIR, TILELANG_DEFAULT_TARGET"):
        tilelang.env.TILELANG_NO_SUCH_VAR  # noqa: B018


def test_every_declared_variable_is_readable():
    for var in tilelang.env.VARIABLES:
        getattr(tilelang.env, var.name)


def test_pass_config_overrides_parse_and_win(monkeypatch):
    from tilelang.errors import TileLangError
    from tilelang.transform.pass_config import PassConfigKey, with_overrides

    monkeypatch.setenv("TILELANG_PASS_CONFIGS", "tl.disable_tma_lower=true, tl.enable_ws_overlap=0,tl.dump_ir_path=/x")
    got = tilelang.env.pass_config_overrides()
    assert got == {"tl.disable_tma_lower": True, "tl.enable_ws_overlap": 0, "tl.dump_ir_path": "/x"}
    # an enum key of the program's loses to the override's string key; aliases are replaced too
    merged = with_overrides({PassConfigKey.TL_DISABLE_TMA_LOWER: False, "tl.disable_smem_reuse": True},
                            {"tl.disable_tma_lower": True, "tl.disable_shared_memory_reuse": False})
    assert merged == {"tl.disable_tma_lower": True, "tl.disable_shared_memory_reuse": False}
    with pytest.raises(TileLangError, match="'tl.no_such_key' is not a pass config"):
        with_overrides({}, {"tl.no_such_key": 1})
    monkeypatch.setenv("TILELANG_PASS_CONFIGS", "tl.disable_tma_lower")
    with pytest.raises(TileLangError, match="expected 'key=value'"):
        tilelang.env.pass_config_overrides()


def test_pass_config_override_reaches_the_build(monkeypatch):
    """A kernel built under TILELANG_PASS_CONFIGS sees the forced key (a CPU kernel with an unknown
    key fails at build; a known key builds and computes the right numbers)."""
    import torch

    import tilelang.language as T
    from tilelang.errors import TileLangError

    def make():
        @T.prim_func
        def add_one(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:  # noqa: F841
                for i in T.Parallel(64):
                    B[i] = A[i] * 2.0 + 1.0
        return add_one

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILELANG_PASS_CONFIGS", "tl.no_such_key=1")
    with pytest.raises(TileLangError, match="not a pass config"):
        tilelang.compile(make(), target="cpu")
    monkeypatch.setenv("TILELANG_PASS_CONFIGS", "tl.disable_tma_lower=true")
    k = tilelang.compile(make(), target="cpu")
    a = torch.randn(64, dtype=torch.float32)
    b = torch.empty_like(a)
    k(a, b)
    torch.testing.assert_close(b.double(), a.double() * 2 + 1, rtol=1e-6, atol=1e-6)
