// KV block pool: every block allocated once from a byte budget, a LIFO free
// list of block ids, and a block table per sequence slot. Reservation is all
// or nothing, so a refused request leaves the pool exactly as it was.
#include "internal.h"
#include "ot/infer.h"
#include <stdlib.h>

struct ot_kvpool {
  ot_kvpool_config cfg;
  int nblocks;
  size_t block_elems, block_bytes, es;   // one block: all layers, K and V, all heads
  uint8_t *data;        // [L][2][Hkv][nblocks][block_tokens][D] (OT_MEM_KVCACHE)
  int32_t *free_ids;    // stack of free block ids [nblocks]
  int nfree;
  int32_t *tables;      // [max_seqs, max_blocks_per_seq]
  int32_t *nblk;        // [max_seqs] blocks held; -1: slot closed
  int nopen;
};

ot_status ot_kvpool_create(ot_kvpool **out, const ot_kvpool_config *cfg) {
  static const char fn[] = "ot_kvpool_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(cfg, fn);
  const ot_kvpool_config c = *cfg;
  OT_CHECK_POS(c.n_layers, fn);
  OT_CHECK_POS(c.n_kv_heads, fn);
  OT_CHECK_POS(c.head_dim, fn);
  OT_CHECK_POS(c.block_tokens, fn);
  OT_CHECK_POS(c.max_seqs, fn);
  OT_CHECK_POS(c.max_blocks_per_seq, fn);
  if (c.dt != OT_F32 && c.dt != OT_BF16)
    return ot_error(OT_EINVAL, "%s: dt=%s unsupported (the cache stores f32 or bf16)", fn,
                    ot_dtype_name(c.dt));
  const size_t es = ot_dtype_size(c.dt);
  const size_t elems = (size_t)c.n_layers * 2 * c.n_kv_heads * c.block_tokens * c.head_dim;
  const size_t bb = elems * es;
  const size_t n = c.budget_bytes / bb;
  if (n < 1)
    return ot_error(OT_EINVAL, "%s: budget_bytes=%zu holds no block of %zu bytes (%d tokens x %d "
                    "layers x K,V x %d kv heads x %d x %s): raise the budget", fn, c.budget_bytes,
                    bb, c.block_tokens, c.n_layers, c.n_kv_heads, c.head_dim, ot_dtype_name(c.dt));
  if (n > INT32_MAX / 2)
    return ot_error(OT_EINVAL, "%s: budget_bytes=%zu gives %zu blocks, more than %d: use larger "
                    "blocks", fn, c.budget_bytes, n, INT32_MAX / 2);
  ot_kvpool *p = calloc(1, sizeof *p);
  if (!p) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  p->cfg = c;
  p->nblocks = (int)n;
  p->block_elems = elems;
  p->block_bytes = bb;
  p->es = es;
  p->data = ot_mem_alloc(n * bb, OT_MEM_KVCACHE);
  p->free_ids = ot_mem_alloc(sizeof(int32_t) * n, OT_MEM_KVCACHE);
  p->tables = ot_mem_alloc(sizeof(int32_t) * (size_t)c.max_seqs * c.max_blocks_per_seq,
                           OT_MEM_KVCACHE);
  p->nblk = ot_mem_alloc(sizeof(int32_t) * (size_t)c.max_seqs, OT_MEM_KVCACHE);
  if (!p->data || !p->free_ids || !p->tables || !p->nblk) {
    ot_kvpool_free(p);
    return ot_error(OT_ENOMEM, "%s: no memory for %zu blocks of %zu bytes", fn, n, bb);
  }
  // defined contents (the kernels never read beyond a sequence's length); also
  // faults the pages in now rather than during the first steps
  memset(p->data, 0, n * bb);
  memset(p->tables, 0xff, sizeof(int32_t) * (size_t)c.max_seqs * c.max_blocks_per_seq);
  for (int i = 0; i < (int)n; i++) p->free_ids[i] = (int32_t)(n - 1 - (size_t)i);  // pops 0, 1, ...
  p->nfree = (int)n;
  for (int s = 0; s < c.max_seqs; s++) p->nblk[s] = -1;
  *out = p;
  return OT_OK;
}

void ot_kvpool_free(ot_kvpool *p) {
  if (!p) return;
  ot_mem_free(p->data);
  ot_mem_free(p->free_ids);
  ot_mem_free(p->tables);
  ot_mem_free(p->nblk);
  free(p);
}

