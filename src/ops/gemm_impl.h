// Private interface of the GEMM family (gemm.c, linear.c, qkv.c): one matmul
// description that the oneDNN wrapper runs, with bf16 operands either given to
// oneDNN natively or run as f32 GEMMs on converted tiles (CPUs without
// avx512_bf16; gemm_cvt.c),
// and the kernels of kern/linear.c.
#ifndef OT_OPS_GEMM_IMPL_H
#define OT_OPS_GEMM_IMPL_H

#include "internal.h"
#include "ot/ops.h"
#include "kern/linear_k.h"

// C[M,N] = act(alpha * op(A) op(B) + bias + beta * C), row-major, leading
// dimensions in elements. adt/bdt: f32, bf16 or f16 (may differ: then the 16-bit
// one is converted; f16 always is); cdt: f32 or the A/B dtype. bias: [N] f32 or NULL (only with alpha = 1).
// gelu: tanh-GELU epilogue (only with beta = 0).
typedef struct {
  ot_dtype adt, bdt, cdt;
  bool ta, tb;
  int M, N, K;
  float alpha, beta;
  const void *A; int lda;
  const void *B; int ldb;
  void *C; int ldc;
  const float *bias;
  bool gelu;
} ot_mm;

// Bytes of workspace ot__mm_run needs for `m` (0 when oneDNN takes it as is).
size_t ot__mm_ws(const ot_mm *m);
// Runs `m` (arguments already validated) on the implementation chosen for its
// shape (gemm_pick.c: the own GEMM or oneDNN, by a measurement at first use).
// ws: ot__mm_ws(m) bytes, 64-aligned, or NULL to use this thread's ot_scratch().
// `fn` names the caller in errors.
ot_status ot__mm_run(const ot_mm *m, void *ws, const char *fn);
// Runs `m` through oneDNN (gemm.c): all f32 or native bf16 directly, else the
// conversion path of gemm_cvt.c on ws.
ot_status ot__mm_run_lib(const ot_mm *m, void *ws, const char *fn);
// Runs `m` on the own blocked GEMM (gemm_own.c): any storage kinds of A, B, C,
// every epilogue; its packing workspace comes from this thread's OT_SCRATCH_GEMM
// slot (ot__mm_own_ws(m, threads) bytes).
ot_status ot__mm_own_run(const ot_mm *m, const char *fn);
size_t ot__mm_own_ws(const ot_mm *m, int threads);
// The threads ot__mm_own_run runs m on (its workspace: ot__mm_own_ws(m, that)).
int ot__mm_own_threads(const ot_mm *m);
// "micro-tile MR x NR (isa), blocks from L1 .., L2 .., L3 .." into buf (n bytes).
void ot__gemm_own_describe(char *buf, size_t n);
// Forces the own GEMM's cache blocks: rows of A, contraction, columns of B (mc
// and nc rounded to the micro-tile) and k-blocks packed at once; 0: chosen from
// the caches. For tests and benchmarks, not while GEMMs run.
void ot__gemm_own_set_blocks(int mc, int kc, int nc, int kg);
// Which implementation ot__mm_run uses: 1 the own GEMM always, 0 oneDNN always,
// -1 chosen per shape by a measurement at its first call (the default;
// OT_GEMM=own|onednn|auto), -2 back to the environment's choice.
// For tests and benchmarks, not while GEMMs run; also forgets the choices made.
void ot__gemm_impl_set_mode(int mode);
// The implementation chosen for m's shape: 0 oneDNN, 1 own, -1 not decided yet.
int ot__gemm_pick_get(const ot_mm *m);
// Shapes with fewer flops (2 M N K) than this run on oneDNN unmeasured in auto
// mode (<= 0: the default, 1e9). For tests.
void ot__gemm_pick_set_min_flops(double flops);
// Adds one GEMM's flops and seconds to the counters of ot_gemm_stats.
void ot__gemm_count(const ot_mm *m, double seconds);
// Runs an all-f32 `m` (gemm.c): sgemm for a transposed A without epilogue, else the
// cached matmul primitive.
ot_status ot__mm_run_f32(const ot_mm *m, const char *fn);
// The conversion path (gemm_cvt.c): `m` with a bf16 operand as f32 GEMMs on tiles;
// ws: ot__mm_cvt_ws(m) bytes (bounded by the tile budget, not by M, N, K) or NULL
// for this thread's ot_scratch(). f32 operands are read in place.
size_t ot__mm_cvt_ws(const ot_mm *m);
ot_status ot__mm_cvt_run(const ot_mm *m, void *ws, const char *fn);
// The conversion path's tile budget in bytes and contraction chunk with a transposed A
// (0: the defaults, 32 MiB and 512); for tests and benchmarks, not while GEMMs run.
void ot__gemm_cvt_set_tiles(size_t bytes, int kt);
// true when bf16 x bf16 goes to oneDNN directly (CPU with avx512_bf16, or
// OT_GEMM_BF16=native); false: converted to f32 first (OT_GEMM_BF16=convert).
bool ot__gemm_bf16_native(void);
// Most primitives the GEMM cache keeps (least recently used idle ones dropped
// beyond); n <= 0: the default, OT_GEMM_CACHE_MAX (tests make it small).
void ot__gemm_cache_set_max(int n);
// Overrides that choice (1 native, 0 convert, -1 back to the default); for
// benchmarks and tests, not to be called while GEMMs run.
void ot__gemm_bf16_set_mode(int mode);
// f32 GEMMs with a transposed A (weight gradients): 1 oneDNN sgemm (the default), 0 the
// matmul primitive, -1 back to the default (OT_GEMM_TA=matmul). For tests and benchmarks.
void ot__gemm_ta_set_mode(int mode);
// Linear forward's GELU without pre: 1 fused into the GEMM, 0 separate pass,
// -1 back to the default (fused only with oneDNN's avx512 brgemm kernels).
void ot__linear_set_gelu_fused(int mode);

// ---- kernels (kern/linear.c): prototypes in kern/linear_k.h

#endif
