// tl/sync.h -- barriers, fences, register reallocation and warpgroup helpers.
//
// Warp-specialized Hopper kernels split a block into a producer warpgroup
// (issues TMA, needs few registers) and consumer warpgroups (wgmma, need many):
// setmaxnreg moves registers between them, named barriers synchronise a subset
// of warps without stalling the whole block, and fence.proxy.async orders
// ordinary shared-memory writes before the async proxy (TMA store, wgmma)
// reads them.
#pragma once

#include "common.h"

namespace tl {

// ------------------------------------------------------------- named barriers
// bar.sync id, count: block until `count` threads (a multiple of 32) have
// arrived at barrier `id` (0..15; 0 is the one __syncthreads uses).
TL_DEVICE void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// Arrive without waiting: the producer side of a producer/consumer handshake.
TL_DEVICE void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
template <int Id, int Count>
TL_DEVICE void barrier_sync() {
  static_assert(Id >= 0 && Id < 16, "tl::barrier_sync: barrier id must be in [0, 16)");
  static_assert(Count > 0 && Count % 32 == 0,
                "tl::barrier_sync: thread count must be a positive multiple of 32");
  asm volatile("bar.sync %0, %1;\n" ::"n"(Id), "n"(Count) : "memory");
}

template <int Id, int Count>
TL_DEVICE void barrier_arrive() {
  static_assert(Id >= 0 && Id < 16, "tl::barrier_arrive: barrier id must be in [0, 16)");
  static_assert(Count > 0 && Count % 32 == 0,
                "tl::barrier_arrive: thread count must be a positive multiple of 32");
  asm volatile("bar.arrive %0, %1;\n" ::"n"(Id), "n"(Count) : "memory");
}

// ------------------------------------------------------------- warpgroup turns
// W consumer warpgroups take turns (0, 1, ..., W-1, 0, ...) at issuing their gemms
// (transform/cuda/ws_pingpong.py): warpgroup wg waits on named barrier Base + wg before its
// turn and passes the turn on by arriving on Base + (wg + 1) % W. Each barrier counts the
// 128 threads waiting and the 128 passing. The ids stay compile-time (see barrier_sync's
// note below): a chain of branches on the warp-uniform wg picks one.
template <int Base, int W, int I = 0>
TL_DEVICE void warpgroup_turn_wait(int wg) {
  static_assert(W >= 2 && Base >= 1 && Base + W <= 16, "tl::warpgroup_turn_wait: ids Base..Base+W-1 in [1, 16)");
  if constexpr (I < W) {
    if (wg == I) {
      barrier_sync<Base + I, 256>();
    } else {
      warpgroup_turn_wait<Base, W, I + 1>(wg);
    }
  }
}
template <int Base, int W, int I = 0>
TL_DEVICE void warpgroup_turn_pass(int wg) {
  static_assert(W >= 2 && Base >= 1 && Base + W <= 16, "tl::warpgroup_turn_pass: ids Base..Base+W-1 in [1, 16)");
  if constexpr (I < W) {
    if (wg == I) {
      barrier_arrive<Base + (I + 1) % W, 256>();
    } else {
      warpgroup_turn_pass<Base, W, I + 1>(wg);
    }
  }
}

// ------------------------------------------------------------- warpgroup-local barrier
// bar.sync Base + wg, 128: the 128 threads of warpgroup wg meet, the other warpgroups run on
// (transform/cuda/ws_epilogue.py: each consumer warpgroup stages and TMA-stores its own rows of
// the output tile). Compile-time ids through a chain of branches on the warp-uniform wg.
template <int Base, int W, int I = 0>
TL_DEVICE void warpgroup_bar_sync(int wg) {
  static_assert(W >= 1 && Base >= 1 && Base + W <= 16, "tl::warpgroup_bar_sync: ids Base..Base+W-1 in [1, 16)");
  if constexpr (I < W) {
    if (wg == I) {
      barrier_sync<Base + I, 128>();
    } else {
      warpgroup_bar_sync<Base, W, I + 1>(wg);
    }
  }
}

// ------------------------------------------------------------- fences
// Order this thread's generic-proxy shared-memory writes before later
// async-proxy accesses (TMA store from smem, wgmma reading smem operands).
template <int kGuard = 0>
TL_DEVICE void fence_proxy_async() {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "fence.proxy.async needs sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

TL_DEVICE void fence_cta() { asm volatile("fence.acq_rel.cta;\n" ::: "memory"); }

// ------------------------------------------------------------- timeline (tl.debug_timeline)
// Global nanosecond timer, comparable across the SMs of one GPU.
TL_DEVICE uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// ------------------------------------------------------------- flags between blocks
// A block publishes data in global memory to another block of the same grid:
// the writer's threads store, then flag_publish (every thread fences, the
// block's consumers meet, one thread raises the flag with release semantics);
// the reader's first warp spins in flag_wait_warp (acquire), then its threads
// meet and read. Both blocks must be resident at once (persistent grids are).
TL_DEVICE void flag_release(int* flag, int value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}
// Called by all 32 lanes of one warp, which stay converged for the barrier that
// follows (bar.sync is .aligned: a lane still spinning there would be UB).
TL_DEVICE void flag_wait_warp(const int* flag) {
  int v = 0;
  do {
    if ((threadIdx.x & 31) == 0) {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    }
    v = __shfl_sync(0xffffffffu, v, 0);
  } while (v == 0);
}

// ------------------------------------------------------------- setmaxnreg
// Raise / lower this warpgroup's per-thread register budget.  All warps of
// the warpgroup must execute it; counts are multiples of 8 in [24, 256].
// NOTE: the kernel needs __launch_bounds__(threads, 1): without a known
// register count at entry ptxas drops setmaxnreg with warning C7508.
// Prefer barrier_sync<Id, Count>() over named_barrier_sync() in such kernels:
// a runtime barrier id makes ptxas reserve all 16 hardware barriers.
template <int N>
TL_DEVICE void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0,
                "tl::setmaxnreg_inc<N>: N must be a multiple of 8 in [24, 256]");
  static_assert(TL_ARCH_SM90A || detail::always_false_int<N>::value,
                "setmaxnreg needs --gpu-architecture=sm_90a");
#if TL_ARCH_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
TL_DEVICE void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0,
                "tl::setmaxnreg_dec<N>: N must be a multiple of 8 in [24, 256]");
  static_assert(TL_ARCH_SM90A || detail::always_false_int<N>::value,
                "setmaxnreg needs --gpu-architecture=sm_90a");
