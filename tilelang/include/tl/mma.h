// tl/mma.h -- warp-level tensor-core MMA (mma.sync), sm_80+ (fp8: sm_89+).
//
// Every op computes D = A * B + C for one warp; A is row-major ("row"), B is
// column-major ("col"), operands live in 32-bit registers.  The codegen keeps
// fragments as small local arrays and passes pointers to them; all indices are
// compile-time constants after unrolling, so the arrays stay in registers.
//
// Lane naming used below: g = lane / 4 (group, 0..7), t = lane % 4 (0..3).
//
// m16n8k16, f16/bf16 inputs (A: 4 regs, B: 2 regs, C/D: 4 f32 or 2 f16x2):
//   A[16x16]  a[0] = (row g,   cols 2t, 2t+1)     a[1] = (row g+8, cols 2t, 2t+1)
//             a[2] = (row g,   cols 2t+8, 2t+9)   a[3] = (row g+8, cols 2t+8, 2t+9)
//   B[16x8]   b[0] = (rows 2t, 2t+1,   col g)     b[1] = (rows 2t+8, 2t+9, col g)
//   C[16x8]   c[0], c[1] = (row g,   cols 2t, 2t+1)
//             c[2], c[3] = (row g+8, cols 2t, 2t+1)
//   (f16 accumulators: c[0] packs the row-g pair, c[1] the row-g+8 pair.)
//   The lower-indexed element of a pair sits in the low 16 bits.
//
// m16n8k32, s8 or fp8 inputs (4 bytes per register, lowest k in the low byte):
//   A[16x32]  a[0] = (row g,   cols 4t..4t+3)     a[1] = (row g+8, cols 4t..4t+3)
//             a[2] = (row g,   cols 4t+16..+19)   a[3] = (row g+8, cols 4t+16..+19)
//   B[32x8]   b[0] = (rows 4t..4t+3, col g)       b[1] = (rows 4t+16..+19, col g)
//   C[16x8]   same as m16n8k16 (s32 or f32).
//
// m16n8k64, s4 / u4 inputs (8 nibbles per register, lowest k in the low nibble): byte for byte
//   the m16n8k32 layout above (a register's 4 bytes hold k 8t..8t+7 of its row / column), so an
//   int4 tile read as bytes (tl::int4x2_t / uint4x2_t, two values a byte) takes int8's addressing.
//
// m16n8k8, tf32 inputs (one fp32 bit pattern per register):
//   A[16x8]   a[0] = (g, t)  a[1] = (g+8, t)  a[2] = (g, t+4)  a[3] = (g+8, t+4)
//   B[8x8]    b[0] = (t, g)  b[1] = (t+4, g)
//   C[16x8]   same as m16n8k16.
#pragma once

#include "common.h"

namespace tl {

// ------------------------------------------------------------- f16 / bf16
TL_DEVICE void mma_m16n8k16_f16_f32(float* d, const uint32_t* a, const uint32_t* b,
                                    const float* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

TL_DEVICE void mma_m16n8k16_bf16_f32(float* d, const uint32_t* a, const uint32_t* b,
                                     const float* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// f16 accumulators: d and c are 2 registers of packed half2.
TL_DEVICE void mma_m16n8k16_f16_f16(uint32_t* d, const uint32_t* a, const uint32_t* b,
                                    const uint32_t* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]),
        "r"(c[1]));
}

