// Equivalence probe: runs tiny, fixed-seed training, decoding and serving
// through the PUBLIC API only and prints what they produce as deterministic
// text, one record per line: "<case> <what> <values>". Floats are printed in
// hex (%a), buffers as 64-bit FNV-1a hashes of their bits, so two builds agree
// on a case exactly when their lines are identical. tools/equiv/equiv.sh
// compiles this file against two revisions and diffs the outputs case by case.
//
//   probe single --tmp DIR             one process: training (GPT-2 and Llama
//                                      families, f32/bf16, every recompute mode,
//                                      grad-accum, the data loader, resume), KV-cache
//                                      decoding, the sampler and the batched engine
//   mpirun -np N probe mpi --tmp DIR DPxTPxPP ...
//                                      the parallel matrix of each layout (world rank
//                                      0 prints; DIR must be the same path on every rank)
//   probe st CASE FILE ...             every tensor of safetensors files, hashed
//
// Headers: the umbrella ot/ot.h (core, ops, model, data, train, infer), plus
// ot/serve.h (engine, quantized models) and ot/dist.h (MPI world). Nothing else.
#include <ot/ot.h>
#include <ot/serve.h>
#include <ot/dist.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define T 16          // training tokens per row
#define MAXSEQ 64     // context of the single-process models
#define STEPS 4       // single-process training steps
#define MPI_STEPS 5
#define MPI_ROWS 8    // global batch rows of the parallel matrix (as tests/mpi/mpi_parallel.c)

static bool g_print = true;   // world rank 0
static int g_fail;

// ---------------------------------------------------------------- output ---
static void rec(const char *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rec(const char *c, const char *fmt, ...) {
  if (!g_print) return;
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", c);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  fflush(stdout);
}

// False (and an ERROR record, so the comparison cannot pass) when s failed.
static bool ok(ot_status s, const char *c, const char *what) {
  if (s == OT_OK) return true;
  g_fail = 1;
  fprintf(stderr, "probe: rank %d: %s: %s: %s\n", ot_dist_world_rank(), c, what, ot_last_error());
  rec(c, "ERROR %s: %s", what, ot_last_error());
  return false;
}

// 64-bit FNV-1a over bytes, chained from h (start: H0).
#define H0 0xcbf29ce484222325ULL
static uint64_t hash(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}
static unsigned long long hx(const void *p, size_t n) { return hash(H0, p, n); }

// Appends " %d" of ids[0, n) to buf [cap].
static const char *ids_text(char *buf, size_t cap, const int32_t *ids, int n) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k + 16 < cap; i++) k += (size_t)snprintf(buf + k, cap - k, " %d", ids[i]);
  return buf;
}

// Every tensor of a safetensors file (data order): name, dtype, shape and the hash of its bytes.
static void st_hash(const char *c, const char *label, const char *path) {
  ot_st_file *f = NULL;
  if (!ok(ot_st_open(&f, path), c, label)) return;
  for (int i = 0; i < ot_st_count(f); i++) {
    const ot_st_tensor *x = ot_st_get(f, i);
    char shape[96] = "";
    for (int d = 0, k = 0; d < x->ndim; d++)
      k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", d ? "x" : "", (long long)x->shape[d]);
    rec(c, "%s %s %s [%s] %016llx", label, x->name, ot_st_dtype_name(x->dtype), shape, hx(x->data, x->nbytes));
  }
  ot_st_close(f);
}

// ---------------------------------------------------------------- inputs ---
static uint64_t mix(uint64_t *s) {   // splitmix64
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// n rows of T + 1 tokens in [0, V); every third row's last target is ignored (-1).
static void make_rows(int32_t *rows, int n, int V, uint64_t seed) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= T; j++) rows[i * (T + 1) + j] = (int32_t)(mix(&seed) % (uint64_t)V);
    if (i % 3 == 1) rows[i * (T + 1) + T] = -1;
  }
}

