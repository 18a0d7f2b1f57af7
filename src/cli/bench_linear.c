// `ot bench ops`: linear (ours, with bias) against oneDNN's bare matmul
// (plain row-major A[M,K] x B[K,N] -> C[M,N], no bias, primitive created once),
// and the fused QKV projection.
#include "bench_util.h"
#include <oneapi/dnnl/dnnl.h>

typedef struct {
  dnnl_engine_t eng;
  dnnl_stream_t st;
  dnnl_primitive_t prim;
  dnnl_memory_t a, b, c;
} bare_mm;

// Creates the bare matmul; returns false (with a note) when oneDNN cannot do it here.
static bool bare_create(bare_mm *m, int M, int N, int K, ot_dtype dt, char *note, size_t nn) {
  dnnl_data_type_t t = dt == OT_BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_memory_desc_t ad, bd, cd;
  dnnl_dims_t da = {M, K}, db = {K, N}, dc = {M, N};
  dnnl_memory_desc_init_by_tag(&ad, 2, da, t, dnnl_ab);
  dnnl_memory_desc_init_by_tag(&bd, 2, db, t, dnnl_ab);
  dnnl_memory_desc_init_by_tag(&cd, 2, dc, t, dnnl_ab);
  dnnl_matmul_desc_t md;
  dnnl_primitive_desc_t pd;
  if (dnnl_engine_create(&m->eng, dnnl_cpu, 0) != dnnl_success) { snprintf(note, nn, "no oneDNN engine"); return false; }
  dnnl_stream_create(&m->st, m->eng, dnnl_stream_default_flags);
  if (dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd) != dnnl_success ||
      dnnl_primitive_desc_create(&pd, &md, NULL, m->eng, NULL) != dnnl_success) {
    snprintf(note, nn, "oneDNN has no %s matmul on this CPU", ot_dtype_name(dt));
    return false;
  }
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  snprintf(note, nn, "oneDNN impl %s", impl ? impl : "?");
  dnnl_primitive_create(&m->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  dnnl_memory_create(&m->a, &ad, m->eng, DNNL_MEMORY_ALLOCATE);
  dnnl_memory_create(&m->b, &bd, m->eng, DNNL_MEMORY_ALLOCATE);
  dnnl_memory_create(&m->c, &cd, m->eng, DNNL_MEMORY_ALLOCATE);
  void *h;
  dnnl_memory_get_data_handle(m->a, &h); bench_fill(h, (size_t)M * K, dt, 1);
  dnnl_memory_get_data_handle(m->b, &h); bench_fill(h, (size_t)K * N, dt, 2);
  return true;
}
static void bare_run(void *p) {
  bare_mm *m = p;
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, m->a}, {DNNL_ARG_WEIGHTS, m->b}, {DNNL_ARG_DST, m->c}};
  dnnl_primitive_execute(m->prim, m->st, 3, args);
  dnnl_stream_wait(m->st);
}
static void bare_destroy(bare_mm *m) {
  if (m->prim) dnnl_primitive_destroy(m->prim);
  if (m->a) { dnnl_memory_destroy(m->a); dnnl_memory_destroy(m->b); dnnl_memory_destroy(m->c); }
  if (m->st) dnnl_stream_destroy(m->st);
  if (m->eng) dnnl_engine_destroy(m->eng);
}

typedef struct { ot_dtype dt; void *x, *w, *y, *pre, *dy, *dx; float *b, *dw, *db; int M, N, K; ot_act act;
                 void *q, *k, *v; int B, T, C, Hq, Hkv, D; } lctx;
static void lin_fwd(void *p) { lctx *c = p; bench_must(ot_linear_fwd(c->dt, c->y, c->pre, c->x, c->w, c->b, c->M, c->N, c->K, c->act), "linear_fwd"); }
static void lin_bwd(void *p) { lctx *c = p; bench_must(ot_linear_bwd(c->dt, c->dx, c->dw, c->db, c->dy, c->pre, c->x, c->w, c->M, c->N, c->K, c->act), "linear_bwd"); }
static void qkv_fwd(void *p) { lctx *c = p; bench_must(ot_qkv_fwd(c->dt, c->q, c->k, c->v, c->x, c->w, c->b, c->B, c->T, c->C, c->Hq, c->Hkv, c->D), "qkv_fwd"); }
static void qkv_bwd(void *p) { lctx *c = p; bench_must(ot_qkv_bwd(c->dt, c->dx, c->dw, c->db, c->q, c->k, c->v, c->x, c->w, c->B, c->T, c->C, c->Hq, c->Hkv, c->D), "qkv_bwd"); }

