"""Compile-only checks of the device header and the NVRTC wrapper (no GPU needed).

Each kernel exercises one header topic; the SASS of the cubin must contain the
instruction that topic exists for (HMMA, LDSM, LDGSTS, HGMMA, UTMALDG, SYNCS...),
so a wrapper that silently compiled to nothing would fail here.
"""
import pytest

from tilelang.backend.cuda import nvrtc, sass
from tilelang.errors import CompileError

pytestmark = [
    pytest.mark.nvrtc,
    pytest.mark.skipif(not nvrtc.nvrtc_available(),
                       reason="NVRTC not found (pip install cuda-bindings nvidia-cuda-nvrtc)"),
]


def _ops(cubin: bytes):
    if not sass.sass_available():
        pytest.skip("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump "
                    "nvidia-cuda-nvdisasm)")
    return sass.opcodes(sass.disassemble(cubin))


def _has(ops, prefix: str) -> bool:
    return any(op.startswith(prefix) for op in ops)


MMA_SRC = r"""
#include "tl/mma.h"
extern "C" __global__ void mma_all(const uint32_t* in, float* out, int32_t* iout) {
  const uint32_t* p = in + threadIdx.x * 8;
  uint32_t a[4] = {p[0], p[1], p[2], p[3]}, b[2] = {p[4], p[5]};
  float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
  tl::mma_sync<tl::half_t, tl::half_t, float, 16, 8, 16>(d, a, b, c);
  tl::mma_sync<tl::bfloat16_t, tl::bfloat16_t, float, 16, 8, 16>(c, a, b, d);
  tl::mma_sync<float, float, float, 16, 8, 8>(d, a, b, c);
  uint32_t h[2] = {p[6], p[7]}, hd[2];
  tl::mma_sync<tl::half_t, tl::half_t, tl::half_t, 16, 8, 16>(hd, a, b, h);
  int32_t ic[4] = {1, 2, 3, 4}, id[4];
  tl::mma_sync<int8_t, int8_t, int32_t, 16, 8, 32>(id, a, b, ic);
#if FP8
  tl::mma_sync<tl::float8_e4m3_t, tl::float8_e4m3_t, float, 16, 8, 32>(c, a, b, d);
  tl::mma_sync<tl::float8_e5m2_t, tl::float8_e4m3_t, float, 16, 8, 32>(d, a, b, c);
#endif
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = d[i] + __uint_as_float(hd[i & 1]);
  for (int i = 0; i < 4; ++i) iout[threadIdx.x * 4 + i] = id[i];
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_mma_sync(arch):
    res = nvrtc.compile_cuda(MMA_SRC, arch, options=[f"-DFP8={int(arch != 'sm_80')}"])
    assert res.arch == arch and len(res.cubin) > 0 and "mma.sync.aligned" in res.ptx
    ops = _ops(res.cubin)
    assert ops["HMMA"] >= 4, ops  # f16, bf16, tf32, f16-acc (fp8 may add more)
    assert _has(ops, "IMMA"), ops


COPY_SRC = r"""
#include "tl/tl.h"
extern "C" __global__ void copies(const tl::half_t* g, float* out, tl::half_t* hout) {
  __shared__ alignas(128) tl::half_t s[32 * 64];
  __shared__ uint64_t bar;
  const int t = threadIdx.x;
  tl::cp_async<16>(s + t * 8, g + t * 8);
  tl::cp_async<8, false>(s + 1024 + t * 4, g + 1024 + t * 4);
  tl::cp_async_zfill<16>(s + 512 + t * 8, g + 512 + t * 8, t < 20);
  tl::cp_async_partial<4, false>(s + 1536 + t * 2, g + t * 2, 2);
  tl::cp_async_commit();
  tl::cp_async_wait<0>();
  if (t == 0) tl::mbarrier_init(&bar, 32);
  __syncthreads();
  tl::mbarrier_arrive(&bar);
  tl::mbarrier_wait(&bar, 0);
  uint32_t r[4], q[2], x[1];
  tl::ldmatrix_x4(r, s + (t % 16) * 64 + (t / 16) * 8);
  tl::ldmatrix<2, true>(q, s + (t % 16) * 64);
  tl::ldmatrix_x1_trans(x, s + (t % 8) * 64);
  float v = __uint_as_float(r[0] ^ r[1] ^ r[2] ^ r[3] ^ q[0] ^ q[1] ^ x[0]);
  v = tl::warp_allreduce<tl::SumOp, 4>(v);
  v = tl::warp_reduce_max<8, 4>(v);
  __shared__ float scratch[4];
  v = tl::block_allreduce<tl::MinOp, 128>(v, scratch);
  tl::atomic_add(out, v);
  tl::atomic_max(out + 1, v);
  tl::atomic_min(out + 2, v);
  tl::atomic_add_x2(out + 4, v, v);
  tl::atomic_add_x4(out + 8, v, v, v, v);
  tl::atomic_add_x2(hout + 2 * t, tl::cast<tl::half_t>(v), tl::cast<tl::half_t>(1.0f));
  out[16 + t] = tl::fast_exp2f(v) + tl::exp2f(v) + tl::cast<float>(tl::cast<tl::bfloat16_t>(v))
              + tl::max(v, 0.f) + tl::cast<float>(tl::infinity<tl::half_t>());
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_copies_ldmatrix_reduce_atomics(arch):
    res = nvrtc.compile_cuda(COPY_SRC, arch)
    ops = _ops(res.cubin)
    for op in ("LDGSTS", "LDGDEPBAR", "LDSM", "SHFL"):
        assert _has(ops, op), (op, ops)
    assert _has(ops, "RED") or _has(ops, "ATOM"), ops
    if arch == "sm_90a":
        assert _has(ops, "SYNCS"), ops  # mbarrier is a SYNCS unit op on Hopper


HOPPER_SRC = r"""
#include "tl/tl.h"
extern "C" __global__ void __launch_bounds__(384, 1)
hopper(const __grid_constant__ tl::TensorMap tmap, float* out) {
  __shared__ alignas(1024) tl::half_t sa[64 * 64];
  __shared__ alignas(1024) tl::half_t sb[64 * 64];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) { tl::mbarrier_init(&bar, 1); tl::fence_barrier_init(); }
  __syncthreads();
  if (tl::warpgroup_id() == 0) {
    tl::setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      tl::tma_prefetch_descriptor(&tmap);
      tl::mbarrier_arrive_expect_tx(&bar, 2 * 64 * 64 * 2);
      tl::tma_load(&tmap, &bar, sa, 0, 0);
      tl::tma_load(&tmap, &bar, sb, 0, 64);
    }
  } else {
    tl::setmaxnreg_inc<232>();
    tl::mbarrier_wait(&bar, 0);
    float acc[32];
    uint64_t da = tl::make_wgmma_desc<128>(sa, 16, 1024);
    uint64_t db = tl::make_wgmma_desc<128>(sb, 16, 1024);
    tl::warpgroup_fence_operand<32>(acc);
    tl::warpgroup_arrive();
    for (int k = 0; k < 4; ++k)
      tl::wgmma_ss<tl::half_t, tl::half_t, float, 64>(
          tl::wgmma_desc_advance(da, 32 * k), tl::wgmma_desc_advance(db, 32 * k), acc, k);
    uint32_t ra[4] = {1, 2, 3, 4};
    tl::wgmma_rs<tl::bfloat16_t, tl::bfloat16_t, float, 64>(ra, db, acc, 1);
    tl::warpgroup_commit_batch();
    tl::warpgroup_wait<0>();
    tl::warpgroup_fence_operand<32>(acc);
    uint32_t r[4] = {__float_as_uint(acc[0]), __float_as_uint(acc[1]),
                     __float_as_uint(acc[2]), __float_as_uint(acc[3])};
    tl::barrier_sync<1, 256>();
    tl::stmatrix<4>(sa + (threadIdx.x % 32) * 8, r);
    tl::fence_proxy_async();
    tl::barrier_sync<1, 256>();
    if (threadIdx.x == 128) {
      tl::tma_store(&tmap, sa, 0, 0);
      tl::tma_store_commit();
      tl::tma_store_wait<0>();
    }
    for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = acc[i];
  }
}
"""


def test_hopper_wgmma_tma_mbarrier_setmaxnreg():
    res = nvrtc.compile_cuda(HOPPER_SRC, "sm_90a", ptxas_verbose=True)
    # Without __launch_bounds__(threads, 1) ptxas drops setmaxnreg with a warning.
    assert "'setmaxnreg' ignored" not in res.log, res.log
    info = res.ptxas_info()
    assert info["spill_stores"] == 0, res.log
    ops = _ops(res.cubin)
    assert ops["HGMMA"] == 5, ops
    for op in ("UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG", "STSM", "WARPGROUP"):
        assert _has(ops, op), (op, ops)


def test_every_generated_wgmma_shape_compiles():
    from tilelang.tools import gen_wgmma

    def cpp(t):
        return t if t in ("float", "int8_t", "int32_t") else f"tl::{t}"

    calls = []
    for i, (a, b, c, n, _k) in enumerate(gen_wgmma.supported_shapes()):
        reg = {"float": "float", "half_t": "uint32_t", "int32_t": "int32_t"}[c]
        ty = f"{cpp(a)}, {cpp(b)}, {cpp(c)}, {n}"
        calls.append(
            f"  if (blockIdx.x == {i}) {{ {reg} acc[128] = {{}};\n"
            f"    tl::wgmma_ss<{ty}>(da, db, acc, 1);\n"
            f"    tl::wgmma_rs<{ty}>(ra, db, acc, scale);\n"
            f"    tl::warpgroup_wait<0>(); for (int j = 0; j < 4; ++j) out[j] = (float)acc[j]; }}")
    src = ("#define TL_WGMMA_EXT 1\n#include \"tl/wgmma.h\"\n"
           "extern \"C\" __global__ void all_wgmma(float* out, uint64_t da, uint64_t db, int scale) {\n"
           "  uint32_t ra[4] = {1, 2, 3, 4};\n" + "\n".join(calls) + "\n}\n")
    res = nvrtc.compile_cuda(src, "sm_90a")
    ops = _ops(res.cubin)
    # int8 wgmma is IGMMA, f16/bf16 HGMMA, fp8 QGMMA.
    total = sum(v for k, v in ops.items() if k.endswith("GMMA"))
    assert total == 2 * len(gen_wgmma.supported_shapes()), ops


def test_generated_header_is_current():
    from tilelang.tools import gen_wgmma

    assert gen_wgmma.main(["--check"]) == 0, "run python -m tilelang.tools.gen_wgmma"


def test_arch_guard_names_the_requirement():
    src = ('#include "tl/tl.h"\nextern "C" __global__ void k(float* o) {\n'
           '  float acc[4]; tl::wgmma_ss<tl::half_t, tl::half_t, float, 8>(0, 0, acc, 0);\n'
           '  o[0] = acc[0];\n}\n')
    with pytest.raises(CompileError) as info:
        nvrtc.compile_cuda(src, "sm_80")
    assert "wgmma needs --gpu-architecture=sm_90a" in str(info.value)


def test_header_alone_compiles_for_every_target():
    src = '#include "tl/tl.h"\nextern "C" __global__ void k(float* o) { o[0] = 1.f; }\n'
    for arch in ("sm_80", "sm_89", "sm_90a"):
        res = nvrtc.compile_cuda(src, arch)
        assert res.compile_time_s < 5.0
        assert res.cubin[:4] == b"\x7fELF"


def test_compile_error_carries_log_and_excerpt():
    src = ("extern \"C\" __global__ void broken(float* x) {\n"
           "  float y = 1.0f;\n"
           "  x[0] = undefined_name + y;\n"
           "}\n")
    with pytest.raises(CompileError) as info:
        nvrtc.compile_cuda(src, "sm_80", name="broken.cu")
    msg = str(info.value)
    assert 'identifier "undefined_name" is undefined' in msg  # NVRTC's own log
    assert ">>    3 |   x[0] = undefined_name + y;" in msg      # our excerpt, line marked
    assert "sm_80" in msg


def test_static_assert_message_reaches_the_user():
    src = ('#include "tl/cp_async.h"\nextern "C" __global__ void k(float* g) {\n'
           '  __shared__ float s[4]; tl::cp_async<8, true>(s, g);\n}\n')
    with pytest.raises(CompileError, match=r"copies 16 bytes only"):
        nvrtc.compile_cuda(src, "sm_80")


@pytest.mark.parametrize("given,expected", [
    ("sm_80", "sm_80"), ("90a", "sm_90a"), (90, "sm_90a"), ((8, 9), "sm_89"),
    ("compute_86", "sm_86"), ("sm_90", "sm_90"),
])
def test_normalize_arch(given, expected):
    assert nvrtc.normalize_arch(given) == expected


def test_normalize_arch_rejects_garbage():
    with pytest.raises(CompileError, match="unknown CUDA architecture"):
        nvrtc.normalize_arch("ampere")


def test_resource_usage_reports_registers():
    src = ('extern "C" __global__ void k(float* o, int n) {\n'
           '  float a = o[threadIdx.x]; for (int i = 0; i < n; ++i) a = a * a + 1.f;\n'
           '  o[threadIdx.x] = a;\n}\n')
    res = nvrtc.compile_cuda(src, "sm_90a", ptxas_verbose=True)
    if not sass.find_cuobjdump():
        pytest.skip("cuobjdump not found")
    usage = sass.resource_usage(res.cubin)
    assert set(usage) == {"k"}
    assert usage["k"].registers == res.ptxas_info()["registers"] > 0
    assert usage["k"].local == 0


MISC_SM90_SRC = r"""
#include "tl/tl.h"
extern "C" __global__ void __cluster_dims__(2, 1, 1)
misc(const __grid_constant__ tl::TensorMap m, float* g, double* dg, int x) {
  __shared__ alignas(128) float s[8 * 32 * 2];
  __shared__ uint64_t bar;
  if (tl::elect_one_sync() && threadIdx.x < 32) {
    tl::mbarrier_init(&bar, 1);
    tl::fence_barrier_init();
  }
  tl::cluster_sync();
  if (threadIdx.x == 0) {
    tl::mbarrier_expect_tx(&bar, 4096);
    tl::tma_load(&m, &bar, s, x);
    tl::tma_load(&m, &bar, s, x, x, x);
    tl::tma_load(&m, &bar, s, x, x, x, x);
    tl::tma_load(&m, &bar, s, x, x, x, x, x);
    tl::tma_load_multicast(&m, &bar, s, 0x3, x, x);
    tl::tma_load_multicast(&m, &bar, s, 0x3, x, x, x);
    tl::bulk_copy_g2s(s, g, 256, &bar);
    tl::mbarrier_arrive(&bar);
  }
  while (!tl::mbarrier_try_wait(&bar, 0)) {}
  if (threadIdx.x == 0) {
    tl::tma_store(&m, s, x);
    tl::tma_store(&m, s, x, x, x);
    tl::tma_store(&m, s, x, x, x, x);
    tl::tma_store(&m, s, x, x, x, x, x);
    tl::bulk_copy_s2g(g, s, 256);
    tl::tma_store_commit();
    tl::tma_store_wait_all();
    tl::mbarrier_arrive_cluster(&bar, tl::block_rank_in_cluster() ^ 1);
  }
  tl::named_barrier_arrive(2, 64);
  float v = tl::warp_reduce_min<32>(s[threadIdx.x]) + tl::warp_reduce_sum<2, 16>(1.f);
  tl::atomic_cas_update(dg, (double)v, [](double a, double b) { return a > b ? a : b; });
  tl::atomic_max(reinterpret_cast<int32_t*>(g), (int32_t)v);
  g[threadIdx.x] = v + tl::fast_log2f(v) + tl::fast_rcpf(v) + tl::cast<float>(tl::to_tf32(v));
  __syncthreads();
  if (threadIdx.x == 0) tl::mbarrier_inval(&bar);
  tl::cluster_arrive();
  tl::cluster_wait();
}
"""


def test_remaining_sm90_helpers_compile():
    res = nvrtc.compile_cuda(MISC_SM90_SRC, "sm_90a")
    ops = _ops(res.cubin)
    assert ops["UTMALDG"] >= 5 and ops["UTMASTG"] >= 4, ops
    assert _has(ops, "UBLKCP") and _has(ops, "ELECT") and _has(ops, "UCGABAR"), ops
