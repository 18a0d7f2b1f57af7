// Greedy and beam search with Hugging Face 4.40 semantics (see ot/infer.h),
// driven by a step callback. Sentences are independent: each keeps its own
// live beams, its finished hypotheses and its length limit, and leaves the
// batch when done, so the callback only computes rows still searching.
#include "internal.h"
#include "infer/beam_impl.h"
#include <math.h>
#include <stdlib.h>

ot_beam_config ot_beam_config_default(void) {
  ot_beam_config c;
  memset(&c, 0, sizeof c);
  c.num_beams = 4;
  c.length_penalty = 1.0f;
  c.early_stopping = OT_EARLY_STOP_FALSE;
  c.eos_id = c.pad_id = c.decoder_start_id = -1;
  c.repetition_penalty = 1.0f;
  c.forced_eos_id = -1;
  return c;
}

// One finished hypothesis of a sentence.
typedef struct {
  double score;       // sum / len^α
  int len;            // tokens after the start token (the eos included when eos)
  int32_t *tok;       // [max_new]
} hyp;

typedef struct {
  int limit;          // HF max_length of this sentence (start token included)
  int n_hyp;          // finished hypotheses held (<= num_beams)
  double worst;       // BeamHypotheses.worst_score
  bool active;        // still searching
  int row0;           // its first row in the last call
  hyp *h;             // [num_beams + 1]: those held in insertion order, then a spare
} sent;

// BeamHypotheses.add: keeps the nb best; a new one enters while fewer are held
// or when strictly better than the worst (which is then removed; equal worst
// scores: the earliest goes).
static void hyp_add(sent *s, int nb, const int32_t *tok, int ntok, bool eos,
                    int32_t eos_id, float sum, int gen_len, double alpha) {
  const double score = (double)sum / pow((double)gen_len, alpha);
  if (!(s->n_hyp < nb || score > s->worst)) return;
  int slot = s->n_hyp;
  hyp spare = s->h[nb];           // the extra slot takes the new one
  spare.score = score;
  spare.len = ntok + (eos ? 1 : 0);
  memcpy(spare.tok, tok, (size_t)ntok * sizeof *tok);
  if (eos) spare.tok[ntok] = eos_id;
  s->h[nb] = s->h[slot];
  s->h[slot] = spare;
  s->n_hyp++;
  if (s->n_hyp > nb) {
    int lo = 0;                   // the lowest score, lowest index among ties
    for (int i = 1; i < s->n_hyp; i++)
      if (s->h[i].score < s->h[lo].score) lo = i;
    hyp gone = s->h[lo];
    for (int i = lo; i + 1 < s->n_hyp; i++) s->h[i] = s->h[i + 1];
    s->h[nb] = gone;
    s->n_hyp = nb;
    double w = s->h[0].score;
    for (int i = 1; i < nb; i++) w = fmin(w, s->h[i].score);
    s->worst = w;
  } else {
    s->worst = fmin(score, s->worst);
  }
}

// BeamHypotheses.is_done with decoder_prompt_len 1: best = the best candidate
// score of this step, cur = tokens generated incl. this step's.
static bool hyp_done(const sent *s, const ot_beam_config *c, float best, int cur) {
  if (s->n_hyp < c->num_beams) return false;
  if (c->early_stopping == OT_EARLY_STOP_TRUE) return true;
  const double a = c->length_penalty;
  int den = cur;
  if (c->early_stopping == OT_EARLY_STOP_NEVER && a > 0.0) den = s->limit - 1;
  return s->worst >= (double)best / pow((double)den, a);
}

// log_softmax of x [V] into y (float32 result; NaN counts as -inf).
static void log_softmax(const float *x, float *y, int V) {
  float m = -INFINITY;
  for (int v = 0; v < V; v++)
    if (x[v] > m) m = x[v];
  if (m == -INFINITY) {
    for (int v = 0; v < V; v++) y[v] = -INFINITY;
    return;
  }
  double sum = 0.0;
  for (int v = 0; v < V; v++)
    if (x[v] == x[v]) sum += exp((double)(x[v] - m));
  const float lse = (float)log(sum);
  for (int v = 0; v < V; v++) y[v] = x[v] == x[v] ? (x[v] - m) - lse : -INFINITY;
}

// Working memory, carved from one allocation.
typedef struct {
  sent *s;                        // [batch]
  hyp *hyps;                      // [batch, nb + 1]
  int32_t *hyp_tok;               // [batch * (nb + 1), max_new]
  int32_t *seq, *seq2;            // live beams' tokens [batch * nb, max_new] (now, next)
  float *bscore, *bscore2;        // [batch * nb]
  float *logits;                  // [batch * nb, V]
  float *lp;                      // [nb, V]
  float *proc;                    // [V] greedy: the processed logits
  int32_t *tokens, *parent, *sentence;   // [batch * nb] the call's rows
  int32_t *ntok, *npar, *nsent;   // next call's rows
  float *cand_s;                  // [2 nb] top candidates
  int32_t *cand_i;                // [2 nb] flat index beam * V + id
} work;

