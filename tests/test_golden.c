// Golden tests: every op against PyTorch (float64, cast to f32) on the files of
// tests/golden/ written by tools/gen_golden.py (see its header for the tensor
// names and conventions). For each file and case the public f32 op runs for
// every ISA this CPU supports, and the scalar reference once; every output and
// gradient is compared by normalized error. Parameter gradients (+=) start at
// zero; a second backward call checks the accumulation where cheap. Attention
// runs the materialized, flash (ot/attn.h) and, without kv_len, decode kernels.
// Run from the repository root (CTest does).
#include "harness.h"

#define TOL 1e-5
#define TOL_ADAM 1e-6

typedef struct {
  ot_st_file *f;
  const char *op;
  int c;           // case index
  const char *isa; // "ref" or the ISA name
} gold;

// Golden tensor "c<case>.<name>" (NULL + failed check if absent); *n = numel.
static const ot_st_tensor *gt(gold *g, const char *name) {
  char key[128];
  snprintf(key, sizeof key, "c%d.%s", g->c, name);
  const ot_st_tensor *t = ot_st_find(g->f, key);
  th_check(t != NULL, "%s: tensor '%s' missing from the golden file", g->op, key);
  return t;
}
static size_t numel(const ot_st_tensor *t) {
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  return n;
}
// A malloc'd copy of golden tensor `name` (f32 or i32), or of zeros when zero.
static void *cp(gold *g, const char *name) {
  const ot_st_tensor *t = gt(g, name);
  if (!t) { void *p = th_alloc(64); memset(p, 0, 64); return p; }
  void *p = th_alloc(t->nbytes + 64);
  memcpy(p, t->data, t->nbytes);
  return p;
}
static float *zeros_like(gold *g, const char *name) {
  const ot_st_tensor *t = gt(g, name);
  return th_falloc(t ? numel(t) : 1);
}
static const char *meta(gold *g, const char *key) {
  char k[128];
  snprintf(k, sizeof k, "c%d.%s", g->c, key);
  const char *v = ot_st_meta(g->f, k);
  th_check(v != NULL, "%s: metadata '%s' missing", g->op, k);
  return v ? v : "0";
}
static int mi(gold *g, const char *key) { return atoi(meta(g, key)); }
static double md(gold *g, const char *key) { return atof(meta(g, key)); }

// Compares got[0, numel(golden name)) with the golden tensor.
static void cmp(gold *g, const float *got, const char *name, double tol) {
  const ot_st_tensor *t = gt(g, name);
  if (!t) return;
  th_check_nerr(got, t->data, numel(t), tol, "golden %s c%d [%s] %s", g->op, g->c, g->isa, name);
}
static void cmp_scaled(gold *g, const float *got, const char *name, float s, double tol) {
  const ot_st_tensor *t = gt(g, name);
  if (!t) return;
  size_t n = numel(t);
  float *w = th_falloc(n);
  for (size_t i = 0; i < n; i++) w[i] = s * ((const float *)t->data)[i];
  th_check_nerr(got, w, n, tol, "golden %s c%d [%s] %s (x%g, accumulated)", g->op, g->c, g->isa, name, s);
  free(w);
}
static void ok(gold *g, ot_status s, const char *call) {
  th_check(s == OT_OK, "golden %s c%d [%s] %s: %s", g->op, g->c, g->isa, call, ot_last_error());
}

typedef void (*case_fn)(gold *g, bool ref);

