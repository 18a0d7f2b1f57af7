// The layout planner's search (ot_plan_search, ot/plan.h): every layout of a device
// count for a model and global batch, predicted by ot_plan_eval, ranked.
#include "train/train_impl.h"
#include "ot/plan.h"
#include <stdlib.h>

// Fitting layouts by tokens/s (best first; equal: less memory first), then the others.
static int by_rank(const void *pa, const void *pb) {
  const ot_plan_result *a = pa, *b = pb;
  if (a->fits != b->fits) return a->fits ? -1 : 1;
  if (a->fits && a->tokens_per_s != b->tokens_per_s) return a->tokens_per_s > b->tokens_per_s ? -1 : 1;
  if (a->mem_total != b->mem_total) return a->mem_total < b->mem_total ? -1 : 1;
  return 0;
}

ot_status ot_plan_search(const ot_train_config *cfg, const ot_machine *m, int hosts, int devices,
                         ot_plan_result **out, int *n) {
  static const char fn[] = "ot_plan_search";
  OT_CHECK_PTR(cfg, fn);
  OT_CHECK_PTR(m, fn);
  OT_CHECK_PTR(out, fn);
  OT_CHECK_PTR(n, fn);
  *out = NULL;
  *n = 0;
  OT_TRY(ot_machine_validate(m));
  if (devices < 1) return ot_error(OT_EINVAL, "%s: %d devices: give at least one", fn, devices);
  if (hosts < 1 || hosts > m->hosts)
    return ot_error(OT_EINVAL, "%s: %d hosts, but the machine '%s' has %d (raise hosts in its file)", fn,
                    hosts, m->name, m->hosts);
  if (devices % hosts)
    return ot_error(OT_EINVAL, "%s: %d devices cannot be spread evenly over %d hosts", fn, devices, hosts);
  if (!m->shared && devices / hosts > m->devices_per_host)
    return ot_error(OT_EINVAL, "%s: %d devices on %d hosts is %d per host, but a host of '%s' has %d", fn,
                    devices, hosts, devices / hosts, m->name, m->devices_per_host);
  const long G = cfg->global_batch > 0 ? cfg->global_batch
                                       : (long)cfg->batch_size * cfg->grad_accum * cfg->data_parallel;
  if (G < 1) return ot_error(OT_EINVAL, "%s: the global batch must be >= 1 row", fn);
  const int L = ot_model_n_blocks(&cfg->model);
  int cap = 4096, cnt = 0;
  ot_plan_result *r = malloc((size_t)cap * sizeof *r);
  ot_train_config *c = malloc(sizeof *c);
  if (!r || !c) {
    free(r);
    free(c);
    return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  }
  ot_status s = OT_OK;
  for (int tp = 1; tp <= devices && s == OT_OK; tp++) {
    if (devices % tp || cfg->model.n_heads % tp || cfg->model.n_kv_heads % tp || cfg->model.d_ff % tp) continue;
    for (int pp = 1; pp <= devices / tp && s == OT_OK; pp++) {
      if ((devices / tp) % pp || pp > L) continue;
      const int dp = devices / tp / pp;
      if (G % dp) continue;
      for (long M = pp; M <= G / dp && s == OT_OK; M++) {   // micro-batches per step
        if ((G / dp) % M) continue;
        if (M > 4L * pp && M != G / dp) continue;             // up to 4 per stage, or one row each
        for (int z = 0; z <= (dp > 1 ? 3 : 0) && s == OT_OK; z++)
          for (int rc = 0; rc < 3 && s == OT_OK; rc++)
            for (int vp = 0; vp <= (tp > 1) && s == OT_OK; vp++)
              for (int fu = 0; fu <= (dp > 1 && z < 2) && s == OT_OK; fu++)   // fusion: one group per block
                for (int bal = 0; bal <= (pp > 1) && s == OT_OK; bal++) {      // stages balanced by compute
              if (z == 3 && cfg->task != OT_TASK_LM) continue;
              *c = *cfg;
              c->data_parallel = dp;
              c->tensor_parallel = tp;
              c->pipeline_stages = pp;
              c->grad_accum = (int)M;
              c->global_batch = 0;
              c->batch_size = (int)(G / dp / M);
              c->optimizer_shard = z;
              c->recompute = (ot_recompute)rc;
              c->vocab_parallel = vp;
              c->comm_fusion_layers = fu;
              c->balanced_stages = bal;
              if (cnt == cap) {
                ot_plan_result *q = realloc(r, (size_t)(cap *= 2) * sizeof *r);
                if (!q) { s = ot_error(OT_ENOMEM, "%s: out of memory", fn); break; }
                r = q;
              }
              s = ot_plan_eval(c, m, hosts, &r[cnt]);
              if (s == OT_OK) cnt++;
            }
      }
    }
  }
  if (s == OT_OK && cnt == 0)
    s = ot_error(OT_EINVAL, "%s: no layout of %d devices for this model: %d blocks, %d heads, %d kv-heads, "
                 "d_ff %d and a global batch of %ld rows (tensor parallel must divide heads, kv-heads and "
                 "d_ff; pipeline stages at most the blocks; data parallel must divide the batch)", fn,
                 devices, L, cfg->model.n_heads, cfg->model.n_kv_heads, cfg->model.d_ff, G);
  free(c);
  if (s != OT_OK) {
    free(r);
    return s;
  }
  qsort(r, (size_t)cnt, sizeof *r, by_rank);
  *out = r;
  *n = cnt;
  return OT_OK;
}
