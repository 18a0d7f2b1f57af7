// `ot generate --batch N` (or several prompts): every prompt goes through the
// serving engine. At most N sequences decode together, one token each per
// step with the weights read once for all of them; the other prompts wait and
// join as soon as a sequence ends and frees its slot and KV blocks
// (continuous batching). Each sequence is printed when it ends.
#include "generate_batch.h"
#include "ot/infer.h"
#include <errno.h>
#include <string.h>

bool cli_parse_ids(const char *s, int V, int32_t *ids, int cap, int *n) {
  *n = 0;
  for (char *end; *s;) {
    while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n') s++;
    if (!*s) break;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v < 0 || v >= V || *n >= cap) {
      fprintf(stderr, "ot generate: prompt id '%.20s' is not an id in [0, %d)%s\n", s, V,
              *n >= cap ? " or too many ids" : "");
      return false;
    }
    ids[(*n)++] = (int32_t)v;
    s = end;
  }
  return true;
}

typedef struct {
  int32_t *ids;       // prompt
  int n;
  int32_t *out;       // [max_tokens] generated
  int n_out;
  int max_tokens;
  bool stopped;
} seq_io;

static void print_tokens(const cli_batch_args *a, const int32_t *t, int n, bool lead) {
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    const char *s = a->ids ? NULL : ot_bpe_token(a->t, t[i], &len);
    if (s) fwrite(s, 1, len, stdout);
    else printf(a->ids ? "%s%d" : "%s<%d>", lead || i ? " " : "", t[i]);
  }
}

static void print_seq(const cli_batch_args *a, const char *prompt, int i, const seq_io *q) {
  if (!a->quiet) {
    printf("--- sequence %d: %d prompt + %d new tokens, ended on %s\n", i, q->n, q->n_out,
           q->stopped ? "<|endoftext|>" : "the token limit");
    if (a->ids) print_tokens(a, q->ids, q->n, false);
    else fputs(prompt, stdout);
  }
  print_tokens(a, q->out, q->n_out, !a->quiet);
  printf("\n");
  fflush(stdout);
}

// The prompt list: --prompt values, then the file's non-empty lines (its
// buffer in *buf), or `samples` copies of a single prompt. NULL on failure.
static const char **prompt_list(const cli_batch_args *a, int *np, char **buf) {
  *buf = NULL;
  size_t len = 0;
  if (a->prompts_file) {
    FILE *f = fopen(a->prompts_file, "rb");
    if (!f) { fprintf(stderr, "ot generate: cannot open %s: %s\n", a->prompts_file, strerror(errno)); return NULL; }
    fseek(f, 0, SEEK_END);
    const long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
    if (!*buf || fread(*buf, 1, (size_t)sz, f) != (size_t)sz) {
      fprintf(stderr, "ot generate: cannot read %s\n", a->prompts_file);
      fclose(f);
      return NULL;
    }
    fclose(f);
    len = (size_t)sz;
    (*buf)[len] = 0;
  }
  size_t lines = 0;
  for (size_t i = 0; i < len; i++) lines += (*buf)[i] == '\n';
  const int copies = a->n_prompts == 1 && !a->prompts_file && a->batch > 1 ? a->batch : 1;
  const char **l = malloc(sizeof(char *) * ((size_t)a->n_prompts * copies + lines + 1));
  if (!l) { fprintf(stderr, "ot generate: out of memory\n"); return NULL; }
  int n = 0;
  for (int c = 0; c < copies; c++)
    for (int i = 0; i < a->n_prompts; i++) l[n++] = a->prompts[i];
  for (char *p = *buf, *e; p && *p; p = e) {
    e = strchr(p, '\n');
    if (e) *e++ = 0; else e = p + strlen(p);
    if (e - p > 1 && p[strlen(p) - 1] == '\r') p[strlen(p) - 1] = 0;
    if (*p) l[n++] = p;
  }
  if (n == 0) { fprintf(stderr, "ot generate: %s holds no prompt\n", a->prompts_file); free(l); return NULL; }
  *np = n;
  return l;
}

