// A request scheduler client for the serving tests (test_serve, test_serve_batched):
// collects the tokens of one ot_sched request and its end, and waits for it.
#ifndef OT_TEST_SCHED_COLLECT_H
#define OT_TEST_SCHED_COLLECT_H
#include "harness.h"
#include "ot/serve.h"
#include <pthread.h>
#include <time.h>

#define COL_CAP 128   // tokens kept (n counts them all)

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int32_t toks[COL_CAP];
  int n, done_calls;
  ot_sched_result res;
  int stop_after;    // on_token returns false after this many (0: never)
} collect;

static void col_init(collect *c) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
}

// on_token: keeps the token; false once stop_after tokens came.
static bool col_token(void *ctx, int32_t t) {
  collect *c = ctx;
  pthread_mutex_lock(&c->mu);
  if (c->n < COL_CAP) c->toks[c->n] = t;
  c->n++;
  const bool go = !(c->stop_after && c->n >= c->stop_after);
  pthread_mutex_unlock(&c->mu);
  return go;
}

// on_done: keeps the result, counts the call, wakes col_wait.
static void col_done(void *ctx, const ot_sched_result *r) {
  collect *c = ctx;
  pthread_mutex_lock(&c->mu);
  c->res = *r;
  c->done_calls++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

// Waits up to 60 s for on_done; true when it ran.
static bool col_wait(collect *c) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 60;
  pthread_mutex_lock(&c->mu);
  while (!c->done_calls && pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0) {}
  const bool done = c->done_calls > 0;
  pthread_mutex_unlock(&c->mu);
  return done;
}
#endif
