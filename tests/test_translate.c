// Translation (ot_translator): the incremental decoder against the whole-
// sequence forward, beam / greedy results against Hugging Face generate() on
// the tiny Marian model, quantized and bf16 translators against f32, a batch
// against each sentence alone, and bad input.
//  (a) every step's logits = ot_model_forward_s2s's for the same prefix (f32
//      nerr 1e-5; bf16 vs the bf16 forward 1e-2), Marian golden (post-norm, sources 9 / 5 / 1
//      tokens) and a random pre-norm model (learned positions, embedding
//      norms, GQA, untied head);
//  (b) hf_marian beam.json: the five runs' sequences and lengths equal, scores
//      within 1e-5;
//  (c) bf16 / int8 weights vs f32 on 16 random sources: first-step logits
//      within nerr 2e-2 / 5e-2 (the tiny random models are far noisier than
//      trained ones), the same beam-4 tokens on >= 9 / 16 sentences; f32
//      weights through the quantized path within 1e-6, all tokens equal;
//  (d) 16 sentences in one batch = each alone (tokens, lengths; scores 1e-5);
//  (e) bad input: messages checked.
#include "harness.h"
#include "infer/translate_impl.h"
#include "ot/io.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *k_dir = "tests/golden/hf_marian";

static const ot_st_tensor *need(const ot_st_file *f, const char *name) {
  const ot_st_tensor *t = ot_st_find(f, name);
  th_check(t != NULL, "golden tensor %s present", name);
  return t;
}

static ot_model *load(ot_dtype dt) {
  ot_run_config r = {3, 7, dt, OT_RECOMPUTE_NONE, -100, 9};
  ot_model *m = NULL;
  if (!th_check(ot_model_load_hf(&m, k_dir, &r) == OT_OK, "load %s: %s", k_dir, ot_last_error()))
    return NULL;
  return m;
}

static ot_beam_config marian_beam(int beams, float lp, ot_early_stop es, int max_length) {
  static const int32_t bad_len[1] = {1}, bad_ids[1] = {60};
  ot_beam_config c = ot_beam_config_default();
  c.vocab = 61;
  c.num_beams = beams;
  c.length_penalty = lp;
  c.early_stopping = es;
  c.max_length = max_length;
  c.eos_id = 0;
  c.pad_id = 60;
  c.decoder_start_id = 60;
  c.n_bad_words = 1;
  c.bad_words_len = bad_len;
  c.bad_words_ids = bad_ids;
  c.forced_eos_id = 0;
  return c;
}

// ------------------------------------------------------ (a) equivalence ---
// Teacher-forced steps over tgt [B, T] vs the forward's logits (f32 model `ref`).
static void steps_vs_forward(ot_model *ref, ot_translator *tr, const int32_t *src, int S,
                             const int32_t *len, const int32_t *tgt, int B, int T, double tol,
                             const char *what) {
  ot_s2s_batch bt = {B, S, T, src, len, tgt, NULL};
  if (!th_check(ot_model_forward_s2s(ref, &bt, 0.0f, false, NULL) == OT_OK, "%s forward: %s",
                what, ot_last_error()))
    return;
  int ld = 0;
  const void *L = ot_model_logits(ref, &ld);
  const int V = ot_model_config_of(ref)->vocab;
  float *want = th_falloc((size_t)B * V), *got = th_falloc((size_t)B * V);
  int32_t *tok = calloc((size_t)B, 4), *par = calloc((size_t)B, 4), *sen = calloc((size_t)B, 4);
  th_check(ot__tr_encode(tr, B, src, S, len) == OT_OK, "%s encode: %s", what, ot_last_error());
  double worst = 0.0;
  for (int s = 0; s < T; s++) {
    for (int b = 0; b < B; b++) {
      tok[b] = tgt[b * T + s];
      par[b] = s ? b : -1;
      sen[b] = b;
      const ot_dtype dt = ot_model_run_of(ref)->dt;
      th_from_dt(dt, (const char *)L + ((size_t)b * T + s) * ld * ot_dtype_size(dt),
                 want + (size_t)b * V, (size_t)V);
    }
    if (!th_check(ot__tr_step(tr, s, B, tok, par, sen, got, V) == OT_OK, "%s step %d: %s", what,
                  s, ot_last_error()))
      break;
    const double e = th_nerr(got, want, (size_t)B * V);
    worst = e > worst ? e : worst;
  }
  th_check(worst <= tol, "%s: incremental logits vs forward, worst step nerr %.3g <= %.1g", what,
           worst, tol);
  free(want); free(got); free(tok); free(par); free(sen);
}

