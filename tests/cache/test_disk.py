"""The disk cache: stable keys, atomic publication, one build per key across processes.

Why these tests: several pytest workers or autotuner processes compile the same kernels at
once; a torn file or a duplicated multi-second build there is a real failure mode.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from pathlib import Path

import pytest

from tilelang import env
from tilelang.cache import disk
from tilelang.errors import TileLangError


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    return root


def leftovers(root: Path) -> list[str]:
    """Temp files that a correct writer never leaves behind."""
    return [p.name for p in root.rglob("*") if ".tmp" in p.name]


# ------------------------------------------------------------------ keys

def test_key_is_sha256_hex_stable_and_framed():
    k = disk.key("abc", b"\x00\x01")
    assert len(k) == 64 and int(k, 16) >= 0
    assert k == disk.key("abc", b"\x00\x01")
    assert disk.key("ab", "c") != disk.key("a", "bc")          # length framing
    assert disk.key("abc") != disk.key(b"abc")                  # str vs bytes tagged
    assert disk.key("abc") != disk.key("abd")


def test_key_includes_format_version(monkeypatch):
    before = disk.key("same input")
    monkeypatch.setattr(disk, "FORMAT_VERSION", "tilelang-disk-cache-v999")
    assert disk.key("same input") != before


def test_key_rejects_other_types():
    with pytest.raises(TypeError, match="str or bytes"):
        disk.key("a", 3)


# ------------------------------------------------------------------ store / lookup

def test_lookup_misses_then_hits_after_store(cache_root):
    k = disk.key("payload")
    assert disk.lookup("blob", k, ".bin") is None
    path = disk.store("blob", k, ".bin", b"hello")
    assert path == disk.lookup("blob", k, ".bin")
    assert path.read_bytes() == b"hello"
    assert path.is_relative_to(cache_root / "blob")
    assert disk.lookup("blob", k, ".txt") is None                # suffix is part of the name
    assert leftovers(cache_root) == []


def test_store_replaces_atomically_under_concurrent_readers(cache_root):
    """Readers never see a partial file while writers keep re-publishing the key."""
    k = disk.key("big")
    blobs = [bytes([i]) * (1 << 21) for i in range(4)]
    disk.store("blob", k, ".bin", blobs[0])
    stop, torn = threading.Event(), []

    def reader():
        while not stop.is_set():
            data = disk.lookup("blob", k, ".bin").read_bytes()
            if data not in blobs:
                torn.append(len(data))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(24):
        disk.store("blob", k, ".bin", blobs[i % 4])
    stop.set()
    for t in threads:
        t.join()
    assert torn == []
    assert leftovers(cache_root) == []


@pytest.mark.parametrize("kind,k,suffix", [("../x", "ab" * 32, ""), ("blob", "../../etc", ""),
                                           ("blob", "AB" * 32, ""), ("blob", "ab" * 32, "/x")])
def test_names_that_could_escape_the_cache_are_refused(kind, k, suffix):
    with pytest.raises(ValueError):
        disk.lookup(kind, k, suffix)


# ------------------------------------------------------------------ get_or_build

def _racer(k: str, counter: str, barrier, results) -> None:
    def build(out: Path) -> None:
        with open(counter, "a") as f:        # O_APPEND: each build adds exactly one line
            f.write(f"{os.getpid()}\n")
        time.sleep(0.3)                      # long enough that the others are waiting
        out.write_bytes(b"built once")

    barrier.wait()
    path = disk.get_or_build("obj", k, ".o", build)
    results.put((str(path), path.read_bytes()))


def test_processes_racing_on_one_key_build_it_once(tmp_path, cache_root):
    ctx = mp.get_context("fork")
    counter = tmp_path / "builds.txt"
    k = disk.key("raced")
    n = 4
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(k, str(counter), barrier, results))
             for _ in range(n)]
    for p in procs:
        p.start()
    got = [results.get(timeout=20) for _ in range(n)]
    for p in procs:
        p.join(timeout=20)
        assert p.exitcode == 0
    assert len(counter.read_text().splitlines()) == 1
    assert {g for g in got} == {(str(disk.path_for("obj", k, ".o")), b"built once")}
    assert leftovers(cache_root) == []


def test_get_or_build_hit_skips_the_build(cache_root):
    k, calls = disk.key("once"), []

    def build(out: Path) -> None:
        calls.append(out)
        assert out.parent == disk.path_for("obj", k, ".o").parent  # same dir: rename is atomic
        assert out.name.endswith(".o") and not out.exists()
        out.write_bytes(b"x")

    first = disk.get_or_build("obj", k, ".o", build)
    second = disk.get_or_build("obj", k, ".o", build)
    assert first == second and len(calls) == 1 and first.read_bytes() == b"x"


def test_failed_build_publishes_nothing_and_releases_the_lock(cache_root):
    k = disk.key("flaky")

    def bad(out: Path) -> None:
        out.write_bytes(b"half")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        disk.get_or_build("obj", k, ".o", bad)
    assert disk.lookup("obj", k, ".o") is None
    assert leftovers(cache_root) == []
    path = disk.get_or_build("obj", k, ".o", lambda out: out.write_bytes(b"ok"))
    assert path.read_bytes() == b"ok"


def test_build_that_writes_nothing_is_an_error():
    with pytest.raises(TileLangError, match="without writing"):
        disk.get_or_build("obj", disk.key("lazy"), ".o", lambda out: None)


# ------------------------------------------------------------------ TILELANG_DISABLE_CACHE

def test_disabled_cache_builds_every_time_and_writes_nothing(monkeypatch, cache_root):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    k, calls = disk.key("nocache"), []

    def build(out: Path) -> None:
        calls.append(out)
        out.write_bytes(b"fresh")

    a = disk.get_or_build("obj", k, ".o", build)
    b = disk.get_or_build("obj", k, ".o", build)
    assert len(calls) == 2 and a != b and a.read_bytes() == b"fresh"
    stored = disk.store("obj", k, ".o", b"data")
    assert stored.read_bytes() == b"data"
    assert disk.lookup("obj", k, ".o") is None
    assert not cache_root.exists()


# ------------------------------------------------------------------ env accessors

def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "explicit"))
    assert env.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("TILELANG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert env.cache_dir() == tmp_path / "xdg" / "tilelang"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert env.cache_dir() == tmp_path / "home" / ".cache" / "tilelang"


def test_env_flags_and_defaults(monkeypatch):
    for name in ("TILELANG_DISABLE_CACHE", "TILELANG_DEFAULT_TARGET", "TL_DUMP_IR", "TILELANG_CC"):
        monkeypatch.delenv(name, raising=False)
    assert env.cache_disabled() is False and env.default_target() == "auto"
    assert env.dump_ir_dir() is None and env.c_compiler() in ("cc", "gcc")
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "CPU")
    monkeypatch.setenv("TL_DUMP_IR", "/tmp/ir")
    monkeypatch.setenv("TILELANG_CC", "clang-17")
    assert env.cache_disabled() is True and env.default_target() == "cpu"
    assert env.dump_ir_dir() == Path("/tmp/ir") and env.c_compiler() == "clang-17"
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "maybe")
    with pytest.raises(TileLangError, match="TILELANG_DISABLE_CACHE"):
        env.cache_disabled()
    assert "TL_DUMP_IR" in env.describe()
