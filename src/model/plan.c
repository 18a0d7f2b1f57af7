// Memory plan and model lifecycle. One walker lists every buffer of a run
// (saved activations per layer or shared, by recompute policy; workspace);
// run dry it gives the plan, run with arenas it hands out the pointers, so the
// printed plan and what is allocated cannot disagree.
//
// What each recompute policy keeps per layer (N = B*T tokens, es = dt size):
//   none:      everything the backward reads: res, norm stats, y1, q, k, v,
//              attention output (token-major) + lse, res2, y2, fc output, h
//   selective: as none minus the attention output + lse and h (the activation
//              output), which the backward recomputes (flash forward, GELU/SwiGLU)
//   full:      res only; the backward reruns the block's forward into one
//              shared set of buffers before its backward
#include "model_impl.h"
#include <limits.h>
#include <stdlib.h>

// --------------------------------------------------------------- walker -----
typedef struct {
  bool alloc;
  ot_arena *act, *ws;
  size_t act_bytes, ws_bytes;
  bool failed;
} walker;

static void *take(walker *w, bool saved, size_t bytes) {
  size_t *acc = saved ? &w->act_bytes : &w->ws_bytes;
  *acc += ot_align64(bytes);
  if (!w->alloc) return NULL;
  void *p = ot_arena_alloc(saved ? w->act : w->ws, bytes);
  if (!p) w->failed = true;
  return p;
}

// Which block buffers the policy saves per layer (the others are shared).
enum { F_MEAN1, F_RSTD1, F_Y1, F_Q, F_K, F_V, F_ATTY, F_LSE, F_RES2, F_MEAN2, F_RSTD2, F_Y2,
       F_PRE, F_H, F_YC, F_RESC, F_MEANC, F_RSTDC, F_QC, F_ATTYC, F_LSEC, F_KC, F_VC, F_COUNT };
static bool saved_field(int f, ot_recompute r) {
  if (r == OT_RECOMPUTE_FULL) return false;
  if (r == OT_RECOMPUTE_SELECTIVE)
    return !(f == F_ATTY || f == F_LSE || f == F_H || f == F_ATTYC || f == F_LSEC);
  return true;
}

// Takes the block buffers that are saved (saved = true) or shared (false) for
// N rows; with cross (decoder blocks of an encoder-decoder) also the
// cross-attention's, its keys / values over NS = B*S source rows.
static void take_block(walker *w, const ot_model *m, ot__layer_acts *A, bool saved, size_t N,
                       bool cross, size_t NS) {
  const size_t es = ot_dtype_size(m->run.dt);
  const size_t C = (size_t)m->C, HD = (size_t)m->Hq * m->D, KD = (size_t)m->Hkv * m->D;
  const ot_recompute r = m->run.recompute;
  const bool ln = m->cfg.norm == OT_NORM_LAYERNORM;
  const size_t X = cross ? 1 : 0;
  size_t bytes[F_COUNT] = {
      [F_MEAN1] = ln ? N * 4 : 0, [F_RSTD1] = N * 4,    [F_Y1] = N * C * es,
      [F_Q] = N * HD * es,        [F_K] = N * KD * es,  [F_V] = N * KD * es,
      [F_ATTY] = N * HD * es,     [F_LSE] = N * (size_t)m->Hq * 4,
      [F_RES2] = N * C * es,      [F_MEAN2] = ln ? N * 4 : 0, [F_RSTD2] = N * 4,
      [F_Y2] = N * C * es,        [F_PRE] = N * (size_t)m->Fa * es, [F_H] = N * (size_t)m->F * es,
      [F_YC] = X * N * C * es,    [F_RESC] = X * N * C * es, [F_MEANC] = ln ? X * N * 4 : 0,
      [F_RSTDC] = X * N * 4,      [F_QC] = X * N * HD * es, [F_ATTYC] = X * N * HD * es,
      [F_LSEC] = X * N * (size_t)m->Hq * 4, [F_KC] = X * NS * KD * es, [F_VC] = X * NS * KD * es};
  void **dst[F_COUNT] = {
      (void **)&A->mean1, (void **)&A->rstd1, &A->y1, &A->q, &A->k, &A->v, &A->atty,
      (void **)&A->lse, &A->res2, (void **)&A->mean2, (void **)&A->rstd2, &A->y2, &A->pre, &A->h,
      &A->yc, &A->resc, (void **)&A->meanc, (void **)&A->rstdc, &A->qc, &A->attyc,
      (void **)&A->lsec, &A->kc, &A->vc};
  for (int f = 0; f < F_COUNT; f++) {
    if (saved_field(f, r) != saved || !bytes[f]) continue;
    *dst[f] = take(w, saved, bytes[f]);
  }
}

