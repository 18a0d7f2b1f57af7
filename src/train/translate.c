// The translate task of the one trainer: the joint tokenizer, the training and
// held-out bitexts with their token-budget batchers, the encoder-decoder model
// sized for them, the micro-batches of a step (forward_s2s + backward, the
// label-smoothed loss over the global target count), the held-out loss (label-
// smoothed and plain NLL) and BLEU through the decoder's hook. The optimizer
// step, the non-finite rule, checkpoints and the run loop are trainer.c's and
// run.c's, shared with the language model.
#include "train/train_impl.h"
#include <math.h>
#include <stdlib.h>

struct ot__tr {
  ot_bpe *bpe;
  ot_bitext *train, *valid;
  ot_bitext_batcher *tb, *vb;
  ot_loader_state v0;        // the held-out batcher's first batch (evaluation restarts there)
  int max_rows;              // the plan's rows (run.B): a forward holds run.B * S, run.B * T tokens
  int32_t *csrc, *cin, *ctgt;  // [max_rows * S], [max_rows * T] x 2: a micro-batch cut to its own lengths
  int *cut, *arg;            // [rows + 1]: the forwards' first rows; the cut planner's choices
  double *best;              // [rows + 1]: its costs (rows: the most a batch can have)
  size_t cap_s, cap_t;       // their lengths
  ot_s2s_batch *mb;          // [mb_cap] a parallel step's micro-batches (grown as needed)
  int mb_cap;
};

void ot__tr_free(struct ot__tr *tr) {
  if (!tr) return;
  ot_bitext_batcher_close(tr->tb);
  ot_bitext_batcher_close(tr->vb);
  ot_mem_free(tr->csrc);
  ot_mem_free(tr->cin);
  ot_mem_free(tr->ctgt);
  ot_mem_free(tr->cut);
  ot_mem_free(tr->arg);
  ot_mem_free(tr->best);
  ot_bitext_close(tr->train);
  ot_bitext_close(tr->valid);
  ot_bpe_free(tr->bpe);
  free(tr->mb);
  free(tr);
}

bool ot__tr_has_val(const ot_trainer *t) { return t && t->tr && t->tr->vb; }

bool ot__trainer_data_state(const ot_trainer *t, ot_loader_state *st) {
  if (t->tr) {
    if (!t->tr->tb) return false;
    ot_bitext_get_state(t->tr->tb, st);
    return true;
  }
  if (!t->train) return false;
  ot_loader_get_state(t->train, st);
  return true;
}

ot_status ot__trainer_set_data_state(ot_trainer *t, const ot_loader_state *st) {
  if (t->tr) return t->tr->tb ? ot_bitext_set_state(t->tr->tb, st) : OT_OK;
  return t->train ? ot_loader_set_state(t->train, st) : OT_OK;
}

// Longest source and target (+ eos) of a bitext.
static void longest(const ot_bitext *bt, int *S, int *T) {
  ot_bitext_stats st;
  ot_bitext_get_stats(bt, &st);
  if (st.max_src + 1 > *S) *S = st.max_src + 1;
  if (st.max_tgt + 1 > *T) *T = st.max_tgt + 1;
}

