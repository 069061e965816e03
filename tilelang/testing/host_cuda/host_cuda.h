// host_cuda.h -- the CUDA runtime a generated kernel sees, on the host (tests without a GPU).
//
// A test aid, not a GPU model: every thread of a block is a real host thread (so the
// generated per-thread index math, the distribution of elements over threads and the
// barriers run as written), blocks run one after another.  Warp collectives (__shfl_*_sync,
// __ballot_sync, __syncwarp, and, in host_tl.h, ldmatrix and mma.sync) meet the lanes of one
// warp in a per-warp exchange: every participating lane deposits its operands, the last one
// to arrive computes every lane's result from them, each lane takes its own.  A barrier or
// collective that waits longer than the timeout (threads that never arrive: divergent code),
// lanes of one warp at different collectives or with different masks, or a read of a lane
// outside the mask, marks the launch broken: every thread leaves its kernel through longjmp
// and the run fails with the reason on stderr.  Never a hang, never a silent pass.
//
// The tl:: primitives (tl/common.h, mma.h, ldmatrix.h, cp_async.h, sync.h) are host_tl.h;
// every other tl header is the shipped one, compiled as is.
#pragma once

#include <math.h>
#include <setjmp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#define TL_HOST_EMU 1
// the codegen's TL_ASSUME facts are checked on the host (the device build hands them to nvcc)
#define TL_ASSUME(cond)                                                   \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "host_cuda: TL_ASSUME(%s) does not hold\n", #cond); \
      std::abort();                                                       \
    }                                                                     \
  } while (0)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

static thread_local dim3 threadIdx, blockIdx;
#ifndef TL_HOST_SMEM_BYTES
#define TL_HOST_SMEM_BYTES 232448
#endif
alignas(1024) unsigned char tl_smem[TL_HOST_SMEM_BYTES];  // the block's dynamic shared memory
static dim3 gridDim, blockDim;
static int tl_host_smem_used = TL_HOST_SMEM_BYTES;  // what the kernel asked for (ldmatrix checks it)

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__
#define __grid_constant__
#define __constant__ static const  // module tables (a persistent kernel's tl_tile_order): one per kernel unit
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

// ------------------------------------------------------------------ failure
static std::atomic<bool> tl_host_broken{false};
static std::atomic<bool> tl_host_reported{false};
static thread_local jmp_buf tl_host_escape;
static double tl_host_timeout_s = 20.0;
static void tl_host_wake_all();

// Marks the launch broken (the first reason goes to stderr) and leaves the kernel.
[[noreturn]] static void tl_host_fail(const char* fmt, ...) {
  if (!tl_host_reported.exchange(true)) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "host_cuda: thread %u of block (%u, %u, %u): ", threadIdx.x, blockIdx.x, blockIdx.y,
                 blockIdx.z);
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
  }
  tl_host_broken = true;
  tl_host_wake_all();
  longjmp(tl_host_escape, 1);
}

// Waits on cv until done() (lk held); a timeout or a broken launch leaves the kernel.
template <class F>
static void tl_host_wait(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, F done, const char* what) {
  bool ok = cv.wait_for(lk, std::chrono::duration<double>(tl_host_timeout_s), [&] { return done() || tl_host_broken; });
  if (!ok || tl_host_broken) {
    lk.unlock();
    if (!ok) tl_host_fail("%s waited %.0f s: not every thread it waits for reached it (divergent code?)", what, tl_host_timeout_s);
    longjmp(tl_host_escape, 1);
  }
}

// ------------------------------------------------------------------ block barrier
static std::mutex tl_host_mu;
static std::condition_variable tl_host_cv;
static int tl_host_count = 0, tl_host_threads = 0;
static long tl_host_generation = 0;

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
  tl_host_wait(lk, tl_host_cv, [&] { return tl_host_generation != gen; }, "__syncthreads");
}

inline void __syncthreads() { tl_host_barrier(); }

// Named barriers (bar.sync id, count): done when `count` threads have arrived at `id`.
struct TlHostNamedBarrier {
  int count = 0;
  long gen = 0;
};
static TlHostNamedBarrier tl_host_named[16];

static void tl_host_bar_sync(int id, int count, bool wait) {
  if (id < 0 || id >= 16 || count <= 0 || count % 32 || count > tl_host_threads)
    tl_host_fail("bar.sync %d, %d: id must be in [0, 16), count a multiple of 32 up to the block's %d threads", id,
                 count, tl_host_threads);
  if (id == 0 && count == tl_host_threads && wait) return tl_host_barrier();
  std::unique_lock<std::mutex> lk(tl_host_mu);
  TlHostNamedBarrier& b = tl_host_named[id];
  long gen = b.gen;
  if (++b.count == count) {
    b.count = 0;
    ++b.gen;
    tl_host_cv.notify_all();
    return;
  }
  if (wait) tl_host_wait(lk, tl_host_cv, [&] { return b.gen != gen; }, "a named barrier (bar.sync)");
}

