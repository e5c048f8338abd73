/* attnlib's portable matrix product (attnlib.portable.matmul): float32 C = A B in which every
 * element is one fused multiply-add chain in k order,
 *
 *     c = +0;  for k in 0 .. K-1:  c = fma(a[i,k], b[k,j], c)
 *
 * IEEE 754 rounds each fma correctly, so the chain gives the same bits on every CPU, whatever its
 * vendor, and for any blocking, vector width, thread count or split of the rows: an element's
 * chain never changes. An AVX2 + FMA micro-kernel (6 x 16 outputs in registers, BLIS-style
 * packing) computes it on x86-64 CPUs that have those instructions; a portable C kernel (C's
 * fmaf) computes the same chains elsewhere. pg_sgemm_reference is the chain written out, one
 * element at a time, for the tests.
 *
 * A shared library loaded with ctypes (which releases the GIL for the call); strides are in
 * elements. Where the Python headers are at hand it is also an (empty) importable module, so
 * that tools that import every module of attnlib can; without them it builds all the same. */
#if defined(__has_include)
#if __has_include(<Python.h>)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define PG_MODULE 1
#endif
#endif
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <pthread.h>
#define PG_THREADS 1
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define PG_X86 1
#endif
#ifdef __FAST_MATH__
#error "attnlib's portable GEMM must not be compiled with -ffast-math"
#endif

#define MR 6
#define NR 16
#define KC 256
#define MC 96
#define NC 512
#define MAX_THREADS 64

static void pack_a(const float *a, ptrdiff_t rsa, ptrdiff_t csa, int mc, int kc, float *buf) {
  for (int p = 0; p < mc; p += MR) {
    int rows = mc - p < MR ? mc - p : MR;
    const float *ap = a + (ptrdiff_t)p * rsa;
    for (int k = 0; k < kc; k++) {
      int r = 0;
      for (; r < rows; r++) buf[r] = ap[r * rsa + k * csa];
      for (; r < MR; r++) buf[r] = 0.0f;
      buf += MR;
    }
  }
}

static void pack_b(const float *b, ptrdiff_t rsb, ptrdiff_t csb, int kc, int nc, float *buf) {
  for (int p = 0; p < nc; p += NR) {
    int cols = nc - p < NR ? nc - p : NR;
    const float *bp = b + (ptrdiff_t)p * csb;
    if (csb == 1 && cols == NR) {
      for (int k = 0; k < kc; k++) {
        memcpy(buf, bp + k * rsb, NR * sizeof(float));
        buf += NR;
      }
    } else {
      for (int k = 0; k < kc; k++) {
        int c = 0;
        for (; c < cols; c++) buf[c] = bp[k * rsb + c * csb];
        for (; c < NR; c++) buf[c] = 0.0f;
        buf += NR;
      }
    }
  }
}

/* An MR x NR tile of C: continue its chains (first: start them at +0) over kc packed k's. Rows
 * past mr and columns past nr are padding: computed in registers, never stored. */
static void kernel_generic(int kc, const float *pa, const float *pb, float *c, ptrdiff_t rsc,
                           int first, int mr, int nr) {
  float acc[MR][NR];
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < NR; j++) acc[r][j] = (!first && r < mr && j < nr) ? c[r * rsc + j] : 0.0f;
  for (int k = 0; k < kc; k++)
    for (int r = 0; r < MR; r++)
      for (int j = 0; j < NR; j++) acc[r][j] = fmaf(pa[k * MR + r], pb[k * NR + j], acc[r][j]);
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) c[r * rsc + j] = acc[r][j];
}

