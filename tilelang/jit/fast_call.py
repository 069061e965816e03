"""The per-call fast path of a CUDA kernel whose parameters all have static shapes.

It checks exactly what the full binder checks (type, dtype, shape, device, contiguity,
alignment) with identity and tuple comparisons only, and returns None on any mismatch so
the full binder produces the precise error. Host overhead matters: a kernel call should
cost about as much as a torch op.
"""
from __future__ import annotations

from ..arith.simplify import const_int
from ..ir.buffer import Buffer


class FastCall:
    def __init__(self, kernel) -> None:
        import torch

        self.torch = torch
        params = kernel.prim_func.params
        index = {id(p): i for i, p in enumerate(params)}
        self.inputs = []  # (param index, torch dtype, shape)
        self.outputs = []  # (param index, torch dtype, shape)
        for i, p in enumerate(params):
            if not isinstance(p, Buffer):
                raise ValueError("scalar parameters take the general path")
            shape = tuple(const_int(d) if not isinstance(d, int) else d for d in p.shape)
            if any(d is None for d in shape):
                raise ValueError("symbolic shapes take the general path")
            spec = (i, getattr(torch, p.dtype.name), torch.Size(shape))
            (self.outputs if i in kernel.out_idx else self.inputs).append(spec)
        self.arg_plan = []  # per C argument: ("t", param index) | ("x", kind, obj)
        for kind, obj in kernel.artifact.csource.arg_kinds:
            if kind == "buffer":
                self.arg_plan.append(("t", index[id(obj)]))
            elif kind in ("scalar", "dim"):
                raise ValueError("scalar/dim arguments take the general path")
            else:
                self.arg_plan.append(("x", kind, obj))
        self.nparams = len(params)
        self.artifact = kernel.artifact
        self.index = index
        self.single = len(self.outputs) == 1
        art = kernel.artifact
        if art._dynamic_grid():
            raise ValueError("grids that depend on arguments take the general path")
        self.launch_dims = (art._static_grid(), (art.csource.threads, 1, 1), art.csource.smem_bytes)
        self.simple = all(step[0] == "t" for step in self.arg_plan)
        # C argument slot of each input / output tensor when every argument is a tensor pointer
        slot = {step[1]: k for k, step in enumerate(self.arg_plan) if step[0] == "t"}
        self.in_slots = [slot.get(i) for i, _, _ in self.inputs]
        self.out_slots = [slot.get(i) for i, _, _ in self.outputs]

    def launch_simple(self, args, stream):
        """All-pointer kernels: check, allocate outputs, launch; None when the plan does not match."""
        if len(args) != len(self.inputs):
            return None
        tensor = self.torch.Tensor
        cvals = [0] * len(self.arg_plan)
        device = None
        for (i, dtype, shape), k, a in zip(self.inputs, self.in_slots, args):
            if a.__class__ is not tensor or a.dtype is not dtype or a.shape != shape or not a.is_cuda \
                    or not a.is_contiguous():
                return None
            p = a.data_ptr()
            if p % 16:
                return None
            d = a.get_device()
            if device is None:
                device = d
            elif d != device:
                return None
            cvals[k] = p
        outs = []
        for (i, dtype, shape), k in zip(self.outputs, self.out_slots):
            t = self.torch.empty(shape, dtype=dtype, device=device if device is not None else "cuda")
            cvals[k] = t.data_ptr()
            outs.append(t)
        grid, block, smem = self.launch_dims
        self.artifact._function().launch(grid, block, smem, cvals, stream)
        return outs

    def __call__(self, args):
        """(C argument values, outputs) or None when anything differs from the static plan."""
        if len(args) != len(self.inputs):
            return None
        tensor = self.torch.Tensor
        values = [None] * self.nparams
        device = None
        for (i, dtype, shape), a in zip(self.inputs, args):
            if a.__class__ is not tensor or a.dtype is not dtype or a.shape != shape:
                return None
            d = a.device
            if d.type != "cuda" or (device is not None and d != device) or not a.is_contiguous() \
                    or a.data_ptr() % 16:
                return None
            device = d
            values[i] = a
        outs = []
        empty = self.torch.empty
        for i, dtype, shape in self.outputs:
            t = empty(shape, dtype=dtype, device=device if device is not None else "cuda")
            values[i] = t
            outs.append(t)
        cvals = []
        for step in self.arg_plan:
            if step[0] == "t":
                cvals.append(values[step[1]].data_ptr())
            else:
                cvals.append(self.artifact.arg_value(step[1], step[2], values, self.index))
        return cvals, outs
