/* tl/rng_core.h: the generators' state types, recurrences and seeding behind T.rng_init /
 * T.rng_rand, one copy for both backends: the CPU backend's C (cpu/tl_random.h includes it) and
 * the CUDA headers (tl/random.h defines TL_RNG_FN as TL_DEVICE first), so both give the same
 * uint32 words. language/random.py documents the streams.
 *   tl_philox    Philox4x32-10, curand's numbering: key = seed, element e of subsequence s
 *                is word e % 4 of the block at counter e / 4 + s * 2^64.
 *   tl_xorwow    Marsaglia's xorwow: five xorshift words and a Weyl counter d (+= 362437).
 *   tl_mrg32k3a  L'Ecuyer's MRG32k3a: two order-3 recurrences mod m1 = 2^32 - 209 and
 *                m2 = 2^32 - 22853, output z = (p1 - p2) mod m1 in [1, m1].
 * XORWOW and MRG32k3a are seeded from (seed, subsequence) by a splitmix64 hash (not curand's
 * streams); the offset is applied by jump-ahead: a polynomial power for xorwow (stepped below
 * 1024), matrix powers for mrg32k3a. Plain C that is also valid CUDA C++. */
#ifndef TL_RNG_CORE_H_
#define TL_RNG_CORE_H_

#ifndef TL_RNG_FN
#define TL_RNG_FN static inline
#endif

#define TL__RNG_NORMAL_FIELDS int has_normal, has_normal_d; float normal; double normal_d;

typedef struct { uint32_t ctr[4]; uint32_t key[2]; uint32_t out[4]; int idx; TL__RNG_NORMAL_FIELDS } tl_philox;
typedef struct { uint32_t x[5]; uint32_t d; TL__RNG_NORMAL_FIELDS } tl_xorwow;
typedef struct { int64_t s1[3], s2[3]; TL__RNG_NORMAL_FIELDS } tl_mrg32k3a;

/* ---- Philox4x32-10 */
TL_RNG_FN void tl_philox_block(tl_philox *s) {
    uint32_t c0 = s->ctr[0], c1 = s->ctr[1], c2 = s->ctr[2], c3 = s->ctr[3];
    uint32_t k0 = s->key[0], k1 = s->key[1];
    for (int r = 0; r < 10; ++r) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0; c1 = (uint32_t)p1; c2 = n2; c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    s->out[0] = c0; s->out[1] = c1; s->out[2] = c2; s->out[3] = c3;
}

TL_RNG_FN void tl_philox_advance(tl_philox *s, uint64_t n) {  /* counter += n (128-bit) */
    uint64_t lo = ((uint64_t)s->ctr[1] << 32 | s->ctr[0]), nlo = lo + n;
    uint64_t hi = ((uint64_t)s->ctr[3] << 32 | s->ctr[2]) + (nlo < lo);
    s->ctr[0] = (uint32_t)nlo; s->ctr[1] = (uint32_t)(nlo >> 32);
    s->ctr[2] = (uint32_t)hi; s->ctr[3] = (uint32_t)(hi >> 32);
}

TL_RNG_FN void tl_philox_init(tl_philox *s, uint64_t seed, uint64_t seq, uint64_t off) {
    s->key[0] = (uint32_t)seed; s->key[1] = (uint32_t)(seed >> 32);
    s->ctr[0] = (uint32_t)(off / 4); s->ctr[1] = (uint32_t)((off / 4) >> 32);
    s->ctr[2] = (uint32_t)seq; s->ctr[3] = (uint32_t)(seq >> 32);
    s->idx = (int)(off % 4);
    s->has_normal = s->has_normal_d = 0;
    tl_philox_block(s);
}

TL_RNG_FN uint32_t tl_philox_next(tl_philox *s) {
    uint32_t v = s->out[s->idx++];
    if (s->idx == 4) { tl_philox_advance(s, 1); tl_philox_block(s); s->idx = 0; }
    return v;
}

