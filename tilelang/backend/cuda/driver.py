"""CUDA driver access: device queries, cubin loading, low-overhead launches, TMA maps.

Why the driver API (not torch's or cupy's loaders): we compile with NVRTC to a
cubin and need cuModuleLoadData, function attributes for >48 KB dynamic shared
memory, launches on torch's current stream, and cuTensorMapEncodeTiled.

Everything initialises lazily: importing this module never touches the driver,
so `import tilelang` works on machines without a GPU.  The first real call runs
cuInit; if libcuda is missing or there is no device it raises NoDeviceError.

Launch cost: arguments are packed by a `ArgPacker` built once per kernel from a
signature like ["ptr", "ptr", "i32", "tensormap"]: one `struct.pack_into` into
preallocated storage, then cuLaunchKernelEx through an untyped ctypes call with
the config, function and prebuilt pointer array kept while grid, block, smem
and stream stay the same (the typed cuLaunchKernel call it replaces cost
~15,000 instructions into a no-op stub, ~2,300 now).  Python-side cost measured on the build machine with a stub in
place of libcuda: 3.3 us per launch (6 args, 3 of them tensors); the driver's
own cuLaunchKernel adds a few us.  tests/backend/cuda/test_driver.py prints
the real figure on the GPU machine.  `PreparedLaunch` is the per-kernel fast
path JITKernel calls use: pointer slots written in place, one untyped ctypes
call of cuLaunchKernelEx with its 4 arguments prebuilt per stream (~2,300
instructions into a no-op C stub, against ~5,500 for the 11 arguments of
cuLaunchKernel as c_void_p objects, and ~3,800 for cuda-bindings' own
cuLaunchKernelEx wrapper, which also releases the GIL).  Assumes one device per process for now:
modules load into the device current for torch.
"""
from __future__ import annotations

import ctypes
import functools
import struct
import threading

from tilelang.errors import NoDeviceError, TileLangError

TENSOR_MAP_BYTES = 128


class CudaDriverError(TileLangError, RuntimeError):
    """A CUDA driver call failed on a machine that does have a device."""


_lock = threading.Lock()
_init_error: str | None = None
_initialized = False


def _driver():
    """The `cuda.bindings.driver` module after a successful cuInit (cached)."""
    global _initialized, _init_error
    if _initialized:
        from cuda.bindings import driver
        return driver
    with _lock:
        if _init_error is not None:
            raise NoDeviceError(f"no CUDA device: {_init_error}")
        try:
            from cuda.bindings import driver
            (err,) = driver.cuInit(0)
        except Exception as exc:  # ImportError, RuntimeError("Failed to dlopen libcuda.so.1")
            _init_error = f"{type(exc).__name__}: {exc}"
            raise NoDeviceError(f"no CUDA device: {_init_error}") from None
        if int(err) != 0:
            _init_error = f"cuInit failed with {_err_name(driver, err)}"
            raise NoDeviceError(f"no CUDA device: {_init_error}")
        _initialized = True
        return driver


def _err_name(driver, err) -> str:
    try:
        _, name = driver.cuGetErrorName(err)
        _, desc = driver.cuGetErrorString(err)
        return f"{name.decode()} ({desc.decode()})"
    except Exception:
        return str(err)


def check(result, what: str):
    """Unwrap a cuda.bindings result tuple, raising CudaDriverError on failure."""
    driver = _driver()
    err = result[0]
    if int(err) != 0:
        raise CudaDriverError(f"{what} failed: {_err_name(driver, err)}")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


# ------------------------------------------------------------------ devices
@functools.lru_cache(maxsize=1)
def libcuda_loadable() -> bool:
    """False when the driver library cannot be opened (then cuInit cannot succeed either).

    A dlopen costs well under a millisecond; importing cuda.bindings to find the same
    thing out costs ~80 ms, which `target="auto"` used to pay on every CPU-only machine.
    Only Linux is pre-checked; elsewhere the bindings decide.
    """
    import sys

    if not sys.platform.startswith("linux") or _initialized:
        return True
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def device_available() -> bool:
    """True if at least one CUDA device can be used.  Never raises."""
    if not libcuda_loadable():
        return False
    try:
        return device_count() > 0
    except Exception:
        return False


def device_count() -> int:
    driver = _driver()
    return int(check(driver.cuDeviceGetCount(), "cuDeviceGetCount"))


def _device(index: int):
    driver = _driver()
    return check(driver.cuDeviceGet(index), f"cuDeviceGet({index})")


