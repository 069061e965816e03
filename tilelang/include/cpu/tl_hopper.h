/* tl_hopper.h: the raw Hopper names (T.tma_load, wgmma descriptors, T.ptx_wgmma_*) on the CPU
 * backend (included by tl_cpu.h).
 *
 * A kernel that uses them keeps its shared buffers in one pool, `tl_smem`, 1024-byte aligned, so
 * that a shared address is a byte offset into it (below 2^18, as on the GPU): descriptors hold
 * such addresses and the swizzles of tl_smem_desc.h act on them as the hardware does.
 */
#ifndef TL_CPU_HOPPER_H_
#define TL_CPU_HOPPER_H_

#include <stdint.h>
#include <string.h>

#include "tl_smem_desc.h"

/* The shared address of p, a pointer into the pool that starts at smem. */
static inline uint32_t tl_cpu_smem_addr(const unsigned char* smem, const void* p) {
    return (uint32_t)((const unsigned char*)p - smem);
}

/* T.tma_load: the box (box[0] innermost) of the rank-`rank` tensor at g (dims, byte strides
 * innermost first) at coordinates c lands at shared address dst densely, innermost first, each
 * element at its swizzled address; elements outside the tensor are zero. Returns 0, or 1 when
 * a swizzled box does not start on the swizzle pattern's repeat (8 x swizzle bytes). */
static inline int tl_cpu_tma_load(unsigned char* smem, const void* dst, const void* g, int elem, int swizzle,
                                  int rank, const int64_t* dims, const int64_t* strides, const int32_t* box,
                                  const int32_t* c) {
    const uint32_t s0 = tl_cpu_smem_addr(smem, dst);
    int64_t n = 1;
    if (swizzle && s0 % (uint32_t)(8 * swizzle)) return 1;
    for (int d = 0; d < rank; ++d) n *= box[d];
    for (int64_t i = 0; i < n; ++i) {
        int64_t rest = i, off = 0;
        int inside = 1;
        for (int d = 0; d < rank; ++d) {
            const int64_t x = (int64_t)c[d] + rest % box[d];
            rest /= box[d];
            if (x < 0 || x >= dims[d]) inside = 0;
            off += x * strides[d];
        }
        unsigned char* to = smem + tl_swizzle_addr(s0 + (uint32_t)(i * elem), swizzle);
        if (inside) memcpy(to, (const unsigned char*)g + off, (size_t)elem);
        else memset(to, 0, (size_t)elem);
    }
    return 0;
}

#endif /* TL_CPU_HOPPER_H_ */
