// tl/cp_async.h -- asynchronous global->shared copies (cp.async, sm_80+).
//
// cp.async.ca caches in L1 and copies 4, 8 or 16 bytes; cp.async.cg bypasses
// L1 and copies only 16 bytes.  Both need the shared and global addresses
// aligned to the copy size.  The zero-fill variants pass src-size = 0 when the
// predicate is false: nothing is read and the destination is filled with
// zeros, which is how out-of-range elements of a global tile become zeros
// without a branch around the copy.
//
// Copies are grouped: commit() closes the current group, wait<N>() blocks until
// at most N most-recent groups are still in flight (wait<0> = all done).  A
// __syncthreads() is still needed before other threads read the data.
#pragma once

#include "common.h"

namespace tl {

namespace detail {
template <int Bytes, bool Cg>
TL_DEVICE void check_cp_async() {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16,
                "tl::cp_async: Bytes must be 4, 8 or 16");
  static_assert(!Cg || Bytes == 16, "tl::cp_async: the .cg (L2-only) form copies 16 bytes only");
  static_assert(TL_ARCH_SM80 || always_false_int<Bytes>::value, "cp.async needs sm_80 or newer");
}
}  // namespace detail

// Copy only `src_bytes` (0..Bytes) real bytes and zero the rest: handles a
// ragged vector at the edge of a row (0: nothing is read, the Bytes are zeroed).
template <int Bytes, bool Cg = (Bytes == 16)>
TL_DEVICE void cp_async_partial(uint32_t smem_dst, const void* gmem_src, int src_bytes) {
  detail::check_cp_async<Bytes, Cg>();
  if constexpr (Cg) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_dst), "l"(gmem_src), "n"(Bytes),
                 "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_dst), "l"(gmem_src), "n"(Bytes),
                 "r"(src_bytes)
                 : "memory");
  }
}

template <int Bytes, bool Cg = (Bytes == 16)>
TL_DEVICE void cp_async_partial(void* smem_dst, const void* gmem_src, int src_bytes) {
  cp_async_partial<Bytes, Cg>(smem_addr(smem_dst), gmem_src, src_bytes);
}

// Copy Bytes from global to shared.  Cg defaults to true for 16-byte copies
// (streaming tiles should not pollute L1).  The shared side is a 32-bit
// shared-memory address (smem_addr(tile) + byte offset) or a generic pointer.
// Code that issues many copies into one tile passes `smem_addr(&tile[0]) +
// offset * sizeof(T)`: ptxas then folds the constant part of each offset into
// the instruction ([R+imm]) rather than keeping one address register per copy.
template <int Bytes, bool Cg = (Bytes == 16)>
TL_DEVICE void cp_async(uint32_t smem_dst, const void* gmem_src) {
  detail::check_cp_async<Bytes, Cg>();
  if constexpr (Cg) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], %2;\n" ::"r"(smem_dst), "l"(gmem_src), "n"(Bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_dst), "l"(gmem_src), "n"(Bytes)
                 : "memory");
  }
}

template <int Bytes, bool Cg = (Bytes == 16)>
TL_DEVICE void cp_async(void* smem_dst, const void* gmem_src) {
  cp_async<Bytes, Cg>(smem_addr(smem_dst), gmem_src);
}

// Like cp_async, but when `pred` is false no global memory is read and the
// Bytes of the destination are set to zero.
template <int Bytes, bool Cg = (Bytes == 16)>
TL_DEVICE void cp_async_zfill(uint32_t smem_dst, const void* gmem_src, bool pred) {
  cp_async_partial<Bytes, Cg>(smem_dst, gmem_src, pred ? Bytes : 0);
}

template <int Bytes, bool Cg = (Bytes == 16)>
TL_DEVICE void cp_async_zfill(void* smem_dst, const void* gmem_src, bool pred) {
  cp_async_partial<Bytes, Cg>(smem_addr(smem_dst), gmem_src, pred ? Bytes : 0);
}

TL_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
TL_DEVICE void cp_async_wait() {
  static_assert(N >= 0, "tl::cp_async_wait<N>: N must be >= 0");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Commits the open group, then waits for everything.
TL_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Make the mbarrier at `bar` track completion of this thread's prior
// cp.async operations (arrive-on without bumping the pending count).
TL_DEVICE void cp_async_mbarrier_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}
// The same without .noinc: the pending count is raised first, so the
// barrier's phase waits for the copies without this thread's arrival counting.
TL_DEVICE void cp_async_mbarrier_arrive_inc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.shared.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}

}  // namespace tl