#ifdef PG_X86
__attribute__((target("avx2,fma"))) static void kernel_avx2(int kc, const float *pa,
                                                             const float *pb, float *c,
                                                             ptrdiff_t rsc, int first, int mr,
                                                             int nr) {
  float tile[MR * NR];
  float *dst = c;
  ptrdiff_t rs = rsc;
  int full = (mr == MR && nr == NR);
  if (!full) {
    for (int r = 0; r < MR; r++)
      for (int j = 0; j < NR; j++)
        tile[r * NR + j] = (!first && r < mr && j < nr) ? c[r * rsc + j] : 0.0f;
    dst = tile;
    rs = NR;
  }
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first && full) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  } else {
    c00 = _mm256_loadu_ps(dst + 0 * rs); c01 = _mm256_loadu_ps(dst + 0 * rs + 8);
    c10 = _mm256_loadu_ps(dst + 1 * rs); c11 = _mm256_loadu_ps(dst + 1 * rs + 8);
    c20 = _mm256_loadu_ps(dst + 2 * rs); c21 = _mm256_loadu_ps(dst + 2 * rs + 8);
    c30 = _mm256_loadu_ps(dst + 3 * rs); c31 = _mm256_loadu_ps(dst + 3 * rs + 8);
    c40 = _mm256_loadu_ps(dst + 4 * rs); c41 = _mm256_loadu_ps(dst + 4 * rs + 8);
    c50 = _mm256_loadu_ps(dst + 5 * rs); c51 = _mm256_loadu_ps(dst + 5 * rs + 8);
  }
  for (int k = 0; k < kc; k++) {
    __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8), a;
    a = _mm256_broadcast_ss(pa + 0); c00 = _mm256_fmadd_ps(a, b0, c00); c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(pa + 1); c10 = _mm256_fmadd_ps(a, b0, c10); c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(pa + 2); c20 = _mm256_fmadd_ps(a, b0, c20); c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(pa + 3); c30 = _mm256_fmadd_ps(a, b0, c30); c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(pa + 4); c40 = _mm256_fmadd_ps(a, b0, c40); c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(pa + 5); c50 = _mm256_fmadd_ps(a, b0, c50); c51 = _mm256_fmadd_ps(a, b1, c51);
    pa += MR;
    pb += NR;
  }
  _mm256_storeu_ps(dst + 0 * rs, c00); _mm256_storeu_ps(dst + 0 * rs + 8, c01);
  _mm256_storeu_ps(dst + 1 * rs, c10); _mm256_storeu_ps(dst + 1 * rs + 8, c11);
  _mm256_storeu_ps(dst + 2 * rs, c20); _mm256_storeu_ps(dst + 2 * rs + 8, c21);
  _mm256_storeu_ps(dst + 3 * rs, c30); _mm256_storeu_ps(dst + 3 * rs + 8, c31);
  _mm256_storeu_ps(dst + 4 * rs, c40); _mm256_storeu_ps(dst + 4 * rs + 8, c41);
  _mm256_storeu_ps(dst + 5 * rs, c50); _mm256_storeu_ps(dst + 5 * rs + 8, c51);
  if (!full)
    for (int r = 0; r < mr; r++)
      for (int j = 0; j < nr; j++) c[r * rsc + j] = tile[r * NR + j];
}
#endif

typedef void (*kernel_fn)(int, const float *, const float *, float *, ptrdiff_t, int, int, int);