// Encoder-decoder: the encoder's saved buffers of slot S (per layer, then the source
// copies, the final norm's and the encoder output; pointers when alloc).
static void walk_encoder(walker *w, ot_model *m, ot_mem_plan *p, ot__slot *sl) {
  const size_t NS = (size_t)m->run.B * m->run.S, es = ot_dtype_size(m->run.dt), C = (size_t)m->C;
  const bool ln = m->cfg.norm == OT_NORM_LAYERNORM;
  ot__layer_acts tmp;
  const size_t before = w->act_bytes;
  for (int l = 0; l < m->Le; l++) {
    ot__layer_acts *A = w->alloc ? &sl->ela[l] : &tmp;
    memset(A, 0, sizeof *A);
    size_t b0 = w->act_bytes;
    A->res = take(w, true, NS * C * es);
    take_block(w, m, A, true, NS, false, 0);
    p->act_saved_enc_layer = w->act_bytes - b0;
  }
  sl->src = take(w, true, NS * sizeof(int32_t));
  sl->src_len = take(w, true, NS * sizeof(int32_t));   // rows: up to one per source token
  sl->tgt = take(w, true, (size_t)m->run.B * m->run.T * sizeof(int32_t));
  // (pipeline stages: the final encoder norm on the stage of the last encoder block, the
  // embedding norms where the stacks embed; enc_out everywhere: the encoder output, or
  // an encoder-only stage's output before the last encoder block's stage)
  const bool pre = m->cfg.norm_place == OT_PLACE_PRE && m->enc_last;
  sl->enc_res = pre ? take(w, true, NS * C * es) : NULL;
  sl->emean = pre && ln ? take(w, true, NS * 4) : NULL;
  sl->erstd = pre ? take(w, true, NS * 4) : NULL;
  sl->enc_out = take(w, true, NS * C * es);
  const bool en = m->cfg.embed_norm && m->first, dn = m->cfg.embed_norm && m->dec_first;
  sl->eemb = en ? take(w, true, NS * C * es) : NULL;
  sl->eemean = en && ln ? take(w, true, NS * 4) : NULL;
  sl->eerstd = en ? take(w, true, NS * 4) : NULL;
  p->act_enc = w->act_bytes - before;
  // the decoder's embedding norm input (counted with the model-level activations)
  const size_t N = (size_t)m->run.B * m->run.T;
  sl->demb = dn ? take(w, true, N * C * es) : NULL;
  sl->demean = dn && ln ? take(w, true, N * 4) : NULL;
  sl->derstd = dn ? take(w, true, N * 4) : NULL;
}

