// Writes the seed corpora of the fuzz targets into DIR/<target>/ (run by hand:
// build-fuzz/ot_fuzz_seeds tests/fuzz/corpus, from the repository root). The valid seeds come from our
// own writers (safetensors, shards, BPE, quantized files); the others are small
// hand-written files and the regression inputs of fixed defects.
#define _GNU_SOURCE
#include "ot/ot.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *g_dir;

static void put(const char *target, const char *name, const void *p, size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", g_dir, target);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/%s/%s", g_dir, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) { perror(path); exit(1); }
}
static void puts_(const char *target, const char *name, const char *s) { put(target, name, s, strlen(s)); }

// The file at path, appended to prefix[0, np), as seed target/name.
static void put_file(const char *target, const char *name, const char *path, const void *prefix, size_t np) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(1); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + np);
  if (np) memcpy(b, prefix, np);
  if (fread(b + np, 1, (size_t)n, f) != (size_t)n) exit(1);
  fclose(f);
  put(target, name, b, (size_t)n + np);
  free(b);
}

static void check(ot_status s) {
  if (s != OT_OK) { fprintf(stderr, "seeds: %s\n", ot_last_error()); exit(1); }
}

static void safetensors(const char *tmp) {
  float a[6] = {1, 2, 3, 4, 5, 6};
  uint16_t h[3] = {0x3f80, 0, 0xc000};
  ot_st_tensor t[2] = {{"w", OT_F32, 2, {2, 3}, a, sizeof a}, {"b.bias", OT_BF16, 1, {3}, h, sizeof h}};
  const char *k[1] = {"format"}, *v[1] = {"pt"};
  check(ot_st_write(tmp, t, 2, k, v, 1));
  put_file("safetensors", "two_tensors", tmp, NULL, 0);
  check(ot_st_write(tmp, t, 1, NULL, NULL, 0));
  put_file("safetensors", "one_tensor", tmp, NULL, 0);
  ot_st_tensor s0 = {"s", OT_I32, 0, {0}, a, 4};
  check(ot_st_write(tmp, &s0, 1, NULL, NULL, 0));
  put_file("safetensors", "scalar", tmp, NULL, 0);
  static const char bad1[] = "\x10\0\0\0\0\0\0\0{\"x\":{\"dtype\":1}}";
  put("safetensors", "bad_dtype", bad1, sizeof bad1 - 1);
  // regression: the reader accepted an empty metadata key / tensor name (the writer refuses both)
  static const char reg1[] = "\x1b\0\0\0\0\0\0\0{\"__metadata__\": {\"\": \"x\"}}";
  put("safetensors", "regress_empty_meta_key", reg1, sizeof reg1 - 1);
  static const char reg2[] = "\x32\0\0\0\0\0\0\0{\"\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}x";
  put("safetensors", "regress_empty_tensor_name", reg2, sizeof reg2 - 1);
}

static void shards(const char *tmp) {
  int32_t ids[40];
  for (int i = 0; i < 40; i++) ids[i] = (i * 7919) % 300;
  uint8_t st[25] = {3};          // T = 4, file order, epoch 0, index 0, a stranger's fingerprint
  uint8_t st2[25] = {64 | 8 | 2, 5, 0, 0, 0, 0, 0, 0, 0, 1}; // shuffled, epoch 5, index 1, own fingerprint
  check(ot_shard_write(tmp, ids, 40, 1));
  put_file("shards", "v1", tmp, st, sizeof st);
  put_file("shards", "v1_state", tmp, st2, sizeof st2);
  ids[3] = 70000;
  check(ot_shard_write(tmp, ids, 40, 2));
  put_file("shards", "v2", tmp, st2, sizeof st2);
  uint8_t hdr[25 + 1024] = {0};
  put("shards", "zero_header", hdr, sizeof hdr);
}

static void bpe(const char *dir) {
  static const char text[] = "the quick brown fox jumps over the lazy dog; the dog sleeps. "
                             "caf\xc3\xa9 \xe2\x82\xac <|endoftext|> the end";
  ot_bpe *t = NULL;
  check(ot_bpe_train(&t, text, sizeof text - 1, 300, false));
  char vp[900], mp[900];
  snprintf(vp, sizeof vp, "%s/vocab.json", dir);
  snprintf(mp, sizeof mp, "%s/merges.txt", dir);
  check(ot_bpe_save(t, vp, mp));
  ot_bpe_free(t);
  FILE *f = fopen(vp, "rb");
  char *v = NULL, *m = NULL;
  size_t vn = 0, mn = 0;
  if (!f || getdelim(&v, &vn, 0, f) < 0) exit(1);
  vn = strlen(v);
  fclose(f);
  f = fopen(mp, "rb");
  if (!f || getdelim(&m, &mn, 0, f) < 0) exit(1);
  mn = strlen(m);
  fclose(f);
  char *b = malloc(vn + mn + 1);
  memcpy(b, v, vn);
  b[vn] = 0;
  memcpy(b + vn + 1, m, mn);
  put("bpe", "trained", b, vn + 1 + mn);
  free(b);
  free(v);
  free(m);
  put("bpe", "no_merges", "{\"a\": 0}\0#version: 0.2\n", 24);
  put("bpe", "bad_json", "{\"a\": \0#version: 0.2\na b\n", 26);
}

