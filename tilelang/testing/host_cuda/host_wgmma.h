// host_wgmma.h -- tl/wgmma.h and tl/wgmma_ops.h on the host: wgmma.mma_async as a warpgroup
// collective, computed when issued and written to the accumulator registers only at the
// warpgroup_wait that completes its batch (commit groups as in PTX): a kernel that reads an
// accumulator before its wait reads the old registers, and a batch never waited for is lost.
//
// The 128 threads of a warpgroup meet at each wgmma call; the last to arrive reads A and B from
// shared memory through the 64-bit descriptors (or A from the threads' registers, RS form) and
// computes every thread's D in the layouts of tl/wgmma.h. Descriptor addressing (the canonical
// layouts, swizzled or not): cpu/tl_smem_desc.h, shared with the CPU backend. Products are exact
// and summed in double, rounded once to the accumulator type (s32 wraps). Part of host_cuda.h (included by host_tl.h).
#pragma once

#include <vector>

#include "../../include/cpu/tl_smem_desc.h"  // the descriptor rule, shared with the CPU backend
#include "tl/wgmma_desc.h"  // the shipped descriptor packing (host smem_addr: offsets in tl_smem)

namespace tl {
namespace detail {
// The asynchrony of wgmma, per thread: a call's results wait in the open batch, commit closes
// it, and warpgroup_wait<N> writes the registers of every committed batch but the newest N. A
// later wgmma of the same chain reads the pending values of its accumulator, as the hardware
// chains them; any other read of an accumulator before its wait sees the old registers.
struct HostWgWrite {
  uint32_t* d;
  std::vector<uint32_t> vals;
};
static thread_local std::vector<HostWgWrite> tl_host_wg_open;
static thread_local std::vector<std::vector<HostWgWrite>> tl_host_wg_committed;

inline uint32_t host_wg_current(uint32_t* p) {  // the newest pending value of register p, else p
  for (auto g = tl_host_wg_open.rbegin(); g != tl_host_wg_open.rend(); ++g)
    if (p >= g->d && p < g->d + g->vals.size()) return g->vals[p - g->d];
  for (auto b = tl_host_wg_committed.rbegin(); b != tl_host_wg_committed.rend(); ++b)
    for (auto g = b->rbegin(); g != b->rend(); ++g)
      if (p >= g->d && p < g->d + g->vals.size()) return g->vals[p - g->d];
  return *p;
}
}  // namespace detail

// Called by the host launcher before each block: batches never waited for are dropped.
inline void tl_host_wgmma_block_start() {
  detail::tl_host_wg_open.clear();
  detail::tl_host_wg_committed.clear();
}

template <int kG = 0>
inline void warpgroup_arrive() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <int kG = 0>
inline void warpgroup_commit_batch() {
  detail::tl_host_wg_committed.push_back(std::move(detail::tl_host_wg_open));
  detail::tl_host_wg_open.clear();
}
template <int N>
inline void warpgroup_wait() {
  static_assert(N >= 0 && N <= 7, "tl::warpgroup_wait<N>: N must be in [0, 7]");
  auto& c = detail::tl_host_wg_committed;
  const size_t done = c.size() > static_cast<size_t>(N) ? c.size() - N : 0;
  for (size_t b = 0; b < done; ++b)
    for (auto& w : c[b]) std::memcpy(w.d, w.vals.data(), 4 * w.vals.size());
  c.erase(c.begin(), c.begin() + done);
}
template <int N>
inline void warpgroup_wait_held() {  // the branch that orders ptxas' schedule is a no-op here
  warpgroup_wait<N>();
}
template <int Count, class T>
inline void warpgroup_fence_operand(T*) {
  static_assert(sizeof(T) == 4, "tl::warpgroup_fence_operand: registers must be 32-bit");
}
template <int Count, class T>
inline void warpgroup_undef_operand(T*) {  // the values stay: scale-d = 0 ignores them anyway
  static_assert(sizeof(T) == 4, "tl::warpgroup_undef_operand: registers must be 32-bit");
}

namespace detail {

// The meeting of one warpgroup's 128 threads: each passes `n_in` words, gets `n_out` back.
struct TlHostWarpgroup {
  std::mutex mu;
  std::condition_variable cv;
  int count = 0;
  long gen = 0;
  const char* op = nullptr;
  uint64_t key[2] = {0, 0};
  std::vector<uint32_t> in;
  std::vector<uint32_t> out[2];
  int unread[2] = {0, 0};
};
static TlHostWarpgroup tl_host_wgs[8];

template <class F>
inline void host_warpgroup(const char* op, uint64_t k0, uint64_t k1, const uint32_t* mine, int n_in, uint32_t* result,
                           int n_out, F complete) {
  const int wg = static_cast<int>(threadIdx.x) / 128, t = static_cast<int>(threadIdx.x) % 128;
  if ((wg + 1) * 128 > tl_host_threads) tl_host_fail("%s: warpgroup %d has fewer than 128 threads", op, wg);
  TlHostWarpgroup& w = tl_host_wgs[wg];
  std::unique_lock<std::mutex> lk(w.mu);
  if (tl_host_broken) {
    lk.unlock();
    longjmp(tl_host_escape, 1);
  }
  if (w.count == 0) {
    w.op = op;
    w.key[0] = k0;
    w.key[1] = k1;
    w.in.assign(128 * static_cast<size_t>(n_in), 0u);
  } else if (std::strcmp(w.op, op) != 0 || w.key[0] != k0 || w.key[1] != k1) {
    const char* other = w.op;
    lk.unlock();
    tl_host_fail("threads of warpgroup %d meet at different wgmma calls (%s and %s, or other descriptors): "
                 "divergent code", wg, other, op);
  }
  std::memcpy(w.in.data() + static_cast<size_t>(t) * n_in, mine, 4 * static_cast<size_t>(n_in));
  const long gen = w.gen;
  const int buf = gen & 1;
  if (++w.count == 128) {
    tl_host_wait(lk, w.cv, [&] { return w.unread[buf] == 0; }, op);
    w.out[buf].assign(128 * static_cast<size_t>(n_out), 0u);
    const char* err = complete(w.in.data(), w.out[buf].data());
    if (err) {
      lk.unlock();
      tl_host_fail("%s: %s", op, err);
    }
    w.count = 0;
    w.unread[buf] = 128;
    ++w.gen;
    w.cv.notify_all();
  } else {
    tl_host_wait(lk, w.cv, [&] { return w.gen != gen; }, op);
  }
  std::memcpy(result, w.out[buf].data() + static_cast<size_t>(t) * n_out, 4 * static_cast<size_t>(n_out));
  if (--w.unread[buf] == 0) w.cv.notify_all();
}

template <class T> struct HostWgKind;
template <> struct HostWgKind<half_t> { static constexpr int kind = kHostF16, bytes = 2; };
template <> struct HostWgKind<bfloat16_t> { static constexpr int kind = kHostBF16, bytes = 2; };
template <> struct HostWgKind<float8_e4m3_t> { static constexpr int kind = kHostE4M3, bytes = 1; };
template <> struct HostWgKind<float8_e5m2_t> { static constexpr int kind = kHostE5M2, bytes = 1; };
template <> struct HostWgKind<int8_t> { static constexpr int kind = kHostS8, bytes = 1; };

// The byte address of element (mn, k) of a wgmma operand, or an error: the CPU backend's rule
// (cpu/tl_smem_desc.h, included by host_tma.h), one decoder for both emulations.
inline const char* host_wg_addr(uint64_t desc, bool mn_major, int mn, int k, int e, uint32_t* addr) {
  return tl_gmma_operand_addr(desc, mn_major ? 1 : 0, mn, k, e, addr);
}

inline double host_wg_load(uint32_t addr, int kind, int e) {
  const unsigned char* p = tl_host_smem_at(addr, e, "wgmma operand");
  uint32_t w = 0;
  std::memcpy(&w, p, e);
  return host_mma_elem(w, 0, kind);
}

// D (64 x N) (+)= A (64 x K) * B (K x N) for the warpgroup. AccKind: 0 f32, 1 s32, 2 f16x2.
// rs: A from 4 registers per thread (the mma.sync m16n8k{16,32} A layout per warp).
template <class TA_, class TB_, int N, int AccKind, bool TransA, bool TransB, int ScaleA, int ScaleB>
inline void host_wgmma(const char* op, uint64_t da, const uint32_t* a_regs, uint64_t db, uint32_t* d, int scale_d) {
  constexpr int ea = HostWgKind<TA_>::bytes, eb = HostWgKind<TB_>::bytes;
  constexpr int K = 32 / ea;
  constexpr int nd = AccKind == 2 ? N / 4 : N / 2;
  constexpr int n_in = 4 + nd + 1;
  const bool rs = a_regs != nullptr;
  uint32_t mine[n_in];
  for (int i = 0; i < 4; ++i) mine[i] = rs ? a_regs[i] : 0u;
  for (int i = 0; i < nd; ++i) mine[4 + i] = host_wg_current(d + i);
  mine[4 + nd] = static_cast<uint32_t>(scale_d != 0);
  uint32_t got[nd];
  host_warpgroup(op, rs ? 0 : da, db, mine, n_in, got, nd, [&](const uint32_t* in, uint32_t* out) -> const char* {
    std::vector<double> Av(64 * 32), Bv(32 * 256);  // one warpgroup's meeting may run beside another's
    auto A = reinterpret_cast<double(*)[32]>(Av.data());
    auto B = reinterpret_cast<double(*)[256]>(Bv.data());
    for (int row = 0; row < 64; ++row) {
      for (int k = 0; k < K; ++k) {
        if (rs) {
          constexpr int kHalf = K / 2, kPer = kHalf / 4;
          const int w = row / 16, r = row % 16;
          const int lane = (r % 8) * 4 + (k % kHalf) / kPer, reg = r / 8 + 2 * (k / kHalf);
          A[row][k] = host_mma_elem(in[(w * 32 + lane) * n_in + reg], k % kPer, HostWgKind<TA_>::kind);
        } else {
          uint32_t addr;
          if (const char* err = host_wg_addr(da, TransA, row, k, ea, &addr)) return err;
          A[row][k] = host_wg_load(addr, HostWgKind<TA_>::kind, ea);
        }
      }
    }
    for (int k = 0; k < K; ++k) {
      for (int n = 0; n < N; ++n) {
        uint32_t addr;
        if (const char* err = host_wg_addr(db, TransB, n, k, eb, &addr)) return err;
        B[k][n] = host_wg_load(addr, HostWgKind<TB_>::kind, eb);
      }
    }
    for (int t = 0; t < 128; ++t) {
      const uint32_t* me = in + t * n_in;
      const bool acc = me[4 + nd] != 0;
      const int w = t / 32, g = (t % 32) / 4, q = t % 4;
      for (int j = 0; j < N / 8; ++j) {
        for (int e = 0; e < 4; ++e) {
          const int row = 16 * w + g + 8 * (e / 2), col = 8 * j + 2 * q + e % 2;
          const int slot = 4 * j + e;
          if constexpr (AccKind == 1) {
            long long s = acc ? static_cast<long long>(static_cast<int32_t>(me[4 + slot])) : 0;
            for (int k = 0; k < K; ++k)
              s += static_cast<long long>(ScaleA * ScaleB) * static_cast<long long>(A[row][k]) * static_cast<long long>(B[k][col]);
            out[t * nd + slot] = static_cast<uint32_t>(s);
          } else if constexpr (AccKind == 0) {
            double s = acc ? static_cast<double>(__uint_as_float(me[4 + slot])) : 0.0;
            for (int k = 0; k < K; ++k) s += ScaleA * ScaleB * A[row][k] * B[k][col];
            out[t * nd + slot] = __float_as_uint(static_cast<float>(s));
          } else {
            const int word = slot / 2, half = slot % 2;
            double s = acc ? TlHostF16::decode((me[4 + word] >> (16 * half)) & 0xffffu) : 0.0;
            for (int k = 0; k < K; ++k) s += ScaleA * ScaleB * A[row][k] * B[k][col];
            const uint32_t h = TlHostF16::encode(static_cast<float>(s), false);
            uint32_t& o = out[t * nd + word];
            o = half ? (o & 0xffffu) | (h << 16) : (o & 0xffff0000u) | h;
          }
        }
      }
    }
    return nullptr;
  });
  tl_host_wg_open.push_back(HostWgWrite{d, std::vector<uint32_t>(got, got + nd)});
}

template <class C> struct HostWgAcc { static constexpr int kind = 0; using Reg = float; };
template <> struct HostWgAcc<int32_t> { static constexpr int kind = 1; using Reg = int32_t; };
template <> struct HostWgAcc<half_t> { static constexpr int kind = 2; using Reg = uint32_t; };

template <class A, class B, class C>
constexpr bool host_wg_supported() {
  if constexpr (is_same<C, int32_t>::value) return is_same<A, int8_t>::value && is_same<B, int8_t>::value;
  if constexpr (is_same<C, half_t>::value) return is_same<A, half_t>::value && is_same<B, half_t>::value;
  if constexpr (is_same<C, float>::value)
    return (is_same<A, half_t>::value && is_same<B, half_t>::value) ||
           (is_same<A, bfloat16_t>::value && is_same<B, bfloat16_t>::value) ||
           ((is_same<A, float8_e4m3_t>::value || is_same<A, float8_e5m2_t>::value) &&
            (is_same<B, float8_e4m3_t>::value || is_same<B, float8_e5m2_t>::value));
  return false;
}

template <class A, class B, class C, int N>
struct WgmmaSS {
  static constexpr bool kSupported = host_wg_supported<A, B, C>();
  static constexpr int kRegs = HostWgAcc<C>::kind == 2 ? N / 4 : N / 2;
  using Reg = typename HostWgAcc<C>::Reg;
  template <bool TransA, bool TransB, int ScaleA, int ScaleB>
  static void mma(uint64_t desc_a, uint64_t desc_b, Reg* d, int scale_d) {
    static_assert(sizeof(A) == 2 || (!TransA && !TransB), "this wgmma type reads K-major operands only (no transpose)");
    host_wgmma<A, B, N, HostWgAcc<C>::kind, TransA, TransB, ScaleA, ScaleB>(
        "wgmma.mma_async (SS)", desc_a, nullptr, desc_b, reinterpret_cast<uint32_t*>(d), scale_d);
  }
};

template <class A, class B, class C, int N>
struct WgmmaRS {
  static constexpr bool kSupported = host_wg_supported<A, B, C>();
  static constexpr int kRegs = HostWgAcc<C>::kind == 2 ? N / 4 : N / 2;
  using Reg = typename HostWgAcc<C>::Reg;
  template <bool TransA, bool TransB, int ScaleA, int ScaleB>
  static void mma(const uint32_t* a, uint64_t desc_b, Reg* d, int scale_d) {
    static_assert(sizeof(A) == 2 || !TransB, "this wgmma type reads K-major operands only (no transpose)");
    host_wgmma<A, B, N, HostWgAcc<C>::kind, false, TransB, ScaleA, ScaleB>(
        "wgmma.mma_async (RS)", 0, a, desc_b, reinterpret_cast<uint32_t*>(d), scale_d);
  }
};

}  // namespace detail

template <class A, class B, class C, int N, bool TransA = false, bool TransB = false, int ScaleA = 1, int ScaleB = 1,
          class D>
inline void wgmma_ss(uint64_t desc_a, uint64_t desc_b, D* acc, int scale_d) {
  using Op = detail::WgmmaSS<A, B, C, N>;
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "tl::wgmma_ss: N must be a multiple of 8 in [8, 256]");
  static_assert(Op::kSupported, "tl::wgmma_ss: this (A, B, C, N) has no wgmma");
  Op::template mma<TransA, TransB, ScaleA, ScaleB>(desc_a, desc_b, reinterpret_cast<typename Op::Reg*>(acc), scale_d);
}

template <class A, class B, class C, int N, bool TransB = false, int ScaleA = 1, int ScaleB = 1, class D>
inline void wgmma_rs(const uint32_t* a, uint64_t desc_b, D* acc, int scale_d) {
  using Op = detail::WgmmaRS<A, B, C, N>;
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "tl::wgmma_rs: N must be a multiple of 8 in [8, 256]");
  static_assert(Op::kSupported, "tl::wgmma_rs: this (A, B, C, N) has no wgmma");
  Op::template mma<false, TransB, ScaleA, ScaleB>(a, desc_b, reinterpret_cast<typename Op::Reg*>(acc), scale_d);
}

template <class A, class B, class C, int N>
inline constexpr int wgmma_acc_regs() {
  return detail::WgmmaSS<A, B, C, N>::kRegs;
}

}  // namespace tl
