// Generation tests: KV cache + incremental forward, sampler, generation loop.
//  - incremental logits (prefill with flash attention, a chunk against the
//    cache with the decode kernel, then one token at a time) equal the full
//    forward's logits at every position: f32 nerr <= 1e-5, bf16 <= 3e-2; GPT-2
//    family (learned positions, LayerNorm, GELU, biases) and Llama family
//    (RoPE, GQA 4/2, RMSNorm, SwiGLU, untied); B = 2 short and B = 1 longer
//    than one decode key chunk (256); every ISA; last-row-only logits equal too
//  - greedy generation equals the argmax of the full forward step by step;
//    stop token, callback stop, determinism of seeded sampling
//  - sampler: top-k = 1, tiny top-p and temperature 0 are greedy; empirical
//    frequencies with a fixed seed match softmax(l / T), top-k and top-p
//    renormalized distributions (5 sigma); nucleus membership on a large
//    vocabulary; NaN logits never drawn; same seed = same draws
//  - errors: cache overflow, bad cache / sampler / generation arguments
#include "harness.h"
#include "model_common.h"
#include "ot/infer.h"

static ot_model_config cfg_gpt2(int max_seq) { return tm_cfg_gpt2(max_seq); }
static ot_model_config cfg_llama(int max_seq) { return tm_cfg_llama(max_seq); }
static ot_model *make(const ot_model_config *c, int B, int T, ot_dtype dt, uint64_t seed) {
  return tm_make(c, B, T, dt, seed);
}

static ot_kvcache *make_kv(const ot_model *m, int B, int S, int chunk, bool all) {
  ot_kv_config k = {B, S, chunk, all};
  ot_kvcache *c = NULL;
  th_check(ot_kv_create(&c, m, &k) == OT_OK, "kv create: %s", ot_last_error());
  return c;
}

// Full-sequence logits [B*T, V] f32 (the real vocabulary only).
static float *full_logits(ot_model *m, const int32_t *tok, int B, int T) {
  const int V = ot_model_config_of(m)->vocab;
  float *out = th_falloc((size_t)B * T * V);
  if (!th_check(ot_model_forward(m, tok, NULL, B, T, 0.0f, false, NULL) == OT_OK, "full forward: %s",
                ot_last_error()))
    return out;
  int ld = 0;
  const void *lg = ot_model_logits(m, &ld);
  const ot_dtype dt = ot_model_run_of(m)->dt;
  for (int r = 0; r < B * T; r++)
    ot_convert((const char *)lg + (size_t)r * ld * ot_dtype_size(dt), dt, out + (size_t)r * V, OT_F32,
               (size_t)V);
  return out;
}