def device_attribute(attr_name: str, device_index: int = 0) -> int:
    """A CUdevice_attribute by its suffix, e.g. "MULTIPROCESSOR_COUNT"."""
    driver = _driver()
    attr = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{attr_name}")
    return int(check(driver.cuDeviceGetAttribute(attr, _device(device_index)),
                     f"cuDeviceGetAttribute({attr_name})"))


@functools.lru_cache(maxsize=None)
def compute_capability(device_index: int = 0) -> tuple[int, int]:
    return (device_attribute("COMPUTE_CAPABILITY_MAJOR", device_index),
            device_attribute("COMPUTE_CAPABILITY_MINOR", device_index))


def arch_of(device_index: int = 0) -> str:
    """NVRTC architecture for a device: "sm_80", "sm_90a" (Hopper needs the a-target)."""
    major, minor = compute_capability(device_index)
    suffix = "a" if (major, minor) in ((9, 0), (10, 0)) else ""
    return f"sm_{major}{minor}{suffix}"


def current_stream() -> int:
    """torch's current CUDA stream as a raw CUstream handle (int)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:  # ~0.3 us instead of ~2 us through torch.cuda.current_stream()
        return raw(torch._C._cuda_getDevice())
    return torch.cuda.current_stream().cuda_stream


_RETAINED: dict = {}  # device index -> its primary context, retained once and never released


def _ensure_context(device_index: int) -> None:
    """Make the device's primary context (the one torch uses) current.

    The first use of a device retains its primary context for the life of the process, so the
    context outlives the CUDA runtime's release at exit and is never destroyed during exit
    handlers. Destroying it there makes CUPTI hand back activity buffers that torch's profiler
    (kineto, torch 2.11) has already freed: "double free or corruption" after the last output of
    a process that timed kernels with do_bench(backend="cupti") (H200, 2 of 6 runs of a peer
    regression file; the stack ran cudart's exit handler -> cuDevicePrimaryCtxRelease -> CUPTI ->
    libtorch_cpu -> free). The driver reclaims the context when the process ends."""
    driver = _driver()
    if device_index not in _RETAINED:
        _RETAINED[device_index] = check(driver.cuDevicePrimaryCtxRetain(_device(device_index)),
                                        "cuDevicePrimaryCtxRetain")
    ctx = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is not None and int(ctx) != 0:
        if int(check(driver.cuCtxGetDevice(), "cuCtxGetDevice")) == device_index:
            return
    check(driver.cuCtxSetCurrent(_RETAINED[device_index]), "cuCtxSetCurrent")


# ------------------------------------------------------------------ argument packing
# (struct format char, size, alignment) per signature token.
_ARG_KINDS = {
    "ptr": ("Q", 8, 8), "i32": ("i", 4, 4), "u32": ("I", 4, 4), "i64": ("q", 8, 8),
    "u64": ("Q", 8, 8), "f32": ("f", 4, 4), "f64": ("d", 8, 8), "i16": ("h", 2, 2),
    "i8": ("b", 1, 1), "bool": ("?", 1, 1),
    "tensormap": (f"{TENSOR_MAP_BYTES}s", TENSOR_MAP_BYTES, 64),
}


class ArgPacker:
    """Packs one kernel's arguments into stable storage for cuLaunchKernel.

    Built once from the signature; `pack(args)` writes every value with one
    `struct.pack_into` into a buffer whose slot addresses are already in the
    `void*[]` that cuLaunchKernel receives, so no per-call allocation happens.
    "ptr" accepts an int address, None (NULL) or anything with `.data_ptr()`
    (torch tensors); "tensormap" accepts the 128 bytes from encode_tensor_map.
    """

    def __init__(self, signature):
        self.signature = tuple(signature)
        fmt, offsets, off = "=", [], 0
        for kind in self.signature:
            if kind not in _ARG_KINDS:
                raise TileLangError(f"unknown kernel argument kind {kind!r}; expected one of "
                                    f"{sorted(_ARG_KINDS)}")
            code, size, align = _ARG_KINDS[kind]
            pad = (-off) % align
            if pad:
                fmt += f"{pad}x"
            off += pad
            offsets.append(off)
            fmt += code
            off += size
        self._struct = struct.Struct(fmt)
        # Over-allocate so the base can be 64-byte aligned (tensor maps).
        self._raw = ctypes.create_string_buffer(max(off, 1) + 64)
        base = ctypes.addressof(self._raw)
        self._shift = (-base) % 64
        self._base = base + self._shift
        self._params = (ctypes.c_void_p * max(1, len(offsets)))(
            *[self._base + o for o in offsets])
        self.params_address = ctypes.addressof(self._params)
        self._ptr_slots = tuple(i for i, k in enumerate(self.signature) if k == "ptr")

    def pack(self, args) -> int:
        """Write `args`; return the address of the kernelParams array."""
        if len(args) != len(self.signature):
            raise TileLangError(f"kernel expects {len(self.signature)} arguments "
                                f"{list(self.signature)}, got {len(args)}")
        if self._ptr_slots:
            args = list(args)
            for i in self._ptr_slots:
                a = args[i]
                if a.__class__ is not int:
                    args[i] = 0 if a is None else a.data_ptr()
        self._struct.pack_into(self._raw, self._shift, *args)
        return self.params_address


# ------------------------------------------------------------------ modules
_CUDA_ERROR_INVALID_CONTEXT = 201
_CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720
_CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2


def launch_failure(what: str, name: str, grid, block, smem: int, rc: int, cooperative: bool) -> CudaDriverError:
    """The error for a launch that returned `rc`; a cooperative launch whose blocks cannot all be
    resident at once says so, with what to change."""
    driver = _driver()
    msg = f"{what}({name!r}, grid={grid}, block={block}, smem={smem}) failed: {_err_name(driver, driver.CUresult(rc))}"
    if cooperative and rc == _CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
        msg += ("; this kernel has a T.sync_grid() that it cannot be split into launches at (it is inside a loop "
                "or a branch, or registers / shared memory live across it), so every block must be resident at "
                "once: launch fewer blocks (a persistent loop over the work), fewer threads or less shared memory "
                "per block, or move the barrier to the top level of the T.Kernel body with buffers of its own "
                "after it")
    return CudaDriverError(msg)


@functools.lru_cache(maxsize=1)
def _libcuda():
    """ctypes handle of libcuda (already loaded by cuda.bindings) for the hot path."""
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuLaunchKernel
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    fn.restype = ctypes.c_int
    fn = lib.cuLaunchCooperativeKernel
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 2
    fn.restype = ctypes.c_int
    return lib


class CudaFunction:
    """One kernel of a loaded module, with its argument packer.

    Dynamic shared memory above 48 KB needs an opt-in attribute; it is set at
    construction for `dynamic_smem` and raised lazily if a launch asks for more.
    """

    cooperative = False  # a T.sync_grid inside (CudaSource.cooperative): every block resident at once

    def __init__(self, module: "CudaModule", name: str, signature, dynamic_smem: int = 0):
        driver = _driver()
        self.module, self.name = module, name
        self.handle = check(driver.cuModuleGetFunction(module.handle, name.encode()),
                            f"cuModuleGetFunction({name!r})")
        self._raw_handle = int(self.handle)
        self.packer = ArgPacker(signature)
        self._smem_limit = 48 * 1024
        self._launch = _libcuda().cuLaunchKernel
        # cuLaunchKernelEx through PreparedLaunch's untyped call where the driver has it (the
        # typed, GIL-releasing call above costs ~15,000 instructions into a no-op stub, this one
        # ~2,300); `ex = False` (JITKernel: tl.disable_launch_kernel_ex) keeps the typed call.
        self.ex = True
        self._ex_last = (None, None)  # (grid, block, smem, stream) of the last launch, its arguments
        if dynamic_smem > self._smem_limit:
            self.set_max_dynamic_smem(dynamic_smem)

    def set_max_dynamic_smem(self, nbytes: int) -> None:
        driver = _driver()
        optin = device_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", self.module.device)
        if nbytes > optin:
            raise CudaDriverError(
                f"kernel {self.name!r} asks for {nbytes} bytes of dynamic shared memory; "
                f"the device allows at most {optin} per block: use smaller tiles or fewer "
                f"pipeline stages")
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(driver.cuFuncSetAttribute(self.handle, attr, nbytes), "cuFuncSetAttribute")
        self._smem_limit = nbytes

    def attribute(self, name: str) -> int:
        """A CUfunction_attribute by suffix, e.g. "NUM_REGS", "SHARED_SIZE_BYTES"."""
        driver = _driver()
        attr = getattr(driver.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return int(check(driver.cuFuncGetAttribute(attr, self.handle), "cuFuncGetAttribute"))

    def launch(self, grid, block, smem: int, args, stream: int | None = None) -> None:
        """Launch on `stream` (default: torch's current stream).

        grid / block: int or tuple of up to 3 ints.  args: one value per
        signature entry.  Host overhead target: <= 10 us per call (pack_into +
        one ctypes call; see the module docstring).  Pass `stream` explicitly to
        skip the ~1-2 us torch.cuda.current_stream() lookup.
        """
        params = self.packer.pack(args)
        gx, gy, gz = _dim3(grid)
        bx, by, bz = _dim3(block)
        if smem > self._smem_limit:
            self.set_max_dynamic_smem(smem)
        if stream is None:
            stream = current_stream()
        launch_ex = _launch_ex_holding_gil() if self.ex else None
        if launch_ex is not None:
            key = (gx, gy, gz, bx, by, bz, smem, stream)
            last = self._ex_last  # one read: another thread may replace it meanwhile
            if last[0] != key:
                pointer = ctypes.c_void_p.from_param
                last = self._ex_last = (key, ex_launch_args(key[:7], stream, pointer(self._raw_handle),
                                                            pointer(params), self.cooperative))
            call, call_args, what = launch_ex, last[1], "cuLaunchKernelEx"
        elif self.cooperative:
            call, call_args, what = _libcuda().cuLaunchCooperativeKernel, (
                self._raw_handle, gx, gy, gz, bx, by, bz, smem, stream, params), "cuLaunchCooperativeKernel"
        else:
            call, call_args, what = self._launch, (self._raw_handle, gx, gy, gz, bx, by, bz, smem, stream,
                                                   params, None), "cuLaunchKernel"
        rc = call(*call_args)
        if rc == _CUDA_ERROR_INVALID_CONTEXT:  # a thread torch never made current
            _ensure_context(self.module.device)
            rc = call(*call_args)
        if rc != 0:
            raise launch_failure(what, self.name, grid, block, smem, rc, self.cooperative)

    __call__ = launch


@functools.lru_cache(maxsize=1)
def _launch_holding_gil():
    """cuLaunchKernel without argtypes, called with the GIL held (for PreparedLaunch).

    Untyped calls skip ctypes' per-argument conversion (0.4 us instead of 1.1 us a call on
    the build machine); holding the GIL makes "write the argument slots, launch" atomic
    against other Python threads launching the same kernel.
    """
    fn = ctypes.PyDLL("libcuda.so.1")["cuLaunchKernel"]
    fn.restype = ctypes.c_int
    return fn


@functools.lru_cache(maxsize=1)
def _cooperative_launch_holding_gil():
    """cuLaunchCooperativeKernel, as _launch_holding_gil (where cuLaunchKernelEx is not used)."""
    fn = ctypes.PyDLL("libcuda.so.1")["cuLaunchCooperativeKernel"]
    fn.restype = ctypes.c_int
    return fn


@functools.lru_cache(maxsize=1)
def _launch_ex_holding_gil():
    """cuLaunchKernelEx without argtypes, called with the GIL held, or None where the driver
    has no such entry point (before CUDA 12.0) or cannot be opened.

    It takes the launch as 4 arguments (config, function, kernelParams, extra) where
    cuLaunchKernel takes 11, and an untyped ctypes call costs about 50 ns per argument
    (libffi classifies and copies each one on every call): 0.24 us against 0.6 us a call
    into a no-op C function on the build machine.
    """
    try:
        fn = ctypes.PyDLL("libcuda.so.1")["cuLaunchKernelEx"]
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


class LaunchAttribute(ctypes.Structure):
    """The driver's CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value union."""

    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4), ("value", ctypes.c_char * 64)]