static void make_ids(int32_t *ids, int n, int V, uint64_t seed) {
  for (int i = 0; i < n; i++) ids[i] = (int32_t)(mix(&seed) % (uint64_t)V);
}

// 'g': GPT-2 family (the "tiny" preset: learned positions, LayerNorm, GELU, tied, biases);
// 'l': Llama family (RoPE, RMSNorm, SwiGLU, GQA 4 heads / 2 kv-heads, untied, no biases).
static ot_model_config family(char f, int vocab, int vocab_pad, int max_seq) {
  ot_model_config m;
  ot_model_config_preset(&m, "tiny");
  m.vocab = vocab;
  m.vocab_pad = vocab_pad;
  m.max_seq = max_seq;
  if (f == 'l') {
    m.names = OT_NAMES_LLAMA;
    m.norm = OT_NORM_RMSNORM;
    m.mlp = OT_MLP_SWIGLU;
    m.pos = OT_POS_ROPE;
    m.n_kv_heads = 2;
    m.d_ff = 64;
    m.tied = false;
    m.bias = false;
  }
  return m;
}

static ot_train_config train_cfg(const ot_model_config *m, int B, int ga, ot_dtype dt, ot_recompute rc,
                                 int64_t steps) {
  ot_train_config c;
  ot_train_config_default(&c);
  c.model = *m;
  c.data[0] = 0;
  c.out[0] = 0;
  c.batch_size = B;
  c.grad_accum = ga;
  c.seq_len = T;
  c.steps = steps;
  c.lr = 1e-2f;
  c.warmup = 1;
  c.dtype = dt;
  c.recompute = rc;
  c.quiet = true;
  c.measure_peak = false;
  return c;
}

// -------------------------------------------------------------- training ---
static void print_step(const char *c, const ot_step_info *s) {
  rec(c, "step %lld loss %a gnorm %a lr %a clip %a skipped %d tokens %lld", (long long)s->step, s->loss,
      s->grad_norm, (double)s->lr, (double)s->clip, (int)s->skipped, (long long)s->tokens);
}

// This process's parameters, bf16 copy and moments (not under ZeRO: a rank
// then holds a shard of them whose length the API does not give).
static void print_state(const char *c, ot_trainer *t, const char *who) {
  ot_model *m = ot_trainer_model(t);
  const size_t n = ot_model_n_floats(m);
  const uint16_t *b = ot_model_params_bf16(m);
  const bool whole = ot_trainer_config(t)->optimizer_shard == 0;
  const float *mo = whole ? ot_trainer_moment(t, 0) : NULL, *v = whole ? ot_trainer_moment(t, 1) : NULL;
  rec(c, "%sparams %zu floats %016llx bf16 %016llx m %016llx v %016llx updates %lld", who, n,
      hx(ot_model_params(m), n * 4), b ? hx(b, n * 2) : 0ULL, mo ? hx(mo, n * 4) : 0ULL,
      v ? hx(v, n * 4) : 0ULL, (long long)ot_trainer_updates(t));
}

// STEPS steps on synthetic rows of grad_accum micro-batches of 4 rows, the final
// state and a held-out loss over 6 rows.
static void train_case(const char *c, char fam, ot_dtype dt, ot_recompute rc, int ga) {
  ot_model_config mc = fam == 'g' ? family('g', 50, 64, MAXSEQ) : family('l', 61, 1, MAXSEQ);
  ot_train_config cfg = train_cfg(&mc, 4, ga, dt, rc, STEPS);
  ot_trainer *t = NULL;
  int32_t *rows = malloc(sizeof(int32_t) * (size_t)(4 * ga + 6) * (T + 1));
  if (!rows) { ok(ot_error(OT_ENOMEM, "rows"), c, "alloc"); return; }
  if (ok(ot_trainer_create(&t, &cfg), c, "create")) {
    for (int s = 0; s < STEPS; s++) {
      ot_step_info st;
      make_rows(rows, 4 * ga, mc.vocab, 1000 + (uint64_t)s);
      if (!ok(ot_trainer_step_on(t, rows, &st), c, "step")) break;
      print_step(c, &st);
    }
    print_state(c, t, "");
    double loss = 0;
    int64_t tok = 0;
    make_rows(rows, 6, mc.vocab, 99);
    if (ok(ot_trainer_eval_on(t, rows, 6, &loss, &tok), c, "eval_on"))
      rec(c, "eval %a tokens %lld", loss, (long long)tok);
  }
  ot_trainer_free(t);
  free(rows);
}

