// The server does not grow: memory of threads and of requests is given back.
//  - per-thread scratch (ot_scratch) is freed when its thread exits: a plain
//    pthread, and the OpenMP workers of a parallel region such a thread ran;
//  - 1000 requests of mixed kinds (valid, prompt beyond the context, bad JSON,
//    streamed, and streamed then dropped by the client mid-stream, each drop
//    waited out so that the 4 workers are never all taken) against an
//    in-process server on a tiny model (batched engine) leave the resident set
//    within 2 MiB of where it was after 200 warm-up requests, and once the
//    server is freed the tracked workspace is back where it was before it
//    started (the old server kept each connection thread's 131 KB tokenizer
//    scratch of a 3000-character prompt: 26 MB more per 1000 such requests).
// Under AddressSanitizer (whose quarantine holds freed memory) the resident
// set is printed, not checked; LeakSanitizer (scripts/test.sh) checks instead.
#define _GNU_SOURCE
#include "harness.h"
#include "internal.h"
#include "ot/serve.h"
#include "serve_client.h"
#include <omp.h>
#include <pthread.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

#define CTX 128

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

// Resident set of this process in bytes (/proc/self/statm), 0 if unknown.
static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (!f) return 0;
  const int n = fscanf(f, "%lu %lu", &size, &res);
  fclose(f);
  return n == 2 ? res * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

// Waits up to 2 s for the tracked workspace to come back to `want` (OpenMP's
// workers finish exiting shortly after the thread that owned them).
static size_t workspace_settles(size_t want) {
  size_t now = ot_mem_current(OT_MEM_WORKSPACE);
  for (int i = 0; i < 200 && now != want; i++) {
    sleep_ms(10);
    now = ot_mem_current(OT_MEM_WORKSPACE);
  }
  return now;
}

// ------------------------------------------------------- thread scratch ---
static void *scratch_thread(void *arg) {
  const bool omp = *(const bool *)arg;
  if (!omp) {
    char *p = ot_scratch(1 << 20);
    if (p) memset(p, 1, 1 << 20);
    return p;
  }
  int got = 0;
#pragma omp parallel num_threads(2) reduction(+ : got)
  {
    char *p = ot_scratch(256 << 10);
    if (p) { memset(p, 2, 256 << 10); got++; }
  }
  return got == 2 ? arg : NULL;
}

static void test_thread_scratch(void) {
  const size_t base = ot_mem_current(OT_MEM_WORKSPACE);
  for (int omp = 0; omp < 2; omp++) {
    bool arg = omp;
    pthread_t th;
    void *ret = NULL;
    if (!th_check(pthread_create(&th, NULL, scratch_thread, &arg) == 0, "start a thread")) return;
    pthread_join(th, &ret);
    const size_t after = omp ? workspace_settles(base) : ot_mem_current(OT_MEM_WORKSPACE);
    th_check(ret != NULL && after == base, "%s: workspace back to %zu bytes after the thread exits (%zu)",
             omp ? "2 OpenMP threads in a pthread, 256 KiB of scratch each" : "a pthread with 1 MiB of scratch",
             base, after);
  }
}

// ---------------------------------------------------------------- server ---
typedef struct { ot_server *s; pthread_t th; int port; } server;

static void *run_main(void *p) {
  ot_server_run(p);
  return NULL;
}

typedef struct { int ok, bad; } tally;

// Waits up to 10 s for the scheduler to have no request (a dropped stream ended).
static void wait_idle(ot_sched *s) {
  for (int i = 0; i < 1000; i++) {
    ot_sched_stats st;
    ot_sched_stats_get(s, &st);
    if (st.active == 0 && st.queued == 0) return;
    sleep_ms(10);
  }
}