class LaunchConfig(ctypes.Structure):
    """The driver's CUlaunchConfig: grid, block, dynamic shared memory, stream, attributes."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


def ex_launch_args(dims, stream: int, handle_arg, params_arg, cooperative: bool = False) -> tuple:
    """cuLaunchKernelEx's untyped arguments (&config, function, kernelParams, NULL) for `dims`
    (grid x, y, z, block x, y, z, dynamic smem) on `stream`; the tuple keeps its config alive.
    `cooperative`: the config carries CU_LAUNCH_ATTRIBUTE_COOPERATIVE (every block resident)."""
    if cooperative:
        attr = LaunchAttribute(_CU_LAUNCH_ATTRIBUTE_COOPERATIVE, b"", struct.pack("<i", 1))
        config = LaunchConfig(*dims, stream, ctypes.addressof(attr), 1)
        config.keep = attr  # the driver reads the attribute through the config's pointer
    else:
        config = LaunchConfig(*dims, stream, None, 0)
    return (ctypes.byref(config), handle_arg, params_arg, None)


class PreparedLaunch:
    """One kernel launch with everything fixed except the pointer arguments and the stream.

    `values` holds one 8-byte slot per kernel argument and the `void*[]` the driver reads
    points at those slots, so a call writes `values[k] = data_ptr` and `launch(stream)`;
    nothing is packed or allocated per call. Only "ptr" signatures (every argument a
    device pointer) are accepted.

    The call is untyped and every argument is prebuilt per stream (`args_for`): pointers as
    ctypes argument objects (`c_void_p.from_param`, passed on without a conversion object
    per call), ints as C ints. With `ex` (the default, where the driver has it) the call is
    cuLaunchKernelEx(&config, function, kernelParams, NULL) with a LaunchConfig per stream;
    otherwise cuLaunchKernel(function, grid, block, smem, stream, kernelParams, NULL).
    `ex` is what the pass config tl.disable_launch_kernel_ex turns off.
    """

    def __init__(self, fn: CudaFunction, grid, block, smem: int, ex: bool = True):
        sig = fn.packer.signature
        if any(k != "ptr" for k in sig):
            raise TileLangError(f"PreparedLaunch takes pointer arguments only, got {list(sig)}")
        dims = (*_dim3(grid), *_dim3(block), smem)
        if any(d.__class__ is not int or not 0 <= d < 2 ** 31 for d in dims):
            raise TileLangError(f"launch dimensions must be ints in [0, 2**31), got grid={grid} "
                                f"block={block} smem={smem}")
        if smem > fn._smem_limit:
            fn.set_max_dynamic_smem(smem)
        n = len(sig)
        self.fn, self.grid, self.block, self.smem, self.dims = fn, grid, block, smem, dims
        self.values = (ctypes.c_uint64 * max(n, 1))()
        base = ctypes.addressof(self.values)
        self._params = (ctypes.c_void_p * max(n, 1))(*[base + 8 * i for i in range(n)])
        self.params_address = ctypes.addressof(self._params)
        pointer = ctypes.c_void_p.from_param
        self._handle_arg, self._params_arg = pointer(fn._raw_handle), pointer(self.params_address)
        self.cooperative = fn.cooperative
        self.call = _launch_ex_holding_gil() if ex else None
        self.ex = self.call is not None
        if not self.ex:
            self.call = _cooperative_launch_holding_gil() if self.cooperative else _launch_holding_gil()
        self._stream = None
        self._args = None

    def launch(self, stream: int) -> None:
        """Launch with the current `values` on `stream` (a raw CUstream int, 0 = legacy default)."""
        if stream != self._stream:  # the arguments are rebuilt only when the stream changes
            self.args_for(stream)
        rc = self.call(*self._args)
        if rc:
            self.failed(rc)

    def args_for(self, stream: int) -> tuple:
        """The untyped call's arguments for `stream`: `call(*args_for(s))` is `launch(s)` inlined
        (jit/fast_call.py keeps the tuple while the stream stays the same), then `failed(rc)`.
        Each stream gets its own tuple (and config), so a tuple held by a caller stays valid."""
        if self.ex:
            self._args = ex_launch_args(self.dims, stream, self._handle_arg, self._params_arg, self.cooperative)
        else:  # cuLaunchCooperativeKernel has no trailing `extra`
            self._args = (self._handle_arg, *self.dims, ctypes.c_void_p.from_param(stream),
                          self._params_arg) + (() if self.cooperative else (None,))
        self._stream = stream
        return self._args

    def failed(self, rc: int, args: tuple | None = None) -> None:
        """A nonzero launch result of the call with `args` (default: the last stream's):
        retried once on a fresh thread's context, else raised."""
        if rc == _CUDA_ERROR_INVALID_CONTEXT:  # a thread torch never made current
            _ensure_context(self.fn.module.device)
            rc = self.call(*(args or self._args))
            if not rc:
                return
        what = "cuLaunchKernelEx" if self.ex else "cuLaunchCooperativeKernel" if self.cooperative else "cuLaunchKernel"
        raise launch_failure(what, self.fn.name, self.grid, self.block, self.smem, rc, self.cooperative)


def _dim3(d) -> tuple[int, int, int]:
    if d.__class__ is int:
        return d, 1, 1
    d = tuple(d)
    if not 1 <= len(d) <= 3:
        raise TileLangError(f"launch dimensions must have 1 to 3 entries, got {d}")
    return (d + (1, 1))[:3]


class CudaModule:
    """A cubin loaded into the current device's primary context.

    The module belongs to that device; launching it on another device is an
    error the driver reports.  Unloaded when garbage-collected.
    """

    def __init__(self, cubin: bytes, device: int | None = None):
        driver = _driver()
        if device is None:
            device = _torch_current_device()
        self.device = device
        _ensure_context(device)
        # Passed as a raw address (the bindings accept ints for void*); kept alive
        # for the module's lifetime in case the driver reads it lazily.
        self._image = ctypes.create_string_buffer(bytes(cubin), len(cubin))
        self.handle = check(driver.cuModuleLoadData(ctypes.addressof(self._image)),
                            "cuModuleLoadData")
        self._functions: dict[str, CudaFunction] = {}

    def get_function(self, name: str, signature=(), dynamic_smem: int = 0) -> CudaFunction:
        fn = self._functions.get(name)
        if fn is None or fn.packer.signature != tuple(signature):
            fn = CudaFunction(self, name, signature, dynamic_smem)
            self._functions[name] = fn
        elif dynamic_smem > fn._smem_limit:
            fn.set_max_dynamic_smem(dynamic_smem)
        return fn

    def launch(self, name: str, grid, block, smem: int, args, stream: int | None = None,
               signature=None) -> None:
        """Convenience: look up `name` (signature required on first use) and launch."""
        fn = self._functions.get(name)
        if fn is None:
            if signature is None:
                raise TileLangError(f"first launch of {name!r} needs its signature")
            fn = self.get_function(name, signature)
        fn.launch(grid, block, smem, args, stream)

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle is not None and _initialized:
            try:
                from cuda.bindings import driver
                driver.cuModuleUnload(handle)
            except Exception:
                pass


def _torch_current_device() -> int:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.current_device()
    except Exception:
        pass
    return 0


def load_kernel(cubin: bytes, name: str, signature, dynamic_smem: int = 0,
                device: int | None = None) -> CudaFunction:
    """Load `cubin` and return its kernel `name` ready to launch."""
    return CudaModule(cubin, device).get_function(name, signature, dynamic_smem)


# ------------------------------------------------------------------ T.device_assert flag
class AssertFlag:
    """One device int a kernel's failing T.device_assert writes its 1-based index into.

    Allocated once per kernel and device; zero between launches. `read_and_reset` waits
    for `stream`, copies the int back and, when it is set, clears it for the next launch.
    """

    def __init__(self, device: int | None = None):
        driver = _driver()
        self.device = _torch_current_device() if device is None else device
        _ensure_context(self.device)
        self.ptr = int(check(driver.cuMemAlloc(4), "cuMemAlloc(assert flag)"))
        check(driver.cuMemsetD32(driver.CUdeviceptr(self.ptr), 0, 1), "cuMemsetD32(assert flag)")
        check(driver.cuCtxSynchronize(), "cuCtxSynchronize(assert flag)")  # zero before any stream uses it
        self._host = ctypes.c_int32(0)

    def read_and_reset(self, stream: int | None = None) -> int:
        driver = _driver()
        if stream is None:
            stream = current_stream()
        stream, ptr = driver.CUstream(stream), driver.CUdeviceptr(self.ptr)
        check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize (after a kernel with T.device_assert)")
        check(driver.cuMemcpyDtoH(ctypes.addressof(self._host), ptr, 4), "cuMemcpyDtoH(assert flag)")
        code = int(self._host.value)
        if code:
            check(driver.cuMemsetD32Async(ptr, 0, 1, stream), "cuMemsetD32Async(assert flag)")
            check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize(assert flag reset)")
        return code

    def __del__(self):
        ptr = getattr(self, "ptr", None)
        if ptr and _initialized:
            try:
                from cuda.bindings import driver
                driver.cuMemFree(driver.CUdeviceptr(ptr))
            except Exception:
                pass


# ------------------------------------------------------------------ TMA tensor maps
# Element type -> CUtensorMapDataType suffix.  TMA only moves bytes, so 8-bit
# types (int8, fp8) all travel as UINT8.
_TMA_DTYPES = {
    "uint8": "UINT8", "int8": "UINT8", "bool": "UINT8", "float8_e4m3fn": "UINT8",
    "float8_e5m2": "UINT8", "float8_e4m3": "UINT8", "float8_e8m0fnu": "UINT8", "uint16": "UINT16",
    "int16": "UINT16",
    "uint32": "UINT32", "int32": "INT32", "uint64": "UINT64", "int64": "INT64",
    "float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32", "float64": "FLOAT64",
    "tfloat32": "FLOAT32",  # raw fp32 bits, as cp.async moves them (the mma reads their tf32 part)
}
_TMA_ELEM_BYTES = {"UINT8": 1, "UINT16": 2, "UINT32": 4, "INT32": 4, "UINT64": 8, "INT64": 8,
                   "FLOAT16": 2, "BFLOAT16": 2, "FLOAT32": 4, "FLOAT64": 8}
_SWIZZLE = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
_L2_PROMOTION = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}