// Inserts (score, idx) into the sorted top-k list (desc score, asc idx on ties).
static void topk_push(float *ts, int32_t *ti, int *n, int k, float sc, int32_t idx) {
  if (*n == k && !(sc > ts[k - 1])) return;   // equal scores: the earlier index stays
  int i = *n < k ? (*n)++ : k - 1;
  while (i > 0 && sc > ts[i - 1]) {
    ts[i] = ts[i - 1];
    ti[i] = ti[i - 1];
    i--;
  }
  ts[i] = sc;
  ti[i] = idx;
}

// HF max_length of sentence b (start token included), clamped to [-1, 2^30].
static int sent_limit(const ot_beam_config *c, const int *src_len, int b) {
  int lim = c->max_length > 0 ? c->max_length : 1 << 30;
  if (c->max_len_a != 0.0f || c->max_len_b != 0.0f) {
    const double l = floor((double)c->max_len_a * (src_len ? src_len[b] : 0) + c->max_len_b);
    if (l < lim) lim = l < -1.0 ? -1 : (int)l;
  }
  return lim;
}

static ot_status check_cfg(const ot_beam_config *c, int batch, const int *src_len, int cap,
                           int *max_limit) {
  static const char fn[] = "ot_beam_search";
  OT_CHECK_POS(batch, fn);
  if (c->vocab < 2)
    return ot_error(OT_EINVAL, "%s: vocab=%d must be >= 2", fn, c->vocab);
  if (c->num_beams < 1)
    return ot_error(OT_EINVAL, "%s: num_beams=%d must be >= 1 (1 = greedy)", fn, c->num_beams);
  if (!isfinite(c->length_penalty))
    return ot_error(OT_EINVAL, "%s: length_penalty=%g must be finite", fn, c->length_penalty);
  if ((int)c->early_stopping < 0 || (int)c->early_stopping > 2)
    return ot_error(OT_EINVAL, "%s: early_stopping=%d must be OT_EARLY_STOP_FALSE, _TRUE or "
                    "_NEVER", fn, (int)c->early_stopping);
  const int32_t ids[3] = {c->eos_id, c->pad_id, c->decoder_start_id};
  static const char *const names[3] = {"eos_id", "pad_id", "decoder_start_id"};
  for (int i = 0; i < 3; i++)
    if (ids[i] < 0 || ids[i] >= c->vocab)
      return ot_error(OT_EINVAL, "%s: %s=%d is out of range [0, vocab=%d)", fn, names[i],
                      (int)ids[i], c->vocab);
  OT_TRY(ot__beam_check_procs(c));
  if (c->max_length < 0)
    return ot_error(OT_EINVAL, "%s: max_length=%d must be >= 0 (0 = unset)", fn, c->max_length);
  if (c->min_length < 0)
    return ot_error(OT_EINVAL, "%s: min_length=%d must be >= 0 (0 = none)", fn, c->min_length);
  if (!isfinite(c->max_len_a) || !isfinite(c->max_len_b) || c->max_len_a < 0.0f)
    return ot_error(OT_EINVAL, "%s: max_len_a=%g must be >= 0 and max_len_b=%g finite", fn,
                    c->max_len_a, c->max_len_b);
  const bool ab = c->max_len_a != 0.0f || c->max_len_b != 0.0f;
  if (!ab && c->max_length == 0)
    return ot_error(OT_EINVAL, "%s: no length limit: set max_length or max_len_a / max_len_b", fn);
  if (c->max_len_a != 0.0f && !src_len)
    return ot_error(OT_EINVAL, "%s: max_len_a=%g needs src_len (the source lengths)", fn,
                    c->max_len_a);
  int mx = 0;
  for (int b = 0; b < batch; b++) {
    if (ab && src_len && src_len[b] < 0)
      return ot_error(OT_EINVAL, "%s: src_len[%d]=%d must be >= 0", fn, b, src_len[b]);
    const int lim = sent_limit(c, src_len, b);
    if (lim < 2)
      return ot_error(OT_EINVAL, "%s: sentence %d: length limit %d < 2 leaves no token to "
                      "generate (limits count the decoder start token; raise max_length or "
                      "max_len_b)", fn, b, lim);
    if (lim > mx) mx = lim;
  }
  if (cap < mx - 1)
    return ot_error(OT_EINVAL, "%s: cap=%d is too small: results may hold %d tokens", fn, cap,
                    mx - 1);
  *max_limit = mx;
  return OT_OK;
}

