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

/* T.initialize_wgmma_descriptor: start address of p >> 4, LBO and SBO (16-byte units), layout field
 * (0 none, 1 = 128 B, 2 = 64 B, 3 = 32 B swizzle), base offset 0. */
static inline uint64_t tl_cpu_wgmma_desc(const unsigned char* smem, const void* p, uint32_t layout, uint32_t lbo16,
                                         uint32_t sbo16) {
    return (uint64_t)((tl_cpu_smem_addr(smem, p) & 0x3FFFFu) >> 4) | ((uint64_t)(lbo16 & 0x3FFFu) << 16)
           | ((uint64_t)(sbo16 & 0x3FFFu) << 32) | ((uint64_t)(layout & 3u) << 62);
}

/* `units` (16 bytes each) added to the descriptor's low 32-bit word (T.increase_descriptor_offset). */
static inline uint64_t tl_wgmma_desc_add(uint64_t desc, uint32_t units) {
    return (desc & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)desc + units);
}

/* T.tma_load: the box (box[0] innermost) of the rank-`rank` tensor at g (dims, byte strides
 * innermost first) at coordinates c lands at shared address dst densely, innermost first, each
 * element at its swizzled address; elements outside the tensor are zero. Returns 0; 1 when a
 * swizzled box does not start on the swizzle pattern's repeat (8 x swizzle bytes); 2 when the box
 * does not fit in the kernel's shared memory. */
static inline int tl_cpu_tma_load(unsigned char* smem, uint32_t smem_bytes, const void* dst, const void* g, int elem,
                                  int swizzle,
                                  int rank, const int64_t* dims, const int64_t* strides, const int32_t* box,
                                  const int32_t* c) {
    const uint32_t s0 = tl_cpu_smem_addr(smem, dst);
    int64_t n = 1;
    if (swizzle && s0 % (uint32_t)(8 * swizzle)) return 1;
    for (int d = 0; d < rank; ++d) n *= box[d];
    if (s0 + (uint64_t)n * (uint64_t)elem > smem_bytes) return 2;
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

/* One element of a wgmma operand: kind 0 f16, 1 bf16, 2 e4m3, 3 e5m2, 4 s8. */
static inline double tl_cpu_wg_elem(const unsigned char* p, int kind) {
    if (kind == 0) { tl_half h; memcpy(&h, p, 2); return (double)h; }
    if (kind == 1) { tl_bf16 b; memcpy(&b, p, 2); return (double)tl_bf16_to_f32(b); }
    if (kind == 2) return (double)tl_fp8e4m3_to_f32(*p);
    if (kind == 3) return (double)tl_fp8e5m2_to_f32(*p);
    return (double)(int8_t)*p;
}

/* Element (mn, k) of a descriptor operand, or a failure code (1: descriptor not emulated; 2: outside
 * the shared pool). */
static inline int tl_cpu_wg_operand(const unsigned char* smem, uint32_t smem_bytes, uint64_t desc, int mn_major,
                                    int mn, int k, int kind, double* out) {
    const int e = kind >= 2 ? 1 : 2;
    uint32_t a;
    if (tl_gmma_operand_addr(desc, mn_major, mn, k, e, &a)) return 1;
    if (a + (uint32_t)e > smem_bytes) return 2;
    *out = tl_cpu_wg_elem(smem + a, kind);
    return 0;
}

/* T.ptx_wgmma_ss / _rs for thread t (0 .. 127) of its warp group: its N / 2 accumulator elements at
 * d (c_kind 0 float, 1 tl_half, 2 int32) in the layout of tl/wgmma.h -- warp w = t / 32 holds
 * rows 16w .. 16w + 15; lane g = t % 32 / 4, q = t % 4 holds, for each 8-column block j,
 * d[4j + e] = (row 16w + g + 8 (e / 2), column 8j + 2q + e % 2) -- become
 * (scale_d ? d : 0) + scale_ab * sum_k A[row][k] B[k][col], summed in double and rounded once
 * (int32: exact, wrapping). A (64 x K) and B (K x N) come from shared memory through the
 * descriptors (tl_smem_desc.h), or A from registers (a_regs: thread t's first A element, the
 * warp group's threads a_stride bytes apart; 4 32-bit registers each, the mma.sync m16n8k16 /
 * k32 A layout per warp). K = 16 (16-bit types) or 32 (8-bit). Returns 0 or a failure code
 * (tl_cpu_wg_operand). */
static inline int tl_cpu_wgmma(const unsigned char* smem, uint32_t smem_bytes, int n, int a_kind, int b_kind,
                               int c_kind, int tnsp_a, int tnsp_b, int scale_ab, uint64_t desc_a,
                               const unsigned char* a_regs, int64_t a_stride, uint64_t desc_b, void* d, int t,
                               int scale_d) {
    const int ea = a_kind >= 2 ? 1 : 2, K = 32 / ea, kHalf = K / 2, kPer = kHalf / 4;
    const int w = t / 32, g = t % 32 / 4, q = t % 4;
    double A[2][32], Bv[32][2];
    for (int h = 0; h < 2; ++h) {
        const int row = 16 * w + g + 8 * h, r = row % 16;
        for (int k = 0; k < K; ++k) {
            if (a_regs) {
                const int lane = r % 8 * 4 + k % kHalf / kPer, reg = r / 8 + 2 * (k / kHalf);
                const unsigned char* p = a_regs + (int64_t)(w * 32 + lane - t) * a_stride + reg * 4 + k % kPer * ea;
                A[h][k] = tl_cpu_wg_elem(p, a_kind);
            } else {
                const int rc = tl_cpu_wg_operand(smem, smem_bytes, desc_a, tnsp_a, row, k, a_kind, &A[h][k]);
                if (rc) return rc;
            }
        }
    }
    for (int j = 0; j < n / 8; ++j) {
        for (int c = 0; c < 2; ++c)
            for (int k = 0; k < K; ++k) {
                const int rc = tl_cpu_wg_operand(smem, smem_bytes, desc_b, tnsp_b, 8 * j + 2 * q + c, k, b_kind,
                                                 &Bv[k][c]);
                if (rc) return rc;
            }
        for (int e = 0; e < 4; ++e) {
            const int slot = 4 * j + e;
            if (c_kind == 2) {
                int64_t s = scale_d ? (int64_t)((int32_t*)d)[slot] : 0;
                for (int k = 0; k < K; ++k) s += (int64_t)scale_ab * (int64_t)A[e / 2][k] * (int64_t)Bv[k][e % 2];
                ((int32_t*)d)[slot] = (int32_t)(uint32_t)(uint64_t)s;
                continue;
            }
            double s = !scale_d ? 0.0 : c_kind == 0 ? (double)((float*)d)[slot] : (double)((tl_half*)d)[slot];
            for (int k = 0; k < K; ++k) s += scale_ab * A[e / 2][k] * Bv[k][e % 2];
            if (c_kind == 0) ((float*)d)[slot] = (float)s;
            else ((tl_half*)d)[slot] = (tl_half)(float)s;
        }
    }
    return 0;
}

#endif /* TL_CPU_HOPPER_H_ */
