"""Call-time argument checks and output allocation.

Every failure is a TypeError/ValueError naming the parameter, what was expected
and what was given; nothing reaches the compiled code unchecked.
"""
from __future__ import annotations

import numbers

from ..arith.simplify import const_int, const_value, simplify
from ..ir import expr as E
from ..ir.buffer import Buffer
from ..ir.visitor import substitute


class ArgBinder:
    def __init__(self, func_name: str, params: tuple, out_idx: list[int], device_type: str, host_checks=(),
                 pointer_params=(), nullable=(), body_dims=None):
        self.func_name = func_name
        self.params = params
        self.out_idx = out_idx
        self.device_type = device_type
        # (cond, msg, span) of `assert`s before the kernels, (cond, msg, span, "assume") of T.assume's the
        # arguments decide (the others read device values: promises nothing here can check)
        bindable = _bindable_vars(params)
        self.host_checks = tuple(c for c in host_checks if len(c) == 3 or _host_evaluable(c[0], bindable))
        self.pointer_params = tuple(pointer_params)  # names of `p: T.ptr` parameters
        # names of tensor parameters the kernel never touches: None may be passed for them (a null
        # pointer, as the public TileLang passes), e.g. an optional Bias a with_bias=False build ignores
        self.nullable = frozenset(nullable)
        # names of the symbolic dims the kernel body uses (None: unknown, assume all)
        self.body_dims = None if body_dims is None else frozenset(body_dims)
        self.inputs = [i for i in range(len(params)) if i not in out_idx]

    def _where(self, i: int) -> str:
        p = self.params[i]
        return f"argument {p.name!r} (parameter {i} of {self.func_name})"

    def bind(self, args: tuple):
        """Returns (values per param, {Var: int}, list of output tensors)."""
        import torch

        if len(args) != len(self.inputs):
            names = ", ".join(self.params[i].name for i in self.inputs)
            missing = [self.params[i].name for i in self.inputs[len(args):]]
            raise TypeError(f"{self.func_name} expects {len(self.inputs)} arguments ({names}), got {len(args)}"
                            + (" (outputs listed in out_idx are allocated for you; do not pass them)"
                               if self.out_idx and len(args) == len(self.params) else "")
                            + (f"; missing {', '.join(missing)}" if missing else ""))
        values: list = [None] * len(self.params)
        env: dict = {}
        deferred: list = []  # dims like `m * 2` met before `m` was bound
        device = None
        for i, a in zip(self.inputs, args):
            p = self.params[i]
            if isinstance(p, Buffer):
                if a is None and p.name in self.nullable:
                    continue
                self._check_tensor(i, p, a, env, torch, deferred)
                if device is None:
                    device = a.device
                elif a.device != device:
                    raise ValueError(f"{self._where(i)}: all tensors must be on one device; found {a.device} "
                                     f"after {device}")
                values[i] = a
            elif p.name in self.pointer_params:
                values[i] = self._check_pointer(i, a, torch)
            else:
                values[i] = self._check_scalar(i, p, a)
                if p in env and env[p] != values[i]:
                    raise ValueError(f"{self._where(i)}: is {values[i]} but a tensor's shape already bound "
                                     f"{p.name!r} to {env[p]}")
                env[p] = values[i]
        self._bind_null_dims(values, env)
        self._check_deferred(deferred, env)
        if self.host_checks:
            self._check_host_asserts(env)
        outs = []
        for i in self.out_idx:
            p = self.params[i]
            shape = self._shape(p, env, f"output {p.name!r}", "pass the output explicitly (drop it from out_idx)")
            t = torch.empty(_storage_shape(p, shape, f"output {p.name!r}"), dtype=_torch_dtype(p.dtype),
                            device=self._device(device, torch))
            values[i] = t
            outs.append(t)
        return values, env, outs

    def _bind_null_dims(self, values: list, env: dict) -> None:
        """A symbolic dim only one tensor parameter names, passed as None, is 0 (as in the public
        TileLang: the kernel sees an empty tensor), and so is one the body never uses. A dim
        several parameters name and the body uses stays unbound when all of them are None: the
        kernel refuses to run (null_dim_error)."""
        for i in self.inputs:
            p = self.params[i]
            if not isinstance(p, Buffer) or values[i] is not None:
                continue
            for d in tuple(p.shape) + tuple(p.strides or ()):
                if not isinstance(d, E.Var) or d in env:
                    continue
                unused = self.body_dims is not None and d.name not in self.body_dims
                if unused or sum(isinstance(q, Buffer) and d in _vars_of(q) for q in self.params) == 1:
                    env[d] = 0

    def null_dim_error(self, var, values: list) -> Exception | None:
        """The error for a symbolic dim the kernel needs that only None-passed tensors name."""
        names = [p.name for i, p in enumerate(self.params)
                 if isinstance(p, Buffer) and values[i] is None and var in _vars_of(p)]
        if not names:
            return None
        return RuntimeError(f"{self.func_name}: symbolic dim {var.name!r} is named only by {', '.join(names)}, all "
                            "passed as None; pass at least one non-null buffer that binds it")

    def workspaces(self, bufs, values: list, env: dict) -> dict:
        """{buffer uid: torch.empty tensor} for the T.alloc_global workspaces of one call, on the
        device of the call's tensors."""
        import torch

        device = next((v.device for v in values if isinstance(v, torch.Tensor)), None)
        dev = self._device(device, torch)
        return {b.uid: torch.empty(_storage_shape(b, self._shape(b, env, f"T.alloc_global {b.name!r}",
                                                                 "give it a shape the inputs determine"),
                                                  f"T.alloc_global {b.name!r}"),
                                   dtype=_torch_dtype(b.dtype), device=dev) for b in bufs}

    def _device(self, device, torch):
        return device if device is not None else torch.device(self.device_type)

    @staticmethod
    def _shape(p, env: dict, what: str, fix: str) -> list:
        shape = []
        for d in p.shape:
            v = const_int(simplify(substitute(E.as_expr(d), {k: E.as_expr(x) for k, x in env.items()})))
            if v is None:
                raise ValueError(f"{what}: its shape {p.shape} uses a symbolic dim that no input binds; {fix}")
            shape.append(v)
        return shape

    def _check_deferred(self, deferred: list, env: dict) -> None:
        """Dims that are expressions of symbolic dims, checked once every input is bound.

        A dim like `m * 2` whose `m` no argument binds directly binds `m` by solving it.
        """
        for i, d, want_d, got in deferred:
            v = _eval_dim(want_d, env)
            if v is None:
                self._solve(i, d, want_d, got, env)
                v = _eval_dim(want_d, env)
            if v != got:
                shown = f"{want_d} = {v}" if v is not None else str(want_d)
                raise ValueError(f"{self._where(i)}: dim {d} is {got}, expected {shown}")

    def _check_host_asserts(self, env: dict) -> None:
        """The body's `assert`s on symbolic values (frontend/host_checks.py), with every dim bound."""
        for cond, msg, span, *kind in self.host_checks:
            v = const_value(simplify(substitute(cond, {k: E.as_expr(x) for k, x in env.items()})))
            where = f" ({span.file}:{span.line})" if span is not None else ""
            if v is None:
                raise ValueError(f"{self.func_name}: the assert `{cond}`{where} uses a value no argument binds")
            if not v:
                bound = ", ".join(f"{k.name}={x}" for k, x in env.items() if k in _vars(cond))
                if kind == ["launch"]:
                    raise ValueError(f"{self.func_name}{where}: {msg}; got {bound}")
                if kind == ["assume"]:
                    raise RuntimeError(f"{msg} does not hold (T.assume of {self.func_name}{where}, with {bound})")
                raise AssertionError(f"{msg} (assert `{cond}` of {self.func_name}{where}, with {bound})")

    def _solve(self, i, d, want_d, got, env) -> None:
        from ..arith.simplify import linear_form

        lin = linear_form(simplify(want_d))
        free = [t for t in (lin[0] if lin else {}) if t not in env]
        if lin is None or len(free) != 1 or not isinstance(free[0], E.Var) or len(lin[0]) != 1:
            raise ValueError(f"{self._where(i)}: cannot infer the symbolic dims of dim {d} ({want_d}) from its "
                             f"size {got}; let another argument have the plain dim")
        var, k = free[0], lin[0][free[0]]
        if (got - lin[1]) % k or (got - lin[1]) // k < 0:
            raise ValueError(f"{self._where(i)}: dim {d} is {got}, which is not {want_d} for any {var.name}")
        env[var] = (got - lin[1]) // k

    def _check_tensor(self, i, p: Buffer, a, env, torch, deferred):
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"{self._where(i)}: expected a torch.Tensor of shape {_shape_str(p)} and dtype "
                            f"{p.dtype}, got {type(a).__name__}"
                            + ("; the kernel reads or writes it, and only a tensor the kernel never uses may be "
                               "passed as None" if a is None else ""))
        want = _torch_dtype(p.dtype)
        per_byte = 8 // p.dtype.bits if p.dtype.bits < 8 else 1
        if per_byte > 1 and a.dtype in (torch.uint8, torch.int8):
            pass  # the packed bytes themselves
        elif a.dtype != want:
            packed = (f"; a {p.dtype} tensor of logical shape {_shape_str(p)} is a {want} tensor whose last dim "
                      f"is {per_byte}x smaller ({per_byte} values per byte)" if per_byte > 1 else "")
            raise TypeError(f"{self._where(i)}: expected dtype {p.dtype} ({want}), got {a.dtype}{packed}")
        if a.device.type != self.device_type:
            raise ValueError(f"{self._where(i)}: expected a tensor on {self.device_type}, got one on {a.device} "
                             f"(this kernel was compiled for target {self.device_type!r})")
        if a.dim() != p.ndim:
            raise ValueError(f"{self._where(i)}: expected {p.ndim} dims {_shape_str(p)}, got shape {tuple(a.shape)}")
        logical = list(a.shape)
        if per_byte > 1 and logical:  # torch counts bytes along the last dim; the kernel counts values
            logical[-1] *= per_byte
        for d, (want_d, got) in enumerate(zip(p.shape, logical)):
            c = want_d if isinstance(want_d, int) else const_int(want_d)
            if c is not None:
                if c != got:
                    shown = f"logical shape {tuple(logical)} (torch shape {tuple(a.shape)})" if per_byte > 1 \
                        else str(tuple(a.shape))
                    raise ValueError(f"{self._where(i)}: expected shape {_shape_str(p)}, got {shown} "
                                     f"(dim {d} is {got}, expected {c})")
            elif isinstance(want_d, E.Var):
                if want_d in env and env[want_d] != got:
                    raise ValueError(f"{self._where(i)}: dim {d} is {got} but symbolic dim {want_d.name!r} was "
                                     f"already bound to {env[want_d]} by an earlier argument")
                env[want_d] = int(got)
            else:
                deferred.append((i, d, want_d, int(got)))
        if self.device_type == "cuda" and a.data_ptr() % 16:
            raise ValueError(f"{self._where(i)}: the tensor's data pointer is not 16-byte aligned (storage offset "
                             f"{a.storage_offset()}); CUDA kernels use 16-byte vector accesses; "
                             + ("start the view on a 16-byte boundary" if p.strides is not None else "pass .clone()"))
        if p.strides is not None:
            self._check_strides(i, p, a, env, deferred)
        elif not a.is_contiguous():
            raise ValueError(f"{self._where(i)}: expected a contiguous (row-major) tensor, got strides "
                             f"{tuple(a.stride())} for shape {tuple(a.shape)}; call .contiguous() first")

    def _check_strides(self, i, p: Buffer, a, env, deferred):
        """A T.StridedTensor parameter: the tensor's element strides are the declared ones; a symbolic
        stride binds from the tensor's (dims of extent 1 too: their stride is still read). A packed
        sub-byte tensor's strides count values: torch's byte strides times the values per byte on
        every dim but the last (whose stride is 1)."""
        per_byte = 8 // p.dtype.bits if p.dtype.bits < 8 else 1
        got = tuple(int(x) * (per_byte if d < a.dim() - 1 else 1) for d, x in enumerate(a.stride()))
        want = p.strides
        for d, (want_d, g) in enumerate(zip(want, got)):
            c = want_d if isinstance(want_d, int) else const_int(want_d)
            if c is not None:
                if c != g and a.shape[d] > 1:  # a dim of extent 0 or 1 is never stepped along
                    raise ValueError(f"{self._where(i)}: expected strides {_tuple_str(want)}, got strides "
                                     f"{got} for shape {tuple(a.shape)} (dim {d}'s stride is {g}, expected {c})")
            elif isinstance(want_d, E.Var):
                if want_d in env and env[want_d] != g:
                    raise ValueError(f"{self._where(i)}: expected strides {_tuple_str(want)}, got strides {got}: "
                                     f"dim {d}'s stride is {g} but {want_d.name!r} was already bound to "
                                     f"{env[want_d]}")
                env[want_d] = g
            else:
                deferred.append((i, f"{d}'s stride", want_d, g))

    def _check_pointer(self, i, a, torch) -> int:
        """A `T.ptr` parameter: a tensor (on the kernel's device; its data_ptr()) or an int address."""
        if isinstance(a, torch.Tensor):
            if a.device.type != self.device_type:
                raise ValueError(f"{self._where(i)}: a pointer to a tensor on {a.device}, but this kernel was "
                                 f"compiled for target {self.device_type!r}")
            return int(a.data_ptr())
        if isinstance(a, numbers.Integral) and not isinstance(a, bool):
            return int(a)
        raise TypeError(f"{self._where(i)}: expected a pointer (a torch.Tensor or an int address such as "
                        f"t.data_ptr()), got {type(a).__name__}: {a!r}")

    def _check_scalar(self, i, p: E.Var, a):
        if hasattr(a, "item") and getattr(a, "numel", lambda: 2)() == 1:
            a = a.item()
        if p.dtype.is_float:
            if not isinstance(a, numbers.Real) or isinstance(a, bool):
                raise TypeError(f"{self._where(i)}: expected a float ({p.dtype}), got {type(a).__name__}: {a!r}")
            return float(a)
        if p.dtype.is_bool:
            if not isinstance(a, (bool, numbers.Integral)):
                raise TypeError(f"{self._where(i)}: expected a bool, got {type(a).__name__}: {a!r}")
            return bool(a)
        if not isinstance(a, numbers.Integral) or isinstance(a, bool):
            raise TypeError(f"{self._where(i)}: expected an int ({p.dtype}), got {type(a).__name__}: {a!r}")
        lo, hi = _int_range(p.dtype)
        if not lo <= int(a) <= hi:
            raise ValueError(f"{self._where(i)}: {int(a)} does not fit {p.dtype} (range {lo}..{hi})")
        return int(a)


