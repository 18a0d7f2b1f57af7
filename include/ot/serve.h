// ops-transformer HTTP serving: a request scheduler that owns a model and
// steps several sequences round-robin one token at a time (continuous
// batching at the request level), and a local HTTP/1.1 server with an
// OpenAI-compatible POST /v1/completions (plain or Server-Sent Events),
// GET /v1/models and GET /health on top of it (`ot serve`); over an
// encoder-decoder model, POST /v1/translations instead of completions, whose
// concurrent requests the scheduler translates together.
//
// Scheduler: requests queue; up to max_batch of them are active, each with
// its own KV cache (B = 1) and sampler; every round gives each active
// sequence one step (a prefill chunk, and once the prompt is in, one sampled
// token fed back), so concurrent clients all progress. The sampled tokens
// equal those of ot_generate on a cache of the same capacity with the same
// prompt, settings and seed. Requests enter through ot_sched_submit, tokens
// come back through the on_token callback and the end through on_done (both
// on the scheduler thread), ot_sched_cancel ends one early: a batched decode
// engine can take the place of the per-request caches behind these calls.
#ifndef OT_SERVE_H
#define OT_SERVE_H
#include "ot/infer.h"
#include "ot/data.h"
#ifdef __cplusplus
extern "C" {
#endif

// ------------------------------------------------------------- scheduler ---
typedef enum {
  OT_SCHED_LENGTH = 0,   // max_tokens generated
  OT_SCHED_STOP_TOKEN,   // the stop token was sampled (it is not passed on)
  OT_SCHED_STOPPED,      // on_token returned false
  OT_SCHED_CANCELLED,    // ot_sched_cancel
  OT_SCHED_SHUTDOWN,     // the scheduler was freed before the request ended
  OT_SCHED_FAILED,       // a forward or sampling error (message in the result)
  OT_SCHED_TRANSLATED    // a translation request: every sentence was passed to on_sentence
} ot_sched_end;

typedef struct {
  ot_sched_end end;
  int prompt_tokens, new_tokens;   // new_tokens: how many on_token received (translation:
                                   // source tokens and target tokens of all its sentences)
  char message[256];               // OT_SCHED_FAILED: the error ("" otherwise)
} ot_sched_result;

typedef struct {
  const int32_t *prompt;     // [n_prompt] token ids in [0, vocab); copied by submit
  int n_prompt;              // >= 1
  int max_tokens;            // >= 1, n_prompt + max_tokens - 1 <= ot_sched_capacity
  int32_t stop_token;        // ends the sequence when sampled; -1: none
  ot_sampler_config sampler; // temperature / top-k / top-p / seed (checked by submit)
  // Called on the scheduler thread for each new token; false ends the request
  // (OT_SCHED_STOPPED). May be NULL.
  bool (*on_token)(void *ctx, int32_t token);
  // Called exactly once on the scheduler thread when the request ends; after
  // it returns the scheduler never touches ctx again. May be NULL.
  void (*on_done)(void *ctx, const ot_sched_result *r);
  void *ctx;
} ot_sched_request;

typedef struct {
  int max_batch;   // sequences stepped together, each with its own KV cache (0: 4)
  int max_seq;     // tokens per sequence (prompt + generated); 0: the model's max_seq
  int max_queue;   // requests waiting beyond max_batch (0: 256); more are refused
  // Batched decode: instead of a KV cache per request, one batched engine
  // (ot/serve.h: paged KV cache, every active sequence's token decoded in one
  // step that streams the weights once; prompts prefilled as they are admitted,
  // requests that do not fit the block pool wait until sequences leave). Its
  // tokens equal ot_engine's for the same requests; they may differ from
  // ot_generate's in rare near-ties (other kernels, other rounding).
  bool batched;
  ot_dtype weights;   // batched: linear weights OT_F32 (default), OT_BF16 or OT_I8
  int group;          // batched int8: columns per scale (32, 64, 128; 0: per row)
  ot_dtype kv_dtype;  // batched: cache storage OT_F32 (default) or OT_BF16
  size_t kv_bytes;    // batched: block pool budget (0: max_batch sequences of max_seq)
  // Translation (an encoder-decoder model, cfg.arch = OT_ARCH_ENCDEC): one
  // translator (ot/infer.h) of max_batch sentences, max_seq source and target
  // tokens, max_beams beams; weights OT_F32 (the model's own), OT_BF16 or OT_I8
  // (ot_qmodel_from_model, group columns per scale). Each round takes the
  // oldest queued request and the later ones with the same search settings
  // (ot_beam_config fields equal), as many as fit in max_batch sentences, and
  // translates all their sentences in one ot_translate_ids call.
  int max_beams;      // translation: most beams a request may use (0: 4)
} ot_sched_config;

typedef struct {
  uint64_t submitted, finished, cancelled;   // finished counts every end, cancelled those by cancel
  uint64_t cancel_requests;                  // ot_sched_cancel calls that found their request
  uint64_t tokens;                           // tokens passed to on_token by finished requests
  int active, queued;                        // now
  uint64_t translate_calls, sentences;       // translation: ot_translate_ids calls and their sentences
  int largest_call;                          // translation: most sentences in one call so far
} ot_sched_stats;

// A translation request (a scheduler over an encoder-decoder model).
typedef struct {
  const int32_t *src;        // the sentences' encoder inputs (eos included) one after
                             // another: sum of src_len ids in [0, vocab); copied by submit
  const int32_t *src_len;    // [n] lengths in [1, ot_sched_capacity]
  int n;                     // sentences, in [1, max_batch]
  // The search (checked by submit): vocab, eos / pad / start ids as the model's,
  // num_beams in [1, max_beams], length limits <= ot_sched_capacity. Arrays it
  // points at (bad_words) must stay valid until on_done.
  ot_beam_config search;
  // Called on the scheduler thread once per sentence, in order: its tokens
  // (after the start token, eos included when it ended with one). May be NULL.
  void (*on_sentence)(void *ctx, int index, const int32_t *tokens, int n_tokens);
  // As ot_sched_request.on_done: once, at the end (OT_SCHED_TRANSLATED, or
  // cancelled / shutdown / failed; then on_sentence may not have run).
  void (*on_done)(void *ctx, const ot_sched_result *r);
  void *ctx;
} ot_sched_translation;

typedef struct ot_sched ot_sched;

// Allocates max_batch KV caches of max_seq tokens (or the batched engine) up
// front and starts the scheduler thread. The model must outlive the scheduler, and nothing else
// may run it while the scheduler exists (the scheduler thread runs it).
ot_status ot_sched_create(ot_sched **out, const ot_model *m, const ot_sched_config *cfg);
// Ends every queued and active request with OT_SCHED_SHUTDOWN (their on_done
// runs), joins the thread, frees everything. NULL ok.
void ot_sched_free(ot_sched *s);
int ot_sched_capacity(const ot_sched *s);   // tokens per sequence (max_seq resolved)
// Checks the request (OT_EINVAL naming the field) and queues it; *id (may be
// NULL) identifies it for ot_sched_cancel. A full queue is OT_ENOMEM naming
// max_queue. on_done may run before submit returns.
// A scheduler over an encoder-decoder model takes only translations (and
// refuses ot_sched_submit saying so), the others only ot_sched_submit.
ot_status ot_sched_submit(ot_sched *s, const ot_sched_request *req, uint64_t *id);
// Checks a translation (OT_EINVAL naming the field) and queues it, as ot_sched_submit.
ot_status ot_sched_submit_translation(ot_sched *s, const ot_sched_translation *req, uint64_t *id);
bool ot_sched_translates(const ot_sched *s);   // true over an encoder-decoder model
// While paused, no queued request starts (they wait, up to max_queue of them;
// those running go on): for draining a server, and for tests that need
// several requests queued at once. Cancel and free work as usual.
void ot_sched_pause(ot_sched *s, bool paused);
// Asks the scheduler to end request id (OT_SCHED_CANCELLED before its next
// step; its KV cache slot is then reused). Returns false when the request has
// already ended (its on_done ran or is running).
bool ot_sched_cancel(ot_sched *s, uint64_t id);
void ot_sched_stats_get(ot_sched *s, ot_sched_stats *st);

// ---------------------------------------------------------------- server ---
typedef struct {
  const char *host;        // numeric address to bind; NULL: "127.0.0.1" (local only)
  int port;                // 0: an ephemeral port (ot_server_port says which)
  int max_clients;         // requests answered at once, a worker thread each (default 16);
                           // a whole request beyond them waits up to 0.5 s for a free worker
                           // (at most max_clients wait), then is answered 429 with Retry-After
  int max_connections;     // open connections, idle ones included (default 512, >= max_clients);
                           // beyond: the longest idle keep-alive one is closed, else 429
  int max_batch;           // sequences generated at once (default 4)
  bool batched;            // batched decode engine (ot_sched_config.batched; default false)
  ot_dtype weights;        // with batched: OT_F32, OT_BF16 or OT_I8 linear weights
  int group;               // with batched int8: columns per scale (0: per row)
  ot_dtype kv_dtype;       // with batched: KV cache storage OT_F32 or OT_BF16
  size_t kv_bytes;         // with batched: KV block pool budget (0: max_batch x context)
  int max_seq;             // tokens per sequence; 0: the model's context
  size_t max_body;         // request body bytes (default 1 MiB); more: 413
  size_t max_header;       // request line + headers bytes (default 16 KiB); more: 431
  int head_timeout_ms;     // the request line and headers must arrive within this after the
                           // connection opened (or the request's first byte on a kept-alive
                           // one), else 408 (default 5000)
  int timeout_ms;          // the whole request must arrive within this (default 30000),
                           // else 408; also bounds a stalled write to a client
  int keepalive_ms;        // an idle kept-alive connection is closed after this (default 5000)
  int default_max_tokens;  // when a request has no max_tokens (default 16; lowered to fit)
  const char *model_id;    // "model" in responses and /v1/models; NULL: the config's name
  FILE *log;               // one line per request (method, path, status, tokens, time); NULL: none
  int busy_wait_ms;        // a whole request that finds every worker busy waits this long for
                           // one before its 429 (default 500; 0: 429 at once)
  // Translation (an encoder-decoder model: POST /v1/translations instead of
  // completions; max_batch: sentences translated in one call; weights f32 /
  // bf16 / int8 as with batched, max_seq: source and target tokens):
  int beam;                // beams when a request gives no beam_size (default 4)
  int max_beam;            // most beams a request may ask (0: beam)
  // The base search: length_penalty, early_stopping, max_len_a / max_len_b,
  // min_length and the Hugging Face processors (its arrays must outlive the
  // server); vocab, the ids, num_beams and max_length are the server's.
  // NULL: ot_beam_config_default with max_len_a 1.2, max_len_b 10 (as ot translate).
  const ot_beam_config *search;
} ot_server_config;

ot_server_config ot_server_config_default(void);

typedef struct ot_server ot_server;

// Checks the config (OT_EINVAL naming the field), binds and listens (OT_EIO
// naming the address and the reason), starts the scheduler. An encoder-decoder
// model is served on POST /v1/translations and needs tok. tok (may be NULL:
// then prompts must be token arrays, "text" is empty and every choice carries
// "token_ids", as when a request asks "return_token_ids") must hold at most
// the model's vocabulary; its <|endoftext|> ends generations. The model and
// tokenizer must outlive the server.
ot_status ot_server_create(ot_server **out, const ot_server_config *cfg, const ot_model *m,
                           const ot_bpe *tok);
int ot_server_port(const ot_server *s);     // the bound port
ot_sched *ot_server_sched(ot_server *s);    // the scheduler requests go through
// Accepts connections and reads requests on the calling thread (poll: idle
// and slow clients hold no worker) until ot_server_stop; each whole request
// goes to one of up to max_clients worker threads. Then cancels in-flight
// requests, joins the workers and returns. HTTP/1.1 connections stay open
// (keep-alive) unless the request says Connection: close (HTTP/1.0: unless it
// says keep-alive); pipelined requests are answered in order; a stream (SSE)
// ends when the connection closes. A client that closes the connection, or
// only its sending side, while its completion is generated counts as gone:
// the request is cancelled and its sequence slot freed.
ot_status ot_server_run(ot_server *s);
// Makes ot_server_run return soon. Async-signal-safe (a flag and a pipe
// write), callable from any thread or a signal handler, more than once.
void ot_server_stop(ot_server *s);
// Frees the scheduler, the socket and the server (after ot_server_run has
// returned, or if it never ran). NULL ok.
void ot_server_free(ot_server *s);

#ifdef __cplusplus
}
#endif
#endif
