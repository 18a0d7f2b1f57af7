// The accept loop of ot_server_run and its workers. The caller's thread
// accepts connections and reads their requests with poll(), so a connection
// holds only its buffer while its request arrives and idle or slow clients
// cost no worker: it has head_timeout_ms for the request line and headers and
// timeout_ms for the whole request (then 408), keepalive_ms of idleness
// between requests (then it is closed). A whole request goes to a worker
// thread (up to max_clients, started as requests need them, kept until the
// loop ends); when all of them are taken it waits (up to max_clients requests,
// busy_wait_ms each) for one to come back, and past that the loop answers 429 with
// Retry-After: a client that sends its next request the moment it has read an
// answer is not refused for the instant its worker is still finishing. A worker answers and gives the connection back; the loop then
// reads its next request (pipelined bytes already read stay in the buffer, so
// requests are answered in order) or closes it: a half-close, then what the
// client still sends is read and dropped for a moment (LINGER), so that
// closing does not reset the connection before the client read the answer.
#define _GNU_SOURCE   // accept4, POLLRDHUP
#include "serve/serve_impl.h"
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define LINGER_MS 200
#define LINGER_MAX (1u << 20)   // bytes dropped while lingering before closing anyway
#define RETRY_AFTER "Retry-After: 1\r\n"

static void wake_loop(ot_server *s) {
  char b = 1;
  ssize_t k = write(s->wake[1], &b, 1);   // a full pipe wakes the loop just as well
  (void)k;
}

// ---------------------------------------------------------------- workers ---
static void *worker_main(void *arg) {
  ot_server *s = arg;
  pthread_mutex_lock(&s->wmu);
  for (;;) {
    while (!s->queue && !s->quit) pthread_cond_wait(&s->wcv, &s->wmu);
    ot__conn *c = s->queue;
    if (!c) break;   // quit and nothing left
    s->queue = c->next;
    if (!s->queue) s->queue_tail = NULL;
    pthread_mutex_unlock(&s->wmu);
    ot__serve_request(c);
    pthread_mutex_lock(&s->wmu);
    s->busy--;
    c->next = s->given_back;
    s->given_back = c;
    wake_loop(s);
  }
  pthread_mutex_unlock(&s->wmu);
  return NULL;
}

// Under wmu: one more worker, started with every signal blocked (signals are
// for the thread that runs the loop). false when it cannot be started.
static bool worker_start(ot_server *s) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const bool ok = pthread_create(&s->workers[s->nworkers], NULL, worker_main, s) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (ok) s->nworkers++;
  return ok;
}

// ------------------------------------------------------------ connections ---
static void conn_close(ot__conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
  c->state = OT__CONN_CLOSED;
}

// A new request begins at buf[0] (len bytes of it may be there already).
static void req_reset(ot__conn *c, double now) {
  memset(&c->req, 0, sizeof c->req);
  memset(&c->hi, 0, sizeof c->hi);
  memset(&c->chunk, 0, sizeof c->chunk);
  c->scanned = c->head_len = c->req_len = 0;
  c->keep = c->dead = c->cancelled = false;
  c->nowait = true;
  c->status = c->tokens_in = c->tokens_out = 0;
  c->t0 = c->idle_since = now;
  c->state = OT__CONN_READ;
}

// After the last answer: a half-close and a moment of draining, or (client
// gone or done sending, server stopping) closed at once.
static void conn_finish(ot__conn *c) {
  if (c->dead || c->eof || ot__stopping(c->srv)) { conn_close(c); return; }
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
  shutdown(c->fd, SHUT_WR);
  c->state = OT__CONN_LINGER;
  c->linger_end = ot_now() + LINGER_MS * 1e-3;
  c->drained = 0;
}

