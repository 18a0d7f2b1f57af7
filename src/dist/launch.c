// Launch plans (ot/dist.h): a MindSpore / HCCL rank table read and checked into
// (rank -> host, position there). The hostfile, the files Open MPI reads and the
// mpirun command line are in launch_mpirun.c. Nothing here starts MPI: `ot launch`
// runs the command.
#include "internal.h"
#include "io/files.h"
#include "io/json.h"
#include "ot/dist.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

void ot_launch_free(ot_launch_plan *p) {
  if (!p) return;
  ot_mem_free(p->rank);
  ot_mem_free(p->host);
  ot_mem_free(p->slots);
  memset(p, 0, sizeof *p);
}

// Room for n ranks and n hosts (at most); zeroed.
static ot_status plan_alloc(ot_launch_plan *p, int n) {
  memset(p, 0, sizeof *p);
  p->rank = ot_mem_alloc((size_t)n * sizeof *p->rank, OT_MEM_OTHER);
  p->host = ot_mem_alloc((size_t)n * sizeof *p->host, OT_MEM_OTHER);
  p->slots = ot_mem_alloc((size_t)n * sizeof *p->slots, OT_MEM_OTHER);
  if (!p->rank || !p->host || !p->slots) {
    ot_launch_free(p);
    return ot_error(OT_ENOMEM, "launch plan of %d ranks: out of memory", n);
  }
  memset(p->slots, 0, (size_t)n * sizeof *p->slots);
  return OT_OK;
}

// A host name or an IPv4 / IPv6 address: letters, digits, '.', '-', '_', ':'.
static bool host_ok(const char *s, size_t n) {
  if (!n || n >= OT_LAUNCH_HOST_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && !strchr(".-_:", s[i])) return false;
  return true;
}

// An integer in [0, hi] written as a JSON integer or a string of digits (HCCL writes "0").
static bool json_index(const ot_json *v, long hi, long *out) {
  if (!v) return false;
  if (v->type == OT_JNUM) {
    if (!v->is_int || v->i < 0 || v->i > hi) return false;
    *out = (long)v->i;
    return true;
  }
  if (v->type != OT_JSTR || !v->len || v->len > 9) return false;
  for (size_t i = 0; i < v->len; i++)
    if (!isdigit((unsigned char)v->s[i])) return false;
  *out = strtol(v->s, NULL, 10);
  return *out <= hi;
}

// The value of v as text for messages ("\"x\"", 3, an array).
static const char *shown(const ot_json *v, char *buf, size_t cap) {
  if (!v) return "missing";
  if (v->type == OT_JSTR) snprintf(buf, cap, "\"%.40s\"", v->s);
  else if (v->type == OT_JNUM && v->is_int) snprintf(buf, cap, "%lld", (long long)v->i);
  else if (v->type == OT_JNUM) snprintf(buf, cap, "%g", v->d);
  else snprintf(buf, cap, "a %s", ot_json_type_name(v->type));
  return buf;
}

#define BADT(...) do { s = ot_error(OT_EFORMAT, __VA_ARGS__); goto out; } while (0)
#define FORM "(MindSpore's rank table: {\"server_count\": \"1\", \"server_list\": [{\"server_id\": " \
             "\"10.0.0.1\", \"device\": [{\"device_id\": \"0\", \"rank_id\": \"0\"}, ...]}]})"

