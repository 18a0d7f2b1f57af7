#!/usr/bin/env python3
"""PyTorch peer of `ot train --task translate`: the same encoder-decoder Transformer built from
torch.nn layers, trained on the same token ids with the same recipe, then greedy / beam decoding
of the test split and sacreBLEU. Not run by CI (benchmarks print numbers and assert nothing).

Environment (once; torch from PyPI pulls ~3 GB of CUDA wheels it never uses on a CPU):
  python3 -m venv /tmp/peers
  /tmp/peers/bin/pip install torch ctranslate2==4.8.5 sacrebleu==2.6.0 transformers safetensors
Run from the repository root:
  ot prepare --task translate ... --dump-ids out/translate/ids     # writes the id dumps
  /tmp/peers/bin/python bench/translate_torch.py --tokenizer out/translate \\
      --train out/translate/ids.train --valid out/translate/ids.valid --test out/translate/ids.test \\
      --ref data/translate/test.fr --preset transformer-small --steps 2000 [--beam 4]
  /tmp/peers/bin/python bench/translate_torch.py --bench --preset transformer-base \\
      --tokenizer out/translate [--train ...] --tokens 4096 --bench-steps 8 [--compile]

Model (every number a flag, --preset gives ot's shapes): nn.TransformerEncoderLayer and
nn.TransformerDecoderLayer, post-norm, ReLU, batch_first; Marian's sinusoidal table (first half
sin, second half cos, positions from 0) added to the embedding times sqrt(d); one embedding
for encoder input, decoder input and output head; key-padding mask over the source (encoder
self-attention and cross-attention), causal mask in the decoder. Dropout p on the embedding
sum and every residual branch, --attn-dropout on attention probabilities, --act-dropout after
the ReLU. Loss: F.cross_entropy(label_smoothing=eps, ignore_index=-1, reduction="sum") over
the real vocabulary, divided by the number of target tokens. Adam (0.9, 0.98, 1e-9), fairseq
inverse_sqrt schedule: lr*(s+1)/warmup for s < warmup, then lr*sqrt(warmup/(s+1)).

Checkpoints: --save-every N --save-dir DIR writes DIR/step_<N>.pt (weights, Adam, step, random
state); --resume FILE continues that run exactly, --load FILE takes the weights only (with
--steps 0: evaluate, export, decode).

Data: the special id (<|endoftext|>) is eos = decoder start = source pad. Source = dump ids
(+ eos unless --no-src-eos); decoder input = start + tgt; labels = tgt + eos, padding -1.
Token-budget batches as ot's batcher: length max(S, T) in buckets of --bucket tokens, longest
first, shuffled inside each bucket, cut greedily into B rows with B * max(S, T) <= --tokens,
batch order shuffled (seeded; the same scheme, not the same random draws; --ot-order: ot's own
draws, the very batches `ot train --seed S` takes, in its order). Reported tokens/s counts real
source + target tokens (source incl. its eos, target incl. eos) per second of forward + backward
+ optimizer step. Progress lines carry the global gradient norm, as ot's do.

Comparing with ot step by step: --load-hf DIR starts from an ot checkpoint's weights,
--resume-ot DIR continues an ot run (weights, Adam moments, step), --ot-order takes its batches,
--dtype f64 runs the same recipe in double precision as a reference, and --save-ot DIR
--ot-template CKPT writes the state after the last step as an ot checkpoint (bench/ot_ckpt.py)
that `ot train --resume DIR` continues: the hand-over in the other direction.
"""
import argparse
import math
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from translate_util import Vocab, median, one_line, read_dump  # noqa: E402
from translate_decode import check_incremental, translate  # noqa: E402
from ot_ckpt import finalize64  # noqa: E402
from translate_hf import load_hf, load_ot_state, save_hf  # noqa: E402

# name: (enc layers, dec layers, d, heads, ff, max_len), as ot's presets
PRESETS = {
    "transformer-tiny": (2, 2, 32, 4, 64, 16),
    "transformer-small": (3, 3, 256, 4, 1024, 128),
    "transformer-base": (6, 6, 512, 8, 2048, 512),
    "transformer-big": (6, 6, 1024, 16, 4096, 512),
    "transformer-seed": (12, 12, 1024, 16, 4096, 512),
}


