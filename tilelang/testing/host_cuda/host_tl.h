// host_tl.h -- host versions of the tl primitive headers (tl/common.h, mma.h, ldmatrix.h,
// cp_async.h, sync.h): same names and signatures, each the documented PTX semantics.
//
// ldmatrix / stmatrix / mma.sync are warp collectives (host_cuda.h's exchange): the lanes'
// addresses or fragment registers meet, and the last lane computes every lane's registers
// from the PTX ISA fragment layouts (g = lane / 4, t = lane % 4):
//   m16n8k16 (16-bit): A reg r: row g + 8 (r % 2), cols 2t + 8 (r / 2) + {0, 1}
//                      B reg r: rows 2t + 8 r + {0, 1}, col g
//   m16n8k32 (8-bit):  A reg r: row g + 8 (r % 2), cols 4t + 16 (r / 2) + {0..3}
//                      B reg r: rows 4t + 16 r + {0..3}, col g
//   m16n8k64 (4-bit):  A reg r: row g + 8 (r % 2), cols 8t + 32 (r / 2) + {0..7}
//                      B reg r: rows 8t + 32 r + {0..7}, col g  (the 8-bit layout, byte for byte)
//   m16n8k32 (4-bit):  the first half of m16n8k64: A regs 0, 1 (rows g, g + 8), B reg 0
//   m16n8k8 (tf32):    A reg r: row g + 8 (r % 2), col t + 4 (r / 2);  B reg r: row t + 4 r, col g
//   C / D: element e: row g + 8 (e / 2), col 2t + e % 2 (f16: word e / 2, half e % 2)
// The lower-indexed element of a register sits in its low bits.  The products are exact and
// summed in double, rounded once to the accumulator type (s32: wrapping); tf32 operands drop
// their low 13 mantissa bits (the tensor core reads only the tf32 bits).  cp.async reads its
// source when issued and lands at the cp_async_wait of its group.  Part of host_cuda.h.
#pragma once

#include <vector>

#define TL_DEVICE inline
#define TL_HOST_DEVICE inline
// No inline PTX on the host: the shipped headers take their portable paths.
#define TL_ARCH_SM80 0
#define TL_ARCH_SM89 0
#define TL_ARCH_SM90 0
#define TL_ARCH_SM90A 0

inline const unsigned char* tl_host_smem_at(uint32_t addr, int bytes, const char* what) {
  if (addr % bytes || (long)addr + bytes > tl_host_smem_used)
    tl_host_fail("%s: shared address 0x%x is not %d-byte aligned or past the kernel's %d bytes of shared memory",
                 what, addr, bytes, tl_host_smem_used);
  return tl_smem + addr;
}
inline uint32_t tl_host_lds32(uint32_t addr) {
  uint32_t v;
  std::memcpy(&v, tl_host_smem_at(addr, 4, "ld.shared.b32"), 4);
  return v;
}

