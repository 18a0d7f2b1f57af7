// Parameter storage of a part: where each tensor of the layout lives (m->wpos).
// A normal part stores the whole layout (wpos = offset). A ZeRO-3 part
// (part.param_slots) stores the global tensors other than the vocabulary ones
// (positions, final norms, logits bias), each at its padded size in layout order,
// then two block slots of the largest block's size; block l always uses slot l % 2,
// so the weight views the graph builds once (weights.c) stay valid and the runtime
// (src/dist/zero3.c) gathers block l into its slot before it runs (comm.need_block):
//   storage = globals | slot 0 [blk] | slot 1 [blk]
// Blocks are numbered locally in the order they run: an encoder-decoder part's
// encoder blocks [0, Le), then its decoder blocks [Le, Le + L) (a decoder block
// with cross-attention is the larger); each block is contiguous in the layout, but
// global tensors may lie between two blocks (the encoder's final norm, the
// decoder's positions). The vocabulary tensors (token embedding, head) are read a
// chunk of rows at a time from the shards (comm.need_rows): the embedding lookups
// and the head's GEMMs below.
#include "model/model_impl.h"
#include "ops/gemm_impl.h"
#include "ot/ops.h"
#include <stdlib.h>

static size_t padded(size_t n) { return (n + 15) & ~(size_t)15; }

// A tensor of vocabulary rows that ZeRO-3 does not store (read by chunks).
static bool is_vocab(const ot_param *q) {
  return q->layer < 0 && (q->kind == OT_PT_EMBED || q->kind == OT_PT_LM_HEAD);
}

// Blocks of the part in running order: an encoder-decoder's encoder blocks, then its
// decoder blocks.
static int n_blocks(const ot_model *m) { return m->Le + m->L; }

// Local block of every parameter (-1: a global tensor) into blk [n_params].
static void block_of(const ot_model *m, int *blk) {
  for (int i = 0; i < m->n_params; i++) blk[i] = -1;
  const int nf = (int)(sizeof(ot__layer_params) / sizeof(int));
  for (int l = 0; l < n_blocks(m); l++) {
    const int *f = (const int *)(l < m->Le ? &m->elp[l] : &m->lp[l - m->Le]);
    for (int k = 0; k < nf; k++)
      if (f[k] >= 0 && f[k] < m->n_params) blk[f[k]] = l;
  }
}

// Layout range [*o0, *o1) of local block l: from its first tensor to the next tensor
// that is not its own (each block's tensors are contiguous in the layout).
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

ot_status ot__slots_check_hooks(const ot_model *m) {
  if (m->part.param_slots &&
      (!m->part.comm.need_rows || !m->part.comm.row_buf || !m->part.comm.row_buf16))
    return ot_error(OT_EINVAL, "ot_model_create: ZeRO-3 parameter slots need the need_rows hook with "
                    "its buffers");
  return OT_OK;
}

ot_status ot__slots_build(ot_model *m) {
  m->wpos = calloc((size_t)m->n_params + 1, sizeof *m->wpos);
  if (!m->wpos) return ot_error(OT_ENOMEM, "ot_model_create: out of memory");
  for (int i = 0; i < m->n_params; i++) m->wpos[i] = m->params[i].offset;
  m->n_stored = m->n_floats;
  const int nb = n_blocks(m);
  m->sbr = calloc(2 * (size_t)nb + 2, sizeof *m->sbr);
  int *blk = malloc(((size_t)m->n_params + 1) * sizeof(int));
  if (!m->sbr || !blk) {
    free(blk);
    return ot_error(OT_ENOMEM, "ot_model_create: out of memory");
  }
  block_of(m, blk);
  ot_status s = OT_OK;
  m->sblk = 0;
  for (int l = 0; l < nb; l++) {
    span(m, blk, l, &m->sbr[2 * l], &m->sbr[2 * l + 1]);
    if (m->sbr[2 * l + 1] - m->sbr[2 * l] > m->sblk) m->sblk = m->sbr[2 * l + 1] - m->sbr[2 * l];
  }
  if (!m->part.param_slots) {
    free(blk);
    return OT_OK;
  }
  for (int l = 1; l < nb && s == OT_OK; l++)   // the slots need blocks in order, each contiguous
    if (m->sbr[2 * l] < m->sbr[2 * l - 1])
      s = ot_error(OT_EINTERNAL, "ot_model_create: block %d lies before the end of block %d", l, l - 1);
  for (int i = 0; i < m->n_params && s == OT_OK; i++)
    if (blk[i] >= 0 && m->params[i].offset + m->params[i].numel > m->sbr[2 * blk[i] + 1])
      s = ot_error(OT_EINTERNAL, "ot_model_create: block %d's tensors are not contiguous ('%s')", blk[i],
                   m->params[i].name);
  if (nb < 1) s = ot_error(OT_EINVAL, "ot_model_create: ZeRO-3 parameter slots need a part with at "
                           "least one block");
  else if (!m->part.external_grads || m->part.comm.row_rows < 1)
    s = ot_error(OT_EINVAL, "ot_model_create: ZeRO-3 parameter slots need external_grads and "
                 "row_rows >= 1");
  size_t glob = 0;
  for (int i = 0; i < m->n_params; i++)   // the stored global tensors, in layout order
    if (blk[i] < 0 && !is_vocab(&m->params[i])) {
      m->wpos[i] = glob;
      glob += padded(m->params[i].numel);
    }
  for (int i = 0; i < m->n_params; i++)
    if (blk[i] >= 0)
      m->wpos[i] = glob + (size_t)(blk[i] % 2) * m->sblk + (m->params[i].offset - m->sbr[2 * blk[i]]);
  m->n_stored = glob + 2 * m->sblk;
  free(blk);
  return s;
}

