// The vocabulary-parallel cross-entropy (ot__vp_xent, src/model/vocab_par.c), plain and
// label-smoothed, against the double reference ot_ref_xent_ls over the whole vocabulary:
// R = 2, 3, 4 tensor ranks run as threads of one process (an all-reduce over a barrier),
// each holding the logit columns [v0, v0 + Vl), Vl = ceil(Vp / R), of a padded vocabulary
// (columns >= V hold NaN: never read; a rank may hold padding only); f32, bf16 and f16;
// odd N and V, ignored rows, eps 0 .. 0.95. Checked: every row's loss, the plain NLL's
// sum, the gradient columns of every rank (padding and ignored rows exactly 0), logits
// untouched without want_grad, and the refusals of a bad target or eps.
#include "harness.h"
#include "model/model_impl.h"
#include <pthread.h>

static th_rng g_rng = {0x70cab9a7};

#define MAXR 4
typedef struct {
  int R;
  pthread_barrier_t bar;
  float *slot[MAXR];
} group;
typedef struct {
  group *g;
  int rank;
} member;

// In-place all-reduce over the group's threads (f32; sums in rank order).
static ot_status thread_allreduce(void *ctx, void *buf, size_t n, ot_dtype dt, ot_red_op op) {
  member *me = ctx;
  group *g = me->g;
  if (dt != OT_F32) return ot_error(OT_EINVAL, "test all-reduce: f32 only");
  float *tmp = malloc(n * sizeof(float) + 1);
  g->slot[me->rank] = buf;
  pthread_barrier_wait(&g->bar);
  for (size_t k = 0; k < n; k++) {
    float v = g->slot[0][k];
    for (int r = 1; r < g->R; r++)
      v = op == OT_RED_MAX ? fmaxf(v, g->slot[r][k]) : v + g->slot[r][k];
    tmp[k] = v;
  }
  pthread_barrier_wait(&g->bar);   // everyone has read every slot
  memcpy(buf, tmp, n * sizeof(float));
  free(tmp);
  return OT_OK;
}

typedef struct { int N, V, Vp; float eps; int ignore; } vshape;

typedef struct {
  member me;
  ot_model_comm comm;
  ot__vp_shard sh;
  void *logits;          // [N, Vl] (dt)
  const int32_t *tg;
  int N;
  float count, eps, row_loss[16], red[4 * 16];
  double nll;
  bool want_grad;
  ot_status st;
} rank_job;

static void *run_rank(void *arg) {
  rank_job *j = arg;
  j->st = ot__vp_xent(&j->sh, j->logits, j->tg, j->N, j->count, j->eps, j->row_loss, &j->nll,
                      j->want_grad, j->red);
  return NULL;
}

