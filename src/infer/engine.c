// Batched serving engine: creation (weights from a quantized model, the block
// pool, the workspace) and continuous batching: sequences
// are admitted (blocks reserved for their whole length up front, prompt
// prefilled, first token sampled), stepped together, and leave when they end.
// Contract in include/ot/infer.h; the forward passes are in engine_fwd.c.
#include "infer/engine_impl.h"
#include <math.h>
#include <stdlib.h>

// Re-raises the current error as "<prefix>: <message>" (the message is copied
// first: it lives in the buffer ot_error writes).
static ot_status wrap(ot_status s, const char *prefix) {
  char msg[768];
  snprintf(msg, sizeof msg, "%s", ot_last_error());
  return ot_error(s, "%s: %s", prefix, msg);
}

// ----------------------------------------------------------- workspace ------
static ot_status plan_ws(ot_engine *e) {
  const size_t R = (size_t)e->R, C = (size_t)e->C, ms = (size_t)e->cfg.max_seqs;
  const size_t mb = (size_t)ot_kvpool_config_of(e->pool)->max_blocks_per_seq;
  float **f[] = {&e->x, &e->x2, &e->y, &e->abuf, &e->qkv, &e->att, &e->pre, &e->h, &e->mean,
                 &e->rstd, &e->qh, &e->kh, &e->vh, &e->oh, &e->logits};
  const size_t fn[] = {R * C, R * C, R * C, R * C, R * e->QKV, R * e->HD,
                       e->mc.mlp == OT_MLP_SWIGLU ? R * e->Fa : 0, R * e->F, R, R,
                       R * e->HD, R * e->Hkv * e->D, R * e->Hkv * e->D, R * e->HD,
                       (size_t)e->LR * e->V};
  int32_t **iv[] = {&e->tok, &e->pos, &e->kvl, &e->tabs};
  const size_t in[] = {ms, ms, ms, ms * mb};
  size_t bytes = 0;
  for (size_t i = 0; i < sizeof fn / sizeof fn[0]; i++) bytes += ot_align64(fn[i] * 4);
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) bytes += ot_align64(in[i] * 4);
  OT_TRY(ot_arena_init(&e->a_ws, "engine-workspace", bytes, OT_MEM_WORKSPACE));
  memset(e->a_ws.base, 0, bytes);
  for (size_t i = 0; i < sizeof fn / sizeof fn[0]; i++)
    *f[i] = fn[i] ? ot_arena_alloc(&e->a_ws, fn[i] * 4) : NULL;
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
    *iv[i] = ot_arena_alloc(&e->a_ws, in[i] * 4);
  return OT_OK;
}

// ------------------------------------------------------------- create -------
static ot_status resolve(ot_engine_config *k, const ot_model_config *c) {
  static const char fn[] = "ot_engine_create";
  if (k->kv_dtype != OT_F32 && k->kv_dtype != OT_BF16)
    return ot_error(OT_EINVAL, "%s: kv_dtype=%s unsupported (use f32 or bf16)", fn,
                    ot_dtype_name(k->kv_dtype));
  if (k->block_tokens == 0) k->block_tokens = 16;
  if (k->max_seqs == 0) k->max_seqs = 8;
  if (k->max_len == 0) k->max_len = c->max_seq;
  if (k->max_prompt == 0) k->max_prompt = k->max_len;
  if (k->block_tokens < 1 || k->block_tokens > 1024)
    return ot_error(OT_EINVAL, "%s: block_tokens=%d must be in [1, 1024], or 0 for 16", fn,
                    k->block_tokens);
  if (k->max_seqs < 1 || k->max_seqs > 4096)
    return ot_error(OT_EINVAL, "%s: max_seqs=%d must be in [1, 4096], or 0 for 8", fn, k->max_seqs);
  if (k->max_len < 1 || k->max_len > c->max_seq)
    return ot_error(OT_EINVAL, "%s: max_len=%d must be in [1, %d] (the model's max_seq: no "
                    "positions beyond), or 0 for all of it", fn, k->max_len, c->max_seq);
  if (k->max_prompt < 1 || k->max_prompt > k->max_len)
    return ot_error(OT_EINVAL, "%s: max_prompt=%d must be in [1, max_len=%d], or 0 for max_len", fn,
                    k->max_prompt, k->max_len);
  return OT_OK;
}

