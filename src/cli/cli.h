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

// Parses a positive integer flag value; prints an error naming the flag on failure.
bool cli_parse_int(const char *flag, const char *val, int lo, int hi, int *out);
#endif
