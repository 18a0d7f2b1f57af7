// Hugging Face ViTForImageClassification interop: tiny random models made by
// tools/gen_vit_golden.py with transformers (image sides the patch does not
// divide, 3 heads, 7 and 5 labels, 3 and 1 channels, erf and tanh GELU) load
// with ot_model_load_hf and give transformers' logits, also at another image
// size with interpolated positions (interpolate_pos_encoding=True); a
// directory written by ot_model_save_hf loads back to the same logits, and
// the config round-trips; mean pooling against transformers modules' (timm's avg).
#include "harness.h"
#include <unistd.h>

static const ot_st_tensor *need(const ot_st_file *f, const char *name) {
  const ot_st_tensor *t = ot_st_find(f, name);
  th_check(t != NULL, "golden tensor %s", name);
  return t;
}

// Logits of images x [B, C, H, W] (f32) into out [B * V].
static bool logits_of(ot_model *m, const ot_st_tensor *x, bool interp, float *out) {
  const int B = (int)x->shape[0], H = (int)x->shape[2], W = (int)x->shape[3];
  ot_image_batch b = {B, H, W, x->data, NULL, interp};
  if (!th_check(ot_model_forward_images(m, &b, 0, false, NULL) == OT_OK, "forward: %s", ot_last_error()))
    return false;
  int ld = 0;
  const void *lg = ot_model_logits(m, &ld);
  const int V = ot_model_config_of(m)->vocab;
  const ot_dtype dt = ot_model_run_of(m)->dt;
  for (int i = 0; i < B; i++)
    for (int j = 0; j < V; j++)
      out[i * V + j] = dt == OT_F32 ? ((const float *)lg)[(size_t)i * ld + j]
                                    : ot_bf16_to_f32(((const uint16_t *)lg)[(size_t)i * ld + j]);
  return true;
}

