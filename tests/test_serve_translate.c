// Translation serving (ot_sched over an encoder-decoder, POST /v1/translations)
// with a tiny random encoder-decoder (transformer-tiny, vocabulary 304, 40
// tokens) and a BPE trained here (300 tokens), over loopback sockets against
// an in-process server:
//  - text: ot__tokens_text (the one decoder of ot translate and the server):
//    byte tokens ending mid-character give U+FFFD, a final eos is dropped;
//  - scheduler: requests queued while paused are translated together, the
//    oldest request and the later ones of the same search in one call (the
//    stats count calls and sentences), every sentence's tokens equal
//    ot_translate_ids on the same source alone (greedy and beam); cancel,
//    queue full, shutdown with requests in, bad requests named;
//  - HTTP: a string and a batch, greedy and beam, length penalty, ratio and
//    max_tokens: texts and ids equal ot_translate_ids', usage counts; two
//    concurrent clients become one call (/health's translate_calls); every bad
//    input (400 / 405 / 413) with its message; /v1/completions on a
//    translation server and /v1/translations on a decoder-only one say which
//    endpoint to use; GET /v1/models lists the translation model.
#define _GNU_SOURCE
#include "harness.h"
#include "ot/serve.h"
#include "io/json.h"
#include "serve/serve_impl.h"
#include "serve_client.h"
#include <pthread.h>
#include <time.h>

#define CTX 40
#define VOCAB 304
static ot_model *g_model, *g_ref;   // the served model and an identical one for references
static ot_bpe *g_bpe;
static ot_translator *g_rt;         // over g_ref: one sentence, up to 4 beams

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static ot_beam_config search(int beams, float lp, float ratio, int max_length) {
  const ot_model_config *mc = ot_model_config_of(g_model);
  ot_beam_config b = ot_beam_config_default();
  b.vocab = mc->vocab;
  b.eos_id = mc->eos_id;
  b.pad_id = mc->pad_id;
  b.decoder_start_id = mc->decoder_start_id;
  b.num_beams = beams;
  b.length_penalty = lp;
  b.max_len_a = ratio;
  b.max_len_b = 10.0f;
  b.max_length = max_length;
  return b;
}

// The encoder input of a sentence (as the server makes it): its length.
static int src_ids(const char *text, int32_t *out) {
  int n = 0;
  const ot_model_config *mc = ot_model_config_of(g_model);
  th_check(ot__source_ids(g_bpe, text, strlen(text), mc->vocab, mc->eos_id, out, CTX, &n) == OT_OK && n <= CTX,
           "source ids of '%s': %s", text, ot_last_error());
  return n;
}

// ot_translate_ids on the reference model, the sentence alone: its length.
static int reference(const int32_t *src, int n, const ot_beam_config *b, int32_t *out) {
  int32_t len = n;
  int olen = 0;
  if (!th_check(ot_translate_ids(g_rt, 1, src, n, &len, b, out, CTX, &olen, NULL, NULL) == OT_OK,
                "reference: %s", ot_last_error()))
    return -1;
  return olen;
}

// The reference translation of text as the server writes it.
static void reference_text(const char *text, const ot_beam_config *b, ot__sbuf *out, int32_t *ids, int *nids) {
  int32_t src[CTX];
  const int n = src_ids(text, src);
  *nids = reference(src, n, b, ids);
  out->len = 0;
  ot__tokens_text(g_bpe, ids, *nids, ot_model_config_of(g_model)->eos_id, out);
}

