// tl/gemm_sm80.h -- block-level GEMM on mma.sync + ldmatrix (sm_80+), and the shared-memory
// swizzle every codegen'd access of a swizzled tile uses.
//
// C (M x N, f32; s32 for int8 / int4 inputs) is held in registers in the m16n8 accumulator layout tiled over a
// WARPS_M x WARPS_N warp grid (warp w -> wm = w % WARPS_M, wn = w / WARPS_M):
//   slot (mi * NI + ni) * 4 + r  ->  row wm*WM + mi*16 + lane/4 + 8*(r/2),
//                                    col wn*WN + ni*8 + (lane%4)*2 + r%2
// A is M x K (K x M when TA), B is K x N (N x K when TB), both row-major in shared memory
// with rows of LDA / LDB elements, swizzled in 16-byte chunks when SWA / SWB.
// int4 / uint4 tiles are bytes of two values (T = tl::int4x2_t / uint4x2_t, the even k in the low
// nibble): K, LDA, LDB and every offset count bytes, addressed as int8's are, and each 32-byte K
// slice is one m16n8k64 mma. The tile pointers are untyped (an int4 tile is an int8_t array).
#pragma once

#include "common.h"
#include "cp_async.h"
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

// swizzle_offset's value with the XOR confined to the column's 8-chunk span (kChunks % 8 == 0):
// (c & ~(8 kPer - 1)) + ((c & (8 kPer - 1)) ^ (r % 8) kPer) for c >= 0. Element accesses of a
// gemm tile use it: where the column is a per-thread part below one chunk plus a constant
// (unrolled `x[i, jj * 4 + j]`), the first term is an immediate and the second takes 8 values
// a thread, kept in registers (mhc_pre's sum of squares over its swizzled tf32 A tile).
template <int kRow, int kBytes>
TL_DEVICE int swizzle_span_offset(int row, int col) {
  constexpr int kPer = 16 / kBytes;
  constexpr int kChunks = kRow / kPer;
  if constexpr (kRow % kPer == 0 && kChunks % 8 == 0) {
    constexpr int kSpan = 8 * kPer;
    return row * kRow + (col & ~(kSpan - 1)) + ((col & (kSpan - 1)) ^ ((row & 7) * kPer));
  } else {
    return swizzle_offset<kRow, kBytes>(row, col);
  }
}

// swizzle_offset's value as one XOR on the column: ((c / kPer) ^ s) * kPer + c % kPer == c ^ (s * kPer)
// for c >= 0. Element accesses of a staging tile use it (transform/cuda/staging_swizzle.py): a
// pair store's column is a per-thread part plus a per-slot constant, and 3 instructions a store
// beat swizzle_offset's 7; the gemm templates keep swizzle_offset (ptxas schedules their ldmatrix
// address math better from it).
template <int kRow, int kBytes>
TL_DEVICE int swizzle_xor_offset(int row, int col) {
  constexpr int kPer = 16 / kBytes;
  constexpr int kChunks = kRow / kPer;
  if constexpr (kRow % kPer != 0) {
    return row * kRow + col;
  } else if constexpr (kChunks % 8 == 0) {
    return row * kRow + (col ^ ((row & 7) * kPer));
  } else if constexpr (kChunks == 4) {
    return row * kRow + (col ^ (((row >> 1) & 3) * kPer));
  } else if constexpr (kChunks == 2) {
    return row * kRow + (col ^ (((row >> 2) & 1) * kPer));
  } else {
    return row * kRow + col;
  }
}

// Offset of (k, n) in a panel tile with kRows rows of 128-byte panels (the layout TMA writes for
// rows longer than 128 bytes): 64 16-bit elements a panel row, or 32 for kBytes = 4.
template <int kRows, int kBytes = 2>
TL_DEVICE int panel_offset(int k, int n) {
  static_assert(kBytes == 2 || kBytes == 4, "tl::panel_offset: panels of 16-bit or 32-bit elements");
  constexpr int kW = 128 / kBytes;
  return (n / kW) * (kRows * kW) + swizzle_offset<kW, kBytes>(k, n % kW);
}

// panel_offset's value for k, n >= 0 (every element index of a tile) in shifts, masks and one XOR:
// no signed division, and the slot constants of an unrolled element loop stay additive.
template <int kRows, int kBytes = 2>
TL_DEVICE int panel_xor_offset(int k, int n) {
  static_assert(kBytes == 2 || kBytes == 4, "tl::panel_xor_offset: panels of 16-bit or 32-bit elements");
  constexpr int kW = 128 / kBytes, kShift = kBytes == 2 ? 6 : 5, kPer = 16 / kBytes;
  return (n >> kShift) * (kRows * kW) + k * kW + ((n & (kW - 1)) ^ ((k & 7) * kPer));
}