static kernel_fn pick(int generic) {
#ifdef PG_X86
  if (!generic && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kernel_avx2;
#endif
  return kernel_generic;
}

/* The kernel this library runs: 1 = AVX2 + FMA, 0 = portable C. */
int pg_kernel(void) { return pick(0) != kernel_generic; }

typedef struct {
  int m, n, k, generic;
  const float *a; ptrdiff_t rsa, csa, sba;
  const float *b; ptrdiff_t rsb, csb, sbb;
  float *c; ptrdiff_t rsc, sbc;
  long first, last; /* work items [first, last): item = batch * panels + column panel */
  int status;
} job_t;

static void one_product(const job_t *J, const float *a, const float *b, float *c, int n0, int n1,
                        kernel_fn kern, float *pa, float *pb) {
  if (J->k == 0) {
    for (int i = 0; i < J->m; i++)
      for (int j = n0; j < n1; j++) c[i * J->rsc + j] = 0.0f;
    return;
  }
  for (int jc = n0; jc < n1; jc += NC) {
    int nc = n1 - jc < NC ? n1 - jc : NC;
    for (int pc = 0; pc < J->k; pc += KC) {
      int kc = J->k - pc < KC ? J->k - pc : KC;
      pack_b(b + pc * J->rsb + jc * J->csb, J->rsb, J->csb, kc, nc, pb);
      for (int ic = 0; ic < J->m; ic += MC) {
        int mc = J->m - ic < MC ? J->m - ic : MC;
        pack_a(a + ic * J->rsa + pc * J->csa, J->rsa, J->csa, mc, kc, pa);
        for (int jr = 0; jr < nc; jr += NR) {
          int nr = nc - jr < NR ? nc - jr : NR;
          for (int ir = 0; ir < mc; ir += MR) {
            int mr = mc - ir < MR ? mc - ir : MR;
            kern(kc, pa + ir * kc, pb + jr * kc, c + (ic + ir) * J->rsc + jc + jr, J->rsc, pc == 0,
                 mr, nr);
          }
        }
      }
    }
  }
}

static void *run_job(void *arg) {
  job_t *J = (job_t *)arg;
  kernel_fn kern = pick(J->generic);
  int panels = (J->n + NR - 1) / NR;
  int mc = J->m < MC ? J->m : MC, kc = J->k < KC ? J->k : KC;
  int ncap = panels * NR < NC ? panels * NR : NC;
  float *pa = malloc(sizeof(float) * ((size_t)(mc + MR) * (kc + 1)));
  float *pb = malloc(sizeof(float) * ((size_t)(kc + 1) * (ncap + NR)));
  if (!pa || !pb) {
    free(pa);
    free(pb);
    J->status = 1;
    return NULL;
  }
  for (long item = J->first; item < J->last;) {
    long batch = item / panels;
    int p0 = (int)(item % panels);
    long end = (batch + 1) * panels < J->last ? (batch + 1) * panels : J->last;
    int p1 = (int)(end - batch * panels);
    int n1 = p1 * NR < J->n ? p1 * NR : J->n;
    one_product(J, J->a + batch * J->sba, J->b + batch * J->sbb, J->c + batch * J->sbc, p0 * NR, n1,
                kern, pa, pb);
    item = end;
  }
  free(pa);
  free(pb);
  J->status = 0;
  return NULL;
}

/* C[s] (m x n; row stride rsc, unit column stride) = A[s] (m x k; strides rsa, csa) B[s] (k x n;
 * strides rsb, csb) for s < batch; batch strides sba, sbb, sbc. threads: at most that many; the
 * bits do not depend on it. generic: 1 forces the portable C kernel (tests). 0 on success. */
int pg_sgemm(int batch, int m, int n, int k, const float *a, ptrdiff_t rsa, ptrdiff_t csa,
             ptrdiff_t sba, const float *b, ptrdiff_t rsb, ptrdiff_t csb, ptrdiff_t sbb, float *c,
             ptrdiff_t rsc, ptrdiff_t sbc, int threads, int generic) {
  if (batch <= 0 || m <= 0 || n <= 0) return 0;
  long panels = (n + NR - 1) / NR, items = batch * panels;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (threads > items) threads = (int)items;
  if (threads < 1) threads = 1;
#ifndef PG_THREADS
  threads = 1;
#endif
  job_t jobs[MAX_THREADS];
  for (int t = 0; t < threads; t++) {
    job_t J = {m, n, k, generic, a, rsa, csa, sba, b, rsb, csb, sbb, c, rsc, sbc,
               items * t / threads, items * (t + 1) / threads, 0};
    jobs[t] = J;
  }
  int status = 0;
#ifdef PG_THREADS
  pthread_t tid[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  for (int t = 1; t < threads; t++) started[t] = pthread_create(&tid[t], NULL, run_job, &jobs[t]) == 0;
  run_job(&jobs[0]);
  for (int t = 1; t < threads; t++) {
    if (started[t]) pthread_join(tid[t], NULL);
    else run_job(&jobs[t]);
  }
#else
  run_job(&jobs[0]);
#endif
  for (int t = 0; t < threads; t++) status |= jobs[t].status;
  return status;
}

/* The chains written out: one element at a time, C's fmaf. */
void pg_sgemm_reference(int m, int n, int k, const float *a, ptrdiff_t rsa, ptrdiff_t csa,
                        const float *b, ptrdiff_t rsb, ptrdiff_t csb, float *c, ptrdiff_t rsc) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int q = 0; q < k; q++) acc = fmaf(a[i * rsa + q * csa], b[q * rsb + j * csb], acc);
      c[i * rsc + j] = acc;
    }
}