ot_status ot__tr_create(ot_trainer *t) {
  ot_train_config *c = &t->cfg;
  struct ot__tr *tr = calloc(1, sizeof *tr);
  if (!tr) return ot_error(OT_ENOMEM, "trainer: out of memory");
  t->tr = tr;
  char vj[OT_PATH_MAX + 16], mt[OT_PATH_MAX + 16];
  OT_TRY(ot__join(vj, sizeof vj, c->data, "vocab.json"));
  OT_TRY(ot__join(mt, sizeof mt, c->data, "merges.txt"));
  if (!ot__exists(vj) || !ot__exists(mt))
    return ot_error(OT_EINVAL, "--task translate: no joint tokenizer in --data %s (vocab.json, merges.txt); "
                    "make it with `ot prepare --task translate --src %s --tgt %s --out %s`", c->data,
                    c->src_data, c->tgt_data, c->data);
  OT_TRY(ot_bpe_load(&tr->bpe, vj, mt));
  const int V = ot_bpe_vocab_size(tr->bpe), eot = ot_bpe_eot(tr->bpe);
  if (eot < 0) return ot_error(OT_EINVAL, "%s: the tokenizer has no <|endoftext|> token", vj);
  // the model's vocabulary and token ids are the tokenizer's (eos = start = pad)
  c->model.vocab = V;
  c->model.pad_id = c->model.eos_id = c->model.decoder_start_id = eot;
  if (ot_model_config_validate(&c->model) != OT_OK)
    return ot_error(OT_EINVAL, "model with the tokenizer's %d tokens: %s", V, ot_last_error());
  // pairs longer than the model's positions are skipped (and counted)
  ot_bitext_opts bo = {tr->bpe, c->model.max_seq - 1, false};
  if (!c->eval_only) OT_TRY(ot_bitext_open(&tr->train, c->src_data, c->tgt_data, &bo));
  if (c->valid_src[0]) OT_TRY(ot_bitext_open(&tr->valid, c->valid_src, c->valid_tgt, &bo));
  else if (c->eval_only)
    return ot_error(OT_EINVAL, "--task translate evaluation needs --valid-src and --valid-tgt");
  int S = 1, T = 1;
  if (tr->train) longest(tr->train, &S, &T);
  if (tr->valid) longest(tr->valid, &S, &T);
  const int L = S > T ? S : T;
  if (c->tokens_per_batch < L)
    return ot_error(OT_EINVAL, "--tokens-per-batch %d is below the longest pair (%d tokens with eos): "
                    "raise it to at least %d", c->tokens_per_batch, L, L);
  tr->max_rows = c->max_rows > 0 ? c->max_rows : c->tokens_per_batch / L;
  if (tr->max_rows < 1) tr->max_rows = 1;
  // a batch's rows x S (and T) tokens: at most the global token budget (every rank plans the
  // global batches and keeps its rows), so every forward of a batch fits at once
  const size_t nr = (size_t)c->tokens_per_batch * c->grad_accum * c->data_parallel + 1;
  const size_t ns = nr > (size_t)tr->max_rows * S ? nr : (size_t)tr->max_rows * S,
               nt = nr > (size_t)tr->max_rows * T ? nr : (size_t)tr->max_rows * T;
  tr->cap_s = ns;
  tr->cap_t = nt;
  tr->csrc = ot_mem_alloc(ns * sizeof(int32_t), OT_MEM_OTHER);
  tr->cin = ot_mem_alloc(nt * sizeof(int32_t), OT_MEM_OTHER);
  tr->ctgt = ot_mem_alloc(nt * sizeof(int32_t), OT_MEM_OTHER);
  tr->cut = ot_mem_alloc(nr * sizeof(int), OT_MEM_OTHER);
  tr->arg = ot_mem_alloc(nr * sizeof(int), OT_MEM_OTHER);
  tr->best = ot_mem_alloc(nr * sizeof(double), OT_MEM_OTHER);
  if (!tr->csrc || !tr->cin || !tr->ctgt || !tr->cut || !tr->arg || !tr->best)
    return ot_error(OT_ENOMEM, "trainer: out of memory for micro-batches of %d rows", tr->max_rows);
  // the model's dropout (ot_model_config.dropout / attn_dropout / act_dropout) from the keys
  c->model.dropout = c->dropout;
  c->model.attn_dropout = c->attn_dropout;
  c->model.act_dropout = c->act_dropout;
  ot_run_config run = {tr->max_rows, T, c->dtype, c->recompute, -1, S};
  if (ot__par_wanted(c->data_parallel, c->tensor_parallel, c->pipeline_stages)) {
    ot__par_config pc = ot__train_par_config(c, &run);
    pc.micro_batches = 1;   // the token budget makes this rank's micro-batches (below)
    OT_TRY(ot__par_create(&pc, &t->m, &t->par));
  } else {
    OT_TRY(ot_model_create(&t->m, &c->model, &run));
  }
  OT_TRY(ot_model_set_label_smoothing(t->m, c->label_smoothing));
  if (tr->train) {   // every rank plans the same global batches and takes its rows of each
    ot_bitext_batcher_config bc = {(int64_t)c->tokens_per_batch * c->grad_accum * c->data_parallel, 0,
                                   c->shuffle, c->seed, ot__par_dp_rank(t->par), ot__par_dp(t->par)};
    OT_TRY(ot_bitext_batcher_open(&tr->tb, tr->train, &bc));
  }
  if (tr->valid) {
    ot_bitext_batcher_config bc = {c->tokens_per_batch, 0, false, 0, 0, 1};
    OT_TRY(ot_bitext_batcher_open(&tr->vb, tr->valid, &bc));
    ot_bitext_get_state(tr->vb, &tr->v0);
  }
  return OT_OK;
}

