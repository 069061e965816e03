// host_tma.h -- tl/mbarrier.h and tl/tma.h on the host.
//
// mbarrier: a table keyed by the barrier's shared-memory address holds its arrival count, the
// arrivals still pending, the pending transaction bytes and the phase bit; a phase completes
// (the bit flips, arrivals re-arm) when no arrival and no byte is pending. Waits block on a
// condition variable until the phase with the asked parity has completed (failing the run
// after the barrier timeout, as every host collective does).
// TMA: a load reads global memory when issued; its bytes land in shared memory (and complete
// their transaction count) when a thread next waits on its barrier, so a read of the tile
// before that wait sees the old bytes. Stores write through at once. The tensor map is the host's own 128-byte record
// (HostProgram packs it: base buffer argument, dims innermost first, byte strides, box,
// element size, swizzle); a load fills the box densely, innermost dim first, zero outside the
// tensor, with the swizzle applied to the shared byte address (16-byte chunk bits [4, 7) XOR
// bits [7, 10) for 128 B, [4, 6) ^ [7, 9) for 64 B, bit 4 ^ bit 7 for 32 B), then completes its
// bytes on the barrier. A store writes the box back, dropping elements outside the tensor.
// Im2col maps (magic "I2CL"; box[0] channels per pixel, box[1] pixels, box[2..3] the (w, h)
// traversal strides, lo / hi the bounding box's corner offsets in (w, h)): a load walks `pixels`
// positions of the bounding box from (w, h, n) -- w fastest by its stride, wrapping to the box's
// first w on the next h row, then to the next image -- and reads channels [c, c + channels) of
// each at (w + off_w, h + off_h), zero outside the tensor; pixel i is row i of the box.
// Multicast and cluster barriers have no host meaning: they fail the run.
// Part of host_cuda.h (included by host_tl.h).
#pragma once

#include <map>

#include "../../include/cpu/tl_smem_desc.h"  // the swizzle and descriptor rules, shared with the CPU backend

static std::vector<char*> tl_host_args;  // the kernel's argument payloads (buffers: their memory)