// Training from shards through the loader (shuffled), held-out evaluation, and
// a checkpoint resumed by a second trainer (weights, moments, data position).
static void loader_case(const char *c, const char *tmp, char fam, ot_dtype dt, ot_recompute rc) {
  ot_model_config mc = fam == 'g' ? family('g', 50, 64, MAXSEQ) : family('l', 61, 1, MAXSEQ);
  char dir[600], tr[700], va[700], ck[700];
  snprintf(dir, sizeof dir, "%.500s/%.90s", tmp, c);
  mkdir(dir, 0755);
  snprintf(tr, sizeof tr, "%s/train_000000.bin", dir);
  snprintf(va, sizeof va, "%s/val_000000.bin", dir);
  snprintf(ck, sizeof ck, "%s/ckpt", dir);
  int32_t ids[3000];
  make_ids(ids, 3000, mc.vocab, 555);
  if (!ok(ot_shard_write(tr, ids, 3000, 1), c, "shard") || !ok(ot_shard_write(va, ids + 2400, 600, 1), c, "shard"))
    return;
  ot_train_config cfg = train_cfg(&mc, 4, 2, dt, rc, 2 * STEPS);
  snprintf(cfg.train_data, sizeof cfg.train_data, "%s/train_*.bin", dir);
  snprintf(cfg.val_data, sizeof cfg.val_data, "%s/val_*.bin", dir);
  ot_trainer *a = NULL, *b = NULL;
  ot_step_info st;
  if (!ok(ot_trainer_create(&a, &cfg), c, "create")) return;
  for (int s = 0; s < STEPS && ok(ot_trainer_step(a, &st), c, "step"); s++) print_step(c, &st);
  double loss;
  int64_t tok;
  if (ok(ot_trainer_eval(a, 3, &loss, &tok), c, "eval")) rec(c, "eval %a tokens %lld", loss, (long long)tok);
  if (ok(ot_trainer_save(a, ck), c, "save") && ok(ot_trainer_create(&b, &cfg), c, "create") &&
      ok(ot_trainer_load(b, ck, false), c, "load")) {
    for (int s = 0; s < STEPS && ok(ot_trainer_step(b, &st), c, "resumed step"); s++) print_step(c, &st);
    print_state(c, b, "resumed ");
  }
  ot_trainer_free(a);
  ot_trainer_free(b);
}

