// Beam search (ot_beam_search, src/infer/beam.c):
//  - golden: Hugging Face transformers 4.40.2 generate() on a toy model whose
//    logits are E[s] + W[last] + U[prev] + P[t] over fixed float32 tables
//    (tools/gen_beam_golden.py -> tests/golden/beam/beam_hf.txt): beams 1/2/4/5,
//    length penalty 0.6/1/2/-0.5, early stopping false/true/never, per-sentence
//    limits from max_len_a/b, one max_length for a batch, min_length; and
//    (beam_proc.txt) the logits processors repetition_penalty, no_repeat_ngram_size,
//    bad_words_ids (single and multi-token), forced_eos_token_id. Sequences
//    must be equal, scores within 1e-5;
//  - brute force: with early_stopping NEVER and num_beams at least the number of
//    candidates of any step (nothing is pruned), the result is the exhaustive
//    argmax of sum_logprobs / len^α over every sequence that ends with eos or at
//    the limit (any α: the NEVER bound never stops a search that could improve);
//  - the row contract (rows grouped by sentence, parents in range, finished
//    sentences leave), a batch equals each sentence searched alone, bad options, a callback error, no workspace left over.
#include "harness.h"
#include "ot/infer.h"

// ------------------------------------------------------------- toy model ---
typedef struct {
  int nsent, V, prows;
  int32_t start;
  float *E, *W, *U, *P;       // [nsent, V], [V, V], [V, V], [prows, V]
  int32_t *last;              // [rows] tokens of the previous call
  int prev_rows;
  int calls;
  int fail_at;                // returns OT_EIO at this step (-1: never)
  int nb, batch;
  bool bad_contract;
  int sent0;                  // sentence ids offset (a sentence searched alone)
  int sent_steps[16];         // calls that had rows of sentence s (s < 16)
} toy;

// logits of one row, added in the order the Python model adds them
static void toy_row(const toy *m, int s, int32_t last, int32_t prev, int t, float *out) {
  const int V = m->V, tp = t < m->prows ? t : m->prows - 1;
  for (int v = 0; v < V; v++) {
    float x = m->E[(size_t)s * V + v] + m->W[(size_t)last * V + v];
    x = x + m->U[(size_t)prev * V + v];
    x = x + m->P[(size_t)tp * V + v];
    out[v] = x;
  }
}

static ot_status toy_step(void *ctx, int step, int rows, const int32_t *tokens,
                          const int32_t *parent, const int32_t *sentence, float *logits,
                          int ld) {
  toy *m = ctx;
  if (step == m->fail_at) return ot_error(OT_EIO, "toy: planted failure at step %d", step);
  if (step != m->calls || ld != m->V) m->bad_contract = true;
  int32_t *cur = th_alloc((size_t)rows * sizeof *cur);
  for (int r = 0; r < rows; r++) {
    if (r > 0 && sentence[r] < sentence[r - 1]) m->bad_contract = true;
    if (sentence[r] < 0 || sentence[r] >= m->batch) m->bad_contract = true;
    int32_t prev = m->start;
    if (step == 0) {
      if (parent[r] != -1 || tokens[r] != m->start || rows != m->batch) m->bad_contract = true;
    } else if (parent[r] < 0 || parent[r] >= m->prev_rows) {
      m->bad_contract = true;
    } else {
      prev = m->last[parent[r]];
    }
    if (step > 0 && rows % m->nb != 0) m->bad_contract = true;
    cur[r] = tokens[r];
    if (sentence[r] >= 0 && sentence[r] < 16) m->sent_steps[sentence[r]] = step + 1;
    toy_row(m, (m->sent0 + sentence[r]) % m->nsent, tokens[r], prev, step, logits + (size_t)r * ld);
  }
  free(m->last);
  m->last = cur;
  m->prev_rows = rows;
  m->calls++;
  return OT_OK;
}

static void toy_begin(toy *m, int nb, int batch) {
  free(m->last);
  m->last = NULL;
  m->prev_rows = 0;
  m->calls = 0;
  m->nb = nb;
  m->batch = batch;
  m->bad_contract = false;
  memset(m->sent_steps, 0, sizeof m->sent_steps);
}

// --------------------------------------------------------------- golden ---
static float *read_floats(FILE *f, const char *tag, size_t n) {
  char w[16];
  if (fscanf(f, "%15s", w) != 1 || strcmp(w, tag) != 0) return NULL;
  float *x = th_alloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++)
    if (fscanf(f, "%f", &x[i]) != 1) { free(x); return NULL; }
  return x;
}

