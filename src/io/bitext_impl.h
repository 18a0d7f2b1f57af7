// Internal: the lines of a parallel-text file (bitext_read.c), shared by the
// reader / BPE trainer (bitext.c) and the batcher (bitext_batch.c).
#ifndef OT_IO_BITEXT_IMPL_H
#define OT_IO_BITEXT_IMPL_H
#include "data_impl.h"

// A whole file split into lines: line i = buf[off[i], off[i] + len[i]),
// without its "\n" or "\r\n". Checked to be UTF-8.
typedef struct {
  char *buf;
  size_t size;
  int64_t n;
  size_t *off;
  uint32_t *len;
} ot__lines;

// Reads path (OT_EIO if missing) and splits it; invalid UTF-8 or a line over
// 4 GB is OT_EFORMAT "<fn>: <path>:<line>: ...". Frees everything on failure.
ot_status ot__lines_read(ot__lines *L, const char *path, const char *fn);
void ot__lines_free(ot__lines *L);
// OT_EFORMAT naming both counts and the first extra line when a->n != b->n.
ot_status ot__lines_same_count(const ot__lines *a, const char *pa, const ot__lines *b, const char *pb,
                               const char *fn);
// True when line i holds only blanks (space, tab, vertical tab, form feed) or nothing.
bool ot__line_blank(const ot__lines *L, int64_t i);

struct ot_bitext {
  int64_t P;              // pairs kept
  int64_t *line;          // [P] 1-based line number
  int64_t *so, *to;       // [P] offsets of the pair's ids in ids
  int32_t *sn, *tn;       // [P] token counts (without eos)
  int32_t *ids;           // token pool
  int32_t eos;
  uint64_t hash;          // of every pair's ids (for the batcher's fingerprint)
  ot_bitext_stats st;
};

#endif