// Lists every activation and workspace buffer of m's run (pointers set when
// alloc): per slot, the blocks' saved buffers and the model-level ones (the
// embedding's tokens on the first stage, the stage output / final norm input,
// and the head's buffers on the last); then the shared workspace.
static void walk(walker *w, ot_model *m, ot_mem_plan *p) {
  const size_t N = (size_t)m->run.B * m->run.T, es = ot_dtype_size(m->run.dt);
  const bool encdec = m->cfg.arch == OT_ARCH_ENCDEC, vit = m->cfg.arch == OT_ARCH_VIT;
  const size_t NS = encdec ? (size_t)m->run.B * m->run.S : 0, NX = NS > N ? NS : N;
  const size_t C = (size_t)m->C, HD = (size_t)m->Hq * m->D, KD = (size_t)m->Hkv * m->D;
  const bool ln = m->cfg.norm == OT_NORM_LAYERNORM;
  ot__layer_acts tmp;
  ot__slot tslot;
  p->act_logits = 0;
  for (int sl = 0; sl < m->part.slots; sl++) {
    ot__slot *S = w->alloc ? &m->slots[sl] : &tslot;
    memset(S, 0, sizeof *S);
    S->la = w->alloc ? &m->la_all[(size_t)sl * m->L] : NULL;
    S->ela = w->alloc ? &m->ela_all[(size_t)sl * m->Le] : NULL;
    // saved: per layer
    for (int l = 0; l < m->L; l++) {
      ot__layer_acts *A = w->alloc ? &S->la[l] : &tmp;
      memset(A, 0, sizeof *A);
      size_t before = w->act_bytes;
      A->res = take(w, true, N * C * es);
      take_block(w, m, A, true, N, encdec, NS);
      p->act_saved_layer = w->act_bytes - before;
    }
    // saved: model level (a ViT's head and loss: one row per image)
    const size_t NH = vit ? (size_t)m->run.B : N;
    if (m->first && !encdec) S->tokens = take(w, true, N * sizeof(int32_t));
    if (!encdec || m->L > 0) S->resf = take(w, true, N * C * es);
    if (m->last) {
      S->meanf = ln ? take(w, true, N * 4) : NULL;
      S->rstdf = take(w, true, N * 4);
      S->yf = take(w, true, N * C * es);
      size_t before = w->act_bytes;
      S->logits = take(w, true, NH * (size_t)m->Vl * es);
      p->act_logits += w->act_bytes - before;
      S->row_loss = take(w, true, NH * 4);
    }
    // ViT (first stage): the unfolded patches of every image (the patch projection's
    // backward reads them)
    const size_t vK = vit ? (size_t)m->cfg.channels * m->cfg.patch_size * m->cfg.patch_size : 0;
    S->vcols = vit && m->first ? take(w, true, (size_t)m->run.B * (m->run.T - 1) * vK * es) : NULL;
    if (encdec) walk_encoder(w, m, p, S);
  }
  p->act_saved = w->act_bytes;
  // workspace: one block's non-saved buffers, shared by every layer (of both stacks:
  // NX rows, the longer of target and source)
  size_t before = w->ws_bytes;
  memset(&m->shared, 0, sizeof m->shared);
  take_block(w, m, &m->shared, false, NX, encdec, NS);
  m->abuf = take(w, false, NX * C * es);
  m->ohead = take(w, false, NX * HD * es);
  m->ctok = encdec ? take(w, false, NS * KD * es) : NULL;
  p->workspace_layer = w->ws_bytes - before;
  // workspace: backward
  before = w->ws_bytes;
  m->dres = take(w, false, NX * C * es);
  m->dy = take(w, false, NX * C * es);
  m->datty = take(w, false, NX * HD * es);
  m->dohead = take(w, false, NX * HD * es);
  m->dq = take(w, false, NX * HD * es);
  m->dk = take(w, false, NX * KD * es);
  m->dv = take(w, false, NX * KD * es);
  m->dh = take(w, false, NX * (size_t)m->F * es);
  m->dfc = m->cfg.mlp == OT_MLP_SWIGLU ? take(w, false, NX * (size_t)m->Fa * es) : NULL;
  m->denc = encdec ? take(w, false, NS * C * es) : NULL;
  m->ctmp = encdec ? take(w, false, NS * C * es) : NULL;
  p->workspace_bwd = w->ws_bytes - before;
  m->pos_tab = m->cfg.pos == OT_POS_SINUSOID ? take(w, false, (size_t)m->cfg.max_seq * C * 4) : NULL;
  m->rope = m->cfg.pos == OT_POS_ROPE ? take(w, false, (size_t)m->cfg.max_seq * m->D * 4) : NULL;
  m->xred = m->last && m->part.vocab_parallel ? take(w, false, 4 * N * 4) : NULL;
  m->vpos = vit ? take(w, false, (size_t)m->run.T * C * 4) : NULL;    // this run's positions
  m->vdpos = vit ? take(w, false, (size_t)m->run.T * C * 4) : NULL;   // and their gradient
  p->workspace = w->ws_bytes;
  // the non-saved block fields of every layer point at the shared set
  if (w->alloc)
    for (size_t l = 0; l < (size_t)(m->L + m->Le) * m->part.slots; l++) {
      const size_t nd = (size_t)m->L * m->part.slots;
      ot__layer_acts *A = l < nd ? &m->la_all[l] : &m->ela_all[l - nd], *S = &m->shared;
#define SH(f) if (!A->f) A->f = S->f
      SH(mean1); SH(rstd1); SH(y1); SH(q); SH(k); SH(v); SH(atty); SH(lse);
      SH(res2); SH(mean2); SH(rstd2); SH(y2); SH(pre); SH(h);
      if (l < nd && encdec) {
        SH(yc); SH(resc); SH(meanc); SH(rstdc); SH(qc); SH(attyc); SH(lsec); SH(kc); SH(vc);
      }
#undef SH
    }
}

