// The server's connections (ot_server over loopback, a tiny GPT-2 model, token
// id prompts):
//  - 16 idle sockets and 4 that sent half a head (the default max_clients 16)
//    do not keep a real request from being answered at once;
//  - head_timeout_ms: an idle socket and a half head get 408 soon; a body
//    slower than timeout_ms gets 408 naming it;
//  - saturation: with every worker (max_clients 1) taken, a request gets 429
//    with Retry-After; once it is free again, requests are served;
//  - max_connections: a full table closes the longest idle kept-alive
//    connection for a new one, else answers 429 with Retry-After;
//  - keep-alive: HTTP/1.1 connections stay open, Connection: close is
//    honoured, HTTP/1.0 closes unless it asks for keep-alive, keepalive_ms
//    bounds the idle time (then closed without a response), keepalive_ms 0
//    closes after each response; a stream ends with its connection;
//  - pipelining: three requests in one write are answered in order.
#define _GNU_SOURCE
#include "model_common.h"
#include "ot/serve.h"
#include "serve_client.h"
#include <pthread.h>
#include <time.h>

#define CTX 64

static ot_model *g_model;

typedef struct { ot_server *s; pthread_t th; int port; } server;

static void *run_main(void *p) {
  ot_server_run(p);
  return NULL;
}

static bool server_start(server *sv, const ot_server_config *c) {
  memset(sv, 0, sizeof *sv);
  if (!th_check(ot_server_create(&sv->s, c, g_model, NULL) == OT_OK, "server create: %s", ot_last_error()))
    return false;
  sv->port = ot_server_port(sv->s);
  pthread_create(&sv->th, NULL, run_main, sv->s);
  return true;
}

static void server_stop(server *sv) {
  ot_server_stop(sv->s);
  pthread_join(sv->th, NULL);
  ot_server_free(sv->s);
}

static ot_server_config config(int max_clients) {
  ot_server_config c = ot_server_config_default();
  c.port = 0;
  c.max_clients = max_clients;
  c.max_batch = 2;
  return c;
}

static const char k_comp[] = "{\"prompt\": [3, 4, 5], \"max_tokens\": 4, \"temperature\": 0}";

static bool has_header(const http_resp *r, const char *line) {
  const char *he = strstr(r->all, "\r\n\r\n");
  const char *h = strstr(r->all, line);
  return h && he && h < he;
}

// Bytes until the end of the stream or 20 s (a connection the server closed: 0 more).
static size_t read_to_end(int fd, char *buf, size_t cap) {
  size_t n = 0;
  ssize_t k;
  while (n + 1 < cap && (k = recv(fd, buf + n, cap - 1 - n, 0)) > 0) n += (size_t)k;
  buf[n] = 0;
  return n;
}

// --------------------------------------------------------------- idle ---
static void test_idle(void) {
  server sv;
  ot_server_config c = config(16);   // the default max_clients
  if (!server_start(&sv, &c)) return;
  char req[512];
  const size_t n = post_bytes(req, sizeof req, "/v1/completions", k_comp, true);
  http_resp w = raw_request(sv.port, req, n, false);   // the first forward's one-time setup
  free(w.all);
  int fds[20];
  for (int i = 0; i < 20; i++) {
    fds[i] = dial(sv.port);
    if (i >= 16) send_all(fds[i], "POST /v1/completions HTTP/1.1\r\nHo", 33);
  }
  struct timespec ts = {0, 100 * 1000000L};
  nanosleep(&ts, NULL);   // all accepted
  const double t0 = ot_now();
  http_resp r = raw_request(sv.port, req, n, false);
  const double dt = ot_now() - t0;
  th_check(r.status == 200 && strstr(r.body, "\"completion_tokens\":4") && dt < 5.0,
           "16 idle sockets and 4 half heads, max_clients 16: a completion is answered %d in %.2f s", r.status,
           dt);
  free(r.all);
  for (int i = 0; i < 20; i++) close(fds[i]);
  server_stop(&sv);
}