static ot_status alloc_work(work *w, void **block, int batch, int nb, int V, int max_new) {
  const size_t R = (size_t)batch * nb, H = (size_t)batch * (nb + 1);
  size_t off = 0;
  size_t o_s = off;      off += batch * sizeof(sent);
  size_t o_h = off;      off += H * sizeof(hyp);
  size_t o_bs = off;     off += 2 * R * sizeof(float);
  size_t o_lg = off;     off += R * V * sizeof(float);
  size_t o_lp = off;     off += (size_t)(nb + 1) * V * sizeof(float);
  size_t o_cs = off;     off += 2 * (size_t)nb * sizeof(float);
  size_t o_ht = off;     off += H * max_new * sizeof(int32_t);
  size_t o_sq = off;     off += 2 * R * max_new * sizeof(int32_t);
  size_t o_rw = off;     off += 6 * R * sizeof(int32_t);
  size_t o_ci = off;     off += 2 * (size_t)nb * sizeof(int32_t);
  char *p = ot_mem_alloc(off, OT_MEM_WORKSPACE);
  if (!p) return ot_error(OT_ENOMEM, "ot_beam_search: out of memory (%zu bytes of work space)", off);
  *block = p;
  w->s = (sent *)(p + o_s);
  w->hyps = (hyp *)(p + o_h);
  w->bscore = (float *)(p + o_bs);
  w->bscore2 = w->bscore + R;
  w->logits = (float *)(p + o_lg);
  w->lp = (float *)(p + o_lp);
  w->proc = w->lp + (size_t)nb * V;
  w->cand_s = (float *)(p + o_cs);
  w->hyp_tok = (int32_t *)(p + o_ht);
  w->seq = (int32_t *)(p + o_sq);
  w->seq2 = w->seq + R * max_new;
  int32_t *r = (int32_t *)(p + o_rw);
  w->tokens = r; w->parent = r + R; w->sentence = r + 2 * R;
  w->ntok = r + 3 * R; w->npar = r + 4 * R; w->nsent = r + 5 * R;
  w->cand_i = (int32_t *)(p + o_ci);
  for (size_t i = 0; i < H; i++) w->hyps[i].tok = w->hyp_tok + i * max_new;
  return OT_OK;
}

// Best hypothesis of a sentence: the highest score, the last added among equal
// ones (Python's stable sort, then pop()).
static const hyp *hyp_best(const sent *s) {
  const hyp *b = &s->h[0];
  for (int i = 1; i < s->n_hyp; i++)
    if (s->h[i].score >= b->score) b = &s->h[i];
  return b;
}

