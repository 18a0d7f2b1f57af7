// Launch plans (ot/dist.h), the Open MPI side: a plain hostfile read into a plan,
// the hostfile / rankfile a plan needs, and the mpirun command line.
#include "internal.h"
#include "io/files.h"
#include "ot/dist.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

static bool host_ok(const char *s) {
  const size_t n = strlen(s);
  if (!n || n >= OT_LAUNCH_HOST_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && !strchr(".-_:", s[i])) return false;
  return true;
}

// One line of a hostfile ('#' comment already cut): host and its slots (0: an empty line).
static ot_status hostfile_line(char *line, const char *path, int ln, char *host, long *slots) {
  *slots = 0;
  char *save = NULL, *tok = strtok_r(line, " \t\r", &save);
  if (!tok) return OT_OK;
  if (!host_ok(tok))
    return ot_error(OT_EFORMAT, "%s:%d: '%.60s' is not a host name or IP address", path, ln, tok);
  snprintf(host, OT_LAUNCH_HOST_MAX, "%s", tok);
  *slots = 1;   // a bare host: one slot
  while ((tok = strtok_r(NULL, " \t\r", &save))) {
    char *eq = strchr(tok, '=');
    if (!eq) return ot_error(OT_EFORMAT, "%s:%d: '%.60s' is not slots=N", path, ln, tok);
    *eq = 0;
    char *end;
    errno = 0;
    const long v = strtol(eq + 1, &end, 10);
    if (!strcmp(tok, "slots")) {
      if (end == eq + 1 || *end || errno || v < 1 || v > OT_LAUNCH_RANKS_MAX)
        return ot_error(OT_EFORMAT, "%s:%d: slots=%.20s is not a positive integer", path, ln, eq + 1);
      *slots = v;
    } else if (strcmp(tok, "max_slots") && strcmp(tok, "max-slots")) {
      return ot_error(OT_EFORMAT, "%s:%d: '%.40s=' is not a hostfile field (host slots=N [max_slots=M])", path,
                      ln, tok);
    }
  }
  return OT_OK;
}

ot_status ot_launch_read_hostfile(ot_launch_plan *p, const char *path) {
  if (!p || !path) return ot_error(OT_EINVAL, "ot_launch_read_hostfile: plan or path is NULL");
  memset(p, 0, sizeof *p);
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(path, (size_t)16 << 20, &text, &len));
  ot_status s = OT_OK;
  int lines = 1;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  char (*host)[OT_LAUNCH_HOST_MAX] = ot_mem_alloc((size_t)lines * sizeof *host, OT_MEM_OTHER);
  long *slots = ot_mem_alloc((size_t)lines * sizeof *slots, OT_MEM_OTHER);
  int nh = 0;
  long total = 0;
  if (!host || !slots) s = ot_error(OT_ENOMEM, "%s: out of memory", path);
  char *line = text;
  for (int ln = 1; s == OT_OK && line; ln++) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char h[OT_LAUNCH_HOST_MAX];
    long k;
    s = hostfile_line(line, path, ln, h, &k);
    if (s == OT_OK && k) {
      int j = 0;
      while (j < nh && strcmp(host[j], h)) j++;   // a host on several lines adds up
      if (j == nh) { memcpy(host[nh], h, sizeof h); slots[nh++] = 0; }
      slots[j] += k;
      total += k;
      if (total > OT_LAUNCH_RANKS_MAX) s = ot_error(OT_EFORMAT, "%s: more than %d slots", path, OT_LAUNCH_RANKS_MAX);
    }
    line = nl ? nl + 1 : NULL;
  }
  if (s == OT_OK && !total) s = ot_error(OT_EFORMAT, "%s: no host in the hostfile (lines 'host slots=N')", path);
  if (s == OT_OK) {
    p->rank = ot_mem_alloc((size_t)total * sizeof *p->rank, OT_MEM_OTHER);
    p->host = ot_mem_alloc((size_t)nh * sizeof *p->host, OT_MEM_OTHER);
    p->slots = ot_mem_alloc((size_t)nh * sizeof *p->slots, OT_MEM_OTHER);
    if (!p->rank || !p->host || !p->slots) s = ot_error(OT_ENOMEM, "%s: out of memory", path);
  }
  if (s == OT_OK) {   // ranks fill the hosts in order
    int r = 0;
    for (int j = 0; j < nh; j++) {
      memcpy(p->host[j], host[j], OT_LAUNCH_HOST_MAX);
      p->slots[j] = (int)slots[j];
      for (int k = 0; k < slots[j]; k++, r++) p->rank[r] = (ot_launch_rank){j, k, k};
    }
    p->n_ranks = r;
    p->n_hosts = nh;
  }
  if (s != OT_OK) ot_launch_free(p);
  ot_mem_free(host);
  ot_mem_free(slots);
  free(text);
  return s;
}

