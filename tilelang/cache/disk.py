"""Content-addressed on-disk cache, safe when several processes compile at once.

Why content-addressed: a compiled artifact is a pure function of its inputs (source, flags,
compiler version, headers), so hashing the inputs gives a name that never needs invalidation;
stale entries simply stop being asked for.

Why this shape of concurrency safety:
  * readers never see a half-written file: every file is written to a temp name in the *same*
    directory (same filesystem) and published with `os.replace`, which is atomic on POSIX;
  * two processes that miss the same key build it once: `get_or_build` takes an exclusive
    `fcntl.flock` on a per-key lock file, re-checks, and only then builds. flock locks die with
    the process, so a crashed builder never leaves the key locked.

Layout::

    <cache_dir>/<kind>/<key[:2]>/<key><suffix>     the artifact
    <cache_dir>/<kind>/<key[:2]>/<key>.lock        the per-key build lock (empty, kept)

Example::

    k = disk.key(source, " ".join(flags), compiler_version)
    so = disk.get_or_build("cpu_so", k, ".so", lambda out: run_cc(source, out))

With TILELANG_DISABLE_CACHE=1, `lookup` always misses, and `store`/`get_or_build` write into a
fresh temp directory (removed at interpreter exit) so nothing is shared between calls.
"""
from __future__ import annotations

import atexit
import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from tilelang import env
from tilelang.errors import TileLangError

__all__ = ["FORMAT_VERSION", "key", "root", "path_for", "lookup", "store", "get_or_build"]

# NOTE: bump when the layout or the meaning of a key changes; old entries are then never hit.
FORMAT_VERSION = "tilelang-disk-cache-v1"

_KIND_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_KEY_RE = re.compile(r"^[0-9a-f]{16,128}$")
_SUFFIX_RE = re.compile(r"^[A-Za-z0-9_.-]*$")
_temp_dirs: list[str] = []


def key(*parts: str | bytes) -> str:
    """sha256 hex of the parts, framed by type and length so ("ab", "c") != ("a", "bc")."""
    h = hashlib.sha256(FORMAT_VERSION.encode())
    for part in parts:
        if isinstance(part, str):
            tag, data = b"s", part.encode("utf-8", "surrogatepass")
        elif isinstance(part, (bytes, bytearray, memoryview)):
            tag, data = b"b", bytes(part)
        else:
            raise TypeError(f"cache key parts must be str or bytes, got {type(part).__name__}")
        h.update(tag + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def root() -> Path:
    """The cache root (TILELANG_CACHE_DIR or the XDG default); not created here."""
    return env.cache_dir()


def _check(kind: str, key_: str, suffix: str) -> None:
    # Names become paths: refuse anything that could escape the cache directory.
    if not _KIND_RE.match(kind) or kind in (".", ".."):
        raise ValueError(f"cache kind must be a simple name like 'cpu_so', got {kind!r}")
    if not _KEY_RE.match(key_):
        raise ValueError(f"cache key must be lowercase hex from disk.key(), got {key_!r}")
    if not _SUFFIX_RE.match(suffix):
        raise ValueError(f"cache suffix must be like '.so' or '', got {suffix!r}")


def path_for(kind: str, key_: str, suffix: str) -> Path:
    """Where the entry lives when cached (it may not exist)."""
    _check(kind, key_, suffix)
    return root() / kind / key_[:2] / f"{key_}{suffix}"


def lookup(kind: str, key_: str, suffix: str) -> Path | None:
    """The cached file for this key, or None on a miss (always None when the cache is off)."""
    if env.cache_disabled():
        _check(kind, key_, suffix)
        return None
    path = path_for(kind, key_, suffix)
    return path if path.is_file() else None


def _private_dir() -> Path:
    """A fresh temp dir for uncached builds, removed when the interpreter exits."""
    d = tempfile.mkdtemp(prefix="tilelang-nocache-")
    if not _temp_dirs:
        atexit.register(_cleanup_temp_dirs)
    _temp_dirs.append(d)
    return Path(d)


def _cleanup_temp_dirs() -> None:
    while _temp_dirs:
        shutil.rmtree(_temp_dirs.pop(), ignore_errors=True)


def _entry_dir(kind: str, key_: str, suffix: str) -> Path | None:
    """Create the entry's directory; None when the cache is off or cannot be written."""
    if env.cache_disabled():
        return None
    directory = path_for(kind, key_, suffix).parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        # A read-only home must not stop compilation: fall back to uncached builds.
        if e.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
            return None
        raise
    return directory if os.access(directory, os.W_OK) else None


def _temp_name(directory: Path, key_: str, suffix: str) -> Path:
    # Dot-prefixed and unique per process+call, so concurrent writers never collide; not
    # created here, because build tools (cc -o) want to create their output themselves.
    return directory / f".{key_[:16]}.{os.getpid()}.{secrets.token_hex(6)}.tmp{suffix}"


def _fsync_file(path: Path) -> None:
    """Flush file data before the rename publishes it, so a crash cannot leave a torn entry."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store(kind: str, key_: str, suffix: str, data: bytes) -> Path:
    """Write `data` as the entry for `key_` atomically and return its path.

    Concurrent stores of one key are fine: each writes its own temp file and the last rename
    wins; since the key is a content hash, every writer had the same bytes anyway.
    """
    _check(kind, key_, suffix)
    directory = _entry_dir(kind, key_, suffix)
    if directory is None:
        path = _private_dir() / f"{key_}{suffix}"
        path.write_bytes(data)
        return path
    tmp = _temp_name(directory, key_, suffix)
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        final = path_for(kind, key_, suffix)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final


def _build_into(tmp: Path, build: Callable[[Path], None], kind: str, key_: str) -> None:
    """Run the callback and check it produced a file (a silent no-op build is a bug)."""
    build(tmp)
    if not tmp.is_file():
        raise TileLangError(
            f"cache build for {kind}/{key_[:12]} finished without writing {tmp}; the build "
            "callback must write its output to the path it is given."
        )


def get_or_build(kind: str, key_: str, suffix: str, build: Callable[[Path], None]) -> Path:
    """Return the entry for `key_`, calling `build(tmp_path)` to create it on a miss.

    Across processes the build runs at most once per key: the first process holds the key's
    flock while building; the others block on the lock and then find the finished entry.
    If the build raises, nothing is published and the exception propagates (the next caller
    retries). The callback writes to `tmp_path` (same directory, name ends with `suffix`).
    """
    hit = lookup(kind, key_, suffix)
    if hit is not None:
        return hit
    directory = _entry_dir(kind, key_, suffix)
    if directory is None:
        out = _private_dir() / f"{key_}{suffix}"
        _build_into(out, build, kind, key_)
        return out
    final = path_for(kind, key_, suffix)
    lock_path = directory / f"{key_}.lock"
    with open(lock_path, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            if final.is_file():  # another process built it while we waited for the lock
                return final
            tmp = _temp_name(directory, key_, suffix)
            try:
                _build_into(tmp, build, kind, key_)
                _fsync_file(tmp)
                os.replace(tmp, final)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return final