def sinusoid_table(n, d):
    """[n, d] Marian/HF MarianSinusoidalPositionalEmbedding: row p, column k < d/2:
    sin(p / 10000^(2k/d)); column d/2 + k: cos of the same angle."""
    half = (d + 1) // 2
    k = torch.arange(half, dtype=torch.float64)
    ang = torch.arange(n, dtype=torch.float64)[:, None] / torch.pow(10000.0, 2 * k / d)[None, :]
    out = torch.zeros(n, d, dtype=torch.float64)
    out[:, :half] = torch.sin(ang)
    out[:, half:] = torch.cos(ang[:, : d - half])
    return out.float()


class Seq2Seq(nn.Module):
    """src [B, S] ids, dec_in [B, T] ids -> logits [B, T, V]; shared embedding [Vp, d]."""

    def __init__(self, a, V, Vp):
        super().__init__()
        self.V, self.d = V, a.d
        self.emb = nn.Embedding(Vp, a.d)
        self.scale = math.sqrt(a.d)
        self.register_buffer("pos", sinusoid_table(a.max_len, a.d), persistent=False)
        # Marian's final_logits_bias, trained as ot trains it (--logits-bias); None: no bias
        self.lbias = nn.Parameter(torch.zeros(V)) if a.logits_bias else None
        self.drop = nn.Dropout(a.dropout)
        el = nn.TransformerEncoderLayer(a.d, a.heads, a.ff, a.dropout, activation="relu",
                                        batch_first=True, norm_first=False)
        dl = nn.TransformerDecoderLayer(a.d, a.heads, a.ff, a.dropout, activation="relu",
                                        batch_first=True, norm_first=False)
        self.enc = nn.TransformerEncoder(el, a.enc_layers, enable_nested_tensor=False)
        self.dec = nn.TransformerDecoder(dl, a.dec_layers)
        for layer in list(self.enc.layers) + list(self.dec.layers):
            layer.self_attn.dropout = a.attn_dropout
            layer.dropout.p = a.act_dropout   # after the ReLU in the feed-forward
            if hasattr(layer, "multihead_attn"):
                layer.multihead_attn.dropout = a.attn_dropout
        self.init_weights(a)

    def init_weights(self, a):
        """xavier: nn.Transformer's xavier_uniform on every matrix, embedding normal(0, d^-1/2)
        (fairseq); normal: GPT-2 style as ot's default init, matrices normal(0, std), output
        projections of attention / feed-forward std / sqrt(2 L) (L = --init-res-layers, default
        all layers; ot's init takes the decoder's layer count), biases 0."""
        if a.init == "xavier":
            for n, p in self.named_parameters():
                if p.dim() > 1 and not n.startswith("emb."):
                    nn.init.xavier_uniform_(p)
            nn.init.normal_(self.emb.weight, 0.0, a.d ** -0.5)
            return
        L = a.init_res_layers or a.enc_layers + a.dec_layers
        for n, p in self.named_parameters():
            if "norm" in n:
                nn.init.ones_(p) if n.endswith("weight") else nn.init.zeros_(p)
            elif p.dim() == 1:
                nn.init.zeros_(p)
            elif n.endswith("out_proj.weight") or n.endswith("linear2.weight"):
                nn.init.normal_(p, 0.0, a.init_std / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0.0, a.init_std)

    def embed(self, ids, offset=0):
        T = ids.shape[1]
        return self.drop(self.emb(ids) * self.scale + self.pos[offset:offset + T])

    def encode(self, src, src_pad):
        return self.enc(self.embed(src), src_key_padding_mask=src_pad)

    def forward(self, src, src_pad, dec_in):
        mem = self.encode(src, src_pad)
        T = dec_in.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=src.device), 1)
        h = self.dec(self.embed(dec_in), mem, tgt_mask=causal, tgt_is_causal=True,
                     memory_key_padding_mask=src_pad)
        return self.head(h)

    def head(self, h):
        """h [..., d] -> logits [..., V] (padded vocabulary rows dropped)."""
        y = F.linear(h, self.emb.weight)[..., : self.V]
        return y if self.lbias is None else y + self.lbias


