// tl/tma.h -- Tensor Memory Accelerator (cp.async.bulk.tensor), sm_90.
//
// A TMA copy moves one box of a tensor described by a 128-byte tensor map
// (encoded on the host by cuTensorMapEncodeTiled, see backend/cuda/driver.py)
// between global and shared memory.  The kernel receives the map by value:
//
//   extern "C" __global__ void k(const __grid_constant__ tl::TensorMap tmap) {
//     ... tl::tma_load(&tmap, &bar, smem, x, y);   // x = innermost coordinate
//
// Coordinates are element indices, innermost dimension first (c0 is the
// contiguous one), and may be negative or past the end: out-of-range
// elements are filled with zeros on loads and dropped on stores.
// Loads signal completion through an mbarrier (complete_tx::bytes): arm it
// with mbarrier_arrive_expect_tx(bar, box_bytes) and wait on its phase.
// Stores are tracked by bulk groups: tma_store_commit() (or tma_store_arrive()), tma_store_wait<N>().
// Before a store, fence_proxy_async() makes prior smem writes visible to TMA.
#pragma once

#include "common.h"
#include "sync.h"

namespace tl {

// The opaque CUtensorMap (cuda.h is a host header NVRTC does not have).
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

#if TL_ARCH_SM90
#define TL_TMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TL_TMA_ASM(...)
#endif
#define TL_TMA_GUARD(kG)                                                     \
  static_assert(TL_ARCH_SM90 || detail::always_false_int<kG>::value,         \
                "TMA (cp.async.bulk.tensor) needs sm_90 or newer")

// ------------------------------------------------------------- loads
// tma_load(desc, bar, smem_dst, c0 [, c1 [, c2 [, c3 [, c4]]]])
template <int kG = 0>
TL_DEVICE void tma_load(const void* desc, uint64_t* bar, void* smem_dst, int c0) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3}], [%2];\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "r"(c0)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_load(const void* desc, uint64_t* bar, void* smem_dst, int c0, int c1) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_load(const void* desc, uint64_t* bar, void* smem_dst, int c0, int c1,
                        int c2) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_load(const void* desc, uint64_t* bar, void* smem_dst, int c0, int c1,
                        int c2, int c3) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_load(const void* desc, uint64_t* bar, void* smem_dst, int c0, int c1,
                        int c2, int c3, int c4) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// Im2col mode (a map from cuTensorMapEncodeIm2col over an NHWC tensor): the box is
// `pixelsPerColumn` rows of `channelsPerPixel` channels.  (c, w, h, n) is the first
// pixel's position in the map's bounding box, which the load walks (w fastest, by the
// map's traversal strides, wrapping to the next h row, then the next image); each pixel
// is read at (w + off_w, h + off_h), zeros outside the image.  Convolution: the start
// is output pixel (n, oh, ow)'s window corner (ow*S - P, oh*S - P), the offsets the
// filter tap (kw*D, kh*D).
template <int kG = 0>
TL_DEVICE void tma_load_im2col(const void* desc, uint64_t* bar, void* smem_dst, int c, int w,
                               int h, int n, uint16_t off_w, uint16_t off_h) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "r"(c), "r"(w), "r"(h), "r"(n), "h"(off_w), "h"(off_h)
      : "memory");
}

// Multicast: the same box lands at the same smem offset (and signals the
// barrier at the same offset) in every CTA of the cluster whose bit is set
// in `cta_mask`.
template <int kG = 0>
TL_DEVICE void tma_load_multicast(const void* desc, uint64_t* bar, void* smem_dst,
                                  uint16_t cta_mask, int c0, int c1) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_load_multicast(const void* desc, uint64_t* bar, void* smem_dst,
                                  uint16_t cta_mask, int c0, int c1, int c2) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// ------------------------------------------------------------- stores
// tma_store(desc, smem_src, c0 [, c1 [, c2 [, c3 [, c4]]]])
template <int kG = 0>
TL_DEVICE void tma_store(const void* desc, const void* smem_src, int c0) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];\n" ::"l"(
                 desc),
             "r"(smem_addr(smem_src)), "r"(c0)
             : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_store(const void* desc, const void* smem_src, int c0, int c1) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(desc),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_store(const void* desc, const void* smem_src, int c0, int c1, int c2) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          desc),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_store(const void* desc, const void* smem_src, int c0, int c1, int c2,
                         int c3) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          desc),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_store(const void* desc, const void* smem_src, int c0, int c1, int c2, int c3,
                         int c4) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group"
      " [%0, {%2, %3, %4, %5, %6}], [%1];\n" ::"l"(desc),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// Close the current bulk group of stores.
template <int kG = 0>
TL_DEVICE void tma_store_commit() {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Wait until at most N bulk groups still *read* shared memory (the smem
// buffer can then be reused; global visibility needs tma_store_wait_all).
template <int N>
TL_DEVICE void tma_store_wait() {
  static_assert(N >= 0, "tl::tma_store_wait<N>: N must be >= 0");
  TL_TMA_GUARD(N);
  TL_TMA_ASM("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int kG = 0>
TL_DEVICE void tma_store_wait_all() {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
// Wait until at most N bulk groups are still in flight (writes included).
template <int N>
TL_DEVICE void tma_store_wait_group() {
  static_assert(N >= 0, "tl::tma_store_wait_group<N>: N must be >= 0");
  TL_TMA_GUARD(N);
  TL_TMA_ASM("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// The same steps by the public TileLang's names (T.tma_store_arrive / T.tma_store_wait and
// T.tma_copy stores emit these): arrive closes a bulk group; wait<N, kRead> leaves at most N
// groups in flight, until they have read shared memory (kRead) or completed.
template <int kG = 0>
TL_DEVICE void tma_store_arrive() {
  tma_store_commit<kG>();
}
template <int N, bool kRead>
TL_DEVICE void tma_store_wait() {
  if (kRead) {
    tma_store_wait<N>();
  } else {
    tma_store_wait_group<N>();
  }
}

// ------------------------------------------------------------- misc
// True in one thread of every N (threads 0, N, 2N, ... of a 1-d block): the thread that issues a
// T.tma_copy of each run of N threads (leader_scope_threads=N; the public TileLang's name).
template <int N>
TL_DEVICE bool tl_shuffle_elect() {
  static_assert(N > 0, "tl::tl_shuffle_elect<N>: N must be > 0");
  return threadIdx.x % N == 0;
}

// Pull the descriptor into the TMA unit's cache ahead of the first copy.
template <int kG = 0>
TL_DEVICE void tma_prefetch_descriptor(const void* desc) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM("prefetch.tensormap [%0];\n" ::"l"(desc) : "memory");
}

// Plain bulk copy (no tensor map) of `bytes` (multiple of 16, both addresses
// 16-byte aligned) from global to shared, completing on `bar`.
template <int kG = 0>
TL_DEVICE void bulk_copy_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes,
                             uint64_t* bar) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Plain bulk copy from shared to global, tracked by bulk groups like stores.
template <int kG = 0>
TL_DEVICE void bulk_copy_s2g(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  TL_TMA_GUARD(kG);
  TL_TMA_ASM("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem_dst),
             "r"(smem_addr(smem_src)), "r"(bytes)
             : "memory");
}

#undef TL_TMA_ASM
#undef TL_TMA_GUARD

}  // namespace tl
