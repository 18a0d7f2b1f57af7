// Paged KV cache and batched engine tests:
//  - block pool: randomized interleaved join / grow / leave of many sequences;
//    after every operation no block is held twice, none is leaked (held +
//    free = all), the allocation never exceeds the budget, a refused
//    reservation leaves the pool unchanged, closed blocks are reused; errors
//  - paged decode attention vs the scalar reference over scattered block
//    tables (GQA, odd D, block sizes 1..16, lengths over several split-KV
//    chunks), f32 and bf16 caches, every ISA; 1 and 2 threads give the same bits
//  - engine vs the contiguous KV cache (ot_kvcache): logits of the prefill and
//    of every decode step (f32 weights and cache), GPT-2 and Llama families,
//    a sequence longer than one split-KV chunk
//  - a batched step of sequences at different lengths (joining and leaving at
//    different steps) equals each sequence decoded alone
//  - bf16 cache and bf16 / int8 weights close to f32; teacher-forced scoring
//    equals the full forward's cross-entropy
//  - out-of-budget refusal (message, nothing changes, admitted once blocks free)
#include "harness.h"
#include "model_common.h"
#include "ot/quant.h"
#include "ot/infer.h"
#include <omp.h>
#include <unistd.h>

// ------------------------------------------------------------ block pool ----
// Checks the invariants; held[b] = the slot holding block b or -1.
static bool pool_consistent(const ot_kvpool *p, int *held) {
  const int n = ot_kvpool_blocks(p), S = ot_kvpool_config_of(p)->max_seqs;
  for (int b = 0; b < n; b++) held[b] = -1;
  int total = 0;
  for (int s = 0; s < S; s++) {
    int nb = 0;
    const int32_t *t = ot_kvpool_table(p, s, &nb);
    if (!t) continue;
    if (ot_kvpool_capacity(p, s) != nb * ot_kvpool_config_of(p)->block_tokens) return false;
    for (int i = 0; i < nb; i++) {
      if (t[i] < 0 || t[i] >= n || held[t[i]] >= 0) return false;   // out of range or shared
      held[t[i]] = s;
    }
    total += nb;
  }
  return total + ot_kvpool_free_blocks(p) == n;   // nothing leaked
}

