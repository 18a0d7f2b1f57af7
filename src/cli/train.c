// `ot train`: flags and config files -> ot_train_config (resolved once) -> ot__train_run_resolved.
// `ot eval`: held-out loss of a checkpoint (ours, or a Hugging Face directory).
// Thin: the key vocabulary, aliases, validation and the loop live in the
// library (include/ot/train.h).
#include "cli.h"
#include "ot/dist.h"
#include "train/train_impl.h"   // ot__train_run_hooks
#include "cli_train_bleu.h"
#include <glob.h>
#include <math.h>

#define K_CORPUS "data/shakespeare.txt"
static const char k_corpus[] = K_CORPUS;

// Options of train / eval besides the keys of the training key table.
typedef struct {
  const char *config, *checkpoint;
  int split;   // 0: val, 1: train
} train_opts;

// `ot train --help` after the table: --resume, every key of the training key table, examples.
static void train_more_help(FILE *f) {
  fprintf(f,
          "  --resume DIR         continue a run bit-exactly from a checkpoint (or from DIR/latest; without\n"
          "                       a usable one, DIR's newest complete checkpoint); its settings are the\n"
          "                       base, flags and --config override them (log and plot follow --out)\n"
          "  --init-from DIR      a new run from the weights of a checkpoint (or DIR/latest, or a Hugging\n"
          "                       Face directory): its model is the base, step 0, a fresh optimizer\n"
          "Keys (flags and config files; '-' and '_' are the same; Megatron / MindSpore / nanoGPT /\n"
          "Hugging Face names are accepted as aliases and reported with ours):\n");
  ot_train_config_help(f);
  fprintf(f,
          "\nexamples:\n"
          "  ot train                                   # small model, bundled corpus, 300 steps\n"
          "  ot train --steps 50 --eval-every 10 --profile out/trace.json\n"
          "  ot train --micro_batch_size 4 --global_batch_size 16 --lr 6e-4 --dtype bf16\n"          "  mpirun -np 4 ot train --data_parallel 2 --model_parallel 2 --optimizer_shard true\n"
          "  ot train --resume out/train --steps 600    # continue (and extend) the run\n"
          "  ot train --init-from out/train --qat --steps 100 --lr 6e-5 --lr-decay constant --out out/qat\n"
          "                                             # quantization-aware fine-tune of a trained model\n"
          "  ot train --task translate --steps 200      # transformer-small on data/translate (En-Fr)\n"
          "  ot train --task translate --model transformer-base --max-tokens 4096 --update-freq 2\n");
}

static const cli_flag k_train_flags[] = {
    CLI_S("--config", train_opts, config, "FILE",
          "settings file: 'key = value' lines (# comments) or a flat JSON object\n"
          "(MindSpore's \"parallel_config\": {...} block of keys may sit inside);\n"
          "flags given on the command line override it"),
};

const cli_command cli_train_command = {
    "train", "[--config FILE] [--KEY VALUE | --KEY=VALUE | --FLAG | --no-FLAG ...]",
    "train a model (default: the small preset on the bundled corpus) with\n"
    "live progress, held-out eval, checkpoints, log and loss-curve SVG",
    "Trains a decoder model on token shards made by `ot prepare` (the defaults train the \"small\"\n"
    "preset on the bundled corpus, preparing out/data from " K_CORPUS " first when it is missing),\n"
    "with one progress line per step, held-out evaluation, checkpoints, a JSONL log and a\n"
    "loss-curve SVG in --out.\n",
    k_train_flags, sizeof k_train_flags / sizeof k_train_flags[0], NULL, train_more_help, true};

static bool has_shards(const char *data, const char *split) {
  char pat[OT_PATH_MAX + 32];
  snprintf(pat, sizeof pat, "%s/%s_*.bin", data, split);
  glob_t g;
  bool any = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0;
  globfree(&g);
  return any;
}