def make_pairs(pairs, eos, src_eos, max_len, name):
    """Dump pairs -> (src, tgt) with the source eos appended; drops pairs longer than max_len."""
    out, skipped = [], 0
    for s, t in pairs:
        s = s + [eos] if src_eos else s
        if len(s) > max_len or len(t) + 1 > max_len or not s:
            skipped += 1
            continue
        out.append((s, t))
    if skipped:
        print(f"{name}: skipped {skipped} of {len(pairs)} pairs longer than --max-len {max_len}")
    return out


M64 = (1 << 64) - 1
PHI = 0x9e3779b97f4a7c15


def mix64(x):
    """splitmix64's finalizer, as ot's batcher uses it (src/io/data_impl.h)."""
    return finalize64(x, 30, 27, 31)


def pair_length(pairs):
    """The batcher's length of pair i: max(S, T), S with the source eos, T = target + 1."""
    return lambda i: max(len(pairs[i][0]), len(pairs[i][1]) + 1)


def greedy_cut(idx, length, tokens):
    """Pair indices idx (in plan order) -> batches: a new batch whenever one more row would make
    rows * (longest length in the batch) exceed tokens (ot's cut, src/io/bitext_batch.c)."""
    out, cur, L = [], [], 0
    for i in idx:
        L2 = max(L, length(i))
        if cur and (len(cur) + 1) * L2 > tokens:
            out.append(cur)
            cur, L2 = [], length(i)
        cur.append(i)
        L = L2
    if cur:
        out.append(cur)
    return out