static void equivalence(void) {
  ot_st_file *f = NULL;
  char path[256];
  snprintf(path, sizeof path, "%s/logits.safetensors", k_dir);
  if (!th_check(ot_st_open(&f, path) == OT_OK, "open %s", path)) return;
  const ot_st_tensor *ids = need(f, "src_ids"), *mask = need(f, "src_mask"),
                     *dec = need(f, "decoder_input_ids");
  ot_model *m = load(OT_F32), *mb = load(OT_BF16);
  if (ids && mask && dec && m && mb) {
    const int B = 3, S = 9, T = 7;
    int32_t len[3] = {0, 0, 0};
    for (int b = 0; b < B; b++)
      for (int t = 0; t < S; t++) len[b] += ((const int32_t *)mask->data)[b * S + t];
    ot_translator_config tc = {3, 1, 0, 0};
    ot_translator *t = NULL, *tb = NULL;
    if (th_check(ot_translator_create(&t, m, &tc) == OT_OK, "create: %s", ot_last_error()))
      steps_vs_forward(m, t, ids->data, S, len, dec->data, B, T, 1e-5, "marian f32");
    if (th_check(ot_translator_create(&tb, mb, &tc) == OT_OK, "create bf16: %s", ot_last_error()))
      steps_vs_forward(mb, tb, ids->data, S, len, dec->data, B, T, 1e-2, "marian bf16");
    ot_translator_free(t);
    ot_translator_free(tb);
  }
  ot_model_free(m);
  ot_model_free(mb);
  ot_st_close(f);
  // a random pre-norm model (mBART-like parts)
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-tiny");
  c.norm_place = OT_PLACE_PRE;
  c.pos = OT_POS_LEARNED;
  c.pos_offset = 2;
  c.embed_norm = true;
  c.mlp = OT_MLP_GELU_ERF;
  c.n_kv_heads = 2;
  c.tied = false;
  ot_run_config r = {2, 6, OT_F32, OT_RECOMPUTE_NONE, -100, 5};
  ot_model *p = NULL;
  if (!th_check(ot_model_create(&p, &c, &r) == OT_OK && ot_model_init(p, 7) == OT_OK,
                "pre-norm model: %s", ot_last_error()))
    return;
  const int32_t src[2 * 5] = {3, 7, 11, 2, 0, 5, 9, 0, 1, 1};
  const int32_t sl[2] = {5, 3};
  int32_t tgt[2 * 6];
  for (int i = 0; i < 12; i++) tgt[i] = (i % 6) ? (i * 7) % c.vocab : c.decoder_start_id;
  ot_translator_config tc = {2, 1, 5, 6};
  ot_translator *t = NULL;
  if (th_check(ot_translator_create(&t, p, &tc) == OT_OK, "create pre-norm: %s", ot_last_error()))
    steps_vs_forward(p, t, src, 5, sl, tgt, 2, 6, 1e-5, "pre-norm f32");
  ot_translator_free(t);
  ot_model_free(p);
}

