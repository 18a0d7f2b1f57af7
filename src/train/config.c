// Training configuration: defaults, the key table (our names, the aliases
// Megatron / nanoGPT / Hugging Face users know, value parsing and printing),
// resolution of derived values and validation with messages that name the flag.
#include "train/train_impl.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

typedef enum {
  K_INT, K_I64, K_U64, K_F32, K_BOOL, K_STR, K_DTYPE, K_RECOMPUTE, K_NORM, K_ACT, K_POS,
  K_NAMES, K_ROPE, K_DECAY, K_MODEL, K_BETAS, K_TASK, K_SHARD, K_F3, K_LSCALE, K_POW2, K_BLEUTOK, K_POOL
} ktype;

typedef struct {
  const char *name;      // canonical, as a flag without "--"
  ktype type;
  size_t off;            // offset in ot_train_config
  double lo, hi;         // numeric range (inclusive)
  unsigned flags;
  const char *aliases;   // space-separated, any of '-'/'_'; "!name": a boolean alias meaning "not key"
  const char *help;
} key_def;

enum { F_MODEL = 1, F_NOSAVE = 2 };
#define O(field) offsetof(ot_train_config, field)
#define BIG 1e18

static const key_def k_keys[] = {
  // model shape
  {"model", K_MODEL, O(model), 0, 0, F_MODEL, "preset",
   "model preset: small, tiny, gpt2, llama-tiny (sets every shape key)"},
  {"names", K_NAMES, O(model.names), 0, 0, F_MODEL, "model_type", "tensor names / HF family: gpt2 | llama | marian"},
  {"vocab-size", K_INT, O(model.vocab), 1, 1 << 24, F_MODEL, "vocab_size vocab",
   "vocabulary size (default: the data's info.json, else the preset's)"},
  {"vocab-pad", K_INT, O(model.vocab_pad), 1, 1024, F_MODEL, "make_vocab_size_divisible_by",
   "pad embedding/logit rows to a multiple of this"},
  {"d-model", K_INT, O(model.d_model), 1, 1 << 20, F_MODEL, "hidden_size n_embd dim", "model width"},
  {"layers", K_INT, O(model.n_layers), 1, 4096, F_MODEL, "num_layers n_layer n_layers num_hidden_layers",
   "Transformer blocks (an encoder-decoder's: the decoder's)"},
  {"enc-layers", K_INT, O(model.n_enc_layers), 0, 4096, F_MODEL, "encoder_layers num_encoder_layers",
   "encoder blocks of an encoder-decoder model"},
  {"heads", K_INT, O(model.n_heads), 1, 4096, F_MODEL, "num_attention_heads n_head n_heads", "attention heads"},
  {"kv-heads", K_INT, O(model.n_kv_heads), 1, 4096, F_MODEL,
   "num_query_groups num_key_value_heads n_kv_heads n_kv_head", "key/value heads (GQA; = heads for MHA)"},
  {"d-ff", K_INT, O(model.d_ff), 1, 1 << 22, F_MODEL, "ffn_hidden_size intermediate_size n_inner",
   "MLP hidden width"},
  {"max-seq", K_INT, O(model.max_seq), 1, 1 << 22, F_MODEL,
   "max_position_embeddings n_positions max_seq_len", "longest sequence the model supports"},
  {"norm", K_NORM, O(model.norm), 0, 0, F_MODEL, "normalization", "layernorm | rmsnorm"},
  {"activation", K_ACT, O(model.mlp), 0, 0, F_MODEL, "hidden_act activation_function", "gelu | swiglu | relu | gelu-erf"},
  {"positions", K_POS, O(model.pos), 0, 0, F_MODEL, "position_embedding_type", "learned | rope | sinusoidal"},
  {"rope-base", K_F32, O(model.rope_base), 1, 1e12, F_MODEL, "rope_theta rotary_base", "RoPE theta"},
  {"rope-style", K_ROPE, O(model.rope_style), 0, 0, F_MODEL, "", "neox (HF Llama) | gptj"},
  {"tied", K_BOOL, O(model.tied), 0, 0, F_MODEL, "tie_word_embeddings", "lm_head shares the embedding"},
  {"bias", K_BOOL, O(model.bias), 0, 0, F_MODEL, "add_bias_linear", "biases in linear layers / LayerNorm"},
  {"norm-eps", K_F32, O(model.eps), 1e-30, 0.999, F_MODEL,
   "layer_norm_epsilon rms_norm_eps norm_epsilon layernorm_epsilon", "norm epsilon"},
  {"init-std", K_F32, O(model.init_std), 1e-30, 10, F_MODEL, "initializer_range init_method_std",
   "initialization std"},
  // data
  {"data", K_STR, O(data), 0, 0, 0, "data_path data_dir dataset",
   "directory of `ot prepare` shards (train_*.bin, val_*.bin, info.json)"},
  {"train-data", K_STR, O(train_data), 0, 0, 0, "train_data_path", "glob of training shards (default <data>/train_*.bin)"},
  {"val-data", K_STR, O(val_data), 0, 0, 0, "valid_data_path val_data_path", "glob of held-out shards (default <data>/val_*.bin)"},
  {"shuffle", K_BOOL, O(shuffle), 0, 0, 0, "", "visit training windows in a seeded random order"},
  // batch
  {"batch-size", K_INT, O(batch_size), 1, 1 << 20, 0, "micro_batch_size micro_batch per_device_train_batch_size",
   "rows per micro-batch"},
  {"grad-accum", K_INT, O(grad_accum), 1, 1 << 20, 0, "gradient_accumulation_steps accumulate_grad_batches micro_batches num_micro_batches update_freq micro_batch_num",
   "micro-batches per optimizer step (per data-parallel replica)"},
  {"global-batch", K_INT, O(global_batch), 0, 1 << 30, F_NOSAVE, "global_batch_size",
   "rows per optimizer step (sets --grad-accum = global-batch / batch-size)"},
  {"seq-len", K_INT, O(seq_len), 1, 1 << 22, 0, "seq_length block_size seq_len", "tokens per row"},
  // run
  {"dtype", K_DTYPE, O(dtype), 0, 0, 0, "bf16 precision params_dtype fp16",
   "f32 | bf16 | f16 (16-bit activations and GEMM inputs, f32 master weights and optimizer; "
   "f16 also scales the loss, see --loss-scale; aliases take fp16, float16, half, 16-mixed, "
   "bf16-mixed, and --fp16 / --bf16 as booleans)"},
  {"recompute", K_RECOMPUTE, O(recompute), 0, 0, 0, "recompute_granularity activation_checkpointing",
   "none | selective | full (activation recompute in backward)"},
  {"threads", K_INT, O(threads), 0, 1024, 0, "num_threads omp_num_threads", "threads (0: OMP_NUM_THREADS)"},
  {"seed", K_U64, O(seed), 0, 0, 0, "random_seed", "seed of the initialization and the data order"},
  // optimizer and schedule
  {"steps", K_I64, O(steps), 0, BIG, 0, "train_iters max_iters max_steps iters num_steps max_update", "optimizer steps"},
  {"lr", K_F32, O(lr), 0, 1e3, 0, "learning_rate max_lr", "peak learning rate"},
  {"min-lr", K_F32, O(min_lr), -1, 1e3, 0, "min_learning_rate lr_min",
   "final learning rate of the decay (< 0: lr / 10; inverse_sqrt: a floor, < 0: none)"},
  {"warmup", K_I64, O(warmup), -1, BIG, 0,
   "lr_warmup_iters warmup_iters warmup_steps lr_warmup_steps warmup_updates lr_warmup",
   "linear warmup steps (< 0: steps / 10, at most 100; with inverse_sqrt steps / 5, at most 4000)"},
  {"decay-steps", K_I64, O(decay_steps), 0, BIG, 0, "lr_decay_iters lr_decay_steps",
   "step where the decay reaches min-lr (0: = steps)"},
  {"lr-decay", K_DECAY, O(lr_decay), 0, 0, 0, "lr_decay_style lr_scheduler_type lr_scheduler",
   "cosine | linear | constant | inverse_sqrt (aliases noam, rsqrt: lr sqrt(warmup / step) after "
   "the warmup)"},
  {"beta1", K_F32, O(beta1), 0, 0.999999, 0, "adam_beta1", "AdamW beta1"},
  {"beta2", K_F32, O(beta2), 0, 0.99999999, 0, "adam_beta2", "AdamW beta2"},
  {"adam-betas", K_BETAS, O(beta1), 0, 0.99999999, F_NOSAVE, "betas",
   "AdamW (beta1, beta2) together, e.g. \"(0.9, 0.98)\" or 0.9,0.98 (fairseq --adam-betas)"},
  {"eps", K_F32, O(eps), 1e-30, 1, 0, "adam_eps adam_epsilon", "AdamW epsilon"},
  {"weight-decay", K_F32, O(weight_decay), 0, 100, 0, "wd",
   "AdamW weight decay (matrices and embeddings; none on norms and biases)"},
  {"grad-clip", K_F32, O(grad_clip), -1, 1e9, 0, "clip_grad max_grad_norm gradient_clipping clip_norm",
   "clip the global gradient norm to this (<= 0: off)"},
  // quantization-aware training
  {"qat", K_BOOL, O(qat), 0, 0, 0, "quantization_aware_training",
   "quantization-aware training: the forward runs on int8 fake-quantized matrices (scale "
   "absmax / 127 per row or per --qat-group inputs), straight-through gradients to the f32 "
   "weights; export with `ot quantize --dtype int8` (same group). f32 only"},
  {"qat-group", K_INT, O(qat_group), 0, 128, 0, "",
   "QAT scale group along the inputs: 0 = one scale per row, or 32, 64, 128"},
  // loss scaling (fp16), PyTorch GradScaler semantics
  {"loss-scale", K_LSCALE, O(loss_scale), 0, 0, 0, "",
   "auto (dynamic for --dtype f16, none for f32 / bf16) | 0 (dynamic) | > 0 (static scale) "
   "(Megatron --loss-scale, DeepSpeed loss_scale: the same meaning)"},
  {"loss-scale-init", K_F32, O(loss_scale_init), -BIG, BIG, 0, "initial_loss_scale init_scale",
   "dynamic loss scale: the first scale (PyTorch init_scale)"},
  {"loss-scale-init-power", K_POW2, O(loss_scale_init), -126, 127, F_NOSAVE, "initial_scale_power",
   "dynamic loss scale: the first scale as a power of two (DeepSpeed initial_scale_power: 16 = 65536)"},
  {"loss-scale-growth-interval", K_INT, O(loss_scale_growth_interval), -BIG, BIG, 0,
   "loss_scale_window growth_interval",
   "dynamic loss scale: consecutive clean steps before it grows (Megatron / DeepSpeed loss_scale_window)"},
  {"loss-scale-growth", K_F32, O(loss_scale_growth), -BIG, BIG, 0, "growth_factor",
   "dynamic loss scale: growth factor (> 1)"},
  {"loss-scale-backoff", K_F32, O(loss_scale_backoff), -BIG, BIG, 0, "backoff_factor",
   "dynamic loss scale: backoff factor after an inf / NaN gradient (in (0, 1))"},
  {"loss-scale-min", K_F32, O(loss_scale_min), -BIG, BIG, 0, "min_loss_scale",
   "dynamic loss scale: floor of the scale (0: none, as PyTorch; Megatron / DeepSpeed use 1)"},
  // evaluation and output
  {"eval-every", K_INT, O(eval_every), 0, 1 << 30, 0, "eval_interval eval_steps",
   "steps between held-out evaluations (0: at the end only)"},
  {"eval-batches", K_INT, O(eval_batches), 1, 1 << 30, 0, "eval_iters", "batches per evaluation"},
  {"save-every", K_INT, O(save_every), 0, 1 << 30, 0, "save_interval save_steps",
   "steps between checkpoints (0: at the end only)"},
  {"keep", K_INT, O(keep), 0, 1 << 20, 0, "save_total_limit keep_checkpoints",
   "checkpoints kept in <out> (0: all)"},
  {"print-every", K_INT, O(print_every), 1, 1 << 30, 0, "log_interval logging_steps",
   "progress line every N steps"},
  {"out", K_STR, O(out), 0, 0, 0, "out_dir output_dir save", "run directory (log, plot, checkpoints)"},
  {"log", K_STR, O(log), 0, 0, 0, "log_file", "JSONL log (default <out>/log.jsonl)"},
  {"plot", K_STR, O(plot), 0, 0, 0, "plot_file", "loss-curve SVG (default <out>/loss.svg)"},
  {"profile", K_STR, O(profile), 0, 0, F_NOSAVE, "trace", "write the profiler's Chrome trace here and print its summary"},
  {"resume", K_STR, O(resume), 0, 0, F_NOSAVE, "load resume_from_checkpoint",
   "continue from a checkpoint directory (or a run directory: its latest)"},
  {"init-from", K_STR, O(init_from), 0, 0, F_NOSAVE, "pretrained_checkpoint finetune_from",
   "start a new run from the weights of a checkpoint (or a run directory: its latest; or a "
   "Hugging Face directory): its model, a fresh optimizer, step 0 (fine-tuning; --resume "
   "continues a run instead)"},
  {"quiet", K_BOOL, O(quiet), 0, 0, F_NOSAVE, "", "no progress lines"},
  // parallel layout (mpirun -np dp*tp*pp); a checkpoint loads into any layout
  {"data-parallel", K_INT, O(data_parallel), 1, 1 << 16, F_NOSAVE, "data_parallel_size dp",
   "data-parallel replicas (each runs grad-accum micro-batches of batch-size rows)"},
  {"tensor-parallel", K_INT, O(tensor_parallel), 1, 1 << 10, F_NOSAVE,
   "tensor_model_parallel_size tp tensor_parallel_size model_parallel",
   "tensor-parallel ranks (Megatron; MindSpore model_parallel)"},
  {"pipeline-stages", K_INT, O(pipeline_stages), 1, 1 << 10, F_NOSAVE,
   "pipeline_model_parallel_size pp pipeline_parallel_size pipeline_stage",
   "pipeline stages (blocks split over them)"},
  {"vocab-parallel", K_BOOL, O(vocab_parallel), 0, 0, F_NOSAVE, "!vocab_emb_dp",
   "split the embedding / head rows over the tensor-parallel ranks (vocab-parallel cross-entropy; "
   "MindSpore vocab_emb_dp true = embedding replicated = --no-vocab-parallel)"},
  {"optimizer-shard", K_SHARD, O(optimizer_shard), 0, 3, F_NOSAVE, "zero_stage zero",
   "ZeRO stage: 0 | 1 (AdamW state split over the data-parallel ranks) | 2 (and the reduced "
   "gradients) | 3 (and the weights: each block's gathered before it runs); MindSpore's "
   "boolean: true = 1 (or the stage given with it), false = 0"},
  {"zero-prefetch", K_BOOL, O(zero_prefetch), 0, 0, F_NOSAVE, "prefetch",
   "ZeRO-3: gather the next block's weights while the current block computes (DeepSpeed's "
   "prefetch; --no-zero-prefetch gathers each block when it is needed)"},
  {"comm-fusion-layers", K_INT, O(comm_fusion_layers), 0, 1 << 16, F_NOSAVE, "comm_fusion",
   "> 0: each data-parallel all-reduce fuses the gradients of that many consecutive blocks "
   "(MindSpore set_comm_fusion; the first and last group also take the embedding, final norm "
   "and head); 0: --grad-buckets equal ranges"},
  {"grad-buckets", K_INT, O(grad_buckets), 1, 1 << 16, F_NOSAVE, "num_buckets gradient_aggregation_group",
   "data-parallel gradient all-reduces per step (MindSpore gradient_aggregation_group, the "
   "number of gradient communication groups, maps here)"},
  {"overlap", K_BOOL, O(overlap), 0, 0, F_NOSAVE, "overlap_grad_reduce",
   "reduce each gradient bucket during the backward, as soon as it is final"},
  {"gpipe", K_BOOL, O(gpipe), 0, 0, F_NOSAVE, "",
   "pipeline schedule GPipe (all forwards, then all backwards) instead of 1F1B"},
  {"balanced-stages", K_BOOL, O(balanced_stages), 0, 0, F_NOSAVE, "",
   "split the blocks over the pipeline stages by their compute, the last stage's head counted "
   "(the slowest stage as fast as it can be), instead of equal numbers of blocks"},
  {"comm-timeout", K_F32, O(comm_timeout), 0, 1e6, F_NOSAVE, "distributed_timeout",
   "seconds a blocking communication may wait before the job is ended (0: never)"},
  {"check-replicas", K_INT, O(check_replicas), 0, 1 << 30, F_NOSAVE, "",
   "every N steps, checksum the parameters that must be identical across the data-parallel "
   "replicas and the replicated ones of the tensor-parallel ranks; the first that differs ends "
   "the run naming it and the ranks (0: off)"},
  // translation (task = translate)
  {"task", K_TASK, O(task), 0, 0, 0, "",
   "lm (token shards) | translate (a bitext, encoder-decoder model; sets the translate defaults: "
   "transformer-small, inverse_sqrt lr 7e-4, betas (0.9, 0.98), label smoothing 0.1, dropout 0.1)"},
  {"src-data", K_STR, O(src_data), 0, 0, 0, "train_src src_train",
   "translate: training source sentences, one per line"},
  {"tgt-data", K_STR, O(tgt_data), 0, 0, 0, "train_tgt tgt_train",
   "translate: training target sentences (line i translates line i of --src-data)"},
  {"valid-src", K_STR, O(valid_src), 0, 0, 0, "valid_src_data", "translate: held-out source sentences"},
  {"valid-tgt", K_STR, O(valid_tgt), 0, 0, 0, "valid_tgt_data", "translate: held-out target sentences"},
  {"tokens-per-batch", K_INT, O(tokens_per_batch), 0, 1 << 30, 0, "max_tokens mini_batch_words",
   "translate: token budget of one micro-batch, rows x max(source, target length) (fairseq "
   "--max-tokens); a step takes grad-accum x data-parallel of them"},
  {"max-rows", K_INT, O(max_rows), 0, 1 << 20, 0, "max_sentences",
   "translate: most rows per forward, and the plan's rows (0: no limit; the plan holds tokens-per-batch / the longest sequence rows of it)"},
  {"label-smoothing", K_F32, O(label_smoothing), 0, 0.999, 0, "label_smoothing_factor smoothing",
   "eps of the label-smoothed cross-entropy (0: plain)"},
  {"dropout", K_F32, O(dropout), 0, 0.999, 0, "hidden_dropout residual_dropout",
   "dropout on embeddings and residual branches (translate default 0.1)"},
  {"attention-dropout", K_F32, O(attn_dropout), 0, 0.999, 0, "attn_dropout transformer_dropout_attention",
   "dropout on attention probabilities"},
  {"activation-dropout", K_F32, O(act_dropout), 0, 0.999, 0, "relu_dropout transformer_dropout_ffn",
   "dropout on the MLP activation"},
  {"eval-bleu-sentences", K_INT, O(eval_bleu_sentences), 0, 1 << 30, 0, "bleu_sentences",
   "translate: held-out pairs translated for BLEU at each evaluation (0: none)"},
  {"eval-bleu-tokenize", K_BLEUTOK, O(eval_bleu_tokenize), 0, 0, 0, "bleu_tokenize",
   "translate: BLEU's tokenizer at evaluation (13a | intl | none, as sacreBLEU --tokenize)"},
  // image classification (task = classify); the ViT's shape keys
  {"image-size", K_INT, O(model.image_size), 0, 65536, F_MODEL, "img_size",
   "ViT: side of the square images the positions are trained for"},
  {"patch-size", K_INT, O(model.patch_size), 0, 1024, F_MODEL, "patch", "ViT: side of a patch"},
  {"channels", K_INT, O(model.channels), 0, 16, F_MODEL, "num_channels in_chans", "ViT: image channels"},
  {"train-images", K_STR, O(train_images), 0, 0, 0, "train_dir",
   "classify: training images (an image array file, or a list of '<PGM/PPM file> <label>' lines)"},
  {"val-images", K_STR, O(val_images), 0, 0, 0, "val_dir eval_images",
   "classify: held-out images (same forms; \"\": none)"},
  {"image-mean", K_F3, O(image_mean), -1e6, 1e6, 0, "mean",
   "classify: per-channel mean of (pixel / maxval), one value or three (0.5,0.5,0.5)"},
  {"image-std", K_F3, O(image_std), 1e-6, 1e6, 0, "std", "classify: per-channel std, one value or three"},
  {"crop-min", K_F32, O(crop_min), 0, 1, 0, "scale_min random_resized_crop",
   "classify: random resized crop from this area fraction up to 1 (0: no crop; torchvision 0.08)"},
  {"flip", K_BOOL, O(flip), 0, 0, 0, "hflip horizontal_flip", "classify: random horizontal flip"},
  {"drop-path", K_F32, O(drop_path), 0, 0.999, 0, "drop_path_rate stochastic_depth",
   "ViT: stochastic depth, linear over the blocks up to this"},
  {"pool", K_POOL, O(model.pool), 0, 0, F_MODEL, "global_pool pooling",
   "ViT: the head reads the CLS token (cls | token) or the mean of the patch tokens (mean | avg: "
   "timm's global_pool='avg'; not expressible in Hugging Face's ViT)"},
};
#define NKEYS ((int)(sizeof k_keys / sizeof k_keys[0]))
_Static_assert(NKEYS <= OT_TRAIN_KEYS_MAX, "raise OT_TRAIN_KEYS_MAX (ot/train.h)");

