"""The compile cache, as public TileLang exposes it: `tilelang.disable_cache()` and friends.

Compiled artifacts live in a content-addressed disk cache (`disk.py`) under
`env.cache_dir()`; each `@tilelang.jit` function also keeps its kernels in memory per
argument tuple. These switches act on the disk cache through TILELANG_DISABLE_CACHE, so
they reach every process this one starts too.

Example::

    tilelang.disable_cache()      # every compile from scratch (e.g. to time the C compiler)
    tilelang.enable_cache()
    tilelang.cache.clear_cache()  # delete everything under the cache directory
"""
from __future__ import annotations

import os
import shutil

from .. import env

__all__ = ["disable_cache", "enable_cache", "is_cache_enabled", "clear_cache"]


def disable_cache() -> None:
    """Never read or write the disk cache from now on (sets TILELANG_DISABLE_CACHE=1)."""
    os.environ[env.DISABLE_CACHE.name] = "1"


def enable_cache() -> None:
    """Use the disk cache again (sets TILELANG_DISABLE_CACHE=0)."""
    os.environ[env.DISABLE_CACHE.name] = "0"


def is_cache_enabled() -> bool:
    return not env.cache_disabled()


def clear_cache() -> None:
    """Delete the disk cache directory (env.cache_dir()); it is recreated on the next compile."""
    shutil.rmtree(env.cache_dir(), ignore_errors=True)