// A forward costs about as much as this many padded tokens more: its backward reads every
// weight and adds into every gradient (~0.9 GB for transformer-base, ~45 ms at ~20 GB/s,
// while a token costs ~0.7 ms of GEMMs at 2 threads); GEMMs lose little efficiency down
// to ~200 rows. The planner below trades it against padding: at --tokens-per-batch 4096 on
// the bundled En-Fr bitext, ~92% of the computed tokens are real, ~4.8 forwards per batch
// (one forward of the whole batch: 78%).
#define FWD_COST_TOKENS 64

// Cuts the rows of b (the batcher orders them by length) into forwards that fit the plan
// (B*S <= run.B*run.S, B*T <= run.B*run.T; at most --max-rows rows when given) with the
// fewest padded source + target tokens plus FWD_COST_TOKENS per forward (exact, by dynamic
// programming over the cut points). Forward k is rows [cut[k], cut[k + 1]); returns their count.
static int plan_chunks(const ot_trainer *t, const ot_bitext_batch *b) {
  struct ot__tr *tr = t->tr;
  const ot_run_config *run = ot_model_run_of(t->m);
  const int64_t cs = (int64_t)run->B * run->S, ct = (int64_t)run->B * run->T;
  const int rmax = t->cfg.max_rows > 0 ? t->cfg.max_rows : b->B;
  tr->best[0] = 0.0;
  for (int j = 1; j <= b->B; j++) {
    int ms = 0, mt = 0;
    tr->best[j] = INFINITY;
    tr->arg[j] = j - 1;
    for (int i = j - 1; i >= 0 && j - i <= rmax; i--) {
      if (b->src_len[i] > ms) ms = b->src_len[i];
      if (b->tgt_len[i] > mt) mt = b->tgt_len[i];
      if ((int64_t)(j - i) * ms > cs || (int64_t)(j - i) * mt > ct) break;
      const double v = tr->best[i] + (double)(j - i) * (ms + mt) + FWD_COST_TOKENS;
      if (v < tr->best[j]) {
        tr->best[j] = v;
        tr->arg[j] = i;
      }
    }
  }
  int n = 0;
  for (int j = b->B; j > 0; j = tr->arg[j]) n++;
  tr->cut[n] = b->B;
  for (int j = b->B, k = n; j > 0; j = tr->arg[j]) tr->cut[--k] = tr->arg[j];
  return n;
}

// Rows [r0, r0 + rows) of b as one forward's batch, padded only to their own longest
// source and target (the batcher orders a batch's rows by length; copies in tr's buffers
// from source offset *os and target offset *ot, both advanced past them: the forwards of
// one batch fit, as its rows do).
static ot_s2s_batch chunk(struct ot__tr *tr, const ot_bitext_batch *b, int r0, int rows, size_t *os,
                          size_t *ot) {
  int S = 1, T = 1;
  for (int r = r0; r < r0 + rows; r++) {
    if (b->src_len[r] > S) S = b->src_len[r];
    if (b->tgt_len[r] > T) T = b->tgt_len[r];
  }
  if (S > b->S) S = b->S;
  if (T > b->T) T = b->T;
  int32_t *cs = tr->csrc + *os, *ci = tr->cin + *ot, *ct = tr->ctgt + *ot;
  for (int r = 0; r < rows; r++) {
    memcpy(cs + (size_t)r * S, b->src + (size_t)(r0 + r) * b->S, (size_t)S * sizeof(int32_t));
    memcpy(ci + (size_t)r * T, b->dec_in + (size_t)(r0 + r) * b->T, (size_t)T * sizeof(int32_t));
    memcpy(ct + (size_t)r * T, b->dec_tgt + (size_t)(r0 + r) * b->T, (size_t)T * sizeof(int32_t));
  }
  *os += (size_t)rows * S;
  *ot += (size_t)rows * T;
  ot_s2s_batch s = {rows, S, T, cs, b->src_len + r0, ci, ct, b->sample + r0};
  return s;
}