int ot__key_count(void) { return NKEYS; }
const char *ot__key_name(int i) { return i >= 0 && i < NKEYS ? k_keys[i].name : NULL; }
bool ot__key_is_model(int i) { return i >= 0 && i < NKEYS && (k_keys[i].flags & F_MODEL); }
bool ot__key_is_saved(int i) { return i >= 0 && i < NKEYS && !(k_keys[i].flags & F_NOSAVE); }

// ---------------------------------------------------------------- names ----
// Lower case, '_' -> '-', leading dashes dropped.
static void normalize(const char *in, char *out, size_t cap) {
  while (*in == '-') in++;
  size_t n = 0;
  for (; *in && n + 1 < cap; in++) out[n++] = *in == '_' ? '-' : (char)tolower((unsigned char)*in);
  out[n] = 0;
}

// The next word of an alias list into out (normalized, without its '!'); *inv: it had one.
// Returns the position after the word, NULL at the end of the list.
static const char *alias_word(const char *p, char *out, size_t cap, bool *inv) {
  while (*p == ' ') p++;
  size_t n = strcspn(p, " ");
  if (!n) return NULL;
  *inv = *p == '!';
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.*s", (int)(n - *inv), p + *inv);
  normalize(tmp, out, cap);
  return p + n;
}

// 1 + the position of norm among the aliases (0: none); *inv: a "not key" alias.
static int alias_match(const char *aliases, const char *norm, bool *inv) {
  char a[64];
  int pos = 1;
  for (const char *p = aliases; (p = alias_word(p, a, sizeof a, inv)); pos++)
    if (!strcmp(a, norm)) return pos;
  return 0;
}