namespace tl {

using half_t = __half;
using bfloat16_t = __nv_bfloat16;
using float8_e4m3_t = __nv_fp8_e4m3;
using float8_e5m2_t = __nv_fp8_e5m2;
using fp8_e4_t = float8_e4m3_t;
using fp8_e5_t = float8_e5m2_t;

namespace detail {
template <class... T>
struct always_false { static constexpr bool value = false; };
template <int N>
struct always_false_int { static constexpr bool value = false; };
template <class A, class B>
struct is_same { static constexpr bool value = false; };
template <class A>
struct is_same<A, A> { static constexpr bool value = true; };
}  // namespace detail

template <class T>
constexpr T ceildiv(T a, T b) { return (a + b - 1) / b; }

inline uint32_t smem_addr(const void* ptr) {
  const long off = static_cast<const unsigned char*>(ptr) - tl_smem;
  if (off < 0 || off >= TL_HOST_SMEM_BYTES) tl_host_fail("smem_addr: %p is not a shared-memory address", ptr);
  return static_cast<uint32_t>(off);
}

template <class T>
inline T max(T a, T b) { return a > b ? a : b; }
template <class T>
inline T min(T a, T b) { return a < b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline float min(float a, float b) { return fminf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline half_t max(half_t a, half_t b) { return __hmax(a, b); }
inline half_t min(half_t a, half_t b) { return __hmin(a, b); }
inline bfloat16_t max(bfloat16_t a, bfloat16_t b) { return __hmax(a, b); }
inline bfloat16_t min(bfloat16_t a, bfloat16_t b) { return __hmin(a, b); }

template <class T>
inline T infinity() {
  static_assert(detail::always_false<T>::value, "tl::infinity<T>: T must be float, double, half_t or bfloat16_t");
  return T();
}
template <> inline float infinity<float>() { return INFINITY; }
template <> inline double infinity<double>() { return (double)INFINITY; }
template <> inline half_t infinity<half_t>() { return __ushort_as_half(0x7c00); }
template <> inline bfloat16_t infinity<bfloat16_t>() { return __ushort_as_bfloat16(0x7f80); }
template <class T>
inline T neg_infinity() { return -infinity<T>(); }

// tl::cast<To>(x): 16/8-bit float targets go through float, as in tl/common.h.
namespace detail {
template <class To, class From>
struct Cast { static To run(From x) { return static_cast<To>(x); } };
template <class From>
struct Cast<half_t, From> { static half_t run(From x) { return half_t(static_cast<float>(x)); } };
template <class From>
struct Cast<bfloat16_t, From> { static bfloat16_t run(From x) { return bfloat16_t(static_cast<float>(x)); } };
template <class From>
struct Cast<float8_e4m3_t, From> { static float8_e4m3_t run(From x) { return float8_e4m3_t(static_cast<float>(x)); } };
template <class From>
struct Cast<float8_e5m2_t, From> { static float8_e5m2_t run(From x) { return float8_e5m2_t(static_cast<float>(x)); } };
template <> struct Cast<half_t, half_t> { static half_t run(half_t x) { return x; } };
template <> struct Cast<bfloat16_t, bfloat16_t> { static bfloat16_t run(bfloat16_t x) { return x; } };
template <> struct Cast<float8_e4m3_t, float8_e4m3_t> { static float8_e4m3_t run(float8_e4m3_t x) { return x; } };
template <> struct Cast<float8_e5m2_t, float8_e5m2_t> { static float8_e5m2_t run(float8_e5m2_t x) { return x; } };
}  // namespace detail
template <class To, class From>
inline To cast(From x) { return detail::Cast<To, From>::run(x); }

// The .approx.ftz forms: subnormal inputs and results are flushed to (signed) zero.
inline float host_ftz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
inline float exp2f(float x) { return ::exp2f(x); }
inline float fast_exp2f(float x) { return host_ftz(::exp2f(host_ftz(x))); }
inline float fast_log2f(float x) { return ::log2f(host_ftz(x)); }
inline float fast_rcpf(float x) { return host_ftz(1.0f / host_ftz(x)); }

template <class T>
inline T half_at(uint32_t w, int hi) {
  const uint16_t b = static_cast<uint16_t>(hi ? (w >> 16) : (w & 0xffffu));
  T r;
  std::memcpy(&r, &b, 2);
  return r;
}
template <class T>
inline void set_half(uint32_t& w, int hi, T v) {
  uint16_t b16;
  std::memcpy(&b16, &v, 2);
  const uint32_t b = b16;
  w = hi ? ((w & 0xffffu) | (b << 16)) : ((w & 0xffff0000u) | b);
}
inline uint32_t pack_half2(half_t lo, half_t hi) { return lo.__x | (uint32_t(hi.__x) << 16); }
inline uint32_t pack_bfloat162(bfloat16_t lo, bfloat16_t hi) { return lo.__x | (uint32_t(hi.__x) << 16); }

template <int N, class T>
inline void load_vec(T* regs, const T* src, bool pred = true) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes == 4 || kBytes == 8 || kBytes % 16 == 0,
                "tl::load_vec<N>: N * sizeof(T) must be 4, 8 or a multiple of 16 bytes");
  if ((uintptr_t)src % (kBytes < 16 ? kBytes : 16)) tl_host_fail("tl::load_vec<%d>: %p is misaligned", N, (const void*)src);
  if (pred) std::memcpy(regs, src, kBytes); else std::memset(regs, 0, kBytes);
}
template <int N, class T>
inline void store_vec(T* dst, const T* regs) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes == 4 || kBytes == 8 || kBytes % 16 == 0,
                "tl::store_vec<N>: N * sizeof(T) must be 4, 8 or a multiple of 16 bytes");
  if ((uintptr_t)dst % (kBytes < 16 ? kBytes : 16)) tl_host_fail("tl::store_vec<%d>: %p is misaligned", N, (void*)dst);
  std::memcpy(dst, regs, kBytes);
}