// path: beam_hf.txt (version 1) or beam_proc.txt (version 2: logits processors)
static void test_golden(const char *path) {
  FILE *f = fopen(path, "r");
  if (!th_check(f != NULL, "golden %s missing (tools/gen_beam_golden.py)", path)) return;
  int ver = 0, eos = 0, pad = 0;
  toy m = {0};
  m.fail_at = -1;
  bool ok = fscanf(f, "beam-golden %d dims %d %d %d %d %d %d", &ver, &m.nsent, &m.V, &m.prows,
                   &eos, &pad, &m.start) == 7 && (ver == 1 || ver == 2);
  if (ok) {
    m.E = read_floats(f, "E", (size_t)m.nsent * m.V);
    m.W = read_floats(f, "W", (size_t)m.V * m.V);
    m.U = read_floats(f, "U", (size_t)m.V * m.V);
    m.P = read_floats(f, "P", (size_t)m.prows * m.V);
    ok = m.E && m.W && m.U && m.P;
  }
  int *src = th_alloc((size_t)(m.nsent > 0 ? m.nsent : 1) * sizeof *src);
  char w[16];
  ok = ok && fscanf(f, "%15s", w) == 1 && strcmp(w, "src") == 0;
  for (int s = 0; ok && s < m.nsent; s++) ok = fscanf(f, "%d", &src[s]) == 1;
  th_check(ok, "golden %s: malformed header", path);
  const int cap = 64;
  int32_t *got = th_alloc((size_t)m.nsent * cap * sizeof *got);
  int *len = th_alloc((size_t)m.nsent * sizeof *len);
  float *score = th_alloc((size_t)m.nsent * sizeof *score);
  int ncase = 0, nseq = 0, bad = 0;
  const size_t mem0 = ot_mem_current(OT_MEM_WORKSPACE);
  while (ok && fscanf(f, "%15s", w) == 1 && strcmp(w, "case") == 0) {
    int nb, es, ml, mn;
    float lp, a, b;
    if (fscanf(f, "%d %f %d %d %f %f %d", &nb, &lp, &es, &ml, &a, &b, &mn) != 7) { ok = false; break; }
    float rep = 1.0f;
    int ngram = 0, feos = -1, nbad = 0, nbt = 0;
    int32_t bad_len[8], bad_ids[64];
    if (ver == 2) {
      ok = fscanf(f, "%f %d %d %d", &rep, &ngram, &feos, &nbad) == 4 && nbad >= 0 && nbad <= 8;
      for (int i = 0; ok && i < nbad; i++) {
        ok = fscanf(f, "%d", &bad_len[i]) == 1 && bad_len[i] >= 1 && nbt + bad_len[i] <= 64;
        for (int j = 0; ok && j < bad_len[i]; j++) ok = fscanf(f, "%d", &bad_ids[nbt++]) == 1;
      }
      if (!ok) break;
    }
    ot_beam_config c = ot_beam_config_default();
    c.repetition_penalty = rep;
    c.no_repeat_ngram_size = ngram;
    c.forced_eos_id = feos;
    c.n_bad_words = nbad;
    c.bad_words_len = bad_len;
    c.bad_words_ids = bad_ids;
    c.vocab = m.V;
    c.num_beams = nb;
    c.length_penalty = lp;
    c.early_stopping = (ot_early_stop)es;
    c.max_length = ml;
    c.max_len_a = a;
    c.max_len_b = b;
    c.min_length = mn;
    c.eos_id = eos;
    c.pad_id = pad;
    c.decoder_start_id = m.start;
    toy_begin(&m, nb, m.nsent);
    ot_beam_stats stats;
    ot_status st = ot_beam_search(&c, m.nsent, src, toy_step, &m, got, cap, len, score, &stats);
    th_check(st == OT_OK, "golden case %d: %s", ncase, ot_last_error());
    th_check(!m.bad_contract, "golden case %d: the callback saw rows breaking the contract", ncase);
    th_check(stats.steps == m.calls, "golden case %d: stats.steps %d != calls %d", ncase,
             stats.steps, m.calls);
    char kind[8];
    int want_steps[16] = {0};
    if (fscanf(f, "%15s %7s", w, kind) != 2 || strcmp(w, "steps") != 0) { ok = false; break; }
    const bool each = strcmp(kind, "each") == 0;
    for (int s = 0; s < (each ? m.nsent : 1); s++)
      if (fscanf(f, "%d", &want_steps[s]) != 1) ok = false;
    if (each) {
      for (int s = 0; s < m.nsent; s++)
        th_check(m.sent_steps[s] == want_steps[s], "golden case %d sentence %d: searched %d "
                 "steps, generate() ran %d", ncase, s, m.sent_steps[s], want_steps[s]);
    } else {
      th_check(stats.steps == want_steps[0], "golden case %d: %d steps, generate() ran %d",
               ncase, stats.steps, want_steps[0]);
    }
    for (int s = 0; s < m.nsent; s++) {
      int wl;
      float ws;
      if (fscanf(f, "%15s %d %f", w, &wl, &ws) != 3 || strcmp(w, "out") != 0) { ok = false; break; }
      bool same = st == OT_OK && wl == len[s];
      for (int i = 0; i < wl; i++) {
        int tk;
        if (fscanf(f, "%d", &tk) != 1) { ok = false; break; }
        if (same && got[(size_t)s * cap + i] != tk) same = false;
      }
      for (int i = len[s]; same && i < cap; i++) same = got[(size_t)s * cap + i] == pad;
      const bool close = fabsf(score[s] - ws) <= 1e-5f;
      if (!th_check(same && close, "%s case %d (beams %d, lp %g, early %d, max %d, a %g, "
                    "b %g, min %d, rep %g, ngram %d, forced eos %d, bad words %d) sentence %d: "
                    "len %d (want %d), score %.7g (want %.7g)%s", path, ncase, nb, lp, es, ml, a,
                    b, mn, rep, ngram, feos, nbad, s, len[s], wl, score[s], ws,
                    same ? "" : ", tokens differ"))
        bad++;
      nseq++;
    }
    ncase++;
  }
  th_check(ok && ncase > 0, "golden %s: malformed at case %d", path, ncase);
  th_check(ot_mem_current(OT_MEM_WORKSPACE) == mem0, "golden: workspace left allocated");
  printf("golden %s: %d cases, %d sequences vs transformers generate(), %d differ\n", path,
         ncase, nseq, bad);
  toy_begin(&m, 1, 1);
  free(m.E); free(m.W); free(m.U); free(m.P);
  free(src); free(got); free(len); free(score);
  fclose(f);
}