// ---------------------------------------------------------------- linear ----
static void t_linear(gold *g, bool ref) {
  int M = mi(g, "M"), N = mi(g, "N"), K = mi(g, "K");
  ot_act act = strcmp(meta(g, "act"), "gelu") == 0 ? OT_ACT_GELU : OT_ACT_NONE;
  float *x = cp(g, "x"), *w = cp(g, "w"), *b = cp(g, "b"), *y = zeros_like(g, "y");
  float *pre = th_falloc((size_t)M * N), *dx = zeros_like(g, "dx"), *dw = zeros_like(g, "w"),
        *db = zeros_like(g, "b");
  float *gpre = act == OT_ACT_GELU ? cp(g, "pre") : NULL;
  for (int rep = 1; rep <= 2; rep++) {
    float *dy = cp(g, "dy");
    if (ref) {
      if (rep == 1) ot_ref_linear_fwd(y, pre, x, w, b, M, N, K, act);
      ot_ref_linear_bwd(dx, dw, db, dy, gpre, x, w, M, N, K, act);
    } else {
      if (rep == 1) {
        ok(g, ot_linear_fwd(OT_F32, y, act == OT_ACT_GELU ? pre : NULL, x, w, b, M, N, K, act), "fwd");
        float *y2 = th_falloc((size_t)M * N);  // fused epilogue (pre == NULL) path
        if (act == OT_ACT_GELU) {
          ok(g, ot_linear_fwd(OT_F32, y2, NULL, x, w, b, M, N, K, act), "fwd fused");
          cmp(g, y2, "y", TOL);
        }
        free(y2);
      }
      ok(g, ot_linear_bwd(OT_F32, dx, dw, db, dy, gpre, x, w, M, N, K, act), "bwd");
    }
    free(dy);
    if (rep == 1) {
      cmp(g, y, "y", TOL);
      if (act == OT_ACT_GELU) cmp(g, pre, "pre", TOL);
      cmp(g, dw, "dw", TOL); cmp(g, db, "db", TOL);
    } else {
      cmp_scaled(g, dw, "dw", 2, TOL); cmp_scaled(g, db, "db", 2, TOL);
    }
    cmp(g, dx, "dx", TOL);
  }
  free(x); free(w); free(b); free(y); free(pre); free(dx); free(dw); free(db); free(gpre);
}

// ------------------------------------------------------------------- qkv ----
static void t_qkv(gold *g, bool ref) {
  int B = mi(g, "B"), T = mi(g, "T"), C = mi(g, "C"), Hq = mi(g, "Hq"), Hkv = mi(g, "Hkv"), D = mi(g, "D");
  float *x = cp(g, "x"), *w = cp(g, "w"), *b = cp(g, "b"), *dq = cp(g, "dq"), *dk = cp(g, "dk"),
        *dv = cp(g, "dv");
  float *q = zeros_like(g, "q"), *k = zeros_like(g, "k"), *v = zeros_like(g, "v"),
        *dx = zeros_like(g, "dx"), *dw = zeros_like(g, "w"), *db = zeros_like(g, "b");
  if (ref) {
    ot_ref_qkv_fwd(q, k, v, x, w, b, B, T, C, Hq, Hkv, D);
    ot_ref_qkv_bwd(dx, dw, db, dq, dk, dv, x, w, B, T, C, Hq, Hkv, D);
  } else {
    ok(g, ot_qkv_fwd(OT_F32, q, k, v, x, w, b, B, T, C, Hq, Hkv, D), "fwd");
    ok(g, ot_qkv_bwd(OT_F32, dx, dw, db, dq, dk, dv, x, w, B, T, C, Hq, Hkv, D), "bwd");
  }
  cmp(g, q, "q", TOL); cmp(g, k, "k", TOL); cmp(g, v, "v", TOL);
  cmp(g, dx, "dx", TOL); cmp(g, dw, "dw", TOL); cmp(g, db, "db", TOL);
  if (!ref) {
    ok(g, ot_qkv_bwd(OT_F32, dx, dw, db, dq, dk, dv, x, w, B, T, C, Hq, Hkv, D), "bwd again");
    cmp(g, dx, "dx", TOL); cmp_scaled(g, dw, "dw", 2, TOL); cmp_scaled(g, db, "db", 2, TOL);
  }
  free(x); free(w); free(b); free(dq); free(dk); free(dv);
  free(q); free(k); free(v); free(dx); free(dw); free(db);
}

