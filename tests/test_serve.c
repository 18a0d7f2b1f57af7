// HTTP serving tests (ot_sched + ot_server), over loopback sockets against an
// in-process server on an ephemeral port, with a tiny random GPT-2 model
// (vocab 300, context 128) and a BPE tokenizer trained here (300 tokens):
//  - UTF-8 cleaning: random byte strings fed in random pieces give the same
//    text as fed whole, and equal an independent code-point decoder
//  - scheduler: concurrent requests give exactly ot_generate's tokens (same
//    prompt, settings, seed); stop token; cancel; shutdown ends every request
//    once; bad requests named
//  - completions: token-array and text prompts, non-streaming tokens / text /
//    usage equal ot_generate's; streaming SSE framing, [DONE], concatenated
//    text and ids equal the non-streaming answer; stop strings (plain and
//    streamed); 10 concurrent clients on 3 sequence slots all exact
//  - errors: malformed JSON, wrong types, n > 1, prompt beyond the context,
//    max_tokens beyond the context (400 saying how many fit), body over
//    max_body (413), header section over max_header (431), missing
//    Content-Length (411), Transfer-Encoding other than chunked (501; beside Content-Length
//    400), chunked bodies (equal to Content-Length ones, pipelining after them, a malformed
//    size, data longer than its size, a body cut short, over max_body), unknown path (404), wrong method (405), bad version
//    (505), garbage, a slow client (408), a client that disconnects
//    mid-stream (its slot is cancelled, the server goes on), shutdown with a
//    request in flight; fuzzed requests never crash it
// (Connections: idle clients, 429, keep-alive and pipelining: test_serve_conn.c.)
#define _GNU_SOURCE
#include "harness.h"
#include "ot/serve.h"
#include "io/json.h"
#include "serve/serve_impl.h"
#include "sched_collect.h"
#include "serve_client.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CTX 128
static ot_model *g_model, *g_ref;   // the served model and an identical one for references
static ot_bpe *g_bpe;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

// ------------------------------------------------------------ references ---
typedef struct {
  int32_t toks[CTX];
  int n;            // tokens passed on (the stop token excluded)
  bool stopped;     // ended on the stop token
} ref_out;

// ot_generate on the reference model; stop: the stop token (-1: none), default
// the tokenizer's <|endoftext|> as the server uses it.
static void reference_stop(const int32_t *prompt, int np, int max_tokens, ot_sampler_config sc, int32_t stop,
                           ref_out *r) {
  ot_kv_config kc = {1, CTX, 0, false};
  ot_kvcache *kv = NULL;
  ot_sampler *smp = NULL;
  memset(r, 0, sizeof *r);
  if (ot_kv_create(&kv, g_ref, &kc) != OT_OK || ot_sampler_create(&smp, &sc, 300) != OT_OK) {
    th_check(false, "reference setup: %s", ot_last_error());
  } else {
    ot_gen_config gc = {max_tokens, stop};
    ot_gen_stats st;
    th_check(ot_generate(kv, smp, prompt, np, &gc, r->toks, NULL, NULL, &st) == OT_OK, "reference: %s",
             ot_last_error());
    r->n = st.new_tokens;
    r->stopped = st.stopped;
  }
  ot_sampler_free(smp);
  ot_kv_free(kv);
}

static void reference(const int32_t *prompt, int np, int max_tokens, ot_sampler_config sc, ref_out *r) {
  reference_stop(prompt, np, max_tokens, sc, ot_bpe_eot(g_bpe), r);
}

