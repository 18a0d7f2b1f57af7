// Private parts of the HTTP server (conn.c: the accept loop, connections
// and workers; http.c: request parsing, responses, routing; api.c:
// the endpoints, JSON bodies, streaming text; translate.c: translations).
#ifndef OT_SERVE_IMPL_H
#define OT_SERVE_IMPL_H
#include "internal.h"
#include "ot/serve.h"
#include "io/json.h"
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

// Translation text, one copy for POST /v1/translations, `ot translate` and the
// BLEU hook of `ot train`:
// The text of target tokens tok[0, n) (a final eos dropped) appended to out:
// the tokens' bytes (ids the tokenizer lacks, e.g. pad, add none), each byte
// that does not start a well-formed UTF-8 character as U+FFFD.
void ot__tokens_text(const ot_bpe *bpe, const int32_t *tok, int n, int32_t eos, ot__sbuf *out);
// A sentence text[0, len) -> encoder input: its BPE ids (special tokens as
// plain text) + eos, the first cap of them stored in out; *n = all of them
// (*n > cap: too long). OT_EINVAL for invalid UTF-8 or an id >= vocab.
ot_status ot__source_ids(const ot_bpe *bpe, const char *text, size_t len, int vocab, int32_t eos,
                         int32_t *out, int cap, int *n);

// ---- one parsed request
typedef struct {
  char method[16];
  char path[256];              // without the query string
  const char *body;            // [body_len], NULL when none was read
  size_t body_len;
} ot__http_req;

// What the header section says beyond the request line.
typedef struct {
  bool has_len, has_te, expect_continue;
  bool chunked;                // Transfer-Encoding: chunked (the body's length comes from it)
  uint64_t len;                // Content-Length
  int minor;                   // HTTP/1.minor
  int conn;                    // Connection: 1 keep-alive, 0 close, -1 neither
  char err[160];               // why the head is malformed
} ot__head_info;

// Offset just past the blank line ending the header section in b[0, n)
// (searched from `from`), or 0.
size_t ot__head_end(const char *b, size_t n, size_t from);
// Parses h[0, n) (request line + header lines, CRLF or LF). Returns 0 or the
// status to answer (hi->err says why).
int ot__parse_head(const char *h, size_t n, ot__http_req *r, ot__head_info *hi);

// A chunked body (RFC 9112 7.1) decoded in place as its bytes arrive: raw bytes
// [raw, n) of buf are read, the chunk data written at out (out <= raw always), so the
// decoded body ends up at [start, out). Chunk extensions and trailer fields are read
// and dropped; a line (size or trailer) is at most 4096 bytes.
typedef struct {
  int state;                   // 0 size line, 1 data, 2 CRLF after data, 3 trailers, 4 done
  uint64_t left;               // data bytes left in the current chunk
  size_t raw, out;             // next raw byte to read; end of the decoded data
} ot__chunked;
// Starts decoding a body whose first raw byte is at buf[start].
void ot__chunked_init(ot__chunked *d, size_t start);
// Reads buf[d->raw, n): 0 = more bytes needed, 1 = done (d->raw: just past the message,
// the decoded body [start, d->out)), or a status (400 malformed, 413 decoded body over
// max_body bytes) with err[cap] saying why.
int ot__chunked_feed(ot__chunked *d, char *buf, size_t n, size_t start, size_t max_body, char *err,
                     size_t cap);

// A connection: the accept loop (conn.c) owns it while it waits for a
// whole request (READ), holds a whole request until a worker is free (WAIT) or
// closes (LINGER), a worker while it answers (WORK).
typedef enum { OT__CONN_READ, OT__CONN_WAIT, OT__CONN_WORK, OT__CONN_LINGER, OT__CONN_CLOSED } ot__conn_state;

