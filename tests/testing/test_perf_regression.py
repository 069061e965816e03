"""tilelang.testing.process_func / regression: the harness peer regression_*.py files use."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tilelang.testing
from tilelang.testing import perf_regression as pr

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import tilelang.testing

    calls = []

    def bench(M, N):
        calls.append((M, N))
        return M * 0.001 + N

    def regression_b_second():
        tilelang.testing.process_func(bench, M=2000, N=1)

    def regression_a_first():
        tilelang.testing.process_func(bench, "custom", M=1000, N=0)

    def not_a_case():
        raise AssertionError("must not run")

    if __name__ == "__main__":
        tilelang.testing.regression()
        print("calls", calls)
""")


def _run(tmp_path, **env):
    f = tmp_path / "regression_demo.py"
    f.write_text(SCRIPT)
    res = subprocess.run([sys.executable, str(f)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **env})
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_regression_json_output_runs_cases_in_name_order(tmp_path):
    out = _run(tmp_path, TL_PERF_REGRESSION_FORMAT="json")
    line = [ln for ln in out.splitlines() if ln.startswith(pr.RESULTS_JSON_PREFIX)]
    assert len(line) == 1
    items = json.loads(line[0][len(pr.RESULTS_JSON_PREFIX):])
    assert items == [{"name": "custom", "latency": 1.0, "case": "a_first"},
                     {"name": "__main__", "latency": 3.0, "case": "b_second"}]
    assert "[1/2] a_first" in out and "[2/2] b_second" in out
    assert "calls [(1000, 0), (2000, 1)]" in out


def test_regression_text_output_and_only_filter(tmp_path):
    out = _run(tmp_path, TL_PERF_REGRESSION_ONLY="b_*")
    assert "__main__: 3.0" in out and "custom" not in out
    out = _run(tmp_path, TL_PERF_REGRESSION_ONLY='["A_FIRST"]')
    assert "custom: 1.0" in out and "__main__" not in out.split("\n", 1)[1]


def test_process_func_retries_non_positive_then_warns():
    seq = iter([0.0, -1.0, 2.5])
    pr._results.clear()
    tilelang.testing.process_func(lambda: next(seq), "retry")
    assert pr.results() == [pr.PerfResult("retry", 2.5, None)]
    with pytest.warns(RuntimeWarning, match="latency 0.0 <= 0"):
        tilelang.testing.process_func(lambda: 0.0, "dead")
    assert [r.name for r in pr.results()] == ["retry"]
    pr._results.clear()


def test_bad_format_is_an_error(monkeypatch):
    monkeypatch.setenv("TL_PERF_REGRESSION_FORMAT", "yaml")
    with pytest.raises(tilelang.TileLangError, match="expected 'text' or 'json'"):
        tilelang.env.perf_regression_format()
