// `ot serve`: load a model (and its tokenizer) as `ot generate` does and serve
// an OpenAI-compatible completions API over HTTP until SIGINT / SIGTERM; an
// encoder-decoder model (as `ot translate` loads it) is served on
// POST /v1/translations instead.
#include "translate.h"
#include "ot/serve.h"
#include <pthread.h>
#include <signal.h>

typedef struct {
  const char *model_dir, *ckpt_dir, *tok_flag, *model_id;
  ot_server_config cfg;
  int threads, max_body, max_header, timeout_s, head_timeout_s, keepalive_s, max_conns, weights, dt;
  bool quiet, per_request, kv_bf16, no_gen_config;
  float kv_mb;
} serve_opts;

static const cli_flag k_flags[] = {
    CLI_S("--model", serve_opts, model_dir, "DIR",
          "Hugging Face directory: config.json + model.safetensors (GPT-2, Llama,\n"
          "MarianMT: served for translation), or without config.json an `ot train`\n"
          "checkpoint"),
    CLI_S("--checkpoint", serve_opts, ckpt_dir, "DIR", "a checkpoint of `ot train` (step_NNNNNN/), or its run directory"),
    CLI_S("--tokenizer", serve_opts, tok_flag, "DIR",
          "vocab.json + merges.txt, gpt2 (= data/gpt2), or none (prompts must\n"
          "be token ids). Default: as `ot generate`; a translation model needs\n"
          "its own (default: the model directory)"),
    CLI_S("--host", serve_opts, cfg.host, "ADDR", "numeric address to listen on (default 127.0.0.1: this machine only)"),
    CLI_I("--port", serve_opts, cfg.port, 0, 65535, "N", "port (default 8080; 0: any free port, printed)"),
    CLI_S("--model-id", serve_opts, model_id, "NAME", "the model's name in responses (default: the directory's name)"),
    CLI_I("--max-clients", serve_opts, cfg.max_clients, 1, 65536, "N",
          "requests answered at once, a worker thread each; a request beyond\n"
          "them waits up to 0.5 s, then gets 429 with Retry-After (default 16)"),
    CLI_I("--max-connections", serve_opts, max_conns, 1, 1 << 20, "N",
          "open connections, idle ones included; beyond them the longest idle\n"
          "kept-alive one is closed, else 429 (default 512, at least max-clients)"),
    CLI_I("--max-batch", serve_opts, cfg.max_batch, 1, 4096, "N",
          "sequences generated at once; translation: sentences translated in\n"
          "one call, and the most one request may hold (default 4)"),
    CLI_I("--beam", serve_opts, cfg.beam, 1, 256, "N",
          "translation: beams when a request gives no beam_size (default 4)"),
    CLI_I("--max-beam", serve_opts, cfg.max_beam, 1, 256, "N",
          "translation: the most beams a request may ask for (default: --beam)"),
    CLI_B("--no-generation-config", serve_opts, no_gen_config,
          "translation: ignore the model directory's generation settings\n"
          "(bad_words_ids, forced_eos_token_id, ...)"),
    CLI_WEIGHTS("--weights", serve_opts, weights, 0,
                "linear weights of the batched decode engine or the translator\n(default f32)"),
    CLI_I("--group", serve_opts, cfg.group, 0, 4096, "G",
          "int8: input columns per scale, 32/64/128, 0 = per row (default 64)"),
    CLI_B("--kv-bf16", serve_opts, kv_bf16, "KV cache stored in bf16 (default f32)"),
    CLI_F("--kv-mb", serve_opts, kv_mb, 0.001, 1e7, "MB",
          "KV block pool budget (default: max-batch sequences of the context);\n"
          "a request waits while the pool cannot hold it"),
    CLI_B("--per-request", serve_opts, per_request,
          "a KV cache per request stepped round-robin (the model's own\n"
          "forward, --dtype applies) instead of the batched engine"),
    CLI_I("--context", serve_opts, cfg.max_seq, 1, 1 << 24, "N",
          "tokens per sequence, prompt + completion (default: the model's)"),
    CLI_I("--max-tokens", serve_opts, cfg.default_max_tokens, 1, 1 << 24, "N",
          "completion length when a request gives none (default 16)"),
    CLI_I("--max-body", serve_opts, max_body, 1, INT32_MAX, "BYTES", "largest request body; more is 413 (default 1048576)"),
    CLI_I("--max-header", serve_opts, max_header, 256, 1 << 24, "BYTES",
          "largest request line + headers; more is 431 (default 16384)"),
    CLI_I("--head-timeout", serve_opts, head_timeout_s, 1, 86400, "S",
          "seconds for a request's line and headers to arrive; then 408 (default 5)"),
    CLI_I("--timeout", serve_opts, timeout_s, 1, 86400, "S",
          "seconds a whole request may take to arrive; then 408 (default 30)"),
    CLI_I("--busy-wait-ms", serve_opts, cfg.busy_wait_ms, 0, 600000, "MS",
          "a request finding every worker busy waits this long for one; then 429\n"
          "(default 500)"),
    CLI_I("--keepalive", serve_opts, keepalive_s, 0, 86400, "S",
          "seconds an idle kept-alive connection stays open; 0: one request per\n"
          "connection (default 5)"),
    CLI_DTYPE("--dtype", serve_opts, dt, "activation / GEMM dtype with --per-request (default f32)"),
    CLI_I("--threads", serve_opts, threads, 1, 4096, "N", "threads (default: OMP_NUM_THREADS)"),
    CLI_B("--quiet", serve_opts, quiet, "no startup summary and no request log on stderr"),
};

