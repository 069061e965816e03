"""Run peer example tests (the public TileLang's own test_*.py files) on a machine with no GPU.

A development aid, not a conformance result: the peer suite's verdict comes from the GPU machine
(`bash .peer/suite.sh ours`). Here every "cuda" tensor the test makes is a CPU tensor, kernels run on
our CPU backend, and (with --sm90) each kernel is also compiled for sm_90a with NVRTC, so missing
names, lowering errors and CPU-backend wrong results show up without device time.

    python scripts/peer_cpu.py .peer/tilelang-examples/norm/test_rms_norm.py [more files or file::test] [--sm90]
        [--timeout S] [-- extra pytest args]

What it changes, for the test process only:
- torch factory calls and `.to()/.cuda()` with a CUDA device get the CPU device instead;
- `torch.cuda.is_available()` says True and the device is an sm_90 with 132 SMs, so requires_cuda*
  decorators let the tests run; `torch.cuda.synchronize`, events and streams are host no-ops;
- every tilelang target resolves to "cpu"; `tilelang.carver.arch.driver` answers as an H200 (132 SMs);
- a floating tensor divided by a Python number is computed as CUDA torch computes it: times the
  reciprocal (rounded in the op's compute precision), not a true division. References written
  on GPUs match kernels that multiply by `1 / c` (deepseek_v4 act_quant: `amax / 448.0` against
  a kernel's `amax * (1 / 448)`), and CPU torch's division differs from both in the last bit.
Kernels then run on the CPU backend at the test's own sizes: large examples are slow there.
"""
from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _cpu_device(dev):
    import torch

    if dev is None:
        return dev
    if isinstance(dev, int):
        return torch.device("cpu")
    d = torch.device(dev) if isinstance(dev, str) else dev
    return torch.device("cpu") if isinstance(d, torch.device) and d.type == "cuda" else dev


def install_torch_shims():
    """Map CUDA tensors to CPU ones and make torch.cuda's host API answer as an sm_90 GPU would."""
    import time
    import types

    import torch
    from torch.overrides import TorchFunctionMode

    scalar_div = {torch.Tensor.div, torch.Tensor.__truediv__, torch.div, torch.true_divide,
                  torch.Tensor.true_divide}
    scalar_div_ = {torch.Tensor.div_, torch.Tensor.__itruediv__, torch.Tensor.true_divide_}

    def cuda_scalar_div(func, args, kwargs):
        """CUDA torch's `tensor / python_number`: a * (1 / b) in opmath (float32 for 16-bit floats)."""
        a, b = args[0], args[1]
        opmath = torch.float64 if a.dtype == torch.float64 else torch.float32
        inv = torch.tensor(1.0, dtype=opmath) / torch.tensor(float(b), dtype=opmath)
        out = (a.to(opmath) * inv).to(a.dtype)
        return a.copy_(out) if func in scalar_div_ else out

    class CudaToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in (torch.Tensor.cuda,):
                return args[0]
            if (func in scalar_div or func in scalar_div_) and len(args) == 2 and not kwargs \
                    and isinstance(args[0], torch.Tensor) and args[0].is_floating_point() \
                    and not args[0].is_complex() and isinstance(args[1], (int, float)) \
                    and not isinstance(args[1], bool):
                return cuda_scalar_div(func, args, kwargs)
            if "device" in kwargs:
                kwargs["device"] = _cpu_device(kwargs["device"])
            if func is torch.Tensor.to and len(args) > 1:
                a = args[1]
                if isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):
                    try:
                        args = (args[0], _cpu_device(a)) + tuple(args[2:])
                    except (RuntimeError, TypeError):
                        pass
            return func(*args, **kwargs)

    CudaToCpu().__enter__()
    class Generator(torch.Generator):  # torch.Generator(device="cuda") in references: a CPU generator
        def __new__(cls, device="cpu"):
            return torch._C.Generator(device=_cpu_device(device))

    torch.Generator = Generator

    class _Event:
        def __init__(self, *a, **k):
            self.t = None

        def record(self, *a, **k):
            self.t = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

        def query(self):
            return True

    class _Stream:
        def __init__(self, *a, **k):
            self.cuda_stream = 0

        def synchronize(self):
            pass

        def wait_stream(self, *a):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    props = types.SimpleNamespace(name="NVIDIA H200 (peer_cpu harness)", major=9, minor=0,
                                  multi_processor_count=132, total_memory=139 << 30,
                                  max_shared_memory_per_block_optin=232448, L2_cache_size=60 << 20,
                                  regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                                  warp_size=32)
    c = torch.cuda
    c.is_available = lambda: True
    c.device_count = lambda: 1
    c.current_device = lambda: 0
    c.set_device = lambda *a, **k: None
    c.synchronize = lambda *a, **k: None
    c.get_device_capability = lambda *a, **k: (9, 0)
    c.get_device_name = lambda *a, **k: props.name
    c.get_device_properties = lambda *a, **k: props
    c.Event = _Event
    c.Stream = _Stream
    c.current_stream = lambda *a, **k: _Stream()
    c.default_stream = lambda *a, **k: _Stream()
    c.stream = lambda s=None: _Stream()
    c.empty_cache = lambda: None
    c.init = lambda: None
    c.is_initialized = lambda: True
    c.manual_seed = lambda *a, **k: None  # torch.manual_seed calls these: no recursion into it
    c.manual_seed_all = lambda *a, **k: None
    c.max_memory_allocated = lambda *a, **k: 0
    c.memory_allocated = lambda *a, **k: 0
    c.reset_peak_memory_stats = lambda *a, **k: None
    c.mem_get_info = lambda *a, **k: (props.total_memory, props.total_memory)  # (free, total) bytes


