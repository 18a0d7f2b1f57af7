// The profiler's three ratios (src/train/ratios.c):
//  - a real one-process run: the table at the end, one JSONL record ({"step",
//    "ratios": {...}}), communication share 0, GEMM FLOP/s > 0, memory reuse
//    100% after the warm-up step (a step that allocated would show here), no
//    matmul utilization without a measured peak; with --profile the trace's
//    counters and otherData
//  - the report on set sums: each breach marked, with its advice, the values in
//    the record; no breach, no advice
//  - the GEMM counters and the cumulative allocation counter they rest on
#include "train_common.h"
#include "train/train_impl.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static void test_run(const char *data) {
  ot_train_config c = tiny_config(data);
  c.steps = 4;
  c.eval_every = 0;
  char out[300], trace[400], logp[400];
  snprintf(out, sizeof out, "%s/run", data);
  snprintf(c.out, sizeof c.out, "%s", out);
  snprintf(trace, sizeof trace, "%s/trace.json", data);
  snprintf(c.profile, sizeof c.profile, "%s", trace);
  char *text = NULL;
  size_t len = 0;
  FILE *o = open_memstream(&text, &len);
  double fl, fv;
  th_check(ot_train_run(&c, o, &fl, &fv) == OT_OK, "run: %s", ot_last_error());
  fclose(o);
  th_check(text && strstr(text, "profile ratios over 3 steps, the first left out (thresholds: comm > 30%, matmul < "
                                    "60%, reuse < 80%") != NULL,
           "the table's title: %s", text ? text : "");
  th_check(text && strstr(text, "     0      0.0%") && strstr(text, "100.0%"), "rank 0: comm 0%%, reuse 100%%");
  th_check(text && strstr(text, "needs the FMA peak"), "no peak, no utilization (said)");
  th_check(text && !strstr(text, "memory reuse") && !strstr(text, "comm share 0"), "no breach advice for comm / reuse");
  free(text);
  snprintf(logp, sizeof logp, "%s/log.jsonl", out);
  char *log = slurp(logp);
  const char *rec = log ? strstr(log, "{\"step\": 4, \"ratios\": {\"rank\": 0, \"comm_share\": 0, \"gemm_gflops\": ") : NULL;
  th_check(rec != NULL, "the JSONL record: %s", log ? log : "");
  th_check(rec && strstr(rec, "\"matmul_util\": null, \"mem_reuse\": 1, \"peak_gflops\": null}}"),
           "reuse 1 after the warm-up, utilization null: %s", rec ? rec : "");
  double gf = rec ? atof(strstr(rec, "gemm_gflops") + 14) : 0;
  th_check(gf > 0, "GEMM GFLOP/s > 0 (%g)", gf);
  free(log);
  char *tr = slurp(trace);
  th_check(tr && strstr(tr, "{\"name\":\"comm_share\",\"ph\":\"C\"") && strstr(tr, "{\"name\":\"mem_reuse\",\"ph\":\"C\""),
           "trace counters");
  th_check(tr && strstr(tr, "\"rank0_mem_reuse\":1") && strstr(tr, "\"rank0_comm_share\":0") &&
               strstr(tr, "\"rank0_matmul_util\":null"),
           "the trace's otherData");
  free(tr);
}

static void test_report(void) {
  ot__ratios r;
  memset(&r, 0, sizeof r);
  r.steps_all = 3;   // the first step apart; the report reads `after`
  r.first = (ot__ratio_sums){1.0, 0.0, 1e9, 1.0, 1e9, 1e9};
  r.after = (ot__ratio_sums){2.0, 0.8, 20e9, 2.0, 50.0, 100.0};   // comm 40%, 10 GFLOP/s, reuse 50%
  char *text = NULL, *log = NULL;
  size_t n1 = 0, n2 = 0;
  FILE *o = open_memstream(&text, &n1), *l = open_memstream(&log, &n2);
  th_check(ot__ratios_report(&r, NULL, 100.0, 7, o, l) == OT_OK, "report");
  fclose(o);
  fclose(l);
  th_check(strstr(text, "     0     40.0% !      10.0% !     50.0% !          10.0") != NULL, "the row marks 3 breaches: %s",
           text);
  th_check(strstr(text, "comm share 40.0% > 30% (rank 0): the ranks wait on communication; give each exchange more work") &&
               strstr(text, "matmul utilization 10.0% < 60% (rank 0): the GEMMs are too small") &&
               strstr(text, "memory reuse 50.0% < 80% (rank 0): steps allocate afresh"),
           "advice beside each breach");
  th_check(!strcmp(log, "{\"step\": 7, \"ratios\": {\"rank\": 0, \"comm_share\": 0.4, \"gemm_gflops\": 10, "
                        "\"matmul_util\": 0.1, \"mem_reuse\": 0.5, \"peak_gflops\": 100}}\n"),
           "the record: %s", log);
  free(text);
  free(log);

  r.after = (ot__ratio_sums){2.0, 0.2, 180e9, 2.0, 0.0, 100.0};   // comm 10%, 90 GFLOP/s, reuse 100%
  text = NULL;
  o = open_memstream(&text, &n1);
  th_check(ot__ratios_report(&r, NULL, 100.0, 7, o, NULL) == OT_OK, "report");
  fclose(o);
  th_check(strstr(text, "     0     10.0%        90.0%      100.0%") && !strstr(text, "% !") && !strstr(text, "(rank 0)"),
           "no breach, no advice: %s", text);
  free(text);
  r.steps_all = 1;   // one step: the run's only step counts
  r.first = (ot__ratio_sums){1.0, 0.5, 1e9, 1.0, 0.0, 10.0};
  text = NULL;
  o = open_memstream(&text, &n1);
  th_check(ot__ratios_report(&r, NULL, 0.0, 1, o, NULL) == OT_OK, "report");
  fclose(o);
  th_check(strstr(text, "over 1 step (") && strstr(text, "     0     50.0% !"), "a one-step run reports its step: %s",
           text);
  free(text);
}

static void test_counters(void) {
  double f0, s0, f1, s1;
  ot_gemm_stats(&f0, &s0);
  float a[6 * 5], b[5 * 7], cc[6 * 7];
  for (int i = 0; i < 30; i++) a[i] = 0.1f * (float)i;
  for (int i = 0; i < 35; i++) b[i] = 0.01f * (float)i;
  th_check(ot_gemm(OT_F32, OT_F32, false, false, 6, 7, 5, 1.0f, a, 5, b, 7, 0.0f, cc, 7) == OT_OK, "gemm");
  ot_gemm_stats(&f1, &s1);
  th_check(f1 - f0 == 2.0 * 6 * 7 * 5 && s1 >= s0, "GEMM counters: +2 M N K flops (%g), time does not go back", f1 - f0);
  const size_t m0 = ot_mem_allocated();
  void *p = ot_mem_alloc(1000, OT_MEM_OTHER);
  ot_mem_free(p);
  th_check(ot_mem_allocated() - m0 == 1000, "cumulative allocation counter (+%zu)", ot_mem_allocated() - m0);
}

int main(void) {
  char dir[256];
  const char *data = make_data(dir, sizeof dir, 50, 20000, 4000);
  if (data) test_run(data);
  test_report();
  test_counters();
  if (data) remove_tree(data);
  return th_finish();
}
