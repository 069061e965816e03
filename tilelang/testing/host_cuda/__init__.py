"""Run CUDA kernels that tilelang compiled (through NVRTC) on the host, without a GPU.

The generated CUDA source is compiled with g++ against host_cuda.h: each thread of a block
is a host thread, so the per-thread index math, the distribution of a tile over threads and
the barriers run exactly as generated.  Warp collectives (shuffles, votes, ldmatrix,
mma.sync) meet the lanes of a warp in an exchange and compute the documented PTX result.
The tl primitive headers (common, mma, ldmatrix, cp_async, sync, wgmma, mbarrier, tma) have
host versions (host_tl.h, host_wgmma.h, host_tma.h); every other tl header (gemm_sm80.h, gemm_sm90.h, reduce.h,
c_compat.h ...) is the shipped one, so the GEMM templates we ship are what runs.  What it cannot see: timing and the
order in which the hardware would complete asynchronous work: TMA bytes land at the next wait
on their mbarrier, cp.async bytes at the cp_async_wait of their group, and wgmma results reach
the registers at the warpgroup_wait of their batch, so a read before its wait sees stale values.  mbarriers keep phases and transaction
bytes.  Refused (NotImplementedError): clusters (multicast, cluster barriers), inline PTX.  Each buffer sits right before an inaccessible page,
so a read or write past its end crashes the run; a barrier or warp collective that not every
thread reaches fails the run (after `barrier_timeout` seconds), never silently passing.

    prog = HostProgram({"copy": jit_kernel})        # one g++ build for all kernels
    prog.run("copy", [a, b])                        # torch CPU tensors, updated in place

A test aid shipped with the package so that tests and the fuzzer can both use it; g++ is needed.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SMEM_BYTES = 232448
INCLUDE = os.path.join(os.path.dirname(HERE), os.pardir, "include", "tl")
SHARED_RULES = os.path.join(os.path.dirname(HERE), os.pardir, "include", "cpu")  # tl_smem_desc.h (host_tma.h)
# tl headers replaced on the host: host_tl.h provides them (host_wgmma.h, host_tma.h).
HOST_PROVIDED = ("common.h", "mma.h", "ldmatrix.h", "cp_async.h", "sync.h", "wgmma.h", "wgmma_ops.h",
                 "mbarrier.h", "tma.h")
UNSUPPORTED = ("cluster_", "block_rank_in_cluster", "tma_load_multicast", "mbarrier_arrive_cluster", "tl::sync_grid",
               "tl_atomic_load", "tl_atomic_store", "asm(", "asm volatile")

_MAIN = r"""
#include <sys/mman.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>


template <class P>
static P tl_host_arg(char* a) {
  if constexpr (std::is_pointer_v<P>) {
    return reinterpret_cast<P>(a);
  } else {
    P v;
    std::memcpy(&v, a, sizeof(P));
    return v;
  }
}

template <class... P, size_t... I>
static void tl_host_call(void (*f)(P...), char** a, std::index_sequence<I...>) {
  f(tl_host_arg<P>(a[I])...);
}

template <class... P>
static int tl_host_launch(void (*f)(P...), char** a, dim3 grid, int threads) {
  tl_host_threads = threads;
  gridDim = grid;
  blockDim.x = threads;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([=] {
      threadIdx.x = t;
      if (setjmp(tl_host_escape)) return;
      for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
          for (unsigned x = 0; x < grid.x; ++x) {
            blockIdx.x = x; blockIdx.y = y; blockIdx.z = z;
            tl::tl_host_wgmma_block_start();
            tl::tl_host_cp_async_block_start();
            tl::tl_host_tma_store_block_start();
            tl_host_barrier();
            if (t == 0) std::memset(tl_smem, 0xff, sizeof(tl_smem));  // NaN-poisoned shared memory
            tl_host_barrier();
            tl_host_call(f, a, std::index_sequence_for<P...>{});
          }
      tl::tl_host_tma_store_block_start();
    });
  }
  for (auto& th : ts) th.join();
  return tl_host_broken ? 3 : 0;
}

