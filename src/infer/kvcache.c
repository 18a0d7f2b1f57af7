// KV cache and the incremental forward: the model graph's blocks (the one
// block forward of src/model/block.c) over new tokens only, their K/V
// appended to a per-layer cache, the cache being the blocks' key/value source.
#include "model/graph.h"
#include "ot/infer.h"
#include <stdlib.h>

// The cache as the blocks' key/value source.
typedef struct {
  ot__kvsrc base;
  ot_kvcache *c;
} kv_src;

struct ot_kvcache {
  const ot_model *m;
  const ot__graph *g;      // the model's graph (its weights are read at each step)
  kv_src src;
  int C, D, Hq, Hkv, L, Vp;
  ot_kv_config cfg;        // resolved
  int S, len, R;           // capacity, tokens held, logit rows (B*chunk or B)
  ot_dtype dt;
  size_t es;               // element size of dt
  ot_arena a_kv, a_ws;
  void **k, **v;           // [L] -> [B, Hkv, S, D] (dt)
  int32_t *kv_len;         // [B]
  int32_t *tok;            // [B, chunk] tokens of one chunk (several sequences)
  // step buffers, N = B * chunk rows
  void *x, *x2, *y, *abuf; // [N, C] residual stream, after attention, norm output, projection
  void *q, *kn, *vn;       // [B, Hq|Hkv, chunk, D] new rows, head-major
  void *oh, *att;          // [B, Hq, chunk, D] attention output; [N, Hq*D] token-major
  void *pre, *h;           // [N, Fa], [N, F]
  float *mean, *rstd;      // [N]
  void *xl, *al, *rl, *yl; // [B, C] last rows: stream, projection, sum, norm output
  void *lgdt;              // [R, Vp] dt logits (bf16 runs only; f32 writes `logits`)
  float *logits;           // [R, Vp] f32
};

static ot_status cache_attend(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                              const void *q, const void *k, const void *v, int B, int T);


static void plan_kv(ot_kvcache *c, ot__planner *p) {
  const size_t per = (size_t)c->cfg.B * c->Hkv * c->S * c->D * c->es;
  c->k = ot__plan_take(p, sizeof(void *) * c->L);
  c->v = ot__plan_take(p, sizeof(void *) * c->L);
  c->kv_len = ot__plan_take(p, sizeof(int32_t) * c->cfg.B);
  for (int l = 0; l < c->L; l++) {
    void *k = ot__plan_take(p, per), *v = ot__plan_take(p, per);
    if (p->a && c->k && c->v) { c->k[l] = k; c->v[l] = v; }
  }
}

static void plan_ws(ot_kvcache *c, ot__planner *p) {
  const ot__arch *a = &c->g->a;
  const size_t N = (size_t)c->cfg.B * c->cfg.chunk, B = (size_t)c->cfg.B, es = c->es;
  const size_t C = (size_t)a->C, HD = (size_t)a->Hq * a->D, KD = (size_t)a->Hkv * a->D;
  c->tok = ot__plan_take(p, N * sizeof(int32_t));
  c->x = ot__plan_take(p, N * C * es);
  c->x2 = ot__plan_take(p, N * C * es);
  c->y = ot__plan_take(p, N * C * es);
  c->abuf = ot__plan_take(p, N * C * es);
  c->q = ot__plan_take(p, N * HD * es);
  c->kn = ot__plan_take(p, N * KD * es);
  c->vn = ot__plan_take(p, N * KD * es);
  c->oh = ot__plan_take(p, N * HD * es);
  c->att = ot__plan_take(p, N * HD * es);
  c->pre = ot__plan_take(p, N * (size_t)a->Fa * es);
  c->h = ot__plan_take(p, N * (size_t)a->F * es);
  c->mean = ot__plan_take(p, N * sizeof(float));
  c->rstd = ot__plan_take(p, N * sizeof(float));
  c->xl = ot__plan_take(p, B * C * es);
  c->al = ot__plan_take(p, B * C * es);
  c->rl = ot__plan_take(p, B * C * es);
  c->yl = ot__plan_take(p, B * C * es);
  c->lgdt = c->dt == OT_F32 ? NULL : ot__plan_take(p, (size_t)c->R * c->Vp * es);
  c->logits = ot__plan_take(p, (size_t)c->R * c->Vp * sizeof(float));
}