// ------------------------------------------------------------------ warp exchange
// The lanes of `mask` that exist meet; each passes kIn words and gets kOut words back.  The
// last to arrive runs complete(in, out, participants) for the whole warp under the lock.
// Collectives of different masks are separate meetings (PTX: a thread waits for the lanes of its
// membermask to execute one with the same membermask), so lane 31 may pass `__syncwarp(1u << 31)`
// while lanes 16-30 wait for it at `__syncwarp(0xffff0000)`: each mask has its own slot. Lanes of
// one mask at different operations (a shuffle and a __syncwarp) are divergent code: an error.
constexpr int kTlIn = 12, kTlOut = 4, kTlSlots = 4;
struct TlHostSlot {
  int count = 0;
  long gen = 0;
  unsigned mask = 0;  // 0: free
  const char* op = nullptr;
  uint32_t in[32][kTlIn];
  uint32_t out[2][32][kTlOut];
  int unread[2] = {0, 0};
};
struct TlHostWarp {
  std::mutex mu;
  std::condition_variable cv;
  TlHostSlot slots[kTlSlots];
};
static TlHostWarp tl_host_warps[32];

static void tl_host_wake_all() {
  { std::lock_guard<std::mutex> g(tl_host_mu); tl_host_cv.notify_all(); }
  for (auto& w : tl_host_warps) { std::lock_guard<std::mutex> g(w.mu); w.cv.notify_all(); }
}

inline int tl_host_lane() { return static_cast<int>(threadIdx.x) & 31; }
// Lanes of this thread's warp that exist (a last warp may be partial).
inline unsigned tl_host_warp_lanes() {
  int n = tl_host_threads - static_cast<int>(threadIdx.x / 32) * 32;
  return n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
}

// The slot of the meeting over `parts`: the one open for that mask, else a free one (no lane
// inside it, its last results read).
static TlHostSlot* tl_host_slot(TlHostWarp& w, unsigned parts) {
  for (auto& sl : w.slots)
    if (sl.mask == parts) return &sl;
  for (auto& sl : w.slots)
    if (sl.mask == 0 || (sl.count == 0 && sl.unread[0] == 0 && sl.unread[1] == 0)) {
      sl.mask = parts;
      sl.op = nullptr;
      return &sl;
    }
  return nullptr;
}

template <class F>
static void tl_host_collective(const char* op, unsigned mask, const uint32_t* mine, int n_in, uint32_t* result,
                               int n_out, F complete) {
  const int lane = tl_host_lane();
  const unsigned parts = mask & tl_host_warp_lanes();
  if (!((mask >> lane) & 1u)) tl_host_fail("%s: lane %d calls it with mask 0x%08x, which leaves it out", op, lane, mask);
  TlHostWarp& w = tl_host_warps[threadIdx.x / 32];
  std::unique_lock<std::mutex> lk(w.mu);
  if (tl_host_broken) {
    lk.unlock();
    longjmp(tl_host_escape, 1);
  }
  TlHostSlot* sp = tl_host_slot(w, parts);
  if (!sp) {
    lk.unlock();
    tl_host_fail("lanes of warp %u are at more than %d warp collectives of different masks at once (%s with lanes "
                 "0x%08x): divergent code", threadIdx.x / 32, kTlSlots, op, parts);
  }
  TlHostSlot& sl = *sp;
  if (sl.count == 0) {
    sl.op = op;
  } else if (std::strcmp(sl.op, op) != 0) {
    const char* other = sl.op;
    lk.unlock();
    tl_host_fail("lanes of warp %u meet at different warp collectives (%s and %s, lanes 0x%08x): divergent code",
                 threadIdx.x / 32, other, op, parts);
  }
  std::memcpy(sl.in[lane], mine, n_in * 4);
  const long gen = sl.gen;
  const int buf = gen & 1;
  if (++sl.count == __builtin_popcount(parts)) {
    tl_host_wait(lk, w.cv, [&] { return sl.unread[buf] == 0; }, op);
    const char* err = complete(sl.in, sl.out[buf], parts);
    if (err) {
      lk.unlock();
      tl_host_fail("%s: %s", op, err);
    }
    sl.count = 0;
    sl.unread[buf] = __builtin_popcount(parts);
    ++sl.gen;
    w.cv.notify_all();
  } else {
    tl_host_wait(lk, w.cv, [&] { return sl.gen != gen; }, op);
  }
  std::memcpy(result, sl.out[buf][lane], n_out * 4);
  if (--sl.unread[buf] == 0) w.cv.notify_all();
}