// Independent UTF-8 cleaner: decode code points, replace each byte that does
// not start a valid (shortest-form, non-surrogate, <= U+10FFFF) sequence.
static size_t ref_clean(const unsigned char *s, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 31) : len == 3 ? (c & 15) : (c & 7);
    bool ok = len > 0 && i + (size_t)len <= n;
    for (int k = 1; ok && k < len; k++) {
      ok = (s[i + k] & 0xc0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 63);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (ok && (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    if (ok) { memcpy(out + o, s + i, (size_t)len); o += (size_t)len; i += (size_t)len; }
    else { memcpy(out + o, "\xef\xbf\xbd", 3); o += 3; i++; }
  }
  out[o] = 0;
  return o;
}

// The text the server should answer for tokens r (cut at stop, if any):
// *ntok receives the completion token count, *cut whether stop was found.
static char *expected_text(const ref_out *r, const char *stop, int *ntok, bool *cut) {
  static unsigned char raw[CTX * 64];
  size_t n = 0;
  *ntok = r->n;
  *cut = false;
  for (int i = 0; i < r->n; i++) {
    size_t len = 0;
    const char *b = ot_bpe_token(g_bpe, r->toks[i], &len);
    if (b) { memcpy(raw + n, b, len); n += len; }
    if (stop && !*cut) {
      const size_t sl = strlen(stop);
      for (size_t p = 0; p + sl <= n; p++)
        if (!memcmp(raw + p, stop, sl)) { n = p; *cut = true; *ntok = i + 1; break; }
      if (*cut) break;
    }
  }
  char *out = th_alloc(3 * n + 1);
  ref_clean(raw, n, out);
  return out;
}

// ----------------------------------------------------------- utf-8 check ---
static void test_utf8(void) {
  th_rng g = {5};
  int bad = 0;
  for (int it = 0; it < 2000; it++) {
    unsigned char s[40];
    const int n = (int)(th_next(&g) % 40);
    for (int i = 0; i < n; i++) {   // mostly valid-looking pieces, some noise
      const uint64_t r = th_next(&g) % 10;
      s[i] = r < 3 ? (unsigned char)('a' + r) : r < 5 ? (unsigned char)(0x80 + th_next(&g) % 64)
           : r < 8 ? (unsigned char)(0xc0 + th_next(&g) % 64) : (unsigned char)(th_next(&g) % 256);
    }
    char want[200];
    const size_t wn = ref_clean(s, (size_t)n, want);
    ot__sbuf whole = {0}, pieces = {0};
    ot__utf8_take((const char *)s, (size_t)n, true, &whole);
    size_t done = 0;   // feed in random pieces: hold back what take leaves
    for (int end = 0; end < n;) {
      end += 1 + (int)(th_next(&g) % 4);
      if (end > n) end = n;
      done += ot__utf8_take((const char *)s + done, (size_t)end - done, end == n, &pieces);
    }
    if (!(whole.len == wn && !memcmp(whole.p ? whole.p : "", want, wn) && pieces.len == wn &&
          !memcmp(pieces.p ? pieces.p : "", want, wn) && done == (size_t)n) && bad++ < 3)
      th_check(false, "utf8 case %d: whole %zu bytes, pieces %zu, reference %zu", it, whole.len, pieces.len,
               wn);
    ot__sb_free(&whole);
    ot__sb_free(&pieces);
  }
  th_check(bad == 0, "UTF-8 cleaning: 2000 random byte strings, piecewise == whole == independent decoder");
}

// ------------------------------------------------------------- scheduler ---
static void test_sched(void) {
  ot_sched_config sc = {2, 0, 0, false, OT_F32, 0, OT_F32, 0};
  ot_sched *s = NULL;
  if (!th_check(ot_sched_create(&s, g_model, &sc) == OT_OK, "sched create: %s", ot_last_error())) return;
  th_check(ot_sched_capacity(s) == CTX, "capacity %d == the model's context", ot_sched_capacity(s));
  enum { N = 5 };
  collect col[N];
  ref_out ref[N];
  int32_t prompt[N][70];
  ot_sampler_config cfgs[N];
  for (int i = 0; i < N; i++) {
    col_init(&col[i]);
    const int np = i == 3 ? 70 : 1 + i * 3;   // 70 > chunk 64: two prefill steps
    for (int t = 0; t < np; t++) prompt[i][t] = (int32_t)((i * 31 + t * 7) % 256);
    cfgs[i] = (ot_sampler_config){i == 0 ? 0.0f : 0.7f + 0.1f * i, i == 2 ? 5 : 40, i == 4 ? 0.8f : 1.0f,
                                  100u + (uint64_t)i};
    const int mt = i == 3 ? CTX - np + 1 : 20 + i;
    reference(prompt[i], np, mt, cfgs[i], &ref[i]);
    ot_sched_request rq = {prompt[i], np, mt, ot_bpe_eot(g_bpe), cfgs[i], col_token, col_done, &col[i]};
    th_check(ot_sched_submit(s, &rq, NULL) == OT_OK, "submit %d: %s", i, ot_last_error());
  }
  for (int i = 0; i < N; i++) {
    col_wait(&col[i]);
    const bool same =
        col[i].n == ref[i].n && !memcmp(col[i].toks, ref[i].toks, sizeof(int32_t) * (size_t)ref[i].n);
    th_check(same && col[i].done_calls == 1 &&
                 col[i].res.end == (ref[i].stopped ? OT_SCHED_STOP_TOKEN : OT_SCHED_LENGTH) &&
                 col[i].res.new_tokens == ref[i].n,
             "sched request %d (5 requests, 2 slots): %d tokens == ot_generate's %d, end %d", i, col[i].n,
             ref[i].n, (int)col[i].res.end);
  }
  // on_token returning false; a cancel of a finished request is refused
  collect c1;
  col_init(&c1);
  c1.stop_after = 3;
  uint64_t id = 0;
  ot_sched_request rq = {prompt[0], 1, 50, -1, cfgs[1], col_token, col_done, &c1};
  ot_sched_submit(s, &rq, &id);
  col_wait(&c1);
  th_check(c1.res.end == OT_SCHED_STOPPED && c1.n == 3 && !ot_sched_cancel(s, id),
           "on_token false stops after 3 tokens (end %d, %d tokens); cancel after the end is refused",
           (int)c1.res.end, c1.n);
  // bad requests
  ot_sched_request bad = rq;
  bad.n_prompt = 0;
  th_check_error(ot_sched_submit(s, &bad, NULL), OT_EINVAL, "prompt", "sched: empty prompt");
  bad = rq;
  bad.max_tokens = CTX + 1;
  th_check_error(ot_sched_submit(s, &bad, NULL), OT_EINVAL, "context", "sched: prompt + max_tokens > context");
  int32_t big = 300;
  bad = rq;
  bad.prompt = &big;
  th_check_error(ot_sched_submit(s, &bad, NULL), OT_EINVAL, "vocab", "sched: token out of range");
  bad = rq;
  bad.sampler.top_p = 0.0f;
  th_check_error(ot_sched_submit(s, &bad, NULL), OT_EINVAL, "top_p", "sched: bad sampler");
  ot_sched *s2 = NULL;
  ot_sched_config badc = {1, CTX + 1, 0, false, OT_F32, 0, OT_F32, 0};
  th_check_error(ot_sched_create(&s2, g_model, &badc), OT_EINVAL, "max_seq", "sched: max_seq beyond the model");
  // shutdown with requests active and queued: each on_done runs exactly once
  collect cs[6];
  for (int i = 0; i < 6; i++) {
    col_init(&cs[i]);
    ot_sched_request r2 = {prompt[1], 4, CTX - 3, -1, cfgs[1], col_token, col_done, &cs[i]};
    ot_sched_submit(s, &r2, NULL);
  }
  ot_sched_free(s);
  int once = 0, shut = 0;
  for (int i = 0; i < 6; i++) {
    once += cs[i].done_calls == 1;
    shut += cs[i].res.end == OT_SCHED_SHUTDOWN;
  }
  th_check(once == 6 && shut >= 1, "free with 6 requests in: every on_done once (%d), %d ended by shutdown",
           once, shut);
}

// ---------------------------------------------------------------- server ---
typedef struct { ot_server *s; pthread_t th; int port; } server;

static void *run_main(void *p) {
  ot_server_run(((server *)p)->s);
  return NULL;
}

static bool server_start_tok(server *sv, int max_clients, int max_batch, int timeout_ms, const ot_bpe *tok) {
  ot_server_config c = ot_server_config_default();
  c.port = 0;
  c.max_clients = max_clients;
  c.max_batch = max_batch;
  c.timeout_ms = timeout_ms;
  c.model_id = "tiny-test";
  c.max_header = 4096;
  c.max_body = 64 << 10;
  memset(sv, 0, sizeof *sv);
  if (!th_check(ot_server_create(&sv->s, &c, g_model, tok) == OT_OK, "server create: %s", ot_last_error()))
    return false;
  sv->port = ot_server_port(sv->s);
  pthread_create(&sv->th, NULL, run_main, sv);
  return sv->port > 0;
}

static bool server_start(server *sv, int max_clients, int max_batch, int timeout_ms) {
  return server_start_tok(sv, max_clients, max_batch, timeout_ms, g_bpe);
}

static void server_stop(server *sv) {
  ot_server_stop(sv->s);
  pthread_join(sv->th, NULL);
  ot_server_free(sv->s);
}

static http_resp post(int port, const char *path, const char *body) {
  char head[256];
  const size_t bl = strlen(body);
  int hn = snprintf(head, sizeof head,
                    "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    path, bl);
  char *req = th_alloc((size_t)hn + bl + 1);
  memcpy(req, head, (size_t)hn);
  memcpy(req + hn, body, bl);
  http_resp r = raw_request(port, req, (size_t)hn + bl, false);
  free(req);
  return r;
}

static http_resp get(int port, const char *method, const char *path) {
  char req[256];
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: localhost\r\n\r\n", method, path);
  return raw_request(port, req, (size_t)n, false);
}

// Completion result as parsed from JSON (or from SSE events).
typedef struct {
  int status;
  char text[CTX * 64 * 3 + 1];
  int32_t ids[CTX];
  int nids;
  char finish[16];
  int prompt_tokens, completion_tokens, total_tokens;
  bool framing_ok;   // SSE: every event "data: ...", finish only on the last, [DONE] at the end
} completion_out;

static void append_choice(const ot_json *ch, completion_out *o) {
  const ot_json *t = ot_json_get(ch, "text"), *f = ot_json_get(ch, "finish_reason"),
                *ids = ot_json_get(ch, "token_ids");
  if (t && t->type == OT_JSTR && strlen(o->text) + t->len < sizeof o->text) strncat(o->text, t->s, t->len);
  if (f && f->type == OT_JSTR) snprintf(o->finish, sizeof o->finish, "%s", f->s);
  if (ids && ids->type == OT_JARR)
    for (const ot_json *e = ids->first; e && o->nids < CTX; e = e->next) o->ids[o->nids++] = (int32_t)e->i;
}

static int json_int(const ot_json *obj, const char *key) {
  const ot_json *x = ot_json_get(obj, key);
  return x && x->type == OT_JNUM && x->is_int ? (int)x->i : -1;
}

static void read_usage(const ot_json *root, completion_out *o) {
  const ot_json *u = ot_json_get(root, "usage");
  if (!u || u->type != OT_JOBJ) return;
  o->prompt_tokens = json_int(u, "prompt_tokens");
  o->completion_tokens = json_int(u, "completion_tokens");
  o->total_tokens = json_int(u, "total_tokens");
}

static void parse_completion(const http_resp *r, bool stream, completion_out *o) {
  memset(o, 0, sizeof *o);
  o->status = r->status;
  if (!stream) {
    ot_json_doc d = {0};
    if (ot_json_parse(&d, r->body, strlen(r->body), 0, "response") != OT_OK) return;
    const ot_json *ch = ot_json_get(d.root, "choices");
    const ot_json *obj = ot_json_get(d.root, "object");
    o->framing_ok = obj && obj->type == OT_JSTR && !strcmp(obj->s, "text_completion") && ch && ch->n == 1;
    if (ch && ch->n == 1) append_choice(ch->first, o);
    read_usage(d.root, o);
    ot_json_free(&d);
    return;
  }
  o->framing_ok = strstr(r->all, "Content-Type: text/event-stream") != NULL;
  const char *p = r->body;
  bool finished = false, seen_done = false;
  while (*p) {
    const char *e = strstr(p, "\n\n");
    if (!e || strncmp(p, "data: ", 6) != 0 || seen_done) { o->framing_ok = false; break; }
    const char *d = p + 6;
    if ((size_t)(e - d) == 6 && !strncmp(d, "[DONE]", 6)) seen_done = true;
    else {
      ot_json_doc doc = {0};
      if (ot_json_parse(&doc, d, (size_t)(e - d), 0, "event") != OT_OK) { o->framing_ok = false; break; }
      const ot_json *ch = ot_json_get(doc.root, "choices");
      if (ch && ch->n == 1) {
        if (finished) o->framing_ok = false;   // nothing after the finishing chunk but usage
        append_choice(ch->first, o);
        const ot_json *f = ot_json_get(ch->first, "finish_reason");
        if (f && f->type == OT_JSTR) finished = true;
      }
      read_usage(doc.root, o);
      ot_json_free(&doc);
    }
    p = e + 2;
  }
  if (!seen_done || !finished) o->framing_ok = false;
}

static char *ids_json(const int32_t *ids, int n) {
  char *s = th_alloc((size_t)n * 8 + 3);
  size_t k = 0;
  s[k++] = '[';
  for (int i = 0; i < n; i++) k += (size_t)sprintf(s + k, i ? ",%d" : "%d", ids[i]);
  s[k++] = ']';
  s[k] = 0;
  return s;
}

// One completion request built from the parts; compares with ot_generate.
typedef struct {
  int32_t prompt[CTX];
  int np;
  const char *text_prompt;   // instead of ids when set
  int max_tokens;
  ot_sampler_config sc;
  const char *stop;
  bool stream;
  completion_out out;
} job_spec;

static http_resp run_spec(int port, job_spec *j) {
  char *ids = ids_json(j->prompt, j->np), body[8192], stop[300] = "";
  if (j->stop) snprintf(stop, sizeof stop, ",\"stop\":[\"%s\"]", j->stop);
  char pj[4096];
  if (j->text_prompt) snprintf(pj, sizeof pj, "\"%s\"", j->text_prompt);
  else snprintf(pj, sizeof pj, "%s", ids);
  snprintf(body, sizeof body,
           "{\"model\":\"x\",\"prompt\":%s,\"max_tokens\":%d,\"temperature\":%g,\"top_k\":%d,"
           "\"top_p\":%g,\"seed\":%llu,\"stream\":%s,\"return_token_ids\":true,\"stream_options\":"
           "{\"include_usage\":true},\"unknown_field\":[1,{\"a\":null}]%s}",
           pj, j->max_tokens, (double)j->sc.temperature, j->sc.top_k, (double)j->sc.top_p,
           (unsigned long long)j->sc.seed, j->stream ? "true" : "false", stop);
  free(ids);
  http_resp r = post(port, "/v1/completions", body);
  parse_completion(&r, j->stream, &j->out);
  return r;
}

// Checks j->out against ot_generate; returns ok (checks recorded by the caller).
static bool spec_matches(job_spec *j, char *why, size_t whylen) {
  if (j->text_prompt) {
    size_t n = 0;
    ot_bpe_encode(g_bpe, j->text_prompt, strlen(j->text_prompt), true, j->prompt, CTX, &n);
    j->np = (int)n;
  }
  ref_out ref;
  reference(j->prompt, j->np, j->max_tokens, j->sc, &ref);
  int ntok = 0;
  bool cut = false;
  char *want = expected_text(&ref, j->stop, &ntok, &cut);
  const char *want_finish = cut || ref.stopped ? "stop" : "length";
  const completion_out *o = &j->out;
  bool ok = o->status == 200 && o->framing_ok && o->nids == ntok &&
            !memcmp(o->ids, ref.toks, sizeof(int32_t) * (size_t)ntok) && !strcmp(o->text, want) &&
            !strcmp(o->finish, want_finish) && o->prompt_tokens == j->np && o->completion_tokens == ntok &&
            o->total_tokens == j->np + ntok;
  snprintf(why, whylen, "status %d framing %d, %d ids (want %d), finish %s (want %s), text %s, usage %d+%d",
           o->status, o->framing_ok, o->nids, ntok, o->finish, want_finish,
           strcmp(o->text, want) ? "differs" : "equal", o->prompt_tokens, o->completion_tokens);
  free(want);
  return ok;
}

static void test_completions(int port) {
  char why[256];
  // token-array prompt, sampled; non-streaming then streaming
  for (int stream = 0; stream < 2; stream++) {
    job_spec j;
    memset(&j, 0, sizeof j);
    j.np = 5;
    for (int i = 0; i < j.np; i++) j.prompt[i] = 40 + i;
    j.max_tokens = 40;
    j.sc = (ot_sampler_config){0.9f, 50, 0.95f, 77};
    j.stream = stream;
    http_resp r = run_spec(port, &j);
    th_check(spec_matches(&j, why, sizeof why), "%s completion, id prompt: == ot_generate (%s)",
             stream ? "streamed" : "plain", why);
    free(r.all);
  }
  // text prompt, greedy; text equal between plain and streamed
  job_spec a, b;
  memset(&a, 0, sizeof a);
  a.text_prompt = "the quick brown fox";
  a.max_tokens = 60;
  a.sc = (ot_sampler_config){0.0f, 0, 1.0f, 1};
  b = a;
  b.stream = true;
  http_resp ra = run_spec(port, &a), rb = run_spec(port, &b);
  th_check(spec_matches(&a, why, sizeof why), "plain completion, text prompt (%s)", why);
  th_check(spec_matches(&b, why, sizeof why), "streamed completion, text prompt (%s)", why);
  th_check(!strcmp(a.out.text, b.out.text) && strstr(ra.all, "Content-Length:") &&
               strstr(rb.body, "data: [DONE]\n\n"),
           "streamed text == plain text (%zu bytes), SSE ends with [DONE]", strlen(a.out.text));
  free(ra.all);
  free(rb.all);
  // stop string: a 2-byte ASCII piece of a longer answer; plain and streamed
  for (uint64_t seed = 1; seed < 40; seed++) {
    job_spec j;
    memset(&j, 0, sizeof j);
    j.np = 3;
    j.prompt[0] = 10; j.prompt[1] = 20; j.prompt[2] = 30;
    j.max_tokens = 80;
    j.sc = (ot_sampler_config){1.0f, 0, 1.0f, seed};
    ref_out ref;
    reference(j.prompt, j.np, j.max_tokens, j.sc, &ref);
    int nt;
    bool cut;
    char *txt = expected_text(&ref, NULL, &nt, &cut);
    static char stop[3];
    const size_t L = strlen(txt);
    bool found = false;
    for (size_t p = L / 3; p + 1 < L && !found; p++)
      if (txt[p] > 0x20 && txt[p] < 0x7f && txt[p] != '"' && txt[p] != '\\' && txt[p + 1] > 0x20 &&
          txt[p + 1] < 0x7f && txt[p + 1] != '"' && txt[p + 1] != '\\') {
        stop[0] = txt[p]; stop[1] = txt[p + 1]; stop[2] = 0;
        found = true;
      }
    free(txt);
    if (!found) continue;
    j.stop = stop;
    job_spec k = j;
    k.stream = true;
    http_resp r1 = run_spec(port, &j), r2 = run_spec(port, &k);
    th_check(spec_matches(&j, why, sizeof why) && !strcmp(j.out.finish, "stop"), "plain, stop \"%s\" (%s)",
             stop, why);
    th_check(spec_matches(&k, why, sizeof why) && !strcmp(k.out.text, j.out.text),
             "streamed, stop \"%s\" (%s)", stop, why);
    free(r1.all);
    free(r2.all);
    break;
  }
  // models, health, Expect: 100-continue
  http_resp m = get(port, "GET", "/v1/models"), h = get(port, "GET", "/health?x=1");
  th_check(m.status == 200 && strstr(m.body, "\"id\":\"tiny-test\"") &&
               strstr(m.body, "\"max_model_len\":128") && h.status == 200 &&
               strstr(h.body, "\"status\":\"ok\""),
           "GET /v1/models (%d: %.80s) and /health (%d)", m.status, m.body, h.status);
  free(m.all);
  free(h.all);
  int fd = dial(port);
  const char body[] = "{\"prompt\":[1,2,3],\"max_tokens\":3}";
  char head[256];
  int hn = snprintf(head, sizeof head,
                    "POST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: %zu\r\n\r\n",
                    sizeof body - 1);
  send_all(fd, head, (size_t)hn);
  char cont[64] = "";
  ssize_t k = recv(fd, cont, sizeof cont - 1, 0);
  if (k > 0) cont[k] = 0;
  send_all(fd, body, sizeof body - 1);
  http_resp er;
  read_resp(fd, &er);
  close(fd);
  th_check(!strncmp(cont, "HTTP/1.1 100 Continue\r\n\r\n", 25) && er.status == 200 &&
               strstr(er.body, "\"completion_tokens\":"),
           "Expect: 100-continue gets 100 then the answer (%d)", er.status);
  free(er.all);
}

// ------------------------------------------------------------ concurrent ---
typedef struct { job_spec j; int port; } client;

static void *client_main(void *p) {
  client *c = p;
  http_resp r = run_spec(c->port, &c->j);
  free(r.all);
  return NULL;
}

static void test_concurrent(int port) {
  enum { NC = 10 };
  client *cl = th_alloc(sizeof *cl * NC);
  pthread_t th[NC];
  for (int i = 0; i < NC; i++) {
    memset(&cl[i], 0, sizeof cl[i]);
    cl[i].port = port;
    cl[i].j.np = 2 + i;
    for (int t = 0; t < cl[i].j.np; t++) cl[i].j.prompt[t] = (int32_t)((i * 17 + t * 5) % 299);
    cl[i].j.max_tokens = 30 + 3 * i;
    cl[i].j.sc = (ot_sampler_config){i % 3 == 0 ? 0.0f : 0.8f, i % 2 ? 20 : 0, i % 4 ? 0.9f : 1.0f,
                                     1000u + (uint64_t)i};
    cl[i].j.stream = i % 2;
    pthread_create(&th[i], NULL, client_main, &cl[i]);
  }
  for (int i = 0; i < NC; i++) pthread_join(th[i], NULL);
  int ok = 0;
  char why[256];
  for (int i = 0; i < NC; i++) {
    const bool m = spec_matches(&cl[i].j, why, sizeof why);
    ok += m;
    if (!m) th_check(false, "concurrent client %d: %s", i, why);
  }
  th_check(ok == NC, "%d concurrent clients (3 slots, half streaming) all == ot_generate", ok);
  free(cl);
}

// ---------------------------------------------------------------- errors ---
// Status and OpenAI error shape; the message / param must contain `needle`.
static void expect_error(http_resp r, int status, const char *needle, const char *what) {
  ot_json_doc d = {0};
  bool shape = ot_json_parse(&d, r.body, strlen(r.body), 0, "error") == OT_OK;
  const ot_json *e = shape ? ot_json_get(d.root, "error") : NULL;
  shape = e && ot_json_get(e, "message") && ot_json_get(e, "type") && ot_json_get(e, "param") &&
          ot_json_get(e, "code") && ot_json_get(e, "message")->type == OT_JSTR;
  th_check(r.status == status && shape && (!needle || strstr(r.body, needle)),
           "%s: status %d (want %d), body %.200s", what, r.status, status, r.body);
  ot_json_free(&d);
  free(r.all);
}

// ot__parse_head alone: Transfer-Encoding chunked (alone, HTTP/1.1) frames the body; any
// other coding is 501, chunked in HTTP/1.0 is 400, and one beside Content-Length (request
// smuggling, RFC 9112 6.1) is 400, in either order.
static void test_parse_head_te(void) {
  static const struct { const char *head; int status; const char *needle; } c[] = {
    {"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both"},
    {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", 400, "both"},
    {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\nContent-length: 0\r\n\r\n", 400, "both"},
    {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 0, NULL},
    {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n", 0, NULL},
    {"POST /v1/completions HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n", 501, "'identity' is unsupported"},
    {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "'gzip, chunked'"},
    {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
     501, "only 'chunked' alone"},
    {"POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0"},
    {"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n", 0, NULL},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    ot__http_req r;
    ot__head_info hi;
    memset(&r, 0, sizeof r);
    const int st = ot__parse_head(c[i].head, strlen(c[i].head), &r, &hi);
    th_check(st == c[i].status && (!c[i].needle || strstr(hi.err, c[i].needle)),
             "parse_head case %zu: status %d (want %d), err '%s'", i, st, c[i].status, hi.err);
  }
}

// A completion whose body comes chunked (odd chunk sizes, an extension, a trailer field)
// answers as the same body with Content-Length; on a kept-alive connection the request
// pipelined after it is answered too.
static void test_chunked(int port) {
  const char body[] = "{\"prompt\": [5, 17, 42], \"max_tokens\": 4, \"temperature\": 0}";
  const size_t bl = sizeof body - 1;
  http_resp plain = post(port, "/v1/completions", body);
  char req[1024];
  size_t n = (size_t)snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n");
  for (size_t i = 0, k = 1; i < bl; i += k, k = k * 2 + 1) {
    const size_t m = bl - i < k ? bl - i : k;
    n += (size_t)snprintf(req + n, sizeof req - n, "%zX%s\r\n%.*s\r\n", m, i ? "" : ";ext=1", (int)m, body + i);
  }
  n += (size_t)snprintf(req + n, sizeof req - n, "0\r\nX-Trailer: t\r\n\r\nGET /health HTTP/1.1\r\n\r\n");
  int fd = dial(port);
  http_resp a = {0, NULL, 0, ""}, b = {0, NULL, 0, ""};
  if (th_check(fd >= 0, "dial")) {
    send_all(fd, req, n);
    read_resp(fd, &a);
    long clen = -1;
    const size_t first = resp_len(a.all, a.len, &clen);
    if (first && first < a.len) {   // the second answer came in the same read
      b.all = th_alloc(a.len - first + 1);
      memcpy(b.all, a.all + first, a.len - first + 1);
      b.len = a.len - first;
      b.status = !strncmp(b.all, "HTTP/1.1 ", 9) ? atoi(b.all + 9) : 0;
      const char *e = strstr(b.all, "\r\n\r\n");
      b.body = e ? e + 4 : b.all + b.len;
    } else {
      read_resp(fd, &b);
    }
    close(fd);
  }
  const char *ca = a.all ? strstr(a.body, "\"choices\"") : NULL, *cp = strstr(plain.body, "\"choices\"");
  const char *ua = ca ? strstr(ca, "\"usage\"") : NULL, *up = cp ? strstr(cp, "\"usage\"") : NULL;
  th_check(a.status == 200 && plain.status == 200 && ca && cp && ua && up && ua - ca == up - cp &&
               !strncmp(ca, cp, (size_t)(ua - ca)),
           "chunked completion (%d) equals the Content-Length one (%d): %.200s", a.status, plain.status,
           a.all ? a.body : "");
  th_check(b.status == 200 && b.all && strstr(b.body, "\"status\""),
           "the request pipelined after a chunked body is answered (%d)", b.status);
  free(plain.all);
  free(a.all);
  free(b.all);
}

static void test_errors(int port) {
  expect_error(post(port, "/v1/completions", "{\"prompt\": [1,2,"), 400, "invalid JSON", "truncated JSON");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\"} x"), 400, "invalid JSON", "trailing garbage");
  expect_error(post(port, "/v1/completions", "[1,2]"), 400, "JSON object", "body not an object");
  expect_error(post(port, "/v1/completions", "{\"prompt\": 5}"), 400, "\"param\":\"prompt\"",
               "prompt a number");
  expect_error(post(port, "/v1/completions", "{\"prompt\": [1, 2.5]}"), 400, "token ids",
               "prompt with a fraction");
  expect_error(post(port, "/v1/completions", "{\"prompt\": [\"a\", \"b\"]}"), 400, "one prompt", "two prompts");
  expect_error(post(port, "/v1/completions", "{\"prompt\": [1, 300]}"), 400, "outside", "token out of range");
  expect_error(post(port, "/v1/completions", "{\"prompt\": [], \"max_tokens\": 2}"), 400, "prompt",
               "empty id array");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": \"3\"}"), 400,
               "\"param\":\"max_tokens\"", "max_tokens a string");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 0}"), 400, "max_tokens",
               "max_tokens 0");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"temperature\": -1}"), 400, "temperature",
               "negative temperature");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"top_p\": 0}"), 400, "top_p", "top_p 0");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"stream\": \"yes\"}"), 400, "stream",
               "stream a string");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"stop\": 3}"), 400, "stop", "stop a number");
  expect_error(
      post(port, "/v1/completions", "{\"prompt\": \"a\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}"), 400,
      "stop", "5 stop strings");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"n\": 2}"), 400, "n=2", "n = 2");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"seed\": 1.5}"), 400, "seed",
               "seed a fraction");
  expect_error(post(port, "/v1/completions", "{\"prompt\": \"a\", \"model\": 1}"), 400, "model",
               "model a number");
  char big[CTX * 4 + 64];
  int k = sprintf(big, "{\"prompt\": [");
  for (int i = 0; i < CTX + 1; i++) k += sprintf(big + k, i ? ",1" : "1");
  sprintf(big + k, "]}");
  expect_error(post(port, "/v1/completions", big), 400, "context_length_exceeded", "prompt beyond the context");
  // max_tokens beyond the context: 400 saying how many fit (CTX - 100 + 1 = 29; the
  // last token is never fed back); 29 is served; without max_tokens the default
  // (16) is lowered to fit
  k = sprintf(big, "{\"prompt\": [");
  for (int i = 0; i < 100; i++) k += sprintf(big + k, i ? ",1" : "1");
  sprintf(big + k, "], \"max_tokens\": 1000, \"temperature\": 0}");
  expect_error(post(port, "/v1/completions", big), 400,
               "max_tokens 1000 + prompt 100 tokens exceed the context of 128: at most 29 new tokens fit",
               "max_tokens beyond the context");
  expect_error(post(port, "/v1/completions", big), 400, "\"param\":\"max_tokens\"", "param of max_tokens");
  sprintf(big + k, "], \"max_tokens\": 29, \"temperature\": 0, \"return_token_ids\": true}");
  http_resp r = post(port, "/v1/completions", big);
  completion_out o;
  parse_completion(&r, false, &o);
  th_check(o.status == 200 && o.completion_tokens >= 1 && o.completion_tokens <= 29 && o.prompt_tokens == 100,
           "max_tokens 29 with 100 prompt tokens fits (%d: %d tokens)", o.status, o.completion_tokens);
  free(r.all);
  k = sprintf(big, "{\"prompt\": [");
  for (int i = 0; i < 120; i++) k += sprintf(big + k, i ? ",2" : "2");
  sprintf(big + k, "], \"temperature\": 0}");
  r = post(port, "/v1/completions", big);
  parse_completion(&r, false, &o);
  th_check(o.status == 200 && o.completion_tokens >= 1 && o.completion_tokens <= 9,
           "no max_tokens, 120 prompt tokens: the default 16 lowered to the 9 that fit (%d: %d tokens)", o.status,
           o.completion_tokens);
  free(r.all);
  // HTTP level
  const char too_big[] = "POST /v1/completions HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n";
  expect_error(raw_request(port, too_big, sizeof too_big - 1, false), 413, "2000000", "body over max_body");
  char *hdr = th_alloc(6000);
  int hn = sprintf(hdr, "GET /health HTTP/1.1\r\nX-Big: ");
  memset(hdr + hn, 'a', 5000);
  hn += 5000;
  hn += sprintf(hdr + hn, "\r\n\r\n");
  expect_error(raw_request(port, hdr, (size_t)hn, false), 431, "headers", "header section over max_header");
  free(hdr);
  const char no_len[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n{}";
  expect_error(raw_request(port, no_len, sizeof no_len - 1, false), 411, "Content-Length", "no Content-Length");
  const char gzip[] =
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
  expect_error(raw_request(port, gzip, sizeof gzip - 1, false), 501, "Transfer-Encoding 'gzip'", "gzip body");
  const char bad_size[] =
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n";
  expect_error(raw_request(port, bad_size, sizeof bad_size - 1, false), 400, "malformed chunk size", "chunk size zz");
  const char huge[] = "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1E8480\r\n{";
  expect_error(raw_request(port, huge, sizeof huge - 1, false), 413, "exceeds the limit", "chunk over max_body");
  const char cut[] = "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n";
  expect_error(raw_request(port, cut, sizeof cut - 1, true), 400, "ended before its last", "chunked body cut");
  const char longer[] =
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{}\r\n0\r\n\r\n";
  expect_error(raw_request(port, longer, sizeof longer - 1, false), 400, "longer than its size", "chunk data too long");
  const char smuggle[] = "POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n"
                         "\r\n{}";
  expect_error(raw_request(port, smuggle, sizeof smuggle - 1, false), 400, "both Transfer-Encoding and Content-Length",
               "Transfer-Encoding and Content-Length");
  expect_error(get(port, "GET", "/v1/nothing"), 404, "not_found", "unknown path");
  http_resp w = get(port, "GET", "/v1/completions");
  th_check(strstr(w.all, "Allow: POST\r\n") != NULL, "405 names the allowed method");
  expect_error(w, 405, "POST", "GET /v1/completions");
  expect_error(post(port, "/health", "{}"), 405, "GET", "POST /health");
  const char v2[] = "GET /health HTTP/2.0\r\n\r\n";
  expect_error(raw_request(port, v2, sizeof v2 - 1, false), 505, "HTTP/1.1", "HTTP/2.0");
  const char garbage[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n";
  expect_error(raw_request(port, garbage, sizeof garbage - 1, false), 400, NULL, "garbage bytes (a TLS hello)");
  const char early[] = "POST /v1/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"prompt\"";
  expect_error(raw_request(port, early, sizeof early - 1, true), 400, "Content-Length",
               "body shorter than Content-Length");
  const char lf[] = "GET /health HTTP/1.0\n\n";
  http_resp l = raw_request(port, lf, sizeof lf - 1, false);
  th_check(l.status == 200, "bare LF line ends and HTTP/1.0 accepted (%d)", l.status);
  free(l.all);
  http_resp none = raw_request(port, "", 0, true);
  th_check(none.len == 0, "a connection closed without a request gets nothing (%zu bytes)", none.len);
  free(none.all);
}

// 408 for a slow client (idle clients and saturation: test_serve_conn.c).
static void test_limits(void) {
  server sv;
  if (!server_start(&sv, 2, 1, 300)) return;
  int fd = dial(sv.port);
  send_all(fd, "GET /health HTTP/1.1\r\nHo", 24);
  const double t0 = ot_now();
  http_resp r;
  read_resp(fd, &r);
  close(fd);
  const double dt = ot_now() - t0;
  th_check(dt < 5.0, "408 arrives soon (%.2f s)", dt);
  expect_error(r, 408, "300 ms", "a request slower than the timeout");
  server_stop(&sv);
}

// ------------------------------------------------- disconnect / shutdown ---
// A request submitted on the side that holds the scheduler (in its token
// callback) once a second sequence is active and has a token, so the test can
// act while that sequence is stuck mid-generation.
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ot_sched *s;
  int after;          // callbacks seen with >= 2 active
  bool blocked, release, done;
  ot_sched_result res;
} blocker;

