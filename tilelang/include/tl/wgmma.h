// tl/wgmma.h -- Hopper warpgroup MMA (wgmma.mma_async), sm_90a only.
//
// One warpgroup (4 consecutive warps, 128 threads, first warp a multiple of 4)
// computes D[64xN] (+)= A[64xK] * B[KxN].  B always comes from shared memory
// through a 64-bit matrix descriptor; A comes from shared memory (SS form) or
// from registers (RS form).  K = 16 for f16/bf16, 32 for fp8/int8.
//
// Accumulator ownership (64xN, f32/s32: N/2 registers per thread):
//   warp w = (thread % 128) / 32 owns rows 16w .. 16w+15; in a warp g = lane/4,
//   t = lane%4, and for every 8-column block j = 0 .. N/8-1:
//     d[4j+0], d[4j+1] = (row 16w+g,   cols 8j+2t, 8j+2t+1)
//     d[4j+2], d[4j+3] = (row 16w+g+8, cols 8j+2t, 8j+2t+1)
//   i.e. N/8 side-by-side copies of the mma.sync m16n8 C fragment.
//   f16 accumulators pack each pair above into one uint32 (N/4 registers).
// RS-form A (64x16 f16/bf16, 4 registers): warp w holds rows 16w..16w+15 in
//   the mma.sync m16n8k16 A-fragment layout (see mma.h); for fp8/int8 (64x32)
//   the m16n8k32 A layout.
//
// Ordering protocol (the hardware runs wgmma asynchronously):
//   warpgroup_fence_operand<R>(acc);  warpgroup_arrive();
//   wgmma_ss<...>(...) x k;           warpgroup_commit_batch();
//   warpgroup_wait<0>();               warpgroup_fence_operand<R>(acc);
// Shared-memory operands written by threads (not TMA) need fence_proxy_async()
// (sync.h) before warpgroup_arrive().
#pragma once

#include "common.h"
#include "wgmma_desc.h"
#include "wgmma_ops.h"
#if defined(TL_WGMMA_EXT) && TL_WGMMA_EXT
#include "wgmma_ops_ext.h"  // the widths outside the common set (tools/gen_wgmma.py)
#endif

