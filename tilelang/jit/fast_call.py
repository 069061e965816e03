"""The per-call fast path of a CUDA kernel whose parameters all have static shapes.

It checks exactly what the full binder checks (type, dtype, shape, device, contiguity,
alignment) with identity and tuple comparisons only, and returns MISS on any mismatch so
the full binder produces the precise error. Host overhead matters: a kernel call should
cost about as much as a torch op.

All-pointer kernels (`simple`) launch through a driver.PreparedLaunch built on the first
call: the checked tensors' data pointers go straight into its argument slots (C argument
order) and the launch is one untyped ctypes call (cuLaunchKernelEx with its 4 arguments prebuilt
per stream, unless tl.disable_launch_kernel_ex) on the device's current raw stream. The
per-call code is Python generated for the kernel (FastCall.lean_source; the first form,
first_source, where tl.disable_lean_launcher is set).
Kernels with other arguments (the T.device_assert flag, TMA tensor maps) build their
argument list per call and launch through the artifact, which also checks the flag.
"""
from __future__ import annotations

from ..arith.simplify import const_int
from ..ir.buffer import Buffer

MISS = object()  # the fast path does not apply; take the full binder
NOARG = object()  # an input the lean entry was not given (its positional-only parameters default to it)


def given(*args):
    """The inputs a lean entry was given: its parameters up to the first NOARG (Python fills
    positional-only parameters from the left, so the ones not given are a suffix)."""
    return tuple(a for a in args if a is not NOARG)