/* ------------------------------------------------------------------------------------------
 * attnlib's LSTM (attnlib.portable.lstm): the recurrence of a one-layer LSTM, forward and
 * backward, for one or two directions over a packed batch, in float32. Its bits rest on IEEE
 * arithmetic alone, as the products above:
 *
 *   pre   = gx + h_prev W_hh^T      one fma chain per element, in k order, starting from gx
 *                                   (gx = x W_ih^T + b, attnlib.portable.linear's chains)
 *   i, f, o = sigmoid(pre_i, pre_f, pre_o),  g = tanh(pre_g)       (PyTorch's gate order)
 *   c     = f * c_prev + i * g,     h = o * tanh(c)
 *
 * sigmoid(x) = 1 / (1 + exp(-x)) and tanh(x) = 1 - 2 / (exp(2x) + 1), with exp Cephes' expf
 * (range reduction, a degree-5 polynomial, a power of two by its bits) written in adds,
 * multiplies and one divide: no library call, no fma, each op in a fixed order, so the scalar
 * code and the AVX2 code (8 lanes of the same ops) give the same bits. This file must be built
 * with -ffp-contract=off: a compiler that fused a * b + c into an fma where the CPU has one would
 * change them. exp is within 2 ulp of e^x for x in [-87.3, 88.3] (clamped there: sigmoid and
 * tanh saturate long before); tanh is within 2^-22 of tanh(x) absolutely.
 *
 * The backward takes the saved activations and cell states and returns the gradients of pre
 * (dpre): the gradient of gx is dpre, those of W_hh and the input projection are products of
 * dpre (attnlib.portable.matmul's chains, in Python). dh_prev = dpre W_hh is a chain over 4H.
 *
 * Packed rows: step t holds rows offsets[t] .. offsets[t] + sizes[t] (sizes non-increasing),
 * row b of a step is sequence b. Direction 1 runs from the last step to the first, each
 * sequence starting from zero state at its own last step (PyTorch's reverse direction). */

#define EXP_HI 88.3f
#define EXP_LO -87.3f
#define LOG2E 1.44269504088896341f
#define ROUND_MAGIC 12582912.0f /* 1.5 * 2^23: x + M - M rounds x to an integer (|x| < 2^22) */
#define LN2_C1 0.693359375f
#define LN2_C2 -2.12194440e-4f
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

static float exp_s(float x) {
  x = x > EXP_LO ? x : EXP_LO;
  x = x < EXP_HI ? x : EXP_HI;
  float n = (x * LOG2E + ROUND_MAGIC) - ROUND_MAGIC;
  float r = (x - n * LN2_C1) - n * LN2_C2;
  float z = r * r;
  float p = ((((P0 * r + P1) * r + P2) * r + P3) * r + P4) * r + P5;
  float y = (p * z + r) + 1.0f;
  union { int i; float f; } s;
  s.i = ((int)n + 127) << 23;
  return y * s.f;
}
static float sigmoid_s(float x) { return 1.0f / (1.0f + exp_s(-x)); }
static float tanh_s(float x) { return 1.0f - 2.0f / (exp_s(x + x) + 1.0f); }

/* One row of cells, forward: g (4H) holds pre and gets the activations i, f, g, o; c_prev may be
 * NULL (zero state). Writes c (H) and h (H). */
static void cells_row_s(int j0, int H, float *g, const float *cp, float *c, float *h) {
  for (int j = j0; j < H; j++) {
    float i = sigmoid_s(g[j]), f = sigmoid_s(g[H + j]), gg = tanh_s(g[2 * H + j]),
          o = sigmoid_s(g[3 * H + j]);
    g[j] = i; g[H + j] = f; g[2 * H + j] = gg; g[3 * H + j] = o;
    float cn = (cp ? f * cp[j] : f * 0.0f) + i * gg;
    c[j] = cn;
    h[j] = o * tanh_s(cn);
  }
}

/* One row of cells, backward: from the activations a (i, f, g, o), the cell state c, the previous
 * one cp (NULL: zero), the gradient dh of h (output plus recurrence) and dcn of c (from the next
 * step; updated in place to that of c_prev), writes dpre (4H). */
