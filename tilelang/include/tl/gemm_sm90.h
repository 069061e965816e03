// tl/gemm_sm90.h -- block-level GEMM on Hopper wgmma (sm_90a), operands in shared memory.
//
// Shared tiles are the ones our codegen writes (every access goes through the same index
// functions), so their layouts are exactly what the descriptors below describe:
//   K-major tile (A as M x K, B as N x K when TB): rows of kRowBytes (32, 64 or 128 B),
//     16-byte chunks XOR-swizzled as tl::swizzle_offset -- the hardware's 32/64/128B swizzle.
//     Descriptor: SBO = 8 rows * kRowBytes, LBO unused; one k16 step = +32 B. Longer 16-bit
//     rows (k * 128 B) are kept as 64-column panels (tl::panel_offset), see kmajor_desc.
//   MN-major B tile (K x N, N contiguous, !TB): 64-element column panels, each K rows of
//     128 B with the 128B swizzle (tl::panel_offset). Descriptor: LBO = panel stride
//     (K * 128 B), SBO = 8 rows * 128 B; one k16 step = +16 rows = +2048 B. An M-major A
//     (K x M, TA, 16-bit) is the same layout, one panel per 64 rows of C, read with tnspA.
// C (M x N f32) in registers, warpgroup wg -> (wgm = wg % WG_M, wgn = wg / WG_M), each
// owning (M/WG_M) x (N/WG_N); slot (mi * N_wg/8 + ni) * 4 + r holds
//   row wgm*M_wg + mi*64 + warp*16 + lane/4 + 8*(r/2), col wgn*N_wg + ni*8 + 2*(lane%4) + r%2.
#pragma once

#include "common.h"
#include "gemm_sm80.h"
#include "sync.h"
#include "wgmma.h"

