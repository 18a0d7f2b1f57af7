// `ot prepare --task translate` (prepare_translate.c), called by prepare.c.
#ifndef OT_CLI_PREPARE_TRANSLATE_H
#define OT_CLI_PREPARE_TRANSLATE_H
#include "cli.h"

typedef struct {
  const char *src[3], *tgt[3];  // train, valid, test (valid/test may be NULL)
  const char *out, *kind;       // output directory; "bpe" (train) or a tokenizer directory / gpt2
  const char *dump_ids;         // NULL or a path prefix: <prefix>.<split>.tsv
  int vocab, max_len;
  bool refuse_long, quiet;
} cli_translate_prep;

// Trains (or loads) the joint tokenizer, writes it and info.json to out, reads
// every split given through ot_bitext_open and prints one summary line per
// split; with dump_ids writes "src ids<TAB>tgt ids" per kept pair. Returns the
// exit status (0, 1 on a failure, after a message on stderr).
int cli_prepare_translate(const cli_translate_prep *p);

#endif