#ifndef TL_LDSM_LANE_OFFSETS
#define TL_LDSM_LANE_OFFSETS 1
#endif

// One warp's share of a block GEMM step: fragments of one K slice and the mmas on them. 16-bit
// inputs take m16n8k16 (a K slice of 16); float inputs are tf32 and take m16n8k8 (a K slice of 8):
// the same bytes per row slice, so the ldmatrix addressing is shared, except that ldmatrix's
// transpose moves 16-bit elements: a tf32 tile stored K-major for the mma (A transposed, B not)
// is loaded with 32-bit shared loads instead.
// PRA / PRB > 0: that tile is kept in 128-byte panels of PRA / PRB rows (tl::panel_offset), the
// layout a wgmma operand of 16-bit rows longer than 128 B has, when one tile feeds both paths, and
// the layout TMA writes such rows in (16-bit, or tf32 in 32-column panels).
template <int M, int N, int WARPS_M, int WARPS_N, bool TA, bool TB, int LDA, int LDB, bool SWA, bool SWB, class T,
          int PRA = 0, int PRB = 0>
struct MmaWarpTile {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                "tl::gemm_ss: mma.sync path takes 8-bit (int8), 16-bit (half_t / bfloat16_t) or tf32 (float) inputs");
  static_assert(sizeof(T) != 1 || (!TA && TB), "tl::gemm_ss: 8-bit operands must both be K-major (A M x K, B N x K)");
  static constexpr int KS = 32 / sizeof(T);  // K slice of one mma: 32 (8-bit), 16 (16-bit), 8 (tf32)
  static constexpr int KM = KS * detail::values_per_byte<T>::value;  // the mma's K: 64 for int4 bytes
  static constexpr int E8 = KS / 2;          // elements in 16 bytes
  static constexpr int WM = M / WARPS_M, WN = N / WARPS_N;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static constexpr int kWords = MI * 4 + NI * 2;  // 32-bit fragment registers per K slice
  static_assert(M % (WARPS_M * 16) == 0 && N % (WARPS_N * 8) == 0, "tl::gemm_ss: warp tile must be 16x8 multiples");

  // Byte offset of (row, col) in a tile; depends on the lane only, so it is computed once.
  template <int kRow, bool kSwizzle, int kPanelRows = 0>
  TL_DEVICE static uint32_t off(int row, int col) {
    if constexpr (kPanelRows > 0) {
      static_assert((sizeof(T) == 2 || sizeof(T) == 4) && kRow % (128 / sizeof(T)) == 0,
                    "tl::gemm_ss: panel tiles have rows of whole 128-byte panels of 16-bit or tf32 elements");
      return static_cast<uint32_t>(panel_offset<kPanelRows, sizeof(T)>(row, col)) * sizeof(T);
    }
    return static_cast<uint32_t>(kSwizzle ? swizzle_offset<kRow, sizeof(T)>(row, col) : row * kRow + col) * sizeof(T);
  }
  // off(row, c0 + kk) for the K-sliced ldmatrix reads of a K-contiguous tile: c0 is 0 or E8 (chunk
  // 0 or 1 of the slice) and kk a multiple of KS (an even chunk), so the swizzle's chunk XOR splits as
  // ((c0 / E8) ^ (row & 7) ^ (kk / E8 & 7)) + (kk / E8 & ~7). Over an unrolled K loop that is 4 per-lane
  // terms (kk / E8 & 7 in {0, 2, 4, 6}) ptxas keeps in registers, and every ldmatrix address is one
  // of them plus an immediate; swizzle_offset(row, c0 + kk) costs ~3 integer instructions a slice.
  // Codegen defines TL_LDSM_LANE_OFFSETS 0 under the pass_config `tl.disable_ldsm_lane_offsets`.
  template <int kRow, bool kSwizzle, int kPanelRows = 0>
  TL_DEVICE static uint32_t koff(int row, int c0, int kk) {
    constexpr int kChunks = kRow / E8;
    if constexpr (TL_LDSM_LANE_OFFSETS && kSwizzle && kPanelRows == 0 && kRow % E8 == 0 && kChunks % 8 == 0) {
      const int d = kk / E8;
      const int s = ((c0 / E8) ^ (row & 7)) ^ (d & 7);
      return static_cast<uint32_t>(row * kRow + ((d & ~7) + s) * E8) * sizeof(T);
    } else {
      return off<kRow, kSwizzle, kPanelRows>(row, c0 + kk);
    }
  }
  // Elements between rows r and r + 1: a panel row holds 128 bytes.
  static constexpr int RSA = PRA > 0 ? 128 / sizeof(T) : LDA, RSB = PRB > 0 ? 128 / sizeof(T) : LDB;

  TL_DEVICE static uint32_t lds32(uint32_t addr) {
#ifdef TL_HOST_EMU  // tilelang/testing/host_cuda runs this header on the host
    return tl_host_lds32(addr);
#else
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
    return v;
#endif
  }

  // f[0 .. 4*MI) <- A rows of this warp, f[4*MI ..) <- B columns, K slice [kk, kk + KS).
  // A and B are the tiles' shared-window byte addresses (smem_addr).
  // NOTE: swizzle_offset(r + 8k, c) == swizzle_offset(r, c) + 8k * kRow (every swizzle repeats
  // every 8 rows), so a K slice that moves rows (kk a multiple of 8) is an immediate offset.
  TL_DEVICE static void load(uint32_t* f, uint32_t A, uint32_t B, int kk) {
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % (WARPS_M * WARPS_N);  // T.ws: warps of one warp-group range
    const int wm = warp % WARPS_M;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int m0 = wm * WM + mi * 16;
      if constexpr (!TA) {
        ldmatrix<4, false>(f + mi * 4, A + koff<LDA, SWA, PRA>(wm * WM + lane % 16, (lane / 16) * E8, kk) +
                                               mi * 16 * RSA * sizeof(T));
      } else if constexpr (sizeof(T) == 2) {
        const int q = lane / 8;
        ldmatrix<4, true>(f + mi * 4, A + off<LDA, SWA, PRA>((q / 2) * 8 + lane % 8, m0 + (q % 2) * 8) + kk * RSA * sizeof(T));
      } else {  // tf32, A stored K x M: a0 (m g, k t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          f[mi * 4 + r] = lds32(A + off<LDA, SWA>(kk + t + (r / 2) * 4, m0 + g + (r % 2) * 8));
        }
      }
    }
    load_b(f + MI * 4, B, kk);
  }

  // fb[0 .. 2*NI) <- B columns of this warp, K slice [kk, kk + KS).
  TL_DEVICE static void load_b(uint32_t* fb, uint32_t B, int kk) {
    const int lane = threadIdx.x % 32;
    const int wn = ((threadIdx.x / 32) % (WARPS_M * WARPS_N)) / WARPS_M;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int ni = 0; ni < NI; ni += 2) {
      const int n0 = wn * WN + ni * 8;
      const int q = lane / 8;
      if constexpr (sizeof(T) == 4 && !TB) {  // tf32, B stored K x N: b0 (k t, n g), b1 (t + 4, g)
#pragma unroll
        for (int h = 0; h < 2 && ni + h < NI; ++h) {
          fb[(ni + h) * 2] = lds32(B + off<LDB, SWB>(kk + t, n0 + h * 8 + g));
          fb[(ni + h) * 2 + 1] = lds32(B + off<LDB, SWB>(kk + t + 4, n0 + h * 8 + g));
        }
      } else if (ni + 1 < NI) {
        if constexpr (!TB) {
          ldmatrix<4, true>(fb + ni * 2, B + off<LDB, SWB, PRB>((q % 2) * 8 + lane % 8, n0 + (q / 2) * 8) + kk * RSB * sizeof(T));
        } else {
          ldmatrix<4, false>(fb + ni * 2, B + koff<LDB, SWB, PRB>(n0 + (q / 2) * 8 + lane % 8, (q % 2) * E8, kk));
        }
      } else {
        if constexpr (!TB) {
          ldmatrix<2, true>(fb + ni * 2, B + off<LDB, SWB, PRB>(lane % 16, n0) + kk * RSB * sizeof(T));
        } else {
          ldmatrix<2, false>(fb + ni * 2, B + koff<LDB, SWB, PRB>(n0 + lane % 8, ((lane / 8) % 2) * E8, kk));
        }
      }
    }
  }

  // Acc: float (16-bit and tf32 inputs), int32_t (int8: m16n8k32.s32.s8.s8; int4: m16n8k64.s32.s4.s4)
  template <class Acc>
  TL_DEVICE static void mma(const uint32_t* f, Acc* C) {
    const uint32_t* fb = f + MI * 4;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        Acc* c = C + (mi * NI + ni) * 4;
        mma_sync<T, T, Acc, 16, 8, KM>(c, f + mi * 4, fb + ni * 2, c);
      }
    }
  }
};