namespace tl {


// Descriptor of the kk-th 32-byte K slice of rows r0.. of a K-major tile with kRows rows:
// rows of kRowBytes = 32, 64 or 128 B in one swizzle span each, or (16-bit, kRowBytes a multiple
// of 128) 64-element column panels of kRows rows of 128 B -- tl::panel_offset<kRows>(row, k) --
// where slice kk lies in panel kk / 4 at byte kk % 4 * 32 of each row.
template <int kRowBytes, int kRows, class T>
TL_DEVICE uint64_t kmajor_desc(const T* tile, int r0, int kk) {
  static_assert(kRowBytes == 32 || kRowBytes == 64 || kRowBytes == 128 || (sizeof(T) == 2 && kRowBytes % 128 == 0),
                "tl::gemm_*_sm90: K-major tile rows must be 32, 64 or 128 bytes, or 16-bit rows of k * 128 bytes");
  if constexpr (kRowBytes <= 128) {
    return wgmma_desc_advance(make_wgmma_desc<kRowBytes>(tile + r0 * (kRowBytes / sizeof(T)), 16, 8 * kRowBytes),
                              kk * 32);
  } else {
    constexpr int kPanel = 128 / sizeof(T);  // elements of a panel row
    return wgmma_desc_advance(make_wgmma_desc<128>(tile + (kk / 4) * (kRows * kPanel) + r0 * kPanel, 16, 1024),
                              (kk % 4) * 32);
  }
}

// clear: C = A * B instead of C += A * B -- the first k-step's wgmmas run with scale-d = 0 and
// overwrite every accumulator register of the thread, so C need not be zero-filled before.
// kWait: wgmma batches left in flight on return (0: C is final; 1: the caller overlaps this
// batch with the next one and must not reuse this call's shared tiles until a later wait;
// -1: no wait at all, T.wgmma_gemm -- the caller's tl::warpgroup_wait makes C final).
// TC: the accumulator, float (fp16 / bf16 / fp8 inputs), half_t (fp16 inputs) or int32_t
// (int8 inputs). Element l of a thread is in the same place for all three: register l, or for
// half_t the half l % 2 of 32-bit register l / 2.
template <int kElems, class TC>
TL_DEVICE void fence_accumulator(TC* C) {
  if constexpr (sizeof(TC) == 2) {
    warpgroup_fence_operand<kElems / 2>(reinterpret_cast<uint32_t*>(C));
  } else {
    warpgroup_fence_operand<kElems>(C);
  }
}

// clear: C's old values are dead before the batch (warpgroup_undef_operand); TL_WGMMA_CLEAR_UNDEF 0
// (pass config tl.disable_wgmma_clear_undef) keeps them.
#ifndef TL_WGMMA_CLEAR_UNDEF
#define TL_WGMMA_CLEAR_UNDEF 1
#endif
template <int kElems, class TC>
TL_DEVICE void undef_accumulator(TC* C) {
#if TL_WGMMA_CLEAR_UNDEF
  if constexpr (sizeof(TC) == 2) {
    warpgroup_undef_operand<kElems / 2>(reinterpret_cast<uint32_t*>(C));
  } else {
    warpgroup_undef_operand<kElems>(C);
  }
#endif
}

// row_block >= 0: only that 64-row block of each warpgroup's rows (its k-steps, its wait, its registers
// fenced), for a loop body split by row blocks (transform/cuda/row_block_fission.py); -1: all of them.
template <int M, int N, int K, int WG_M, int WG_N, bool TB, int LDA, int LDB, class T, int kWait = 0,
          class TC = float, bool TA = false>
TL_DEVICE void gemm_ss_sm90(const T* A, const T* B, TC* C, bool clear = false, int row_block = -1) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "tl::gemm_ss_sm90: 16-bit or 8-bit (fp8, int8) inputs");
  static_assert(sizeof(T) == 2 || TB, "tl::gemm_ss_sm90: 8-bit operands must both be K-major (transpose_B=True)");
  static_assert(detail::is_same<TC, int32_t>::value == detail::is_same<T, int8_t>::value,
                "tl::gemm_ss_sm90: int8 inputs accumulate in int32_t, the others in float (or half_t)");
  static_assert(!detail::is_same<TC, half_t>::value || detail::is_same<T, half_t>::value,
                "tl::gemm_ss_sm90: half_t accumulators need half_t inputs");
  constexpr int M_WG = M / WG_M, N_WG = N / WG_N, MI = M_WG / 64;
  constexpr int kStep = 32 / sizeof(T);  // one wgmma consumes 32 bytes of K
  static_assert(M % (WG_M * 64) == 0, "tl::gemm_ss_sm90: each warpgroup needs a multiple of 64 rows");
  static_assert(K % kStep == 0, "tl::gemm_ss_sm90: K must be a multiple of 32 bytes");
  constexpr int kRegs = MI * N_WG / 2;
  const int wg = (threadIdx.x / 128) % (WG_M * WG_N);  // T.ws scopes may start past warp group 0
  const int wgm = wg % WG_M, wgn = wg / WG_M;
  if (row_block >= 0) {
    if (clear) undef_accumulator<kRegs / MI>(C + row_block * (N_WG / 2));
    fence_accumulator<kRegs / MI>(C + row_block * (N_WG / 2));
  } else {
    if (clear) undef_accumulator<kRegs>(C);
    fence_accumulator<kRegs>(C);
  }
  warpgroup_arrive();
#pragma unroll
  for (int kk = 0; kk < K / kStep; ++kk) {
    uint64_t db;
    if constexpr (TB) {
      db = kmajor_desc<LDB * sizeof(T), N>(B, wgn * N_WG, kk);
    } else {
      static_assert(TB || N_WG % 64 == 0, "tl::gemm_ss_sm90: an N-major B needs 64-column panels");
      db = make_wgmma_desc<128>(B + (wgn * N_WG / 64) * (K * 64), K * 128, 1024);
      db = wgmma_desc_advance(db, kk * 2048);
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      if (row_block >= 0 && mi != row_block) continue;
      uint64_t da;
      if constexpr (TA) {  // M-major A (K x M): 64-column panels of K rows, as an N-major B
        static_assert(!TA || sizeof(T) == 2, "tl::gemm_ss_sm90: an M-major A needs 16-bit inputs");
        da = make_wgmma_desc<128>(A + ((wgm * M_WG + mi * 64) / 64) * (K * 64), K * 128, 1024);
        da = wgmma_desc_advance(da, kk * 2048);
      } else {
        da = kmajor_desc<LDA * sizeof(T), M>(A, wgm * M_WG + mi * 64, kk);
      }
      wgmma_ss<T, T, TC, N_WG, TA, !TB>(da, db, C + mi * (N_WG / 2), (clear && kk == 0) ? 0 : 1);
    }
  }
  warpgroup_commit_batch();
  if constexpr (kWait >= 0) {
    warpgroup_wait<kWait>();
  }
  if (row_block >= 0) {
    fence_accumulator<kRegs / MI>(C + row_block * (N_WG / 2));
  } else {
    fence_accumulator<kRegs>(C);
  }
}

}  // namespace tl