// ---------------------------------------------------------- brute force ---
typedef struct {
  const toy *m;
  int s, V, max_new, min_length;
  int32_t eos;
  double alpha;
  int32_t seq[16];
  double best;
  int best_len;
  int32_t best_seq[16];
} brute;

static void brute_dfs(brute *b, int t, int32_t last, int32_t prev, float sum) {
  float x[16], lp[16];
  toy_row(b->m, b->s, last, prev, t, x);
  float mx = -INFINITY;
  for (int v = 0; v < b->V; v++) mx = fmaxf(mx, x[v]);
  double z = 0.0;
  for (int v = 0; v < b->V; v++) z += exp((double)(x[v] - mx));
  for (int v = 0; v < b->V; v++) lp[v] = (x[v] - mx) - (float)log(z);
  for (int v = 0; v < b->V; v++) {
    if (v == b->eos && t + 1 < b->min_length) continue;
    const float s2 = sum + lp[v];
    b->seq[t] = v;
    if (v == b->eos || t + 1 == b->max_new) {
      const double sc = (double)s2 / pow((double)(t + 1), b->alpha);
      if (sc > b->best) {
        b->best = sc;
        b->best_len = t + 1;
        memcpy(b->best_seq, b->seq, (size_t)(t + 1) * sizeof(int32_t));
      }
    } else {
      brute_dfs(b, t + 1, v, last, s2);
    }
  }
}

