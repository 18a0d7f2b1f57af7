// The watchdog of the parallel layer and the heartbeat that lets it name the
// rank that stopped answering.
//
// One thread per process checks every 50 ms the blocking operation each
// thread has in progress (one slot per thread: the trainer's and the
// gradient-reduction thread). Under mpirun the same thread keeps a heartbeat:
// every HB_PERIOD it sends each other rank a 64-byte message (a sequence
// number, and whether this rank is itself waiting, in which operation, for
// how long) on a private duplicate of MPI_COMM_WORLD with non-blocking calls
// only (MPI_THREAD_MULTIPLE, which ot_dist_init requires), and it notes when
// it last heard from each rank. No collective is added to the step.
//
// When an operation outlasts the grid's timeout, the peers not heard from for
// HB_STALE seconds are the ones that stopped answering (stopped, hung, swapped
// out); a peer that answers is alive and not accused, even while it waits
// itself. With no such peer yet, the watchdog waits up to HB_STALE + HB_PERIOD
// more for the evidence (the operation may still complete), then names the
// ranks that wait and the ones that do not. A rank that stopped answering on
// this host (pid and start time recorded at start) gets SIGKILL before this
// process leaves, so that mpirun reaps it like any rank that died: Open MPI
// 4.1's mpirun would continue it (SIGCONT), SIGTERM and SIGKILL it a second
// after this rank has gone and exit without reaping it (a zombie left to PID 1).
// A gap of more than WD_STALL between two ticks means this process itself did
// not run (stopped with its job, or starved): every clock is moved by the gap
// so that a suspended and resumed job is not ended for it.
#include "dist_impl.h"
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#define WD_SLOTS 8
#define WD_TICK_US 50000
#define WD_STALL 1.0      // seconds between ticks that mean this process did not run
#define HB_PERIOD 1.0     // seconds between heartbeats
#define HB_DRAIN 0.2      // seconds between looks at received heartbeats
#define HB_STALE 3.0      // seconds of silence after which a rank stopped answering
#define HB_TAG 7
#define HB_LIST 8         // ranks named per category in a message

enum { HB_RUNNING, HB_WAITING, HB_LEFT };

typedef struct {          // one heartbeat: 64 bytes
  uint32_t seq;
  int32_t state;          // HB_RUNNING, HB_WAITING (in a guarded operation), HB_LEFT (finalized)
  float waiting_s;        // seconds in that operation
  char what[52];
} hb_msg;

typedef struct {          // who a rank is (exchanged once, at start)
  int32_t pid, pad;
  uint64_t start;         // start time, clock ticks after boot (/proc/PID/stat field 22)
  char host[48];
} hb_ident;

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  bool busy;
  double since, timeout, late;   // late: when the timeout was first seen passed (0: not yet)
  int dp, tp;                    // the grid's shape (coordinates in messages)
  char what[160];
} wd_state[WD_SLOTS];
static int wd_used;
static bool wd_up, wd_stop;
static pthread_t wd_thread;
static _Thread_local int wd_slot = -1;
static _Thread_local double wd_t0, wd_total;   // this thread's seconds inside blocking operations

// Heartbeat state: set up before the thread starts, then touched by the thread only.
static struct {
  bool on, keep;            // keep: a send never completed (its buffer stays allocated)
  MPI_Comm comm;
  int rank, size;
  hb_ident *ident;          // [size]
  double *heard;            // [size] when the last heartbeat came (the start before the first)
  hb_msg *last;             // [size] the last heartbeat of each rank
  hb_msg *out;              // [size] send buffers, one per peer (a send may still be pending)
  MPI_Request *sreq;        // [size]
  MPI_Request rreq;
  hb_msg in;
  uint32_t seq;
  double sent, drained;
} hb = {.comm = MPI_COMM_NULL, .rreq = MPI_REQUEST_NULL};

double ot__comm_seconds(void) { return wd_total; }

