// The paged decode attention's kernel interface (kern/paged.c and its caller
// ops/attn_paged.c): the argument block, the chunking rule and the kernel's
// prototype, one variant per ISA. ISA-independent.
#ifndef OT_KERN_PAGED_K_H
#define OT_KERN_PAGED_K_H

#include "internal.h"

// Keys per split-KV chunk (rounded to whole blocks): fixed, so results do not
// depend on the thread count; the same size as the contiguous decode kernel's.
#define OT_PAGED_CHUNK 256

// The block pool as the kernel reads it (the fields of ot_paged_attn it needs,
// copied by the caller after validation): K rows of kv head h in block b start
// at k + h * head_stride + b * block_stride elements (V likewise).
typedef struct {
  int Hq, D, block_tokens;
  const void *k, *v;
  size_t block_stride, head_stride;
  const int32_t *tables;   // [n, table_stride]
  int table_stride;
  const int32_t *kv_len;   // [n]
} ot__paged_pool;

typedef struct {
  ot__paged_pool p;
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

// Runs A's items (one query row, kv head and chunk each) and merges the chunks
// of the rows in A->merge, in chunk order.
OT_KDECL(void, k_attn_paged, (const ot__paged_args *A));

#endif