static ot_dtype kind_dtype(ot_qw_kind k) {
  return k == OT_QW_BF16 ? OT_BF16 : k == OT_QW_INT8 ? OT_I8 : OT_F32;
}

ot_status ot_engine_create_q(ot_engine **out, ot_qmodel *q, const ot_engine_config *cfg) {
  static const char fn[] = "ot_engine_create";
  ot_status s = OT_OK;
  if (!out || !q || !cfg)
    s = ot_error(OT_EINVAL, "%s: argument '%s' is NULL", fn, !out ? "out" : !q ? "q" : "cfg");
  if (out) *out = NULL;
  ot_engine_config k;
  if (s == OT_OK) {
    k = *cfg;
    k.weights = kind_dtype(q->kind);
    k.group = q->group;
    s = ot_model_config_validate(&q->config);
  }
  if (s == OT_OK) s = resolve(&k, &q->config);
  ot_engine *e = s == OT_OK ? calloc(1, sizeof *e) : NULL;
  if (s == OT_OK && !e) s = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  if (s != OT_OK) {
    ot_qmodel_free(q);
    return s;
  }
  const ot_model_config *c = &q->config;
  e->q = q;
  e->cfg = k;
  e->mc = *c;
  e->C = c->d_model; e->L = c->n_layers; e->Hq = c->n_heads; e->Hkv = c->n_kv_heads;
  e->D = ot_model_head_dim(c); e->F = c->d_ff;
  e->Fa = c->mlp == OT_MLP_SWIGLU ? 2 * c->d_ff : c->d_ff;
  e->V = c->vocab; e->HD = e->Hq * e->D; e->QKV = (e->Hq + 2 * e->Hkv) * e->D;
  e->R = k.max_seqs > k.max_prompt ? k.max_seqs : k.max_prompt;
  e->LR = k.max_seqs > 64 ? k.max_seqs : 64;
  if (e->LR > e->R) e->LR = e->R;
  e->blk = calloc((size_t)e->L, sizeof *e->blk);
  e->seq = calloc((size_t)k.max_seqs, sizeof *e->seq);
  e->order = calloc((size_t)k.max_seqs, sizeof *e->order);
  e->ev = calloc((size_t)k.max_seqs, sizeof *e->ev);
  e->row_id = malloc(sizeof(int) * (size_t)e->LR);
  if (!e->blk || !e->seq || !e->order || !e->ev || !e->row_id)
    s = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  for (int i = 0; s == OT_OK && i < k.max_seqs; i++) e->seq[i].id = -1;
  for (int i = 0; s == OT_OK && i < e->LR; i++) e->row_id[i] = -1;
  if (s == OT_OK && c->pos == OT_POS_ROPE) {
    e->rope = ot_mem_alloc(sizeof(float) * (size_t)c->max_seq * e->D, OT_MEM_PARAMS);
    if (!e->rope) s = ot_error(OT_ENOMEM, "%s: no memory for the RoPE table", fn);
  }
  if (s == OT_OK) s = ot__qmodel_graph(q, &e->g, e->blk, &e->lm, e->rope, true);
  if (s == OT_OK) {
    const int mb = (k.max_len + k.block_tokens - 1) / k.block_tokens;
    ot_kvpool_config pc = {e->L, e->Hkv, e->D, k.block_tokens, k.kv_dtype, k.kv_bytes, k.max_seqs,
                           mb};
    const size_t bb = (size_t)e->L * 2 * e->Hkv * k.block_tokens * e->D * ot_dtype_size(k.kv_dtype);
    if (pc.budget_bytes == 0) pc.budget_bytes = (size_t)k.max_seqs * mb * bb;
    s = ot_kvpool_create(&e->pool, &pc);
    if (s == OT_OK) e->cfg.kv_bytes = pc.budget_bytes;
  }
  if (s == OT_OK) s = plan_ws(e);
  if (s != OT_OK) {
    ot_engine_free(e);
    return s;
  }
  *out = e;
  return OT_OK;
}

