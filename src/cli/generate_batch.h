// `ot generate` batch mode (generate_batch.c): several prompts through the
// serving engine (paged KV cache, continuous batching, quantized weights).
#ifndef OT_CLI_GENERATE_BATCH_H
#define OT_CLI_GENERATE_BATCH_H
#include "cli.h"
#include "ot/quant.h"

typedef struct {
  const ot_model *m;          // the model, or
  ot_qmodel *q;               // a quantized model (taken over: freed by cli_generate_batch)
  const ot_bpe *t;            // NULL with ids
  bool ids;                   // prompts are token ids, tokens print as ids
  const char *const *prompts; // [n_prompts] texts (or id lists) from --prompt
  int n_prompts;
  const char *prompts_file;   // more prompts, one per line (NULL: none)
  int batch;                  // sequences decoded together at most (0: 8); given with one
                              // prompt and no file: that many samples of it
  ot_dtype weights;           // with m: OT_F32, OT_BF16 or OT_I8
  int group;                  // with m: int8 group (0: per row)
  ot_dtype kv;                // cache storage
  double kv_mb;               // KV block pool budget in MB (0: every slot at full length)
  int max_tokens;
  ot_sampler_config sampler;  // sequence i uses seed + i
  int32_t eot;                // stop token (-1: none)
  bool quiet;
} cli_batch_args;

// "1 2 3" (separated by spaces, commas, tabs, newlines) -> ids[0, *n), each in
// [0, V), at most cap; false after a message naming the bad entry.
bool cli_parse_ids(const char *s, int V, int32_t *ids, int cap, int *n);

// Runs every prompt (those of --prompt; with none, of the file; or `batch`
// samples of a single one); prints each sequence when it ends and a summary on
// stderr. Returns the process exit code (0 ok, 1 error with a message).
int cli_generate_batch(const cli_batch_args *a);
#endif