// ------------------------------------------------------------ processes ----
// State letter, thread count and start time of process pid from /proc (false:
// no such process).
static bool proc_stat(int pid, char *state, int *threads, uint64_t *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')');   // the command name may hold spaces and parentheses
  unsigned long long st = 0;
  // after the name: the state (field 3), 16 fields, the thread count (20), 1 field, the start (22)
  if (!p || sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %d %*s %llu",
                   state, threads, &st) != 3)
    return false;
  *start = st;
  return true;
}

// Sends SIGKILL to rank r when it runs on this host as the very process seen at
// start, and waits up to 1 s for it to be dead. True when it was sent.
static bool kill_rank(int r) {
  const hb_ident *id = &hb.ident[r];
  char me[48] = "", st;
  int threads;
  uint64_t start;
  gethostname(me, sizeof me - 1);
  if (r == hb.rank || strcmp(me, id->host) || !proc_stat(id->pid, &st, &threads, &start) ||
      start != id->start)
    return false;
  if (kill(id->pid, SIGKILL) != 0) return false;
  // dead: gone, or a zombie whose last thread has exited (a zombie group leader
  // with threads still exiting is not yet reported to its parent)
  for (int i = 0; i < 500 && proc_stat(id->pid, &st, &threads, &start) && !(st == 'Z' && threads <= 1); i++)
    usleep(2000);
  return true;
}

// ------------------------------------------------------------ heartbeat ----
static void hb_free(void) {
  if (hb.comm != MPI_COMM_NULL) MPI_Comm_free(&hb.comm);
  if (!hb.keep) free(hb.out);   // else a released send may still read its buffer
  free(hb.ident);
  free(hb.heard);
  free(hb.last);
  free(hb.sreq);
  hb.out = NULL;
  hb.ident = NULL;
  hb.heard = NULL;
  hb.last = NULL;
  hb.sreq = NULL;
  hb.on = false;
}

// Collective (ot_dist_init): the ranks' identities, the heartbeat, the thread.
ot_status ot__wd_start(void) {
  pthread_mutex_lock(&wd_mu);
  bool up = wd_up;
  pthread_mutex_unlock(&wd_mu);
  if (up) return OT_OK;
  int level = 0, size = 1, rank = 0;
  MPI_Query_thread(&level);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size > 1 && level == MPI_THREAD_MULTIPLE) {   // else: the watchdog without names
    hb.size = size;
    hb.rank = rank;
    hb.ident = calloc((size_t)size, sizeof *hb.ident);
    hb.heard = calloc((size_t)size, sizeof *hb.heard);
    hb.last = calloc((size_t)size, sizeof *hb.last);
    hb.out = calloc((size_t)size, sizeof *hb.out);
    hb.sreq = calloc((size_t)size, sizeof *hb.sreq);
    if (!hb.ident || !hb.heard || !hb.last || !hb.out || !hb.sreq) {
      hb_free();
      return ot_error(OT_ENOMEM, "watchdog: out of memory for the heartbeats of %d ranks", size);
    }
    hb_ident mine = {.pid = (int32_t)getpid()};
    char st;
    int threads;
    uint64_t start = 0;
    if (proc_stat((int)getpid(), &st, &threads, &start)) mine.start = start;
    gethostname(mine.host, sizeof mine.host - 1);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &hb.comm);
    if (rc == MPI_SUCCESS)
      rc = MPI_Allgather(&mine, sizeof mine, MPI_BYTE, hb.ident, sizeof mine, MPI_BYTE, hb.comm);
    if (rc == MPI_SUCCESS)
      rc = MPI_Irecv(&hb.in, sizeof hb.in, MPI_BYTE, MPI_ANY_SOURCE, HB_TAG, hb.comm, &hb.rreq);
    if (rc != MPI_SUCCESS) {
      hb_free();
      return ot__mpi_error(rc, "watchdog heartbeat setup");
    }
    const double now = ot_now();
    for (int r = 0; r < size; r++) {
      hb.heard[r] = now;
      hb.sreq[r] = MPI_REQUEST_NULL;
    }
    hb.on = true;
  }
  return ot__wd_thread() ? OT_OK
                         : ot_error(OT_EINTERNAL, "watchdog: cannot start its thread (%s)", strerror(errno));
}