static bool blk_token(void *ctx, int32_t tok) {
  (void)tok;
  blocker *b = ctx;
  ot_sched_stats st;
  ot_sched_stats_get(b->s, &st);
  pthread_mutex_lock(&b->mu);
  if (st.active >= 2 && ++b->after >= 2) {
    b->blocked = true;
    pthread_cond_broadcast(&b->cv);
    while (!b->release) pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    return false;
  }
  pthread_mutex_unlock(&b->mu);
  if (st.active < 2) sleep_ms(10);   // wait for the other sequence
  return true;
}

static void blk_done(void *ctx, const ot_sched_result *r) {
  blocker *b = ctx;
  pthread_mutex_lock(&b->mu);
  b->res = *r;
  b->done = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static bool blk_start(blocker *b, ot_sched *s) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->s = s;
  static const int32_t one = 1;
  ot_sched_request rq = {&one, 1, CTX, -1, {0.0f, 0, 1.0f, 1}, blk_token, blk_done, b};
  return th_check(ot_sched_submit(s, &rq, NULL) == OT_OK, "blocker submit: %s", ot_last_error());
}

// Waits up to 10 s for *flag (under b->mu).
static bool blk_wait(blocker *b, const bool *flag) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 10;
  pthread_mutex_lock(&b->mu);
  while (!*flag && pthread_cond_timedwait(&b->cv, &b->mu, &ts) == 0) {}
  const bool ok = *flag;
  pthread_mutex_unlock(&b->mu);
  return ok;
}