// ------------------------------------------------------ (b) HF generate ---
static void hf_generate(void) {
  ot_st_file *f = NULL;
  char path[256];
  snprintf(path, sizeof path, "%s/beam.safetensors", k_dir);
  if (!th_check(ot_st_open(&f, path) == OT_OK, "open %s", path)) return;
  const ot_st_tensor *ids = need(f, "src_ids"), *mask = need(f, "src_mask");
  ot_model *m = load(OT_F32);
  ot_translator *t = NULL;
  ot_translator_config tc = {3, 4, 0, 12};
  if (ids && mask && m &&
      th_check(ot_translator_create(&t, m, &tc) == OT_OK, "create: %s", ot_last_error())) {
    const int B = (int)ids->shape[0], S = (int)ids->shape[1];
    int32_t len[3] = {0, 0, 0};
    for (int b = 0; b < B; b++)
      for (int i = 0; i < S; i++) len[b] += ((const int32_t *)mask->data)[b * S + i];
    struct { const char *name; int beams; float lp; ot_early_stop es; } runs[5] = {
        {"greedy", 1, 1.0f, OT_EARLY_STOP_FALSE},
        {"beam4_lp10_esT", 4, 1.0f, OT_EARLY_STOP_TRUE},
        {"beam4_lp10_esF", 4, 1.0f, OT_EARLY_STOP_FALSE},
        {"beam4_lp06_esT", 4, 0.6f, OT_EARLY_STOP_TRUE},
        {"beam4_lp06_esF", 4, 0.6f, OT_EARLY_STOP_FALSE}};
    for (int k = 0; k < 5; k++) {
      char n[96];
      snprintf(n, sizeof n, "%s.sequences", runs[k].name);
      const ot_st_tensor *seq = need(f, n);
      snprintf(n, sizeof n, "%s.lengths", runs[k].name);
      const ot_st_tensor *lens = need(f, n);
      snprintf(n, sizeof n, "%s.scores", runs[k].name);
      const ot_st_tensor *sc = runs[k].beams > 1 ? need(f, n) : NULL;
      if (!seq || !lens || (runs[k].beams > 1 && !sc)) continue;
      ot_beam_config bc = marian_beam(runs[k].beams, runs[k].lp, runs[k].es, 12);
      int32_t out[3 * 11];
      int olen[3];
      float oscore[3];
      ot_translate_stats st;
      if (!th_check(ot_translate_ids(t, B, ids->data, S, len, &bc, out, 11, olen, oscore, &st) ==
                        OT_OK, "%s: %s", runs[k].name, ot_last_error()))
        continue;
      const int Lr = (int)seq->shape[1];
      for (int b = 0; b < B; b++) {
        const int32_t *want = (const int32_t *)seq->data + (size_t)b * Lr;
        const int wl = ((const int32_t *)lens->data)[b];
        bool same = olen[b] + 1 == wl && want[0] == 60;
        for (int i = 0; same && i < olen[b]; i++) same = out[b * 11 + i] == want[i + 1];
        th_check(same, "%s sentence %d: tokens and length (%d) equal HF's (%d)", runs[k].name, b,
                 olen[b] + 1, wl);
        if (sc)
          th_check(fabsf(oscore[b] - ((const float *)sc->data)[b]) <= 1e-5f,
                   "%s sentence %d: score %.7g vs HF %.7g", runs[k].name, b, oscore[b],
                   ((const float *)sc->data)[b]);
      }
      th_check(st.sentences == B && st.steps >= 1 && st.rows >= st.steps, "%s: stats", runs[k].name);
    }
  }
  ot_translator_free(t);
  ot_model_free(m);
  ot_st_close(f);
}

// --------------------------------------------------------- sentences ---
enum { NS_ = 16, SL_ = 12 };
static void random_sources(int32_t *src, int32_t *len) {
  th_rng g = {1234};
  for (int b = 0; b < NS_; b++) {
    len[b] = 1 + (int)(th_next(&g) % SL_);
    for (int i = 0; i < SL_; i++) src[b * SL_ + i] = 1 + (int32_t)(th_next(&g) % 59);
    src[b * SL_ + len[b] - 1] = 0;   // eos
  }
}


// --------------------------------------------- (c) quantized weights ---
// *q written by ot_quant_file_save and read back by ot_quant_file_load: the same config
// (every field the file stores) and the same bytes of every tensor; *q is replaced by the
// loaded model. False (and *q kept) on failure.
static bool file_roundtrip(ot_qmodel **q, const char *what) {
  char path[] = "/tmp/ot_test_translate_q_XXXXXX";
  const int fd = mkstemp(path);
  if (!th_check(fd >= 0, "%s: mkstemp", what)) return false;
  close(fd);
  ot_qmodel *l = NULL;
  const bool ok = th_check(ot_quant_file_save(*q, path) == OT_OK && ot_quant_file_load(&l, path) == OT_OK,
                           "%s: save / load: %s", what, ot_last_error());
  remove(path);
  if (!ok) return false;
  const ot_model_config *a = &(*q)->config, *b = &l->config;
  bool same = !strcmp(a->name, b->name) && l->kind == (*q)->kind && l->group == (*q)->group && l->n == (*q)->n;
#define SAME(f) same = same && a->f == b->f
  SAME(names); SAME(vocab); SAME(vocab_pad); SAME(d_model); SAME(n_layers); SAME(n_heads);
  SAME(n_kv_heads); SAME(d_ff); SAME(max_seq); SAME(norm); SAME(mlp); SAME(pos); SAME(rope_base);
  SAME(rope_style); SAME(tied); SAME(bias); SAME(eps); SAME(arch); SAME(n_enc_layers);
  SAME(norm_place); SAME(embed_scale); SAME(logits_bias); SAME(pad_id); SAME(eos_id);
  SAME(decoder_start_id); SAME(src_vocab); SAME(pos_offset); SAME(embed_norm);
#undef SAME
  th_check(same, "%s: the loaded config equals the saved one", what);
  int bytes_same = 0;
  for (int i = 0; same && i < l->n; i++) {
    const ot_qweight *x = &(*q)->t[i].w, *y = &l->t[i].w;
    const size_t n = (size_t)x->rows * x->cols * (x->kind == OT_QW_F32 ? 4 : x->kind == OT_QW_BF16 ? 2 : 1);
    bytes_same += !strcmp((*q)->t[i].name, l->t[i].name) && x->kind == y->kind && x->rows == y->rows &&
                  x->cols == y->cols && x->group == y->group && !memcmp(x->data, y->data, n) &&
                  ot_qweight_bytes(x) == ot_qweight_bytes(y) &&
                  (x->kind != OT_QW_INT8 || !memcmp(x->scales, y->scales, ot_qweight_bytes(x) - n));
  }
  th_check(bytes_same == l->n, "%s: %d / %d tensors read back bit for bit", what, bytes_same, l->n);
  ot_qmodel_free(*q);
  *q = l;
  return true;
}