static void test_pool(void) {
  ot_kvpool_config c = {3, 2, 8, 4, OT_BF16, 0, 6, 10};
  const size_t bb = (size_t)3 * 2 * 2 * 4 * 8 * 2;
  c.budget_bytes = 23 * bb + bb / 2;   // 23 blocks and a half: the half is never allocated
  const size_t before = ot_mem_current(OT_MEM_KVCACHE);
  ot_kvpool *p = NULL;
  if (!th_check(ot_kvpool_create(&p, &c) == OT_OK, "pool create: %s", ot_last_error())) return;
  th_check(ot_kvpool_blocks(p) == 23 && ot_kvpool_block_bytes(p) == bb &&
           ot_kvpool_bytes(p) <= c.budget_bytes && ot_kvpool_free_blocks(p) == 23,
           "pool: %d blocks of %zu bytes within the budget", ot_kvpool_blocks(p), ot_kvpool_block_bytes(p));
  const size_t grew = ot_mem_current(OT_MEM_KVCACHE) - before;
  th_check(grew >= ot_kvpool_bytes(p) && grew < ot_kvpool_bytes(p) + 4096,
           "pool: tracked as KV cache (%zu bytes)", grew);
  int held[64], snap_held[64];
  th_rng r = {2024};
  int ops = 0, refused = 0, reused = 0, bad = 0;
  bool seen[64] = {false};
  int issued = 0;
  for (int it = 0; it < 4000; it++) {
    const int op = (int)(th_next(&r) % 3), s = (int)(th_next(&r) % 6);
    ot_status st = OT_OK;
    if (op == 0 && !ot_kvpool_is_open(p, s)) {   // join: open + first reservation
      int slot = -1;
      st = ot_kvpool_open(p, &slot);
      if (st == OT_OK) {
        const int want = 1 + (int)(th_next(&r) % 20);
        if (ot_kvpool_reserve(p, slot, want) != OT_OK) { refused++; ot_kvpool_close(p, slot); }
      }
    } else if (op == 1 && ot_kvpool_is_open(p, s)) {   // grow (may be refused)
      const int cap = ot_kvpool_capacity(p, s), want = cap + 1 + (int)(th_next(&r) % 24);
      const int fb = ot_kvpool_free_blocks(p);
      int nb0 = 0;
      const int32_t *t0 = ot_kvpool_table(p, s, &nb0);
      int32_t copy[16];
      memcpy(copy, t0, sizeof(int32_t) * (size_t)nb0);
      pool_consistent(p, snap_held);
      st = ot_kvpool_reserve(p, s, want);
      if (st != OT_OK) {
        refused++;
        int nb1 = 0;
        const int32_t *t1 = ot_kvpool_table(p, s, &nb1);
        pool_consistent(p, held);
        if (st != OT_ENOMEM || nb1 != nb0 || memcmp(t1, copy, sizeof(int32_t) * (size_t)nb0) ||
            ot_kvpool_free_blocks(p) != fb || memcmp(held, snap_held, sizeof(int) * 23))
          bad++;
      } else {
        int nb1 = 0;
        const int32_t *t1 = ot_kvpool_table(p, s, &nb1);
        if (memcmp(t1, copy, sizeof(int32_t) * (size_t)nb0)) bad++;   // growth keeps the prefix
        for (int i = nb0; i < nb1; i++) {
          if (seen[t1[i]]) reused++;
          seen[t1[i]] = true;
          issued++;
        }
      }
    } else if (op == 2 && ot_kvpool_is_open(p, s)) {   // leave
      st = ot_kvpool_close(p, s);
    }
    ops++;
    if (!pool_consistent(p, held) || ot_kvpool_bytes(p) > c.budget_bytes) bad++;
  }
  th_check(bad == 0, "pool: %d interleaved operations, %d refused: no block shared or leaked, "
           "refusals change nothing, growth keeps the table (%d violations)", ops, refused, bad);
  th_check(refused > 20 && reused > 100, "pool: the run exercised refusals (%d) and reuse of freed "
           "blocks (%d of %d issued)", refused, reused, issued);
  // errors
  int slot = -1;
  for (int s = 0; s < 6; s++) if (ot_kvpool_is_open(p, s)) ot_kvpool_close(p, s);
  th_check(ot_kvpool_free_blocks(p) == 23 && ot_kvpool_open_seqs(p) == 0, "pool: all blocks back");
  int sa = -1, sb = -1;
  th_check(ot_kvpool_open(p, &sa) == OT_OK && ot_kvpool_reserve(p, sa, 40) == OT_OK &&
           ot_kvpool_open(p, &sb) == OT_OK && ot_kvpool_reserve(p, sb, 37) == OT_OK &&
           ot_kvpool_free_blocks(p) == 3, "pool: two sequences hold 20 blocks");
  th_check(ot_kvpool_open(p, &slot) == OT_OK && slot == 2, "pool: open");
  th_check_error(ot_kvpool_reserve(p, slot, 4 * 4 + 1), OT_ENOMEM, "5 more blocks of 4 tokens but "
                 "only 3 of 23 are free", "reserve beyond free");
  th_check_error(ot_kvpool_reserve(p, slot, 11 * 4), OT_ENOMEM, "max_blocks_per_seq",
                 "reserve beyond the table");
  th_check(ot_kvpool_free_blocks(p) == 3 && ot_kvpool_capacity(p, slot) == 0, "pool: refused "
           "reservations took nothing");
  th_check(ot_kvpool_close(p, sa) == OT_OK && ot_kvpool_reserve(p, slot, 17) == OT_OK &&
           ot_kvpool_free_blocks(p) == 8, "pool: admitted once another sequence left");
  th_check_error(ot_kvpool_close(p, 5), OT_EINVAL, "not open", "close a closed slot");
  for (int s = ot_kvpool_open_seqs(p); s < 6; s++) ot_kvpool_open(p, &slot);
  th_check_error(ot_kvpool_open(p, &slot), OT_ENOMEM, "slots are in use", "open beyond max_seqs");
  ot_kvpool_free(p);
  th_check(ot_mem_current(OT_MEM_KVCACHE) == before, "pool: freed");
  c.budget_bytes = bb - 1;
  th_check_error(ot_kvpool_create(&p, &c), OT_EINVAL, "holds no block", "budget below one block");
  c.budget_bytes = bb;
  c.dt = OT_I8;
  th_check_error(ot_kvpool_create(&p, &c), OT_EINVAL, "dt=", "int8 cache");
}