static void blk_release(blocker *b) {
  pthread_mutex_lock(&b->mu);
  b->release = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static bool wait_stats(ot_sched *s, uint64_t cancel_requests, bool idle) {
  for (int i = 0; i < 500; i++) {
    ot_sched_stats st;
    ot_sched_stats_get(s, &st);
    if (st.cancel_requests >= cancel_requests && (!idle || (st.active == 0 && st.queued == 0))) return true;
    sleep_ms(10);
  }
  return false;
}

// Opens a streamed request and reads its first event; returns the socket.
static int stream_first_event(int port, char *ev, size_t cap) {
  const char body[] = "{\"prompt\":[5,6,7],\"max_tokens\":100,\"stream\":true,\"return_token_ids\":true}";
  char req[512];
  int n = snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nContent-Length: %zu\r\n\r\n%s",
                   sizeof body - 1, body);
  int fd = dial(port);
  send_all(fd, req, (size_t)n);
  size_t len = 0;
  ev[0] = 0;
  while (len + 1 < cap) {   // headers and one "data: ...\n\n"
    ssize_t k = recv(fd, ev + len, cap - 1 - len, 0);
    if (k <= 0) break;
    len += (size_t)k;
    ev[len] = 0;
    const char *b = strstr(ev, "\r\n\r\n");
    if (b && strstr(b + 4, "\n\n")) break;
  }
  return fd;
}