const cli_command cli_serve_command = {
    "serve", "(--model DIR | --checkpoint DIR) [options]",
    "OpenAI-compatible HTTP server: POST /v1/completions (streaming too),\n"
    "GET /v1/models, GET /health; POST /v1/translations for an encoder-decoder",
    "Serves the model over HTTP/1.1 until SIGINT / SIGTERM (in-flight requests are cancelled):\n"
    "  POST /v1/completions   OpenAI completions: {\"prompt\": text or [token ids], \"max_tokens\",\n"
    "                         \"temperature\", \"top_p\", \"top_k\", \"seed\", \"stop\", \"stream\",\n"
    "                         \"stream_options\": {\"include_usage\"}, \"return_token_ids\"}; n = 1;\n"
    "                         max_tokens beyond the context: 400 saying how many fit\n"
    "  POST /v1/translations  an encoder-decoder model instead: {\"text\": string or [strings],\n"
    "                         \"beam_size\", \"greedy\", \"length_penalty\", \"max_length_ratio\",\n"
    "                         \"max_tokens\", \"early_stopping\", \"return_token_ids\"}; concurrent\n"
    "                         requests are translated together (--max-batch sentences)\n"
    "  GET /v1/models         the model's id and context\n"
    "  GET /health            status and request counts\n"
    "options:\n",
    k_flags, sizeof k_flags / sizeof k_flags[0], NULL, NULL, false};

static ot_server *volatile g_server;

static void on_signal(int sig) {
  (void)sig;
  ot_server *s = g_server;
  if (s) ot_server_stop(s);
}

// Last path component of dir (without trailing slashes) into out.
static void base_name(const char *dir, char *out, size_t cap) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') n--;
  size_t b = n;
  while (b > 0 && dir[b - 1] != '/') b--;
  snprintf(out, cap, "%.*s", (int)(n - b), dir + b);
}