static void test_case(const char *name) {
  char dir[256], path[300];
  snprintf(dir, sizeof dir, "tests/golden/hf_vit_%s", name);
  snprintf(path, sizeof path, "%s/logits.safetensors", dir);
  ot_st_file *g = NULL;
  if (!th_check(ot_st_open(&g, path) == OT_OK, "open %s: %s", path, ot_last_error())) return;
  const ot_st_tensor *x = need(g, "pixel_values"), *y = need(g, "logits");
  const ot_st_tensor *xi = ot_st_find(g, "pixel_values_interp"), *yi = ot_st_find(g, "logits_interp");
  if (!x || !y) { ot_st_close(g); return; }
  ot_model_config c;
  snprintf(path, sizeof path, "%s/config.json", dir);
  th_check(ot_model_config_from_hf(&c, path) == OT_OK, "config %s: %s", name, ot_last_error());
  const int B = (int)x->shape[0], V = (int)y->shape[1];
  th_check(c.arch == OT_ARCH_VIT && c.vocab == V && c.channels == (int)x->shape[1] &&
           c.image_size == (int)x->shape[2], "%s: config (classes %d, channels %d, %dx%d)", name, c.vocab,
           c.channels, c.image_size, c.image_size);
  const int T = xi ? ot_vit_tokens(&c, (int)xi->shape[2], (int)xi->shape[3]) : c.max_seq;
  float *got = th_falloc((size_t)B * V);
  for (int di = 0; di < 2; di++) {
    const ot_dtype dt = di ? OT_BF16 : OT_F32;
    const double tol = di ? 3e-2 : 2e-5;
    ot_run_config r = {B, T > c.max_seq ? T : c.max_seq, dt, OT_RECOMPUTE_NONE, -1};
    ot_model *m = NULL;
    if (!th_check(ot_model_load_hf(&m, dir, &r) == OT_OK, "load %s: %s", dir, ot_last_error())) continue;
    if (logits_of(m, x, false, got))
      th_check_nerr(got, y->data, (size_t)B * V, tol, "%s %s: logits = transformers'", name, ot_dtype_name(dt));
    if (xi && yi && logits_of(m, xi, true, got))
      th_check_nerr(got, yi->data, (size_t)B * V, tol, "%s %s: logits at %lldx%lld (interpolated positions) "
                    "= transformers'", name, ot_dtype_name(dt), (long long)xi->shape[2], (long long)xi->shape[3]);
    if (xi)   // without interpolation another size is refused, as transformers does
      th_check_error(ot_model_forward_images(m, &(ot_image_batch){B, (int)xi->shape[2], (int)xi->shape[3],
                                                                   xi->data, NULL, false}, 0, false, NULL),
                     OT_EINVAL, "doesn't match model", "another size without interpolation");
    if (dt == OT_F32) {   // save_hf -> load: the same logits, bit for bit
      char out[256];
      snprintf(out, sizeof out, "/tmp/ot_test_vit_hf_%d_%s", (int)getpid(), name);
      char cmd[300];
      snprintf(cmd, sizeof cmd, "mkdir -p %s", out);
      th_check(system(cmd) == 0, "mkdir");
      th_check(ot_model_save_hf(m, out) == OT_OK, "save_hf: %s", ot_last_error());
      ot_model *m2 = NULL;
      float *again = th_falloc((size_t)B * V);
      if (th_check(ot_model_load_hf(&m2, out, &r) == OT_OK, "reload: %s", ot_last_error()) &&
          logits_of(m2, x, false, again) && logits_of(m, x, false, got))
        th_check(memcmp(got, again, (size_t)B * V * 4) == 0, "%s: saved directory gives the same logits", name);
      const ot_model_config *c2 = m2 ? ot_model_config_of(m2) : NULL;
      th_check(c2 && c2->d_model == c.d_model && c2->n_heads == c.n_heads && c2->mlp == c.mlp &&
               c2->eps == c.eps && c2->patch_size == c.patch_size && c2->vocab == c.vocab,
               "%s: config.json round-trips", name);
      ot_model_free(m2);
      // loaded for inference: the same logits bit for bit, no gradient buffer, backward refused
      m2 = NULL;
      if (th_check(ot_model_load_hf_infer(&m2, dir, &r) == OT_OK, "load for inference: %s", ot_last_error()) &&
          logits_of(m2, x, false, again) && logits_of(m, x, false, got)) {
        th_check(memcmp(got, again, (size_t)B * V * 4) == 0, "%s: inference load gives the same logits", name);
        th_check(ot_model_grads(m2) == NULL && ot_model_plan_of(m2)->grads == 0 &&
                 ot_model_plan_of(m)->grads > 0, "%s: no gradient buffer when loaded for inference", name);
        th_check_error(ot_model_backward(m2), OT_EINVAL, "loaded for inference", "backward of an inference load");
      }
      ot_model_free(m2);
      free(again);
      snprintf(cmd, sizeof cmd, "rm -rf %s", out);
      th_check(system(cmd) == 0, "rm");
    }
    ot_model_free(m);
  }
  free(got);
  ot_st_close(g);
}

