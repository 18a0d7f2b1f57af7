// Generation loop: prefill the prompt into the KV cache, then sample a token,
// hand it on (streaming), feed it back, until the stop token or the limit.
#include "internal.h"
#include "ot/infer.h"

ot_status ot_generate(ot_kvcache *c, ot_sampler *s, const int32_t *prompt, int n_prompt,
                      const ot_gen_config *cfg, int32_t *out, ot_gen_token_fn on_token,
                      void *ctx, ot_gen_stats *stats) {
  static const char fn[] = "ot_generate";
  OT_CHECK_PTR(c, fn);
  OT_CHECK_PTR(s, fn);
  OT_CHECK_PTR(prompt, fn);
  OT_CHECK_PTR(cfg, fn);
  if (stats) memset(stats, 0, sizeof *stats);
  if (ot_kv_config_of(c)->B != 1)
    return ot_error(OT_EINVAL, "%s: the cache holds B=%d sequences; generation needs B=1", fn,
                    ot_kv_config_of(c)->B);
  const int V = ot_model_config_of(ot_kv_model(c))->vocab;
  if (ot_sampler_vocab(s) > V)
    return ot_error(OT_EINVAL, "%s: the sampler's vocabulary %d exceeds the model's %d", fn,
                    ot_sampler_vocab(s), V);
  if (n_prompt < 1)
    return ot_error(OT_EINVAL, "%s: n_prompt=%d: the prompt needs at least one token (e.g. the "
                    "end-of-text token to start from nothing)", fn, n_prompt);
  if (cfg->max_tokens < 1)
    return ot_error(OT_EINVAL, "%s: max_tokens=%d must be >= 1", fn, cfg->max_tokens);
  const int cap = ot_kv_capacity(c);
  if ((int64_t)n_prompt + cfg->max_tokens - 1 > cap)
    return ot_error(OT_EINVAL, "%s: %d prompt tokens + max_tokens=%d exceed the KV cache capacity "
                    "of %d tokens (at most %d new tokens fit; shorten the prompt or lower "
                    "max_tokens)", fn, n_prompt, cfg->max_tokens, cap,
                    cap - n_prompt + 1 > 0 ? cap - n_prompt + 1 : 0);
  ot_kv_reset(c);
  ot_gen_stats st = {n_prompt, 0, 0, false, 0.0, 0.0};
  const float *logits = NULL;
  double t0 = ot_now();
  ot_status r = ot_kv_forward(c, prompt, n_prompt, false, &logits, NULL);
  st.prefill_s = ot_now() - t0;
  t0 = ot_now();
  for (int i = 0; r == OT_OK && i < cfg->max_tokens; i++) {
    int32_t tok;
    r = ot_sampler_sample(s, logits, &tok);
    if (r != OT_OK) break;
    if (tok == cfg->stop_token) {
      st.stopped = true;
      break;
    }
    if (out) out[i] = tok;
    st.new_tokens++;
    if (on_token && !on_token(ctx, tok)) break;
    if (i + 1 < cfg->max_tokens) {
      r = ot_kv_forward(c, &tok, 1, false, &logits, NULL);
      st.decode_steps++;
    }
  }
  st.decode_s = ot_now() - t0;
  if (stats) *stats = st;
  return r;
}