// The default data directory is made from the bundled corpus when missing.
static int ensure_data(const ot_train_config *c) {
  if (c->task == OT_TASK_TRANSLATE) {   // the joint tokenizer of the bundled bitext
    char vj[OT_PATH_MAX + 16], vs[16];
    snprintf(vj, sizeof vj, "%s/vocab.json", c->data);
    FILE *f = fopen(vj, "rb");
    if (f) { fclose(f); return 0; }
    if (strcmp(c->data, "out/translate-data") != 0 || c->eval_only) return 0;   // the trainer names it
    snprintf(vs, sizeof vs, "%d", c->model.vocab);
    printf("no tokenizer in %s: making it (ot prepare --task translate --src %s --tgt %s --vocab-size %s "
           "--out %s)\n", c->data, c->src_data, c->tgt_data, vs, c->data);
    fflush(stdout);
    char *args[] = {"--task", "translate", "--src", (char *)c->src_data, "--tgt", (char *)c->tgt_data,
                    "--vocab-size", vs, "--out", (char *)c->data, "--quiet"};
    return ot_cmd_prepare(11, args);
  }
  if (c->train_data[0] || !c->data[0] || has_shards(c->data, "train")) return 0;
  if (strcmp(c->data, "out/data") != 0) return 0;   // the trainer names the missing shards
  FILE *f = fopen(k_corpus, "rb");
  if (!f) return 0;
  fclose(f);
  printf("no token shards in %s: preparing them from %s (ot prepare --corpus %s --out %s)\n", c->data, k_corpus,
         k_corpus, c->data);
  fflush(stdout);
  char *args[] = {"--corpus", (char *)k_corpus, "--out", (char *)c->data, "--quiet"};
  return ot_cmd_prepare(5, args);
}

// Model vocabulary from <data>/info.json unless the settings give one.
static void vocab_from_data(ot_train_config *c, const ot_settings *user) {
  if (c->task == OT_TASK_TRANSLATE) return;   // the trainer takes the tokenizer's
  if (ot_settings_has(user, "vocab-size") || !c->data[0] || c->train_data[0]) return;
  int v = 0;
  if (ot_train_data_vocab(c->data, &v) != OT_OK) { ot_clear_error(); return; }
  if (v != c->model.vocab) {
    printf("vocab-size %d from %s/info.json (the preset has %d)\n", v, c->data, c->model.vocab);
    c->model.vocab = v;
  }
}

// --init-from DIR: the model (shape keys, task) of the checkpoint DIR names, ours or a Hugging
// Face directory, is the base of the new run; the flags override it (the weights must fit).
static ot_status init_model(ot_train_config *c, const char *dir) {
  char from[OT_PATH_MAX + 64], note[2 * OT_PATH_MAX + 256];
  ot_train_config *ic = malloc(sizeof *ic);
  if (!ic) return ot_error(OT_ENOMEM, "--init-from: out of memory");
  ot_status s = ot_ckpt_find(dir, from, sizeof from, note, sizeof note);   // its note comes with the load
  if (s == OT_OK) s = ot_ckpt_train_config(from, ic);
  ot_model_config base;   // its checkpoints store the model by name + shape keys: the name must read back
  if (s == OT_OK && ot_model_config_preset(&base, ic->model.name) != OT_OK)
    s = ot_error(OT_EUNSUPPORTED, "a %s model cannot start a new run yet: its settings are not all training "
                 "keys, so its checkpoints could not be read back (GPT-2 and Llama directories can)",
                 ic->model.name);
  if (s == OT_OK) {
    c->model = ic->model;
    c->task = ic->task;
  }
  free(ic);
  if (s == OT_OK) return OT_OK;
  char why[1024];
  snprintf(why, sizeof why, "%s", ot_last_error());
  return ot_error(s, "--init-from %s: %s", dir, why);
}

static int fail(const char *cmd) {
  if (ot_dist_world_size() > 1)
    fprintf(stderr, "ot %s: rank %d: %s\n", cmd, ot_dist_world_rank(), ot_last_error());
  else
    fprintf(stderr, "ot %s: %s\n", cmd, ot_last_error());
  return 1;
}

// Under mpirun the configuration is the same on every rank: rank 0 reports its errors.
static bool speaks(void) { return ot_dist_world_rank() == 0; }

// Settings of the command: the config file first, then the flags.
static int collect(ot_settings *user, const ot_settings *flags, const char *config, const char *cmd) {
  if (config && ot_settings_read_file(user, config) != OT_OK) {
    fprintf(stderr, "ot %s: %s\n", cmd, ot_last_error());
    return 2;
  }
  for (int i = 0; i < flags->n; i++)
    if (ot_settings_add(user, flags->item[i].key, flags->item[i].val, flags->item[i].origin) != OT_OK) {
      fprintf(stderr, "ot %s: %s\n", cmd, ot_last_error());
      return 2;
    }
  return 0;
}