// Hosts in the order of their lowest rank, each rank's position on its host by
// device_id, and whether the order needs a rankfile. p->rank[].host holds the
// server index on entry; n_srv servers.
static ot_status order_hosts(ot_launch_plan *p, char (*srv)[OT_LAUNCH_HOST_MAX], int n_srv) {
  int *remap = ot_mem_alloc((size_t)n_srv * sizeof *remap, OT_MEM_OTHER);
  if (!remap) return ot_error(OT_ENOMEM, "launch plan: out of memory");
  for (int i = 0; i < n_srv; i++) remap[i] = -1;
  p->n_hosts = 0;
  for (int r = 0; r < p->n_ranks; r++) {
    const int h = p->rank[r].host;
    if (remap[h] < 0) {
      remap[h] = p->n_hosts;
      memcpy(p->host[p->n_hosts++], srv[h], OT_LAUNCH_HOST_MAX);
    } else if (remap[h] != p->n_hosts - 1) {
      p->rankfile = true;   // the host's ranks are not one run
    }
  }
  for (int r = 0; r < p->n_ranks; r++) {
    ot_launch_rank *k = &p->rank[r];
    k->host = remap[k->host];
    p->slots[k->host]++;
  }
  for (int r = 0; r < p->n_ranks; r++) {   // position by device_id among the host's ranks
    int local = 0;
    for (int q = 0; q < p->n_ranks; q++)
      local += p->rank[q].host == p->rank[r].host && p->rank[q].device < p->rank[r].device;
    p->rank[r].local = local;
  }
  ot_mem_free(remap);
  return OT_OK;
}

