// HTTP/1.1 messages: request heads parsed (for the accept loop of
// conn.c), responses and OpenAI-style errors written (Connection:
// keep-alive or close), the routing of a whole request to the endpoints of
// api.c (on a worker thread); the server's config, socket and lifetime.
#define _GNU_SOURCE   // pipe2, POLLRDHUP
#include "serve/serve_impl.h"
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

bool ot__stopping(const ot_server *s) { return atomic_load(&s->stopping); }

static const char *reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

bool ot__send(ot__conn *c, const void *p, size_t n) {
  const char *q = p;
  double last = ot_now();
  while (n > 0 && !c->dead) {
    ssize_t k = send(c->fd, q, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) { q += k; n -= (size_t)k; last = ot_now(); continue; }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (c->nowait || ot__stopping(c->srv) || ot_now() - last > c->srv->cfg.timeout_ms * 1e-3) break;
      struct pollfd pf = {c->fd, POLLOUT, 0};
      poll(&pf, 1, 100);
      continue;
    }
    break;
  }
  if (n > 0) c->dead = true;
  return n == 0;
}

bool ot__conn_gone(ot__conn *c) {
  if (c->dead || ot__stopping(c->srv)) return true;
  struct pollfd pf = {c->fd, POLLRDHUP, 0};
  if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) c->dead = true;
  return c->dead;
}

void ot__respond(ot__conn *c, int status, const char *ctype, const char *body, size_t n,
                 const char *extra_headers) {
  char head[512];
  int k = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                   "Connection: %s\r\nServer: ot\r\n%s\r\n", status, reason(status), ctype, n,
                   c->keep ? "keep-alive" : "close", extra_headers ? extra_headers : "");
  c->status = status;
  if (ot__send(c, head, (size_t)k) && n) ot__send(c, body, n);
}

static void respond_error_v(ot__conn *c, int status, const char *extra, const char *param,
                            const char *code, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  ot__sbuf clean = {0}, b = {0};
  ot__utf8_take(msg, strlen(msg), true, &clean);   // messages may quote request bytes
  ot__sb_puts(&b, "{\"error\":{\"message\":");
  ot__sb_json_str(&b, clean.p ? clean.p : "", clean.len);
  ot__sb_printf(&b, ",\"type\":\"%s\",\"param\":", status >= 500 ? "server_error" : "invalid_request_error");
  if (param) ot__sb_json_str(&b, param, strlen(param));
  else ot__sb_puts(&b, "null");
  ot__sb_puts(&b, ",\"code\":");
  if (code) ot__sb_json_str(&b, code, strlen(code));
  else ot__sb_puts(&b, "null");
  ot__sb_puts(&b, "}}\n");
  if (!b.oom) ot__respond(c, status, "application/json", b.p, b.len, extra);
  else c->dead = true;
  ot__sb_free(&clean);
  ot__sb_free(&b);
}

void ot__respond_error(ot__conn *c, int status, const char *param, const char *code,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  respond_error_v(c, status, NULL, param, code, fmt, ap);
  va_end(ap);
}

void ot__respond_error_h(ot__conn *c, int status, const char *extra, const char *param, const char *code,
                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  respond_error_v(c, status, extra, param, code, fmt, ap);
  va_end(ap);
}

