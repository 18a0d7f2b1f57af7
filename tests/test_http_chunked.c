// The server's chunked request-body decoder (ot__chunked_feed, src/serve/http.c) on its
// own: messages with upper- and lower-case sizes, extensions, trailer fields, LF-only
// lines and a pipelined request after them decode to the same body whether their bytes
// arrive at once or one by one (the decoded body in place at the start, the raw end just
// past the message); malformed sizes, data longer than its size, over-long lines and a
// body over the limit are refused with their status and a message.
#include "harness.h"
#include "serve/serve_impl.h"
#include <stdlib.h>

// Feeds msg[0, n) after a 3-byte "head" at once (step 0) or `step` bytes at a time;
// returns the last status, the decoded body in out[cap] and the raw end in *raw.
static int feed(const char *msg, size_t n, size_t step, size_t max_body, char *out, size_t cap,
                size_t *raw, char *err) {
  char *buf = th_alloc(n + 4);
  memcpy(buf, "HD:", 3);
  memcpy(buf + 3, msg, n);
  ot__chunked d;
  ot__chunked_init(&d, 3);
  int st = 0;
  for (size_t have = step ? 3 : n + 3; st == 0; have += step) {
    if (have > n + 3) have = n + 3;
    st = ot__chunked_feed(&d, buf, have, 3, max_body, err, 160);
    if (have == n + 3 && st == 0) break;
    th_check(d.out <= d.raw && d.raw <= have, "decoder: out %zu <= raw %zu <= %zu", d.out, d.raw, have);
  }
  const size_t len = d.out - 3 < cap - 1 ? d.out - 3 : cap - 1;
  memcpy(out, buf + 3, len);
  out[len] = 0;
  *raw = d.raw - 3;
  free(buf);
  return st;
}

int main(void) {
  static const struct { const char *msg, *body; size_t end; } ok[] = {
    {"5\r\nhello\r\n0\r\n\r\n", "hello", 15},
    {"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world", 26},
    {"a;name=value\r\n0123456789\r\nA\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij", 46},
    {"3 ; x\r\nabc\r\n0\r\nX-Trailer: 1\r\nX-Other: 2\r\n\r\nGET / HTTP/1.1\r\n\r\n", "abc", 43},
    {"2\nhi\n0\n\n", "hi", 8},
    {"000\r\n\r\n", "", 7},
    {"F\r\n0123456789abcde\r\n0\r\n\r\n", "0123456789abcde", 25},
  };
  char out[128], err[160];
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    for (size_t step = 0; step <= 3; step++) {
      size_t raw = 0;
      err[0] = 0;
      const int st = feed(ok[i].msg, strlen(ok[i].msg), step, 1024, out, sizeof out, &raw, err);
      th_check(st == 1 && !strcmp(out, ok[i].body) && raw == ok[i].end,
               "message %zu in steps of %zu: status %d, body '%s' (want '%s'), end %zu (want %zu) %s", i,
               step, st, out, ok[i].body, raw, ok[i].end, err);
    }
  static const struct { const char *msg; int status; const char *needle; } bad[] = {
    {"zz\r\nab\r\n0\r\n\r\n", 400, "malformed chunk size 'zz'"},
    {"\r\nab\r\n0\r\n\r\n", 400, "malformed chunk size"},
    {"-1\r\nab\r\n0\r\n\r\n", 400, "malformed chunk size"},
    {"2x\r\nab\r\n0\r\n\r\n", 400, "malformed chunk size"},
    {"1\r\nab\r\n0\r\n\r\n", 400, "longer than its size"},
    {"11111111111111111\r\n", 400, "malformed chunk size"},
    {"FFFFFFFFFFFFFFFF\r\n", 413, "exceeds the limit of 1024"},
    {"401\r\n", 413, "exceeds the limit of 1024"},
    {"400\r\n", 0, NULL},   // exactly the limit: more bytes needed
    {"200\r\n", 0, NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    for (size_t step = 0; step <= 1; step++) {
      size_t raw = 0;
      err[0] = 0;
      const int st = feed(bad[i].msg, strlen(bad[i].msg), step, 1024, out, sizeof out, &raw, err);
      th_check(st == bad[i].status && (!bad[i].needle || strstr(err, bad[i].needle)),
               "bad message %zu in steps of %zu: status %d (want %d), err '%s'", i, step, st, bad[i].status,
               err);
    }
  // two chunks of 600 bytes each exceed a 1024-byte body
  char *big = th_alloc(2000);
  size_t n = (size_t)sprintf(big, "258\r\n");
  memset(big + n, 'a', 600);
  n += 600;
  n += (size_t)sprintf(big + n, "\r\n258\r\n");
  size_t raw = 0;
  th_check(feed(big, n, 0, 1024, out, sizeof out, &raw, err) == 413, "two chunks over the limit: 413");
  // a size line longer than 4096 bytes without its end
  char *line = th_alloc(5000);
  memset(line, '0', 4999);
  line[4999] = 0;
  th_check(feed(line, 4999, 0, 1 << 20, out, sizeof out, &raw, err) == 400 && strstr(err, "longer than 4096"),
           "an endless size line: 400 (%s)", err);
  free(big);
  free(line);
  return th_finish();
}
