// Private interface of the paged decode attention (attn_paged.c and its kernel
// kern/paged.c): the argument block and the chunking rule.
#ifndef OT_OPS_PAGED_IMPL_H
#define OT_OPS_PAGED_IMPL_H

#include "internal.h"
#include "ot/attn.h"

// Keys per split-KV chunk (rounded to whole blocks): fixed, so results do not
// depend on the thread count; the same size as the contiguous decode kernel's.
#define OT_PAGED_CHUNK 256

typedef struct {
  const ot_paged_attn *p;
  const float *q;
  float *o;
  int ldq, ldo;
  int G;                   // query heads per kv head
  int bpc;                 // blocks per chunk
  int bf16;                // cache storage is bf16
  float scale;             // resolved
  const int32_t *items;    // [nitems, 3]: row, kv head, chunk
  int nitems;
  const int32_t *nch;      // [n] chunks of row r
  const int64_t *poff;     // [n] offset of row r's partials in part (floats; rows with nch > 1)
  float *part;             // row r: [Hkv, nch, G, D + 2] partial (m, l, acc)
  const int32_t *merge;    // [nmerge] rows (r * Hq + h) whose chunks are merged
  int nmerge;
  float *ws;               // per-thread scratch, ws_pt floats each
  size_t ws_pt;
  int nt;
  int par;                 // run the items on nt threads
} ot__paged_args;

// Per-thread scratch floats for head dim D, G query heads, block_tokens bt.
static inline size_t ot__paged_ws_floats(int D, int G, int bt) {
  const size_t Dp = ((size_t)D + 15) & ~(size_t)15, Sp = ((size_t)bt + 15) & ~(size_t)15;
  return 2 * (size_t)G * Dp + 2 * ((size_t)G + 16) + Sp + 64;
}

OT_KDECL(void, k_attn_paged, (const ot__paged_args *A));

#endif