// ------------------------------------------------------------- cp.async
namespace detail {
template <int Bytes, bool Cg>
inline void check_cp_async(void* dst, const void* src) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "tl::cp_async: Bytes must be 4, 8 or 16");
  static_assert(!Cg || Bytes == 16, "tl::cp_async: the .cg (L2-only) form copies 16 bytes only");
  smem_addr(dst);
  if ((uintptr_t)dst % Bytes || (uintptr_t)src % Bytes) tl_host_fail("cp.async of %d bytes: misaligned %p <- %p", Bytes, dst, src);
}
}  // namespace detail
// The asynchrony of cp.async, per thread: the source is read when the copy is issued and the
// shared bytes land at the cp_async_wait that completes its commit group (wait_all: every
// copy), so a read of the tile before its wait sees the old bytes. Copies never waited for are
// dropped at the block's end.
namespace detail {
struct HostCpAsync {
  void* dst;
  unsigned char bytes[16];
  int n;
};
static thread_local std::vector<HostCpAsync> tl_host_cp_open;
static thread_local std::vector<std::vector<HostCpAsync>> tl_host_cp_committed;
inline void host_cp_async(void* dst, const void* src, int n, int bytes) {
  HostCpAsync c{dst, {}, bytes};
  if (n) std::memcpy(c.bytes, src, n);
  tl_host_cp_open.push_back(c);
}
inline void host_cp_land(std::vector<HostCpAsync>& g) {
  for (auto& c : g) std::memcpy(c.dst, c.bytes, c.n);
}
}  // namespace detail
template <int Bytes, bool Cg = (Bytes == 16)>
inline void cp_async(void* dst, const void* src) {
  detail::check_cp_async<Bytes, Cg>(dst, src);
  detail::host_cp_async(dst, src, Bytes, Bytes);
}
template <int Bytes, bool Cg = (Bytes == 16)>
inline void cp_async_zfill(void* dst, const void* src, bool pred) {
  detail::check_cp_async<Bytes, Cg>(dst, pred ? src : dst);
  detail::host_cp_async(dst, src, pred ? Bytes : 0, Bytes);
}
template <int Bytes, bool Cg = (Bytes == 16)>
inline void cp_async_partial(void* dst, const void* src, int src_bytes) {
  detail::check_cp_async<Bytes, Cg>(dst, src_bytes ? src : dst);
  detail::host_cp_async(dst, src, src_bytes, Bytes);
}
// The 32-bit shared-address forms (smem_addr(tile) + byte offset), as the device header has them.
template <int Bytes, bool Cg = (Bytes == 16)>
inline void cp_async(uint32_t dst, const void* src) { cp_async<Bytes, Cg>((void*)(tl_smem + dst), src); }
template <int Bytes, bool Cg = (Bytes == 16)>
inline void cp_async_zfill(uint32_t dst, const void* src, bool pred) {
  cp_async_zfill<Bytes, Cg>((void*)(tl_smem + dst), src, pred);
}
template <int Bytes, bool Cg = (Bytes == 16)>
inline void cp_async_partial(uint32_t dst, const void* src, int src_bytes) {
  cp_async_partial<Bytes, Cg>((void*)(tl_smem + dst), src, src_bytes);
}
inline void cp_async_commit() {
  detail::tl_host_cp_committed.push_back(std::move(detail::tl_host_cp_open));
  detail::tl_host_cp_open.clear();
}
template <int N>
inline void cp_async_wait() {
  static_assert(N >= 0, "tl::cp_async_wait<N>: N must be >= 0");
  auto& c = detail::tl_host_cp_committed;
  const size_t done = c.size() > static_cast<size_t>(N) ? c.size() - N : 0;
  for (size_t b = 0; b < done; ++b) detail::host_cp_land(c[b]);
  c.erase(c.begin(), c.begin() + done);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void cp_async_wait_all() {
  cp_async_commit();
  cp_async_wait<0>();
}
inline void tl_host_cp_async_block_start() {
  detail::tl_host_cp_open.clear();
  detail::tl_host_cp_committed.clear();
}

// ------------------------------------------------------------- ldmatrix / stmatrix
namespace detail {
// Matrix i's row r is 16 bytes at the address lane 8i + r gave; lane l holds row l / 4,
// columns 2 (l % 4) + {0, 1} of each matrix (.trans: of its transpose).
inline void host_ldmatrix(const char* op, int num, bool trans, uint32_t* r, uint32_t addr) {
  uint32_t mine[1] = {addr}, got[4];
  tl_host_collective(op, 0xffffffffu, mine, 1, got, num, [&](uint32_t (*in)[kTlIn], uint32_t (*out)[kTlOut], unsigned parts) -> const char* {
    if (parts != 0xffffffffu) return "needs all 32 lanes of the warp";
    const unsigned char* rows[32];
    for (int q = 0; q < 8 * num; ++q) rows[q] = tl_host_smem_at(in[q][0], 16, op);
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < num; ++i) {
        uint16_t e[2];
        for (int h = 0; h < 2; ++h) {
          const int row = trans ? 2 * (l % 4) + h : l / 4, col = trans ? l / 4 : 2 * (l % 4) + h;
          std::memcpy(&e[h], rows[8 * i + row] + 2 * col, 2);
        }
        out[l][i] = e[0] | (uint32_t(e[1]) << 16);
      }
    return nullptr;
  });
  std::memcpy(r, got, 4 * num);
}
inline void host_stmatrix(const char* op, int num, bool trans, uint32_t addr, const uint32_t* r) {
  uint32_t mine[5] = {addr, 0, 0, 0, 0}, got[1];
  std::memcpy(mine + 1, r, 4 * num);
  tl_host_collective(op, 0xffffffffu, mine, 5, got, 0, [&](uint32_t (*in)[kTlIn], uint32_t (*)[kTlOut], unsigned parts) -> const char* {
    if (parts != 0xffffffffu) return "needs all 32 lanes of the warp";
    for (int q = 0; q < 8 * num; ++q) tl_host_smem_at(in[q][0], 16, op);
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < num; ++i)
        for (int h = 0; h < 2; ++h) {
          const int row = trans ? 2 * (l % 4) + h : l / 4, col = trans ? l / 4 : 2 * (l % 4) + h;
          const uint16_t e = (uint16_t)(in[l][1 + i] >> (16 * h));
          std::memcpy(tl_smem + in[8 * i + row][0] + 2 * col, &e, 2);
        }
    return nullptr;
  });
}
}  // namespace detail