def ot_batches(pairs, tokens, bucket, seed, epoch):
    """ot's own seeded plan for one epoch (src/io/bitext_batch.c, one rank): the same batches in
    the same order as `ot train --seed S`: a key per pair (bucket, longest first, then a hash of
    the epoch key and the pair index), a stable sort, the greedy cut, then a Fisher-Yates shuffle
    of the batch order driven by the same hash chain."""
    length = pair_length(pairs)
    ek = mix64(seed ^ mix64((epoch * PHI + 0x62617463) & M64))
    mask40 = (1 << 40) - 1
    key = [((0xffffff - min((length(i) - 1) // bucket, 0xffffff)) << 40) | (mix64(ek ^ i) & mask40)
           for i in range(len(pairs))]
    idx = sorted(range(len(pairs)), key=lambda i: key[i])
    out = greedy_cut(idx, length, tokens)
    r = mix64(ek ^ 0x7368756666)
    for k in range(len(out) - 1, 0, -1):
        r = mix64((r + PHI) & M64)
        j = r % (k + 1)
        out[k], out[j] = out[j], out[k]
    return out


def batches(pairs, tokens, bucket, seed, epoch, shuffle=True, ot_order=False):
    """Token-budget batches (lists of pair indices) for one epoch, as ot's batcher plans them:
    length max(S, T) (S with the source eos, T = target + 1) in buckets of `bucket` tokens,
    longest bucket first, pairs shuffled inside each bucket, cut greedily into batches of B
    rows with B * max(S, T) <= tokens, the batch order shuffled (its shuffles are not ot's;
    ot_order: ot's own, see ot_batches)."""
    if shuffle and ot_order:
        return ot_batches(pairs, tokens, bucket, seed, epoch)
    rng = random.Random(seed * 1000003 + epoch)
    length = pair_length(pairs)
    groups = {}
    for i in range(len(pairs)):
        groups.setdefault((length(i) - 1) // bucket, []).append(i)
    idx = []
    for k in sorted(groups, reverse=True):
        if shuffle:
            rng.shuffle(groups[k])
        idx += groups[k]
    out = greedy_cut(idx, length, tokens)
    if shuffle:
        rng.shuffle(out)
    return out


def to_tensors(pairs, b, pad):
    """Batch b of pairs -> src [B,S], src_pad [B,S] (True = padding: from the lengths, since
    the pad id is also the source's eos), dec_in [B,T], labels [B,T] (-1 = ignored), and the
    count of real source + target tokens."""
    S = max(len(pairs[i][0]) for i in b)
    T = max(len(pairs[i][1]) for i in b) + 1
    src = torch.full((len(b), S), pad, dtype=torch.long)
    spad = torch.ones((len(b), S), dtype=torch.bool)
    dec = torch.full((len(b), T), pad, dtype=torch.long)
    lab = torch.full((len(b), T), -1, dtype=torch.long)
    ntok = 0
    for r, i in enumerate(b):
        s, t = pairs[i]
        src[r, : len(s)] = torch.tensor(s)
        spad[r, : len(s)] = False
        dec[r, : len(t) + 1] = torch.tensor([pad] + t)
        lab[r, : len(t) + 1] = torch.tensor(t + [pad])
        ntok += len(s) + len(t) + 1
    return src, spad, dec, lab, ntok


def loss_of(model, batch, eps, autocast):
    """(summed label-smoothed cross-entropy, target count) of one batch (to_tensors); the
    logits stay in f64 for an f64 model, else f32 (bf16 autocast included)."""
    src, spad, dec, lab, _ = batch
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(src, spad, dec)
    V = logits.shape[-1]
    logits = logits if logits.dtype == torch.float64 else logits.float()
    s = F.cross_entropy(logits.reshape(-1, V), lab.reshape(-1), ignore_index=-1,
                        label_smoothing=eps, reduction="sum")
    return s, int((lab != -1).sum())


@torch.no_grad()
def evaluate(model, pairs, a, pad):
    """(label-smoothed loss, nll) per target token over all of pairs, no dropout."""
    model.eval()
    tot = nll = cnt = 0.0
    for b in batches(pairs, a.tokens, a.bucket, 0, 0, shuffle=False):
        t = to_tensors(pairs, b, pad)
        s, c = loss_of(model, t, a.label_smoothing, a.dtype == "bf16")
        n, _ = loss_of(model, t, 0.0, a.dtype == "bf16") if a.label_smoothing else (s, c)
        tot, nll, cnt = tot + float(s), nll + float(n), cnt + c
    model.train()
    return tot / max(cnt, 1), nll / max(cnt, 1)


def lr_at(a, s):
    return a.lr * (s + 1) / a.warmup if s < a.warmup else a.lr * math.sqrt(a.warmup / (s + 1))


def save_state(model, opt, a, s):
    """--save-every: <save-dir>/step_<s>.pt after step s: the weights, Adam's state, the step
    and torch's random state (dropout), so --resume continues the run exactly."""
    os.makedirs(a.save_dir, exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": s,
                "rng": torch.get_rng_state()}, os.path.join(a.save_dir, f"step_{s}.pt"))


def load_state(model, opt, path, resume):
    """Loads a --save-every file (or a bare state_dict): the weights; with resume also Adam's
    state and the random state. Returns the step to continue from (0 without resume)."""
    ck = torch.load(path)
    model.load_state_dict(ck["model"] if "model" in ck else ck)
    if not resume:
        return 0
    if "opt" not in ck:
        raise SystemExit(f"--resume {path}: no optimizer state in it (a --load file only)")
    opt.load_state_dict(ck["opt"])
    torch.set_rng_state(ck["rng"])
    return ck["step"]


def train(model, step_fn, opt, pairs, a, pad, steps, log_every, start=0):
    """Runs steps start..steps-1 over the epoch stream (the first `start` batches skipped);
    returns (per-step tok/s, last losses)."""
    rates, losses, s, epoch, seen = [], [], start, 0, 0
    while s < steps:
        for b in batches(pairs, a.tokens, a.bucket, a.seed, epoch, a.shuffle, a.ot_order):
            if s >= steps:
                break
            seen += 1
            if seen <= start:
                continue
            t = to_tensors(pairs, b, pad)
            for g in opt.param_groups:
                g["lr"] = lr_at(a, s)
            t0 = time.perf_counter()
            loss = step_fn(t)
            dt = time.perf_counter() - t0
            rates.append(t[4] / dt)
            losses.append(loss)
            s += 1
            if a.save_every and a.save_dir and s % a.save_every == 0:
                save_state(model, opt, a, s)
            if log_every and (s % log_every == 0 or s == steps):
                norm = step_fn.norm
                if norm is None:   # opt.step leaves the gradients in place
                    norm = float(torch.linalg.vector_norm(torch.stack(
                        [torch.linalg.vector_norm(p.grad) for p in model.parameters() if p.grad is not None])))
                print(f"step {s:5d}  loss {median(losses[-log_every:]):.4f}  lr {lr_at(a, s - 1):.2e}"
                      f"  norm {norm:.4f}"
                      f"  B {t[0].shape[0]} S {t[0].shape[1]} T {t[2].shape[1]}  {t[4] / dt:.0f} tok/s",
                      flush=True)
        epoch += 1
    return rates, losses


def to_f64(model, opt):
    """The model and its Adam moments in float64 (the step counters stay as they are)."""
    model.double()
    for st in opt.state.values():
        for k, v in st.items():
            if torch.is_tensor(v) and v.is_floating_point() and k != "step":
                st[k] = v.double()


def make_step(model, opt, a):
    fwd = torch.compile(model, dynamic=True) if a.compile else model

    def step(t):
        opt.zero_grad(set_to_none=True)
        s, n = loss_of(fwd, t, a.label_smoothing, a.dtype == "bf16")
        loss = s / n
        loss.backward()
        # clipping measures the global norm anyway (before clipping, as ot reports it); without
        # it, train() measures it outside the timed step, and only on lines it prints
        step.norm = (float(torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip))
                     if a.clip > 0 else None)
        opt.step()
        return loss.item()
    step.norm = None
    return step


def synthetic_pairs(a, V, eos, n):
    """n random pairs of lengths near --bench-len (for --bench without --train)."""
    g = random.Random(a.seed)
    L = a.bench_len
    return [([g.randrange(V) for _ in range(L - 1)] + [eos], [g.randrange(V) for _ in range(L - 1)])
            for _ in range(n)]


def args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", required=True, help="directory with vocab.json + merges.txt")
    p.add_argument("--train"), p.add_argument("--valid"), p.add_argument("--test")
    p.add_argument("--ref", help="raw reference text of the test split (e.g. data/translate/test.fr)")
    p.add_argument("--special-id", type=int, help="eos = start = pad id (default: <|endoftext|>)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="transformer-small")
    for f in ("enc-layers", "dec-layers", "d", "heads", "ff", "max-len"):
        p.add_argument("--" + f, type=int, help="overrides the preset")
    p.add_argument("--vocab-pad", type=int, default=64,
                   help="embedding rows rounded up to a multiple (as ot; rows past V unused)")
    p.add_argument("--no-src-eos", dest="src_eos", action="store_false")
    p.add_argument("--tokens", type=int, default=4096, help="token budget per batch")
    p.add_argument("--bucket", type=int, default=8, help="length-bucket width in tokens")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="batches in ot's --no-shuffle order (longest bucket first, pairs in file order): "
                        "with dropout 0 both sides take the same steps")
    p.add_argument("--ot-order", action="store_true",
                   help="shuffled batches in ot's own seeded plan: the batches `ot train --seed S` takes")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=7e-4)
    p.add_argument("--warmup", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--attn-dropout", type=float, default=0.1)
    p.add_argument("--act-dropout", type=float, default=0.0)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=0.0, help="global gradient norm clip (0: off)")
    p.add_argument("--adam-betas", type=float, nargs=2, default=(0.9, 0.98))
    p.add_argument("--adam-eps", type=float, default=1e-9)
    p.add_argument("--init", choices=("xavier", "normal"), default="xavier")
    p.add_argument("--init-std", type=float, default=0.02)
    p.add_argument("--init-res-layers", type=int, default=0,
                   help="L of the residual projections' std / sqrt(2 L) (0: encoder + decoder "
                        "layers; ot: the decoder's)")
    p.add_argument("--logits-bias", action="store_true",
                   help="a trained output bias over the vocabulary, zero-initialized (Marian's "
                        "final_logits_bias, as ot's transformer presets)")
    p.add_argument("--save-every", type=int, default=0, help="write the weights every N steps")
    p.add_argument("--save-dir", help="--save-every's directory (step_<N>.pt)")
    p.add_argument("--load", help="start from these weights (a --save-every file); with --steps 0 "
                                  "only evaluates and decodes")
    p.add_argument("--load-hf", help="start from the weights of a MarianMTModel directory (a --save-hf "
                   "one, an `ot train` checkpoint, `ot export`): both sides from the same values")
    p.add_argument("--resume-ot", help="continue an `ot train` run from its checkpoint directory: "
                   "weights, Adam moments and step (torch's own batch stream and dropout draws)")
    p.add_argument("--save-ot", help="after the last step, write the weights and Adam moments as an "
                   "`ot train` checkpoint directory (needs --ot-template)")
    p.add_argument("--ot-template", help="an ot checkpoint of the same recipe at the same step, whose "
                   "settings and data position --save-ot keeps")
    p.add_argument("--resume", help="continue a run from a --save-every file (weights, Adam, step, "
                                    "random state) up to --steps, the same flags given")
    p.add_argument("--hf-limit", action="store_true",
                   help="length limit as `ot translate` / HF max_length: floor(a * (source + eos) "
                        "+ b) counting the decoder start")
    p.add_argument("--dtype", choices=("f32", "bf16", "f64"), default="f32",
                   help="bf16 = CPU autocast; f64 = the whole model and loss in double (a reference run)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--beam", type=int, default=1, help="1 = greedy")
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--no-early-stop", dest="early_stop", action="store_false",
                   help="Hugging Face early_stopping=False rule instead of stopping at beam finished")
    p.add_argument("--max-len-a", type=float, default=1.5)
    p.add_argument("--max-len-b", type=int, default=10)
    p.add_argument("--decode-batch", type=int, default=32)
    p.add_argument("--hyp-out", help="write the detokenized test translations here")
    p.add_argument("--save-hf", help="write the trained model as a MarianMTModel directory")
    p.add_argument("--bench", action="store_true", help="only time --bench-steps training steps")
    p.add_argument("--bench-steps", type=int, default=8)
    p.add_argument("--bench-warmup", type=int, default=3)
    p.add_argument("--bench-len", type=int, default=32, help="pair length without --train")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    a = p.parse_args()
    if bool(a.save_ot) != bool(a.ot_template):
        p.error("--save-ot and --ot-template go together (the template: an ot checkpoint at step --steps)")
    for k, v in zip(("enc_layers", "dec_layers", "d", "heads", "ff", "max_len"), PRESETS[a.preset]):
        if getattr(a, k) is None:
            setattr(a, k, v)
    return a


