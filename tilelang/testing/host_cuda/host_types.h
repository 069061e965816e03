// host_types.h -- __half, __nv_bfloat16 and the fp8 types of CUDA's headers, on the host.
//
// Storage is the IEEE / OCP bit pattern; arithmetic runs in float and rounds once to the
// type (exact for + - * / of two 16-bit values: float has more than 2p + 2 bits).
// float -> half / bfloat16: round to nearest even, overflow to inf (__float2half_rn);
// float -> fp8: round to nearest even, saturating to the largest finite value, NaN stays NaN
// (the __NV_SATFINITE conversion CUDA's fp8 constructors use).  Part of host_cuda.h.
#pragma once

#include <type_traits>

// A float format with E exponent bits, M mantissa bits; Inf: the all-ones exponent is inf/NaN
// (IEEE), otherwise only the all-ones code is NaN (e4m3fn).  `sat`: clamp to the largest finite.
template <int E, int M, bool Inf>
struct TlHostFmt {
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr uint32_t kMaxCode = Inf ? (((1u << E) - 1) << M) - 1 : (1u << (E + M)) - 2;
  static constexpr uint32_t kNan = Inf ? (((1u << E) - 1) << M) | (1u << (M - 1)) : (1u << (E + M)) - 1;
  static uint32_t encode(float f, bool sat) {
    const uint32_t sign = std::signbit(f) ? 1u << (E + M) : 0u;
    if (f != f) return sign | kNan;
    double a = std::fabs((double)f);
    uint32_t code;
    if (std::isinf(a)) {
      code = kMaxCode + 1;
    } else if (a == 0) {
      code = 0;
    } else {
      int e;
      std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
      int ex = e - 1 + kBias;  // biased exponent of a
      if (ex >= 1) {  // normal: q in [2^M, 2^(M+1)] after rounding; a carry moves into the exponent
        double q = std::nearbyint(std::ldexp(a, M - (e - 1)));
        code = ((uint32_t)ex << M) + (uint32_t)q - (1u << M);
      } else {  // subnormal: units of 2^(1 - bias - M); 2^M units is the smallest normal
        code = (uint32_t)std::nearbyint(std::ldexp(a, M - 1 + kBias));
      }
    }
    if (code > kMaxCode) code = sat ? kMaxCode : (Inf ? kMaxCode + 1 : kNan);
    return sign | code;
  }
  static float decode(uint32_t c) {
    const bool neg = (c >> (E + M)) & 1u;
    const uint32_t ex = (c >> M) & ((1u << E) - 1), man = c & ((1u << M) - 1);
    double v;
    if (Inf && ex == (1u << E) - 1) {
      v = man ? NAN : INFINITY;
    } else if (!Inf && (c & ((1u << (E + M)) - 1)) == kNan) {
      v = NAN;
    } else if (ex == 0) {
      v = std::ldexp((double)man, 1 - kBias - M);
    } else {
      v = std::ldexp((double)(man | (1u << M)), (int)ex - kBias - M);
    }
    return (float)(neg ? -v : v);
  }
};
using TlHostF16 = TlHostFmt<5, 10, true>;
using TlHostBF16 = TlHostFmt<8, 7, true>;
using TlHostE4M3 = TlHostFmt<4, 3, false>;
using TlHostE5M2 = TlHostFmt<5, 2, true>;

