// Translation requests in the scheduler (an encoder-decoder model): requests
// queue as all do; a round packs the oldest one and the later ones with the
// same search settings (up to max_batch sentences) into the slots and runs
// their sentences through one ot_translate_ids call, then hands each sentence
// to its request and ends the requests. Sentences of a batch give what each
// alone gives (ot_translate_ids), so batching changes no result.
#include "serve/sched_impl.h"
#include <math.h>
#include <stdlib.h>

ot_status ot__tsched_create(ot_sched *s) {
  static const char fn[] = "ot_sched_create";
  ot_sched_config *c = &s->cfg;
  if (c->max_beams == 0) c->max_beams = 4;
  if (c->max_beams < 1 || c->max_beams > 256)
    return ot_error(OT_EINVAL, "%s: max_beams=%d must be in [1, 256] (0: 4)", fn, c->max_beams);
  if (c->max_seq < 2)
    return ot_error(OT_EINVAL, "%s: max_seq=%d: a translation needs >= 2 target tokens (the start "
                    "token and one more)", fn, c->max_seq);
  ot_translator_config tc = {c->max_batch, c->max_beams, c->max_seq, c->max_seq};
  ot_status st;
  if (c->weights == OT_F32) {
    st = ot_translator_create(&s->tr, s->m, &tc);
  } else if (c->weights == OT_BF16 || c->weights == OT_I8) {
    st = ot_qmodel_from_model(&s->qm, s->m, c->weights == OT_I8 ? OT_QW_INT8 : OT_QW_BF16,
                              c->weights == OT_I8 ? c->group : 0);
    if (st == OT_OK) st = ot_translator_create_q(&s->tr, s->qm, &tc);
  } else {
    return ot_error(OT_EINVAL, "%s: weights=%s: translation weights are f32, bf16 or int8", fn,
                    ot_dtype_name(c->weights));
  }
  if (st != OT_OK) return st;
  const size_t rows = (size_t)c->max_batch, cap = (size_t)c->max_seq;
  s->tsrc = calloc(rows * cap, sizeof(int32_t));
  s->ttok = calloc(rows * cap, sizeof(int32_t));
  s->tlen = calloc(rows, sizeof(int32_t));
  s->tolen = calloc(rows, sizeof(int));
  if (!s->tsrc || !s->ttok || !s->tlen || !s->tolen) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  return OT_OK;
}

void ot__tsched_free(ot_sched *s) {
  ot_translator_free(s->tr);
  ot_qmodel_free(s->qm);
  free(s->tsrc);
  free(s->ttok);
  free(s->tlen);
  free(s->tolen);
}

// True when two searches can share one ot_translate_ids call (every field equal).
static bool same_search(const ot_beam_config *a, const ot_beam_config *b) {
  return a->vocab == b->vocab && a->num_beams == b->num_beams && a->length_penalty == b->length_penalty &&
         a->early_stopping == b->early_stopping && a->max_length == b->max_length &&
         a->max_len_a == b->max_len_a && a->max_len_b == b->max_len_b && a->min_length == b->min_length &&
         a->eos_id == b->eos_id && a->pad_id == b->pad_id && a->decoder_start_id == b->decoder_start_id &&
         a->repetition_penalty == b->repetition_penalty &&
         a->no_repeat_ngram_size == b->no_repeat_ngram_size && a->n_bad_words == b->n_bad_words &&
         a->bad_words_len == b->bad_words_len && a->bad_words_ids == b->bad_words_ids &&
         a->forced_eos_id == b->forced_eos_id;
}

void ot__tsched_admit(ot_sched *s) {
  const job *head = s->qhead;
  if (!head) return;
  int used = 0, k = 0;
  for (job **pp = &s->qhead; *pp && k < s->cfg.max_batch;) {
    job *j = *pp;
    if (used + j->tr.n <= s->cfg.max_batch && same_search(&j->tr.search, &head->tr.search)) {
      *pp = j->next;
      j->next = NULL;
      s->slots[k++].j = j;
      used += j->tr.n;
      s->st.queued--;
      s->st.active++;
    } else {
      pp = &j->next;
    }
  }
  s->qtail = NULL;
  for (job *j = s->qhead; j; j = j->next) s->qtail = j;
}

void ot__tsched_round(ot_sched *s) {
  const int B = s->cfg.max_batch, S = s->cap;
  int total = 0, first = -1;
  for (int i = 0; i < B; i++) {
    job *j = s->slots[i].j;
    if (!j) continue;
    if (atomic_load(&j->cancel)) { ot__slot_end(s, i, OT_SCHED_CANCELLED, NULL); continue; }
    if (first < 0) first = i;
    const int32_t *src = j->src;
    for (int k = 0; k < j->tr.n; k++) {
      memcpy(s->tsrc + (size_t)total * S, src, sizeof(int32_t) * (size_t)j->src_len[k]);
      s->tlen[total++] = j->src_len[k];
      src += j->src_len[k];
    }
  }
  if (total == 0) return;
  const ot_beam_config bc = s->slots[first].j->tr.search;
  const ot_status st = ot_translate_ids(s->tr, total, s->tsrc, S, s->tlen, &bc, s->ttok, S, s->tolen,
                                        NULL, NULL);
  char msg[256] = "";
  if (st != OT_OK) snprintf(msg, sizeof msg, "%s", ot_last_error());
  pthread_mutex_lock(&s->mu);
  s->st.translate_calls++;
  s->st.sentences += (uint64_t)total;
  if (total > s->st.largest_call) s->st.largest_call = total;
  pthread_mutex_unlock(&s->mu);
  int row = 0;
  for (int i = 0; i < B; i++) {
    job *j = s->slots[i].j;
    if (!j) continue;
    const int r0 = row;
    row += j->tr.n;
    if (st != OT_OK) { ot__slot_end(s, i, OT_SCHED_FAILED, msg); continue; }
    if (atomic_load(&j->cancel)) { ot__slot_end(s, i, OT_SCHED_CANCELLED, NULL); continue; }
    for (int k = 0; k < j->tr.n; k++) {
      const int n = s->tolen[r0 + k];
      j->new_tokens += n;
      if (j->tr.on_sentence) j->tr.on_sentence(j->tr.ctx, k, s->ttok + (size_t)(r0 + k) * S, n);
    }
    ot__slot_end(s, i, OT_SCHED_TRANSLATED, NULL);
  }
}