size_t ot__head_end(const char *b, size_t n, size_t from) {
  for (size_t i = from; i < n; i++) {
    if (b[i] != '\n') continue;
    if (i + 1 < n && b[i + 1] == '\n') return i + 2;
    if (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n') return i + 3;
  }
  return 0;
}

static bool is_tchar(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

// Whether the comma-separated list v[0, n) holds token tok (any case).
static bool has_token(const char *v, size_t n, const char *tok) {
  const size_t tl = strlen(tok);
  for (size_t i = 0; i < n;) {
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    size_t e = i;
    while (e < n && v[e] != ',') e++;
    size_t te = e;
    while (te > i && (v[te - 1] == ' ' || v[te - 1] == '\t')) te--;
    if (te - i == tl && !strncasecmp(v + i, tok, tl)) return true;
    i = e;
  }
  return false;
}

int ot__parse_head(const char *h, size_t n, ot__http_req *r, ot__head_info *hi) {
  memset(hi, 0, sizeof *hi);
  hi->conn = -1;
  char te_bad[48] = "";   // a transfer coding other than one 'chunked'
  const char *p = h, *end = h + n;
  int line_no = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) nl = end;
    const char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
    const char *next = nl < end ? nl + 1 : end;
    for (const char *q = p; q < le; q++)
      if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f) {
        snprintf(hi->err, sizeof hi->err, "control byte 0x%02x in the request head", (unsigned char)*q);
        return 400;
      }
    if (line_no++ == 0) {   // METHOD SP TARGET SP HTTP/1.x
      const char *sp1 = memchr(p, ' ', (size_t)(le - p));
      const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1)) : NULL;
      if (!sp1 || !sp2 || sp1 == p || (size_t)(sp1 - p) >= sizeof r->method || sp2 == sp1 + 1) {
        snprintf(hi->err, sizeof hi->err, "malformed request line (want METHOD /path HTTP/1.1)");
        return 400;
      }
      for (const char *q = p; q < sp1; q++)
        if (!is_tchar(*q)) { snprintf(hi->err, sizeof hi->err, "malformed method"); return 400; }
      memcpy(r->method, p, (size_t)(sp1 - p));
      r->method[sp1 - p] = 0;
      const char *t = sp1 + 1, *te = sp2;
      const char *qm = memchr(t, '?', (size_t)(te - t));
      if (qm) te = qm;
      if (*t != '/') {
        snprintf(hi->err, sizeof hi->err, "the request target must start with '/'");
        return 400;
      }
      if ((size_t)(te - t) >= sizeof r->path) {
        snprintf(hi->err, sizeof hi->err, "the path is longer than %zu bytes", sizeof r->path - 1);
        return 414;
      }
      memcpy(r->path, t, (size_t)(te - t));
      r->path[te - t] = 0;
      const size_t vl = (size_t)(le - sp2 - 1);
      if (vl != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1')) {
        const bool http = vl >= 5 && memcmp(sp2 + 1, "HTTP/", 5) == 0;
        snprintf(hi->err, sizeof hi->err, http ? "only HTTP/1.0 and HTTP/1.1 are served"
                                                : "malformed request line (want METHOD /path HTTP/1.1)");
        return http ? 505 : 400;
      }
      hi->minor = sp2[8] - '0';
    } else if (le > p) {    // name: value
      const char *colon = memchr(p, ':', (size_t)(le - p));
      if (!colon || colon == p) { snprintf(hi->err, sizeof hi->err, "malformed header line"); return 400; }
      for (const char *q = p; q < colon; q++)
        if (!is_tchar(*q)) { snprintf(hi->err, sizeof hi->err, "malformed header name"); return 400; }
      const char *v = colon + 1, *ve = le;
      while (v < ve && (*v == ' ' || *v == '\t')) v++;
      while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
      const size_t nl_ = (size_t)(colon - p), vl = (size_t)(ve - v);
      if (nl_ == 14 && !strncasecmp(p, "content-length", 14)) {
        uint64_t x = 0;
        bool ok = vl > 0 && vl <= 18;
        for (size_t i = 0; ok && i < vl; i++) {
          ok = v[i] >= '0' && v[i] <= '9';
          x = x * 10 + (uint64_t)(v[i] - '0');
        }
        if (!ok || (hi->has_len && hi->len != x)) {
          snprintf(hi->err, sizeof hi->err, "invalid Content-Length");
          return 400;
        }
        hi->has_len = true;
        hi->len = x;
      } else if (nl_ == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
        // the one coding served is chunked, alone, on one header line
        if (!te_bad[0] && (hi->has_te || vl != 7 || strncasecmp(v, "chunked", 7)))
          snprintf(te_bad, sizeof te_bad, "%.*s", (int)(vl < 40 ? vl : 40), hi->has_te ? "chunked, ..." : v);
        hi->has_te = true;
      } else if (nl_ == 10 && !strncasecmp(p, "connection", 10)) {
        if (has_token(v, vl, "close")) hi->conn = 0;
        else if (hi->conn != 0 && has_token(v, vl, "keep-alive")) hi->conn = 1;
      } else if (nl_ == 6 && !strncasecmp(p, "expect", 6)) {
        hi->expect_continue = vl == 12 && !strncasecmp(v, "100-continue", 12);
      }
    }
    p = next;
  }
  // Bodies are framed by Content-Length or by the chunked coding alone. Both headers at
  // once is the shape of request smuggling: RFC 9112 6.1 says refuse.
  if (hi->has_te && hi->has_len) {
    snprintf(hi->err, sizeof hi->err, "both Transfer-Encoding and Content-Length: send the body with "
             "one of them");
    return 400;
  }
  if (te_bad[0]) {
    snprintf(hi->err, sizeof hi->err, "Transfer-Encoding '%s' is unsupported by this server (only "
             "'chunked' alone): send the body chunked or with a Content-Length header", te_bad);
    return 501;
  }
  if (hi->has_te && hi->minor == 0) {
    snprintf(hi->err, sizeof hi->err, "Transfer-Encoding in an HTTP/1.0 request: send the body with "
             "a Content-Length header (or use HTTP/1.1)");
    return 400;
  }
  hi->chunked = hi->has_te;
  return 0;
}

