// The watchdog of the parallel layer: blocking operations run between
// ot__wd_begin and ot__wd_end, and one that outlasts the grid's timeout ends
// the job.
#include "dist_impl.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

// -------------------------------------------------------------- watchdog ----
// One watchdog thread per process checks every 50 ms the blocking operation
// each thread has in progress (one slot per thread: the trainer's and the
// gradient-reduction thread).
#define WD_SLOTS 8
static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t wd_once = PTHREAD_ONCE_INIT;
static struct {
  bool busy;
  double since, timeout;
  char what[160];
} wd_state[WD_SLOTS];
static int wd_used;
static _Thread_local int wd_slot = -1;
static _Thread_local double wd_t0, wd_total;   // this thread's seconds inside blocking operations

double ot__comm_seconds(void) { return wd_total; }

static void *wd_main(void *arg) {
  (void)arg;
  for (;;) {
    usleep(50000);
    char what[160] = "";
    double to = 0;
    pthread_mutex_lock(&wd_mu);
    for (int i = 0; i < wd_used && !what[0]; i++)
      if (wd_state[i].busy && wd_state[i].timeout > 0 && ot_now() - wd_state[i].since > wd_state[i].timeout) {
        to = wd_state[i].timeout;
        snprintf(what, sizeof what, "%s", wd_state[i].what);
      }
    pthread_mutex_unlock(&wd_mu);
    if (what[0]) {
      fprintf(stderr, "ot: rank %d: %s did not complete within %.3g s (comm-timeout): a peer "
              "process died or hangs; ending the job (resume from the last checkpoint with "
              "--resume)\n", ot_dist_world_rank(), what, to);
      ot_dist_abort(3);
    }
  }
  return NULL;
}

static void wd_start(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, wd_main, NULL) == 0) pthread_detach(t);
}

void ot__wd_begin(const ot__grid *g, const char *what, int peer) {
  pthread_once(&wd_once, wd_start);
  wd_t0 = ot_now();
  pthread_mutex_lock(&wd_mu);
  if (wd_slot < 0 && wd_used < WD_SLOTS) wd_slot = wd_used++;
  if (wd_slot >= 0) {
    wd_state[wd_slot].busy = true;
    wd_state[wd_slot].since = ot_now();
    wd_state[wd_slot].timeout = g->timeout;
    if (peer >= 0)
      snprintf(wd_state[wd_slot].what, sizeof wd_state[0].what, "%s (peer rank %d)", what, peer);
    else
      snprintf(wd_state[wd_slot].what, sizeof wd_state[0].what, "%s", what);
  }
  pthread_mutex_unlock(&wd_mu);
}

void ot__wd_end(void) {
  wd_total += ot_now() - wd_t0;
  pthread_mutex_lock(&wd_mu);
  if (wd_slot >= 0) wd_state[wd_slot].busy = false;
  pthread_mutex_unlock(&wd_mu);
}