// The key named `key` (our name or an alias), -1 if none; *alias: 0 for our
// name, else 1 + the alias's position in the list; *inv: a "not key" alias.
static int find_key_as(const char *key, int *alias, bool *inv) {
  char norm[64];
  *alias = 0;
  *inv = false;
  if (!key || strlen(key) >= sizeof norm) return -1;
  normalize(key, norm, sizeof norm);
  for (int i = 0; i < NKEYS; i++)
    if (!strcmp(k_keys[i].name, norm)) return i;
  for (int i = 0; i < NKEYS; i++)
    if ((*alias = alias_match(k_keys[i].aliases, norm, inv))) return i;
  *inv = false;
  return -1;
}

static int find_key(const char *key) {
  int alias;
  bool inv;
  return find_key_as(key, &alias, &inv);
}

// The alias at 1-based position pos of key i, as the table spells it; *inv: a "not key" alias.
static void alias_text(int i, int pos, char *out, size_t cap, bool *inv) {
  const char *p = k_keys[i].aliases;
  out[0] = 0;
  *inv = false;
  for (int k = 1; *p; k++) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (!n) break;
    if (k == pos) {
      *inv = *p == '!';
      snprintf(out, cap, "%.*s", (int)(n - (*p == '!')), p + (*p == '!'));
      return;
    }
    p += n;
  }
}

const char *ot_train_key_canonical(const char *key) {
  int i = find_key(key);
  return i < 0 ? NULL : k_keys[i].name;
}

bool ot__train_key_inverted(const char *key) {
  int alias;
  bool inv;
  return find_key_as(key, &alias, &inv) >= 0 && inv;
}

bool ot_train_key_is_bool(const char *key) {
  char norm[64];
  if (!key || strlen(key) >= sizeof norm) return false;
  normalize(key, norm, sizeof norm);
  if (!strcmp(norm, "bf16") || !strcmp(norm, "fp16")) return true;
  int i = find_key(key);
  // recompute and optimizer-shard also take MindSpore's booleans: alone they mean true
  return i >= 0 && (k_keys[i].type == K_BOOL || k_keys[i].type == K_RECOMPUTE || k_keys[i].type == K_SHARD);
}