void ot__select_slot(ot_model *m, int s) {
  ot__slot *o = &m->slots[m->cur];
  o->B = m->B;
  o->T = m->T;
  o->have_grad_state = m->have_grad_state;
  o->drop = m->ddrop;
  o->S = m->S;
  o->edrop = m->edrop;
  o->vH = m->vH;
  o->vW = m->vW;
  o->vinterp = m->vinterp;
  ot__slot *S = &m->slots[s];
  m->cur = s;
  m->la = S->la;
  m->tokens = S->tokens;
  m->resf = S->resf;
  m->meanf = S->meanf;
  m->rstdf = S->rstdf;
  m->yf = S->yf;
  m->logits = S->logits;
  m->row_loss = S->row_loss;
  m->B = S->B;
  m->T = S->T;
  m->have_grad_state = S->have_grad_state;
  m->ddrop = S->drop;
  m->ela = S->ela;
  m->src = S->src;
  m->src_len = S->src_len;
  m->tgt = S->tgt;
  m->enc_res = S->enc_res;
  m->emean = S->emean;
  m->erstd = S->erstd;
  m->enc_out = S->enc_out;
  m->eemb = S->eemb;
  m->eemean = S->eemean;
  m->eerstd = S->eerstd;
  m->demb = S->demb;
  m->demean = S->demean;
  m->derstd = S->derstd;
  m->S = S->S;
  m->edrop = S->edrop;
  m->vcols = S->vcols;
  m->vH = S->vH;
  m->vW = S->vW;
  m->vinterp = S->vinterp;
}

// ------------------------------------------------------------ validation ----
static ot_status run_validate(const ot_model_config *c, const ot_run_config *r) {
  static const char fn[] = "model run";
  OT_CHECK_PTR(r, fn);
  if (r->B <= 0) return ot_error(OT_EINVAL, "%s: batch B=%d must be > 0", fn, r->B);
  if (c->arch == OT_ARCH_VIT && r->T < 2)   // a ViT's positions may be interpolated past max_seq
    return ot_error(OT_EINVAL, "%s: T=%d tokens per image must be >= 2 (CLS + patches: %d at "
                    "%dx%d)", fn, r->T, c->max_seq, c->image_size, c->image_size);
  if (c->arch != OT_ARCH_VIT && (r->T <= 0 || r->T > c->max_seq))
    return ot_error(OT_EINVAL, "%s: sequence T=%d must be in [1, max_seq=%d]", fn, r->T, c->max_seq);
  if (r->dt != OT_F32 && r->dt != OT_BF16 && r->dt != OT_F16)
    return ot_error(OT_EINVAL, "%s: activation dtype %s unsupported (use f32, bf16 or f16)", fn,
                    ot_dtype_name(r->dt));
  if (r->recompute != OT_RECOMPUTE_NONE && r->recompute != OT_RECOMPUTE_SELECTIVE &&
      r->recompute != OT_RECOMPUTE_FULL)
    return ot_error(OT_EINVAL, "%s: recompute=%d unknown (use none, selective or full)", fn,
                    (int)r->recompute);
  if (r->ignore_index >= 0 && r->ignore_index < c->vocab)
    return ot_error(OT_EINVAL, "%s: ignore_index=%d is a real token id (vocab %d); use a negative "
                    "value such as -1 or -100", fn, r->ignore_index, c->vocab);
  if (c->arch == OT_ARCH_ENCDEC && (r->S <= 0 || r->S > c->max_seq))
    return ot_error(OT_EINVAL, "%s: source length S=%d must be in [1, max_seq=%d] for the "
                    "encoder-decoder '%s'", fn, r->S, c->max_seq, c->name);
  if (c->arch != OT_ARCH_ENCDEC && r->S != 0)
    return ot_error(OT_EINVAL, "%s: S=%d is the source length of encoder-decoder models; leave it "
                    "0 for the decoder-only '%s'", fn, r->S, c->name);
  int64_t N = (int64_t)r->B * (r->T > r->S ? r->T : r->S);
  if (N > INT_MAX / 4 || N * ot_model_vocab_padded(c) > (int64_t)INT_MAX * 64)
    return ot_error(OT_EINVAL, "%s: B*T=%lld tokens is too large", fn, (long long)N);
  return OT_OK;
}

