// The buffers of one attention call's forward and backward, f32, sized from an
// ot_attn_shape: q, dout, o, dq [B, Hq, Tq, D]; k, v, dk, dv [B, Hkv, Tk, D];
// lse [B, Hq, Tq] (the attention tests' shared allocation; contents uninitialized).
#ifndef OT_TESTS_ATTN_BUFS_H
#define OT_TESTS_ATTN_BUFS_H
#include "harness.h"

typedef struct {
  size_t nq, nk, nl;
  float *q, *k, *v, *dout, *o, *lse, *dq, *dk, *dv;
} th_abufs;

static inline th_abufs th_abufs_make(const ot_attn_shape *s) {
  th_abufs b;
  b.nq = (size_t)s->B * s->Hq * s->Tq * s->D;
  b.nk = (size_t)s->B * s->Hkv * s->Tk * s->D;
  b.nl = (size_t)s->B * s->Hq * s->Tq;
  b.q = th_falloc(b.nq); b.k = th_falloc(b.nk); b.v = th_falloc(b.nk); b.dout = th_falloc(b.nq);
  b.o = th_falloc(b.nq); b.lse = th_falloc(b.nl);
  b.dq = th_falloc(b.nq); b.dk = th_falloc(b.nk); b.dv = th_falloc(b.nk);
  return b;
}

static inline void th_abufs_free(th_abufs *b) {
  free(b->q); free(b->k); free(b->v); free(b->dout); free(b->o); free(b->lse);
  free(b->dq); free(b->dk); free(b->dv);
}
#endif
