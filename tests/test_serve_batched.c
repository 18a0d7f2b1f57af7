// The request scheduler (and ot serve) on the batched decode engine
// (ot_sched_config.batched), with the tiny GPT-2 and Llama models:
//  - one sequence at a time (max_batch 1): every request's tokens equal the
//    engine's for that request alone, bit for bit (same kernels, same rows);
//  - concurrent requests on 3 slots: greedy requests equal the engine alone
//    (the batch changes only the rounding of the linear layers), sampled ones
//    give max_tokens tokens or end on the stop token, each on_done once;
//  - int8 and bf16 weights, a bf16 cache;
//  - a block pool smaller than the batch: requests wait for blocks and all
//    complete; one that can never fit fails with the engine's message;
//  - cancel, on_token returning false, shutdown with requests in;
//  - the HTTP server with batched decode answers a completion.
#include "model_common.h"
#include "ot/serve.h"
#include "sched_collect.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CTX 96

// The engine alone on one request: its tokens (stop token excluded) into out.
static int engine_alone(const ot_model *m, const ot_sched_config *sc, const ot_request *r, int32_t *out,
                        bool *stopped) {
  ot_engine_config ec = {sc->weights, sc->weights == OT_I8 ? sc->group : 0, sc->kv_dtype, 0, 16, 1, CTX, CTX};
  ot_engine *e = NULL;
  int n = 0, id;
  *stopped = false;
  ot_engine_event ev;
  if (!th_check(ot_engine_create(&e, m, &ec) == OT_OK && ot_engine_add(e, r, &id, &ev) == OT_OK,
                "reference engine: %s", ot_last_error())) {
    ot_engine_free(e);
    return -1;
  }
  for (;;) {
    if (ev.token < 0) { *stopped = true; break; }
    out[n++] = ev.token;
    if (ev.done) break;
    const ot_engine_event *evs;
    int ne;
    if (!th_check(ot_engine_step(e, &evs, &ne) == OT_OK && ne == 1, "reference step: %s", ot_last_error()))
      break;
    ev = evs[0];
  }
  ot_engine_free(e);
  return n;
}

typedef struct {
  int32_t prompt[40];
  int np, max_tokens;
  int32_t stop;
  ot_sampler_config smp;
} req_spec;

static req_spec spec(int i, int vocab) {
  req_spec q;
  q.np = 1 + (i * 7) % 30;
  for (int t = 0; t < q.np; t++) q.prompt[t] = (int32_t)((i * 31 + t * 7) % vocab);
  q.max_tokens = 10 + (i * 5) % 25;
  q.stop = i % 4 == 3 ? (int32_t)((i * 13) % vocab) : -1;
  q.smp = (ot_sampler_config){i % 2 ? 0.0f : 0.9f, i % 3 ? 0 : 8, 0.95f, 500u + (uint64_t)i};
  return q;
}

// n requests through a batched scheduler of config sc; checks every request
// against the engine alone (exact when `exact` or greedy, else length / end).
static void run_requests(const ot_model *m, const char *what, const ot_sched_config *sc, int n, bool exact) {
  ot_sched *s = NULL;
  if (!th_check(ot_sched_create(&s, m, sc) == OT_OK, "%s: sched create: %s", what, ot_last_error())) return;
  const int V = ot_model_config_of(m)->vocab;
  collect *col = th_alloc(sizeof *col * (size_t)n);
  req_spec *q = th_alloc(sizeof *q * (size_t)n);
  for (int i = 0; i < n; i++) {
    col_init(&col[i]);
    q[i] = spec(i, V);
    ot_sched_request rq = {q[i].prompt, q[i].np, q[i].max_tokens, q[i].stop, q[i].smp, col_token, col_done, &col[i]};
    th_check(ot_sched_submit(s, &rq, NULL) == OT_OK, "%s: submit %d: %s", what, i, ot_last_error());
  }
  int good = 0;
  for (int i = 0; i < n; i++) {
    if (!th_check(col_wait(&col[i]), "%s: request %d ended", what, i)) continue;
    int32_t ref[CTX];
    bool stopped;
    ot_request r = {q[i].prompt, q[i].np, q[i].smp, q[i].max_tokens, q[i].stop};
    const int nr = engine_alone(m, sc, &r, ref, &stopped);
    const ot_sched_end want = stopped ? OT_SCHED_STOP_TOKEN : OT_SCHED_LENGTH;
    bool ok = col[i].done_calls == 1 && col[i].res.new_tokens == col[i].n;
    if (exact || q[i].smp.temperature == 0.0f)
      ok = ok && col[i].n == nr && !memcmp(col[i].toks, ref, sizeof(int32_t) * (size_t)nr) && col[i].res.end == want;
    else
      ok = ok && (col[i].res.end == OT_SCHED_STOP_TOKEN ||
                  (col[i].res.end == OT_SCHED_LENGTH && col[i].n == q[i].max_tokens));
    for (int t = 0; t < col[i].n && t < CTX; t++) ok = ok && col[i].toks[t] >= 0 && col[i].toks[t] < V;
    if (!ok)
      th_check(false, "%s: request %d: %d tokens (end %d) vs the engine alone %d (stopped %d)", what, i,
               col[i].n, (int)col[i].res.end, nr, stopped);
    good += ok;
  }
  th_check(good == n, "%s: %d of %d requests as the engine alone gives them", what, good, n);
  ot_sched_free(s);
  free(col);
  free(q);
}

