// Token + learned-position embedding: validation (every token id checked
// before any output is touched), profiler span and dispatch; the kernels live
// in kern/embed.c, the scalar reference in embed_ref.c.
#include "internal.h"
#include "ot/ops.h"
#include "kern/embed_k.h"

static ot_status embed_check(const char *fn, ot_dtype dt, const int32_t *tokens, int B, int T,
                             int C, int V) {
  OT_CHECK_FLOAT_DT(dt, fn);
  OT_CHECK_PTR(tokens, fn);
  OT_CHECK_POS(B, fn);
  OT_CHECK_POS(T, fn);
  OT_CHECK_POS(C, fn);
  OT_CHECK_POS(V, fn);
  long N = (long)B * T;
  for (long i = 0; i < N; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return ot_error(OT_EINVAL,
                      "%s: tokens[%ld] = %d is outside the vocabulary [0, V=%d) (batch %ld, "
                      "position %ld); check the tokenizer / data shard against the model's V",
                      fn, i, (int)tokens[i], V, i / T, i % T);
  return OT_OK;
}

// tokens: [B*T] int32 in [0, V); wte: [V, C] (dt); wpe: [>= T, C] (dt) or NULL
// -> out: [B*T, C] (dt), row b*T + t = wte[tokens[b*T + t]] + wpe[t].
ot_status ot_embed_fwd(ot_dtype dt, void *out, const int32_t *tokens, const void *wte,
                       const void *wpe, int B, int T, int C, int V) {
  return ot_embed_fwd_w(dt, dt, out, tokens, wte, wpe, B, T, C, V);
}

// f32 tables, bf16 rows: each row summed in f32 (256 columns at a time, on the stack)
// and rounded once, so it equals ot_f32_to_bf16 of the f32 embedding.
static void embed_fwd_f32_to_bf16(uint16_t *out, const int32_t *tokens, const float *wte,
                                  const float *wpe, long N, int T, int C) {
#pragma omp parallel for schedule(static) if (N * C >= 65536)
  for (long i = 0; i < N; i++) {
    float row[256];
    const float *e = wte + (size_t)tokens[i] * C, *p = wpe ? wpe + (size_t)(i % T) * C : NULL;
    for (int c0 = 0; c0 < C; c0 += 256) {
      const int n = C - c0 < 256 ? C - c0 : 256;
      for (int c = 0; c < n; c++) row[c] = e[c0 + c] + (p ? p[c0 + c] : 0.0f);
      ot_cvt_f32_to_bf16(row, out + (size_t)i * C + c0, (size_t)n);
    }
  }
}

ot_status ot_embed_fwd_w(ot_dtype dt, ot_dtype wdt, void *out, const int32_t *tokens,
                         const void *wte, const void *wpe, int B, int T, int C, int V) {
  static const char fn[] = "ot_embed_fwd";
  if (wdt != dt && !(wdt == OT_F32 && dt == OT_BF16))
    return ot_error(OT_EINVAL, "%s: tables dtype %s with %s rows unsupported (use %s, or f32 tables "
                    "with bf16 rows)", fn, ot_dtype_name(wdt), ot_dtype_name(dt), ot_dtype_name(dt));
  OT_CHECK_PTR(out, fn);
  OT_CHECK_PTR(wte, fn);
  OT_TRY(embed_check(fn, dt, tokens, B, T, C, V));
  long N = (long)B * T;
  double es = (double)ot_dtype_size(dt), n = (double)N * C;
  OT_PROF_BEGIN("embed_fwd", wpe ? n : 0.0, n * es * (wpe ? 3.0 : 2.0) + 4.0 * N);
  if (wdt == dt) OT_KPICK(k_embed_fwd)(out, tokens, wte, wpe, N, T, C, ot__sk(dt));
  else embed_fwd_f32_to_bf16(out, tokens, wte, wpe, N, T, C);
  OT_PROF_STOP();
  return OT_OK;
}

// dout: [B*T, C] (dt) -> dwte: [V, C] f32 += (row tokens[i] gets dout[i]),
// dwpe: [T, C] f32 += sum over b of dout[b*T + t] (NULL: skip). Deterministic:
// every element is accumulated in token order whatever the thread count.
ot_status ot_embed_bwd(ot_dtype dt, float *dwte, float *dwpe, const void *dout,
                       const int32_t *tokens, int B, int T, int C, int V) {
  static const char fn[] = "ot_embed_bwd";
  OT_CHECK_PTR(dwte, fn);
  OT_CHECK_PTR(dout, fn);
  OT_TRY(embed_check(fn, dt, tokens, B, T, C, V));
  long N = (long)B * T;
  double es = (double)ot_dtype_size(dt), n = (double)N * C;
  OT_PROF_BEGIN("embed_bwd", n * (dwpe ? 2.0 : 1.0), n * (es + (dwpe ? 16.0 : 8.0)) + 4.0 * N);
  OT_KPICK(k_embed_bwd)(dwte, dwpe, dout, tokens, N, T, C, ot__sk(dt));
  OT_PROF_STOP();
  return OT_OK;
}