// ----------------------------------------------------------------- embed ----
static void t_embed(gold *g, bool ref) {
  int B = mi(g, "B"), T = mi(g, "T"), C = mi(g, "C"), V = mi(g, "V");
  int32_t *tok = cp(g, "tokens");
  float *wte = cp(g, "wte"), *wpe = cp(g, "wpe"), *dout = cp(g, "dout"), *out = zeros_like(g, "out"),
        *dwte = zeros_like(g, "dwte"), *dwpe = zeros_like(g, "dwpe");
  if (ref) {
    ot_ref_embed_fwd(out, tok, wte, wpe, B, T, C);
    ot_ref_embed_bwd(dwte, dwpe, dout, tok, B, T, C);
  } else {
    ok(g, ot_embed_fwd(OT_F32, out, tok, wte, wpe, B, T, C, V), "fwd");
    ok(g, ot_embed_bwd(OT_F32, dwte, dwpe, dout, tok, B, T, C, V), "bwd");
  }
  cmp(g, out, "out", TOL); cmp(g, dwte, "dwte", TOL); cmp(g, dwpe, "dwpe", TOL);
  if (!ref) {
    ok(g, ot_embed_bwd(OT_F32, dwte, dwpe, dout, tok, B, T, C, V), "bwd again");
    cmp_scaled(g, dwte, "dwte", 2, TOL); cmp_scaled(g, dwpe, "dwpe", 2, TOL);
  }
  free(tok); free(wte); free(wpe); free(dout); free(out); free(dwte); free(dwpe);
}

// ----------------------------------------------------------------- norms ----
static void t_norm(gold *g, bool ref, bool ln) {
  int N = mi(g, "N"), C = mi(g, "C");
  float eps = (float)md(g, "eps");
  bool has_r = mi(g, "has_r"), has_beta = ln && mi(g, "has_beta");
  float *x = cp(g, "x"), *gain = cp(g, "g"), *dy = cp(g, "dy");
  float *r = has_r ? cp(g, "r") : NULL, *dres = has_r ? cp(g, "dres") : NULL;
  float *beta = has_beta ? cp(g, "beta") : NULL;
  float *y = zeros_like(g, "y"), *res = has_r ? zeros_like(g, "res") : NULL, *mean = th_falloc((size_t)N),
        *rstd = th_falloc((size_t)N), *dx = zeros_like(g, "dx"), *dg = th_falloc((size_t)C),
        *dbeta = th_falloc((size_t)C);
  float *gres = cp(g, "res"), *grstd = cp(g, "rstd"), *gmean = ln ? cp(g, "mean") : NULL;
  // backward takes the golden saved state, so its check is independent of the forward
  if (ref) {
    if (ln) {
      ot_ref_layernorm_fwd(y, mean, rstd, res, x, r, gain, beta, N, C, eps);
      ot_ref_layernorm_bwd(dx, dg, has_beta ? dbeta : NULL, dy, dres, gres, gmean, grstd, gain, N, C);
    } else {
      ot_ref_rmsnorm_fwd(y, rstd, res, x, r, gain, N, C, eps);
      ot_ref_rmsnorm_bwd(dx, dg, dy, dres, gres, grstd, gain, N, C);
    }
  } else if (ln) {
    ok(g, ot_layernorm_fwd(OT_F32, y, mean, rstd, res, x, r, gain, beta, N, C, eps), "fwd");
    ok(g, ot_layernorm_bwd(OT_F32, dx, dg, has_beta ? dbeta : NULL, dy, dres, gres, gmean, grstd, gain, N, C), "bwd");
  } else {
    ok(g, ot_rmsnorm_fwd(OT_F32, y, rstd, res, x, r, gain, N, C, eps), "fwd");
    ok(g, ot_rmsnorm_bwd(OT_F32, dx, dg, dy, dres, gres, grstd, gain, N, C), "bwd");
  }
  cmp(g, y, "y", TOL); cmp(g, rstd, "rstd", TOL); cmp(g, dx, "dx", TOL); cmp(g, dg, "dg", TOL);
  if (ln) cmp(g, mean, "mean", TOL);
  if (res) cmp(g, res, "res", TOL);
  if (has_beta) cmp(g, dbeta, "dbeta", TOL);
  if (!ref && dres) {  // dx aliasing dres (documented as allowed)
    float *d2 = cp(g, "dres");
    if (ln) ok(g, ot_layernorm_bwd(OT_F32, d2, dg, NULL, dy, d2, gres, gmean, grstd, gain, N, C), "bwd dx=dres");
    else ok(g, ot_rmsnorm_bwd(OT_F32, d2, dg, dy, d2, gres, grstd, gain, N, C), "bwd dx=dres");
    cmp(g, d2, "dx", TOL);
    cmp_scaled(g, dg, "dg", 2, TOL);
    free(d2);
  }
  free(x); free(gain); free(dy); free(r); free(dres); free(beta); free(y); free(res); free(mean);
  free(rstd); free(dx); free(dg); free(dbeta); free(gres); free(grstd); free(gmean);
}
static void t_layernorm(gold *g, bool ref) { t_norm(g, ref, true); }
static void t_rmsnorm(gold *g, bool ref) { t_norm(g, ref, false); }