def _tma_dtype(dtype) -> str:
    name = str(dtype).replace("torch.", "")
    name = {"half": "float16", "float": "float32", "double": "float64"}.get(name, name)
    if name not in _TMA_DTYPES:
        raise TileLangError(f"TMA cannot copy dtype {dtype!r}; supported: {sorted(_TMA_DTYPES)}")
    return _TMA_DTYPES[name]


def check_tensor_map_args(dtype, global_address: int, global_dims, global_strides, box_dims,
                          element_strides=None, swizzle: int = 0) -> tuple:
    """Validate cuTensorMapEncodeTiled's rules up front, with messages that say why.

    Dims are innermost first (dim 0 is contiguous).  `global_strides` are byte
    strides of dims 1..rank-1 (rank-1 values); a full rank list whose first
    entry equals the element size is accepted too.  Returns the normalised
    (kind, dims, strides, box, element_strides).
    """
    kind = _tma_dtype(dtype)
    elem = _TMA_ELEM_BYTES[kind]
    dims, box = [int(d) for d in global_dims], [int(b) for b in box_dims]
    strides = [int(s) for s in global_strides]
    rank = len(dims)
    if not 1 <= rank <= 5:
        raise TileLangError(f"TMA tensors have 1 to 5 dimensions, got {rank}")
    if len(strides) == rank and strides and strides[0] == elem:
        strides = strides[1:]
    if len(strides) != rank - 1 or len(box) != rank:
        raise TileLangError(f"TMA map of rank {rank} needs {rank - 1} byte strides and {rank} "
                            f"box dims, got strides={list(global_strides)} box={box}")
    estr = [1] * rank if element_strides is None else [int(e) for e in element_strides]
    if global_address % 16:
        raise TileLangError(f"TMA needs a 16-byte aligned global address, got {global_address:#x}")
    bad = [s for s in strides if s % 16 or s <= 0]
    if bad:
        raise TileLangError(f"TMA byte strides must be positive multiples of 16, got {strides}: "
                            f"pad the row length (e.g. to a multiple of {16 // elem} elements)")
    if any(not 1 <= b <= 256 for b in box) or any(not 1 <= e <= 8 for e in estr):
        raise TileLangError(f"TMA box dims must be in [1, 256] (got {box}) and element strides "
                            f"in [1, 8] (got {estr})")
    if (box[0] * elem) % 16:
        raise TileLangError(f"TMA box inner extent must be a multiple of 16 bytes, got "
                            f"{box[0]} x {elem} B")
    if swizzle not in _SWIZZLE:
        raise TileLangError(f"TMA swizzle must be 0, 32, 64 or 128 bytes, got {swizzle}")
    if swizzle and box[0] * elem > swizzle:
        raise TileLangError(f"TMA box inner extent ({box[0] * elem} B) exceeds the {swizzle}B "
                            f"swizzle span: split the box along dim 0")
    return kind, dims, strides, box, estr


