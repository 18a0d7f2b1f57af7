// `ot translate` (translate.c, translate_io.c): options and the helpers the
// command's loop uses.
#ifndef OT_CLI_TRANSLATE_H
#define OT_CLI_TRANSLATE_H
#include "cli.h"

typedef struct {
  const char *model, *tok_dir, *input, *output, *profile;
  int beam, max_length, min_length, batch, dtype, group, long_mode, threads;
  float length_penalty, max_len_a, max_len_b;
  bool early_stopping, ids, no_gen_config, quiet;
} tr_opts;

enum { TR_LONG_SKIP = 0, TR_LONG_REFUSE = 1 };

// The Hugging Face generation settings of a model directory (generation_config.json,
// else config.json): bad_words_ids, forced_eos_token_id, no_repeat_ngram_size,
// repetition_penalty, min_length into bc (its arrays point into the storage
// given: len [cap], ids [cap]). A missing file is fine; a malformed one is an error.
ot_status tr_read_gen_config(const char *dir, ot_beam_config *bc, int32_t *len, int32_t *ids,
                             int cap);
// One input line -> source ids (cap of them at most): --ids: space-separated ids
// in [0, vocab); else BPE + eos. Returns OT_EINVAL naming the line's problem
// (invalid UTF-8, a bad id); *n > cap means too long (ids are not all stored).
ot_status tr_line_ids(const ot_bpe *bpe, bool ids_mode, const char *line, size_t len, int vocab,
                      int32_t eos, int32_t *out, int cap, int *n);
// Writes one translation line: ids, or BPE text with invalid UTF-8 bytes as U+FFFD; no final eos.
void tr_write(FILE *f, const ot_bpe *bpe, bool ids_mode, const int32_t *tok, int n, int32_t eos);

#endif
