// tl/fp4.h -- float4_e2m1fn (FP4 E2M1) for device code: conversions in plain integer/float
// code (sm_90 and below have no cvt for e2m1) and packed nibble access.
//
// Storage: two values per byte, element k in byte k >> 1, the even element in the LOW
// nibble, as torch.float4_e2m1fn_x2 and __nv_fp4x2 pack them. Codes: bit 3 sign, then
// magnitudes 0 0.5 1 1.5 2 3 4 6 for codes 0..7; no inf, no NaN.
// f32 -> e2m1 gives what __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) gives (the
// public TileLang's conversion): nearest, ties to even; |x| > 6 and +-inf saturate to +-6;
// NaN -> +6 (code 7); the sign survives rounding to zero.
#pragma once

#include "common.h"

TL_DEVICE uint8_t tl_f32_to_fp4e2m1(float f) {
  uint8_t sign = (uint8_t)((__float_as_uint(f) >> 28) & 8u);
  float m = fabsf(f);
  if (m != m) return 7u;
  // each midpoint rounds to the even code: `>` where the lower code is even, `>=` where odd
  uint8_t c = (uint8_t)((m > 0.25f) + (m >= 0.75f) + (m > 1.25f) + (m >= 1.75f) + (m > 2.5f) +
                        (m >= 3.5f) + (m > 5.0f));
  return (uint8_t)(sign | c);
}

TL_DEVICE float tl_fp4e2m1_to_f32(uint8_t c) {
  // magnitude from the code's bits: exponent e = bits 2:1, mantissa bit 0
  uint32_t e = (c >> 1) & 3u, mbit = c & 1u;
  float m = e ? __uint_as_float(((e + 126u) << 23) | (mbit << 22)) : 0.5f * (float)mbit;
  return (c & 8u) ? -m : m;
}

// ---- packed access: element k of a byte array ----
// int4: a nibble (or any integer's low 4 bits) sign-extended; uint4 values are the nibble
TL_DEVICE int8_t tl_s4(int x) { return (int8_t)(((x & 0xF) ^ 8) - 8); }

TL_DEVICE uint8_t tl_nibble_get(const uint8_t* p, int64_t k) {
  return (uint8_t)((p[k >> 1] >> ((k & 1) << 2)) & 0xFu);
}

// The calling thread is the only writer of the byte (its own registers).
TL_DEVICE void tl_nibble_set(uint8_t* p, int64_t k, uint8_t c) {
  int sh = (int)((k & 1) << 2);
  p[k >> 1] = (uint8_t)((p[k >> 1] & ~(0xFu << sh)) | ((c & 0xFu) << sh));
}

// Global or shared memory: another thread may write the other nibble of the byte at the same
// time. Only this thread writes these 4 bits, so one atomicXor of (old ^ new) on the aligned
// word holding them sets them without disturbing the rest of the word.
TL_DEVICE void tl_nibble_set_atomic(uint8_t* p, int64_t k, uint8_t c) {
  uint8_t* byte = p + (k >> 1);
  uint32_t* word = reinterpret_cast<uint32_t*>(reinterpret_cast<uintptr_t>(byte) & ~(uintptr_t)3);
  int sh = (int)((reinterpret_cast<uintptr_t>(byte) & 3) * 8 + ((k & 1) << 2));
  uint32_t old = *reinterpret_cast<volatile uint32_t*>(word);
  uint32_t flip = (((old >> sh) ^ c) & 0xFu) << sh;
  if (flip) atomicXor(word, flip);
}
