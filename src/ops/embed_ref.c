// Scalar reference for the token + position embedding (single thread). Token
// ids are assumed valid (the public entry points validate them).
#include "ot/ops.h"

// tokens: [B*T]; wte: [V, C]; wpe: [>= T, C] or NULL -> out: [B*T, C].
void ot_ref_embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                      int B, int T, int C) {
  for (long i = 0; i < (long)B * T; i++) {
    const float *w = wte + (size_t)tokens[i] * C;
    const float *p = wpe ? wpe + (size_t)(i % T) * C : NULL;
    for (int c = 0; c < C; c++)
      out[(size_t)i * C + c] = (float)((double)w[c] + (p ? (double)p[c] : 0.0));
  }
}

// dout: [B*T, C] -> dwte: [V, C] +=, dwpe: [T, C] += (NULL: skip), in token
// order. Each += is done in double and rounded once (equal to an f32 add).
void ot_ref_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                      int B, int T, int C) {
  for (long i = 0; i < (long)B * T; i++) {
    const float *g = dout + (size_t)i * C;
    float *w = dwte + (size_t)tokens[i] * C;
    float *p = dwpe ? dwpe + (size_t)(i % T) * C : NULL;
    for (int c = 0; c < C; c++) {
      w[c] = (float)((double)w[c] + g[c]);
      if (p) p[c] = (float)((double)p[c] + g[c]);
    }
  }
}
