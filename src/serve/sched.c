// Request scheduler: one thread owns the model and steps up to max_batch
// sequences round-robin (a prefill chunk or one token per sequence per round),
// each with its own KV cache (B = 1) and sampler; or, batched, admits them into
// a batched decode engine (ot/serve.h) whose every step decodes one token of
// each of them at once; or, over an encoder-decoder, translates the queued
// requests together (sched_translate.c). Requests wait in a FIFO.
// Locking: `mu` guards the queue, the slot table, the stats and `stop`; the
// scheduler thread alone writes slot jobs (under mu) and runs the model and
// the callbacks (outside mu). A job's cancel flag is atomic.
#include "serve/sched_impl.h"
#include <stdlib.h>

void ot__job_free(job *j) {
  if (!j) return;
  ot_sampler_free(j->smp);
  free(j->prompt);
  free(j->src);
  free(j->src_len);
  free(j);
}

// Runs on_done outside the lock and frees the job (the caller removed it from
// the queue / slot table and updated the counters).
static void job_end(job *j, ot_sched_end end, const char *msg) {
  ot_sched_result r;
  memset(&r, 0, sizeof r);
  r.end = end;
  r.prompt_tokens = j->req.n_prompt;
  r.new_tokens = j->new_tokens;
  if (msg) snprintf(r.message, sizeof r.message, "%s", msg);
  if (j->req.on_done) j->req.on_done(j->req.ctx, &r);
  ot__job_free(j);
}

static void count_end(ot_sched *s, const job *j, ot_sched_end end) {
  s->st.finished++;
  s->st.tokens += (uint64_t)j->new_tokens;
  if (end == OT_SCHED_CANCELLED) s->st.cancelled++;
}

void ot__slot_end(ot_sched *s, int i, ot_sched_end end, const char *msg) {
  pthread_mutex_lock(&s->mu);
  job *j = s->slots[i].j;
  s->slots[i].j = NULL;
  s->slots[i].added = false;
  s->st.active--;
  count_end(s, j, end);
  pthread_mutex_unlock(&s->mu);
  job_end(j, end, msg);
}

// One step of slot i: the next prefill chunk, and once the prompt is in, one
// sampled token handed on and fed back (the same calls as ot_generate).
static void slot_step(ot_sched *s, int i) {
  job *j = s->slots[i].j;
  ot_kvcache *kv = s->slots[i].kv;
  if (atomic_load(&j->cancel)) { ot__slot_end(s, i, OT_SCHED_CANCELLED, NULL); return; }
  if (j->fed < j->req.n_prompt) {
    const int n = j->req.n_prompt - j->fed < s->chunk ? j->req.n_prompt - j->fed : s->chunk;
    if (ot_kv_forward(kv, j->prompt + j->fed, n, false, &j->logits, NULL) != OT_OK) {
      ot__slot_end(s, i, OT_SCHED_FAILED, ot_last_error());
      return;
    }
    j->fed += n;
    if (j->fed < j->req.n_prompt) return;
  }
  int32_t tok;
  if (ot_sampler_sample(j->smp, j->logits, &tok) != OT_OK) {
    ot__slot_end(s, i, OT_SCHED_FAILED, ot_last_error());
    return;
  }
  if (tok == j->req.stop_token) { ot__slot_end(s, i, OT_SCHED_STOP_TOKEN, NULL); return; }
  j->new_tokens++;
  if (j->req.on_token && !j->req.on_token(j->req.ctx, tok)) {
    ot__slot_end(s, i, OT_SCHED_STOPPED, NULL);
    return;
  }
  if (j->new_tokens >= j->req.max_tokens) { ot__slot_end(s, i, OT_SCHED_LENGTH, NULL); return; }
  if (ot_kv_forward(kv, &tok, 1, false, &j->logits, NULL) != OT_OK)
    ot__slot_end(s, i, OT_SCHED_FAILED, ot_last_error());
}

// ---- batched mode ----------------------------------------------------------
// Slot i's sequence leaves the engine (unless it already left) and its request ends.
static void engine_end(ot_sched *s, int i, bool left, ot_sched_end end, const char *msg) {
  if (s->slots[i].added && !left) ot_engine_remove(s->eng, s->slots[i].eid);
  ot__slot_end(s, i, end, msg);
}

