// Machine descriptions for the layout planner (ot/plan.h): built-in presets with the
// sources of their numbers, 'key = value' files, validation, and the measurement of
// this host (`ot plan --measure`).
#include "internal.h"
#include <errno.h>
#include <stddef.h>
#include "ot/dist.h"
#include "ot/attn.h"
#include "ot/ops.h"
#include "ot/plan.h"
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include <omp.h>

// ---------------------------------------------------------------- presets ---
typedef struct {
  const char *name;
  ot_machine m;
} preset;

static const preset k_presets[] = {
    {"a100-80gb",
     {.name = "a100-80gb",
      .source = "NVIDIA A100 80GB SXM datasheet: 312 TFLOP/s dense bf16 peak, 2039 GB/s HBM2e, 80 GB; "
                "GEMM rate 80% of peak (cuBLAS on large transformer GEMMs), attention 64% (FlashAttention-2 "
                "paper: 50-73% of peak forward + backward); DGX A100 user guide: 8 GPUs "
                "on NVSwitch (NVLink 3, 600 GB/s per GPU both directions; NCCL all-reduce bus bandwidth "
                "taken as 230 GB/s, 10 us), 8 x 200 Gb/s HDR InfiniBand per host (200 GB/s, 5 us)",
      .shared = false, .cores = 0, .devices_per_host = 8, .hosts = 1024,
      .mem_bytes = 80e9, .gemm_flops = 250e12, .attn_flops = 200e12, .peak_flops = 312e12, .mem_bw = 2039e9,
      .intra_bw = 230e9, .intra_lat = 10e-6, .inter_bw = 200e9, .inter_lat = 5e-6}},
    {"ascend-910",
     {.name = "ascend-910",
      .source = "Huawei Ascend 910 (Atlas 800 training server, model 9000): 256 TFLOP/s fp16 peak, "
                "32 GB HBM at 1200 GB/s per chip, GEMM rate 75% of peak, attention 50% (assumed); 8 chips "
                "per host on HCCS "
                "(all-reduce bus bandwidth taken as 90 GB/s, 15 us), 8 x 100 GbE RoCE per host "
                "(100 GB/s, 10 us): MindSpore's distributed-training hardware",
      .shared = false, .cores = 0, .devices_per_host = 8, .hosts = 1024,
      .mem_bytes = 32e9, .gemm_flops = 192e12, .attn_flops = 128e12, .peak_flops = 256e12, .mem_bw = 1200e9,
      .intra_bw = 90e9, .intra_lat = 15e-6, .inter_bw = 100e9, .inter_lat = 10e-6}},
};
#define N_PRESETS ((int)(sizeof k_presets / sizeof k_presets[0]))

const char *ot_machine_presets(void) { return "a100-80gb, ascend-910"; }

ot_status ot_machine_preset(const char *name, ot_machine *m) {
  if (!name || !m) return ot_error(OT_EINVAL, "ot_machine_preset: name or machine is NULL");
  for (int i = 0; i < N_PRESETS; i++)
    if (!strcmp(name, k_presets[i].name)) {
      *m = k_presets[i].m;
      return OT_OK;
    }
  return ot_error(OT_EINVAL, "machine '%.60s' is not a preset (%s) nor a file; measure this one with "
                  "`ot plan --measure --out machine.conf`", name, ot_machine_presets());
}

