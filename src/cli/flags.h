// The one flag parser of the `ot` command. Each command declares a static
// table of its flags (name, kind, destination in its options struct, range or
// choices, help); cli_parse reads argv against it and the help text is printed
// from the same table, so the parser and the help cannot drift apart.
#ifndef OT_CLI_FLAGS_H
#define OT_CLI_FLAGS_H
#include "ot/ot.h"
#include <stddef.h>
#include <stdio.h>

typedef enum {
  CLI_STR,     // --flag VALUE -> const char *
  CLI_LIST,    // --flag VALUE, repeatable -> cli_list (at most hi values)
  CLI_INT,     // integer in [lo, hi] -> int
  CLI_FLOAT,   // number in [lo, hi] -> float
  CLI_DOUBLE,  // number in [lo, hi] -> double
  CLI_U64,     // unsigned integer (decimal, 0x hex, 0 octal) -> uint64_t
  CLI_ENUM,    // one of choices "a|b|c" -> int: values[index]
  CLI_SWITCH,  // no value -> bool true
} cli_kind;

#define CLI_LIST_MAX 64
typedef struct { const char *v[CLI_LIST_MAX]; int n; } cli_list;

typedef struct {
  const char *name;     // "--max-tokens"
  cli_kind kind;
  size_t off;           // offset of the destination in the command's options struct
  size_t mark;          // offset + 1 of a bool set when the flag is given (0: none)
  const char *arg;      // the value in the help ("N", "DIR"; CLI_ENUM: the choices)
  double lo, hi;        // CLI_INT / CLI_FLOAT / CLI_DOUBLE range; CLI_LIST: most values
  const char *choices;  // CLI_ENUM: "f32|bf16|int8"
  int values[4];        // CLI_ENUM: what each choice stores
  const char *help;     // the help text; '\n' starts an indented continuation line
} cli_flag;

// Table rows: T is the options struct, f its field.
#define CLI_S(n, T, f, a, h) {n, CLI_STR, offsetof(T, f), 0, a, 0, 0, NULL, {0}, h}
#define CLI_I(n, T, f, lo, hi, a, h) {n, CLI_INT, offsetof(T, f), 0, a, lo, hi, NULL, {0}, h}
#define CLI_F(n, T, f, lo, hi, a, h) {n, CLI_FLOAT, offsetof(T, f), 0, a, lo, hi, NULL, {0}, h}
#define CLI_B(n, T, f, h) {n, CLI_SWITCH, offsetof(T, f), 0, "", 0, 0, NULL, {0}, h}
#define CLI_MARK(T, f) (offsetof(T, f) + 1)
// CLI_ENUM of the inference dtypes: f32 | bf16 | int8 -> OT_F32 | OT_BF16 | OT_I8.
#define CLI_WEIGHTS(n, T, f, mark, h) \
  {n, CLI_ENUM, offsetof(T, f), mark, NULL, 0, 0, "f32|bf16|int8", {OT_F32, OT_BF16, OT_I8}, h}
// CLI_ENUM of the activation dtypes: f32 | bf16 -> OT_F32 | OT_BF16.
#define CLI_DTYPE(n, T, f, h) \
  {n, CLI_ENUM, offsetof(T, f), 0, NULL, 0, 0, "f32|bf16", {OT_F32, OT_BF16}, h}

typedef struct {
  const char *name;       // "generate", "bench ops"
  const char *synopsis;   // after "usage: ot <name> " (and in `ot help`)
  const char *summary;    // `ot help`: what the command does (lines after the synopsis)
  const char *about;      // --help: text between the usage line and the flags (NULL: none)
  const cli_flag *flags;
  int n_flags;
  const char *epilog;     // --help: text after the flags (NULL: none)
  void (*more_help)(FILE *f);   // --help: printed after the epilog (NULL: none)
  bool keys;              // other --KEY [VALUE] are keys of the training key table
} cli_command;

enum { CLI_OK = 0, CLI_HELP = -1, CLI_ERR = 2 };

// Parses argv[0, argc) (the command's own arguments) into opts, the command's
// options struct that the table's offsets point into. Accepts --flag VALUE and
// --flag=VALUE. With c->keys, other --KEY VALUE, --KEY=VALUE, --FLAG and
// --no-FLAG (boolean keys) go to *keys (origin "command line"); else they are
// refused with the nearest flag. Returns CLI_OK; CLI_HELP after printing the
// help on stdout (--help, -h); CLI_ERR after printing a message naming the flag
// and the fix on stderr (the exit status).
int cli_parse(const cli_command *c, int argc, char **argv, void *opts, ot_settings *keys);
// The help of a command from its table: usage, about, every flag, epilog.
void cli_help(const cli_command *c, FILE *f);
// Prints "ot <cmd>: <message>" and then the help on stderr; returns CLI_ERR.
int cli_usage_error(const cli_command *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