namespace tl {

struct alignas(64) TensorMap {  // the host's record, 128 bytes as the CUtensorMap it stands for
  uint32_t magic;
  int32_t arg;     // index of the base buffer among the kernel's arguments
  int32_t rank;
  int32_t elem;    // bytes per element
  int32_t swizzle; // 0, 32, 64 or 128
  int32_t box[5];  // innermost first
  int64_t dims[5];
  int64_t strides[5];  // bytes; strides[0] = elem
  int16_t lo[2], hi[2];  // im2col maps: the bounding box's corners in (w, h)
};
static_assert(sizeof(TensorMap) == 128, "host TensorMap must be 128 bytes");

namespace detail {

struct HostMbar {
  int count = 0, pending = 0;
  long long tx = 0;
  int phase = 0;
  // TMA bytes issued against this barrier, not yet in shared memory: (shared address, bytes).
  // They land when a thread next waits on (or probes) the barrier, and complete their tx then.
  std::vector<std::pair<uint32_t, std::vector<unsigned char>>> landing;
};
static std::mutex tl_host_mbar_mu;
static std::condition_variable tl_host_mbar_cv;
static std::map<uint32_t, HostMbar> tl_host_mbars;

inline HostMbar& host_mbar(uint64_t* bar, const char* op) {
  const uint32_t a = smem_addr(bar);
  auto it = tl_host_mbars.find(a);
  if (it == tl_host_mbars.end() || it->second.count == 0)
    tl_host_fail("%s: the mbarrier at shared address 0x%x was not initialised", op, a);
  return it->second;
}

inline void host_mbar_settle(HostMbar& b) {
  if (b.pending == 0 && b.tx == 0) {
    b.phase ^= 1;
    b.pending = b.count;
    tl_host_mbar_cv.notify_all();
  }
}

inline void host_complete_tx(uint64_t* bar, long long bytes) {
  std::lock_guard<std::mutex> g(tl_host_mbar_mu);
  HostMbar& b = host_mbar(bar, "complete_tx");
  b.tx -= bytes;
  host_mbar_settle(b);
}

// Queue bytes for `bar` (caller holds no lock): they reach shared memory at its next wait.
inline void host_tma_defer(uint64_t* bar, std::vector<std::pair<uint32_t, std::vector<unsigned char>>>&& writes) {
  std::lock_guard<std::mutex> g(tl_host_mbar_mu);
  HostMbar& b = host_mbar(bar, "a TMA copy's mbarrier");
  for (auto& w : writes) b.landing.push_back(std::move(w));
  tl_host_mbar_cv.notify_all();  // a thread already waiting on the barrier lands them
}

// Land `b`'s queued bytes and complete their transaction count (tl_host_mbar_mu held).
inline void host_mbar_land(HostMbar& b) {
  if (b.landing.empty()) return;
  long long bytes = 0;
  for (auto& w : b.landing) {
    std::memcpy(tl_smem + w.first, w.second.data(), w.second.size());
    bytes += static_cast<long long>(w.second.size());
  }
  b.landing.clear();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  b.tx -= bytes;
  host_mbar_settle(b);
}

// The swizzled shared byte address `a` (the CPU backend's rule too: cpu/tl_smem_desc.h).
inline uint32_t host_tma_swizzle(uint32_t a, int swizzle) { return tl_swizzle_addr(a, swizzle); }

// Walk the box: f(global byte pointer or nullptr when outside the tensor, shared byte address).
template <class F>
inline void host_tma_box(const TensorMap* m, void* smem, const int* c, const char* op, F f) {
  if (m->magic != 0x544d4150u) tl_host_fail("%s: not a host tensor map", op);
  char* base = tl_host_args.at(m->arg);
  const uint32_t s0 = smem_addr(smem);
  if (m->swizzle && s0 % (8 * m->swizzle)) tl_host_fail("%s: a %d-byte swizzled box at shared 0x%x is not aligned", op, m->swizzle, s0);
  long long n = 1;
  for (int d = 0; d < m->rank; ++d) n *= m->box[d];
  for (long long i = 0; i < n; ++i) {
    long long rest = i, off = 0;
    bool inside = true;
    for (int d = 0; d < m->rank; ++d) {
      const long long x = c[d] + rest % m->box[d];
      rest /= m->box[d];
      if (x < 0 || x >= m->dims[d]) inside = false;
      off += x * m->strides[d];
    }
    const uint32_t sa = host_tma_swizzle(s0 + static_cast<uint32_t>(i * m->elem), m->swizzle);
    tl_host_smem_at(sa, m->elem, op);
    f(inside ? base + off : nullptr, sa);
  }
}

inline void host_tma_load(const void* desc, uint64_t* bar, void* smem, const int* c) {
  const TensorMap* m = static_cast<const TensorMap*>(desc);
  std::vector<std::pair<uint32_t, std::vector<unsigned char>>> writes;
  host_tma_box(m, smem, c, "tma_load", [&](const char* g, uint32_t sa) {
    std::vector<unsigned char> v(m->elem, 0);
    if (g) std::memcpy(v.data(), g, m->elem);  // the global bytes as of the issue
    writes.emplace_back(sa, std::move(v));
  });
  host_tma_defer(bar, std::move(writes));
}

// An im2col load (4-d NHWC map): see the header comment.
inline void host_tma_load_im2col(const void* desc, uint64_t* bar, void* smem, int c, int w, int h, int n,
                                 int off_w, int off_h) {
  const TensorMap* m = static_cast<const TensorMap*>(desc);
  if (m->magic != 0x4c433249u || m->rank != 4) tl_host_fail("tma_load_im2col: not a host 4-d im2col tensor map");
  const char* base = tl_host_args.at(m->arg);
  const int ch = m->box[0], sw = m->box[2], sh = m->box[3];
  const long long pixels = m->box[1];
  const long long nw = (m->dims[1] - 1 + m->hi[0] - m->lo[0]) / sw + 1;
  const long long nh = (m->dims[2] - 1 + m->hi[1] - m->lo[1]) / sh + 1;
  if ((w - m->lo[0]) % sw || (h - m->lo[1]) % sh || w < m->lo[0] || h < m->lo[1] || (w - m->lo[0]) / sw >= nw ||
      (h - m->lo[1]) / sh >= nh)
    tl_host_fail("tma_load_im2col: start (w %d, h %d) is not a position of the bounding box", w, h);
  const uint32_t s0 = smem_addr(smem);
  if (m->swizzle && s0 % (8 * m->swizzle)) tl_host_fail("tma_load_im2col: a %d-byte swizzled box at 0x%x is not aligned", m->swizzle, s0);
  const long long first = (static_cast<long long>(n) * nh + (h - m->lo[1]) / sh) * nw + (w - m->lo[0]) / sw;
  std::vector<std::pair<uint32_t, std::vector<unsigned char>>> writes;
  for (long long i = 0; i < pixels; ++i) {
    const long long p = first + i;
    const long long x = m->lo[0] + (p % nw) * sw + off_w, y = m->lo[1] + (p / nw % nh) * sh + off_h, b = p / (nw * nh);
    for (int j = 0; j < ch; ++j) {
      const long long z = c + j;
      const bool inside = z >= 0 && z < m->dims[0] && x >= 0 && x < m->dims[1] && y >= 0 && y < m->dims[2] && b < m->dims[3];
      const uint32_t sa = host_tma_swizzle(s0 + static_cast<uint32_t>((i * ch + j) * m->elem), m->swizzle);
      tl_host_smem_at(sa, m->elem, "tma_load_im2col");
      std::vector<unsigned char> v(m->elem, 0);
      if (inside) std::memcpy(v.data(), base + z * m->strides[0] + x * m->strides[1] + y * m->strides[2] + b * m->strides[3], m->elem);
      writes.emplace_back(sa, std::move(v));
    }
  }
  host_tma_defer(bar, std::move(writes));
}

inline void host_tma_store_now(const void* desc, const void* smem, const int* c) {
  const TensorMap* m = static_cast<const TensorMap*>(desc);
  host_tma_box(m, const_cast<void*>(smem), c, "tma_store", [&](char* g, uint32_t sa) {
    if (g) std::memcpy(g, tl_smem + sa, m->elem);
  });
}
// A TMA store reads its shared tile at some time before the issuing thread's
// cp.async.bulk.wait_group.read lets it go: the host reads it at that wait, the latest moment,
// so a tile overwritten before its issuer waited (or waited by another thread) stores the new
// bytes. Per thread: stores not yet committed, and committed groups oldest first.
struct HostTmaStore {
  const void* desc;
  const void* smem;
  int c[5];
};
static thread_local std::vector<HostTmaStore> tl_host_st_open;
static thread_local std::vector<std::vector<HostTmaStore>> tl_host_st_committed;
inline void host_tma_store(const void* desc, const void* smem, const int* c) {
  HostTmaStore s{desc, smem, {c[0], c[1], c[2], c[3], c[4]}};
  tl_host_st_open.push_back(s);
}
inline void host_tma_store_drain(size_t keep) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto& g = tl_host_st_committed;
  const size_t done = g.size() > keep ? g.size() - keep : 0;
  for (size_t b = 0; b < done; ++b)
    for (auto& s : g[b]) host_tma_store_now(s.desc, s.smem, s.c);
  g.erase(g.begin(), g.begin() + done);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace detail

// ------------------------------------------------------------- mbarrier
inline void mbarrier_init(uint64_t* bar, uint32_t arrive_count) {
  std::lock_guard<std::mutex> g(detail::tl_host_mbar_mu);
  detail::HostMbar& b = detail::tl_host_mbars[smem_addr(bar)];
  b.count = b.pending = static_cast<int>(arrive_count);
  b.tx = 0;
  b.phase = 0;
  b.landing.clear();
}
inline void mbarrier_inval(uint64_t* bar) {
  std::lock_guard<std::mutex> g(detail::tl_host_mbar_mu);
  detail::tl_host_mbars.erase(smem_addr(bar));
}
template <int kGuard = 0>
inline void fence_barrier_init() { std::atomic_thread_fence(std::memory_order_seq_cst); }

inline uint64_t mbarrier_arrive(uint64_t* bar) {
  std::lock_guard<std::mutex> g(detail::tl_host_mbar_mu);
  detail::HostMbar& b = detail::host_mbar(bar, "mbarrier_arrive");
  const uint64_t token = static_cast<uint64_t>(b.phase);
  if (--b.pending < 0) tl_host_fail("mbarrier_arrive: more arrivals than the barrier's count (%d)", b.count);
  detail::host_mbar_settle(b);
  return token;
}
template <int kGuard = 0>
inline void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t tx_bytes) {
  std::lock_guard<std::mutex> g(detail::tl_host_mbar_mu);
  detail::HostMbar& b = detail::host_mbar(bar, "mbarrier_arrive_expect_tx");
  b.tx += tx_bytes;
  if (--b.pending < 0) tl_host_fail("mbarrier_arrive_expect_tx: more arrivals than the barrier's count (%d)", b.count);
  detail::host_mbar_settle(b);
}
template <int kGuard = 0>
inline void mbarrier_expect_tx(uint64_t* bar, uint32_t tx_bytes) {
  std::lock_guard<std::mutex> g(detail::tl_host_mbar_mu);
  detail::host_mbar(bar, "mbarrier_expect_tx").tx += tx_bytes;
}
template <int kGuard = 0>
inline void mbarrier_arrive_cluster(uint64_t*, uint32_t) {
  tl_host_fail("mbarrier_arrive_cluster: clusters are not emulated on the host");
}
inline bool mbarrier_test_wait(uint64_t* bar, uint32_t phase) {
  std::lock_guard<std::mutex> g(detail::tl_host_mbar_mu);
  detail::HostMbar& b = detail::host_mbar(bar, "mbarrier_test_wait");
  detail::host_mbar_land(b);
  return static_cast<uint32_t>(b.phase) != (phase & 1u);
}
inline void mbarrier_wait(uint64_t* bar, uint32_t phase) {
  std::unique_lock<std::mutex> lk(detail::tl_host_mbar_mu);
  detail::HostMbar* b = &detail::host_mbar(bar, "mbarrier_wait");
  tl_host_wait(lk, detail::tl_host_mbar_cv, [&] {
    detail::host_mbar_land(*b);  // bytes issued by now land before the phase is judged
    return static_cast<uint32_t>(b->phase) != (phase & 1u);
  }, "an mbarrier wait");
}
inline bool mbarrier_try_wait(uint64_t* bar, uint32_t phase) {
  mbarrier_wait(bar, phase);  // a try_wait may suspend; here it returns once the phase completed
  return true;
}

// ------------------------------------------------------------- TMA
template <int kG = 0>
inline void tma_load(const void* desc, uint64_t* bar, void* smem, int c0) {
  const int c[5] = {c0, 0, 0, 0, 0};
  detail::host_tma_load(desc, bar, smem, c);
}
template <int kG = 0>
inline void tma_load(const void* desc, uint64_t* bar, void* smem, int c0, int c1) {
  const int c[5] = {c0, c1, 0, 0, 0};
  detail::host_tma_load(desc, bar, smem, c);
}
template <int kG = 0>
inline void tma_load(const void* desc, uint64_t* bar, void* smem, int c0, int c1, int c2) {
  const int c[5] = {c0, c1, c2, 0, 0};
  detail::host_tma_load(desc, bar, smem, c);
}
template <int kG = 0>
inline void tma_load(const void* desc, uint64_t* bar, void* smem, int c0, int c1, int c2, int c3) {
  const int c[5] = {c0, c1, c2, c3, 0};
  detail::host_tma_load(desc, bar, smem, c);
}
template <int kG = 0>
inline void tma_load(const void* desc, uint64_t* bar, void* smem, int c0, int c1, int c2, int c3, int c4) {
  const int c[5] = {c0, c1, c2, c3, c4};
  detail::host_tma_load(desc, bar, smem, c);
}
template <int kG = 0>
inline void tma_load_im2col(const void* desc, uint64_t* bar, void* smem, int c, int w, int h, int n, uint16_t off_w,
                            uint16_t off_h) {
  detail::host_tma_load_im2col(desc, bar, smem, c, w, h, n, off_w, off_h);
}
template <int kG = 0, class... C>
inline void tma_load_multicast(const void*, uint64_t*, void*, uint16_t, C...) {
  tl_host_fail("tma_load_multicast: clusters are not emulated on the host");
}
template <int kG = 0>
inline void tma_store(const void* desc, const void* smem, int c0) {
  const int c[5] = {c0, 0, 0, 0, 0};
  detail::host_tma_store(desc, smem, c);
}
template <int kG = 0>
inline void tma_store(const void* desc, const void* smem, int c0, int c1) {
  const int c[5] = {c0, c1, 0, 0, 0};
  detail::host_tma_store(desc, smem, c);
}
template <int kG = 0>
inline void tma_store(const void* desc, const void* smem, int c0, int c1, int c2) {
  const int c[5] = {c0, c1, c2, 0, 0};
  detail::host_tma_store(desc, smem, c);
}
template <int kG = 0>
inline void tma_store(const void* desc, const void* smem, int c0, int c1, int c2, int c3) {
  const int c[5] = {c0, c1, c2, c3, 0};
  detail::host_tma_store(desc, smem, c);
}
template <int kG = 0>
inline void tma_store(const void* desc, const void* smem, int c0, int c1, int c2, int c3, int c4) {
  const int c[5] = {c0, c1, c2, c3, c4};
  detail::host_tma_store(desc, smem, c);
}
template <int kG = 0>
inline void tma_store_commit() {
  detail::tl_host_st_committed.push_back(std::move(detail::tl_host_st_open));
  detail::tl_host_st_open.clear();
}
template <int N>
inline void tma_store_wait() { detail::host_tma_store_drain(N); }
template <int kG = 0>
inline void tma_store_wait_all() { detail::host_tma_store_drain(0); }
// cp.async.bulk.wait_group N (writes done too): the stores have read their tiles by then as well.
template <int N>
inline void tma_store_wait_group() { detail::host_tma_store_drain(N); }
template <int kG = 0>
inline void tma_store_arrive() { tma_store_commit<kG>(); }
template <int N>
inline bool tl_shuffle_elect() { return threadIdx.x % N == 0; }
template <int N, bool kRead>
inline void tma_store_wait() { detail::host_tma_store_drain(N); }
// Between blocks and at the end: a store its thread never committed and waited for would read
// shared memory the block no longer owns.
inline void tl_host_tma_store_block_start() {
  if (!detail::tl_host_st_open.empty() || !detail::tl_host_st_committed.empty())
    tl_host_fail("a TMA store was not committed and waited for (cp.async.bulk.wait_group) by its own thread "
                 "before the block ended");
}
template <int kG = 0>
inline void tma_prefetch_descriptor(const void*) {}
template <int kG = 0>
inline void bulk_copy_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  const uint32_t a = smem_addr(smem_dst);
  tl_host_smem_at(a, 16, "bulk_copy_g2s");
  std::vector<std::pair<uint32_t, std::vector<unsigned char>>> writes;
  const unsigned char* g = static_cast<const unsigned char*>(gmem_src);
  writes.emplace_back(a, std::vector<unsigned char>(g, g + bytes));
  detail::host_tma_defer(bar, std::move(writes));
}
template <int kG = 0>
inline void bulk_copy_s2g(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  std::memcpy(gmem_dst, smem_src, bytes);
}

}  // namespace tl

namespace tl {
// cp.async.mbarrier.arrive.noinc: the barrier gets this thread's arrival once its prior
// cp.async copies land; here they land now (committed or not) and the arrival follows.
inline void cp_async_mbarrier_arrive(uint64_t* bar) {
  for (auto& g : detail::tl_host_cp_committed) detail::host_cp_land(g);
  detail::tl_host_cp_committed.clear();
  detail::host_cp_land(detail::tl_host_cp_open);
  detail::tl_host_cp_open.clear();
  mbarrier_arrive(bar);
}
// Without .noinc: the copies land now; the raised pending count and the arrival cancel out.
inline void cp_async_mbarrier_arrive_inc(uint64_t*) {
  for (auto& g : detail::tl_host_cp_committed) detail::host_cp_land(g);
  detail::tl_host_cp_committed.clear();
  detail::host_cp_land(detail::tl_host_cp_open);
  detail::tl_host_cp_open.clear();
}
}  // namespace tl
