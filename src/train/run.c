// The training run: trainer + progress lines + JSONL log + held-out
// evaluation + checkpoints + profile + loss-curve SVG.
#include "train/train_impl.h"
#include "io/json.h"
#include "ot/dist.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static double mem_mib(void) {
  size_t b = 0;
  for (int c = 0; c < OT_MEM_CATEGORY_COUNT; c++) b += ot_mem_current((ot_mem_category)c);
  return (double)b / (1024.0 * 1024.0);
}

// Peak resident set of this process (VmHWM, bytes; 0 when /proc is not there).
static double rss_peak(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0.0;
  char line[256];
  double kb = 0.0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) kb = strtod(line + 6, NULL);
  fclose(f);
  return kb * 1024.0;
}

// After the training steps: every rank's memory plan (ot_train_plan_memory), the most
// tracked memory it held at once so far (the plan + the ops' scratch + the loaders) and
// its peak resident set (the tracked memory + libraries, MPI, stacks), printed by rank 0
// and logged ("mem_peak_mib", "mem_plan_mib": this rank's).
static ot_status peak_report(ot_trainer *t, FILE *out, FILE *log, bool quiet) {
  const ot_train_config *c = ot_trainer_config(t);
  const int world = t->par ? c->data_parallel * c->tensor_parallel * c->pipeline_stages : 1;
  const int me = ot__par_rank(t->par);
  ot_rank_memory pm;
  double plan = NAN;
  if (c->task == OT_TASK_LM && ot_train_plan_memory(c, me, &pm) == OT_OK) {
    plan = 0.0;
    for (int k = 0; k < OT_MEM_CATEGORY_COUNT; k++) plan += (double)pm.bytes[k];
  }
  double *v = calloc((size_t)world * 3, sizeof(double));
  if (!v) return ot_error(OT_ENOMEM, "memory report: out of memory");
  v[3 * me] = isfinite(plan) ? plan : -1.0;
  v[3 * me + 1] = (double)ot_mem_peak_total();
  v[3 * me + 2] = rss_peak();
  ot_status s = t->par ? ot__par_sum(t->par, v, 3 * world, "memory report") : OT_OK;
  if (s == OT_OK && me == 0 && !quiet) {
    fprintf(out, "memory by rank over the steps (MiB): planned allocations, tracked peak (+ the ops' scratch "
            "and the data loaders), resident peak (+ libraries, MPI, stacks)\n");
    for (int r = 0; r < world; r++)
      fprintf(out, "  rank %3d  plan %10.1f  tracked peak %10.1f  resident peak %10.1f\n", r,
              v[3 * r] >= 0 ? v[3 * r] / 1048576 : NAN, v[3 * r + 1] / 1048576, v[3 * r + 2] / 1048576);
  }
  if (log && me == 0) {
    fprintf(log, "{\"event\": \"memory\", \"ranks\": [");
    for (int r = 0; r < world; r++)
      fprintf(log, "%s{\"plan_mib\": %.3f, \"tracked_peak_mib\": %.3f, \"rss_peak_mib\": %.3f}", r ? ", " : "",
              v[3 * r] >= 0 ? v[3 * r] / 1048576 : -1.0, v[3 * r + 1] / 1048576, v[3 * r + 2] / 1048576);
    fprintf(log, "]}\n");
  }
  free(v);
  return s;
}

static void fmt_dur(char *buf, size_t cap, double s) {
  if (!(s >= 0) || s > 3.6e7) { snprintf(buf, cap, "?"); return; }
  int x = (int)(s + 0.5);
  if (x >= 3600) snprintf(buf, cap, "%dh%02dm", x / 3600 % 100000, x / 60 % 60);
  else if (x >= 60) snprintf(buf, cap, "%dm%02ds", x / 60 % 60, x % 60);
  else snprintf(buf, cap, "%ds", x % 60);
}

// JSON number or null.
static void jnum(FILE *f, const char *key, double v, bool last) {
  if (isfinite(v)) fprintf(f, "\"%s\": %.8g%s", key, v, last ? "" : ", ");
  else fprintf(f, "\"%s\": null%s", key, last ? "" : ", ");
}