ot_status ot_launch_write(const ot_launch_plan *p, const char *dir, int threads, char *hostfile,
                          char *rankfile, size_t cap) {
  if (!p || !dir || !hostfile || !rankfile || !cap || p->n_ranks < 1 || threads < 1)
    return ot_error(OT_EINVAL, "ot_launch_write: an empty plan, no directory or threads < 1");
  OT_TRY(ot__mkdirs(dir));
  OT_TRY(ot__join(hostfile, cap, dir, "hostfile"));
  rankfile[0] = 0;
  const size_t line = OT_LAUNCH_HOST_MAX + 64;
  const size_t n = (size_t)(p->n_hosts > p->n_ranks ? p->n_hosts : p->n_ranks) * line + 256;
  char *text = ot_mem_alloc(n, OT_MEM_OTHER);
  if (!text) return ot_error(OT_ENOMEM, "ot_launch_write: out of memory");
  size_t k = (size_t)snprintf(text, n, "# Open MPI hostfile written by ot launch: %d ranks on %d hosts\n",
                              p->n_ranks, p->n_hosts);
  for (int h = 0; h < p->n_hosts; h++) k += (size_t)snprintf(text + k, n - k, "%s slots=%d\n", p->host[h], p->slots[h]);
  ot_status s = ot__write_file(hostfile, text, k);
  if (s == OT_OK && p->rankfile) {   // rank R on its host's cores local*T .. local*T + T - 1
    s = ot__join(rankfile, cap, dir, "rankfile");
    k = (size_t)snprintf(text, n, "# Open MPI rankfile written by ot launch: rank order of the rank table\n");
    for (int r = 0; s == OT_OK && r < p->n_ranks; r++) {
      const ot_launch_rank *q = &p->rank[r];
      const long lo = (long)q->local * threads, hi = lo + threads - 1;
      if (threads > 1) k += (size_t)snprintf(text + k, n - k, "rank %d=%s slot=%ld-%ld\n", r, p->host[q->host], lo, hi);
      else k += (size_t)snprintf(text + k, n - k, "rank %d=%s slot=%ld\n", r, p->host[q->host], lo);
    }
    if (s == OT_OK) s = ot__write_file(rankfile, text, k);
  }
  ot_mem_free(text);
  return s;
}

void ot_launch_argv_free(char **argv) { ot_mem_free(argv); }

ot_status ot_launch_argv(const ot_launch_plan *p, const ot_launch_cmd *c, char ***argv, int *argc) {
  if (!p || !c || !argv || !argc) return ot_error(OT_EINVAL, "ot_launch_argv: an argument is NULL");
  *argv = NULL;
  *argc = 0;
  if (p->n_ranks < 1 || !c->hostfile || c->threads < 1 || c->n_cmd < 1 || !c->cmd || (c->n_extra && !c->extra))
    return ot_error(OT_EINVAL, "ot_launch_argv: needs ranks, a hostfile, threads >= 1 and a program");
  if (p->rankfile && !(c->rankfile && c->rankfile[0]))
    return ot_error(OT_EINVAL, "ot_launch_argv: the rank order of this plan needs its rankfile (ot_launch_write)");
  char np[16], pe[32], omp[48];
  if (c->np < 0 || (p->rankfile && c->np && c->np != p->n_ranks))
    return ot_error(OT_EINVAL, "ot_launch_argv: np %d (the rank table has %d ranks)", c->np, p->n_ranks);
  snprintf(np, sizeof np, "%d", c->np ? c->np : p->n_ranks);
  snprintf(pe, sizeof pe, c->threads > 1 ? "slot:PE=%d" : "slot", c->threads);
  snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%d", c->threads);
  const char *fixed[16];
  int nf = 0;
  fixed[nf++] = c->mpirun && c->mpirun[0] ? c->mpirun : "mpirun";
  fixed[nf++] = "-np";
  fixed[nf++] = np;
  fixed[nf++] = "--hostfile";
  fixed[nf++] = c->hostfile;
  if (p->rankfile) {   // the rankfile places and binds each rank
    fixed[nf++] = "--rankfile";
    fixed[nf++] = c->rankfile;
  } else {
    fixed[nf++] = "--map-by";
    fixed[nf++] = c->bind ? pe : "slot";
    fixed[nf++] = "--bind-to";
    fixed[nf++] = c->bind ? "core" : "none";
  }
  fixed[nf++] = "-x";
  fixed[nf++] = omp;
  const int n = nf + c->n_extra + c->n_cmd;
  size_t bytes = (size_t)(n + 1) * sizeof(char *);
  for (int i = 0; i < n; i++) {
    const char *a = i < nf ? fixed[i] : i < nf + c->n_extra ? c->extra[i - nf] : c->cmd[i - nf - c->n_extra];
    if (!a) return ot_error(OT_EINVAL, "ot_launch_argv: argument %d is NULL", i);
    bytes += strlen(a) + 1;
  }
  char **v = ot_mem_alloc(bytes, OT_MEM_OTHER);
  if (!v) return ot_error(OT_ENOMEM, "ot_launch_argv: out of memory");
  char *str = (char *)(v + n + 1);
  for (int i = 0; i < n; i++) {
    const char *a = i < nf ? fixed[i] : i < nf + c->n_extra ? c->extra[i - nf] : c->cmd[i - nf - c->n_extra];
    const size_t k = strlen(a) + 1;
    memcpy(str, a, k);
    v[i] = str;
    str += k;
  }
  v[n] = NULL;
  *argv = v;
  *argc = n;
  return OT_OK;
}