static void lin_alloc(lctx *c) {
  size_t es = ot_dtype_size(c->dt);
  c->x = bench_alloc((size_t)c->M * c->K * es); bench_fill(c->x, (size_t)c->M * c->K, c->dt, 3);
  c->w = bench_alloc((size_t)c->N * c->K * es); bench_fill(c->w, (size_t)c->N * c->K, c->dt, 4);
  c->y = bench_alloc((size_t)c->M * c->N * es);
  c->pre = bench_alloc((size_t)c->M * c->N * es);
  c->dy = bench_alloc((size_t)c->M * c->N * es); bench_fill(c->dy, (size_t)c->M * c->N, c->dt, 5);
  c->dx = bench_alloc((size_t)c->M * c->K * es);
  c->b = bench_alloc((size_t)c->N * 4); bench_fill(c->b, c->N, OT_F32, 6);
  c->dw = bench_alloc((size_t)c->N * c->K * 4);
  c->db = bench_alloc((size_t)c->N * 4);
}
static void lin_free(lctx *c) {
  void *ps[] = {c->x, c->w, c->y, c->pre, c->dy, c->dx, c->b, c->dw, c->db};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) ot_mem_free(ps[i]);
}

int bench_linear_cases(const bench_opts *o) {
  const int shapes[2][3] = {{2048, 768, 768}, {2048, 3072, 768}};
  const ot_dtype dts[2] = {OT_F32, OT_BF16};
  for (int di = 0; di < 2; di++) {
    for (int si = 0; si < 2; si++) {
      lctx c = {.dt = dts[di], .M = shapes[si][0], .N = shapes[si][1], .K = shapes[si][2]};
      if (o->quick) c.M = 512;
      const char *dn = ot_dtype_name(c.dt);
      char shape[64], name[64], note[160];
      snprintf(shape, sizeof shape, "%dx%dx%d", c.M, c.N, c.K);
      double fl = 2.0 * c.M * c.N * c.K;
      snprintf(name, sizeof name, "linear fwd %s", dn);
      if (!bench_wanted(o, name)) continue;
      bare_mm m = {0};
      double tb = 0;
      if (bare_create(&m, c.M, c.N, c.K, c.dt, note, sizeof note)) {
        tb = bench_median(bare_run, &m, o->reps);
        char bn[64];
        snprintf(bn, sizeof bn, "onednn bare matmul %s", dn);
        bench_row(o, bn, shape, tb, fl, 0, note);
      } else {
        printf("%-26s %-24s %s\n", "onednn bare matmul", shape, note);
      }
      bare_destroy(&m);
      lin_alloc(&c);
      double tl = bench_median(lin_fwd, &c, o->reps);
      if (tb > 0) snprintf(note, sizeof note, "+bias; %.0f%% of bare oneDNN", 100 * tb / tl);
      else snprintf(note, sizeof note, "+bias");
      bench_row(o, name, shape, tl, fl, 0, note);
      c.act = OT_ACT_GELU;
      snprintf(name, sizeof name, "linear+gelu fwd %s", dn);
      bench_row(o, name, shape, bench_median(lin_fwd, &c, o->reps), fl, 0, "+bias, saves pre-activation");
      snprintf(name, sizeof name, "linear+gelu bwd %s", dn);
      bench_row(o, name, shape, bench_median(lin_bwd, &c, o->reps), 2 * fl, 0, "dx, dw, db");
      lin_free(&c);
    }
    // fused QKV, GPT-2 small: C=768, 12 heads of 64
    lctx c = {.dt = dts[di], .B = o->quick ? 1 : 4, .T = 512, .C = 768, .Hq = 12, .Hkv = 12, .D = 64};
    c.M = c.B * c.T; c.N = (c.Hq + 2 * c.Hkv) * c.D; c.K = c.C;
    char name[64], shape[64];
    snprintf(name, sizeof name, "qkv fwd %s", ot_dtype_name(c.dt));
    if (!bench_wanted(o, name)) continue;
    lin_alloc(&c);
    size_t es = ot_dtype_size(c.dt), nq = (size_t)c.M * c.Hq * c.D;
    c.q = bench_alloc(nq * es); c.k = bench_alloc(nq * es); c.v = bench_alloc(nq * es);
    bench_fill(c.q, nq, c.dt, 7); bench_fill(c.k, nq, c.dt, 8); bench_fill(c.v, nq, c.dt, 9);
    double fl = 2.0 * c.M * c.N * c.K;
    snprintf(shape, sizeof shape, "B=%d T=%d C=768 H=12", c.B, c.T);
    bench_row(o, name, shape, bench_median(qkv_fwd, &c, o->reps), fl, 0, "one GEMM + per-head layout");
    snprintf(name, sizeof name, "qkv bwd %s", ot_dtype_name(c.dt));
    bench_row(o, name, shape, bench_median(qkv_bwd, &c, o->reps), 2 * fl, 0, "dx, dw, db");
    ot_mem_free(c.q); ot_mem_free(c.k); ot_mem_free(c.v);
    lin_free(&c);
  }
  return 0;
}