// ----------------------------------------------------------- activations ----
static void t_gelu(gold *g, bool ref) {
  size_t n = (size_t)mi(g, "n");
  float *x = cp(g, "x"), *dy = cp(g, "dy"), *y = th_falloc(n), *dx = th_falloc(n);
  if (ref) { ot_ref_gelu_fwd(y, x, n); ot_ref_gelu_bwd(dx, x, dy, n); }
  else {
    ok(g, ot_gelu_fwd(OT_F32, y, x, n), "fwd");
    ok(g, ot_gelu_bwd(OT_F32, dx, x, dy, n), "bwd");
  }
  cmp(g, y, "y", TOL); cmp(g, dx, "dx", TOL);
  if (!ref) { ok(g, ot_gelu_bwd(OT_F32, dy, x, dy, n), "bwd in place"); cmp(g, dy, "dx", TOL); }
  free(x); free(dy); free(y); free(dx);
}

static void t_swiglu(gold *g, bool ref) {
  int N = mi(g, "N"), F = mi(g, "F");
  float *x = cp(g, "x"), *dy = cp(g, "dy"), *y = zeros_like(g, "y"), *dx = zeros_like(g, "dx");
  if (ref) { ot_ref_swiglu_fwd(y, x, N, F); ot_ref_swiglu_bwd(dx, x, dy, N, F); }
  else {
    ok(g, ot_swiglu_fwd(OT_F32, y, x, N, F), "fwd");
    ok(g, ot_swiglu_bwd(OT_F32, dx, x, dy, N, F), "bwd");
  }
  cmp(g, y, "y", TOL); cmp(g, dx, "dx", TOL);
  free(x); free(dy); free(y); free(dx);
}

// ------------------------------------------------------------------ rope ----
static void t_rope(gold *g, bool ref) {
  int B = mi(g, "B"), H = mi(g, "H"), T = mi(g, "T"), D = mi(g, "D"), rot = mi(g, "rot"),
      pos0 = mi(g, "pos0"), Tmax = mi(g, "Tmax");
  float base = (float)md(g, "base");
  ot_rope_style st = strcmp(meta(g, "style"), "gptj") == 0 ? OT_ROPE_GPTJ : OT_ROPE_NEOX;
  float *x = cp(g, "x"), *d = cp(g, "dy"), *tab = th_falloc((size_t)Tmax * rot);
  if (ref) {
    ot_ref_rope_fwd(x, B, H, T, D, rot, base, pos0, st);
    ot_ref_rope_bwd(d, B, H, T, D, rot, base, pos0, st);
  } else {
    ok(g, ot_rope_table(tab, Tmax, rot, base), "table");
    ok(g, ot_rope_fwd(OT_F32, x, tab, Tmax, B, H, T, D, rot, pos0, st), "fwd");
    ok(g, ot_rope_bwd(OT_F32, d, tab, Tmax, B, H, T, D, rot, pos0, st), "bwd");
  }
  cmp(g, x, "y", TOL); cmp(g, d, "dx", TOL);
  free(x); free(d); free(tab);
}