// -------------------------------------------------- paged decode kernel -----
static void attn_case(int n, int Hq, int Hkv, int D, int bt, int maxlen, ot_dtype dt, uint64_t seed) {
  th_rng r = {seed};
  const int mb = (maxlen + bt - 1) / bt, nblocks = n * mb + 3;
  const size_t bs = (size_t)bt * D + 5, hs = bs * nblocks + 3;   // strides with gaps
  const size_t ne = hs * Hkv;
  float *kf = th_falloc(ne), *vf = th_falloc(ne);
  th_fill(&r, kf, ne, -1, 1);
  th_fill(&r, vf, ne, -1, 1);
  void *k = kf, *v = vf;
  if (dt == OT_BF16) { k = th_to_bf16(kf, ne); v = th_to_bf16(vf, ne); }
  // a random permutation of the blocks dealt to the rows
  int32_t *perm = th_alloc(sizeof(int32_t) * nblocks), *tab = th_alloc(sizeof(int32_t) * n * mb);
  for (int i = 0; i < nblocks; i++) perm[i] = i;
  for (int i = nblocks - 1; i > 0; i--) {
    int j = (int)(th_next(&r) % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j]; perm[j] = t;
  }
  for (int i = 0; i < n * mb; i++) tab[i] = perm[i];
  int32_t *len = th_alloc(sizeof(int32_t) * n);
  for (int i = 0; i < n; i++) len[i] = i == 0 ? maxlen : 1 + (int)(th_next(&r) % (uint64_t)maxlen);
  const int ldq = Hq * D + 3, ldo = Hq * D + 1;
  float *q = th_falloc((size_t)n * ldq), *o = th_falloc((size_t)n * ldo), *o1 = th_falloc((size_t)n * ldo);
  float *want = th_falloc((size_t)n * ldo);
  th_fill(&r, q, (size_t)n * ldq, -2, 2);
  ot_paged_attn p = {n, Hq, Hkv, D, bt, nblocks, dt, k, v, bs, hs, tab, mb, len, 0.0f};
  ot_ref_attn_paged_decode(want, ldo, q, ldq, &p);
  ot_isa isas[OT_ISA_COUNT];
  const int ni = th_isas(isas);
  for (int ii = 0; ii < ni; ii++) {
    ot_isa_force(isas[ii]);
    memset(o, 0, sizeof(float) * n * ldo);
    memset(o1, 0, sizeof(float) * n * ldo);
    ot_status s = ot_attn_paged_decode(o, ldo, q, ldq, &p);
    const int nt = ot_threads_get();
    ot_threads_set(1);
    ot_attn_paged_decode(o1, ldo, q, ldq, &p);
    ot_threads_set(nt);
    th_check_nerr(o, want, (size_t)n * ldo, 2e-6, "paged decode %s %s n=%d Hq=%d Hkv=%d D=%d bt=%d "
                  "max len %d", ot_dtype_name(dt), ot_isa_name(isas[ii]), n, Hq, Hkv, D, bt, maxlen);
    th_check(s == OT_OK && !memcmp(o, o1, sizeof(float) * n * ldo), "paged decode %s %s: 1 and %d "
             "threads give the same bits", ot_dtype_name(dt), ot_isa_name(isas[ii]), nt);
  }
  ot_isa_unforce();
  if (dt == OT_BF16) { free(k); free(v); }
  free(kf); free(vf); free(perm); free(tab); free(len); free(q); free(o); free(o1); free(want);
}