static void test_brute(void) {
  th_rng rng = {77};
  int cases = 0, nbad = 0;
  for (int V = 3; V <= 4; V++)
    for (int max_new = 1; max_new <= 4; max_new++)
      for (int ai = 0; ai < 4; ai++) {
        const float alphas[4] = {0.6f, 1.0f, 2.0f, -0.5f};
        if (V == 4 && max_new == 4) continue;
        // candidates at step t: V * (V - 1)^t; beams enough to keep them all
        int nb = V;
        for (int t = 1; t < max_new; t++) nb *= V - 1;
        toy m = {0};
        m.nsent = 3; m.V = V; m.prows = 8; m.start = 1; m.fail_at = -1;
        m.E = th_falloc((size_t)m.nsent * V);
        m.W = th_falloc((size_t)V * V);
        m.U = th_falloc((size_t)V * V);
        m.P = th_falloc((size_t)m.prows * V);
        th_fill_normal(&rng, m.E, (size_t)m.nsent * V, 1.0f);
        th_fill_normal(&rng, m.W, (size_t)V * V, 1.0f);
        th_fill_normal(&rng, m.U, (size_t)V * V, 1.0f);
        th_fill_normal(&rng, m.P, (size_t)m.prows * V, 1.0f);
        ot_beam_config c = ot_beam_config_default();
        c.vocab = V;
        c.num_beams = nb;
        c.length_penalty = alphas[ai];
        c.early_stopping = OT_EARLY_STOP_NEVER;
        c.max_length = max_new + 1;
        c.min_length = ai == 1 && max_new >= 3 ? 3 : 0;
        c.eos_id = 0; c.pad_id = 0; c.decoder_start_id = 1;
        int32_t got[3 * 8];
        int len[3];
        float score[3];
        toy_begin(&m, nb, m.nsent);
        ot_status st = ot_beam_search(&c, m.nsent, NULL, toy_step, &m, got, 8, len, score, NULL);
        th_check(st == OT_OK && !m.bad_contract, "brute V %d max %d: %s", V, max_new,
                 ot_last_error());
        for (int s = 0; s < m.nsent; s++) {
          brute b = {.m = &m, .s = s, .V = V, .max_new = max_new, .min_length = c.min_length,
                     .eos = 0, .alpha = alphas[ai], .best = -INFINITY};
          brute_dfs(&b, 0, 1, 1, 0.0f);
          bool same = len[s] == b.best_len;
          for (int i = 0; same && i < len[s]; i++) same = got[s * 8 + i] == b.best_seq[i];
          if (!(same && fabs(score[s] - b.best) <= 1e-5)) nbad++;
          th_check(same && fabs(score[s] - b.best) <= 1e-5,
                   "brute V %d max_new %d beams %d alpha %g sentence %d: len %d (want %d), "
                   "score %.7g (want %.7g)", V, max_new, nb, alphas[ai], s, len[s], b.best_len,
                   score[s], b.best);
        }
        cases++;
        toy_begin(&m, 1, 1);
        free(m.E); free(m.W); free(m.U); free(m.P);
      }
  printf("brute force: %d searches x 3 sentences vs the exhaustive argmax, %d differ\n", cases,
         nbad);
}

// ------------------------------------------------------- contract, errors ---
static toy small_toy(th_rng *rng, int V) {
  toy m = {0};
  m.nsent = 4; m.V = V; m.prows = 32; m.start = 1; m.fail_at = -1;
  m.E = th_falloc((size_t)m.nsent * V);
  m.W = th_falloc((size_t)V * V);
  m.U = th_falloc((size_t)V * V);
  m.P = th_falloc((size_t)m.prows * V);
  th_fill_normal(rng, m.E, (size_t)m.nsent * V, 1.0f);
  th_fill_normal(rng, m.W, (size_t)V * V, 1.0f);
  th_fill_normal(rng, m.U, (size_t)V * V, 1.0f);
  th_fill_normal(rng, m.P, (size_t)m.prows * V, 1.0f);
  for (int t = 0; t < m.prows; t++) m.P[(size_t)t * V] += 0.4f * t - 1.0f;   // eos (id 0) grows
  return m;
}

