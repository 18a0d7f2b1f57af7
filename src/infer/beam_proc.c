// Hugging Face transformers 4.40 logits processors for ot_beam_search: the
// options of generate() Marian and other translation checkpoints set
// (generation/logits_process.py semantics, on one row at a time).
#include "internal.h"
#include "infer/beam_impl.h"
#include <math.h>

ot_status ot__beam_check_procs(const ot_beam_config *c) {
  static const char fn[] = "ot_beam_search";
  const float p = c->repetition_penalty;
  if (!isfinite(p) || p < 0.0f)
    return ot_error(OT_EINVAL, "%s: repetition_penalty=%g must be > 0 (1: off)", fn, p);
  if (c->no_repeat_ngram_size < 0)
    return ot_error(OT_EINVAL, "%s: no_repeat_ngram_size=%d must be >= 0 (0: off)", fn,
                    c->no_repeat_ngram_size);
  if (c->forced_eos_id < -1 || c->forced_eos_id >= c->vocab)
    return ot_error(OT_EINVAL, "%s: forced_eos_id=%d is out of range [0, vocab=%d) (-1: off)", fn,
                    (int)c->forced_eos_id, c->vocab);
  if (c->n_bad_words < 0)
    return ot_error(OT_EINVAL, "%s: n_bad_words=%d must be >= 0 (0: off)", fn, c->n_bad_words);
  if (c->n_bad_words > 0 && (!c->bad_words_len || !c->bad_words_ids))
    return ot_error(OT_EINVAL, "%s: n_bad_words=%d needs bad_words_len and bad_words_ids", fn,
                    c->n_bad_words);
  size_t off = 0;
  for (int i = 0; i < c->n_bad_words; i++) {
    const int32_t n = c->bad_words_len[i];
    if (n < 1)
      return ot_error(OT_EINVAL, "%s: bad word sequence %d has length %d (each needs >= 1 token)",
                      fn, i, (int)n);
    for (int32_t j = 0; j < n; j++) {
      const int32_t tok = c->bad_words_ids[off + (size_t)j];
      if (tok < 0 || tok >= c->vocab)
        return ot_error(OT_EINVAL, "%s: bad word sequence %d: token %d is out of range [0, "
                        "vocab=%d)", fn, i, (int)tok, c->vocab);
    }
    off += (size_t)n;
  }
  return OT_OK;
}

// Token i of the row's input [start, gen[0] .. gen[t-1]].
static inline int32_t in_tok(const ot_beam_config *c, const int32_t *gen, int i) {
  return i == 0 ? c->decoder_start_id : gen[i - 1];
}

// True when input tokens [from, from + n) equal want [n].
static bool in_eq(const ot_beam_config *c, const int32_t *gen, int from, const int32_t *want,
                  int n) {
  for (int j = 0; j < n; j++)
    if (in_tok(c, gen, from + j) != want[j]) return false;
  return true;
}

void ot__beam_process(const ot_beam_config *c, float *x, const int32_t *gen, int t, int limit) {
  const int len = t + 1;   // HF cur_len: input_ids.shape[-1]
  // RepetitionPenaltyLogitsProcessor: each distinct input token once (gather, then scatter)
  const float p = c->repetition_penalty;
  if (p != 1.0f && p != 0.0f)
    for (int i = 0; i < len; i++) {
      const int32_t tok = in_tok(c, gen, i);
      bool seen = false;
      for (int j = 0; j < i && !seen; j++) seen = in_tok(c, gen, j) == tok;
      if (!seen) x[tok] = x[tok] < 0.0f ? x[tok] * p : x[tok] / p;
    }
  // NoRepeatNGramLogitsProcessor: the n-grams of the input whose first n - 1
  // tokens are the input's last n - 1 ban their last token
  const int n = c->no_repeat_ngram_size;
  if (n > 0 && len + 1 >= n)
    for (int i = 0; i + n <= len; i++) {
      bool match = true;
      for (int j = 0; j < n - 1 && match; j++)
        match = in_tok(c, gen, i + j) == in_tok(c, gen, len - (n - 1) + j);
      if (match) x[in_tok(c, gen, i + n - 1)] = -INFINITY;
    }
  // NoBadWordsLogitsProcessor (a -inf SequenceBias; the sequence [eos] dropped)
  size_t off = 0;
  for (int i = 0; i < c->n_bad_words; i++) {
    const int32_t *w = c->bad_words_ids + off;
    const int m = c->bad_words_len[i];
    off += (size_t)m;
    if (m == 1) {
      if (w[0] != c->eos_id) x[w[0]] += -INFINITY;
    } else if (m <= len && in_eq(c, gen, len - (m - 1), w, m - 1)) {
      x[w[m - 1]] += -INFINITY;
    }
  }
  // MinLengthLogitsProcessor
  if (len < c->min_length) x[c->eos_id] = -INFINITY;
  // ForcedEOSTokenLogitsProcessor
  if (c->forced_eos_id >= 0 && len == limit - 1) {
    for (int v = 0; v < c->vocab; v++) x[v] = -INFINITY;
    x[c->forced_eos_id] = 0.0f;
  }
}
