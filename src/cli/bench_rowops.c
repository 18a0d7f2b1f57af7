// `ot bench ops`: memory-bound operators (norms, activations, RoPE, softmax,
// cross-entropy). Shapes exceed the L3 cache so DRAM bandwidth is measured.
#include "bench_util.h"

typedef struct {
  ot_dtype dt;
  void *x, *r, *y, *res, *dy, *dres, *dx;
  float *g, *beta, *mean, *rstd, *dg, *dbeta, *tab;
  int32_t *tgt;
  int N, C, B, H, T, D;
} rctx;

static void ln_fwd(void *p) { rctx *c = p; bench_must(ot_layernorm_fwd(c->dt, c->y, c->mean, c->rstd, c->res, c->x, c->r, c->g, c->beta, c->N, c->C, 1e-5f), "layernorm_fwd"); }
static void ln_bwd(void *p) { rctx *c = p; bench_must(ot_layernorm_bwd(c->dt, c->dx, c->dg, c->dbeta, c->dy, c->dres, c->res, c->mean, c->rstd, c->g, c->N, c->C), "layernorm_bwd"); }
static void rms_fwd(void *p) { rctx *c = p; bench_must(ot_rmsnorm_fwd(c->dt, c->y, c->rstd, c->res, c->x, c->r, c->g, c->N, c->C, 1e-5f), "rmsnorm_fwd"); }
static void rms_bwd(void *p) { rctx *c = p; bench_must(ot_rmsnorm_bwd(c->dt, c->dx, c->dg, c->dy, c->dres, c->res, c->rstd, c->g, c->N, c->C), "rmsnorm_bwd"); }
static void gelu_fwd(void *p) { rctx *c = p; bench_must(ot_gelu_fwd(c->dt, c->y, c->x, (size_t)c->N * c->C), "gelu_fwd"); }
static void gelu_bwd(void *p) { rctx *c = p; bench_must(ot_gelu_bwd(c->dt, c->dx, c->x, c->dy, (size_t)c->N * c->C), "gelu_bwd"); }
static void swi_fwd(void *p) { rctx *c = p; bench_must(ot_swiglu_fwd(c->dt, c->y, c->x, c->N, c->C), "swiglu_fwd"); }
static void swi_bwd(void *p) { rctx *c = p; bench_must(ot_swiglu_bwd(c->dt, c->dx, c->x, c->dy, c->N, c->C), "swiglu_bwd"); }
static void rope_fwd(void *p) { rctx *c = p; bench_must(ot_rope_fwd(c->dt, c->x, c->tab, c->T, c->B, c->H, c->T, c->D, c->D, 0, OT_ROPE_NEOX), "rope_fwd"); }
static void rope_bwd(void *p) { rctx *c = p; bench_must(ot_rope_bwd(c->dt, c->x, c->tab, c->T, c->B, c->H, c->T, c->D, c->D, 0, OT_ROPE_NEOX), "rope_bwd"); }
static void sm_fwd(void *p) { rctx *c = p; bench_must(ot_softmax_fwd(c->dt, c->y, c->x, c->N, c->C), "softmax_fwd"); }
static void sm_bwd(void *p) { rctx *c = p; bench_must(ot_softmax_bwd(c->dt, c->dx, c->y, c->dy, c->N, c->C), "softmax_bwd"); }
static void xent_fb(void *p) {
  rctx *c = p; float loss;
  bench_must(ot_xent_fused(c->dt, c->x, c->C, c->tgt, c->N, c->C, -1, (float)c->N, NULL, &loss, true), "xent_fused");
}
static void xent_f(void *p) {
  rctx *c = p; float loss;
  bench_must(ot_xent_fused(c->dt, c->x, c->C, c->tgt, c->N, c->C, -1, (float)c->N, NULL, &loss, false), "xent_fused");
}

static void alloc_all(rctx *c, size_t n_act, int C) {
  size_t es = ot_dtype_size(c->dt);
  void **acts[] = {&c->x, &c->r, &c->y, &c->res, &c->dy, &c->dres, &c->dx};
  for (int i = 0; i < 7; i++) { *acts[i] = bench_alloc(n_act * es); bench_fill(*acts[i], n_act, c->dt, i + 1); }
  float **vecs[] = {&c->g, &c->beta, &c->dg, &c->dbeta};
  for (int i = 0; i < 4; i++) { *vecs[i] = bench_alloc((size_t)C * 4); bench_fill(*vecs[i], C, OT_F32, 10 + i); }
  c->mean = bench_alloc((size_t)c->N * 4);
  c->rstd = bench_alloc((size_t)c->N * 4);
}
static void free_all(rctx *c) {
  void *ps[] = {c->x, c->r, c->y, c->res, c->dy, c->dres, c->dx, c->g, c->beta, c->dg, c->dbeta, c->mean, c->rstd, c->tab, c->tgt};
  for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) ot_mem_free(ps[i]);
  memset(c, 0, sizeof *c);
}