// 408 for a head slower than head_timeout_ms and a body slower than timeout_ms.
static void test_head_timeout(void) {
  server sv;
  ot_server_config c = config(2);
  c.head_timeout_ms = 400;
  c.timeout_ms = 1500;
  if (!server_start(&sv, &c)) return;
  int idle = dial(sv.port), half = dial(sv.port), slow = dial(sv.port);
  send_all(half, "GET /health HTTP/1.1\r\nHo", 24);
  const char head[] = "POST /v1/completions HTTP/1.1\r\nContent-Length: 40\r\n\r\n{\"prompt\"";
  send_all(slow, head, sizeof head - 1);
  const double t0 = ot_now();
  http_resp a, b, d;
  read_resp(idle, &a);
  read_resp(half, &b);
  const double dt_head = ot_now() - t0;
  read_resp(slow, &d);
  const double dt_body = ot_now() - t0;
  th_check(a.status == 408 && b.status == 408 && strstr(b.body, "head did not arrive within 400 ms") &&
               dt_head > 0.3 && dt_head < 3.0,
           "head_timeout 400 ms: an idle socket and a half head get 408 after %.2f s (%d, %d: %.100s)", dt_head,
           a.status, b.status, b.body);
  th_check(d.status == 408 && strstr(d.body, "body did not arrive within 1500 ms") && dt_body > 1.2 &&
               dt_body < 5.0,
           "timeout 1500 ms: a slow body gets 408 after %.2f s (%d: %.100s)", dt_body, d.status, d.body);
  free(a.all);
  free(b.all);
  free(d.all);
  close(idle);
  close(half);
  close(slow);
  server_stop(&sv);
}

// ---------------------------------------------------------- saturation ---
// A request in the scheduler whose first token blocks it until released, so
// that the requests behind it wait (their workers stay taken).
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool held, release;
} hold;

static bool hold_token(void *ctx, int32_t tok) {
  (void)tok;
  hold *h = ctx;
  pthread_mutex_lock(&h->mu);
  h->held = true;
  pthread_cond_broadcast(&h->cv);
  while (!h->release) pthread_cond_wait(&h->cv, &h->mu);
  pthread_mutex_unlock(&h->mu);
  return false;
}

