// `ot average`: the mean of the model weights of the last K checkpoints of a
// run (or of the checkpoints named), written as a weights-only checkpoint
// directory that `ot eval`, `ot generate` and `ot serve` load.
#include "cli.h"

typedef struct {
  const char *run, *out;
  int last;
  cli_list ckpts;
} average_opts;

static const cli_flag k_flags[] = {
    CLI_S("--run", average_opts, run, "DIR", "run directory of `ot train` (its step_NNNNNN checkpoints)"),
    CLI_I("--last", average_opts, last, 1, 64, "K",
          "average its K newest complete checkpoints (by step number)"),
    {"--checkpoint", CLI_LIST, offsetof(average_opts, ckpts), 0, "DIR", 0, 64, NULL, {0},
     "instead of --run/--last: a checkpoint directory to average; repeat it\n"
     "(averaged in the order given, the last one's settings kept)"},
    CLI_S("--out", average_opts, out, "DIR", "the new checkpoint directory (must not exist)"),
};

const cli_command cli_average_command = {
    "average", "(--run DIR --last K | --checkpoint DIR ...) --out DIR",
    "average the weights of the last K checkpoints of a run into a new checkpoint",
    "Writes the element-wise mean of the model weights (f32, summed in double in step order)\n"
    "of several checkpoints of one model into a new checkpoint directory, written atomically.\n"
    "It holds no optimizer state: evaluate, generate, serve or quantize from it, or start a\n"
    "new run from its weights (ot train --init-from); a --resume from it is refused.\n",
    k_flags, sizeof k_flags / sizeof k_flags[0],
    "example: ot average --run out/train --last 5 --out out/train/avg_last5\n", NULL, false};

int ot_cmd_average(int argc, char **argv) {
  average_opts o = {0};
  const int pr = cli_parse(&cli_average_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  if (!o.out) return cli_usage_error(&cli_average_command, "--out is required");
  if (o.ckpts.n > 0 && (o.run || o.last))
    return cli_usage_error(&cli_average_command, "give --run/--last or --checkpoint, not both");
  if (o.ckpts.n == 0 && (!o.run || !o.last))
    return cli_usage_error(&cli_average_command, "--run DIR and --last K are required (or --checkpoint DIR ...)");
  const double t0 = ot_now();
  ot_status s = o.ckpts.n ? ot_ckpt_average_dirs(o.ckpts.v, o.ckpts.n, o.out)
                          : ot_ckpt_average(o.run, o.last, o.out);
  if (s != OT_OK) {
    fprintf(stderr, "ot average: %s\n", ot_last_error());
    return 1;
  }
  char p[OT_PATH_MAX + 64];
  ot_st_file *f = NULL;
  snprintf(p, sizeof p, "%s/model.safetensors", o.out);
  if (ot_st_open(&f, p) == OT_OK) {
    const char *from = ot_st_meta(f, "averaged_from"), *step = ot_st_meta(f, "step");
    size_t n = 0;
    for (int i = 0; i < ot_st_count(f); i++) n += ot_st_get(f, i)->nbytes / sizeof(float);
    printf("ot average: %s (%d tensors, %zu weights, step %s) = mean of %s; %.2f s\n", o.out, ot_st_count(f),
           n, step ? step : "?", from ? from : "?", ot_now() - t0);
    printf("  no optimizer state: evaluate or generate with --model %s, fine-tune with ot train --init-from "
           "%s (a --resume from it is refused)\n", o.out, o.out);
    ot_st_close(f);
  }
  ot_clear_error();
  return 0;
}