// -------------------------------------------------------------- decoding ---
// A model for inference: the family at MAXSEQ with large random weights (so the
// greedy path is not one repeated token), run dtype dt, B = T = 1.
static ot_model *infer_model(char fam, ot_dtype dt, const char *c) {
  ot_model_config mc = fam == 'g' ? family('g', 50, 64, MAXSEQ) : family('l', 61, 1, MAXSEQ);
  mc.init_std = 0.25f;
  ot_run_config r = {1, 1, dt, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  if (!ok(ot_model_create(&m, &mc, &r), c, "model") || !ok(ot_model_init(m, 4242), c, "init")) {
    ot_model_free(m);
    return NULL;
  }
  return m;
}

// Greedy token of logits [V] (the sampler, temperature 0) and the hash of their bits.
static int32_t greedy(ot_sampler *s, const float *logits, int V, unsigned long long *h) {
  int32_t tok = -1;
  *h = hx(logits, sizeof(float) * (size_t)V);
  if (ot_sampler_sample(s, logits, &tok) != OT_OK) return -1;
  return tok;
}

// KV-cache decoding: a chunked prefill then greedy steps (B = 1), a B = 2 cache
// with every prefill row's logits, and ot_generate greedy / sampled / with a stop token.
static void decode_case(const char *c, char fam, ot_dtype dt) {
  ot_model *m = infer_model(fam, dt, c);
  if (!m) return;
  const int V = ot_model_config_of(m)->vocab;
  ot_kvcache *kv = NULL, *kv2 = NULL;
  ot_sampler *g = NULL, *smp = NULL;
  ot_sampler_config gc = {0.0f, 0, 1.0f, 1}, sc = {0.9f, 10, 0.9f, 5};
  ot_kv_config k1 = {1, 0, 4, false}, k2 = {2, 40, 8, true};
  int32_t prompt[12], out[32], tok;
  char buf[512];
  unsigned long long h;
  make_ids(prompt, 12, V, 7);
  if (!ok(ot_kv_create(&kv, m, &k1), c, "kv") || !ok(ot_kv_create(&kv2, m, &k2), c, "kv2") ||
      !ok(ot_sampler_create(&g, &gc, V), c, "sampler") || !ok(ot_sampler_create(&smp, &sc, V), c, "sampler"))
    goto out;
  const float *lg;
  int ld;
  // B = 1: 7 prompt tokens in chunks of 4, then 24 greedy steps
  if (!ok(ot_kv_forward(kv, prompt, 7, false, &lg, &ld), c, "prefill")) goto out;
  tok = greedy(g, lg, V, &h);
  rec(c, "b1 prefill token %d logits %016llx", tok, h);
  for (int i = 0; i < 24 && tok >= 0; i++) {
    if (!ok(ot_kv_forward(kv, &tok, 1, false, &lg, &ld), c, "decode")) goto out;
    tok = greedy(g, lg, V, &h);
    rec(c, "b1 pos %d token %d logits %016llx", ot_kv_len(kv), tok, h);
  }
  // B = 2: 6 tokens each with all logits, then 10 greedy steps for both
  if (!ok(ot_kv_forward(kv2, prompt, 6, true, &lg, &ld), c, "prefill b2")) goto out;
  int32_t two[2];
  for (int r = 0; r < 12; r++)
    rec(c, "b2 prefill row %d logits %016llx", r, hx(lg + (size_t)r * ld, sizeof(float) * V));
  for (int b = 0; b < 2; b++) two[b] = greedy(g, lg + (size_t)(b * 6 + 5) * ld, V, &h);
  for (int i = 0; i < 10 && two[0] >= 0 && two[1] >= 0; i++) {
    if (!ok(ot_kv_forward(kv2, two, 1, false, &lg, &ld), c, "decode b2")) goto out;
    unsigned long long h1;
    two[0] = greedy(g, lg, V, &h);
    two[1] = greedy(g, lg + ld, V, &h1);
    rec(c, "b2 pos %d tokens %d %d logits %016llx %016llx", ot_kv_len(kv2), two[0], two[1], h, h1);
  }
  // the generation loop
  ot_gen_config gen = {20, -1};
  ot_gen_stats st;
  int32_t stop = -1;
  for (int run = 0; run < 3; run++) {
    ot_kv_reset(kv);
    ot_sampler_reseed(smp, 5);
    if (run == 2) gen.stop_token = stop;   // the greedy run's 6th token stops it
    memset(out, -1, sizeof out);
    if (!ok(ot_generate(kv, run == 1 ? smp : g, prompt, 5, &gen, out, NULL, NULL, &st), c, "generate")) goto out;
    rec(c, "generate %s new %d steps %d stopped %d:%s", run == 1 ? "sampled" : run ? "stop" : "greedy",
        st.new_tokens, st.decode_steps, (int)st.stopped, ids_text(buf, sizeof buf, out, st.new_tokens));
    if (run == 0) stop = out[5];
  }
out:
  ot_sampler_free(g);
  ot_sampler_free(smp);
  ot_kv_free(kv);
  ot_kv_free(kv2);
  ot_model_free(m);
}

// ---------------------------------------------------------------- sampler ---
// The sampler on crafted logits: exact ties, a 1-ulp lead, NaN and -inf, then
// seeded draws with temperature / top-k / top-p over logits that hold ties.
static void sampler_case(const char *c) {
  enum { V = 61 };
  float lg[V];
  uint64_t seed = 31;
  for (int i = 0; i < V; i++) lg[i] = (float)(mix(&seed) % 1000) / 250.0f - 2.0f;
  static const ot_sampler_config cfgs[] = {
      {0.0f, 0, 1.0f, 1}, {0.7f, 0, 1.0f, 3}, {1.0f, 5, 1.0f, 4}, {1.3f, 0, 0.8f, 5},
      {0.9f, 12, 0.95f, 6}, {0.5f, 1, 1.0f, 7}, {2.0f, 0, 0.05f, 8}};
  char buf[512];
  for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
    ot_sampler *s = NULL;
    if (!ok(ot_sampler_create(&s, &cfgs[k], V), c, "create")) return;
    int32_t out[40];
    int n = 0;
    for (int t = 0; t < 8; t++) {   // crafted rows
      float x[V];
      memcpy(x, lg, sizeof x);
      if (t == 1) x[9] = x[40] = 5.0f;                                  // exact tie
      if (t == 2) { x[9] = 5.0f; x[40] = nextafterf(5.0f, 10.0f); }      // 1 ulp apart
      if (t == 3) { x[0] = NAN; x[20] = 5.0f; }
      if (t == 4) for (int i = 0; i < V; i++) x[i] = i % 7 ? -INFINITY : 1.0f;
      if (t == 5) for (int i = 0; i < V; i++) x[i] = 0.0f;              // all tied
      if (t == 6) { x[3] = x[4] = 4.0f; x[5] = nextafterf(4.0f, 0.0f); }
      if (t == 7) x[V - 1] = 3.999f;
      if (!ok(ot_sampler_sample(s, x, &out[n]), c, "sample")) break;
      n++;
    }
    for (int t = 0; t < 32 && n < 40; t++)   // draws from the plain row
      if (!ok(ot_sampler_sample(s, lg, &out[n++]), c, "sample")) break;
    rec(c, "config %zu:%s", k, ids_text(buf, sizeof buf, out, n));
    ot_sampler_free(s);
  }
}

