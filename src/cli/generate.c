// `ot generate`: load a Hugging Face directory or an `ot train` checkpoint,
// encode the prompt, and stream sampled tokens to stdout (KV-cache decoding).
#include "generate_batch.h"
#include <math.h>
#include <unistd.h>

typedef struct {
  const char *model_dir, *ckpt_dir, *tok_flag, *prompts_file, *qfile;
  cli_list prompts;
  int max_tokens, threads, batch, group, weights, dt;
  ot_sampler_config sc;
  bool ids, ignore_eos, quiet, kv_bf16, engine;   // engine: a flag of the serving engine given
  float kv_mb;
} gen_opts;

#define ENGINE CLI_MARK(gen_opts, engine)
static const cli_flag k_flags[] = {
    CLI_S("--model", gen_opts, model_dir, "DIR",
          "Hugging Face directory: config.json + model.safetensors (GPT-2, Llama)"),
    CLI_S("--checkpoint", gen_opts, ckpt_dir, "DIR",
          "a checkpoint of `ot train` (step_NNNNNN/), or its run directory\n"
          "(the checkpoint 'latest' names)"),
    {"--quantized", CLI_STR, offsetof(gen_opts, qfile), ENGINE, "FILE", 0, 0, NULL, {0},
     "instead of --model / --checkpoint: a file of `ot quantize` (its\n"
     "weights as stored; tokenizer: --tokenizer, else the file's\n"
     "directory, else data/gpt2)"},
    {"--prompt", CLI_LIST, offsetof(gen_opts, prompts), 0, "TEXT", 0, CLI_LIST_MAX, NULL, {0},
     "text to continue (default: none, start from <|endoftext|>); given\n"
     "several times (at most 64): one sequence each (sequence i: seed + i)"},
    CLI_I("--max-tokens", gen_opts, max_tokens, 1, 1 << 24, "N",
          "new tokens at most (default 64; lowered to fit the model's context)"),
    CLI_F("--temperature", gen_opts, sc.temperature, 0, 1e6, "T", "sampling temperature, 0 = greedy (default 0.8)"),
    CLI_I("--top-k", gen_opts, sc.top_k, 0, INT32_MAX, "K",
          "sample among the K most likely tokens, 0 = all (default 40)"),
    CLI_F("--top-p", gen_opts, sc.top_p, 0, 1, "P",
          "nucleus: the most likely tokens holding P of the probability,\n"
          "1 = all, > 0 (default 0.95)"),
    {"--seed", CLI_U64, offsetof(gen_opts, sc.seed), 0, "S", 0, 0, NULL, {0},
     "RNG seed: the same seed repeats the same text (default 1337)"},
    CLI_S("--tokenizer", gen_opts, tok_flag, "DIR",
          "vocab.json + merges.txt, or gpt2 (= data/gpt2). Default: the model\n"
          "or checkpoint directory's own files, then the checkpoint's data\n"
          "directory, then data/gpt2"),
    CLI_B("--ids", gen_opts, ids,
          "--prompt is token ids (\"15496 11 995\") and tokens print as ids (no\n"
          "tokenizer, e.g. for a Llama directory)"),
    CLI_B("--ignore-eos", gen_opts, ignore_eos, "do not stop at <|endoftext|>"),
    CLI_DTYPE("--dtype", gen_opts, dt, "activation / GEMM dtype of single-prompt generation (default f32)"),
    CLI_I("--threads", gen_opts, threads, 1, 4096, "N", "threads (default: OMP_NUM_THREADS)"),
    CLI_B("--quiet", gen_opts, quiet, "print only the generated tokens (no prompt, no summary)"),
    {"--prompts-file", CLI_STR, offsetof(gen_opts, prompts_file), ENGINE, "FILE", 0, 0, NULL, {0},
     "one prompt per line (with --ids: ids per line)"},
    {"--batch", CLI_INT, offsetof(gen_opts, batch), ENGINE, "N", 1, 4096, NULL, {0},
     "sequences decoded together at most (default 8); the other prompts\n"
     "join as sequences end. With one prompt: N samples of it"},
    CLI_WEIGHTS("--weights", gen_opts, weights, ENGINE, "linear weights quantized at load time (default f32)"),
    CLI_I("--group", gen_opts, group, 0, 4096, "G",
          "int8: input columns per scale, 32/64/128, 0 = per row (default 64)"),
    {"--kv-bf16", CLI_SWITCH, offsetof(gen_opts, kv_bf16), ENGINE, "", 0, 0, NULL, {0},
     "store the KV cache in bf16"},
    {"--kv-mb", CLI_FLOAT, offsetof(gen_opts, kv_mb), ENGINE, "M", 0.001, 1e7, NULL, {0},
     "KV cache budget in MB (default: every sequence at full length);\n"
     "prompts wait while their blocks do not fit"},
};
#undef ENGINE