static void test_disconnect(void) {
  server sv;
  if (!server_start(&sv, 8, 2, 10000)) return;
  ot_sched *s = ot_server_sched(sv.s);
  blocker b;
  if (!blk_start(&b, s)) { server_stop(&sv); return; }
  char ev[4096];
  int fd = stream_first_event(sv.port, ev, sizeof ev);
  const bool first = strstr(ev, "data: {") != NULL;
  const bool held = blk_wait(&b, &b.blocked);
  close(fd);   // mid-stream: 1 token of 100 received
  const bool noticed = wait_stats(s, 1, false);
  blk_release(&b);
  const bool idle = wait_stats(s, 1, true);
  ot_sched_stats st;
  ot_sched_stats_get(s, &st);
  th_check(first && held && noticed && idle && st.cancelled == 1,
           "a client gone mid-stream is cancelled (first event %d, held %d, noticed %d, cancelled %llu)",
           first, held, noticed, (unsigned long long)st.cancelled);
  blk_wait(&b, &b.done);
  http_resp r = post(sv.port, "/v1/completions", "{\"prompt\":[1,2],\"max_tokens\":5}");
  th_check(r.status == 200 && strstr(r.body, "\"completion_tokens\":"), "the server goes on serving (%d)",
           r.status);
  free(r.all);

  // shutdown with a streamed request in flight
  blocker b2;
  if (!blk_start(&b2, s)) { server_stop(&sv); return; }
  fd = stream_first_event(sv.port, ev, sizeof ev);
  const bool held2 = blk_wait(&b2, &b2.blocked);
  ot_server_stop(sv.s);
  const bool noticed2 = wait_stats(s, 2, false);   // the connection cancels its request
  blk_release(&b2);
  pthread_join(sv.th, NULL);   // run returns once every connection ended
  http_resp rest;
  read_resp(fd, &rest);
  close(fd);
  th_check(held2 && noticed2 && !strstr(rest.all, "[DONE]"),
           "stop with a request in flight: cancelled, the stream "
           "ends without [DONE], run returns (held %d, noticed %d)",
           held2, noticed2);
  free(rest.all);
  ot_server_free(sv.s);
  th_check(b2.done, "the held request ended before the scheduler was freed");
}