typedef struct ot__conn ot__conn;
struct ot__conn {
  ot_server *srv;
  int fd;
  ot__conn_state state;
  // received bytes [0, len) of buf[cap]; the request being read or answered starts at 0
  char *buf;
  size_t len, cap;
  size_t scanned;              // head: bytes searched for its end
  size_t head_len, req_len;    // once the head is parsed: its bytes, head + body bytes
  ot__http_req req;
  ot__head_info hi;
  ot__chunked chunk;           // a chunked body's decoding (hi.chunked)
  double t0;                   // accepted, or the first byte of a later request arrived
  double idle_since;           // the previous response ended (keep-alive wait)
  double linger_end;
  double wait_end;             // WAIT: 429 if no worker is free by then
  uint64_t wait_seq;           // WAIT: order of arrival (served first come, first served)
  size_t drained;              // LINGER: bytes read and dropped
  int served;                  // requests answered on this connection
  bool eof;                    // the client shut its sending side
  bool nowait;                 // sends give up instead of waiting (the accept loop's own answers)
  bool keep;                   // the connection stays open after this response
  // this request's answer
  bool dead;                   // a write failed or the client closed
  bool cancelled;              // its generation was cancelled (client gone or stopping)
  int status;                  // status sent (for the log)
  int tokens_in, tokens_out;   // for the log
  ot__conn *next;              // the workers' queue, or the list of those they are done with
};

struct ot_server {
  ot_server_config cfg;
  char host[64], model_id[128];
  const ot_model *m;
  const ot_bpe *bpe;
  ot_sched *sched;
  int ctx;                     // tokens per sequence
  int32_t eot;                 // stop token (tokenizer's <|endoftext|>), -1 if none
  bool translate;              // an encoder-decoder: POST /v1/translations
  ot_beam_config search;       // translation: the base search (num_beams = cfg.beam)
  int lfd, port, wake[2];
  atomic_bool stopping;
  atomic_uint_fast64_t counter; // request ids and default seeds
  int64_t started;             // unix time at create
  pthread_mutex_t log_mu;
  // accept loop (the thread in ot_server_run)
  ot__conn **conns;            // [max_connections] open connections, nconns of them
  int nconns;
  double accept_after;         // out of file descriptors: accept again after this time
  // workers: up to max_clients threads, started as requests need them
  pthread_mutex_t wmu;
  pthread_cond_t wcv;
  pthread_t *workers;          // [max_clients], nworkers started
  int nworkers;
  int busy;                    // requests handed to workers and not yet given back
  int nwait;                   // connections in WAIT (at most max_clients)
  uint64_t wait_seq;
  bool quit;                   // workers end once the queue is empty
  ot__conn *queue, *queue_tail; // whole requests waiting for a worker
  ot__conn *given_back;        // connections the workers are done with
};

// http.c
// Sends p[0, n) whole. false: the client is gone, the write stalled past the
// timeout (at once with c->nowait), or the server is stopping (c->dead set).
bool ot__send(ot__conn *c, const void *p, size_t n);
// A complete response with Content-Length; Connection: keep-alive when c->keep, else close.
void ot__respond(ot__conn *c, int status, const char *ctype, const char *body, size_t n,
                 const char *extra_headers);
// An OpenAI-style error {"error":{"message","type","param","code"}} (param, code may be NULL).
void ot__respond_error(ot__conn *c, int status, const char *param, const char *code,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
// The same with extra header lines ("Name: value\r\n" each; NULL: none).
void ot__respond_error_h(ot__conn *c, int status, const char *extra, const char *param, const char *code,
                         const char *fmt, ...) __attribute__((format(printf, 6, 7)));
// True when the client closed its side or the server is stopping (non-blocking check).
bool ot__conn_gone(ot__conn *c);
bool ot__stopping(const ot_server *s);
// One log line for the answer c->status (when the server logs and one was sent).
void ot__log_request(ot__conn *c);

// api.c: the endpoints, and the router in front of them
// Worker: answers the whole request at c->buf (routing to the endpoints) and logs it.
void ot__serve_request(ot__conn *c);
void ot__api_completions(ot__conn *c, const ot__http_req *r);
// Optional request fields of object root: absent or null leaves *v; a value of
// the wrong type or outside [lo, hi] is answered 400 naming the key (false).
bool ot__get_num(ot__conn *c, const ot_json *root, const char *key, double lo, double hi, double *v);
bool ot__get_int(ot__conn *c, const ot_json *root, const char *key, int64_t lo, int64_t hi, int64_t *v);
bool ot__get_bool(ot__conn *c, const ot_json *root, const char *key, bool *v);
// Only parses and checks a completion body as ot__api_completions does (the
// same code), without generating: true when valid, else the 400 (or 503) is
// answered on c. For the fuzz target tests/fuzz/fuzz_http.c.
bool ot__api_check_completion(ot__conn *c, const char *body, size_t len);
// translate.c: POST /v1/translations (a translation server only)
void ot__api_translations(ot__conn *c, const ot__http_req *r);
void ot__api_models(ot__conn *c);
void ot__api_health(ot__conn *c);
#endif
