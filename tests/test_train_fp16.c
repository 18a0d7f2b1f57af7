// fp16 mixed precision and loss scaling in the one trainer:
//  - the scaler's rule (PyTorch GradScaler): growth after the interval of clean steps,
//    backoff (not below the floor) and a restarted count on inf, static scales fixed;
//  - a loss scale is exact in f32: static 8 and dynamic 2^16 give bitwise the losses
//    and weights of an unscaled f32 run (powers of two commute with every rounding);
//  - --dtype f16 (tiny model, 30 steps) follows the f32 loss curve: every step within
//    F16_TOL_STEP and the mean of the last 10 within F16_TOL_TAIL (the tolerances of
//    README's training section), and the f16 parameter copy is the rounded master;
//  - an inf gradient (OT_TEST_INF_GRAD) skips the step: weights, moments and updates
//    unchanged, the scale halved; three clean steps then double it (interval 3);
//  - resume: a checkpoint keeps the scale and the clean-step count; 3 + save + load +
//    3 steps equal 6 straight (scales and losses bitwise);
//  - bad values of the scaler keys are refused naming the key (test_train_config.c).
#include "harness.h"
#include "train_common.h"
#include "train/train_impl.h"
#include <math.h>

#define V 50
#define F16_TOL_STEP 0.02   // |loss f16 - loss f32| at every step (nats)
#define F16_TOL_TAIL 0.01   // relative, mean of the last 10 steps

static void test_scaler_rule(void) {
  ot_train_config c;
  ot_train_config_default(&c);
  c.dtype = OT_F16;
  c.loss_scale_growth_interval = 3;
  c.loss_scale_min = 4096.0f;
  ot__scaler s;
  ot__scaler_init(&s, &c);
  th_check(s.on && s.dynamic && s.scale == 65536.0f && s.clean == 0, "f16: dynamic, 2^16 (PyTorch's init)");
  ot__scaler_update(&s, false);
  ot__scaler_update(&s, false);
  th_check(s.scale == 65536.0f && s.clean == 2, "two clean steps: no growth yet (%g, %lld)", s.scale,
           (long long)s.clean);
  ot__scaler_update(&s, false);
  th_check(s.scale == 131072.0f && s.clean == 0, "the third clean step grows it x2 (%g)", s.scale);
  ot__scaler_update(&s, false);
  ot__scaler_update(&s, true);
  th_check(s.scale == 65536.0f && s.clean == 0, "inf: backoff x0.5 and the count restarts (%g, %lld)", s.scale,
           (long long)s.clean);
  for (int i = 0; i < 6; i++) ot__scaler_update(&s, true);
  th_check(s.scale == 4096.0f, "backoff stops at --loss-scale-min (%g)", s.scale);
  th_check(ot__scaler_scale(&s) == 4096.0f, "scale of the next step");
  c.loss_scale = 8.0f;
  ot__scaler_init(&s, &c);
  ot__scaler_update(&s, true);
  for (int i = 0; i < 5; i++) ot__scaler_update(&s, false);
  th_check(s.on && !s.dynamic && s.scale == 8.0f, "static scale: never changes (%g)", s.scale);
  ot_train_config_default(&c);
  ot__scaler_init(&s, &c);
  th_check(!s.on && ot__scaler_scale(&s) == 1.0f, "f32 by default: no scaler");
  c.dtype = OT_BF16;
  ot__scaler_init(&s, &c);
  th_check(!s.on, "bf16 by default: no scaler");
  c.loss_scale = 0.0f;
  ot__scaler_init(&s, &c);
  th_check(s.on && s.dynamic, "bf16 with --loss-scale 0: dynamic on request");
  c.loss_scale = -1.0f;
  c.dtype = OT_F16;
  c.loss_scale_init = 3e38f;
  c.loss_scale_growth_interval = 1;
  ot__scaler_init(&s, &c);
  ot__scaler_update(&s, false);
  th_check(s.scale == 3e38f, "a growth past FLT_MAX keeps the scale (%g)", s.scale);
}

// Losses of `steps` steps; NULL trainer -> NAN.
static void run(ot_trainer *t, int steps, double *loss, float *scale) {
  for (int i = 0; i < steps; i++) {
    ot_step_info st;
    if (!t || ot_trainer_step(t, &st) != OT_OK) {
      th_check(false, "step: %s", ot_last_error());
      loss[i] = NAN;
      continue;
    }
    loss[i] = st.loss;
    if (scale) scale[i] = st.loss_scale;
  }
}