// An empty micro-batch's target: one row, none scored (its backward adds zero
// gradients and runs the reductions of a real one; ZeRO-2 and 3 pad with it, and ZeRO-3's
// lockstep evaluation).
static const int32_t k_none[1] = {-1};

ot_status ot__tr_micro_batches(ot_trainer *t, double *loss, bool *finite, int64_t *tokens,
                               int64_t *tgt_tokens) {
  struct ot__tr *tr = t->tr;
  ot__par *par = t->par;
  if (!tr->tb) return ot_error(OT_EINVAL, "ot_trainer_step: no training bitext (set --src-data, --tgt-data)");
  ot_bitext_batch b;
  OT_PROF_BEGIN("data", 0.0, 0.0);
  ot_status s = ot_bitext_next(tr->tb, &b);
  OT_PROF_STOP();
  OT_TRY(s);
  *tokens = b.global_src_tokens + b.global_tgt_tokens;
  *tgt_tokens = b.global_tgt_tokens;
  const float count = b.global_tgt_tokens > 0 ? (float)b.global_tgt_tokens : 1.0f;
  int mine = plan_chunks(t, &b), all = mine;   // this rank's micro-batches, the most of any rank
  // ZeRO-2 and 3 reduce (and ZeRO-3 gathers) per micro-batch, collectively over dp
  if (ot__par_zero(par) >= 2) OT_TRY(ot__par_max_int(par, &all, "micro-batch count all-reduce"));
  int32_t eos[1] = {t->cfg.model.eos_id}, one[1] = {1};
  const ot_s2s_batch empty = {1, 1, 1, eos, one, eos, k_none};
  // dropout masks: the step's stream; each row's masks from its index in the global
  // batch (b.sample), whichever rank and forward hold it (the model's dropout API)
  const uint64_t counter = (uint64_t)t->step;
  *loss = 0.0;
  *finite = true;
  if (par) {   // the runtime schedules this rank's micro-batches over the pipeline stages:
               // every one's tokens at once, each at its own offset of tr's buffers
    if (all > tr->mb_cap) {
      ot_s2s_batch *nb = realloc(tr->mb, (size_t)all * sizeof *nb);
      if (!nb) return ot_error(OT_ENOMEM, "trainer: out of memory for %d micro-batches", all);
      tr->mb = nb;
      tr->mb_cap = all;
    }
    if ((size_t)b.B * b.S > tr->cap_s || (size_t)b.B * b.T > tr->cap_t)
      return ot_error(OT_EINTERNAL, "trainer: a batch of %d x (%d + %d) tokens exceeds the micro-batch "
                      "buffers (%zu, %zu)", b.B, b.S, b.T, tr->cap_s, tr->cap_t);
    size_t os = 0, ot_ = 0;
    for (int k = 0; k < all; k++)
      tr->mb[k] = k < mine ? chunk(tr, &b, tr->cut[k], tr->cut[k + 1] - tr->cut[k], &os, &ot_) : empty;
    OT_TRY(ot__par_s2s_step(par, tr->mb, all, count, t->cfg.seed, counter, loss, finite));
    return ot__par_finish_backward(par);
  }
  ot_model_set_dropout_step(t->m, t->cfg.seed, counter);
  for (int k = 0; k < mine; k++) {
    size_t os = 0, ot_ = 0;
    const ot_s2s_batch sb = chunk(tr, &b, tr->cut[k], tr->cut[k + 1] - tr->cut[k], &os, &ot_);
    double l = 0.0;
    OT_TRY(ot_model_forward_s2s(t->m, &sb, count, true, &l));
    *loss += l;
    if (!isfinite(l)) {
      *finite = false;
      break;   // the step is lost anyway
    }
    OT_TRY(ot_model_backward(t->m));
  }
  return OT_OK;
}