// The length limit of a sentence of n source tokens, as ot_beam_search counts it.
static double sent_limit(const ot_beam_config *c, int n) {
  double lim = c->max_length > 0 ? c->max_length : INFINITY;
  if (c->max_len_a != 0.0f || c->max_len_b != 0.0f) {
    const double l = floor((double)c->max_len_a * n + c->max_len_b);
    if (l < lim) lim = l;
  }
  return lim;
}

ot_status ot_sched_submit_translation(ot_sched *s, const ot_sched_translation *req, uint64_t *id) {
  static const char fn[] = "ot_sched_submit_translation";
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(req, fn);
  if (!s->tr)
    return ot_error(OT_EINVAL, "%s: this scheduler serves a decoder-only model: submit completions "
                    "(ot_sched_submit)", fn);
  const ot_sched_config *c = &s->cfg;
  if (req->n < 1 || req->n > c->max_batch)
    return ot_error(OT_EINVAL, "%s: n=%d sentences must be in [1, %d] (max_batch: split the request)", fn,
                    req->n, c->max_batch);
  if (!req->src || !req->src_len) return ot_error(OT_EINVAL, "%s: src and src_len are required", fn);
  const ot_beam_config *b = &req->search;
  const ot_model_config *mc = ot_model_config_of(s->m);
  if (b->vocab != s->V || b->eos_id != mc->eos_id || b->pad_id != mc->pad_id ||
      b->decoder_start_id != mc->decoder_start_id)
    return ot_error(OT_EINVAL, "%s: the search's vocab / eos / pad / start ids (%d / %d / %d / %d) are "
                    "not the model's (%d / %d / %d / %d)", fn, b->vocab, b->eos_id, b->pad_id,
                    b->decoder_start_id, s->V, mc->eos_id, mc->pad_id, mc->decoder_start_id);
  if (b->num_beams < 1 || b->num_beams > c->max_beams)
    return ot_error(OT_EINVAL, "%s: num_beams=%d must be in [1, %d] (max_beams)", fn, b->num_beams,
                    c->max_beams);
  if (b->max_length < 2 || b->max_length > s->cap)
    return ot_error(OT_EINVAL, "%s: max_length=%d must be in [2, %d] (the target capacity, start token "
                    "included)", fn, b->max_length, s->cap);
  if (!isfinite(b->max_len_a) || !isfinite(b->max_len_b) || b->max_len_a < 0.0f)
    return ot_error(OT_EINVAL, "%s: max_len_a=%g must be >= 0 and max_len_b=%g finite", fn, b->max_len_a,
                    b->max_len_b);
  int64_t total = 0;
  for (int k = 0; k < req->n; k++) {
    const int n = req->src_len[k];
    if (n < 1 || n > s->cap)
      return ot_error(OT_EINVAL, "%s: sentence %d has %d source tokens; it needs 1 to %d (the model's "
                      "maximum source length)", fn, k, n, s->cap);
    if (sent_limit(b, n) < 2)
      return ot_error(OT_EINVAL, "%s: sentence %d: the length limit %.0f leaves no token to generate "
                      "(raise max_length or max_len_a / max_len_b)", fn, k, sent_limit(b, n));
    total += n;
  }
  for (int64_t i = 0; i < total; i++)
    if (req->src[i] < 0 || req->src[i] >= s->V)
      return ot_error(OT_EINVAL, "%s: source token %d at index %lld is outside [0, vocab=%d)", fn,
                      req->src[i], (long long)i, s->V);
  job *j = calloc(1, sizeof *j);
  if (!j) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  j->src = malloc(sizeof(int32_t) * (size_t)total);
  j->src_len = malloc(sizeof(int32_t) * (size_t)req->n);
  if (!j->src || !j->src_len) { ot__job_free(j); return ot_error(OT_ENOMEM, "%s: out of memory", fn); }
  memcpy(j->src, req->src, sizeof(int32_t) * (size_t)total);
  memcpy(j->src_len, req->src_len, sizeof(int32_t) * (size_t)req->n);
  j->tr = *req;
  j->tr.src = j->src;
  j->tr.src_len = j->src_len;
  j->req.n_prompt = (int)total;
  j->req.on_done = req->on_done;
  j->req.ctx = req->ctx;
  atomic_init(&j->cancel, false);
  return ot__sched_enqueue(s, j, id, fn);
}
