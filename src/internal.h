// Library-internal helpers shared by all layers: kernel naming and dispatch
// across ISA variants, per-thread scratch, small utilities.
#ifndef OT_INTERNAL_H
#define OT_INTERNAL_H

#include "ot/core.h"
#include <string.h>

// A kernel source under src/core/kern/ or src/ops/kern/ is compiled once per
// ISA (portable, avx2, avx512) with OT_ARCH_* defined; OT_K(name) gives the
// variant's symbol. Declare the three variants once with OT_KDECL in the
// family's prototype header kern/<family>_k.h (included by the kernel and its
// caller) and call the active one with OT_KPICK(name)(args...).
#define OT_KDECL(ret, name, params) \
  ret name##_portable params; ret name##_avx2 params; ret name##_avx512 params

#define OT_KPICK(name) \
  (ot_isa_active() == OT_ISA_AVX512 ? name##_avx512 : \
   ot_isa_active() == OT_ISA_AVX2 ? name##_avx2 : name##_portable)

// Per-calling-thread scratch, grow-only, tracked as OT_MEM_WORKSPACE. Valid
// until the next ot_scratch call on the same thread; content undefined.
// Returns NULL (with error set) on allocation failure. Freed when its thread
// exits (a pthread key destructor); the main thread's lives until the end.
void *ot_scratch(size_t bytes);
// The same for one of a few independent per-thread blocks: a callee that runs
// while its caller holds ot_scratch (the GEMM's oneDNN scratchpad, under a
// caller's dequantized tile) takes its own slot. ot_scratch is slot OT_SCRATCH_MAIN.
enum { OT_SCRATCH_MAIN = 0, OT_SCRATCH_GEMM = 1, OT_SCRATCH_TEAM = 2, OT_SCRATCH_SLOTS = 3 };
void *ot_scratch_slot(int slot, size_t bytes);
// Bytes of the block this thread's `slot` holds now (0: none, or a slot out of range); the
// planner's tests compare it with the scratch it predicts.
size_t ot_scratch_slot_bytes(int slot);
// Frees this thread's scratch blocks now (tests use it to check the report returns to 0).
void ot_scratch_release(void);

// ---- a work split that never waits for a descheduled thread (core/team.c) ----
// ot__team_for runs fn(ctx, i, dst, scratch) for the items i in [0, ceil(total / w)):
// item i writes the floats [i w, min((i + 1) w, total)) of dst, which is `out` or
// a helper's own buffer indexed like it (copied to out afterwards), and nothing
// else; its result depends only on i and ctx (a copy of ctx_size bytes). The
// caller and ot__team_size() - 1 helper threads share the items; the caller never
// waits for a helper that holds none, and with steal it computes the items a
// helper holds after a short grace itself (the helper's result is dropped).
// With steal, a preempted helper may still read ctx's pointees after the return:
// they must stay mapped (ot__team_buf, or memory freed after ot__team_quiesce).
// scratch: OT_TEAM_SCRATCH floats of the running thread. At most
// OT_TEAM_ITEMS_MAX items and OT_TEAM_CTX_MAX bytes of ctx (else OT_EINTERNAL).
// Only a caller holding the team (ot__team_acquire .. ot__team_release: one
// thread at a time, never inside an OpenMP region or with one thread) gets the
// helpers and ot__team_buf; without it every item runs in the caller.
#define OT_TEAM_ITEMS_MAX 256
#define OT_TEAM_CTX_MAX 512
#define OT_TEAM_SCRATCH 65536
typedef void (*ot__team_fn)(const void *ctx, long i, float *dst, float *scratch);
ot_status ot__team_for(float *out, long total, int w, ot__team_fn fn, const void *ctx, size_t ctx_size,
                       bool steal);
// Steal scope of this thread (a decode step of the library's own model, engine
// or cache, whose frees call ot__team_quiesce): jobs that read only such memory
// and ot__team_buf pass ot__team_steal_get() as steal. Returns the previous value.
bool ot__team_steal_set(bool on);
bool ot__team_steal_get(void);
bool ot__team_acquire(void);      // this thread takes the helpers (false: in use, or one thread)
void ot__team_release(void);
int ot__team_size(void);          // threads a job would use: OpenMP's max threads (1 inside a region)
void *ot__team_buf(size_t bytes); // the holder's buffer for a job's inputs; stays mapped (NULL: no memory)
void ot__team_quiesce(void);      // waits until no helper is inside a job (before freeing what one may read)
void ot__team_set_grace(double s); // tests: seconds before stealing (0: at once; < 0: automatic)
typedef struct { long caller, helper, stolen, jobs; } ot__team_stats;
void ot__team_get_stats(ot__team_stats *s);   // items since the start (tests, benchmarks)

// Levenshtein distance of two short strings (99 when either exceeds 63 bytes):
// for "did you mean" suggestions of unknown keys, flags and commands.
int ot__edit_distance(const char *a, const char *b);

// Validation helpers for public entry points.
#define OT_CHECK_PTR(p, fn) \
  do { if (!(p)) return ot_error(OT_EINVAL, "%s: argument '%s' is NULL", fn, #p); } while (0)
#define OT_CHECK_POS(x, fn) \
  do { if ((x) <= 0) return ot_error(OT_EINVAL, "%s: %s=%lld must be > 0", fn, #x, (long long)(x)); } while (0)
// f32, bf16 or f16 storage dtype check for ops that support all three.
#define OT_CHECK_FLOAT_DT(dt, fn) \
  do { if ((dt) != OT_F32 && (dt) != OT_BF16 && (dt) != OT_F16) \
    return ot_error(OT_EINVAL, "%s: dtype %s unsupported (use f32, bf16 or f16)", fn, ot_dtype_name(dt)); } while (0)
// f32 or bf16 only (ops without an f16 path yet).
#define OT_CHECK_F32_BF16_DT(dt, fn) \
  do { if ((dt) != OT_F32 && (dt) != OT_BF16) \
    return ot_error(OT_EINVAL, "%s: dtype %s unsupported (use f32 or bf16)", fn, ot_dtype_name(dt)); } while (0)
// The storage kind a kernel takes for an activation dtype (simd.h's OT_SK_*):
// 0 f32, 1 bf16, 2 f16.
static inline int ot__sk(ot_dtype dt) { return dt == OT_BF16 ? 1 : dt == OT_F16 ? 2 : 0; }

// Profiler span helpers: OT_PROF(name, flops, bytes) { ... } OT_PROF_END;
#define OT_PROF_BEGIN(name, flops, bytes) int ot__prof_tok = ot_prof_begin(name, flops, bytes)
#define OT_PROF_STOP() ot_prof_end(ot__prof_tok)

// A bump planner: with a == NULL it only counts the bytes (each request rounded
// to 64) a layout needs; with an arena sized to that count it hands out the same
// layout. failed: an allocation ran out of room (the arena's message is set).
typedef struct { ot_arena *a; size_t bytes; bool failed; } ot__planner;
static inline void *ot__plan_take(ot__planner *p, size_t bytes) {
  p->bytes += ot_align64(bytes);
  if (!p->a) return NULL;
  void *r = ot_arena_alloc(p->a, bytes);
  if (!r) p->failed = true;
  return r;
}

#endif