def encode_tensor_map(dtype, global_address: int, global_dims, global_strides, box_dims, *,
                      element_strides=None, swizzle: int = 0, l2_promotion: int = 128,
                      oob_fill_nan: bool = False) -> bytes:
    """cuTensorMapEncodeTiled -> the 128-byte CUtensorMap to pass by value.

    Dims innermost first; `global_strides` in bytes for dims 1..rank-1;
    swizzle 0/32/64/128 (bytes); out-of-bounds elements read as zero unless
    `oob_fill_nan`.  Raises NoDeviceError without a driver.
    """
    kind, dims, strides, box, estr = check_tensor_map_args(
        dtype, global_address, global_dims, global_strides, box_dims, element_strides, swizzle)
    if l2_promotion not in _L2_PROMOTION:
        raise TileLangError(f"L2 promotion must be 0, 64, 128 or 256 bytes, got {l2_promotion}")
    driver = _driver()
    fill = "NAN_REQUEST_ZERO_FMA" if oob_fill_nan else "NONE"
    # The bindings want their own integer wrappers, not Python ints, here.
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    tmap = check(driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{kind}"),
        len(dims), global_address, [u64(d) for d in dims], [u64(x) for x in strides],
        [u32(b) for b in box], [u32(e) for e in estr],
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[swizzle]}"),
        getattr(driver.CUtensorMapL2promotion,
                f"CU_TENSOR_MAP_L2_PROMOTION_{_L2_PROMOTION[l2_promotion]}"),
        getattr(driver.CUtensorMapFloatOOBfill, f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{fill}")),
        "cuTensorMapEncodeTiled")
    return ctypes.string_at(int(tmap.getPtr()), TENSOR_MAP_BYTES)