// ------------------------------------------------------------------ text ---
static void test_text(void) {
  const int32_t eos = ot_model_config_of(g_model)->eos_id;
  int32_t byte[256];   // the token of each single byte
  for (int i = 0; i < 256; i++) byte[i] = -1;
  for (int32_t id = 0; id < ot_bpe_vocab_size(g_bpe); id++) {
    size_t len = 0;
    const char *s = ot_bpe_token(g_bpe, id, &len);
    if (len == 1 && byte[(unsigned char)s[0]] < 0) byte[(unsigned char)s[0]] = id;
  }
  if (!th_check(byte['c'] >= 0 && byte[0xc3] >= 0 && byte[0xa9] >= 0, "byte tokens present")) return;
  ot__sbuf b = {0};
  const int32_t whole[4] = {byte['c'], byte[0xc3], byte[0xa9], eos}, cut[2] = {byte['c'], byte[0xc3]};
  ot__tokens_text(g_bpe, whole, 4, eos, &b);
  th_check(b.len == 3 && !memcmp(b.p, "c\xc3\xa9", 3), "tokens text: c + c3 + a9 + eos = 'c\xc3\xa9'");
  b.len = 0;
  ot__tokens_text(g_bpe, cut, 2, eos, &b);
  th_check(b.len == 4 && !memcmp(b.p, "c\xef\xbf\xbd", 4), "tokens text: a character cut short is U+FFFD");
  b.len = 0;
  const int32_t pad[2] = {byte['c'], VOCAB - 1};   // pad: an id the tokenizer lacks adds nothing
  ot__tokens_text(g_bpe, pad, 2, eos, &b);
  th_check(b.len == 1, "tokens text: an id beyond the tokenizer adds no bytes");
  ot__sb_free(&b);
}

// ------------------------------------------------------------- scheduler ---
typedef struct {
  pthread_mutex_t mu;
  int32_t toks[4][CTX];
  int ntoks[4], sentences, done_calls;
  ot_sched_result res;
} tcollect;

static void tc_init(tcollect *c) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
}

static void tc_sentence(void *ctx, int i, const int32_t *t, int n) {
  tcollect *c = ctx;
  pthread_mutex_lock(&c->mu);
  if (i >= 0 && i < 4 && n <= CTX) {
    memcpy(c->toks[i], t, sizeof(int32_t) * (size_t)n);
    c->ntoks[i] = n;
  }
  c->sentences++;
  pthread_mutex_unlock(&c->mu);
}

static void tc_done(void *ctx, const ot_sched_result *r) {
  tcollect *c = ctx;
  pthread_mutex_lock(&c->mu);
  c->res = *r;
  c->done_calls++;
  pthread_mutex_unlock(&c->mu);
}

// Waits up to 60 s until every c[0, n) ended.
static bool tc_wait(tcollect *c, int n) {
  for (int t = 0; t < 6000; t++) {
    int done = 0;
    for (int i = 0; i < n; i++) {
      pthread_mutex_lock(&c[i].mu);
      done += c[i].done_calls > 0;
      pthread_mutex_unlock(&c[i].mu);
    }
    if (done == n) return true;
    sleep_ms(10);
  }
  return false;
}

