// host_math.h -- CUDA's rounding-mode arithmetic (__fadd_rz ... __dsqrt_rd), __clzll and the
// fp8 conversion with a saturation choice, on the host.  Part of host_cuda.h (after host_types.h).
//
// The directed roundings run on the host FPU in that rounding mode: g++ assumes
// round-to-nearest, so an empty asm with a memory clobber keeps each operation between the
// two fesetround calls (its operands live in memory the asm may change).
#pragma once

#include <cfenv>

inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }

template <class F>
inline auto tl_host_rounded(int mode, F f) {
  const int old = std::fegetround();
  std::fesetround(mode);
  asm volatile("" ::: "memory");
  auto r = f();
  asm volatile("" : "+m"(r) : : "memory");
  std::fesetround(old);
  return r;
}

#define TL_HOST_IEEE(SUF, MODE)                                                                       \
  inline float __fadd_##SUF(float a, float b) { return tl_host_rounded(MODE, [&] { return a + b; }); } \
  inline float __fsub_##SUF(float a, float b) { return tl_host_rounded(MODE, [&] { return a - b; }); } \
  inline float __fmul_##SUF(float a, float b) { return tl_host_rounded(MODE, [&] { return a * b; }); } \
  inline float __fdiv_##SUF(float a, float b) { return tl_host_rounded(MODE, [&] { return a / b; }); } \
  inline float __fsqrt_##SUF(float a) { return tl_host_rounded(MODE, [&] { return std::sqrt(a); }); }  \
  inline float __fmaf_##SUF(float a, float b, float c) {                                             \
    return tl_host_rounded(MODE, [&] { return std::fma(a, b, c); });                                  \
  }                                                                                                   \
  inline double __dadd_##SUF(double a, double b) { return tl_host_rounded(MODE, [&] { return a + b; }); } \
  inline double __dsub_##SUF(double a, double b) { return tl_host_rounded(MODE, [&] { return a - b; }); } \
  inline double __dmul_##SUF(double a, double b) { return tl_host_rounded(MODE, [&] { return a * b; }); } \
  inline double __ddiv_##SUF(double a, double b) { return tl_host_rounded(MODE, [&] { return a / b; }); } \
  inline double __drcp_##SUF(double a) { return tl_host_rounded(MODE, [&] { return 1.0 / a; }); }        \
  inline double __dsqrt_##SUF(double a) { return tl_host_rounded(MODE, [&] { return std::sqrt(a); }); } \
  inline double __fma_##SUF(double a, double b, double c) {                                          \
    return tl_host_rounded(MODE, [&] { return std::fma(a, b, c); });                                  \
  }
TL_HOST_IEEE(rn, FE_TONEAREST)
TL_HOST_IEEE(rz, FE_TOWARDZERO)
TL_HOST_IEEE(ru, FE_UPWARD)
TL_HOST_IEEE(rd, FE_DOWNWARD)
#undef TL_HOST_IEEE
// (__frcp_rn is host_cuda.h's)
inline float __frcp_rz(float a) { return tl_host_rounded(FE_TOWARDZERO, [&] { return 1.0f / a; }); }
inline float __frcp_ru(float a) { return tl_host_rounded(FE_UPWARD, [&] { return 1.0f / a; }); }
inline float __frcp_rd(float a) { return tl_host_rounded(FE_DOWNWARD, [&] { return 1.0f / a; }); }
inline float __frsqrt_rn(float a) { return (float)(1.0 / std::sqrt((double)a)); }

enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
typedef uint8_t __nv_fp8_storage_t;
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t sat, __nv_fp8_interpretation_t kind) {
  const bool s = sat == __NV_SATFINITE;
  return (__nv_fp8_storage_t)(kind == __NV_E4M3 ? TlHostE4M3::encode(x, s) : TlHostE5M2::encode(x, s));
}

// float -> half / bfloat16 rounded toward zero / +inf / -inf (__float2half_rz ...): the
// encoder's nearbyint follows the FPU mode, and it rounds the magnitude, so a step away from
// zero is FE_UPWARD on it and a step toward zero FE_TOWARDZERO (which saturates: a magnitude
// rounded down never passes the largest finite value; an infinite input stays infinite).
// double -> float: the FPU's conversion in that mode.
template <class Fmt>
inline unsigned short tl_host_encode_dir(float f, int dir) {  // dir: 0 toward zero, 1 up, -1 down
  const bool neg = std::signbit(f);
  const bool away = (dir > 0 && !neg) || (dir < 0 && neg);
  if (f != f || std::isinf(f)) return (unsigned short)Fmt::encode(f, false);
  return (unsigned short)tl_host_rounded(away ? FE_UPWARD : FE_TOWARDZERO, [&] { return Fmt::encode(f, !away); });
}
#define TL_HOST_CVT_DIR(SUF, DIR, MODE)                                                                    \
  inline __half __float2half_##SUF(float f) { return __ushort_as_half(tl_host_encode_dir<TlHostF16>(f, DIR)); } \
  inline __nv_bfloat16 __float2bfloat16_##SUF(float f) {                                                  \
    return __ushort_as_bfloat16(tl_host_encode_dir<TlHostBF16>(f, DIR));                                  \
  }                                                                                                       \
  inline float __double2float_##SUF(double d) { return tl_host_rounded(MODE, [&] { return (float)d; }); }
TL_HOST_CVT_DIR(rz, 0, FE_TOWARDZERO)
TL_HOST_CVT_DIR(ru, 1, FE_UPWARD)
TL_HOST_CVT_DIR(rd, -1, FE_DOWNWARD)
#undef TL_HOST_CVT_DIR