static void test_attn(void) {
  attn_case(1, 4, 4, 16, 16, 40, OT_F32, 1);
  attn_case(3, 6, 2, 64, 16, 700, OT_F32, 2);      // 3 split-KV chunks, GQA 3
  attn_case(5, 4, 1, 7, 5, 300, OT_F32, 3);        // MQA, odd D, odd block size
  attn_case(2, 2, 2, 33, 1, 270, OT_F32, 4);       // one token per block
  attn_case(4, 8, 4, 80, 16, 520, OT_BF16, 5);
  attn_case(2, 3, 3, 24, 3, 100, OT_BF16, 6);
  // bad input
  float q[64] = {0}, o[64];
  int32_t tab[2] = {0, 7}, len[1] = {20};
  ot_paged_attn p = {1, 2, 2, 16, 16, 4, OT_F32, q, q, 256, 1024, tab, 2, len, 0.0f};
  th_check_error(ot_attn_paged_decode(o, 32, q, 32, &p), OT_EINVAL, "outside the pool", "bad block id");
  len[0] = 0;
  th_check_error(ot_attn_paged_decode(o, 32, q, 32, &p), OT_EINVAL, "kv_len[0]=0", "empty row");
  len[0] = 5;
  p.Hkv = 3;
  th_check_error(ot_attn_paged_decode(o, 32, q, 32, &p), OT_EINVAL, "does not divide", "Hkv");
  p.Hkv = 2;
  th_check_error(ot_attn_paged_decode(o, 16, q, 32, &p), OT_EINVAL, "ldo=16", "short rows");
}

// ----------------------------------------------------------------- models ---
static ot_model_config cfg_gpt2(int max_seq) { return tm_cfg_gpt2(max_seq); }
static ot_model_config cfg_llama(int max_seq) { return tm_cfg_llama(max_seq); }
static ot_model *make(const ot_model_config *c, uint64_t seed) {
  return tm_make(c, 1, c->max_seq, OT_F32, seed);
}

static ot_engine *make_engine(const ot_model *m, ot_dtype w, int group, ot_dtype kv, int max_seqs,
                              int bt, size_t kv_bytes) {
  ot_engine_config ec = {w, group, kv, kv_bytes, bt, max_seqs, 0, 0};
  ot_engine *e = NULL;
  th_check(ot_engine_create(&e, m, &ec) == OT_OK, "engine create (%s weights, %s cache): %s",
           ot_dtype_name(w), ot_dtype_name(kv), ot_last_error());
  return e;
}

static ot_request greedy(const int32_t *prompt, int n, int max_tokens) {
  ot_request r = {prompt, n, {0.0f, 0, 1.0f, 1}, max_tokens, -1};
  return r;
}