// ------------------------------------------------------------------ files ---
// The keys of a machine file, in the order written: doubles, ints and bools by offset.
typedef enum { K_STR, K_BOOL, K_INT, K_DBL } kind;
typedef struct {
  const char *key, *help;
  kind k;
  size_t off;
} field;
#define F(key, k, member, help) {key, help, k, offsetof(ot_machine, member)}
static const field k_fields[] = {
    F("name", K_STR, name, "a name for the tables"),
    F("source", K_STR, source, "where the numbers come from"),
    F("shared", K_BOOL, shared, "true: a CPU host whose ranks share its cores"),
    F("cores", K_INT, cores, "cores per host (shared hosts)"),
    F("devices_per_host", K_INT, devices_per_host, "ranks per host"),
    F("hosts", K_INT, hosts, "hosts available"),
    F("mem_bytes", K_DBL, mem_bytes, "memory per device (shared: per host)"),
    F("gemm_flops", K_DBL, gemm_flops, "GEMM FLOP/s per device (shared: every core together)"),
    F("core_gemm_flops", K_DBL, core_gemm_flops, "shared: one core's GEMM FLOP/s (a one-thread rank)"),
    F("attn_flops", K_DBL, attn_flops, "causal flash attention forward + backward FLOP/s (0: as gemm_flops)"),
    F("core_attn_flops", K_DBL, core_attn_flops, "shared: one core's attention FLOP/s"),
    F("gemm_rows_half", K_DBL, gemm_rows_half, "rows at which a GEMM runs at half gemm_flops (0: never)"),
    F("attn_len_half", K_DBL, attn_len_half, "sequence length at which attention runs at half attn_flops"),
    F("peak_flops", K_DBL, peak_flops, "FMA peak for the MFU (same unit as gemm_flops)"),
    F("mem_bw", K_DBL, mem_bw, "memory-bound ops' bandwidth, bytes/s (same unit)"),
    F("rank_overhead", K_DBL, rank_overhead, "bytes a rank holds beyond the tracked allocations"),
    F("intra_bw", K_DBL, intra_bw, "all-reduce bus bandwidth inside a host, bytes/s"),
    F("intra_lat", K_DBL, intra_lat, "per-message latency inside a host, s"),
    F("intra_bw4", K_DBL, intra_bw4, "shared: bus bandwidth with 4 ranks of a host moving data at once (0: unmeasured)"),
    F("intra_bw8", K_DBL, intra_bw8, "shared: the same with 8 ranks"),
    F("inter_bw", K_DBL, inter_bw, "bandwidth between hosts (per host), bytes/s"),
    F("inter_lat", K_DBL, inter_lat, "latency between hosts, s"),
    F("inter_bw4", K_DBL, inter_bw4, "between hosts: all-reduce bus bandwidth of 4+ ranks spanning hosts (0: as inter_bw)"),
};
#undef F
#define N_FIELDS ((int)(sizeof k_fields / sizeof k_fields[0]))

ot_status ot_machine_write(const char *path, const ot_machine *m) {
  if (!path || !m) return ot_error(OT_EINVAL, "ot_machine_write: path or machine is NULL");
  OT_TRY(ot_machine_validate(m));
  FILE *f = fopen(path, "w");
  if (!f) return ot_error(OT_EIO, "%s: cannot write (%s)", path, strerror(errno));
  fprintf(f, "# ot plan machine description (ot plan --machine %s)\n", path);
  for (int i = 0; i < N_FIELDS; i++) {
    const field *d = &k_fields[i];
    const char *p = (const char *)m + d->off;
    if (d->k == K_STR && !*p) continue;   // (an empty string has no value to write)
    fprintf(f, "# %s\n%s = ", d->help, d->key);
    if (d->k == K_STR) fprintf(f, "%s\n", p);
    else if (d->k == K_BOOL) fprintf(f, "%s\n", *(const bool *)p ? "true" : "false");
    else if (d->k == K_INT) fprintf(f, "%d\n", *(const int *)p);
    else fprintf(f, "%.6g\n", *(const double *)p);
  }
  const bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad) return ot_error(OT_EIO, "%s: write failed", path);
  return OT_OK;
}

