// `ot` command: shared helpers of the subcommands.
#ifndef OT_CLI_H
#define OT_CLI_H
#include "ot/ot.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Subcommands: argc/argv start at the subcommand's own arguments.
int ot_cmd_info(int argc, char **argv);
int ot_cmd_bench(int argc, char **argv);
int ot_cmd_prepare(int argc, char **argv);   // prepare.c
int ot_cmd_tokenize(int argc, char **argv);  // prepare.c
int ot_cmd_train(int argc, char **argv);     // train.c
int ot_cmd_eval(int argc, char **argv);      // train.c
int ot_cmd_generate(int argc, char **argv);  // generate.c
int ot_cmd_serve(int argc, char **argv);     // serve.c

// generate.c, shared with serve.c: loads an `ot train` checkpoint (or its run
// directory, or a config.json + model.safetensors directory); ckpt receives the
// resolved directory (OT_PATH_MAX + 64), data_dir the checkpoint's training
// data directory (OT_PATH_MAX, "" if none).
ot_status cli_load_checkpoint(const char *dir, const ot_run_config *r, ot_model **m, char *ckpt,
                              char *data_dir);
// The tokenizer of --tokenizer DIR (or "gpt2" = data/gpt2), else of the first of
// dirs[0, n) holding vocab.json + merges.txt, else data/gpt2; *used names it.
// Prints the error and returns NULL on failure.
ot_bpe *cli_pick_tokenizer(const char *flag, const char *const *dirs, int n, const char **used);

// Parses a positive integer flag value; prints an error naming the flag on failure.
bool cli_parse_int(const char *flag, const char *val, int lo, int hi, int *out);
// Parses a number flag value in [lo, hi]; prints an error naming the flag on failure.
bool cli_parse_float(const char *flag, const char *val, double lo, double hi, float *out);
// Parses f32 | bf16 | int8 (linear weights of the inference engine) into *out.
bool cli_parse_weights(const char *flag, const char *val, ot_dtype *out);
#endif