// ------------------------------------------------------------- chunked -----
void ot__chunked_init(ot__chunked *d, size_t start) {
  memset(d, 0, sizeof *d);
  d->raw = d->out = start;
}

// The end of the line starting at buf[from] (the index of its '\n'), or 0 when it has not
// arrived; *len: its length without CR LF.
static size_t line_end(const char *buf, size_t n, size_t from, size_t *len) {
  const char *nl = memchr(buf + from, '\n', n - from);
  if (!nl) return 0;
  const size_t e = (size_t)(nl - buf);
  *len = e - from - (e > from && buf[e - 1] == '\r');
  return e;
}

int ot__chunked_feed(ot__chunked *d, char *buf, size_t n, size_t start, size_t max_body, char *err,
                     size_t cap) {
  enum { LINE_MAX_ = 4096 };
  while (d->state != 4) {
    if (d->state == 1) {   // chunk data: moved down to out
      if (d->raw >= n) return 0;
      size_t k = n - d->raw < d->left ? n - d->raw : (size_t)d->left;
      memmove(buf + d->out, buf + d->raw, k);
      d->out += k;
      d->raw += k;
      d->left -= k;
      if (!d->left) d->state = 2;
      continue;
    }
    size_t len = 0;
    const size_t e = d->raw < n ? line_end(buf, n, d->raw, &len) : 0;
    if (!e) {
      if (n - d->raw > LINE_MAX_) {
        snprintf(err, cap, "a chunk-size or trailer line longer than %d bytes", LINE_MAX_);
        return 400;
      }
      return 0;
    }
    const char *l = buf + d->raw;
    d->raw = e + 1;
    if (d->state == 2) {   // the CRLF that ends a chunk's data
      if (len) { snprintf(err, cap, "chunk data longer than its size (no CRLF after it)"); return 400; }
      d->state = 0;
    } else if (d->state == 3) {   // trailer fields until an empty line
      if (!len) d->state = 4;
    } else {   // chunk-size [; extensions]
      uint64_t size = 0;
      size_t i = 0;
      for (; i < len && i < 16; i++) {
        const char ch = l[i];
        const int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                      : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (v < 0) break;
        size = size * 16 + (uint64_t)v;
      }
      if (i == 0 || (i < len && l[i] != ';' && l[i] != ' ' && l[i] != '\t')) {
        snprintf(err, cap, "malformed chunk size '%.*s' (want hexadecimal digits)", (int)(len < 20 ? len : 20), l);
        return 400;
      }
      if (size > max_body || d->out - start + size > max_body) {
        snprintf(err, cap, "the chunked body exceeds the limit of %zu bytes", max_body);
        return 413;
      }
      d->left = size;
      d->state = size ? 1 : 3;
    }
  }
  return 1;
}