// ---------------------------------------------------------------- engine ---
// Four requests (one sampled) through an engine of 2 slots and 4-token blocks:
// every event with the logits it was sampled from, each sequence's tokens, and
// a teacher-forced score. q: a quantized model to build from (taken over), else m.
static void engine_case(const char *c, const ot_model *m, ot_qmodel *q, ot_dtype w, int group, ot_dtype kv) {
  ot_engine_config ec = {w, group, kv, 0, 4, 2, 48, 0};
  ot_engine *e = NULL;
  if (!ok(q ? ot_engine_create_q(&e, q, &ec) : ot_engine_create(&e, m, &ec), c, "create")) return;
  const int V = ot_engine_model_config(e)->vocab;
  static const int plen[4] = {3, 9, 1, 13}, maxt[4] = {10, 6, 14, 8};
  int32_t prompts[4][16], toks[4][16], ntok[4] = {0}, who[64];
  char buf[256];
  for (int i = 0; i < 4; i++) make_ids(prompts[i], plen[i], V, 300 + (uint64_t)i);
  int next = 0, done = 0, steps = 0;
  while (done < 4 && steps < 100) {
    while (next < 4 && ot_engine_active(e) < 2) {
      ot_request r = {prompts[next], plen[next], {0.0f, 0, 1.0f, 1}, maxt[next], -1};
      if (next == 2) r.sampler = (ot_sampler_config){0.8f, 20, 0.95f, 11};
      int id;
      ot_engine_event ev;
      if (!ok(ot_engine_add(e, &r, &id, &ev), c, "add")) goto out;
      if (id < 0 || id >= 64) { ok(ot_error(OT_EINTERNAL, "sequence id %d out of [0, 64)", id), c, "add"); goto out; }
      const float *lg = ot_engine_logits(e, id, NULL);
      rec(c, "add %d id %d token %d done %d logits %016llx", next, id, ev.token, (int)ev.done,
          lg ? hx(lg, sizeof(float) * V) : 0ULL);
      who[id] = next;
      if (ev.token >= 0) toks[next][ntok[next]++] = ev.token;
      done += ev.done;
      next++;
    }
    const ot_engine_event *ev;
    int n;
    if (!ok(ot_engine_step(e, &ev, &n), c, "step")) goto out;
    steps++;
    for (int k = 0; k < n; k++) {
      const float *lg = ot_engine_logits(e, ev[k].id, NULL);
      rec(c, "step %d id %d token %d done %d logits %016llx", steps, ev[k].id, ev[k].token, (int)ev[k].done,
          lg ? hx(lg, sizeof(float) * V) : 0ULL);
      const int s = who[ev[k].id];
      if (ev[k].token >= 0 && ntok[s] < 16) toks[s][ntok[s]++] = ev[k].token;
      done += ev[k].done;
    }
  }
  for (int i = 0; i < 4; i++) rec(c, "seq %d tokens%s", i, ids_text(buf, sizeof buf, toks[i], ntok[i]));
  int32_t sc[20];
  make_ids(sc, 20, V, 77);
  double nll = 0;
  int cnt = 0;
  if (ok(ot_engine_score(e, sc, 20, &nll, &cnt), c, "score")) rec(c, "score nll %a count %d", nll, cnt);
out:
  ot_engine_free(e);
}