// First-step logits of every sentence and the tokens of a beam-4 search: a
// translator over q against the f32 one.
static void quant_vs_f32(ot_model *m, ot_qw_kind kind, int group, double tol, int min_same,
                         const char *what) {
  ot_qmodel *q = NULL;
  if (!th_check(ot_qmodel_from_model(&q, m, kind, group) == OT_OK, "%s quantize: %s", what,
                ot_last_error()))
    return;
  file_roundtrip(&q, what);   // translate from what a file of `ot quantize` gives back
  ot_translator *tf = NULL, *tq = NULL;
  const int lim = ot_model_config_of(m)->max_seq < 20 ? ot_model_config_of(m)->max_seq : 20;
  ot_translator_config tc = {NS_, 4, SL_, lim};
  if (th_check(ot_translator_create(&tf, m, &tc) == OT_OK &&
                   ot_translator_create_q(&tq, q, &tc) == OT_OK,
               "%s create: %s", what, ot_last_error())) {
    const ot_model_config *mc = ot_model_config_of(m);
    const int V = mc->vocab;
    int32_t src[NS_ * SL_], len[NS_], tok[NS_], par[NS_], sen[NS_];
    random_sources(src, len);
    for (int i = 0; i < NS_ * SL_; i++) src[i] %= V;
    for (int b = 0; b < NS_; b++) {
      tok[b] = mc->decoder_start_id;
      par[b] = -1;
      sen[b] = b;
    }
    float *lf = th_falloc((size_t)NS_ * V), *lq = th_falloc((size_t)NS_ * V);
    th_check(ot__tr_encode(tf, NS_, src, SL_, len) == OT_OK &&
                 ot__tr_step(tf, 0, NS_, tok, par, sen, lf, V) == OT_OK &&
                 ot__tr_encode(tq, NS_, src, SL_, len) == OT_OK &&
                 ot__tr_step(tq, 0, NS_, tok, par, sen, lq, V) == OT_OK,
             "%s first steps: %s", what, ot_last_error());
    const double e = th_nerr(lq, lf, (size_t)NS_ * V);
    th_check(e <= tol, "%s: first-step logits vs f32 nerr %.3g <= %.1g", what, e, tol);
    ot_beam_config bc = marian_beam(4, 1.0f, OT_EARLY_STOP_FALSE, lim);
    bc.vocab = V;
    bc.eos_id = mc->eos_id;
    bc.pad_id = mc->pad_id;
    bc.decoder_start_id = mc->decoder_start_id;
    bc.n_bad_words = 0;
    bc.forced_eos_id = mc->eos_id;
    int32_t of[NS_ * 19], oq[NS_ * 19];
    int nf[NS_], nq[NS_];
    if (th_check(ot_translate_ids(tf, NS_, src, SL_, len, &bc, of, 19, nf, NULL, NULL) == OT_OK &&
                     ot_translate_ids(tq, NS_, src, SL_, len, &bc, oq, 19, nq, NULL, NULL) == OT_OK,
                 "%s translate: %s", what, ot_last_error())) {
      int same = 0;
      for (int b = 0; b < NS_; b++)
        same += nf[b] == nq[b] && !memcmp(of + b * 19, oq + b * 19, sizeof(int32_t) * nf[b]);
      th_check(same >= min_same, "%s: the same tokens as f32 on %d / %d sentences (>= %d)", what,
               same, NS_, min_same);
    }
    free(lf);
    free(lq);
  }
  ot_translator_free(tf);
  ot_translator_free(tq);
  ot_qmodel_free(q);
}