static void cells_back_row_s(int j0, int H, const float *a, const float *c, const float *cp,
                             const float *dh, float *dcn, float *dpre) {
  for (int j = j0; j < H; j++) {
    float i = a[j], f = a[H + j], gg = a[2 * H + j], o = a[3 * H + j];
    float tc = tanh_s(c[j]);
    float dc = dcn[j] + (dh[j] * o) * (1.0f - tc * tc);
    float prev = cp ? cp[j] : 0.0f;
    dpre[j] = (dc * gg) * (i * (1.0f - i));
    dpre[H + j] = (dc * prev) * (f * (1.0f - f));
    dpre[2 * H + j] = (dc * i) * (1.0f - gg * gg);
    dpre[3 * H + j] = (dh[j] * tc) * (o * (1.0f - o));
    dcn[j] = dc * f;
  }
}

#ifdef PG_X86
#define AVX __attribute__((target("avx2,fma")))
AVX static __m256 exp_v(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(EXP_LO)); /* x > lo ? x : lo, as exp_s */
  x = _mm256_min_ps(x, _mm256_set1_ps(EXP_HI));
  __m256 magic = _mm256_set1_ps(ROUND_MAGIC);
  __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), magic), magic);
  __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(LN2_C1))),
                           _mm256_mul_ps(n, _mm256_set1_ps(LN2_C2)));
  __m256 z = _mm256_mul_ps(r, r);
  __m256 p = _mm256_set1_ps(P0);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(P1));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(P2));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(P3));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(P4));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(P5));
  __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, z), r), _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
AVX static __m256 sigmoid_v(__m256 x) {
  __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp_v(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
AVX static __m256 tanh_v(__m256 x) {
  __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(exp_v(_mm256_add_ps(x, x)), one)));
}
AVX static long activation_v(int which, long n, const float *x, float *y) {
  long i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(y + i, which ? tanh_v(v) : sigmoid_v(v));
  }
  return i;
}
AVX static void cells_row_v(int H, float *g, const float *cp, float *c, float *h) {
  int j = 0;
  for (; j + 8 <= H; j += 8) {
    __m256 i = sigmoid_v(_mm256_loadu_ps(g + j)), f = sigmoid_v(_mm256_loadu_ps(g + H + j));
    __m256 gg = tanh_v(_mm256_loadu_ps(g + 2 * H + j)), o = sigmoid_v(_mm256_loadu_ps(g + 3 * H + j));
    _mm256_storeu_ps(g + j, i); _mm256_storeu_ps(g + H + j, f);
    _mm256_storeu_ps(g + 2 * H + j, gg); _mm256_storeu_ps(g + 3 * H + j, o);
    __m256 prev = cp ? _mm256_loadu_ps(cp + j) : _mm256_setzero_ps();
    __m256 cn = _mm256_add_ps(_mm256_mul_ps(f, prev), _mm256_mul_ps(i, gg));
    _mm256_storeu_ps(c + j, cn);
    _mm256_storeu_ps(h + j, _mm256_mul_ps(o, tanh_v(cn)));
  }
  cells_row_s(j, H, g, cp, c, h);
}
AVX static void cells_back_row_v(int H, const float *a, const float *c, const float *cp,
                                 const float *dh, float *dcn, float *dpre) {
  __m256 one = _mm256_set1_ps(1.0f);
  int j = 0;
  for (; j + 8 <= H; j += 8) {
    __m256 i = _mm256_loadu_ps(a + j), f = _mm256_loadu_ps(a + H + j);
    __m256 gg = _mm256_loadu_ps(a + 2 * H + j), o = _mm256_loadu_ps(a + 3 * H + j);
    __m256 tc = tanh_v(_mm256_loadu_ps(c + j)), d = _mm256_loadu_ps(dh + j);
    __m256 dc = _mm256_add_ps(_mm256_loadu_ps(dcn + j),
                              _mm256_mul_ps(_mm256_mul_ps(d, o), _mm256_sub_ps(one, _mm256_mul_ps(tc, tc))));
    __m256 prev = cp ? _mm256_loadu_ps(cp + j) : _mm256_setzero_ps();
    _mm256_storeu_ps(dpre + j, _mm256_mul_ps(_mm256_mul_ps(dc, gg), _mm256_mul_ps(i, _mm256_sub_ps(one, i))));
    _mm256_storeu_ps(dpre + H + j, _mm256_mul_ps(_mm256_mul_ps(dc, prev), _mm256_mul_ps(f, _mm256_sub_ps(one, f))));
    _mm256_storeu_ps(dpre + 2 * H + j, _mm256_mul_ps(_mm256_mul_ps(dc, i), _mm256_sub_ps(one, _mm256_mul_ps(gg, gg))));
    _mm256_storeu_ps(dpre + 3 * H + j, _mm256_mul_ps(_mm256_mul_ps(d, tc), _mm256_mul_ps(o, _mm256_sub_ps(one, o))));
    _mm256_storeu_ps(dcn + j, _mm256_mul_ps(dc, f));
  }
  cells_back_row_s(j, H, a, c, cp, dh, dcn, dpre);
}
#endif

