"""ptxas' "wgmma.mma_async instructions are serialized" notes (C75xx) become a PerformanceWarning that
names the code and ptxas' reason: a build whose tensor-core instructions run one at a time is a
fast path lost, which the user should hear about. Attention at D128 with 192-row tiles on three
consumer warpgroups (128 registers a thread) is serialized for registers (C7511); at 128-row tiles
on two warpgroups it is not."""
import sys
import warnings
from pathlib import Path

import pytest

import tilelang
from tilelang.backend.cuda.pipeline import PerformanceWarning


def _build(cfg):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from flash_attention import flashattn

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tilelang.compile(flashattn.get_tir(1, 2, 256, 128, False, *cfg), target="cuda -arch=sm_90a")
    return k, [str(m.message) for m in w if issubclass(m.category, PerformanceWarning)]


@pytest.mark.nvrtc
def test_serialized_wgmma_is_a_performance_warning():
    k, msgs = _build((192, 128, 2, 384))
    assert "are serialized" in (k.artifact.compiled.log or "")
    hits = [m for m in msgs if "ptxas serialized the wgmma instructions" in m]
    assert len(hits) == 1 and "C75" in hits[0] and "register" in hits[0], msgs


@pytest.mark.nvrtc
def test_pipelined_wgmma_gives_no_such_warning():
    k, msgs = _build((128, 128, 2, 256))
    assert "are serialized" not in (k.artifact.compiled.log or "")
    assert not [m for m in msgs if "serialized" in m], msgs