// Keeps the log's records with step <= upto (a resumed run rewrites the rest).
static ot_status truncate_log(const char *path, int64_t upto) {
  if (!ot__exists(path)) return OT_OK;
  char *text = NULL;
  size_t len = 0;
  OT_TRY(ot__read_text(path, (size_t)1 << 30, &text, &len));
  char *keep = malloc(len + 1);
  if (!keep) { free(text); return ot_error(OT_ENOMEM, "%s: out of memory", path); }
  size_t k = 0;
  for (char *p = text; *p;) {
    char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    ot_json_doc doc = {0};
    if (n && ot_json_parse(&doc, p, n, 0, path) == OT_OK) {
      const ot_json *s = ot_json_get(doc.root, "step");
      if (s && s->type == OT_JNUM && s->d <= (double)upto) {
        memcpy(keep + k, p, n);
        k += n;
        keep[k++] = '\n';
      }
      ot_json_free(&doc);
    }
    p = nl ? nl + 1 : p + n;
  }
  ot_clear_error();
  ot_status s = ot__write_atomic(path, keep, k);
  free(keep);
  free(text);
  return s;
}

typedef struct {
  FILE *out, *log;
  const ot_train_config *c;
  double peak;
} run_ctx;

// The held-out loss; translate: also the plain NLL (perplexity from it) and,
// with a translate hook, BLEU of the first eval_bleu_sentences pairs.
static ot_status do_eval(ot_trainer *t, run_ctx *r, int64_t step, double *val) {
  double l = NAN, nll = NAN, t0 = ot_now();
  int64_t ntok = 0;
  const bool tr = r->c->task == OT_TASK_TRANSLATE, cls = r->c->task == OT_TASK_CLASSIFY;
  OT_TRY(ot_trainer_eval_nll(t, 0, &l, &nll, &ntok));
  *val = l;
  const double acc = ot_trainer_accuracy(t);
  if (!r->c->quiet && cls)
    fprintf(r->out, "eval  step %6lld | val loss %.4f | top-1 %.2f%% | %lld images | %.1f s\n",
            (long long)step, l, 100 * acc, (long long)ntok, ot_now() - t0);
  if (!r->c->quiet && !tr && !cls)
    fprintf(r->out, "eval  step %6lld | val loss %.4f | ppl %.1f | %lld tokens | %.1f s\n", (long long)step,
            l, exp(l), (long long)ntok, ot_now() - t0);
  if (!r->c->quiet && tr)
    fprintf(r->out, "eval  step %6lld | val loss %.4f (label-smoothed %g) | nll %.4f | ppl %.2f | %lld target "
            "tokens | %.1f s\n", (long long)step, l, r->c->label_smoothing, nll, exp(nll), (long long)ntok,
            ot_now() - t0);
  ot_bleu_score bs;
  bool bleu = false;
  // parallel: every rank calls it, world rank 0 decodes (and prints; the others write nowhere)
  if (tr && t->hooks.translate && r->c->eval_bleu_sentences > 0) {
    char sig[160], line[256];
    double t1 = ot_now();
    OT_TRY(ot_trainer_bleu(t, 0, &bs, sig, sizeof sig));
    bleu = true;
    ot_bleu_format(&bs, line, sizeof line);
    if (!r->c->quiet)
      fprintf(r->out, "bleu  step %6lld | %lld sentences | %s | %s | %.1f s\n", (long long)step,
              (long long)bs.segments, line, sig, ot_now() - t1);
  }
  if (r->log) {
    fprintf(r->log, "{\"step\": %lld, ", (long long)step);
    jnum(r->log, "val_loss", l, false);
    if (tr) jnum(r->log, "val_nll", nll, false);
    if (bleu) jnum(r->log, "bleu", bs.score, false);
    if (cls) jnum(r->log, "val_top1", acc, false);
    fprintf(r->log, "\"%s\": %lld}\n", cls ? "val_images" : "val_tokens", (long long)ntok);
    fflush(r->log);
  }
  fflush(r->out);
  return OT_OK;
}

