// tl/ldmatrix.h -- ldmatrix (sm_75+) and stmatrix (sm_90) for 8x8 b16 tiles.
//
// ldmatrix.xN loads N 8x8 matrices of 16-bit elements from shared memory into
// one register per matrix per lane.  Lanes 8i..8i+7 give the row addresses of
// matrix i (each row = 16 contiguous bytes, 16-byte aligned); for .x1/.x2 only
// the first 8/16 lanes' addresses are used, but every lane must pass a valid
// shared pointer.  After the load, lane l holds in r[i] row l/4, columns
// 2*(l%4), 2*(l%4)+1 of matrix i -- exactly the mma.sync A/B/C pair layout.
// The .trans variants load the transpose (lane l gets column l/4, rows
// 2*(l%4), 2*(l%4)+1), which serves a K-major B from an N-major tile.
//
// stmatrix is the inverse: registers in the same layout are stored as rows.
#pragma once

#include "common.h"

namespace tl {

// Each takes a 32-bit shared-window byte address (a mainloop keeps per-lane byte offsets
// beside a per-stage base, so an address is one add or an immediate) or a shared pointer.
TL_DEVICE void ldmatrix_x1(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr));
}
TL_DEVICE void ldmatrix_x2(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
TL_DEVICE void ldmatrix_x4(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
TL_DEVICE void ldmatrix_x1_trans(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr));
}
TL_DEVICE void ldmatrix_x2_trans(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}
TL_DEVICE void ldmatrix_x4_trans(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
TL_DEVICE void ldmatrix_x1(uint32_t* r, const void* smem) { ldmatrix_x1(r, smem_addr(smem)); }
TL_DEVICE void ldmatrix_x2(uint32_t* r, const void* smem) { ldmatrix_x2(r, smem_addr(smem)); }
TL_DEVICE void ldmatrix_x4(uint32_t* r, const void* smem) { ldmatrix_x4(r, smem_addr(smem)); }
TL_DEVICE void ldmatrix_x1_trans(uint32_t* r, const void* smem) { ldmatrix_x1_trans(r, smem_addr(smem)); }
TL_DEVICE void ldmatrix_x2_trans(uint32_t* r, const void* smem) { ldmatrix_x2_trans(r, smem_addr(smem)); }
TL_DEVICE void ldmatrix_x4_trans(uint32_t* r, const void* smem) { ldmatrix_x4_trans(r, smem_addr(smem)); }

// tl::ldmatrix<Num, Trans>(regs, smem or byte address): template spelling for the codegen.
template <int Num, bool Trans = false, class Addr>
TL_DEVICE void ldmatrix(uint32_t* r, Addr smem) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "tl::ldmatrix: Num must be 1, 2 or 4");
  if constexpr (Num == 1) {
    if constexpr (Trans) ldmatrix_x1_trans(r, smem); else ldmatrix_x1(r, smem);
  } else if constexpr (Num == 2) {
    if constexpr (Trans) ldmatrix_x2_trans(r, smem); else ldmatrix_x2(r, smem);
  } else {
    if constexpr (Trans) ldmatrix_x4_trans(r, smem); else ldmatrix_x4(r, smem);
  }
}

// tl::ldmatrix_to<Num>(slots, smem): ldmatrix into 2 * Num consecutive 16-bit register slots
// of a fragment (an array of half/bfloat16 with no 4-byte alignment promise, hence the copy,
// which the compiler turns into register moves).  Matrix i fills slots 2i, 2i+1.
template <int Num, bool Trans = false, class T>
TL_DEVICE void ldmatrix_to(T* slots, const T* smem) {
  static_assert(sizeof(T) == 2, "tl::ldmatrix_to: ldmatrix moves 16-bit elements (half_t / bfloat16_t)");
  uint32_t r[Num];
  ldmatrix<Num, Trans>(r, smem);
  memcpy(slots, r, sizeof(r));
}

// ------------------------------------------------------------- stmatrix
// Templates only so that the sm_90 check fires when called, not when included.
#if TL_ARCH_SM90
#define TL_STSM(QUAL, REGS, ...) asm volatile("stmatrix.sync.aligned.m8n8" QUAL ".shared.b16 [%0], " REGS ";\n" ::"r"(smem_addr(smem)), __VA_ARGS__ : "memory")
#else
#define TL_STSM(QUAL, REGS, ...)
#endif

template <int Num, bool Trans = false>
TL_DEVICE void stmatrix(void* smem, const uint32_t* r) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "tl::stmatrix: Num must be 1, 2 or 4");
  static_assert(TL_ARCH_SM90 || detail::always_false_int<Num>::value,
                "tl::stmatrix needs sm_90 or newer");
  if constexpr (Num == 1) {
    if constexpr (Trans) TL_STSM(".x1.trans", "{%1}", "r"(r[0]));
    else TL_STSM(".x1", "{%1}", "r"(r[0]));
  } else if constexpr (Num == 2) {
    if constexpr (Trans) TL_STSM(".x2.trans", "{%1, %2}", "r"(r[0]), "r"(r[1]));
    else TL_STSM(".x2", "{%1, %2}", "r"(r[0]), "r"(r[1]));
  } else {
    if constexpr (Trans)
      TL_STSM(".x4.trans", "{%1, %2, %3, %4}", "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
    else
      TL_STSM(".x4", "{%1, %2, %3, %4}", "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
  }
}
#undef TL_STSM

template <int kGuard = 0>
TL_DEVICE void stmatrix_x1(void* smem, const uint32_t* r) { stmatrix<1, false>(smem, r); }
template <int kGuard = 0>
TL_DEVICE void stmatrix_x2(void* smem, const uint32_t* r) { stmatrix<2, false>(smem, r); }
template <int kGuard = 0>
TL_DEVICE void stmatrix_x4(void* smem, const uint32_t* r) { stmatrix<4, false>(smem, r); }
template <int kGuard = 0>
TL_DEVICE void stmatrix_x1_trans(void* smem, const uint32_t* r) { stmatrix<1, true>(smem, r); }
template <int kGuard = 0>
TL_DEVICE void stmatrix_x2_trans(void* smem, const uint32_t* r) { stmatrix<2, true>(smem, r); }
template <int kGuard = 0>
TL_DEVICE void stmatrix_x4_trans(void* smem, const uint32_t* r) { stmatrix<4, true>(smem, r); }

// tl::stmatrix_pack<Num>(smem, e0, .., e(2 Num - 1)): stmatrix of 2 * Num 16-bit values (half_t /
// bfloat16_t, already rounded), matrix i's register from e(2i) (low half) and e(2i + 1): an
// accumulator's slots 8p .. 8p + 7 stored as four 8x8 matrices (transform/cuda/stmatrix.py).
template <int Num, class T, class... E>
TL_DEVICE void stmatrix_pack(T* smem, E... e) {
  static_assert(sizeof(T) == 2, "tl::stmatrix_pack: stmatrix stores 16-bit elements (half_t / bfloat16_t)");
  static_assert(sizeof...(E) == 2 * Num, "tl::stmatrix_pack: Num matrices take 2 * Num values");
  const T v[2 * Num] = {T(e)...};
  uint32_t r[Num];
  memcpy(r, v, sizeof(r));
  stmatrix<Num>(smem, r);
}

}  // namespace tl