bool ot__train_key_value_named(const char *key) {
  int i = find_key(key);
  return i >= 0 && (k_keys[i].type == K_RECOMPUTE || k_keys[i].type == K_SHARD);
}

// The flag and value the user wrote for canonical key `canon` of config c, for messages:
// "--tensor-parallel 4", or "--model_parallel 4 (our --tensor-parallel)" when an alias set
// it. A boolean shows no value ("--vocab-parallel"), a "not key" alias its false one
// ("--vocab_emb_dp false (our --vocab-parallel)").
static const char *flagv(const ot_train_config *c, const char *canon, char *buf, size_t cap) {
  const int i = find_key(canon);
  if (i < 0) return canon;
  const int pos = c->spelling[i];
  char a[64], v[64] = "";
  bool inv = false;
  if (pos) alias_text(i, pos, a, sizeof a, &inv);
  else snprintf(a, sizeof a, "%s", canon);
  if (k_keys[i].type != K_BOOL) ot_train_config_get(c, canon, v, sizeof v);
  else if (inv) snprintf(v, sizeof v, "%s", *(const bool *)((const char *)c + k_keys[i].off) ? "false" : "true");
  snprintf(buf, cap, "--%s%s%s", a, v[0] ? " " : "", v);
  if (pos) snprintf(buf + strlen(buf), cap - strlen(buf), " (our --%s)", canon);
  return buf;
}

// Nearest canonical key (or the canonical key of the nearest alias), NULL if none is close.
static const char *suggest(const char *key) {
  char norm[64];
  normalize(key, norm, sizeof norm);
  int best = 99;
  const char *who = NULL;
  for (int i = 0; i < NKEYS; i++) {
    int d = ot__edit_distance(norm, k_keys[i].name);
    if (d < best) { best = d; who = k_keys[i].name; }
    char a[64];
    bool inv;
    for (const char *p = k_keys[i].aliases; (p = alias_word(p, a, sizeof a, &inv));) {
      d = ot__edit_distance(norm, a);
      if (d < best) { best = d; who = k_keys[i].name; }
    }
  }
  int lim = (int)strlen(norm) / 3;
  return best <= (lim < 2 ? 2 : lim) ? who : NULL;
}

// -------------------------------------------------------------- defaults ---
void ot_train_config_default(ot_train_config *c) {
  memset(c, 0, sizeof *c);
  c->model = ot_model_config_default();
  snprintf(c->data, sizeof c->data, "out/data");
  for (int i = 0; i < 3; i++) c->image_std[i] = 1.0f;
  c->shuffle = true;
  c->batch_size = 8;
  c->grad_accum = 1;
  c->seq_len = 256;
  c->dtype = OT_F32;
  c->recompute = OT_RECOMPUTE_NONE;
  c->seed = 1337;
  c->steps = 300;
  c->lr = 1e-3f;
  c->min_lr = -1.0f;
  c->warmup = -1;
  c->lr_decay = OT_LR_COSINE;
  c->beta1 = 0.9f;
  c->beta2 = 0.95f;
  c->eps = 1e-8f;
  c->weight_decay = 0.1f;
  c->grad_clip = 1.0f;
  c->eval_every = 50;
  c->eval_batches = 20;
  c->keep = 2;
  c->print_every = 1;
  snprintf(c->out, sizeof c->out, "out/train");
  c->measure_peak = true;
  c->data_parallel = c->tensor_parallel = c->pipeline_stages = 1;
  c->grad_buckets = 4;
  c->overlap = true;
  c->zero_prefetch = true;
  c->comm_timeout = 300.0f;
  c->loss_scale = -1.0f;   // auto
  c->loss_scale_init = 65536.0f;
  c->loss_scale_growth_interval = 2000;
  c->loss_scale_growth = 2.0f;
  c->loss_scale_backoff = 0.5f;
  c->loss_scale_min = 0.0f;
}

// The defaults of task = translate (fairseq's transformer recipe, scaled down).
static void translate_defaults(ot_train_config *c) {
  if (c->model.arch != OT_ARCH_ENCDEC) ot_model_config_preset(&c->model, "transformer-small");
  snprintf(c->data, sizeof c->data, "out/translate-data");
  snprintf(c->src_data, sizeof c->src_data, "data/translate/train.en");
  snprintf(c->tgt_data, sizeof c->tgt_data, "data/translate/train.fr");
  snprintf(c->valid_src, sizeof c->valid_src, "data/translate/valid.en");
  snprintf(c->valid_tgt, sizeof c->valid_tgt, "data/translate/valid.fr");
  snprintf(c->out, sizeof c->out, "out/translate");
  c->tokens_per_batch = 4096;
  c->label_smoothing = 0.1f;
  c->dropout = 0.1f;
  c->lr = 7e-4f;
  c->lr_decay = OT_LR_INVSQRT;
  c->warmup = -1;
  c->min_lr = -1.0f;
  c->beta1 = 0.9f;
  c->beta2 = 0.98f;
  c->weight_decay = 0.0f;
  c->grad_clip = 0.0f;
  c->eval_batches = 1000000;
  c->eval_bleu_sentences = 200;
}

// The defaults of task = classify: the digits ViT on the bundled digits.
static void classify_defaults(ot_train_config *c) {
  if (c->model.arch != OT_ARCH_VIT) ot_model_config_preset(&c->model, "vit-digits");
  snprintf(c->train_images, sizeof c->train_images, "data/digits/train.otimg");
  snprintf(c->val_images, sizeof c->val_images, "data/digits/heldout.otimg");
  snprintf(c->out, sizeof c->out, "out/classify");
  c->data[0] = 0;
  c->batch_size = 64;
  c->lr = 1e-3f;
  c->lr_decay = OT_LR_COSINE;
  c->warmup = -1;
  c->min_lr = -1.0f;
  c->weight_decay = 0.05f;
  c->beta2 = 0.999f;
  c->eval_every = 100;
  c->eval_batches = 1000000;
  for (int i = 0; i < 3; i++) {
    c->image_mean[i] = 0.3f;
    c->image_std[i] = 0.4f;
  }
  c->crop_min = 0.6f;
  c->flip = false;
}

// ----------------------------------------------------------------- values ---
static bool parse_bool(const char *v, bool *out) {
  char n[16];
  normalize(v, n, sizeof n);
  if (!strcmp(n, "true") || !strcmp(n, "1") || !strcmp(n, "yes") || !strcmp(n, "on")) { *out = true; return true; }
  if (!strcmp(n, "false") || !strcmp(n, "0") || !strcmp(n, "no") || !strcmp(n, "off")) { *out = false; return true; }
  return false;
}

// Matches v (normalized) against "a|b|c" choices; returns the index or -1.
static int parse_choice(const char *v, const char *const *names, int n) {
  char x[32];
  if (strlen(v) >= sizeof x) return -1;
  normalize(v, x, sizeof x);
  for (int i = 0; i < n; i++)
    if (names[i] && !strcmp(x, names[i])) return i;
  return -1;
}

