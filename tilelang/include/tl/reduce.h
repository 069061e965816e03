// tl/reduce.h -- butterfly all-reductions across lanes of a warp (and a block).
//
// A fragment row is usually spread over a few lanes: in an mma.sync / wgmma
// accumulator the 4 lanes 4g..4g+3 share a row, so a row reduction is
//   v = tl::warp_allreduce<tl::SumOp, /*Lanes=*/4, /*Stride=*/1>(v);
// and a column reduction over the 8 row-groups of a warp is
//   v = tl::warp_allreduce<tl::MaxOp, /*Lanes=*/8, /*Stride=*/4>(v);
// Group members are lanes {base + i*Stride, i < Lanes}; every member ends with
// the full result.  All 32 lanes must execute the call (full-mask shuffles).
#pragma once

#include "common.h"

namespace tl {

struct SumOp {
  template <class T>
  static TL_DEVICE T apply(T a, T b) {
    return a + b;
  }
};
struct MaxOp {
  template <class T>
  static TL_DEVICE T apply(T a, T b) {
    return tl::max(a, b);
  }
};
struct MinOp {
  template <class T>
  static TL_DEVICE T apply(T a, T b) {
    return tl::min(a, b);
  }
};
struct BitAndOp {
  template <class T>
  static TL_DEVICE T apply(T a, T b) {
    return a & b;
  }
};
struct BitOrOp {
  template <class T>
  static TL_DEVICE T apply(T a, T b) {
    return a | b;
  }
};

namespace detail {
TL_HOST_DEVICE constexpr bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }
}  // namespace detail

template <class Op, int Lanes, int Stride = 1, class T>
TL_DEVICE T warp_allreduce(T value) {
  static_assert(detail::is_pow2(Lanes), "tl::warp_allreduce: Lanes must be a power of two");
  static_assert(detail::is_pow2(Stride), "tl::warp_allreduce: Stride must be a power of two");
  static_assert(Lanes * Stride <= 32,
                "tl::warp_allreduce: the group (Lanes * Stride) must fit in one warp");
#pragma unroll
  for (int offset = (Lanes / 2) * Stride; offset >= Stride; offset /= 2) {
    value = Op::apply(value, __shfl_xor_sync(0xffffffffu, value, offset, 32));
  }
  return value;
}

struct BitXorOp {
  template <class T>
  static TL_DEVICE T apply(T a, T b) {
    return a ^ b;
  }
};

// The same over `lanes` (a run-time power of two up to 32) consecutive lanes: the copies of a
// T.alloc_reducer row (T.finalize_reducer); the call sites pass a constant, so it unrolls.
template <class Op, class T>
TL_DEVICE T lanes_allreduce(T value, int lanes) {
#pragma unroll
  for (int offset = lanes / 2; offset > 0; offset /= 2) {
    value = Op::apply(value, __shfl_xor_sync(0xffffffffu, value, offset, 32));
  }
  return value;
}

template <int Lanes, int Stride = 1, class T>
TL_DEVICE T warp_reduce_sum(T v) {
  return warp_allreduce<SumOp, Lanes, Stride>(v);
}
template <int Lanes, int Stride = 1, class T>
TL_DEVICE T warp_reduce_max(T v) {
  return warp_allreduce<MaxOp, Lanes, Stride>(v);
}
template <int Lanes, int Stride = 1, class T>
TL_DEVICE T warp_reduce_min(T v) {
  return warp_allreduce<MinOp, Lanes, Stride>(v);
}

// All-reduce over a group of `Threads` threads (a multiple of 32: whole warps,
// aligned to a multiple of Threads in the block).  `scratch` is shared memory
// for Threads / 32 values.  Synchronises with a named barrier so that other
// warps of the block are not stalled; concurrent groups need distinct
// BarrierIds (0 is __syncthreads' barrier and is refused).  Every thread of
// the group must call it; every one gets the result.
template <class Op, int Threads, int BarrierId = 1, class T>
TL_DEVICE T block_allreduce(T value, T* scratch) {
  static_assert(Threads % 32 == 0 && Threads <= 1024,
                "tl::block_allreduce: Threads must be a multiple of 32, at most 1024");
  static_assert(BarrierId > 0 && BarrierId < 16,
                "tl::block_allreduce: BarrierId must be in [1, 16) (0 is __syncthreads)");
  constexpr int kWarps = Threads / 32;
  value = warp_allreduce<Op, 32>(value);
  if constexpr (kWarps == 1) {
    return value;
  } else {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int warp = (static_cast<int>(threadIdx.x) / 32) % kWarps;
    if (lane == 0) scratch[warp] = value;
    asm volatile("bar.sync %0, %1;\n" ::"n"(BarrierId), "n"(Threads) : "memory");
    T total = scratch[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) total = Op::apply(total, scratch[w]);
    // Second barrier: nobody may overwrite scratch (next call) before all read it.
    asm volatile("bar.sync %0, %1;\n" ::"n"(BarrierId), "n"(Threads) : "memory");
    return total;
  }
}

}  // namespace tl

// Plain names for the lowering's calls (transform/cuda/ops/reducer.py).
template <class T> TL_DEVICE T tl_lanes_allreduce_sum(T v, int lanes) { return tl::lanes_allreduce<tl::SumOp>(v, lanes); }
template <class T> TL_DEVICE T tl_lanes_allreduce_max(T v, int lanes) { return tl::lanes_allreduce<tl::MaxOp>(v, lanes); }
template <class T> TL_DEVICE T tl_lanes_allreduce_min(T v, int lanes) { return tl::lanes_allreduce<tl::MinOp>(v, lanes); }
template <class T> TL_DEVICE T tl_lanes_allreduce_bitand(T v, int lanes) { return tl::lanes_allreduce<tl::BitAndOp>(v, lanes); }
template <class T> TL_DEVICE T tl_lanes_allreduce_bitor(T v, int lanes) { return tl::lanes_allreduce<tl::BitOrOp>(v, lanes); }
template <class T> TL_DEVICE T tl_lanes_allreduce_bitxor(T v, int lanes) { return tl::lanes_allreduce<tl::BitXorOp>(v, lanes); }