#if TL_ARCH_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// ------------------------------------------------------------- warp(group) ids
TL_DEVICE int lane_id() { return static_cast<int>(threadIdx.x) & 31; }
// Broadcast from lane 0 so the compiler knows the value is warp-uniform
// (it then keeps it in a uniform register and branches on it cheaply).
TL_DEVICE int warp_id() { return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0); }
TL_DEVICE int warpgroup_id() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}
TL_DEVICE int warp_id_in_warpgroup() {
  return __shfl_sync(0xffffffffu, (static_cast<int>(threadIdx.x) / 32) % 4, 0);
}

// True in exactly one active lane of the warp (elect.sync on sm_90, lane 0
// of the active mask before).  Used to issue TMA / mbarrier ops once.
TL_DEVICE bool elect_one_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t pred = 0;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "elect.sync _|p, %1;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(pred)
      : "r"(0xffffffffu));
  return pred != 0;
#else
  return lane_id() == (__ffs(__activemask()) - 1);
#endif
}

// ------------------------------------------------------------- clusters (sm_90)
template <int kGuard = 0>
TL_DEVICE void cluster_arrive() {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "thread-block clusters need sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory");
#endif
}
// Arrive without release semantics: orders execution only (T.cluster_arrive_relaxed).
template <int kGuard = 0>
TL_DEVICE void cluster_arrive_relaxed() {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "thread-block clusters need sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}
template <int kGuard = 0>
TL_DEVICE void cluster_wait() {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "thread-block clusters need sm_90 or newer");
#if TL_ARCH_SM90
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}
template <int kGuard = 0>
TL_DEVICE void cluster_sync() {
  cluster_arrive<kGuard>();
  cluster_wait<kGuard>();
}
template <int kGuard = 0>
TL_DEVICE uint32_t block_rank_in_cluster() {
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kGuard>::value,
                "thread-block clusters need sm_90 or newer");
  uint32_t rank = 0;
#if TL_ARCH_SM90
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#endif
  return rank;
}

// ------------------------------------------------------------- programmatic dependent launch
// T.pdl_sync / T.pdl_trigger (sm_90+; the compiler refuses them for older targets).
TL_DEVICE void pdl_sync() {
#if TL_ARCH_SM90
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
TL_DEVICE void pdl_trigger() {
#if TL_ARCH_SM90
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// ------------------------------------------------------------- grid barrier
// T.sync_grid where the kernel is not split into launches (inside a loop or a branch, or with
// registers / shared memory live across it): the kernel is launched cooperatively (every block
// resident at once, CU_LAUNCH_ATTRIBUTE_COOPERATIVE), and the blocks meet on two words of global
// memory, `bar[0]` an arrival count and `bar[1]` a generation, both zero when the module loads.
// Thread 0 of each block reads the generation, then arrives (acq_rel); the last block to arrive
// resets the count and publishes the next generation (release), which the others wait for
// (acquire). The count is back at zero after every barrier, so the words serve every launch; two
// launches of one cooperative kernel running at once (on two streams) would share them.
TL_DEVICE void sync_grid(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
    unsigned gen, prev, now;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(bar + 1) : "memory");
    __threadfence();
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(bar) : "memory");
    if (prev + 1 == blocks) {
      asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(bar) : "memory");
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(bar + 1), "r"(gen + 1) : "memory");
    } else {
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(bar + 1) : "memory");
      } while (now == gen);
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace tl
