// The translate hook of `ot train --task translate` (ot_train_hooks): greedy
// decoding of held-out sentences through the translator (ot_translator_*), so
// the trainer prints BLEU at each evaluation. It lives in the command because
// the trainer (src/train/) sits below the inference layer.
#include "translate.h"
#include "cli_train_bleu.h"
#include "ot/infer.h"
#include "serve/serve_impl.h"   // ot__tokens_text
#include <stdlib.h>
#include <string.h>

enum { CHUNK = 16 };   // sentences decoded together

// Greedy translations of src[0, n) into hyp[0, n) (malloc'd, detokenized, valid UTF-8). A
// source over the model's max_seq tokens is cut to max_seq - 1 tokens + eos.
static ot_status translate(void *ctx, ot_model *m, const char *tokenizer_dir,
                           const char *const *src, int n, char **hyp) {
  cli_train_bleu *b = ctx;
  static const char fn[] = "ot train (BLEU)";
  if (!b->bpe || strcmp(b->dir, tokenizer_dir)) {
    ot_bpe_free(b->bpe);
    b->bpe = NULL;
    char vj[OT_PATH_MAX + 16], mt[OT_PATH_MAX + 16];
    snprintf(vj, sizeof vj, "%s/vocab.json", tokenizer_dir);
    snprintf(mt, sizeof mt, "%s/merges.txt", tokenizer_dir);
    OT_TRY(ot_bpe_load(&b->bpe, vj, mt));
    snprintf(b->dir, sizeof b->dir, "%s", tokenizer_dir);
  }
  const ot_model_config *mc = ot_model_config_of(m);
  const int S = mc->max_seq, cap = mc->max_seq;
  ot_beam_config bc = ot_beam_config_default();
  bc.vocab = mc->vocab;
  bc.num_beams = 1;
  bc.max_length = mc->max_seq;
  bc.max_len_a = 1.5f;   // as the side-by-side PyTorch script: 1.5 * source + 10
  bc.max_len_b = 10;
  bc.eos_id = mc->eos_id;
  bc.pad_id = mc->pad_id;
  bc.decoder_start_id = mc->decoder_start_id;
  ot_translator_config tc = {CHUNK, 1, S, S};
  ot_translator *t = NULL;
  OT_TRY(ot_translator_create(&t, m, &tc));
  int32_t *ids = calloc((size_t)CHUNK * S, sizeof *ids), *toks = calloc((size_t)CHUNK * cap, sizeof *toks);
  int32_t *len = calloc(CHUNK, sizeof *len);
  int *olen = calloc(CHUNK, sizeof *olen);
  ot_status st = ids && toks && len && olen ? OT_OK : ot_error(OT_ENOMEM, "%s: out of memory", fn);
  for (int i0 = 0; st == OT_OK && i0 < n; i0 += CHUNK) {
    const int k = n - i0 < CHUNK ? n - i0 : CHUNK;
    for (int i = 0; st == OT_OK && i < k; i++) {
      int32_t *row = ids + (size_t)i * S;
      int got = 0;
      st = tr_line_ids(b->bpe, false, src[i0 + i], strlen(src[i0 + i]), mc->vocab, mc->eos_id, row, S, &got);
      if (got > S) { got = S; row[S - 1] = mc->eos_id; }
      len[i] = got;
    }
    if (st == OT_OK) st = ot_translate_ids(t, k, ids, S, len, &bc, toks, cap, olen, NULL, NULL);
    for (int i = 0; st == OT_OK && i < k; i++) {
      ot__sbuf sb = {0};
      ot__tokens_text(b->bpe, toks + (size_t)i * cap, olen[i], mc->eos_id, &sb);
      ot__sb_put(&sb, "", 1);
      if (sb.oom) { ot__sb_free(&sb); st = ot_error(OT_ENOMEM, "%s: out of memory", fn); }
      else hyp[i0 + i] = sb.p;
    }
  }
  free(ids); free(toks); free(len); free(olen);
  ot_translator_free(t);
  return st;
}

ot_train_hooks cli_train_bleu_hooks(cli_train_bleu *b) {
  memset(b, 0, sizeof *b);
  ot_train_hooks h = {translate, b};
  return h;
}

void cli_train_bleu_free(cli_train_bleu *b) {
  if (b) ot_bpe_free(b->bpe);
}
