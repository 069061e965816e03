"""Driver layer: no-device behaviour (runs everywhere) and real launches (GPU tier).

The `cuda` tests compile with NVRTC, launch through driver.py on torch tensors and
compare with a float64 torch reference; outputs are poisoned with NaN first so an
element the kernel never wrote fails the comparison.
"""
import ctypes
import time

import pytest

from tilelang.backend.cuda import driver, nvrtc
from tilelang.errors import NoDeviceError, TileLangError

HAS_DEVICE = driver.device_available()
no_gpu_skip = pytest.mark.skipif(not HAS_DEVICE or not nvrtc.nvrtc_available(),
                                 reason="needs a CUDA device and NVRTC")


# ------------------------------------------------------------------ everywhere
def test_device_available_is_a_bool_and_never_raises():
    assert driver.device_available() in (True, False)


@pytest.mark.skipif(HAS_DEVICE, reason="checks the no-device path")
def test_no_device_here_raises_no_device_error():
    assert driver.device_available() is False
    with pytest.raises(NoDeviceError, match="no CUDA device"):
        driver.CudaModule(b"\x7fELF not a real cubin")
    with pytest.raises(NoDeviceError):
        driver.load_kernel(b"", "k", ["ptr"])
    with pytest.raises(NoDeviceError):
        driver.encode_tensor_map_2d("float16", 0, 64, 64, 64, 64, 64)


def test_simulated_missing_driver(monkeypatch):
    # Same path as a machine without libcuda, also on the GPU machine.
    monkeypatch.setattr(driver, "_initialized", False)
    monkeypatch.setattr(driver, "_init_error", "simulated: libcuda.so.1 not found")
    assert driver.device_available() is False
    with pytest.raises(NoDeviceError, match="simulated"):
        driver.CudaModule(b"")
    assert isinstance(NoDeviceError("x"), RuntimeError)


def test_arg_packer_lays_out_values_with_alignment():
    p = driver.ArgPacker(["ptr", "i32", "f32", "tensormap", "i64", "f64", "ptr"])
    blob = bytes(range(128))

    class FakeTensor:
        def data_ptr(self):
            return 0xDEAD0000

    addr = p.pack([0x1234, -7, 2.5, blob, -(2 ** 40), 0.125, FakeTensor()])
    slots = (ctypes.c_void_p * 7).from_address(addr)
    assert ctypes.c_uint64.from_address(slots[0]).value == 0x1234
    assert ctypes.c_int32.from_address(slots[1]).value == -7
    assert ctypes.c_float.from_address(slots[2]).value == 2.5
    assert ctypes.string_at(slots[3], 128) == blob and slots[3] % 64 == 0
    assert ctypes.c_int64.from_address(slots[4]).value == -(2 ** 40)
    assert ctypes.c_double.from_address(slots[5]).value == 0.125
    assert ctypes.c_uint64.from_address(slots[6]).value == 0xDEAD0000
    # A second call reuses the same storage (no per-call allocation).
    assert p.pack([None, 1, 1.0, blob, 1, 1.0, 5]) == addr
    assert ctypes.c_uint64.from_address(slots[0]).value == 0


def test_arg_packer_rejects_bad_signature_and_arity():
    with pytest.raises(TileLangError, match="unknown kernel argument kind"):
        driver.ArgPacker(["ptr", "float4"])
    with pytest.raises(TileLangError, match="expects 2 arguments"):
        driver.ArgPacker(["ptr", "i32"]).pack([1])


@pytest.mark.parametrize("kwargs,match", [
    (dict(global_address=8), "16-byte aligned"),
    (dict(global_strides=[100]), "multiples of 16"),
    (dict(box_dims=[64, 300]), r"box dims must be in \[1, 256\]"),
    (dict(box_dims=[4, 8]), "multiple of 16 bytes"),
    (dict(swizzle=64), "exceeds the 64B swizzle span"),
    (dict(dtype="complex64"), "cannot copy dtype"),
])
def test_tensor_map_arguments_are_checked_before_the_driver(kwargs, match):
    args = dict(dtype="float16", global_address=0x1000, global_dims=[72, 100],
                global_strides=[144], box_dims=[64, 32], swizzle=128)
    args.update(kwargs)
    with pytest.raises(TileLangError, match=match):
        driver.check_tensor_map_args(**args)


def test_tensor_map_strides_accept_full_rank_form():
    kind, dims, strides, box, _ = driver.check_tensor_map_args(
        "bfloat16", 0x1000, [64, 32, 4], [2, 128, 4096], [64, 16, 1])
    assert (kind, strides) == ("BFLOAT16", [128, 4096])


