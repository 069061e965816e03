"""Shared helpers for the GPU benchmarks: timing, error checks, a printed table, JSON out.

    from common import bench, rel_err, table, write_json, skipped

`bench(fn)` is triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") when
Triton imports, else CUDA events around each call (L2 flushed before each, median of N).
Everything here imports without a GPU, so the scripts can be syntax- and CPU-checked.
"""
from __future__ import annotations

import importlib.util
import json
import math
import platform
import statistics
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# this checkout's tilelang only where none is importable: with another tilelang on PYTHONPATH
# (the public wheel), the scripts time that one
if importlib.util.find_spec("tilelang") is None and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_L2_FLUSH_BYTES = 256 << 20


def _triton_do_bench():
    try:
        from triton.testing import do_bench  # noqa: WPS433

        return do_bench
    except Exception:  # noqa: BLE001 - any import failure means "no Triton"
        return None


def timer_name() -> str:
    return "triton.testing.do_bench(median)" if _triton_do_bench() else "cuda events(median)"


def bench(fn, warmup: float = 25, rep: float = 100) -> float:
    """Median milliseconds per call of `fn()` on the GPU."""
    do_bench = _triton_do_bench()
    if do_bench is not None:
        return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    return _event_bench(fn, warmup, rep)


def _event_bench(fn, warmup: float, rep: float) -> float:
    import torch

    flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    s.record()
    for _ in range(5):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 5, 1e-3)
    for _ in range(min(10_000, int(warmup / est))):
        fn()
    n = max(5, min(10_000, int(rep / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends))


def tflops(flops: float, ms: float | None) -> float | None:
    if ms is None or ms <= 0 or not math.isfinite(ms):
        return None
    return flops / ms / 1e9


def rel_err(out, ref) -> float:
    """max|out - ref| / max|ref| in float64 (nan when `out` has a nan, e.g. unwritten poison)."""
    out, ref = out.double(), ref.double()
    denom = ref.abs().max().item() or 1.0
    return (out - ref).abs().max().item() / denom


def ratio(a, b):
    return round(a / b, 3) if a and b else None


def rnd(x, nd=1):
    return None if x is None else round(x, nd)


def skipped(what: str, reason) -> None:
    print(f"  {what}: skipped: {_short(reason)}", flush=True)


def _short(reason, n: int = 300) -> str:
    if isinstance(reason, BaseException):
        reason = f"{type(reason).__name__}: {reason}"
    text = " ".join(str(reason).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def error_text(e: BaseException, n: int = 300) -> str:
    """Short one-line text of `e`; for compiler logs, the first lines that say "error" come first."""
    errs = [ln.strip() for ln in str(e).splitlines() if " error" in ln.lower() or ln.lower().startswith("error")]
    if errs:
        return _short(f"{type(e).__name__}: " + " | ".join(errs[:3]), max(n, 500))
    return _short(e, n)


def print_tb_tail(e: BaseException, lines: int = 6) -> None:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    print("    " + "    ".join("".join(tb).splitlines(True)[-lines:]), end="", flush=True)


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(str(x) for x in v) + ")"
    return str(v)


def table(rows: list[dict], columns: list[str] | None = None, title: str | None = None) -> str:
    """Print `rows` (dicts) as an aligned text table; returns the text."""
    if not rows:
        text = (title + "\n" if title else "") + "(no rows)"
        print(text, flush=True)
        return text
    if columns is None:
        columns = []
        for r in rows:
            columns += [k for k in r if k not in columns]
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = [title] if title else []
    lines.append("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def device_info() -> dict:
    info = {"python": platform.python_version(), "timer": timer_name()}
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
            info["cuda"] = torch.version.cuda
    except Exception as e:  # noqa: BLE001
        info["torch"] = f"unavailable ({_short(e, 80)})"
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        info["triton"] = None
    return info


def write_json(path, obj) -> None:
    if not path:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj, indent=1, default=str))
    print(f"wrote {p}", flush=True)


def require_cuda(script: str) -> bool:
    """True when torch sees a GPU; else prints why and the caller exits 0 (nothing to measure)."""
    try:
        import torch

        if torch.cuda.is_available():
            return True
        reason = "torch sees no CUDA device"
    except Exception as e:  # noqa: BLE001
        reason = f"torch unavailable: {_short(e, 120)}"
    print(f"{script}: skipped: {reason}", flush=True)
    return False


def showdown(fns: dict, flops: float, rounds: int = 5) -> dict:
    """TFLOP/s per name, the median of `rounds` rounds that time every fn in turn.

    The H200's clock drifts with temperature and power by several % within a run, so a
    baseline timed once at the start and our kernel timed later are not comparable; in
    rounds, each side sees the same conditions."""
    times = {n: [] for n in fns}
    for _ in range(rounds):
        for n, fn in fns.items():
            times[n].append(tflops(flops, bench(fn)))
    return {n: sorted(v)[len(v) // 2] for n, v in times.items()}