ot_status ot_kv_create(ot_kvcache **out, const ot_model *m, const ot_kv_config *cfg) {
  static const char fn[] = "ot_kv_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(m, fn);
  const ot_model_part *part = ot_model_part_of(m);
  if (part->tp != 1 || !ot_model_is_first(m) || !ot_model_is_last(m))
    return ot_error(OT_EINVAL, "%s: the model is one part of a parallel layout; generation needs "
                    "the whole model", fn);
  OT_CHECK_PTR(cfg, fn);
  ot_kv_config k = *cfg;
  const ot_model_config *mc = ot_model_config_of(m);
  const int ms = mc->max_seq;
  if (mc->arch == OT_ARCH_ENCDEC)
    return ot_error(OT_EUNSUPPORTED, "%s: encoder-decoder models have no decoder cache yet (score "
                    "with ot_model_forward_s2s)", fn);
  if (k.B <= 0 || k.B > 65536)
    return ot_error(OT_EINVAL, "%s: B=%d must be in [1, 65536]", fn, k.B);
  if (k.max_seq == 0) k.max_seq = ms;
  if (k.max_seq < 0 || k.max_seq > ms)
    return ot_error(OT_EINVAL, "%s: max_seq=%d must be in [1, %d] (the model's max_seq: its "
                    "position table has no rows beyond), or 0 for all of it", fn, k.max_seq, ms);
  if (k.chunk == 0) k.chunk = k.max_seq < 64 ? k.max_seq : 64;
  if (k.chunk < 0 || k.chunk > k.max_seq)
    return ot_error(OT_EINVAL, "%s: chunk=%d must be in [1, max_seq=%d], or 0 for min(max_seq, 64)",
                    fn, k.chunk, k.max_seq);
  ot_kvcache *c = calloc(1, sizeof *c);
  if (!c) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  c->m = m;
  c->g = ot__model_graph(m);
  c->src.base.attend = cache_attend;
  c->src.c = c;
  c->C = c->g->a.C; c->D = c->g->a.D; c->Hq = c->g->a.Hq; c->Hkv = c->g->a.Hkv;
  c->L = c->g->L; c->Vp = ot_model_vocab_padded(mc);
  c->cfg = k;
  c->S = k.max_seq;
  c->R = k.all_logits ? k.B * k.chunk : k.B;
  c->dt = c->g->dt;
  c->es = ot_dtype_size(c->dt);
  ot__planner dk = {0}, dw = {0};
  plan_kv(c, &dk);
  plan_ws(c, &dw);
  ot_status s = ot_arena_init(&c->a_kv, "kvcache", dk.bytes, OT_MEM_KVCACHE);
  if (s == OT_OK) s = ot_arena_init(&c->a_ws, "kv-workspace", dw.bytes, OT_MEM_WORKSPACE);
  if (s == OT_OK) {
    // defined contents: the kernels never read beyond kv_len, but tools stay quiet
    memset(c->a_kv.base, 0, c->a_kv.cap);
    memset(c->a_ws.base, 0, c->a_ws.cap);
    ot__planner pk = {&c->a_kv, 0, false}, pw = {&c->a_ws, 0, false};
    plan_kv(c, &pk);
    plan_ws(c, &pw);
    if (pk.failed || pw.failed || c->a_kv.used != c->a_kv.cap || c->a_ws.used != c->a_ws.cap)
      s = ot_error(OT_EINTERNAL, "%s: the cache plan does not cover its allocation", fn);
  }
  if (s != OT_OK) {
    ot_kv_free(c);
    return s;
  }
  *out = c;
  return OT_OK;
}