static void cells_row(int vec, int H, float *g, const float *cp, float *c, float *h) {
#ifdef PG_X86
  if (vec) { cells_row_v(H, g, cp, c, h); return; }
#endif
  (void)vec;
  cells_row_s(0, H, g, cp, c, h);
}
static void cells_back_row(int vec, int H, const float *a, const float *c, const float *cp,
                           const float *dh, float *dcn, float *dpre) {
#ifdef PG_X86
  if (vec) { cells_back_row_v(H, a, c, cp, dh, dcn, dpre); return; }
#endif
  (void)vec;
  cells_back_row_s(0, H, a, c, cp, dh, dcn, dpre);
}

/* B (k x n, strides rsb, csb) packed for the micro-kernel, one block of KC k's after another. */
static float *pack_whole_b(const float *b, ptrdiff_t rsb, ptrdiff_t csb, int k, int n) {
  int np = (n + NR - 1) / NR * NR;
  float *buf = malloc(sizeof(float) * ((size_t)k * np + 1));
  if (!buf) return NULL;
  for (int pc = 0; pc < k; pc += KC) {
    int kc = k - pc < KC ? k - pc : KC;
    pack_b(b + pc * rsb, rsb, csb, kc, n, buf + (size_t)pc * np);
  }
  return buf;
}

/* C (m x n, row stride rsc) = [C +] A (m x k, row stride rsa, unit columns) B (packed by
 * pack_whole_b): accumulate 1 continues the chains from C's values, 0 starts them at +0. */
static void product_packed(kernel_fn kern, int m, int n, int k, const float *a, ptrdiff_t rsa,
                           const float *pbw, float *c, ptrdiff_t rsc, int accumulate, float *pa) {
  int np = (n + NR - 1) / NR * NR;
  for (int pc = 0; pc < k; pc += KC) {
    int kc = k - pc < KC ? k - pc : KC;
    pack_a(a + pc, rsa, 1, m, kc, pa);
    const float *pb = pbw + (size_t)pc * np;
    for (int jr = 0; jr < n; jr += NR) {
      int nr = n - jr < NR ? n - jr : NR;
      for (int ir = 0; ir < m; ir += MR) {
        int mr = m - ir < MR ? m - ir : MR;
        kern(kc, pa + ir * kc, pb + jr * kc, c + ir * rsc + jr, rsc, pc == 0 && !accumulate, mr, nr);
      }
    }
  }
}

/* One forward step of R cells: gates = gx (copied) + h_prev W_hh^T (chains continued from gx),
 * then the gates' activations and the new c and h. Row b's previous cell state is cp's row b for
 * b < carried and zero after; c may be cp (updated in place). Shared by pg_lstm and
 * pg_lstm_cells, so a cell has the same bits in both. */
static void forward_step(kernel_fn kern, int R, int H, const float *hp, ptrdiff_t rsp,
                         const float *pbw, const float *gx, ptrdiff_t rsx, float *gates,
                         ptrdiff_t rsg, const float *cp, ptrdiff_t rscp, int carried, float *c,
                         ptrdiff_t rsc, float *h, ptrdiff_t rsh, float *pa) {
  int vec = kern != kernel_generic, G = 4 * H;
  for (int b = 0; b < R; b++) memcpy(gates + b * rsg, gx + b * rsx, sizeof(float) * G);
  product_packed(kern, R, G, H, hp, rsp, pbw, gates, rsg, 1, pa);
  for (int b = 0; b < R; b++)
    cells_row(vec, H, gates + b * rsg, b < carried ? cp + b * rscp : NULL, c + b * rsc, h + b * rsh);
}