static void hold_release(hold *h) {
  pthread_mutex_lock(&h->mu);
  h->release = true;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

static bool wait_submitted(ot_sched *s, uint64_t n) {
  for (int i = 0; i < 500; i++) {
    ot_sched_stats st;
    ot_sched_stats_get(s, &st);
    if (st.submitted >= n) return true;
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return false;
}

static void test_saturation(void) {
  server sv;
  ot_server_config c = config(1);
  c.max_batch = 1;
  c.busy_wait_ms = 20000;   // generous: the check is that it waits, not how fast a loaded machine is
  if (!server_start(&sv, &c)) return;
  ot_sched *s = ot_server_sched(sv.s);
  hold h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
  static const int32_t one = 1;
  ot_sched_request rq = {&one, 1, 2, -1, {0.0f, 0, 1.0f, 1}, hold_token, NULL, &h};
  th_check(ot_sched_submit(s, &rq, NULL) == OT_OK, "hold submit: %s", ot_last_error());
  char req[512];
  const size_t n = post_bytes(req, sizeof req, "/v1/completions", k_comp, true);
  const int a = dial(sv.port);   // takes the only worker, waits behind the held request
  send_all(a, req, n);
  const bool queued = wait_submitted(s, 2);
  const char hq[] = "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
  http_resp b = raw_request(sv.port, hq, sizeof hq - 1, false);
  th_check(queued && b.status == 429 && has_header(&b, "\r\nRetry-After: 1\r\n") &&
               strstr(b.body, "\"code\":\"server_busy\"") && strstr(b.body, "max_clients"),
           "every worker taken: 429 with Retry-After (%d: %.160s)", b.status, b.body);
  free(b.all);
  hold_release(&h);
  http_resp ra;
  read_resp(a, &ra);
  close(a);
  http_resp after = raw_request(sv.port, hq, sizeof hq - 1, false);
  th_check(ra.status == 200 && after.status == 200, "released: the waiting request %d, the next one %d",
           ra.status, after.status);
  free(ra.all);
  free(after.all);
  server_stop(&sv);
}

typedef struct { hold *h; int ms; } delayed;
static void *release_later(void *p) {
  delayed *d = p;
  struct timespec ts = {0, d->ms * 1000000L};
  nanosleep(&ts, NULL);
  hold_release(d->h);
  return NULL;
}

// A whole request that finds every worker busy waits for one for a moment
// instead of a 429 at once: the only worker is freed 150 ms after the request
// arrives, and it is answered 200. Then 40 requests sent back to back, each on
// a new connection the moment the previous answer was read, are all answered
// (the worker may still be finishing the previous one when the next arrives).
static void test_busy_wait(void) {
  server sv;
  ot_server_config c = config(1);
  c.max_batch = 1;
  if (!server_start(&sv, &c)) return;
  ot_sched *s = ot_server_sched(sv.s);
  hold h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
  static const int32_t one = 1;
  ot_sched_request rq = {&one, 1, 2, -1, {0.0f, 0, 1.0f, 1}, hold_token, NULL, &h};
  th_check(ot_sched_submit(s, &rq, NULL) == OT_OK, "hold submit: %s", ot_last_error());
  char req[512];
  const size_t n = post_bytes(req, sizeof req, "/v1/completions", k_comp, true);
  const int a = dial(sv.port);   // takes the only worker, waits behind the held request
  send_all(a, req, n);
  wait_submitted(s, 2);
  delayed d = {&h, 150};
  pthread_t th;
  pthread_create(&th, NULL, release_later, &d);
  const char hq[] = "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
  http_resp b = raw_request(sv.port, hq, sizeof hq - 1, false);
  pthread_join(th, NULL);
  http_resp ra;
  read_resp(a, &ra);
  close(a);
  th_check(b.status == 200 && ra.status == 200, "a request finding the only worker busy waits for "
           "it: %d (and the held one %d)", b.status, ra.status);
  free(b.all);
  free(ra.all);
  int ok = 0;
  for (int i = 0; i < 40; i++) {
    http_resp r = raw_request(sv.port, hq, sizeof hq - 1, false);
    ok += r.status == 200;
    free(r.all);
  }
  th_check(ok == 40, "40 back-to-back requests on one worker: %d answered 200", ok);
  server_stop(&sv);
}

// A full connection table: the longest idle kept-alive connection makes room; else 429.
static void test_max_connections(void) {
  server sv;
  ot_server_config c = config(2);
  c.max_connections = 4;
  if (!server_start(&sv, &c)) return;
  const char hk[] = "GET /health HTTP/1.1\r\n\r\n", hq[] = "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
  const int kept = dial(sv.port);
  http_resp r0;
  send_all(kept, hk, sizeof hk - 1);
  read_resp(kept, &r0);   // now idle between requests
  int fresh[3];
  for (int i = 0; i < 3; i++) fresh[i] = dial(sv.port);
  struct timespec ts = {0, 100 * 1000000L};
  nanosleep(&ts, NULL);
  http_resp r1 = raw_request(sv.port, hq, sizeof hq - 1, false);   // the kept-alive one gives way
  char rest[256];
  const size_t nk = read_to_end(kept, rest, sizeof rest);
  th_check(r0.status == 200 && r1.status == 200 && nk == 0,
           "table of 4 full: an idle kept-alive connection is closed for a new one (%d, %d, %zu bytes)", r0.status,
           r1.status, nk);
  nanosleep(&ts, NULL);
  const int extra = dial(sv.port);   // 3 fresh + extra fill the table again
  nanosleep(&ts, NULL);
  http_resp r2 = raw_request(sv.port, hq, sizeof hq - 1, false);
  th_check(r2.status == 429 && has_header(&r2, "\r\nRetry-After: 1\r\n") && strstr(r2.body, "max_connections"),
           "table of 4 full, none idle between requests: 429 with Retry-After (%d: %.120s)", r2.status, r2.body);
  free(r0.all);
  free(r1.all);
  free(r2.all);
  close(kept);
  close(extra);
  for (int i = 0; i < 3; i++) close(fresh[i]);
  server_stop(&sv);
}

// ---------------------------------------------------------- keep-alive ---
static void test_keepalive(void) {
  server sv;
  ot_server_config c = config(4);
  c.keepalive_ms = 400;
  if (!server_start(&sv, &c)) return;
  // three requests one after the other on one connection; the last says close
  const int fd = dial(sv.port);
  char req[512];
  size_t n = post_bytes(req, sizeof req, "/v1/completions", k_comp, false);
  const char h11[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const char hclose[] = "GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n";
  http_resp r1, r2, r3;
  send_all(fd, h11, sizeof h11 - 1);
  read_resp(fd, &r1);
  send_all(fd, req, n);
  read_resp(fd, &r2);
  send_all(fd, hclose, sizeof hclose - 1);
  read_resp(fd, &r3);
  char rest[256];
  const size_t nr = read_to_end(fd, rest, sizeof rest);
  close(fd);
  th_check(r1.status == 200 && has_header(&r1, "\r\nConnection: keep-alive\r\n") && r2.status == 200 &&
               strstr(r2.body, "\"completion_tokens\":4") && r3.status == 200 &&
               has_header(&r3, "\r\nConnection: close\r\n") && strstr(r3.body, "\"object\":\"list\"") && nr == 0,
           "HTTP/1.1: 3 requests on one connection (%d, %d, %d); Connection: close ends it (%zu more bytes)",
           r1.status, r2.status, r3.status, nr);
  free(r1.all);
  free(r2.all);
  free(r3.all);
  // HTTP/1.0: closed unless it asks for keep-alive
  const char h10[] = "GET /health HTTP/1.0\r\n\r\n", h10k[] = "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
  int f0 = dial(sv.port);
  send_all(f0, h10, sizeof h10 - 1);
  http_resp a;
  read_resp(f0, &a);
  const size_t na = read_to_end(f0, rest, sizeof rest);
  close(f0);
  f0 = dial(sv.port);
  http_resp b1, b2;
  send_all(f0, h10k, sizeof h10k - 1);
  read_resp(f0, &b1);
  send_all(f0, h10k, sizeof h10k - 1);
  read_resp(f0, &b2);
  th_check(a.status == 200 && has_header(&a, "\r\nConnection: close\r\n") && na == 0 && b1.status == 200 &&
               b2.status == 200 && has_header(&b2, "\r\nConnection: keep-alive\r\n"),
           "HTTP/1.0 closes (%d), with Connection: keep-alive it stays open (%d, %d)", a.status, b1.status,
           b2.status);
  free(a.all);
  free(b1.all);
  free(b2.all);
  // the idle bound: closed without a response after keepalive_ms
  const double t0 = ot_now();
  const size_t ni = read_to_end(f0, rest, sizeof rest);
  const double dt = ot_now() - t0;
  close(f0);
  th_check(ni == 0 && dt > 0.25 && dt < 3.0, "keepalive 400 ms: an idle connection is closed after %.2f s, "
           "%zu bytes sent", dt, ni);
  // a stream ends with its connection
  const char sbody[] = "{\"prompt\": [7, 8], \"max_tokens\": 3, \"stream\": true}";
  n = post_bytes(req, sizeof req, "/v1/completions", sbody, false);
  const int fs = dial(sv.port);
  send_all(fs, req, n);
  static char all[1 << 14];
  read_to_end(fs, all, sizeof all);
  close(fs);
  th_check(strstr(all, "\r\nConnection: close\r\n") && strstr(all, "data: [DONE]\n\n"),
           "a stream says Connection: close and ends with [DONE] and the connection");
  server_stop(&sv);
  // keepalive_ms 0: a connection per request
  c.keepalive_ms = 0;
  if (!server_start(&sv, &c)) return;
  const int f1 = dial(sv.port);
  send_all(f1, h11, sizeof h11 - 1);
  http_resp z;
  read_resp(f1, &z);
  const size_t nz = read_to_end(f1, rest, sizeof rest);
  close(f1);
  th_check(z.status == 200 && has_header(&z, "\r\nConnection: close\r\n") && nz == 0,
           "keepalive 0: Connection: close after each response (%d)", z.status);
  free(z.all);
  server_stop(&sv);
}

// Three requests in one write: three responses, in order.
static void test_pipelining(void) {
  server sv;
  ot_server_config c = config(4);
  if (!server_start(&sv, &c)) return;
  char req[2048];
  size_t n = post_bytes(req, sizeof req, "/v1/completions", k_comp, false);
  n += (size_t)snprintf(req + n, sizeof req - n, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
  const int fd = dial(sv.port);
  send_all(fd, req, n);
  static char all[1 << 14];
  const size_t len = read_to_end(fd, all, sizeof all);
  close(fd);
  const char *want[3] = {"\"completion_tokens\":4", "\"object\":\"list\"", "\"status\":\"ok\""};
  size_t at = 0;
  int good = 0;
  for (int i = 0; i < 3; i++) {
    long clen;
    const size_t k = resp_len(all + at, len - at, &clen);
    if (!k || strncmp(all + at, "HTTP/1.1 200 ", 13)) break;
    char save = all[at + k];
    all[at + k] = 0;
    good += strstr(all + at, want[i]) != NULL;
    all[at + k] = save;
    at += k;
  }
  th_check(good == 3 && at == len, "3 pipelined requests in one write: %d answered in order, %zu of %zu bytes",
           good, at, len);
  server_stop(&sv);
}

int main(void) {
  ot_model_config mc = tm_cfg_gpt2(CTX);
  g_model = tm_make(&mc, 1, 1, OT_F32, 11);
  if (!g_model) return th_finish();
  test_idle();
  test_head_timeout();
  test_saturation();
  test_busy_wait();
  test_max_connections();
  test_keepalive();
  test_pipelining();
  ot_server *s = NULL;
  ot_server_config bc = config(8);
  bc.max_connections = 4;
  th_check_error(ot_server_create(&s, &bc, g_model, NULL), OT_EINVAL, "max_connections",
                 "server: max_connections below max_clients");
  bc = config(8);
  bc.head_timeout_ms = 0;
  th_check_error(ot_server_create(&s, &bc, g_model, NULL), OT_EINVAL, "head_timeout_ms", "server: head_timeout 0");
  bc = config(8);
  bc.busy_wait_ms = -1;
  th_check_error(ot_server_create(&s, &bc, g_model, NULL), OT_EINVAL, "busy_wait_ms", "server: busy_wait_ms -1");
  ot_model_free(g_model);
  return th_finish();
}
