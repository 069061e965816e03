// host_cuda.h -- runs generated CUDA kernels on the host, for tests without a GPU.
//
// A test aid, not a GPU model: every thread of a block is a real host thread (so the
// generated per-thread index math, the distribution of elements over threads and the
// __syncthreads barriers all run as written), blocks run one after another, and the tl::
// helpers a copy / elementwise kernel calls are plain host equivalents of their documented
// meaning (cp.async is a synchronous copy: a missing cp_async_wait is NOT detected).
// Only what float32 / int32 copy, fill, elementwise and reduce kernels use is provided;
// anything else fails to compile, and the test says so.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <setjmp.h>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

static thread_local dim3 threadIdx, blockIdx;
#ifndef TL_HOST_SMEM_BYTES
#define TL_HOST_SMEM_BYTES 232448
#endif
alignas(1024) unsigned char tl_smem[TL_HOST_SMEM_BYTES];  // the block's dynamic shared memory
static dim3 gridDim, blockDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

// ------------------------------------------------------------------ block barrier
// A reusable barrier over the block's threads.  A thread that waits more than a few
// seconds (threads that never arrive: a barrier inside divergent code) marks the launch
// broken and every thread leaves its kernel through longjmp.
static std::mutex tl_host_mu;
static std::condition_variable tl_host_cv;
static int tl_host_count = 0, tl_host_threads = 0;
static long tl_host_generation = 0;
static std::atomic<bool> tl_host_broken{false};
static thread_local jmp_buf tl_host_escape;

static void tl_host_barrier() {
  std::unique_lock<std::mutex> lk(tl_host_mu);
  if (tl_host_broken) {
    lk.unlock();
    longjmp(tl_host_escape, 1);
  }
  long gen = tl_host_generation;
  if (++tl_host_count == tl_host_threads) {
    tl_host_count = 0;
    ++tl_host_generation;
    tl_host_cv.notify_all();
    return;
  }
  bool ok = tl_host_cv.wait_for(lk, std::chrono::seconds(20),
                                [&] { return tl_host_generation != gen || tl_host_broken; });
  if (!ok || tl_host_broken) {
    tl_host_broken = true;
    tl_host_cv.notify_all();
    lk.unlock();
    longjmp(tl_host_escape, 1);
  }
}

inline void __syncthreads() { tl_host_barrier(); }

// ------------------------------------------------------------------ scalar helpers
template <class T>
inline T max(T a, T b) { return a > b ? a : b; }
template <class T>
inline T min(T a, T b) { return a < b ? a : b; }
inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float exp2f_(float x) { return std::exp2(x); }

inline int32_t tl_floordiv_i32(int32_t a, int32_t b) {
  int32_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t tl_floordiv_i64(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int32_t tl_floormod_i32(int32_t a, int32_t b) { return a - tl_floordiv_i32(a, b) * b; }
inline int64_t tl_floormod_i64(int64_t a, int64_t b) { return a - tl_floordiv_i64(a, b) * b; }

static std::mutex tl_host_atomic_mu;
template <class T, class V>
inline void tl_host_atomic_add(T* p, V v) {
  std::lock_guard<std::mutex> g(tl_host_atomic_mu);
  *p = *p + v;
}
inline void tl_atomic_add_f32(float* p, float v) { tl_host_atomic_add(p, v); }
inline void tl_atomic_add_i32(int32_t* p, int32_t v) { tl_host_atomic_add(p, v); }
inline void tl_atomic_add_f64(double* p, double v) { tl_host_atomic_add(p, v); }
template <class T, class V>
inline T atomicAdd(T* p, V v) {
  std::lock_guard<std::mutex> g(tl_host_atomic_mu);
  T old = *p;
  *p = old + v;
  return old;
}

// ------------------------------------------------------------------ tl:: copies
namespace tl {

template <int N>
inline void cp_async_zfill(void* dst, const void* src, bool pred) {
  if (pred) std::memcpy(dst, src, N); else std::memset(dst, 0, N);
}
template <int N>
inline void cp_async(void* dst, const void* src) { std::memcpy(dst, src, N); }
inline void cp_async_commit() {}
template <int N>
inline void cp_async_wait() {}
inline void cp_async_wait_all() {}

inline void copy_vec16(void* dst, const void* src, bool pred) {
  if (pred) std::memcpy(dst, src, 16); else std::memset(dst, 0, 16);
}
inline void copy_vec8(void* dst, const void* src, bool pred) {
  if (pred) std::memcpy(dst, src, 8); else std::memset(dst, 0, 8);
}
inline void copy_vec4(void* dst, const void* src, bool pred) {
  if (pred) std::memcpy(dst, src, 4); else std::memset(dst, 0, 4);
}

template <int N, class T>
inline void load_vec(T* regs, const T* src, bool pred = true) {
  if (pred) std::memcpy(regs, src, N * sizeof(T)); else std::memset(regs, 0, N * sizeof(T));
}
template <int N, class T>
inline void store_vec(T* dst, const T* regs) { std::memcpy(dst, regs, N * sizeof(T)); }

inline void sync_all_threads() { __syncthreads(); }

}  // namespace tl

template <class T>
inline void tl_store2(T* p, T a, T b) { p[0] = a; p[1] = b; }