typedef struct {
  int T, H, reverse, generic, backward;
  const int64_t *sizes, *offsets;
  const float *gx; ptrdiff_t rsx;     /* forward: pre-activations' start (N x 4H) */
  const float *w;                     /* W_hh, 4H x H, row-major */
  float *gates; ptrdiff_t rsg;        /* activations (N x 4H): written forward, read backward */
  float *c; ptrdiff_t rsc;            /* cell states (N x H) */
  float *h; ptrdiff_t rsh;            /* forward: hidden states out; backward: their gradients in */
  float *dpre; ptrdiff_t rsd;         /* backward: gradients of pre (N x 4H) out */
  int status;
} lstm_job_t;

static void *run_lstm(void *arg) {
  lstm_job_t *J = (lstm_job_t *)arg;
  kernel_fn kern = pick(J->generic);
  int vec = kern != kernel_generic;
  int T = J->T, H = J->H, G = 4 * H, B = T > 0 ? (int)J->sizes[0] : 0;
  /* forward: B = W_hh^T (H x 4H); backward: B = W_hh (4H x H) */
  float *pbw = J->backward ? pack_whole_b(J->w, H, 1, G, H) : pack_whole_b(J->w, 1, H, H, G);
  float *pa = malloc(sizeof(float) * ((size_t)(B + MR) * KC + 1));
  float *st = calloc((size_t)2 * B * H + 1, sizeof(float)); /* h and c, or dh and dc, per sequence */
  float *dh = malloc(sizeof(float) * ((size_t)H + 1));
  if (!pbw || !pa || !st || !dh) {
    free(pbw); free(pa); free(st); free(dh);
    J->status = 1;
    return NULL;
  }
  float *hs = st, *cs = st + (size_t)B * H;
  for (int q = 0; q < T; q++) {
    /* forward: steps in the direction's order; backward: in the opposite one */
    int t = (J->reverse != J->backward) ? T - 1 - q : q;
    int R = (int)J->sizes[t];
    int64_t row0 = J->offsets[t];
    int later = J->reverse ? t + 1 : t - 1; /* the step the state comes from (forward time) */
    int carried = (later >= 0 && later < T) ? (int)J->sizes[later] : 0;
    if (carried > R) carried = R;
    if (!J->backward) {
      if (J->reverse)
        memset(hs + (size_t)carried * H, 0, sizeof(float) * (size_t)(R - carried) * H),
        memset(cs + (size_t)carried * H, 0, sizeof(float) * (size_t)(R - carried) * H);
      forward_step(kern, R, H, hs, H, pbw, J->gx + row0 * J->rsx, J->rsx, J->gates + row0 * J->rsg,
                   J->rsg, cs, H, carried, J->c + row0 * J->rsc, J->rsc, J->h + row0 * J->rsh,
                   J->rsh, pa);
      for (int b = 0; b < R; b++) { /* the sequences' states, for the next step */
        memcpy(hs + (size_t)b * H, J->h + (row0 + b) * J->rsh, sizeof(float) * H);
        memcpy(cs + (size_t)b * H, J->c + (row0 + b) * J->rsc, sizeof(float) * H);
      }
    } else {
      /* hs: the gradient of each sequence's h from the step after (forward time); cs: of its c */
      for (int b = 0; b < R; b++) {
        int64_t row = row0 + b;
        const float *dho = J->h + row * J->rsh, *dhn = hs + (size_t)b * H;
        for (int j = 0; j < H; j++) dh[j] = dho[j] + dhn[j];
        const float *cp = b < carried ? J->c + (J->offsets[later] + b) * J->rsc : NULL;
        cells_back_row(vec, H, J->gates + row * J->rsg, J->c + row * J->rsc, cp, dh,
                       cs + (size_t)b * H, J->dpre + row * J->rsd);
      }
      product_packed(kern, R, H, G, J->dpre + row0 * J->rsd, J->rsd, pbw, hs, H, 0, pa);
    }
  }
  free(pbw); free(pa); free(st); free(dh);
  J->status = 0;
  return NULL;
}

