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
enum { OT_SCRATCH_MAIN = 0, OT_SCRATCH_GEMM = 1, OT_SCRATCH_SLOTS = 2 };
void *ot_scratch_slot(int slot, size_t bytes);
// Frees this thread's scratch blocks now (tests use it to check the report returns to 0).
void ot_scratch_release(void);

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