static void test_exact_in_f32(const char *data) {
  ot_train_config c = tiny_config(data);
  c.steps = 6;
  double l0[6], l1[6], l2[6];
  ot_trainer *a = make_trainer(&c);
  c.loss_scale = 8.0f;
  ot_trainer *b = make_trainer(&c);
  c.loss_scale = 0.0f;
  ot_trainer *d = make_trainer(&c);
  float sc[6];
  run(a, 6, l0, NULL);
  run(b, 6, l1, sc);
  run(d, 6, l2, NULL);
  th_check(sc[0] == 8.0f, "static scale reported (%g)", sc[0]);
  th_check(!memcmp(l0, l1, sizeof l0) && !memcmp(l0, l2, sizeof l0),
           "f32: static 8 and dynamic 2^16 give bitwise the unscaled losses (%.7f %.7f %.7f)", l0[5], l1[5], l2[5]);
  if (a && b && d) {
    const size_t n = ot_model_n_floats(ot_trainer_model(a));
    th_check(!memcmp(ot_model_params(ot_trainer_model(a)), ot_model_params(ot_trainer_model(b)), n * 4) &&
                 !memcmp(ot_model_params(ot_trainer_model(a)), ot_model_params(ot_trainer_model(d)), n * 4),
             "f32: weights bitwise equal with and without loss scaling");
  }
  ot_trainer_free(a);
  ot_trainer_free(b);
  ot_trainer_free(d);
}

static void test_f16_curve(const char *data) {
  enum { S = 30 };
  ot_train_config c = tiny_config(data);
  c.steps = S;
  double l32[S], l16[S];
  float sc[S];
  ot_trainer *a = make_trainer(&c);
  c.dtype = OT_F16;
  ot_trainer *b = make_trainer(&c);
  run(a, S, l32, NULL);
  run(b, S, l16, sc);
  double worst = 0, t32 = 0, t16 = 0;
  int at = 0;
  for (int i = 0; i < S; i++) {
    const double d = fabs(l16[i] - l32[i]);
    if (!(d <= worst)) { worst = d; at = i; }
    if (i >= S - 10) { t32 += l32[i] / 10; t16 += l16[i] / 10; }
  }
  printf("f16 vs f32, %d steps: worst |diff| %.4f at step %d, last-10 means %.4f / %.4f (f32 %.4f -> %.4f)\n", S,
         worst, at + 1, t16, t32, l32[0], l32[S - 1]);
  th_check(worst <= F16_TOL_STEP, "f16 loss within %.2f of f32 at every step (worst %.4f at step %d)", F16_TOL_STEP,
           worst, at + 1);
  th_check(fabs(t16 - t32) <= F16_TOL_TAIL * t32, "f16 last-10 mean %.4f within %.0f%% of f32 %.4f", t16,
           100 * F16_TOL_TAIL, t32);
  th_check(l32[S - 1] < l32[0] - 0.5, "the loss falls (%.4f -> %.4f)", l32[0], l32[S - 1]);
  th_check(sc[0] == 65536.0f, "f16: dynamic loss scale from 2^16 (%g)", sc[0]);
  if (b) {
    ot_model *m = ot_trainer_model(b);
    const size_t n = ot_model_n_floats(m);
    const uint16_t *h = ot_model_params_bf16(m);
    const float *w = ot_model_params(m);
    size_t bad = 0;
    for (size_t i = 0; i < n && h; i++) bad += h[i] != ot_f32_to_f16(w[i]);
    th_check(h && bad == 0, "the f16 copy is the rounded master after the updates (%zu differ)", bad);
  }
  ot_trainer_free(a);
  ot_trainer_free(b);
}