// Whether a 16-bit run keeps a copy of the weights in its dtype: bf16 where bf16 GEMMs
// run natively (oneDNN reads bf16 weights) and for vision transformers (their patch
// embedding reads weights in the activation dtype); any other 16-bit dtype always.
// Elsewhere (bf16 with converting GEMMs) the conversion path reads the f32 masters in
// place, tile by tile, and the embeddings read the f32 tables.
static bool keeps_bf16_copy(const ot_model *m) {
  if (m->run.dt == OT_F32) return false;
  return m->run.dt != OT_BF16 || ot_gemm_bf16_native() || m->cfg.arch == OT_ARCH_VIT;
}

static void plan_params(ot_model *m, ot_mem_plan *p) {
  const size_t ns = m->n_stored ? m->n_stored : m->n_floats;   // ZeRO-3 parts store less
  p->n_floats = m->n_floats;
  p->params = ot_align64(ns * sizeof(float));
  p->params_bf16 = keeps_bf16_copy(m) ? ot_align64(ns * sizeof(uint16_t)) : 0;
  p->grads = m->part.external_grads ? 0 : ot_align64(m->n_floats * sizeof(float));
  p->optim = 2 * ot_align64(m->n_floats * sizeof(float));
}

ot_status ot_model_plan(const ot_model_config *c, const ot_run_config *r, ot_mem_plan *p) {
  OT_CHECK_PTR(p, "ot_model_plan");
  OT_TRY(ot_model_config_validate(c));
  OT_TRY(run_validate(c, r));
  ot_model m;
  memset(&m, 0, sizeof m);
  ot_model_part whole = ot_model_part_whole(c);
  ot__set_dims(&m, c, r, &whole);
  ot_status s = ot__layout_build(&m);
  if (s == OT_OK) {
    memset(p, 0, sizeof *p);
    plan_params(&m, p);
    walker w = {0};
    walk(&w, &m, p);
  }
  ot__layout_free(&m);
  return s;
}

static double mib(size_t b) { return (double)b / 1048576.0; }

ot_status ot_model_plan_print(FILE *f, const ot_model_config *c, const ot_run_config *r) {
  OT_CHECK_PTR(f, "ot_model_plan_print");
  ot_mem_plan p, q[3];
  OT_TRY(ot_model_plan(c, r, &p));
  for (int i = 0; i < 3; i++) {
    ot_run_config rr = *r;
    rr.recompute = (ot_recompute)i;
    OT_TRY(ot_model_plan(c, &rr, &q[i]));
  }
  const int L = c->n_layers;
  if (c->arch == OT_ARCH_ENCDEC) fprintf(f, "encoder-decoder: source S=%d\n", r->S);
  fprintf(f, "memory plan: B=%d T=%d, %s activations, recompute %s, %zu master floats\n", r->B,
          r->T, ot_dtype_name(r->dt), ot_recompute_name(r->recompute), p.n_floats);
  char line[64];
  fprintf(f, "  %-34s %12.2f MiB\n", "parameters (f32 master)", mib(p.params));
  if (p.params_bf16) {   // the 16-bit copy the GEMMs read (bf16 or f16, as the activations)
    snprintf(line, sizeof line, "parameters (%s copy)", ot_dtype_name(r->dt));
    fprintf(f, "  %-34s %12.2f MiB\n", line, mib(p.params_bf16));
  } else if (r->dt == OT_BF16) {
    fprintf(f, "  %-34s %12.2f MiB  (none: no native bf16 GEMM here; the GEMMs read the f32 "
            "masters, converting bf16 operands by tiles in <= %.0f MiB per thread)\n",
            "parameters (bf16 copy)", 0.0, mib(ot_gemm_convert_ws_max()));
  }
  fprintf(f, "  %-34s %12.2f MiB\n", "gradients (f32)", mib(p.grads));
  fprintf(f, "  %-34s %12.2f MiB  (not allocated by the model)\n", "optimizer (AdamW m, v; f32)",
          mib(p.optim));
  snprintf(line, sizeof line, "activations: per layer (x %d)", L);
  fprintf(f, "  %-34s %12.2f MiB\n", line, mib(p.act_saved_layer * (size_t)L));
  if (c->arch == OT_ARCH_ENCDEC) {
    snprintf(line, sizeof line, "activations: encoder layer (x %d)", c->n_enc_layers);
    fprintf(f, "  %-34s %12.2f MiB\n", line, mib(p.act_saved_enc_layer * (size_t)c->n_enc_layers));
    fprintf(f, "  %-34s %12.2f MiB\n", "activations: encoder ids/final/out",
            mib(p.act_enc - p.act_saved_enc_layer * (size_t)c->n_enc_layers));
  }
  fprintf(f, "  %-34s %12.2f MiB\n", "activations: logits", mib(p.act_logits));
  fprintf(f, "  %-34s %12.2f MiB\n", "activations: embedding/final/loss",
          mib(p.act_saved - p.act_enc - p.act_logits - p.act_saved_layer * (size_t)L));
  fprintf(f, "  %-34s %12.2f MiB\n", "workspace: shared block buffers", mib(p.workspace_layer));
  fprintf(f, "  %-34s %12.2f MiB\n", "workspace: backward", mib(p.workspace_bwd));
  fprintf(f, "  %-34s %12.2f MiB\n", "workspace: tables",
          mib(p.workspace - p.workspace_layer - p.workspace_bwd));
  size_t tot = p.params + p.params_bf16 + p.grads + p.act_saved + p.workspace;
  fprintf(f, "  %-34s %12.2f MiB  (+ %.2f MiB optimizer = %.2f MiB)\n", "total allocated", mib(tot),
          mib(p.optim), mib(tot + p.optim));
  if (c->dropout > 0.0f || c->attn_dropout > 0.0f || c->act_dropout > 0.0f)
    fprintf(f, "  %-34s %12.2f MiB  (masks regenerated from counters in the backward)\n",
            "dropout masks", 0.0);
  fprintf(f, "  recompute   activations    workspace   act+ws MiB   saves vs none\n");
  const size_t base = q[0].act_saved + q[0].workspace;
  for (int i = 0; i < 3; i++) {
    size_t t = q[i].act_saved + q[i].workspace;
    fprintf(f, "  %-10s %12.2f %12.2f %12.2f %12.2f MiB%s\n", ot_recompute_name((ot_recompute)i),
            mib(q[i].act_saved), mib(q[i].workspace), mib(t), mib(base > t ? base - t : 0),
            i == (int)r->recompute ? "  <- this run" : "");
  }
  return OT_OK;
}

