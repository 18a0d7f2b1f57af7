// Soak run of `ot serve` (not a test; asserts nothing): starts the server as
// a child process on an ephemeral port, sends --requests requests of mixed
// kinds one after the other, and prints the server's resident set
// (/proc/PID/status VmRSS) every --every requests, with its change from the
// first sample after the warm-up (the first --every requests). The mix, in
// turn: a valid completion on a kept-alive connection, a 3000-character prompt
// beyond the context, bad JSON, max_tokens beyond the context, a streamed
// completion, and a stream the client drops after its first bytes.
//   ./build/ot train --model tiny --steps 20 --out /tmp/soak_ckpt
//   ./build/bench_serve_soak [--ot ./build/ot] [--requests N] [--every N] -- --checkpoint /tmp/soak_ckpt/latest
// (everything after -- goes to `ot serve`).
#define _GNU_SOURCE
#include "ot/ot.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); fd = -1; }
  return fd;
}

static bool send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

// Reads one response: by Content-Length, else to the end of the stream. Returns its status (0: none).
static int read_resp(int fd, char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    buf[n] = 0;
    const char *he = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "\r\nContent-Length:");
    if (he && cl && cl < he && n >= (size_t)(he + 4 - buf) + (size_t)atol(cl + 17)) break;
    if (n + 1 >= cap) break;
    ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
    if (k <= 0) break;
    n += (size_t)k;
  }
  return n > 12 && !strncmp(buf, "HTTP/1.1 ", 9) ? atoi(buf + 9) : 0;
}

static double vmrss_mib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  double kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) kb = atof(line + 6);
  if (f) fclose(f);
  return kb / 1024.0;
}

int main(int argc, char **argv) {
  const char *ot = "./build/ot";
  int total = 10000, every = 1000, sep = argc;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--")) { sep = i; break; }
    if (!strcmp(argv[i], "--ot") && i + 1 < argc) ot = argv[++i];
    else if (!strcmp(argv[i], "--requests") && i + 1 < argc) total = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--every") && i + 1 < argc) every = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_serve_soak [--ot PATH] [--requests N] [--every N] -- OT_SERVE_ARGS...\n");
      return 2;
    }
  }
  if (sep >= argc - 1 || total < 1 || every < 1) {
    fprintf(stderr, "bench_serve_soak: give the model after --, e.g. -- --checkpoint DIR\n");
    return 2;
  }
  int out[2];
  if (pipe(out) != 0) return 1;
  const pid_t pid = fork();
  if (pid == 0) {
    char **av = calloc((size_t)(argc - sep + 6), sizeof *av);
    int k = 0;
    av[k++] = (char *)ot;
    av[k++] = "serve";
    av[k++] = "--port";
    av[k++] = "0";
    av[k++] = "--quiet";
    for (int i = sep + 1; i < argc; i++) av[k++] = argv[i];
    dup2(out[1], 1);
    close(out[0]);
    execv(ot, av);
    perror("bench_serve_soak: exec");
    _exit(127);
  }
  close(out[1]);
  FILE *so = fdopen(out[0], "r");
  char line[512];
  int port = 0;
  while (!port && so && fgets(line, sizeof line, so)) {
    const char *p = strstr(line, "listening on http://");
    const char *colon = p ? strrchr(p, ':') : NULL;
    if (colon) port = atoi(colon + 1);
  }
  if (!port) {
    fprintf(stderr, "bench_serve_soak: `%s serve` did not start\n", ot);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return 1;
  }
  static char big[3300], resp[1 << 16], req[4096];
  int bn = snprintf(big, sizeof big, "{\"prompt\": \"");
  memset(big + bn, 'x', 3000);
  snprintf(big + bn + 3000, sizeof big - (size_t)bn - 3000, "\", \"max_tokens\": 2}");
  const char *bodies[6] = {
      "{\"prompt\": \"ROMEO: what light through yonder window breaks? it is the east\", \"max_tokens\": 8}", big,
      "{\"prompt\": \"abc\", \"max_tokens\": ", "{\"prompt\": \"To be\", \"max_tokens\": 100000000}",
      "{\"prompt\": \"JULIET:\", \"max_tokens\": 8, \"stream\": true}",
      "{\"prompt\": \"KING:\", \"max_tokens\": 64, \"stream\": true}"};
  const int want[6] = {200, 400, 400, 400, 200, 200};
  printf("ot serve (pid %d, port %d): %d requests, 6 kinds in turn\n", (int)pid, port, total);
  printf("%10s %12s %10s %10s %12s\n", "requests", "VmRSS MiB", "vs warm", "req/s", "unexpected");
  int keep = -1, bad = 0;
  double base = -1, t0 = ot_now(), lo = 1e30, hi = -1e30;
  for (int i = 1; i <= total; i++) {
    const int kind = (i - 1) % 6;
    const size_t n = (size_t)snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                      "application/json\r\nContent-Length: %zu\r\n%s\r\n%s", strlen(bodies[kind]),
                                      kind == 0 ? "" : "Connection: close\r\n", bodies[kind]);
    int fd = kind == 0 && keep >= 0 ? keep : dial(port), st = 0;
    if (fd >= 0 && fd == keep && !(send_all(fd, req, n) && (st = read_resp(fd, resp, sizeof resp)))) {
      close(fd);   // the server closed the kept-alive connection meanwhile: once more on a new one
      keep = -1;
      fd = dial(port);
    }
    if (!st && fd >= 0 && send_all(fd, req, n)) {
      if (kind == 5) {   // the client leaves after the first bytes of the stream
        const ssize_t k = recv(fd, resp, 64, 0);
        st = k > 12 ? atoi(resp + 9) : 0;
      } else {
        st = read_resp(fd, resp, sizeof resp);
      }
    }
    if (kind == 0 && st == 200) keep = fd;
    else {
      if (fd >= 0) close(fd);
      if (kind == 0) keep = -1;
    }
    bad += st != want[kind];
    if (i % every == 0) {
      const double rss = vmrss_mib(pid), dt = ot_now() - t0;
      if (base < 0) base = rss;
      else { lo = rss < lo ? rss : lo; hi = rss > hi ? rss : hi; }
      printf("%10d %12.1f %9.1f%% %10.0f %12d\n", i, rss, 100.0 * (rss - base) / base, every / dt, bad);
      fflush(stdout);
      t0 = ot_now();
    }
  }
  if (keep >= 0) close(keep);
  if (hi >= 0)
    printf("after the warm-up: VmRSS %.1f .. %.1f MiB, within %.1f%% of %.1f MiB\n", lo, hi,
           100.0 * ((hi - base > base - lo ? hi - base : base - lo) / base), base);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("ot serve exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