namespace tl {

// RS form: A (M x K) from registers, in the wgmma accumulator layout of a (WG_M x 1)
// warpgroup grid (the layout a previous gemm's C -- cast to 16 bits -- already has): for
// k-step kk, atoms 2kk and 2kk+1 of row block mi are exactly the 4 A registers. clear: as
// gemm_ss_sm90.
// Order: with several 64-row blocks a warpgroup (MI > 1) the wgmmas run a row block's whole K
// before the next one, so its A and C registers are done with first: where ptxas is short of
// registers (attention's 128 x 128 P.V on one warpgroup: C and A are 192 of 240) it spills less
// around the batch (FA forward D128: 32 fewer spill stores and loads an iteration). kKOuter:
// the k-steps outermost, alternating row blocks (pass config tl.disable_wgmma_rows_outer).
template <int M, int N, int K, int WG_M, bool TB, int LDB, class T, int kWait = 0, bool kKOuter = false>
TL_DEVICE void gemm_rs_sm90(const T* A, const T* B, float* C, bool clear = false, int row_block = -1) {
  static_assert(sizeof(T) == 2, "tl::gemm_rs_sm90: 16-bit A and B");
  constexpr int M_WG = M / WG_M, MI = M_WG / 64, N_WG = N;
  static_assert(M % (WG_M * 64) == 0 && K % 16 == 0, "tl::gemm_rs_sm90: m64 rows per warpgroup, K % 16 == 0");
  constexpr int kRegs = MI * N_WG / 2;
  constexpr int kARegs = MI * K / 4;  // 32-bit registers holding this thread's A halves
  uint32_t* a32 = reinterpret_cast<uint32_t*>(const_cast<T*>(A));
  const int rb = row_block < 0 ? 0 : row_block;  // row_block >= 0: only its registers are fenced
  if (row_block >= 0) {
    if (clear) undef_accumulator<kRegs / MI>(C + rb * (N_WG / 2));
    warpgroup_fence_operand<kARegs / MI>(a32 + rb * (kARegs / MI));
    warpgroup_fence_operand<kRegs / MI>(C + rb * (N_WG / 2));
  } else {
    if (clear) undef_accumulator<kRegs>(C);
    warpgroup_fence_operand<kARegs>(a32);
    warpgroup_fence_operand<kRegs>(C);
  }
  warpgroup_arrive();
#pragma unroll
  for (int i = 0; i < MI * (K / 16); ++i) {
    const int kk = kKOuter ? i / MI : i % (K / 16);
    const int mi = kKOuter ? i % MI : i / (K / 16);
    if (row_block >= 0 && mi != row_block) continue;
    uint64_t db;
    if constexpr (TB) {
      db = kmajor_desc<LDB * 2, N>(B, 0, kk);
    } else {
      static_assert(TB || N_WG % 64 == 0, "tl::gemm_rs_sm90: an N-major B needs 64-column panels");
      db = wgmma_desc_advance(make_wgmma_desc<128>(B, K * 128, 1024), kk * 2048);
    }
    wgmma_rs<T, T, float, N_WG, !TB>(a32 + (mi * (K / 8) + 2 * kk) * 2, db, C + mi * (N_WG / 2),
                                     (clear && kk == 0) ? 0 : 1);
  }
  warpgroup_commit_batch();
  if constexpr (kWait >= 0) {
    warpgroup_wait<kWait>();
  }
  if (row_block >= 0) {
    warpgroup_fence_operand<kRegs / MI>(C + rb * (N_WG / 2));
    warpgroup_fence_operand<kARegs / MI>(a32 + rb * (kARegs / MI));
  } else {
    warpgroup_fence_operand<kRegs>(C);
    warpgroup_fence_operand<kARegs>(a32);
  }
}

}  // namespace tl