ot_status ot_engine_create(ot_engine **out, const ot_model *m, const ot_engine_config *cfg) {
  static const char fn[] = "ot_engine_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(cfg, fn);
  if (cfg->weights != OT_F32 && cfg->weights != OT_BF16 && cfg->weights != OT_I8)
    return ot_error(OT_EINVAL, "%s: weights=%s unsupported (use f32, bf16 or i8)", fn,
                    ot_dtype_name(cfg->weights));
  if (cfg->weights != OT_I8 && cfg->group != 0)
    return ot_error(OT_EINVAL, "%s: group=%d applies to int8 weights only (use 0)", fn, cfg->group);
  const ot_qw_kind kind = cfg->weights == OT_BF16 ? OT_QW_BF16
                          : cfg->weights == OT_I8 ? OT_QW_INT8 : OT_QW_F32;
  ot_qmodel *q = NULL;
  ot_status s = ot_qmodel_from_model(&q, m, kind, cfg->group);
  if (s != OT_OK) return wrap(s, fn);
  return ot_engine_create_q(out, q, cfg);
}

void ot_engine_free(ot_engine *e) {
  if (!e) return;
  ot__team_quiesce();   // a preempted helper of a step may still read the weights
  for (int i = 0; e->seq && i < e->cfg.max_seqs; i++) ot_sampler_free(e->seq[i].smp);
  ot_qmodel_free(e->q);
  ot_mem_free(e->rope);
  ot_kvpool_free(e->pool);
  ot_arena_destroy(&e->a_ws);
  free(e->blk);
  free(e->seq);
  free(e->order);
  free(e->ev);
  free(e->row_id);
  free(e);
}

const ot_engine_config *ot_engine_config_of(const ot_engine *e) { return e ? &e->cfg : NULL; }
const ot_model_config *ot_engine_model_config(const ot_engine *e) { return e ? &e->mc : NULL; }
const ot_kvpool *ot_engine_pool(const ot_engine *e) { return e ? e->pool : NULL; }
int ot_engine_active(const ot_engine *e) { return e ? e->n_active : 0; }

size_t ot_engine_weight_bytes(const ot_engine *e) {
  if (!e) return 0;
  size_t b = ot_qweight_bytes(&e->lm);
  for (int l = 0; l < e->L; l++)
    b += ot_qweight_bytes(e->blk[l].qkv.q) + ot_qweight_bytes(e->blk[l].o.q) +
         ot_qweight_bytes(e->blk[l].fc.q) + ot_qweight_bytes(e->blk[l].proj.q);
  return b;
}

// ---------------------------------------------------------- sequences -------
static int slot_of(const ot_engine *e, int id) {
  for (int i = 0; id >= 0 && i < e->n_active; i++)
    if (e->seq[e->order[i]].id == id) return e->order[i];
  return -1;
}

// Frees slot's sampler, blocks and place in the batch.
static void release(ot_engine *e, int slot) {
  ot__eng_seq *q = &e->seq[slot];
  ot_sampler_free(q->smp);
  memset(q, 0, sizeof *q);
  q->id = -1;
  ot_kvpool_close(e->pool, slot);
  int j = 0;
  for (int i = 0; i < e->n_active; i++)
    if (e->order[i] != slot) e->order[j++] = e->order[i];
  e->n_active = j;
}

// Applies token `tok` sampled for slot from logits row `row`: fills *ev; the
// sequence leaves when it ends (ev->done).
static void apply(ot_engine *e, int slot, int row, int32_t tok, ot_engine_event *ev) {
  ot__eng_seq *q = &e->seq[slot];
  e->row_id[row] = q->id;
  ev->id = q->id;
  if (tok == q->stop) {
    ev->token = -1;
    ev->done = true;
  } else {
    ev->token = tok;
    q->next = tok;
    q->generated++;
    ev->done = q->generated >= q->max_tokens;
  }
  if (ev->done) release(e, slot);
}

static ot_status sample(ot_engine *e, int slot, int row, ot_engine_event *ev) {
  int32_t tok;
  OT_TRY(ot_sampler_sample(e->seq[slot].smp, e->logits + (size_t)row * e->V, &tok));
  apply(e, slot, row, tok, ev);
  return OT_OK;
}

static void invalidate_rows(ot_engine *e) {
  for (int i = 0; i < e->LR; i++) e->row_id[i] = -1;
}

