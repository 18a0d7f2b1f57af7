// Forward passes of the serving engine over the paged KV cache, f32
// activations, every linear layer through ot_qlinear_fwd (the weights are read
// once per call for all rows):
//  - prefill: the P prompt tokens of one sequence; flash attention over the
//    prompt itself, its K/V written into the sequence's blocks;
//  - decode: one token for each of n sequences at their own positions; paged
//    split-KV attention over each sequence's blocks.
// The residual adds are fused into the following norm (res_out), as in
// kvcache.c: block input x, x2 = x + attention, next x = x2 + mlp.
#include "engine/batch_impl.h"
#include "ot/attn.h"

// y = norm(x + r) with res_out = x + r (r, res_out may be NULL), rows n.
static ot_status norm(ot_engine *e, float *y, float *res_out, const float *x, const float *r,
                      const float *g, const float *b, int n) {
  if (e->mc.norm == OT_NORM_LAYERNORM)
    return ot_layernorm_fwd(OT_F32, y, e->mean, e->rstd, res_out, x, r, g, b, n, e->C, e->mc.eps);
  return ot_rmsnorm_fwd(OT_F32, y, e->rstd, res_out, x, r, g, n, e->C, e->mc.eps);
}

// Embedding of row i: token tok at position pos -> x[i].
static ot_status embed_row(ot_engine *e, float *x, int32_t tok, int pos) {
  OT_TRY(ot_qweight_row(e->wte, tok, x));
  if (e->wpe) {
    const float *p = e->wpe + (size_t)pos * e->C;
    for (int c = 0; c < e->C; c++) x[c] += p[c];
  }
  return OT_OK;
}

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

// Attention of prefill rows [0, P) of layer l: e->qkv -> e->att.
static ot_status attn_prefill(ot_engine *e, int l, int P, int slot) {
  const int D = e->D, Hq = e->Hq, Hkv = e->Hkv;
  // [P, QKV] token-major -> q [Hq, P, D], k, v [Hkv, P, D] head-major
  for (int t = 0; t < P; t++) {
    const float *row = e->qkv + (size_t)t * e->QKV;
    for (int h = 0; h < Hq; h++)
      memcpy(e->qh + ((size_t)h * P + t) * D, row + (size_t)h * D, sizeof(float) * D);
    for (int h = 0; h < Hkv; h++) {
      memcpy(e->kh + ((size_t)h * P + t) * D, row + (size_t)(Hq + h) * D, sizeof(float) * D);
      memcpy(e->vh + ((size_t)h * P + t) * D, row + (size_t)(Hq + Hkv + h) * D, sizeof(float) * D);
    }
  }
  if (e->rope) {
    OT_TRY(ot_rope_fwd(OT_F32, e->qh, e->rope, e->mc.max_seq, 1, Hq, P, D, D, 0, e->mc.rope_style));
    OT_TRY(ot_rope_fwd(OT_F32, e->kh, e->rope, e->mc.max_seq, 1, Hkv, P, D, D, 0,
                       e->mc.rope_style));
  }
  if (slot >= 0) {
    const int32_t *tab = ot_kvpool_table(e->pool, slot, NULL);
    void *kb = ot_kvpool_base(e->pool, l, 0), *vb = ot_kvpool_base(e->pool, l, 1);
    for (int h = 0; h < Hkv; h++)
      for (int t = 0; t < P; t++) {
        const size_t off = kv_off(e, tab, t, h), src = ((size_t)h * P + t) * D;
        put_row(e, kb, off, e->kh + src);
        put_row(e, vb, off, e->vh + src);
      }
  }
  ot_attn_shape s = {1, Hq, Hkv, P, P, D, true, NULL, 0.0f};
  OT_TRY(ot_attn_flash_fwd(OT_F32, e->oh, NULL, e->qh, e->kh, e->vh, &s));
  for (int t = 0; t < P; t++)   // [Hq, P, D] -> [P, Hq * D]
    for (int h = 0; h < Hq; h++)
      memcpy(e->att + (size_t)t * e->HD + (size_t)h * D, e->oh + ((size_t)h * P + t) * D,
             sizeof(float) * D);
  return OT_OK;
}

