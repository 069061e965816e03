// host_mma.h -- tl/mma.h on the host: mma.sync m16n8k{16,32,8,64} as a warp collective, in the
// fragment layouts listed in host_tl.h (the PTX ISA's "Matrix Fragments for mma.m16n8k*").
// Part of host_cuda.h (included by host_tl.h).
#pragma once

namespace tl {
namespace detail {

enum HostMmaIn { kHostF16, kHostBF16, kHostS8, kHostTF32, kHostE4M3, kHostE5M2, kHostS4, kHostU4 };

// Element `sub` of one 32-bit operand register, as a double.
inline double host_mma_elem(uint32_t w, int sub, int kind) {
  switch (kind) {
    case kHostF16: return TlHostF16::decode((w >> (16 * sub)) & 0xffffu);
    case kHostBF16: return TlHostBF16::decode((w >> (16 * sub)) & 0xffffu);
    case kHostS8: return (double)(int8_t)(w >> (8 * sub));
    case kHostS4: return (double)((int)((w >> (4 * sub)) & 0xfu) ^ 8) - 8;  // sign-extended nibble
    case kHostU4: return (double)((w >> (4 * sub)) & 0xfu);
    case kHostE4M3: return TlHostE4M3::decode((w >> (8 * sub)) & 0xffu);
    case kHostE5M2: return TlHostE5M2::decode((w >> (8 * sub)) & 0xffu);
    default: return (double)__uint_as_float(w & 0xffffe000u);  // tf32: the low 13 bits are not read
  }
}

// D = A * B + C for the warp.  In words: a[0..4), b[4..6), c[6..6 + nc).  AccKind: 0 f32, 1 s32, 2 f16x2.
// KPer: values one register holds (K / 8 for the 4-register A shapes; 8 for s4 / u4 at K = 32,
// whose A has 2 registers and B 1: only those are read).
template <int K, int AccKind, int KPer = K / 8>
inline void host_mma(const char* op, int ka, int kb, uint32_t* d, const uint32_t* a, const uint32_t* b,
                     const uint32_t* c) {
  constexpr int nc = AccKind == 2 ? 2 : 4;
  constexpr int na = K / (2 * KPer), nb = K / (4 * KPer);
  uint32_t mine[10] = {}, got[4];
  std::memcpy(mine, a, 4 * na);
  std::memcpy(mine + 4, b, 4 * nb);
  std::memcpy(mine + 6, c, 4 * nc);
  tl_host_collective(op, 0xffffffffu, mine, 6 + nc, got, nc, [&](uint32_t (*in)[kTlIn], uint32_t (*out)[kTlOut], unsigned parts) -> const char* {
    if (parts != 0xffffffffu) return "needs all 32 lanes of the warp";
    constexpr int kPer = KPer;       // a register covers kPer consecutive k of one row (A) / column (B)
    constexpr int kHalf = 4 * kPer;  // the k the 4 lanes of a row / column cover with one register each
    double A[16][K], B[K][8];
    for (int row = 0; row < 16; ++row)
      for (int k = 0; k < K; ++k)
        A[row][k] = host_mma_elem(in[(row % 8) * 4 + (k % kHalf) / kPer][(row / 8) + 2 * (k / kHalf)], k % kPer, ka);
    for (int k = 0; k < K; ++k)
      for (int col = 0; col < 8; ++col)
        B[k][col] = host_mma_elem(in[col * 4 + (k % kHalf) / kPer][4 + k / kHalf], k % kPer, kb);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
        if constexpr (AccKind == 1) {
          long long s = (int32_t)in[l][6 + e];
          for (int k = 0; k < K; ++k) s += (long long)A[row][k] * (long long)B[k][col];
          out[l][e] = (uint32_t)s;
        } else {
          double s = AccKind == 0 ? (double)__uint_as_float(in[l][6 + e])
                                  : TlHostF16::decode((in[l][6 + e / 2] >> (16 * (e % 2))) & 0xffffu);
          for (int k = 0; k < K; ++k) s += A[row][k] * B[k][col];
          if constexpr (AccKind == 0) {
            out[l][e] = __float_as_uint((float)s);
          } else {
            const uint32_t h = TlHostF16::encode((float)s, false);
            out[l][e / 2] = e % 2 ? (out[l][e / 2] & 0xffffu) | (h << 16) : h;
          }
        }
      }
    }
    return nullptr;
  });
  std::memcpy(d, got, 4 * nc);
}
}  // namespace detail

