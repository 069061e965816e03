"""Tensor comparison with a mismatch budget and a message that shows *where* it failed.

Why a budget: low-precision kernels (fp16, fp8) legitimately miss a handful of elements
by more than a tight tolerance; `max_mismatched_ratio` lets a few through while a wrong
kernel (which misses most elements) still fails loudly.

Example::

    torch_assert_close(out, ref, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01)
"""
from __future__ import annotations

_SHOW = 5


def torch_assert_close(tensor_a, tensor_b, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False, equal_nan: bool = True,
                       check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                       check_stride: bool = False, base_name: str = "LHS", ref_name: str = "RHS") -> None:
    """Raise AssertionError when more than `max_mismatched_ratio` of the elements differ.

    An element matches when |a - b| <= atol + rtol * |b| (b is the reference), both are the
    same infinity, or (with `equal_nan`) both are NaN. The shapes must be equal; so must the
    devices, dtypes and layouts unless `check_device` / `check_dtype` / `check_layout` is
    False, and the strides when `check_stride` is True. Values are compared in float64 on the CPU.
    """
    import torch

    a, b = _as_tensor(tensor_a, base_name), _as_tensor(tensor_b, ref_name)
    if tuple(a.shape) != tuple(b.shape):
        raise AssertionError(f"{base_name} has shape {tuple(a.shape)} but {ref_name} has shape {tuple(b.shape)}")
    checks = [("device", check_device, lambda t: t.device), ("dtype", check_dtype, lambda t: t.dtype),
              ("layout", check_layout, lambda t: t.layout),
              ("stride", check_stride and a.layout == torch.strided == b.layout, lambda t: t.stride())]
    for what, on, get in checks:
        if on and get(a) != get(b):
            raise AssertionError(f"{base_name} has {what} {get(a)} but {ref_name} has {what} {get(b)} "
                                 f"(pass check_{what}={not on} to compare the values anyway)")
    if a.layout != torch.strided:
        a = a.to_dense()
    if b.layout != torch.strided:
        b = b.to_dense()
    a64 = a.detach().to("cpu", torch.float64)
    b64 = b.detach().to("cpu", torch.float64)
    ok = torch.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    n = ok.numel()
    bad = int((~ok).sum())
    if verbose:
        print(f"[torch_assert_close] {bad} of {n} elements differ (atol={atol}, rtol={rtol})")
    if n == 0 or bad <= max_mismatched_ratio * n:
        return
    raise AssertionError(_report(a64, b64, ok, bad, rtol, atol, max_mismatched_ratio, base_name, ref_name))


def _as_tensor(x, name):
    import torch

    if isinstance(x, torch.Tensor):
        return x
    try:
        return torch.as_tensor(x)
    except Exception:  # noqa: BLE001 - any conversion failure is reported the same way
        raise AssertionError(f"{name}: expected a tensor, got {type(x).__name__}") from None


def _report(a, b, ok, bad, rtol, atol, ratio, base_name, ref_name) -> str:
    import torch

    n = ok.numel()
    diff = (a - b).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    diff = torch.where(ok, torch.zeros_like(diff), diff)
    worst = int(diff.reshape(-1).argmax())
    lines = [
        f"{base_name} and {ref_name} differ in {bad} of {n} elements ({100.0 * bad / n:.2f}%, "
        f"allowed {100.0 * ratio:.2f}%) with atol={atol}, rtol={rtol}.",
        f"largest difference at {_index(worst, a.shape)}: {base_name}={a.reshape(-1)[worst].item()!r}, "
        f"{ref_name}={b.reshape(-1)[worst].item()!r}",
        f"first mismatches ({base_name} vs {ref_name}):",
    ]
    flat = (~ok).reshape(-1).nonzero().reshape(-1)[:_SHOW].tolist()
    for i in flat:
        lines.append(f"    {_index(i, a.shape)}: {a.reshape(-1)[i].item()!r} vs {b.reshape(-1)[i].item()!r}")
    if bool(torch.isnan(a).any()) and not bool(torch.isnan(b).any()):
        lines.append(f"note: {base_name} contains NaN where {ref_name} has none (unwritten output elements?)")
    return "\n".join(lines)


def _index(flat: int, shape) -> tuple:
    idx = []
    for s in reversed(tuple(shape)):
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))
