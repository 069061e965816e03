// tl/gemm_sm80.h -- block-level GEMM on mma.sync + ldmatrix (sm_80+), and the shared-memory
// swizzle every codegen'd access of a swizzled tile uses.
//
// C (M x N, f32) is held in registers in the m16n8 accumulator layout tiled over a
// WARPS_M x WARPS_N warp grid (warp w -> wm = w % WARPS_M, wn = w / WARPS_M):
//   slot (mi * NI + ni) * 4 + r  ->  row wm*WM + mi*16 + lane/4 + 8*(r/2),
//                                    col wn*WN + ni*8 + (lane%4)*2 + r%2
// A is M x K (K x M when TA), B is K x N (N x K when TB), both row-major in shared memory
// with rows of LDA / LDB elements, swizzled in 16-byte chunks when SWA / SWB.
#pragma once

#include "common.h"
#include "ldmatrix.h"
#include "mma.h"

namespace tl {

// Element offset of (row, col) in a swizzled row-major tile with kRow elements per row.
// 16-byte chunk c of row r moves to chunk c ^ f(r) so 8 consecutive rows of one logical
// chunk hit 8 different bank groups (ldmatrix and 16-byte stores are conflict-free).
template <int kRow, int kBytes>
TL_DEVICE int swizzle_offset(int row, int col) {
  constexpr int kPer = 16 / kBytes;
  constexpr int kChunks = kRow / kPer;
  if constexpr (kRow % kPer != 0) {
    return row * kRow + col;
  } else if constexpr (kChunks % 8 == 0) {
    return row * kRow + (((col / kPer) ^ (row % 8)) * kPer) + col % kPer;
  } else if constexpr (kChunks == 4) {
    return row * kRow + (((col / kPer) ^ ((row / 2) % 4)) * kPer) + col % kPer;
  } else if constexpr (kChunks == 2) {
    return row * kRow + (((col / kPer) ^ ((row / 4) % 2)) * kPer) + col % kPer;
  } else {
    return row * kRow + col;
  }
}

template <int kRow, bool kSwizzle, class T>
TL_DEVICE const T* tile_ptr(const T* base, int row, int col) {
  if constexpr (kSwizzle) {
    return base + swizzle_offset<kRow, sizeof(T)>(row, col);
  } else {
    return base + row * kRow + col;
  }
}

template <int M, int N, int K, int WARPS_M, int WARPS_N, bool TA, bool TB, int LDA, int LDB, bool SWA,
          bool SWB, class T>
TL_DEVICE void gemm_ss(const T* A, const T* B, float* C) {
  static_assert(sizeof(T) == 2, "tl::gemm_ss: mma.sync path takes 16-bit inputs (half_t / bfloat16_t)");
  constexpr int WM = M / WARPS_M, WN = N / WARPS_N;
  constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(M % (WARPS_M * 16) == 0 && N % (WARPS_N * 8) == 0, "tl::gemm_ss: warp tile must be 16x8 multiples");
  static_assert(K % 16 == 0, "tl::gemm_ss: K must be a multiple of 16");
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
#pragma unroll
  for (int kk = 0; kk < K; kk += 16) {
    uint32_t a[MI][4];
    uint32_t b[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int m0 = wm * WM + mi * 16;
      if constexpr (!TA) {
        ldmatrix_x4(a[mi], tile_ptr<LDA, SWA>(A, m0 + lane % 16, kk + (lane / 16) * 8));
      } else {
        const int q = lane / 8;
        ldmatrix_x4_trans(a[mi], tile_ptr<LDA, SWA>(A, kk + (q / 2) * 8 + lane % 8, m0 + (q % 2) * 8));
      }
    }
#pragma unroll
    for (int ni = 0; ni < NI; ni += 2) {
      const int n0 = wn * WN + ni * 8;
      const int q = lane / 8;
      if (ni + 1 < NI) {
        uint32_t r[4];
        if constexpr (!TB) {
          ldmatrix_x4_trans(r, tile_ptr<LDB, SWB>(B, kk + (q % 2) * 8 + lane % 8, n0 + (q / 2) * 8));
        } else {
          ldmatrix_x4(r, tile_ptr<LDB, SWB>(B, n0 + (q / 2) * 8 + lane % 8, kk + (q % 2) * 8));
        }
        b[ni][0] = r[0];
        b[ni][1] = r[1];
        b[ni + 1][0] = r[2];
        b[ni + 1][1] = r[3];
      } else {
        if constexpr (!TB) {
          ldmatrix_x2_trans(b[ni], tile_ptr<LDB, SWB>(B, kk + lane % 16, n0));
        } else {
          ldmatrix_x2(b[ni], tile_ptr<LDB, SWB>(B, n0 + lane % 8, kk + ((lane / 8) % 2) * 8));
        }
      }
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        float* c = C + (mi * NI + ni) * 4;
        mma_sync<T, T, float, 16, 8, 16>(c, a[mi], b[ni], c);
      }
    }
  }
}

}  // namespace tl