// ------------------------------------------------------------- int8
TL_DEVICE void mma_m16n8k32_s8_s32(int32_t* d, const uint32_t* a, const uint32_t* b,
                                   const int32_t* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

// ------------------------------------------------------------- int4 / uint4 (two values a byte)
// A byte of a packed 4-bit integer tile: the even element in the low nibble. The element type
// of gemm templates over int4 / uint4 tiles, whose K, row lengths and offsets count bytes.
struct int4x2_t { uint8_t bits; };
struct uint4x2_t { uint8_t bits; };

TL_DEVICE void mma_m16n8k64_s4_s32(int32_t* d, const uint32_t* a, const uint32_t* b,
                                   const int32_t* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

TL_DEVICE void mma_m16n8k64_u4_s32(int32_t* d, const uint32_t* a, const uint32_t* b,
                                   const int32_t* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

// m16n8k32, s4 / u4 inputs: half the k64 shape (A: 2 regs, B: 1 reg); a register's 4 bytes hold
// k 8t..8t+7 of row g (a[0]) or g+8 (a[1]) / of column g (b[0]), the lowest k in the low nibble.
TL_DEVICE void mma_m16n8k32_s4_s32(int32_t* d, const uint32_t* a, const uint32_t* b,
                                   const int32_t* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32 "
      "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

TL_DEVICE void mma_m16n8k32_u4_s32(int32_t* d, const uint32_t* a, const uint32_t* b,
                                   const int32_t* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u4.u4.s32 "
      "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

// ------------------------------------------------------------- tf32
TL_DEVICE void mma_m16n8k8_tf32_f32(float* d, const uint32_t* a, const uint32_t* b,
                                    const float* c) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// Round an fp32 value to the tf32 bit pattern the tf32 mma expects.
TL_DEVICE uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// ------------------------------------------------------------- fp8 (sm_89+)
// NOTE: native on sm_89 (Ada) only.  On sm_90 ptxas emulates it (F2FP
// conversions to f16 + HMMA), so Hopper fp8 GEMMs should use wgmma.
#define TL_MMA_FP8(NAME, ATY, BTY)                                                     \
  template <int kArchGuard = 0>                                                        \
  TL_DEVICE void NAME(float* d, const uint32_t* a, const uint32_t* b, const float* c) { \
    static_assert(TL_ARCH_SM89 || detail::always_false_int<kArchGuard>::value,         \
                  "fp8 mma.sync needs sm_89 or newer");                                \
    TL_MMA_FP8_ASM(ATY, BTY)                                                           \
  }

#if TL_ARCH_SM89
#define TL_MMA_FP8_ASM(ATY, BTY)                                                          \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." ATY "." BTY ".f32 "               \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"    \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),        \
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
#define TL_MMA_FP8_ASM(ATY, BTY)
#endif

TL_MMA_FP8(mma_m16n8k32_e4m3e4m3_f32, "e4m3", "e4m3")
TL_MMA_FP8(mma_m16n8k32_e4m3e5m2_f32, "e4m3", "e5m2")
TL_MMA_FP8(mma_m16n8k32_e5m2e4m3_f32, "e5m2", "e4m3")
TL_MMA_FP8(mma_m16n8k32_e5m2e5m2_f32, "e5m2", "e5m2")
#undef TL_MMA_FP8
#undef TL_MMA_FP8_ASM

// ------------------------------------------------------------- dispatcher
// tl::mma_sync<AType, BType, AccType, M, N, K>(d, a, b, c): the spelling the
// codegen emits.  d/c point at the accumulator fragment: float (f32), int32_t
// (s32) or uint32_t / half_t pairs (f16 accumulators).
namespace detail {
template <class A, class B, class Acc, int M, int N, int K>
struct MmaSync {
  static constexpr bool kSupported = false;
  template <class D>
  static TL_DEVICE void run(D*, const uint32_t*, const uint32_t*, const D*) {}
};
#define TL_MMA_SPEC(A, B, ACC, M, N, K, REG, FN)                                        \
  template <>                                                                           \
  struct MmaSync<A, B, ACC, M, N, K> {                                                  \
    static constexpr bool kSupported = true;                                            \
    template <class D>                                                                  \
    static TL_DEVICE void run(D* d, const uint32_t* a, const uint32_t* b, const D* c) { \
      FN(reinterpret_cast<REG*>(d), a, b, reinterpret_cast<const REG*>(c));             \
    }                                                                                   \
  };
TL_MMA_SPEC(half_t, half_t, float, 16, 8, 16, float, mma_m16n8k16_f16_f32)
TL_MMA_SPEC(bfloat16_t, bfloat16_t, float, 16, 8, 16, float, mma_m16n8k16_bf16_f32)
TL_MMA_SPEC(half_t, half_t, half_t, 16, 8, 16, uint32_t, mma_m16n8k16_f16_f16)
TL_MMA_SPEC(int8_t, int8_t, int32_t, 16, 8, 32, int32_t, mma_m16n8k32_s8_s32)
TL_MMA_SPEC(int4x2_t, int4x2_t, int32_t, 16, 8, 64, int32_t, mma_m16n8k64_s4_s32)
TL_MMA_SPEC(uint4x2_t, uint4x2_t, int32_t, 16, 8, 64, int32_t, mma_m16n8k64_u4_s32)
TL_MMA_SPEC(int4x2_t, int4x2_t, int32_t, 16, 8, 32, int32_t, mma_m16n8k32_s4_s32)
TL_MMA_SPEC(uint4x2_t, uint4x2_t, int32_t, 16, 8, 32, int32_t, mma_m16n8k32_u4_s32)
TL_MMA_SPEC(float, float, float, 16, 8, 8, float, mma_m16n8k8_tf32_f32)
TL_MMA_SPEC(float8_e4m3_t, float8_e4m3_t, float, 16, 8, 32, float, mma_m16n8k32_e4m3e4m3_f32<>)
TL_MMA_SPEC(float8_e4m3_t, float8_e5m2_t, float, 16, 8, 32, float, mma_m16n8k32_e4m3e5m2_f32<>)
TL_MMA_SPEC(float8_e5m2_t, float8_e4m3_t, float, 16, 8, 32, float, mma_m16n8k32_e5m2e4m3_f32<>)
TL_MMA_SPEC(float8_e5m2_t, float8_e5m2_t, float, 16, 8, 32, float, mma_m16n8k32_e5m2e5m2_f32<>)
#undef TL_MMA_SPEC

// Values one byte of T holds: 2 for the packed 4-bit integer types, else 1.
template <class T>
struct values_per_byte { static constexpr int value = 1; };
template <>
struct values_per_byte<int4x2_t> { static constexpr int value = 2; };
template <>
struct values_per_byte<uint4x2_t> { static constexpr int value = 2; };
}  // namespace detail

template <class A, class B, class Acc, int M, int N, int K, class D>
TL_DEVICE void mma_sync(D* d, const uint32_t* a, const uint32_t* b, const D* c) {
  using Op = detail::MmaSync<A, B, Acc, M, N, K>;
  static_assert(Op::kSupported,
                "tl::mma_sync: no mma.sync for this (A, B, Acc, M, N, K); supported: "
                "f16/bf16 m16n8k16 -> f32, f16 m16n8k16 -> f16, s8 m16n8k32 -> s32, s4/u4 m16n8k32 / m16n8k64 -> s32, "
                "tf32 (A=B=float) m16n8k8 -> f32, fp8 m16n8k32 -> f32");
  Op::run(d, a, b, c);
}

}  // namespace tl