// ------------------------------------------------------------------ shuffles, votes
// The lane a shfl reads (PTX shfl.sync: c = segment mask << 8 | clamp), or -1 for "own value".
inline int tl_host_shfl_src(int mode, int lane, int b, int width) {
  const int seg = lane & ~(width - 1);
  int j;
  switch (mode) {
    case 0: return seg | (b & (width - 1));           // idx
    case 1: j = lane - b; return j >= seg ? j : -1;   // up
    case 2: j = lane + b; return j < seg + width ? j : -1;  // down
    default: j = lane ^ b; return j < seg + width ? j : -1;  // bfly (xor): earlier segments allowed
  }
}

template <class T>
inline T tl_host_shfl(const char* op, int mode, unsigned mask, T v, int b, int width) {
  static_assert(sizeof(T) <= 8, "__shfl_*_sync: values of at most 8 bytes");
  if (width <= 0 || width > 32 || (width & (width - 1)))
    tl_host_fail("%s: width %d is not a power of two up to 32", op, width);
  uint32_t mine[4] = {0, 0, (uint32_t)b, (uint32_t)width}, got[2];
  std::memcpy(mine, &v, sizeof(T));
  tl_host_collective(op, mask, mine, 4, got, 2, [&](uint32_t (*in)[kTlIn], uint32_t (*out)[kTlOut], unsigned parts) -> const char* {
    static thread_local char msg[160];
    for (int l = 0; l < 32; ++l) {
      if (!((parts >> l) & 1u)) continue;
      if ((int)in[l][3] != width) return "lanes pass different widths";
      int s = tl_host_shfl_src(mode, l, (int)in[l][2], width);
      if (s < 0) s = l;
      if (!((parts >> s) & 1u)) {
        std::snprintf(msg, sizeof msg, "lane %d reads lane %d, which does not take part (mask 0x%08x)", l, s, parts);
        return msg;
      }
      out[l][0] = in[s][0];
      out[l][1] = in[s][1];
    }
    return nullptr;
  });
  T r;
  std::memcpy(&r, got, sizeof(T));
  return r;
}

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) { return tl_host_shfl("__shfl_sync", 0, mask, v, src, width); }
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) { return tl_host_shfl("__shfl_up_sync", 1, mask, v, (int)d, width); }
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) { return tl_host_shfl("__shfl_down_sync", 2, mask, v, (int)d, width); }
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) { return tl_host_shfl("__shfl_xor_sync", 3, mask, v, m, width); }

inline unsigned tl_host_vote(const char* op, unsigned mask, int pred) {
  uint32_t mine[1] = {pred ? 1u : 0u}, got[1];
  tl_host_collective(op, mask, mine, 1, got, 1, [&](uint32_t (*in)[kTlIn], uint32_t (*out)[kTlOut], unsigned parts) -> const char* {
    unsigned bal = 0;
    for (int l = 0; l < 32; ++l)
      if (((parts >> l) & 1u) && in[l][0]) bal |= 1u << l;
    for (int l = 0; l < 32; ++l) out[l][0] = bal;
    return nullptr;
  });
  return got[0];
}
inline unsigned __ballot_sync(unsigned mask, int p) { return tl_host_vote("__ballot_sync", mask, p); }
inline int __any_sync(unsigned mask, int p) { return tl_host_vote("__any_sync", mask, p) != 0; }
inline int __all_sync(unsigned mask, int p) {
  return tl_host_vote("__all_sync", mask, p) == (mask & tl_host_warp_lanes());
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { tl_host_vote("__syncwarp", mask, 0); }
// The host cannot see which lanes are converged: every lane of the warp is taken as active.
inline unsigned __activemask() { return tl_host_warp_lanes(); }

// __match_any_sync / __match_all_sync: lanes of `mask` whose value has the same bits.
template <class T>
inline unsigned tl_host_match(const char* op, unsigned mask, T v, bool all) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_*_sync: 4- or 8-byte values");
  uint32_t mine[2] = {0, 0}, got[1];
  std::memcpy(mine, &v, sizeof(T));
  tl_host_collective(op, mask, mine, 2, got, 1, [&](uint32_t (*in)[kTlIn], uint32_t (*out)[kTlOut], unsigned parts) -> const char* {
    bool same_all = true;
    for (int l = 0; l < 32; ++l) {
      if (!((parts >> l) & 1u)) continue;
      unsigned m = 0;
      for (int o = 0; o < 32; ++o)
        if (((parts >> o) & 1u) && in[o][0] == in[l][0] && in[o][1] == in[l][1]) m |= 1u << o;
      out[l][0] = m;
      same_all = same_all && m == parts;
    }
    if (all)
      for (int l = 0; l < 32; ++l) out[l][0] = same_all ? parts : 0u;
    return nullptr;
  });
  return got[0];
}
template <class T>
inline unsigned __match_any_sync(unsigned mask, T v) { return tl_host_match("__match_any_sync", mask, v, false); }
template <class T>
inline unsigned __match_all_sync(unsigned mask, T v, int* pred) {
  unsigned r = tl_host_match("__match_all_sync", mask, v, true);
  *pred = r != 0;
  return r;
}