static void quantized(void) {
  ot_model *m = load(OT_F32);
  if (m) {
    quant_vs_f32(m, OT_QW_BF16, 0, 2e-2, 9, "marian bf16 weights");
    quant_vs_f32(m, OT_QW_INT8, 0, 5e-2, 9, "marian int8 per channel");
    quant_vs_f32(m, OT_QW_F32, 0, 1e-6, 16, "marian f32 through the quantized path");
  }
  ot_model_free(m);
  ot_model_config c;   // pre-norm, learned positions, embedding norms, GQA, untied, groups
  ot_model_config_preset(&c, "transformer-tiny");
  c.norm_place = OT_PLACE_PRE;
  c.pos = OT_POS_LEARNED;
  c.pos_offset = 2;
  c.embed_norm = true;
  c.n_kv_heads = 2;
  c.tied = false;
  ot_run_config r = {1, 8, OT_F32, OT_RECOMPUTE_NONE, -100, 8};
  ot_model *p = NULL;
  if (th_check(ot_model_create(&p, &c, &r) == OT_OK && ot_model_init(p, 11) == OT_OK,
               "pre-norm model: %s", ot_last_error()))
    quant_vs_f32(p, OT_QW_INT8, 32, 5e-2, 9, "pre-norm int8 group 32");
  ot_model_free(p);
  // a quantized decoder-only model is refused
  ot_model_config g;
  ot_model_config_preset(&g, "tiny");
  ot_run_config rd = {1, 8, OT_F32, OT_RECOMPUTE_NONE, -1, 0};
  ot_model *d = NULL;
  ot_qmodel *q = NULL;
  ot_translator *t = NULL;
  ot_translator_config tc = {1, 1, 0, 0};
  if (th_check(ot_model_create(&d, &g, &rd) == OT_OK &&
                   ot_qmodel_from_model(&q, d, OT_QW_INT8, 0) == OT_OK,
               "decoder-only quantize: %s", ot_last_error()))
    th_check_error(ot_translator_create_q(&t, q, &tc), OT_EINVAL, "decoder-only model",
                   "quantized decoder-only refused");
  ot_qmodel_free(q);
  ot_model_free(d);
}

// ------------------------------------------------- (d) batch vs alone ---
static void batch_vs_alone(void) {
  ot_model *m = load(OT_F32);
  if (!m) return;
  ot_translator *t = NULL;
  ot_translator_config tc = {NS_, 4, SL_, 20};
  if (!th_check(ot_translator_create(&t, m, &tc) == OT_OK, "create: %s", ot_last_error())) {
    ot_model_free(m);
    return;
  }
  int32_t src[NS_ * SL_], len[NS_];
  random_sources(src, len);
  for (int beams = 1; beams <= 4; beams += 3) {
    ot_beam_config bc = marian_beam(beams, 1.0f, OT_EARLY_STOP_FALSE, 0);
    bc.max_len_a = 1.2f;
    bc.max_len_b = 5.0f;
    int32_t out[NS_ * 20], one[20];
    int olen[NS_], l1;
    float sc[NS_], s1;
    if (!th_check(ot_translate_ids(t, NS_, src, SL_, len, &bc, out, 20, olen, sc, NULL) == OT_OK,
                  "batch of 16, beams %d: %s", beams, ot_last_error()))
      continue;
    int nsame = 0;
    for (int b = 0; b < NS_; b++) {
      if (ot_translate_ids(t, 1, src + b * SL_, SL_, len + b, &bc, one, 20, &l1, &s1, NULL) != OT_OK)
        break;
      nsame += l1 == olen[b] && !memcmp(one, out + b * 20, sizeof(int32_t) * l1) &&
               fabsf(s1 - sc[b]) <= 1e-5f;
    }
    th_check(nsame == NS_, "beams %d: batch of 16 = each alone on %d / 16 sentences", beams, nsame);
  }
  ot_translator_free(t);
  ot_model_free(m);
}