static void test_sched(void) {
  ot_sched_config sc = {0};
  sc.max_batch = 4;
  sc.max_beams = 4;
  ot_sched *s = NULL;
  if (!th_check(ot_sched_create(&s, g_model, &sc) == OT_OK, "translation sched: %s", ot_last_error())) return;
  th_check(ot_sched_translates(s) && ot_sched_capacity(s) == CTX, "scheduler translates, capacity %d",
           ot_sched_capacity(s));
  static const char *texts[5] = {"the quick brown fox", "a lazy dog sleeps", "caf\xc3\xa9 na\xc3\xafve",
                                 "there then other", "the end"};
  int32_t src[5][CTX];
  int32_t len[5];
  for (int i = 0; i < 5; i++) len[i] = src_ids(texts[i], src[i]);
  // A: sentence 0 greedy; B: sentences 1-2 greedy; C: sentence 3 beam 3; D: sentence 4 greedy
  const ot_beam_config greedy = search(1, 1.0f, 1.2f, CTX), beam3 = search(3, 0.6f, 1.2f, CTX);
  int32_t cat[2 * CTX];
  memcpy(cat, src[1], sizeof(int32_t) * (size_t)len[1]);
  memcpy(cat + len[1], src[2], sizeof(int32_t) * (size_t)len[2]);
  tcollect col[5];
  for (int i = 0; i < 5; i++) tc_init(&col[i]);
  ot_sched_translation rq[5] = {
      {src[0], &len[0], 1, greedy, tc_sentence, tc_done, &col[0]},
      {cat, &len[1], 2, greedy, tc_sentence, tc_done, &col[1]},
      {src[3], &len[3], 1, beam3, tc_sentence, tc_done, &col[2]},
      {src[4], &len[4], 1, greedy, tc_sentence, tc_done, &col[3]},
      {src[4], &len[4], 1, greedy, tc_sentence, tc_done, &col[4]},   // cancelled while queued
  };
  ot_sched_pause(s, true);
  uint64_t ids[5] = {0};
  for (int i = 0; i < 5; i++)
    th_check(ot_sched_submit_translation(s, &rq[i], &ids[i]) == OT_OK, "submit %d: %s", i, ot_last_error());
  sleep_ms(50);
  ot_sched_stats st;
  ot_sched_stats_get(s, &st);
  th_check(st.queued == 5 && st.active == 0 && st.translate_calls == 0, "paused: 5 queued, none active (%d, %d)",
           st.queued, st.active);
  th_check(ot_sched_cancel(s, ids[4]), "cancel a queued translation");
  ot_sched_pause(s, false);
  if (th_check(tc_wait(col, 5), "every translation ended")) {
    ot_sched_stats_get(s, &st);
    th_check(st.translate_calls == 2 && st.sentences == 5 && st.largest_call == 4 && st.cancelled == 1,
             "A + B + D in one call (4 sentences), C (another search) in a second: calls %llu, sentences "
             "%llu, largest %d, cancelled %llu", (unsigned long long)st.translate_calls,
             (unsigned long long)st.sentences, st.largest_call, (unsigned long long)st.cancelled);
    const int which[5][2] = {{0, -1}, {1, 2}, {3, -1}, {4, -1}};
    for (int r = 0; r < 4; r++) {
      int src_tokens = 0, tgt_tokens = 0;
      for (int k = 0; k < 2 && which[r][k] >= 0; k++) {
        const int i = which[r][k];
        int32_t want[CTX];
        const int n = reference(src[i], len[i], r == 2 ? &beam3 : &greedy, want);
        th_check(n == col[r].ntoks[k] && !memcmp(want, col[r].toks[k], sizeof(int32_t) * (size_t)(n > 0 ? n : 0)),
                 "request %d sentence %d: %d tokens equal ot_translate_ids alone (%d)", r, k, col[r].ntoks[k], n);
        src_tokens += len[i];
        tgt_tokens += n;
      }
      th_check(col[r].done_calls == 1 && col[r].res.end == OT_SCHED_TRANSLATED &&
                   col[r].res.prompt_tokens == src_tokens && col[r].res.new_tokens == tgt_tokens,
               "request %d: on_done once, translated, %d + %d tokens (%d + %d)", r, src_tokens, tgt_tokens,
               col[r].res.prompt_tokens, col[r].res.new_tokens);
    }
    th_check(col[4].done_calls == 1 && col[4].res.end == OT_SCHED_CANCELLED && col[4].sentences == 0,
             "the cancelled request: on_done once, cancelled, no sentence");
  }
  // bad requests
  ot_sched_translation bad = rq[0];
  bad.n = 0;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "n=0", "no sentence");
  bad.n = 5;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "max_batch", "5 sentences > max_batch 4");
  bad = rq[0];
  int32_t zero = 0, big = CTX + 1;
  bad.src_len = &zero;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "maximum source length", "empty source");
  bad.src_len = &big;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "maximum source length",
                 "source over capacity");
  bad = rq[0];
  int32_t oor[2] = {3, VOCAB};
  int32_t two = 2;
  bad.src = oor;
  bad.src_len = &two;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "outside [0, vocab", "token id");
  bad = rq[0];
  bad.search.num_beams = 5;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "max_beams", "5 beams > 4");
  bad.search = greedy;
  bad.search.vocab = 50;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "not the model's", "another vocab");
  bad.search = greedy;
  bad.search.max_length = CTX + 1;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "max_length", "max_length over capacity");
  bad.search = greedy;
  bad.search.max_length = 2;
  bad.search.max_len_a = 0.0f;
  bad.search.max_len_b = 1.0f;
  th_check_error(ot_sched_submit_translation(s, &bad, NULL), OT_EINVAL, "leaves no token", "limit 1");
  int32_t p = 1;
  ot_sched_request comp = {&p, 1, 1, -1, ot_sampler_config_default(), NULL, NULL, NULL};
  th_check_error(ot_sched_submit(s, &comp, NULL), OT_EINVAL, "ot_sched_submit_translation",
                 "a completion on a translation scheduler");
  ot_sched_free(s);

  // queue full, then shutdown with the queued requests in
  sc.max_queue = 2;
  if (!th_check(ot_sched_create(&s, g_model, &sc) == OT_OK, "sched: %s", ot_last_error())) return;
  ot_sched_pause(s, true);
  for (int i = 0; i < 3; i++) tc_init(&col[i]);
  rq[0].ctx = &col[0];
  rq[1].ctx = &col[1];
  th_check(ot_sched_submit_translation(s, &rq[0], NULL) == OT_OK &&
               ot_sched_submit_translation(s, &rq[1], NULL) == OT_OK, "two queued: %s", ot_last_error());
  rq[2].ctx = &col[2];
  th_check_error(ot_sched_submit_translation(s, &rq[2], NULL), OT_ENOMEM, "max_queue=2", "queue full");
  ot_sched_free(s);
  th_check(col[0].done_calls == 1 && col[0].res.end == OT_SCHED_SHUTDOWN && col[1].done_calls == 1 &&
               col[1].res.end == OT_SCHED_SHUTDOWN && col[2].done_calls == 0,
           "shutdown ends each queued translation once; the refused one never");

  // a decoder-only scheduler refuses translations
  ot_model_config dc;
  ot_model_config_preset(&dc, "tiny");
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *dm = NULL;
  ot_sched_config dsc = {0};
  dsc.max_batch = 1;
  if (th_check(ot_model_create(&dm, &dc, &run) == OT_OK && ot_sched_create(&s, dm, &dsc) == OT_OK,
               "decoder sched: %s", ot_last_error())) {
    th_check(!ot_sched_translates(s), "a decoder-only scheduler does not translate");
    th_check_error(ot_sched_submit_translation(s, &rq[0], NULL), OT_EINVAL, "decoder-only",
                   "a translation on a decoder-only scheduler");
    ot_sched_free(s);
  }
  ot_model_free(dm);
}