ot_status ot__tr_eval(ot_trainer *t, int batches, double *loss, double *nll, int64_t *tokens) {
  struct ot__tr *tr = t->tr;
  if (!tr->vb)
    return ot_error(OT_EINVAL, "ot_trainer_eval: no held-out bitext (set --valid-src and --valid-tgt)");
  const int64_t avail = ot_bitext_batches(tr->vb, 0);
  if (batches <= 0) batches = t->cfg.eval_batches;
  if (batches > avail) batches = (int)avail;
  OT_TRY(ot_bitext_set_state(tr->vb, &tr->v0));
  // parallel: the chunks dealt round-robin to the data-parallel ranks, the sums
  // (tensor rank 0's) reduced over the world. ZeRO-3: a forward gathers weights over the
  // data-parallel group, so every dp rank runs one forward per round of dp chunks (a
  // rank without a chunk in the last round, or with one without targets, runs an
  // uncounted one)
  ot__par *par = t->par;
  const int dp = ot__par_dp(par), dr = ot__par_dp_rank(par);
  const bool lockstep = par && ot__par_zero(par) == 3;
  int32_t eos[1] = {t->cfg.model.eos_id}, one[1] = {1};
  const ot_s2s_batch empty = {1, 1, 1, eos, one, eos, k_none};
  double sl = 0.0, sn = 0.0, total = 0.0;
  int j = 0;   // chunks dealt
  for (int i = 0; i < batches; i++) {
    ot_bitext_batch b;
    OT_TRY(ot_bitext_next(tr->vb, &b));
    const int nc = plan_chunks(t, &b);
    for (int k = 0; k < nc; k++, j++) {
      if (j % dp != dr) continue;
      const int r0 = tr->cut[k];
      size_t os = 0, ot_ = 0;
      const ot_s2s_batch sb = chunk(tr, &b, r0, tr->cut[k + 1] - r0, &os, &ot_);
      int64_t n = 0;
      for (int r = 0; r < sb.B; r++) n += b.tgt_len[r0 + r];
      if (n == 0 && !lockstep) continue;
      double l = 0.0;
      if (par) OT_TRY(ot__par_s2s_forward(par, n ? &sb : &empty, n ? (float)n : 1.0f, false, &l));
      else OT_TRY(ot_model_forward_s2s(t->m, &sb, (float)n, false, &l));
      if (n == 0) continue;
      sl += l * (double)n;
      sn += ot_model_nll(t->m) * (double)n;
      total += (double)n;
    }
  }
  if (lockstep && j % dp && dr >= j % dp) {
    double l = 0.0;
    OT_TRY(ot__par_s2s_forward(par, &empty, 1.0f, false, &l));
  }
  if (par) {
    OT_TRY(ot__par_s2s_flush(par));
    double red[3] = {sl, sn, total};   // the last stage's, tensor rank 0's
    if (ot__par_tp_rank(par) != 0 || !ot_model_is_last(t->m)) red[0] = red[1] = red[2] = 0.0;
    OT_TRY(ot__par_sum(par, red, 3, "evaluation loss all-reduce"));
    sl = red[0];
    sn = red[1];
    total = red[2];
  }
  *loss = total > 0 ? sl / total : NAN;
  if (nll) *nll = total > 0 ? sn / total : NAN;
  if (tokens) *tokens = (int64_t)total;
  return OT_OK;
}

// Detokenized text of ids [n] (malloc'd).
static ot_status detok(const ot_bpe *bpe, const int32_t *ids, int n, char **out) {
  size_t cap = 16, len = 0;
  for (int i = 0; i < n; i++) {
    size_t tl = 0;
    if (ot_bpe_token(bpe, ids[i], &tl)) cap += tl;
  }
  *out = malloc(cap + 1);
  if (!*out) return ot_error(OT_ENOMEM, "BLEU: out of memory");
  ot_status s = ot_bpe_decode(bpe, ids, (size_t)n, *out, cap, &len);
  (*out)[s == OT_OK ? len : 0] = 0;
  return s;
}

void ot_trainer_set_hooks(ot_trainer *t, const ot_train_hooks *h) {
  if (!t) return;
  if (h) t->hooks = *h;
  else memset(&t->hooks, 0, sizeof t->hooks);
}

static ot_status bleu_of(ot_trainer *t, ot_model *dec, int n, ot_bleu_score *score, char *sig,
                         size_t cap);