int ot_cmd_train(int argc, char **argv) {
  ot_settings *flags = calloc(1, sizeof *flags), *user = calloc(1, sizeof *user),
              *ck = calloc(1, sizeof *ck);
  train_opts o = {0};
  int rc = flags && user && ck ? 0 : 1;
  if (!rc && ot_dist_init(&argc, &argv) != OT_OK) rc = fail("train");
  if (!rc) rc = cli_parse(&cli_train_command, argc, argv, &o, flags);
  if (rc == CLI_HELP) { rc = 0; goto out; }
  if (!rc) rc = collect(user, flags, o.config, "train");
  ot_train_config c;
  ot_train_config_default(&c);
  char from[OT_PATH_MAX + 64] = "", note[2 * OT_PATH_MAX + 256] = "";
  if (!rc) {
    // the checkpoint's settings are the base of a resumed run
    ot_train_config probe;
    ot_train_config_default(&probe);
    if (ot_train_config_apply(&probe, user, NULL) != OT_OK) {
      rc = 2;
      if (speaks()) fprintf(stderr, "ot train: %s\n", ot_last_error());
    }
    else if (probe.resume[0] && (ot_ckpt_find(probe.resume, from, sizeof from, note, sizeof note) != OT_OK ||
                                 ot_ckpt_read_config(from, ck) != OT_OK ||
                                 ot_train_config_apply(&c, ck, NULL) != OT_OK)) rc = fail("train");
    else if (!probe.resume[0] && probe.init_from[0] && init_model(&c, probe.init_from) != OT_OK) rc = fail("train");
    if (note[0] && speaks()) printf("note: %s\n", note);
  }
  if (!rc && ot_train_config_apply(&c, user, speaks() ? stderr : NULL) != OT_OK) {
    rc = 2;
    if (speaks()) fprintf(stderr, "ot train: %s\n", ot_last_error());
  }
  if (!rc && from[0]) snprintf(c.resume, sizeof c.resume, "%s", from);   // found once, noted once
  // one rank prepares missing data; the others wait for it (and learn whether it worked)
  if (!rc && speaks()) rc = ensure_data(&c);
  if (ot_dist_world_size() > 1) {
    int bad = rc != 0, any = bad;
    ot_dist_allreduce_max_int(&any);
    if (any && !bad) rc = 2;
  }
  if (!rc && !c.resume[0] && !c.init_from[0]) vocab_from_data(&c, user);
  // resolved once, here: the run takes the resolved config as it is
  if (!rc && ot_train_config_resolve(&c) != OT_OK) {
    rc = 2;
    if (speaks()) fprintf(stderr, "ot train: %s\n", ot_last_error());
  }
  // translate runs print BLEU at each evaluation: greedy decoding through the translator
  cli_train_bleu bleu;
  const ot_train_hooks hooks = cli_train_bleu_hooks(&bleu);
  if (!rc && ot__train_run_hooks(&c, c.task == OT_TASK_TRANSLATE ? &hooks : NULL, stdout, NULL, NULL) != OT_OK)
    rc = fail("train");
  cli_train_bleu_free(&bleu);
out:
  free(flags);
  free(user);
  free(ck);
  ot_dist_finalize();
  return rc;
}

// ---------------------------------------------------------------- eval -----
static const cli_flag k_eval_flags[] = {
    CLI_S("--checkpoint", train_opts, checkpoint, "DIR", "the checkpoint (or give DIR first, without the flag)"),
    {"--split", CLI_ENUM, offsetof(train_opts, split), 0, NULL, 0, 0, "val|train", {0, 1},
     "which shards of --data to score (default val)"},
};

const cli_command cli_eval_command = {
    "eval", "[--checkpoint] DIR [--split val|train] [--KEY VALUE ...]",
    "held-out loss of a checkpoint (ours or a Hugging Face directory)",
    "Mean loss (and perplexity) of a checkpoint on the held-out split. DIR is a checkpoint\n"
    "directory (model.safetensors), a run directory (its 'latest' checkpoint) or a Hugging Face\n"
    "directory (config.json + model.safetensors). The checkpoint's settings (data, seq-len,\n"
    "batch-size, eval-batches) are the defaults; training keys given here override them, e.g.\n"
    "  --data DIR  --val-data GLOB  --seq-len N  --batch-size N  --eval-batches N (all of the\n"
    "  split with a large N)  --dtype f32|bf16  --threads N\n",
    k_eval_flags, sizeof k_eval_flags / sizeof k_eval_flags[0], NULL, NULL, true};