class FastCall:
    def __init__(self, kernel) -> None:
        import torch

        self.torch = torch
        self.kernel = kernel
        params = kernel.params
        index = {id(p): i for i, p in enumerate(params)}
        self.inputs = []  # (param index, torch dtype, shape)
        self.outputs = []  # (param index, torch dtype, shape)
        if kernel.binder.host_checks:
            raise ValueError("a body's asserts on symbolic values are checked by the general binder")
        for i, p in enumerate(params):
            if not isinstance(p, Buffer):
                raise ValueError("scalar parameters take the general path")
            shape = tuple(const_int(d) if not isinstance(d, int) else d for d in p.shape)
            if any(d is None for d in shape):
                raise ValueError("symbolic shapes take the general path")
            if p.strides is not None:
                raise ValueError("T.StridedTensor parameters (strides checked and bound) take the general path")
            if p.dtype.bits < 8:
                raise ValueError("packed sub-byte tensors (torch shape differs from the logical one) take the general path")
            spec = (i, p.dtype.as_torch(), torch.Size(shape))  # tfloat32 is stored as float32
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
        art = kernel.artifact
        if art._dynamic_grid():
            raise ValueError("grids that depend on arguments take the general path")
        self.launch_dims = (art._static_grid(), (art.csource.threads, 1, 1), art.csource.smem_bytes)
        self.simple = all(step[0] == "t" for step in self.arg_plan) \
            and all(k == "ptr" for k in art.csource.signature) \
            and getattr(art, "tracer", None) is None  # an iket-instrumented kernel is read after each launch
        # C argument slot of each input / output tensor when every argument is a tensor pointer
        slot = {step[1]: k for k, step in enumerate(self.arg_plan) if step[0] == "t"}
        self.in_specs = tuple((dtype, shape, slot.get(i)) for i, dtype, shape in self.inputs)
        self.out_specs = tuple((dtype, shape, slot.get(i)) for i, dtype, shape in self.outputs)
        self.nouts = len(self.outputs)
        self.prepared = None  # driver.PreparedLaunch, made on the first simple call (loads the module)
        self.lean = True  # simple_source's lean form; tl.disable_lean_launcher (JITKernel) keeps the first one
        self.single_device = False  # prepare(): the process sees one CUDA device, so `is_cuda` is the device check
        self.device_flag = "is_cuda"  # the tensor flag that check is (tests and --fake-launch use CPU tensors)
        self.call = self.launch_simple if self.simple else self.launch_general

    def prepare(self):
        """Load the kernel and fix its launch: grid, block, smem, device, stream lookup."""
        from ..backend.cuda import driver

        fn = self.artifact._function()
        grid, block, smem = self.launch_dims
        self.device = fn.module.device
        self.check_device = self.out_device = self.torch.device("cuda", self.device)
        raw = getattr(self.torch._C, "_cuda_getCurrentRawStream", None)
        self.raw_stream = raw if raw is not None else \
            (lambda dev: self.torch.cuda.current_stream(dev).cuda_stream)
        if min(grid) <= 0:  # every call of a kernel with a constant empty grid is an error
            from ..errors import empty_grid_error

            raise empty_grid_error(self.artifact.csource.entry, grid)
        try:  # the device count is fixed for the process (CUDA_VISIBLE_DEVICES is read at CUDA init)
            self.single_device = self.torch.cuda.device_count() == 1 and self.device == 0
        except Exception:
            self.single_device = False
        self.prepared = driver.PreparedLaunch(fn, grid, block, smem, ex=self.artifact.launch_ex)
        self.call = self.compile_simple()
        return self.prepared

    def launch_simple(self, args, stream=None):
        """All-pointer kernels: check, allocate outputs, launch. Returns the kernel's result
        (None, the output, or the list of outputs), or MISS when the plan does not match."""
        if self.prepared is None:
            self.prepare()
        return self.call(args, stream)

    def simple_source(self) -> str:
        """Python source of this kernel's launchers: `lean_source`, or `first_source` where
        tl.disable_lean_launcher is set (`lean` False)."""
        return self.lean_source() if self.lean else self.first_source()

    def device_test(self, a: str) -> str:
        """The expression that is true when tensor `a` is not on the module's device: one flag
        getter where the process sees a single CUDA device (torch.device objects are built per
        `.device` read), else a device comparison."""
        if self.single_device:
            return f"not {a}.{self.device_flag}"
        return f"{a}.device != check_device"

    def lean_source(self) -> str:
        """Python source of this kernel's launchers, unrolled over its tensors: `make()` returns
        `launch(args, stream)` (MISS on any mismatch) and `entry(*inputs, stream=None, **kwargs)`,
        the kernel's own call, which hands a mismatch or inputs by name to the general path.

        The checks are first_source's (type, dtype, shape, device, contiguity, 16-byte alignment;
        the type may also be nn.Parameter, whose attributes torch reads as a Tensor's, so that
        weights take this path too, not the general binder on every call) with less work around them: the entry takes its inputs as positional-only
        parameters (no argument tuple to build and unpack; a parameter not given is NOARG and fails
        the type check; `given` rebuilds the call's arguments for the general path), every test
        is one `if`, the device test is `device_test`'s, and an argument slot is written only when
        its pointer differs from the one it holds (`c{k}`, kept in the closure with the slot: the
        two stores run without a call between them, so no other thread sees one without the other).
        """
        n, nslots = len(self.in_specs), len(self.arg_plan)
        names = [f"a{i}" for i in range(n)]
        tests = []
        for i in range(n):
            a = names[i]
            tests += [f"({a}.__class__ is not Tensor and {a}.__class__ is not Parameter)",
                      f"{a}.dtype is not in_dtype{i}", f"{a}.shape != in_shape{i}", self.device_test(a),
                      f"not {a}.is_contiguous()"]
        cells = ["stream_now", "cargs"] + [f"c{k}" for k in range(nslots)]

        def body(first: list, missed: str) -> list:
            out = [f"        nonlocal {', '.join(cells)}"]
            if first + tests:
                out += ["        if " + " or ".join(first + tests) + ":", f"            {missed}"]
            out += [f"        p{i} = {names[i]}.data_ptr()" for i in range(n)]
            if n:
                out += [f"        if ({' | '.join(f'p{i}' for i in range(n))}) & 15:", f"            {missed}"]
            ptrs = [(k, f"p{i}") for i, (_, _, k) in enumerate(self.in_specs)]
            for j, (dtype, shape, k) in enumerate(self.out_specs):
                out += [f"        o{j} = {self.allocation(dtype, shape, j)}", f"        q{j} = o{j}.data_ptr()"]
                ptrs.append((k, f"q{j}"))
            for k, v in ptrs:
                out += [f"        if {v} != c{k}:", f"            vals[{k}] = c{k} = {v}"]
            out += ["        if stream is None:", "            stream = raw_stream(device_index)",
                    "        if stream != stream_now:", "            cargs, stream_now = args_for(stream), stream",
                    "        rc = cu_launch(*cargs)", "        if rc:", "            failed_launch(rc, cargs)"]
            outs = [f"o{j}" for j in range(len(self.out_specs))]
            out.append("        return " + ("None" if not outs else outs[0] if len(outs) == 1
                                            else f"[{', '.join(outs)}]"))
            return out

        lines = ["def make():", "    stream_now, cargs = None, None"]
        if nslots:
            lines.append("    " + " = ".join(f"c{k}" for k in range(nslots)) + " = None")
        lines += ["", "    def launch(args, stream=None):", f"        if len(args) != {n}:", "            return MISS"]
        if n:
            lines.append(f"        {', '.join(names)}, = args")
        lines += body([], "return MISS")
        params = [f"{a}=NOARG" for a in names] + (["/"] if n else []) + ["*rest", "stream=None", "**kwargs"]
        lines += ["", f"    def entry({', '.join(params)}):"]
        args = f"given({', '.join(names)}) + rest" if n else "rest"
        lines += body(["rest", "kwargs"], f"return general({args}, stream, kwargs)")
        lines += ["", "    return launch, entry"]
        return "\n".join(lines) + "\n"

    def first_source(self) -> str:
        """The first form of `simple_source` (tl.disable_lean_launcher), unrolled over its tensors.

        Unrolled because a generic loop over (tensor, spec) pairs costs ~0.1 us per tensor
        more; the checks are ArgBinder._check_tensor's, plus "on the module's device". The
        source defines `make()`, which returns two launchers sharing one closure (the driver's
        argument tuple for the last stream; cuLaunchKernel is called inline, one frame less
        than PreparedLaunch.launch): `launch(args, stream)`, which returns MISS on any
        mismatch, and `entry(*args, stream=None, **kwargs)`, the kernel's own call, which
        hands a mismatch (or inputs by name) to the kernel's general path, so a call is a
        single Python frame.
        """
        body = ["        nonlocal stream_now, cargs"]
        n = len(self.in_specs)
        body += [f"        if len(args) != {n}:", "            MISSED"]
        if n:
            body.append(f"        {', '.join(f'a{i}' for i in range(n))}, = args")
        for i in range(n):
            body += [f"        if a{i}.__class__ is not Tensor or a{i}.dtype is not in_dtype{i} or a{i}.shape != in_shape{i}"
                     f" or a{i}.device != check_device or not a{i}.is_contiguous():", "            MISSED",
                     f"        p{i} = a{i}.data_ptr()"]
        if n:
            body += [f"        if ({' | '.join(f'p{i}' for i in range(n))}) & 15:", "            MISSED"]
        for j, (dtype, shape, _) in enumerate(self.out_specs):
            body.append(f"        o{j} = {self.allocation(dtype, shape, j)}")
        body += [f"        vals[{k}] = p{i}" for i, (_, _, k) in enumerate(self.in_specs)]
        body += [f"        vals[{k}] = o{j}.data_ptr()" for j, (_, _, k) in enumerate(self.out_specs)]
        body += ["        s = raw_stream(device_index) if stream is None else stream",
                 "        if s != stream_now:", "            cargs, stream_now = args_for(s), s",
                 "        rc = cu_launch(*cargs)", "        if rc:", "            failed_launch(rc, cargs)"]
        outs = [f"o{j}" for j in range(len(self.out_specs))]
        body.append("        return " + ("None" if not outs else outs[0] if len(outs) == 1 else f"[{', '.join(outs)}]"))
        lines = ["def make():", "    stream_now, cargs = None, None", "", "    def launch(args, stream=None):"]
        lines += [ln.replace("MISSED", "return MISS") for ln in body]
        lines += ["", "    def entry(*args, stream=None, **kwargs):", "        if kwargs:",
                  "            return general(args, stream, kwargs)"]
        lines += [ln.replace("MISSED", "return general(args, stream, kwargs)") for ln in body]
        lines += ["", "    return launch, entry"]
        return "\n".join(lines) + "\n"

    def allocation(self, dtype, shape, j: int) -> str:
        """The expression allocating output j (contiguous, on the inputs' device).

        The size goes as separate int arguments, not as a torch.Size: torch parses a sequence
        size ~1.5 us slower than int varargs (new_empty(sz) 3.1 us against new_empty(128)
        1.4 us for the CPU allocator, torch 2.13). new_empty on an input of the same dtype
        needs neither a dtype nor a device argument; torch.empty(dims, dtype=, device=)
        serves kernels without inputs.
        """
        dims = ", ".join(str(d) for d in shape) if len(shape) else "()"
        if not self.in_specs:
            return f"empty({dims}, dtype=out_dtype{j}, device=out_device)"
        same = next((i for i, (dt, _, _) in enumerate(self.in_specs) if dt is dtype), None)
        if same is not None:
            return f"a{same}.new_empty({dims})"
        return f"a0.new_empty({dims}, dtype=out_dtype{j})"

    def compile_simple(self):
        """The launcher of `simple_source`, bound to this kernel's specs, device and slots."""
        prep = self.prepared
        ns = {"MISS": MISS, "NOARG": NOARG, "given": given, "Tensor": self.torch.Tensor,
              "Parameter": self.torch.nn.Parameter, "empty": self.torch.empty,
              "check_device": self.check_device, "out_device": self.out_device, "device_index": self.device,
              "raw_stream": self.raw_stream, "vals": prep.values, "cu_launch": prep.call,
              "args_for": prep.args_for, "failed_launch": prep.failed}
        for i, (dtype, shape, _) in enumerate(self.in_specs):
            ns[f"in_dtype{i}"], ns[f"in_shape{i}"] = dtype, shape
        for j, (dtype, shape, _) in enumerate(self.out_specs):
            ns[f"out_dtype{j}"] = dtype
        ns["general"] = self.kernel._general_call
        exec(compile(self.simple_source(), f"<tilelang launcher of {self.artifact.csource.entry}>", "exec"), ns)
        launch, entry = ns["make"]()
        self.kernel._launcher = entry  # kernel(...) runs `entry` from now on
        return launch

    def launch_general(self, args, stream=None):
        """Kernels with flag / tensor-map arguments: per-call argument list, artifact launch."""
        got = self.bind(args)
        if got is None:
            return MISS
        cvals, outs = got
        self.artifact.launch(cvals, stream=stream)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def bind(self, args):
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