def check_im2col_args(dtype, global_address: int, global_dims, global_strides, lower, upper,
                      channels: int, pixels: int, element_strides, swizzle: int = 0) -> tuple:
    """Validate cuTensorMapEncodeIm2col's rules (dims innermost first: C, W, H[, D], N; corners
    one per spatial dim, in the order of `global_dims`). Returns the normalised
    (kind, dims, strides, element_strides)."""
    rank = len(global_dims)
    kind, dims, strides, _, estr = check_tensor_map_args(
        dtype, global_address, global_dims, global_strides, [channels] + [1] * (rank - 1), element_strides, swizzle)
    if not 3 <= rank <= 5:
        raise TileLangError(f"an im2col tensor map has 3 to 5 dimensions (NWC, NHWC, NDHWC), got {rank}")
    span = {3: 1 << 15, 4: 1 << 7, 5: 1 << 4}[rank]
    if len(lower) != rank - 2 or len(upper) != rank - 2 or \
            any(not -span <= int(x) < span for x in list(lower) + list(upper)):
        raise TileLangError(f"an im2col map of rank {rank} needs {rank - 2} lower and upper corner offsets in "
                            f"[{-span}, {span - 1}], got {list(lower)} and {list(upper)}")
    if not 1 <= channels <= 256 or not 1 <= pixels <= 1024:
        raise TileLangError(f"im2col boxes take 1-256 channels and 1-1024 pixels, got {channels} and {pixels}")
    return kind, dims, strides, estr