// A buffer of n bytes ending (16-byte aligned) just before a PROT_NONE page.
static char* tl_host_guarded(size_t n) {
  size_t pg = sysconf(_SC_PAGESIZE);
  size_t body = (n + pg - 1) / pg * pg + pg;
  char* base = (char*)mmap(nullptr, body + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) { std::perror("mmap"); std::exit(4); }
  mprotect(base + body, pg, PROT_NONE);
  return base + ((body - n) & ~size_t(15));
}

int main(int argc, char** argv) {
  int which = std::atoi(argv[1]);
  FILE* fp = std::fopen(argv[2], "rb");
  std::vector<char*> args;
  std::vector<std::pair<size_t, bool>> meta;
  unsigned long long n;
  unsigned char is_buf;
  while (std::fread(&n, 8, 1, fp) == 1) {
    std::fread(&is_buf, 1, 1, fp);
    char* p = is_buf ? tl_host_guarded(n) : (char*)std::malloc(n + 8);
    if (n) std::fread(p, 1, n, fp);
    args.push_back(p);
    meta.push_back({n, is_buf != 0});
  }
  std::fclose(fp);
  tl_host_args = args;
  dim3 grid;
  grid.x = std::atoi(argv[3]); grid.y = std::atoi(argv[4]); grid.z = std::atoi(argv[5]);
  int threads = std::atoi(argv[6]), rc = 5;
  tl_host_smem_used = std::atoi(argv[7]);
  tl_host_timeout_s = std::atof(argv[8]);
  switch (which) {
%(cases)s
  }
  fp = std::fopen(argv[2], "wb");
  for (size_t i = 0; i < args.size(); ++i) {
    unsigned long long m = meta[i].first;
    unsigned char b = meta[i].second;
    std::fwrite(&m, 8, 1, fp);
    std::fwrite(&b, 1, 1, fp);
    if (m) std::fwrite(args[i], 1, m, fp);
  }
  std::fclose(fp);
  return rc;
}
"""


def available() -> bool:
    return shutil.which("g++") is not None


_GXX_FLAGS = ("-std=c++20", "-O1", "-pthread", "-w")
_PCH_KIND = "host_cuda_pch"
# What every host program starts with. Only headers at fixed paths that no macro of the generated source
# can change (host_cuda.h and the standard headers of _MAIN); the shipped tl headers (gemm_sm80.h reads
# TL_* switches the kernel defines first) are still parsed by each build.
_PRELUDE = "\n".join([f"#define TL_HOST_SMEM_BYTES {SMEM_BYTES}", f'#include "{os.path.join(HERE, "host_cuda.h")}"']
                     + [line for line in _MAIN.splitlines() if line.startswith("#include <")]) + "\n"
_prelude_memo: dict = {}


def _prelude_header():
    """Path of a header holding _PRELUDE with its g++ precompiled form (`<header>.gch`) beside it, built
    once per g++ / host header contents in the tilelang disk cache (a private temp dir when the cache is
    off), so a build does not parse host_cuda.h and the standard library again (about 1.5 s of a 2-5 s
    build); None when g++ cannot precompile it: the build then includes _PRELUDE as text, as before."""
    from tilelang.cache import disk

    if "path" not in _prelude_memo:
        version = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
        host_headers = [(d + fn, open(os.path.join(d, fn), "rb").read())
                        for d in (HERE, INCLUDE, SHARED_RULES) for fn in sorted(os.listdir(d)) if fn.endswith(".h")]
        k = disk.key("host-cuda-pch-1", _PRELUDE, *_GXX_FLAGS, version, *(x for pair in host_headers for x in pair))
        path = None
        try:
            header = disk.get_or_build(_PCH_KIND, k, ".h", lambda out: out.write_text(_PRELUDE))

            def build_pch(out):  # host_wgmma.h includes tl/wgmma_desc.h: against staged headers, as a build
                with tempfile.TemporaryDirectory(prefix="tl_host_cuda_pch_") as tmp:
                    _stage_headers(os.path.join(tmp, "tl"))
                    r = subprocess.run(["g++", *_GXX_FLAGS, "-I", tmp, "-x", "c++-header", str(header), "-o", str(out)],
                                       capture_output=True, text=True)
                if r.returncode:
                    raise RuntimeError(r.stderr[-2000:])

            gch = disk.get_or_build(_PCH_KIND, k, ".h.gch", build_pch)
            if os.path.dirname(gch) == os.path.dirname(header):
                path = str(header)
        except (OSError, RuntimeError):
            path = None
        _prelude_memo["path"] = path
    return _prelude_memo["path"]


class HostProgram:
    """Every kernel of `kernels` (name -> tilelang JITKernel compiled for CUDA) in one host executable."""

    barrier_timeout = 20.0  # seconds a thread waits at a barrier / warp collective before failing
    # False: every build stages the headers and parses host_cuda.h itself, no precompiled prelude
    precompiled_prelude = True

    def __init__(self, kernels: dict):
        self.kernels = dict(kernels)
        self.dir = tempfile.mkdtemp(prefix="tl_host_cuda_")
        self.index = {}
        _stage_headers(os.path.join(self.dir, "tl"))
        pre = _prelude_header() if self.precompiled_prelude else None
        parts = [f'#include "{pre}"' if pre else _PRELUDE]
        cases = []
        units = []  # (name, artifact): a launch sequence (T.sync_grid, several T.Kernel) gives one per launch
        for name, k in self.kernels.items():
            seq = getattr(k.artifact, "kernels", None)
            if seq is not None and k.artifact.plan.workspaces:
                self.close()
                raise NotImplementedError(f"host_cuda: kernel {name} has T.alloc_global workspaces")
            units += [(name, a) for a in (seq if seq is not None else [k.artifact])]
        for i, (name, art) in enumerate(units):
            cs = art.csource
            text = cs.text
            own = "\n".join(line for line in text.splitlines() if not line.startswith("#include"))
            bad = [w for w in UNSUPPORTED if w in own]
            if bad or any(kind not in ("buffer", "scalar", "dim", "tensormap", "workspace", "assert_flag")
                          for kind, _ in cs.arg_kinds):
                self.close()
                raise NotImplementedError(f"host_cuda: kernel {name} uses {bad or 'TMA / workspace args'}")
            if cs.smem_bytes > SMEM_BYTES:
                self.close()
                raise NotImplementedError(f"host_cuda: kernel {name} needs {cs.smem_bytes} bytes of shared memory")
            text = re.sub(r"\btl_tile_order\b", f"tl_tile_order_k{i}", text)  # each unit's own table
            text, count = re.subn(rf"\b{re.escape(cs.entry)}\(", f"tl_host_k{i}(", text, count=1)
            assert count == 1, f"host_cuda: entry {cs.entry} not found in the source of {name}"
            parts.append(text)
            cases.append(f"    case {i}: rc = tl_host_launch(tl_host_k{i}, args.data(), grid, threads); break;")
            self.index.setdefault(name, []).append((i, art))
        src = os.path.join(self.dir, "kernels.cpp")
        with open(src, "w") as f:
            f.write("\n".join(parts) + _MAIN.replace("%(cases)s", "\n".join(cases)))
        self.exe = os.path.join(self.dir, "kernels")
        r = subprocess.run(["g++", *_GXX_FLAGS, "-I", self.dir, "-o", self.exe, src], capture_output=True, text=True)
        if r.returncode:
            self.dir = None  # kept for the message
            raise RuntimeError(f"host_cuda: g++ failed on {src}:\n{r.stderr[-4000:]}")

    def close(self) -> None:
        """Remove the build folder (also when the program is garbage-collected); a g++ failure keeps
        it, since its message names the source there."""
        d, self.dir = getattr(self, "dir", None), None
        if d:
            shutil.rmtree(d, ignore_errors=True)

    def __del__(self):
        self.close()

    def run(self, name: str, tensors: list, timeout: float = 120.0) -> None:
        """Launch kernel `name` on the params `tensors` (torch tensors for buffers, numbers for
        scalars, in the prim_func's order); buffers are updated in place."""
        k = self.kernels[name]
        params = k.prim_func.params
        assert len(tensors) == len(params), f"{name}: {len(params)} params, got {len(tensors)}"
        by_param = dict(zip((id(p) for p in params), tensors))
        for index, art in self.index[name]:  # the launches of a sequence, in order
            self._run_one(name, index, art, params, by_param, timeout)

    def _run_one(self, name, index, art, params, by_param, timeout) -> None:
        cs = art.csource
        values, blob = [], b""
        for kind, obj in cs.arg_kinds:
            if kind == "buffer":
                t = _flat_span(by_param[id(obj)], obj)
                assert t.device.type == "cpu", f"{name}: {obj.name} must be a CPU tensor"
                payload, is_buf = t.view(torch.uint8).numpy().tobytes(), 1
                values.append(t)
            elif kind == "scalar":
                v = by_param[id(obj)]
                payload, is_buf = _scalar_bytes(v, obj.dtype.name), 0
                values.append(v)
            elif kind == "tensormap":
                payload, is_buf = _tensor_map(obj, cs.arg_kinds, by_param), 0
                values.append(None)
            elif kind == "assert_flag":  # the failing T.device_assert's 1-based index, 0 when none failed
                payload, is_buf = bytes(4), 1
                values.append(None)
            elif kind == "workspace":  # stream-K partials and flags: a zeroed buffer, as the launcher gives
                n = max(1, obj.dtype.bits // 8)
                for d in obj.shape:
                    n *= int(d)
                payload, is_buf = bytes(n), 1
                values.append(None)
            else:  # a shape variable: read off the first buffer that has it
                v = _dim_value(obj, params, by_param)
                payload, is_buf = struct.pack("<q", v), 0
                values.append(v)
            blob += struct.pack("<QB", len(payload), is_buf) + payload
        grid = art.grid(values)
        path = os.path.join(self.dir, f"{name}.bin")
        with open(path, "wb") as f:
            f.write(blob)
        r = subprocess.run([self.exe, str(index), path, *map(str, grid), str(cs.threads),
                            str(cs.smem_bytes), str(self.barrier_timeout)],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode:
            why = {3: "a barrier or warp collective failed", -11: "a memory access out of bounds (SIGSEGV)"}
            raise AssertionError(f"host_cuda: kernel {name} failed (exit {r.returncode}: "
                                 f"{why.get(r.returncode, 'crashed')}) {r.stderr[-2000:]}")
        with open(path, "rb") as f:
            out = f.read()
        pos = 0
        for kind, obj in cs.arg_kinds:
            n, is_buf = struct.unpack_from("<QB", out, pos)
            pos += 9
            if kind == "buffer":
                t = _flat_span(by_param[id(obj)], obj)
                t.view(torch.uint8).copy_(torch.frombuffer(bytearray(out[pos:pos + n]), dtype=torch.uint8))
            elif kind == "assert_flag" and struct.unpack_from("<i", out, pos)[0]:
                raise AssertionError(f"host_cuda: kernel {name}: T.device_assert number "
                                     f"{struct.unpack_from('<i', out, pos)[0]} failed")
            pos += n


def _tensor_map(desc, arg_kinds, by_param) -> bytes:
    """host_tma.h's 128-byte tensor map for `desc` (a TmaDesc: buffer, box outer-first, swizzle, im2col geometry):
    the index of its base buffer among the arguments, dims innermost first and byte strides, as
    the device path encodes them (backend/cuda/pipeline.py arg_value)."""
    base = getattr(desc.buffer, "view_base", desc.buffer)
    arg = next(i for i, (kind, obj) in enumerate(arg_kinds) if kind == "buffer" and obj is base)
    t = by_param[id(base)]
    elem = max(1, desc.buffer.dtype.bits // 8)
    pad = lambda xs: list(xs) + [0] * (5 - len(xs))  # noqa: E731
    if getattr(desc, "raw", None) is not None:  # T.create_tma_descriptor: the program's dims and strides
        from tilelang.backend.cuda.pipeline import launch_env

        dims, strides = desc.raw.geometry(launch_env(arg_kinds, by_param, {k: k for k in by_param}))
        return struct.pack("<IiiiI5i5q5q", 0x544D4150, arg, desc.raw.rank, desc.raw.elem, desc.raw.swizzle,
                           *pad(desc.raw.box), *pad(dims), *pad(strides)) + b"\0" * 8
    if base is desc.buffer:
        shape, strides = list(t.shape), [int(s) * t.element_size() for s in t.stride()]
    else:  # a view of the parameter with its own constant shape, row-major
        shape = list(desc.buffer.static_shape)
        strides, acc = [], elem
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
    dims, strides, box = shape[::-1], strides[::-1], list(desc.box)[::-1]
    rank = len(dims)
    geo = getattr(desc, "im2col", None)
    if geo is not None:  # box: channels per pixel, pixels, traversal strides (w, h); the corners after
        return struct.pack("<IiiiI5i5q5q4h", 0x4C433249, arg, rank, elem, desc.swizzle,
                           *pad([geo.channels, geo.pixels, *geo.strides]), *pad(dims), *pad(strides),
                           *geo.lower, *geo.upper)
    return struct.pack("<IiiiI5i5q5q", 0x544D4150, arg, rank, elem, desc.swizzle, *pad(box), *pad(dims),
                       *pad(strides)) + b"\0" * 8


def _stage_headers(dst: str) -> None:
    """dst <- the shipped tl headers, with those in HOST_PROVIDED as empty stand-ins: the shipped
    headers' own `#include "common.h"` then finds the stand-in beside them (host_cuda.h, included
    first, defines what they declare)."""
    os.makedirs(dst, exist_ok=True)
    for fn in os.listdir(INCLUDE):
        if not fn.endswith(".h"):
            continue
        if fn in HOST_PROVIDED:
            with open(os.path.join(dst, fn), "w") as f:
                f.write("#pragma once\n// host_cuda: provided by host_tl.h, or refused on the host\n")
        else:
            shutil.copyfile(os.path.join(INCLUDE, fn), os.path.join(dst, fn))


def _scalar_bytes(v, dtype: str) -> bytes:
    fmt = {"int32": "<i", "int64": "<q", "uint32": "<I", "uint64": "<Q", "float32": "<f", "float64": "<d",
           "bool": "<?", "int8": "<b", "int16": "<h"}[dtype]
    return struct.pack(fmt, v)


def _flat_span(t, p):
    """The 1-d run of storage a buffer argument's kernel pointer spans: the tensor itself when contiguous;
    for a T.StridedTensor view, its storage from the first element to the last (gaps included)."""
    if t.is_contiguous():
        return t.reshape(-1)
    assert getattr(p, "strides", None) is not None, f"{p.name} must be a contiguous CPU tensor"
    assert all(s >= 0 for s in t.stride()), f"{p.name}: negative strides"
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    return t.as_strided((span,), (1,))


def _dim_value(var, params, by_param) -> int:
    for p in params:
        for d, s in enumerate(getattr(p, "strides", None) or ()):  # a T.StridedTensor's symbolic stride
            if s is var:
                return int(by_param[id(p)].stride(d))
        for d, s in enumerate(getattr(p, "shape", ())):
            if s is var or (hasattr(s, "name") and getattr(s, "name", None) == var.name and type(s) is type(var)):
                # a sub-byte tensor's last dim counts bytes in torch and values in the kernel
                bits = p.dtype.bits if hasattr(p, "dtype") else 8
                per_byte = 8 // bits if bits < 8 and d == len(p.shape) - 1 else 1
                return int(by_param[id(p)].shape[d]) * per_byte
    raise AssertionError(f"host_cuda: no buffer has the dynamic dim {var.name}")