static ot_status set_field(ot_machine *m, const char *key, const char *val, const char *path) {
  for (int i = 0; i < N_FIELDS; i++) {
    const field *d = &k_fields[i];
    if (strcmp(d->key, key)) continue;
    char *p = (char *)m + d->off, *end = NULL;
    if (d->k == K_STR) {
      const size_t cap = !strcmp(key, "name") ? sizeof m->name : sizeof m->source;
      snprintf(p, cap, "%s", val);
      return OT_OK;
    }
    if (d->k == K_BOOL) {
      if (strcmp(val, "true") && strcmp(val, "false"))
        return ot_error(OT_EFORMAT, "%s: %s = '%.40s' is not true or false", path, key, val);
      *(bool *)p = !strcmp(val, "true");
      return OT_OK;
    }
    errno = 0;
    const double v = strtod(val, &end);
    if (end == val || *end || errno || !isfinite(v) || v < 0)
      return ot_error(OT_EFORMAT, "%s: %s = '%.40s' is not a non-negative number", path, key, val);
    if (d->k == K_INT) {
      if (v != floor(v) || v > 1e7) return ot_error(OT_EFORMAT, "%s: %s = '%.40s' is not an integer", path, key, val);
      *(int *)p = (int)v;
    } else {
      *(double *)p = v;
    }
    return OT_OK;
  }
  return ot_error(OT_EFORMAT, "%s: '%.60s' is not a machine key (name, shared, cores, devices_per_host, "
                  "hosts, mem_bytes, gemm_flops, core_gemm_flops, attn_flops, core_attn_flops, gemm_rows_half, attn_len_half, "
                  "peak_flops, mem_bw, rank_overhead, intra_bw, intra_bw4, intra_bw8, "
                  "intra_lat, inter_bw, inter_lat, inter_bw4, source)", path, key);
}

ot_status ot_machine_read(const char *path, ot_machine *m) {
  if (!path || !m) return ot_error(OT_EINVAL, "ot_machine_read: path or machine is NULL");
  memset(m, 0, sizeof *m);
  ot_settings *l = calloc(1, sizeof *l);
  if (!l) return ot_error(OT_ENOMEM, "%s: out of memory", path);
  ot_status s = ot_settings_read_file(l, path);
  for (int i = 0; i < l->n && s == OT_OK; i++) s = set_field(m, l->item[i].key, l->item[i].val, path);
  free(l);
  if (s == OT_OK && !m->name[0]) snprintf(m->name, sizeof m->name, "%.63s", path);
  if (s == OT_OK) s = ot_machine_validate(m);
  if (s != OT_OK && !strstr(ot_last_error(), path)) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ot_last_error());
    return ot_error(s, "%s: %s", path, msg);
  }
  return s;
}

ot_status ot_machine_validate(const ot_machine *m) {
  if (!m) return ot_error(OT_EINVAL, "machine is NULL");
  const char *n = m->name[0] ? m->name : "machine";
  if (m->hosts < 1 || m->devices_per_host < 1)
    return ot_error(OT_EINVAL, "%s: hosts = %d and devices_per_host = %d must be >= 1", n, m->hosts,
                    m->devices_per_host);
  if (m->shared && m->cores < 1) return ot_error(OT_EINVAL, "%s: a shared (CPU) host needs cores >= 1", n);
  const double v[] = {m->mem_bytes, m->gemm_flops, m->peak_flops, m->mem_bw, m->intra_bw, m->inter_bw};
  const char *k[] = {"mem_bytes", "gemm_flops", "peak_flops", "mem_bw", "intra_bw", "inter_bw"};
  for (int i = 0; i < 6; i++)
    if (!(v[i] > 0) || !isfinite(v[i])) return ot_error(OT_EINVAL, "%s: %s = %g must be > 0", n, k[i], v[i]);
  if (!(m->inter_bw4 >= 0) || !isfinite(m->inter_bw4))
    return ot_error(OT_EINVAL, "%s: inter_bw4 = %g must be >= 0 (0: as inter_bw)", n, m->inter_bw4);
  if (!(m->intra_lat >= 0) || !(m->inter_lat >= 0))
    return ot_error(OT_EINVAL, "%s: latencies must be >= 0 s", n);
  if (m->shared && !(m->core_gemm_flops > 0)) return ot_error(OT_EINVAL, "%s: core_gemm_flops must be > 0", n);
  return OT_OK;
}