void ot_kv_free(ot_kvcache *c) {
  if (!c) return;
  ot__team_quiesce();   // a preempted helper of a step may still read the cache
  ot_arena_destroy(&c->a_kv);
  ot_arena_destroy(&c->a_ws);
  free(c);
}

void ot_kv_reset(ot_kvcache *c) { if (c) c->len = 0; }
int ot_kv_len(const ot_kvcache *c) { return c ? c->len : 0; }
int ot_kv_capacity(const ot_kvcache *c) { return c ? c->S : 0; }
const ot_model *ot_kv_model(const ot_kvcache *c) { return c ? c->m : NULL; }
const ot_kv_config *ot_kv_config_of(const ot_kvcache *c) { return c ? &c->cfg : NULL; }
size_t ot_kv_cache_bytes(const ot_kvcache *c) { return c ? c->a_kv.cap : 0; }
size_t ot_kv_workspace_bytes(const ot_kvcache *c) { return c ? c->a_ws.cap : 0; }

// ------------------------------------------------------------- helpers ------
// New K/V rows [B, Hkv, T, D] -> cache [B, Hkv, S, D] at positions [pos0, pos0 + T).
static void append(const ot_kvcache *c, void *cache, const void *rows, int T, int pos0) {
  const size_t row = (size_t)c->D * c->es;
  for (int bh = 0; bh < c->cfg.B * c->Hkv; bh++)
    memcpy((char *)cache + ((size_t)bh * c->S + pos0) * row, (const char *)rows + (size_t)bh * T * row,
           (size_t)T * row);
}

// Block l's attention: the new rows' K/V appended at the cache's length, then
// the rows against the cache (flash attention over themselves when it was empty).
static ot_status cache_attend(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                              const void *q, const void *k, const void *v, int B, int T) {
  ot_kvcache *c = ((kv_src *)self)->c;
  const int pos0 = c->len;
  append(c, c->k[l], k, T, pos0);
  append(c, c->v[l], v, T, pos0);
  if (pos0 == 0) {   // prefill of an empty cache: plain causal flash attention
    ot_attn_shape s = ot__self_shape(g, B, T, NULL);
    return ot_attn_flash_fwd(g->dt, o, lse, q, k, v, &s);
  }
  // new rows against the cache, aligned to its length
  ot_attn_shape s = {B, g->a.Hq, g->a.Hkv, T, c->S, g->a.D, g->a.causal, c->kv_len, 0.0f};
  return ot_attn_decode(g->dt, o, lse, q, c->k[l], c->v[l], &s);
}

// One chunk: T <= chunk new tokens per sequence at positions [len, len + T).
static ot_status step(ot_kvcache *c, const int32_t *tokens, int T, bool all) {
  const ot__graph *g = c->g;
  const ot_dtype dt = c->dt;
  const int B = c->cfg.B, N = B * T, pos0 = c->len;
  const size_t row = (size_t)c->C * c->es;
  for (int b = 0; b < B; b++) c->kv_len[b] = pos0 + T;
  OT_TRY(ot__embed_fwd(g, c->x, tokens, B, T, pos0, NULL));
  // every block's tensors in the step buffers; a block's output (x2 + abuf) is
  // added by the next norm
  ot__layer_acts A = {c->x, c->mean, c->rstd, c->y, c->q, c->kn, c->vn, T > 1 ? c->att : NULL,
                      NULL, c->x2, c->mean, c->rstd, c->y,
                      g->a.mlp == OT_MLP_SWIGLU ? c->pre : NULL, c->h};
  ot__block_io io = {B, T, c->x, NULL, &A, c->abuf, c->oh, NULL, pos0, NULL, &c->src.base};
  for (int l = 0; l < c->L; l++) {
    OT_TRY(ot__block_fwd(g, l, &io, true));
    io.x = c->x2;
    io.r = c->abuf;
  }
  // final norm of the last block's output, then the logits
  const void *yin;
  int rows;
  if (all) {
    OT_TRY(ot__norm_fwd(g, c->y, c->mean, c->rstd, c->x, c->x2, c->abuf, g->lnf_w, g->lnf_b, N));
    yin = c->y;
    rows = N;
  } else {
    for (int b = 0; b < B; b++) {
      const size_t last = ((size_t)b * T + T - 1) * row;
      memcpy((char *)c->xl + b * row, (const char *)c->x2 + last, row);
      memcpy((char *)c->al + b * row, (const char *)c->abuf + last, row);
    }
    OT_TRY(ot__norm_fwd(g, c->yl, c->mean, c->rstd, c->rl, c->xl, c->al, g->lnf_w, g->lnf_b, B));
    yin = c->yl;
    rows = B;
  }
  void *lg = dt == OT_F32 ? (void *)c->logits : c->lgdt;
  OT_TRY(ot__wlinear(dt, lg, NULL, yin, &g->head, NULL, rows, c->Vp, c->C, OT_ACT_NONE));
  if (dt != OT_F32) OT_TRY(ot_convert(lg, dt, c->logits, OT_F32, (size_t)rows * c->Vp));
  c->len = pos0 + T;
  return OT_OK;
}