// who: the key as the user typed it (with our name beside an alias).
#define BADV(fmt, ...) \
  return ot_error(OT_EINVAL, "%s: %s '%s' " fmt, origin, who, value, ##__VA_ARGS__)

static ot_status set_num(ot_train_config *c, const key_def *d, const char *value, const char *origin,
                         const char *who) {
  char *end;
  void *p = (char *)c + d->off;
  errno = 0;
  if (d->type == K_F32) {
    double x = strtod(value, &end);
    if (end == value || *end || errno || !isfinite(x)) BADV("is not a number");
    if (x < d->lo || x > d->hi) BADV("is outside [%g, %g]", d->lo, d->hi);
    *(float *)p = (float)x;
    return OT_OK;
  }
  if (d->type == K_U64) {
    if (*value == '-') BADV("is not a non-negative integer");
    unsigned long long x = strtoull(value, &end, 0);
    if (end == value || *end || errno) BADV("is not a non-negative integer");
    *(uint64_t *)p = (uint64_t)x;
    return OT_OK;
  }
  long long x = strtoll(value, &end, 10);
  if (end != value && (*end == 'e' || *end == 'E' || *end == '.')) {   // 1e3, 100.0 from JSON
    double y = strtod(value, &end);
    if (end != value && !*end && isfinite(y) && y == floor(y) && fabs(y) < 9e15) x = (long long)y;
    else end = (char *)value;
  }
  if (end == value || *end || errno) BADV("is not an integer");
  if ((double)x < d->lo || (double)x > d->hi) BADV("is outside [%.0f, %.0f]", d->lo, d->hi);
  if (d->type == K_INT) *(int *)p = (int)x;
  else *(int64_t *)p = (int64_t)x;
  return OT_OK;
}

ot_status ot_train_config_set(ot_train_config *c, const char *key, const char *value,
                              const char *origin) {
  if (!origin) origin = "config";
  if (!c || !key) return ot_error(OT_EINVAL, "ot_train_config_set: config or key is NULL");
  int alias;
  bool inv;
  int i = find_key_as(key, &alias, &inv);
  if (i < 0) {
    const char *s = suggest(key);
    if (s) return ot_error(OT_EINVAL, "%s: unknown key '%s' (did you mean '%s'? `ot train --help` lists them)",
                           origin, key, s);
    return ot_error(OT_EINVAL, "%s: unknown key '%s' (`ot train --help` lists the keys)", origin, key);
  }
  const key_def *d = &k_keys[i];
  char who[160];
  {
    const char *typed = key;
    while (*typed == '-') typed++;
    if (alias) snprintf(who, sizeof who, "%.60s (our --%s%s)", typed, inv ? "no-" : "", d->name);
    else snprintf(who, sizeof who, "%.60s", typed);
  }
  if (!value) return ot_error(OT_EINVAL, "%s: %s needs a value", origin, who);
  void *p = (char *)c + d->off;
  c->spelling[i] = (unsigned char)alias;
  static const char *const dtypes[] = {"f32", "bf16", "fp32", "float32", "bfloat16", "true", "false",
                                       "f16", "fp16", "float16", "half", "16-mixed", "16",
                                       "bf16-mixed", "32", "32-true"};
  static const char *const recs[] = {"none", "selective", "full", "false", "true", "1", "0", "yes", "no"};
  static const char *const norms[] = {"layernorm", "rmsnorm"};
  static const char *const acts[] = {"gelu", "swiglu", "gelu-new", "silu", "gelu-pytorch-tanh", "relu",
                                     "gelu-erf"};
  static const char *const poss[] = {"learned", "rope", "learned-absolute", "sinusoidal"};
  static const char *const names[] = {"gpt2", "llama", "marian", "vit"};
  static const char *const pools[] = {"cls", "token", "mean", "avg"};
  static const char *const ropes[] = {"neox", "gptj"};
  static const char *const bleutoks[] = {"13a", "none", "intl"};   // ot_bleu_tok's order
  static const char *const decays[] = {"cosine", "linear", "constant", "inverse-sqrt", "noam",
                                       "rsqrt", "inverse-square-root"};
  int k;
  switch (d->type) {
    case K_INT: case K_I64: case K_U64: case K_F32: return set_num(c, d, value, origin, who);
    case K_BOOL:
      if (!parse_bool(value, (bool *)p)) BADV("is not a boolean (true | false)");
      if (inv) *(bool *)p = !*(bool *)p;
      return OT_OK;
    case K_SHARD: {   // a ZeRO stage, or MindSpore's optimizer_shard boolean
      bool b;
      if (parse_bool(value, &b)) {   // "1" / "0" read as stages 1 / 0 alike
        int *stage = p;
        *stage = !b ? 0 : *stage > 0 ? *stage : 1;   // true keeps a stage given with it
        return OT_OK;
      }
      char *end;
      errno = 0;
      long x = strtol(value, &end, 10);
      if (end == value || *end || errno || x < d->lo || x > d->hi)
        BADV("is not a ZeRO stage (0 | 1 | 2 | 3) or a boolean (true: stage 1, false: 0)");
      *(int *)p = (int)x;
      return OT_OK;
    }
    case K_STR:
      if (strlen(value) >= OT_PATH_MAX) BADV("is longer than %d bytes", OT_PATH_MAX - 1);
      snprintf((char *)p, OT_PATH_MAX, "%s", value);
      return OT_OK;
    case K_DTYPE: {
      if ((k = parse_choice(value, dtypes, 16)) < 0) BADV("is not a dtype (f32 | bf16 | f16)");
      char a[64] = "";
      bool ainv;
      if (alias) alias_text(i, alias, a, sizeof a, &ainv);
      if (k == 5 && !strcmp(a, "fp16")) k = 7;   // --fp16 (Megatron, HF): a boolean meaning f16
      *(ot_dtype *)p = (k == 1 || k == 4 || k == 5 || k == 13) ? OT_BF16 : (k >= 7 && k <= 12) ? OT_F16 : OT_F32;
      return OT_OK;
    }
    case K_LSCALE: {   // auto | dynamic | a number >= 0
      char n[16];
      normalize(value, n, sizeof n);
      if (!strcmp(n, "auto")) { *(float *)p = -1.0f; return OT_OK; }
      if (!strcmp(n, "dynamic")) { *(float *)p = 0.0f; return OT_OK; }
      char *end;
      errno = 0;
      const double x = strtod(value, &end);
      if (end == value || *end || errno || !isfinite(x) || x < 0 || x > 3.4e38)
        BADV("is not a loss scale (auto | 0 = dynamic | a static scale > 0, e.g. 1024)");
      *(float *)p = (float)x;
      return OT_OK;
    }
    case K_POW2: {   // stores 2^value
      char *end;
      errno = 0;
      const double x = strtod(value, &end);
      if (end == value || *end || errno || !(x >= d->lo && x <= d->hi))
        BADV("is not a power of two's exponent in [%g, %g] (16 means a scale of 65536)", d->lo, d->hi);
      *(float *)p = (float)pow(2.0, x);
      return OT_OK;
    }
    case K_RECOMPUTE:
      if ((k = parse_choice(value, recs, 9)) < 0)
        BADV("is not a recompute mode (none | selective | full, or a boolean: true = full)");
      *(ot_recompute *)p = k >= 5 ? (k & 1 ? OT_RECOMPUTE_FULL : OT_RECOMPUTE_NONE)
                           : k == 3 ? OT_RECOMPUTE_NONE : k == 4 ? OT_RECOMPUTE_FULL : (ot_recompute)k;
      return OT_OK;
    case K_NORM:
      if ((k = parse_choice(value, norms, 2)) < 0) BADV("is not a norm (layernorm | rmsnorm)");
      *(ot_norm_kind *)p = (ot_norm_kind)k;
      return OT_OK;
    case K_ACT:
      if ((k = parse_choice(value, acts, 7)) < 0) BADV("is not an activation (gelu | swiglu | relu | gelu-erf)");
      *(ot_mlp_kind *)p = (k == 1 || k == 3) ? OT_MLP_SWIGLU : k == 5 ? OT_MLP_RELU : k == 6 ? OT_MLP_GELU_ERF
                                                                                           : OT_MLP_GELU;
      return OT_OK;
    case K_POS:
      if ((k = parse_choice(value, poss, 4)) < 0) BADV("is not a position kind (learned | rope | sinusoidal)");
      *(ot_pos_kind *)p = k == 1 ? OT_POS_ROPE : k == 3 ? OT_POS_SINUSOID : OT_POS_LEARNED;
      return OT_OK;
    case K_NAMES:
      if ((k = parse_choice(value, names, 4)) < 0) BADV("is not a naming (gpt2 | llama | marian | vit)");
      *(ot_names *)p = (ot_names)k;
      return OT_OK;
    case K_POOL:
      if ((k = parse_choice(value, pools, 4)) < 0) BADV("is not a pooling (cls | mean; timm: token | avg)");
      *(ot_pool_kind *)p = k >= 2 ? OT_POOL_MEAN : OT_POOL_CLS;
      return OT_OK;
    case K_BLEUTOK:
      if ((k = parse_choice(value, bleutoks, 3)) < 0) BADV("is not a BLEU tokenizer (13a | intl | none)");
      *(ot_bleu_tok *)p = (ot_bleu_tok)k;
      return OT_OK;
    case K_ROPE:
      if ((k = parse_choice(value, ropes, 2)) < 0) BADV("is not a RoPE style (neox | gptj)");
      *(ot_rope_style *)p = k == 0 ? OT_ROPE_NEOX : OT_ROPE_GPTJ;
      return OT_OK;
    case K_DECAY:
      if ((k = parse_choice(value, decays, 7)) < 0)
        BADV("is not a decay (cosine | linear | constant | inverse_sqrt)");
      *(ot_lr_decay *)p = k >= 3 ? OT_LR_INVSQRT : (ot_lr_decay)k;
      return OT_OK;
    case K_BETAS: {   // "(b1, b2)", "[b1, b2]", "b1,b2" or "b1 b2"
      char buf[96], *e1, *e2 = buf;
      if (strlen(value) >= sizeof buf) BADV("is too long");
      snprintf(buf, sizeof buf, "%s", value);
      for (char *q = buf; *q; q++)
        if (*q == '(' || *q == ')' || *q == '[' || *q == ']' || *q == ',') *q = ' ';
      errno = 0;
      const double b1 = strtod(buf, &e1), b2 = e1 == buf ? 0.0 : strtod(e1, &e2);
      if (e1 == buf || e2 == e1 || errno) BADV("is not two numbers (\"(0.9, 0.98)\")");
      while (*e2 == ' ') e2++;
      if (*e2) BADV("is not two numbers (\"(0.9, 0.98)\")");
      if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1)) BADV("has a beta outside [0, 1)");
      ((float *)p)[0] = (float)b1;
      ((float *)p)[1] = (float)b2;
      return OT_OK;
    }
    case K_F3: {   // "x" (every channel), "a,b,c", "(a, b, c)" or "a b c"
      char buf[128], *e = buf;
      if (strlen(value) >= sizeof buf) BADV("is too long");
      snprintf(buf, sizeof buf, "%s", value);
      for (char *q = buf; *q; q++)
        if (*q == '(' || *q == ')' || *q == '[' || *q == ']' || *q == ',') *q = ' ';
      double v[3];
      int n = 0;
      for (;;) {
        while (*e == ' ') e++;
        if (!*e) break;
        char *e2;
        errno = 0;
        const double x = strtod(e, &e2);
        if (e2 == e || errno || n == 3) BADV("is not one or three numbers (\"0.5\" or \"0.5,0.4,0.3\")");
        v[n++] = x;
        e = e2;
      }
      if (n != 1 && n != 3) BADV("is not one or three numbers (\"0.5\" or \"0.5,0.4,0.3\")");
      for (int i = 0; i < 3; i++) {
        const double x = v[n == 1 ? 0 : i];
        if (!(x >= d->lo && x <= d->hi)) BADV("has a value outside [%g, %g]", d->lo, d->hi);
        ((float *)p)[i] = (float)x;
      }
      return OT_OK;
    }
    case K_TASK: {
      static const char *const tasks[] = {"lm", "translate", "translation", "classify",
                                          "image-classification"};
      if ((k = parse_choice(value, tasks, 5)) < 0) BADV("is not a task (lm | translate | classify)");
      k = k >= 3 ? OT_TASK_CLASSIFY : k ? OT_TASK_TRANSLATE : OT_TASK_LM;
      if (k == OT_TASK_CLASSIFY && c->task != OT_TASK_CLASSIFY) classify_defaults(c);
      if (k == OT_TASK_TRANSLATE && c->task != OT_TASK_TRANSLATE) translate_defaults(c);
      c->task = k;
      return OT_OK;
    }
    case K_MODEL: {
      ot_model_config m;
      if (ot_model_config_preset(&m, value) != OT_OK)
        return ot_error(OT_EINVAL, "%s: %s", origin, ot_last_error());
      c->model = m;
      return OT_OK;
    }
  }
  return ot_error(OT_EINTERNAL, "ot_train_config_set: key type %d", (int)d->type);
}

