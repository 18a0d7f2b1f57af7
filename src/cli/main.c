// `ot`: the ops-transformer command line. Thin: find the command, which parses its
// flags with the one flag parser (flags.h) and calls the library.
#include "cli.h"
#include "internal.h"

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const cli_command *flags;   // its flag table: synopsis and summary for the usage
} command;
static const command k_commands[] = {
    {"info", ot_cmd_info, &cli_info_command},         {"bench", ot_cmd_bench, &cli_bench_command},
    {"prepare", ot_cmd_prepare, &cli_prepare_command}, {"tokenize", ot_cmd_tokenize, &cli_tokenize_command},
    {"train", ot_cmd_train, &cli_train_command},      {"eval", ot_cmd_eval, &cli_eval_command},
    {"generate", ot_cmd_generate, &cli_generate_command}, {"serve", ot_cmd_serve, &cli_serve_command},
    {"quantize", ot_cmd_quantize, &cli_quantize_command},
    {"average", ot_cmd_average, &cli_average_command},
    {"bleu", ot_cmd_bleu, &cli_bleu_command},
    {"translate", ot_cmd_translate, &cli_translate_command},
    {"launch", ot_cmd_launch, &cli_launch_command},
    {"classify", ot_cmd_classify, &cli_classify_command},
    {"export", ot_cmd_export, &cli_export_command},
    {"plan", ot_cmd_plan, &cli_plan_command},
};
enum { NCOMMANDS = sizeof k_commands / sizeof k_commands[0] };

bool cli_is_command(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(name, k_commands[i].name)) return true;
  return false;
}

// Every command with its synopsis and summary, from the flag tables.
static void usage(FILE *f) {
  fprintf(f, "usage: ot <command> [options]\n\ncommands:\n");
  for (int i = 0; i < NCOMMANDS; i++) {
    const cli_command *c = k_commands[i].flags;
    fprintf(f, "  ot %s%s%s\n", c->name, c->synopsis[0] ? " " : "", c->synopsis);
    for (const char *p = c->summary; *p;) {
      const size_t k = strcspn(p, "\n");
      fprintf(f, "      %.*s\n", (int)k, p);
      p += k + (p[k] == '\n');
    }
  }
  fprintf(f,
          "  ot help\n"
          "      this text; `ot <command> --help` lists a command's options\n"
          "\n"
          "environment: OMP_NUM_THREADS (threads), OT_ISA=portable|avx2|avx512 or\n"
          "OT_FORCE_PORTABLE=1 (kernel path), DNNL_VERBOSE=1 (oneDNN's choices)\n");
}

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return 2; }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(cmd, k_commands[i].name)) return k_commands[i].run(argc - 2, argv + 2);
  const char *near = NULL;
  int best = 3;   // at most two edits away
  for (int i = 0; i < NCOMMANDS; i++) {
    int d = ot__edit_distance(cmd, k_commands[i].name);
    if (d < best) { best = d; near = k_commands[i].name; }
  }
  if (near) fprintf(stderr, "ot: unknown command '%s' (did you mean '%s'?)\n\n", cmd, near);
  else fprintf(stderr, "ot: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
