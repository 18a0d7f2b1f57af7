// The translator's caches as the decoder blocks' key/value source: the
// self-attention cache of every live row (appended one token per step, read by
// the decode kernel, gathered by parent when the beams reorder) and the cross
// K/V of every live sentence (computed once per sentence by ot__tr_encode,
// shared by the sentence's rows, compacted when sentences finish).
#include "infer/translate_impl.h"

// Block l's self-attention of the rows' new token: k, v [B, Hkv, 1, D] appended
// at position len of each row's cache [R, Hkv, max_tgt, D], then the decode
// kernel over the row's len + 1 keys (kv_len).
ot_status ot__tr_attend(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                        const void *q, const void *k, const void *v, int B, int T) {
  ot_translator *t = ((ot__tr_src *)self)->t;
  const int Tc = t->cfg.max_tgt, pos = t->len;
  if (T != 1 || B != t->rows)
    return ot_error(OT_EINTERNAL, "translator: a step of %d rows x %d tokens (expected %d x 1)", B,
                    T, t->rows);
  const size_t row = (size_t)t->D * t->es;
  for (int bh = 0; bh < B * t->Hkv; bh++) {
    memcpy((char *)t->sk[l] + ((size_t)bh * Tc + pos) * row, (const char *)k + (size_t)bh * row, row);
    memcpy((char *)t->sv[l] + ((size_t)bh * Tc + pos) * row, (const char *)v + (size_t)bh * row, row);
  }
  ot_attn_shape s = {B, g->a.Hq, g->a.Hkv, 1, Tc, g->a.D, true, t->kv_len, 0.0f};
  return ot_attn_decode(g->dt, o, lse, q, t->sk[l], t->sv[l], &s);
}

// Block l's cross-attention: q [B rows, Hq, 1, D]. The rows come in n_slots
// groups of B / n_slots (one sentence each, in slot order): each group is one
// batch entry of Tq = B / n_slots queries over its sentence's cross K/V, so the
// K/V are read in place, never copied per beam.
ot_status ot__tr_cross(ot__kvsrc *self, const ot__graph *g, int l, void *o, float *lse,
                       const void *q, int B, int T) {
  (void)lse;
  ot_translator *t = ((ot__tr_src *)self)->t;
  const int ns = t->n_slots, per = ns > 0 ? B / ns : 0;
  if (T != 1 || ns <= 0 || per * ns != B)
    return ot_error(OT_EINTERNAL, "translator: %d rows do not split into %d sentences", B, ns);
  if (per == 1) {   // greedy or the first step: the rows are the batch entries
    ot_attn_shape s = ot__cross_shape(g, ns, 1, t->S, t->src_len);
    return ot_attn_flash_fwd(g->dt, o, NULL, q, t->kc[l], t->vc[l], &s);
  }
  ot__transpose_heads(t->es, t->qh, q, ns, per, g->a.Hq, g->a.D, true);
  ot_attn_shape s = ot__cross_shape(g, ns, per, t->S, t->src_len);
  OT_TRY(ot_attn_flash_fwd(g->dt, t->oh2, NULL, t->qh, t->kc[l], t->vc[l], &s));
  ot__transpose_heads(t->es, o, t->oh2, ns, per, g->a.Hq, g->a.D, false);
  return OT_OK;
}

// Self caches: row r of the new order continues old row parent[r] (its first
// len tokens copied into the spare buffers, which then become the caches).
static void gather_self(ot_translator *t, int rows, const int32_t *parent) {
  const int Tc = t->cfg.max_tgt, H = t->Hkv;
  const size_t seg = (size_t)t->len * t->D * t->es, head = (size_t)Tc * t->D * t->es;
  for (int l = 0; l < t->L; l++) {
    for (int r = 0; r < rows; r++)
      for (int h = 0; h < H; h++) {
        const size_t to = ((size_t)r * H + h) * head, from = ((size_t)parent[r] * H + h) * head;
        memcpy((char *)t->sk2[l] + to, (const char *)t->sk[l] + from, seg);
        memcpy((char *)t->sv2[l] + to, (const char *)t->sv[l] + from, seg);
      }
    void *k = t->sk[l], *v = t->sv[l];
    t->sk[l] = t->sk2[l]; t->sv[l] = t->sv2[l];
    t->sk2[l] = k; t->sv2[l] = v;
  }
}

ot_status ot__tr_reorder(ot_translator *t, int rows, const int32_t *parent,
                         const int32_t *sentence) {
  if (rows < 1 || rows > t->R)
    return ot_error(OT_EINTERNAL, "translator: %d rows outside [1, %d]", rows, t->R);
  // self caches (step 0: empty, nothing to gather)
  if (t->len > 0) {
    bool same = rows == t->rows;
    for (int r = 0; r < rows; r++) {
      if (parent[r] < 0 || parent[r] >= t->rows)
        return ot_error(OT_EINTERNAL, "translator: parent[%d]=%d outside [0, %d)", r, parent[r],
                        t->rows);
      same = same && parent[r] == r;
    }
    if (!same) gather_self(t, rows, parent);
  }
  t->rows = rows;
  // cross slots: the rows' sentences in order (increasing; finished ones dropped)
  int n = 0;
  for (int r = 0; r < rows; r++)
    if (r == 0 || sentence[r] != sentence[r - 1]) {
      if (r > 0 && sentence[r] < sentence[r - 1])
        return ot_error(OT_EINTERNAL, "translator: rows are not grouped by sentence");
      int j = n;   // the slot holding sentence[r] (at or after n: slots only drop)
      while (j < t->n_slots && t->slot_sent[j] != sentence[r]) j++;
      if (j == t->n_slots)
        return ot_error(OT_EINTERNAL, "translator: sentence %d has no cross K/V", sentence[r]);
      if (j != n) {
        const size_t per = (size_t)t->Hkv * t->S * t->D * t->es;
        for (int l = 0; l < t->L; l++) {
          memmove((char *)t->kc[l] + n * per, (const char *)t->kc[l] + j * per, per);
          memmove((char *)t->vc[l] + n * per, (const char *)t->vc[l] + j * per, per);
        }
        t->slot_sent[n] = t->slot_sent[j];
        t->src_len[n] = t->src_len[j];
      }
      n++;
    }
  t->n_slots = n;
  return OT_OK;
}
