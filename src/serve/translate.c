// POST /v1/translations (a server over an encoder-decoder model): the body
// {"text": "..." | ["...", ...], "beam_size", "greedy", "length_penalty",
// "max_length_ratio", "max_tokens", "early_stopping", "return_token_ids"} is
// checked field by field (400 naming the field), each sentence encoded as
// `ot translate` encodes a line (ot__source_ids), and the request submitted to
// the scheduler, which translates it together with the other queued requests
// of the same settings; the answer lists the translations in order, their
// text made as `ot translate` makes it (ot__tokens_text).
#include "serve/serve_impl.h"
#include <stdlib.h>
#include <time.h>

// What the scheduler hands back (its callbacks run on the scheduler thread).
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n;                 // sentences
  int32_t **toks;        // [n] each sentence's tokens (malloc'd by on_sentence)
  int *ntoks;            // [n]
  bool oom, done;
  ot_sched_result res;
} tr_state;

typedef struct {
  int32_t *src, *src_len;   // the sentences' encoder inputs one after another, [n] lengths
  int n;
  ot_beam_config search;
  bool want_ids;
} tr_req;

static void on_sentence(void *ctx, int i, const int32_t *tokens, int n) {
  tr_state *st = ctx;
  int32_t *t = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  pthread_mutex_lock(&st->mu);
  if (t && i >= 0 && i < st->n && !st->toks[i]) {
    memcpy(t, tokens, sizeof(int32_t) * (size_t)n);
    st->toks[i] = t;
    st->ntoks[i] = n;
    t = NULL;
  } else if (!t) {
    st->oom = true;
  }
  pthread_mutex_unlock(&st->mu);
  free(t);
}