static ot_sched_config batched(int max_batch, ot_dtype w, int group, ot_dtype kv, size_t kv_bytes) {
  ot_sched_config c;
  memset(&c, 0, sizeof c);
  c.max_batch = max_batch;
  c.batched = true;
  c.weights = w;
  c.group = group;
  c.kv_dtype = kv;
  c.kv_bytes = kv_bytes;
  return c;
}

static void test_controls(const ot_model *m) {
  ot_sched_config sc = batched(2, OT_F32, 0, OT_F32, 0);
  ot_sched *s = NULL;
  if (!th_check(ot_sched_create(&s, m, &sc) == OT_OK, "controls: create: %s", ot_last_error())) return;
  int32_t p[3] = {1, 2, 3};
  ot_sampler_config g = {0.0f, 0, 1.0f, 1};
  collect a, b, c;
  col_init(&a); col_init(&b); col_init(&c);
  a.stop_after = 4;
  ot_sched_request ra = {p, 3, 50, -1, g, col_token, col_done, &a};
  th_check(ot_sched_submit(s, &ra, NULL) == OT_OK, "controls: submit");
  col_wait(&a);
  th_check(a.res.end == OT_SCHED_STOPPED && a.n == 4, "on_token false: stopped after 4 tokens (end %d, %d)",
           (int)a.res.end, a.n);
  // a long request cancelled while it runs; a second one unaffected
  b.stop_after = 0;
  ot_sched_request rb = {p, 3, CTX - 3, -1, g, col_token, col_done, &b};
  ot_sched_request rc = {p, 2, 8, -1, g, col_token, col_done, &c};
  uint64_t idb = 0;
  ot_sched_submit(s, &rb, &idb);
  ot_sched_submit(s, &rc, NULL);
  col_wait(&c);
  const bool found = ot_sched_cancel(s, idb);
  col_wait(&b);
  th_check(c.res.end == OT_SCHED_LENGTH && c.n == 8, "the other request: 8 tokens (end %d, %d)", (int)c.res.end, c.n);
  th_check(!found || (b.res.end == OT_SCHED_CANCELLED && b.done_calls == 1),
           "cancel of a running batched request: end %d", (int)b.res.end);
  // the slot and blocks are reusable: a fresh request completes
  collect d;
  col_init(&d);
  ot_sched_request rd = {p, 3, 12, -1, g, col_token, col_done, &d};
  ot_sched_submit(s, &rd, NULL);
  col_wait(&d);
  th_check(d.res.end == OT_SCHED_LENGTH && d.n == 12, "after a cancel: 12 tokens (end %d, %d)", (int)d.res.end, d.n);
  // shutdown with active and queued requests: every on_done once
  collect e[5];
  for (int i = 0; i < 5; i++) {
    col_init(&e[i]);
    ot_sched_request re = {p, 3, CTX - 3, -1, g, col_token, col_done, &e[i]};
    ot_sched_submit(s, &re, NULL);
  }
  ot_sched_free(s);
  int once = 0;
  for (int i = 0; i < 5; i++) once += e[i].done_calls == 1;
  th_check(once == 5, "shutdown: every on_done once (%d of 5)", once);
}

// A pool of 4 blocks of 16 tokens: requests needing 2-3 blocks wait for each other;
// one needing 5 can never fit and fails naming the blocks.
static void test_small_pool(const ot_model *m) {
  ot_engine_config probe = {OT_F32, 0, OT_F32, 0, 16, 1, CTX, CTX};
  ot_engine *e = NULL;
  if (!th_check(ot_engine_create(&e, m, &probe) == OT_OK, "probe engine: %s", ot_last_error())) return;
  const size_t block = ot_kvpool_block_bytes(ot_engine_pool(e));
  ot_engine_free(e);
  ot_sched_config sc = batched(3, OT_F32, 0, OT_F32, 4 * block);
  ot_sched *s = NULL;
  if (!th_check(ot_sched_create(&s, m, &sc) == OT_OK, "small pool: create: %s", ot_last_error())) return;
  int32_t p[20];
  for (int i = 0; i < 20; i++) p[i] = (int32_t)((i * 3 + 1) % 50);
  ot_sampler_config g = {0.0f, 0, 1.0f, 1};
  collect c[4];
  for (int i = 0; i < 4; i++) col_init(&c[i]);
  ot_sched_request big = {p, 20, 61, -1, g, col_token, col_done, &c[3]};   // 80 tokens: 5 blocks
  for (int i = 0; i < 3; i++) {
    ot_sched_request r = {p, 10 + i, 25, -1, g, col_token, col_done, &c[i]};   // 2 blocks each
    th_check(ot_sched_submit(s, &r, NULL) == OT_OK, "small pool: submit %d", i);
  }
  th_check(ot_sched_submit(s, &big, NULL) == OT_OK, "small pool: submit the large request: %s", ot_last_error());
  int ok = 0;
  for (int i = 0; i < 3; i++) {
    col_wait(&c[i]);
    ok += c[i].res.end == OT_SCHED_LENGTH && c[i].n == 25;
  }
  th_check(ok == 3, "small pool: 3 requests of 2 blocks on a 4-block pool all complete (%d)", ok);
  col_wait(&c[3]);
  th_check(c[3].res.end == OT_SCHED_FAILED && strstr(c[3].res.message, "block") != NULL,
           "small pool: a request of 5 blocks fails naming the blocks: end %d, \"%s\"", (int)c[3].res.end,
           c[3].res.message);
  ot_sched_free(s);
}