// Without a tokenizer: token-id prompts only, the answer is its token ids.
static void test_no_tokenizer(void) {
  server sv;
  if (!server_start_tok(&sv, 4, 1, 10000, NULL)) return;
  expect_error(post(sv.port, "/v1/completions", "{\"prompt\": \"hello\"}"), 400, "no tokenizer",
               "text prompt, no tokenizer");
  const int32_t prompt[4] = {100, 101, 102, 103};
  http_resp r = post(sv.port, "/v1/completions",
                     "{\"prompt\":[100,101,102,103],\"max_tokens\":12,\"temperature\":0.5,\"seed\":9}");
  completion_out o;
  parse_completion(&r, false, &o);
  ref_out ref;
  reference_stop(prompt, 4, 12, (ot_sampler_config){0.5f, 0, 1.0f, 9}, -1, &ref);   // no stop token
  th_check(o.status == 200 && o.nids == 12 && !memcmp(o.ids, ref.toks, sizeof(int32_t) * 12) &&
               o.text[0] == 0 && !strcmp(o.finish, "length"),
           "no tokenizer: token_ids == ot_generate's without a stop token, empty text (%d, %d ids)", o.status,
           o.nids);
  free(r.all);
  server_stop(&sv);
}

// ------------------------------------------------------------------ fuzz ---
static void test_fuzz(void) {
  server sv;
  if (!server_start(&sv, 16, 2, 2000)) return;
  th_rng g = {2024};
  static const char vbody[] = "{\"prompt\":\"hi there\",\"max_tokens\":3,\"stop\":[\"x\"],"
                              "\"temperature\":0.5,\"stream\":true}   ";
  char valid[256];
  const size_t vn = (size_t)snprintf(valid, sizeof valid, "POST /v1/completions HTTP/1.1\r\nHost: a\r\n"
                                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                                     sizeof vbody - 1, vbody);
  char buf[512];
  int bad = 0, answered = 0;
  for (int it = 0; it < 300; it++) {
    size_t n = vn;
    memcpy(buf, valid, vn);
    const int kind = it % 4;
    if (kind == 0) n = (size_t)(th_next(&g) % vn);                          // truncated
    else if (kind == 1)                                                     // flipped bytes
      for (int f = 0; f < 1 + (int)(th_next(&g) % 4); f++) buf[th_next(&g) % vn] = (char)(th_next(&g) % 256);
    else if (kind == 2) {                                                   // garbage
      n = (size_t)(th_next(&g) % sizeof buf);
      for (size_t i = 0; i < n; i++) buf[i] = (char)(th_next(&g) % 256);
    } else {                                                                // mutated JSON body
      const char *b0 = strstr(valid, "\r\n\r\n") + 4;
      char body[200];
      size_t bl = strlen(b0);
      memcpy(body, b0, bl);
      for (int f = 0; f < 1 + (int)(th_next(&g) % 3); f++) {
        const size_t at = th_next(&g) % bl;
        const uint64_t op = th_next(&g) % 3;
        if (op == 0) body[at] = "{}[]\",:0-e.tfn\\u"[th_next(&g) % 16];
        else if (op == 1) bl = at;
        else body[at] = (char)(th_next(&g) % 256);
      }
      n = (size_t)snprintf(buf, sizeof buf, "POST /v1/completions HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", bl);
      memcpy(buf + n, body, bl);
      n += bl;
    }
    http_resp r = raw_request(sv.port, buf, n, true);
    const bool ok = r.len == 0 || (r.status >= 200 && r.status <= 505);
    answered += r.len > 0;
    if (!ok && bad++ < 3)
      th_check(false, "fuzz case %d (kind %d): %zu response bytes, status %d", it, kind, r.len, r.status);
    free(r.all);
  }
  http_resp h = get(sv.port, "GET", "/health");
  th_check(bad == 0 && h.status == 200, "300 fuzzed requests (truncated, flipped, garbage, mutated JSON): "
           "%d answered with a status, none crashed, /health after: %d", answered, h.status);
  free(h.all);
  server_stop(&sv);
}