int cli_generate_batch(const cli_batch_args *a) {
  ot_qmodel *qm = a->q;
  const ot_model_config *mc = qm ? &qm->config : ot_model_config_of(a->m);
  int np = 0, rc = 1, longest = 1, most = 1;
  char *fbuf = NULL;
  const char **prompts = prompt_list(a, &np, &fbuf);
  seq_io *q = prompts ? calloc((size_t)np, sizeof *q) : NULL;
  ot_engine *e = NULL;
  if (!q) {
    if (prompts) fprintf(stderr, "ot generate: out of memory\n");
    free(prompts);
    free(fbuf);
    ot_qmodel_free(qm);
    return 1;
  }
  // tokenize; lower max_tokens per prompt to fit the context
  for (int i = 0; i < np; i++) {
    const size_t len = strlen(prompts[i]);
    q[i].ids = malloc(sizeof(int32_t) * (len + 2));
    if (!q[i].ids) { fprintf(stderr, "ot generate: out of memory\n"); goto out; }
    if (a->ids) {
      if (!cli_parse_ids(prompts[i], mc->vocab, q[i].ids, (int)len + 1, &q[i].n)) goto out;
    } else {
      size_t n = 0;
      if (ot_bpe_encode(a->t, prompts[i], len, true, q[i].ids, len + 1, &n) != OT_OK) {
        fprintf(stderr, "ot generate: prompt %d: %s\n", i, ot_last_error());
        goto out;
      }
      q[i].n = (int)n;
    }
    if (q[i].n == 0) {
      if (a->eot < 0) { fprintf(stderr, "ot generate: prompt %d is empty\n", i); goto out; }
      q[i].ids[q[i].n++] = a->eot;
    }
    if (q[i].n > mc->max_seq) {
      fprintf(stderr, "ot generate: prompt %d has %d tokens, more than the model's context of %d\n",
              i, q[i].n, mc->max_seq);
      goto out;
    }
    q[i].max_tokens = a->max_tokens < mc->max_seq - q[i].n + 1 ? a->max_tokens : mc->max_seq - q[i].n + 1;
    longest = q[i].n > longest ? q[i].n : longest;
    most = q[i].n + q[i].max_tokens - 1 > most ? q[i].n + q[i].max_tokens - 1 : most;
    q[i].out = malloc(sizeof(int32_t) * (size_t)q[i].max_tokens);
    if (!q[i].out) { fprintf(stderr, "ot generate: out of memory\n"); goto out; }
  }
  const int want = a->batch > 0 ? a->batch : 8, batch = want < np ? want : np;
  ot_engine_config ec = {a->weights, a->weights == OT_I8 ? a->group : 0, a->kv,
                         (size_t)(a->kv_mb * 1e6), 16, batch, most, longest};
  double t0 = ot_now();
  const ot_status cs = qm ? ot_engine_create_q(&e, qm, &ec) : ot_engine_create(&e, a->m, &ec);
  qm = NULL;   // the engine took it over
  if (cs != OT_OK) {
    fprintf(stderr, "ot generate: %s\n", ot_last_error());
    goto out;
  }
  const ot_kvpool *pool = ot_engine_pool(e);
  const ot_dtype wdt = ot_engine_config_of(e)->weights;
  const int wgroup = ot_engine_config_of(e)->group;
  if (!a->quiet)
    fprintf(stderr, "engine: %s weights (%.1f MB read per step%s), KV cache %s %.2f MB in %d blocks "
            "of 16 tokens, %d prompts, at most %d sequences at once, built in %.2f s\n",
            wdt == OT_I8 ? "int8" : ot_dtype_name(wdt), ot_engine_weight_bytes(e) / 1e6,
            wdt == OT_I8 ? (wgroup ? ", a scale per group of columns" : ", per-row scales") : "",
            ot_dtype_name(a->kv), ot_kvpool_bytes(pool) / 1e6, ot_kvpool_blocks(pool), np, batch,
            ot_now() - t0);
  // continuous batching: admit while slots and blocks allow, step, print what ends
  int *who = malloc(sizeof(int) * (size_t)np);   // sequence id -> prompt index
  if (!who) { fprintf(stderr, "ot generate: out of memory\n"); goto out; }
  int next = 0, done = 0, steps = 0, prefill_tok = 0;
  long decoded = 0;
  double prefill_s = 0.0, decode_s = 0.0;
  while (done < np) {
    while (next < np && ot_engine_active(e) < batch) {
      ot_request r = {q[next].ids, q[next].n, a->sampler, q[next].max_tokens, a->eot};
      r.sampler.seed += (uint64_t)next;
      int id;
      ot_engine_event ev;
      const double ta = ot_now();
      ot_status s = ot_engine_add(e, &r, &id, &ev);
      if (s == OT_ENOMEM && ot_engine_active(e) > 0) break;   // wait for blocks to free up
      if (s != OT_OK) { fprintf(stderr, "ot generate: %s\n", ot_last_error()); free(who); goto out; }
      prefill_s += ot_now() - ta;
      prefill_tok += q[next].n;
      who[id] = next;
      seq_io *z = &q[next++];
      if (ev.token >= 0) z->out[z->n_out++] = ev.token;
      if (ev.done) { z->stopped = ev.token < 0; print_seq(a, prompts[who[id]], who[id], z); done++; }
    }
    if (ot_engine_active(e) == 0) continue;
    const ot_engine_event *ev;
    int n;
    const double ts = ot_now();
    if (ot_engine_step(e, &ev, &n) != OT_OK) {
      fprintf(stderr, "ot generate: %s\n", ot_last_error());
      free(who);
      goto out;
    }
    decode_s += ot_now() - ts;
    steps++;
    decoded += n;
    for (int k = 0; k < n; k++) {
      seq_io *z = &q[who[ev[k].id]];
      if (ev[k].token >= 0) z->out[z->n_out++] = ev[k].token;
      if (ev[k].done) { z->stopped = ev[k].token < 0; print_seq(a, prompts[who[ev[k].id]], who[ev[k].id], z); done++; }
    }
  }
  free(who);
  if (!a->quiet)
    fprintf(stderr, "prefill %d tokens in %.3f s (%.1f tokens/s); decode %d steps, %ld tokens in "
            "%.3f s (%.2f tokens/s, %.2f per sequence)\n", prefill_tok, prefill_s,
            prefill_tok / (prefill_s > 0 ? prefill_s : 1e-9), steps, decoded, decode_s,
            decoded / (decode_s > 0 ? decode_s : 1e-9),
            steps / (decode_s > 0 ? decode_s : 1e-9));
  rc = 0;
out:
  for (int i = 0; i < np; i++) { free(q[i].ids); free(q[i].out); }
  free(q);
  free(prompts);
  free(fbuf);
  ot_qmodel_free(qm);
  ot_engine_free(e);
  return rc;
}