// --------------------------------------------------- engine vs ot_kvcache ---
static void test_vs_contiguous(const ot_model_config *c, int P, int bt) {
  const int S = c->max_seq, V = c->vocab, NEW = S - P + 1;
  ot_model *m = make(c, 21 + (uint64_t)S);
  if (!m) return;
  ot_engine *e = make_engine(m, OT_F32, 0, OT_F32, 2, bt, 0);
  ot_kvcache *kv = NULL;
  ot_kv_config kc = {1, 0, 0, false};
  th_check(ot_kv_create(&kv, m, &kc) == OT_OK, "kv create: %s", ot_last_error());
  int32_t *prompt = th_alloc(sizeof(int32_t) * P);
  th_rng r = {7};
  for (int i = 0; i < P; i++) prompt[i] = (int32_t)(th_next(&r) % (uint64_t)V);
  ot_request rq = greedy(prompt, P, NEW);
  int id = -1;
  ot_engine_event ev;
  double worst = 0.0;
  int steps = 0;
  if (e && kv && th_check(ot_engine_add(e, &rq, &id, &ev) == OT_OK, "add: %s", ot_last_error())) {
    const float *want = NULL;
    ot_kv_forward(kv, prompt, P, false, &want, NULL);
    for (;;) {
      const float *got = ot_engine_logits(e, id, NULL);
      const double err = got ? th_nerr(got, want, (size_t)V) : INFINITY;
      worst = err > worst ? err : worst;
      if (ev.done) break;
      const int32_t tok = ev.token;
      const ot_engine_event *evs;
      int ne = 0;
      if (ot_engine_step(e, &evs, &ne) != OT_OK || ne != 1 || evs[0].id != id) {
        th_check(false, "step %d: %s", steps, ot_last_error());
        break;
      }
      ev = evs[0];
      ot_kv_forward(kv, &tok, 1, false, &want, NULL);
      steps++;
    }
  }
  th_check(worst <= 2e-6 && steps == NEW - 1, "%s bt=%d: paged-engine logits == contiguous KV cache "
           "after the %d-token prompt and %d steps (worst nerr %.2g)", c->name, bt, P, steps, worst);
  th_check(e && ot_engine_active(e) == 0 &&
           ot_kvpool_free_blocks(ot_engine_pool(e)) == ot_kvpool_blocks(ot_engine_pool(e)),
           "%s: after max_tokens the sequence left and its blocks are free", c->name);
  free(prompt);
  ot_kv_free(kv);
  ot_engine_free(e);
  ot_model_free(m);
}

// --------------------------------------------------- batched == alone -------
#define NSEQ 5
typedef struct { int P, join, max_tokens; } seq_plan;

// Runs the plan (sequence i joins before step join[i]) and records each
// sequence's logits per token: rec[i] [max_tokens, V].
static bool run_plan(ot_engine *e, const seq_plan *pl, int ns, int32_t prompts[][24], float **rec,
                     int V) {
  int id[NSEQ], got[NSEQ] = {0}, which[64];
  for (int i = 0; i < 64; i++) which[i] = -1;
  for (int step = 0, live = 0, joined = 0; joined < ns || live > 0; step++) {
    for (int i = 0; i < ns; i++)
      if (pl[i].join == step) {
        ot_request rq = greedy(prompts[i], pl[i].P, pl[i].max_tokens);
        ot_engine_event ev;
        if (ot_engine_add(e, &rq, &id[i], &ev) != OT_OK) return false;
        memcpy(rec[i], ot_engine_logits(e, id[i], NULL), sizeof(float) * V);
        got[i] = 1;
        which[id[i]] = i;
        joined++;
        live++;
      }
    // the logits of every sequence stepped now
    const ot_engine_event *evs;
    int ne = 0;
    if (live == 0) continue;
    if (ot_engine_step(e, &evs, &ne) != OT_OK) return false;
    for (int k = 0; k < ne; k++) {
      const int i = which[evs[k].id];
      const float *lg = ot_engine_logits(e, evs[k].id, NULL);
      if (lg) memcpy(rec[i] + (size_t)got[i] * V, lg, sizeof(float) * V);
      got[i]++;
      if (evs[k].done) live--;
    }
  }
  for (int i = 0; i < ns; i++)
    if (got[i] != pl[i].max_tokens) return false;
  return true;
}

