"""Bad calls and bad programs: each must raise a clear TileLangError / TypeError / ValueError.

A case is (kind, seed). Call cases take a fuzz-generated program that passes, compile it for
the CPU once per worker, and call it with one thing wrong: a shape, a dtype, a device, the
strides (non-contiguous), an offset storage (misaligned), too few or too many arguments,
None, two tensors that disagree on a symbolic dim; after each, the right call must still give
the right result (the process stays usable). Program cases are small kernels with one DSL
misuse: out-of-range constant indices (tile and global, negative too), mismatched copy or
gemm tiles, copies between ranks, a reduction into the wrong shape, dims out of range, an
op on a buffer of the wrong scope, a non-constant tile shape, an unknown dtype, a bad value.

Verdicts: clear (the expected error type, with a message naming what was expected), wrong
(no error, or a result that differs from the float64 reference: a misaligned tensor may
be accepted, but then it must compute the right thing), unclear (the right type, a message
under 25 characters), crash (another exception type; a dead worker is counted by the pool).
"""
from __future__ import annotations

import os
import random
import textwrap

import torch

__all__ = ["CALL_CASES", "PROGRAM_CASES", "case_ids", "run_case"]

CALL_CASES = ("shape", "dtype", "device", "noncontig", "misaligned", "few", "many", "none", "scalar", "symdim")
_OK = (TypeError, ValueError)

_PROGRAMS = {
    "oob_index": """
        for j in T.Parallel(16):
            S[16, j] = A[0, j]
        T.copy(S, B)""",
    "copy_shape": """
        F = T.alloc_fragment((8, 32), "float32")
        T.copy(S, F)
        T.copy(F, B)""",
    "gemm_k": """
        W = T.alloc_shared((32, 16), "float32")
        C = T.alloc_fragment((16, 16), "float32")
        T.copy(A, S)
        T.gemm(S, W, C)
        T.copy(C, B)""",
    "reduce_shape": """
        R = T.alloc_fragment((8,), "float32")
        T.copy(A, S)
        T.reduce_sum(S, R, dim=1)""",
    "reduce_global": """
        R = T.alloc_fragment((16,), "float32")
        T.reduce_sum(A, R, dim=1)""",
    "cumsum_global": """
        T.cumsum(A, dim=0)""",
    "gemm_global": """
        C = T.alloc_fragment((16, 16), "float32")
        T.gemm(A, A, C)""",
    "nonconst_shape": """
        X = T.alloc_shared((bx + 1, 16), "float32")
        T.copy(A, X)""",
    "bad_dtype": """
        X = T.alloc_shared((16, 16), "float13")
        T.copy(A, X)""",
    "copy_slice_oob": """
        T.copy(A, S)
        T.copy(S[0:24, 0:16], B)""",
    "parallel_rank": """
        for i in T.Parallel(16, 16):
            S[i, 0] = A[i, 0]""",
    "neg_index": """
        for j in T.Parallel(16):
            S[-17, j] = A[0, j]
        T.copy(S, B)""",
    "global_oob_index": """
        T.copy(A, S)
        B[16, 0] = S[0, 0]""",
    "reduce_dim": """
        R = T.alloc_fragment((16,), "float32")
        T.copy(A, S)
        T.reduce_sum(S, R, dim=2)""",
    "cumsum_dim": """
        T.copy(A, S)
        T.cumsum(S, dim=3)
        T.copy(S, B)""",
    "copy_rank": """
        R = T.alloc_fragment((16,), "float32")
        T.copy(A, S)
        T.copy(S, R)""",
    "fill_value": """
        T.fill(S, "x")""",
}
PROGRAM_CASES = tuple(_PROGRAMS)


def case_ids(seed: int, n: int) -> list:
    r = random.Random(seed)
    kinds = [("call", c) for c in CALL_CASES] + [("prog", c) for c in PROGRAM_CASES]
    return [(kinds[i % len(kinds)] if i < len(kinds) else r.choice(kinds)) + (seed + i,) for i in range(n)]