// ---------------------------------------------------------------- server ---
typedef struct { ot_server *s; pthread_t th; int port; } server;

static void *run_main(void *p) {
  ot_server_run(((server *)p)->s);
  return NULL;
}

static bool server_start(server *sv, const ot_model *m, const ot_bpe *tok) {
  ot_server_config c = ot_server_config_default();
  c.port = 0;
  c.max_batch = 4;
  c.beam = 4;
  c.model_id = "tiny-translator";
  c.max_body = 16 << 10;
  memset(sv, 0, sizeof *sv);
  if (!th_check(ot_server_create(&sv->s, &c, m, tok) == OT_OK, "server create: %s", ot_last_error()))
    return false;
  sv->port = ot_server_port(sv->s);
  pthread_create(&sv->th, NULL, run_main, sv);
  return sv->port > 0;
}

static void server_stop(server *sv) {
  ot_server_stop(sv->s);
  pthread_join(sv->th, NULL);
  ot_server_free(sv->s);
}

static http_resp post(int port, const char *path, const char *body) {
  const size_t n = strlen(body) + 512;
  char *req = th_alloc(n);
  const size_t k = post_bytes(req, n, path, body, true);
  http_resp r = raw_request(port, req, k, false);
  free(req);
  return r;
}

static http_resp get(int port, const char *method, const char *path) {
  char req[256];
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", method, path);
  return raw_request(port, req, (size_t)n, false);
}