static void test_batched(const ot_model_config *c, ot_dtype wt, int group) {
  const int V = c->vocab;
  ot_model *m = make(c, 99);
  if (!m) return;
  const seq_plan pl[NSEQ] = {{5, 0, 9}, {1, 0, 12}, {17, 2, 6}, {3, 3, 10}, {9, 9, 4}};
  int32_t prompts[NSEQ][24];
  th_rng r = {5};
  for (int i = 0; i < NSEQ; i++)
    for (int t = 0; t < 24; t++) prompts[i][t] = (int32_t)(th_next(&r) % (uint64_t)V);
  float *alone[NSEQ], *batch[NSEQ];
  for (int i = 0; i < NSEQ; i++) {
    alone[i] = th_falloc((size_t)pl[i].max_tokens * V);
    batch[i] = th_falloc((size_t)pl[i].max_tokens * V);
  }
  ot_engine *e = make_engine(m, wt, group, OT_F32, 4, 4, 0);
  bool ok = e != NULL;
  for (int i = 0; ok && i < NSEQ; i++) {   // each alone
    seq_plan one = pl[i];
    one.join = 0;
    ok = run_plan(e, &one, 1, &prompts[i], &alone[i], V);
  }
  // all together (at most 4 at once: the fifth joins when the second has left)
  ok = ok && run_plan(e, pl, NSEQ, prompts, batch, V);
  double worst = 0.0;
  for (int i = 0; ok && i < NSEQ; i++)
    for (int t = 0; t < pl[i].max_tokens; t++) {
      const double er = th_nerr(batch[i] + (size_t)t * V, alone[i] + (size_t)t * V, (size_t)V);
      worst = er > worst ? er : worst;
    }
  // int8: a step of one sequence rounds the activations to int16 per chunk in the
  // GEMV (kern/qgemv.c, AVX2: ~2^-16 of the chunk max), a batched step does not
  const double tol = wt == OT_I8 ? 1e-3 : 1e-6;
  th_check(ok && worst <= tol, "%s %s weights: batched steps of sequences at different lengths == "
           "each decoded alone (worst nerr %.2g) %s", c->name, ot_dtype_name(wt), worst,
           ok ? "" : ot_last_error());
  th_check(e && ot_engine_active(e) == 0 && ot_kvpool_open_seqs(ot_engine_pool(e)) == 0 &&
           ot_kvpool_free_blocks(ot_engine_pool(e)) == ot_kvpool_blocks(ot_engine_pool(e)),
           "%s: every sequence left, every block is free", c->name);
  for (int i = 0; i < NSEQ; i++) { free(alone[i]); free(batch[i]); }
  ot_engine_free(e);
  ot_model_free(m);
}

// ------------------------------------- reduced precision, scoring, refusal --
// Logits of the prompt and `steps` forced decode steps (greedy), concatenated.
// The tokens fed after the prompt are fixed (not the sampled ones, which may
// differ). Frees the engine.
static float *trace_e(ot_engine *e, int V, const int32_t *prompt, int P, int steps) {
  float *out = th_falloc((size_t)(steps + 1) * V);
  if (!e) return out;
  ot_request rq = greedy(prompt, P, steps + 1);
  int id;
  ot_engine_event ev;
  if (ot_engine_add(e, &rq, &id, &ev) == OT_OK) {
    memcpy(out, ot_engine_logits(e, id, NULL), sizeof(float) * V);
    for (int s = 1; s <= steps; s++) {
      const ot_engine_event *evs;
      int ne;
      if (ot_engine_set_token(e, id, (int32_t)((s * 11 + 1) % V)) != OT_OK ||
          ot_engine_step(e, &evs, &ne) != OT_OK)
        break;
      const float *lg = ot_engine_logits(e, id, NULL);
      if (lg) memcpy(out + (size_t)s * V, lg, sizeof(float) * V);
    }
  }
  ot_engine_free(e);
  return out;
}

static float *trace(const ot_model *m, ot_dtype w, int group, ot_dtype kv, const int32_t *prompt,
                    int P, int steps) {
  return trace_e(make_engine(m, w, group, kv, 1, 16, 0), ot_model_config_of(m)->vocab, prompt, P,
                 steps);
}