void ot_model_block_range(const ot_model *m, int l, size_t *o0, size_t *o1) {
  *o0 = *o1 = 0;
  if (!m || !m->sbr || l < 0 || l >= n_blocks(m)) return;
  *o0 = m->sbr[2 * l];
  *o1 = m->sbr[2 * l + 1];
}

bool ot_model_param_stored(const ot_model *m, int i) {
  return m && i >= 0 && i < m->n_params && !(m->part.param_slots && is_vocab(&m->params[i]));
}

// Storage of layout offset off (a block offset: its block's slot; a vocabulary one: NULL).
float *ot_model_storage(ot_model *m, size_t off) {
  if (!m || off > m->n_floats) return NULL;
  if (!m->part.param_slots) return m->w + off;
  for (int l = 0; l < n_blocks(m); l++)   // the block holding off
    if (off >= m->sbr[2 * l] && off < m->sbr[2 * l + 1])
      return m->w + m->n_stored - 2 * m->sblk + (size_t)(l % 2) * m->sblk + (off - m->sbr[2 * l]);
  for (int i = 0; i < m->n_params; i++) {
    const ot_param *q = &m->params[i];
    if (off >= q->offset && off < q->offset + padded(q->numel))
      return is_vocab(q) ? NULL : m->w + m->wpos[i] + (off - q->offset);
  }
  return NULL;
}

size_t ot_model_n_stored(const ot_model *m) { return m ? m->n_stored : 0; }

ot_status ot_model_sync_bf16_range(ot_model *m, size_t o0, size_t o1) {
  OT_CHECK_PTR(m, "ot_model_sync_bf16_range");
  if (!m->wb || o1 <= o0) return OT_OK;
  float *w = ot_model_storage(m, o0);
  if (!w) return ot_error(OT_EINVAL, "ot_model_sync_bf16_range: offset %zu is not stored", o0);
  if (m->run.dt == OT_F16) ot_cvt_f32_to_f16(w, m->wb + (w - m->w), o1 - o0);
  else ot_cvt_f32_to_bf16(w, m->wb + (w - m->w), o1 - o0);
  return OT_OK;
}

// ------------------------------------------------ ZeRO-3 vocabulary chunks ----
const void *ot__z3_rows(const ot_model *m, int i, int r0, int rows, ot_dtype *wdt) {
  const ot_model_comm *c = &m->part.comm;
  c->need_rows(c->ctx, i, r0, rows);
  *wdt = ot__wdt(m);
  if (*wdt == OT_F32) return c->row_buf;
  const size_t n = (size_t)rows * m->C;
  if (*wdt == OT_F16) ot_cvt_f32_to_f16(c->row_buf, c->row_buf16, n);
  else ot_cvt_f32_to_bf16(c->row_buf, c->row_buf16, n);
  return c->row_buf16;
}

