"""`Profiler`: check a compiled kernel against a torch reference, and time it.

    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda A, B: A @ B, atol=1e-2, rtol=1e-2)
    ms = profiler.do_bench()                      # the kernel
    ms_ref = profiler.do_bench(lambda A, B: A @ B)  # anything taking the same inputs

Inputs are generated fresh per call from the kernel's parameters (shapes, dtypes, the
target's device). Symbolic dims (`T.dynamic("m")`) have no size until you give one:
`kernel.get_profiler(dynamic_symbolic_constraints={"m": 1024})`.

Outputs: with `out_idx`, the kernel's returned tensors are compared with what the
reference returns. Without `out_idx`, the outputs are the parameters the kernel writes;
they are filled with NaN before the run (when the kernel never reads them), so elements
the kernel forgets to write fail the comparison.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import TileLangError
from ..ir.buffer import Buffer
from .bench import do_bench as _do_bench
from .compare import torch_assert_close
from .supply import as_supply_type, make_tensor, random_scalar


class MissingSizeError(TileLangError, ValueError):
    """A symbolic dim (or a scalar that is also a dim) the profiler cannot size; a ValueError, as
    the public TileLang raises for a missing `dynamic_symbolic_constraints` entry."""


class Profiler:
    """Validation and timing for one `JITKernel` (see the module docstring)."""

    def __init__(self, kernel, tensor_supply_type=None, dynamic_symbolic_constraints: dict | None = None):
        self.kernel = kernel
        self.supply_type = as_supply_type(tensor_supply_type)
        self.constraints = dict(dynamic_symbolic_constraints or {})
        self.params = tuple(kernel.prim_func.params)
        self.result_idx = list(kernel.out_idx)
        self.device = "cpu" if kernel.target.kind == "cpu" else "cuda"
        self._reads, self._writes = _param_access(kernel.prim_func)

    # ------------------------------------------------------------ inputs
    def _dim(self, d, where: str) -> int:
        from ..arith.simplify import const_int
        from ..ir import expr as E
        from ..ir.visitor import collect, substitute

        c = d if isinstance(d, int) else const_int(d)
        if c is not None:
            return c
        free = {v for v in collect(d, lambda n: isinstance(n, E.Var))}
        missing = sorted(v.name for v in free if v.name not in self.constraints)
        if missing:
            raise MissingSizeError(
                f"Profiler: {where} has the symbolic dim {d} with no size; pass "
                f"dynamic_symbolic_constraints={{{', '.join(repr(m) + ': ...' for m in missing)}}} to "
                "kernel.get_profiler(...) or give input_tensors explicitly")
        value = const_int(substitute(d, {v: E.as_expr(self.constraints[v.name]) for v in free}))
        if value is None:
            raise MissingSizeError(f"Profiler: cannot evaluate the dim {d} of {where}")
        return value

    def _scalar(self, p):
        if p.name in self.constraints:
            return self.constraints[p.name]
        for b in self.params:
            if isinstance(b, Buffer) and any(d is p for d in b.shape):
                raise MissingSizeError(f"Profiler: the scalar parameter {p.name!r} is also a tensor dim; pass "
                                    f"dynamic_symbolic_constraints={{{p.name!r}: ...}}")
        return random_scalar(p.dtype, self.supply_type)

    def _get_inputs(self, with_output: bool = False) -> list:
        """Fresh arguments for the kernel call (outputs in out_idx left out unless with_output)."""
        out = []
        for i, p in enumerate(self.params):
            if i in self.result_idx and not with_output:
                continue
            if isinstance(p, Buffer):
                shape = [self._dim(d, f"parameter {p.name!r}") for d in p.shape]
                t = make_tensor(shape, p.dtype, self.device, self.supply_type)
                out.append(t)
            else:
                out.append(self._scalar(p))
        return out

    def _input_params(self) -> list:
        return [p for i, p in enumerate(self.params) if i not in self.result_idx]

    # ------------------------------------------------------------ checking
    def assert_allclose(self, reference_program: Callable, input_tensors: Sequence | None = None,
                        atol: float = 1e-2, rtol: float = 1e-2, max_mismatched_ratio: float = 0.01) -> None:
        """Run the kernel and `reference_program` on the same fresh inputs and compare outputs.

        `reference_program(*inputs)` gets the kernel's inputs (parameters not in out_idx) and
        returns the expected output(s); with no out_idx it may instead write the outputs in
        place and return None. Raises AssertionError naming the output and the mismatches.
        """
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref_ins = [_clone(x) for x in ins]
        in_params = self._input_params()
        poison = input_tensors is None
        outs_at = [j for j, p in enumerate(in_params) if isinstance(p, Buffer) and p in self._writes]
        if poison:
            for j in outs_at:
                if in_params[j] not in self._reads and ins[j].dtype.is_floating_point:
                    ins[j].fill_(float("nan"))
        ref = _as_list(reference_program(*ref_ins))
        lib = _as_list(self.kernel(*ins))
        _sync(self.device)
        if self.result_idx:
            names = [self.params[i].name for i in self.result_idx]
        else:
            names = [in_params[j].name for j in outs_at]
            lib = [ins[j] for j in outs_at]
            if not ref:
                ref = [ref_ins[j] for j in outs_at]
        if len(lib) != len(ref):
            raise AssertionError(
                f"the kernel produced {len(lib)} output(s) ({', '.join(names) or 'none'}) but the reference "
                f"returned {len(ref)}; return one tensor per output, in parameter order")
        for name, got, want in zip(names, lib, ref):
            torch_assert_close(got, want, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                               check_device=False, check_dtype=False,
                               base_name=f"tilelang output {name!r}", ref_name="reference")

    def assert_consistent(self, repeat: int = 10) -> None:
        """Run the kernel `repeat` times on one input set; the outputs must be bit-identical."""
        import torch

        ins = self._get_inputs()
        first = [_clone(x) for x in self._outputs_of(ins, self.kernel(*ins))]
        for n in range(repeat):
            again = self._outputs_of(ins, self.kernel(*ins))
            for a, b in zip(first, again):
                if not torch.equal(a, b):
                    raise AssertionError(f"run {n + 2} of the kernel gave different results from run 1 "
                                         "(a race or an uninitialised read?)")

    def _outputs_of(self, ins, result) -> list:
        if self.result_idx:
            return _as_list(result)
        in_params = self._input_params()
        return [ins[j] for j, p in enumerate(in_params) if isinstance(p, Buffer) and p in self._writes]

    # ------------------------------------------------------------ timing
    def do_bench(self, func: Callable | None = None, warmup: float = 25, rep: float = 100, n_warmup: int = 0,
                 n_repeat: int = 0, input_tensors: Sequence | None = None, backend: str = "event",
                 quantiles=None, return_mode: str = "mean", dynamic_symbolic_constraints: dict | None = None,
                 device=None, early_stop_baseline: float | None = None):
        """Milliseconds per call of `func(*inputs)` (the kernel when func is None).

        `warmup`/`rep` are time budgets in ms; `n_warmup`/`n_repeat` fix call counts instead.
        `backend`: "event", "cupti", "cudagraph" or "wall" (see profiler.bench.do_bench); CPU
        kernels are timed with perf_counter whatever the backend.
        """
        fn = self.kernel if func is None else func
        if input_tensors is not None:
            ins = list(input_tensors)
        elif dynamic_symbolic_constraints:
            ins = type(self)(self.kernel, self.supply_type, dynamic_symbolic_constraints)._get_inputs()
        else:
            ins = self._get_inputs()
        if device is None:
            device = "cuda" if self.device == "cuda" else "cpu"
        return _do_bench(lambda: fn(*ins), warmup=warmup, rep=rep, _n_warmup=n_warmup, _n_repeat=n_repeat,
                         backend=backend, return_mode=return_mode, quantiles=quantiles, device=device,
                         early_stop_baseline=early_stop_baseline)

    def run_once(self, func: Callable | None = None):
        """Call the kernel (or `func`) once on fresh inputs and return its result."""
        fn = self.kernel if func is None else func
        return fn(*self._get_inputs())

    @property
    def func(self):
        return self.kernel

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)


def _param_access(func) -> tuple[set, set]:
    """(params read, params written) by the kernel body, as Buffer sets."""
    from ..ir.expr import BufferLoad
    from ..ir.stmt import BufferStore, TileOp
    from ..ir.visitor import collect

    reads, writes = set(), set()
    for node in collect(func.body, lambda n: isinstance(n, (BufferLoad, BufferStore, TileOp))):
        if isinstance(node, BufferLoad):
            reads.add(node.buffer)
        elif isinstance(node, BufferStore):
            writes.add(node.buffer)
        else:
            _tile_access(node, reads, writes)
    params = {p for p in func.params if isinstance(p, Buffer)}
    return reads & params, writes & params


def _tile_access(op, reads: set, writes: set) -> None:
    kind = type(op).__name__
    region_buf = lambda r: getattr(r, "buffer", r)
    if kind in ("Copy", "Reduce", "CumSum"):
        reads.add(region_buf(op.src))
        writes.add(region_buf(op.dst))
    elif kind == "Gemm":
        reads.update((region_buf(op.A), region_buf(op.B), region_buf(op.C)))
        writes.add(region_buf(op.C))
    elif kind == "AtomicTile":  # read-modify-write: never poisoned
        reads.add(region_buf(op.dst))
        writes.add(region_buf(op.dst))
        if isinstance(op.src, Buffer) or hasattr(op.src, "ranges"):
            reads.add(region_buf(op.src))
    elif hasattr(op, "dst"):
        writes.add(region_buf(op.dst))


def _clone(x):
    return x.clone() if hasattr(x, "clone") else x


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
