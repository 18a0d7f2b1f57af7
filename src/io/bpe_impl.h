// Internal: the byte-level BPE tokenizer's tables, shared by bpe.c (core,
// encode/decode), bpe_files.c (vocab.json/merges.txt) and bpe_train.c.
#ifndef OT_IO_BPE_IMPL_H
#define OT_IO_BPE_IMPL_H
#include "data_impl.h"

struct ot_bpe {
  int n_vocab, cap_vocab;
  uint8_t *bytes;            // token bytes, concatenated
  size_t n_bytes, cap_bytes;
  uint32_t *off;             // [cap_vocab + 1]: token i = bytes[off[i], off[i+1])
  uint8_t *raw;              // [cap_vocab]: 1 = written verbatim in vocab.json (special/added token)
  int32_t byte_id[256];      // id of each single-byte token
  int eot;                   // id of <|endoftext|>, -1 if none
  int n_merges, cap_merges;
  int32_t (*merge)[3];       // rank -> {left, right, merged}
  uint64_t *pkey;            // (left, right) -> rank, open addressing
  int32_t *prank;            //   (-1 = empty slot)
  size_t pmask;
  int32_t *tidx;             // token bytes -> id, open addressing (-1 = empty)
  size_t tmask;
};

// GPT-2's bytes_to_unicode: b2u[byte] = code point (< 324); u2b[cp] = byte or
// -1; order[k] = the byte of token id k (printable bytes first, ascending).
typedef struct { uint16_t b2u[256]; int16_t u2b[324]; uint8_t order[256]; } ot__b2u_t;
const ot__b2u_t *ot__b2u(void);

ot_status ot__bpe_create(ot_bpe **out, int cap_vocab, size_t cap_bytes, int cap_merges);
int32_t ot__bpe_find(const ot_bpe *t, const uint8_t *p, size_t n);      // id or -1
// Appends a token (no duplicate check; the byte pool grows). Returns its id,
// or -1 when cap_vocab is reached or memory runs out.
int32_t ot__bpe_add(ot_bpe *t, const uint8_t *p, size_t n, bool raw);
// Adds merge (a, b) -> c with the next rank; false if (a, b) is already a merge.
bool ot__bpe_add_merge(ot_bpe *t, int32_t a, int32_t b, int32_t c);
int32_t ot__bpe_rank(const ot_bpe *t, int32_t a, int32_t b);             // rank or -1
// Sets byte_id (every byte must have a token: OT_EFORMAT "<what>: ..." if not) and eot.
ot_status ot__bpe_finish(ot_bpe *t, const char *what);

// Pieces longer than this many bytes are merged with a heap (O(n log n));
// shorter ones with a linear scan. Tests lower it to compare both paths.
extern size_t ot__bpe_heap_min;

#endif
