// A TCP probe for the simulated hosts' self-test (tests/netns/selftest.sh): round-trip
// time and throughput of a link, with nothing but the C library.
//   netprobe serve PORT COUNT         answer COUNT connections on PORT, then exit
//   netprobe rtt HOST PORT N          N one-byte round trips (TCP_NODELAY): "rtt_us min M median D"
//   netprobe send HOST PORT BYTES     BYTES one way, until the server has read them all:
//                                     "sent B bytes in S s: R Mbit/s"
// Every socket gives up after 10 s without progress (exit 1, the reason on stderr).
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
  fprintf(stderr, "netprobe: %s: %s\n", what, strerror(errno));
  return 1;
}

static void timeouts(int fd) {
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);   // connect() too
}

static int full(int fd, void *buf, size_t n, int wr) {   // 0: all n bytes moved
  char *p = buf;
  while (n) {
    const ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int serve(int port, int count) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (ls < 0) return fail("socket");
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4)) return fail("bind / listen");
  static char buf[1 << 16];
  for (int c = 0; c < count; c++) {
    const int fd = accept(ls, NULL, NULL);
    if (fd < 0) return fail("accept");
    timeouts(fd);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char mode;
    if (full(fd, &mode, 1, 0)) { close(fd); continue; }
    if (mode == 'p') {   // echo single bytes until EOF
      char b;
      while (!full(fd, &b, 1, 0) && !full(fd, &b, 1, 1)) {}
    } else {             // sink until EOF, then the byte count
      uint64_t got = 0;
      ssize_t k;
      while ((k = read(fd, buf, sizeof buf)) > 0) got += (uint64_t)k;
      full(fd, &got, sizeof got, 1);
    }
    close(fd);
  }
  close(ls);
  return 0;
}

static int dial(const char *host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (fd < 0) return -1;
  timeouts(fd);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) { errno = EINVAL; close(fd); return -1; }
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); return -1; }
  return fd;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]), atoi(argv[3]));
  if (argc != 5 || (strcmp(argv[1], "rtt") && strcmp(argv[1], "send"))) {
    fprintf(stderr, "usage: netprobe serve PORT COUNT | rtt HOST PORT N | send HOST PORT BYTES\n");
    return 2;
  }
  const int fd = dial(argv[2], atoi(argv[3]));
  if (fd < 0) return fail("connect");
  if (!strcmp(argv[1], "rtt")) {
    const int n = atoi(argv[4]);
    if (n < 1 || n > 100000) { fprintf(stderr, "netprobe: N in 1..100000\n"); return 2; }
    double *t = malloc((size_t)n * sizeof *t);
    char b = 'p';
    if (!t || full(fd, &b, 1, 1)) return fail("start");
    for (int i = 0; i < n; i++) {
      const double t0 = now();
      if (full(fd, &b, 1, 1) || full(fd, &b, 1, 0)) return fail("round trip");
      t[i] = 1e6 * (now() - t0);
    }
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("rtt_us min %.0f median %.0f\n", t[0], t[n / 2]);
    free(t);
  } else {
    const uint64_t bytes = strtoull(argv[4], NULL, 10);
    static char buf[1 << 16];
    memset(buf, 'x', sizeof buf);
    char m = 's';
    const double t0 = now();
    if (full(fd, &m, 1, 1)) return fail("start");
    for (uint64_t left = bytes; left;) {
      const size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
      if (full(fd, buf, k, 1)) return fail("send");
      left -= k;
    }
    shutdown(fd, SHUT_WR);
    uint64_t got = 0;
    if (full(fd, &got, sizeof got, 0)) return fail("the server's count");
    const double s = now() - t0;
    if (got != bytes) { fprintf(stderr, "netprobe: the server read %llu of %llu bytes\n",
                                (unsigned long long)got, (unsigned long long)bytes); return 1; }
    printf("sent %llu bytes in %.4f s: %.0f Mbit/s\n", (unsigned long long)bytes, s, 8e-6 * (double)bytes / s);
  }
  close(fd);
  return 0;
}
