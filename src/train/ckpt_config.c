// The configuration of a checkpoint for loading it outside the trainer (`ot
// translate`, `ot serve`, `ot generate`, `ot quantize`, `ot export`): its stored
// training keys, plus what the trainer derives from the data and never stores
// as a key: a translate task's vocabulary and token ids, which are its
// tokenizer's (as the trainer sets them, src/train/translate.c).
#include "io/files.h"
#include "ot/data.h"
#include "ot/train.h"
#include <stdlib.h>

// The tokenizer directory of a translate checkpoint: its own vocab.json +
// merges.txt (copied there by every save), else the recorded data directory.
static const char *tok_dir(const char *dir, const char *data) {
  char a[OT_PATH_MAX + 32], b[OT_PATH_MAX + 32];
  if (ot__join(a, sizeof a, dir, "vocab.json") == OT_OK && ot__join(b, sizeof b, dir, "merges.txt") == OT_OK &&
      ot__exists(a) && ot__exists(b))
    return dir;
  if (data[0] && ot__join(a, sizeof a, data, "vocab.json") == OT_OK &&
      ot__join(b, sizeof b, data, "merges.txt") == OT_OK && ot__exists(a) && ot__exists(b))
    return data;
  return NULL;
}

ot_status ot_ckpt_train_config(const char *dir, ot_train_config *tc) {
  static const char fn[] = "ot_ckpt_train_config";
  OT_CHECK_PTR(dir, fn);
  OT_CHECK_PTR(tc, fn);
  ot_train_config_default(tc);
  if (!ot_ckpt_has_settings(dir)) {   // weights only: a Hugging Face directory
    char path[OT_PATH_MAX + 32];
    OT_TRY(ot__join(path, sizeof path, dir, "config.json"));
    return ot_model_config_from_hf(&tc->model, path);
  }
  ot_settings *l = calloc(1, sizeof *l);
  if (!l) return ot_error(OT_ENOMEM, "%s: out of memory", fn);
  ot_status s = ot_ckpt_read_config(dir, l);
  if (s == OT_OK) s = ot_train_config_apply(tc, l, NULL);
  free(l);
  if (s != OT_OK || tc->task != OT_TASK_TRANSLATE) return s;
  const char *td = tok_dir(dir, tc->data);
  if (!td)
    return ot_error(OT_EINVAL, "checkpoint %s (task translate): no tokenizer (vocab.json + merges.txt) in it "
                    "or in its data directory '%s'; its token ids are the tokenizer's: copy them into %s",
                    dir, tc->data, dir);
  char vj[OT_PATH_MAX + 32], mt[OT_PATH_MAX + 32];
  OT_TRY(ot__join(vj, sizeof vj, td, "vocab.json"));
  OT_TRY(ot__join(mt, sizeof mt, td, "merges.txt"));
  ot_bpe *bpe = NULL;
  OT_TRY(ot_bpe_load(&bpe, vj, mt));
  const int V = ot_bpe_vocab_size(bpe), eot = ot_bpe_eot(bpe);
  ot_bpe_free(bpe);
  if (eot < 0) return ot_error(OT_EINVAL, "checkpoint %s: its tokenizer %s has no <|endoftext|> token", dir, vj);
  if (V != tc->model.vocab)
    return ot_error(OT_EINVAL, "checkpoint %s: its tokenizer %s has %d tokens, the model %d: not the "
                    "tokenizer it was trained with", dir, vj, V, tc->model.vocab);
  tc->model.pad_id = tc->model.eos_id = tc->model.decoder_start_id = eot;
  return ot_model_config_validate(&tc->model);
}
