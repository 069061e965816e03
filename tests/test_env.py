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