/* ---- seeding hash: word i of (seed, seq) is splitmix64's i-th output from t = mix(mix(seed) ^ seq) */
TL_RNG_FN uint64_t tl_rng_mix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

TL_RNG_FN uint64_t tl_rng_seed_word(uint64_t seed, uint64_t seq, int i) {
    return tl_rng_mix64(tl_rng_mix64(tl_rng_mix64(seed) ^ seq) + (uint64_t)i * 0x9E3779B97F4A7C15ull);
}

/* ---- XORWOW */
TL_RNG_FN uint32_t tl_xorwow_next(tl_xorwow *s) {
    uint32_t t = s->x[0] ^ (s->x[0] >> 2);
    s->x[0] = s->x[1]; s->x[1] = s->x[2]; s->x[2] = s->x[3]; s->x[3] = s->x[4];
    s->x[4] = (s->x[4] ^ (s->x[4] << 4)) ^ (t ^ (t << 1));
    s->d += 362437u;
    return s->x[4] + s->d;
}

/* XORWOW jump-ahead. The xorshift words are a linear map M over GF(2)^160 per step; its
 * characteristic polynomial f (degree 160: x^160 + the words below, bit i the coefficient of x^i;
 * found by Berlekamp-Massey over the output bits, and checked in tests/language/test_rng.py against
 * stepping and against powers of M) gives M^n = g(M) for g = x^n mod f, which Horner's rule
 * applies to the state in 160 steps; the Weyl counter advances by n * 362437. Offsets below
 * TL__XORWOW_STEP_MAX are stepped (the same numbers, fewer operations). */
#define TL__XORWOW_STEP_MAX 1024u

TL_RNG_FN void tl__xorwow_mulx(uint32_t *a) {  /* a = a * x mod f */
    uint32_t top = a[4] >> 31;
    for (int i = 4; i > 0; --i) a[i] = (a[i] << 1) | (a[i - 1] >> 31);
    a[0] <<= 1;
    if (top) { a[0] ^= 0x00060001u; a[1] ^= 0x08610030u; a[2] ^= 0x00062121u; a[3] ^= 0x0f3c0035u; a[4] ^= 0x00000f0eu; }
}

TL_RNG_FN void tl__xorwow_mulmod(uint32_t *r, const uint32_t *b) {  /* r = r * b mod f */
    uint32_t a[5], acc[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < 5; ++i) a[i] = r[i];
    for (int i = 0; i < 160; ++i) {
        if (b[i >> 5] >> (i & 31) & 1u)
            for (int w = 0; w < 5; ++w) acc[w] ^= a[w];
        tl__xorwow_mulx(a);
    }
    for (int i = 0; i < 5; ++i) r[i] = acc[i];
}

TL_RNG_FN void tl_xorwow_jump(tl_xorwow *s, uint64_t n) {
    uint32_t g[5] = {1, 0, 0, 0, 0}, sq[5], w[5] = {0, 0, 0, 0, 0};
    for (int bit = 63; bit >= 0; --bit) {  /* g = x^n mod f, left to right */
        for (int i = 0; i < 5; ++i) sq[i] = g[i];
        tl__xorwow_mulmod(g, sq);
        if (n >> bit & 1u) tl__xorwow_mulx(g);
    }
    for (int i = 159; i >= 0; --i) {  /* w = g(M) x, Horner */
        uint32_t t = w[0] ^ (w[0] >> 2);
        w[0] = w[1]; w[1] = w[2]; w[2] = w[3]; w[3] = w[4];
        w[4] = (w[4] ^ (w[4] << 4)) ^ (t ^ (t << 1));
        if (g[i >> 5] >> (i & 31) & 1u)
            for (int k = 0; k < 5; ++k) w[k] ^= s->x[k];
    }
    for (int k = 0; k < 5; ++k) s->x[k] = w[k];
    s->d += (uint32_t)n * 362437u;
}