static void run(const bench_opts *o, const char *name, const char *shape, void (*fn)(void *), rctx *c, double bytes) {
  if (!bench_wanted(o, name)) return;
  bench_row(o, name, shape, bench_median(fn, c, o->reps), 0, bytes, NULL);
}

int bench_rowop_cases(const bench_opts *o) {
  const ot_dtype dts[2] = {OT_F32, OT_BF16};
  for (int di = 0; di < 2; di++) {
    ot_dtype dt = dts[di];
    const char *dn = ot_dtype_name(dt);
    double es = (double)ot_dtype_size(dt);
    char name[64], shape[64];
    rctx c = {.dt = dt};
    // norms: N rows of C with a residual input; N x C = 12.6M elements
    c.N = o->quick ? 2048 : 16384; c.C = 768;
    double nc = (double)c.N * c.C;
    alloc_all(&c, (size_t)c.N * c.C, c.C);
    snprintf(shape, sizeof shape, "N=%d C=%d", c.N, c.C);
    snprintf(name, sizeof name, "layernorm+res fwd %s", dn); run(o, name, shape, ln_fwd, &c, nc * es * 4);
    snprintf(name, sizeof name, "layernorm+res bwd %s", dn); run(o, name, shape, ln_bwd, &c, nc * es * 4);
    snprintf(name, sizeof name, "rmsnorm+res fwd %s", dn); run(o, name, shape, rms_fwd, &c, nc * es * 4);
    snprintf(name, sizeof name, "rmsnorm+res bwd %s", dn); run(o, name, shape, rms_bwd, &c, nc * es * 4);
    snprintf(name, sizeof name, "softmax fwd %s", dn); run(o, name, shape, sm_fwd, &c, nc * es * 2);
    snprintf(name, sizeof name, "softmax bwd %s", dn); run(o, name, shape, sm_bwd, &c, nc * es * 3);
    // activations over N x 4C elements (the MLP hidden) -- reuse the buffers as [N/4*... ] views
    c.C = 768; c.N = o->quick ? 2048 : 16384;   // gelu over N*C elements (same buffers)
    snprintf(shape, sizeof shape, "n=%.1fM", nc / 1e6);
    snprintf(name, sizeof name, "gelu fwd %s", dn); run(o, name, shape, gelu_fwd, &c, nc * es * 2);
    snprintf(name, sizeof name, "gelu bwd %s", dn); run(o, name, shape, gelu_bwd, &c, nc * es * 3);
    c.C = 384;  // swiglu: x [N, 2F] with F = 384 -> same element count as above
    snprintf(shape, sizeof shape, "N=%d F=%d", c.N, c.C);
    snprintf(name, sizeof name, "swiglu fwd %s", dn); run(o, name, shape, swi_fwd, &c, nc * es * 1.5);
    snprintf(name, sizeof name, "swiglu bwd %s", dn); run(o, name, shape, swi_bwd, &c, nc * es * 2.5);
    // rope in place on [B, H, T, D]
    c.B = o->quick ? 1 : 8; c.H = 12; c.T = 2048; c.D = 64;
    c.tab = bench_alloc((size_t)c.T * c.D * 4);
    bench_must(ot_rope_table(c.tab, c.T, c.D, 10000.f), "rope_table");
    double nr = (double)c.B * c.H * c.T * c.D;
    snprintf(shape, sizeof shape, "B=%d H=12 T=2048 D=64", c.B);
    snprintf(name, sizeof name, "rope fwd %s", dn); run(o, name, shape, rope_fwd, &c, nr * es * 2);
    snprintf(name, sizeof name, "rope bwd %s", dn); run(o, name, shape, rope_bwd, &c, nr * es * 2);
    free_all(&c);
    // fused softmax + cross-entropy over the vocabulary, in place
    c.dt = dt; c.N = o->quick ? 256 : 2048; c.C = 50304;
    double nv = (double)c.N * c.C;
    c.x = bench_alloc((size_t)nv * ot_dtype_size(dt));
    c.tgt = bench_alloc((size_t)c.N * 4);
    for (int i = 0; i < c.N; i++) c.tgt[i] = (i * 7919) % c.C;
    bench_fill(c.x, (size_t)nv, dt, 99);
    snprintf(shape, sizeof shape, "N=%d V=%d", c.N, c.C);
    // minimal DRAM traffic: read the logits once, write dlogits once (a row fits in L2)
    snprintf(name, sizeof name, "xent fwd+bwd %s", dn); run(o, name, shape, xent_fb, &c, nv * es * 2);
    snprintf(name, sizeof name, "xent fwd (loss only) %s", dn); run(o, name, shape, xent_f, &c, nv * es);
    free_all(&c);
  }
  return 0;
}