// ------------------------------------------------------------- lifecycle ----
void ot_model_free(ot_model *m) {
  if (!m) return;
  ot__team_quiesce();   // a preempted helper of a decode step may still read the weights
  ot_arena_destroy(&m->a_params);
  ot_arena_destroy(&m->a_grads);
  ot_arena_destroy(&m->a_act);
  ot_arena_destroy(&m->a_ws);
  ot__layout_free(m);
  free(m->la_all);
  free(m->slots);
  free(m->slices);
  free(m->gp);
  free(m->wpos);
  free(m->sbr);
  free(m->blkw);
  free(m->ela_all);
  free(m->eblkw);
  ot_mem_free(m->wq);
  ot_qmodel_free(m->qm);
  ot_mem_free(m->qtok);
  free(m);
}

ot_status ot_model_create(ot_model **out, const ot_model_config *c, const ot_run_config *r) {
  OT_CHECK_PTR(c, "ot_model_create");
  ot_model_part whole = ot_model_part_whole(c);
  return ot_model_create_part(out, c, r, &whole);
}

// Creates the part's model; dry: its layout and memory plan only (no buffer, no graph:
// what ot_model_plan_part reads), with the same validation and the same walker.
static ot_status create_part(ot_model **out, const ot_model_config *c, const ot_run_config *r,
                             const ot_model_part *part, bool dry) {
  static const char fn[] = "ot_model_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(c, fn);
  OT_TRY(ot_model_config_validate(c));
  OT_TRY(run_validate(c, r));
  OT_TRY(ot_model_part_validate(c, part));
  if (c->arch == OT_ARCH_VIT && part->vocab_parallel && part->tp > 1)
    return ot_error(OT_EUNSUPPORTED, "%s: a vision transformer's classifier is not split over the "
                    "tensor ranks (vocab_parallel is for language models' vocabularies; leave it off)",
                    fn);
  ot_model *m = calloc(1, sizeof *m);
  if (!m) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  ot__set_dims(m, c, r, part);
  ot_status s = ot__layout_build(m);
  if (s == OT_OK) s = ot__slices_build(m);
  if (s == OT_OK) s = ot__slots_build(m);
  if (s == OT_OK) {
    m->la_all = calloc((size_t)m->L * part->slots + 1, sizeof *m->la_all);
    m->slots = calloc((size_t)part->slots, sizeof *m->slots);
    m->gp = calloc((size_t)m->n_params + 1, sizeof *m->gp);
    m->ela_all = calloc((size_t)m->Le * part->slots + 1, sizeof *m->ela_all);
    if (!m->la_all || !m->slots || !m->gp || !m->ela_all)
      s = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  }
  ot_mem_plan *p = &m->plan;
  if (s == OT_OK) {
    plan_params(m, p);
    walker w0 = {0};
    walk(&w0, m, p);
    if (dry) {
      *out = m;
      return OT_OK;
    }
    s = ot__slots_check_hooks(m);
  }
  if (s == OT_OK) s = ot_arena_init(&m->a_params, "params", p->params + p->params_bf16, OT_MEM_PARAMS);
  if (s == OT_OK && p->grads) s = ot_arena_init(&m->a_grads, "grads", p->grads, OT_MEM_GRADS);
  if (s == OT_OK) s = ot_arena_init(&m->a_act, "activations", p->act_saved, OT_MEM_ACTIVATIONS);
  if (s == OT_OK) s = ot_arena_init(&m->a_ws, "workspace", p->workspace, OT_MEM_WORKSPACE);
  if (s == OT_OK) {
    m->w = ot_arena_alloc(&m->a_params, m->n_stored * sizeof(float));
    m->wb = p->params_bf16 ? ot_arena_alloc(&m->a_params, m->n_stored * sizeof(uint16_t)) : NULL;
    m->g = p->grads ? ot_arena_alloc(&m->a_grads, m->n_floats * sizeof(float)) : NULL;
    for (int i = 0; i < m->n_params && m->g; i++) m->gp[i] = m->g + m->params[i].offset;
    walker w = {.alloc = true, .act = &m->a_act, .ws = &m->a_ws};
    ot_mem_plan again = *p;
    walk(&w, m, &again);
    if (!m->w || (p->params_bf16 && !m->wb) || (p->grads && !m->g) || w.failed)
      s = ot_error(OT_EINTERNAL, "%s: the memory plan does not cover the allocation (%s)", fn,
                   ot_last_error());
  }
  // the plan is exact: every arena is filled to the byte
  if (s == OT_OK && (m->a_params.used != m->a_params.cap || m->a_grads.used != m->a_grads.cap ||
                     m->a_act.used != m->a_act.cap || m->a_ws.used != m->a_ws.cap))
    s = ot_error(OT_EINTERNAL, "%s: memory plan and arena use differ", fn);
  if (s == OT_OK) {
    memset(m->w, 0, m->n_stored * sizeof(float));
    if (m->wb) memset(m->wb, 0, m->n_stored * sizeof(uint16_t));
    if (m->g) memset(m->g, 0, m->n_floats * sizeof(float));
    // activations start defined (padding, unused tails): no uninitialised reads ever
    memset(m->a_act.base, 0, m->a_act.cap);
    memset(m->a_ws.base, 0, m->a_ws.cap);
    if (m->rope) s = ot_rope_table(m->rope, c->max_seq, m->D, c->rope_base);
    if (m->pos_tab) ot__sinusoid_table(m->pos_tab, c->max_seq, m->C);
    ot__select_slot(m, 0);
    if (s == OT_OK) s = ot__graph_build(m);
  }
  if (s != OT_OK) {
    ot_model_free(m);
    return s;
  }
  *out = m;
  return OT_OK;
}

ot_status ot_model_create_part(ot_model **out, const ot_model_config *c, const ot_run_config *r,
                               const ot_model_part *part) {
  return create_part(out, c, r, part, false);
}

ot_status ot_model_plan_part(const ot_model_config *c, const ot_run_config *r, const ot_model_part *part,
                             ot_mem_plan *p) {
  OT_CHECK_PTR(p, "ot_model_plan_part");
  OT_CHECK_PTR(part, "ot_model_plan_part");
  ot_model *m = NULL;
  OT_TRY(create_part(&m, c, r, part, true));
  *p = m->plan;
  ot_model_free(m);
  return OT_OK;
}

ot_status ot_model_create_layout(ot_model **out, const ot_model_config *c, const ot_run_config *r,
                                 const ot_model_part *part) {
  OT_CHECK_PTR(part, "ot_model_create_layout");
  return create_part(out, c, r, part, true);
}
