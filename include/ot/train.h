// ops-transformer training engine: the training configuration (one key
// vocabulary shared by flags, config files and checkpoints, with the names
// Megatron / nanoGPT / Hugging Face users know as aliases), the learning-rate
// schedule, the trainer (AdamW with f32 master weights and moments, global-norm
// clipping, gradient accumulation, mixed precision, non-finite skip), the
// evaluation on held-out data, checkpoints that resume bit-exactly, and the
// whole training loop with progress, JSONL log, profile and loss-curve SVG.
//
// Determinism: for a given config and thread count every step is bitwise
// reproducible (all reductions have a fixed order), and a run resumed from a
// checkpoint continues exactly as the uninterrupted run.
#ifndef OT_TRAIN_H
#define OT_TRAIN_H
#include "ot/model.h"
#include "ot/data.h"
#ifdef __cplusplus
extern "C" {
#endif

// ------------------------------------------------------------ LR schedule ---
typedef enum { OT_LR_COSINE = 0, OT_LR_LINEAR, OT_LR_CONSTANT, OT_LR_INVSQRT } ot_lr_decay;
// "cosine", "linear", "constant", "inverse_sqrt"
const char *ot_lr_decay_name(ot_lr_decay d);

typedef struct {
  float lr;            // peak learning rate
  float min_lr;        // floor reached at decay_steps (cosine/linear), <= lr;
                       // inverse_sqrt: a floor of the decay (0: none)
  int64_t warmup;      // steps of linear warmup: lr * (s + 1) / warmup for s < warmup
  int64_t decay_steps; // decay over [warmup, decay_steps); min_lr from then on
                       // (unused by constant and inverse_sqrt)
  ot_lr_decay decay;
} ot_lr_schedule;

// Learning rate of (0-based) step s:
//   s < warmup:            lr * (s + 1) / warmup
//   inverse_sqrt, s >= warmup: max(min_lr, lr * sqrt(warmup / (s + 1)))
//     (the peak lr at the last warmup step, continuous there. fairseq's and
//     Hugging Face's inverse_sqrt (warmup_init_lr 0, timescale = warmup) are
//     this curve one step later: theirs(s) = lr * min(s / warmup, sqrt(warmup
//     / s)) = ours(s - 1), 0 at step 0; here the first update is not wasted,
//     as with the other warmups. "noam" (Vaswani et al.) is the same shape with
//     the peak given by --lr instead of d_model^-0.5 warmup^-0.5. warmup <= 0
//     is read as 1.)
//   s >= decay_steps:      min_lr            (constant: lr)
//   otherwise, r = (s - warmup) / (decay_steps - warmup) in [0, 1):
//     cosine: min_lr + 0.5 (1 + cos(pi r)) (lr - min_lr);  linear: lr - r (lr - min_lr)
// Computed in double, rounded to float once.
float ot_lr_at(const ot_lr_schedule *s, int64_t step);

// ------------------------------------------------------------ the config ---

#define OT_TRAIN_KEYS_MAX 128   // room for the keys of the key table

typedef struct {
  ot_model_config model;       // shape (preset "small" by default)
  // data: shards written by `ot prepare`
  char data[OT_PATH_MAX];      // directory with train_*.bin / val_*.bin / info.json
  char train_data[OT_PATH_MAX];// glob of training shards ("" = <data>/train_*.bin)
  char val_data[OT_PATH_MAX];  // glob of held-out shards ("" = <data>/val_*.bin)
  bool shuffle;                // windows in a seeded permutation per epoch
  // batch: a step sees grad_accum micro-batches of batch_size rows of seq_len tokens
  int batch_size, grad_accum, global_batch;   // global_batch (rows, 0 = unset) sets grad_accum
  int seq_len;
  // run
  ot_dtype dtype;              // f32, bf16 or f16 (16-bit activations/GEMMs, f32 master + moments;
                               // f16 scales the loss, see loss_scale below)
  ot_recompute recompute;
  int threads;                 // 0 = OpenMP's default (OMP_NUM_THREADS)
  uint64_t seed;               // init and data order
  // optimizer and schedule
  int64_t steps;               // optimizer steps of the run
  float lr, min_lr;            // min_lr < 0: lr / 10 (inverse_sqrt: 0, no floor)
  int64_t warmup, decay_steps; // decay_steps 0: = steps
  ot_lr_decay lr_decay;
  float beta1, beta2, eps, weight_decay, grad_clip;   // grad_clip <= 0: off
  // quantization-aware training (ot_model_set_qat): the forward reads int8 fake-quantized
  // matrices (one scale per row: qat_group 0, or per group of 32 / 64 / 128 inputs), the
  // masters take the straight-through gradients; `ot quantize --group qat_group` exports
  // exactly those weights. f32, decoder-only, no tensor parallelism or ZeRO-3.
  bool qat;
  int qat_group;
  // evaluation, checkpoints, output
  int eval_every;              // steps between held-out evaluations (0 = only at the end)
  int eval_batches;            // batches of batch_size rows per evaluation (capped by the split)
  int save_every;              // steps between checkpoints (0 = only at the end)
  int keep;                    // step_* checkpoint directories kept (0 = all)
  int print_every;             // progress lines every N steps (the log has every step)
  char out[OT_PATH_MAX];       // run directory: log.jsonl, loss.svg, step_NNNNNN/, latest
  char log[OT_PATH_MAX];       // "" = <out>/log.jsonl
  char plot[OT_PATH_MAX];      // "" = <out>/loss.svg
  char profile[OT_PATH_MAX];   // "" = off; else the Chrome trace path (+ summary printed)
  char resume[OT_PATH_MAX];    // "" = fresh run; a checkpoint dir or a run dir (uses <dir>/latest)
  char init_from[OT_PATH_MAX]; // "" = initialized by seed; else a new run (step 0, fresh optimizer)
                               // from the weights of this checkpoint / run dir / HF directory
  bool quiet;                  // no progress lines (warnings and errors still)
  bool measure_peak;           // measure the FMA peak at start for MFU (tests turn it off)
  bool eval_only;              // trainer for evaluation: no optimizer state, no training data
  // parallel layout (`mpirun -np data_parallel*tensor_parallel*pipeline_stages ot train ...`);
  // not stored in checkpoints: a checkpoint loads into any layout
  int data_parallel;           // replicas; each takes grad_accum micro-batches of batch_size rows
  int tensor_parallel;         // Megatron tensor parallelism (heads, kv-heads, d_ff divisible)
  int pipeline_stages;         // blocks split over stages (grad_accum = micro-batches >= stages)
  bool vocab_parallel;         // embedding / head rows split over the tensor group
  int optimizer_shard;         // ZeRO stage 0 | 1 (optimizer state split over data-parallel ranks)
                               // | 2 (also the reduced gradients; per-micro-batch reduction)
                               // | 3 (also the weights, each block gathered before it runs)
  bool zero_prefetch;          // ZeRO-3: gather the next block while the current one computes
  int grad_buckets;            // data-parallel gradient all-reduces per step
  int comm_fusion_layers;      // > 0: each all-reduce fuses the gradients of that many
                               // consecutive blocks (MindSpore set_comm_fusion), else
                               // grad_buckets equal ranges
  bool overlap;                // launch each bucket's all-reduce as soon as its gradients are final
  bool gpipe;                  // pipeline schedule GPipe (all forwards, then all backwards) vs 1F1B
  bool balanced_stages;        // pipeline stages split by compute (blocks and the head), not by
                               // an equal number of blocks
  float comm_timeout;          // seconds a blocking communication may wait before the job ends
  int check_replicas;          // every N steps: parameters identical across replicas? (0: off)
  // task: language model over token shards (OT_TASK_LM) or translation over a
  // bitext (OT_TASK_TRANSLATE: an encoder-decoder model, token-budget batches,
  // label-smoothed loss, BLEU at evaluation). Setting task = translate (from lm)
  // sets its defaults: model transformer-small (when the model is decoder-only),
  // data out/translate-data (the joint tokenizer of `ot prepare --task translate`),
  // the bundled data/translate/{train,valid}.{en,fr}, tokens_per_batch 4096,
  // label_smoothing 0.1, dropout 0.1, lr 7e-4 inverse_sqrt with 4000 warmup
  // steps (capped at steps / 10 for short runs by --warmup -1), betas (0.9, 0.98),
  // weight decay 0, eval_bleu_sentences 200; keys given after it refine them.
  int task;                    // OT_TASK_LM | OT_TASK_TRANSLATE
  char src_data[OT_PATH_MAX], tgt_data[OT_PATH_MAX];     // training bitext (line i = line i)
  char valid_src[OT_PATH_MAX], valid_tgt[OT_PATH_MAX];   // held-out bitext ("" = none)
  int tokens_per_batch;        // translate: rows x max(S, T) of one micro-batch (fairseq --max-tokens);
                               // a step takes grad_accum x data_parallel of them
  int max_rows;                // translate: most rows per forward (0: tokens_per_batch / longest
                               // sequence, so the buffers hold one micro-batch of the longest)
  float label_smoothing;       // eps of the label-smoothed cross-entropy (0: plain)
  float dropout, attn_dropout, act_dropout;   // model dropout (residual / attention / MLP act.)
  int eval_bleu_sentences;     // translate: first K held-out pairs translated for BLEU (0: off)
  ot_bleu_tok eval_bleu_tokenize;   // translate: that BLEU's tokenizer (default 13a)
  // The name that set each key (by its index in the key table: 0 ours, k its k-th alias), so
  // messages name the flag the user typed ("--model_parallel (our --tensor-parallel)").
  unsigned char spelling[OT_TRAIN_KEYS_MAX];
  // task = classify (OT_TASK_CLASSIFY): image classification with a vision transformer over
  // image files (ot_images_load: an image array file or a list of PGM/PPM files). Setting
  // task = classify sets its defaults: model vit-digits, the bundled data/digits/{train,
  // heldout}.otimg, batch 64, lr 1e-3 cosine, weight decay 0.05, mean 0.3 / std 0.4, random
  // resized crop from 0.6 of the area, no flip, eval every 100 steps, out out/classify.
  char train_images[OT_PATH_MAX], val_images[OT_PATH_MAX];
  float image_mean[3], image_std[3];   // per channel ((pixel / maxval - mean) / std)
  float crop_min;              // random resized crop: smallest area fraction (0: no crop)
  bool flip;                   // random horizontal flip
  float drop_path;             // stochastic depth of the ViT (ot_model_config.drop_path)
  // loss scaling (fp16 mixed precision), PyTorch GradScaler semantics: the backward starts
  // from loss x scale, gradients are unscaled in the optimizer step, a step with an inf or
  // NaN gradient on any rank is skipped everywhere and the scale backed off; after
  // growth_interval consecutive clean steps the scale grows. The scale and the clean-step
  // count are saved in checkpoints.
  float loss_scale;            // < 0 (default, "auto"): dynamic for dtype f16, none for f32 / bf16;
                               // 0: dynamic; > 0: this static scale
  float loss_scale_init;       // dynamic: the first scale (65536 = 2^16)
  int loss_scale_growth_interval;   // dynamic: clean steps before a growth (2000)
  float loss_scale_growth;     // dynamic: growth factor (2, > 1)
  float loss_scale_backoff;    // dynamic: backoff factor on overflow (0.5, in (0, 1))
  float loss_scale_min;        // dynamic: floor of the scale (0: none, as PyTorch; Megatron 1)
} ot_train_config;

enum { OT_TASK_LM = 0, OT_TASK_TRANSLATE = 1, OT_TASK_CLASSIFY = 2 };

// Defaults: model "small", data "out/data", batch 8 x 256 tokens, 1 micro-batch,
// f32, recompute none, seed 1337, 300 steps, lr 1e-3 -> 1e-4 (min_lr -1: lr/10)
// cosine, warmup -1 (steps/10, at most 100), AdamW (0.9, 0.95, 1e-8), weight
// decay 0.1, clip 1.0, eval every 50 steps over 20 batches, checkpoint at the
// end (keep 2), out "out/train", shuffled data, measure_peak on.
void ot_train_config_default(ot_train_config *c);
// Resolves derived values (global_batch -> grad_accum, min_lr < 0, decay_steps 0)
// and checks every field and combination; OT_EINVAL names the key (as a flag),
// its value and the fix.
ot_status ot_train_config_resolve(ot_train_config *c);
// The schedule a resolved config describes.
ot_lr_schedule ot_train_schedule(const ot_train_config *c);
// Prints the resolved settings with our key names (what a config file would hold).
void ot_train_config_print(FILE *f, const ot_train_config *c);

// ---- keys: flags (--key), config files (key=value or JSON) and checkpoints.
// Keys are matched with '-' and '_' equivalent; aliases from Megatron-LM
// (micro_batch_size, global_batch_size, train_iters, lr_warmup_iters,
// lr_decay_iters, clip_grad, seq_length, num_layers, hidden_size, ...),
// nanoGPT (max_iters, block_size, n_layer, n_embd, gradient_accumulation_steps,
// ...) and Hugging Face (learning_rate, max_steps, warmup_steps, max_grad_norm,
// ...) map to ours.
// Canonical name of a key or alias ("micro_batch_size" -> "batch-size"); NULL if unknown.
const char *ot_train_key_canonical(const char *key);
bool ot_train_key_is_bool(const char *key);   // flags that may appear without a value
// Sets one key. Unknown keys and bad values return OT_EINVAL naming `origin`
// (e.g. "config.txt:3" or "--lr"), the key and the expected form; an unknown
// key suggests the nearest known one. "model" (a preset) resets every shape key.
ot_status ot_train_config_set(ot_train_config *c, const char *key, const char *value,
                              const char *origin);
// Value of a canonical key as text (floats round-trip exactly); NULL if unknown.
const char *ot_train_config_get(const ot_train_config *c, const char *key, char *buf, size_t cap);
// Help: every key with its default, aliases and meaning.
void ot_train_config_help(FILE *f);

// An ordered list of (key, value, origin) pairs: parsed from flags and files,
// applied to a config in one go.
#define OT_SETTINGS_MAX 160
typedef struct { char key[64]; char val[OT_PATH_MAX]; char origin[128]; } ot_setting;
typedef struct { int n; ot_setting item[OT_SETTINGS_MAX]; } ot_settings;

ot_status ot_settings_add(ot_settings *l, const char *key, const char *val, const char *origin);
// A config file: a JSON object ({"lr": 3e-4, "model": "small", ...}, values
// number/string/bool), or lines "key = value" / "key: value" with # comments.
// Syntax errors name the file and line; keys are checked when applied.
ot_status ot_settings_read_file(ot_settings *l, const char *path);
// Applies the pairs in order, "model" presets first (so shape keys refine a
// preset wherever they appear). When `notes` is non-NULL each alias used is
// reported there with our name ("ot: 'micro_batch_size' is --batch-size here").
ot_status ot_train_config_apply(ot_train_config *c, const ot_settings *l, FILE *notes);
// True if the list sets canonical key `key` (directly or by alias).
bool ot_settings_has(const ot_settings *l, const char *key);

// vocab_size of <data>/info.json (written by `ot prepare`); OT_EIO if absent.
ot_status ot_train_data_vocab(const char *data_dir, int *vocab);

// ------------------------------------------------------------- trainer ----
typedef struct ot_trainer ot_trainer;

typedef struct {
  int64_t step;        // 1-based index of the step just taken (= steps done)
  double loss;         // mean loss over every non-ignored token of the global batch
  float lr;            // learning rate used
  double grad_norm;    // global gradient norm before clipping
  float clip;          // clip coefficient applied (1 = none), NaN when skipped
  bool skipped;        // non-finite loss or norm: no update
  int64_t tokens;      // tokens in the global batch
  double seconds;      // wall time of the step
  int64_t tgt_tokens;  // scored tokens the FLOPs count: = tokens (lm); translate: the
                       // target tokens (tokens counts source + target)
  float loss_scale;    // loss scale this step ran with (0: no loss scaling)
  bool overflow;       // skipped by the dynamic loss scaler (finite loss, inf / NaN gradient):
                       // the scale was backed off; an expected event, not divergence
} ot_step_info;

// Resolves (ot_train_config_resolve on a copy), sets the thread count,
// creates and initializes the model (seed), allocates the AdamW moments
// (OT_MEM_OPTIM) and the batch buffers, opens the training loader (shuffled
// by seed unless shuffle is off) and the held-out loader when its shards
// exist. A config with no data (data, train_data empty) gives a trainer that
// only takes ot_trainer_step_on.
ot_status ot_trainer_create(ot_trainer **out, const ot_train_config *c);

// What world rank `rank` of a resolved lm config's layout (dp x tp x pp ranks) allocates
// when ot_trainer_create builds it, by memory category, from the same sizing code
// (the model part's plan, the parallel runtime's buffers, AdamW's moments, the input /
// target buffers; not the data loaders'): equal to ot_mem_current's growth over the
// creation, category by category (tests/mpi/mpi_parallel.c checks every layout). The
// transient scratch of the ops (ot_scratch) comes on top during a step.
typedef struct {
  size_t bytes[OT_MEM_CATEGORY_COUNT];
  int dp_rank, tp_rank, pp_rank;
  int layer0, layer1;        // the rank's pipeline stage: blocks [layer0, layer1)
  int slots;                 // micro-batches whose activations it holds at once
  size_t n_floats;           // its stage's parameters (floats)
  size_t act_saved_layer;    // activations one block saves per micro-batch
  int vocab_rows;            // the head's rows on this rank (vocab-parallel: its part of them)
  int chunk_rows;            // ZeRO-2/3: the head's weight-gradient GEMMs (ZeRO-3: all its
                             // GEMMs) take that many rows at a time (0 below ZeRO-2)
  size_t create_peak;        // the most tracked bytes held at once during the creation: the
                             // total of bytes[], or more under ZeRO-3, which initializes the
                             // whole stage's weights (n_floats f32) before sharding them, before
                             // the optimizer's moments and the batch buffers exist
} ot_rank_memory;
ot_status ot_train_plan_memory(const ot_train_config *resolved, int rank, ot_rank_memory *out);
void ot_trainer_free(ot_trainer *t);    // NULL ok

// One optimizer step on the next global batch from the training loader.
ot_status ot_trainer_step(ot_trainer *t, ot_step_info *info);
// One optimizer step on given rows: [grad_accum * batch_size, seq_len + 1]
// int32 (x = row[0:T], y = row[1:T+1]; ids in [0, vocab), except that a
// target y = -1 is ignored). Micro-batch k
// takes rows [k B, (k+1) B). The loss of each micro-batch is divided by the
// global count of non-ignored targets, so the accumulated gradient is that of
// the global-batch mean. Then: norm = sqrt(sumsq(grads)); a non-finite loss or
// norm skips the update (info->skipped; step count, schedule and data still
// advance; the moments and weights do not change); else AdamW at lr(step)
// with grad_scale = clip coefficient, weight decay on matrices and embeddings
// only (ot_param.decay; norms and biases none), and the bf16 / f16 copy refreshed in
// the same pass. With loss scaling (fp16) the backward runs on loss x scale and
// the norm, the clip and AdamW divide by it; a skipped step backs a dynamic scale
// off (info->overflow when the loss was finite). Gradients are zeroed afterwards.
ot_status ot_trainer_step_on(ot_trainer *t, const int32_t *rows, ot_step_info *info);
// Mean loss over the first `batches` batches of the held-out split (in file
// order; capped at the split's windows; batches <= 0: the config's
// eval_batches), *tokens (may be NULL) = tokens scored. OT_EINVAL without a split.
ot_status ot_trainer_eval(ot_trainer *t, int batches, double *loss, int64_t *tokens);
// Same over rows [nrows, seq_len + 1] given by the caller, in batch_size chunks.
ot_status ot_trainer_eval_on(ot_trainer *t, const int32_t *rows, int nrows, double *loss,
                             int64_t *tokens);

// Classify: top-1 accuracy (fraction in [0, 1]) of the last evaluation, NaN before one
// (or for other tasks).
double ot_trainer_accuracy(const ot_trainer *t);

// Same as ot_trainer_eval, also *nll (may be NULL) = the plain NLL per token
// (= *loss without label smoothing). Translate: the held-out bitext in the
// batcher's evaluation order (longest first), `batches` token-budget batches.
ot_status ot_trainer_eval_nll(ot_trainer *t, int batches, double *loss, double *nll,
                              int64_t *tokens);

// ---- translation (task = translate)
// The decoder's hook: translates src[n] (detokenized source sentences) with
// model m into hyp[n] (each malloc'd, NUL-terminated, detokenized; the caller
// frees them); tokenizer_dir holds the joint vocab.json / merges.txt. Returns
// OT_OK or an error with its message set (hyp entries set so far are freed by
// the caller; the others must stay NULL).
typedef ot_status (*ot_translate_fn)(void *ctx, ot_model *m, const char *tokenizer_dir,
                                     const char *const *src, int n, char **hyp);
typedef struct {
  ot_translate_fn translate;   // NULL: no BLEU at evaluation
  void *ctx;
} ot_train_hooks;
// Installs (or, with h NULL, removes) the hooks of a trainer.
void ot_trainer_set_hooks(ot_trainer *t, const ot_train_hooks *h);
// BLEU of the first n (<= 0: the config's eval_bleu_sentences) held-out pairs
// through the translate hook, against their detokenized references
// (sacreBLEU defaults): *score and the signature (sig, cap bytes; may be NULL).
// OT_EINVAL without the hook, without a held-out bitext or for an LM trainer.
// Parallel trainers: call it on every rank; world rank 0 decodes (tensor
// parallel: with the whole weights gathered to it) and the others return OT_OK
// with *score zeroed.
ot_status ot_trainer_bleu(ot_trainer *t, int n, ot_bleu_score *score, char *sig, size_t cap);

ot_model *ot_trainer_model(ot_trainer *t);
const ot_train_config *ot_trainer_config(const ot_trainer *t);   // resolved
int64_t ot_trainer_steps_done(const ot_trainer *t);
int64_t ot_trainer_updates(const ot_trainer *t);       // updates applied (steps minus skipped)
// Loss scaler state: *scale (the next step's; 0 when loss scaling is off) and *clean (the
// consecutive clean steps counted toward the next growth). Either may be NULL.
void ot_trainer_loss_scale(const ot_trainer *t, float *scale, int64_t *clean);
// AdamW moments [n_floats] f32 (same layout as the parameters); NULL for eval_only.
float *ot_trainer_moment(ot_trainer *t, int which);    // 0: m (exp_avg), 1: v (exp_avg_sq)
bool ot_trainer_has_val(const ot_trainer *t);
// Training FLOPs per token (ot_model_flops_per_token at seq_len).
double ot_trainer_flops_per_token(const ot_trainer *t);

// ---------------------------------------------------------- checkpoints ---
// A checkpoint is a directory, self-contained (it loads from any working
// directory and after being copied elsewhere):
//   model.safetensors      weights, Hugging Face names, F32; __metadata__: step and
//                          every training key ("cfg.<key>"), enough for evaluation and
//                          generation without the optimizer state
//   optimizer.safetensors  "exp_avg.<param>" and "exp_avg_sq.<param>" per parameter
//                          tensor; __metadata__: format "ot-train-state", step,
//                          updates, seed, rng, the data loader's position
//                          (epoch, index, fingerprint), a checksum of the
//                          weights, and every training key ("cfg.<key>"):
//                          model shape, batch, LR schedule, optimizer, data
//   config.json            the Hugging Face config (when the model is expressible:
//                          `ot_model_load_hf` and transformers read the directory)
//   vocab.json, merges.txt the tokenizer of the training data directory, when it has one
// Integrity: each safetensors file holds a checksum of every tensor
// ("checksum.<name>") and of its metadata ("meta_checksum"); model.safetensors
// also those of config.json and the tokenizer files ("file.<name>"). Loading
// checks them all and refuses non-finite values (and negative second moments),
// naming the file and the tensor; a save refuses a state with a non-finite
// weight or moment (naming it) before writing anything.
// Paths: data paths are stored absolute; "out" is ".." when the checkpoint sits
// in the run directory (a copied run directory resumes into itself); log and
// plot are stored empty when they are the defaults, so they follow --out; a
// relative stored path is relative to the checkpoint directory.
// Writing: the files go into <parent>/.<name>.tmp/ (each fsynced), the directory
// is fsynced and renamed to <name> (an existing checkpoint there is replaced
// whole), then the parent is fsynced: a save killed at any point leaves either
// the previous state or the whole new checkpoint under <name>, plus leftovers
// that the next save or resume in that run directory removes.
//
// Saves to `dir` (created; an existing directory must hold only checkpoint files).
ot_status ot_trainer_save(ot_trainer *t, const char *dir);
// Saves <out>/step_NNNNNN, then points <out>/latest at it (atomically, after
// the directory is in place) and removes the oldest step_* directories beyond
// `keep` (each renamed away first). Leftovers of interrupted saves in <out> are
// removed first. *path_out (may be NULL, cap bytes) receives the directory.
ot_status ot_trainer_checkpoint(ot_trainer *t, char *path_out, size_t cap);
// The checkpoint `dir` means: dir itself when it holds model.safetensors; else
// the one <dir>/latest names when that is complete; else (latest missing, or
// naming a missing or incomplete directory) the newest complete step_*
// directory, and then *note (may be NULL, note_cap bytes) says so ("" when
// not). A `latest` that is not one line "step_<digits>" is OT_EFORMAT naming it.
ot_status ot_ckpt_find(const char *dir, char *out, size_t cap, char *note, size_t note_cap);
// ot_ckpt_find, printing its note to stderr ("ot: note: ...").
ot_status ot_ckpt_resolve(const char *dir, char *out, size_t cap);
// The training keys stored in a checkpoint (appended to l, origin "<dir>"),
// stored paths resolved as above; from model.safetensors (older checkpoints:
// optimizer.safetensors).
ot_status ot_ckpt_read_config(const char *dir, ot_settings *l);
// True if the (resolved) directory holds `ot train` settings, false for a
// plain Hugging Face directory.
bool ot_ckpt_has_settings(const char *dir);
// The configuration to load a (resolved) checkpoint directory outside the trainer:
// defaults + its stored keys (a plain Hugging Face directory: the model of its
// config.json). For task translate also what the trainer takes from the tokenizer
// rather than from keys: vocab and eos = decoder start = pad = <|endoftext|> of the
// checkpoint's vocab.json + merges.txt (else its data directory's); no tokenizer,
// or one of another size, is OT_EINVAL naming the checkpoint.
ot_status ot_ckpt_train_config(const char *dir, ot_train_config *tc);
// Opens <dir>/model.safetensors (dir resolved) after checking it: the
// checksums when it has them, finite values, config.json (when present) must
// parse, config.json / vocab.json / merges.txt must match their checksums.
// Errors name the file and the tensor; *f is NULL then.
ot_status ot_ckpt_open_weights(const char *dir, ot_st_file **f);
// Restores weights, moments, step counters and data position from a
// checkpoint made with the same model shape (a difference is OT_EINVAL naming
// the key); the weights must match the checksum saved with the moments; every
// file passes the integrity checks above.
// weights_only (eval): model.safetensors only (an HF directory works too).
ot_status ot_trainer_load(ot_trainer *t, const char *dir, bool weights_only);

// ------------------------------------------------------ averaging weights ---
// The last_k (1..64) newest complete step_* checkpoints of run_dir by step
// number, oldest first, into out[last_k] (<run_dir>/step_NNNNNN). Fewer there
// is OT_EINVAL listing those found; a missing directory OT_EIO.
ot_status ot_ckpt_last(const char *run_dir, int last_k, char (*out)[OT_PATH_MAX + 64]);
// Writes the element-wise mean of the model weights of checkpoints dirs[n]
// (1 <= n <= 64, each a step_* directory of `ot train`) to the new directory
// out_dir: per element sum_j (double) x_j in the order given, divided by n in
// double, rounded to f32 once (n = 1: the same bytes). Every input passes the
// integrity checks of ot_ckpt_open_weights, and all must have the same model
// settings (cfg.* model keys) and the same tensors (names, F32, shapes):
// otherwise OT_EINVAL names the checkpoint, the key or tensor. out_dir holds
// model.safetensors (the newest input's metadata: step, settings, with new
// checksums, "averaged_from" (the inputs' names) and "averaged_count") plus
// the newest input's config.json / vocab.json / merges.txt, so `ot eval`,
// `ot generate`, `ot serve`, `ot quantize` load it. It has no
// optimizer.safetensors (moments of averaged weights do not exist): a resume
// from it is refused with that message. Written as <out_dir's parent>/.NAME.tmp,
// fsynced and renamed into place; an existing out_dir is refused (OT_EINVAL).
ot_status ot_ckpt_average_dirs(const char *const *dirs, int n, const char *out_dir);
// ot_ckpt_last(run_dir, last_k) then ot_ckpt_average_dirs.
ot_status ot_ckpt_average(const char *run_dir, int last_k, const char *out_dir);

// -------------------------------------------------------------- the run ---

// The whole training run of a config: creates the trainer (resumes when
// c->resume is set; loads c->init_from's weights, ot_trainer_load weights-only, when that
// is), prints the settings and the memory plan to `out`, then
// per step one progress line (step, loss, lr, grad norm, tokens/s, MFU
// against the measured f32 FMA peak (bf16 runs are rated against it too),
// tracked memory) and a JSONL record to the log;
// held-out loss every eval_every steps (and at the start and the end);
// checkpoints every save_every steps and at the end; the profiler trace +
// summary when c->profile is set; the loss-curve SVG (train and eval) at the
// end. Warnings (skipped steps) go to stderr. *final_loss / *final_val (may
// be NULL) receive the last finite training and the last held-out losses (NaN
// if none). A resume takes ot_ckpt_find's checkpoint (its note printed);
// leftovers of interrupted saves in c->out are removed first. A run that ends
// on skipped (non-finite) steps or with a non-finite held-out loss returns
// OT_EINVAL saying so (after its final checkpoint, when the state is finite).
ot_status ot_train_run(const ot_train_config *c, FILE *out, double *final_loss, double *final_val);
// ot_train_run with hooks (h may be NULL): translate runs print BLEU at each
// evaluation when h->translate is set.
ot_status ot_train_run_hooks(const ot_train_config *c, const ot_train_hooks *h, FILE *out,
                             double *final_loss, double *final_val);

// Writes an SVG loss curve from a JSONL log (records {"step", "loss"} and
// {"step", "val_loss"}; for a repeated step the last record wins, so a resumed
// run's log plots as one run). Atomic write.
ot_status ot_train_plot(const char *log_path, const char *svg_path, const char *title);

#ifdef __cplusplus
}
#endif
#endif