// A 16-bit float type with float arithmetic, as CUDA's __half / __nv_bfloat16.
#define TL_HOST_F16_TYPE(NAME, FMT)                                                         \
  struct NAME {                                                                             \
    uint16_t __x;                                                                           \
    NAME() = default;                                                                       \
    NAME(float f) : __x((uint16_t)FMT::encode(f, false)) {}                                 \
    NAME(double f) : NAME((float)f) {}                                                      \
    template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>                   \
    NAME(I i) : NAME((float)i) {}                                                           \
    operator float() const { return FMT::decode(__x); }                                     \
    NAME& operator+=(NAME o) { return *this = NAME(float(*this) + float(o)); }              \
    NAME& operator-=(NAME o) { return *this = NAME(float(*this) - float(o)); }              \
    NAME& operator*=(NAME o) { return *this = NAME(float(*this) * float(o)); }              \
    NAME& operator/=(NAME o) { return *this = NAME(float(*this) / float(o)); }              \
  };                                                                                        \
  inline NAME operator+(NAME a, NAME b) { return NAME(float(a) + float(b)); }               \
  inline NAME operator-(NAME a, NAME b) { return NAME(float(a) - float(b)); }               \
  inline NAME operator*(NAME a, NAME b) { return NAME(float(a) * float(b)); }               \
  inline NAME operator/(NAME a, NAME b) { return NAME(float(a) / float(b)); }               \
  inline NAME operator-(NAME a) { NAME r; r.__x = a.__x ^ 0x8000u; return r; }             \
  inline bool operator==(NAME a, NAME b) { return float(a) == float(b); }                   \
  inline bool operator!=(NAME a, NAME b) { return float(a) != float(b); }                   \
  inline bool operator<(NAME a, NAME b) { return float(a) < float(b); }                     \
  inline bool operator>(NAME a, NAME b) { return float(a) > float(b); }                     \
  inline bool operator<=(NAME a, NAME b) { return float(a) <= float(b); }                   \
  inline bool operator>=(NAME a, NAME b) { return float(a) >= float(b); }

TL_HOST_F16_TYPE(__half, TlHostF16)
TL_HOST_F16_TYPE(__nv_bfloat16, TlHostBF16)
#undef TL_HOST_F16_TYPE

struct __half2 { __half x, y; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
inline __half2 operator+(__half2 a, __half2 b) { return {a.x + b.x, a.y + b.y}; }
inline __nv_bfloat162 operator+(__nv_bfloat162 a, __nv_bfloat162 b) { return {a.x + b.x, a.y + b.y}; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return {a, b}; }

inline float __half2float(__half h) { return float(h); }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __half __ushort_as_half(unsigned short x) { __half h; h.__x = x; return h; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { __nv_bfloat16 h; h.__x = x; return h; }
// __hmax / __hmin: NaN-ignoring like fmaxf (CUDA: "if either input is NaN, the other is returned").
inline __half __hmax(__half a, __half b) { return __half(std::fmax(float(a), float(b))); }
inline __half __hmin(__half a, __half b) { return __half(std::fmin(float(a), float(b))); }
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(std::fmax(float(a), float(b))); }
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(std::fmin(float(a), float(b))); }
// The `_rn` bf16 arithmetic (mul.rn / fma.rn with -0.0 on sm_80+): one rounding of the exact
// result, which the float result rounded once is (float holds a product of two bf16 exactly).
inline __nv_bfloat16 __hadd_rn(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
inline __nv_bfloat16 __hsub_rn(__nv_bfloat16 a, __nv_bfloat16 b) { return a - b; }
inline __nv_bfloat16 __hmul_rn(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }
inline __nv_bfloat162 __hmul2_rn(__nv_bfloat162 a, __nv_bfloat162 b) { return {a.x * b.x, a.y * b.y}; }
inline __half hexp(__half a) { return __half(std::exp(float(a))); }
inline __half hsqrt(__half a) { return __half(std::sqrt(float(a))); }

#define TL_HOST_FP8_TYPE(NAME, FMT)                                                   \
  struct NAME {                                                                       \
    uint8_t __x;                                                                      \
    NAME() = default;                                                                 \
    explicit NAME(float f) : __x((uint8_t)FMT::encode(f, true)) {}                    \
    explicit NAME(double f) : NAME((float)f) {}                                       \
    explicit NAME(__half h) : NAME(float(h)) {}                                       \
    explicit NAME(__nv_bfloat16 h) : NAME(float(h)) {}                                \
    explicit operator float() const { return FMT::decode(__x); }                      \
    explicit operator __half() const { return __half(FMT::decode(__x)); }             \
    explicit operator __nv_bfloat16() const { return __nv_bfloat16(FMT::decode(__x)); } \
  };

TL_HOST_FP8_TYPE(__nv_fp8_e4m3, TlHostE4M3)
TL_HOST_FP8_TYPE(__nv_fp8_e5m2, TlHostE5M2)
#undef TL_HOST_FP8_TYPE