// ---- HTTP: one greedy completion through ot serve's batched engine ----------
static void *serve_main(void *p) {
  ot_server_run(p);
  return NULL;
}

// POSTs body to 127.0.0.1:port/v1/completions (Connection: close); the whole response into out.
static bool post(int port, const char *body, char *out, size_t cap) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  char req[1024];
  const int n = snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                         strlen(body), body);
  bool ok = write(fd, req, (size_t)n) == n;
  size_t got = 0;
  ssize_t k;
  while (ok && got + 1 < cap && (k = read(fd, out + got, cap - 1 - got)) > 0) got += (size_t)k;
  out[got] = 0;
  close(fd);
  return ok && got > 0;
}

static void test_http(const ot_model *m) {
  ot_server_config c = ot_server_config_default();
  c.port = 0;
  c.batched = true;
  c.max_batch = 2;
  ot_server *srv = NULL;
  if (!th_check(ot_server_create(&srv, &c, m, NULL) == OT_OK && ot_server_port(srv) > 0, "batched server: %s",
                ot_last_error()))
    return;
  pthread_t th;
  pthread_create(&th, NULL, serve_main, srv);
  static char resp[1 << 16];
  const bool sent = post(ot_server_port(srv), "{\"prompt\": [5, 9, 2], \"max_tokens\": 7, \"temperature\": 0}",
                         resp, sizeof resp);
  ot_server_stop(srv);
  pthread_join(th, NULL);
  ot_server_free(srv);
  int32_t got[16];
  int ng = 0;
  const char *ids = strstr(resp, "\"token_ids\"");
  if (ids && (ids = strchr(ids, '['))) {
    for (const char *q = ids + 1; ng < 16 && *q && *q != ']';) {
      char *end;
      long v = strtol(q, &end, 10);
      if (end == q) { q++; continue; }
      got[ng++] = (int32_t)v;
      q = end;
    }
  }
  int32_t p[3] = {5, 9, 2}, ref[CTX];
  bool stopped;
  ot_sched_config sc = batched(1, OT_F32, 0, OT_F32, 0);
  ot_request r = {p, 3, {0.0f, 0, 1.0f, 0}, 7, -1};
  const int nr = engine_alone(m, &sc, &r, ref, &stopped);
  th_check(sent && strstr(resp, "HTTP/1.1 200") == resp && ng == nr && !memcmp(got, ref, sizeof(int32_t) * (size_t)nr),
           "ot serve (batched): a greedy completion of 7 tokens == the engine's (%d tokens; response %.80s)", ng,
           resp);
}

int main(void) {
  ot_model_config cg = tm_cfg_gpt2(CTX), cl = tm_cfg_llama(CTX);
  ot_model *mg = tm_make(&cg, 1, 1, OT_F32, 7), *ml = tm_make(&cl, 1, 1, OT_F32, 8);
  if (!mg || !ml) return th_finish();
  ot_sched_config one = batched(1, OT_F32, 0, OT_F32, 0);
  run_requests(mg, "gpt2 f32, one at a time", &one, 6, true);
  ot_sched_config three = batched(3, OT_F32, 0, OT_F32, 0);
  run_requests(mg, "gpt2 f32, 3 at once", &three, 9, false);
  run_requests(ml, "llama f32, 3 at once", &three, 7, false);
  ot_sched_config q8 = batched(1, OT_I8, 32, OT_BF16, 0);
  run_requests(mg, "gpt2 int8/g32 + bf16 cache, one at a time", &q8, 4, true);
  ot_sched_config b16 = batched(3, OT_BF16, 0, OT_F32, 0);
  run_requests(ml, "llama bf16, 3 at once", &b16, 5, false);
  test_controls(mg);
  test_small_pool(mg);
  test_http(mg);
  ot_server_config c = ot_server_config_default();
  c.port = 0;
  c.batched = true;
  ot_server *srv = NULL;
  c.weights = OT_I8;
  c.group = 48;
  th_check_error(ot_server_create(&srv, &c, mg, NULL), OT_EINVAL, "group", "batched server: bad int8 group");
  ot_model_free(mg);
  ot_model_free(ml);
  return th_finish();
}