static void on_done(void *ctx, const ot_sched_result *r) {
  tr_state *st = ctx;
  pthread_mutex_lock(&st->mu);
  st->res = *r;
  st->done = true;
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

#define BAD(param, ...) (ot__respond_error(c, 400, param, NULL, __VA_ARGS__), false)

// The sentences of "text" (a string or a non-empty array of strings), encoded.
static bool get_text(ot__conn *c, const ot_json *root, tr_req *q) {
  const ot_server *s = c->srv;
  const ot_json *x = ot_json_get(root, "text");
  if (!x || x->type == OT_JNULL)
    return BAD("text", "text is required: a string, or an array of strings (a batch), to translate");
  if (x->type != OT_JSTR && x->type != OT_JARR)
    return BAD("text", "text must be a string or an array of strings, not %s", ot_json_type_name(x->type));
  const int n = x->type == OT_JSTR ? 1 : x->n;
  if (n == 0) return BAD("text", "text is an empty array: give at least one sentence");
  if (n > s->cfg.max_batch)
    return BAD("text", "text holds %d sentences; this server translates at most %d per request "
               "(--max-batch): split the request", n, s->cfg.max_batch);
  const ot_json *e = x->type == OT_JSTR ? x : x->first;
  for (int i = 0; i < n; i++, e = e->next) {
    if (e->type != OT_JSTR)
      return BAD("text", "text[%d] is %s; every sentence must be a string", i, ot_json_type_name(e->type));
    if (e->len == 0) return BAD("text", "text[%d] is empty: give the sentence to translate", i);
  }
  const int cap = s->ctx;
  q->src = malloc(sizeof(int32_t) * ((size_t)n * cap));
  q->src_len = malloc(sizeof(int32_t) * (size_t)n);
  if (!q->src || !q->src_len) { ot__respond_error(c, 503, NULL, NULL, "out of memory"); return false; }
  const int V = ot_model_config_of(s->m)->vocab;
  const int32_t eos = ot_model_config_of(s->m)->eos_id;
  int used = 0;
  e = x->type == OT_JSTR ? x : x->first;
  for (int i = 0; i < n; i++, e = e->next) {
    int k = 0;
    if (ot__source_ids(s->bpe, e->s, e->len, V, eos, q->src + used, cap, &k) != OT_OK)
      return BAD("text", "text[%d]: %s", i, ot_last_error());
    if (k > cap) {
      ot__respond_error(c, 400, "text", "context_length_exceeded", "text[%d] has %d source tokens (eos "
                        "included) but the model's maximum source length is %d tokens: split the sentence",
                        i, k, cap);
      return false;
    }
    q->src_len[i] = k;
    used += k;
  }
  q->n = n;
  return true;
}

static bool parse_request(ot__conn *c, const ot_json *root, tr_req *q) {
  const ot_server *s = c->srv;
  if (root->type != OT_JOBJ)
    return BAD(NULL, "the request body must be a JSON object, not %s", ot_json_type_name(root->type));
  const ot_json *model = ot_json_get(root, "model");
  if (model && model->type != OT_JSTR && model->type != OT_JNULL) return BAD("model", "model must be a string");
  q->search = s->search;
  int64_t beams = -1, max_tokens = -1;
  double lp = s->search.length_penalty, ratio = s->search.max_len_a;
  bool greedy = false, early = false;
  if (!ot__get_int(c, root, "beam_size", 1, s->cfg.max_beam, &beams) ||
      !ot__get_bool(c, root, "greedy", &greedy) ||
      !ot__get_num(c, root, "length_penalty", -100.0, 100.0, &lp) ||
      !ot__get_num(c, root, "max_length_ratio", 0.0, 1000.0, &ratio) ||
      !ot__get_bool(c, root, "early_stopping", &early) ||
      !ot__get_bool(c, root, "return_token_ids", &q->want_ids))
    return false;
  const ot_json *mt = ot_json_get(root, "max_tokens");
  if (mt && mt->type == OT_JNUM && mt->is_int && mt->i > s->ctx - 1) {
    ot__respond_error(c, 400, "max_tokens", "context_length_exceeded", "max_tokens=%lld exceeds the model's "
                      "maximum target length of %d tokens (eos included): ask for at most %d",
                      (long long)mt->i, s->ctx - 1, s->ctx - 1);
    return false;
  }
  if (!ot__get_int(c, root, "max_tokens", 1, s->ctx - 1, &max_tokens)) return false;
  if (greedy && beams > 1)
    return BAD("beam_size", "greedy=true with beam_size=%lld: greedy decoding is one beam (drop one of "
               "them)", (long long)beams);
  q->search.num_beams = greedy ? 1 : beams > 0 ? (int)beams : s->cfg.beam;
  q->search.length_penalty = (float)lp;
  q->search.max_len_a = (float)ratio;
  const ot_json *es = ot_json_get(root, "early_stopping");
  if (es && es->type == OT_JBOOL) q->search.early_stopping = early ? OT_EARLY_STOP_TRUE : OT_EARLY_STOP_FALSE;
  if (max_tokens > 0) q->search.max_length = (int)max_tokens + 1;   // the start token counts
  return get_text(c, root, q);
}

// Runs a checked request through the scheduler and answers.
static void run_translation(ot__conn *c, const tr_req *q, tr_state *st) {
  ot_server *s = c->srv;
  ot_sched_translation rq = {q->src, q->src_len, q->n, q->search, on_sentence, on_done, st};
  uint64_t rid = 0;
  const ot_status sub = ot_sched_submit_translation(s->sched, &rq, &rid);
  if (sub != OT_OK) {
    if (sub == OT_ENOMEM)
      ot__respond_error_h(c, 429, "Retry-After: 1\r\n", NULL, "server_busy", "%s", ot_last_error());
    else ot__respond_error(c, 400, NULL, NULL, "%s", ot_last_error());
    return;
  }
  char id[48];
  snprintf(id, sizeof id, "trans-%016llx",
           (unsigned long long)(atomic_fetch_add(&s->counter, 1) * 0xbf58476d1ce4e5b9ull));
  const int64_t created = (int64_t)time(NULL);
  c->tokens_in = 0;
  for (int i = 0; i < q->n; i++) c->tokens_in += q->src_len[i];
  bool cancelled = false;
  for (;;) {
    pthread_mutex_lock(&st->mu);
    if (!st->done) {
      struct timespec ts;   // the condition variable runs on CLOCK_MONOTONIC
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_nsec += 20 * 1000000;
      if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
      pthread_cond_timedwait(&st->cv, &st->mu, &ts);
    }
    const bool done = st->done;
    pthread_mutex_unlock(&st->mu);
    if (done) break;
    if (!cancelled && ot__conn_gone(c)) {   // the client left: its sentences need not be translated
      ot_sched_cancel(s->sched, rid);
      cancelled = true;
    }
  }
  // done: st is no longer shared
  const ot_sched_result *r = &st->res;
  c->tokens_out = r->new_tokens;
  if (r->end == OT_SCHED_FAILED || st->oom) {
    ot__respond_error(c, 500, NULL, NULL, "translation failed: %s", st->oom ? "out of memory" : r->message);
    return;
  }
  if (r->end != OT_SCHED_TRANSLATED || c->dead) {
    c->cancelled = r->end == OT_SCHED_CANCELLED || r->end == OT_SCHED_SHUTDOWN;
    if (!c->dead) ot__respond_error(c, 503, NULL, NULL, "the server is shutting down");
    return;
  }
  const int32_t eos = ot_model_config_of(s->m)->eos_id;
  ot__sbuf b = {0}, text = {0};
  ot__sb_printf(&b, "{\"id\":\"%s\",\"object\":\"translation\",\"created\":%lld,\"model\":", id,
                (long long)created);
  ot__sb_json_str(&b, s->model_id, strlen(s->model_id));
  ot__sb_puts(&b, ",\"translations\":[");
  for (int i = 0; i < q->n; i++) {
    text.len = 0;
    ot__tokens_text(s->bpe, st->toks[i], st->ntoks[i], eos, &text);
    ot__sb_printf(&b, "%s{\"index\":%d,\"text\":", i ? "," : "", i);
    ot__sb_json_str(&b, text.p ? text.p : "", text.len);
    if (q->want_ids) {
      ot__sb_puts(&b, ",\"token_ids\":[");
      for (int k = 0; k < st->ntoks[i]; k++) ot__sb_printf(&b, k ? ",%d" : "%d", st->toks[i][k]);
      ot__sb_puts(&b, "]");
    }
    ot__sb_puts(&b, "}");
  }
  ot__sb_printf(&b, "],\"usage\":{\"source_tokens\":%d,\"target_tokens\":%d}}\n", r->prompt_tokens,
                r->new_tokens);
  if (b.oom || text.oom) ot__respond_error(c, 503, NULL, NULL, "out of memory");
  else ot__respond(c, 200, "application/json", b.p, b.len, NULL);
  ot__sb_free(&b);
  ot__sb_free(&text);
}

void ot__api_translations(ot__conn *c, const ot__http_req *r) {
  ot_json_doc doc = {0};
  tr_req q;
  memset(&q, 0, sizeof q);
  tr_state st;
  memset(&st, 0, sizeof st);
  pthread_mutex_init(&st.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&st.cv, &ca);
  pthread_condattr_destroy(&ca);
  if (ot_json_parse(&doc, r->body, r->body_len, 32, "request body") != OT_OK) {
    ot__respond_error(c, 400, NULL, NULL, "%s", ot_last_error());
  } else if (parse_request(c, doc.root, &q)) {
    st.n = q.n;
    st.toks = calloc((size_t)q.n, sizeof *st.toks);
    st.ntoks = calloc((size_t)q.n, sizeof *st.ntoks);
    if (!st.toks || !st.ntoks) ot__respond_error(c, 503, NULL, NULL, "out of memory");
    else run_translation(c, &q, &st);
  }
  for (int i = 0; st.toks && i < st.n; i++) free(st.toks[i]);
  free(st.toks);
  free(st.ntoks);
  pthread_cond_destroy(&st.cv);
  pthread_mutex_destroy(&st.mu);
  free(q.src);
  free(q.src_len);
  ot_json_free(&doc);
}
