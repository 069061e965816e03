"""Host time per call with out_idx, beside torch's x.add(1), for whichever tilelang is on the path.

    python benchmarks/host_overhead.py [--calls 1000] [--repeats 7] [--n 128]
    PYTHONPATH=/path/to/public-tilelang python benchmarks/host_overhead.py   # the same program there
    python benchmarks/host_overhead.py --fake-launch   # no GPU: Python cost with a no-op launcher
    python benchmarks/host_overhead.py --pass-config tl.disable_launch_kernel_ex   # A/B a switch
    python benchmarks/host_overhead.py --pass-config tl.disable_lean_launcher     # the first generated launcher
    python benchmarks/host_overhead.py --ab tl.disable_lean_launcher   # both in one process, batches interleaved

The program is one kernel, `B = A + 1` over n float32 elements in one block, compiled with
out_idx=[-1], so each call checks A, allocates B (torch.empty) and launches. It is written
in the language both implementations accept, so the same file times ours and the public
TileLang (the import picks whichever `tilelang` comes first on PYTHONPATH; the first line of
output says which). Each figure is the median over `--repeats` of (wall time of `--calls`
back-to-back calls) / calls (with --ab KEY: batches of the kernel without and with KEY and of
torch interleaved round by round, so that a shared machine's drift hits all alike; the
spread is the per-round ratios' min..max), with the GPU held busy by torch.cuda._sleep while the host
enqueues, so what is timed is host work alone, not the GPU.

--fake-launch (no GPU needed, ours only): compiles for sm_90a with NVRTC and replaces the
driver's launch by a no-op C function built with `cc` (a Python no-op without a C compiler or
with --python-stub), with tensors on the CPU standing in for CUDA
ones (their device check is relaxed): it measures our Python path (checks, output allocation,
argument slots, the launch tuple) apart from the driver. Torch's figure there is the CPU
x.add(1).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def program(tilelang, T, n: int, pass_configs=None):
    @tilelang.jit(out_idx=[-1], **({"pass_configs": pass_configs} if pass_configs else {}))
    def add_one(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                for i in T.Parallel(n):
                    B[i] = A[i] + 1.0
        return main
    return add_one(n)


def per_call_us(fn, calls: int, repeats: int, hold=None) -> float:
    for _ in range(min(500, calls)):
        fn()
    if hold is not None:
        hold(0)
    out = []
    for _ in range(repeats):
        if hold is not None:
            hold(calls)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    if hold is not None:
        hold(0)
    return statistics.median(out)


def interleaved_us(fns: dict, calls: int, repeats: int, hold=None) -> dict:
    """{name: [us per call of each round]}: every round times one batch of each function, the
    order rotating from round to round."""
    names = list(fns)
    for name in names:
        for _ in range(min(500, calls)):
            fns[name]()
    out = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            if hold is not None:
                hold(calls)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            out[name].append((time.perf_counter() - t0) / calls * 1e6)
    if hold is not None:
        hold(0)
    return out


def report_ab(times: dict, key: str) -> None:
    base, other, ref = times["ours"], times["ours+" + key], times["torch"]
    med = statistics.median
    print(f"kernel(a) with out_idx:          {med(base):.2f} us/call (rounds {min(base):.2f}..{max(base):.2f})")
    print(f"the same with {key}: {med(other):.2f} us/call (rounds {min(other):.2f}..{max(other):.2f})")
    print(f"torch x.add(1):                  {med(ref):.2f} us/call (rounds {min(ref):.2f}..{max(ref):.2f})")
    for name, xs, ys in (("ours / torch", base, ref), (f"{key} / ours", other, base)):
        ratios = sorted(x / y for x, y in zip(xs, ys))
        print(f"ratio {name}: median {med(ratios):.3f} (rounds {ratios[0]:.3f}..{ratios[-1]:.3f})")


def cuda_hold(torch):
    """Keeps the GPU busy long enough that enqueueing never waits on it."""
    def hold(calls):
        torch.cuda.synchronize()
        if calls:
            torch.cuda._sleep(int(calls * 40_000))  # ~20 us of GPU time per call at ~2 GHz
    return hold


STUB_LIBCUDA_C = """
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned smem, void *stream, void **params, void **extra) { return 0; }
int cuLaunchKernelEx(const void *config, void *f, void **params, void **extra) { return 0; }
"""


def stub_libcuda():
    """cuLaunchKernel and cuLaunchKernelEx as no-op C functions (built with `cc`), so the fake
    launch costs what ctypes costs with our argument form; None without a C compiler."""
    import ctypes
    import os
    import shutil
    import subprocess
    import tempfile

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    d = tempfile.mkdtemp(prefix="stub_libcuda")
    src, lib = os.path.join(d, "stub.c"), os.path.join(d, "libstubcuda.so")
    with open(src, "w") as f:
        f.write(STUB_LIBCUDA_C)
    if subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src], capture_output=True).returncode:
        return None
    return ctypes.PyDLL(lib)


def fake_launch(kernel, torch, stub=True):
    """Our real launcher with the driver call made a no-op and CPU tensors passing the device check.

    The module load is stubbed (no GPU), cuLaunchKernel / cuLaunchKernelEx become no-op C
    functions called through ctypes as the real ones are (`stub`, where a C compiler is found;
    else a Python function returning 0) and torch's raw-stream lookup returns 0; everything
    else (checks, output allocation, argument slots, PreparedLaunch's argument tuple) is the
    code that runs on the GPU machine. Returns the FastCall and what stands in for the driver.
    """
    import ctypes
    import types

    from tilelang.backend.cuda import driver

    fast = kernel._fast_call()
    if fast is None or not fast.simple:
        raise SystemExit("--fake-launch: this kernel does not take the prepared fast path")
    art = kernel.artifact
    sig = art.csource.signature
    art._fn = types.SimpleNamespace(name=art.csource.entry, module=types.SimpleNamespace(device=0),
                                    _raw_handle=0, _smem_limit=48 * 1024,
                                    packer=types.SimpleNamespace(signature=sig))
    lib = stub_libcuda() if stub else None
    if lib is not None:
        for name in ("cuLaunchKernel", "cuLaunchKernelEx"):
            getattr(lib, name).restype = ctypes.c_int
        driver._launch_holding_gil = lambda: lib.cuLaunchKernel
        driver._launch_ex_holding_gil = lambda: lib.cuLaunchKernelEx
    else:
        driver._launch_holding_gil = driver._launch_ex_holding_gil = lambda: (lambda *args: 0)
    torch._C._cuda_getCurrentRawStream = lambda dev: 0
    fast.prepare()
    fast.check_device = fast.out_device = torch.device("cpu")
    fast.single_device, fast.device_flag = True, "is_cpu"  # as on a one-GPU machine (the lean launcher's flag test)
    fast.call = fast.compile_simple()
    return fast, ("a no-op C cuLaunchKernel%s through ctypes" % ("Ex" if getattr(fast.prepared, "ex", False) else "")
                  if lib is not None else "a Python no-op in place of the driver call")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--fake-launch", action="store_true")
    ap.add_argument("--python-stub", action="store_true",
                    help="--fake-launch: a Python no-op for the driver call, even with a C compiler at hand")
    ap.add_argument("--pass-config", action="append", default=[], metavar="KEY",
                    help="a pass config set to True, e.g. tl.disable_launch_kernel_ex (repeatable)")
    ap.add_argument("--ab", metavar="KEY", default=None,
                    help="also time a second kernel with pass config KEY set, batches interleaved")
    args = ap.parse_args()

    import torch
    import tilelang
    import tilelang.language as T

    configs = {key: True for key in args.pass_config}
    where = getattr(tilelang, "__file__", "?")
    print(f"tilelang {getattr(tilelang, '__version__', '?')} from {where}; torch {torch.__version__}")
    if args.fake_launch:
        import os

        os.environ.setdefault("TILELANG_DEFAULT_TARGET", "cuda -arch=sm_90a")
        k = program(tilelang, T, args.n, configs)
        _, how = fake_launch(k, torch, stub=not args.python_stub)
        if args.ab:
            k_ab = program(tilelang, T, args.n, {**configs, args.ab: True})
            fake_launch(k_ab, torch, stub=not args.python_stub)
        print(f"fake launch: {how}")
        a = torch.randn(args.n)
        x = torch.randn(args.n)
        hold = None
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: run with --fake-launch for the Python-side cost")
            return 0
        k = program(tilelang, T, args.n, configs)
        k_ab = program(tilelang, T, args.n, {**configs, args.ab: True}) if args.ab else None
        a = torch.randn(args.n, device="cuda")
        x = torch.randn(args.n, device="cuda")
        for kern in (k, k_ab) if k_ab is not None else (k,):
            b = kern(a)
            torch.cuda.synchronize()
            err = (b.double() - (a.double() + 1)).abs().max().item()
            print(f"add_one correct: max abs err {err:.1e}")
        hold = cuda_hold(torch)
    if args.ab:
        times = interleaved_us({"ours": lambda: k(a), "ours+" + args.ab: lambda: k_ab(a), "torch": lambda: x.add(1)},
                               args.calls, args.repeats, hold)
        report_ab(times, args.ab)
        return 0
    ours = per_call_us(lambda: k(a), args.calls, args.repeats, hold)
    ref = per_call_us(lambda: x.add(1), args.calls, args.repeats, hold)
    print(f"kernel(a) with out_idx: {ours:.2f} us/call")
    print(f"torch x.add(1):         {ref:.2f} us/call")
    print(f"ratio ours / torch:     {ours / ref:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
