"""tilelang.testing helpers: seeds, CUDA markers, tensor comparison, error-location assertions."""
import pytest
import torch

import tilelang
import tilelang.testing
from tilelang.errors import Span, TileLangError


def test_set_random_seed_is_reproducible():
    tilelang.testing.set_random_seed(7)
    a = torch.randn(5)
    tilelang.testing.set_random_seed(7)
    assert torch.equal(a, torch.randn(5))


def test_requires_cuda_marks_and_skips():
    @tilelang.testing.requires_cuda
    def t():
        pass

    @tilelang.testing.requires_cuda()
    def t2():
        pass

    for fn in (t, t2):
        names = [m.name for m in fn.pytestmark]
        assert "cuda" in names and "skipif" in names
        skip = next(m for m in fn.pytestmark if m.name == "skipif")
        assert skip.args[0] is (not tilelang.testing.cuda_available())


def test_requires_compute_version():
    @tilelang.testing.requires_cuda_compute_version_ge(9, 0)
    def fn():
        pass

    reasons = [m.kwargs.get("reason", "") for m in fn.pytestmark if m.name == "skipif"]
    assert any("compute capability ge 9.0" in r for r in reasons)
    with pytest.raises(ValueError, match="mode must be one of"):
        tilelang.testing.requires_cuda_compute_version(9, 0, mode="approx")


def test_torch_assert_close_is_exported():
    tilelang.testing.torch_assert_close(torch.ones(3), torch.ones(3))
    with pytest.raises(AssertionError):
        tilelang.testing.torch_assert_close(torch.ones(3), torch.zeros(3))


def test_line_of_and_raises_at(tmp_path):
    src = tmp_path / "user.py"
    src.write_text("x = 1\ny = undefined  # here\n")
    line = tilelang.testing.line_of(str(src), "# here")
    assert line == 2
    err = TileLangError("name 'undefined' is not defined", Span(str(src), 2, 4, 13))
    with tilelang.testing.raises_at(TileLangError, "not defined", str(src), 2):
        raise err
    with pytest.raises(AssertionError, match="expected location"):
        with tilelang.testing.raises_at(TileLangError, "not defined", str(src), 1):
            raise err
    with pytest.raises(AssertionError, match="expected 'typo' in the error message"):
        with tilelang.testing.raises_at(TileLangError, "typo", str(src), 2):
            raise err
    with pytest.raises(ValueError, match="occurs 0 times"):
        tilelang.testing.line_of(str(src), "# nowhere")


def test_main_runs_the_calling_file(tmp_path, monkeypatch):
    test_file = tmp_path / "test_tiny.py"
    test_file.write_text("import tilelang.testing\n\ndef test_ok():\n    assert True\n\n"
                         "if __name__ == '__main__':\n    tilelang.testing.main()\n")
    import subprocess
    import sys
    from pathlib import Path

    env = {"PYTHONPATH": str(Path(tilelang.__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, str(test_file), "-q", "-p", "no:cacheprovider"], capture_output=True,
                         text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 passed" in res.stdout


@pytest.mark.parametrize("have,mode,want_skip", [
    ((9, 0), "le", False), ((9, 0), "lt", True), ((8, 9), "lt", False), ((9, 0), "gt", True),
    ((10, 0), "gt", False), ((9, 0), "ge", False), ((9, 0), "eq", False), ((8, 0), "eq", True)])
def test_every_compute_version_comparison(monkeypatch, have, mode, want_skip):
    monkeypatch.setattr(tilelang.testing, "_compute_version", lambda: have)
    monkeypatch.setattr(tilelang.testing, "cuda_available", lambda: True)
    deco = getattr(tilelang.testing, f"requires_cuda_compute_version_{mode}")(9, 0)

    def fn():
        pass

    fn = deco(fn)
    skips = [m for m in fn.pytestmark if m.name == "skipif" and "compute capability" in m.kwargs["reason"]]
    assert len(skips) == 1 and skips[0].args[0] is want_skip


def test_other_backend_markers_always_skip():
    for name in ("requires_rocm", "requires_cdna", "requires_gfx950", "requires_metal", "requires_ascend"):
        def case():
            pass

        fn = getattr(tilelang.testing, name)(case)
        assert len(fn.pytestmark) == 1
        skip = next(m for m in fn.pytestmark if m.name == "skipif")
        assert skip.args[0] is True and "backend" in skip.kwargs["reason"]
    def fn():
        pass

    fn = tilelang.testing.requires_llvm(fn)
    assert next(m for m in fn.pytestmark if m.name == "skipif").args[0] is False  # a C compiler is here