// ------------------------------------------------------- softmax / xent -----
static void t_softmax(gold *g, bool ref) {
  int N = mi(g, "N"), V = mi(g, "V");
  float *x = cp(g, "x"), *dy = cp(g, "dy"), *gy = cp(g, "y"), *y = zeros_like(g, "y"), *dx = zeros_like(g, "dx");
  if (ref) { ot_ref_softmax_fwd(y, x, N, V); ot_ref_softmax_bwd(dx, gy, dy, N, V); }
  else {
    ok(g, ot_softmax_fwd(OT_F32, y, x, N, V), "fwd");
    ok(g, ot_softmax_bwd(OT_F32, dx, gy, dy, N, V), "bwd");
  }
  cmp(g, y, "y", TOL); cmp(g, dx, "dx", TOL);
  free(x); free(dy); free(gy); free(y); free(dx);
}

static void t_xent(gold *g, bool ref) {
  int N = mi(g, "N"), V = mi(g, "V"), ld = mi(g, "ld"), ign = mi(g, "ignore_index");
  float count = (float)md(g, "count");
  int32_t *tg = cp(g, "targets");
  float *lg = cp(g, "logits"), *orig = cp(g, "logits"), *row = th_falloc((size_t)N), mean = NAN;
  for (int want_grad = 0; want_grad <= 1; want_grad++) {
    memset(row, 0xff, sizeof(float) * (size_t)N);  // NaN: must be written
    if (ref) ot_ref_xent(lg, ld, tg, N, V, ign, count, row, &mean, want_grad);
    else ok(g, ot_xent_fused(OT_F32, lg, ld, tg, N, V, ign, count, row, &mean, want_grad), "xent");
    cmp(g, row, "row_loss", TOL);
    cmp(g, &mean, "mean_loss", TOL);
    if (want_grad) cmp(g, lg, "dlogits", TOL);
    else th_check(memcmp(lg, orig, sizeof(float) * (size_t)N * ld) == 0,
                  "golden xent c%d [%s]: logits untouched without want_grad", g->c, g->isa);
  }
  free(tg); free(lg); free(orig); free(row);
}

// ----------------------------------------------------------------- adamw ----
static void t_adamw(gold *g, bool ref) {
  int n = mi(g, "n"), steps = mi(g, "steps");
  ot_adamw_cfg cfg = {(float)md(g, "lr"), (float)md(g, "beta1"), (float)md(g, "beta2"),
                      (float)md(g, "eps"), (float)md(g, "weight_decay"), 0};
  float gs = (float)md(g, "grad_scale");
  float *p = cp(g, "p0"), *m = th_falloc((size_t)n), *v = th_falloc((size_t)n);
  uint16_t *pb = th_alloc(sizeof(uint16_t) * (size_t)n);
  for (int s = 1; s <= steps; s++) {
    char gn[16], pn[16];
    snprintf(gn, sizeof gn, "g%d", s); snprintf(pn, sizeof pn, "p%d", s);
    float *grad = cp(g, gn);
    cfg.step = s;
    if (ref) ot_ref_adamw(p, grad, m, v, (size_t)n, &cfg, gs);
    else {
      ok(g, ot_adamw(p, grad, m, v, pb, (size_t)n, &cfg, gs), "adamw");
      bool same = true;
      for (int i = 0; i < n; i++) same = same && pb[i] == ot_f32_to_bf16(p[i]);
      th_check(same, "golden adamw c%d [%s] step %d: p_bf16 == bf16(p)", g->c, g->isa, s);
    }
    cmp(g, p, pn, TOL_ADAM);
    free(grad);
  }
  char mn[16], vn[16];
  snprintf(mn, sizeof mn, "m%d", steps); snprintf(vn, sizeof vn, "v%d", steps);
  cmp(g, m, mn, TOL_ADAM); cmp(g, v, vn, TOL_ADAM);
  free(p); free(m); free(v); free(pb);
}

