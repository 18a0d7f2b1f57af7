// Profiler: named nested spans. Off: ot_prof_begin is one branch. On: each
// span is aggregated per name (for the summary) and recorded as an event (for
// the Chrome trace) in a buffer allocated when profiling is enabled.
// Spans are opened and closed by the thread that calls the library.
#include "internal.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#define MAX_EVENTS (1 << 18)
#define MAX_NAMES 256
#define MAX_DEPTH 64

typedef struct { const char *name; double t0, t1; int depth; double value; } prof_event;   // depth < 0: a counter
typedef struct { const char *name; long calls; double total, flops, bytes; } prof_agg;
typedef struct { const char *name; double t0, flops, bytes; } open_span;

static bool g_on;
static prof_event *g_ev;
static long g_nev, g_dropped;
static prof_agg g_agg[MAX_NAMES];
static int g_nagg;
static open_span g_stack[MAX_DEPTH];
static int g_depth;
static double g_epoch, g_top_total;
#define MAX_META 64
typedef struct { char key[64]; double value; } prof_meta;
static prof_meta g_meta[MAX_META];
static int g_nmeta;

void ot_prof_reset(void) {
  g_nev = g_dropped = 0; g_nagg = 0; g_depth = 0; g_top_total = 0; g_nmeta = 0;
  g_epoch = ot_now();
}

void ot_prof_enable(bool on) {
  if (on && !g_ev) {
    g_ev = ot_mem_alloc(sizeof(prof_event) * MAX_EVENTS, OT_MEM_OTHER);
    if (!g_ev) return;  // error already set; profiling stays off
    ot_prof_reset();
  }
  g_on = on;
}
bool ot_prof_enabled(void) { return g_on; }

int ot_prof_begin(const char *name, double flops, double bytes) {
  if (!g_on) return -1;
  if (g_depth >= MAX_DEPTH) return -1;
  open_span *s = &g_stack[g_depth];
  s->name = name; s->flops = flops; s->bytes = bytes; s->t0 = ot_now();
  return g_depth++;
}

static prof_agg *agg_for(const char *name) {
  for (int i = 0; i < g_nagg; i++)
    if (g_agg[i].name == name || strcmp(g_agg[i].name, name) == 0) return &g_agg[i];
  if (g_nagg == MAX_NAMES) return NULL;
  prof_agg *a = &g_agg[g_nagg++];
  memset(a, 0, sizeof *a);
  a->name = name;
  return a;
}

void ot_prof_end(int token) {
  if (token < 0 || !g_on || token != g_depth - 1) return;
  double t1 = ot_now();
  open_span *s = &g_stack[--g_depth];
  prof_agg *a = agg_for(s->name);
  if (a) { a->calls++; a->total += t1 - s->t0; a->flops += s->flops; a->bytes += s->bytes; }
  if (g_depth == 0) g_top_total += t1 - s->t0;
  if (g_nev < MAX_EVENTS) g_ev[g_nev++] = (prof_event){s->name, s->t0, t1, g_depth, 0.0};
  else g_dropped++;
}

void ot_prof_counter(const char *name, double value) {
  if (!g_on || !name) return;
  const double t = ot_now();
  if (g_nev < MAX_EVENTS) g_ev[g_nev++] = (prof_event){name, t, t, -1, value};
  else g_dropped++;
}

void ot_prof_meta(const char *key, double value) {
  if (!g_on || !key) return;
  int i = 0;
  while (i < g_nmeta && strcmp(g_meta[i].key, key)) i++;
  if (i == MAX_META) return;
  if (i == g_nmeta) snprintf(g_meta[g_nmeta++].key, sizeof g_meta[0].key, "%s", key);
  g_meta[i].value = value;
}

ot_status ot_prof_write_trace(const char *path) {
  OT_CHECK_PTR(path, "ot_prof_write_trace");
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return ot_error(OT_EINVAL, "ot_prof_write_trace: path too long");
  FILE *f = fopen(tmp, "w");
  if (!f) return ot_error(OT_EIO, "cannot write trace '%s': %s", tmp, strerror(errno));
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  for (long i = 0; i < g_nev; i++) {
    const prof_event *e = &g_ev[i];
    if (e->depth < 0)
      fprintf(f, "%s{\"name\":\"%s\",\"ph\":\"C\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"args\":{\"value\":%.9g}}\n",
              i ? "," : "", e->name, (e->t0 - g_epoch) * 1e6, isfinite(e->value) ? e->value : 0.0);
    else
      fprintf(f, "%s{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f}\n",
              i ? "," : "", e->name, (e->t0 - g_epoch) * 1e6, (e->t1 - e->t0) * 1e6);
  }
  fprintf(f, "],\"otherData\":{\"dropped_events\":%ld", g_dropped);
  for (int i = 0; i < g_nmeta; i++) {   // keys are ours: letters, digits, '_'
    if (isfinite(g_meta[i].value)) fprintf(f, ",\"%s\":%.9g", g_meta[i].key, g_meta[i].value);
    else fprintf(f, ",\"%s\":null", g_meta[i].key);
  }
  fprintf(f, "}}\n");
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  if (!ok || rename(tmp, path) != 0) { remove(tmp); return ot_error(OT_EIO, "cannot write trace '%s'", path); }
  return OT_OK;
}

static int by_total(const void *a, const void *b) {
  double x = ((const prof_agg *)a)->total, y = ((const prof_agg *)b)->total;
  return x < y ? 1 : x > y ? -1 : 0;
}

void ot_prof_summary(FILE *f) {
  prof_agg sorted[MAX_NAMES];
  memcpy(sorted, g_agg, sizeof(prof_agg) * g_nagg);
  qsort(sorted, g_nagg, sizeof(prof_agg), by_total);
  double denom = g_top_total > 0 ? g_top_total : 1;
  fprintf(f, "%-28s %8s %11s %7s %9s %9s\n", "span", "calls", "total ms", "share", "GFLOP/s", "GB/s");
  for (int i = 0; i < g_nagg; i++) {
    const prof_agg *a = &sorted[i];
    fprintf(f, "%-28s %8ld %11.3f %6.1f%% ", a->name, a->calls, a->total * 1e3, 100 * a->total / denom);
    if (a->flops > 0) fprintf(f, "%9.1f ", a->flops / a->total * 1e-9); else fprintf(f, "%9s ", "-");
    if (a->bytes > 0) fprintf(f, "%9.1f\n", a->bytes / a->total * 1e-9); else fprintf(f, "%9s\n", "-");
  }
  if (g_dropped) fprintf(f, "(%ld trace events dropped: buffer holds %d)\n", g_dropped, MAX_EVENTS);
}