ot_status ot_kv_forward(ot_kvcache *c, const int32_t *tokens, int T, bool all,
                        const float **logits, int *ld) {
  static const char fn[] = "ot_kv_forward";
  OT_CHECK_PTR(c, fn);
  OT_CHECK_PTR(tokens, fn);
  OT_CHECK_POS(T, fn);
  const ot_model_config *mc = ot_model_config_of(c->m);
  if (T > c->S - c->len)
    return ot_error(OT_EINVAL, "%s: %d new tokens after %d exceed the KV cache capacity of %d "
                    "tokens (create the cache with a larger max_seq, at most the model's %d, or "
                    "start over with ot_kv_reset)", fn, T, c->len, c->S, mc->max_seq);
  if (all && !c->cfg.all_logits)
    return ot_error(OT_EINVAL, "%s: all=true needs a cache created with all_logits", fn);
  if (all && T > c->cfg.chunk)
    return ot_error(OT_EINVAL, "%s: all=true with T=%d > chunk=%d (call it per chunk, or create "
                    "the cache with a larger chunk)", fn, T, c->cfg.chunk);
  const int B = c->cfg.B;
  for (int i = 0; i < B * T; i++)   // validate before any state changes
    if (tokens[i] < 0 || tokens[i] >= mc->vocab)
      return ot_error(OT_EINVAL, "%s: token %d at index %d outside [0, vocab=%d)", fn, tokens[i],
                      i, mc->vocab);
  OT_PROF_BEGIN("kv_forward", 0.0, 0.0);
  const bool steal = ot__team_steal_set(true);   // the weights and the cache outlive the call (see ot_kv_free)
  ot_status s = OT_OK;
  const int ch = c->cfg.chunk;
  if (B == 1 || T <= ch) {
    for (int t0 = 0; t0 < T && s == OT_OK; t0 += ch)
      s = step(c, tokens + t0, T - t0 < ch ? T - t0 : ch, all);
  } else {   // rows of several sequences: gather each chunk [B, n] into the token buffer
    int32_t *buf = c->tok;
    for (int t0 = 0; t0 < T && s == OT_OK; t0 += ch) {
      const int n = T - t0 < ch ? T - t0 : ch;
      for (int b = 0; b < B; b++)
        memcpy(buf + (size_t)b * n, tokens + (size_t)b * T + t0, sizeof(int32_t) * n);
      s = step(c, buf, n, all);
    }
  }
  ot__team_steal_set(steal);
  OT_PROF_STOP();
  if (s != OT_OK) return s;
  if (logits) *logits = c->logits;
  if (ld) *ld = c->Vp;
  return OT_OK;
}