static void print_header(ot_trainer *t, run_ctx *r) {
  const ot_train_config *c = ot_trainer_config(t);
  FILE *o = r->out;
  ot_model_config_print(o, &c->model);
  fprintf(o, "settings (ours; a config file takes the same key=value lines):\n");
  ot_train_config_print(o, c);
  ot_run_config run = *ot_model_run_of(ot_trainer_model(t));
  ot_model_plan_print(o, &c->model, &run);
  if (c->task == OT_TASK_TRANSLATE) {
    fprintf(o, "global batch: %d x %d x %d tokens (data-parallel x micro-batches x tokens-per-batch, rows x "
            "max(source, target length)); forwards of at most %d rows x source %d / target %d tokens "
            "(shorter rows: more of them); tok/s counts source + target tokens; %s, %d threads, "
            "kernels %s\n", c->data_parallel,
            c->grad_accum, c->tokens_per_batch, run.B, run.S, run.T, ot_dtype_name(c->dtype),
            ot_threads_get(), ot_isa_name(ot_isa_active()));
  } else if (c->task == OT_TASK_CLASSIFY) {
    fprintf(o, "global batch: %d x %d images of %dx%d (micro-batches x batch-size), %d tokens each "
            "(CLS + patches); train %s, held-out %s; %s, %d threads, kernels %s\n", c->grad_accum,
            c->batch_size, c->model.image_size, c->model.image_size, c->model.max_seq,
            c->train_images, c->val_images[0] ? c->val_images : "none", ot_dtype_name(c->dtype),
            ot_threads_get(), ot_isa_name(ot_isa_active()));
  } else {
  fprintf(o, "global batch: %d x %d x %d rows x %d tokens = %lld tokens per step (data-parallel x "
          "micro-batches x batch-size); %s, %d threads, kernels %s\n", c->data_parallel,
          c->grad_accum, c->batch_size, c->seq_len,
          (long long)c->data_parallel * c->grad_accum * c->batch_size * c->seq_len,
          ot_dtype_name(c->dtype), ot_threads_get(), ot_isa_name(ot_isa_active()));
  }
  if (r->peak > 0)
    fprintf(o, "measured f32 FMA peak: %.1f GFLOP/s (MFU = %.1f MFLOP/token x tokens/s / peak)\n", r->peak,
            ot_trainer_flops_per_token(t) * 1e-6);
}

ot_status ot_train_run(const ot_train_config *cin, FILE *out, double *final_loss, double *final_val) {
  OT_CHECK_PTR(cin, "ot_train_run");
  if (final_loss) *final_loss = NAN;
  if (final_val) *final_val = NAN;
  ot_train_config c = *cin;
  OT_TRY(ot_train_config_resolve(&c));
  return ot__train_run_hooks(&c, NULL, out, final_loss, final_val);
}

ot_status ot_train_run_hooks(const ot_train_config *cin, const ot_train_hooks *h, FILE *out,
                             double *final_loss, double *final_val) {
  OT_CHECK_PTR(cin, "ot_train_run_hooks");
  if (final_loss) *final_loss = NAN;
  if (final_val) *final_val = NAN;
  ot_train_config c = *cin;
  OT_TRY(ot_train_config_resolve(&c));
  return ot__train_run_hooks(&c, h, out, final_loss, final_val);
}

ot_status ot__train_run_resolved(const ot_train_config *rc0, FILE *out, double *final_loss,
                                 double *final_val) {
  return ot__train_run_hooks(rc0, NULL, out, final_loss, final_val);
}