TL_RNG_FN void tl_xorwow_init(tl_xorwow *s, uint64_t seed, uint64_t seq, uint64_t off) {
    for (int i = 0; i < 3; ++i) {
        uint64_t w = tl_rng_seed_word(seed, seq, i);
        if (i < 2) { s->x[2 * i] = (uint32_t)w; s->x[2 * i + 1] = (uint32_t)(w >> 32); }
        else { s->x[4] = (uint32_t)w; s->d = (uint32_t)(w >> 32); }
    }
    if ((s->x[0] | s->x[1] | s->x[2] | s->x[3] | s->x[4]) == 0) s->x[0] = 1;  /* xorshift's one fixed point */
    s->has_normal = s->has_normal_d = 0;
    if (off < TL__XORWOW_STEP_MAX) {
        for (uint64_t i = 0; i < off; ++i) tl_xorwow_next(s);
    } else {
        tl_xorwow_jump(s, off);
    }
}

/* ---- MRG32k3a */
#define TL__MRG_M1 4294967087ll
#define TL__MRG_M2 4294944443ll

TL_RNG_FN uint32_t tl_mrg32k3a_next(tl_mrg32k3a *s) {
    int64_t p1 = (1403580ll * s->s1[1] - 810728ll * s->s1[0]) % TL__MRG_M1;
    int64_t p2 = (527612ll * s->s2[2] - 1370589ll * s->s2[0]) % TL__MRG_M2;
    if (p1 < 0) p1 += TL__MRG_M1;
    if (p2 < 0) p2 += TL__MRG_M2;
    s->s1[0] = s->s1[1]; s->s1[1] = s->s1[2]; s->s1[2] = p1;
    s->s2[0] = s->s2[1]; s->s2[1] = s->s2[2]; s->s2[2] = p2;
    return (uint32_t)(p1 > p2 ? p1 - p2 : p1 - p2 + TL__MRG_M1);
}

/* v = A^n v (mod m) for one component's step matrix, by squaring (powers of A commute). */
TL_RNG_FN void tl_mrg32k3a_jump(int64_t *v, int64_t a0, int64_t a1, int64_t a2, uint64_t m, uint64_t n) {
    uint64_t p[3][3] = {{0, 1, 0}, {0, 0, 1}, {(uint64_t)a0, (uint64_t)a1, (uint64_t)a2}};
    while (n) {
        if (n & 1) {
            uint64_t w[3];
            for (int i = 0; i < 3; ++i) {
                uint64_t acc = 0;
                for (int k = 0; k < 3; ++k) acc = (acc + p[i][k] * (uint64_t)v[k] % m) % m;
                w[i] = acc;
            }
            for (int i = 0; i < 3; ++i) v[i] = (int64_t)w[i];
        }
        uint64_t q[3][3];
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
                uint64_t acc = 0;
                for (int k = 0; k < 3; ++k) acc = (acc + p[i][k] * p[k][j] % m) % m;
                q[i][j] = acc;
            }
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) p[i][j] = q[i][j];
        n >>= 1;
    }
}

TL_RNG_FN void tl_mrg32k3a_init(tl_mrg32k3a *s, uint64_t seed, uint64_t seq, uint64_t off) {
    for (int i = 0; i < 3; ++i) {
        s->s1[i] = (int64_t)(tl_rng_seed_word(seed, seq, i) % (uint64_t)TL__MRG_M1);
        s->s2[i] = (int64_t)(tl_rng_seed_word(seed, seq, 3 + i) % (uint64_t)TL__MRG_M2);
    }
    if ((s->s1[0] | s->s1[1] | s->s1[2]) == 0) s->s1[0] = 1;  /* the all-zero state is a fixed point */
    if ((s->s2[0] | s->s2[1] | s->s2[2]) == 0) s->s2[0] = 1;
    s->has_normal = s->has_normal_d = 0;
    tl_mrg32k3a_jump(s->s1, TL__MRG_M1 - 810728, 1403580, 0, (uint64_t)TL__MRG_M1, off);
    tl_mrg32k3a_jump(s->s2, TL__MRG_M2 - 1370589, 0, 527612, (uint64_t)TL__MRG_M2, off);
}

#endif /* TL_RNG_CORE_H_ */