// A warp with at most 2 mma tiles and a long K runs that many dependent mma chains, each mma
// waiting for the previous one's result (mhc_pre's gemm_sqrsum: 16 x 16 per warp, 32 tf32 K
// slices: 2 chains of 32). Odd K slices then go into a second set of accumulators, added into C
// after the last slice: twice the chains, half their length (the sum's order changes, as a
// different warp split would). Codegen defines TL_MMA_SPLIT_CHAINS 0 under the pass_config
// `tl.disable_mma_split_chains`.
#ifndef TL_MMA_SPLIT_CHAINS
#define TL_MMA_SPLIT_CHAINS 1
#endif

template <int M, int N, int K, int WARPS_M, int WARPS_N, bool TA, bool TB, int LDA, int LDB, bool SWA,
          bool SWB, class T, int PRA = 0, int PRB = 0, class Acc>
TL_DEVICE void gemm_ss(const void* A, const void* B, Acc* C) {
  using W = MmaWarpTile<M, N, WARPS_M, WARPS_N, TA, TB, LDA, LDB, SWA, SWB, T, PRA, PRB>;
  static_assert(K % W::KS == 0,
                "tl::gemm_ss: K must be a multiple of the mma's K (16; 8 for tf32, 32 for int8, 32 bytes for int4)");
  constexpr int kSlices = K / W::KS, kAcc = W::MI * W::NI * 4;
  constexpr bool kSplit = TL_MMA_SPLIT_CHAINS && W::MI * W::NI <= 2 && kSlices >= 8 && kSlices % 2 == 0 &&
                          (detail::is_same<Acc, float>::value || detail::is_same<Acc, int32_t>::value);
  if constexpr (kSplit) {
    Acc C2[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) C2[i] = Acc(0);
#pragma unroll
    for (int kk = 0; kk < K; kk += 2 * W::KS) {
      uint32_t f[W::kWords], g[W::kWords];
      W::load(f, smem_addr(A), smem_addr(B), kk);
      W::load(g, smem_addr(A), smem_addr(B), kk + W::KS);
      W::mma(f, C);
      W::mma(g, C2);
    }
#pragma unroll
    for (int i = 0; i < kAcc; ++i) C[i] += C2[i];
  } else {
#pragma unroll
    for (int kk = 0; kk < K; kk += W::KS) {
      uint32_t f[W::kWords];
      W::load(f, smem_addr(A), smem_addr(B), kk);
      W::mma(f, C);
    }
  }
}

