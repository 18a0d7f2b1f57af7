// `ot` command: shared helpers of the subcommands.
#ifndef OT_CLI_H
#define OT_CLI_H
#include "flags.h"
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
int ot_cmd_quantize(int argc, char **argv);  // quantize.c
int ot_cmd_average(int argc, char **argv);   // average.c
int ot_cmd_bleu(int argc, char **argv);      // bleu.c
int ot_cmd_translate(int argc, char **argv); // translate.c
int ot_cmd_launch(int argc, char **argv);    // launch.c
bool cli_is_command(const char *name);       // main.c: `ot <name>` exists
int ot_cmd_classify(int argc, char **argv);  // classify.c
int ot_cmd_export(int argc, char **argv);    // export.c
int ot_cmd_plan(int argc, char **argv);      // plan.c

// Each command's flag table (its synopsis and summary make `ot help`).
extern const cli_command cli_info_command, cli_bench_command, cli_prepare_command, cli_tokenize_command,
    cli_train_command, cli_eval_command, cli_generate_command, cli_serve_command, cli_quantize_command;
extern const cli_command cli_average_command;
extern const cli_command cli_bleu_command;
extern const cli_command cli_translate_command;
extern const cli_command cli_launch_command;
extern const cli_command cli_classify_command;
extern const cli_command cli_export_command;
extern const cli_command cli_plan_command;

// generate.c, shared with serve.c: loads an `ot train` checkpoint (or its run
// directory, or a config.json + model.safetensors directory); ckpt receives the
// resolved directory (OT_PATH_MAX + 64), data_dir the checkpoint's training
// data directory (OT_PATH_MAX, "" if none).
ot_status cli_load_checkpoint(const char *dir, const ot_run_config *r, ot_model **m, char *ckpt,
                              char *data_dir);
// The tokenizer of --tokenizer DIR (or "gpt2" = data/gpt2), else of the first of
// dirs[0, n) holding vocab.json + merges.txt, else data/gpt2; *used names it.
// Prints the error and returns NULL on failure.
bool cli_file_exists(const char *dir, const char *name);   // dir/name is readable
void cli_dir_of(const char *path, char *dir, size_t cap);   // path's directory ('.' for a bare name)
ot_bpe *cli_pick_tokenizer(const char *flag, const char *const *dirs, int n, const char **used);

#endif