// Mean pooling (timm's global_pool='avg'): the golden models with pool = mean give the
// logits tools/gen_vit_golden.py --mean computed with transformers' modules (the mean of
// the last block's patch tokens, the final LayerNorm, the classifier), f32 and bf16; its
// config.json ("ot-vit") round-trips the pooling; ot_model_save_hf refuses it.
static void test_mean(const char *name) {
  char dir[256], path[300];
  snprintf(dir, sizeof dir, "tests/golden/hf_vit_%s", name);
  snprintf(path, sizeof path, "%s/logits_mean.safetensors", dir);
  ot_st_file *g = NULL, *w = NULL;
  if (!th_check(ot_st_open(&g, path) == OT_OK, "open %s: %s", path, ot_last_error())) return;
  const ot_st_tensor *x = need(g, "pixel_values"), *y = need(g, "logits");
  ot_model_config c;
  snprintf(path, sizeof path, "%s/config.json", dir);
  th_check(ot_model_config_from_hf(&c, path) == OT_OK && c.pool == OT_POOL_CLS, "config %s: %s", name,
           ot_last_error());
  c.pool = OT_POOL_MEAN;
  const int B = (int)x->shape[0], V = (int)y->shape[1];
  float *got = th_falloc((size_t)B * V);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  th_check(ot_st_open(&w, path) == OT_OK, "open %s: %s", path, ot_last_error());
  for (int di = 0; di < 2 && w; di++) {
    const ot_dtype dt = di ? OT_BF16 : OT_F32;
    ot_run_config r = {B, c.max_seq, dt, OT_RECOMPUTE_NONE, -1};
    ot_model *m = NULL;
    if (!th_check(ot_model_create(&m, &c, &r) == OT_OK && ot_model_import(m, w, NULL, true) == OT_OK,
                  "mean-pooled %s: %s", name, ot_last_error())) {
      ot_model_free(m);
      continue;
    }
    if (logits_of(m, x, false, got))
      th_check_nerr(got, y->data, (size_t)B * V, di ? 3e-2 : 2e-5, "%s %s mean pooling: logits = "
                    "transformers' modules'", name, ot_dtype_name(dt));
    if (!di) {
      th_check_error(ot_model_save_hf(m, "/tmp"), OT_EUNSUPPORTED, "cannot express", "save_hf mean-pooled");
      char cj[8192];
      ot_vit_hf_config(&c, cj, sizeof cj);
      char tmp[128];
      snprintf(tmp, sizeof tmp, "/tmp/ot_test_vit_mean_%d.json", (int)getpid());
      FILE *f = fopen(tmp, "w");
      if (f) {
        fputs(cj, f);
        fclose(f);
      }
      ot_model_config back;
      th_check(strstr(cj, "\"model_type\": \"ot-vit\"") && ot_model_config_from_hf(&back, tmp) == OT_OK &&
               back.pool == OT_POOL_MEAN && back.d_model == c.d_model, "%s: ot-vit config.json round-trips "
               "the pooling: %s", name, ot_last_error());
      remove(tmp);
    }
    ot_model_free(m);
  }
  free(got);
  ot_st_close(w);
  ot_st_close(g);
}

static void test_errors(void) {
  char dir[128], p[200];
  snprintf(dir, sizeof dir, "/tmp/ot_test_vit_cfg_%d", (int)getpid());
  snprintf(p, sizeof p, "mkdir -p %s", dir);
  th_check(system(p) == 0, "mkdir");
  snprintf(p, sizeof p, "%s/config.json", dir);
  ot_model_config c;
  FILE *f = fopen(p, "w");
  fputs("{\"model_type\": \"vit\", \"hidden_act\": \"relu\"}", f);
  fclose(f);
  th_check_error(ot_model_config_from_hf(&c, p), OT_EUNSUPPORTED, "hidden_act 'relu'", "relu ViT");
  f = fopen(p, "w");
  fputs("{\"model_type\": \"vit\", \"qkv_bias\": false}", f);
  fclose(f);
  th_check_error(ot_model_config_from_hf(&c, p), OT_EUNSUPPORTED, "qkv_bias", "no qkv bias");
  f = fopen(p, "w");
  fputs("{\"model_type\": \"vit\", \"image_size\": 8, \"patch_size\": 16}", f);
  fclose(f);
  th_check_error(ot_model_config_from_hf(&c, p), OT_EINVAL, "image_size=8", "image smaller than a patch");
  snprintf(p, sizeof p, "rm -rf %s", dir);
  th_check(system(p) == 0, "rm");
}

int main(void) {
  test_case("a");
  test_case("b");
  test_mean("a");
  test_mean("b");
  test_errors();
  return th_finish();
}
