// `ot serve`: load a model (and its tokenizer) as `ot generate` does and serve
// an OpenAI-compatible completions API over HTTP until SIGINT / SIGTERM.
#include "cli.h"
#include "ot/serve.h"
#include <pthread.h>
#include <signal.h>

static void serve_usage(FILE *f) {
  fprintf(f,
          "usage: ot serve (--model DIR | --checkpoint DIR) [options]\n"
          "Serves the model over HTTP/1.1 until SIGINT / SIGTERM (in-flight requests are cancelled):\n"
          "  POST /v1/completions   OpenAI completions: {\"prompt\": text or [token ids], \"max_tokens\",\n"
          "                         \"temperature\", \"top_p\", \"top_k\", \"seed\", \"stop\", \"stream\",\n"
          "                         \"stream_options\": {\"include_usage\"}, \"return_token_ids\"}; n = 1;\n"
          "                         max_tokens beyond the context: 400 saying how many fit\n"
          "  GET /v1/models         the model's id and context\n"
          "  GET /health            status and request counts\n"
          "options:\n"
          "  --model DIR            Hugging Face directory: config.json + model.safetensors (GPT-2, Llama)\n"
          "  --checkpoint DIR       a checkpoint of `ot train` (step_NNNNNN/), or its run directory\n"
          "  --tokenizer DIR        vocab.json + merges.txt, gpt2 (= data/gpt2), or none (prompts must\n"
          "                         be token ids). Default: as `ot generate`\n"
          "  --host ADDR            numeric address to listen on (default 127.0.0.1: this machine only)\n"
          "  --port N               port (default 8080; 0: any free port, printed)\n"
          "  --model-id NAME        the model's name in responses (default: the directory's name)\n"
          "  --max-clients N        requests answered at once, a worker thread each; a request beyond\n"
          "                         them waits up to 0.5 s, then gets 429 with Retry-After (default 16)\n"
          "  --max-connections N    open connections, idle ones included; beyond them the longest idle\n"
          "                         kept-alive one is closed, else 429 (default 512, at least max-clients)\n"
          "  --max-batch N          sequences generated at once (default 4)\n"
          "  --weights f32|bf16|int8  linear weights of the batched decode engine (default f32)\n"
          "  --group G              int8: input columns per scale, 32/64/128, 0 = per row (default 64)\n"
          "  --kv-bf16              KV cache stored in bf16 (default f32)\n"
          "  --kv-mb MB             KV block pool budget (default: max-batch sequences of the context);\n"
          "                         a request waits while the pool cannot hold it\n"
          "  --per-request          a KV cache per request stepped round-robin (the model's own\n"
          "                         forward, --dtype applies) instead of the batched engine\n"
          "  --context N            tokens per sequence, prompt + completion (default: the model's)\n"
          "  --max-tokens N         completion length when a request gives none (default 16)\n"
          "  --max-body BYTES       largest request body; more is 413 (default 1048576)\n"
          "  --max-header BYTES     largest request line + headers; more is 431 (default 16384)\n"
          "  --head-timeout S       seconds for a request's line and headers to arrive; then 408 (default 5)\n"
          "  --timeout S            seconds a whole request may take to arrive; then 408 (default 30)\n"
          "  --keepalive S          seconds an idle kept-alive connection stays open; 0: one request per\n"
          "                         connection (default 5)\n"
          "  --dtype f32|bf16       activation / GEMM dtype with --per-request (default f32)\n"
          "  --threads N            threads (default: OMP_NUM_THREADS)\n"
          "  --quiet                no startup summary and no request log on stderr\n");
}

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
  const char *model_dir = NULL, *ckpt_dir = NULL, *tok_flag = NULL, *model_id = NULL;
  ot_server_config cfg = ot_server_config_default();
  cfg.port = 8080;
  int threads = 0, max_body = (int)cfg.max_body, max_header = (int)cfg.max_header, timeout_s = 30;
  int head_timeout_s = 5, keepalive_s = 5, max_conns = 0;
  bool quiet = false, per_request = false;
  ot_dtype dt = OT_F32;
  float kv_mb = 0.0f;
  cfg.batched = true;
  cfg.group = 64;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { serve_usage(stdout); return 0; }
    else if (!strcmp(a, "--quiet")) { quiet = true; continue; }
    else if (!strcmp(a, "--per-request")) { per_request = true; continue; }
    else if (!strcmp(a, "--kv-bf16")) { cfg.kv_dtype = OT_BF16; continue; }
    else if (!v) ok = false;
    else if (!strcmp(a, "--model")) model_dir = v;
    else if (!strcmp(a, "--checkpoint")) ckpt_dir = v;
    else if (!strcmp(a, "--tokenizer")) tok_flag = v;
    else if (!strcmp(a, "--host")) cfg.host = v;
    else if (!strcmp(a, "--model-id")) model_id = v;
    else if (!strcmp(a, "--port")) ok = cli_parse_int(a, v, 0, 65535, &cfg.port);
    else if (!strcmp(a, "--max-clients")) ok = cli_parse_int(a, v, 1, 65536, &cfg.max_clients);
    else if (!strcmp(a, "--max-connections")) ok = cli_parse_int(a, v, 1, 1 << 20, &max_conns);
    else if (!strcmp(a, "--max-batch")) ok = cli_parse_int(a, v, 1, 4096, &cfg.max_batch);
    else if (!strcmp(a, "--context")) ok = cli_parse_int(a, v, 1, 1 << 24, &cfg.max_seq);
    else if (!strcmp(a, "--max-tokens")) ok = cli_parse_int(a, v, 1, 1 << 24, &cfg.default_max_tokens);
    else if (!strcmp(a, "--max-body")) ok = cli_parse_int(a, v, 1, INT32_MAX, &max_body);
    else if (!strcmp(a, "--max-header")) ok = cli_parse_int(a, v, 256, 1 << 24, &max_header);
    else if (!strcmp(a, "--timeout")) ok = cli_parse_int(a, v, 1, 86400, &timeout_s);
    else if (!strcmp(a, "--head-timeout")) ok = cli_parse_int(a, v, 1, 86400, &head_timeout_s);
    else if (!strcmp(a, "--keepalive")) ok = cli_parse_int(a, v, 0, 86400, &keepalive_s);
    else if (!strcmp(a, "--threads")) ok = cli_parse_int(a, v, 1, 4096, &threads);
    else if (!strcmp(a, "--group")) ok = cli_parse_int(a, v, 0, 4096, &cfg.group);
    else if (!strcmp(a, "--kv-mb")) ok = cli_parse_float(a, v, 0.001, 1e7, &kv_mb);
    else if (!strcmp(a, "--weights")) ok = cli_parse_weights(a, v, &cfg.weights);
    else if (!strcmp(a, "--dtype")) {
      if (!strcmp(v, "f32")) dt = OT_F32;
      else if (!strcmp(v, "bf16")) dt = OT_BF16;
      else { fprintf(stderr, "ot serve: --dtype '%s' is not f32 or bf16\n", v); return 2; }
    } else {
      fprintf(stderr, "ot serve: unknown option '%s'\n\n", a);
      serve_usage(stderr);
      return 2;
    }
    if (!ok) {
      if (!v) { fprintf(stderr, "ot serve: %s needs a value\n\n", a); serve_usage(stderr); }
      return 2;
    }
    i++;
  }
  if (!model_dir == !ckpt_dir) {
    fprintf(stderr, "ot serve: give one of --model DIR (Hugging Face) or --checkpoint DIR\n\n");
    serve_usage(stderr);
    return 2;
  }
  cfg.batched = !per_request;
  cfg.kv_bytes = (size_t)(kv_mb * 1e6);
  cfg.max_body = (size_t)max_body;
  cfg.max_header = (size_t)max_header;
  cfg.timeout_ms = timeout_s * 1000;
  cfg.head_timeout_ms = head_timeout_s * 1000;
  if (max_conns) cfg.max_connections = max_conns;
  else if (cfg.max_connections < cfg.max_clients) cfg.max_connections = cfg.max_clients;
  cfg.keepalive_ms = keepalive_s * 1000;
  if (threads > 0) ot_threads_set(threads);

  ot_run_config run = {1, 1, dt, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  char ckpt[OT_PATH_MAX + 64] = "", data_dir[OT_PATH_MAX] = "", name[128];
  ot_status st = model_dir ? ot_model_load_hf(&m, model_dir, &run)
                           : cli_load_checkpoint(ckpt_dir, &run, &m, ckpt, data_dir);
  if (st != OT_OK) { fprintf(stderr, "ot serve: %s\n", ot_last_error()); return 1; }
  const ot_model_config *mc = ot_model_config_of(m);
  ot_bpe *t = NULL;
  const char *tok_dir = "none";
  int rc = 1;
  if (!tok_flag || strcmp(tok_flag, "none")) {
    const char *dirs[3] = {model_dir ? model_dir : ckpt, ckpt_dir, data_dir};
    if (!(t = cli_pick_tokenizer(tok_flag, dirs, 3, &tok_dir))) goto out;
    if (ot_bpe_vocab_size(t) > mc->vocab) {
      fprintf(stderr, "ot serve: the tokenizer in %s has %d tokens but the model only %d: not its "
              "tokenizer (give --tokenizer DIR, or --tokenizer none)\n", tok_dir, ot_bpe_vocab_size(t),
              mc->vocab);
      goto out;
    }
  }
  base_name(model_dir ? model_dir : ckpt_dir, name, sizeof name);
  cfg.model_id = model_id ? model_id : name;
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
    if (cfg.batched)
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