// ------------------------------------------------------- equivalence --------
// Pieces: prefill `pre` tokens (flash), one chunk of `mid` (decode kernel), then
// single tokens to S. Every position's logits against the full forward.
static void test_equiv(const ot_model_config *c, int B, int pre, int mid, ot_dtype dt) {
  const int S = c->max_seq, V = c->vocab;
  const double tol = dt == OT_F32 ? 1e-5 : 3e-2;
  ot_model *m = make(c, B, S, dt, 11 + (uint64_t)S);
  if (!m) return;
  int32_t *tok = th_alloc(sizeof(int32_t) * (size_t)B * S), *piece = th_alloc(sizeof(int32_t) * (size_t)B * S);
  th_rng r = {99 + (uint64_t)B};
  for (int i = 0; i < B * S; i++) tok[i] = (int32_t)(th_next(&r) % (uint64_t)V);
  float *full = full_logits(m, tok, B, S);
  double norm = 0.0;
  for (size_t i = 0; i < (size_t)B * S * V; i++) norm += (double)full[i] * full[i];
  th_check(norm > 1.0 * B * S && isfinite(norm), "%s %s: full-forward logits are not degenerate "
           "(rms %.3g)", c->name, ot_dtype_name(dt), sqrt(norm / ((double)B * S * V)));
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    const int chunk = pre > mid ? pre : mid;
    ot_kvcache *kv = make_kv(m, B, 0, chunk, true);
    if (!kv) break;
    double worst = 0.0;
    int bad = 0;
    for (int p = 0; p < S;) {
      const int n = p == 0 ? pre : p == pre ? mid : 1;
      for (int b = 0; b < B; b++) memcpy(piece + b * n, tok + b * S + p, sizeof(int32_t) * n);
      const float *lg = NULL;
      int ld = 0;
      if (!th_check(ot_kv_forward(kv, piece, n, true, &lg, &ld) == OT_OK, "kv forward at %d: %s", p,
                    ot_last_error()))
        break;
      for (int b = 0; b < B; b++)
        for (int t = 0; t < n; t++) {
          double e = th_nerr(lg + ((size_t)b * n + t) * ld, full + ((size_t)b * S + p + t) * V, (size_t)V);
          if (e > worst) worst = e;
          if (!(e <= tol) && bad++ < 3)
            th_check(false, "%s %s %s B=%d: position %d of sequence %d nerr %.3g > %.1g", c->name,
                     ot_dtype_name(dt), ot_isa_name(isas[ii]), B, p + t, b, e, tol);
        }
      p += n;
    }
    th_check(bad == 0 && ot_kv_len(kv) == S, "%s %s %s B=%d S=%d: incremental == full logits at every "
             "position (worst nerr %.2g, len %d)", c->name, ot_dtype_name(dt), ot_isa_name(isas[ii]), B,
             S, worst, ot_kv_len(kv));
    // the cache is full: one more token is refused and nothing changes
    th_check_error(ot_kv_forward(kv, tok, 1, true, NULL, NULL), OT_EINVAL, "capacity", "cache overflow");
    th_check(ot_kv_len(kv) == S, "overflow leaves the length at %d", ot_kv_len(kv));
    ot_kv_free(kv);
    // last-row logits through the chunked path (all = false, input longer than chunk)
    ot_kvcache *k2 = make_kv(m, B, 0, chunk, false);
    const float *lg = NULL;
    int ld = 0;
    if (k2 && th_check(ot_kv_forward(k2, tok, S, false, &lg, &ld) == OT_OK, "chunked prefill: %s",
                       ot_last_error())) {
      double e = 0.0;
      for (int b = 0; b < B; b++) {
        double eb = th_nerr(lg + (size_t)b * ld, full + ((size_t)b * S + S - 1) * V, (size_t)V);
        if (eb > e) e = eb;
      }
      th_check(e <= tol, "%s %s %s: chunked prefill of %d (chunk %d) last logits nerr %.2g", c->name,
               ot_dtype_name(dt), ot_isa_name(isas[ii]), S, chunk, e);
    }
    ot_kv_free(k2);
  }
  ot_isa_unforce();
  free(full);
  free(tok);
  free(piece);
  ot_model_free(m);
}

// ------------------------------------------------------------ greedy --------
static int argmax(const float *x, int n) {
  int b = 0;
  for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
  return b;
}

typedef struct { int n, stop_after; int32_t seen[64]; } cb_ctx;
static bool on_tok(void *p, int32_t t) {
  cb_ctx *c = p;
  if (c->n < 64) c->seen[c->n] = t;
  c->n++;
  return c->stop_after <= 0 || c->n < c->stop_after;
}