// x [N, ld] whole logits (columns >= V NaN); runs R ranks; compares with the reference.
static void check_shape(const vshape *s, int R, ot_dtype dt) {
  const int Vl = (s->Vp + R - 1) / R, ld = Vl * R, N = s->N;
  float *x = th_falloc((size_t)N * ld), *want = th_falloc((size_t)N * ld);
  int32_t tg[16];
  int kept = 0;
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < ld; i++)
      x[(size_t)r * ld + i] = i < s->V ? th_uniform(&g_rng, -6.0f, 6.0f) + 0.01f * i : NAN;
    tg[r] = r % 4 == 2 ? s->ignore : (int32_t)(th_next(&g_rng) % (uint64_t)s->V);
    if (r == 0) tg[r] = s->V - 1;   // the last real column (the last rank with padding)
    kept += tg[r] != s->ignore;
  }
  th_round_dt(dt, x, (size_t)N * ld);
  const float count = (float)(kept + 1);
  float rl_ref[16], nll_ref[16], ml;
  memcpy(want, x, (size_t)N * ld * sizeof(float));
  ot_ref_xent_ls(want, ld, tg, N, s->V, s->ignore, 0.0f, count, nll_ref, &ml, false);
  ot_ref_xent_ls(want, ld, tg, N, s->V, s->ignore, s->eps, count, rl_ref, &ml, true);
  double nll_sum = 0.0;
  for (int r = 0; r < N; r++) nll_sum += nll_ref[r];
  for (int wg = 0; wg < 2; wg++) {
    group g = {.R = R};
    pthread_barrier_init(&g.bar, NULL, (unsigned)R);
    rank_job job[MAXR];
    pthread_t th[MAXR];
    float *loc = th_falloc((size_t)N * Vl);
    void *orig[MAXR];
    for (int k = 0; k < R; k++) {
      rank_job *j = &job[k];
      memset(j, 0, sizeof *j);
      j->me = (member){&g, k};
      j->comm.ctx = &j->me;
      j->comm.allreduce = thread_allreduce;
      j->sh = (ot__vp_shard){dt, s->V, Vl, k * Vl, s->ignore, &j->comm};
      for (int r = 0; r < N; r++)
        memcpy(loc + (size_t)r * Vl, x + (size_t)r * ld + (size_t)k * Vl, (size_t)Vl * sizeof(float));
      j->logits = th_to_dt(dt, loc, (size_t)N * Vl);
      orig[k] = th_to_dt(dt, loc, (size_t)N * Vl);
      j->tg = tg;
      j->N = N;
      j->count = count;
      j->eps = s->eps;
      j->want_grad = wg;
    }
    for (int k = 0; k < R; k++) pthread_create(&th[k], NULL, run_rank, &job[k]);
    for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&g.bar);
    const char *dn = ot_dtype_name(dt);
    for (int k = 0; k < R; k++) {
      rank_job *j = &job[k];
      if (!th_check(j->st == OT_OK, "rank %d of %d: %s", k, R, ot_last_error())) continue;
      th_check_nerr(j->row_loss, rl_ref, (size_t)N, 1e-5,
                    "row losses, rank %d of %d, %s N=%d V=%d Vp=%d eps=%g", k, R, dn, N, s->V,
                    s->Vp, s->eps);
      th_check(fabs(j->nll - nll_sum) <= 1e-5 * fmax(1.0, fabs(nll_sum)),
               "NLL sum %.9g vs %.9g, rank %d of %d, %s V=%d eps=%g", j->nll, nll_sum, k, R, dn,
               s->V, s->eps);
      if (!wg) {
        th_check(memcmp(j->logits, orig[k], (size_t)N * Vl * ot_dtype_size(dt)) == 0,
                 "want_grad=false leaves the logits (rank %d of %d, %s)", k, R, dn);
        continue;
      }
      th_from_dt(dt, j->logits, loc, (size_t)N * Vl);
      float *wl = th_falloc((size_t)N * Vl);
      bool zero = true;
      for (int r = 0; r < N; r++)
        for (int i = 0; i < Vl; i++) {
          const int col = k * Vl + i;
          const float w = col < s->V && tg[r] != s->ignore ? want[(size_t)r * ld + col] : 0.0f;
          wl[(size_t)r * Vl + i] = w;
          if (col >= s->V || tg[r] == s->ignore) zero &= loc[(size_t)r * Vl + i] == 0.0f;
        }
      th_check_nerr(loc, wl, (size_t)N * Vl, th_tol(dt, 1e-5, 1e-2),
                    "dlogits rank %d of %d, %s N=%d V=%d Vp=%d eps=%g", k, R, dn, N, s->V, s->Vp,
                    s->eps);
      th_check(zero, "padding columns and ignored rows get exactly 0 (rank %d of %d, %s V=%d)", k,
               R, dn, s->V);
      free(wl);
    }
    for (int k = 0; k < R; k++) { free(job[k].logits); free(orig[k]); }
    free(loc);
  }
  free(x);
  free(want);
}

static void test_vs_ref(void) {
  static const vshape sh[] = {{1, 2, 8, 0.1f, -100},   {5, 17, 24, 0.1f, -100},
                              {7, 65, 80, 0.0f, 3},    {3, 769, 784, 0.05f, -100},
                              {4, 33, 48, 0.95f, -1},  {9, 400, 448, 0.1f, -100},
                              {6, 131, 131, 0.5f, -100}};
  for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
    for (int R = 2; R <= MAXR; R++)
      for (int di = 0; di < TH_NDT; di++) check_shape(&sh[k], R, th_dts[di]);
}

// One rank alone (R = 1, no communication needed beyond itself) refuses bad input.
static ot_status self_allreduce(void *ctx, void *buf, size_t n, ot_dtype dt, ot_red_op op) {
  (void)ctx; (void)buf; (void)n; (void)dt; (void)op;
  return OT_OK;
}
static void test_errors(void) {
  ot_model_comm comm = {0};
  comm.allreduce = self_allreduce;
  const ot__vp_shard sh = {OT_F32, 5, 5, 0, -100, &comm};
  float lg[10] = {0}, rl[2], red[8];
  int32_t tg[2] = {1, 5};
  th_check_error(ot__vp_xent(&sh, lg, tg, 2, 2.0f, 0.1f, rl, NULL, true, red), OT_EINVAL,
                 "target 5 at row 1", "a target outside the vocabulary");
  tg[1] = 2;
  th_check_error(ot__vp_xent(&sh, lg, tg, 2, 2.0f, 1.0f, rl, NULL, true, red), OT_EINVAL,
                 "label smoothing 1", "eps outside [0, 1)");
  th_check(ot__vp_xent(&sh, lg, tg, 2, 2.0f, 0.1f, rl, NULL, true, red) == OT_OK &&
               fabsf(rl[0] - logf(5.0f)) < 1e-6f,
           "uniform logits: loss log V (%g)", (double)rl[0]);
}

int main(void) {
  test_vs_ref();
  test_errors();
  return th_finish();
}
