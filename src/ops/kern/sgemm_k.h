// Prototypes of the own GEMM's kernels (kern/sgemm.c), one variant per ISA:
// the packing of A and B panels and the register-blocked macro-kernel. The
// driver (ops/gemm_own.c) chooses the cache blocks and the threads.
#ifndef OT_KERN_SGEMM_K_H
#define OT_KERN_SGEMM_K_H
#include "internal.h"

// The micro-tile of this ISA: MR rows of A by NR columns of B.
OT_KDECL(void, k_sg_tile, (int *mr, int *nr));

// Packs the mc x kc block of op(A) whose element (0, 0) is at `A` (storage kind
// ask, leading dimension lda; ta: A stored transposed, element (i, k) at
// A[k*lda + i], else at A[i*lda + k]) into ceil(mc/MR) panels of MR rows:
// dst[p*MR*kc + k*MR + r] = op(A)(p*MR + r, k), rows past mc zero.
OT_KDECL(void, k_sg_pack_a, (float *dst, const void *A, int ask, size_t lda, int ta, int mc, int kc));

// Packs panels [p0, p1) of the kc x nc block of op(B) at `B` (tb: element (k, j)
// at B[j*ldb + k], else at B[k*ldb + j]) into NR-column panels:
// dst[p*NR*kc + k*NR + c] = op(B)(k, p*NR + c), columns past nc zero.
OT_KDECL(void, k_sg_pack_b, (float *dst, const void *B, int bsk, size_t ldb, int tb, int kc, int nc,
                             int p0, int p1));

// The epilogue of one k-block's product P (mc x nc, f32) into C (storage kind
// csk, leading dimension ldc):
//   first block: C = alpha P + beta C (C not read when beta is 0);
//   later ones:  C = C + alpha P (C is f32 then: 16-bit C takes one block);
//   last block:  + bias[j] when bias is not NULL (bias already offset to column 0).
typedef struct {
  float alpha, beta;
  int first, last;
  const float *bias;
} ot_sg_epi;

// C block (mc x nc at C) <- epilogue(Ap Bp): Ap from k_sg_pack_a (mc rows, kc),
// Bp nc columns by kc: NR-column panels bpan floats apart, each panel's k rows
// bk floats apart (k_sg_pack_b's panels: bk = NR, bpan = NR * kc; an f32 B read
// in place: bk = ldb, bpan = NR, nc a multiple of NR). One thread; each
// element's sum runs over k in order, so the result does not depend on how
// blocks are spread.
OT_KDECL(void, k_sg_macro, (const float *Ap, const float *Bp, size_t bk, size_t bpan, int mc, int nc, int kc,
                            void *C, int csk, size_t ldc, const ot_sg_epi *e));

#endif