const cli_command cli_generate_command = {
    "generate", "(--model DIR | --checkpoint DIR | --quantized FILE) [options]",
    "continue a prompt with KV-cache decoding, streaming tokens; several prompts\n"
    "(or --batch N) through the serving engine",
    "Continues a prompt with KV-cache decoding, printing tokens as they come; a last line on\n"
    "stderr gives prefill and decode tokens/s. Several prompts, --prompts-file, --batch,\n"
    "--weights, --kv-bf16, --kv-mb or --quantized: the serving engine (paged KV cache,\n"
    "continuous batching).\n",
    k_flags, sizeof k_flags / sizeof k_flags[0], NULL, NULL, false};

bool cli_file_exists(const char *dir, const char *name) {
  char p[OT_PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, R_OK) == 0;
}

void cli_dir_of(const char *path, char *dir, size_t cap) {
  snprintf(dir, cap, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0; else snprintf(dir, cap, ".");
}

// Loads an `ot train` checkpoint (its stored keys give the model shape), or any
// directory with config.json + model.safetensors; the weights are checked
// (checksums, finite values) on the way. *data_dir: the training data
// directory recorded in the checkpoint ("" if none). Shared with `ot serve`.
ot_status cli_load_checkpoint(const char *dir, const ot_run_config *r, ot_model **m, char *ckpt,
                              char *data_dir) {
  OT_TRY(ot_ckpt_resolve(dir, ckpt, OT_PATH_MAX + 64));
  ot_train_config *tc = calloc(1, sizeof *tc);
  ot_status s = tc ? OT_OK : ot_error(OT_ENOMEM, "out of memory");
  data_dir[0] = 0;
  if (s == OT_OK) s = ot_ckpt_train_config(ckpt, tc);   // keys, or config.json; translate: ids
  if (s == OT_OK && ot_ckpt_has_settings(ckpt)) snprintf(data_dir, OT_PATH_MAX, "%s", tc->data);
  ot_run_config run = *r;
  if (tc && tc->model.arch == OT_ARCH_ENCDEC && run.S == 0) run.S = run.T;   // as ot_model_load_hf
  if (s == OT_OK) s = ot_model_create(m, &tc->model, &run);
  if (s == OT_OK) {
    ot_st_file *f = NULL;
    s = ot_ckpt_open_weights(ckpt, &f);
    if (s == OT_OK) s = ot_model_import(*m, f, NULL, true);
    ot_st_close(f);
    if (s != OT_OK) { ot_model_free(*m); *m = NULL; }
  }
  free(tc);
  return s;
}

static ot_bpe *load_bpe(const char *dir) {
  char vj[OT_PATH_MAX + 32], mt[OT_PATH_MAX + 32];
  snprintf(vj, sizeof vj, "%s/vocab.json", dir);
  snprintf(mt, sizeof mt, "%s/merges.txt", dir);
  ot_bpe *t = NULL;
  if (ot_bpe_load(&t, vj, mt) != OT_OK) {
    fprintf(stderr, "ot: tokenizer: %s\n", ot_last_error());
    return NULL;
  }
  return t;
}

// --tokenizer, else the first of dirs[] holding vocab.json + merges.txt, else data/gpt2.
ot_bpe *cli_pick_tokenizer(const char *flag, const char *const *dirs, int n, const char **used) {
  const char *dir = flag && !strcmp(flag, "gpt2") ? "data/gpt2" : flag;
  for (int i = 0; !dir && i < n; i++)
    if (dirs[i] && dirs[i][0] && cli_file_exists(dirs[i], "vocab.json") && cli_file_exists(dirs[i], "merges.txt"))
      dir = dirs[i];
  if (!dir) dir = "data/gpt2";
  *used = dir;
  return load_bpe(dir);
}

typedef struct { const ot_bpe *t; bool ids; int n; } stream_ctx;

static bool print_token(void *p, int32_t tok) {
  stream_ctx *c = p;
  size_t len = 0;
  const char *s = c->ids ? NULL : ot_bpe_token(c->t, tok, &len);
  if (s) fwrite(s, 1, len, stdout);
  else printf(c->ids ? "%s%d" : "%s<%d>", c->n || !c->ids ? " " : "", tok);
  fflush(stdout);
  c->n++;
  return true;
}

int ot_cmd_generate(int argc, char **argv) {
  gen_opts o = {.max_tokens = 64, .group = 64, .weights = OT_F32, .dt = OT_F32,
                .sc = ot_sampler_config_default()};
  const int pr = cli_parse(&cli_generate_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  if (!(o.sc.top_p > 0)) { fprintf(stderr, "ot generate: --top-p must be > 0 (1 = off)\n"); return 2; }
  const char *model_dir = o.model_dir, *ckpt_dir = o.ckpt_dir, *tok_flag = o.tok_flag, *qfile = o.qfile;
  const char *prompt = o.prompts.n ? o.prompts.v[o.prompts.n - 1] : "";
  int max_tokens = o.max_tokens;
  const ot_sampler_config sc = o.sc;
  const bool ids_mode = o.ids, ignore_eos = o.ignore_eos, quiet = o.quiet;
  const ot_dtype dt = (ot_dtype)o.dt;
  ot_qmodel *qm = NULL;
  bool engine_mode = o.engine;
  if ((model_dir != NULL) + (ckpt_dir != NULL) + (qfile != NULL) != 1)
    return cli_usage_error(&cli_generate_command, "give one of --model DIR (Hugging Face), --checkpoint DIR or "
                           "--quantized FILE");
  if (o.threads > 0) ot_threads_set(o.threads);
  if (o.prompts.n > 1) engine_mode = true;
  if (engine_mode && dt != OT_F32) {
    fprintf(stderr, "ot generate: --dtype applies to single-prompt generation; the engine's activations "
            "are f32 (choose the weights with --weights)\n");
    return 2;
  }

  // model: B = T = 1 for its own buffers; the KV cache holds the sequence
  ot_run_config run = {1, 1, dt, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  char ckpt[OT_PATH_MAX + 64] = "", data_dir[OT_PATH_MAX] = "";
  double t0 = ot_now();
  ot_status s = qfile ? ot_quant_file_load(&qm, qfile)
                : model_dir ? ot_model_load_hf(&m, model_dir, &run)
                            : cli_load_checkpoint(ckpt_dir, &run, &m, ckpt, data_dir);
  if (s != OT_OK) { fprintf(stderr, "ot generate: %s\n", ot_last_error()); return 1; }
  if (qfile) cli_dir_of(qfile, ckpt, sizeof ckpt);   // tokenizer files next to it
  const ot_model_config *mc = qm ? &qm->config : ot_model_config_of(m);
  const double load_s = ot_now() - t0;

  // tokenizer and prompt
  int rc = 1;
  ot_bpe *t = NULL;
  ot_kvcache *kv = NULL;
  ot_sampler *smp = NULL;
  int32_t *ids = NULL, eot = -1;
  int n_prompt = 0;
  const char *tok_dir = "(none)";
  const size_t plen = strlen(prompt);
  if (engine_mode) {   // several prompts / quantized weights: the serving engine
    if (!ids_mode) {
      const char *dirs[3] = {model_dir ? model_dir : ckpt, ckpt_dir, data_dir};
      if (!(t = cli_pick_tokenizer(tok_flag, dirs, 3, &tok_dir))) goto out;
      if (ot_bpe_vocab_size(t) > mc->vocab) {
        fprintf(stderr, "ot generate: the tokenizer in %s has %d tokens but the model only %d\n",
                tok_dir, ot_bpe_vocab_size(t), mc->vocab);
        goto out;
      }
      eot = ot_bpe_eot(t);
    }
    if (o.prompts.n == 0 && !o.prompts_file) o.prompts.v[o.prompts.n++] = "";
    if (qm && (o.weights != OT_F32 || o.group != 64))
      fprintf(stderr, "ot generate: --weights / --group are ignored with --quantized (the file holds %s "
              "weights)\n", ot_qw_kind_name(qm->kind));
    cli_batch_args ba = {m, qm, t, ids_mode, o.prompts.v, o.prompts.n, o.prompts_file, o.batch,
                         (ot_dtype)o.weights, o.group, o.kv_bf16 ? OT_BF16 : OT_F32, o.kv_mb,
                         max_tokens, sc, ignore_eos ? -1 : eot, quiet};
    if (!quiet)
      fprintf(stderr, "model %s (%s): %.1fM parameters, context %d, loaded in %.2f s; tokenizer %s\n",
              qfile ? qfile : model_dir ? model_dir : ckpt, mc->name, ot_model_n_params(mc) / 1e6,
              mc->max_seq, load_s, ids_mode ? "(ids)" : tok_dir);
    qm = NULL;   // cli_generate_batch takes it over
    rc = cli_generate_batch(&ba);
    goto out;
  }
  ids = malloc(sizeof(int32_t) * (plen + 2));
  if (!ids) { fprintf(stderr, "ot generate: out of memory\n"); goto out; }
  if (ids_mode) {
    if (!cli_parse_ids(prompt, mc->vocab, ids, (int)plen + 1, &n_prompt)) goto out;
    if (n_prompt == 0) { fprintf(stderr, "ot generate: --ids needs --prompt with at least one token id\n"); goto out; }
  } else {
    const char *dirs[3] = {model_dir ? model_dir : ckpt, ckpt_dir, data_dir};
    if (!(t = cli_pick_tokenizer(tok_flag, dirs, 3, &tok_dir))) goto out;
    if (ot_bpe_vocab_size(t) > mc->vocab) {
      fprintf(stderr, "ot generate: the tokenizer in %s has %d tokens but the model only %d: not its "
              "tokenizer (give --tokenizer DIR, or --ids)\n", tok_dir, ot_bpe_vocab_size(t), mc->vocab);
      goto out;
    }
    eot = ot_bpe_eot(t);
    size_t n = 0;
    if (ot_bpe_encode(t, prompt, plen, true, ids, plen + 1, &n) != OT_OK) {
      fprintf(stderr, "ot generate: %s\n", ot_last_error());
      goto out;
    }
    n_prompt = (int)n;
    if (n_prompt == 0) {
      if (eot < 0) { fprintf(stderr, "ot generate: empty prompt and no <|endoftext|> to start from\n"); goto out; }
      ids[n_prompt++] = eot;
    }
  }
  if (n_prompt > mc->max_seq) {
    fprintf(stderr, "ot generate: the prompt has %d tokens, more than the model's context of %d\n",
            n_prompt, mc->max_seq);
    goto out;
  }
  if (n_prompt + max_tokens - 1 > mc->max_seq) {
    const int fit = mc->max_seq - n_prompt + 1;
    if (!quiet)
      fprintf(stderr, "ot generate: --max-tokens %d lowered to %d (prompt %d tokens, context %d)\n",
              max_tokens, fit, n_prompt, mc->max_seq);
    max_tokens = fit;
  }

  // cache sized to this prompt and limit, sampler
  ot_kv_config kc = {1, n_prompt + max_tokens - 1, 0, false};
  if (ot_kv_create(&kv, m, &kc) != OT_OK || ot_sampler_create(&smp, &sc, mc->vocab) != OT_OK) {
    fprintf(stderr, "ot generate: %s\n", ot_last_error());
    goto out;
  }
  if (!quiet) {
    fprintf(stderr, "model %s (%s): %.1fM parameters, %d layers, context %d, %s, loaded in %.2f s\n",
            model_dir ? model_dir : ckpt, mc->name, ot_model_n_params(mc) / 1e6, mc->n_layers,
            mc->max_seq, ot_dtype_name(dt), load_s);
    fprintf(stderr, "tokenizer %s; KV cache %.2f MB for %d tokens; temperature %g, top-k %d, "
            "top-p %g, seed %llu, %d threads\n", ids_mode ? "(ids)" : tok_dir,
            ot_kv_cache_bytes(kv) / 1e6, ot_kv_capacity(kv), sc.temperature, sc.top_k, sc.top_p,
            (unsigned long long)sc.seed, ot_threads_get());
    if (!ids_mode) fwrite(prompt, 1, plen, stdout);
    else for (int i = 0; i < n_prompt; i++) printf(i ? " %d" : "%d", ids[i]);
    fflush(stdout);
  }
  stream_ctx sctx = {t, ids_mode, quiet ? 0 : n_prompt};
  ot_gen_config gc = {max_tokens, ignore_eos ? -1 : eot};
  ot_gen_stats st;
  if (ot_generate(kv, smp, ids, n_prompt, &gc, NULL, print_token, &sctx, &st) != OT_OK) {
    printf("\n");
    fprintf(stderr, "ot generate: %s\n", ot_last_error());
    goto out;
  }
  printf("\n");
  fflush(stdout);
  if (!quiet)
    fprintf(stderr, "prefill %d tokens in %.3f s (%.1f tokens/s); decode %d tokens in %.3f s "
            "(%.2f tokens/s); %d new tokens, ended on %s\n", st.prompt_tokens, st.prefill_s,
            st.prompt_tokens / (st.prefill_s > 0 ? st.prefill_s : 1e-9), st.decode_steps, st.decode_s,
            st.decode_steps / (st.decode_s > 0 ? st.decode_s : 1e-9), st.new_tokens,
            st.stopped ? "<|endoftext|>" : "the token limit");
  rc = 0;
out:
  ot_qmodel_free(qm);
  free(ids);
  ot_sampler_free(smp);
  ot_kv_free(kv);
  ot_bpe_free(t);
  ot_model_free(m);
  return rc;
}
