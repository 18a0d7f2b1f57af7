// ops-transformer data: llm.c-compatible token shards, a deterministic
// resumable batch loader, and a byte-level BPE tokenizer (GPT-2 format).
//
// Token shard (llm.c format, little-endian): 256 int32 header
//   header[0] = 20240520 (magic)
//   header[1] = version: 1 = uint16 tokens (llm.c's GPT-2 shards),
//                        2 = uint32 tokens (llm.c's Llama-3 shards; vocab > 65536)
//   header[2] = token count N (1 .. INT32_MAX); the rest of the header is 0
// followed by exactly N tokens; the file is 1024 + N * (2 or 4) bytes.
#ifndef OT_DATA_H
#define OT_DATA_H
#include "ot/core.h"
#ifdef __cplusplus
extern "C" {
#endif

// ------------------------------------------------------------ shards --------
#define OT_SHARD_MAGIC 20240520
#define OT_SHARD_HEADER_BYTES 1024

typedef struct ot_shard ot_shard;

// Opens and validates a shard (memory-mapped read-only): size >= header,
// magic, version, count > 0, file size == header + count * token size, every
// token id < vocab_size. Defects return OT_EFORMAT "<path>: <problem>";
// a missing/unreadable file OT_EIO; vocab_size <= 0 OT_EINVAL.
ot_status ot_shard_open(ot_shard **out, const char *path, int64_t vocab_size);
void ot_shard_close(ot_shard *s);                        // NULL ok
int64_t ot_shard_ntokens(const ot_shard *s);
int ot_shard_version(const ot_shard *s);                 // 1 (uint16) or 2 (uint32)
const char *ot_shard_path(const ot_shard *s);
// Copies tokens [start, start + n) (must lie inside the shard) to dst as int32.
void ot_shard_read(const ot_shard *s, int64_t start, int64_t n, int32_t *dst);

// Writes ids[0, n) as a shard of the given version atomically ("<path>.tmp",
// fsync, rename, fsync of the directory). OT_EINVAL: n not in [1, INT32_MAX],
// version not 1/2, an id < 0 or (version 1) > 65535; OT_EIO: file system.
ot_status ot_shard_write(const char *path, const int32_t *ids, int64_t n, int version);

// ------------------------------------------------------------ loader --------
// Cuts each shard into windows of T+1 tokens at stride T (window w of a shard
// covers tokens [w*T, w*T + T], so x = row[0:T], y = row[1:T+1]); windows
// never cross shards. An epoch visits every window once, in order or in a
// seeded permutation that changes per epoch. A global batch is world*B
// consecutive windows of that order; rank r takes rows [r*B, (r+1)*B).
typedef struct {
  const char *pattern;        // glob of shard files (sorted by name), or NULL ...
  const char *const *paths;   // ... and an explicit list of npaths files
  int npaths;
  int64_t vocab_size;         // every token must be < vocab_size
  int B, T;                   // rows per batch (this rank), tokens per row (+1 loaded)
  bool shuffle;               // false: windows in file order (eval / held-out)
  uint64_t seed;              // permutation seed when shuffling
  int rank, world;            // data-parallel partition; world 0 means 1
} ot_loader_config;

// Position in the stream: the next global batch starts at window `index` of
// `epoch`. `fingerprint` identifies what defines the window order (shard
// sizes, T, shuffle, seed); restoring a state from another fingerprint fails.
typedef struct { uint64_t epoch, index, fingerprint; } ot_loader_state;

typedef struct ot_loader ot_loader;

// Opens every shard (validated as ot_shard_open does), plans the windows and
// allocates the one [B, T+1] batch buffer. OT_EINVAL for a bad config (names
// the field) or when the shards hold no full window.
ot_status ot_loader_open(ot_loader **out, const ot_loader_config *cfg);
void ot_loader_close(ot_loader *L);                      // NULL ok
// Fills the loader's buffer with the next batch and points *batch at it:
// int32 [B, T+1], valid until the next call. Never allocates.
ot_status ot_loader_next(ot_loader *L, const int32_t **batch);
void ot_loader_get_state(const ot_loader *L, ot_loader_state *st);
// OT_EINVAL when the fingerprint differs or index is out of range.
ot_status ot_loader_set_state(ot_loader *L, const ot_loader_state *st);
void ot_loader_reset(ot_loader *L);                      // back to epoch 0, window 0
int64_t ot_loader_windows(const ot_loader *L);           // windows per epoch (all ranks)
int64_t ot_loader_tokens(const ot_loader *L);            // tokens in all shards
int ot_loader_nshards(const ot_loader *L);

// ------------------------------------------------------- pre-tokenizer -----
// GPT-2's pre-tokenization regex, by hand over UTF-8:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Returns the end of the piece starting at pos (pos < len). Invalid UTF-8
// bytes count as one character each, of the class [^\s\p{L}\p{N}].
size_t ot_pretok_next(const char *text, size_t len, size_t pos);
// Unicode version of the letter/number tables ("15.1.0").
const char *ot_pretok_unicode_version(void);

// ------------------------------------------------------ byte-level BPE -----
// GPT-2 style: each byte maps to a printable code point (bytes_to_unicode);
// ids 0..255 are the single bytes, merges add one token each (rank = order),
// "<|endoftext|>" is the special end-of-text token.
#define OT_BPE_EOT "<|endoftext|>"

typedef struct ot_bpe ot_bpe;

// Trains on text[0, len) to vocab_size tokens (256 bytes + merges +
// <|endoftext|>; 257 <= vocab_size <= 1<<24) using pre-token counts and
// incremental pair counts. Ties: the most frequent pair wins, then the
// smallest (left id, right id). Stops early when no pair occurs twice.
// Occurrences of "<|endoftext|>" in the text are separators, not words.
// verbose: progress lines on stderr.
ot_status ot_bpe_train(ot_bpe **out, const char *text, size_t len, int vocab_size, bool verbose);
// Loads GPT-2-format vocab.json (token string -> id, ids dense 0..n-1) and
// merges.txt ("#version" line, then "A B" per line in rank order).
// OT_EFORMAT "<file>: <problem>" for defects, OT_EIO for unreadable files.
ot_status ot_bpe_load(ot_bpe **out, const char *vocab_json, const char *merges_txt);
// Saves the same two files (atomic writes); load(save(x)) encodes as x.
ot_status ot_bpe_save(const ot_bpe *t, const char *vocab_json, const char *merges_txt);
void ot_bpe_free(ot_bpe *t);                             // NULL ok

int ot_bpe_vocab_size(const ot_bpe *t);
int ot_bpe_merges(const ot_bpe *t);
int ot_bpe_eot(const ot_bpe *t);                         // id of <|endoftext|>, -1 if absent

// Encodes text[0, len) (any bytes; invalid UTF-8 round-trips) into ids[0, *n).
// With allow_special, "<|endoftext|>" in the text becomes the EOT id;
// otherwise it is encoded as plain text. cap >= len always suffices;
// a smaller cap that overflows returns OT_EINVAL.
ot_status ot_bpe_encode(const ot_bpe *t, const char *text, size_t len, bool allow_special,
                        int32_t *ids, size_t cap, size_t *n);
// Bytes of token id (NULL if out of range), *len set.
const char *ot_bpe_token(const ot_bpe *t, int32_t id, size_t *len);
// Concatenates the tokens' bytes into out[0, *len) (no terminator needed).
// OT_EINVAL for an id out of range or when cap is too small.
ot_status ot_bpe_decode(const ot_bpe *t, const int32_t *ids, size_t n, char *out, size_t cap,
                        size_t *len);

// -------------------------------------------------------------------- BLEU ---
// Corpus BLEU as sacreBLEU 2.6.0 computes it (max n-gram order 4, effective
// order off): segments are lowercased (option, Python's str.lower()), right-
// stripped and tokenized, then clipped n-gram matches against the per-n-gram
// maximum over the segment's references are summed over the corpus; the
// brevity penalty uses the closest reference length (ties: the shorter).
typedef enum {
  OT_BLEU_TOK_13A = 0,  // mteval-v13a (sacreBLEU's default): entity unescaping, punctuation
                        // split except . , between digits, - after a digit
  OT_BLEU_TOK_NONE,     // whitespace only
  OT_BLEU_TOK_INTL,     // mteval-v14 international (sacreBLEU 'intl'): Unicode punctuation
                        // split unless between digits, every symbol split
} ot_bleu_tok;
typedef enum {
  OT_BLEU_SMOOTH_EXP = 0,  // NIST: the k-th zero precision counts as 1 / (2^k total)
  OT_BLEU_SMOOTH_FLOOR,    // a zero count counts as smooth_value (0.1)
  OT_BLEU_SMOOTH_ADD_K,    // orders 2..4 add smooth_value (1) to counts and totals
  OT_BLEU_SMOOTH_NONE,
} ot_bleu_smooth;
// Zero-initialised = sacreBLEU's defaults (13a, exp, case-sensitive).
typedef struct {
  ot_bleu_tok tokenize;
  ot_bleu_smooth smooth;
  double smooth_value;  // floor / add-k value; <= 0: the default (0.1 / 1)
  bool lowercase;
} ot_bleu_opts;
typedef struct {
  double score;           // 0..100
  double precisions[4];   // percent, after smoothing
  double bp, ratio;       // brevity penalty; sys_len / ref_len (0 if ref_len = 0)
  int64_t sys_len, ref_len, counts[4], totals[4], segments;
  int nrefs;              // references per segment, -1 when it varied
} ot_bleu_score;
typedef struct ot_bleu ot_bleu;

// An empty accumulator with options o (NULL: defaults); free with ot_bleu_free.
ot_status ot_bleu_create(ot_bleu **out, const ot_bleu_opts *o);
void ot_bleu_free(ot_bleu *b);
// Adds one segment: hypothesis hyp and its nrefs >= 1 references (NUL-
// terminated UTF-8; an empty reference counts, with length 0). OT_EINVAL for
// invalid UTF-8 (the statistics are then unchanged).
ot_status ot_bleu_add(ot_bleu *b, const char *hyp, const char *const *refs, int nrefs);
// Adds every line of hyp_path ("-": standard input) with the same line of each
// of the nrefs reference files (lines split at '\n' as sacreBLEU reads them).
// OT_EFORMAT naming file and line when line counts differ or a line is not
// valid UTF-8 (nothing is added then); OT_EIO when a file cannot be read.
ot_status ot_bleu_add_files(ot_bleu *b, const char *hyp_path, const char *const *ref_paths,
                            int nrefs);
// The corpus score so far.
ot_status ot_bleu_result(const ot_bleu *b, ot_bleu_score *s);
// sacreBLEU's score line "BLEU = 38.12 70.1/45.3/31.2/22.0 (BP = 0.986 ratio =
// 0.986 hyp_len = 1234 ref_len = 1251)" into buf (snprintf rules: returns the
// length it needs, writes at most cap bytes with the terminator).
size_t ot_bleu_format(const ot_bleu_score *s, char *buf, size_t cap);
// sacreBLEU's signature "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
// (nrefs "var" when it varied, smooth "floor[0.10]" / "add-k[1.00]"); snprintf rules.
size_t ot_bleu_signature(const ot_bleu *b, char *buf, size_t cap);
// The tokenized segment as BLEU sees it (lowercased if asked, tokens joined
// by single spaces): *out is malloc'd (free()), *len its length. OT_EINVAL
// for invalid UTF-8.
ot_status ot_bleu_tokenize(const ot_bleu_opts *o, const char *s, size_t n, char **out,
                           size_t *len);
// ------------------------------------------------------- parallel text -----
// Two UTF-8 files, line i of src translating line i of tgt (LF or CRLF; a
// missing final newline is fine). Both sides are tokenized with one joint
// byte-level BPE whose one special token, <|endoftext|> (ot_bpe_eot), is at
// once the end of sentence, the decoder's start token and the padding:
//   encoder input  = src ids + eos                       (length ns + 1)
//   decoder input  = eos(start) + tgt ids                (length nt + 1)
//   decoder target = tgt ids + eos                       (length nt + 1)
// Literal "<|endoftext|>" in the text is encoded as plain text.
typedef struct ot_bitext ot_bitext;

typedef struct {
  const ot_bpe *bpe;     // the joint tokenizer (must have <|endoftext|>); borrowed
  int max_len;           // most BPE tokens per side (without eos); 0: 256
  bool refuse_long;      // a longer line fails the open (false: the pair is skipped)
} ot_bitext_opts;

typedef struct {
  int64_t lines;         // lines in each file
  int64_t pairs;         // pairs kept
  int64_t empty;         // pairs skipped because a side is empty (or blanks only)
  int64_t too_long;      // pairs skipped because a side has more than max_len tokens
  int64_t src_tokens, tgt_tokens;  // BPE tokens of the kept pairs (without eos)
  int max_src, max_tgt;  // longest kept side, in tokens (without eos)
} ot_bitext_stats;

// Reads both files, checks them and tokenizes every line. Errors (message
// names the file, the line and the fix): a missing file (OT_EIO); unequal
// line counts, invalid UTF-8 ("<file>:<line>: invalid UTF-8 ... byte offset
// K"), a line over max_len tokens with refuse_long, no pair left (OT_EFORMAT);
// bad options (OT_EINVAL). Empty pairs and (without refuse_long) over-long
// pairs are skipped and counted.
ot_status ot_bitext_open(ot_bitext **out, const char *src_path, const char *tgt_path,
                         const ot_bitext_opts *opts);
void ot_bitext_close(ot_bitext *bt);                     // NULL ok
void ot_bitext_get_stats(const ot_bitext *bt, ot_bitext_stats *st);
int64_t ot_bitext_pairs(const ot_bitext *bt);
int32_t ot_bitext_eos(const ot_bitext *bt);              // = start = pad id
// Token ids of pair i (0 <= i < pairs; without eos): src [*ns], tgt [*nt];
// valid while bt is open. Returns the 1-based line number of the pair.
int64_t ot_bitext_pair(const ot_bitext *bt, int64_t i, const int32_t **src, int *ns,
                       const int32_t **tgt, int *nt);

// Trains the joint BPE on the non-empty lines of both files (checked as
// ot_bitext_open checks them; lines are separate words, never merged across)
// to vocab_size tokens including <|endoftext|> (as ot_bpe_train).
ot_status ot_bitext_train_bpe(ot_bpe **out, const char *src_path, const char *tgt_path,
                              int vocab_size, bool verbose);

// Token-budget batches over the pairs of an open bitext. Pairs are grouped
// into length buckets of `bucket` tokens (length = max(ns, nt) + 1), longest
// first, shuffled inside each bucket (seed, epoch), cut greedily into global
// batches of R rows with R * max(S, T) <= max_tokens, and the batch order is
// shuffled (seed, epoch). Every pair is in exactly one batch per epoch. The
// last batch is topped up to `world` rows from the one before, so every
// global batch has at least `world` rows: max_tokens must be >= the longest
// pair (world 1) or 2 * world * the longest pair (world > 1).
// Data-parallel: rank r takes rows [r*R/world, (r+1)*R/world) of each global
// batch, so all ranks see the same number of batches and their union is the
// one-process batch. Without shuffle: longest bucket first, ties by pair
// index, batches in that order (evaluation). The rows of a rank's part are
// ordered by (max(ns, nt), ns, position in the plan), so consecutive rows have
// similar lengths: micro-batches cut from them pad little.
typedef struct {
  int64_t max_tokens;    // budget per global batch (all ranks): rows * max(S, T)
  int bucket;            // length-bucket width in tokens; 0: 8
  bool shuffle;
  uint64_t seed;
  int rank, world;       // world 0 means 1
} ot_bitext_batcher_config;

// This rank's part of one global batch; pointers into the batcher's buffers,
// valid until the next ot_bitext_next.
typedef struct {
  int B, S, T;               // rows; padded source and decoder lengths
  const int32_t *src;        // [B, S]: src ids, eos, then pad (= eos)
  const int32_t *src_len;    // [B]: ns + 1
  const int32_t *dec_in;     // [B, T]: start (= eos), tgt ids, then pad (= eos)
  const int32_t *dec_tgt;    // [B, T]: tgt ids, eos, then -1 (ignore index)
  const int32_t *tgt_len;    // [B]: nt + 1 (targets != -1 in the row)
  const int64_t *pair;       // [B]: pair index of each row
  int64_t tgt_tokens;        // targets != -1 of this rank's part
  int64_t global_rows, global_tgt_tokens;  // the whole global batch (all ranks)
  uint64_t epoch, index;     // which batch this is
  int64_t global_src_tokens; // sources + eos of the whole global batch (all ranks)
  const int64_t *sample;     // [B]: each row's index in the global batch (its position in the
                             // batch's plan, the same whatever the ranks: dropout masks)
} ot_bitext_batch;

typedef struct ot_bitext_batcher ot_bitext_batcher;

// Plans epoch 0 and allocates every buffer (nothing is allocated later).
// OT_EINVAL names the bad field (budget too small: the longest pair and the
// budget needed). bt must stay open while the batcher is used.
ot_status ot_bitext_batcher_open(ot_bitext_batcher **out, const ot_bitext *bt,
                                 const ot_bitext_batcher_config *cfg);
void ot_bitext_batcher_close(ot_bitext_batcher *b);      // NULL ok
// Fills *batch with this rank's part of the next global batch; after an
// epoch's last batch the next epoch starts (planned here, without allocating).
ot_status ot_bitext_next(ot_bitext_batcher *b, ot_bitext_batch *batch);
// Global batches in epoch `epoch` (plans it if needed: the count varies by epoch).
int64_t ot_bitext_batches(ot_bitext_batcher *b, uint64_t epoch);
// The next global batch is number `index` of `epoch`; the fingerprint covers
// the pairs' ids, max_tokens, bucket, shuffle and seed (not rank/world: a run
// may resume on another world size and see the same global batches).
void ot_bitext_get_state(const ot_bitext_batcher *b, ot_loader_state *st);
// OT_EINVAL when the fingerprint differs or index is past that epoch's batches.
ot_status ot_bitext_set_state(ot_bitext_batcher *b, const ot_loader_state *st);

// ------------------------------------------------------------ images ------
// Labelled images for classification (ViT). Two sources:
//  - an image array file ("otimg", little-endian, written by ot_images_save and
//    tools/make_digits.py):
//      bytes 0..7   magic "OTIMG01\n"
//      bytes 8..31  six uint32: n (images), h, w, c (channels: 1 or 3), classes,
//                   maxval (the largest pixel value: 255 for 8-bit images, 16 for
//                   the 8x8 digits)
//      then n*h*w*c uint8 pixels [n, h, w, c] (channels last), every value <= maxval,
//      then n uint16 labels, each < classes; the file ends there (exact size);
//  - a list file (anything else): one "<image path> <label>" per line (paths
//    relative to the list file's folder; blank lines and lines starting with #
//    skipped), each image a binary PGM (P5, 1 channel) or PPM (P6, 3 channels)
//    with maxval <= 255, all of one size and channel count.
typedef struct {
  int n, h, w, c;          // images, height, width, channels
  int classes;             // labels in [0, classes)
  int maxval;              // pixel values in [0, maxval]
  uint8_t *pix;            // [n, h, w, c]
  int32_t *labels;         // [n]
} ot_images;

// Loads either source. channels > 0: every image must have that many (OT_EFORMAT
// naming the file and both counts otherwise); classes > 0: every label must be
// below it (the file's own classes field must not exceed it) and s->classes is
// set to it; a list file's classes is max label + 1 unless given. Corrupt or
// truncated files: OT_EFORMAT "<path>: <problem>"; unreadable: OT_EIO.
ot_status ot_images_load(ot_images **out, const char *path, int channels, int classes);
// Writes s as an array file, atomically. OT_EINVAL for inconsistent fields.
ot_status ot_images_save(const ot_images *s, const char *path);
void ot_images_free(ot_images *s);   // NULL ok
// One binary PGM / PPM (P5 / P6, maxval 1..255, comments allowed) into
// *pix [h, w, c] (ot_mem_alloc'd; free with ot_mem_free).
ot_status ot_image_read_pnm(const char *path, uint8_t **pix, int *h, int *w, int *c, int *maxval);

// How images become model input [c, out_h, out_w] f32 (NCHW):
//   x = (pixel / maxval - mean[ch]) / std[ch]
// after (training) a random resized crop: an area fraction in [crop_min, 1] of the
// image with an aspect ratio in [3/4, 4/3] (torchvision's RandomResizedCrop; 10
// tries, then the whole image), resized bilinearly (half-pixel centres) to out_h x
// out_w, and a horizontal flip with probability 1/2 when flip. Without crop the
// whole image is resized (copied when the sizes agree).
typedef struct {
  int out_h, out_w;
  float mean[3], std[3];   // per channel (a 1-channel image uses [0])
  bool crop;               // random resized crop (training)
  float crop_min;          // smallest area fraction (0.08 torchvision; (0, 1])
  bool flip;               // random horizontal flip (training)
} ot_image_aug;

// Images idx[0, B) of s -> img [B, s->c, out_h, out_w] f32, labels [B]. Image k's
// random draws are elements [64 * (counter + k), 64 * (counter + k) + 64) of stream
// `seed` (ot_rand_u32): the same (seed, counter) give the same batch, so a run
// resumes by its position alone. OT_EINVAL for a bad index or settings.
ot_status ot_images_batch(const ot_images *s, const ot_image_aug *a, const int64_t *idx, int B,
                          uint64_t seed, uint64_t counter, float *img, int32_t *labels);
// The order of epoch e: perm [n] a permutation of [0, n) (Fisher-Yates over stream
// seed mixed with e), or the identity when shuffle is false.
void ot_images_order(int64_t *perm, int64_t n, bool shuffle, uint64_t seed, uint64_t epoch);

#ifdef __cplusplus
}
#endif
#endif