# ------------------------------------------------------------------ GPU tier
MMA_KERNEL = r"""
#include "tl/mma.h"
#include "tl/ldmatrix.h"
// A: 16x16 row-major, B: 16x8 row-major (k, n), Cin/C1/C2: 16x8 row-major.
extern "C" __global__ void mma16816(const tl::half_t* A, const tl::half_t* B,
                                    const float* Cin, float* C1, float* C2) {
  __shared__ alignas(16) tl::half_t sA[16 * 16];
  __shared__ alignas(16) tl::half_t sB[16 * 8];
  const int l = threadIdx.x, g = l / 4, t = l % 4;
  for (int i = l; i < 256; i += 32) sA[i] = A[i];
  for (int i = l; i < 128; i += 32) sB[i] = B[i];
  __syncthreads();
  // Fragments gathered element by element from the documented ownership map.
  uint32_t a[4] = {tl::pack_half2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                   tl::pack_half2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                   tl::pack_half2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                   tl::pack_half2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
  uint32_t b[2] = {tl::pack_half2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
                   tl::pack_half2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
  float c[4] = {Cin[g * 8 + 2 * t], Cin[g * 8 + 2 * t + 1],
                Cin[(g + 8) * 8 + 2 * t], Cin[(g + 8) * 8 + 2 * t + 1]};
  float d[4];
  tl::mma_sync<tl::half_t, tl::half_t, float, 16, 8, 16>(d, a, b, c);
  // The same fragments through ldmatrix (A: x4, B: x2.trans from (k, n) rows).
  uint32_t la[4], lb[2];
  tl::ldmatrix_x4(la, sA + ((l % 8) + 8 * ((l / 8) % 2)) * 16 + 8 * (l / 16));
  tl::ldmatrix_x2_trans(lb, sB + (l % 16) * 8);
  float e[4];
  tl::mma_sync<tl::half_t, tl::half_t, float, 16, 8, 16>(e, la, lb, c);
  const int o[4] = {g * 8 + 2 * t, g * 8 + 2 * t + 1, (g + 8) * 8 + 2 * t, (g + 8) * 8 + 2 * t + 1};
  for (int i = 0; i < 4; ++i) { C1[o[i]] = d[i]; C2[o[i]] = e[i]; }
}
"""


def _arch():
    return driver.arch_of(0)


@pytest.mark.cuda
@no_gpu_skip
def test_mma_m16n8k16_matches_float64_reference():
    import torch

    res = nvrtc.compile_cuda(MMA_KERNEL, _arch())
    fn = driver.load_kernel(res.cubin, "mma16816", ["ptr"] * 5)
    a = torch.randn(16, 16, device="cuda").half()
    b = torch.randn(16, 8, device="cuda").half()
    cin = torch.randn(16, 8, device="cuda")
    c1 = torch.full((16, 8), float("nan"), device="cuda")
    c2 = torch.full_like(c1, float("nan"))
    fn.launch(1, 32, 0, [a, b, cin, c1, c2])
    torch.cuda.synchronize()
    ref = a.double() @ b.double() + cin.double()
    torch.testing.assert_close(c1.double(), ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(c2.double(), ref, rtol=1e-3, atol=1e-3)


TMA_KERNEL = r"""
#include "tl/tl.h"
extern "C" __global__ void tma_tile(const __grid_constant__ tl::TensorMap tmap,
                                    tl::half_t* out, int x, int y) {
  __shared__ alignas(128) tl::half_t tile[32 * 64];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) { tl::mbarrier_init(&bar, 1); tl::fence_barrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tl::tma_prefetch_descriptor(&tmap);
    tl::mbarrier_arrive_expect_tx(&bar, sizeof(tile));
    tl::tma_load(&tmap, &bar, tile, x, y);
  }
  tl::mbarrier_wait(&bar, 0);
  for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x) out[i] = tile[i];
}
"""


@pytest.mark.cuda
@no_gpu_skip
def test_tma_load_copies_tile_and_zero_fills_out_of_range():
    import torch

    if driver.compute_capability(0) < (9, 0):
        pytest.skip("TMA needs sm_90")
    res = nvrtc.compile_cuda(TMA_KERNEL, _arch())
    fn = driver.load_kernel(res.cubin, "tma_tile", ["tensormap", "ptr", "i32", "i32"])
    g = torch.randn(100, 72, device="cuda").half()
    tmap = driver.encode_tensor_map_2d("float16", g.data_ptr(), 100, 72, 72, 32, 64)
    assert len(tmap) == 128
    out = torch.full((32, 64), float("nan"), device="cuda").half()
    fn.launch(1, 128, 0, [tmap, out, 16, 80])  # box at column 16, row 80
    torch.cuda.synchronize()
    ref = torch.zeros(32, 64, dtype=torch.float16, device="cuda")
    ref[:20, :56] = g[80:100, 16:72]
    assert torch.equal(out, ref)


WGMMA_KERNEL = r"""
#include "tl/tl.h"
// C[64x64] = A[64x64] * Bt[64x64]^T, both K-major, loaded by TMA with 128B swizzle.
extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_tile(const __grid_constant__ tl::TensorMap ta, const __grid_constant__ tl::TensorMap tb,
           float* C) {
  __shared__ alignas(1024) tl::half_t sa[64 * 64];
  __shared__ alignas(1024) tl::half_t sb[64 * 64];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) { tl::mbarrier_init(&bar, 1); tl::fence_barrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tl::mbarrier_arrive_expect_tx(&bar, sizeof(sa) + sizeof(sb));
    tl::tma_load(&ta, &bar, sa, 0, 0);
    tl::tma_load(&tb, &bar, sb, 0, 0);
  }
  tl::mbarrier_wait(&bar, 0);
  float acc[32];
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  const uint64_t da = tl::make_wgmma_desc<128>(sa, 16, 1024);
  const uint64_t db = tl::make_wgmma_desc<128>(sb, 16, 1024);
  tl::warpgroup_fence_operand<32>(acc);
  tl::warpgroup_arrive();
#pragma unroll
  for (int k = 0; k < 4; ++k)
    tl::wgmma_ss<tl::half_t, tl::half_t, float, 64>(tl::wgmma_desc_advance(da, 32 * k),
                                                    tl::wgmma_desc_advance(db, 32 * k), acc, 1);
  tl::warpgroup_commit_batch();
  tl::warpgroup_wait<0>();
  tl::warpgroup_fence_operand<32>(acc);
  const int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  for (int j = 0; j < 8; ++j) {
    const int r = 16 * w + g, c = 8 * j + 2 * t;
    C[r * 64 + c] = acc[4 * j];
    C[r * 64 + c + 1] = acc[4 * j + 1];
    C[(r + 8) * 64 + c] = acc[4 * j + 2];
    C[(r + 8) * 64 + c + 1] = acc[4 * j + 3];
  }
}
"""


@pytest.mark.cuda
@no_gpu_skip
def test_wgmma_ss_with_swizzled_tma_tiles():
    import torch

    if driver.arch_of(0) != "sm_90a":
        pytest.skip("wgmma needs sm_90a")
    res = nvrtc.compile_cuda(WGMMA_KERNEL, "sm_90a")
    fn = driver.load_kernel(res.cubin, "wgmma_tile", ["tensormap", "tensormap", "ptr"])
    a = torch.randn(64, 64, device="cuda").half()
    bt = torch.randn(64, 64, device="cuda").half()
    ta = driver.encode_tensor_map_nd(a, (64, 64), swizzle=128)
    tb = driver.encode_tensor_map_nd(bt, (64, 64), swizzle=128)
    c = torch.full((64, 64), float("nan"), device="cuda")
    fn.launch(1, 128, 0, [ta, tb, c])
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), a.double() @ bt.double().T, rtol=1e-3, atol=1e-3)