// POSTs body and checks each translation against the reference of texts[i]
// with search b (ids too when the request asks return_token_ids).
static void check_translate(int port, const char *body, const char *const *texts, int n, const ot_beam_config *b,
                            const char *what) {
  http_resp r = post(port, "/v1/translations", body);
  ot_json_doc doc = {0};
  if (!th_check(r.status == 200 && ot_json_parse(&doc, r.body, strlen(r.body), 0, "response") == OT_OK,
                "%s: 200 and JSON (%d: %.300s)", what, r.status, r.body)) {
    free(r.all);
    return;
  }
  const ot_json *tr = ot_json_get(doc.root, "translations"), *u = ot_json_get(doc.root, "usage"),
                *ob = ot_json_get(doc.root, "object"), *mo = ot_json_get(doc.root, "model");
  th_check(ob && ob->type == OT_JSTR && !strcmp(ob->s, "translation") && mo && mo->type == OT_JSTR &&
               !strcmp(mo->s, "tiny-translator"), "%s: object translation, model tiny-translator", what);
  int src_total = 0, tgt_total = 0;
  if (th_check(tr && tr->type == OT_JARR && tr->n == n, "%s: %d translations", what, n)) {
    const ot_json *e = tr->first;
    for (int i = 0; i < n; i++, e = e->next) {
      ot__sbuf want = {0};
      int32_t ids[CTX], src[CTX];
      int nids = 0;
      reference_text(texts[i], b, &want, ids, &nids);
      src_total += src_ids(texts[i], src);
      tgt_total += nids;
      const ot_json *idx = ot_json_get(e, "index"), *t = ot_json_get(e, "text"), *ti = ot_json_get(e, "token_ids");
      th_check(idx && idx->is_int && idx->i == i && t && t->type == OT_JSTR && t->len == want.len &&
                   !memcmp(t->s, want.p ? want.p : "", want.len),
               "%s: translation %d's text equals ot_translate_ids' (%zu bytes)", what, i, want.len);
      if (ti) {
        bool same = ti->type == OT_JARR && ti->n == nids;
        int k = 0;
        for (const ot_json *x = same ? ti->first : NULL; x; x = x->next, k++) same = same && x->i == ids[k];
        th_check(same, "%s: translation %d's %d token ids equal ot_translate_ids'", what, i, nids);
      }
      ot__sb_free(&want);
    }
  }
  const ot_json *us = ot_json_get(u, "source_tokens"), *ut = ot_json_get(u, "target_tokens");
  th_check(us && ut && us->i == src_total && ut->i == tgt_total, "%s: usage %d source + %d target tokens", what,
           src_total, tgt_total);
  ot_json_free(&doc);
  free(r.all);
}

