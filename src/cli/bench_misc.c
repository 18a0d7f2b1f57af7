// `ot bench ops`: AdamW, gradient norm, embedding, materialized attention.
#include "bench_util.h"

typedef struct { float *p, *g, *m, *v; uint16_t *pb; size_t n; ot_adamw_cfg cfg; } actx;
static void adamw_run(void *q) { actx *c = q; c->cfg.step++; bench_must(ot_adamw(c->p, c->g, c->m, c->v, c->pb, c->n, &c->cfg, 0.9f), "adamw"); }
static void sumsq_run(void *q) { actx *c = q; volatile double s = ot_sumsq(c->g, c->n); (void)s; }

typedef struct { ot_dtype dt; void *out, *wte, *wpe; float *dwte, *dwpe; int32_t *tok; int B, T, C, V; } ectx;
static void emb_fwd(void *q) { ectx *c = q; bench_must(ot_embed_fwd(c->dt, c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C, c->V), "embed_fwd"); }
static void emb_bwd(void *q) { ectx *c = q; bench_must(ot_embed_bwd(c->dt, c->dwte, c->dwpe, c->out, c->tok, c->B, c->T, c->C, c->V), "embed_bwd"); }

typedef struct { ot_dtype dt; void *q, *k, *v, *o, *dq, *dk, *dv, *dout; float *att, *datt; ot_attn_shape s; } tctx;
static void att_fwd(void *p) { tctx *c = p; bench_must(ot_attn_mat_fwd(c->dt, c->o, c->att, c->q, c->k, c->v, &c->s), "attn_mat_fwd"); }
static void att_bwd(void *p) { tctx *c = p; bench_must(ot_attn_mat_bwd(c->dt, c->dq, c->dk, c->dv, c->datt, c->dout, c->att, c->q, c->k, c->v, &c->s), "attn_mat_bwd"); }

int bench_misc_cases(const bench_opts *o) {
  char shape[64], name[64];
  // AdamW over n parameters: reads p, g, m, v; writes p, m, v (+ bf16 copy)
  actx a = {.n = o->quick ? (size_t)4 << 20 : (size_t)32 << 20,
            .cfg = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f}};
  a.p = bench_alloc(a.n * 4); a.g = bench_alloc(a.n * 4); a.m = bench_alloc(a.n * 4); a.v = bench_alloc(a.n * 4);
  a.pb = bench_alloc(a.n * 2);
  bench_fill(a.p, a.n, OT_F32, 1); bench_fill(a.g, a.n, OT_F32, 2);
  snprintf(shape, sizeof shape, "n=%.1fM", a.n / 1e6);
  uint16_t *pb = a.pb;
  a.pb = NULL;
  if (bench_wanted(o, "adamw f32")) bench_row(o, "adamw f32", shape, bench_median(adamw_run, &a, o->reps), 0, 28.0 * a.n, "p,g,m,v -> p,m,v");
  a.pb = pb;
  if (bench_wanted(o, "adamw f32+bf16 copy")) bench_row(o, "adamw f32+bf16 copy", shape, bench_median(adamw_run, &a, o->reps), 0, 30.0 * a.n, "also writes bf16 weights");
  if (bench_wanted(o, "grad sumsq")) bench_row(o, "grad sumsq", shape, bench_median(sumsq_run, &a, o->reps), 0, 4.0 * a.n, "deterministic");
  ot_mem_free(a.p); ot_mem_free(a.g); ot_mem_free(a.m); ot_mem_free(a.v); ot_mem_free(a.pb);

  const ot_dtype dts[2] = {OT_F32, OT_BF16};
  for (int di = 0; di < 2; di++) {
    ot_dtype dt = dts[di];
    size_t es = ot_dtype_size(dt);
    // embedding: GPT-2 vocabulary, 16 sequences of 1024
    ectx e = {.dt = dt, .B = o->quick ? 2 : 16, .T = 1024, .C = 768, .V = 50304};
    size_t nt = (size_t)e.B * e.T, nc = nt * e.C;
    e.out = bench_alloc(nc * es); e.wte = bench_alloc((size_t)e.V * e.C * es); e.wpe = bench_alloc((size_t)e.T * e.C * es);
    e.dwte = bench_alloc((size_t)e.V * e.C * 4); e.dwpe = bench_alloc((size_t)e.T * e.C * 4);
    e.tok = bench_alloc(nt * 4);
    for (size_t i = 0; i < nt; i++) e.tok[i] = (int32_t)((i * 2654435761u) % e.V);
    bench_fill(e.wte, (size_t)e.V * e.C, dt, 3); bench_fill(e.wpe, (size_t)e.T * e.C, dt, 4);
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d", e.B, e.T, e.C);
    // forward: gather a wte row per token (+ wpe, cached) and write out
    snprintf(name, sizeof name, "embed fwd %s", ot_dtype_name(dt));
    if (bench_wanted(o, name)) bench_row(o, name, shape, bench_median(emb_fwd, &e, o->reps), 0, 2.0 * nc * es, "gather wte rows + wpe");
    // backward: read dout, read+write the touched f32 dwte rows
    snprintf(name, sizeof name, "embed bwd %s", ot_dtype_name(dt));
    if (bench_wanted(o, name)) bench_row(o, name, shape, bench_median(emb_bwd, &e, o->reps), 0, nc * es + 8.0 * nc, "scatter-add into f32 dwte");
    void *ps[] = {e.out, e.wte, e.wpe, e.dwte, e.dwpe, e.tok};
    for (size_t i = 0; i < 6; i++) ot_mem_free(ps[i]);

    // materialized attention: GPT-2 small heads, causal
    tctx t = {.dt = dt, .s = {.B = 1, .Hq = 12, .Hkv = 12, .Tq = o->quick ? 256 : 1024, .Tk = o->quick ? 256 : 1024, .D = 64, .causal = true}};
    size_t nq = (size_t)t.s.B * t.s.Hq * t.s.Tq * t.s.D, na = (size_t)t.s.B * t.s.Hq * t.s.Tq * t.s.Tk;
    void **bufs[] = {&t.q, &t.k, &t.v, &t.o, &t.dq, &t.dk, &t.dv, &t.dout};
    for (int i = 0; i < 8; i++) { *bufs[i] = bench_alloc(nq * es); bench_fill(*bufs[i], nq, dt, 20 + i); }
    t.att = bench_alloc(na * 4); t.datt = bench_alloc(na * 4);
    double fl = 4.0 * t.s.B * t.s.Hq * (double)t.s.Tq * t.s.Tk * t.s.D;  // QK^T and PV, no causal skipping
    snprintf(shape, sizeof shape, "H=12 T=%d D=64 causal", t.s.Tq);
    snprintf(name, sizeof name, "attention(mat) fwd %s", ot_dtype_name(dt));
    if (bench_wanted(o, name)) bench_row(o, name, shape, bench_median(att_fwd, &t, o->reps), fl, 0, "materialized T x T");
    snprintf(name, sizeof name, "attention(mat) bwd %s", ot_dtype_name(dt));
    if (bench_wanted(o, name)) bench_row(o, name, shape, bench_median(att_bwd, &t, o->reps), 2 * fl, 0, "materialized T x T");
    for (int i = 0; i < 8; i++) ot_mem_free(*bufs[i]);
    ot_mem_free(t.att); ot_mem_free(t.datt);
  }
  return 0;
}