#define TL_HOST_LDSM(NAME, NUM, TRANS)                                                                  \
  inline void NAME(uint32_t* r, uint32_t addr) { detail::host_ldmatrix(#NAME, NUM, TRANS, r, addr); } \
  inline void NAME(uint32_t* r, const void* smem) { NAME(r, smem_addr(smem)); }
TL_HOST_LDSM(ldmatrix_x1, 1, false)
TL_HOST_LDSM(ldmatrix_x2, 2, false)
TL_HOST_LDSM(ldmatrix_x4, 4, false)
TL_HOST_LDSM(ldmatrix_x1_trans, 1, true)
TL_HOST_LDSM(ldmatrix_x2_trans, 2, true)
TL_HOST_LDSM(ldmatrix_x4_trans, 4, true)
#undef TL_HOST_LDSM

template <int Num, bool Trans = false, class Addr>
inline void ldmatrix(uint32_t* r, Addr smem) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "tl::ldmatrix: Num must be 1, 2 or 4");
  uint32_t a;
  if constexpr (std::is_integral_v<Addr>) a = static_cast<uint32_t>(smem); else a = smem_addr(smem);
  detail::host_ldmatrix("ldmatrix", Num, Trans, r, a);
}
template <int Num, bool Trans = false, class T>
inline void ldmatrix_to(T* slots, const T* smem) {
  static_assert(sizeof(T) == 2, "tl::ldmatrix_to: ldmatrix moves 16-bit elements (half_t / bfloat16_t)");
  uint32_t r[Num];
  ldmatrix<Num, Trans>(r, smem);
  std::memcpy(slots, r, sizeof(r));
}
template <int Num, bool Trans = false>
inline void stmatrix(void* smem, const uint32_t* r) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "tl::stmatrix: Num must be 1, 2 or 4");
  detail::host_stmatrix("stmatrix", Num, Trans, smem_addr(smem), r);
}
template <int kGuard = 0> inline void stmatrix_x1(void* s, const uint32_t* r) { stmatrix<1, false>(s, r); }
template <int kGuard = 0> inline void stmatrix_x2(void* s, const uint32_t* r) { stmatrix<2, false>(s, r); }
template <int kGuard = 0> inline void stmatrix_x4(void* s, const uint32_t* r) { stmatrix<4, false>(s, r); }
template <int kGuard = 0> inline void stmatrix_x1_trans(void* s, const uint32_t* r) { stmatrix<1, true>(s, r); }
template <int kGuard = 0> inline void stmatrix_x2_trans(void* s, const uint32_t* r) { stmatrix<2, true>(s, r); }
template <int kGuard = 0> inline void stmatrix_x4_trans(void* s, const uint32_t* r) { stmatrix<4, true>(s, r); }
template <int Num, class T, class... E>
inline void stmatrix_pack(T* smem, E... e) {
  static_assert(sizeof(T) == 2, "tl::stmatrix_pack: stmatrix stores 16-bit elements (half_t / bfloat16_t)");
  static_assert(sizeof...(E) == 2 * Num, "tl::stmatrix_pack: Num matrices take 2 * Num values");
  const T v[2 * Num] = {T(e)...};
  uint32_t r[Num];
  std::memcpy(r, v, sizeof(r));
  stmatrix<Num>(smem, r);
}

}  // namespace tl

#include "host_mma.h"
#include "host_wgmma.h"
#include "host_tma.h"
#include "host_sync.h"