/* The recurrence of ndir (1 or 2) directions over T packed steps; direction d is reversed when
 * d = 1. Per direction d, column blocks of row-major arrays: gx (N x ndir*4H, row stride rsx) at
 * column d*4H; w: ndir W_hh's (4H x H) one after the other; gates (N x ndir*4H) at d*4H; c and h
 * (N x ndir*H) at d*H. backward 0: writes gates, c and h. backward 1: reads gates and c, h holds
 * the gradients of the hidden states, writes dpre (N x ndir*4H) at d*4H. The directions run on up
 * to `threads` threads; the bits depend on neither. 0 on success. */
int pg_lstm(int ndir, int T, const int64_t *sizes, const int64_t *offsets, int H, const float *gx,
            ptrdiff_t rsx, const float *w, float *gates, ptrdiff_t rsg, float *c, ptrdiff_t rsc,
            float *h, ptrdiff_t rsh, float *dpre, ptrdiff_t rsd, int backward, int threads,
            int generic) {
  if (ndir < 1 || ndir > 2 || H <= 0) return 2;
  if (T <= 0) return 0;
  lstm_job_t jobs[2];
  for (int d = 0; d < ndir; d++) {
    lstm_job_t J = {T, H, d, generic, backward, sizes, offsets,
                    gx ? gx + d * 4 * H : NULL, rsx, w + (size_t)d * 4 * H * H,
                    gates + d * 4 * H, rsg, c + d * H, rsc, h + d * H, rsh,
                    dpre ? dpre + d * 4 * H : NULL, rsd, 0};
    jobs[d] = J;
  }
#ifdef PG_THREADS
  if (ndir == 2 && threads > 1) {
    pthread_t tid;
    int started = pthread_create(&tid, NULL, run_lstm, &jobs[1]) == 0;
    run_lstm(&jobs[0]);
    if (started) pthread_join(tid, NULL);
    else run_lstm(&jobs[1]);
    return jobs[0].status | jobs[1].status;
  }
#endif
  (void)threads;
  for (int d = 0; d < ndir; d++) run_lstm(&jobs[d]);
  return ndir == 2 ? jobs[0].status | jobs[1].status : jobs[0].status;
}

/* R independent cells (the leave-one-out fast path's steps): pre = gx + h_prev W_hh^T as above,
 * then the gates; h_prev (R x H, row stride rsp), c (R x H, row stride rsc) in and out (the new
 * state), gx (R x 4H, row stride rsx), gates scratch (R x 4H, contiguous), h out (row stride rsh).
 * The same bits as pg_lstm's step for the same row. 0 on success. */
int pg_lstm_cells(int R, int H, const float *hp, ptrdiff_t rsp, float *c, ptrdiff_t rsc,
                  const float *gx, ptrdiff_t rsx, const float *w, float *gates, float *h,
                  ptrdiff_t rsh, int generic) {
  if (R <= 0) return 0;
  int G = 4 * H;
  float *pbw = pack_whole_b(w, 1, H, H, G);
  float *pa = malloc(sizeof(float) * ((size_t)(R + MR) * KC + 1));
  if (!pbw || !pa) { free(pbw); free(pa); return 1; }
  forward_step(pick(generic), R, H, hp, rsp, pbw, gx, rsx, gates, G, c, rsc, R, c, rsc, h, rsh, pa);
  free(pbw); free(pa);
  return 0;
}

/* sigmoid (which 0) or tanh (1) of n floats, as the cells compute them (tests). */
void pg_activation(int which, long n, const float *x, float *y, int generic) {
  long i = 0;
#ifdef PG_X86
  if (pick(generic) != kernel_generic) i = activation_v(which, n, x, y);
#endif
  (void)generic;
  for (; i < n; i++) y[i] = which ? tanh_s(x[i]) : sigmoid_s(x[i]);
}

#ifdef PG_MODULE
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fmagemm", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__fmagemm(void) { return PyModule_Create(&module); }
#endif