static void test_translations(int port) {
  static const char *one[1] = {"the quick brown fox jumps"};
  ot_beam_config b = search(4, 1.0f, 1.2f, CTX);
  check_translate(port, "{\"text\": \"the quick brown fox jumps\", \"return_token_ids\": true}", one, 1, &b,
                  "default (beam 4)");
  check_translate(port, "{\"text\": \"the quick brown fox jumps\"}", one, 1, &b, "text only");
  static const char *three[3] = {"a lazy dog", "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac", "the end. the start again"};
  b = search(1, 1.0f, 1.2f, CTX);
  check_translate(port, "{\"text\": [\"a lazy dog\", \"caf\xc3\xa9 na\xc3\xafve \\u20ac\", \"the end. the start "
                  "again\"], \"greedy\": true, \"return_token_ids\": true, \"model\": \"x\"}", three, 3, &b,
                  "a batch, greedy");
  b = search(3, 0.6f, 0.5f, 7);
  check_translate(port, "{\"text\": [\"a lazy dog\", \"caf\xc3\xa9 na\xc3\xafve \\u20ac\"], \"beam_size\": 3, "
                  "\"length_penalty\": 0.6, \"max_length_ratio\": 0.5, \"max_tokens\": 6, \"return_token_ids\": true}",
                  three, 2, &b, "beam 3, length penalty, ratio, max_tokens");
  b = search(2, 1.0f, 1.2f, CTX);
  b.early_stopping = OT_EARLY_STOP_TRUE;
  check_translate(port, "{\"text\": \"a lazy dog\", \"beam_size\": 2, \"early_stopping\": true, "
                  "\"return_token_ids\": true}", three, 1, &b, "early stopping");
  http_resp m = get(port, "GET", "/v1/models"), h = get(port, "GET", "/health");
  th_check(m.status == 200 && strstr(m.body, "\"id\":\"tiny-translator\"") && strstr(m.body, "\"task\":\"translation\"") &&
               strstr(m.body, "\"max_model_len\":40"), "GET /v1/models lists the translation model: %.200s", m.body);
  th_check(h.status == 200 && strstr(h.body, "\"translate_calls\":"), "GET /health counts translate calls: %.200s",
           h.body);
  free(m.all);
  free(h.all);
}

// -------------------------------------------------- concurrent batching ---
typedef struct { int port; const char *body; http_resp r; } client;

static void *client_main(void *p) {
  client *c = p;
  c->r = post(c->port, "/v1/translations", c->body);
  return NULL;
}

static void test_batching(server *sv) {
  ot_sched *s = ot_server_sched(sv->s);
  ot_sched_stats before, st;
  ot_sched_stats_get(s, &before);
  ot_sched_pause(s, true);
  client cl[2] = {{sv->port, "{\"text\": \"the lazy fox\", \"return_token_ids\": true}", {0}},
                  {sv->port, "{\"text\": \"a quick dog runs away\", \"return_token_ids\": true}", {0}}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, client_main, &cl[i]);
  bool queued = false;
  for (int t = 0; t < 2000 && !queued; t++) {   // both requests wait in the queue
    ot_sched_stats_get(s, &st);
    queued = st.queued == 2;
    if (!queued) sleep_ms(10);
  }
  th_check(queued, "two concurrent clients: both requests queued");
  ot_sched_pause(s, false);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  ot_sched_stats_get(s, &st);
  th_check(st.translate_calls == before.translate_calls + 1 && st.sentences == before.sentences + 2 &&
               st.largest_call >= 2, "two concurrent clients: one batched call of 2 sentences (%llu calls, %llu "
               "sentences)", (unsigned long long)(st.translate_calls - before.translate_calls),
           (unsigned long long)(st.sentences - before.sentences));
  static const char *texts[2] = {"the lazy fox", "a quick dog runs away"};
  const ot_beam_config b = search(4, 1.0f, 1.2f, CTX);
  for (int i = 0; i < 2; i++) {
    ot__sbuf want = {0};
    int32_t ids[CTX];
    int nids = 0;
    reference_text(texts[i], &b, &want, ids, &nids);
    ot_json_doc doc = {0};
    const ot_json *t = NULL;
    if (cl[i].r.status == 200 && ot_json_parse(&doc, cl[i].r.body, strlen(cl[i].r.body), 0, "r") == OT_OK)
      t = ot_json_get(ot_json_at(ot_json_get(doc.root, "translations"), 0), "text");
    th_check(t && t->len == want.len && !memcmp(t->s, want.p ? want.p : "", want.len),
             "concurrent client %d: 200, the translation of its text alone (%d: %.200s)", i, cl[i].r.status,
             cl[i].r.body);
    ot_json_free(&doc);
    ot__sb_free(&want);
    free(cl[i].r.all);
  }
  char health[64];
  snprintf(health, sizeof health, "\"translate_calls\":%llu", (unsigned long long)st.translate_calls);
  http_resp h = get(sv->port, "GET", "/health");
  th_check(h.status == 200 && strstr(h.body, health), "/health reports %s: %.200s", health, h.body);
  free(h.all);
}

