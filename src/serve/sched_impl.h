// Private parts of the request scheduler (sched.c: the queue, the thread,
// decoder-only requests; sched_translate.c: translation requests).
#ifndef OT_SCHED_IMPL_H
#define OT_SCHED_IMPL_H
#include "internal.h"
#include "ot/serve.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct job {
  uint64_t id;
  ot_sched_request req;      // req.prompt points at `prompt`; a translation: only
                             // n_prompt (its source tokens), on_done and ctx are set
  int32_t *prompt;           // own copy [n_prompt]
  ot_sampler *smp;
  atomic_bool cancel;
  int fed;                   // prompt tokens already in the cache
  int new_tokens;            // tokens passed on
  const float *logits;       // [vocab_padded] after the last forward (the slot cache's buffer)
  // a translation: tr.src / tr.src_len point at the copies src [n_prompt], src_len [tr.n]
  ot_sched_translation tr;
  int32_t *src, *src_len;
  struct job *next;          // queue link
} job;

typedef struct {
  ot_kvcache *kv;   // per-request mode
  job *j;
  bool added;       // batched: admitted into the engine as sequence eid
  int eid;
} slot;

struct ot_sched {
  const ot_model *m;
  ot_sched_config cfg;
  int cap, V, chunk;
  slot *slots;               // [max_batch]
  ot_engine *eng;            // batched mode
  // translation mode: the translator (over qm when the weights are quantized)
  // and one call's buffers: src [max_batch, cap], src_len [max_batch],
  // tokens [max_batch, cap], lengths [max_batch]
  ot_translator *tr;
  ot_qmodel *qm;
  int32_t *tsrc, *tlen, *ttok;
  int *tolen;
  pthread_t th;
  bool started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job *qhead, *qtail;
  bool stop, paused;
  uint64_t next_id;
  ot_sched_stats st;
};

// sched.c
void ot__job_free(job *j);   // NULL ok
// Ends the job of slot i (scheduler thread): counts it under mu, runs on_done
// outside it, frees the job.
void ot__slot_end(ot_sched *s, int i, ot_sched_end end, const char *msg);
// Queues j (submit's last step): OT_ENOMEM naming max_queue when full (j freed).
ot_status ot__sched_enqueue(ot_sched *s, job *j, uint64_t *id, const char *fn);

// sched_translate.c
// Creates the translator and the call buffers (s->cfg resolved, s->m an
// encoder-decoder); OT_EINVAL naming a bad field.
ot_status ot__tsched_create(ot_sched *s);
void ot__tsched_free(ot_sched *s);
// Under s->mu, every slot free: moves the oldest queued request and the later
// ones with the same search, up to max_batch sentences, into the slots.
void ot__tsched_admit(ot_sched *s);
// Scheduler thread, outside mu: one ot_translate_ids call over the slots' requests,
// each sentence handed to on_sentence, every slot's request ended.
void ot__tsched_round(ot_sched *s);
#endif