static void test_precision(void) {
  ot_model_config c = cfg_gpt2(64);
  ot_model *m = make(&c, 3);
  if (!m) return;
  int32_t prompt[20];
  for (int i = 0; i < 20; i++) prompt[i] = (int32_t)((i * 7 + 3) % c.vocab);
  const int steps = 20;
  const size_t n = (size_t)(steps + 1) * c.vocab;
  float *f = trace(m, OT_F32, 0, OT_F32, prompt, 20, steps);
  float *kb = trace(m, OT_F32, 0, OT_BF16, prompt, 20, steps);
  float *wb = trace(m, OT_BF16, 0, OT_F32, prompt, 20, steps);
  float *w8 = trace(m, OT_I8, 32, OT_F32, prompt, 20, steps);
  const double ekb = th_nerr(kb, f, n), ewb = th_nerr(wb, f, n), ew8 = th_nerr(w8, f, n);
  th_check(ekb > 0 && ekb < 1e-2, "bf16 KV cache close to f32 (nerr %.2g)", ekb);
  th_check(ewb > 0 && ewb < 2e-2, "bf16 weights close to f32 (nerr %.2g)", ewb);
  th_check(ew8 > 0 && ew8 < 5e-2, "int8 weights (group 32) close to f32 (nerr %.2g)", ew8);
  // the same int8 weights through a file of `ot quantize`'s format
  ot_qmodel *q = NULL, *q2 = NULL;
  char path[64];
  snprintf(path, sizeof path, "/tmp/ot_test_paged_%d.safetensors", (int)getpid());
  th_check(ot_qmodel_from_model(&q, m, OT_QW_INT8, 32) == OT_OK && ot_quant_file_save(q, path) == OT_OK &&
           ot_quant_file_load(&q2, path) == OT_OK, "quantized file: %s", ot_last_error());
  remove(path);
  ot_qmodel_free(q);
  ot_engine *eq = NULL;
  ot_engine_config ec = {OT_F32, 0, OT_F32, 0, 16, 1, 0, 0};
  th_check(q2 && ot_engine_create_q(&eq, q2, &ec) == OT_OK &&
           ot_engine_config_of(eq)->weights == OT_I8 && ot_engine_config_of(eq)->group == 32,
           "engine from the quantized file: %s", ot_last_error());
  float *wf = trace_e(eq, c.vocab, prompt, 20, steps);
  th_check(!memcmp(wf, w8, sizeof(float) * n), "engine from the int8 file == engine quantizing the "
           "model at load time (bitwise)");
  free(f); free(kb); free(wb); free(w8); free(wf);
  // teacher-forced scoring == the full forward's cross-entropy
  ot_engine *e = make_engine(m, OT_F32, 0, OT_F32, 1, 16, 0);
  int32_t tok[64], tgt[64];
  for (int i = 0; i < 64; i++) tok[i] = (int32_t)((i * 13 + 5) % c.vocab);
  for (int i = 0; i < 63; i++) tgt[i] = tok[i + 1];
  tgt[63] = -1;
  double nll = 0.0, loss = 0.0;
  int cnt = 0;
  th_check(e && ot_engine_score(e, tok, 64, &nll, &cnt) == OT_OK && cnt == 63, "score: %s",
           ot_last_error());
  th_check(ot_model_forward(m, tok, tgt, 1, 64, 0.0f, false, &loss) == OT_OK, "forward: %s",
           ot_last_error());
  th_check(fabs(nll / cnt - loss) <= 1e-5 * fabs(loss), "engine score %.7f == model loss %.7f",
           nll / cnt, loss);
  th_check_error(ot_engine_score(e, tok, 1, &nll, &cnt), OT_EINVAL, "n=1", "score of one token");
  ot_engine_free(e);
  ot_model_free(m);
}