// Hands event ev of slot i's sequence on (its token, or its end).
static void deliver(ot_sched *s, int i, const ot_engine_event *ev) {
  job *j = s->slots[i].j;
  if (atomic_load(&j->cancel)) { engine_end(s, i, ev->done, OT_SCHED_CANCELLED, NULL); return; }
  if (ev->token < 0) { engine_end(s, i, true, OT_SCHED_STOP_TOKEN, NULL); return; }
  j->new_tokens++;
  if (j->req.on_token && !j->req.on_token(j->req.ctx, ev->token)) {
    engine_end(s, i, ev->done, OT_SCHED_STOPPED, NULL);
    return;
  }
  if (ev->done) engine_end(s, i, true, OT_SCHED_LENGTH, NULL);
}

// One round: cancellations, admissions (a prompt the block pool cannot hold yet
// waits in its slot until sequences leave; one that could never fit fails), then
// one engine step for every admitted sequence.
static void batched_round(ot_sched *s) {
  for (int i = 0; i < s->cfg.max_batch; i++) {
    slot *sl = &s->slots[i];
    if (!sl->j) continue;
    if (atomic_load(&sl->j->cancel)) { engine_end(s, i, false, OT_SCHED_CANCELLED, NULL); continue; }
    if (sl->added) continue;
    const job *j = sl->j;
    ot_request r = {j->prompt, j->req.n_prompt, j->req.sampler, j->req.max_tokens, j->req.stop_token};
    ot_engine_event ev;
    const ot_status st = ot_engine_add(s->eng, &r, &sl->eid, &ev);
    if (st == OT_ENOMEM && ot_engine_active(s->eng) > 0) continue;   // retried next round
    if (st != OT_OK) { ot__slot_end(s, i, OT_SCHED_FAILED, ot_last_error()); continue; }
    sl->added = true;
    deliver(s, i, &ev);
  }
  if (ot_engine_active(s->eng) == 0) return;
  const ot_engine_event *ev = NULL;
  int n = 0;
  if (ot_engine_step(s->eng, &ev, &n) != OT_OK) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", ot_last_error());
    for (int i = 0; i < s->cfg.max_batch; i++)
      if (s->slots[i].j && s->slots[i].added) engine_end(s, i, false, OT_SCHED_FAILED, msg);
    return;
  }
  for (int k = 0; k < n; k++)
    for (int i = 0; i < s->cfg.max_batch; i++)
      if (s->slots[i].j && s->slots[i].added && s->slots[i].eid == ev[k].id) {
        deliver(s, i, &ev[k]);
        break;
      }
}

static void *sched_main(void *arg) {
  ot_sched *s = arg;
  for (;;) {
    job *dropped = NULL;   // cancelled while queued: ended outside the lock
    pthread_mutex_lock(&s->mu);
    for (;;) {
      for (job **pp = &s->qhead; *pp;) {
        job *j = *pp;
        if (atomic_load(&j->cancel)) {
          *pp = j->next;
          s->st.queued--;
          count_end(s, j, OT_SCHED_CANCELLED);
          j->next = dropped;
          dropped = j;
        } else {
          pp = &j->next;
        }
      }
      s->qtail = NULL;
      for (job *j = s->qhead; j; j = j->next) s->qtail = j;
      if (s->tr && !s->paused && s->st.active == 0) ot__tsched_admit(s);
      for (int i = 0; !s->tr && !s->paused && i < s->cfg.max_batch && s->qhead; i++) {
        if (s->slots[i].j) continue;
        job *j = s->qhead;
        s->qhead = j->next;
        if (!s->qhead) s->qtail = NULL;
        j->next = NULL;
        if (s->slots[i].kv) ot_kv_reset(s->slots[i].kv);
        s->slots[i].j = j;
        s->st.queued--;
        s->st.active++;
      }
      if (s->stop || s->st.active > 0 || dropped) break;
      pthread_cond_wait(&s->cv, &s->mu);
    }
    const bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    while (dropped) {
      job *j = dropped;
      dropped = j->next;
      job_end(j, OT_SCHED_CANCELLED, NULL);
    }
    if (stop) break;
    if (s->tr) {
      ot__tsched_round(s);
      continue;
    }
    if (s->eng) {
      batched_round(s);
      continue;
    }
    for (int i = 0; i < s->cfg.max_batch; i++)
      if (s->slots[i].j) slot_step(s, i);
  }
  // shutdown: end the active and the queued requests
  for (int i = 0; i < s->cfg.max_batch; i++)
    if (s->slots[i].j) ot__slot_end(s, i, OT_SCHED_SHUTDOWN, NULL);
  for (;;) {
    pthread_mutex_lock(&s->mu);
    job *j = s->qhead;
    if (j) {
      s->qhead = j->next;
      s->st.queued--;
      count_end(s, j, OT_SCHED_SHUTDOWN);
    }
    pthread_mutex_unlock(&s->mu);
    if (!j) break;
    job_end(j, OT_SCHED_SHUTDOWN, NULL);
  }
  ot_scratch_release();
  return NULL;
}