// The shortest text that reads back as the same float.
static void float_text(char *buf, size_t cap, float x) {
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(buf, cap, "%.*g", prec, (double)x);
    if (strtof(buf, NULL) == x) break;
  }
}

const char *ot_train_config_get(const ot_train_config *c, const char *key, char *buf, size_t cap) {
  int i = find_key(key);
  if (i < 0 || !c || !buf || cap == 0) return NULL;
  const key_def *d = &k_keys[i];
  const void *p = (const char *)c + d->off;
  switch (d->type) {
    case K_INT: case K_SHARD: snprintf(buf, cap, "%d", *(const int *)p); break;
    case K_I64: snprintf(buf, cap, "%lld", (long long)*(const int64_t *)p); break;
    case K_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case K_F32: float_text(buf, cap, *(const float *)p); break;
    case K_BOOL: snprintf(buf, cap, "%s", *(const bool *)p ? "true" : "false"); break;
    case K_STR: snprintf(buf, cap, "%s", (const char *)p); break;
    case K_DTYPE: snprintf(buf, cap, "%s", ot_dtype_name(*(const ot_dtype *)p)); break;
    case K_LSCALE:
      if (*(const float *)p < 0) snprintf(buf, cap, "auto");
      else float_text(buf, cap, *(const float *)p);
      break;
    case K_POW2: {
      const float x = *(const float *)p;
      if (x > 0) float_text(buf, cap, (float)log2((double)x));
      else snprintf(buf, cap, "none");
      break;
    }
    case K_RECOMPUTE: snprintf(buf, cap, "%s", ot_recompute_name(*(const ot_recompute *)p)); break;
    case K_NORM: snprintf(buf, cap, "%s", *(const ot_norm_kind *)p == OT_NORM_RMSNORM ? "rmsnorm" : "layernorm"); break;
    case K_ACT: {
      const ot_mlp_kind a = *(const ot_mlp_kind *)p;
      snprintf(buf, cap, "%s", a == OT_MLP_SWIGLU ? "swiglu" : a == OT_MLP_RELU ? "relu"
                               : a == OT_MLP_GELU_ERF ? "gelu-erf" : "gelu");
      break;
    }
    case K_POS: {
      const ot_pos_kind q = *(const ot_pos_kind *)p;
      snprintf(buf, cap, "%s", q == OT_POS_ROPE ? "rope" : q == OT_POS_SINUSOID ? "sinusoidal" : "learned");
      break;
    }
    case K_NAMES: {
      const ot_names q = *(const ot_names *)p;
      snprintf(buf, cap, "%s", q == OT_NAMES_LLAMA ? "llama" : q == OT_NAMES_MARIAN ? "marian"
                               : q == OT_NAMES_VIT ? "vit" : "gpt2");
      break;
    }
    case K_ROPE: snprintf(buf, cap, "%s", *(const ot_rope_style *)p == OT_ROPE_GPTJ ? "gptj" : "neox"); break;
    case K_POOL: snprintf(buf, cap, "%s", *(const ot_pool_kind *)p == OT_POOL_MEAN ? "mean" : "cls"); break;
    case K_BLEUTOK: {
      const ot_bleu_tok q = *(const ot_bleu_tok *)p;
      snprintf(buf, cap, "%s", q == OT_BLEU_TOK_INTL ? "intl" : q == OT_BLEU_TOK_NONE ? "none" : "13a");
      break;
    }
    case K_DECAY: snprintf(buf, cap, "%s", ot_lr_decay_name(*(const ot_lr_decay *)p)); break;
    case K_MODEL: snprintf(buf, cap, "%s", c->model.name); break;
    case K_TASK:
      snprintf(buf, cap, "%s", *(const int *)p == OT_TASK_TRANSLATE ? "translate"
                               : *(const int *)p == OT_TASK_CLASSIFY ? "classify" : "lm");
      break;
    case K_F3: {
      char a[32], b[32], d[32];
      float_text(a, sizeof a, ((const float *)p)[0]);
      float_text(b, sizeof b, ((const float *)p)[1]);
      float_text(d, sizeof d, ((const float *)p)[2]);
      snprintf(buf, cap, "%s,%s,%s", a, b, d);
      break;
    }
    case K_BETAS: {
      char b1[32], b2[32];
      float_text(b1, sizeof b1, ((const float *)p)[0]);
      float_text(b2, sizeof b2, ((const float *)p)[1]);
      snprintf(buf, cap, "(%s, %s)", b1, b2);
      break;
    }
  }
  return buf;
}

