// tl/mbarrier.h -- shared-memory transaction barriers (mbarrier).
//
// An mbarrier is a 64-bit word in shared memory holding a phase bit, a
// pending-arrival count and (sm_90) a pending transaction-byte count.  A phase
// completes when all `count` arrivals happened and the tx count is back to
// zero; TMA loads decrement the tx count as bytes land ("complete_tx").
//
// Pipelines wait on a phase by parity: the k-th use of a barrier waits for
// parity k & 1.  Typical producer/consumer round for a TMA stage:
//
//   if (elect) { mbarrier_arrive_expect_tx(&full[s], bytes); tma_load(..., &full[s], ...); }
//   mbarrier_wait(&full[s], phase);          // consumer
//   ... compute ...
//   mbarrier_arrive(&empty[s]);              // consumer releases the stage
//
// init must be followed by fence_barrier_init() (and a __syncthreads or
// cluster sync) before any other thread or the TMA unit uses the barrier.
#pragma once

#include "common.h"
#include "sync.h"

namespace tl {

TL_DEVICE void mbarrier_init(uint64_t* bar, uint32_t arrive_count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrive_count)
               : "memory");
}

TL_DEVICE void mbarrier_inval(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Make the initialised barrier visible to the async proxy and the cluster.
template <int kGuard = 0>
TL_DEVICE void fence_barrier_init() {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "fence.mbarrier_init needs sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival; returns the barrier state token (rarely needed).
TL_DEVICE uint64_t mbarrier_arrive(uint64_t* bar) {
  uint64_t state;
  asm volatile("mbarrier.arrive.shared.b64 %0, [%1];\n"
               : "=l"(state)
               : "r"(smem_addr(bar))
               : "memory");
  return state;
}

// One arrival plus `tx_bytes` expected transaction bytes (TMA producer).
template <int kGuard = 0>
TL_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t tx_bytes) {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "mbarrier expect_tx needs sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(tx_bytes)
               : "memory");
#endif
}

// Add expected transaction bytes without arriving.
template <int kGuard = 0>
TL_DEVICE void mbarrier_expect_tx(uint64_t* bar, uint32_t tx_bytes) {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "mbarrier expect_tx needs sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                   smem_addr(bar)),
               "r"(tx_bytes)
               : "memory");
#endif
}

// Arrive on the barrier at the same smem offset in CTA `cta_id` of the
// cluster (consumers releasing a multicast stage to every producer CTA).
// Release at CTA scope (the default): a .release.cluster arrive costs a
// MEMBAR.GPU per call, and what it orders here -- wgmma reads of the stage --
// has already retired through warpgroup_wait before the arrive.
template <int kGuard = 0>
TL_DEVICE void mbarrier_arrive_cluster(uint64_t* bar, uint32_t cta_id) {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "remote mbarrier arrive needs sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(cta_id)
      : "memory");
#endif
}

// Non-blocking probe: has the phase with parity `phase` completed?
TL_DEVICE bool mbarrier_test_wait(uint64_t* bar, uint32_t phase) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(phase)
      : "memory");
  return done != 0;
}

// Potentially blocking probe (the hardware suspends the thread for a while
// before giving up), sm_90.  Falls back to test_wait on older parts.
TL_DEVICE bool mbarrier_try_wait(uint64_t* bar, uint32_t phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(phase)
      : "memory");
  return done != 0;
#else
  return mbarrier_test_wait(bar, phase);
#endif
}

// Suspend-time hint (nanoseconds) of mbarrier_wait's try_wait. With one, ptxas follows a failed
// probe with NANOSLEEP.SYNCS (the warp sleeps, issuing nothing, until the barrier changes or the
// hint expires) instead of probing again at once: warps waiting on a barrier leave the issue slots
// to the warps doing the work. Codegen defines it 0 (no hint) under the pass_config
// `tl.disable_mbarrier_suspend_hint`.
#ifndef TL_MBAR_SUSPEND_HINT
#define TL_MBAR_SUSPEND_HINT 10000000
#endif

// Block until the phase with parity `phase` has completed.
TL_DEVICE void mbarrier_wait(uint64_t* bar, uint32_t phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The loop lives inside the asm so the compiler emits one tight
  // SYNCS.PHASECHK retry loop instead of a C++ loop around a selp.  PTX
  // labels are scoped to the enclosing { }, so inlining it twice is fine.
#if TL_MBAR_SUSPEND_HINT
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "TL_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, %2;\n"
      "@!p bra TL_MBAR_WAIT;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(phase), "n"(TL_MBAR_SUSPEND_HINT)
      : "memory");
#else
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "TL_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra TL_MBAR_WAIT;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(phase)
      : "memory");
#endif
#else
  while (!mbarrier_test_wait(bar, phase)) {
  }
#endif
}

}  // namespace tl