ot_status ot_sched_create(ot_sched **out, const ot_model *m, const ot_sched_config *cfg) {
  static const char fn[] = "ot_sched_create";
  OT_CHECK_PTR(out, fn);
  *out = NULL;
  OT_CHECK_PTR(m, fn);
  ot_sched_config c;
  memset(&c, 0, sizeof c);
  if (cfg) c = *cfg;
  const ot_model_config *mc = ot_model_config_of(m);
  if (c.max_batch == 0) c.max_batch = 4;
  if (c.max_queue == 0) c.max_queue = 256;
  if (c.max_seq == 0) c.max_seq = mc->max_seq;
  if (c.max_batch < 1 || c.max_batch > 4096)
    return ot_error(OT_EINVAL, "%s: max_batch=%d must be in [1, 4096] (0: 4)", fn, c.max_batch);
  if (c.max_queue < 1)
    return ot_error(OT_EINVAL, "%s: max_queue=%d must be >= 1 (0: 256)", fn, c.max_queue);
  if (c.max_seq < 1 || c.max_seq > mc->max_seq)
    return ot_error(OT_EINVAL, "%s: max_seq=%d must be in [1, %d] (the model's context; 0: all of it)",
                    fn, c.max_seq, mc->max_seq);
  ot_sched *s = calloc(1, sizeof *s);
  if (!s) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  s->m = m;
  s->cfg = c;
  s->cap = c.max_seq;
  s->V = mc->vocab;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  ot_status st = OT_OK;
  s->slots = calloc((size_t)c.max_batch, sizeof *s->slots);
  if (!s->slots) st = ot_error(OT_ENOMEM, "%s: out of memory", fn);
  const bool translate = mc->arch == OT_ARCH_ENCDEC;
  if (st == OT_OK && translate) st = ot__tsched_create(s);
  if (st == OT_OK && !translate && c.batched) {
    ot_engine_config ec = {c.weights, c.weights == OT_I8 ? c.group : 0, c.kv_dtype, c.kv_bytes, 16,
                           c.max_batch, c.max_seq, c.max_seq};
    st = ot_engine_create(&s->eng, m, &ec);
  }
  for (int i = 0; st == OT_OK && !translate && !c.batched && i < c.max_batch; i++) {
    ot_kv_config kc = {1, c.max_seq, 0, false};
    st = ot_kv_create(&s->slots[i].kv, m, &kc);
  }
  if (st == OT_OK) {
    s->chunk = c.batched || translate ? 0 : ot_kv_config_of(s->slots[0].kv)->chunk;
    if (pthread_create(&s->th, NULL, sched_main, s) != 0)
      st = ot_error(OT_EINTERNAL, "%s: cannot start the scheduler thread", fn);
    else
      s->started = true;
  }
  if (st != OT_OK) { ot_sched_free(s); return st; }
  *out = s;
  return OT_OK;
}