static void test_errors(void) {
  th_rng rng = {5};
  toy m = small_toy(&rng, 11);
  ot_beam_config c = ot_beam_config_default();
  c.vocab = 11; c.eos_id = 0; c.pad_id = 0; c.decoder_start_id = 1; c.max_length = 20;
  int32_t out[4 * 32];
  int len[4];
  float score[4];
  const int src[4] = {3, 9, 1, 14};
  const size_t mem0 = ot_mem_current(OT_MEM_WORKSPACE);
  // the batch shrinks as sentences finish: fewer rows than steps * batch * beams
  ot_beam_stats stats;
  toy_begin(&m, 4, 4);
  th_check(ot_beam_search(&c, 4, src, toy_step, &m, out, 32, len, score, &stats) == OT_OK &&
           !m.bad_contract, "shrinking batch: %s", ot_last_error());
  th_check(stats.rows < (long long)(stats.steps - 1) * 4 * 4 + 4,
           "finished sentences leave the batch (%lld rows over %d steps)", stats.rows, stats.steps);
  // per-sentence limits: nothing longer than floor(a * src + b) - 1 tokens
  ot_beam_config ab = c;
  ab.max_length = 0; ab.max_len_a = 1.0f; ab.max_len_b = 1.5f;
  toy_begin(&m, 4, 4);
  th_check(ot_beam_search(&ab, 4, src, toy_step, &m, out, 32, len, score, NULL) == OT_OK,
           "a/b limits: %s", ot_last_error());
  for (int s = 0; s < 4; s++)
    th_check(len[s] >= 1 && len[s] <= (int)(src[s] + 1.5f) - 1, "sentence %d: len %d over the "
             "limit %d", s, len[s], (int)(src[s] + 1.5f));
  // a batch gives each sentence what a search of it alone gives (4 beams and greedy)
  for (int nb = 1; nb <= 4; nb += 3) {
    ot_beam_config one = ab;
    one.num_beams = nb;
    toy_begin(&m, nb, 4);
    th_check(ot_beam_search(&one, 4, src, toy_step, &m, out, 32, len, score, NULL) == OT_OK,
             "batch: %s", ot_last_error());
    for (int s = 0; s < 4; s++) {
      int32_t o1[32];
      int l1 = -1;
      float s1 = 0.0f;
      m.sent0 = s;
      toy_begin(&m, nb, 1);
      th_check(ot_beam_search(&one, 1, &src[s], toy_step, &m, o1, 32, &l1, &s1, NULL) == OT_OK,
               "alone: %s", ot_last_error());
      m.sent0 = 0;
      th_check(l1 == len[s] && s1 == score[s] && !memcmp(o1, out + s * 32, sizeof o1),
               "beams %d sentence %d: alone len %d score %g, in the batch len %d score %g", nb, s,
               l1, s1, len[s], score[s]);
    }
  }
  // a callback error stops the search and comes back as it is
  m.fail_at = 2;
  toy_begin(&m, 4, 4);
  th_check_error(ot_beam_search(&c, 4, src, toy_step, &m, out, 32, len, score, NULL), OT_EIO,
                 "planted failure at step 2", "callback error");
  m.fail_at = -1;
  th_check(m.calls == 2, "the search stopped at the failing call (%d calls before)", m.calls);

  struct { const char *needle; ot_beam_config c; int cap; const int *src; } bad[16];
  int n = 0;
  bad[n] = (typeof(bad[0])){"num_beams=0", c, 32, src}; bad[n++].c.num_beams = 0;
  bad[n] = (typeof(bad[0])){"max_length=-3", c, 32, src}; bad[n++].c.max_length = -3;
  bad[n] = (typeof(bad[0])){"min_length=-1", c, 32, src}; bad[n++].c.min_length = -1;
  bad[n] = (typeof(bad[0])){"eos_id=11", c, 32, src}; bad[n++].c.eos_id = 11;
  bad[n] = (typeof(bad[0])){"pad_id=-1", c, 32, src}; bad[n++].c.pad_id = -1;
  bad[n] = (typeof(bad[0])){"decoder_start_id=40", c, 32, src}; bad[n++].c.decoder_start_id = 40;
  bad[n] = (typeof(bad[0])){"vocab=1", c, 32, src}; bad[n++].c.vocab = 1;
  bad[n] = (typeof(bad[0])){"no length limit", c, 32, src}; bad[n++].c.max_length = 0;
  bad[n] = (typeof(bad[0])){"cap=5 is too small", c, 5, src}; n++;
  bad[n] = (typeof(bad[0])){"max_len_a=-1", c, 32, src}; bad[n++].c.max_len_a = -1.0f;
  bad[n] = (typeof(bad[0])){"needs src_len", c, 32, NULL}; bad[n++].c.max_len_a = 1.0f;
  bad[n] = (typeof(bad[0])){"sentence 0: length limit 1", c, 32, src}; bad[n++].c.max_length = 1;
  bad[n] = (typeof(bad[0])){"early_stopping=7", c, 32, src};
  bad[n++].c.early_stopping = (ot_early_stop)7;
  bad[n] = (typeof(bad[0])){"length_penalty=nan", c, 32, src};
  bad[n++].c.length_penalty = NAN;
  const int neg[4] = {3, -2, 1, 1};
  bad[n] = (typeof(bad[0])){"src_len[1]=-2", c, 32, neg}; bad[n++].c.max_len_a = 1.0f;
  for (int i = 0; i < n; i++)
    th_check_error(ot_beam_search(&bad[i].c, 4, bad[i].src, toy_step, &m, out, bad[i].cap, len,
                                  score, NULL), OT_EINVAL, bad[i].needle, bad[i].needle);
  th_check_error(ot_beam_search(&c, 0, src, toy_step, &m, out, 32, len, score, NULL), OT_EINVAL,
                 "batch", "batch 0");
  th_check_error(ot_beam_search(&c, 4, src, NULL, &m, out, 32, len, score, NULL), OT_EINVAL,
                 "step", "NULL callback");
  th_check(ot_mem_current(OT_MEM_WORKSPACE) == mem0, "workspace returns to %zu bytes (now %zu)",
           mem0, ot_mem_current(OT_MEM_WORKSPACE));
  toy_begin(&m, 1, 1);
  free(m.E); free(m.W); free(m.U); free(m.P);
}