static void engine_family(char fam, const char *tmp) {
  char c[64];
  ot_model *m = infer_model(fam, OT_F32, "engine");
  if (!m) return;
  static const struct { const char *tag; ot_dtype w; int group; ot_dtype kv; } k[] = {
      {"f32", OT_F32, 0, OT_F32},          {"bf16", OT_BF16, 0, OT_F32}, {"int8g32", OT_I8, 32, OT_F32},
      {"int8row_kvbf16", OT_I8, 0, OT_BF16}, {"f32_kvbf16", OT_F32, 0, OT_BF16}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    snprintf(c, sizeof c, "engine.%s.%s", fam == 'g' ? "gpt2" : "llama", k[i].tag);
    engine_case(c, m, NULL, k[i].w, k[i].group, k[i].kv);
  }
  // a quantized model file: written, hashed, read back, served
  snprintf(c, sizeof c, "engine.%s.int8g32_file", fam == 'g' ? "gpt2" : "llama");
  char path[1100];
  snprintf(path, sizeof path, "%s/%s.safetensors", tmp, c);
  ot_qmodel *q = NULL;
  if (ok(ot_qmodel_from_model(&q, m, OT_QW_INT8, 32), c, "quantize") && ok(ot_quant_file_save(q, path), c, "save")) {
    ot_qmodel_free(q);
    q = NULL;
    st_hash(c, "file", path);
    if (ok(ot_quant_file_load(&q, path), c, "load")) engine_case(c, NULL, q, OT_F32, 0, OT_F32);
  } else {
    ot_qmodel_free(q);
  }
  ot_model_free(m);
}

