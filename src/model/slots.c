// Parameter storage of a part: where each tensor of the layout lives (m->wpos).
// A normal part stores the whole layout (wpos = offset). A ZeRO-3 part
// (part.param_slots) stores the global tensors before and after the blocks and
// two block slots; block l always uses slot l % 2, so the weight views the graph
// builds once (weights.c) stay valid and the runtime (src/dist/zero3.c) gathers
// block l into its slot before it runs (comm.need_block):
//   storage = [0, b0) | [b1, n) | slot 0 [blk] | slot 1 [blk]
#include "model/model_impl.h"
#include "ot/ops.h"
#include <stdlib.h>

// Local block of every parameter (-1: a global tensor) into blk [n_params].
static void block_of(const ot_model *m, int *blk) {
  for (int i = 0; i < m->n_params; i++) blk[i] = -1;
  const int nf = (int)(sizeof(ot__layer_params) / sizeof(int));
  for (int l = 0; l < m->L; l++) {
    const int *f = (const int *)&m->lp[l];
    for (int k = 0; k < nf; k++)
      if (f[k] >= 0 && f[k] < m->n_params) blk[f[k]] = l;
  }
}

// Layout range [*o0, *o1) of local block l (blocks are contiguous and in order).
static void span(const ot_model *m, const int *blk, int l, size_t *o0, size_t *o1) {
  size_t a = SIZE_MAX, b = m->n_floats;
  for (int i = 0; i < m->n_params; i++) {
    const size_t off = m->params[i].offset;
    if (blk[i] == l && off < a) a = off;
  }
  for (int i = 0; i < m->n_params; i++) {   // the next tensor that is not block l's
    const size_t off = m->params[i].offset;
    if (blk[i] != l && off > a && off < b) b = off;
  }
  *o0 = a;
  *o1 = b;
}

ot_status ot__slots_build(ot_model *m) {
  m->wpos = calloc((size_t)m->n_params + 1, sizeof *m->wpos);
  if (!m->wpos) return ot_error(OT_ENOMEM, "ot_model_create: out of memory");
  for (int i = 0; i < m->n_params; i++) m->wpos[i] = m->params[i].offset;
  m->n_stored = m->n_floats;
  if (!m->part.param_slots) return OT_OK;
  if (m->cfg.arch == OT_ARCH_ENCDEC || m->L < 1)
    return ot_error(OT_EINVAL, "ot_model_create: ZeRO-3 parameter slots need a decoder-only or vision "
                    "model with at least one block (encoder-decoders: use ZeRO-1 or ZeRO-2)");
  if (!m->part.external_grads)
    return ot_error(OT_EINVAL, "ot_model_create: ZeRO-3 parameter slots need external_grads");
  int *blk = malloc(((size_t)m->n_params + 1) * sizeof(int));
  if (!blk) return ot_error(OT_ENOMEM, "ot_model_create: out of memory");
  block_of(m, blk);
  size_t prev1 = 0;
  m->sblk = 0;
  ot_status s = OT_OK;
  for (int l = 0; l < m->L && s == OT_OK; l++) {
    size_t o0, o1;
    span(m, blk, l, &o0, &o1);
    if (l == 0) m->sb0 = o0;
    else if (o0 != prev1) s = ot_error(OT_EINTERNAL, "ot_model_create: block %d is not contiguous with block %d", l, l - 1);
    prev1 = o1;
    if (o1 - o0 > m->sblk) m->sblk = o1 - o0;
  }
  m->sb1 = prev1;
  const size_t front = m->sb0, back = m->n_floats - m->sb1;
  for (int i = 0; i < m->n_params && s == OT_OK; i++) {
    const size_t off = m->params[i].offset;
    if (blk[i] >= 0) {
      size_t o0, o1;
      span(m, blk, blk[i], &o0, &o1);
      m->wpos[i] = front + back + (size_t)(blk[i] % 2) * m->sblk + (off - o0);
    } else if (off < m->sb0) {
      m->wpos[i] = off;
    } else if (off >= m->sb1) {
      m->wpos[i] = front + (off - m->sb1);
    } else {
      s = ot_error(OT_EINTERNAL, "ot_model_create: global tensor '%s' lies between the blocks", m->params[i].name);
    }
  }
  m->n_stored = front + back + 2 * m->sblk;
  free(blk);
  return s;
}

void ot_model_block_range(const ot_model *m, int l, size_t *o0, size_t *o1) {
  *o0 = *o1 = 0;
  if (!m) return;
  if (l == -1) { *o1 = m->part.param_slots ? m->sb0 : m->n_floats; return; }
  if (l == -2) { *o0 = *o1 = m->n_floats; if (m->part.param_slots) *o0 = m->sb1; return; }
  if (l < 0 || l >= m->L) return;
  int *blk = malloc(((size_t)m->n_params + 1) * sizeof(int));
  if (!blk) return;
  block_of(m, blk);
  span(m, blk, l, o0, o1);
  free(blk);
}

// Storage of layout offset off (a block offset: its block's slot).
float *ot_model_storage(ot_model *m, size_t off) {
  if (!m || off > m->n_floats) return NULL;
  if (!m->part.param_slots) return m->w + off;
  const size_t front = m->sb0, back = m->n_floats - m->sb1;
  if (off < m->sb0) return m->w + off;
  if (off >= m->sb1) return m->w + front + (off - m->sb1);
  for (int l = 0; l < m->L; l++) {   // the block holding off
    size_t o0, o1;
    ot_model_block_range(m, l, &o0, &o1);
    if (off >= o0 && off < o1) return m->w + front + back + (size_t)(l % 2) * m->sblk + (off - o0);
  }
  return NULL;
}

size_t ot_model_n_stored(const ot_model *m) { return m ? m->n_stored : 0; }

ot_status ot_model_sync_bf16_range(ot_model *m, size_t o0, size_t o1) {
  OT_CHECK_PTR(m, "ot_model_sync_bf16_range");
  if (!m->wb || o1 <= o0) return OT_OK;
  float *w = ot_model_storage(m, o0);
  if (!w) return ot_error(OT_EINVAL, "ot_model_sync_bf16_range: offset %zu outside the layout", o0);
  if (m->run.dt == OT_F16) ot_cvt_f32_to_f16(w, m->wb + (w - m->w), o1 - o0);
  else ot_cvt_f32_to_bf16(w, m->wb + (w - m->w), o1 - o0);
  return OT_OK;
}
