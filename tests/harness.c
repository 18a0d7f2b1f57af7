#include "harness.h"
#include <stdarg.h>

static int g_pass, g_fail;

uint64_t th_next(th_rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float th_uniform(th_rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)((th_next(r) >> 40) * (1.0 / 16777216.0));
}
float th_normal(th_rng *r) {
  double u1 = ((th_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = (th_next(r) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
void th_fill(th_rng *r, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = th_uniform(r, lo, hi);
}
void th_fill_normal(th_rng *r, float *x, size_t n, float stddev) {
  for (size_t i = 0; i < n; i++) x[i] = stddev * th_normal(r);
}

double th_nerr(const float *got, const float *want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - (double)want[i];
    if (isnan(got[i]) != isnan(want[i])) return INFINITY;
    if (isnan(got[i])) continue;
    if (isinf(got[i]) || isinf(want[i])) { if (got[i] != want[i]) return INFINITY; continue; }
    num += d * d;
    den += (double)want[i] * want[i];
  }
  return sqrt(num) / fmax(sqrt(den), 1e-30);
}

static bool verbose(void) { const char *v = getenv("TH_VERBOSE"); return v && *v == '1'; }

static bool record(bool ok, const char *extra, const char *fmt, va_list ap) {
  if (ok) g_pass++; else g_fail++;
  if (!ok || verbose()) {
    printf("%s: ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("%s\n", extra ? extra : "");
    fflush(stdout);
  }
  return ok;
}

bool th_check(bool ok, const char *fmt, ...) {
  va_list ap; va_start(ap, fmt);
  bool r = record(ok, NULL, fmt, ap);
  va_end(ap);
  return r;
}

bool th_check_nerr(const float *got, const float *want, size_t n, double tol, const char *fmt, ...) {
  double e = th_nerr(got, want, n);
  char extra[96];
  snprintf(extra, sizeof extra, "  (nerr %.3g, tol %.3g)", e, tol);
  va_list ap; va_start(ap, fmt);
  bool r = record(e <= tol, extra, fmt, ap);
  va_end(ap);
  return r;
}

bool th_check_error(ot_status got, ot_status want, const char *needle, const char *what) {
  const char *msg = ot_last_error();
  bool ok = got == want && (!needle || strstr(msg, needle) != NULL);
  return th_check(ok, "%s: status %s (want %s), message \"%s\" (want it to name \"%s\")", what,
                  ot_status_name(got), ot_status_name(want), msg, needle ? needle : "");
}

int th_finish(void) {
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}

void th_round_bf16(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = ot_bf16_to_f32(ot_f32_to_bf16(x[i]));
}
uint16_t *th_to_bf16(const float *x, size_t n) {
  uint16_t *o = th_alloc(n * 2 + 2);
  for (size_t i = 0; i < n; i++) o[i] = ot_f32_to_bf16(x[i]);
  return o;
}
void th_from_bf16(const uint16_t *x, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = ot_bf16_to_f32(x[i]);
}
void th_round_dt(ot_dtype dt, float *x, size_t n) {
  if (dt == OT_BF16) th_round_bf16(x, n);
  else if (dt == OT_F16)
    for (size_t i = 0; i < n; i++) x[i] = ot_f16_to_f32(ot_f32_to_f16(x[i]));
}
double th_tol(ot_dtype dt, double t32, double tbf) {
  if (dt == OT_F32) return t32;
  if (dt == OT_BF16) return tbf;
  return tbf / 8 > t32 ? tbf / 8 : t32;
}
void *th_to_dt(ot_dtype dt, const float *x, size_t n) {
  if (dt == OT_BF16) return th_to_bf16(x, n);
  if (dt == OT_F16) {
    uint16_t *o = th_alloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) o[i] = ot_f32_to_f16(x[i]);
    return o;
  }
  float *p = th_alloc(n * 4 + 4);
  memcpy(p, x, n * 4);
  return p;
}
void th_from_dt(ot_dtype dt, const void *p, float *out, size_t n) {
  if (dt == OT_BF16) th_from_bf16(p, out, n);
  else if (dt == OT_F16)
    for (size_t i = 0; i < n; i++) out[i] = ot_f16_to_f32(((const uint16_t *)p)[i]);
  else memcpy(out, p, n * 4);
}

int th_isas(ot_isa out[OT_ISA_COUNT]) {
  static bool said;
  int k = 0;
  for (int i = OT_ISA_COUNT - 1; i >= 0; i--) {
    if (ot_isa_supported((ot_isa)i)) out[k++] = (ot_isa)i;
    else if (!said) printf("note: ISA %s not supported by this CPU: its kernels are not run here\n", ot_isa_name((ot_isa)i));
  }
  said = true;
  return k;
}

double th_fd(float *x, size_t i, float h, double (*loss)(void *ctx), void *ctx) {
  float x0 = x[i];
  x[i] = x0 + h; double lp = loss(ctx);
  x[i] = x0 - h; double lm = loss(ctx);
  x[i] = x0;
  // use the step actually taken in float arithmetic
  double hp = (double)(x0 + h) - x0, hm = x0 - (double)(x0 - h);
  return (lp - lm) / (hp + hm);
}

double th_dot(const float *a, const float *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

void *th_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) { fprintf(stderr, "test: out of memory (%zu bytes)\n", bytes); exit(2); }
  return p;
}
float *th_falloc(size_t n) {
  float *p = th_alloc(n * sizeof(float) + 64);
  memset(p, 0, n * sizeof(float) + 64);
  return p;
}