void ot_train_config_help(FILE *f) {
  ot_train_config d;
  ot_train_config_default(&d);
  const char *section[] = {"model", "data", "batch-size", "dtype", "steps", "eval-every", "task"};
  const char *title[] = {"model shape", "data", "batch", "run", "optimizer and schedule",
                         "evaluation, checkpoints, output",
                         "translation (--task translate changes the defaults marked 'translate:')"};
  ot_train_config tr = d;
  ot_train_config_set(&tr, "task", "translate", "help");
  for (int i = 0; i < NKEYS; i++) {
    for (int s = 0; s < 7; s++)
      if (!strcmp(k_keys[i].name, section[s])) fprintf(f, "\n%s:\n", title[s]);
    char v[OT_PATH_MAX], flag[64];
    ot_train_config_get(&d, k_keys[i].name, v, sizeof v);
    snprintf(flag, sizeof flag, "--%s", k_keys[i].name);
    fprintf(f, "  %-16s %s", flag, k_keys[i].help);
    if (k_keys[i].type == K_BOOL) fprintf(f, " [%s; --no-%s]", v, k_keys[i].name);
    else if (v[0]) fprintf(f, " [%s]", v);
    char vt[OT_PATH_MAX];
    ot_train_config_get(&tr, k_keys[i].name, vt, sizeof vt);
    if (strcmp(v, vt) && strcmp(k_keys[i].name, "task") && (!(k_keys[i].flags & F_MODEL) || i == 0)) fprintf(f, " [translate: %s]", vt[0] ? vt : "\"\"");
    fputc('\n', f);
    if (k_keys[i].aliases[0]) {
      fprintf(f, "  %-16s   aliases:", "");
      for (const char *p = k_keys[i].aliases; *p;) {
        while (*p == ' ') p++;
        const size_t n = strcspn(p, " ");
        if (!n) break;
        if (*p == '!') fprintf(f, " %.*s (true = --no-%s)", (int)n - 1, p + 1, k_keys[i].name);
        else fprintf(f, " %.*s", (int)n, p);
        p += n;
      }
      fputc('\n', f);
    }
  }
}

// ------------------------------------------------------------- resolution ---
const char *ot_lr_decay_name(ot_lr_decay d) {
  switch (d) {
    case OT_LR_COSINE: return "cosine";
    case OT_LR_LINEAR: return "linear";
    case OT_LR_CONSTANT: return "constant";
    case OT_LR_INVSQRT: return "inverse_sqrt";
  }
  return "unknown";
}

#define BAD(...) return ot_error(OT_EINVAL, __VA_ARGS__)

// The checks of the task: translate needs an encoder-decoder model, its
// bitext and a data-parallel layout; lm a decoder.
static ot_status resolve_task(ot_train_config *c) {
  const bool encdec = c->model.arch == OT_ARCH_ENCDEC, vit = c->model.arch == OT_ARCH_VIT;
  if (c->task == OT_TASK_CLASSIFY) {
    if (!vit)
      BAD("--task classify needs a vision transformer, but --model %s is not one (use --model "
          "vit-digits, vit-tiny/16, vit-small/16 or vit-base/16)", c->model.name);
    if (c->vocab_parallel)
      BAD("--vocab-parallel splits a language model's vocabulary over the tensor ranks; a vision "
          "transformer's classifier stays whole on every tensor rank (drop --vocab-parallel)");
    if (!c->train_images[0] && !c->eval_only)
      BAD("--task classify needs --train-images (an image array file or a list of images)");
    for (int i = 0; i < 3; i++)
      if (!(c->image_std[i] > 0)) BAD("--image-std %g must be > 0", c->image_std[i]);
    if (!(c->drop_path >= 0 && c->drop_path < 1)) BAD("--drop-path %g must be in [0, 1)", c->drop_path);
    c->seq_len = c->model.max_seq;   // tokens per image (the FLOPs and the progress line)
    return OT_OK;
  }
  if (vit)
    BAD("--model %s is a vision transformer: train it with --task classify (on images)", c->model.name);
  if (c->task != OT_TASK_TRANSLATE) {
    if (encdec)
      BAD("--model %s is an encoder-decoder: train it with --task translate (on a bitext); --task lm "
          "trains decoder-only models (small, tiny, gpt2, llama-tiny)", c->model.name);
    return OT_OK;
  }
  if (!encdec)
    BAD("--task translate needs an encoder-decoder model, but --model %s is decoder-only (use "
        "--model transformer-small, transformer-base, transformer-big or transformer-tiny)", c->model.name);
  if (!c->src_data[0] || !c->tgt_data[0])
    BAD("--task translate needs --src-data and --tgt-data (the training bitext, one sentence per line)");
  if (!c->valid_src[0] != !c->valid_tgt[0])
    BAD("--valid-src and --valid-tgt go together (give both, or neither for no held-out evaluation)");
  if (c->tokens_per_batch < 1) BAD("--tokens-per-batch %d must be >= 1", c->tokens_per_batch);
  if (c->max_rows < 0) BAD("--max-rows %d must be >= 0 (0: automatic)", c->max_rows);
  if (!(c->label_smoothing >= 0 && c->label_smoothing < 1))
    BAD("--label-smoothing %g must be in [0, 1)", c->label_smoothing);
  if (c->eval_bleu_sentences < 0) BAD("--eval-bleu-sentences %d must be >= 0", c->eval_bleu_sentences);
  if (c->seq_len > c->model.max_seq) c->seq_len = c->model.max_seq;   // unused by translate but FLOPs
  return OT_OK;
}

// The loss-scaling keys (each message names the key as the user wrote it and the fix).
static ot_status resolve_loss_scale(ot_train_config *c) {
  char f[160];
  if (!(c->loss_scale >= -1.0f) || !isfinite(c->loss_scale) || (c->loss_scale < 0 && c->loss_scale != -1.0f))
    BAD("%s must be auto, 0 (dynamic) or a static scale > 0", flagv(c, "loss-scale", f, sizeof f));
  if (!(c->loss_scale_init > 0) || !isfinite(c->loss_scale_init))
    BAD("%s must be finite and > 0 (PyTorch's default is 65536 = 2^16)", flagv(c, "loss-scale-init", f, sizeof f));
  if (c->loss_scale_growth_interval < 1)
    BAD("%s must be >= 1 clean steps between growths (PyTorch's default is 2000)",
        flagv(c, "loss-scale-growth-interval", f, sizeof f));
  if (!(c->loss_scale_growth > 1) || !isfinite(c->loss_scale_growth))
    BAD("%s must be > 1 (the scale is multiplied by it after the growth interval; default 2)",
        flagv(c, "loss-scale-growth", f, sizeof f));
  if (!(c->loss_scale_backoff > 0 && c->loss_scale_backoff < 1))
    BAD("%s must be in (0, 1) (the scale is multiplied by it after an inf / NaN gradient; default 0.5)",
        flagv(c, "loss-scale-backoff", f, sizeof f));
  if (!(c->loss_scale_min >= 0) || !isfinite(c->loss_scale_min))
    BAD("%s must be >= 0 (0: no floor)", flagv(c, "loss-scale-min", f, sizeof f));
  char g[160];
  if (c->loss_scale_min > c->loss_scale_init && !(c->loss_scale > 0))
    BAD("%s is above %s: the dynamic scale starts at its floor or above (lower the floor)",
        flagv(c, "loss-scale-min", f, sizeof f), flagv(c, "loss-scale-init", g, sizeof g));
  return OT_OK;
}