ot_status ot_engine_add(ot_engine *e, const ot_request *r, int *id, ot_engine_event *first) {
  static const char fn[] = "ot_engine_add";
  OT_CHECK_PTR(e, fn);
  OT_CHECK_PTR(r, fn);
  OT_CHECK_PTR(id, fn);
  *id = -1;
  OT_CHECK_PTR(r->prompt, fn);
  if (r->n_prompt < 1)
    return ot_error(OT_EINVAL, "%s: n_prompt=%d: the prompt needs at least one token", fn,
                    r->n_prompt);
  if (r->max_tokens < 1)
    return ot_error(OT_EINVAL, "%s: max_tokens=%d must be >= 1", fn, r->max_tokens);
  if (r->n_prompt > e->cfg.max_prompt)
    return ot_error(OT_EINVAL, "%s: the prompt has %d tokens, more than max_prompt=%d (create the "
                    "engine with a larger max_prompt)", fn, r->n_prompt, e->cfg.max_prompt);
  const int64_t total = (int64_t)r->n_prompt + r->max_tokens - 1;
  if (total > e->cfg.max_len)
    return ot_error(OT_EINVAL, "%s: %d prompt tokens + max_tokens=%d exceed max_len=%d tokens (at "
                    "most %d new tokens fit)", fn, r->n_prompt, r->max_tokens, e->cfg.max_len,
                    e->cfg.max_len - r->n_prompt + 1);
  for (int i = 0; i < r->n_prompt; i++)
    if (r->prompt[i] < 0 || r->prompt[i] >= e->V)
      return ot_error(OT_EINVAL, "%s: prompt token %d at index %d outside [0, vocab=%d)", fn,
                      r->prompt[i], i, e->V);
  if (r->stop_token < -1 || r->stop_token >= e->V)
    return ot_error(OT_EINVAL, "%s: stop_token=%d must be -1 (none) or in [0, %d)", fn,
                    r->stop_token, e->V);
  int slot;
  ot_status s = ot_kvpool_open(e->pool, &slot);
  if (s != OT_OK) return wrap(s, "ot_engine_add: request refused");
  s = ot_kvpool_reserve(e->pool, slot, (int)total);
  if (s != OT_OK) {
    char pre[96];
    snprintf(pre, sizeof pre, "%s: request refused (%d active sequences)", fn, e->n_active);
    s = wrap(s, pre);
    ot_kvpool_close(e->pool, slot);
    return s;
  }
  ot__eng_seq *q = &e->seq[slot];
  s = ot_sampler_create(&q->smp, &r->sampler, e->V);
  invalidate_rows(e);
  if (s == OT_OK) {
    OT_PROF_BEGIN("engine_add", 0.0, 0.0);
    s = ot__eng_prefill(e, r->prompt, r->n_prompt, slot);
    if (s == OT_OK) s = ot__eng_norm_f(e, r->n_prompt - 1, 1);
    if (s == OT_OK) s = ot__eng_head(e, 0, 1);
    OT_PROF_STOP();
  }
  if (s != OT_OK) {
    ot_sampler_free(q->smp);
    q->smp = NULL;
    ot_kvpool_close(e->pool, slot);
    return s;
  }
  q->id = e->next_id++;
  q->len = r->n_prompt;
  q->generated = 0;
  q->max_tokens = r->max_tokens;
  q->stop = r->stop_token;
  e->order[e->n_active++] = slot;
  *id = q->id;
  ot_engine_event ev;
  s = sample(e, slot, 0, &ev);
  if (s != OT_OK) {
    release(e, slot);
    *id = -1;
    return s;
  }
  if (first) *first = ev;
  return OT_OK;
}

