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

#ifdef PG_MODULE
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fmagemm", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__fmagemm(void) { return PyModule_Create(&module); }
#endif