// The loop's own answer (small, sent without waiting), then the end.
static void conn_fail(ot__conn *c, int status, const char *extra, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void conn_fail(ot__conn *c, int status, const char *extra, const char *code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->keep = false;
  c->nowait = true;
  ot__respond_error_h(c, status, extra, NULL, code, "%s", msg);
  ot__log_request(c);
  conn_finish(c);
}

// Hands a whole request to a worker; false when every one is taken (or none can start).
static bool to_worker(ot__conn *c) {
  ot_server *s = c->srv;
  pthread_mutex_lock(&s->wmu);
  // a worker for each request handed out; if one cannot start, the request
  // waits for one that is busy
  const bool served = s->busy < s->cfg.max_clients &&
                      (s->nworkers > s->busy || worker_start(s) || s->nworkers > 0);
  if (served) {
    s->busy++;
    c->state = OT__CONN_WORK;
    c->nowait = false;
    c->next = NULL;
    if (s->queue_tail) s->queue_tail->next = c;
    else s->queue = c;
    s->queue_tail = c;
    pthread_cond_signal(&s->wcv);
  }
  pthread_mutex_unlock(&s->wmu);
  return served;
}

static void refuse_busy(ot__conn *c) {
  ot_server *s = c->srv;
  if (s->nworkers == 0)
    conn_fail(c, 503, RETRY_AFTER, "server_busy", "cannot start a worker thread; retry in a moment");
  else
    conn_fail(c, 429, RETRY_AFTER, "server_busy", "the server is busy: all %d request slots (max_clients) are "
              "taken; retry in a moment", s->cfg.max_clients);
}

// A whole request: to a worker, else it waits for one (up to max_clients
// requests wait), else 429.
static void conn_dispatch(ot__conn *c) {
  ot_server *s = c->srv;
  if (to_worker(c)) return;
  if (s->nwait >= s->cfg.max_clients) { refuse_busy(c); return; }
  c->state = OT__CONN_WAIT;
  c->wait_end = ot_now() + s->cfg.busy_wait_ms * 1e-3;
  c->wait_seq = ++s->wait_seq;
  s->nwait++;
}

// Waiting requests to the workers that came back, first come first served;
// those that waited busy_wait_ms get their 429.
static void serve_waiting(ot_server *s, double now) {
  while (s->nwait > 0) {
    ot__conn *first = NULL;
    for (int i = 0; i < s->nconns; i++) {
      ot__conn *c = s->conns[i];
      if (c->state == OT__CONN_WAIT && (!first || c->wait_seq < first->wait_seq)) first = c;
    }
    if (!first || !to_worker(first)) break;
    s->nwait--;
  }
  for (int i = 0; i < s->nconns && s->nwait > 0; i++) {
    ot__conn *c = s->conns[i];
    if (c->state != OT__CONN_WAIT || now < c->wait_end) continue;
    s->nwait--;
    refuse_busy(c);
  }
}

// The most raw bytes a request with a chunked body may take: the head, the body limit
// and as much again of chunk framing (plus 64 KiB).
static size_t chunked_cap(const ot__conn *c) {
  return c->head_len + 2 * c->srv->cfg.max_body + (64u << 10);
}

// Looks at what arrived: the head once it is whole, then the body; hands a
// whole request on, answers a malformed or oversized one.
static void conn_advance(ot__conn *c) {
  ot_server *s = c->srv;
  const ot_server_config *k = &s->cfg;
  if (!c->head_len) {
    const size_t he = ot__head_end(c->buf, c->len, c->scanned);
    c->scanned = c->len >= 2 ? c->len - 2 : 0;
    if (!he) {
      if (c->len >= k->max_header)
        conn_fail(c, 431, NULL, NULL, "the request line and headers exceed %zu bytes", k->max_header);
      else if (c->eof && c->len)
        conn_fail(c, 400, NULL, NULL, "the request head ended early");
      else if (c->eof)
        conn_close(c);   // closed without (another) request
      return;
    }
    const int st = ot__parse_head(c->buf, he, &c->req, &c->hi);
    if (st) { conn_fail(c, st, NULL, NULL, "%s", c->hi.err); return; }
    if (c->hi.len > k->max_body) {
      conn_fail(c, 413, NULL, NULL, "the body of %llu bytes exceeds the limit of %zu bytes",
                (unsigned long long)c->hi.len, k->max_body);
      return;
    }
    c->head_len = he;
    // a chunked body's end is known once decoded: until then the raw bytes may run to
    // the body limit plus its framing
    c->req_len = c->hi.chunked ? chunked_cap(c) : he + (size_t)c->hi.len;
    if (c->hi.chunked) ot__chunked_init(&c->chunk, he);
    c->keep = k->keepalive_ms > 0 && (c->hi.conn == 1 || (c->hi.conn == -1 && c->hi.minor == 1));
    if (c->hi.expect_continue && c->len < c->req_len) {
      static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      if (!ot__send(c, cont, sizeof cont - 1)) { conn_close(c); return; }
    }
  }
  if (c->hi.chunked && c->chunk.state != 4) {
    char err[160];
    const int st = ot__chunked_feed(&c->chunk, c->buf, c->len, c->head_len, k->max_body, err, sizeof err);
    if (st > 1) { conn_fail(c, st, NULL, NULL, "%s", err); return; }
    if (st == 1) {   // framed now: the decoded body, then (from req_len) the next request
      c->hi.has_len = true;
      c->hi.len = c->chunk.out - c->head_len;
      c->req_len = c->chunk.raw;
      conn_dispatch(c);
    } else if (c->len >= chunked_cap(c)) {
      conn_fail(c, 413, NULL, NULL, "the chunked body's framing exceeds %zu bytes (send larger chunks)",
                chunked_cap(c) - c->head_len);
    } else if (c->eof) {
      conn_fail(c, 400, NULL, NULL, "the chunked body ended before its last (zero-size) chunk");
    }
    return;
  }
  if (c->len >= c->req_len) conn_dispatch(c);
  else if (c->eof) conn_fail(c, 400, NULL, NULL, "the body ended before Content-Length bytes");
}

// READ and readable: takes what is there (up to the end of the head's limit,
// or of the request once its length is known).
static void conn_read(ot__conn *c, double now) {
  const ot_server_config *k = &c->srv->cfg;
  for (;;) {
    const size_t limit = c->head_len ? c->req_len : k->max_header;
    if (c->len >= limit) break;
    if (c->len == c->cap) {
      size_t cap = c->cap ? 2 * c->cap : 4096;
      if (cap > limit) cap = limit;
      char *p = realloc(c->buf, cap);
      if (!p) { conn_fail(c, 503, RETRY_AFTER, NULL, "out of memory"); return; }
      c->buf = p;
      c->cap = cap;
    }
    const ssize_t n = recv(c->fd, c->buf + c->len, (c->cap < limit ? c->cap : limit) - c->len, MSG_DONTWAIT);
    if (n > 0) {
      if (c->len == 0 && c->served > 0) c->t0 = now;   // a later request starts
      c->len += (size_t)n;
      continue;
    }
    if (n == 0) { c->eof = true; break; }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    conn_close(c);   // reset by the client
    return;
  }
  conn_advance(c);
}

// LINGER and readable: drops what comes; closes at the end of the stream.
static void conn_drain(ot__conn *c) {
  char tmp[4096];
  for (;;) {
    const ssize_t n = recv(c->fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (n > 0 && (c->drained += (size_t)n) <= LINGER_MAX) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    conn_close(c);
    return;
  }
}

static double conn_deadline(const ot__conn *c) {
  const ot_server_config *k = &c->srv->cfg;
  if (c->state == OT__CONN_LINGER) return c->linger_end;
  if (c->state == OT__CONN_WAIT) return c->wait_end;
  if (c->len == 0 && c->served > 0) return c->idle_since + k->keepalive_ms * 1e-3;
  if (!c->head_len) return c->t0 + (k->head_timeout_ms < k->timeout_ms ? k->head_timeout_ms : k->timeout_ms) * 1e-3;
  return c->t0 + k->timeout_ms * 1e-3;
}

static void conn_expire(ot__conn *c) {
  const ot_server_config *k = &c->srv->cfg;
  if (c->state == OT__CONN_LINGER || (c->len == 0 && c->served > 0)) conn_close(c);   // idle kept-alive: quietly
  else if (!c->head_len)
    conn_fail(c, 408, NULL, "timeout", "the request head did not arrive within %d ms",
              k->head_timeout_ms < k->timeout_ms ? k->head_timeout_ms : k->timeout_ms);
  else
    conn_fail(c, 408, NULL, "timeout", "the request body did not arrive within %d ms", k->timeout_ms);
}

// ------------------------------------------------------------- the table ---
static void sweep(ot_server *s) {
  int n = 0;
  for (int i = 0; i < s->nconns; i++) {
    if (s->conns[i]->state == OT__CONN_CLOSED) free(s->conns[i]);
    else s->conns[n++] = s->conns[i];
  }
  s->nconns = n;
}

// The table is full: closes the connection idle longest between requests. false if none is.
static bool make_room(ot_server *s) {
  ot__conn *v = NULL;
  for (int i = 0; i < s->nconns; i++) {
    ot__conn *c = s->conns[i];
    if (c->state == OT__CONN_READ && c->len == 0 && c->served > 0 && (!v || c->idle_since < v->idle_since)) v = c;
  }
  if (!v) return false;
  conn_close(v);
  sweep(s);
  return true;
}

// No room for a new connection: 429 at once, then closed.
static void refuse(ot_server *s, int fd, double now) {
  ot__conn c;
  memset(&c, 0, sizeof c);
  c.srv = s;
  c.fd = fd;
  c.nowait = true;
  c.t0 = now;
  char tmp[4096];
  for (int i = 0; i < 16 && recv(fd, tmp, sizeof tmp, MSG_DONTWAIT) > 0; i++) {}
  ot__respond_error_h(&c, 429, RETRY_AFTER, NULL, "server_busy", "the server is busy: %d connections are open "
                      "(max_connections); retry in a moment", s->cfg.max_connections);
  ot__log_request(&c);
  shutdown(fd, SHUT_WR);
  close(fd);
}

static void accept_some(ot_server *s, double now) {
  for (int i = 0; i < 64; i++) {
    const int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
        s->accept_after = now + 0.05;   // out of descriptors: others may close meanwhile
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ot__conn *c = NULL;
    if ((s->nconns < s->cfg.max_connections || make_room(s)) && (c = calloc(1, sizeof *c))) {
      c->srv = s;
      c->fd = fd;
      req_reset(c, now);
      s->conns[s->nconns++] = c;
    } else {
      refuse(s, fd, now);
    }
  }
}

// The connections the workers are done with: the next request, or the end.
static void take_given_back(ot_server *s, double now) {
  pthread_mutex_lock(&s->wmu);
  ot__conn *list = s->given_back;
  s->given_back = NULL;
  pthread_mutex_unlock(&s->wmu);
  while (list) {
    ot__conn *c = list;
    list = c->next;
    if (!c->keep || c->dead || ot__stopping(s)) { conn_finish(c); continue; }
    const size_t rest = c->len - c->req_len;   // pipelined bytes of the next requests
    memmove(c->buf, c->buf + c->req_len, rest);
    c->len = rest;
    if (!rest) {   // an idle connection keeps no buffer
      free(c->buf);
      c->buf = NULL;
      c->cap = 0;
    }
    c->served++;
    req_reset(c, now);
    if (rest || c->eof) conn_advance(c);
  }
}

// ------------------------------------------------------------------ loop ---
ot_status ot_server_run(ot_server *s) {
  static const char fn[] = "ot_server_run";
  OT_CHECK_PTR(s, fn);
  const size_t cap = (size_t)s->cfg.max_connections + 2;
  struct pollfd *pf = malloc(sizeof *pf * cap);
  ot__conn **who = malloc(sizeof *who * cap);
  if (!pf || !who) {
    free(pf);
    free(who);
    return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  }
  while (!ot__stopping(s)) {
    double now = ot_now(), next = now + 1.0;
    int np = 0;
    pf[np++] = (struct pollfd){s->wake[0], POLLIN, 0};
    const bool listening = now >= s->accept_after;
    if (listening) pf[np++] = (struct pollfd){s->lfd, POLLIN, 0};
    else if (s->accept_after < next) next = s->accept_after;
    const int first = np;
    for (int i = 0; i < s->nconns; i++) {
      ot__conn *c = s->conns[i];
      if (c->state == OT__CONN_WAIT && c->wait_end < next) next = c->wait_end;
      if (c->state != OT__CONN_READ && c->state != OT__CONN_LINGER) continue;
      const double d = conn_deadline(c);
      if (d < next) next = d;
      pf[np] = (struct pollfd){c->fd, POLLIN | POLLRDHUP, 0};
      who[np++] = c;
    }
    const int ms = next <= now ? 0 : (int)((next - now) * 1e3) + 1;
    const int n = poll(pf, (nfds_t)np, ms);
    now = ot_now();
    if (n > 0 && pf[0].revents) {
      char b[64];
      while (read(s->wake[0], b, sizeof b) > 0) {}
    }
    if (ot__stopping(s)) break;
    take_given_back(s, now);
    serve_waiting(s, now);
    for (int i = first; i < np && n > 0; i++) {
      if (!pf[i].revents) continue;
      if (who[i]->state == OT__CONN_READ) conn_read(who[i], now);
      else if (who[i]->state == OT__CONN_LINGER) conn_drain(who[i]);
    }
    for (int i = 0; i < s->nconns; i++) {
      ot__conn *c = s->conns[i];
      if ((c->state == OT__CONN_READ || c->state == OT__CONN_LINGER) && now >= conn_deadline(c)) conn_expire(c);
    }
    sweep(s);
    if (listening && n > 0 && pf[1].revents) accept_some(s, now);
  }
  // stopping: the workers' requests see it and end; then every connection closes
  atomic_store(&s->stopping, true);
  pthread_mutex_lock(&s->wmu);
  s->quit = true;
  pthread_cond_broadcast(&s->wcv);
  pthread_mutex_unlock(&s->wmu);
  for (int i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
  s->nworkers = 0;
  take_given_back(s, ot_now());
  for (int i = 0; i < s->nconns; i++) conn_close(s->conns[i]);
  sweep(s);
  free(pf);
  free(who);
  return OT_OK;
}

void ot_server_stop(ot_server *s) {
  if (!s) return;
  atomic_store(&s->stopping, true);
  wake_loop(s);
}
