// ops-transformer core: status/errors, dtypes, tensor descriptor, arenas with
// per-category memory accounting, CPU feature detection + ISA dispatch, threads,
// profiler spans. Every other layer depends only on this header.
#ifndef OT_CORE_H
#define OT_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------- status ----
typedef enum {
  OT_OK = 0,
  OT_EINVAL,        // bad argument: shape, pointer, flag
  OT_ENOMEM,        // allocation or arena capacity exceeded
  OT_EIO,           // file system error
  OT_EFORMAT,       // malformed file content
  OT_EUNSUPPORTED,  // valid request this build/CPU cannot serve
  OT_EINTERNAL      // a dependency (oneDNN, MPI) failed
} ot_status;

// Message of the last error set on this thread ("" if none). Never NULL.
const char *ot_last_error(void);
// Human name of a status code ("invalid argument", ...).
const char *ot_status_name(ot_status s);
// Sets this thread's error message (printf-style) and returns `s`, so callers
// write `return ot_error(OT_EINVAL, "x: rows=%d must be > 0", rows);`.
ot_status ot_error(ot_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ot_clear_error(void);

// Propagate a failing status from an expression.
#define OT_TRY(expr) do { ot_status ot__s = (expr); if (ot__s != OT_OK) return ot__s; } while (0)

// Longest path (bytes, with the NUL) the library stores or builds.
#define OT_PATH_MAX 1024

// ---------------------------------------------------------------- dtypes ----
typedef enum { OT_F32 = 0, OT_BF16, OT_F16, OT_I8, OT_I32, OT_U16, OT_DTYPE_COUNT } ot_dtype;

size_t ot_dtype_size(ot_dtype dt);
const char *ot_dtype_name(ot_dtype dt);  // "f32", "bf16", ...

// Scalar conversions: round-to-nearest-even; NaN stays NaN (quiet), inf stays inf.
uint16_t ot_f32_to_bf16(float x);
float ot_bf16_to_f32(uint16_t x);
uint16_t ot_f32_to_f16(float x);
float ot_f16_to_f32(uint16_t x);
// Vectorized array conversions (dispatch to the active ISA), n elements.
void ot_cvt_f32_to_bf16(const float *src, uint16_t *dst, size_t n);
void ot_cvt_bf16_to_f32(const uint16_t *src, float *dst, size_t n);
void ot_cvt_f32_to_f16(const float *src, uint16_t *dst, size_t n);
void ot_cvt_f16_to_f32(const uint16_t *src, float *dst, size_t n);
// Symmetric int8 quantization: dst = clamp(round_even(src / scale), -127, 127);
// scale must be > 0. Dequantization: dst = src * scale.
void ot_cvt_f32_to_i8(const float *src, int8_t *dst, size_t n, float scale);
void ot_cvt_i8_to_f32(const int8_t *src, float *dst, size_t n, float scale);
// Any-to-any (f32/bf16/f16 <-> f32/bf16/f16); OT_EINVAL for other pairs.
ot_status ot_convert(const void *src, ot_dtype sdt, void *dst, ot_dtype ddt, size_t n);

// -------------------------------------------------------- memory / arenas ---
typedef enum {
  OT_MEM_PARAMS = 0, OT_MEM_GRADS, OT_MEM_OPTIM, OT_MEM_ACTIVATIONS,
  OT_MEM_KVCACHE, OT_MEM_WORKSPACE, OT_MEM_OTHER, OT_MEM_CATEGORY_COUNT
} ot_mem_category;

const char *ot_mem_category_name(ot_mem_category c);

// Tracked, 64-byte-aligned allocation. Every byte the library holds long-term
// goes through here (directly or via an arena), so the report is exact.
void *ot_mem_alloc(size_t bytes, ot_mem_category cat);  // NULL + error on failure; 0 bytes -> valid ptr
void ot_mem_free(void *p);                              // NULL ok
// Current and peak bytes per category (process-wide, thread-safe).
size_t ot_mem_current(ot_mem_category c);
size_t ot_mem_peak(ot_mem_category c);
size_t ot_mem_peak_total(void);              // the most bytes held at once, all categories together
void ot_mem_reset_peak(void);                // peak := current, all categories (and the total)
void ot_mem_report(FILE *f);                 // table of current/peak per category
size_t ot_mem_allocated(void);               // bytes ot_mem_alloc handed out since the start (cumulative)

// Arena: one tracked block, bump allocation, 64-byte aligned, released as a
// whole (or back to a mark). Size is planned up front: a step never mallocs.
typedef struct ot_arena {
  uint8_t *base;
  size_t cap, used, high;     // high = max `used` ever seen
  ot_mem_category cat;
  char name[32];
} ot_arena;

ot_status ot_arena_init(ot_arena *a, const char *name, size_t cap, ot_mem_category cat);
void *ot_arena_alloc(ot_arena *a, size_t bytes);   // NULL + error message if full
static inline size_t ot_arena_mark(const ot_arena *a) { return a->used; }
static inline void ot_arena_release(ot_arena *a, size_t mark) { a->used = mark; }
void ot_arena_destroy(ot_arena *a);
// Bytes needed to place `bytes` (rounded to 64) - for planning arena sizes.
static inline size_t ot_align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

// ------------------------------------------------------------------ tensor --
#define OT_MAX_DIMS 6
typedef struct ot_tensor {
  void *data;
  ot_dtype dtype;
  int ndim;
  int64_t shape[OT_MAX_DIMS];
  int64_t stride[OT_MAX_DIMS];   // in elements
} ot_tensor;

// Contiguous row-major descriptor over `data`. ndim in [0, OT_MAX_DIMS].
ot_tensor ot_tensor_make(void *data, ot_dtype dt, int ndim, const int64_t *shape);
int64_t ot_tensor_numel(const ot_tensor *t);
bool ot_tensor_is_contiguous(const ot_tensor *t);

// ------------------------------------------------------------- cpu / isa ----
typedef struct {
  bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512_bf16, avx512_vnni;
} ot_cpu_features;

typedef enum { OT_ISA_PORTABLE = 0, OT_ISA_AVX2, OT_ISA_AVX512, OT_ISA_COUNT } ot_isa;

const ot_cpu_features *ot_cpu(void);       // detected once (cpuid + xgetbv)
const char *ot_isa_name(ot_isa isa);       // "portable", "avx2", "avx512"
bool ot_isa_supported(ot_isa isa);         // CPU (and OS) can run it
// Active ISA for kernel dispatch: the best supported one, unless forced by
// ot_isa_force() or the environment (OT_ISA=portable|avx2|avx512, or
// OT_FORCE_PORTABLE=1). Forcing an unsupported ISA returns OT_EUNSUPPORTED.
ot_isa ot_isa_active(void);
ot_status ot_isa_force(ot_isa isa);
void ot_isa_unforce(void);                 // back to the best supported

// ---------------------------------------------------------------- threads ---
void ot_threads_set(int n);                // OpenMP threads for our kernels and oneDNN
int ot_threads_get(void);

// ---------------------------------------------------------------- profiler --
// Named, nested spans. Off by default; when off a span costs one branch.
void ot_prof_enable(bool on);
bool ot_prof_enabled(void);
void ot_prof_reset(void);
// Returns a token for ot_prof_end; flops/bytes (may be 0) feed the summary's
// GFLOP/s and GB/s. `name` must be a string literal (stored by pointer).
int ot_prof_begin(const char *name, double flops, double bytes);
void ot_prof_end(int token);
// Chrome trace JSON (open in Perfetto / chrome://tracing).
ot_status ot_prof_write_trace(const char *path);
// Per-name table: calls, total ms, share of profiled time, GFLOP/s, GB/s.
void ot_prof_summary(FILE *f);
// A counter sample at this moment (a Chrome trace "C" event: a track named
// `name`, a string literal); recorded only while profiling is on.
void ot_prof_counter(const char *name, double value);
// A number for the trace's "otherData" (key copied; the last value of a key wins;
// at most 64 keys). Kept while profiling is on, cleared by ot_prof_reset.
void ot_prof_meta(const char *key, double value);

// ------------------------------------------------------ counter-based RNG ---
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011): a keyed bijection of a 128-bit counter. ctr[4], key[2] -> out[4];
// out may alias ctr. Stateless: any element of a stream is computed directly.
void ot_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);
// Element c of stream `seed`: word (c & 3) of Philox4x32-10 with key
// {seed & 0xffffffff, seed >> 32} and counter {(c >> 2) & 0xffffffff, c >> 34, 0, 0}.
// (Four consecutive elements share one Philox block.)
uint32_t ot_rand_u32(uint64_t seed, uint64_t c);

// The ONE dropout keep rule (elementwise ops, attention, references, tests):
// element with counter c of stream `seed` is KEPT iff
//     ot_rand_u32(seed, c) >= ot_dropout_threshold(p),
// threshold = floor(p * 2^32) (exact: p is a float in [0, 1)), so P(keep) =
// 1 - threshold / 2^32 ~= 1 - p; a kept value is multiplied by
// ot_dropout_scale(p) = (float)(1 / (1 - p)) in f32, a dropped one becomes 0.
// p == 0 keeps everything (threshold 0) and every op then takes its exact
// no-dropout code path (bit-identical results). Callers give each dropout
// site a disjoint counter range [offset, offset + n) of one seed (e.g. a
// running offset advanced by n per call); nothing is stored between the
// forward and the backward: the backward regenerates the same mask from
// (seed, offset). Results do not depend on the thread count.
uint32_t ot_dropout_threshold(float p);
float ot_dropout_scale(float p);
bool ot_dropout_keep(uint64_t seed, uint64_t c, float p);

// Monotonic wall clock in seconds.
double ot_now(void);

#ifdef __cplusplus
}
#endif
#endif