static int run_single(const char *tmp) {
  rec("env", "isa %s threads %d world %d", ot_isa_name(ot_isa_active()), ot_threads_get(), ot_dist_world_size());
  static const struct { const char *dt; ot_dtype d; } dts[] = {{"f32", OT_F32}, {"bf16", OT_BF16}};
  char c[96];
  for (int f = 0; f < 2; f++) {
    const char fam = f ? 'l' : 'g', *fn = f ? "llama" : "gpt2";
    snprintf(c, sizeof c, "train.%s.f32.none.ga1", fn);
    train_case(c, fam, OT_F32, OT_RECOMPUTE_NONE, 1);
    for (int d = 0; d < 2; d++)
      for (int r = 0; r < 3; r++) {
        snprintf(c, sizeof c, "train.%s.%s.%s.ga2", fn, dts[d].dt, ot_recompute_name((ot_recompute)r));
        train_case(c, fam, dts[d].d, (ot_recompute)r, 2);
      }
  }
  loader_case("train.gpt2.f32.loader_resume", tmp, 'g', OT_F32, OT_RECOMPUTE_NONE);
  loader_case("train.llama.bf16.loader_resume", tmp, 'l', OT_BF16, OT_RECOMPUTE_SELECTIVE);
  for (int f = 0; f < 2; f++)
    for (int d = 0; d < 2; d++) {
      snprintf(c, sizeof c, "decode.%s.%s", f ? "llama" : "gpt2", dts[d].dt);
      decode_case(c, f ? 'l' : 'g', dts[d].d);
    }
  sampler_case("sampler");
  engine_family('g', tmp);
  engine_family('l', tmp);
  return g_fail;
}

// ------------------------------------------------------------- parallel ---
typedef struct {
  const char *tag;
  char fam;
  int M, zero;
  ot_recompute rc;
  bool vp, gpipe, no_overlap, bf16;
} variant;

// One variant of layout dp x tp x pp: MPI_STEPS steps on the global batches, rank
// 0's local state, and the whole model and moments through a checkpoint.
static void mpi_variant(int dp, int tp, int pp, const variant *v, const char *tmp) {
  char c[128], dir[1200], path[1300];
  snprintf(c, sizeof c, "mpi.dp%d_tp%d_pp%d.%s", dp, tp, pp, v->tag);
  ot_model_config mc = family(v->fam, 61, 1, T);
  ot_train_config cfg = train_cfg(&mc, MPI_ROWS / (dp * v->M), v->M, v->bf16 ? OT_BF16 : OT_F32, v->rc, MPI_STEPS);
  cfg.threads = 1;
  cfg.data_parallel = dp;
  cfg.tensor_parallel = tp;
  cfg.pipeline_stages = pp;
  cfg.optimizer_shard = v->zero;
  cfg.vocab_parallel = v->vp;
  cfg.gpipe = v->gpipe;
  cfg.overlap = !v->no_overlap;
  cfg.grad_buckets = v->no_overlap ? 1 : 3;
  cfg.comm_timeout = 120;
  ot_trainer *t = NULL;
  if (!ok(ot_trainer_create(&t, &cfg), c, "create")) return;
  int32_t rows[MPI_ROWS * (T + 1)];
  for (int s = 0; s < MPI_STEPS; s++) {
    ot_step_info st;
    make_rows(rows, MPI_ROWS, mc.vocab, 2000 + (uint64_t)s);
    if (!ok(ot_trainer_step_on(t, rows, &st), c, "step")) break;
    print_step(c, &st);
  }
  print_state(c, t, "rank0 ");
  snprintf(dir, sizeof dir, "%s/%s", tmp, c);
  if (ok(ot_trainer_save(t, dir), c, "save") && g_print) {
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st_hash(c, "model", path);
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    st_hash(c, "optimizer", path);
  }
  ot_trainer_free(t);
}