static void test_inf_skip(void) {
  int32_t rows[4 * 17];
  synth_tokens(rows, 4 * 17, V, 31);
  ot_train_config c = tiny_config(NULL);
  c.dtype = OT_F16;
  c.loss_scale_growth_interval = 3;
  ot_trainer *t = make_trainer(&c);
  if (!t) return;
  ot_model *m = ot_trainer_model(t);
  const size_t n = ot_model_n_floats(m);
  ot_step_info st;
  th_check(ot_trainer_step_on(t, rows, &st) == OT_OK && !st.skipped, "step 1 trains (loss %g)", st.loss);
  float *before = th_falloc(n), *m0 = th_falloc(n), *v0 = th_falloc(n);
  memcpy(before, ot_model_params(m), n * 4);
  memcpy(m0, ot_trainer_moment(t, 0), n * 4);
  memcpy(v0, ot_trainer_moment(t, 1), n * 4);
  setenv("OT_TEST_INF_GRAD", "2:0", 1);
  th_check(ot_trainer_step_on(t, rows, &st) == OT_OK, "an overflow is not an error: %s", ot_last_error());
  unsetenv("OT_TEST_INF_GRAD");
  th_check(st.skipped && st.overflow && isfinite(st.loss) && st.loss_scale == 65536.0f,
           "inf gradient at step 2: skipped as an overflow (loss %g, scale %g)", st.loss, st.loss_scale);
  th_check(!memcmp(before, ot_model_params(m), n * 4) && !memcmp(m0, ot_trainer_moment(t, 0), n * 4) &&
               !memcmp(v0, ot_trainer_moment(t, 1), n * 4),
           "weights and moments unchanged by the skipped step");
  float s;
  int64_t clean;
  ot_trainer_loss_scale(t, &s, &clean);
  th_check(s == 32768.0f && clean == 0 && ot_trainer_updates(t) == 1, "scale backed off to %g, count %lld, %lld updates",
           s, (long long)clean, (long long)ot_trainer_updates(t));
  for (int i = 0; i < 3; i++) ot_trainer_step_on(t, rows, &st);
  ot_trainer_loss_scale(t, &s, &clean);
  th_check(!st.skipped && s == 65536.0f && clean == 0, "three clean steps grow it back (%g)", s);
  free(before); free(m0); free(v0);
  ot_trainer_free(t);
}

static void test_resume(const char *data, const char *tmp) {
  ot_train_config c = tiny_config(data);
  c.dtype = OT_F16;
  c.steps = 6;
  c.loss_scale_growth_interval = 4;
  ot_trainer *a = make_trainer(&c), *b = make_trainer(&c), *r = make_trainer(&c);
  if (!a || !b || !r) goto out;
  double la[6], lb[6];
  float sa[6], sb[6];
  setenv("OT_TEST_INF_GRAD", "1", 1);   // an overflow at step 1: the state differs from the start
  run(a, 6, la, sa);
  run(b, 3, lb, sb);
  unsetenv("OT_TEST_INF_GRAD");
  char dir[256];
  snprintf(dir, sizeof dir, "%s/ck_fp16", tmp);
  float s_b, s_r;
  int64_t c_b, c_r;
  ot_trainer_loss_scale(b, &s_b, &c_b);
  th_check(s_b == 32768.0f && c_b == 2, "before the save: scale %g, %lld clean steps", s_b, (long long)c_b);
  th_check(ot_trainer_save(b, dir) == OT_OK, "save: %s", ot_last_error());
  th_check(ot_trainer_load(r, dir, false) == OT_OK, "load: %s", ot_last_error());
  ot_trainer_loss_scale(r, &s_r, &c_r);
  th_check(s_r == s_b && c_r == c_b, "the scaler state is restored (%g, %lld)", s_r, (long long)c_r);
  run(r, 3, lb + 3, sb + 3);
  th_check(!memcmp(la, lb, sizeof la) && !memcmp(sa, sb, sizeof sa),
           "6 straight vs 3 + resume + 3: bitwise-identical losses and scales (%.7f / %.7f, scale %g / %g)", la[5],
           lb[5], sa[5], sb[5]);
  th_check(sa[4] == 32768.0f && sa[5] == 65536.0f, "the scale grew after 4 clean steps in both (%g, %g)", sa[4], sa[5]);
out:
  ot_trainer_free(a);
  ot_trainer_free(b);
  ot_trainer_free(r);
}

int main(void) {
  test_scaler_rule();
  char dir[64];
  if (!make_data(dir, sizeof dir, V, 20000, 4000)) return th_finish();
  test_exact_in_f32(dir);
  test_f16_curve(dir);
  test_inf_skip();
  test_resume(dir, dir);
  remove_tree(dir);
  return th_finish();
}
