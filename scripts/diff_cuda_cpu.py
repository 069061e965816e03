"""Find the kernel that is wrong: run tests with every CUDA kernel launch replayed on the CPU backend.

For the GPU machine. Each call of a CUDA `JITKernel` first copies its tensor arguments to the host,
then launches on the GPU, then runs the same `PrimFunc` compiled for the CPU backend on the copies,
and compares every tensor argument and returned tensor. A disagreement is printed with the kernel,
the parameter, the share of elements that differ and the largest error:

    python scripts/diff_cuda_cpu.py path/test_x.py[::test] [more] [--all] [-- pytest args]

Only the first few disagreements per kernel are printed (--all prints every call). The two backends
compile the program independently, so where they disagree one of them has a bug (or the kernel
reads memory it never wrote, or depends on the order of atomics beyond the tolerance used here).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 2e-3, "float64": 1e-9}


def _compare(name, pname, got, want, report):
    import torch

    got = got.detach().cpu()
    if got.shape != want.shape:
        report(f"{name}: {pname} shape {tuple(got.shape)} on CUDA, {tuple(want.shape)} on CPU")
        return
    if not got.is_floating_point() and not got.is_complex():
        bad = got != want
        if got.dtype == torch.bool:
            bad = got ^ want
    else:
        g, w = got.double(), want.double()
        tol = TOL.get(str(got.dtype).replace("torch.", ""), 5e-2)
        bad = ~torch.isclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    n = int(bad.sum())
    if n:
        frac = n / max(bad.numel(), 1)
        err = ""
        if got.is_floating_point():
            d = (got.double() - want.double()).abs()
            d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
            err = f", max |cuda - cpu| {float(d.max()):.4g}"
        first = tuple(int(x) for x in bad.nonzero()[0])
        report(f"{name}: {pname} differs in {n} of {bad.numel()} elements ({frac:.2%}){err}; first at {first}: "
               f"cuda {got[first].item()!r} cpu {want[first].item()!r}")


def install(print_all: bool):
    import torch

    import tilelang
    from tilelang.jit import kernel as jk

    orig_call = jk.JITKernel.__call__
    cpu_kernels: dict = {}
    counts: dict = {}

    def call(self, *args, stream=None, **kwargs):
        if self.target.kind != "cuda" or kwargs:
            return orig_call(self, *args, stream=stream, **kwargs)
        name = self.prim_func.name
        host = [a.detach().cpu().clone() if isinstance(a, torch.Tensor) else a for a in args]
        out = orig_call(self, *args, stream=stream)
        torch.cuda.synchronize()
        try:
            ck = cpu_kernels.get(id(self))
            if ck is None:
                ck = tilelang.compile(self.prim_func, out_idx=self.out_idx or None, target="cpu")
                cpu_kernels[id(self)] = ck
            ref = orig_call(ck, *host)
        except Exception as e:  # noqa: BLE001 - a CPU-side failure is reported, the test goes on
            print(f"[diff] {name}: the CPU backend could not run it: {type(e).__name__}: {str(e)[:300]}",
                  file=sys.stderr)
            return out
        n = counts.get(name, 0)
        counts[name] = n + 1

        def report(msg):
            if print_all or n < 3:
                print(f"[diff] call {n} of {msg}", file=sys.stderr)

        inputs = [p for i, p in enumerate(self.prim_func.params) if i not in (self.out_idx or [])]
        for p, a, h in zip(inputs, args, host):
            if isinstance(a, torch.Tensor):
                _compare(name, p.name, a, h, report)
        outs = out if isinstance(out, (list, tuple)) else ([] if out is None else [out])
        refs = ref if isinstance(ref, (list, tuple)) else ([] if ref is None else [ref])
        for i, (o, r) in enumerate(zip(outs, refs)):
            _compare(name, f"output {i}", o, r, report)
        return out

    jk.JITKernel.__call__ = call


class Plugin:
    def __init__(self, print_all):
        self.print_all = print_all

    def pytest_configure(self, config):
        install(self.print_all)


def main(argv):
    import pytest

    print_all = "--all" in argv
    argv = [a for a in argv if a != "--all"]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    rc = 0
    for target in argv:
        path = target.split("::")[0]
        d = os.path.dirname(os.path.abspath(path))
        pid = os.fork()
        if pid == 0:
            os.chdir(d)
            sys.path.insert(0, d)
            os._exit(pytest.main(["-q", "-p", "no:cacheprovider", "-rA", "--tb=short",
                                  os.path.basename(path) + target[len(path):], *extra], plugins=[Plugin(print_all)]))
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(f"[diff] {target}: rc={code}", file=sys.stderr)
        rc = rc or code
    return rc


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main(sys.argv[1:]))
