// tl/wgmma_desc.h -- wgmma shared-memory matrix descriptors: bit packing only, so the device
// path (wgmma.h) and the host emulation (testing/host_cuda/host_wgmma.h) build them one way.
#pragma once

#include "common.h"

namespace tl {

// ------------------------------------------------------------- descriptors
// Shared-memory matrix descriptor, 64 bits:
//   bits  0..13  start address >> 4 (18-bit shared address space)
//   bits 16..29  leading-dimension byte offset (LBO) >> 4
//   bits 32..45  stride-dimension byte offset (SBO) >> 4
//   bits 49..51  base offset (pattern phase when the tile start is not aligned
//                to the swizzle repeat: 1024 B for 128B, 512 B for 64B, ...)
//   bits 62..63  swizzle: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
// Operands are built from "core matrices" of 8 rows x 16 bytes.  LBO is the
// byte distance between core matrices adjacent in the leading dimension (K
// for a K-major operand), SBO between core matrices adjacent in the strided
// dimension (M or N).  For swizzled K-major tiles whose K extent fits in one
// swizzle row, LBO is unused (conventionally 1 after the shift, i.e. 16 B) and
// SBO = 8 rows * swizzle bytes (1024 for 128B swizzle).
namespace detail {
template <int SwizzleBytes>
struct DescSwizzle {
  static_assert(SwizzleBytes == 0 || SwizzleBytes == 32 || SwizzleBytes == 64 ||
                    SwizzleBytes == 128,
                "tl::make_wgmma_desc: swizzle must be 0 (none), 32, 64 or 128 bytes");
  static constexpr uint64_t kMode = SwizzleBytes == 128  ? 1
                                    : SwizzleBytes == 64 ? 2
                                    : SwizzleBytes == 32 ? 3
                                                         : 0;
};
TL_HOST_DEVICE constexpr uint64_t desc_field(uint32_t bytes) {
  return static_cast<uint64_t>((bytes & 0x3FFFFu) >> 4);
}
}  // namespace detail

template <int SwizzleBytes>
TL_DEVICE uint64_t make_wgmma_desc(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                   uint32_t base_offset = 0) {
  uint64_t desc = detail::desc_field(smem_addr(smem));
  desc |= detail::desc_field(lbo_bytes) << 16;
  desc |= detail::desc_field(sbo_bytes) << 32;
  desc |= static_cast<uint64_t>(base_offset & 0x7u) << 49;
  desc |= detail::DescSwizzle<SwizzleBytes>::kMode << 62;
  return desc;
}

// Advance the start address by `bytes` (a multiple of 16).  This is how a
// kernel steps K inside one swizzled tile: the hardware applies the swizzle
// to the final address, so moving the start by 32 B walks 16 f16 columns.
TL_DEVICE uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}

// T.initialize_wgmma_descriptor: layout_type as the descriptor's 2-bit field (0 none, 1 = 128B,
// 2 = 64B, 3 = 32B), LBO and SBO already in 16-byte units, base offset 0.
TL_DEVICE uint64_t wgmma_desc_encode(const void* smem, uint32_t layout_type, uint32_t lbo16, uint32_t sbo16) {
  uint64_t desc = detail::desc_field(smem_addr(smem));
  desc |= static_cast<uint64_t>(lbo16 & 0x3FFFu) << 16;
  desc |= static_cast<uint64_t>(sbo16 & 0x3FFFu) << 32;
  desc |= static_cast<uint64_t>(layout_type & 0x3u) << 62;
  return desc;
}

// T.increase_descriptor_offset / the offsets of T.ptx_wgmma_*: `units` (16 bytes each) added to
// the descriptor's low 32-bit word, as the hardware descriptor's low word is advanced.
TL_HOST_DEVICE uint64_t wgmma_desc_add(uint64_t desc, uint32_t units) {
  return (desc & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(desc) + units);
}

}  // namespace tl
