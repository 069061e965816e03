"""The GPU tier in one go: cuda-marked tests, every example on target="cuda", sanitizers,
benchmarks. Writes logs and results.json into OUT and prints a table last.

    python scripts/gpu_check.py OUT [--quick] [--part tests|bench]

--part tests: the cuda-marked tests, the examples and the sanitizers; --part bench: the
benchmarks (both by default; on the H200 the parts took about 3 and 4 minutes). Where OUT
persists between the two calls, the second one's summary lists both parts.
"""
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "gpu_out")
OUT.mkdir(parents=True, exist_ok=True)
ENV = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
results = []


def run(name, cmd, timeout=300):
    t0 = time.time()
    with open(OUT / f"{name}.log", "w") as log:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    text = (OUT / f"{name}.log").read_text(errors="replace")
    results.append({"name": name, "rc": rc, "seconds": round(time.time() - t0, 1), "tail": text[-400:]})
    print(f"[{name}] rc={rc} {time.time() - t0:.1f}s", flush=True)
    print(text[-3000:], flush=True)
    return rc, text


def _load(name):
    try:
        return json.loads((OUT / name).read_text())
    except Exception:  # noqa: BLE001 - a benchmark that did not run leaves no (or a partial) file
        return None


py = sys.executable
PART = sys.argv[sys.argv.index("--part") + 1] if "--part" in sys.argv else "all"
if PART not in ("all", "tests", "bench"):
    sys.exit(f"--part takes tests or bench, got {PART!r}")
if PART == "bench" and (OUT / "results.json").exists():  # the tests part's rows, for one table
    results.extend(json.loads((OUT / "results.json").read_text()))
run("nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm", "--format=csv"])
if PART != "bench":
    run("pytest_cuda", [py, "-m", "pytest", "-q", "-x", "-m", "cuda", "tests", "-p", "no:cacheprovider"], 600)
    for ex in sorted((ROOT / "examples").glob("*.py")):
        run(f"example_{ex.stem}", [py, str(ex), "--target", "cuda"], 300)
    # head dim 128: Q and K tiles with 256-byte K-major rows (64-column panels on wgmma)
    run("example_flash_attention_d128", [py, str(ROOT / "examples" / "flash_attention.py"), "--target", "cuda",
                                         "--dim", "128", "--seq", "300"], 300)
if "--quick" not in sys.argv and PART != "bench":
    san = "/usr/local/cuda/bin/compute-sanitizer"
    for ex in ("quickstart", "softmax"):
        for tool in ("memcheck", "racecheck"):
            run(f"sanitizer_{tool}_{ex}", [san, "--tool", tool, "--error-exitcode", "9", py,
                                           str(ROOT / "examples" / f"{ex}.py"), "--target", "cuda"], 300)
    # aligned sizes: the sm_90a warp-specialized path (TMA loads, mbarriers, TMA-store epilogue)
    for tool in ("memcheck", "racecheck"):
        run(f"sanitizer_{tool}_quickstart_tma", [san, "--tool", tool, "--error-exitcode", "9", py,
                                                 str(ROOT / "examples" / "quickstart.py"), "--target", "cuda",
                                                 "--m", "1024", "--n", "768", "--k", "512"], 300)
if "--quick" not in sys.argv and PART != "tests":
    run("bench_gemm", [py, str(ROOT / "benchmarks" / "gemm.py"), "--json", str(OUT / "gemm.json")], 900)
    run("bench_gemm_mma", [py, str(ROOT / "benchmarks" / "gemm.py"), "--path", "mma", "--dtypes", "fp16", "--shapes",
                           "4096", "8192", "--no-canonical", "--no-fp8", "--no-triton", "--json",
                           str(OUT / "gemm_mma.json")], 600)
    run("bench_mma_sync_peak", [py, str(ROOT / "benchmarks" / "mma_sync_peak.py")], 120)
    for shape in ("4096,4096,4096", "8192,8192,8192"):  # per-wave k-loop / epilogue times (tl.debug_timeline)
        run(f"timeline_gemm_{shape.split(',')[0]}", [py, str(ROOT / "benchmarks" / "gemm_timeline.py"), "--shape", shape],
            120)
    run("bench_attention", [py, str(ROOT / "benchmarks" / "attention.py"), "--json", str(OUT / "attention.json")],
        600)
    run("bench_launch_overhead", [py, str(ROOT / "benchmarks" / "launch_overhead.py"), "--json",
                                  str(OUT / "launch_overhead.json")], 300)

(OUT / "results.json").write_text(json.dumps(results, indent=1))
print("\n==== summary ====")
for r in results:
    ok = "ok" if r["rc"] == 0 else f"FAIL({r['rc']})"
    print(f"{r['name']:34s} {ok:10s} {r['seconds']:7.1f}s")
gj = _load("gemm.json") or {}
for row in gj.get("gemm", []):
    print(f"gemm {row['dtype']} {row['shape']} [{row['path']}]: ours {row['ours']} TFLOP/s  cuBLAS {row['cuBLAS']}  "
          f"Triton {row['Triton']}  ours/cuBLAS {row['ours/cuBLAS']}  ours/Triton {row['ours/Triton']}  "
          f"cfg {row['best_cfg']} {row['isa']}")
for row in (_load("gemm_mma.json") or {}).get("gemm", []):
    print(f"gemm {row['dtype']} {row['shape']} [{row['path']}]: ours {row['ours']} TFLOP/s  cuBLAS {row['cuBLAS']}  "
          f"ours/cuBLAS {row['ours/cuBLAS']}  cfg {row['best_cfg']} {row['isa']}")
for row in gj.get("canonical", []):
    print(f"gemm+relu canonical {row['shape']} [{row['path']}]: ours {row['ours']}  cuBLAS+relu {row['cuBLAS+relu']}  "
          f"ratio {row['ours/cuBLAS']}")
for row in gj.get("fp8", []):
    print(f"gemm fp8 {row['shape']}: ours {row['ours']} ({row['isa']})  _scaled_mm {row['scaled_mm']}  "
          f"fast-accum {row['scaled_mm_fast']}  ratio {row['ours/best_scaled_mm']}")
for row in (_load("attention.json") or {}).get("attention", []):
    print(f"attention {row['case']}: ours {row['ours']} TFLOP/s  cuDNN {row['cuDNN']}  flash {row['flash']}  "
          f"ours/cuDNN {row['ours/cuDNN']}  ours/flash {row['ours/flash']}  cfg {row['best_cfg']}")
for row in (_load("launch_overhead.json") or {}).get("launch_overhead", []):
    print(f"launch {row['variant']:34s} {row['us_per_call']} us/call wall  (host {row['host_us']}, "
          f"device {row['device_us']})  {row['note']}")