ot_status ot_train_config_resolve(ot_train_config *c) {
  OT_CHECK_PTR(c, "ot_train_config_resolve");
  if (ot_model_config_validate(&c->model) != OT_OK)
    BAD("model: %s (set with --model / --d-model / --heads / ...)", ot_last_error());
  OT_TRY(resolve_task(c));
  if (c->dtype != OT_F32 && c->dtype != OT_BF16 && c->dtype != OT_F16)
    BAD("--dtype %s unsupported (f32 | bf16 | f16)", ot_dtype_name(c->dtype));
  OT_TRY(resolve_loss_scale(c));
  if (c->batch_size < 1) BAD("--batch-size %d must be >= 1", c->batch_size);
  if (c->grad_accum < 1) BAD("--grad-accum %d must be >= 1", c->grad_accum);
  if (c->seq_len < 1) BAD("--seq-len %d must be >= 1", c->seq_len);
  if (c->seq_len > c->model.max_seq)
    BAD("--seq-len %d exceeds the model's --max-seq %d (lower --seq-len or raise --max-seq)", c->seq_len,
        c->model.max_seq);
  // the parallel keys as the user wrote them (MindSpore and Megatron names too)
  char dp[160], tp[160], pp[160], ga[160];
  flagv(c, "data-parallel", dp, sizeof dp);
  flagv(c, "tensor-parallel", tp, sizeof tp);
  flagv(c, "pipeline-stages", pp, sizeof pp);
  if (c->data_parallel < 1 || c->tensor_parallel < 1 || c->pipeline_stages < 1)
    BAD("%s, %s, %s must each be >= 1", dp, tp, pp);
  if (c->global_batch > 0) {
    const int per = c->batch_size * c->data_parallel;
    if (c->global_batch % per)
      BAD("--global-batch %d is not a multiple of --batch-size %d x %s (global = "
          "batch-size x grad-accum x data-parallel)", c->global_batch, c->batch_size, dp);
    int g = c->global_batch / per;
    if (c->grad_accum != 1 && c->grad_accum != g)
      BAD("--global-batch %d with --batch-size %d x %s means --grad-accum %d, but "
          "%s (give one of them)", c->global_batch, c->batch_size, dp, g,
          flagv(c, "grad-accum", ga, sizeof ga));
    c->grad_accum = g;
  }
  if (c->grad_accum < c->pipeline_stages && c->task != OT_TASK_TRANSLATE) {
    if (c->spelling[find_key("grad-accum")]) flagv(c, "grad-accum", ga, sizeof ga);
    else snprintf(ga, sizeof ga, "--grad-accum (micro-batches) %d", c->grad_accum);
    BAD("%s is below %s: the pipeline needs at least one micro-batch per stage (raise "
        "--grad-accum or --global-batch)", ga, pp);
  }
  if (ot_model_n_blocks(&c->model) < c->pipeline_stages)
    BAD("%s %d is below %s: every stage needs a block (lower --pipeline-stages)",
        c->model.arch == OT_ARCH_ENCDEC ? "the encoder + decoder blocks" : "--layers",
        ot_model_n_blocks(&c->model), pp);
  if (c->optimizer_shard < 0 || c->optimizer_shard > 3)
    BAD("%s: ZeRO stages 0, 1, 2 and 3 are available", flagv(c, "optimizer-shard", ga, sizeof ga));
  if (c->grad_buckets < 1) BAD("%s must be >= 1", flagv(c, "grad-buckets", ga, sizeof ga));
  if (!(c->comm_timeout >= 0)) BAD("--comm-timeout %g must be >= 0 (0: never)", c->comm_timeout);
  {
    const int ntp = c->tensor_parallel;
    const ot_model_config *mc = &c->model;
    if (mc->n_heads % ntp)
      BAD("--heads %d is not divisible by %s (choose a tensor-parallel size "
          "that divides the heads)", mc->n_heads, tp);
    if (mc->n_kv_heads % ntp)
      BAD("--kv-heads %d is not divisible by %s (choose a tensor-parallel size "
          "that divides the kv-heads)", mc->n_kv_heads, tp);
    if (mc->d_ff % ntp)
      BAD("--d-ff %d is not divisible by %s (choose a tensor-parallel size that "
          "divides it)", mc->d_ff, tp);
  }
  if ((double)c->batch_size * c->grad_accum * c->data_parallel * (c->seq_len + 1.0) > 2e9)
    BAD("the global batch of %d x %d rows of %d tokens is too large", c->grad_accum, c->batch_size,
        c->seq_len);
  if (c->threads < 0) BAD("--threads %d must be >= 0 (0: OMP_NUM_THREADS)", c->threads);
  if (c->steps < 0) BAD("--steps %lld must be >= 0", (long long)c->steps);
  if (c->steps < 1 && !c->eval_only) BAD("--steps %lld must be >= 1", (long long)c->steps);
  if (!(c->lr > 0) || !isfinite(c->lr)) BAD("--lr %g must be > 0", c->lr);
  const bool invsqrt = c->lr_decay == OT_LR_INVSQRT;
  if (invsqrt && c->min_lr < 0) c->min_lr = 0.0f;   // fairseq / HF: no floor
  if (invsqrt && c->warmup == 0)
    BAD("--lr-decay inverse_sqrt needs --warmup >= 1: after the warmup the rate is lr * sqrt(warmup "
        "/ (step + 1)), which a warmup of 0 makes 0 (fairseq uses --warmup-updates 4000)");
  if (c->min_lr < 0) {   // lr / 10 of the decimal the user wrote (3e-4 -> 3e-5, not 3.0000001e-5)
    char b[32];
    snprintf(b, sizeof b, "%.7g", (double)c->lr);
    c->min_lr = (float)(strtod(b, NULL) / 10.0);
  }
  if (c->min_lr > c->lr) BAD("--min-lr %g is above --lr %g (the decay goes down to min-lr)", c->min_lr, c->lr);
  if (c->decay_steps == 0) c->decay_steps = c->steps;
  // The automatic warmup: steps / 10, at most 100. inverse_sqrt's (the translation recipe) is
  // longer, steps / 5 up to fairseq's 4000: on the bundled En-Fr recipe (transformer-small, lr
  // 1e-3, 2000 steps; bench/README.md) a warmup of 100 left post-norm training on a slow branch
  // (held-out nll 3.4-3.7 at step 1000 in all ten runs on ot's own kernels) where 400 reached 2.2.
  if (c->warmup < 0) {
    const int64_t w = c->steps / (invsqrt ? 5 : 10), cap = invsqrt ? 4000 : 100;
    c->warmup = w < cap ? w : cap;
  }
  if (invsqrt && c->warmup < 1) c->warmup = 1;   // the automatic warmup of a short run
  if (c->lr_decay != OT_LR_CONSTANT && !invsqrt && c->warmup > c->decay_steps)
    BAD("--warmup %lld is longer than the decay (--decay-steps %lld); lower --warmup or raise "
        "--decay-steps", (long long)c->warmup, (long long)c->decay_steps);
  if (!(c->beta1 >= 0 && c->beta1 < 1)) BAD("--beta1 %g must be in [0, 1)", c->beta1);
  if (!(c->beta2 >= 0 && c->beta2 < 1)) BAD("--beta2 %g must be in [0, 1)", c->beta2);
  if (!(c->eps > 0) || !isfinite(c->eps)) BAD("--eps %g must be > 0", c->eps);
  if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay)) BAD("--weight-decay %g must be >= 0", c->weight_decay);
  if (c->qat_group != 0 && c->qat_group != 32 && c->qat_group != 64 && c->qat_group != 128)
    BAD("--qat-group %d must be 0 (per row), 32, 64 or 128", c->qat_group);
  if (c->qat && c->dtype != OT_F32)
    BAD("--qat trains in f32 (--dtype %s: use --dtype f32)", ot_dtype_name(c->dtype));
  if (c->qat && c->task != OT_TASK_LM)
    BAD("--qat takes the language-model task (quantized encoder-decoders and vision transformers "
        "cannot be saved yet)");
  if (c->qat && (c->tensor_parallel > 1 || c->optimizer_shard == 3))
    BAD("--qat needs whole matrices on every rank (no --tensor-parallel, no --optimizer-shard 3)");
  if (c->init_from[0] && c->resume[0])
    BAD("--init-from starts a new run from a checkpoint's weights (step 0, fresh optimizer) and --resume "
        "continues a run: give one of them");
  if (!isfinite(c->grad_clip)) BAD("--grad-clip %g must be finite (<= 0: off)", c->grad_clip);
  if (c->eval_every < 0) BAD("--eval-every %d must be >= 0", c->eval_every);
  if (c->eval_batches < 1) BAD("--eval-batches %d must be >= 1", c->eval_batches);
  if (c->save_every < 0) BAD("--save-every %d must be >= 0", c->save_every);
  if (c->keep < 0) BAD("--keep %d must be >= 0", c->keep);
  if (c->print_every < 1) BAD("--print-every %d must be >= 1", c->print_every);
  return OT_OK;
}

ot_lr_schedule ot_train_schedule(const ot_train_config *c) {
  const float floor_lr = c->min_lr >= 0 ? c->min_lr : c->lr_decay == OT_LR_INVSQRT ? 0.0f : c->lr / 10;
  ot_lr_schedule s = {c->lr, floor_lr, c->warmup < 0 ? 0 : c->warmup,
                      c->decay_steps > 0 ? c->decay_steps : c->steps, c->lr_decay};
  return s;
}

void ot_train_config_print(FILE *f, const ot_train_config *c) {
  char v[OT_PATH_MAX];
  int col = 0;
  for (int i = 0; i < NKEYS; i++) {
    if (k_keys[i].flags & F_NOSAVE) continue;
    ot_train_config_get(c, k_keys[i].name, v, sizeof v);
    if (!v[0]) continue;
    char item[OT_PATH_MAX + 80];
    int n = snprintf(item, sizeof item, "%s=%s", k_keys[i].name, v);
    if (col && col + n + 1 > 100) { fputc('\n', f); col = 0; }
    fprintf(f, "%s%s", col ? " " : "  ", item);
    col += n + (col ? 1 : 2);
  }
  if (col) fputc('\n', f);
}