def encode_im2col_tensor_map(dtype, global_address: int, global_dims, global_strides, lower, upper,
                             channels: int, pixels: int, element_strides, *, swizzle: int = 0,
                             l2_promotion: int = 128) -> bytes:
    """cuTensorMapEncodeIm2col -> the 128-byte CUtensorMap for `tl::tma_load_im2col` (see
    check_im2col_args for the argument order). The bounding box spans corner positions
    lower .. dim - 1 + upper of each spatial dim, walked by `element_strides`."""
    kind, dims, strides, estr = check_im2col_args(dtype, global_address, global_dims, global_strides, lower,
                                                  upper, channels, pixels, element_strides, swizzle)
    driver = _driver()
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    tmap = check(driver.cuTensorMapEncodeIm2col(
        getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{kind}"),
        len(dims), global_address, [u64(d) for d in dims], [u64(x) for x in strides],
        [int(x) for x in lower], [int(x) for x in upper], channels, pixels, [u32(e) for e in estr],
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[swizzle]}"),
        getattr(driver.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{_L2_PROMOTION[l2_promotion]}"),
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeIm2col")
    return ctypes.string_at(int(tmap.getPtr()), TENSOR_MAP_BYTES)


def encode_tensor_map_2d(dtype, global_address: int, rows: int, cols: int, row_stride: int,
                         box_rows: int, box_cols: int, *, swizzle: int = 0,
                         l2_promotion: int = 128) -> bytes:
    """Row-major 2-D convenience: `row_stride` in elements; box = box_rows x box_cols.

    The kernel then addresses the box with tma_load(&map, bar, smem, col, row).
    """
    elem = _TMA_ELEM_BYTES[_tma_dtype(dtype)]
    return encode_tensor_map(dtype, global_address, [cols, rows], [row_stride * elem],
                             [box_cols, box_rows], swizzle=swizzle, l2_promotion=l2_promotion)


def encode_tensor_map_nd(tensor, box_shape, *, swizzle: int = 0, l2_promotion: int = 128) -> bytes:
    """Tensor map for a torch tensor, box given in the tensor's own (outer-first) order."""
    shape, strides = list(tensor.shape), list(tensor.stride())
    if len(box_shape) != len(shape):
        raise TileLangError(f"box {tuple(box_shape)} must have one entry per tensor dim {shape}")
    if strides[-1] != 1:
        raise TileLangError("TMA needs the innermost tensor dimension to be contiguous")
    elem = tensor.element_size()
    return encode_tensor_map(tensor.dtype, tensor.data_ptr(), shape[::-1],
                             [s * elem for s in strides[::-1][1:]], list(box_shape)[::-1],
                             swizzle=swizzle, l2_promotion=l2_promotion)