def _vars_of(b: Buffer) -> set:
    """The plain symbolic dims (Vars) among a buffer's shape and strides."""
    return {d for d in tuple(b.shape) + tuple(b.strides or ()) if isinstance(d, E.Var)}


def _eval_dim(d, env: dict) -> int | None:
    return const_int(simplify(substitute(E.as_expr(d), {k: E.as_expr(x) for k, x in env.items()})))


def _bindable_vars(params) -> set:
    """The values a call's arguments bind: scalar parameters and the symbolic dims of tensor ones."""
    out = set()
    for p in params:
        if isinstance(p, E.Var):
            out.add(p)
        elif isinstance(p, Buffer):
            for d in tuple(p.shape) + tuple(p.strides or ()):
                out |= _vars(d)
    return out


def _host_evaluable(cond, bindable: set) -> bool:
    """`cond` reads only values the arguments bind (no buffer element, thread or loop index)."""
    from ..ir.visitor import collect

    return not collect(cond, lambda n: isinstance(n, E.BufferLoad)) and _vars(cond) <= bindable


def _vars(e) -> set:
    from ..ir.visitor import collect

    return set(collect(e, lambda n: isinstance(n, E.Var)))


def _int_range(d) -> tuple[int, int]:
    if d.kind == "uint":
        return 0, (1 << d.bits) - 1
    return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1


def _tuple_str(t) -> str:
    return "(" + ", ".join(str(x) for x in t) + ("," if len(t) == 1 else "") + ")"


def _shape_str(p: Buffer) -> str:
    return "(" + ", ".join(str(d) for d in p.shape) + ("," if p.ndim == 1 else "") + ")"


def _storage_shape(p: Buffer, shape: list, what: str) -> list:
    """The torch shape holding a buffer of logical `shape`: sub-byte values packed along the last dim
    (a (M, N) float4_e2m1fn buffer is an (M, N // 2) torch.float4_e2m1fn_x2 tensor)."""
    if p.dtype.bits >= 8 or not shape:
        return shape
    per_byte = 8 // p.dtype.bits
    if shape[-1] % per_byte:
        raise ValueError(f"{what}: a {p.dtype} tensor packs {per_byte} values per byte along its last dim, "
                         f"which is {shape[-1]} in shape {tuple(shape)}; make it a multiple of {per_byte}")
    return shape[:-1] + [shape[-1] // per_byte]


def _torch_dtype(d):
    return d.as_torch()  # tfloat32 tensors are float32 ones
