// Test harness shared by every tests/test_*.c: deterministic random data,
// normalized-error comparison, finite differences, bf16 helpers, the ISA loop
// and the closing "N passed, N failed" line that CTest and CI read.
#ifndef OT_TEST_HARNESS_H
#define OT_TEST_HARNESS_H

#include "ot/ot.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

// Deterministic generator (splitmix64); each test seeds its own.
typedef struct { uint64_t s; } th_rng;
uint64_t th_next(th_rng *r);
float th_uniform(th_rng *r, float lo, float hi);
float th_normal(th_rng *r);
void th_fill(th_rng *r, float *x, size_t n, float lo, float hi);
void th_fill_normal(th_rng *r, float *x, size_t n, float stddev);

// ||got - want||_2 / max(||want||_2, 1e-30), in double. NaN anywhere -> +inf.
double th_nerr(const float *got, const float *want, size_t n);
// Records one check; prints a FAIL line with the context on failure. Returns ok.
bool th_check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Normalized-error check with context printed on failure (and with TH_VERBOSE=1 always).
bool th_check_nerr(const float *got, const float *want, size_t n, double tol,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
// Checks that a call failed with `want` and that its message names `needle`.
bool th_check_error(ot_status got, ot_status want, const char *needle, const char *what);
// Prints "N passed, N failed" and returns the process exit code.
int th_finish(void);

// bf16 helpers: round in place to bf16-representable values; copy to/from bf16.
void th_round_bf16(float *x, size_t n);
uint16_t *th_to_bf16(const float *x, size_t n);          // malloc'd
void th_from_bf16(const uint16_t *x, float *out, size_t n);
// Rounds x [n] in place to values storable in dt (f32: unchanged; bf16 / f16: nearest even).
void th_round_dt(ot_dtype dt, float *x, size_t n);
// Normalized-error tolerance of storage dtype dt: t32 for f32, tbf for bf16, and tbf / 8
// for f16 (3 more mantissa bits: unit roundoff 2^-11 against 2^-8), at least t32.
double th_tol(ot_dtype dt, double t32, double tbf);
// The 16-bit storage dtypes the op tests run beside f32.
#define TH_NDT 3
static const ot_dtype th_dts[TH_NDT] = {OT_F32, OT_BF16, OT_F16};
// Copy of f32 data x [n] in storage dtype dt (f32, bf16 or f16; malloc'd), and back to f32.
void *th_to_dt(ot_dtype dt, const float *x, size_t n);
void th_from_dt(ot_dtype dt, const void *p, float *out, size_t n);

// ISAs this CPU can run, best first; returns count. Tests loop over them with
// ot_isa_force(isa) and report unsupported ones once (skipped, not passed).
int th_isas(ot_isa out[OT_ISA_COUNT]);

// Central finite difference of loss(ctx) w.r.t. x[i], evaluated in double:
// (L(x+h) - L(x-h)) / 2h, restoring x[i].
double th_fd(float *x, size_t i, float h, double (*loss)(void *ctx), void *ctx);
// Dot product in double (the "loss" sum(out * w) used by gradient checks).
double th_dot(const float *a, const float *b, size_t n);

// malloc that fails the test loudly instead of returning NULL.
void *th_alloc(size_t bytes);
float *th_falloc(size_t n);   // zero-initialised floats

#endif