// A from registers, B from shared memory as in gemm_ss. Chains split as in gemm_ss.
// tf32: an M x K tile in the mma.sync A layout (layout/operand_fragments.py MmaAFragment: the 4
// words of row block mi, K slice ks at A[(ks * MI + mi) * 4]; every warp of a row block holds its
// rows). The mma reads the tf32 part of the words as they are (gemm_ss's ldmatrix does the same).
// 16-bit: an M x K tile in the m16n8 accumulator layout over WARPS_M x 1 warps (layout/fragment.py
// MmaAccFragment((M, K), WARPS_M, 1), gemm_paths.mma_rs16_ok): K slice ks of row block mi is the
// accumulator atoms 2 ks, 2 ks + 1, whose 8 halves at A[(mi * K / 8 + 2 ks) * 4] are the m16n8k16's
// a0..a7 in order ((g, 2t..2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..)): 4 words as they are.
template <int M, int N, int K, int WARPS_M, int WARPS_N, bool TB, int LDB, bool SWB, class T, int PRB = 0,
          class Acc>
TL_DEVICE void gemm_rs(const T* A, const T* B, Acc* C) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 2,
                "tl::gemm_rs: A from registers takes tf32 (float) or 16-bit (half_t / bfloat16_t) tiles");
  static_assert(sizeof(T) == 4 || WARPS_N == 1,
                "tl::gemm_rs: a 16-bit register A is an accumulator layout over WARPS_M x 1 warps (whole rows a warp)");
  using W = MmaWarpTile<M, N, WARPS_M, WARPS_N, false, TB, K, LDB, false, SWB, T, 0, PRB>;
  static_assert(K % W::KS == 0, "tl::gemm_rs: K must be a multiple of the mma's K (8 for tf32, 16 for 16-bit)");
  constexpr int kSlices = K / W::KS, kAcc = W::MI * W::NI * 4, kA = W::MI * 4;
  constexpr bool kSplit = TL_MMA_SPLIT_CHAINS && W::MI * W::NI <= 2 && kSlices >= 8 && kSlices % 2 == 0 &&
                          (detail::is_same<Acc, float>::value || detail::is_same<Acc, int32_t>::value);
  const uint32_t b = smem_addr(B);
  const uint32_t* a32 = reinterpret_cast<const uint32_t*>(A);
  Acc C2[kSplit ? kAcc : 1];