// ---------------------------------------------------------------- errors ---
static void expect(int port, const char *path, const char *body, int status, const char *needle, const char *what) {
  http_resp r = post(port, path, body);
  th_check(r.status == status && strstr(r.body, needle) && strstr(r.body, "\"error\":{\"message\":"),
           "%s: %d with '%s' (got %d: %.300s)", what, status, needle, r.status, r.body);
  free(r.all);
}

static void test_errors(int port) {
  const char *T = "/v1/translations";
  expect(port, T, "{\"text\": \"a\"", 400, "invalid JSON", "malformed JSON");
  expect(port, T, "[\"a\"]", 400, "must be a JSON object", "not an object");
  expect(port, T, "{}", 400, "text is required", "no text");
  expect(port, T, "{\"text\": null}", 400, "text is required", "null text");
  expect(port, T, "{\"text\": \"\"}", 400, "text[0] is empty", "empty text");
  expect(port, T, "{\"text\": []}", 400, "empty array", "empty batch");
  expect(port, T, "{\"text\": 5}", 400, "text must be a string or an array of strings, not number", "a number");
  expect(port, T, "{\"text\": [\"a\", 5]}", 400, "text[1] is number", "an array with a number");
  expect(port, T, "{\"text\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 400, "at most 4 per request",
         "too many sentences");
  expect(port, T, "{\"text\": \"the quick brown fox jumps over the lazy dog. the dog sleeps; the fox runs away. a "
         "quick brown dog and a lazy fox: there, then, other, these, those, thin thimbles.\"}", 400,
         "maximum source length is 40 tokens", "a sentence over the source length");
  expect(port, T, "{\"text\": \"a\xff\"}", 400, "UTF-8", "invalid UTF-8");
  expect(port, T, "{\"text\": \"\\udc00\"}", 400, "surrogate", "a lone surrogate");
  expect(port, T, "{\"text\": \"a\", \"beam_size\": 5}", 400, "beam_size=5 must be in [1, 4]", "beam_size too big");
  expect(port, T, "{\"text\": \"a\", \"beam_size\": 0}", 400, "beam_size=0", "beam_size 0");
  expect(port, T, "{\"text\": \"a\", \"beam_size\": \"4\"}", 400, "beam_size must be an integer", "beam_size text");
  expect(port, T, "{\"text\": \"a\", \"greedy\": 1}", 400, "greedy must be true or false", "greedy a number");
  expect(port, T, "{\"text\": \"a\", \"greedy\": true, \"beam_size\": 2}", 400, "greedy decoding is one beam",
         "greedy with beams");
  expect(port, T, "{\"text\": \"a\", \"length_penalty\": \"x\"}", 400, "length_penalty must be a number",
         "length_penalty text");
  expect(port, T, "{\"text\": \"a\", \"max_length_ratio\": -1}", 400, "max_length_ratio=-1 must be in",
         "negative ratio");
  expect(port, T, "{\"text\": \"a\", \"max_tokens\": 40}", 400, "ask for at most 39", "max_tokens over the target");
  expect(port, T, "{\"text\": \"a\", \"max_tokens\": 0}", 400, "max_tokens=0", "max_tokens 0");
  expect(port, T, "{\"text\": \"a\", \"model\": 3}", 400, "model must be a string", "model a number");
  expect(port, "/v1/completions", "{\"prompt\": \"a\"}", 400, "use POST /v1/translations",
         "completions on a translation server");
  char big[20000];
  memset(big, 'a', sizeof big);
  memcpy(big, "{\"text\": \"", 10);
  memcpy(big + sizeof big - 3, "\"}", 3);
  expect(port, T, big, 413, "exceeds the limit of 16384 bytes", "a body over max_body");
  http_resp r = get(port, "GET", T);
  th_check(r.status == 405 && strstr(r.body, "use POST"), "GET /v1/translations: 405 (%d)", r.status);
  free(r.all);
  r = get(port, "GET", "/v1/nothing");
  th_check(r.status == 404 && strstr(r.body, "POST /v1/translations"), "unknown path: 404 naming translations");
  free(r.all);
}