static void test_greedy(const ot_model_config *c) {
  const int S = c->max_seq, V = c->vocab, P = 3, NEW = S - P + 1;
  ot_model *m = make(c, 1, S, OT_F32, 5);
  if (!m) return;
  ot_kvcache *kv = make_kv(m, 1, 0, 0, false);
  ot_sampler_config sc = {0.0f, 0, 1.0f, 1};
  ot_sampler *s = NULL;
  th_check(ot_sampler_create(&s, &sc, V) == OT_OK, "sampler: %s", ot_last_error());
  int32_t seq[64] = {7, 1, 30};
  int32_t *out = seq + P;
  ot_gen_config g = {NEW, -1};
  ot_gen_stats st;
  cb_ctx cb = {0, 0, {0}};
  if (!th_check(ot_generate(kv, s, seq, P, &g, out, on_tok, &cb, &st) == OT_OK, "generate: %s",
                ot_last_error()))
    goto done;
  th_check(st.new_tokens == NEW && !st.stopped && st.prompt_tokens == P && cb.n == NEW &&
           st.decode_steps == NEW - 1 && ot_kv_len(kv) == P + NEW - 1 &&
           !memcmp(cb.seen, out, sizeof(int32_t) * NEW), "%s: %d tokens generated, each handed on",
           c->name, st.new_tokens);
  int agree = 0, close = 0;
  for (int k = 0; k < NEW; k++) {
    float *lg = full_logits(m, seq, 1, P + k);
    const float *last = lg + (size_t)(P + k - 1) * V;
    const int a = argmax(last, V);
    float second = -INFINITY;
    for (int i = 0; i < V; i++) if (i != a && last[i] > second) second = last[i];
    if (last[a] - second < 1e-4f * (fabsf(last[a]) + 1.0f)) close++;   // a near-tie: either is fine
    else agree += a == out[k];
    if (a != out[k] && last[a] - second >= 1e-4f * (fabsf(last[a]) + 1.0f))
      th_check(false, "%s: step %d greedy %d != full-forward argmax %d", c->name, k, out[k], a);
    free(lg);
  }
  th_check(agree + close == NEW && close <= 2, "%s: greedy == argmax of the full forward at %d/%d steps "
           "(%d near-ties)", c->name, agree, NEW, close);
  // stop token: generation ends where it is first sampled, without it
  int first = 4;
  for (int k = 0; k < first; k++) if (out[k] == out[first]) { first = k; break; }
  int32_t again[64];
  g.stop_token = out[first];
  th_check(ot_generate(kv, s, seq, P, &g, again, NULL, NULL, &st) == OT_OK && st.stopped &&
           st.new_tokens == first && !memcmp(again, out, sizeof(int32_t) * first),
           "%s: stops at the stop token after %d tokens (got %d, stopped %d)", c->name, first,
           st.new_tokens, st.stopped);
  // callback stop
  g.stop_token = -1;
  cb_ctx cb2 = {0, 2, {0}};
  th_check(ot_generate(kv, s, seq, P, &g, again, on_tok, &cb2, &st) == OT_OK && st.new_tokens == 2,
           "%s: the callback stops generation (%d tokens)", c->name, st.new_tokens);
  // too long for the cache: refused up front
  g.max_tokens = NEW + 1;
  th_check_error(ot_generate(kv, s, seq, P, &g, again, NULL, NULL, NULL), OT_EINVAL, "capacity",
                 "prompt + max_tokens beyond the cache");
  g.max_tokens = NEW;
  th_check_error(ot_generate(kv, s, seq, 0, &g, again, NULL, NULL, NULL), OT_EINVAL, "n_prompt",
                 "empty prompt");
  // seeded sampling is deterministic; another seed differs
  ot_sampler_config sr = {1.0f, 20, 0.9f, 42};
  ot_sampler *s1 = NULL, *s2 = NULL;
  ot_sampler_create(&s1, &sr, V);
  ot_sampler_create(&s2, &sr, V);
  int32_t a1[64], a2[64], a3[64];
  ot_generate(kv, s1, seq, P, &g, a1, NULL, NULL, NULL);
  ot_generate(kv, s2, seq, P, &g, a2, NULL, NULL, NULL);
  ot_sampler_reseed(s1, 43);
  ot_generate(kv, s1, seq, P, &g, a3, NULL, NULL, NULL);
  th_check(!memcmp(a1, a2, sizeof(int32_t) * NEW), "%s: same seed, same tokens", c->name);
  th_check(memcmp(a1, a3, sizeof(int32_t) * NEW) != 0, "%s: another seed, other tokens", c->name);
  ot_sampler_free(s1);
  ot_sampler_free(s2);
done:
  ot_sampler_free(s);
  ot_kv_free(kv);
  ot_model_free(m);
}

// ----------------------------------------------------------- sampler --------
static ot_sampler *samp(float T, int k, float p, uint64_t seed, int V) {
  ot_sampler_config c = {T, k, p, seed};
  ot_sampler *s = NULL;
  th_check(ot_sampler_create(&s, &c, V) == OT_OK, "sampler T=%g k=%d p=%g: %s", T, k, p, ot_last_error());
  return s;
}

// Draws n tokens and compares the frequencies with want[V] (0 = never drawn).
static void check_freq(ot_sampler *s, const float *lg, const double *want, int V, int n, const char *what) {
  int *cnt = calloc((size_t)V, sizeof(int));
  if (!cnt) { th_check(false, "%s: out of memory", what); return; }
  bool range = true;
  for (int i = 0; i < n; i++) {
    int32_t t = -1;
    ot_sampler_sample(s, lg, &t);
    if (t < 0 || t >= V) range = false;
    else cnt[t]++;
  }
  double worst = 0.0;
  bool ok = range;
  for (int i = 0; i < V; i++) {
    const double f = (double)cnt[i] / n, sd = sqrt(want[i] * (1 - want[i]) / n);
    if (want[i] == 0.0) ok &= cnt[i] == 0;
    else ok &= fabs(f - want[i]) <= 5 * sd + 1e-9;
    if (want[i] > 0 && fabs(f - want[i]) / sd > worst) worst = fabs(f - want[i]) / sd;
  }
  th_check(ok, "%s: frequencies of %d draws match (worst %.2f sigma)", what, n, worst);
  free(cnt);
}