ot_status ot_launch_parse_rank_table(ot_launch_plan *p, const char *text, size_t len, const char *what) {
  if (!p || !text) return ot_error(OT_EINVAL, "ot_launch_parse_rank_table: plan or text is NULL");
  if (!what) what = "rank table";
  memset(p, 0, sizeof *p);
  ot_json_doc doc = {0};
  OT_TRY(ot_json_parse(&doc, text, len, 8, what));
  ot_status s = OT_OK;
  char b1[64];
  int *seen = NULL, n = 0;
  char (*srv)[OT_LAUNCH_HOST_MAX] = NULL;
  struct at { int srv, dev; } *where = NULL;   // where each rank was found
  const ot_json *root = doc.root;
  if (root->type != OT_JOBJ) BADT("%s: the rank table is %s, not an object " FORM, what, shown(root, b1, sizeof b1));
  const ot_json *st = ot_json_get(root, "status"), *sc = ot_json_get(root, "server_count"),
                *sl = ot_json_get(root, "server_list");
  if (st && (st->type != OT_JSTR || strcmp(st->s, "completed")))
    BADT("%s: 'status' is %s, not \"completed\" (the table is not final)", what, shown(st, b1, sizeof b1));
  long count;
  if (!sc) BADT("%s: 'server_count' is missing " FORM, what);
  if (!json_index(sc, 1 << 20, &count) || count < 1)
    BADT("%s: 'server_count' is %s, not a positive integer", what, shown(sc, b1, sizeof b1));
  if (!sl || sl->type != OT_JARR)
    BADT("%s: 'server_list' is %s, not a list of servers " FORM, what, sl ? shown(sl, b1, sizeof b1) : "missing");
  if (sl->n != count)
    BADT("%s: 'server_count' is %ld but 'server_list' holds %d server%s", what, count, sl->n, sl->n == 1 ? "" : "s");
  for (const ot_json *sv = sl->first; sv; sv = sv->next) {   // the world size first
    const ot_json *dv = sv->type == OT_JOBJ ? ot_json_get(sv, "device") : NULL;
    n += dv && dv->type == OT_JARR ? dv->n : 0;
  }
  if (n > OT_LAUNCH_RANKS_MAX) BADT("%s: %d devices, more than %d", what, n, OT_LAUNCH_RANKS_MAX);
  if (n < 1) n = 1;
  srv = ot_mem_alloc((size_t)sl->n * sizeof *srv, OT_MEM_OTHER);
  seen = ot_mem_alloc((size_t)OT_LAUNCH_RANKS_MAX * sizeof *seen, OT_MEM_OTHER);
  where = ot_mem_alloc((size_t)n * sizeof *where, OT_MEM_OTHER);
  if (!srv || !seen || !where || plan_alloc(p, n) != OT_OK) {
    s = ot_error(OT_ENOMEM, "%s: out of memory", what);
    goto out;
  }
  for (int r = 0; r < OT_LAUNCH_RANKS_MAX; r++) seen[r] = -1;
  int i = 0, total = 0;
  long max_rank = -1;
  for (const ot_json *sv = sl->first; sv; sv = sv->next, i++) {
    if (sv->type != OT_JOBJ) BADT("%s: server_list[%d] is %s, not an object", what, i, shown(sv, b1, sizeof b1));
    const ot_json *id = ot_json_get(sv, "server_id"), *dv = ot_json_get(sv, "device");
    if (!id || id->type != OT_JSTR || !host_ok(id->s, id->len))
      BADT("%s: server_list[%d]: 'server_id' is %s, not a host name or IP address", what, i,
           shown(id, b1, sizeof b1));
    snprintf(srv[i], OT_LAUNCH_HOST_MAX, "%s", id->s);
    for (int j = 0; j < i; j++)
      if (!strcmp(srv[j], srv[i]))
        BADT("%s: server '%s' is listed twice (server_list[%d] and [%d]); list each server once with "
             "all its devices", what, srv[i], j, i);
    if (!dv || dv->type != OT_JARR || dv->n < 1)
      BADT("%s: server_list[%d] (%s): 'device' is %s, not a non-empty list of devices", what, i, srv[i],
           !dv ? "missing" : dv->type == OT_JARR ? "empty" : shown(dv, b1, sizeof b1));
    int j = 0;
    for (const ot_json *d = dv->first; d; d = d->next, j++) {
      long dev, rank;
      if (d->type != OT_JOBJ)
        BADT("%s: server_list[%d] (%s) device[%d] is %s, not an object", what, i, srv[i], j, shown(d, b1, sizeof b1));
      if (!json_index(ot_json_get(d, "device_id"), 1 << 20, &dev))
        BADT("%s: server_list[%d] (%s) device[%d]: 'device_id' is %s, not a non-negative integer", what, i,
             srv[i], j, shown(ot_json_get(d, "device_id"), b1, sizeof b1));
      if (!json_index(ot_json_get(d, "rank_id"), OT_LAUNCH_RANKS_MAX - 1, &rank))
        BADT("%s: server_list[%d] (%s) device[%d]: 'rank_id' is %s, not an integer in [0, %d]", what, i,
             srv[i], j, shown(ot_json_get(d, "rank_id"), b1, sizeof b1), OT_LAUNCH_RANKS_MAX - 1);
      for (int q = 0; q < total; q++)
        if (where[q].srv == i && p->rank[q].device == dev)
          BADT("%s: server_list[%d] (%s): device_id %ld is listed twice", what, i, srv[i], dev);
      if (seen[rank] >= 0) {
        const struct at *w = &where[seen[rank]];
        BADT("%s: rank_id %ld appears twice: server_list[%d] (%s) device[%d] and server_list[%d] (%s) "
             "device[%d]; each rank is one device", what, rank, w->srv, srv[w->srv], w->dev, i, srv[i], j);
      }
      seen[rank] = total;
      where[total] = (struct at){i, j};
      p->rank[total] = (ot_launch_rank){i, (int)dev, 0};   // by position for now
      if (rank > max_rank) max_rank = rank;
      total++;
    }
  }
  for (int r = 0; r < total; r++)
    if (seen[r] < 0)
      BADT("%s: rank_id %d is missing: %d devices need ranks 0..%d, but the table has rank_id %ld", what, r,
           total, total - 1, max_rank);
  {   // by rank id
    ot_launch_rank *by = ot_mem_alloc((size_t)total * sizeof *by, OT_MEM_OTHER);
    if (!by) { s = ot_error(OT_ENOMEM, "%s: out of memory", what); goto out; }
    for (int r = 0; r < total; r++) by[r] = p->rank[seen[r]];
    memcpy(p->rank, by, (size_t)total * sizeof *by);
    ot_mem_free(by);
  }
  p->n_ranks = total;
  s = order_hosts(p, srv, sl->n);
out:
  if (s != OT_OK) ot_launch_free(p);
  ot_mem_free(srv);
  ot_mem_free(seen);
  ot_mem_free(where);
  ot_json_free(&doc);
  return s;
}

ot_status ot_launch_read_rank_table(ot_launch_plan *p, const char *path) {
  if (!p || !path) return ot_error(OT_EINVAL, "ot_launch_read_rank_table: plan or path is NULL");
  memset(p, 0, sizeof *p);
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(path, (size_t)64 << 20, &text, &len));
  ot_status s = ot_launch_parse_rank_table(p, text, len, path);
  free(text);
  return s;
}