// Attention of decode rows [0, n) of layer l: RoPE at each row's position, the
// new K/V into its blocks, then paged attention e->qkv -> e->att.
static ot_status attn_decode(ot_engine *e, int l, int n) {
  const int D = e->D, Hq = e->Hq, Hkv = e->Hkv;
  const int mb = ot_kvpool_config_of(e->pool)->max_blocks_per_seq;
  void *kb = ot_kvpool_base(e->pool, l, 0), *vb = ot_kvpool_base(e->pool, l, 1);
  for (int r = 0; r < n; r++) {
    float *q = e->qkv + (size_t)r * e->QKV, *k = q + (size_t)Hq * D, *v = k + (size_t)Hkv * D;
    if (e->rope) {
      OT_TRY(ot_rope_fwd(OT_F32, q, e->rope, e->mc.max_seq, 1, Hq, 1, D, D, e->pos[r],
                         e->mc.rope_style));
      OT_TRY(ot_rope_fwd(OT_F32, k, e->rope, e->mc.max_seq, 1, Hkv, 1, D, D, e->pos[r],
                         e->mc.rope_style));
    }
    const int32_t *tab = e->tabs + (size_t)r * mb;
    for (int h = 0; h < Hkv; h++) {
      const size_t off = kv_off(e, tab, e->pos[r], h);
      put_row(e, kb, off, k + (size_t)h * D);
      put_row(e, vb, off, v + (size_t)h * D);
    }
  }
  const int bt = e->cfg.block_tokens, nb = ot_kvpool_blocks(e->pool);
  ot_paged_attn p = {n, Hq, Hkv, D, bt, nb, e->cfg.kv_dtype, kb, vb, (size_t)bt * D,
                     (size_t)nb * bt * D, e->tabs, mb, e->kvl, 0.0f};
  return ot_attn_paged_decode(e->att, e->HD, e->qkv, e->QKV, &p);
}

// Every block over rows [0, n) of e->x; attention by mode (prefill: P = n rows
// of one sequence into `slot`; decode: n sequences).
static ot_status blocks(ot_engine *e, int n, bool prefill, int slot) {
  for (int l = 0; l < e->L; l++) {
    const ot__eng_layer *w = &e->ly[l];
    if (l == 0) OT_TRY(norm(e, e->y, NULL, e->x, NULL, w->ln1_w, w->ln1_b, n));
    else OT_TRY(norm(e, e->y, e->x, e->x2, e->abuf, w->ln1_w, w->ln1_b, n));
    OT_TRY(ot_qlinear_fwd(e->qkv, e->y, w->qkv, w->qkv_b, n));
    if (prefill) OT_TRY(attn_prefill(e, l, n, slot));
    else OT_TRY(attn_decode(e, l, n));
    OT_TRY(ot_qlinear_fwd(e->abuf, e->att, w->o, w->o_b, n));
    OT_TRY(norm(e, e->y, e->x2, e->x, e->abuf, w->ln2_w, w->ln2_b, n));
    if (e->mc.mlp == OT_MLP_GELU) {
      OT_TRY(ot_qlinear_fwd(e->h, e->y, w->fc, w->fc_b, n));
      OT_TRY(ot_gelu_fwd(OT_F32, e->h, e->h, (size_t)n * e->F));
    } else {
      OT_TRY(ot_qlinear_fwd(e->pre, e->y, w->fc, w->fc_b, n));
      OT_TRY(ot_swiglu_fwd(OT_F32, e->h, e->pre, n, e->F));
    }
    OT_TRY(ot_qlinear_fwd(e->abuf, e->h, w->proj, w->proj_b, n));
  }
  return OT_OK;
}

ot_status ot__eng_prefill(ot_engine *e, const int32_t *tokens, int P, int slot) {
  OT_PROF_BEGIN("engine_prefill", 0.0, 0.0);
  ot_status s = OT_OK;
  for (int t = 0; t < P && s == OT_OK; t++) s = embed_row(e, e->x + (size_t)t * e->C, tokens[t], t);
  if (s == OT_OK) s = blocks(e, P, true, slot);
  OT_PROF_STOP();
  return s;
}

ot_status ot__eng_norm_f(ot_engine *e, int r0, int n) {
  const size_t o = (size_t)r0 * e->C;
  // x (the next block's input) receives the residual sum; it is free after the last block
  return norm(e, e->y, e->x + o, e->x2 + o, e->abuf + o, e->lnf_w, e->lnf_b, n);
}

ot_status ot__eng_head(ot_engine *e, int y0, int n) {
  return ot_qlinear_fwd(e->logits, e->y + (size_t)y0 * e->C, &e->lm, NULL, n);
}

ot_status ot__eng_decode(ot_engine *e, int n) {
  OT_PROF_BEGIN("engine_decode", 0.0, 0.0);
  ot_status s = OT_OK;
  for (int r = 0; r < n && s == OT_OK; r++)
    s = embed_row(e, e->x + (size_t)r * e->C, e->tok[r], e->pos[r]);
  if (s == OT_OK) s = blocks(e, n, false, -1);
  if (s == OT_OK) s = ot__eng_norm_f(e, 0, n);
  if (s == OT_OK) s = ot__eng_head(e, 0, n);
  OT_PROF_STOP();
  return s;
}
