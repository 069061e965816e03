// host_sync.h -- tl/sync.h on the host: named barriers, fences, warp ids, elect.sync.
// Clusters, setmaxnreg's register moves and the async proxy have no host meaning: fences are
// full fences, setmaxnreg is a no-op, cluster calls are left undefined (the kernel is refused).
// Part of host_cuda.h (included by host_tl.h).
#pragma once

namespace tl {

inline void named_barrier_sync(int id, int count) { tl_host_bar_sync(id, count, true); }
inline void named_barrier_arrive(int id, int count) { tl_host_bar_sync(id, count, false); }
// blocks run one after another: the kernels a launch depends on have finished
inline void pdl_sync() {}
inline void pdl_trigger() {}
template <int Id, int Count>
inline void barrier_sync() {
  static_assert(Id >= 0 && Id < 16, "tl::barrier_sync: barrier id must be in [0, 16)");
  static_assert(Count > 0 && Count % 32 == 0, "tl::barrier_sync: thread count must be a positive multiple of 32");
  tl_host_bar_sync(Id, Count, true);
}

template <int Id, int Count>
inline void barrier_arrive() {
  static_assert(Id >= 0 && Id < 16, "tl::barrier_arrive: barrier id must be in [0, 16)");
  static_assert(Count > 0 && Count % 32 == 0,
                "tl::barrier_arrive: thread count must be a positive multiple of 32");
  tl_host_bar_sync(Id, Count, false);
}
template <int Base, int W, int I = 0>
inline void warpgroup_turn_wait(int wg) {
  static_assert(W >= 2 && Base >= 1 && Base + W <= 16, "tl::warpgroup_turn_wait: ids Base..Base+W-1 in [1, 16)");
  if (wg < 0 || wg >= W) tl_host_fail("warpgroup_turn_wait: warpgroup %d of %d", wg, W);
  tl_host_bar_sync(Base + wg, 256, true);
}
template <int Base, int W, int I = 0>
inline void warpgroup_turn_pass(int wg) {
  static_assert(W >= 2 && Base >= 1 && Base + W <= 16, "tl::warpgroup_turn_pass: ids Base..Base+W-1 in [1, 16)");
  if (wg < 0 || wg >= W) tl_host_fail("warpgroup_turn_pass: warpgroup %d of %d", wg, W);
  tl_host_bar_sync(Base + (wg + 1) % W, 256, false);
}

template <int Base, int W, int I = 0>
inline void warpgroup_bar_sync(int wg) {
  static_assert(W >= 1 && Base >= 1 && Base + W <= 16, "tl::warpgroup_bar_sync: ids Base..Base+W-1 in [1, 16)");
  if (wg < 0 || wg >= W) tl_host_fail("warpgroup_bar_sync: warpgroup %d of %d", wg, W);
  tl_host_bar_sync(Base + wg, 128, true);
}

template <int kGuard = 0>
inline void fence_proxy_async() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void fence_cta() { std::atomic_thread_fence(std::memory_order_seq_cst); }

inline uint64_t globaltimer() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void flag_release(int* flag, int value) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  __atomic_store_n(flag, value, __ATOMIC_RELEASE);
}
// Blocks run one after another here: a flag no earlier block raised would never be raised.
inline void flag_wait_warp(const int* flag) {
  int v = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
  v = __shfl_sync(0xffffffffu, v, 0);
  if (v == 0) tl_host_fail("flag_wait_warp: no earlier block raised the flag (host_cuda runs blocks one after another)");
}

template <int N>
inline void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "tl::setmaxnreg_inc<N>: N must be a multiple of 8 in [24, 256]");
}
template <int N>
inline void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "tl::setmaxnreg_dec<N>: N must be a multiple of 8 in [24, 256]");
}

inline int lane_id() { return static_cast<int>(threadIdx.x) & 31; }
inline int warp_id() { return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0); }
inline int warpgroup_id() { return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0); }
inline int warp_id_in_warpgroup() { return __shfl_sync(0xffffffffu, (static_cast<int>(threadIdx.x) / 32) % 4, 0); }
// elect.sync over the whole warp: the lowest lane is the leader.
inline bool elect_one_sync() {
  const unsigned b = __ballot_sync(0xffffffffu, 1);
  return lane_id() == __builtin_ctz(b);
}

}  // namespace tl
