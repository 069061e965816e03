/* tl_smem_desc.h: where Hopper's asynchronous units put and find bytes in shared memory, for the
 * two places that emulate them: the CPU backend (tl_hopper.h) and the host emulator of generated
 * CUDA (tilelang/testing/host_cuda: host_tma.h, host_wgmma.h). Plain C, also valid C++.
 *
 * Swizzle (TMA tensor maps and wgmma descriptors alike): a function of the shared byte address
 * a, over S = 32, 64 or 128 bytes: the 16-byte chunk bits [4, 4 + log2(S / 16)) are XORed with
 * the bits from 7 up (128 B: [4, 7) ^= [7, 10); 64 B: [4, 6) ^= [7, 9); 32 B: bit 4 ^= bit 7).
 *
 * wgmma matrix descriptor (64 bits): start address >> 4 in bits [0, 14), LBO >> 4 in [16, 30),
 * SBO >> 4 in [32, 46), base offset in [49, 52), layout in [62, 64) (0 none, 1 = 128 B,
 * 2 = 64 B, 3 = 32 B swizzle). Operand element (mn, k) -- mn the M (A) or N (B) index, k the K
 * index, e bytes an element -- lives at, by the PTX ISA's canonical layouts (core matrices of
 * 8 rows x 16 bytes; T = 16 / e elements in 16 bytes):
 *   K-major,  no swizzle:  start + (mn / 8) * SBO + (mn % 8) * 16 + (k / T) * LBO + (k % T) * e
 *   K-major,  swizzle S:   start + (mn / 8) * SBO + (mn % 8) * S + k * e            (LBO unused)
 *   MN-major, no swizzle:  start + (mn / T) * SBO + (mn % T) * e + (k / 8) * LBO + (k % 8) * 16
 *   MN-major, swizzle S:   start + (mn / (S / e)) * LBO + (mn % (S / e)) * e + (k / 8) * SBO + (k % 8) * S
 * then swizzled as above. A base offset other than 0 is not emulated (an error).
 */
#ifndef TL_SMEM_DESC_H_
#define TL_SMEM_DESC_H_

#include <stdint.h>

static inline uint32_t tl_swizzle_addr(uint32_t a, int swizzle_bytes) {
    const uint32_t bits = swizzle_bytes == 128 ? 7u : swizzle_bytes == 64 ? 3u : swizzle_bytes == 32 ? 1u : 0u;
    return a ^ (((a >> 7) & bits) << 4);
}

/* The swizzle bytes of a descriptor's layout field. */
static inline int tl_gmma_swizzle_bytes(uint64_t desc) {
    const int mode = (int)(desc >> 62);
    return mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
}

/* *addr = the shared byte address of operand element (mn, k); an error message, or NULL. */
static inline const char* tl_gmma_operand_addr(uint64_t desc, int mn_major, int mn, int k, int e, uint32_t* addr) {
    const uint32_t start = (uint32_t)(desc & 0x3FFFu) << 4;
    const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3FFFu) << 4;
    const uint32_t sbo = (uint32_t)((desc >> 32) & 0x3FFFu) << 4;
    const int S = tl_gmma_swizzle_bytes(desc);
    const int T = 16 / e;
    uint32_t b;
    if ((desc >> 49) & 0x7u) return "a wgmma descriptor with a base offset is not emulated";
    if (!mn_major) {
        b = S ? start + (uint32_t)(mn / 8) * sbo + (uint32_t)(mn % 8 * S + k * e)
              : start + (uint32_t)(mn / 8) * sbo + (uint32_t)(mn % 8 * 16) + (uint32_t)(k / T) * lbo + (uint32_t)(k % T * e);
    } else if (S) {
        const int per = S / e; /* elements of the MN dim in one swizzle row */
        b = start + (uint32_t)(mn / per) * lbo + (uint32_t)(mn % per * e) + (uint32_t)(k / 8) * sbo + (uint32_t)(k % 8 * S);
    } else {
        b = start + (uint32_t)(mn / T) * sbo + (uint32_t)(mn % T * e) + (uint32_t)(k / 8) * lbo + (uint32_t)(k % 8 * 16);
    }
    *addr = tl_swizzle_addr(b, S);
    return 0;
}

#endif /* TL_SMEM_DESC_H_ */