// The variants tests/mpi/mpi_parallel.c checks for a layout (M = pp micro-batches).
static void mpi_layout(int dp, int tp, int pp, const char *tmp) {
  const int M = pp;
  const ot_recompute N = OT_RECOMPUTE_NONE, F = OT_RECOMPUTE_FULL, S = OT_RECOMPUTE_SELECTIVE;
  variant vs[16];
  int n = 0;
  vs[n++] = (variant){"base", 'g', M, 0, N, false, false, false, false};
  vs[n++] = (variant){"llama", 'l', M, 0, N, false, false, false, false};
  if (dp > 1) {
    vs[n++] = (variant){"zero1", 'g', M, 1, N, false, false, false, false};
    vs[n++] = (variant){"zero1_nooverlap", 'l', M, 1, N, false, false, true, false};
    vs[n++] = (variant){"zero2", 'g', M, 2, N, tp > 1, false, false, false};
    vs[n++] = (variant){"zero2_nooverlap", 'l', 2 * M, 2, F, false, pp > 1, true, false};
  }
  vs[n++] = (variant){"recompute_full", 'g', M, 0, F, false, false, false, false};
  vs[n++] = (variant){"recompute_sel", 'l', M, 0, S, false, false, false, false};
  if (tp > 1) {
    vs[n++] = (variant){"vocab_parallel", 'g', M, 0, N, true, false, false, false};
    vs[n++] = (variant){"vocab_parallel_llama", 'l', M, 0, N, true, false, false, false};
  }
  if (MPI_ROWS % (dp * 2 * M) == 0) vs[n++] = (variant){"more_micro", 'g', 2 * M, 0, N, false, false, false, false};
  if (pp > 1)
    vs[n++] = (variant){"gpipe", 'l', 2 * M <= MPI_ROWS / dp ? 2 * M : M, 0, N, false, true, false, false};
  vs[n++] = (variant){"bf16", 'g', M, dp > 1, S, tp > 1, false, false, true};
  for (int i = 0; i < n; i++) mpi_variant(dp, tp, pp, &vs[i], tmp);
}

static int run_mpi(int argc, char **argv, const char *tmp) {
  const int world = ot_dist_world_size();
  rec("env", "isa %s threads %d world %d", ot_isa_name(ot_isa_active()), ot_threads_get(), world);
  for (int i = 0; i < argc; i++) {
    int dp, tp, pp;
    char extra;
    if (sscanf(argv[i], "%dx%dx%d%c", &dp, &tp, &pp, &extra) != 3 || dp < 1 || tp < 1 || pp < 1 ||
        dp * tp * pp != world) {
      ok(ot_error(OT_EINVAL, "layout '%s' is not DPxTPxPP with DP*TP*PP = %d (the world size)", argv[i], world),
         "mpi", "layout");
      continue;
    }
    mpi_layout(dp, tp, pp, tmp);
  }
  int any = g_fail;
  ot_dist_allreduce_max_int(&any);
  return any;
}

int main(int argc, char **argv) {
  static const char usage[] =
      "usage: probe single --tmp DIR | probe mpi --tmp DIR DPxTPxPP ... (under mpirun) | probe st CASE FILE ...\n";
  if (argc >= 3 && !strcmp(argv[1], "st")) {
    for (int i = 3; i < argc; i++) {   // labelled by file name (paths differ between runs)
      const char *base = strrchr(argv[i], '/');
      st_hash(argv[2], base ? base + 1 : argv[i], argv[i]);
    }
    return g_fail;
  }
  if (argc < 4 || strcmp(argv[2], "--tmp") || (strcmp(argv[1], "single") && strcmp(argv[1], "mpi"))) {
    fputs(usage, stderr);
    return 2;
  }
  if (!strcmp(argv[1], "single")) return run_single(argv[3]);
  char *tmp = argv[3], **layouts = argv + 4;   // before MPI sees the arguments
  const int n_layouts = argc - 4;
  if (ot_dist_init(&argc, &argv) != OT_OK || !ot_dist_active()) {
    fprintf(stderr, "probe mpi: run me under mpirun (%s)\n", ot_last_error());
    return 2;
  }
  g_print = ot_dist_world_rank() == 0;
  const int rc = run_mpi(n_layouts, layouts, tmp);
  ot_dist_finalize();
  return rc;
}
