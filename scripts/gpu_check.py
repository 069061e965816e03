"""The GPU tier in one go: cuda-marked tests, every example on target="cuda", sanitizers,
benchmarks. Writes logs and results.json into OUT and prints a table last.

    python scripts/gpu_check.py OUT [--quick]
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


py = sys.executable
run("nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm", "--format=csv"])
run("pytest_cuda", [py, "-m", "pytest", "-q", "-x", "-m", "cuda", "tests", "-p", "no:cacheprovider"], 600)
for ex in sorted((ROOT / "examples").glob("*.py")):
    run(f"example_{ex.stem}", [py, str(ex), "--target", "cuda"], 300)
if "--quick" not in sys.argv:
    san = "/usr/local/cuda/bin/compute-sanitizer"
    for ex in ("quickstart", "softmax"):
        for tool in ("memcheck", "racecheck"):
            run(f"sanitizer_{tool}_{ex}", [san, "--tool", tool, "--error-exitcode", "9", py,
                                           str(ROOT / "examples" / f"{ex}.py"), "--target", "cuda"], 300)
    run("bench_gemm", [py, str(ROOT / "benchmarks" / "gemm.py"), "--json", str(OUT / "gemm.json")], 600)

(OUT / "results.json").write_text(json.dumps(results, indent=1))
print("\n==== summary ====")
for r in results:
    ok = "ok" if r["rc"] == 0 else f"FAIL({r['rc']})"
    print(f"{r['name']:34s} {ok:10s} {r['seconds']:7.1f}s")
gj = OUT / "gemm.json"
if gj.exists():
    for row in json.loads(gj.read_text()):
        print(f"gemm fp16 {row['size']}^3: ours {row['ours_tflops']} TFLOP/s  cuBLAS {row['cublas_tflops']}  "
              f"ratio {row['ratio']}  cfg {row['config']}")
