// libFuzzer target: an HTTP request through the server's own parsing: the end
// of the head (ot__head_end), the head (ot__parse_head) and, for a POST with a
// Content-Length or a chunked body (decoded by ot__chunked_feed), the completion
// body exactly as POST /v1/completions checks it (ot__api_check_completion: JSON, fields, prompt encoding) against a tiny
// model's vocabulary and a small trained BPE, answering on a socketpair.
// Invariants: a refused head names why with a 4xx/5xx status; a refused body
// is answered with one complete JSON error; tracked memory returns to its start.
#define _GNU_SOURCE
#include "fuzz_common.h"
#include "io/json.h"
#include "serve/serve_impl.h"
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static ot_server g_srv;
static int g_sock[2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  ot_model_config c;
  ot_model_config_preset(&c, "tiny");
  c.vocab = 300;
  c.max_seq = 64;
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  static const char corpus[] = "the quick brown fox jumps over the lazy dog. the dog sleeps; the fox runs. "
                               "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 5 the end <|endoftext|> the start again. ";
  ot_bpe *bpe = NULL;
  FZ_CHECK(ot_model_create(&m, &c, &run) == OT_OK, "model: %s", ot_last_error());
  FZ_CHECK(ot_bpe_train(&bpe, corpus, sizeof corpus - 1, 300, false) == OT_OK, "bpe: %s", ot_last_error());
  g_srv.cfg = ot_server_config_default();
  g_srv.m = m;
  g_srv.bpe = bpe;
  g_srv.ctx = c.max_seq;
  g_srv.eot = ot_bpe_eot(bpe);
  FZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, g_sock) == 0, "socketpair");
  return 0;
}

// Reads what the server answered on the socket (non-blocking) into buf[cap]; its length.
static size_t take_answer(char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    ssize_t k = recv(g_sock[1], buf + n, cap - 1 - n, MSG_DONTWAIT);
    if (k <= 0) break;
    n += (size_t)k;
    if (n + 1 >= cap) break;
  }
  buf[n] = 0;
  return n;
}

static void check_body(const char *body, size_t len) {
  ot__conn c;
  memset(&c, 0, sizeof c);
  c.srv = &g_srv;
  c.fd = g_sock[0];
  c.nowait = true;
  const bool ok = ot__api_check_completion(&c, body, len);
  static char ans[1 << 16];
  const size_t n = take_answer(ans, sizeof ans);
  if (ok) {
    FZ_CHECK(n == 0 && c.status == 0, "a valid body was answered (%d)", c.status);
    return;
  }
  FZ_CHECK(c.status == 400 || c.status == 503, "body refused with status %d", c.status);
  char want[32];
  snprintf(want, sizeof want, "HTTP/1.1 %d ", c.status);
  FZ_CHECK(n > 0 && strncmp(ans, want, strlen(want)) == 0, "no status line for %d", c.status);
  const char *b = strstr(ans, "\r\n\r\n");
  FZ_CHECK(b != NULL, "answer without a header end");
  b += 4;
  ot_json_doc d = {0};
  FZ_CHECK(ot_json_parse(&d, b, strlen(b), 0, "answer") == OT_OK, "error body is not JSON: %s", b);
  const ot_json *e = ot_json_get(d.root, "error");
  const ot_json *m = e ? ot_json_get(e, "message") : NULL;
  FZ_CHECK(m && m->type == OT_JSTR && m->len > 0, "error body without a message: %s", b);
  ot_json_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t mem0 = fz_mem_total();
  const char *h = (const char *)data;
  const size_t he = ot__head_end(h, size, 0);
  FZ_CHECK(he <= size, "head end %zu beyond %zu", he, size);
  if (he) {
    ot__http_req r;
    ot__head_info hi;
    memset(&r, 0, sizeof r);
    const int st = ot__parse_head(h, he, &r, &hi);
    if (st) {
      FZ_CHECK(st >= 400 && st <= 505 && hi.err[0], "head refused with %d, message '%s'", st, hi.err);
    } else {
      FZ_CHECK(r.method[0] && r.path[0] == '/', "accepted head without method or path");
      FZ_CHECK(!hi.has_te || (hi.chunked && !hi.has_len), "Transfer-Encoding other than chunked accepted");
      if (hi.chunked) {   // the chunked body decoded in place (a copy: the input is read-only)
        const size_t avail = size - he;
        char *b = malloc(avail + 1), err[160] = "";
        FZ_CHECK(b != NULL, "out of memory");
        memcpy(b, h + he, avail);
        ot__chunked d;
        ot__chunked_init(&d, 0);
        const int cs = ot__chunked_feed(&d, b, avail, 0, 4096, err, sizeof err);
        FZ_CHECK(cs == 0 || cs == 1 || ((cs == 400 || cs == 413) && err[0]), "chunked: status %d '%s'", cs, err);
        FZ_CHECK(d.out <= d.raw && d.raw <= avail && d.out <= 4096, "chunked: out %zu raw %zu of %zu", d.out,
                 d.raw, avail);
        if (cs == 1 && !strcmp(r.method, "POST")) check_body(b, d.out);
        free(b);
      } else if (hi.has_len && !strcmp(r.method, "POST")) {
        const size_t avail = size - he;
        check_body(h + he, hi.len < avail ? (size_t)hi.len : avail);
      }
    }
  } else if (size > 0) {
    // no head end: the body parser alone (a fuzzer finds JSON bodies faster this way)
    if (data[0] == '{') check_body(h, size);
  }
  fz_mem_back(mem0, "http");
  return 0;
}