int main(void) {
  test_parse_head_te();
  // a tiny GPT-2-family model with a 300-token vocabulary and a BPE trained to it
  ot_model_config c;
  ot_model_config_preset(&c, "tiny");
  c.vocab = 300;
  c.max_seq = CTX;
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  static const char corpus[] =
      "the quick brown fox jumps over the lazy dog. the dog sleeps; the fox runs away. "
      "a quick brown dog and a lazy fox: there, then, other, these, those, thin thimbles. "
      "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 5 \xf0\x9f\x98\x80 the end <|endoftext|> the start again. ";
  if (!th_check(ot_model_create(&g_model, &c, &run) == OT_OK && ot_model_init(g_model, 3) == OT_OK &&
                    ot_model_create(&g_ref, &c, &run) == OT_OK && ot_model_init(g_ref, 3) == OT_OK,
                "models: %s", ot_last_error()) ||
      !th_check(ot_bpe_train(&g_bpe, corpus, sizeof corpus - 1, 300, false) == OT_OK && ot_bpe_eot(g_bpe) > 0,
                "tokenizer: %s", ot_last_error()))
    return th_finish();
  // weights 10x the 0.02 init (norm gains stay 1): logits with some structure
  float *w = ot_model_params(g_model), *w2 = ot_model_params(g_ref);
  for (int i = 0; i < ot_model_param_count(g_model); i++) {
    const ot_param *p = ot_model_param_at(g_model, i);
    if (p->kind != OT_PT_NORM_W)
      for (size_t k = 0; k < p->numel; k++) w[p->offset + k] = w2[p->offset + k] = 10.0f * w[p->offset + k];
  }
  test_utf8();
  test_sched();
  server sv;
  if (server_start(&sv, 16, 3, 10000)) {
    test_completions(sv.port);
    test_concurrent(sv.port);
    test_errors(sv.port);
    test_chunked(sv.port);
    server_stop(&sv);
  }
  test_limits();
  test_disconnect();
  test_no_tokenizer();
  test_fuzz();
  // config errors
  ot_server *s = NULL;
  ot_server_config bc = ot_server_config_default();
  bc.max_clients = 0;
  th_check_error(ot_server_create(&s, &bc, g_model, g_bpe), OT_EINVAL, "max_clients", "server: max_clients 0");
  bc = ot_server_config_default();
  bc.host = "localhost";
  th_check_error(ot_server_create(&s, &bc, g_model, g_bpe), OT_EINVAL, "numeric", "server: a host name");
  ot_model_config tc;
  ot_model_config_preset(&tc, "tiny");   // vocabulary 50 < the tokenizer's 300
  ot_model *small = NULL;
  ot_model_create(&small, &tc, &run);
  th_check_error(ot_server_create(&s, &bc, small, g_bpe), OT_EINVAL, "tokenizer",
                 "server: tokenizer larger than the model");
  ot_model_free(small);
  ot_bpe_free(g_bpe);
  ot_model_free(g_model);
  ot_model_free(g_ref);
  return th_finish();
}