void ot__log_request(ot__conn *c) {
  ot_server *s = c->srv;
  if (!s->cfg.log || !c->status) return;
  const ot__http_req *r = &c->req;
  pthread_mutex_lock(&s->log_mu);
  fprintf(s->cfg.log, "%s %s %d", r->method[0] ? r->method : "-", r->path[0] ? r->path : "-", c->status);
  if (c->tokens_in || c->tokens_out) fprintf(s->cfg.log, " %d+%d tokens", c->tokens_in, c->tokens_out);
  fprintf(s->cfg.log, " %.3f s%s%s\n", ot_now() - c->t0, c->dead ? " (client gone)" : "",
          c->cancelled ? " (cancelled)" : "");
  fflush(s->cfg.log);
  pthread_mutex_unlock(&s->log_mu);
}

// ---------------------------------------------------------------- server ---
ot_server_config ot_server_config_default(void) {
  ot_server_config c;
  memset(&c, 0, sizeof c);
  c.max_clients = 16;
  c.max_connections = 512;
  c.max_batch = 4;
  c.max_body = 1u << 20;
  c.max_header = 16u << 10;
  c.head_timeout_ms = 5000;
  c.timeout_ms = 30000;
  c.keepalive_ms = 5000;
  c.default_max_tokens = 16;
  c.busy_wait_ms = 500;
  c.beam = 4;
  return c;
}

// Binds host:port and listens; OT_EIO naming the address and the reason.
static ot_status listen_on(ot_server *s) {
  char port[16];
  snprintf(port, sizeof port, "%d", s->cfg.port);
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  int e = getaddrinfo(s->host, port, &hints, &ai);
  if (e)
    return ot_error(OT_EINVAL, "ot_server_create: host '%s' is not a numeric IPv4/IPv6 address (%s)", s->host,
                    gai_strerror(e));
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
  ot_status st = OT_OK;
  if (fd < 0) st = ot_error(OT_EIO, "ot_server_create: socket: %s", strerror(errno));
  else setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (st == OT_OK && (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0))
    st = ot_error(OT_EIO, "ot_server_create: cannot listen on %s port %d: %s (choose another --port, or 0 for "
                  "any free one)", s->host, s->cfg.port, strerror(errno));
  freeaddrinfo(ai);
  if (st == OT_OK) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                             : ((struct sockaddr_in *)&sa)->sin_port);
    s->lfd = fd;
  } else if (fd >= 0) {
    close(fd);
  }
  return st;
}