inline void mma_m16n8k16_f16_f32(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  detail::host_mma<16, 0>("mma.m16n8k16.f32.f16.f16.f32", detail::kHostF16, detail::kHostF16, reinterpret_cast<uint32_t*>(d), a, b,
                          reinterpret_cast<const uint32_t*>(c));
}
inline void mma_m16n8k16_bf16_f32(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  detail::host_mma<16, 0>("mma.m16n8k16.f32.bf16.bf16.f32", detail::kHostBF16, detail::kHostBF16, reinterpret_cast<uint32_t*>(d), a, b,
                          reinterpret_cast<const uint32_t*>(c));
}
inline void mma_m16n8k16_f16_f16(uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c) {
  detail::host_mma<16, 2>("mma.m16n8k16.f16.f16.f16.f16", detail::kHostF16, detail::kHostF16, d, a, b, c);
}
inline void mma_m16n8k32_s8_s32(int32_t* d, const uint32_t* a, const uint32_t* b, const int32_t* c) {
  detail::host_mma<32, 1>("mma.m16n8k32.s32.s8.s8.s32", detail::kHostS8, detail::kHostS8, reinterpret_cast<uint32_t*>(d), a, b,
                          reinterpret_cast<const uint32_t*>(c));
}
// s4 / u4: 8 nibbles a register, the lowest k in the low nibble (host_mma's generic layout at K = 64).
struct int4x2_t { uint8_t bits; };
struct uint4x2_t { uint8_t bits; };
inline void mma_m16n8k64_s4_s32(int32_t* d, const uint32_t* a, const uint32_t* b, const int32_t* c) {
  detail::host_mma<64, 1>("mma.m16n8k64.s32.s4.s4.s32", detail::kHostS4, detail::kHostS4, reinterpret_cast<uint32_t*>(d), a, b,
                          reinterpret_cast<const uint32_t*>(c));
}
inline void mma_m16n8k64_u4_s32(int32_t* d, const uint32_t* a, const uint32_t* b, const int32_t* c) {
  detail::host_mma<64, 1>("mma.m16n8k64.s32.u4.u4.s32", detail::kHostU4, detail::kHostU4, reinterpret_cast<uint32_t*>(d), a, b,
                          reinterpret_cast<const uint32_t*>(c));
}
// s4 / u4 at K = 32: A 2 registers (rows g, g + 8), B 1 register, 8 nibbles each.
inline void mma_m16n8k32_s4_s32(int32_t* d, const uint32_t* a, const uint32_t* b, const int32_t* c) {
  detail::host_mma<32, 1, 8>("mma.m16n8k32.s32.s4.s4.s32", detail::kHostS4, detail::kHostS4, reinterpret_cast<uint32_t*>(d), a, b,
                             reinterpret_cast<const uint32_t*>(c));
}
inline void mma_m16n8k32_u4_s32(int32_t* d, const uint32_t* a, const uint32_t* b, const int32_t* c) {
  detail::host_mma<32, 1, 8>("mma.m16n8k32.s32.u4.u4.s32", detail::kHostU4, detail::kHostU4, reinterpret_cast<uint32_t*>(d), a, b,
                             reinterpret_cast<const uint32_t*>(c));
}
inline void mma_m16n8k8_tf32_f32(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  detail::host_mma<8, 0>("mma.m16n8k8.f32.tf32.tf32.f32", detail::kHostTF32, detail::kHostTF32, reinterpret_cast<uint32_t*>(d), a, b,
                         reinterpret_cast<const uint32_t*>(c));
}
// cvt.rna.tf32.f32: nearest, ties away from zero; the low 13 bits of the result are zero.
inline uint32_t to_tf32(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) ? ((u | 0x00400000u) & 0xffffe000u) : u;
  return (u + 0x1000u) & 0xffffe000u;
}

#define TL_HOST_MMA_FP8(NAME, KA, KB)                                                                  \
  template <int kArchGuard = 0>                                                                        \
  inline void NAME(float* d, const uint32_t* a, const uint32_t* b, const float* c) {                  \
    detail::host_mma<32, 0>(#NAME, detail::KA, detail::KB, reinterpret_cast<uint32_t*>(d), a, b,      \
                            reinterpret_cast<const uint32_t*>(c));                                     \
  }