ot_status ot_engine_step(ot_engine *e, const ot_engine_event **ev, int *n_ev) {
  static const char fn[] = "ot_engine_step";
  OT_CHECK_PTR(e, fn);
  OT_CHECK_PTR(ev, fn);
  OT_CHECK_PTR(n_ev, fn);
  *ev = e->ev;
  *n_ev = 0;
  const int n = e->n_active;
  if (n == 0) return OT_OK;
  const int mb = ot_kvpool_config_of(e->pool)->max_blocks_per_seq;
  int slots[4096];
  for (int i = 0; i < n; i++) {
    const int sl = e->order[i];
    const ot__eng_seq *q = &e->seq[sl];
    int nb;
    const int32_t *tab = ot_kvpool_table(e->pool, sl, &nb);
    slots[i] = sl;
    e->tok[i] = q->next;
    e->pos[i] = q->len;
    e->kvl[i] = q->len + 1;
    memcpy(e->tabs + (size_t)i * mb, tab, sizeof(int32_t) * (size_t)nb);
  }
  invalidate_rows(e);
  const int tok = ot_prof_begin("engine_step", 0.0, 0.0);
  const bool steal = ot__team_steal_set(true);   // the weights and the pool outlive the step (see ot_engine_free)
  ot_status s = ot__eng_decode(e, n);
  ot__team_steal_set(steal);
  const int stok = ot_prof_begin("engine_sample", 0.0, 0.0);
  if (s == OT_OK) {
    // every sequence's own sampler over its own row, in parallel (each draw
    // depends only on that sampler's state, not on the thread)
    int bad = -1;
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
    for (int i = 0; i < n; i++)
      if (ot_sampler_sample(e->seq[slots[i]].smp, e->logits + (size_t)i * e->V, &e->tok[i]) !=
          OT_OK) {
#pragma omp critical(ot_engine_sample)
        bad = bad < 0 || i < bad ? i : bad;
      }
    if (bad >= 0)
      s = ot_error(OT_EINVAL, "%s: sequence %d: no finite logit to sample from", fn,
                   e->seq[slots[bad]].id);
    for (int i = 0; i < n && s == OT_OK; i++) {
      e->seq[slots[i]].len++;
      apply(e, slots[i], i, e->tok[i], &e->ev[i]);   // may release the slot (slots[] is a copy)
    }
  }
  ot_prof_end(stok);
  ot_prof_end(tok);
  if (s != OT_OK) return wrap(s, fn);
  *n_ev = n;
  return OT_OK;
}

ot_status ot_engine_set_token(ot_engine *e, int id, int32_t token) {
  static const char fn[] = "ot_engine_set_token";
  OT_CHECK_PTR(e, fn);
  const int slot = slot_of(e, id);
  if (slot < 0) return ot_error(OT_EINVAL, "%s: no active sequence has id %d", fn, id);
  if (token < 0 || token >= e->V)
    return ot_error(OT_EINVAL, "%s: token %d outside [0, vocab=%d)", fn, token, e->V);
  e->seq[slot].next = token;
  return OT_OK;
}

ot_status ot_engine_remove(ot_engine *e, int id) {
  static const char fn[] = "ot_engine_remove";
  OT_CHECK_PTR(e, fn);
  const int slot = slot_of(e, id);
  if (slot < 0) return ot_error(OT_EINVAL, "%s: no active sequence has id %d", fn, id);
  invalidate_rows(e);
  release(e, slot);
  return OT_OK;
}

const float *ot_engine_logits(const ot_engine *e, int id, int *V) {
  if (V) *V = e ? e->V : 0;
  if (!e || id < 0) return NULL;
  for (int i = 0; i < e->LR; i++)   // sequences that ended in that call included
    if (e->row_id[i] == id) return e->logits + (size_t)i * e->V;
  return NULL;
}

ot_status ot_engine_score(ot_engine *e, const int32_t *tokens, int n, double *nll, int *count) {
  static const char fn[] = "ot_engine_score";
  OT_CHECK_PTR(e, fn);
  OT_CHECK_PTR(tokens, fn);
  OT_CHECK_PTR(nll, fn);
  if (n < 2 || n > e->cfg.max_prompt)
    return ot_error(OT_EINVAL, "%s: n=%d must be in [2, max_prompt=%d]", fn, n, e->cfg.max_prompt);
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= e->V)
      return ot_error(OT_EINVAL, "%s: token %d at index %d outside [0, vocab=%d)", fn, tokens[i],
                      i, e->V);
  invalidate_rows(e);
  OT_TRY(ot__eng_prefill(e, tokens, n, -1));
  OT_TRY(ot__eng_norm_f(e, 0, n - 1));
  double sum = 0.0;
  for (int r0 = 0; r0 < n - 1; r0 += e->LR) {
    const int nr = n - 1 - r0 < e->LR ? n - 1 - r0 : e->LR;
    OT_TRY(ot__eng_head(e, r0, nr));
    for (int i = 0; i < nr; i++) {
      const float *lg = e->logits + (size_t)i * e->V;
      float mx = -INFINITY;
      for (int v = 0; v < e->V; v++) mx = lg[v] > mx ? lg[v] : mx;
      double z = 0.0;
      for (int v = 0; v < e->V; v++) z += exp((double)lg[v] - mx);
      sum += mx + log(z) - lg[tokens[r0 + i + 1]];
    }
  }
  *nll = sum;
  if (count) *count = n - 1;
  return OT_OK;
}