ot_status ot_server_create(ot_server **out, const ot_server_config *cfg, const ot_model *m,
                           const ot_bpe *tok) {
  static const char fn[] = "ot_server_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(cfg, fn);
  OT_CHECK_PTR(m, fn);
  const ot_model_config *mc = ot_model_config_of(m);
  const ot_server_config *c = cfg;
  if (c->port < 0 || c->port > 65535)
    return ot_error(OT_EINVAL, "%s: port=%d must be in [0, 65535] (0: any free port)", fn, c->port);
  if (c->max_clients < 1 || c->max_clients > 65536)
    return ot_error(OT_EINVAL, "%s: max_clients=%d must be in [1, 65536]", fn, c->max_clients);
  if (c->max_connections < c->max_clients || c->max_connections > (1 << 20))
    return ot_error(OT_EINVAL, "%s: max_connections=%d must be in [max_clients=%d, %d] (idle connections "
                    "included)", fn, c->max_connections, c->max_clients, 1 << 20);
  if (c->max_body < 1) return ot_error(OT_EINVAL, "%s: max_body must be >= 1 byte", fn);
  if (c->max_header < 256)
    return ot_error(OT_EINVAL, "%s: max_header=%zu must be >= 256 bytes", fn, c->max_header);
  if (c->timeout_ms < 1) return ot_error(OT_EINVAL, "%s: timeout_ms=%d must be >= 1", fn, c->timeout_ms);
  if (c->head_timeout_ms < 1)
    return ot_error(OT_EINVAL, "%s: head_timeout_ms=%d must be >= 1", fn, c->head_timeout_ms);
  if (c->keepalive_ms < 0)
    return ot_error(OT_EINVAL, "%s: keepalive_ms=%d must be >= 0 (0: a connection per request)", fn,
                    c->keepalive_ms);
  if (c->busy_wait_ms < 0)
    return ot_error(OT_EINVAL, "%s: busy_wait_ms=%d must be >= 0 (0: 429 at once when every worker is busy)",
                    fn, c->busy_wait_ms);
  if (c->default_max_tokens < 1)
    return ot_error(OT_EINVAL, "%s: default_max_tokens=%d must be >= 1", fn, c->default_max_tokens);
  if (tok && ot_bpe_vocab_size(tok) > mc->vocab)
    return ot_error(OT_EINVAL, "%s: the tokenizer has %d tokens but the model only %d: not its tokenizer",
                    fn, ot_bpe_vocab_size(tok), mc->vocab);
  const bool translate = mc->arch == OT_ARCH_ENCDEC;
  const int max_beam = c->max_beam ? c->max_beam : c->beam;
  if (translate && !tok)
    return ot_error(OT_EINVAL, "%s: '%s' is an encoder-decoder model: translations need its tokenizer "
                    "(give one)", fn, mc->name);
  if (translate && (c->beam < 1 || c->beam > 256 || max_beam < c->beam || max_beam > 256))
    return ot_error(OT_EINVAL, "%s: beam=%d must be in [1, 256] and max_beam=%d in [beam, 256] (0: beam)",
                    fn, c->beam, c->max_beam);
  ot_server *s = calloc(1, sizeof *s);
  if (!s) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  s->cfg = *c;
  s->cfg.max_beam = max_beam;
  s->translate = translate;
  s->lfd = s->wake[0] = s->wake[1] = -1;
  s->m = m;
  s->bpe = tok;
  s->eot = tok ? ot_bpe_eot(tok) : -1;
  s->started = (int64_t)time(NULL);
  atomic_init(&s->stopping, false);
  atomic_init(&s->counter, (uint_fast64_t)s->started << 20);
  pthread_mutex_init(&s->log_mu, NULL);
  pthread_mutex_init(&s->wmu, NULL);
  pthread_cond_init(&s->wcv, NULL);
  snprintf(s->host, sizeof s->host, "%s", c->host ? c->host : "127.0.0.1");
  snprintf(s->model_id, sizeof s->model_id, "%s", c->model_id && c->model_id[0] ? c->model_id : mc->name);
  s->cfg.host = s->host;
  s->cfg.model_id = s->model_id;
  ot_sched_config sc = {c->max_batch, c->max_seq, 0, c->batched, c->weights, c->group, c->kv_dtype,
                        c->kv_bytes, translate ? max_beam : 0};
  ot_status st = ot_sched_create(&s->sched, m, &sc);
  if (st == OT_OK) {
    s->ctx = ot_sched_capacity(s->sched);
    s->cfg.search = NULL;   // copied: the caller's struct may go (its arrays may not)
    if (c->search) {
      s->search = *c->search;
    } else {
      s->search = ot_beam_config_default();
      s->search.max_len_a = 1.2f;
      s->search.max_len_b = 10.0f;
    }
    s->search.vocab = mc->vocab;
    s->search.eos_id = mc->eos_id;
    s->search.pad_id = mc->pad_id;
    s->search.decoder_start_id = mc->decoder_start_id;
    s->search.num_beams = c->beam;
    s->search.max_length = s->ctx;
    s->conns = calloc((size_t)c->max_connections, sizeof *s->conns);
    s->workers = calloc((size_t)c->max_clients, sizeof *s->workers);
    if (!s->conns || !s->workers) st = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  }
  if (st == OT_OK && pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0)
    st = ot_error(OT_EIO, "%s: pipe: %s", fn, strerror(errno));
  if (st == OT_OK) st = listen_on(s);
  if (st != OT_OK) { ot_server_free(s); return st; }
  *out = s;
  return OT_OK;
}

int ot_server_port(const ot_server *s) { return s ? s->port : 0; }
ot_sched *ot_server_sched(ot_server *s) { return s ? s->sched : NULL; }

void ot_server_free(ot_server *s) {
  if (!s) return;
  ot_sched_free(s->sched);
  if (s->lfd >= 0) close(s->lfd);
  if (s->wake[0] >= 0) close(s->wake[0]);
  if (s->wake[1] >= 0) close(s->wake[1]);
  free(s->conns);
  free(s->workers);
  pthread_cond_destroy(&s->wcv);
  pthread_mutex_destroy(&s->wmu);
  pthread_mutex_destroy(&s->log_mu);
  free(s);
}