static void test_sampler(void) {
  enum { V = 1000 };
  float *lg = th_falloc(V);
  th_rng r = {3};
  // greedy equivalents on random logits
  bool ok1 = true, ok2 = true, ok3 = true;
  ot_sampler *k1 = samp(1.0f, 1, 1.0f, 5, V), *p0 = samp(1.0f, 0, 1e-6f, 5, V), *t0 = samp(0.0f, 50, 0.5f, 5, V);
  for (int trial = 0; trial < 50; trial++) {
    th_fill_normal(&r, lg, V, 3.0f);
    const int a = argmax(lg, V);
    int32_t x = -1, y = -1, z = -1;
    ot_sampler_sample(k1, lg, &x);
    ot_sampler_sample(p0, lg, &y);
    ot_sampler_sample(t0, lg, &z);
    ok1 &= x == a; ok2 &= y == a; ok3 &= z == a;
  }
  th_check(ok1, "top_k = 1 is greedy");
  th_check(ok2, "top_p = 1e-6 is greedy");
  th_check(ok3, "temperature 0 is greedy");
  for (int i = 0; i < V; i++) lg[i] = 0.25f;
  int32_t tie = -1;
  ot_sampler_sample(t0, lg, &tie);
  th_check(tie == 0, "greedy breaks ties to the lowest id (%d)", tie);
  ot_sampler *pf = samp(1.0f, 0, 0.1f, 5, 4);
  bool flat = true;
  for (int i = 0; i < 20; i++) { int32_t t = -1; ot_sampler_sample(pf, lg, &t); flat &= t == 0; }
  th_check(flat, "flat logits, top_p 0.1: the nucleus is the lowest id");
  ot_sampler_free(pf);
  ot_sampler_free(k1); ot_sampler_free(p0); ot_sampler_free(t0);

  // distributions on 6 tokens (fixed seed)
  const float l6[6] = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f};
  const int N = 40000;
  double want[6];
  for (int ti = 0; ti < 2; ti++) {
    const float T = ti ? 2.0f : 0.7f;
    double z = 0;
    for (int i = 0; i < 6; i++) z += want[i] = exp(l6[i] / T);
    for (int i = 0; i < 6; i++) want[i] /= z;
    ot_sampler *s = samp(T, 0, 1.0f, 17 + ti, 6);
    char what[64];
    snprintf(what, sizeof what, "temperature %.1f", T);
    check_freq(s, l6, want, 6, N, what);
    ot_sampler_free(s);
  }
  {  // top-k 3 at T = 1: ids 2, 5, 0 renormalized
    double z = exp(2.0) + exp(1.5) + exp(1.0);
    double w[6] = {exp(1.0) / z, 0, exp(2.0) / z, 0, 0, exp(1.5) / z};
    ot_sampler *s = samp(1.0f, 3, 1.0f, 23, 6);
    check_freq(s, l6, w, 6, N, "top_k 3");
    ot_sampler_free(s);
  }
  {  // top-p 0.7 at T = 1: sorted probabilities .389 .236 .143 ...: the nucleus is {2, 5, 0}
    double z = 0, p[6];
    for (int i = 0; i < 6; i++) z += p[i] = exp(l6[i]);
    for (int i = 0; i < 6; i++) p[i] /= z;
    th_check(p[2] + p[5] < 0.7 && p[2] + p[5] + p[0] >= 0.7, "top-p test premise");
    double k = p[2] + p[5] + p[0];
    double w[6] = {p[0] / k, 0, p[2] / k, 0, 0, p[5] / k};
    ot_sampler *s = samp(1.0f, 0, 0.7f, 29, 6);
    check_freq(s, l6, w, 6, N, "top_p 0.7");
    ot_sampler_free(s);
    // top-k 4 then top-p 0.7 of the renormalized four (.455 .276 .167 .102): {2, 5}
    const double k2 = p[2] + p[5];
    double w2[6] = {0, 0, p[2] / k2, 0, 0, p[5] / k2};
    ot_sampler *s2 = samp(1.0f, 4, 0.7f, 31, 6);
    check_freq(s2, l6, w2, 6, N, "top_k 4 + top_p 0.7");
    ot_sampler_free(s2);
  }
  {  // top-k 4 of a large vocabulary with ties at the cut, -inf and NaN: the four
     // first by (logit desc, id asc) are 900, 10 and the lowest finite ids 2, 3
    for (int i = 0; i < V; i++) lg[i] = 0.0f;
    lg[0] = -INFINITY;
    lg[1] = NAN;
    lg[900] = 2.0f;
    lg[10] = 1.5f;
    double *w = calloc(V, sizeof(double));
    const double z = exp(2.0) + exp(1.5) + 2.0;
    w[900] = exp(2.0) / z; w[10] = exp(1.5) / z; w[2] = w[3] = 1.0 / z;
    ot_sampler *s = samp(1.0f, 4, 1.0f, 41, V);
    check_freq(s, lg, w, V, N / 4, "top_k 4, ties at the cut, -inf and NaN");
    ot_sampler_free(s);
    free(w);
  }
  // nucleus membership on a large vocabulary (the pre-sort filter path)
  {
    th_fill_normal(&r, lg, V, 2.0f);
    int32_t *ord = th_alloc(sizeof(int32_t) * V);
    for (int i = 0; i < V; i++) ord[i] = i;
    for (int i = 1; i < V; i++)   // insertion sort by (logit desc, id asc)
      for (int j = i; j > 0 && (lg[ord[j]] > lg[ord[j - 1]]); j--) { int32_t t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t; }
    double z = 0, acc = 0;
    for (int i = 0; i < V; i++) z += exp(lg[i]);
    char *in = calloc(V, 1);
    int nn = 0;
    for (int i = 0; i < V && acc < 0.5 * z; i++) { acc += exp(lg[ord[i]]); in[ord[i]] = 1; nn++; }
    ot_sampler *s = samp(1.0f, 0, 0.5f, 37, V);
    bool inside = true;
    char *hit = calloc(V, 1);
    int distinct = 0;
    for (int i = 0; i < 4000; i++) {
      int32_t t = -1;
      ot_sampler_sample(s, lg, &t);
      inside &= t >= 0 && t < V && in[t];
      if (t >= 0 && t < V && !hit[t]) { hit[t] = 1; distinct++; }
    }
    th_check(inside && distinct >= nn / 2, "top_p 0.5 over %d tokens: draws stay in the %d-token "
             "nucleus (%d distinct seen)", V, nn, distinct);
    ot_sampler_free(s);
    free(in); free(hit); free(ord);
  }
  // NaN and -inf are never drawn; none finite is an error
  {
    float l4[4] = {NAN, 1.0f, -INFINITY, 1.0f};
    ot_sampler *s = samp(1.0f, 0, 1.0f, 41, 4);
    bool ok = true;
    for (int i = 0; i < 2000; i++) { int32_t t = -1; ot_sampler_sample(s, l4, &t); ok &= t == 1 || t == 3; }
    th_check(ok, "NaN / -inf logits are never drawn");
    float bad[4] = {NAN, -INFINITY, NAN, -INFINITY};
    int32_t t;
    th_check_error(ot_sampler_sample(s, bad, &t), OT_EINVAL, "finite", "no finite logit");
    ot_sampler_free(s);
  }
  // determinism: same seed = same draws; reseed repeats them; another seed differs
  {
    th_fill_normal(&r, lg, V, 1.0f);
    ot_sampler *a = samp(0.9f, 50, 0.95f, 77, V), *b = samp(0.9f, 50, 0.95f, 77, V);
    int32_t x[300], y[300], z[300];
    for (int i = 0; i < 300; i++) { ot_sampler_sample(a, lg, &x[i]); ot_sampler_sample(b, lg, &y[i]); }
    ot_sampler_reseed(a, 77);
    for (int i = 0; i < 300; i++) ot_sampler_sample(a, lg, &z[i]);
    th_check(!memcmp(x, y, sizeof x) && !memcmp(x, z, sizeof x), "same seed: identical draws");
    ot_sampler_reseed(b, 78);
    for (int i = 0; i < 300; i++) ot_sampler_sample(b, lg, &y[i]);
    th_check(memcmp(x, y, sizeof x) != 0, "another seed: other draws");
    ot_sampler_free(a); ot_sampler_free(b);
  }
  // bad configurations
  ot_sampler *s = NULL;
  ot_sampler_config c = {-1.0f, 0, 1.0f, 0};
  th_check_error(ot_sampler_create(&s, &c, 10), OT_EINVAL, "temperature", "negative temperature");
  c.temperature = NAN;
  th_check_error(ot_sampler_create(&s, &c, 10), OT_EINVAL, "temperature", "NaN temperature");
  c.temperature = 1.0f; c.top_k = -1;
  th_check_error(ot_sampler_create(&s, &c, 10), OT_EINVAL, "top_k", "negative top_k");
  c.top_k = 0; c.top_p = 0.0f;
  th_check_error(ot_sampler_create(&s, &c, 10), OT_EINVAL, "top_p", "top_p 0");
  c.top_p = 1.5f;
  th_check_error(ot_sampler_create(&s, &c, 10), OT_EINVAL, "top_p", "top_p 1.5");
  c.top_p = 1.0f;
  th_check_error(ot_sampler_create(&s, &c, 0), OT_EINVAL, "V", "vocabulary 0");
  free(lg);
}