const ot_kvpool_config *ot_kvpool_config_of(const ot_kvpool *p) { return p ? &p->cfg : NULL; }
int ot_kvpool_blocks(const ot_kvpool *p) { return p ? p->nblocks : 0; }
int ot_kvpool_free_blocks(const ot_kvpool *p) { return p ? p->nfree : 0; }
size_t ot_kvpool_block_bytes(const ot_kvpool *p) { return p ? p->block_bytes : 0; }
size_t ot_kvpool_bytes(const ot_kvpool *p) { return p ? (size_t)p->nblocks * p->block_bytes : 0; }
int ot_kvpool_open_seqs(const ot_kvpool *p) { return p ? p->nopen : 0; }
const int32_t *ot_kvpool_tables(const ot_kvpool *p) { return p ? p->tables : NULL; }

bool ot_kvpool_is_open(const ot_kvpool *p, int seq) {
  return p && seq >= 0 && seq < p->cfg.max_seqs && p->nblk[seq] >= 0;
}

int ot_kvpool_capacity(const ot_kvpool *p, int seq) {
  return ot_kvpool_is_open(p, seq) ? p->nblk[seq] * p->cfg.block_tokens : 0;
}

const int32_t *ot_kvpool_table(const ot_kvpool *p, int seq, int *n_blocks) {
  if (n_blocks) *n_blocks = 0;
  if (!ot_kvpool_is_open(p, seq)) return NULL;
  if (n_blocks) *n_blocks = p->nblk[seq];
  return p->tables + (size_t)seq * p->cfg.max_blocks_per_seq;
}

void *ot_kvpool_base(const ot_kvpool *p, int layer, int kv) {
  if (!p || layer < 0 || layer >= p->cfg.n_layers || (kv != 0 && kv != 1)) return NULL;
  const size_t per = (size_t)p->cfg.n_kv_heads * p->nblocks * p->cfg.block_tokens * p->cfg.head_dim;
  return p->data + ((size_t)layer * 2 + (size_t)kv) * per * p->es;
}

ot_status ot_kvpool_open(ot_kvpool *p, int *seq) {
  static const char fn[] = "ot_kvpool_open";
  OT_CHECK_PTR(p, fn);
  OT_CHECK_PTR(seq, fn);
  for (int s = 0; s < p->cfg.max_seqs; s++)
    if (p->nblk[s] < 0) {
      p->nblk[s] = 0;
      p->nopen++;
      *seq = s;
      return OT_OK;
    }
  return ot_error(OT_ENOMEM, "%s: all %d sequence slots are in use (wait for a sequence to "
                  "finish, or create the pool with more max_seqs)", fn, p->cfg.max_seqs);
}

ot_status ot_kvpool_reserve(ot_kvpool *p, int seq, int tokens) {
  static const char fn[] = "ot_kvpool_reserve";
  OT_CHECK_PTR(p, fn);
  if (!ot_kvpool_is_open(p, seq))
    return ot_error(OT_EINVAL, "%s: sequence slot %d is not open", fn, seq);
  if (tokens < 0) return ot_error(OT_EINVAL, "%s: tokens=%d must be >= 0", fn, tokens);
  const int bt = p->cfg.block_tokens;
  const int need = (int)(((int64_t)tokens + bt - 1) / bt), have = p->nblk[seq];
  if (need <= have) return OT_OK;
  if (need > p->cfg.max_blocks_per_seq)
    return ot_error(OT_ENOMEM, "%s: %d tokens need %d blocks of %d tokens, more than the %d a "
                    "sequence may hold (max_blocks_per_seq): shorten the sequence", fn, tokens,
                    need, bt, p->cfg.max_blocks_per_seq);
  if (need - have > p->nfree)
    return ot_error(OT_ENOMEM, "%s: %d tokens need %d more blocks of %d tokens but only %d of %d "
                    "are free (pool of %.2f MB): wait for a sequence to finish, or raise the KV "
                    "cache budget", fn, tokens, need - have, bt, p->nfree, p->nblocks,
                    (double)p->nblocks * p->block_bytes / 1e6);
  int32_t *t = p->tables + (size_t)seq * p->cfg.max_blocks_per_seq;
  for (int i = have; i < need; i++) t[i] = p->free_ids[--p->nfree];
  p->nblk[seq] = need;
  return OT_OK;
}

ot_status ot_kvpool_close(ot_kvpool *p, int seq) {
  static const char fn[] = "ot_kvpool_close";
  OT_CHECK_PTR(p, fn);
  if (!ot_kvpool_is_open(p, seq))
    return ot_error(OT_EINVAL, "%s: sequence slot %d is not open", fn, seq);
  int32_t *t = p->tables + (size_t)seq * p->cfg.max_blocks_per_seq;
  for (int i = p->nblk[seq] - 1; i >= 0; i--) {   // pushed last to first: popped in table order
    p->free_ids[p->nfree++] = t[i];
    t[i] = -1;
  }
  p->nblk[seq] = -1;
  p->nopen--;
  return OT_OK;
}
