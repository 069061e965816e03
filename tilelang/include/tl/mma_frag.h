// tl/mma_frag.h -- ldmatrix and mma.sync on per-thread register arrays of any element type.
//
// The per-thread form of the tensor-core building blocks that T.ptx_ldmatrix / T.ptx_mma and
// tilelang.cuda.intrinsics' TensorCoreIntrinEmitter emit.  Fragments are plain local arrays
// (half_t A[8], float C[4] ...) with no 4-byte alignment promise, so values move through
// memcpy into 32-bit registers; at compile-time offsets the compiler turns that into
// register moves.  Element order is the one in mma.h: a 32-bit register packs consecutive
// fragment elements, lowest index in the low bits.
#pragma once

#include "common.h"
#include "ldmatrix.h"
#include "mma.h"

namespace tl {

// ldmatrix.x{Num}[.trans] of b16 (8x8 matrices): this lane passes the address of one row; its
// Num registers land in dst (2 * Num bytes of 16-bit data, or 4 * Num bytes of 8-bit data).
template <int Num, bool Trans>
TL_DEVICE void ldmatrix_frag(void* dst, const void* smem) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "tl::ldmatrix_frag: Num must be 1, 2 or 4");
  uint32_t r[Num];
  ldmatrix<Num, Trans>(r, smem);
  memcpy(dst, r, sizeof(r));
}
// The same from a 32-bit shared-window byte address (smem_addr(tile) + byte offset).
template <int Num, bool Trans>
TL_DEVICE void ldmatrix_frag(void* dst, uint32_t smem) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "tl::ldmatrix_frag: Num must be 1, 2 or 4");
  uint32_t r[Num];
  ldmatrix<Num, Trans>(r, smem);
  memcpy(dst, r, sizeof(r));
}

// c += a * b for one m{M}n8k{K} mma.sync: a holds M*K/32 and b K*N/32 elements of this lane,
// c M*N/32 accumulators, in the lane layouts of mma.h.
template <class A, class B, class Acc, int M, int N, int K, class CE, class AE, class BE>
TL_DEVICE void mma_frag(CE* c, const AE* a, const BE* b) {
  // a byte of int4x2_t / uint4x2_t holds two values: the fragment has half as many bytes
  constexpr int kA = M * K * int(sizeof(AE)) / (128 * detail::values_per_byte<A>::value);
  constexpr int kB = K * N * int(sizeof(BE)) / (128 * detail::values_per_byte<B>::value), kC = M * N / 32;
  static_assert(sizeof(AE) == sizeof(A) && sizeof(BE) == sizeof(B) && sizeof(CE) == sizeof(Acc),
                "tl::mma_frag: fragment element types do not match the mma operand types");
  static_assert(kA >= 1 && kB >= 1, "tl::mma_frag: fragment smaller than one register");
  uint32_t ra[kA], rb[kB];
  alignas(16) Acc acc[kC];
  memcpy(ra, a, sizeof(ra));
  memcpy(rb, b, sizeof(rb));
  memcpy(acc, c, sizeof(acc));
  mma_sync<A, B, Acc, M, N, K>(acc, ra, rb, acc);
  memcpy(c, acc, sizeof(acc));
}

}  // namespace tl
