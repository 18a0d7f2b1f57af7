// The BLEU hook `ot train` and `ot eval` install for translate runs (train_bleu.c).
#ifndef OT_CLI_TRAIN_BLEU_H
#define OT_CLI_TRAIN_BLEU_H
#include "ot/train.h"
#include "ot/data.h"

typedef struct {
  ot_bpe *bpe;                 // the tokenizer, loaded at the first call
  char dir[OT_PATH_MAX];       // ... from this directory
} cli_train_bleu;

// Hooks whose translate decodes greedily through ot_translator_* (b: their state).
ot_train_hooks cli_train_bleu_hooks(cli_train_bleu *b);
void cli_train_bleu_free(cli_train_bleu *b);

#endif