int ot_cmd_eval(int argc, char **argv) {
  ot_settings *flags = calloc(1, sizeof *flags), *user = calloc(1, sizeof *user),
              *ck = calloc(1, sizeof *ck);
  train_opts o = {0};
  int rc = flags && user && ck ? 0 : 1;
  // a leading positional DIR is the checkpoint
  if (!rc && argc > 0 && strncmp(argv[0], "--", 2) && strcmp(argv[0], "-h")) {
    o.checkpoint = argv[0];
    argc--;
    argv++;
  }
  if (!rc) rc = cli_parse(&cli_eval_command, argc, argv, &o, flags);
  if (rc == CLI_HELP) { rc = 0; goto out; }
  if (!rc && !o.checkpoint)
    rc = cli_usage_error(&cli_eval_command, "which checkpoint? (ot eval out/train, or --checkpoint DIR)");
  const char *split = o.split ? "train" : "val";
  if (!rc) rc = collect(user, flags, NULL, "eval");
  ot_train_config c;
  ot_train_config_default(&c);
  char dir[OT_PATH_MAX + 64] = "", path[OT_PATH_MAX + 96];
  if (!rc && ot_ckpt_resolve(o.checkpoint, dir, sizeof dir) != OT_OK) rc = fail("eval");
  if (!rc) {
    if (ot_ckpt_has_settings(dir)) {   // ours: the settings are in model.safetensors (older: optimizer state)
      if (ot_ckpt_read_config(dir, ck) != OT_OK || ot_train_config_apply(&c, ck, NULL) != OT_OK) rc = fail("eval");
    } else {
      snprintf(path, sizeof path, "%s/config.json", dir);
      if (ot_model_config_from_hf(&c.model, path) != OT_OK) rc = fail("eval");
      else if (c.seq_len > c.model.max_seq) c.seq_len = c.model.max_seq;
    }
  }
  if (!rc && ot_train_config_apply(&c, user, stderr) != OT_OK) { rc = 2; fprintf(stderr, "ot eval: %s\n", ot_last_error()); }
  c.eval_only = true;
  c.resume[0] = 0;
  if (!rc) rc = ensure_data(&c);
  if (!rc && !strcmp(split, "train") && c.task == OT_TASK_TRANSLATE) {
    snprintf(c.valid_src, sizeof c.valid_src, "%s", c.src_data);
    snprintf(c.valid_tgt, sizeof c.valid_tgt, "%s", c.tgt_data);
  } else if (!rc && !strcmp(split, "train") && c.task == OT_TASK_CLASSIFY) {
    snprintf(c.val_images, sizeof c.val_images, "%s", c.train_images);
  } else if (!rc && !strcmp(split, "train")) {
    if (c.train_data[0]) snprintf(c.val_data, sizeof c.val_data, "%s", c.train_data);
    else snprintf(c.val_data, sizeof c.val_data, "%.1000s/train_*.bin", c.data);
  }
  ot_trainer *t = NULL;
  if (!rc && ot_trainer_create(&t, &c) != OT_OK) rc = fail("eval");
  if (!rc && ot_trainer_load(t, dir, true) != OT_OK) rc = fail("eval");
  if (!rc) {
    const ot_train_config *r = ot_trainer_config(t);
    double loss = 0, t0 = ot_now();
    int64_t ntok = 0;
    double nll = NAN;
    if (ot_trainer_eval_nll(t, r->eval_batches, &loss, &nll, &ntok) != OT_OK) rc = fail("eval");
    else if (!isfinite(loss)) {
      fprintf(stderr, "ot eval: %s: the loss is not finite (%g) over %lld tokens, although every weight "
              "is finite\n", dir, loss, (long long)ntok);
      rc = 1;
    } else if (r->task == OT_TASK_CLASSIFY) {
      printf("%s: %s loss %.4f, top-1 %.2f%% over %lld images of %s (%s), %.1f s\n", dir,
             strcmp(split, "train") ? "held-out" : "training", loss, 100 * ot_trainer_accuracy(t),
             (long long)ntok, r->val_images, ot_dtype_name(r->dtype), ot_now() - t0);
    } else if (r->task == OT_TASK_TRANSLATE) {
      printf("%s: held-out loss %.4f (label-smoothed %g), nll %.4f (perplexity %.2f) over %lld target tokens "
             "of %s / %s (%s), %.1f s\n", dir, loss, r->label_smoothing, nll, exp(nll), (long long)ntok,
             r->valid_src, r->valid_tgt, ot_dtype_name(r->dtype), ot_now() - t0);
    } else {
      const char *what = c.val_data[0] ? c.val_data : "val_*.bin";
      printf("%s: %s loss %.4f (perplexity %.2f) over %lld tokens of %s%s%s (seq-len %d, %s), %.1f s\n", dir,
             strcmp(split, "train") ? "held-out" : "training", loss, exp(loss), (long long)ntok,
             c.val_data[0] ? "" : c.data, c.val_data[0] ? "" : "/", what, r->seq_len, ot_dtype_name(r->dtype),
             ot_now() - t0);
    }
  }
  ot_trainer_free(t);
out:
  free(flags);
  free(user);
  free(ck);
  return rc;
}