static void test_decoder_server(void) {
  ot_model_config dc;
  ot_model_config_preset(&dc, "tiny");
  dc.vocab = 300;
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *dm = NULL;
  server sv;
  if (th_check(ot_model_create(&dm, &dc, &run) == OT_OK && ot_model_init(dm, 1) == OT_OK, "decoder model: %s",
               ot_last_error()) &&
      server_start(&sv, dm, g_bpe)) {
    expect(sv.port, "/v1/translations", "{\"text\": \"a\"}", 400, "use POST /v1/completions",
           "translations on a decoder-only server");
    http_resp m = get(sv.port, "GET", "/v1/models");
    th_check(m.status == 200 && strstr(m.body, "\"task\":\"completion\""), "decoder /v1/models: task completion");
    free(m.all);
    server_stop(&sv);
  }
  ot_model_free(dm);
  ot_server *s = NULL;
  ot_server_config c = ot_server_config_default();
  c.port = 0;
  th_check_error(ot_server_create(&s, &c, g_model, NULL), OT_EINVAL, "tokenizer", "translation server without a "
                 "tokenizer");
  c.beam = 5;
  c.max_beam = 4;
  th_check_error(ot_server_create(&s, &c, g_model, g_bpe), OT_EINVAL, "max_beam", "max_beam below beam");
}

int main(void) {
  static const char corpus[] =
      "the quick brown fox jumps over the lazy dog. the dog sleeps; the fox runs away. "
      "a quick brown dog and a lazy fox: there, then, other, these, those, thin thimbles. "
      "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 5 the end <|endoftext|> the start again. ";
  if (!th_check(ot_bpe_train(&g_bpe, corpus, sizeof corpus - 1, 300, false) == OT_OK && ot_bpe_eot(g_bpe) > 0,
                "tokenizer: %s", ot_last_error()))
    return th_finish();
  ot_model_config c;
  ot_model_config_preset(&c, "transformer-tiny");
  c.vocab = VOCAB;
  c.max_seq = CTX;
  c.pad_id = c.decoder_start_id = VOCAB - 1;
  c.eos_id = ot_bpe_eot(g_bpe);
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -100, 1};
  ot_translator_config tc = {1, 4, CTX, CTX};
  if (!th_check(ot_model_create(&g_model, &c, &run) == OT_OK && ot_model_init(g_model, 5) == OT_OK &&
                    ot_model_create(&g_ref, &c, &run) == OT_OK && ot_model_init(g_ref, 5) == OT_OK &&
                    ot_translator_create(&g_rt, g_ref, &tc) == OT_OK,
                "models: %s", ot_last_error()))
    return th_finish();
  test_text();
  test_sched();
  server sv;
  if (server_start(&sv, g_model, g_bpe)) {
    test_translations(sv.port);
    test_batching(&sv);
    test_errors(sv.port);
    server_stop(&sv);
  }
  test_decoder_server();
  ot_translator_free(g_rt);
  ot_bpe_free(g_bpe);
  ot_model_free(g_model);
  ot_model_free(g_ref);
  return th_finish();
}
