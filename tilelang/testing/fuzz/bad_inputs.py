"""Bad calls and bad programs: each must raise a clear TileLangError / TypeError / ValueError.

A case is (kind, seed). Call cases take a fuzz-generated program that passes, compile it for
the CPU once per worker, and call it with one thing wrong: a shape, a dtype, a device, the
strides (non-contiguous), an offset storage (misaligned), too few or too many arguments,
None. Program cases are small kernels with one DSL misuse: an out-of-range constant index,
mismatched copy or gemm tiles, a reduction into the wrong shape, an op on a buffer of the
wrong scope, a non-constant tile shape, an unknown dtype.

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

CALL_CASES = ("shape", "dtype", "device", "noncontig", "misaligned", "few", "many", "none", "scalar")
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


def _good_kernel(seed: int):
    """A passing fuzz program (tile family, no symbolic dims) and its CPU kernel."""
    import tilelang

    from .generator import generate
    from .runner import check, load_kernel

    if "k" not in _kernel_memo:
        for s in range(seed, seed + 200):
            p = generate(s, "tile")
            if not p.dims and len(p.tensors) >= 2 and check(p, nvrtc=False).status == "pass":
                func, _ = load_kernel(p)
                _kernel_memo["k"] = (p, tilelang.compile(func, target="cpu"))
                break
    return _kernel_memo["k"]


def _call_case(case: str, seed: int) -> dict:
    from .reference import run_reference
    from .runner import make_inputs

    prog, kern = _good_kernel(seed)
    ins = make_inputs(prog)
    args = [ins[t.name] for t in prog.tensors]
    k = 0 if case != "dtype" else 0
    a0 = args[k]
    if case == "shape":
        args[k] = torch.zeros(tuple(d + 1 for d in a0.shape), dtype=a0.dtype)
    elif case == "dtype":
        args[k] = a0.to(torch.float64 if a0.dtype != torch.float64 else torch.float32)
    elif case == "device":
        args[k] = torch.empty(a0.shape, dtype=a0.dtype, device="meta")
    elif case == "noncontig":
        args[k] = torch.zeros(tuple(a0.shape)[::-1], dtype=a0.dtype).t() if a0.dim() == 2 and a0.shape[0] != a0.shape[1] \
            else torch.zeros((a0.shape[0], 2 * a0.shape[-1]), dtype=a0.dtype)[..., ::2]
    elif case == "misaligned":
        flat = torch.empty(a0.numel() + 1, dtype=a0.dtype)
        args[k] = flat[1:].view(a0.shape)
        args[k].copy_(a0)
    elif case == "few":
        args = args[:-1]
    elif case == "many":
        args = args + [args[-1].clone()]
    elif case == "none":
        args[k] = None
    elif case == "scalar":
        args[k] = 3.0
    try:
        kern(*args)
    except Exception as e:  # noqa: BLE001 - the verdict looks at the type
        return _verdict(e, case)
    if case == "misaligned":  # accepted: it must then compute the right thing
        ref = run_reference(prog, ins)
        from .runner import tolerance

        got = {t.name: a for t, a in zip(prog.tensors, args)}
        tol = tolerance(prog)
        for name, r in ref.items():
            if not torch.allclose(got[name].double(), r, atol=tol * max(1.0, float(r.abs().max())), rtol=tol):
                return {"case": case, "verdict": "wrong", "message": f"misaligned input gave a wrong {name}"}
        return {"case": case, "verdict": "clear", "message": ""}
    return _verdict(None, case)


def _prog_case(case: str) -> dict:
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
    path = os.path.join(d, f"bad_{case}.py")
    with open(path, "w") as f:
        f.write(src)
    try:
        spec = importlib.util.spec_from_file_location(f"tl_bad_{case}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        tilelang.compile(mod.main, target="cpu")
    except Exception as e:  # noqa: BLE001
        return _verdict(e, case)
    return _verdict(None, case)


def run_case(arg) -> dict:
    """Worker task: arg = (kind, case, seed)."""
    import warnings

    warnings.simplefilter("ignore")
    kind, case, seed = arg
    return _call_case(case, seed) if kind == "call" else _prog_case(case)
