// Private to the beam search: Hugging Face's logits processors (beam_proc.c).
#ifndef OT_INFER_BEAM_IMPL_H
#define OT_INFER_BEAM_IMPL_H
#include "ot/infer.h"

// Refuses bad processor options of c (vocab and eos_id already checked);
// OT_EINVAL names the field and the fix.
ot_status ot__beam_check_procs(const ot_beam_config *c);

// Applies c's processors in HF 4.40's order (repetition_penalty,
// no_repeat_ngram_size, bad_words_ids, min_length, forced_eos_token_id) to the
// scores x [V] of one row whose input is [decoder_start_id, gen[0] .. gen[t-1]];
// limit: the sentence's HF max_length. No allocation.
void ot__beam_process(const ot_beam_config *c, float *x, const int32_t *gen, int t, int limit);

#endif