void ot_sched_free(ot_sched *s) {
  if (!s) return;
  if (s->started) {
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
  }
  if (s->slots)
    for (int i = 0; i < s->cfg.max_batch; i++) ot_kv_free(s->slots[i].kv);
  ot_engine_free(s->eng);
  ot__tsched_free(s);
  free(s->slots);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

int ot_sched_capacity(const ot_sched *s) { return s ? s->cap : 0; }

ot_status ot_sched_submit(ot_sched *s, const ot_sched_request *req, uint64_t *id) {
  static const char fn[] = "ot_sched_submit";
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(req, fn);
  if (s->tr)
    return ot_error(OT_EINVAL, "%s: this scheduler serves an encoder-decoder model: submit "
                    "translations (ot_sched_submit_translation)", fn);
  if (!req->prompt || req->n_prompt < 1)
    return ot_error(OT_EINVAL, "%s: the prompt needs at least one token (n_prompt=%d)", fn, req->n_prompt);
  if (req->max_tokens < 1)
    return ot_error(OT_EINVAL, "%s: max_tokens=%d must be >= 1", fn, req->max_tokens);
  if ((int64_t)req->n_prompt + req->max_tokens - 1 > s->cap)
    return ot_error(OT_EINVAL, "%s: %d prompt tokens + max_tokens=%d exceed the context of %d tokens",
                    fn, req->n_prompt, req->max_tokens, s->cap);
  for (int i = 0; i < req->n_prompt; i++)
    if (req->prompt[i] < 0 || req->prompt[i] >= s->V)
      return ot_error(OT_EINVAL, "%s: prompt token %d at index %d is outside [0, vocab=%d)", fn,
                      req->prompt[i], i, s->V);
  job *j = calloc(1, sizeof *j);
  if (!j) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  ot_status st = ot_sampler_create(&j->smp, &req->sampler, s->V);
  if (st != OT_OK) { ot__job_free(j); return st; }
  j->prompt = malloc(sizeof(int32_t) * (size_t)req->n_prompt);
  if (!j->prompt) { ot__job_free(j); return ot_error(OT_ENOMEM, "%s: out of memory", fn); }
  memcpy(j->prompt, req->prompt, sizeof(int32_t) * (size_t)req->n_prompt);
  j->req = *req;
  j->req.prompt = j->prompt;
  atomic_init(&j->cancel, false);
  return ot__sched_enqueue(s, j, id, fn);
}

ot_status ot__sched_enqueue(ot_sched *s, job *j, uint64_t *id, const char *fn) {
  pthread_mutex_lock(&s->mu);
  if (s->stop || s->st.queued >= s->cfg.max_queue) {
    const bool stopping = s->stop;
    pthread_mutex_unlock(&s->mu);
    ot__job_free(j);
    return stopping ? ot_error(OT_EINVAL, "%s: the scheduler is shutting down", fn)
                    : ot_error(OT_ENOMEM, "%s: the queue is full (max_queue=%d requests wait "
                               "already); retry later", fn, s->cfg.max_queue);
  }
  j->id = ++s->next_id;
  if (id) *id = j->id;
  if (s->qtail) s->qtail->next = j;
  else s->qhead = j;
  s->qtail = j;
  s->st.queued++;
  s->st.submitted++;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return OT_OK;
}

bool ot_sched_cancel(ot_sched *s, uint64_t id) {
  if (!s) return false;
  bool found = false;
  pthread_mutex_lock(&s->mu);
  for (job *j = s->qhead; j && !found; j = j->next)
    if (j->id == id) { atomic_store(&j->cancel, true); found = true; }
  for (int i = 0; i < s->cfg.max_batch && !found; i++)
    if (s->slots[i].j && s->slots[i].j->id == id) { atomic_store(&s->slots[i].j->cancel, true); found = true; }
  if (found) {
    s->st.cancel_requests++;
    pthread_cond_signal(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return found;
}

bool ot_sched_translates(const ot_sched *s) { return s && s->tr; }

void ot_sched_pause(ot_sched *s, bool paused) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->paused = paused;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void ot_sched_stats_get(ot_sched *s, ot_sched_stats *st) {
  if (!s || !st) return;
  pthread_mutex_lock(&s->mu);
  *st = s->st;
  pthread_mutex_unlock(&s->mu);
}
