// A delaying Ethernet switch for the simulated hosts (tests/netns/hosts.sh) on kernels without
// the netem qdisc. It opens N TAP devices (PREFIX1..PREFIXN in its own network namespace; the
// harness then moves each into its host), and forwards every frame a host sends to the port of
// its destination MAC address (learned; broadcast and unknown addresses to every other port)
// after DELAY_US, and no faster than RATE bits/s into each port (a frame waits for the previous
// one to be delivered: a full-duplex link's receive side). A port's queue holds QUEUE frames;
// more are dropped (as a switch's buffer would). Frames are never changed.
//   netdelay PREFIX N DELAY_US RATE_BPS      (RATE_BPS 0: no rate; prints "ready" once the taps exist)
// Runs until killed. The TAPs have no offloads, so the kernel hands over whole, checksummed frames.
#define _GNU_SOURCE   // ppoll
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define PORTS_MAX 64
#define FRAME_MAX 9216   // MTU 9000 + Ethernet header, rounded up
#define QUEUE 1024       // frames per port

typedef struct {
  int64_t due;           // ns, CLOCK_MONOTONIC
  uint16_t len;
  unsigned char data[FRAME_MAX];
} frame;

typedef struct {
  int fd;
  frame *q;              // ring of QUEUE frames waiting to be written into this port
  int head, n;
  int64_t busy;          // when the port's receive side is free again (ns)
  unsigned char mac[6];  // the host behind the port (learned), valid when known
  int known;
  uint64_t dropped;
} port;

static port ports[PORTS_MAX];
static int nports;
static int64_t delay_ns;
static double ns_per_byte;   // 0: no rate

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int tap_open(const char *name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct ifreq r;
  memset(&r, 0, sizeof r);
  r.ifr_flags = IFF_TAP | IFF_NO_PI;
  snprintf(r.ifr_name, IFNAMSIZ, "%s", name);
  if (ioctl(fd, TUNSETIFF, &r) < 0) { close(fd); return -1; }
  return fd;
}

// Queues a copy of the frame for port d, due after the delay and after the port's previous frame.
static void enqueue(int d, const unsigned char *buf, int len, int64_t t) {
  port *p = &ports[d];
  if (p->n == QUEUE) { p->dropped++; return; }
  frame *f = &p->q[(p->head + p->n) % QUEUE];
  int64_t due = t + delay_ns;
  if (ns_per_byte > 0) {
    if (due < p->busy) due = p->busy;
    due += (int64_t)(ns_per_byte * (len + 24));   // preamble, FCS and gap: 24 bytes on the wire
    p->busy = due;
  }
  f->due = due;
  f->len = (uint16_t)len;
  memcpy(f->data, buf, (size_t)len);
  p->n++;
}

static void from_port(int s, int64_t t) {
  static unsigned char buf[FRAME_MAX];
  for (;;) {
    const ssize_t len = read(ports[s].fd, buf, sizeof buf);
    if (len < 0) return;   // EAGAIN: nothing more; EIO: the port is down
    if (len < 14) continue;
    memcpy(ports[s].mac, buf + 6, 6);
    ports[s].known = 1;
    int d = -1;
    if (!(buf[0] & 1))     // unicast: the port that sent from that address
      for (int i = 0; i < nports && d < 0; i++)
        if (i != s && ports[i].known && !memcmp(ports[i].mac, buf, 6)) d = i;
    if (d >= 0) enqueue(d, buf, (int)len, t);
    else
      for (int i = 0; i < nports; i++)
        if (i != s) enqueue(i, buf, (int)len, t);
  }
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: netdelay PREFIX N DELAY_US RATE_BPS\n");
    return 2;
  }
  nports = atoi(argv[2]);
  delay_ns = (int64_t)(atof(argv[3]) * 1000.0);
  const double bps = atof(argv[4]);
  ns_per_byte = bps > 0 ? 8e9 / bps : 0;
  if (nports < 1 || nports > PORTS_MAX || delay_ns < 0 || bps < 0) {
    fprintf(stderr, "netdelay: N in 1..%d, DELAY_US >= 0, RATE_BPS >= 0\n", PORTS_MAX);
    return 2;
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);   // wake on time, not up to 50 us late
  struct pollfd pfd[PORTS_MAX];
  for (int i = 0; i < nports; i++) {
    char name[IFNAMSIZ];
    snprintf(name, sizeof name, "%s%d", argv[1], i + 1);
    ports[i].fd = tap_open(name);
    ports[i].q = malloc(QUEUE * sizeof(frame));
    if (ports[i].fd < 0 || !ports[i].q) {
      fprintf(stderr, "netdelay: TAP %s: %s\n", name, strerror(errno));
      return 1;
    }
    pfd[i] = (struct pollfd){.fd = ports[i].fd, .events = POLLIN};
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    int64_t t = now_ns(), next = -1;
    for (int i = 0; i < nports; i++) {   // deliver what is due
      port *p = &ports[i];
      while (p->n && p->q[p->head].due <= t) {
        if (write(p->fd, p->q[p->head].data, p->q[p->head].len) < 0 && errno == EAGAIN) break;
        p->head = (p->head + 1) % QUEUE;
        p->n--;
      }
      if (p->n && (next < 0 || p->q[p->head].due < next)) next = p->q[p->head].due;
    }
    struct timespec wait, *w = NULL;
    if (next >= 0) {
      const int64_t d = next > t ? next - t : 0;
      wait = (struct timespec){d / 1000000000, d % 1000000000};
      w = &wait;
    }
    if (ppoll(pfd, (nfds_t)nports, w, NULL) < 0 && errno != EINTR) {
      perror("netdelay: ppoll");
      return 1;
    }
    t = now_ns();
    for (int i = 0; i < nports; i++)
      if (pfd[i].revents & POLLIN) from_port(i, t);
  }
}