int ot_cmd_serve(int argc, char **argv) {
  serve_opts o = {.cfg = ot_server_config_default(), .timeout_s = 30, .head_timeout_s = 5, .keepalive_s = 5,
                  .dt = OT_F32};
  o.cfg.port = 8080;
  o.cfg.group = 64;
  o.max_body = (int)o.cfg.max_body;
  o.max_header = (int)o.cfg.max_header;
  o.weights = (int)o.cfg.weights;
  const int pr = cli_parse(&cli_serve_command, argc, argv, &o, NULL);
  if (pr != CLI_OK) return pr == CLI_HELP ? 0 : pr;
  const char *model_dir = o.model_dir, *ckpt_dir = o.ckpt_dir, *tok_flag = o.tok_flag;
  const bool quiet = o.quiet;
  const ot_dtype dt = (ot_dtype)o.dt;
  ot_server_config cfg = o.cfg;
  if (!model_dir == !ckpt_dir)
    return cli_usage_error(&cli_serve_command, "give one of --model DIR (Hugging Face) or --checkpoint DIR");
  cfg.weights = (ot_dtype)o.weights;
  if (o.kv_bf16) cfg.kv_dtype = OT_BF16;
  cfg.batched = !o.per_request;
  cfg.kv_bytes = (size_t)(o.kv_mb * 1e6);
  cfg.max_body = (size_t)o.max_body;
  cfg.max_header = (size_t)o.max_header;
  cfg.timeout_ms = o.timeout_s * 1000;
  cfg.head_timeout_ms = o.head_timeout_s * 1000;
  if (o.max_conns) cfg.max_connections = o.max_conns;
  else if (cfg.max_connections < cfg.max_clients) cfg.max_connections = cfg.max_clients;
  cfg.keepalive_ms = o.keepalive_s * 1000;
  if (o.threads > 0) ot_threads_set(o.threads);

  ot_run_config run = {1, 1, dt, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  char ckpt[OT_PATH_MAX + 64] = "", data_dir[OT_PATH_MAX] = "", name[128];
  char cfg_json[OT_PATH_MAX + 32];
  snprintf(cfg_json, sizeof cfg_json, "%s/config.json", model_dir ? model_dir : "");
  FILE *cf = model_dir ? fopen(cfg_json, "r") : NULL;
  if (cf) fclose(cf);
  const bool hf = model_dir && cf;   // --model without config.json: a checkpoint, as `ot translate` reads it
  ot_status st = hf ? ot_model_load_hf(&m, model_dir, &run)
                    : cli_load_checkpoint(model_dir ? model_dir : ckpt_dir, &run, &m, ckpt, data_dir);
  if (st != OT_OK) { fprintf(stderr, "ot serve: %s\n", ot_last_error()); return 1; }
  const ot_model_config *mc = ot_model_config_of(m);
  const bool translate = mc->arch == OT_ARCH_ENCDEC;
  ot_bpe *t = NULL;
  const char *tok_dir = "none";
  int rc = 1;
  static int32_t bad_len[64], bad_ids[1024];   // the generation config's bad_words_ids
  ot_beam_config search = ot_beam_config_default();
  if (translate) {
    search.vocab = mc->vocab;
    search.max_len_a = 1.2f;   // as ot translate: 1.2 * source + 10
    search.max_len_b = 10.0f;
    if (hf && !o.no_gen_config && tr_read_gen_config(model_dir, &search, bad_len, bad_ids, 64) != OT_OK) {
      fprintf(stderr, "ot serve: %s\n", ot_last_error());
      goto out;
    }
    cfg.search = &search;
    if (!cfg.max_beam) cfg.max_beam = cfg.beam;
    if (cfg.max_beam < cfg.beam) {
      fprintf(stderr, "ot serve: --max-beam %d is below --beam %d\n", cfg.max_beam, cfg.beam);
      rc = 2;
      goto out;
    }
    const char *d = tok_flag;
    const char *cand[3] = {hf ? model_dir : ckpt, model_dir ? model_dir : ckpt_dir, data_dir};
    for (int i = 0; !d && i < 3; i++)
      if (cand[i][0] && cli_file_exists(cand[i], "vocab.json") && cli_file_exists(cand[i], "merges.txt"))
        d = cand[i];
    if (!d || !strcmp(d, "none")) {
      fprintf(stderr, "ot serve: '%s' is an encoder-decoder (translation) model and needs its tokenizer: "
              "give --tokenizer DIR (vocab.json + merges.txt)\n", mc->name);
      goto out;
    }
    tok_flag = d;
  }
  if (!tok_flag || strcmp(tok_flag, "none")) {
    const char *dirs[3] = {hf ? model_dir : ckpt, model_dir ? model_dir : ckpt_dir, data_dir};
    if (!(t = cli_pick_tokenizer(tok_flag, dirs, 3, &tok_dir))) goto out;
    if (ot_bpe_vocab_size(t) > mc->vocab) {
      fprintf(stderr, "ot serve: the tokenizer in %s has %d tokens but the model only %d: not its "
              "tokenizer (give --tokenizer DIR, or --tokenizer none)\n", tok_dir, ot_bpe_vocab_size(t),
              mc->vocab);
      goto out;
    }
  }
  base_name(model_dir ? model_dir : ckpt_dir, name, sizeof name);
  cfg.model_id = o.model_id ? o.model_id : name;
  cfg.log = quiet ? NULL : stderr;
  // the server's threads start with SIGINT / SIGTERM blocked: only this thread
  // runs the handler (interrupting its poll), never while the server is freed
  sigset_t stopset, old;
  sigemptyset(&stopset);
  sigaddset(&stopset, SIGINT);
  sigaddset(&stopset, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopset, &old);
  signal(SIGPIPE, SIG_IGN);
  ot_server *srv = NULL;
  if (ot_server_create(&srv, &cfg, m, t) != OT_OK) {
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    fprintf(stderr, "ot serve: %s\n", ot_last_error());
    goto out;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  g_server = srv;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!quiet) {
    char mode[160];
    if (translate)
      snprintf(mode, sizeof mode, "translation of up to %d sentences per call, beam %d (at most %d), %s "
               "weights", cfg.max_batch, cfg.beam, cfg.max_beam,
               cfg.weights == OT_I8 ? "int8" : ot_dtype_name(cfg.weights));
    else if (cfg.batched)
      snprintf(mode, sizeof mode, "batched decode of up to %d sequences, %s weights%s, %s KV cache",
               cfg.max_batch, cfg.weights == OT_I8 ? "int8" : ot_dtype_name(cfg.weights),
               cfg.weights == OT_I8 ? (cfg.group ? " (a scale per group)" : " (a scale per row)") : "",
               ot_dtype_name(cfg.kv_dtype));
    else
      snprintf(mode, sizeof mode, "%d sequences at once, a KV cache each, %s", cfg.max_batch, ot_dtype_name(dt));
    fprintf(stderr, "model %s (%s): %.1fM parameters, context %d; tokenizer %s; %s; %d clients, %d threads\n",
            cfg.model_id, mc->name, ot_model_n_params(mc) / 1e6, cfg.max_seq ? cfg.max_seq : mc->max_seq,
            tok_dir, mode, cfg.max_clients, ot_threads_get());
  }
  const char *host = cfg.host ? cfg.host : "127.0.0.1";
  const bool v6 = strchr(host, ':') != NULL;
  printf("ot serve: listening on http://%s%s%s:%d (Ctrl-C stops)\n", v6 ? "[" : "", host, v6 ? "]" : "",
         ot_server_port(srv));
  fflush(stdout);
  st = ot_server_run(srv);
  pthread_sigmask(SIG_BLOCK, &stopset, NULL);
  g_server = NULL;
  if (st != OT_OK) fprintf(stderr, "ot serve: %s\n", ot_last_error());
  else if (!quiet) fprintf(stderr, "ot serve: stopped\n");
  ot_server_free(srv);
  rc = st == OT_OK ? 0 : 1;
out:
  ot_bpe_free(t);
  ot_model_free(m);
  return rc;
}
