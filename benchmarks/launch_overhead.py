"""Host overhead per call of a tiny TileLang kernel, beside a tiny torch op.

    python benchmarks/launch_overhead.py [--calls 2000] [--repeats 7] [--json out.json]
    python benchmarks/launch_overhead.py --compile-only --target "cuda -arch=sm_90a"

The kernel adds two 128-element float32 vectors in one block of 128 threads, so the
device work is negligible. Each variant is called `--calls` times back to back with
torch.cuda.synchronize() only at the end; wall time / calls (median of `--repeats`) is
the per-call cost. Two more figures separate host from device: with the GPU held busy
by torch.cuda._sleep, `--batch` calls are enqueued and timed on the host alone
(host_us: pure host cost, nothing waits on the GPU), and CUDA events around those queued
calls give the device time per back-to-back launch (device_us: the GPU-side floor).

Variants:
  kernel(a, b, c)                  the user path: argument checks + packing + launch
  kernel(a, b, c, stream=s)        the same with the stream given (no current-stream lookup)
  kernel(a, b) out_idx=[2]         the user path allocating its output (torch.empty)
  PreparedLaunch.launch(stream)    the fast path's launch alone: pointers already in place
  artifact.launch(values, stream)  prebuilt launch values: packing + launch only
  CudaFunction.launch(...)         the driver-level launch with prebuilt grid/args
  x.add_(1)                        a tiny torch op (dispatcher + launch), for scale

It reaches into our internals (PreparedLaunch, artifacts), so it times this checkout only;
benchmarks/host_overhead.py times the out_idx call through either implementation of tilelang.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import device_info, error_text, require_cuda, skipped, table, write_json  # noqa: E402

import torch  # noqa: E402

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402

N_ELEMS = 128


def make_add(n=N_ELEMS, dtype="float32"):
    @T.prim_func
    def tiny_add(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=n) as bx:  # noqa: F841
            for i in T.Parallel(n):
                C[i] = A[i] + B[i]
    return tiny_add


def time_loop(fn, calls: int, repeats: int) -> float:
    """Median wall us/call over `repeats` loops of `calls` back-to-back calls, one sync at the end."""
    for _ in range(min(200, calls)):
        fn()
    torch.cuda.synchronize()
    walls = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(walls)


def time_held(fn, batch: int, repeats: int, sleep_cycles: int):
    """(host us/call, device us/call, ok) with the GPU held by a sleep kernel while enqueueing.

    ok is False when the sleep ended before the host finished enqueueing (then the device
    figure includes host gaps): raise sleep_cycles.
    """
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    hosts, devs, ok = [], [], True
    for _ in range(repeats):
        torch.cuda.synchronize()
        ev[0].record()
        torch.cuda._sleep(sleep_cycles)
        ev[1].record()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        host_ms = (time.perf_counter() - t0) * 1e3
        ev[2].record()
        torch.cuda.synchronize()
        ok = ok and ev[0].elapsed_time(ev[1]) > host_ms
        hosts.append(host_ms * 1e3 / batch)
        devs.append(ev[1].elapsed_time(ev[2]) * 1e3 / batch)
    return statistics.median(hosts), statistics.median(devs), ok


def variants(k, a, b, c, x, k_out=None):
    """(name, fn or an exception saying why it is unavailable)."""
    out = [("kernel(a, b, c)", lambda: k(a, b, c))]
    stream = torch.cuda.current_stream().cuda_stream
    out.append(("kernel(a, b, c, stream=s)", lambda: k(a, b, c, stream=stream)))
    if k_out is not None:
        out.append(("kernel(a, b) out_idx=[2]", lambda: k_out(a, b)))
    try:
        prepared = k._fast.prepared  # the fast path's driver.PreparedLaunch (made by the first call)
        if prepared is None:
            raise RuntimeError("kernel(a, b, c) did not take the prepared fast path")
        out.append(("PreparedLaunch.launch(stream)", lambda: prepared.launch(stream)))
    except Exception as e:  # noqa: BLE001
        out.append(("PreparedLaunch.launch(stream)", e))
    try:
        values, env_, _ = k.binder.bind((a, b, c))
        cvals = k._c_values(values, env_)
        art = k.artifact
        art.launch(cvals, stream=stream)
        out.append(("artifact.launch(prebuilt, stream)", lambda: art.launch(cvals, stream=stream)))
    except Exception as e:  # noqa: BLE001 - internals may move; report, don't crash
        out.append(("artifact.launch(prebuilt, stream)", e))
        cvals = None
    try:
        if cvals is None:
            raise RuntimeError("no prebuilt launch values")
        fn = k.artifact._function()
        grid = k.artifact.grid(cvals)
        block = (k.artifact.csource.threads, 1, 1)
        smem = k.artifact.csource.smem_bytes
        fn.launch(grid, block, smem, cvals, stream)
        out.append(("CudaFunction.launch(prebuilt)", lambda: fn.launch(grid, block, smem, cvals, stream)))
    except Exception as e:  # noqa: BLE001
        out.append(("CudaFunction.launch(prebuilt)", e))
    out.append(("torch x.add_(1)", lambda: x.add_(1)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batch", type=int, default=200, help="calls enqueued while the GPU is held")
    ap.add_argument("--sleep-cycles", type=int, default=100_000_000, help="torch.cuda._sleep length (~50 ms)")
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.compile_only:
        k = tilelang.compile(make_add(), target=args.target)
        print(f"compiled tiny_add for {k.target}: {k.compile_seconds:.2f}s, "
              f"threads={k.artifact.csource.threads} grid={k.artifact.csource.grid}")
        return 0
    if not require_cuda("launch_overhead.py"):
        return 0
    t0 = time.perf_counter()
    k = tilelang.compile(make_add(), target=args.target)
    compile_s = time.perf_counter() - t0
    a, b = (torch.randn(N_ELEMS, device="cuda") for _ in range(2))
    c = torch.full((N_ELEMS,), float("nan"), device="cuda")
    k(a, b, c)
    torch.cuda.synchronize()
    err = (c.double() - (a.double() + b.double())).abs().max().item()
    print(f"tiny_add ({N_ELEMS} float32, 1 block): compile {compile_s:.2f}s, max abs err {err:.1e}", flush=True)
    if not err < 1e-6:
        print("FAIL tiny_add gives wrong results; timing anyway", flush=True)
    x = torch.zeros(N_ELEMS, device="cuda")
    rows = []
    k_out = tilelang.compile(make_add(), out_idx=[2], target=args.target)
    for name, fn in variants(k, a, b, c, x, k_out):
        if isinstance(fn, Exception):
            skipped(name, fn)
            rows.append({"variant": name, "us_per_call": None, "host_us": None, "device_us": None,
                         "note": f"skipped: {error_text(fn, 120)}"})
            continue
        row = {"variant": name, "us_per_call": None, "host_us": None, "device_us": None, "note": ""}
        rows.append(row)
        try:
            row["us_per_call"] = round(time_loop(fn, args.calls, args.repeats), 2)
        except Exception as e:  # noqa: BLE001
            skipped(name, e)
            row["note"] = f"failed: {error_text(e, 120)}"
            continue
        try:
            host, dev, ok = time_held(fn, args.batch, args.repeats, args.sleep_cycles)
            row.update(host_us=round(host, 2), device_us=round(dev, 2))
            if not ok:
                row["note"] = "sleep too short: device_us includes host gaps"
        except Exception as e:  # noqa: BLE001 - torch.cuda._sleep is private
            row["note"] = f"held-GPU split skipped: {error_text(e, 100)}"
        print(f"  {name}: {row['us_per_call']} us/call wall; host {row['host_us']} us, device {row['device_us']} us "
              f"{row['note']}", flush=True)
    print()
    table(rows, title=f"host overhead per call ({args.calls} calls back to back, median of {args.repeats})")
    write_json(args.json, {"meta": device_info(), "launch_overhead": rows, "calls": args.calls,
                           "compile_s": round(compile_s, 3), "correct": err < 1e-6})
    return 0


if __name__ == "__main__":
    sys.exit(main())
