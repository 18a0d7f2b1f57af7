// Private parts of the HTTP server (serve_http.c: sockets, request parsing,
// responses; serve_api.c: the endpoints, JSON bodies, streaming text).
#ifndef OT_SERVE_IMPL_H
#define OT_SERVE_IMPL_H
#include "internal.h"
#include "ot/server.h"
#include <pthread.h>
#include <stdatomic.h>

// ---- growable byte buffer (oom sticks: later appends do nothing)
typedef struct { char *p; size_t len, cap; bool oom; } ot__sbuf;
void ot__sb_put(ot__sbuf *b, const void *s, size_t n);
void ot__sb_puts(ot__sbuf *b, const char *s);
void ot__sb_printf(ot__sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A JSON string literal of s[0, n) (quotes included); s must be valid UTF-8.
void ot__sb_json_str(ot__sbuf *b, const char *s, size_t n);
void ot__sb_free(ot__sbuf *b);

// Appends the UTF-8 characters of s[0, n) to out, each byte that does not
// start a well-formed character as U+FFFD, and returns the bytes consumed.
// Unless final, a well-formed but incomplete character at the end is left
// (not consumed) for the next call, so that feeding a byte stream piece by
// piece gives the same text as feeding it whole.
size_t ot__utf8_take(const char *s, size_t n, bool final, ot__sbuf *out);

// ---- one parsed request
typedef struct {
  char method[16];
  char path[256];              // without the query string
  const char *body;            // [body_len], NULL when none was read
  size_t body_len;
} ot__http_req;

typedef struct ot__conn ot__conn;
struct ot__conn {
  ot_server *srv;
  int fd;
  bool dead;                   // a write failed or the client closed
  bool cancelled;              // its generation was cancelled (client gone or stopping)
  int status;                  // status sent (for the log)
  int tokens_in, tokens_out;   // for the log
  pthread_t th;
  bool used;                   // slot taken (accept thread only)
  atomic_bool done;            // the thread has finished with the connection
};

struct ot_server {
  ot_server_config cfg;
  char host[64], model_id[128];
  const ot_model *m;
  const ot_bpe *bpe;
  ot_sched *sched;
  int ctx;                     // tokens per sequence
  int32_t eot;                 // stop token (tokenizer's <|endoftext|>), -1 if none
  int lfd, port, wake[2];
  atomic_bool stopping;
  atomic_uint_fast64_t counter; // request ids and default seeds
  int64_t started;             // unix time at create
  ot__conn *conns;             // [max_clients]
  pthread_mutex_t log_mu;
};

// serve_http.c
// Sends p[0, n) whole. false: the client is gone, the write stalled past the
// timeout, or the server is stopping (c->dead set).
bool ot__send(ot__conn *c, const void *p, size_t n);
// A complete response with Content-Length and Connection: close.
void ot__respond(ot__conn *c, int status, const char *ctype, const char *body, size_t n,
                 const char *extra_headers);
// An OpenAI-style error {"error":{"message","type","param","code"}} (param, code may be NULL).
void ot__respond_error(ot__conn *c, int status, const char *param, const char *code,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
// True when the client closed its side or the server is stopping (non-blocking check).
bool ot__conn_gone(ot__conn *c);
bool ot__stopping(const ot_server *s);

// serve_api.c: the endpoints after routing
void ot__api_completions(ot__conn *c, const ot__http_req *r);
void ot__api_models(ot__conn *c);
void ot__api_health(ot__conn *c);
#endif