def _verdict(exc, case) -> dict:
    if exc is None:
        return {"case": case, "verdict": "wrong", "message": "no error was raised"}
    from ...errors import TileLangError

    msg = str(exc)
    if not isinstance(exc, (TileLangError,) + _OK):
        return {"case": case, "verdict": "crash", "message": f"{type(exc).__name__}: {msg[:400]}"}
    if len(msg) < 25:
        return {"case": case, "verdict": "unclear", "message": f"{type(exc).__name__}: {msg}"}
    return {"case": case, "verdict": "clear", "message": ""}


_kernel_memo: dict = {}


def _good_kernel(seed: int, device: str = "cpu", symbolic: bool = False):
    """A passing fuzz program (tile family; with symbolic, one whose symbolic dim two tensors
    share, else none) and its kernel for `device` ("cpu" or "cuda"), once per worker."""
    import tilelang

    from .generator import generate
    from .runner import check, load_kernel

    key = (device, symbolic)
    if key not in _kernel_memo:
        for s in range(seed, seed + 400):
            p = generate(s, "tile")
            shared_dim = any(sum(d in t.shape for t in p.tensors) >= 2 for d in p.dims)
            if (shared_dim if symbolic else not p.dims) and len(p.tensors) >= 2 \
                    and check(p, nvrtc=False).status == "pass":
                func, _ = load_kernel(p)
                _kernel_memo[key] = (p, tilelang.compile(func, target=device))
                break
    return _kernel_memo[key]


def _right(prog, ins: dict, args: list) -> str:
    """'' when the outputs in args match the float64 reference on ins, else what differs."""
    from .reference import run_reference
    from .runner import tolerance

    ref = run_reference(prog, ins)
    got = {t.name: a for t, a in zip(prog.tensors, args)}
    tol = tolerance(prog)
    for name, r in ref.items():
        if not torch.allclose(got[name].detach().cpu().double(), r, atol=tol * max(1.0, float(r.abs().max())),
                              rtol=tol):
            return f"a wrong {name}"
    return ""


def _strided(a0: torch.Tensor, dev: str) -> torch.Tensor:
    """a0's shape and dtype, really non-contiguous (a transposed view of a tensor with a unit dim
    is still contiguous to torch): every other element along a dim longer than one."""
    d = max(range(a0.dim()), key=lambda i: (a0.shape[i] > 1, -i))
    big = list(a0.shape)
    big[d] *= 2
    idx = [slice(None)] * a0.dim()
    idx[d] = slice(None, None, 2)
    t = torch.zeros(big, dtype=a0.dtype, device=dev)[tuple(idx)]
    if t.is_contiguous():  # every dim is 1: pad the storage instead
        t = torch.zeros(list(a0.shape) + [2], dtype=a0.dtype, device=dev)[..., 0]
    return t


def _bad_args(case: str, prog, ins: dict, dev: str):
    """The argument list with one thing wrong (see CALL_CASES); None if the case does not apply."""
    args = [ins[t.name].to(dev) for t in prog.tensors]
    a0 = args[0]
    if case == "shape":
        args[0] = torch.zeros(tuple(d + 1 for d in a0.shape), dtype=a0.dtype, device=dev)
    elif case == "dtype":
        args[0] = a0.to(torch.float64 if a0.dtype != torch.float64 else torch.float32)
    elif case == "device":  # meta on the CPU backend; a host tensor for a CUDA kernel
        args[0] = torch.empty(a0.shape, dtype=a0.dtype, device="meta") if dev == "cpu" else a0.cpu()
    elif case == "noncontig":
        args[0] = _strided(a0, dev)
    elif case == "misaligned":
        flat = torch.empty(a0.numel() + 1, dtype=a0.dtype, device=dev)
        args[0] = flat[1:].view(a0.shape)
        args[0].copy_(a0)
    elif case == "few":
        args = args[:-1]
    elif case == "many":
        args = args + [args[-1].clone()]
    elif case == "none":
        args[0] = None
    elif case == "scalar":
        args[0] = 3.0
    elif case == "symdim":  # two tensors disagree on a symbolic dim they share
        d = next(d for d in prog.dims if sum(d in t.shape for t in prog.tensors) >= 2)
        k = next(i for i, t in enumerate(prog.tensors) if d in t.shape)
        shape = [s + 1 if prog.tensors[k].shape[i] == d else s for i, s in enumerate(args[k].shape)]
        args[k] = torch.zeros(shape, dtype=args[k].dtype, device=dev)
    return args