// --------------------------------------------------- (e) bad input -------
static void bad_input(void) {
  ot_model *m = load(OT_F32);
  if (!m) return;
  ot_translator *t = NULL;
  ot_translator_config tc = {2, 4, 8, 12};
  th_check_error(ot_translator_create(&t, m, &(ot_translator_config){0, 4, 8, 12}), OT_EINVAL,
                 "max_batch=0", "max_batch 0");
  th_check_error(ot_translator_create(&t, m, &(ot_translator_config){2, 4, 99, 12}), OT_EINVAL,
                 "max_src=99", "max_src over max_seq");
  if (!th_check(ot_translator_create(&t, m, &tc) == OT_OK, "create: %s", ot_last_error())) {
    ot_model_free(m);
    return;
  }
  ot_beam_config bc = marian_beam(4, 1.0f, OT_EARLY_STOP_FALSE, 12);
  int32_t src[3 * 10] = {5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0};
  int32_t len[3] = {3, 2, 2}, out[3 * 11];
  int olen[3];
  len[0] = 0;
  th_check_error(ot_translate_ids(t, 2, src, 10, len, &bc, out, 11, olen, NULL, NULL), OT_EINVAL,
                 "source 0 is empty", "empty source");
  len[0] = 9;
  th_check_error(ot_translate_ids(t, 2, src, 10, len, &bc, out, 11, olen, NULL, NULL), OT_EINVAL,
                 "longer than max_src=8", "source over max_src");
  len[0] = 3;
  src[1] = 61;
  th_check_error(ot_translate_ids(t, 2, src, 10, len, &bc, out, 11, olen, NULL, NULL), OT_EINVAL,
                 "token 1 is 61", "token out of range");
  src[1] = 6;
  th_check_error(ot_translate_ids(t, 3, src, 10, len, &bc, out, 11, olen, NULL, NULL), OT_EINVAL,
                 "batch=3 outside [1, 2]", "batch over capacity");
  bc.num_beams = 5;
  th_check_error(ot_translate_ids(t, 2, src, 10, len, &bc, out, 11, olen, NULL, NULL), OT_EINVAL,
                 "num_beams=5", "beams over capacity");
  bc = marian_beam(4, 1.0f, OT_EARLY_STOP_FALSE, 20);
  th_check_error(ot_translate_ids(t, 2, src, 10, len, &bc, out, 19, olen, NULL, NULL), OT_EINVAL,
                 "exceeds max_tgt=12", "limit over max_tgt");
  bc = marian_beam(4, 1.0f, OT_EARLY_STOP_FALSE, 12);
  th_check(ot_translate_ids(t, 2, src, 10, len, &bc, out, 11, olen, NULL, NULL) == OT_OK,
           "good input after refusals: %s", ot_last_error());
  ot_translator_free(t);
  ot_model_free(m);
  // a decoder-only model
  ot_model_config g;
  ot_model_config_preset(&g, "tiny");
  ot_run_config rd = {1, 8, OT_F32, OT_RECOMPUTE_NONE, -1, 0};
  ot_model *d = NULL;
  if (th_check(ot_model_create(&d, &g, &rd) == OT_OK, "decoder-only create"))
    th_check_error(ot_translator_create(&t, d, &tc), OT_EINVAL, "decoder-only model",
                   "decoder-only refused");
  ot_model_free(d);
}

// ------------------------------------------------------------ memory ------
static void memory(void) {
  ot_model *m = load(OT_F32);
  if (!m) return;
  const size_t k0 = ot_mem_current(OT_MEM_KVCACHE), w0 = ot_mem_current(OT_MEM_WORKSPACE);
  ot_translator *t = NULL;
  ot_translator_config tc = {4, 4, 16, 24};
  if (th_check(ot_translator_create(&t, m, &tc) == OT_OK, "create: %s", ot_last_error())) {
    const int L = 2, Hkv = 3, D = 12;   // the tiny Marian's decoder
    const size_t want = (size_t)L * (2 * 4 * Hkv * 16 * D + 4 * 16 * Hkv * 24 * D) * 4;
    th_check(ot_translator_cache_bytes(t) >= want && ot_translator_cache_bytes(t) < want + 4096,
             "cache bytes %zu ~ %zu (cross + double self cache)", ot_translator_cache_bytes(t),
             want);
    th_check(ot_mem_current(OT_MEM_KVCACHE) - k0 == ot_translator_cache_bytes(t) &&
                 ot_mem_current(OT_MEM_WORKSPACE) - w0 == ot_translator_workspace_bytes(t),
             "memory categories report the translator's arenas");
  }
  ot_translator_free(t);
  th_check(ot_mem_current(OT_MEM_KVCACHE) == k0 && ot_mem_current(OT_MEM_WORKSPACE) == w0,
           "freed");
  ot_model_free(m);
}

int main(void) {
  equivalence();
  hf_generate();
  quantized();
  batch_vs_alone();
  bad_input();
  memory();
  return th_finish();
}