// ------------------------------------------------------------ errors --------
static void test_errors(void) {
  ot_model_config c = cfg_llama(16);
  ot_model *m = make(&c, 1, 1, OT_F32, 1);
  if (!m) return;
  ot_kvcache *kv = NULL;
  ot_kv_config k = {1, 17, 0, false};
  th_check_error(ot_kv_create(&kv, m, &k), OT_EINVAL, "max_seq", "cache longer than the model");
  k.max_seq = 8; k.chunk = 9;
  th_check_error(ot_kv_create(&kv, m, &k), OT_EINVAL, "chunk", "chunk > max_seq");
  k.chunk = 0; k.B = 0;
  th_check_error(ot_kv_create(&kv, m, &k), OT_EINVAL, "B=", "B = 0");
  // memory: K + V of every layer in the KV-cache category, returned on free
  const size_t before = ot_mem_current(OT_MEM_KVCACHE);
  k.B = 2; k.max_seq = 8; k.chunk = 4;
  if (!th_check(ot_kv_create(&kv, m, &k) == OT_OK, "kv create: %s", ot_last_error())) goto out;
  const size_t want = 2 * (size_t)c.n_layers * 2 * c.n_kv_heads * 8 * (c.d_model / c.n_heads) * 4;
  const size_t got = ot_mem_current(OT_MEM_KVCACHE) - before;
  th_check(got >= want && got <= want + 1024 && ot_kv_cache_bytes(kv) == got && ot_kv_capacity(kv) == 8 &&
           ot_kv_config_of(kv)->chunk == 4, "cache bytes %zu (K/V %zu) tracked as kvcache", got, want);
  int32_t tok[16] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8};
  th_check_error(ot_kv_forward(kv, tok, 2, true, NULL, NULL), OT_EINVAL, "all_logits", "all without all_logits");
  tok[3] = 50;
  th_check_error(ot_kv_forward(kv, tok, 4, false, NULL, NULL), OT_EINVAL, "token 50", "token >= vocab");
  tok[3] = 4;
  th_check(ot_kv_forward(kv, tok, 6, false, NULL, NULL) == OT_OK && ot_kv_len(kv) == 6, "6 tokens in");
  th_check_error(ot_kv_forward(kv, tok, 3, false, NULL, NULL), OT_EINVAL, "capacity", "6 + 3 > 8");
  ot_kv_reset(kv);
  th_check(ot_kv_len(kv) == 0 && ot_kv_forward(kv, tok, 8, false, NULL, NULL) == OT_OK, "reset, then 8 fit");
  ot_sampler *s = samp(0.0f, 0, 1.0f, 1, 50);
  ot_gen_config g = {2, -1};
  th_check_error(ot_generate(kv, s, tok, 2, &g, NULL, NULL, NULL, NULL), OT_EINVAL, "B=2", "generate with B=2");
  ot_sampler_free(s);
  ot_kv_free(kv);
  th_check(ot_mem_current(OT_MEM_KVCACHE) == before, "cache memory returned");
out:
  ot_model_free(m);
}

int main(void) {
  double t0 = ot_now();
  ot_model_config g16 = cfg_gpt2(16), l16 = cfg_llama(16), g300 = cfg_gpt2(300), l300 = cfg_llama(300);
  test_equiv(&g16, 2, 5, 3, OT_F32);
  test_equiv(&l16, 2, 5, 3, OT_F32);
  test_equiv(&g300, 1, 100, 20, OT_F32);
  test_equiv(&l300, 1, 100, 20, OT_F32);
  test_equiv(&g16, 2, 5, 3, OT_BF16);
  test_equiv(&l16, 2, 5, 3, OT_BF16);
  test_greedy(&g16);
  test_greedy(&l16);
  test_sampler();
  test_errors();
  printf("test_generate: %.1f s\n", ot_now() - t0);
  return th_finish();
}