// ------------------------------------------------------------- attention ----
static void t_attention(gold *g, bool ref) {
  ot_attn_shape s = {mi(g, "B"), mi(g, "Hq"), mi(g, "Hkv"), mi(g, "Tq"), mi(g, "Tk"), mi(g, "D"),
                     mi(g, "causal") != 0, NULL, (float)md(g, "scale")};
  int32_t *kvl = mi(g, "has_kv_len") ? cp(g, "kv_len") : NULL;
  s.kv_len = kvl;
  float *q = cp(g, "q"), *k = cp(g, "k"), *v = cp(g, "v"), *dout = cp(g, "dout");
  float *o = zeros_like(g, "o"), *lse = zeros_like(g, "lse"), *dq = zeros_like(g, "dq"),
        *dk = zeros_like(g, "dk"), *dv = zeros_like(g, "dv");
  size_t na = (size_t)s.B * s.Hq * s.Tq * s.Tk;
  float *att = th_falloc(na), *datt = th_falloc(na);
  if (ref) {
    ot_ref_attn_fwd(o, lse, q, k, v, &s);
    ot_ref_attn_bwd(dq, dk, dv, dout, q, k, v, &s);
    cmp(g, lse, "lse", TOL);
  } else {
    ok(g, ot_attn_mat_fwd(OT_F32, o, att, q, k, v, &s), "mat fwd");
    ok(g, ot_attn_mat_bwd(OT_F32, dq, dk, dv, datt, dout, att, q, k, v, &s), "mat bwd");
  }
  cmp(g, o, "o", TOL); cmp(g, dq, "dq", TOL); cmp(g, dk, "dk", TOL); cmp(g, dv, "dv", TOL);
  if (!ref) {  // flash: forward, then backward from the golden o and lse
    float *go = cp(g, "o"), *glse = cp(g, "lse");
    memset(o, 0xff, sizeof(float) * (size_t)s.B * s.Hq * s.Tq * s.D);  // NaN: must be written
    ok(g, ot_attn_flash_fwd(OT_F32, o, lse, q, k, v, &s), "flash fwd");
    ok(g, ot_attn_flash_bwd(OT_F32, dq, dk, dv, dout, go, glse, q, k, v, &s), "flash bwd");
    cmp(g, o, "o", TOL); cmp(g, lse, "lse", TOL);
    cmp(g, dq, "dq", TOL); cmp(g, dk, "dk", TOL); cmp(g, dv, "dv", TOL);
    if (!kvl) {  // decode without kv_len is flash attention (forward only)
      ok(g, ot_attn_decode(OT_F32, o, lse, q, k, v, &s), "decode");
      cmp(g, o, "o", TOL); cmp(g, lse, "lse", TOL);
    }
    free(go); free(glse);
  }
  free(kvl); free(q); free(k); free(v); free(dout); free(o); free(lse); free(dq); free(dk);
  free(dv); free(att); free(datt);
}

// ------------------------------------------------------------------ main ----
static const struct { const char *op; case_fn fn; } k_ops[] = {
    {"linear", t_linear}, {"qkv", t_qkv}, {"embed", t_embed}, {"layernorm", t_layernorm},
    {"rmsnorm", t_rmsnorm}, {"gelu", t_gelu}, {"swiglu", t_swiglu}, {"rope", t_rope},
    {"softmax", t_softmax}, {"xent", t_xent}, {"adamw", t_adamw}, {"attention", t_attention},
};

int main(void) {
  ot_isa isas[OT_ISA_COUNT];
  int nisa = th_isas(isas);
  for (size_t i = 0; i < sizeof k_ops / sizeof *k_ops; i++) {
    char path[256];
    snprintf(path, sizeof path, "tests/golden/%s.safetensors", k_ops[i].op);
    gold g = {NULL, k_ops[i].op, 0, "ref"};
    if (!th_check(ot_st_open(&g.f, path) == OT_OK, "open %s: %s", path, ot_last_error())) continue;
    const char *op = ot_st_meta(g.f, "op"), *nc = ot_st_meta(g.f, "cases");
    th_check(op && strcmp(op, k_ops[i].op) == 0 && nc && atoi(nc) > 0, "%s: op/cases metadata", path);
    int cases = nc ? atoi(nc) : 0;
    for (g.c = 0; g.c < cases; g.c++) {
      g.isa = "ref";
      k_ops[i].fn(&g, true);
      for (int j = 0; j < nisa; j++) {
        if (ot_isa_force(isas[j]) != OT_OK) continue;
        g.isa = ot_isa_name(isas[j]);
        k_ops[i].fn(&g, false);
        ot_isa_unforce();
      }
    }
    ot_st_close(g.f);
  }
  return th_finish();
}