// out [B*T, C] (dt) = row tokens[i] - v0 of the token embedding (0 where another tensor
// rank holds it) + positions[t] (tp rank 0 under vocab-parallel), summed over the tensor
// group under vocab-parallel: the rows read a chunk at a time.
ot_status ot__z3_embed_fwd(ot_model *m, void *out, const int32_t *tokens, int B, int T) {
  const ot_dtype dt = m->run.dt;
  const long N = (long)B * T;
  const int C = m->C, R = m->part.comm.row_rows;
  const bool vp = m->part.vocab_parallel && m->part.tp > 1;
  for (long i = 0; i < N; i++)
    if (tokens[i] < 0 || tokens[i] >= m->V)
      return ot_error(OT_EINVAL, "embedding: token %d at position %ld is outside the vocabulary [0, %d)",
                      tokens[i], i, m->V);
  const void *wpe = m->wpe >= 0 && (!vp || m->part.tp_rank == 0) ? ot__pdt(m, m->wpe) : NULL;
  const ot_dtype pdt = ot__wdt(m);
  for (long i = 0; i < N; i++) {   // rows of other tensor ranks: the positions alone
    const long r = (long)tokens[i] - m->v0;
    if (r >= 0 && r < m->Vl) continue;
    for (int c = 0; c < C; c++) ot__stf(dt, out, (size_t)i * C + c, wpe ? ot__ldf(pdt, wpe, (size_t)(i % T) * C + c) : 0.0f);
  }
  for (int r0 = 0; r0 < m->Vl; r0 += R) {
    const int rows = r0 + R < m->Vl ? R : m->Vl - r0;
    ot_dtype wdt;
    const void *w = ot__z3_rows(m, m->wte, r0, rows, &wdt);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) {
      const long r = (long)tokens[i] - m->v0 - r0;
      if (r < 0 || r >= rows) continue;
      for (int c = 0; c < C; c++) {
        float x = ot__ldf(wdt, w, (size_t)r * C + c);
        if (wpe) x += ot__ldf(pdt, wpe, (size_t)(i % T) * C + c);
        ot__stf(dt, out, (size_t)i * C + c, x);
      }
    }
  }
  return vp ? m->part.comm.allreduce(m->part.comm.ctx, out, (size_t)N * C, dt, OT_RED_SUM) : OT_OK;
}

// logits [N, Vl] (dt) = yf [N, C] W^T (no bias) for the head's parameter i, or its
// backward dx [N, C] (dt) = dlogits W with the dlogits in logits: a chunk of W's rows at
// a time (each chunk a GEMM on a column block of the logits; dx summed over the chunks in
// f32 and rounded once to a 16-bit dt).
ot_status ot__z3_head(ot_model *m, int i, int N, bool backward, void *dx) {
  static const char fn[] = "ZeRO-3 head";
  const ot_dtype dt = m->run.dt;
  const int C = m->C, R = m->part.comm.row_rows, last = m->Vl % R ? m->Vl % R : R;
  const size_t es = ot_dtype_size(dt);
  const ot_dtype wdt = ot__wdt(m);
  // the chunk GEMMs' workspace (the largest of the two shapes) after the f32 sum of dx
  size_t acc = 0, ws = 0;
  for (int k = 0; k < 2; k++) {
    const int rows = k ? last : (R < m->Vl ? R : m->Vl);
    ot_mm mm = backward ? (ot_mm){dt, wdt, OT_F32, false, false, N, C, rows, 1.0f, 1.0f, m->logits,
                                  m->Vl, NULL, C, NULL, C, NULL, false}
                        : (ot_mm){dt, wdt, dt, false, true, N, rows, C, 1.0f, 0.0f, m->yf, C, NULL, C,
                                  m->logits, m->Vl, NULL, false};
    const size_t w = ot__mm_ws(&mm);
    if (w > ws) ws = w;
  }
  if (backward && dt != OT_F32) acc = ot_align64((size_t)N * C * sizeof(float));
  uint8_t *blk = acc + ws ? ot_scratch(acc + ws) : NULL;
  if (acc + ws && !blk) return OT_ENOMEM;
  float *sum = acc ? (float *)blk : NULL;
  for (int r0 = 0; r0 < m->Vl; r0 += R) {
    const int rows = r0 + R < m->Vl ? R : m->Vl - r0;
    ot_dtype rdt;
    const void *w = ot__z3_rows(m, i, r0, rows, &rdt);
    char *lg = (char *)m->logits + (size_t)r0 * es;
    ot_mm mm = backward ? (ot_mm){dt, rdt, sum ? OT_F32 : dt, false, false, N, C, rows, 1.0f,
                                  r0 ? 1.0f : 0.0f, lg, m->Vl, w, C, sum ? (void *)sum : dx, C, NULL, false}
                        : (ot_mm){dt, rdt, dt, false, true, N, rows, C, 1.0f, 0.0f,
                                  m->yf, C, w, C, lg, m->Vl, NULL, false};
    OT_TRY(ot__mm_run(&mm, ws ? blk + acc : NULL, fn));
  }
  if (sum && dt == OT_F16) ot_cvt_f32_to_f16(sum, dx, (size_t)N * C);
  else if (sum) ot_cvt_f32_to_bf16(sum, dx, (size_t)N * C);
  return OT_OK;
}