def install_tilelang_shims(sm90: bool):
    """Every target resolves to the CPU backend; with sm90, kernels are also compiled for sm_90a."""
    from tilelang.backend import target as tgt
    from tilelang.carver.arch import driver as arch_driver
    from tilelang.jit import kernel as jk

    orig_resolve = tgt.resolve
    tgt.cuda_arch = lambda: "sm_90a"  # what tilelang.testing's requires_* decorators ask
    h200 = {"MULTIPROCESSOR_COUNT": 132, "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
            "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472,
            "L2_CACHE_SIZE": 60 << 20, "MAX_PERSISTING_L2_CACHE_SIZE": 45 << 20, "MAX_REGISTERS_PER_BLOCK": 65536,
            "WARP_SIZE": 32, "MAX_THREADS_PER_BLOCK": 1024}
    orig_attr = arch_driver.get_device_attribute

    def device_attribute(attr, device_id=0):  # carver's driver (driver.get_num_sms() ...) as on the H200
        return h200[attr] if isinstance(attr, str) and attr in h200 else orig_attr(attr, device_id)

    arch_driver.get_device_attribute = device_attribute

    def resolve(target=None):
        t = orig_resolve(target)
        return tgt.Target("cpu") if t.kind != "cpu" else t

    tgt.resolve = resolve
    jk.resolve = resolve  # imported by name there: tilelang.compile(..., target="cuda") resolves through it
    if not sm90:
        return
    orig_build = jk.build

    dump = os.environ.get("PEER_CPU_DUMP")  # a folder: each sm_90a source and its ptxas line land there

    def build(func, target, pass_configs, *rest):
        try:
            art = orig_build(func, tgt.Target("cuda", "sm_90a"), pass_configs, *rest)
            if dump:
                _dump_sm90(dump, getattr(func, "name", "kernel"), art)
        except Exception as e:  # noqa: BLE001 - report and go on to the CPU run
            print(f"\n[peer_cpu] sm_90a compile of {getattr(func, 'name', func)} failed: "
                  f"{type(e).__name__}: {str(e)[:400]}", file=sys.stderr)
        return orig_build(func, target, pass_configs, *rest)

    jk.build = build


def _dump_sm90(folder: str, name: str, art) -> None:
    """folder/<name>.<n>.cu (the CUDA source) and one line of ptxas info in folder/ptxas.tsv."""
    os.makedirs(folder, exist_ok=True)
    n = len([f for f in os.listdir(folder) if f.startswith(name + ".")])
    src = getattr(art, "source", None) or ""
    with open(os.path.join(folder, f"{name}.{n}.cu"), "w") as f:
        f.write(str(src))
    compiled = getattr(art, "compiled", None)
    line = str(compiled.ptxas_info()) if compiled is not None else ""
    with open(os.path.join(folder, "ptxas.tsv"), "a") as f:
        f.write(f"{name}.{n}\t{line}\n")


class Plugin:
    """pytest plugin: install the shims before the test modules are imported."""

    def __init__(self, sm90):
        self.sm90 = sm90

    def pytest_configure(self, config):
        install_torch_shims()
        install_tilelang_shims(self.sm90)


def _child(argv):
    import pytest

    sm90 = "--sm90" in argv
    argv = [a for a in argv if a != "--sm90"]
    target = argv[0]
    path = target.split("::")[0]
    os.chdir(os.path.dirname(os.path.abspath(path)))
    rest = [os.path.basename(path) + target[len(path):]] + argv[1:]
    sys.path.insert(0, os.getcwd())
    return pytest.main(["-q", "-p", "no:cacheprovider", "-rA", "--tb=short", *rest], plugins=[Plugin(sm90)])


def main(argv):
    if argv and argv[0] == "--child":
        sys.exit(_child(argv[1:]))
    timeout, sm90, files, extra = 600, False, [], []
    it = iter(argv)
    for a in it:
        if a == "--timeout":
            timeout = int(next(it))
        elif a == "--sm90":
            sm90 = True
        elif a == "--":
            extra = list(it)
        else:
            files.append(a)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH", ROOT)] + [ROOT])
    env.setdefault("TILELANG_DEFAULT_TARGET", "cpu")
    # a cache of its own: kernels asked for "cuda" are built for the CPU here
    env.setdefault("TILELANG_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "tilelang-peer-cpu"))
    rc_all = 0
    for f in files:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", f] + (["--sm90"] if sm90 else []) + extra
        try:
            rc = subprocess.run(cmd, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            print(f"[peer_cpu] {f}: TIMEOUT after {timeout} s")
            rc = 124
        print(f"[peer_cpu] {f}: rc={rc}")
        rc_all = rc_all or rc
    return rc_all


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