// __syncthreads_count / _and / _or: a block barrier that also counts the non-zero predicates.
static std::atomic<int> tl_host_block_votes{0};
inline int tl_host_block_vote(int p) {
  tl_host_barrier();  // the previous vote's count has been read and reset
  if (p) ++tl_host_block_votes;
  tl_host_barrier();
  const int n = tl_host_block_votes.load();
  tl_host_barrier();
  if (threadIdx.x == 0) tl_host_block_votes = 0;  // host blocks are one-dimensional
  return n;
}
inline int __syncthreads_count(int p) { return tl_host_block_vote(p); }
inline int __syncthreads_and(int p) { return tl_host_block_vote(p) == tl_host_threads; }
inline int __syncthreads_or(int p) { return tl_host_block_vote(p) != 0; }

// ------------------------------------------------------------------ scalar builtins
using std::signbit;
template <class T>
inline T max(T a, T b) { return a > b ? a : b; }
template <class T>
inline T min(T a, T b) { return a < b ? a : b; }
template <class To, class From>
inline To tl_host_bits(From x) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To r;
  std::memcpy(&r, &x, sizeof(To));
  return r;
}
inline float __int_as_float(int x) { return tl_host_bits<float>(x); }
inline int __float_as_int(float x) { return tl_host_bits<int>(x); }
inline float __uint_as_float(unsigned x) { return tl_host_bits<float>(x); }
inline unsigned __float_as_uint(float x) { return tl_host_bits<unsigned>(x); }
inline double __longlong_as_double(long long x) { return tl_host_bits<double>(x); }
inline long long __double_as_longlong(double x) { return tl_host_bits<long long>(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline void sincospi(double x, double* s, double* c) {
  *s = std::sin(3.141592653589793 * x);
  *c = std::cos(3.141592653589793 * x);
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return x != x ? 0.0f : std::min(1.0f, std::max(0.0f, x)); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <typename T> inline T __ldg(const T* p) { return *p; }  // the read-only cache is a hint
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __fns(unsigned mask, unsigned base, int offset) {  // PTX fns.b32
  if (base > 31) return 0xFFFFFFFFu;
  if (offset == 0) return ((mask >> base) & 1u) ? base : 0xFFFFFFFFu;
  int step = offset > 0 ? 1 : -1, left = (offset > 0 ? offset : -offset) - 1;
  for (int pos = (int)base; pos >= 0 && pos < 32; pos += step)
    if ((mask >> pos) & 1u) {
      if (left == 0) return (unsigned)pos;
      --left;
    }
  return 0xFFFFFFFFu;
}
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
  return c;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
// ld.global.cg (a load that skips L1; stream-K reads other blocks' partial sums with it)
template <class T>
inline T __ldcg(const T* p) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return *p;
}

struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) int2 { int x, y; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

#include "host_types.h"
#include "host_math.h"

// ------------------------------------------------------------------ atomics
static std::mutex tl_host_atomic_mu;
// Every atomic is a read-modify-write under one lock: the old value out, f(old) in.
template <class T, class F>
inline T tl_host_rmw(T* p, F f) {
  std::lock_guard<std::mutex> g(tl_host_atomic_mu);
  T old = *p;
  *p = f(old);
  return old;
}
template <class T, class V>
inline T atomicAdd(T* p, V v) { return tl_host_rmw(p, [&](T o) { return T(o + static_cast<T>(v)); }); }
template <class T>
inline T atomicMax(T* p, T v) { return tl_host_rmw(p, [&](T o) { return o > v ? o : v; }); }
template <class T>
inline T atomicMin(T* p, T v) { return tl_host_rmw(p, [&](T o) { return o < v ? o : v; }); }
template <class T>
inline T atomicExch(T* p, T v) { return tl_host_rmw(p, [&](T) { return v; }); }
template <class T>
inline T atomicCAS(T* p, T cmp, T v) { return tl_host_rmw(p, [&](T o) { return o == cmp ? v : o; }); }
template <class T>
inline T atomicXor(T* p, T v) { return tl_host_rmw(p, [&](T o) { return T(o ^ v); }); }
template <class T>
inline T atomicOr(T* p, T v) { return tl_host_rmw(p, [&](T o) { return T(o | v); }); }
template <class T>
inline T atomicAnd(T* p, T v) { return tl_host_rmw(p, [&](T o) { return T(o & v); }); }

#include "host_tl.h"