def main():
    a = args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    voc = Vocab(a.tokenizer)
    pad = voc.special if a.special_id is None else a.special_id
    V = voc.size
    Vp = (V + a.vocab_pad - 1) // a.vocab_pad * a.vocab_pad
    model = Seq2Seq(a, V, Vp)
    nparam = sum(p.numel() for p in model.parameters())
    print(f"model: {a.enc_layers}+{a.dec_layers} layers, d {a.d}, heads {a.heads}, ff {a.ff}, "
          f"V {V} (rows {Vp}), max_len {a.max_len}, {nparam / 1e6:.2f}M parameters; torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads, {a.dtype}"
          f"{', compiled' if a.compile else ''}")
    Opt = torch.optim.Adam
    opt = Opt(model.parameters(), lr=a.lr, betas=tuple(a.adam_betas), eps=a.adam_eps)
    start = 0
    if a.load or a.resume:
        start = load_state(model, opt, a.resume or a.load, bool(a.resume))
        print(f"loaded {a.resume or a.load}" + (f", continuing after step {start}" if a.resume else ""))
    if a.resume_ot:
        if a.resume or a.load or a.load_hf:
            raise SystemExit("--resume-ot: not with --load, --load-hf or --resume (one source of weights)")
        start = load_ot_state(model, opt, a.resume_ot)
    if a.load_hf:
        if a.resume or a.load:
            raise SystemExit("--load-hf: not with --load or --resume (one source of weights)")
        load_hf(model, a.load_hf)
    if a.dtype == "f64":   # after loading: the Adam state (if any) follows the parameters' dtype
        to_f64(model, opt)
    step = make_step(model, opt, a)
    load = lambda f, n: make_pairs(read_dump(f, V), pad, a.src_eos, a.max_len, n) if f else None
    train_p = load(a.train, "train")
    t_start = time.perf_counter()
    if a.bench:
        pairs = train_p or synthetic_pairs(a, V, pad, 4096)
        n = a.bench_warmup + a.bench_steps
        rates, _ = train(model, step, opt, pairs, a, pad, n, 1)
        r = rates[a.bench_warmup:]
        print(f"RESULT torch translate-train {a.preset} {a.dtype}{' compile' if a.compile else ''}"
              f" tokens_per_batch {a.tokens} steps {len(r)} tokens_per_s {median(r):.1f}")
        return
    if not train_p:
        raise SystemExit("--train is required (or --bench)")
    print(f"train: {len(train_p)} pairs; tokens per batch {a.tokens} (rows * max(S, T)); "
          f"{a.steps} steps, lr {a.lr}, warmup {a.warmup}, seed {a.seed}")
    rates, losses = train(model, step, opt, train_p, a, pad, a.steps, a.log_every, start)
    wall = time.perf_counter() - t_start
    timed = rates[3:] if len(rates) > 3 else rates
    if losses:
        print(f"train loss (mean of last {min(100, len(losses))} steps): "
              f"{sum(losses[-100:]) / len(losses[-100:]):.4f}")
    valid_p = load(a.valid, "valid")
    if valid_p:
        ls, nll = evaluate(model, valid_p, a, pad)
        print(f"valid loss {ls:.4f} (label-smoothed), nll {nll:.4f}, ppl {math.exp(nll):.2f}")
    if timed:
        print(f"train tokens/s (source + target, median over {len(timed)} steps): {median(timed):.1f}; "
              f"train wall {wall:.1f} s")
    if a.save_hf:
        save_hf(model, a, voc, pad, a.save_hf)
    if a.save_ot:
        from ot_ckpt import save_ot_state
        save_ot_state(model, opt, a.steps, a.ot_template, a.save_ot)
    if a.test:
        decode_test(model, a, voc, pad)