ot_status ot_beam_search(const ot_beam_config *cfg, int batch, const int *src_len,
                         ot_beam_step_fn step, void *ctx, int32_t *out_tokens, int cap,
                         int *out_len, float *out_score, ot_beam_stats *stats) {
  static const char fn[] = "ot_beam_search";
  OT_CHECK_PTR(cfg, fn);
  OT_CHECK_PTR(step, fn);
  OT_CHECK_PTR(out_tokens, fn);
  OT_CHECK_PTR(out_len, fn);
  if (stats) memset(stats, 0, sizeof *stats);
  int max_limit = 0;
  ot_status st = check_cfg(cfg, batch, src_len, cap, &max_limit);
  if (st != OT_OK) return st;
  const int nb = cfg->num_beams, V = cfg->vocab, max_new = max_limit - 1;
  const double alpha = cfg->length_penalty;
  work w = {0};
  void *block = NULL;
  st = alloc_work(&w, &block, batch, nb, V, max_new);
  if (st != OT_OK) return st;

  int rows = 0;                     // rows of the coming call
  for (int b = 0; b < batch; b++) {
    sent *s = &w.s[b];
    s->limit = sent_limit(cfg, src_len, b);
    s->n_hyp = 0;
    s->worst = 1e9;
    s->active = true;
    s->row0 = b;
    s->h = &w.hyps[(size_t)b * (nb + 1)];
    w.tokens[rows] = cfg->decoder_start_id;
    w.parent[rows] = -1;
    w.sentence[rows] = b;
    rows++;
    for (int j = 0; j < nb; j++) w.bscore[b * nb + j] = j == 0 ? 0.0f : -1e9f;
  }

  for (int t = 0; rows > 0; t++) {   // t: tokens generated before this step
    st = step(ctx, t, rows, w.tokens, w.parent, w.sentence, w.logits, V);
    if (stats) { stats->steps++; stats->rows += rows; }
    if (st != OT_OK) goto done;
    const int cur = t + 1;           // tokens generated incl. this step's
    int nrows = 0;
    for (int b = 0; b < batch; b++) {
      sent *s = &w.s[b];
      if (!s->active) continue;
      const int32_t *seq = w.seq + (size_t)b * nb * max_new;
      int32_t *seq2 = w.seq2 + (size_t)b * nb * max_new;
      float *bs = w.bscore + b * nb, *bs2 = w.bscore2 + b * nb;
      if (nb == 1) {                 // greedy
        const float *x = w.logits + (size_t)s->row0 * V;
        memcpy(w.proc, x, (size_t)V * sizeof *x);
        ot__beam_process(cfg, w.proc, seq, t, s->limit);
        int32_t tok = -1;              // first maximum (torch.argmax); NaN never wins
        float m = -INFINITY;
        for (int v = 0; v < V; v++) {
          if (w.proc[v] != w.proc[v]) continue;
          if (tok < 0 || w.proc[v] > m) { m = w.proc[v]; tok = v; }
        }
        if (tok < 0) tok = cfg->eos_id == 0 ? 1 : 0;   // no usable logit at all
        log_softmax(x, w.lp, V);
        bs2[0] = bs[0] + w.lp[tok];
        memcpy(seq2, seq, (size_t)t * sizeof *seq);
        seq2[t] = tok;
        if (tok == cfg->eos_id || cur + 1 >= s->limit) {
          hyp_add(s, 1, seq2, tok == cfg->eos_id ? t : cur, tok == cfg->eos_id,
                  cfg->eos_id, bs2[0], cur, alpha);
          s->active = false;
          continue;
        }
        w.ntok[nrows] = tok;
        w.npar[nrows] = s->row0;
        w.nsent[nrows] = b;
        s->row0 = nrows++;
        continue;
      }
      // candidates over the nb beams (step 0: every beam reads the one row)
      int nc = 0;
      for (int k = 0; k < nb; k++) {
        log_softmax(w.logits + (size_t)(s->row0 + (t == 0 ? 0 : k)) * V, w.lp, V);
        ot__beam_process(cfg, w.lp, seq + (size_t)k * max_new, t, s->limit);
        for (int v = 0; v < V; v++)
          topk_push(w.cand_s, w.cand_i, &nc, 2 * nb, w.lp[v] + bs[k], k * V + v);
      }
      int taken = 0;
      for (int r = 0; r < nc && taken < nb; r++) {
        const int k = w.cand_i[r] / V, v = w.cand_i[r] % V;
        const int32_t *src = seq + (size_t)k * max_new;
        if (v == cfg->eos_id) {
          if (r >= nb) continue;
          hyp_add(s, nb, src, t, true, cfg->eos_id, w.cand_s[r], cur, alpha);
          continue;
        }
        int32_t *dst = seq2 + (size_t)taken * max_new;
        memcpy(dst, src, (size_t)t * sizeof *src);
        dst[t] = v;
        bs2[taken] = w.cand_s[r];
        w.ntok[nrows + taken] = v;
        w.npar[nrows + taken] = s->row0 + (t == 0 ? 0 : k);
        w.nsent[nrows + taken] = b;
        taken++;
      }
      if (hyp_done(s, cfg, w.cand_s[0], cur)) {
        s->active = false;
        continue;
      }
      if (cur + 1 >= s->limit) {     // input length start + cur reached the limit
        for (int j = 0; j < nb; j++)
          hyp_add(s, nb, seq2 + (size_t)j * max_new, cur, false, cfg->eos_id, bs2[j],
                  cur, alpha);
        s->active = false;
        continue;
      }
      s->row0 = nrows;
      nrows += nb;
    }
    int32_t *tp;
    tp = w.tokens; w.tokens = w.ntok; w.ntok = tp;
    tp = w.parent; w.parent = w.npar; w.npar = tp;
    tp = w.sentence; w.sentence = w.nsent; w.nsent = tp;
    tp = w.seq; w.seq = w.seq2; w.seq2 = tp;
    float *fp = w.bscore; w.bscore = w.bscore2; w.bscore2 = fp;
    rows = nrows;
  }
  for (int b = 0; b < batch; b++) {
    const hyp *h = hyp_best(&w.s[b]);
    int32_t *o = out_tokens + (size_t)b * cap;
    memcpy(o, h->tok, (size_t)h->len * sizeof *o);
    for (int i = h->len; i < cap; i++) o[i] = cfg->pad_id;
    out_len[b] = h->len;
    if (out_score) out_score[b] = (float)h->score;
  }
done:
  ot_mem_free(block);
  return st;
}
