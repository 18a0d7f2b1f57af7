// `ot prepare --task translate`: a joint BPE over both sides of a parallel
// corpus, its files, a summary per split, and optionally the token ids of every
// kept pair as text (for side-by-side scripts that train the same model).
#include "prepare_translate.h"
#include "io/files.h"
#include <errno.h>

static const char *const k_split[3] = {"train", "valid", "test"};

// <prefix>.<split>.tsv: one line per kept pair, "src ids<TAB>tgt ids" (no start/eos).
static int dump(const ot_bitext *bt, const char *prefix, const char *split) {
  char path[4200];
  snprintf(path, sizeof path, "%s.%s.tsv", prefix, split);
  FILE *f = fopen(path, "w");
  if (!f) { fprintf(stderr, "ot prepare: cannot write %s: %s\n", path, strerror(errno)); return 1; }
  for (int64_t i = 0; i < ot_bitext_pairs(bt); i++) {
    const int32_t *s, *t;
    int ns, nt;
    ot_bitext_pair(bt, i, &s, &ns, &t, &nt);
    for (int k = 0; k < ns; k++) fprintf(f, k ? " %d" : "%d", s[k]);
    fputc('\t', f);
    for (int k = 0; k < nt; k++) fprintf(f, k ? " %d" : "%d", t[k]);
    fputc('\n', f);
  }
  if (fclose(f) != 0) { fprintf(stderr, "ot prepare: cannot write %s: %s\n", path, strerror(errno)); return 1; }
  return 0;
}

int cli_prepare_translate(const cli_translate_prep *p) {
  if (ot__mkdirs(p->out) != OT_OK) { fprintf(stderr, "ot prepare: %s\n", ot_last_error()); return 1; }
  double t0 = ot_now();
  ot_bpe *t = NULL;
  const char *used = p->kind;
  if (!strcmp(p->kind, "bpe")) {
    if (ot_bitext_train_bpe(&t, p->src[0], p->tgt[0], p->vocab, !p->quiet) != OT_OK) {
      fprintf(stderr, "ot prepare: %s\n", ot_last_error());
      return 1;
    }
  } else if (!(t = cli_pick_tokenizer(p->kind, NULL, 0, &used))) {
    return 1;
  }
  const double tok_s = ot_now() - t0;
  if (ot_bpe_eot(t) < 0) {
    fprintf(stderr, "ot prepare: the tokenizer %s has no %s token (it is eos, decoder start and pad)\n", used,
            OT_BPE_EOT);
    ot_bpe_free(t);
    return 1;
  }
  char vj[4200], mt[4200], ip[4200];
  snprintf(vj, sizeof vj, "%s/vocab.json", p->out);
  snprintf(mt, sizeof mt, "%s/merges.txt", p->out);
  snprintf(ip, sizeof ip, "%s/info.json", p->out);
  if (ot_bpe_save(t, vj, mt) != OT_OK) {
    fprintf(stderr, "ot prepare: %s\n", ot_last_error());
    ot_bpe_free(t);
    return 1;
  }
  printf("tokenizer  %s: %d tokens, %d merges, %s = %d = eos = decoder start = pad (%s %.2f s)\n", used,
         ot_bpe_vocab_size(t), ot_bpe_merges(t), OT_BPE_EOT, ot_bpe_eot(t),
         strcmp(p->kind, "bpe") ? "loaded in" : "trained on train in", tok_s);
  int rc = 0;
  char info[8192];
  int il = snprintf(info, sizeof info, "{\"task\": \"translate\", \"tokenizer\": \"%s\", \"vocab_size\": %d, "
                    "\"eos\": %d, \"max_len\": %d", used, ot_bpe_vocab_size(t), ot_bpe_eot(t), p->max_len);
  for (int k = 0; k < 3 && !rc; k++) {
    if (!p->src[k]) continue;
    ot_bitext_opts o = {t, p->max_len, p->refuse_long};
    ot_bitext *bt = NULL;
    if (ot_bitext_open(&bt, p->src[k], p->tgt[k], &o) != OT_OK) {
      fprintf(stderr, "ot prepare: %s split: %s\n", k_split[k], ot_last_error());
      rc = 1;
      break;
    }
    ot_bitext_stats st;
    ot_bitext_get_stats(bt, &st);
    printf("%-10s %lld pairs of %lld lines (skipped %lld empty, %lld over %d tokens); tokens src %lld, tgt %lld "
           "(longest %d, %d)\n", k_split[k], (long long)st.pairs, (long long)st.lines, (long long)st.empty,
           (long long)st.too_long, p->max_len, (long long)st.src_tokens, (long long)st.tgt_tokens, st.max_src,
           st.max_tgt);
    if (il > 0 && (size_t)il < sizeof info)
      il += snprintf(info + il, sizeof info - (size_t)il, ", \"%s\": {\"src\": \"%s\", \"tgt\": \"%s\", \"lines\": "
                     "%lld, \"pairs\": %lld, \"empty\": %lld, \"too_long\": %lld, \"src_tokens\": %lld, "
                     "\"tgt_tokens\": %lld}", k_split[k], p->src[k], p->tgt[k], (long long)st.lines,
                     (long long)st.pairs, (long long)st.empty, (long long)st.too_long, (long long)st.src_tokens,
                     (long long)st.tgt_tokens);
    if (p->dump_ids) rc = dump(bt, p->dump_ids, k_split[k]);
    ot_bitext_close(bt);
  }
  if (!rc) {
    if (il < 0 || (size_t)il + 3 > sizeof info) {
      fprintf(stderr, "ot prepare: paths too long for %s\n", ip);
      rc = 1;
    } else {
      memcpy(info + il, "}\n", 3);
      if (ot__write_atomic(ip, info, strlen(info)) != OT_OK) { fprintf(stderr, "ot prepare: %s\n", ot_last_error()); rc = 1; }
    }
  }
  if (!rc)
    printf("wrote      %s/{vocab.json,merges.txt,info.json}%s%s%s\n", p->out, p->dump_ids ? " and " : "",
           p->dump_ids ? p->dump_ids : "", p->dump_ids ? ".<split>.tsv" : "");
  ot_bpe_free(t);
  return rc;
}