static void quant(const char *tmp) {
  ot_model_config c;
  check(ot_model_config_preset(&c, "tiny"));
  c.vocab = 16; c.vocab_pad = 1; c.d_model = 32; c.n_layers = 1; c.n_heads = 2; c.n_kv_heads = 2;
  c.d_ff = 32; c.max_seq = 4;
  ot_run_config run = {1, 1, OT_F32, OT_RECOMPUTE_NONE, -1};
  ot_model *m = NULL;
  check(ot_model_create(&m, &c, &run));
  check(ot_model_init(m, 1));
  static const struct { ot_qw_kind k; int group; const char *name; } v[] = {
    {OT_QW_INT8, 32, "int8_g32"}, {OT_QW_INT8, 0, "int8_channel"}, {OT_QW_BF16, 0, "bf16"}};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    ot_qmodel *q = NULL;
    check(ot_qmodel_from_model(&q, m, v[i].k, v[i].group));
    check(ot_quant_file_save(q, tmp));
    put_file("quant", v[i].name, tmp, NULL, 0);
    ot_qmodel_free(q);
  }
  ot_model_free(m);
}

static void texts(void) {
  puts_("json", "object", "{\"a\": [1, 2.5e3, -0, true, false, null], \"b\": {\"c\": \"\\u00e9\\ud83d\\ude00\\n\"}}");
  puts_("json", "numbers", "[9223372036854775807, 9223372036854775808, -1e308, 1E-7, 0.5]");
  puts_("json", "bad_escape", "\"\\x\"");
  puts_("json", "deep", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
  puts_("json", "bad_utf8", "\"\xc3\x28\"");
  puts_("http", "get_health", "GET /health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n");
  puts_("http", "post_text", "POST /v1/completions HTTP/1.1\r\nContent-Length: 61\r\n\r\n"
        "{\"prompt\": \"the fox\", \"max_tokens\": 4, \"stop\": [\"x\"], \"n\": 1}");
  puts_("http", "post_ids", "POST /v1/completions HTTP/1.0\r\nContent-Length: 71\r\nExpect: 100-continue\r\n\r\n"
        "{\"prompt\": [1, 2, 3], \"temperature\": 0.5, \"top_p\": 0.9, \"stream\": true}");
  puts_("http", "post_bad_field", "POST /v1/completions HTTP/1.1\r\nContent-Length: 29\r\n\r\n{\"prompt\": [1], \"echo\": true}");
  puts_("http", "bad_version", "GET / HTTP/2.0\r\n\r\n");
  // regressions: Transfer-Encoding (501), and beside Content-Length (400: request smuggling)
  puts_("http", "regress_te_and_cl", "POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n"
        "Transfer-Encoding: chunked\r\n\r\n{}");
  puts_("http", "regress_te_chunked", "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2\r\n{}\r\n0\r\n\r\n");
  puts_("rank_table", "two_servers",
        "{\"version\": \"1.0\", \"server_count\": \"2\", \"status\": \"completed\", \"server_list\": ["
        "{\"server_id\": \"10.0.0.1\", \"host_nic_ip\": \"reserve\", \"device\": ["
        "{\"device_id\": \"0\", \"device_ip\": \"192.1.27.6\", \"rank_id\": \"0\"}, "
        "{\"device_id\": \"1\", \"device_ip\": \"192.2.27.6\", \"rank_id\": \"1\"}]}, "
        "{\"server_id\": \"10.0.0.2\", \"device\": [{\"device_id\": 0, \"rank_id\": 2}, "
        "{\"device_id\": 1, \"rank_id\": 3}]}]}");
  puts_("rank_table", "interleaved",
        "{\"server_count\": 2, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, "
        "\"rank_id\": 0}, {\"device_id\": 1, \"rank_id\": 2}]}, {\"server_id\": \"b\", \"device\": "
        "[{\"device_id\": 1, \"rank_id\": 3}, {\"device_id\": 0, \"rank_id\": 1}]}]}");
  puts_("rank_table", "duplicate_rank",
        "{\"server_count\": 1, \"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": 0, "
        "\"rank_id\": 0}, {\"device_id\": 1, \"rank_id\": 0}]}]}");
  puts_("rank_table", "hostfile", "# hosts\nnode1 slots=2 max_slots=4\nnode2\nnode1 slots=1\n");
  puts_("train_config", "lines", "# a run\nmodel = tiny\nlr: 3e-4\nsteps = 10\nbatch_size = 2\nseq_len = 64\n");
  puts_("train_config", "json", "{\"model\": \"tiny\", \"lr\": 0.001, \"shuffle\": false, \"steps\": 5}");
  puts_("train_config", "unknown_key", "colour = blue\n");
  puts_("train_config", "parallel_config",
        "{\"model\": \"tiny\", \"parallel_config\": {\"data_parallel\": 2, \"model_parallel\": 2, "
        "\"pipeline_stage\": 1, \"micro_batch_num\": 2, \"recompute\": true, \"vocab_emb_dp\": false, "
        "\"optimizer_shard\": true, \"gradient_aggregation_group\": 2}}");
  puts_("train_config", "parallel_yaml", "parallel_config:\n  data_parallel: 2\n  model_parallel: 2\n"
        "  optimizer_shard: True\n  vocab_emb_dp: true\n");
  puts_("train_config", "bad_line", "lr\n");
  puts_("hf_config", "gpt2", "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 300, "
        "\"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, \"n_positions\": 128, \"layer_norm_epsilon\": 1e-5}");
  puts_("hf_config", "llama", "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 300, "
        "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
        "\"num_key_value_heads\": 2, \"max_position_embeddings\": 128, \"rms_norm_eps\": 1e-6, "
        "\"rope_theta\": 10000.0, \"tie_word_embeddings\": false}");
  puts_("hf_config", "no_type", "{\"vocab_size\": 300}");
  // bleu: a flags byte (bit 0: tokenizer none, bit 1: lowercase), then the text
  puts_("bleu", "punct", "\x00He said &quot;yes&quot; &amp; paid $1,234.56 (p. 7) in 2019-2020.");
  puts_("bleu", "unicode_lc", "\x02Caf\xc3\xa9 \xc4\xb0stanbul \xce\x9f\xce\x94\xce\x9f\xce\xa3\xe3\x80\x80\xe6\x97\xa5\xe6\x9c\xac ok.");
  puts_("bleu", "none_ws", "\x01a\tb\xc2\xa0c  d\r\n e <skipped> -\nf");
  puts_("bleu", "bad_utf8", "\x00ok \xed\xa0\x80 \xc3");
}

// parallel text: a settings byte, the source file, NUL, the target file
static void bitext(void) {
  static const char ok[] = "\x9ethe file\nopen it\r\n\nlast\0le fichier\nouvrez-le\r\nvide\nfin";
  put("bitext", "pairs", ok, sizeof ok - 1);
  static const char two[] = "\x1e" "a\nb b b b b b b b b b\nc\nd\0x\ny\nz\nw\n";
  put("bitext", "world2_long", two, sizeof two - 1);
  static const char bad[] = "\x40one\ntwo\0un\nde\xffux\n";
  put("bitext", "bad_utf8", bad, sizeof bad - 1);
  static const char cnt[] = "\x00one\ntwo\nthree\0un\n";
  put("bitext", "unequal", cnt, sizeof cnt - 1);
}

// A few images of the bundled digits as an array file; small PGM / PPM files; a list.
static void images(const char *tmp) {
  ot_images *d = NULL;
  check(ot_images_load(&d, "data/digits/heldout.otimg", 1, 10));
  d->n = 3;
  check(ot_images_save(d, tmp));
  ot_images_free(d);
  static const uint8_t flag0 = 0, flag1 = 1;
  put_file("images", "digits3", tmp, &flag0, 1);
  static const char pgm[] = "\x01P5\n# c\n2 2\n255\n\x01\x02\x03\xff";
  put("images", "pgm", pgm, sizeof pgm - 1);
  static const char ppm[] = "\x01P6 1 1 16\n\x01\x02\x10";
  put("images", "ppm", ppm, sizeof ppm - 1);
  puts_("images", "list", "\x00# a list\nmissing.ppm 3\n");
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
  g_dir = argv[1];
  mkdir(g_dir, 0755);
  char tmpd[] = "/tmp/ot_seeds_XXXXXX", tmp[64];
  if (!mkdtemp(tmpd)) return 1;
  snprintf(tmp, sizeof tmp, "%s/f", tmpd);
  safetensors(tmp);
  shards(tmp);
  bpe(tmpd);
  quant(tmp);
  texts();
  bitext();
  images(tmp);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpd);
  return system(cmd) == 0 ? 0 : 1;
}