def _call_case(case: str, seed: int, device: str = "cpu") -> dict:
    from .runner import make_inputs

    prog, kern = _good_kernel(seed, device, symbolic=case == "symdim")
    ins = make_inputs(prog)
    args = _bad_args(case, prog, ins, device)
    try:
        kern(*args)
        if device == "cuda":
            torch.cuda.synchronize()
        err = None
    except Exception as e:  # noqa: BLE001 - the verdict looks at the type
        err = e
    if err is None and case == "misaligned":  # accepted: it must then compute the right thing
        wrong = _right(prog, ins, args)
        res = {"case": case, "verdict": "wrong" if wrong else "clear",
               "message": f"misaligned input gave {wrong}" if wrong else ""}
    else:
        res = _verdict(err, case)
    # the process stays usable: the right call right after still computes the right thing
    good = [ins[t.name].to(device) for t in prog.tensors]
    try:
        kern(*good)
        wrong = _right(prog, ins, good)
    except Exception as e:  # noqa: BLE001
        wrong = f"an error ({type(e).__name__}: {str(e)[:200]})"
    if wrong and res["verdict"] == "clear":
        res = {"case": case, "verdict": "wrong", "message": f"after the bad call a good call gave {wrong}"}
    return res


def _prog_case(case: str, target: str = "cpu") -> dict:
    import importlib.util
    import tempfile

    import tilelang

    body = textwrap.indent(textwrap.dedent(_PROGRAMS[case]).strip("\n"), " " * 8)
    src = ("import tilelang.language as T\n\n\n@T.prim_func\n"
           'def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):\n'
           "    with T.Kernel(1, threads=128) as bx:\n"
           '        S = T.alloc_shared((16, 16), "float32")\n' + body + "\n")
    d = os.path.join(tempfile.gettempdir(), f"tilelang-fuzz-{os.getuid()}")
    os.makedirs(d, exist_ok=True)
    # one file per worker process, written whole before it is renamed into place: workers running the
    # same case at once read each other's half-written file otherwise (a module without `main`)
    path = os.path.join(d, f"bad_{case}_{os.getpid()}.py")
    with open(path + ".tmp", "w") as f:
        f.write(src)
    os.replace(path + ".tmp", path)
    try:
        spec = importlib.util.spec_from_file_location(f"tl_bad_{case}_{os.getpid()}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        tilelang.compile(mod.main, target=target)
    except Exception as e:  # noqa: BLE001
        return _verdict(e, case)
    return _verdict(None, case)


def run_case(arg) -> dict:
    """Worker task: arg = (kind, case, seed[, device, dry]). On device "cuda" calls go to a
    CUDA kernel and programs compile for the device; dry: calls stay on the CPU backend and
    programs compile for sm_90a (no CUDA calls)."""
    import warnings

    warnings.simplefilter("ignore")
    kind, case, seed = arg[:3]
    device = arg[3] if len(arg) > 3 else "cpu"
    dry = len(arg) > 4 and bool(arg[4])
    if kind == "call":
        return _call_case(case, seed, "cpu" if dry else device)
    return _prog_case(case, "cpu" if device == "cpu" else ("cuda -arch=sm_90a" if dry else "cuda"))