// Request i of the mix; checks its answer.
static void one_request(ot_server *srv, int port, int i, tally *t) {
  static char big[3200];
  static const char valid[] =
      "{\"prompt\": \"the quick brown fox jumps over the lazy dog. the dog sleeps; the fox runs away. a quick "
      "brown dog and a lazy fox: there, then, other, these, those, thin thimbles. the end, the start again "
      "and the rest.\", \"max_tokens\": 2, \"temperature\": 0.5}";
  if (!big[0]) {   // {"prompt": "xxx...x" (3000), "max_tokens": 2}
    int k = sprintf(big, "{\"prompt\": \"");
    memset(big + k, 'x', 3000);
    sprintf(big + k + 3000, "\", \"max_tokens\": 2}");
  }
  const int kind = i % 5;
  const char *body = kind == 0 ? valid
                   : kind == 1 ? big
                   : kind == 2 ? "{\"prompt\": \"abc\", \"max_tokens\": "
                   : kind == 3 ? "{\"prompt\": \"the lazy dog\", \"max_tokens\": 3, \"stream\": true}"
                               : "{\"prompt\": \"a fox\", \"max_tokens\": 100, \"stream\": true}";
  char req[4096];
  const size_t n = post_bytes(req, sizeof req, "/v1/completions", body, true);
  bool ok = false;
  if (kind < 4) {
    http_resp r = raw_request(port, req, n, false);
    const int want = kind == 0 || kind == 3 ? 200 : 400;
    ok = r.status == want && (kind != 1 || strstr(r.body, "context_length_exceeded")) &&
         (kind != 3 || strstr(r.body, "data: [DONE]"));
    if (!ok && t->bad < 3)
      th_check(false, "request %d (kind %d): status %d (want %d): %.160s", i, kind, r.status, want, r.body);
    free(r.all);
  } else {   // the client leaves after the first bytes of the stream
    const int fd = dial(port);
    char got[512];
    ssize_t k = -1;
    if (fd >= 0 && send_all(fd, req, n)) k = recv(fd, got, sizeof got - 1, 0);
    if (fd >= 0) close(fd);
    ok = k > 12 && !strncmp(got, "HTTP/1.1 200", 12);
    if (!ok && t->bad < 3) th_check(false, "request %d (stream dropped): %zd bytes", i, k);
    wait_idle(ot_server_sched(srv));   // its worker is free again before the next request
  }
  t->ok += ok;
  t->bad += !ok;
}

static void test_server(const ot_model *m, const ot_bpe *bpe) {
  const size_t ws0 = ot_mem_current(OT_MEM_WORKSPACE);
  ot_server_config c = ot_server_config_default();
  c.port = 0;
  c.max_clients = 4;
  c.max_batch = 2;
  c.batched = true;
  c.model_id = "tiny-leak";
  server sv;
  if (!th_check(ot_server_create(&sv.s, &c, m, bpe) == OT_OK, "server create: %s", ot_last_error())) return;
  sv.port = ot_server_port(sv.s);
  pthread_create(&sv.th, NULL, run_main, sv.s);
  enum { WARM = 200, N = 1000 };
  tally t = {0, 0};
  for (int i = 0; i < WARM; i++) one_request(sv.s, sv.port, i, &t);
  const size_t rss1 = rss_bytes();
  const double t0 = ot_now();
  for (int i = 0; i < N; i++) one_request(sv.s, sv.port, WARM + i, &t);
  const double dt = ot_now() - t0;
  const size_t rss2 = rss_bytes();
  ot_server_stop(sv.s);
  pthread_join(sv.th, NULL);
  ot_server_free(sv.s);
  const size_t ws = workspace_settles(ws0);
  th_check(t.bad == 0, "%d requests of 5 kinds answered as expected (%d not)", t.ok, t.bad);
  const double grow = ((double)rss2 - (double)rss1) / 1048576.0;
  th_check(rss1 > 0 && (UNDER_ASAN || grow < 2.0),
           "%d mixed requests in %.1f s: resident set %.1f -> %.1f MiB after %d warm-up requests "
           "(%+.2f MiB, bound 2%s)", N, dt, rss1 / 1048576.0, rss2 / 1048576.0, WARM, grow,
           UNDER_ASAN ? "; not checked under AddressSanitizer" : "");
  th_check(ws == ws0, "tracked workspace back to %zu bytes once the server is freed (%zu)", ws0, ws);
}

int main(void) {
  test_thread_scratch();
  ot_model_config c;
  ot_model_config_preset(&c, "tiny");
  c.vocab = 300;
  c.max_seq = CTX;
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  static const char corpus[] =
      "the quick brown fox jumps over the lazy dog. the dog sleeps; the fox runs away. "
      "a quick brown dog and a lazy fox: there, then, other, these, those, thin thimbles. "
      "the end <|endoftext|> the start again. ";
  ot_model *m = NULL;
  ot_bpe *bpe = NULL;
  if (th_check(ot_model_create(&m, &c, &run) == OT_OK && ot_model_init(m, 3) == OT_OK, "model: %s",
               ot_last_error()) &&
      th_check(ot_bpe_train(&bpe, corpus, sizeof corpus - 1, 300, false) == OT_OK, "tokenizer: %s",
               ot_last_error()))
    test_server(m, bpe);
  ot_bpe_free(bpe);
  ot_model_free(m);
  ot_scratch_release();
  return th_finish();
}