def decode_test(model, a, voc, pad):
    test = read_dump(a.test, voc.size)
    srcs = [s + [pad] if a.src_eos else s for s, _ in test]
    cut = sum(len(s) > a.max_len for s in srcs)
    if cut:   # positions end at max_len: longer sources are cut (their eos kept)
        print(f"test: {cut} sources longer than --max-len {a.max_len} cut to it")
        srcs = [s[: a.max_len - 1] + s[-1:] if len(s) > a.max_len else s for s in srcs]
    model.eval()
    chk = [(s, t) for s, t in zip(srcs[:8], (t for _, t in test[:8])) if len(t) + 1 <= a.max_len]
    if chk:
        src, spad, dec, _, _ = to_tensors(chk, list(range(len(chk))), pad)
        print(f"incremental decoder vs full forward: max |log p diff| "
              f"{check_incremental(model, src, spad, dec):.2e}")
    t0 = time.perf_counter()
    outs = translate(model, srcs, [len(s) for s, _ in test], pad, a)
    dt = time.perf_counter() - t0
    hyps = [one_line(voc.decode(o, skip={pad})) for o in outs]
    what = "greedy" if a.beam == 1 else f"beam {a.beam}"
    print(f"decoded {len(hyps)} test sentences ({what}) in {dt:.1f} s, {len(hyps) / dt:.2f} sent/s")
    if a.hyp_out:
        with open(a.hyp_out, "w", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hyps))
    if a.ref:
        import sacrebleu
        with open(a.ref, encoding="utf-8") as f:
            refs = [line.rstrip("\n") for line in f]
        if len(refs) != len(hyps):
            print(f"warning: {a.ref} has {len(refs)} lines, the test dump {len(hyps)} pairs; "
                  "BLEU against the detokenized dump targets instead")
            refs = [one_line(voc.decode(t)) for _, t in test]
        bleu = sacrebleu.metrics.BLEU()
        print(bleu.corpus_score(hyps, [refs]))
        print(bleu.get_signature())


if __name__ == "__main__":
    main()
