// Forward passes of the serving engine: the model graph's blocks (the one
// block forward of src/model/block.c) over the engine's quantized weights
// with f32 activations, keys and values in the paged block pool:
//  - prefill: the P prompt tokens of one sequence; flash attention over the
//    prompt itself, its K/V written into the sequence's blocks;
//  - decode: one token for each of n sequences at their own positions; paged
//    split-KV attention over each sequence's blocks.
// A block's output (x2 + abuf) is added by the next norm: x is each block's
// input, x2 = x + attention, the next x = x2 + mlp.
#include "infer/engine_impl.h"

// Writes D values of src as the cache's element type at dst (element offset).
static void put_row(const ot_engine *e, void *base, size_t off, const float *src) {
  if (e->cfg.kv_dtype == OT_BF16) ot_cvt_f32_to_bf16(src, (uint16_t *)base + off, (size_t)e->D);
  else memcpy((float *)base + off, src, sizeof(float) * (size_t)e->D);
}

// Element offset of (block table tab, position t, kv head h) in a layer's K or V.
static size_t kv_off(const ot_engine *e, const int32_t *tab, int t, int h) {
  const int bt = e->cfg.block_tokens;
  const size_t nb = (size_t)ot_kvpool_blocks(e->pool);
  return (((size_t)h * nb + (size_t)tab[t / bt]) * bt + (size_t)(t % bt)) * e->D;
}

// Block l's attention over the pool. Prefill (B = 1, T = P rows of one
// sequence): the rows' K/V into the blocks of e->fwd_slot (< 0: scoring, kept
// nowhere), flash attention over the rows. Decode (B = n sequences, T = 1):
// each row's K/V at its position e->pos[r], then paged attention over its
// blocks (e->tabs, e->kvl).
static ot_status pool_attend(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                             const void *q, const void *k, const void *v, int B, int T) {
  ot_engine *e = ((ot__eng_src *)self)->e;
  const int D = e->D, Hq = e->Hq, Hkv = e->Hkv;
  const float *kf = k, *vf = v;
  void *kb = ot_kvpool_base(e->pool, l, 0), *vb = ot_kvpool_base(e->pool, l, 1);
  if (!e->fwd_decode) {   // prefill of one sequence (or scoring)
    if (e->fwd_slot >= 0) {
      const int32_t *tab = ot_kvpool_table(e->pool, e->fwd_slot, NULL);
      for (int h = 0; h < Hkv; h++)
        for (int t = 0; t < T; t++) {
          const size_t off = kv_off(e, tab, t, h), src = ((size_t)h * T + t) * D;
          put_row(e, kb, off, kf + src);
          put_row(e, vb, off, vf + src);
        }
    }
    ot_attn_shape s = ot__self_shape(g, B, T, NULL);
    return ot_attn_flash_fwd(OT_F32, o, lse, q, k, v, &s);
  }
  const int mb = ot_kvpool_config_of(e->pool)->max_blocks_per_seq;
  for (int r = 0; r < B; r++) {
    const int32_t *tab = e->tabs + (size_t)r * mb;
    for (int h = 0; h < Hkv; h++) {
      const size_t off = kv_off(e, tab, e->pos[r], h), src = ((size_t)r * Hkv + h) * D;
      put_row(e, kb, off, kf + src);
      put_row(e, vb, off, vf + src);
    }
  }
  const int bt = e->cfg.block_tokens, nb = ot_kvpool_blocks(e->pool);
  ot_paged_attn p = {B, Hq, Hkv, D, bt, nb, e->cfg.kv_dtype, kb, vb, (size_t)bt * D,
                     (size_t)nb * bt * D, e->tabs, mb, e->kvl, 0.0f};
  return ot_attn_paged_decode(o, e->HD, q, e->HD, &p);
}

// Every block over rows [0, B * T) of e->x (prefill: B = 1, T = P; decode: B = n, T = 1).
static ot_status blocks(ot_engine *e, int B, int T, const int32_t *pos) {
  e->src.base.attend = pool_attend;
  e->src.e = e;
  ot__layer_acts A = {e->x, e->mean, e->rstd, e->y, e->qh, e->kh, e->vh, T > 1 ? e->att : NULL,
                      NULL, e->x2, e->mean, e->rstd, e->y,
                      e->mc.mlp == OT_MLP_SWIGLU ? e->pre : NULL, e->h};
  ot__block_io io = {B, T, e->x, NULL, &A, e->abuf, e->oh, e->qkv, 0, pos, &e->src.base};
  for (int l = 0; l < e->L; l++) {
    OT_TRY(ot__block_fwd(&e->g, l, &io, true));
    io.x = e->x2;
    io.r = e->abuf;
  }
  return OT_OK;
}

ot_status ot__eng_prefill(ot_engine *e, const int32_t *tokens, int P, int slot) {
  OT_PROF_BEGIN("engine_prefill", 0.0, 0.0);
  e->fwd_decode = false;
  e->fwd_slot = slot;
  ot_status s = ot__embed_fwd(&e->g, e->x, tokens, 1, P, 0, NULL);
  if (s == OT_OK) s = blocks(e, 1, P, NULL);
  OT_PROF_STOP();
  return s;
}

ot_status ot__eng_norm_f(ot_engine *e, int r0, int n) {
  const size_t o = (size_t)r0 * e->C;
  // x (the next block's input) receives the residual sum; it is free after the last block
  return ot__norm_fwd(&e->g, e->y, e->mean, e->rstd, e->x + o, e->x2 + o, e->abuf + o,
                      e->g.lnf_w, e->g.lnf_b, n);
}

ot_status ot__eng_head(ot_engine *e, int y0, int n) {
  return ot__wlinear(OT_F32, e->logits, NULL, e->y + (size_t)y0 * e->C, &e->g.head, NULL, n,
                     e->g.head_rows, e->C, OT_ACT_NONE);
}

ot_status ot__eng_decode(ot_engine *e, int n) {
  OT_PROF_BEGIN("engine_decode", 0.0, 0.0);
  e->fwd_decode = true;   // every row its own sequence
  ot_status s = ot__embed_fwd(&e->g, e->x, e->tok, n, 1, 0, e->pos);
  if (s == OT_OK) s = blocks(e, n, 1, e->pos);
  if (s == OT_OK) s = ot__eng_norm_f(e, 0, n);
  if (s == OT_OK) s = ot__eng_head(e, 0, n);
  OT_PROF_STOP();
  return s;
}