static void test_refusal(void) {
  ot_model_config c = cfg_gpt2(64);
  ot_model *m = make(&c, 4);
  if (!m) return;
  // 6 blocks of 4 tokens: one 17-token sequence takes 5 of them
  const size_t bb = (size_t)c.n_layers * 2 * c.n_kv_heads * 4 * ot_model_head_dim(&c) * 4;
  ot_engine *e = make_engine(m, OT_F32, 0, OT_F32, 3, 4, 6 * bb);
  if (!e) { ot_model_free(m); return; }
  int32_t prompt[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ot_request a = greedy(prompt, 10, 8), b = greedy(prompt, 5, 4);
  int ida, idb;
  ot_engine_event ev;
  const ot_kvpool *p = ot_engine_pool(e);
  const ot_status sa = ot_engine_add(e, &a, &ida, &ev);
  th_check(sa == OT_OK && ot_kvpool_free_blocks(p) == 1,
           "refusal: the first sequence holds 5 of 6 blocks (%d free)", ot_kvpool_free_blocks(p));
  th_check_error(ot_engine_add(e, &b, &idb, &ev), OT_ENOMEM, "refused", "request beyond the pool");
  th_check(strstr(ot_last_error(), "1 of 6 are free") != NULL, "refusal names the blocks: %s",
           ot_last_error());
  th_check(idb == -1 && ot_engine_active(e) == 1 && ot_kvpool_free_blocks(p) == 1 &&
           ot_kvpool_open_seqs(p) == 1, "refusal changes nothing");
  const ot_engine_event *evs;
  int ne;
  bool done = false;
  while (!done && ot_engine_step(e, &evs, &ne) == OT_OK && ne == 1) done = evs[0].done;
  th_check(done && ot_kvpool_free_blocks(p) == 6, "the first sequence finished, its blocks are free");
  th_check(ot_engine_add(e, &b, &idb, &ev) == OT_OK && idb == ida + 1, "admitted once blocks are free");
  th_check(ot_engine_remove(e, idb) == OT_OK && ot_engine_active(e) == 0 &&
           ot_kvpool_free_blocks(p) == 6, "remove frees the blocks");
  th_check_error(ot_engine_remove(e, idb), OT_EINVAL, "no active sequence", "remove twice");
  ot_request bad = greedy(prompt, 10, 60);
  th_check_error(ot_engine_add(e, &bad, &idb, &ev), OT_EINVAL, "max_len", "longer than the context");
  int32_t neg[2] = {3, 64};
  bad = greedy(neg, 2, 3);
  th_check_error(ot_engine_add(e, &bad, &idb, &ev), OT_EINVAL, "outside [0, vocab", "bad token");
  bad = greedy(prompt, 3, 3);
  bad.sampler.top_p = 0.0f;
  th_check_error(ot_engine_add(e, &bad, &idb, &ev), OT_EINVAL, "top_p", "bad sampler");
  th_check(ot_engine_active(e) == 0 && ot_kvpool_free_blocks(p) == 6 && ot_kvpool_open_seqs(p) == 0,
           "failed requests leave nothing behind");
  ot_engine_free(e);
  ot_engine_config ec = {OT_I8, 0, OT_F32, 0, 0, 0, 0, 0};
  ec.group = 48;
  th_check_error(ot_engine_create(&e, m, &ec), OT_EINVAL, "group", "int8 group that does not divide");
  ec.group = 0;
  ec.max_len = 65;
  th_check_error(ot_engine_create(&e, m, &ec), OT_EINVAL, "max_len=65", "max_len beyond the model");
  ot_model_free(m);
}

int main(void) {
  test_pool();
  test_attn();
  ot_model_config g = cfg_gpt2(48), l = cfg_llama(48);
  test_vs_contiguous(&g, 7, 4);
  test_vs_contiguous(&l, 5, 16);
  ot_model_config g2 = cfg_gpt2(300);   // beyond one split-KV chunk (256 keys)
  test_vs_contiguous(&g2, 30, 16);
  test_batched(&g, OT_F32, 0);
  test_batched(&l, OT_I8, 32);
  test_precision();
  test_refusal();
  return th_finish();
}