// This rank's own heartbeat: its longest-running guarded operation, if any.
static hb_msg hb_mine(double now) {
  hb_msg m = {.seq = ++hb.seq, .state = HB_RUNNING};
  pthread_mutex_lock(&wd_mu);
  for (int i = 0; i < wd_used; i++)
    if (wd_state[i].busy && (m.state != HB_WAITING || now - wd_state[i].since > m.waiting_s)) {
      m.state = HB_WAITING;
      m.waiting_s = (float)(now - wd_state[i].since);
      snprintf(m.what, sizeof m.what, "%s", wd_state[i].what);
    }
  pthread_mutex_unlock(&wd_mu);
  return m;
}

// One heartbeat to every peer whose previous one has left (a stopped peer gets no pile).
static void hb_send(const hb_msg *m) {
  for (int r = 0; r < hb.size; r++) {
    if (r == hb.rank) continue;
    int done = 1;
    if (hb.sreq[r] != MPI_REQUEST_NULL && MPI_Test(&hb.sreq[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      hb.sreq[r] = MPI_REQUEST_NULL;   // a broken link: try again next time
    if (!done) continue;
    hb.out[r] = *m;
    if (MPI_Isend(&hb.out[r], sizeof *m, MPI_BYTE, r, HB_TAG, hb.comm, &hb.sreq[r]) != MPI_SUCCESS)
      hb.sreq[r] = MPI_REQUEST_NULL;
  }
}

// Takes every heartbeat that has arrived.
static void hb_drain(double now) {
  hb.drained = now;
  for (int k = 0; k < 4 * hb.size && hb.rreq != MPI_REQUEST_NULL; k++) {
    int done = 0;
    MPI_Status s;
    if (MPI_Test(&hb.rreq, &done, &s) != MPI_SUCCESS || !done) break;
    if (s.MPI_SOURCE >= 0 && s.MPI_SOURCE < hb.size) {
      hb.heard[s.MPI_SOURCE] = now;
      hb.last[s.MPI_SOURCE] = hb.in;
    }
    if (MPI_Irecv(&hb.in, sizeof hb.in, MPI_BYTE, MPI_ANY_SOURCE, HB_TAG, hb.comm, &hb.rreq) != MPI_SUCCESS)
      hb.rreq = MPI_REQUEST_NULL;
  }
}

// Leaving MPI: tells the peers, completes or releases every request.
static void hb_leave(void) {
  hb_msg m = hb_mine(ot_now());
  m.state = HB_LEFT;
  hb_send(&m);
  for (int i = 0; i < 100; i++) {   // normally at once (small sends are buffered); at most 0.5 s
    int pending = 0;
    for (int r = 0; r < hb.size; r++) {
      int done = 1;
      if (hb.sreq[r] != MPI_REQUEST_NULL && MPI_Test(&hb.sreq[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        hb.sreq[r] = MPI_REQUEST_NULL;
      pending += !done;
    }
    if (!pending) break;
    usleep(5000);
  }
  for (int r = 0; r < hb.size; r++)
    if (hb.sreq[r] != MPI_REQUEST_NULL) {   // a peer that never takes it: MPI may still read out[r]
      MPI_Request_free(&hb.sreq[r]);
      hb.keep = true;
    }
  if (hb.rreq != MPI_REQUEST_NULL) {
    MPI_Cancel(&hb.rreq);
    MPI_Wait(&hb.rreq, MPI_STATUS_IGNORE);
  }
}

// ------------------------------------------------------------- messages ----
typedef struct {
  char *s;
  size_t n, cap;
} msgbuf;

static void put(msgbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(msgbuf *b, const char *fmt, ...) {
  if (b->n + 1 >= b->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  if (k > 0) b->n = b->n + (size_t)k < b->cap ? b->n + (size_t)k : b->cap - 1;
}

// "rank R (dp d, tp t, pp p" for the grid shape dp x tp ("rank R (" without one).
static void put_rank(msgbuf *b, int r, int dp, int tp) {
  if (dp > 0 && tp > 0)
    put(b, "rank %d (dp %d, tp %d, pp %d", r, (r / tp) % dp, r % tp, r / (tp * dp));
  else
    put(b, "rank %d (world", r);
}

enum { C_STALE, C_LEFT, C_WAITING, C_RUNNING };

static int rank_class(int r, double now) {
  if (hb.last[r].state == HB_LEFT) return C_LEFT;
  if (now - hb.heard[r] > HB_STALE) return C_STALE;
  return hb.last[r].state == HB_WAITING ? C_WAITING : C_RUNNING;
}

// Ends the job for this rank's timed-out operation `what`, naming the ranks
// that stopped answering (killed when on this host), that left, that wait and
// that run.
static void wd_fire(const char *what, double timeout, int dp, int tp, double now) {
  static const char *heading[4] = {
    "stopped answering (no heartbeat: stopped, hung, swapped out, or its host unreachable):",
    "left the job before this operation (it ended or failed):",
    "alive, waiting themselves:",
    "alive, not in a communication (computing, or stuck outside MPI):"};
  char text[4096];
  msgbuf b = {text, 0, sizeof text};
  text[0] = 0;
  put(&b, "ot: ");
  put_rank(&b, ot_dist_world_rank(), dp, tp);
  put(&b, "): %s did not complete within %.3g s (comm-timeout)", what, timeout);
  if (!hb.on) put(&b, ": a peer process died or hangs");
  int n[4] = {0};
  for (int r = 0; hb.on && r < hb.size; r++)
    if (r != hb.rank) n[rank_class(r, now)]++;
  if (hb.on && !n[C_STALE] && !n[C_LEFT])
    put(&b, ";\n  no rank stopped answering the heartbeat: a deadlock, mismatched collectives, or "
        "a rank far slower than the others");
  memset(n, 0, sizeof n);
  for (int c = 0; hb.on && c < 4; c++) {
    for (int r = 0; r < hb.size; r++) {
      if (r == hb.rank || rank_class(r, now) != c) continue;
      if (!n[c]) put(&b, ";\n  %s", heading[c]);
      if (n[c]++ >= HB_LIST) continue;
      put(&b, "%s", n[c] > 1 ? ", " : " ");
      put_rank(&b, r, dp, tp);
      if (c == C_STALE || c == C_LEFT) put(&b, ", host %s, pid %d", hb.ident[r].host, hb.ident[r].pid);
      if (c == C_STALE) put(&b, ", silent for %.1f s", now - hb.heard[r]);
      if (c == C_WAITING)
        put(&b, ", %.1f s in: %s", hb.last[r].waiting_s + now - hb.heard[r], hb.last[r].what);
      put(&b, ")");
    }
    if (n[c] > HB_LIST) put(&b, " and %d more", n[c] - HB_LIST);
  }
  put(&b, ";\n  ending the job (resume from the last checkpoint with --resume)\n");
  fputs(text, stderr);
  fflush(stderr);
  // a stopped rank would stay stopped until mpirun's SIGCONT a second after this
  // process has gone, and be left unreaped: end it first
  for (int r = 0; hb.on && r < hb.size; r++)
    if (r != hb.rank && rank_class(r, now) == C_STALE && kill_rank(r))
      fprintf(stderr, "ot: rank %d: sent SIGKILL to rank %d (pid %d on this host)\n", hb.rank, r,
              hb.ident[r].pid);
  ot_dist_abort(3);
}

// ------------------------------------------------------------- watchdog ----
// This process did not run for `gap` seconds: every clock moves with it.
static void wd_shift(double gap) {
  pthread_mutex_lock(&wd_mu);
  for (int i = 0; i < wd_used; i++) {
    wd_state[i].since += gap;
    if (wd_state[i].late > 0) wd_state[i].late += gap;
  }
  pthread_mutex_unlock(&wd_mu);
  if (hb.on)
    for (int r = 0; r < hb.size; r++) hb.heard[r] += gap;
}

// The first operation past its timeout: fires when the evidence is in.
static void wd_check(double now) {
  char what[160] = "";
  double to = 0, late = 0;
  int dp = 0, tp = 0;
  pthread_mutex_lock(&wd_mu);
  for (int i = 0; i < wd_used && !what[0]; i++)
    if (wd_state[i].busy && wd_state[i].timeout > 0 && now - wd_state[i].since > wd_state[i].timeout) {
      if (wd_state[i].late == 0) wd_state[i].late = now;
      late = wd_state[i].late;
      to = wd_state[i].timeout;
      dp = wd_state[i].dp;
      tp = wd_state[i].tp;
      snprintf(what, sizeof what, "%s", wd_state[i].what);
    }
  pthread_mutex_unlock(&wd_mu);
  if (!what[0]) return;
  if (hb.on) {
    hb_drain(now);
    bool evidence = now - late >= HB_STALE + HB_PERIOD;
    for (int r = 0; r < hb.size && !evidence; r++)
      evidence = r != hb.rank && (hb.last[r].state == HB_LEFT || now - hb.heard[r] > HB_STALE);
    if (!evidence) return;
  }
  wd_fire(what, to, dp, tp, now);
}

static void *wd_main(void *arg) {
  (void)arg;
  prctl(PR_SET_NAME, "ot-watchdog", 0, 0, 0);   // its own line in top -H / ps -L
  double tick = ot_now();
  for (;;) {
    usleep(WD_TICK_US);
    pthread_mutex_lock(&wd_mu);
    bool stop = wd_stop;
    pthread_mutex_unlock(&wd_mu);
    if (stop) break;
    const double now = ot_now();
    if (now - tick > WD_STALL) wd_shift(now - tick - WD_TICK_US * 1e-6);
    tick = now;
    if (hb.on) {
      if (now - hb.drained >= HB_DRAIN) hb_drain(now);
      if (now - hb.sent >= HB_PERIOD) {
        hb.sent = now;
        hb_msg m = hb_mine(now);
        hb_send(&m);
      }
    }
    wd_check(now);
  }
  if (hb.on) hb_leave();
  return NULL;
}

bool ot__wd_thread(void) {
  pthread_mutex_lock(&wd_mu);
  if (!wd_up && !wd_stop && pthread_create(&wd_thread, NULL, wd_main, NULL) == 0) wd_up = true;
  bool up = wd_up;
  pthread_mutex_unlock(&wd_mu);
  return up;
}

void ot__wd_stop(void) {
  pthread_mutex_lock(&wd_mu);
  bool up = wd_up;
  wd_stop = true;
  pthread_mutex_unlock(&wd_mu);
  if (up) pthread_join(wd_thread, NULL);
  hb_free();
}

void ot__wd_begin(const ot__grid *g, const char *what, int peer) {
  ot__wd_thread();
  wd_t0 = ot_now();
  pthread_mutex_lock(&wd_mu);
  if (wd_slot < 0 && wd_used < WD_SLOTS) wd_slot = wd_used++;
  if (wd_slot >= 0) {
    wd_state[wd_slot].busy = true;
    wd_state[wd_slot].since = ot_now();
    wd_state[wd_slot].late = 0;
    wd_state[wd_slot].timeout = g->timeout;
    wd_state[wd_slot].dp = g->dp;
    wd_state[wd_slot].tp = g->tp;
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