@pytest.mark.cuda
@no_gpu_skip
def test_launch_host_overhead():
    import torch

    src = ('extern "C" __global__ void empty(float* a, const float* b, int n, float s) '
           '{ if (n < 0) a[0] = b[0] * s; }\n')
    fn = driver.load_kernel(nvrtc.compile_cuda(src, _arch()).cubin, "empty",
                            ["ptr", "ptr", "i32", "f32"])
    x = torch.zeros(4, device="cuda")
    stream = driver.current_stream()
    args = [x, x, 1, 1.0]
    for _ in range(100):
        fn.launch(1, 32, 0, args, stream)
    torch.cuda.synchronize()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        fn.launch(1, 32, 0, args, stream)
    per_launch_us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    print(f"host overhead per launch: {per_launch_us:.2f} us")
    assert per_launch_us < 30.0


@pytest.mark.nvrtc
@pytest.mark.skipif(not nvrtc.nvrtc_available(), reason="NVRTC not found")
@pytest.mark.parametrize("name,src,archs", [
    ("mma16816", MMA_KERNEL, ("sm_80", "sm_90a")),
    ("tma_tile", TMA_KERNEL, ("sm_90a",)),
    ("wgmma_tile", WGMMA_KERNEL, ("sm_90a",)),
])
def test_gpu_tier_kernels_compile_here(name, src, archs):
    # So a typo in a GPU-only test shows up in CI, not on the H200.
    for arch in archs:
        res = nvrtc.compile_cuda(src, arch)
        assert f".entry {name}(" in res.ptx


def test_primary_context_is_retained_once_per_device(monkeypatch):
    """The first use of a device retains its primary context (never released, so the CUDA runtime's
    release at exit cannot destroy it under CUPTI); later uses retain nothing more, and a thread with
    no current context gets the retained one made current."""
    import types

    from tilelang.backend.cuda import driver

    calls = []
    state = {"current": 0}

    def retain(dev):
        calls.append(("retain", dev))
        return (0, 1000 + dev)

    def set_current(ctx):
        calls.append(("set", ctx))
        state["current"] = ctx
        return (0,)

    fake = types.SimpleNamespace(
        cuDeviceGet=lambda i: (0, i), cuDevicePrimaryCtxRetain=retain, cuCtxSetCurrent=set_current,
        cuCtxGetCurrent=lambda: (0, state["current"]), cuCtxGetDevice=lambda: (0, state["current"] - 1000))
    monkeypatch.setattr(driver, "_driver", lambda: fake)
    monkeypatch.setattr(driver, "_RETAINED", {})
    driver._ensure_context(0)  # no current context: retain, then make it current
    driver._ensure_context(0)  # current already, retained already: nothing
    state["current"] = 0  # another thread
    driver._ensure_context(0)
    driver._ensure_context(1)
    assert calls == [("retain", 0), ("set", 1000), ("set", 1000), ("retain", 1), ("set", 1001)]