namespace tl {

// ------------------------------------------------------------- fences
template <int kG = 0>
TL_DEVICE void warpgroup_arrive() {
  static_assert(TL_ARCH_SM90A || detail::always_false_int<kG>::value,
                "wgmma needs --gpu-architecture=sm_90a");
#if TL_ARCH_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
template <int kG = 0>
TL_DEVICE void warpgroup_commit_batch() {
  static_assert(TL_ARCH_SM90A || detail::always_false_int<kG>::value,
                "wgmma needs --gpu-architecture=sm_90a");
#if TL_ARCH_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Wait until at most N committed wgmma groups are still in flight.
template <int N>
TL_DEVICE void warpgroup_wait() {
  static_assert(N >= 0 && N <= 7, "tl::warpgroup_wait<N>: N must be in [0, 7]");
  static_assert(TL_ARCH_SM90A || detail::always_false_int<N>::value,
                "wgmma needs --gpu-architecture=sm_90a");
#if TL_ARCH_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// warpgroup_wait<N> that ptxas keeps after the work before it. ptxas schedules a
// wgmma.wait_group by its own latency estimate of the batch, often a few dozen
// instructions after the batch, so register work written before the wait (a softmax
// meant to run while P @ V is in flight) ends up stalled behind it. A never-taken branch
// on a launch value ptxas cannot know (the dynamic shared-memory size is never 2^32 - 1)
// starts a new basic block, and ptxas does not move the wait above it.
template <int N>
TL_DEVICE void warpgroup_wait_held() {
  static_assert(N >= 0 && N <= 7, "tl::warpgroup_wait_held<N>: N must be in [0, 7]");
  static_assert(TL_ARCH_SM90A || detail::always_false_int<N>::value,
                "wgmma needs --gpu-architecture=sm_90a");
#if TL_ARCH_SM90A
  unsigned smem_bytes;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(smem_bytes));
  if (smem_bytes == 0xffffffffu) __trap();
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Tell the compiler the accumulator registers may change behind its back, so
// it neither moves reads/writes of them across wgmma nor copies them.
template <int Count, class T>
TL_DEVICE void warpgroup_fence_operand(T* regs) {
  static_assert(sizeof(T) == 4, "tl::warpgroup_fence_operand: registers must be 32-bit");
#pragma unroll
  for (int i = 0; i < Count; ++i) {
    if constexpr (detail::is_same<T, float>::value) {
      asm volatile("" : "+f"(regs[i])::"memory");
    } else {
      asm volatile("" : "+r"(regs[i])::"memory");
    }
  }
}

// The accumulator registers' old values are dead: the next wgmma runs with scale-d = 0. A fresh
// definition (no instruction) keeps the compiler from holding an earlier value -- a loop's previous
// iteration -- live into the batch, which cost attention's loop a whole S tile of registers.
template <int Count, class T>
TL_DEVICE void warpgroup_undef_operand(T* regs) {
  static_assert(sizeof(T) == 4, "tl::warpgroup_undef_operand: registers must be 32-bit");
#pragma unroll
  for (int i = 0; i < Count; ++i) {
    if constexpr (detail::is_same<T, float>::value) {
      asm volatile("" : "=f"(regs[i])::"memory");
    } else {
      asm volatile("" : "=r"(regs[i])::"memory");
    }
  }
}

// ------------------------------------------------------------- entry points
// tl::wgmma_ss<A, B, C, N, TransA, TransB>(desc_a, desc_b, acc, scale_d)
//   A, B: element types (half_t, bfloat16_t, float8_e4m3_t, float8_e5m2_t,
//   int8_t); C: accumulator type (float, half_t, int32_t).  TransA / TransB
//   false = K-major operand (the default, required for fp8/int8), true =
//   M-/N-major.  scale_d == 0 overwrites acc; nonzero accumulates.  `acc`
//   points at kRegs registers (float*, uint32_t* for half accumulators,
//   int32_t*).
template <class A, class B, class C, int N, bool TransA = false, bool TransB = false,
          int ScaleA = 1, int ScaleB = 1, class D>
TL_DEVICE void wgmma_ss(uint64_t desc_a, uint64_t desc_b, D* acc, int scale_d) {
  using Op = detail::WgmmaSS<A, B, C, N>;
  static_assert(TL_ARCH_SM90A || detail::always_false<D>::value,
                "wgmma needs --gpu-architecture=sm_90a");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "tl::wgmma_ss: N must be a multiple of 8 in [8, 256]");
  static_assert(Op::kSupported,
                "tl::wgmma_ss: this (A, B, C, N) is not generated (widths outside the common set need TL_WGMMA_EXT); see tilelang/tools/gen_wgmma.py");
  static_assert(sizeof(D) == sizeof(typename Op::Reg) ||
                    (detail::is_same<C, half_t>::value && detail::is_same<D, half_t>::value),
                "tl::wgmma_ss: accumulator pointer type does not match C");
  static_assert(ScaleA == 1 || ScaleA == -1, "tl::wgmma_ss: ScaleA must be 1 or -1");
  static_assert(ScaleB == 1 || ScaleB == -1, "tl::wgmma_ss: ScaleB must be 1 or -1");
  Op::template mma<TransA, TransB, ScaleA, ScaleB>(
      desc_a, desc_b, reinterpret_cast<typename Op::Reg*>(acc), scale_d);
}

// RS form: A from 4 registers per thread (no A transpose exists in this form).
template <class A, class B, class C, int N, bool TransB = false, int ScaleA = 1, int ScaleB = 1,
          class D>
TL_DEVICE void wgmma_rs(const uint32_t* a, uint64_t desc_b, D* acc, int scale_d) {
  using Op = detail::WgmmaRS<A, B, C, N>;
  static_assert(TL_ARCH_SM90A || detail::always_false<D>::value,
                "wgmma needs --gpu-architecture=sm_90a");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "tl::wgmma_rs: N must be a multiple of 8 in [8, 256]");
  static_assert(Op::kSupported,
                "tl::wgmma_rs: this (A, B, C, N) is not generated (widths outside the common set need TL_WGMMA_EXT); see tilelang/tools/gen_wgmma.py");
  static_assert(sizeof(D) == sizeof(typename Op::Reg) ||
                    (detail::is_same<C, half_t>::value && detail::is_same<D, half_t>::value),
                "tl::wgmma_rs: accumulator pointer type does not match C");
  static_assert(ScaleA == 1 || ScaleA == -1, "tl::wgmma_rs: ScaleA must be 1 or -1");
  static_assert(ScaleB == 1 || ScaleB == -1, "tl::wgmma_rs: ScaleB must be 1 or -1");
  Op::template mma<false, TransB, ScaleA, ScaleB>(
      a, desc_b, reinterpret_cast<typename Op::Reg*>(acc), scale_d);
}

// Number of accumulator registers per thread for a wgmma_* call.
template <class A, class B, class C, int N>
TL_HOST_DEVICE constexpr int wgmma_acc_regs() {
  return detail::WgmmaSS<A, B, C, N>::kRegs;
}

}  // namespace tl