ot_status ot__train_run_hooks(const ot_train_config *rc0, const ot_train_hooks *hooks, FILE *out,
                              double *final_loss, double *final_val) {
  static const char fn[] = "ot_train_run";
  OT_CHECK_PTR(rc0, fn);
  if (!out) out = stdout;
  if (final_loss) *final_loss = NAN;
  if (final_val) *final_val = NAN;
  ot_train_config c = *rc0;
  if (!c.out[0]) snprintf(c.out, sizeof c.out, ".");
  // the defaults follow out (also in the checkpoints, which store them empty)
  char logp[OT_PATH_MAX + 16], plotp[OT_PATH_MAX + 16], tmp[OT_PATH_MAX + 32];
  snprintf(logp, sizeof logp, "%s", c.log);
  snprintf(plotp, sizeof plotp, "%s", c.plot);
  if (!logp[0]) OT_TRY(ot__join(logp, sizeof logp, c.out, "log.jsonl"));
  if (!plotp[0]) OT_TRY(ot__join(plotp, sizeof plotp, c.out, "loss.svg"));
  OT_TRY(ot__mkdirs(c.out));

  ot_trainer *t = NULL;
  OT_TRY(ot__trainer_create(&t, &c));
  ot_trainer_set_hooks(t, hooks);
  ot_status s = OT_OK;
  // parallel: world rank 0 prints, logs and plots; the others stay silent
  const bool root = ot__par_rank(t->par) == 0;
  FILE *devnull = NULL;
  if (!root) {
    devnull = fopen("/dev/null", "w");
    if (!devnull) s = ot_error(OT_EIO, "cannot open /dev/null");
    out = devnull;
    snprintf(logp, sizeof logp, "/dev/null");
    c.profile[0] = 0;
    c.measure_peak = false;
  } else {   // what interrupted saves and writes left in the run directory
    ot__ckpt_cleanup(c.out);
    const char *const left[2] = {logp, plotp};
    for (int k = 0; k < 2; k++)
      if (snprintf(tmp, sizeof tmp, "%s.tmp", left[k]) < (int)sizeof tmp) unlink(tmp);
  }
  if (c.resume[0]) {
    char from[OT_PATH_MAX + 64], note[2 * OT_PATH_MAX + 256];
    s = ot_ckpt_find(c.resume, from, sizeof from, note, sizeof note);
    if (s == OT_OK && note[0]) fprintf(out, "note: %s\n", note);
    if (s == OT_OK) s = ot_trainer_load(t, from, false);
    const ot_train_config *rc = ot_trainer_config(t);
    const long long at = (long long)ot_trainer_steps_done(t);
    // --steps is the run's total: fewer than the checkpoint's is a mistake, the same is a finished run
    if (s == OT_OK && rc->steps < at)
      s = ot_error(OT_EINVAL, "%s is at step %lld and --steps is %lld: --steps counts from the run's start "
                   "(--steps %lld trains %lld more)", from, at, (long long)rc->steps, at + rc->steps,
                   (long long)rc->steps);
    if (s == OT_OK)
      fprintf(out, "resumed from %s at step %lld\n", from, at);
    if (s == OT_OK && rc->steps == at)
      fprintf(out, "note: the checkpoint is at --steps %lld already: nothing to train, no checkpoint written "
              "(--steps counts from the run's start: pass more than %lld to train on)\n", at, at);
    if (s == OT_OK && rc->lr_decay != OT_LR_CONSTANT && rc->lr_decay != OT_LR_INVSQRT &&
        rc->steps > rc->decay_steps)
      fprintf(out, "note: the learning rate stays at --min-lr %g after step %lld (--decay-steps); pass "
              "--decay-steps %lld to stretch the decay over the longer run\n", rc->min_lr,
              (long long)rc->decay_steps, (long long)rc->steps);
  }
  if (s == OT_OK && c.init_from[0]) {   // a new run from a checkpoint's weights
    char from[OT_PATH_MAX + 64], note[2 * OT_PATH_MAX + 256];
    s = ot_ckpt_find(c.init_from, from, sizeof from, note, sizeof note);
    if (s == OT_OK && note[0]) fprintf(out, "note: %s\n", note);
    if (s == OT_OK) s = ot_trainer_load(t, from, true);
    if (s == OT_OK)
      fprintf(out, "weights from %s; a new run: step 0, a fresh optimizer, the learning rate schedule from its "
              "start\n", from);
  }
  run_ctx r = {out, NULL, ot_trainer_config(t), 0.0};
  double peak_all = 0, peak_one = 0;
  if (s == OT_OK && c.measure_peak) {
    // on a busy machine the all-thread probe loses whole time slices; one thread
    // times the thread count is an upper bound (all-core clocks are lower), so
    // the larger of the two keeps MFU from exceeding 100%
    const int nt = ot_threads_get();
    peak_all = ot_measure_fma_peak();
    ot_threads_set(1);
    peak_one = ot_measure_fma_peak();
    ot_threads_set(nt);
    r.peak = peak_all > peak_one * nt ? peak_all : peak_one * nt;
    if (peak_all < 0.8 * peak_one * nt)
      fprintf(out, "note: the %d-thread FMA probe reached only %.1f GFLOP/s against %.1f x %d from one "
              "thread: the machine is busy; MFU uses %.1f\n", nt, peak_all, peak_one, nt, r.peak);
  }
  if (s == OT_OK && !c.quiet) print_header(t, &r);
  if (s == OT_OK && !t->par && c.check_replicas > 0)
    fprintf(out, "note: --check-replicas %d: one process holds no replicas to compare\n", c.check_replicas);
  if (s == OT_OK && t->par) s = ot__par_report(t->par, out);
  const int64_t start = ot_trainer_steps_done(t);
  if (s == OT_OK && start > 0 && root) s = truncate_log(logp, start);
  if (s == OT_OK) {
    r.log = fopen(logp, start > 0 ? "a" : "w");
    if (!r.log) s = ot_error(OT_EIO, "cannot open the log %s: %s", logp, strerror(errno));
  }
  if (s == OT_OK && c.profile[0]) {
    ot_prof_enable(true);
    ot_prof_reset();
  }
  fflush(out);

  double val = NAN, loss = NAN, t_run = ot_now(), ema = 0;
  int64_t last_eval = -1, last_save = start > 0 ? start : -1, skipped = 0, streak = 0, overflows = 0;
  bool last_overflow = false;   // the last step was skipped by the dynamic loss scaler
  const bool has_val = ot_trainer_has_val(t);
  if (s == OT_OK && has_val && start == 0 && c.eval_every > 0) {
    s = do_eval(t, &r, 0, &val);
    last_eval = 0;
  }
  const double fpt = ot_trainer_flops_per_token(t);
  ot__ratios ratios = {0};
  double zg = 0.0, zw = 0.0;   // ZeRO-3: the steps' weight-gather seconds, and those waited for
  int64_t zsteps = 0;
  for (int64_t step = start; s == OT_OK && step < c.steps; step++) {
    ot_step_info st;
    ot__ratios_begin(&ratios);
    double g0, w0, g1, w1;
    ot__par_gather_stats(t->par, &g0, &w0);
    s = ot_trainer_step(t, &st);
    if (s != OT_OK) break;
    ot__par_gather_stats(t->par, &g1, &w1);
    zg += g1 - g0;
    zw += w1 - w0;
    zsteps++;
    ot__ratios_end(&ratios, st.seconds, t->par ? ot__par_comm_seconds(t->par) : 0.0, r.peak);
    // parallel: the peak of one process times the processes (one core each when they fit)
    const int world = ot_dist_world_size();
    double tps = st.tokens / st.seconds, mfu = r.peak > 0 ? fpt * (st.tgt_tokens / st.seconds) / (r.peak * world * 1e9) : NAN;
    ema = step == start ? st.seconds : 0.9 * ema + 0.1 * st.seconds;
    last_overflow = st.overflow;
    if (st.overflow) {   // the dynamic loss scaler's skip: expected, the scale backs off
      skipped++;
      overflows++;
      loss = st.loss;
      if (++streak >= 40)
        s = ot_error(OT_EINVAL, "%lld consecutive steps had an inf / NaN gradient although the loss scale "
                     "backed off to %g: training diverged (lower --lr, raise --warmup, or check the data)",
                     (long long)streak, (double)st.loss_scale);
    } else if (st.skipped) {
      skipped++;
      if (root) fprintf(stderr, "ot: warning: step %lld: non-finite %s (loss %g, grad norm %g): update skipped, weights "
              "and optimizer state unchanged\n", (long long)st.step, isfinite(st.loss) ? "gradient" : "loss",
              st.loss, st.grad_norm);
      if (++streak >= 20) {
        s = ot_error(OT_EINVAL, "%lld consecutive steps had a non-finite loss or gradient: training "
                     "diverged (lower --lr, raise --warmup, or check the data)", (long long)streak);
      }
    } else {
      streak = 0;
      loss = st.loss;
    }
    if (!c.quiet && (st.step % c.print_every == 0 || st.step == c.steps || st.step == start + 1)) {
      char eta[32];
      fmt_dur(eta, sizeof eta, ema * (double)(c.steps - st.step));
      char comm[32] = "", scale[48] = "";
      if (t->par) snprintf(comm, sizeof comm, " | comm %4.1f%%", 100 * ot__par_comm_seconds(t->par) / st.seconds);
      if (st.loss_scale > 0) snprintf(scale, sizeof scale, " | scale %g", (double)st.loss_scale);
      const bool img = c.task == OT_TASK_CLASSIFY;   // images/s: tokens/s over tokens per image
      fprintf(out, "step %6lld/%lld | loss %7.4f | lr %.3e | norm %7.3f | %7.0f %s | MFU %5.1f%% | "
              "mem %6.1f MiB%s%s | %5.2f s | eta %s%s\n", (long long)st.step, (long long)c.steps, st.loss,
              st.lr, st.grad_norm, img ? tps / c.seq_len : tps, img ? "img/s" : "tok/s", 100 * mfu,
              mem_mib(), comm, scale, st.seconds, eta,
              st.overflow ? " | SKIPPED (gradient overflow: scale backed off)" : st.skipped ? " | SKIPPED" : "");
      fflush(out);
    }
    fprintf(r.log, "{\"step\": %lld, ", (long long)st.step);
    jnum(r.log, "loss", st.loss, false);
    jnum(r.log, "lr", st.lr, false);
    jnum(r.log, "grad_norm", st.grad_norm, false);
    jnum(r.log, "clip", st.clip, false);
    fprintf(r.log, "\"tokens\": %lld, ", (long long)st.tokens);
    jnum(r.log, "tok_per_s", tps, false);
    if (c.task == OT_TASK_CLASSIFY) jnum(r.log, "img_per_s", tps / c.seq_len, false);
    jnum(r.log, "mfu", mfu, false);
    jnum(r.log, "time_s", st.seconds, false);
    jnum(r.log, "mem_mib", mem_mib(), false);
    if (st.loss_scale > 0) {
      jnum(r.log, "loss_scale", st.loss_scale, false);
      fprintf(r.log, "\"overflow\": %s, ", st.overflow ? "true" : "false");
    }
    fprintf(r.log, "\"skipped\": %s}\n", st.skipped ? "true" : "false");
    fflush(r.log);
    if (s != OT_OK) break;
    if (has_val && c.eval_every > 0 && st.step % c.eval_every == 0) {
      s = do_eval(t, &r, st.step, &val);
      last_eval = st.step;
    }
    if (s == OT_OK && c.save_every > 0 && st.step % c.save_every == 0 && st.step < c.steps) {
      char dir[OT_PATH_MAX + 64];
      double t0 = ot_now();
      s = ot_trainer_checkpoint(t, dir, sizeof dir);
      last_save = st.step;
      if (s == OT_OK && !c.quiet) fprintf(out, "checkpoint %s (%.1f s)\n", dir, ot_now() - t0);
    }
  }
  const int64_t done = ot_trainer_steps_done(t);
  if (s == OT_OK) s = peak_report(t, out, r.log, c.quiet);
  if (s == OT_OK && has_val && last_eval != done) s = do_eval(t, &r, done, &val);
  char ck[OT_PATH_MAX + 64] = "";
  if (s == OT_OK && last_save != done) {
    double t0 = ot_now();
    s = ot_trainer_checkpoint(t, ck, sizeof ck);
    if (s == OT_OK && !c.quiet) fprintf(out, "checkpoint %s (%.1f s)\n", ck, ot_now() - t0);
  }
  if (s == OT_OK) s = ot__ratios_report(&ratios, t->par, r.peak, done, out, r.log);
  if (r.log) fclose(r.log);
  if (c.profile[0]) {
    ot_prof_enable(false);
    ot_status ps = ot_prof_write_trace(c.profile);
    if (ps == OT_OK) {
      fprintf(out, "profile: trace written to %s (open in https://ui.perfetto.dev)\n", c.profile);
      ot_prof_summary(out);
    } else if (s == OT_OK) {
      s = ps;
    }
  }
  if (s == OT_OK && root) {
    char title[160];
    const long long per = c.task == OT_TASK_TRANSLATE ? c.tokens_per_batch : (long long)c.batch_size * c.seq_len;
    snprintf(title, sizeof title, "%s: %lld steps, batch %lld tokens", c.model.name, (long long)done,
             (long long)c.grad_accum * c.data_parallel * per);
    s = ot_train_plot(logp, plotp, title);
  }
  // a run must end in a finite state: not on skipped steps, not on a non-finite held-out loss
  if (s == OT_OK && streak > 0 && !last_overflow)
    s = ot_error(OT_EINVAL, "the run ended on %lld skipped step%s (steps %lld-%lld: non-finite loss or gradient), "
                 "so its final loss is not finite%s%s; lower --lr, raise --warmup, or check the data",
                 (long long)streak, streak > 1 ? "s" : "", (long long)(done - streak + 1), (long long)done,
                 ck[0] ? "; the weights before them are in " : "", ck);
  if (s == OT_OK && has_val && !isfinite(val))
    s = ot_error(OT_EINVAL, "the held-out loss at step %lld is not finite (%g)", (long long)done, val);
  if (s == OT_OK && t->par && c.check_replicas > 0) {
    const int64_t nchk = done / c.check_replicas - start / c.check_replicas;
    fprintf(out, "replicas: identical at %lld check%s (every %d steps: each tensor over the data-parallel "
            "replicas, the replicated ones over the tensor-parallel ranks)\n", (long long)nchk, nchk == 1 ? "" : "s",
            c.check_replicas);
  }
  if (s == OT_OK && root && ot__par_zero(t->par) == 3 && zsteps > 0)
    fprintf(out, "ZeRO-3 weight gathers (world rank 0): %.3f s per step, %.3f s of it waited for: %.0f%% "
            "hidden behind compute (prefetch %s)\n", zg / (double)zsteps, zw / (double)zsteps,
            zg > 0 && zw < zg ? 100.0 * (1.0 - zw / zg) : 0.0, c.zero_prefetch ? "on" : "off");
  if (s == OT_OK) {
    char took[32];
    fmt_dur(took, sizeof took, ot_now() - t_run);
    char vs[48];
    if (isfinite(val)) snprintf(vs, sizeof vs, "held-out loss %.4f", val);
    else snprintf(vs, sizeof vs, "no held-out split");
    char sk[128] = "";
    float lsc = 0.0f;
    ot_trainer_loss_scale(t, &lsc, NULL);
    if (overflows && overflows == skipped)
      snprintf(sk, sizeof sk, " (%lld step%s skipped on gradient overflow; loss scale now %g)",
               (long long)overflows, overflows > 1 ? "s" : "", (double)lsc);
    else if (skipped)
      snprintf(sk, sizeof sk, " (%lld steps skipped, %lld of them on gradient overflow)", (long long)skipped,
               (long long)overflows);
    fprintf(out, "done: %lld steps in %s, final loss %.4f, %s%s; wrote %s, %s\n", (long long)(done - start),
            took, loss, vs, sk, logp, plotp);
  }
  fflush(out);
  if (final_loss) *final_loss = loss;
  if (final_val) *final_val = val;
  ot_trainer_free(t);
  if (devnull) fclose(devnull);
  return s;
}
