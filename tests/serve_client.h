// A small HTTP/1.1 client for the server tests (test_serve, test_serve_conn,
// test_serve_leak): loopback sockets, whole writes, and responses read one at
// a time by their Content-Length (or to the end of the stream when they have
// none, as a Server-Sent Events stream).
#ifndef OT_TEST_SERVE_CLIENT_H
#define OT_TEST_SERVE_CLIENT_H
#include "harness.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

// A connected socket to 127.0.0.1:port (reads time out after 20 s), or -1.
static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
  return fd;
}

static bool send_all(int fd, const void *p, size_t n) {
  const char *q = p;
  while (n) {
    ssize_t k = send(fd, q, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    q += k;
    n -= (size_t)k;
  }
  return true;
}

// status 0: no (complete) status line. all: the response's bytes (malloc'd,
// 0-terminated), body: into all.
typedef struct { int status; char *all; size_t len; const char *body; } http_resp;

// Length of the first whole response in b[0, n) (its head and Content-Length
// bytes of body), or 0 when more is needed; *clen = -1 when the head has no
// Content-Length (the body then runs to the end of the stream).
static size_t resp_len(const char *b, size_t n, long *clen) {
  *clen = -1;
  const char *he = NULL;
  for (size_t i = 0; i + 3 < n && !he; i++)
    if (!memcmp(b + i, "\r\n\r\n", 4)) he = b + i + 4;
  if (!he) return 0;
  for (const char *p = b; p < he; p++)
    if ((p == b || p[-1] == '\n') && !strncasecmp(p, "content-length:", 15)) *clen = atol(p + 15);
  const size_t hl = (size_t)(he - b);
  if (*clen < 0) return 0;
  return n - hl >= (size_t)*clen ? hl + (size_t)*clen : 0;
}

// Reads one response (by its Content-Length, else until the end of the stream).
static void read_resp(int fd, http_resp *r) {
  size_t cap = 1 << 16;
  r->all = th_alloc(cap);
  r->len = 0;
  long clen = -1;
  for (;;) {
    if (r->len + 4096 > cap) { cap *= 2; r->all = realloc(r->all, cap); }
    if (r->len && resp_len(r->all, r->len, &clen)) break;
    ssize_t k = recv(fd, r->all + r->len, cap - r->len - 1, 0);
    if (k <= 0) break;
    r->len += (size_t)k;
  }
  r->all[r->len] = 0;
  r->status = 0;
  if (r->len >= 12 && !strncmp(r->all, "HTTP/1.1 ", 9)) r->status = atoi(r->all + 9);
  const char *b = strstr(r->all, "\r\n\r\n");
  r->body = b ? b + 4 : r->all + r->len;
}

// Sends raw bytes (then half-closes when shut), reads one response, closes.
static http_resp raw_request(int port, const char *req, size_t n, bool shut) {
  http_resp r = {0, NULL, 0, ""};
  int fd = dial(port);
  if (fd < 0) { r.all = th_alloc(1); r.all[0] = 0; r.body = r.all; return r; }
  send_all(fd, req, n);
  if (shut) shutdown(fd, SHUT_WR);
  read_resp(fd, &r);
  close(fd);
  return r;
}

// A POST of a JSON body as one write, into req[cap]; returns its length.
static size_t post_bytes(char *req, size_t cap, const char *path, const char *body, bool close_conn) {
  const int n = snprintf(req, cap, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n%s\r\n%s", path, strlen(body),
                         close_conn ? "Connection: close\r\n" : "", body);
  return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}
#endif