#pragma unroll
  for (int i = 0; i < (kSplit ? kAcc : 1); ++i) C2[i] = Acc(0);
#pragma unroll
  for (int ks = 0; ks < kSlices; ++ks) {
    uint32_t f[W::kWords];
    if constexpr (sizeof(T) == 4) {
#pragma unroll
      for (int i = 0; i < kA; ++i) f[i] = __float_as_uint(A[ks * kA + i]);
    } else {
#pragma unroll
      for (int mi = 0; mi < W::MI; ++mi) {
#pragma unroll
        for (int j = 0; j < 4; ++j) f[mi * 4 + j] = a32[(mi * (K / 8) + 2 * ks) * 2 + j];
      }
    }
    W::load_b(f + kA, b, ks * W::KS);
    W::mma(f, kSplit && ks % 2 ? C2 : C);
  }
  if constexpr (kSplit) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) C[i] += C2[i];
  }
}

// The mainloop form of gemm_ss inside a cp.async pipeline (codegen emits it for a pipelined
// loop whose body is the stage copies and this one gemm). Fragments are double-buffered in
// registers: each K slice's ldmatrix overlaps the previous slice's mmas, and the last slice
// waits for the next stage (cp.async.wait_group<kWait> + barrier) and loads its first slice,
// so the barrier and ldmatrix latency of a stage change hide behind mma work. The loop then
// needs no barrier at its top: every read of the stage a refill overwrites precedes the
// barrier in this call.
template <int M, int N, int K, int WARPS_M, int WARPS_N, bool TA, bool TB, int LDA, int LDB, bool SWA,
          bool SWB, class T>
struct GemmPipeState {
  uint32_t f[2][MmaWarpTile<M, N, WARPS_M, WARPS_N, TA, TB, LDA, LDB, SWA, SWB, T>::kWords];
};

// Before the loop, once the first stage is visible: its first K slice into slot 0.
template <int M, int N, int K, int WARPS_M, int WARPS_N, bool TA, bool TB, int LDA, int LDB, bool SWA,
          bool SWB, class T>
TL_DEVICE void gemm_ss_preload(const void* A, const void* B,
                               GemmPipeState<M, N, K, WARPS_M, WARPS_N, TA, TB, LDA, LDB, SWA, SWB, T>& st) {
  MmaWarpTile<M, N, WARPS_M, WARPS_N, TA, TB, LDA, LDB, SWA, SWB, T>::load(st.f[0], smem_addr(A), smem_addr(B), 0);
}

template <int M, int N, int K, int WARPS_M, int WARPS_N, bool TA, bool TB, int LDA, int LDB, bool SWA,
          bool SWB, class T, int kWait, class Acc>
TL_DEVICE void gemm_ss_pipe(const void* A, const void* B, Acc* C, const void* A_next, const void* B_next,
                            GemmPipeState<M, N, K, WARPS_M, WARPS_N, TA, TB, LDA, LDB, SWA, SWB, T>& st) {
  using W = MmaWarpTile<M, N, WARPS_M, WARPS_N, TA, TB, LDA, LDB, SWA, SWB, T>;
  constexpr int KS = K / W::KS;
  static_assert(K % (2 * W::KS) == 0, "tl::gemm_ss_pipe: an even number of K slices (slot 0 starts each stage)");
  const uint32_t a = smem_addr(A), b = smem_addr(B);
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    if (ks + 1 < KS) {
      W::load(st.f[(ks + 1) % 2], a, b, (ks + 1) * W::KS);
    } else {
      cp_async_wait<kWait>();
      __syncthreads();
      W::load(st.f[0], smem_addr(A_next), smem_addr(B_next), 0);
    }
    W::mma(st.f[ks % 2], C);
  }
}

}  // namespace tl