// ------------------------------------------------------------ measurement ---
// GEMM FLOP/s of the current OpenMP threads over transformer-sized f32 shapes
// (M = 2048 tokens, C = 768: the QKV, MLP-up and MLP-down projections): the best of
// three rounds of all three.
static ot_status measure_gemm(int M, double *flops) {
  const int C = 768, shp[3][2] = {{3 * C, C}, {4 * C, C}, {C, 4 * C}}, reps = 2048 / M > 1 ? 2048 / M : 1;
  float *a = ot_mem_alloc((size_t)M * 4 * C * sizeof(float), OT_MEM_WORKSPACE);
  float *b = ot_mem_alloc((size_t)4 * C * C * sizeof(float), OT_MEM_WORKSPACE);
  float *c = ot_mem_alloc((size_t)M * 4 * C * sizeof(float), OT_MEM_WORKSPACE);
  ot_status s = a && b && c ? OT_OK : ot_error(OT_ENOMEM, "GEMM measurement: out of memory");
  if (s == OT_OK) {
    for (size_t i = 0; i < (size_t)M * 4 * C; i++) a[i] = (float)(i % 13) * 0.01f;
    for (size_t i = 0; i < (size_t)4 * C * C; i++) b[i] = (float)(i % 7) * 0.01f;
  }
  double best = 0.0;
  for (int round = 0; round < 4 && s == OT_OK; round++) {
    double fl = 0.0, t0 = ot_now();
    for (int r = 0; r < reps; r++)
      for (int k = 0; k < 3 && s == OT_OK; k++) {
        const int N = shp[k][0], K = shp[k][1];
        s = ot_gemm(OT_F32, OT_F32, false, true, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        fl += 2.0 * M * N * K;
      }
    const double dt = ot_now() - t0;
    if (round > 0 && fl / dt > best) best = fl / dt;   // round 0 warms the primitives up
  }
  ot_mem_free(a);
  ot_mem_free(b);
  ot_mem_free(c);
  *flops = best;
  return s;
}

// The GEMM rate at M = 2048 rows (*flops) and the rows at which it halves (*half: the rate
// at M rows is taken as flops x M / (M + half), fitted from M = 128).
static ot_status measure_gemm_curve(double *flops, double *half) {
  double small = 0.0;
  OT_TRY(measure_gemm(2048, flops));
  OT_TRY(measure_gemm(128, &small));
  *half = small > 0 && *flops > small ? 128.0 * (*flops / small - 1.0) : 0.0;
  return OT_OK;
}

// Causal flash attention forward + backward of [4, 8 heads, 256, 64] (f32) on the current
// threads, in the cost model's FLOPs (3 x the forward's 2 x 2 x D x (T + 1) / 2 per query
// and head), best of 4 after a warm-up.
static ot_status measure_attn(int T, double *flops) {
  const ot_attn_shape sh = {.B = 1024 / T, .Hq = 8, .Hkv = 8, .Tq = T, .Tk = T, .D = 64, .causal = true,
                            .scale = 0.125f};
  const size_t n = (size_t)sh.B * sh.Hq * sh.Tq * sh.D;
  float *buf = ot_mem_alloc(8 * n * sizeof(float) + (size_t)sh.B * sh.Hq * sh.Tq * sizeof(float), OT_MEM_WORKSPACE);
  if (!buf) return ot_error(OT_ENOMEM, "attention measurement: out of memory");
  float *q = buf, *k = q + n, *v = k + n, *o = v + n, *dout = o + n, *dq = dout + n, *dk = dq + n, *dv = dk + n,
        *lse = dv + n;
  for (size_t i = 0; i < 5 * n; i++) buf[i] = (float)((i * 7919) % 101) * 0.01f - 0.5f;
  const double fl = 3.0 * 2.0 * 2.0 * sh.D * (sh.Tq + 1) / 2.0 * sh.Tq * sh.B * sh.Hq;
  double best = 0.0;
  ot_status s = OT_OK;
  for (int r = 0; r < 5 && s == OT_OK; r++) {
    const double t0 = ot_now();
    s = ot_attn_flash_fwd(OT_F32, o, lse, q, k, v, &sh);
    if (s == OT_OK) s = ot_attn_flash_bwd(OT_F32, dq, dk, dv, dout, o, lse, q, k, v, &sh);
    const double dt = ot_now() - t0;
    if (r > 0 && fl / dt > best) best = fl / dt;
  }
  ot_mem_free(buf);
  *flops = best;
  return s;
}

// The attention rate at T = 256 (*flops) and the length at which it halves (*half: the rate
// at T is taken as flops x T / (T + half), fitted from T = 64; the same tokens each).
static ot_status measure_attn_curve(double *flops, double *half) {
  double small = 0.0;
  OT_TRY(measure_attn(256, flops));
  OT_TRY(measure_attn(64, &small));
  *half = small > 0 && *flops > small ? 64.0 * (*flops / small - 1.0) : 0.0;
  return OT_OK;
}

// STREAM-triad bandwidth (bytes/s) of the current threads over 3 x 64 MiB, best of 5.
static ot_status measure_bw(double *bw) {
  const size_t n = (size_t)16 << 20;
  float *a = ot_mem_alloc(n * 4, OT_MEM_WORKSPACE), *b = ot_mem_alloc(n * 4, OT_MEM_WORKSPACE),
        *c = ot_mem_alloc(n * 4, OT_MEM_WORKSPACE);
  ot_status s = a && b && c ? OT_OK : ot_error(OT_ENOMEM, "bandwidth measurement: out of memory");
  double best = 0.0;
  if (s == OT_OK) {
    ot_stream_init(a, b, c, n);
    for (int r = 0; r < 6; r++) {
      const double t0 = ot_now();
      ot_stream_triad(a, b, c, 0.5f, n, true);
      const double dt = ot_now() - t0;
      if (r > 0 && 12.0 * n / dt > best) best = 12.0 * n / dt;
    }
  }
  ot_mem_free(a);
  ot_mem_free(b);
  ot_mem_free(c);
  *bw = best;
  return s;
}

// What a rank holds beyond the tracked allocations once oneDNN, OpenMP (and MPI) run: the
// resident set less the tracked bytes after a small GEMM, before any large buffer comes and
// goes (freed heap the allocator keeps would count), the largest over the ranks (MiB).
static int measure_overhead(void) {
  float a[64 * 64], c[64 * 64];
  for (int i = 0; i < 64 * 64; i++) a[i] = 0.01f * (float)(i % 17);
  (void)ot_gemm(OT_F32, OT_F32, false, true, 64, 64, 64, 1.0f, a, 64, a, 64, 0.0f, c, 64);
  ot_clear_error();
  double rss = 0.0;
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) rss = strtod(line + 6, NULL) * 1024.0;
  if (f) fclose(f);
  double tracked = 0.0;
  for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) tracked += (double)ot_mem_current((ot_mem_category)k);
  int mib = rss > tracked ? (int)((rss - tracked) / 1048576.0 + 0.5) : 0;
  ot_dist_allreduce_max_int(&mib);
  return mib;
}