TL_HOST_MMA_FP8(mma_m16n8k32_e4m3e4m3_f32, kHostE4M3, kHostE4M3)
TL_HOST_MMA_FP8(mma_m16n8k32_e4m3e5m2_f32, kHostE4M3, kHostE5M2)
TL_HOST_MMA_FP8(mma_m16n8k32_e5m2e4m3_f32, kHostE5M2, kHostE4M3)
TL_HOST_MMA_FP8(mma_m16n8k32_e5m2e5m2_f32, kHostE5M2, kHostE5M2)
#undef TL_HOST_MMA_FP8

namespace detail {
template <class A, class B, class Acc, int M, int N, int K>
struct MmaSync {
  static constexpr bool kSupported = false;
  template <class D>
  static void run(D*, const uint32_t*, const uint32_t*, const D*) {}
};
#define TL_HOST_MMA_SPEC(A, B, ACC, M, N, K, REG, FN)                                  \
  template <>                                                                          \
  struct MmaSync<A, B, ACC, M, N, K> {                                                 \
    static constexpr bool kSupported = true;                                           \
    template <class D>                                                                 \
    static void run(D* d, const uint32_t* a, const uint32_t* b, const D* c) {          \
      FN(reinterpret_cast<REG*>(d), a, b, reinterpret_cast<const REG*>(c));            \
    }                                                                                  \
  };
TL_HOST_MMA_SPEC(half_t, half_t, float, 16, 8, 16, float, mma_m16n8k16_f16_f32)
TL_HOST_MMA_SPEC(bfloat16_t, bfloat16_t, float, 16, 8, 16, float, mma_m16n8k16_bf16_f32)
TL_HOST_MMA_SPEC(half_t, half_t, half_t, 16, 8, 16, uint32_t, mma_m16n8k16_f16_f16)
TL_HOST_MMA_SPEC(int8_t, int8_t, int32_t, 16, 8, 32, int32_t, mma_m16n8k32_s8_s32)
TL_HOST_MMA_SPEC(int4x2_t, int4x2_t, int32_t, 16, 8, 64, int32_t, mma_m16n8k64_s4_s32)
TL_HOST_MMA_SPEC(uint4x2_t, uint4x2_t, int32_t, 16, 8, 64, int32_t, mma_m16n8k64_u4_s32)
TL_HOST_MMA_SPEC(int4x2_t, int4x2_t, int32_t, 16, 8, 32, int32_t, mma_m16n8k32_s4_s32)
TL_HOST_MMA_SPEC(uint4x2_t, uint4x2_t, int32_t, 16, 8, 32, int32_t, mma_m16n8k32_u4_s32)
TL_HOST_MMA_SPEC(float, float, float, 16, 8, 8, float, mma_m16n8k8_tf32_f32)
TL_HOST_MMA_SPEC(float8_e4m3_t, float8_e4m3_t, float, 16, 8, 32, float, mma_m16n8k32_e4m3e4m3_f32<>)
TL_HOST_MMA_SPEC(float8_e4m3_t, float8_e5m2_t, float, 16, 8, 32, float, mma_m16n8k32_e4m3e5m2_f32<>)
TL_HOST_MMA_SPEC(float8_e5m2_t, float8_e4m3_t, float, 16, 8, 32, float, mma_m16n8k32_e5m2e4m3_f32<>)
TL_HOST_MMA_SPEC(float8_e5m2_t, float8_e5m2_t, float, 16, 8, 32, float, mma_m16n8k32_e5m2e5m2_f32<>)
#undef TL_HOST_MMA_SPEC

template <class T>
struct values_per_byte { static constexpr int value = 1; };
template <>
struct values_per_byte<int4x2_t> { static constexpr int value = 2; };
template <>
struct values_per_byte<uint4x2_t> { static constexpr int value = 2; };
}  // namespace detail

template <class A, class B, class Acc, int M, int N, int K, class D>
inline void mma_sync(D* d, const uint32_t* a, const uint32_t* b, const D* c) {
  using Op = detail::MmaSync<A, B, Acc, M, N, K>;
  static_assert(Op::kSupported, "tl::mma_sync: no mma.sync for this (A, B, Acc, M, N, K)");
  Op::run(d, a, b, c);
}

}  // namespace tl