ot_status ot_trainer_bleu(ot_trainer *t, int n, ot_bleu_score *score, char *sig, size_t cap) {
  static const char fn[] = "ot_trainer_bleu";
  OT_CHECK_PTR(t, fn);
  OT_CHECK_PTR(score, fn);
  if (!t->tr) return ot_error(OT_EINVAL, "%s: BLEU needs --task translate", fn);
  if (!t->tr->valid) return ot_error(OT_EINVAL, "%s: no held-out bitext (set --valid-src and --valid-tgt)", fn);
  if (!t->hooks.translate)
    return ot_error(OT_EINVAL, "%s: no translate hook (ot_trainer_set_hooks) to decode with", fn);
  if (n <= 0) n = t->cfg.eval_bleu_sentences;
  const int64_t np = ot_bitext_pairs(t->tr->valid);
  if (n > np) n = (int)np;
  if (n <= 0) return ot_error(OT_EINVAL, "%s: no sentences to translate", fn);
  // parallel: world rank 0 decodes with a whole model (its own under data parallelism,
  // else the tensor ranks' slices and pipeline stages' blocks gathered into one; under
  // ZeRO-3 also the data-parallel ranks' shards)
  memset(score, 0, sizeof *score);
  ot_model *dec = t->m, *whole = NULL;
  const bool root = ot__par_rank(t->par) == 0;
  if (t->par && (ot_model_part_of(t->m)->tp > 1 || !ot_model_is_first(t->m) ||
                 !ot_model_is_last(t->m) || ot__par_zero(t->par) == 3)) {
    ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1, 1};
    ot_status g = root ? ot_model_create(&whole, &t->cfg.model, &run) : OT_OK;
    if (g == OT_OK || !root) g = ot__par_whole_weights(t, root ? whole : NULL);
    if (g != OT_OK) {
      ot_model_free(whole);
      return g;
    }
    dec = whole;
  }
  if (!root) return OT_OK;
  ot_status s = bleu_of(t, dec, n, score, sig, cap);
  ot_model_free(whole);
  return s;
}

// BLEU of the first n held-out pairs decoded by the hook with model `dec`.
static ot_status bleu_of(ot_trainer *t, ot_model *dec, int n, ot_bleu_score *score, char *sig,
                         size_t cap) {
  static const char fn[] = "ot_trainer_bleu";
  char **src = calloc((size_t)n, sizeof *src), **ref = calloc((size_t)n, sizeof *ref),
       **hyp = calloc((size_t)n, sizeof *hyp);
  ot_bleu *bl = NULL;
  ot_status s = src && ref && hyp ? OT_OK : ot_error(OT_ENOMEM, "%s: out of memory", fn);
  for (int i = 0; i < n && s == OT_OK; i++) {
    const int32_t *si, *ti;
    int ns, nt;
    ot_bitext_pair(t->tr->valid, i, &si, &ns, &ti, &nt);
    s = detok(t->tr->bpe, si, ns, &src[i]);
    if (s == OT_OK) s = detok(t->tr->bpe, ti, nt, &ref[i]);
  }
  OT_PROF_BEGIN("bleu", 0.0, 0.0);
  if (s == OT_OK) s = t->hooks.translate(t->hooks.ctx, dec, t->cfg.data, (const char *const *)src, n, hyp);
  OT_PROF_STOP();
  const ot_bleu_opts bo = {t->cfg.eval_bleu_tokenize, OT_BLEU_SMOOTH_EXP, 0.0, false};
  if (s == OT_OK) s = ot_bleu_create(&bl, &bo);
  for (int i = 0; i < n && s == OT_OK; i++) {
    const char *r = ref[i];
    if (!hyp[i]) s = ot_error(OT_EINTERNAL, "%s: the translate hook left hypothesis %d unset", fn, i);
    else s = ot_bleu_add(bl, hyp[i], &r, 1);
  }
  if (s == OT_OK) s = ot_bleu_result(bl, score);
  if (s == OT_OK && sig && cap) ot_bleu_signature(bl, sig, cap);
  ot_bleu_free(bl);
  for (int i = 0; i < n; i++) {
    if (src) free(src[i]);
    if (ref) free(ref[i]);
    if (hyp) free(hyp[i]);
  }
  free(src);
  free(ref);
  free(hyp);
  return s;
}