ot_status ot_machine_measure(ot_machine *m, FILE *log) {
  if (!m) return ot_error(OT_EINVAL, "ot_machine_measure: machine is NULL");
  memset(m, 0, sizeof *m);
  char host[64] = "this host";
  gethostname(host, sizeof host - 1);
  snprintf(m->name, sizeof m->name, "%.50s", host);
  m->shared = true;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);   // (the host's cores, not this rank's threads)
  m->cores = online > 0 ? (int)online : ot_threads_get();
  const int threads0 = ot_threads_get();
  m->devices_per_host = m->cores;
  m->hosts = 1;
  const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  m->mem_bytes = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0.0;
  const bool root = ot_dist_world_rank() == 0;
  ot_status s = OT_OK;
  const int over = measure_overhead();
  m->rank_overhead = over * 1048576.0;
  if (log && root) fprintf(log, "measured: %d MiB resident beyond the tracked allocations per rank\n", over);
  if (root) {   // compute and memory on rank 0 alone, on every core (the others wait at the all-reduce)
    ot_threads_set(m->cores);
    s = measure_gemm_curve(&m->gemm_flops, &m->gemm_rows_half);
    const int nt = m->cores;
    if (s == OT_OK) s = measure_attn_curve(&m->attn_flops, &m->attn_len_half);
    if (s == OT_OK) {   // one core: the rates only (the halving points are the host's)
      ot_threads_set(1);
      s = measure_gemm(2048, &m->core_gemm_flops);
      if (s == OT_OK) s = measure_attn(256, &m->core_attn_flops);
      ot_threads_set(nt);
    }
    if (s == OT_OK) s = measure_bw(&m->mem_bw);
    m->peak_flops = ot_measure_fma_peak() * 1e9;
    ot_threads_set(threads0);
  }
  ot_dist_barrier_idle();   // (the other ranks slept through rank 0's measurements)
  if (root) {
    if (log && s == OT_OK)
      fprintf(log, "measured: %d cores, GEMM %.1f GFLOP/s (one core %.1f), attention %.1f GFLOP/s (one core %.1f), "
              "FMA peak %.1f GFLOP/s, triad %.1f GB/s, %.1f GiB; GEMM rate halves at %.0f rows, attention at "
              "T = %.0f\n", m->cores, m->gemm_flops / 1e9,
              m->core_gemm_flops / 1e9, m->attn_flops / 1e9, m->core_attn_flops / 1e9,
              m->peak_flops / 1e9, m->mem_bw / 1e9, m->mem_bytes / 1073741824.0, m->gemm_rows_half,
              m->attn_len_half);
  }
  // the links: the engine's all-reduce between the processes of this run (defaults when
  // run alone: inside the host as measured in shared/notes, between hosts 10 GbE)
  m->intra_bw = 3.9e9;
  m->intra_lat = 20e-6;
  m->inter_bw = 1.25e9;
  m->inter_lat = 50e-6;
  m->inter_bw4 = 0.0;
  const char *links = "links not measured (run `mpirun -np 8 --oversubscribe ot plan --measure` for them): 3.9 GB/s, "
                      "20 us inside the host; 1.25 GB/s, 50 us between hosts";
  char lbuf[400] = "";
  const int world = ot_dist_world_size();
  for (int g = 2; g <= world && g <= 8; g *= 2) {   // groups of 2, 4, 8 of the processes
    double big = 0.0, small = 0.0;
    bool apart = false;
    const size_t n = (size_t)16 << 20;   // 64 MiB: bandwidth; 2 floats: latency
    ot_status ms = ot_dist_measure_allreduce(g, n, 5, &big, &apart);
    if (ms == OT_OK) ms = ot_dist_measure_allreduce(g, 2, 51, &small, &apart);
    if (ms != OT_OK) return ms;
    const double ring = 2.0 * (g - 1.0) / g, lat = small / (2.0 * (g - 1.0));
    const double bw = ring * 4.0 * (double)n / (big - 2.0 * (g - 1.0) * lat);
    if (apart) {   // processes on different hosts: the link between hosts
      if (g == 2) {
        m->inter_bw = bw;
        m->inter_lat = lat;
      } else {
        m->inter_bw4 = bw;
      }
    } else if (g == 2) {
      m->intra_bw = bw;
      m->intra_lat = lat;
    } else {
      *(g == 4 ? &m->intra_bw4 : &m->intra_bw8) = bw;
    }
    const size_t at = strlen(lbuf);
    snprintf(lbuf + at, sizeof lbuf - at, "%sall-reduce of 64 MiB over %d processes %s: %.1f ms (bus bandwidth "
             "%.2f GB/s), of 8 bytes %.1f us", at ? "; " : "", g, apart ? "on different hosts" : "on one host",
             big * 1e3, bw / 1e9, small * 1e6);
    links = lbuf;
    if (log && root)
      fprintf(log, "measured: all-reduce over %d processes %s: %.1f ms for 64 MiB (bus bandwidth %.2f GB/s), %.1f us "
              "for 8 bytes (latency %.1f us)\n", g, apart ? "on different hosts" : "on one host", big * 1e3,
              bw / 1e9, small * 1e6, lat * 1e6);
    if (apart && g >= 4) break;   // (the link between hosts: a pair and a group of 4 tell)
  }
  snprintf(m->source, sizeof m->source, "measured by `ot plan --measure` on %.40s: GEMM (oneDNN f32, M=2048 "
           "C=768 projections), causal flash attention (T=256, D=64), STREAM triad, FMA peak; %s", host, links);
  if (s == OT_OK) s = root ? ot_machine_validate(m) : OT_OK;
  return s;
}