// Logits processors: properties of every result (beams 1 and 4) and refusals.
static void test_procs(void) {
  th_rng rng = {9};
  toy m = small_toy(&rng, 11);
  ot_beam_config c = ot_beam_config_default();
  c.vocab = 11; c.eos_id = 0; c.pad_id = 0; c.decoder_start_id = 1; c.max_length = 14;
  int32_t out[4 * 32];
  int len[4];
  float score[4];
  const int32_t blen[3] = {1, 1, 2}, bids[4] = {5, 7, 3, 4};
  for (int nb = 1; nb <= 4; nb += 3) {
    ot_beam_config p = c;
    p.num_beams = nb;
    p.no_repeat_ngram_size = 1;
    p.n_bad_words = 3; p.bad_words_len = blen; p.bad_words_ids = bids;
    p.forced_eos_id = 9;
    toy_begin(&m, nb, 4);
    th_check(ot_beam_search(&p, 4, NULL, toy_step, &m, out, 32, len, score, NULL) == OT_OK,
             "processors, beams %d: %s", nb, ot_last_error());
    for (int s = 0; s < 4; s++) {
      const int32_t *o = out + s * 32;
      bool ok = len[s] >= 1 && len[s] <= 13;
      for (int i = 0; ok && i < len[s]; i++) {
        ok = o[i] != 5 && o[i] != 7 && o[i] != 1;   // bad words; the start token is in the input
        for (int j = 0; j < i; j++) ok = ok && o[i] != o[j];
        if (i > 0 && o[i - 1] == 3) ok = ok && o[i] != 4;
      }
      if (len[s] == 13) ok = ok && o[12] == 9;   // the last step allows the forced token only
      th_check(ok, "processors, beams %d sentence %d: len %d breaks a ban", nb, s, len[s]);
    }
  }
  const int32_t zero_len[1] = {0}, big_ids[1] = {11};
  const int32_t one_len[1] = {1};
  struct { const char *needle; ot_beam_config c; } bad[8];
  int n = 0;
  bad[n] = (typeof(bad[0])){"repetition_penalty=-1", c}; bad[n++].c.repetition_penalty = -1.0f;
  bad[n] = (typeof(bad[0])){"repetition_penalty=inf", c};
  bad[n++].c.repetition_penalty = INFINITY;
  bad[n] = (typeof(bad[0])){"no_repeat_ngram_size=-2", c}; bad[n++].c.no_repeat_ngram_size = -2;
  bad[n] = (typeof(bad[0])){"forced_eos_id=11", c}; bad[n++].c.forced_eos_id = 11;
  bad[n] = (typeof(bad[0])){"needs bad_words_len", c}; bad[n++].c.n_bad_words = 1;
  bad[n] = (typeof(bad[0])){"sequence 0 has length 0", c};
  bad[n].c.n_bad_words = 1; bad[n].c.bad_words_len = zero_len; bad[n++].c.bad_words_ids = bids;
  bad[n] = (typeof(bad[0])){"token 11 is out of range", c};
  bad[n].c.n_bad_words = 1; bad[n].c.bad_words_len = one_len; bad[n++].c.bad_words_ids = big_ids;
  bad[n] = (typeof(bad[0])){"n_bad_words=-1", c}; bad[n++].c.n_bad_words = -1;
  for (int i = 0; i < n; i++)
    th_check_error(ot_beam_search(&bad[i].c, 4, NULL, toy_step, &m, out, 32, len, score, NULL),
                   OT_EINVAL, bad[i].needle, bad[i].needle);
  toy_begin(&m, 1, 1);
  free(m.E); free(m.W); free(m.U); free(m.P);
}

int main(void) {
  test_golden("tests/golden/beam/beam_hf.txt");
  test_golden("tests/golden/beam/beam_proc.txt");
  test_procs();
  test_brute();
  test_errors();
  return th_finish();
}
