#!/usr/bin/env python3
"""Translation speed: CTranslate2 against `ot translate` on the same Hugging Face MarianMTModel
directory (what `ot export` writes), beam search at batch 1 and batch 16, f32 and int8,
sentences per second. Not run by CI (benchmarks print numbers and assert nothing).

Environment (once; the same venv as bench/translate_torch.py):
  python3 -m venv /tmp/peers
  /tmp/peers/bin/pip install torch ctranslate2==4.8.5 sacrebleu==2.6.0 transformers safetensors
Run from the repository root, on a model that translates (outputs that end with eos):
  build/ot export --model out/translate-run --out out/translate-hf
  /tmp/peers/bin/python bench/translate_ct2.py --model out/translate-hf \\
      --src-ids out/translate/ids.test.tsv --ref data/translate/test.fr --limit 200

Conversion: CTranslate2's own TransformersConverter (the code behind ct2-transformers-converter)
with its MarianMTModel loader. The converter reads the directory's tokenizer itself
(tokenizer_config.json: GPT2Tokenizer over vocab.json + merges.txt, so the vocabulary is
vocab.json's tokens in id order). Two assumptions of the Marian loader hold for opus-mt
checkpoints only, and are switched off (a subclass of the loader; nothing else changes):
  - it deletes the last vocabulary row, taking it for the "<pad>" token transformers appends to
    opus-mt vocabularies; in an ot model the last row is <|endoftext|>, which is eos, decoder
    start and pad (deleting it leaves a model that can never stop: outputs run to the limit);
  - it starts the decoder from a zero vector (start_from_zero_embedding), where opus-mt's pad
    row is zero; an ot model starts from the learned embedding of the decoder start token.
The script checks the converted vocabulary against vocab.json. int8 is CTranslate2's
compute_type="int8" at load time (int8 weights and activations); ot's int8 is --dtype int8
(int8 weights per output row, f32 activations).

Same settings on both sides: beam size, length_penalty (HF's: score / length^alpha), the
stopping rule (--early-stopping true: a sentence is done once it holds beam finished
hypotheses, CTranslate2's rule with patience 1 and HF's early_stopping=True; ot's default is
HF's early_stopping=False heuristic, which searches on while a live beam could still win),
min length 0, no other logits processor, and the length limit ot uses, per sentence:
L = min(floor(a * source tokens with eos + b), max_position_embeddings) counting the decoder
start, i.e. CTranslate2's max_decoding_length = L - 1 (it counts generated tokens, the eos
included). CTranslate2 takes one limit per batch (the largest of its sentences).

Validation first (--validate, default on): every sentence through CTranslate2 one at a time
(its exact limit) and through ot, compared token for token: greedy and the beam, f32 and int8.
Differing sentences are scored by transformers' MarianMTModel (teacher-forced log-probability /
length^alpha, f32) so each difference says which side found the better-scoring translation.

Timing (--repeats passes, alternating CTranslate2 and ot in each): the --limit sentences in
input order in consecutive batches of --batches; CTranslate2: translate_batch wall time;
ot: the whole process with all sentences and with one sentence, "ot sent/s" =
(N - 1) / (t_N - t_1), the marginal rate without start-up and model loading ("ot proc" = N / t_N).
Both read token ids (CTranslate2 token strings, ot `--ids`): no tokenizer is timed on either side.
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from translate_util import Vocab, median, one_line, print_table, read_dump  # noqa: E402

import ctranslate2  # noqa: E402

COMPUTE = {"f32": "float32", "int8": "int8"}
OT_CMD = ("build/ot translate --model {model} --ids --beam {beam} --batch {batch} --dtype {dtype} "
          "--length-penalty {length_penalty} --max-len-a {max_len_a} --max-len-b {max_len_b} "
          "--threads {threads} {early_stopping} --quiet")


def convert(model_dir, vocab, out_dir, force):
    """model_dir (HF MarianMTModel written by `ot export`) -> CTranslate2 model dir (float32)."""
    if os.path.exists(os.path.join(out_dir, "model.bin")) and not force:
        print(f"using {out_dir} (converted earlier; --force converts again)")
    else:
        from ctranslate2.converters import transformers as ct2t

        class Loader(ct2t.MarianMTLoader):
            def get_model_spec(self, model):   # Marian's, without _remove_pad_weights
                model.config.normalize_before = False
                model.config.normalize_embedding = False
                return ct2t.BartLoader.get_model_spec(self, model)

            def set_decoder(self, spec, decoder):   # start from the start token's embedding
                ct2t.MarianMTLoader.set_decoder(self, spec, decoder)
                spec.start_from_zero_embedding = False

            def get_vocabulary(self, model, tokenizer):   # no "<pad>" to pop
                return ct2t.BartLoader.get_vocabulary(self, model, tokenizer)

        if not os.path.exists(os.path.join(model_dir, "tokenizer_config.json")):
            raise SystemExit(f"{model_dir}: no tokenizer_config.json: write the directory with "
                             "`ot export` (it names GPT2Tokenizer over vocab.json + merges.txt)")
        saved = ct2t._MODEL_LOADERS["MarianConfig"]
        ct2t._MODEL_LOADERS["MarianConfig"] = Loader()
        try:
            ct2t.TransformersConverter(model_dir).convert(out_dir, force=True)
        finally:
            ct2t._MODEL_LOADERS["MarianConfig"] = saved
        print(f"converted {model_dir} -> {out_dir} (CTranslate2 {ctranslate2.__version__})")
    with open(os.path.join(out_dir, "shared_vocabulary.json"), encoding="utf-8") as f:
        tokens = json.load(f)
    if tokens != vocab.tokens(range(vocab.size)):
        raise SystemExit(f"{out_dir}: the converted vocabulary is not vocab.json's tokens in id order")
    with open(os.path.join(out_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    print(f"  CTranslate2 config: decoder_start_token {cfg.get('decoder_start_token')!r}, "
          f"eos_token {cfg.get('eos_token')!r}, {len(tokens)} tokens")
    return out_dir


def limit(a, n):
    """ot's length limit for a source of n tokens + eos, as CTranslate2's max_decoding_length."""
    return min(math.floor(a.max_len_a * (n + 1) + a.max_len_b), a.max_len) - 1


def ct2_pass(tr, toks, lens, a, bs, beam):
    """One pass over all sentences in batches of bs -> (seconds, output token lists)."""
    out = []
    t0 = time.perf_counter()
    for i in range(0, len(toks), bs):
        r = tr.translate_batch(toks[i:i + bs], beam_size=beam, length_penalty=a.length_penalty,
                               max_decoding_length=max(limit(a, n) for n in lens[i:i + bs]),
                               min_decoding_length=0, max_batch_size=0)
        out += [x.hypotheses[0] for x in r]
    return time.perf_counter() - t0, out


def run_ot(a, srcs, bs, dtype, beam):
    """Runs the --ot-cmd template on the source id lines -> (seconds, output id lists, stderr)."""
    cmd = a.ot_cmd.format(model=a.model, batch=bs, dtype=dtype, beam=beam, threads=a.threads,
                          length_penalty=a.length_penalty, max_len_a=a.max_len_a, max_len_b=a.max_len_b,
                          early_stopping="--early-stopping" if a.early_stopping == "true" else "")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    text = "".join(" ".join(map(str, s + [a.eos])) + "\n" for s in srcs)
    t0 = time.perf_counter()
    p = subprocess.run(shlex.split(cmd), input=text, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"`{cmd}` exited with {p.returncode}:\n{p.stderr[-2000:]}")
    lines = p.stdout.split("\n")[:-1]
    if len(lines) != len(srcs):
        raise SystemExit(f"`{cmd}` wrote {len(lines)} lines for {len(srcs)} sentences")
    return dt, [[int(x) for x in ln.split()] for ln in lines], p.stderr


class Scorer:
    """transformers' MarianMTModel on the directory: the length-normalized log-probability
    of a translation (HF's beam score: sum log p (eos included) / (len + 1)^alpha)."""

    def __init__(self, model_dir):
        import torch
        from transformers import MarianMTModel
        self.torch = torch
        self.m = MarianMTModel.from_pretrained(model_dir).eval()
        self.start = self.m.config.decoder_start_token_id

    def __call__(self, src, hyp, eos, alpha, ended):
        torch = self.torch
        y = hyp + ([eos] if ended else [])
        with torch.no_grad():
            lg = self.m(input_ids=torch.tensor([src]),
                        decoder_input_ids=torch.tensor([[self.start] + y[:-1]])).logits[0]
        lp = torch.log_softmax(lg.float(), -1)[torch.arange(len(y)), torch.tensor(y)].sum().item()
        return lp / len(y) ** alpha


def validate(a, vocab, ct2_dir, srcs, toks, lens):
    """Token-for-token comparison, CTranslate2 (one sentence at a time) vs ot."""
    scorer = None
    rows = []
    for dt in a.dtypes.split(","):
        tr = ctranslate2.Translator(ct2_dir, device="cpu", compute_type=COMPUTE[dt],
                                    intra_threads=a.threads, inter_threads=1)
        for beam in sorted({1, a.beam}):
            _, ct2 = ct2_pass(tr, toks, lens, a, 1, beam)
            ct2 = [vocab.ids(t) for t in ct2]
            _, ours, _ = run_ot(a, srcs, 16, dt, beam)
            same = sum(x == y for x, y in zip(ct2, ours))
            at_limit = sum(len(y) == limit(a, n) for y, n in zip(ours, lens))
            better = {"ot": 0, "ct2": 0, "equal": 0}
            shown = 0
            for i, (x, y) in enumerate(zip(ct2, ours)):
                if x == y:
                    continue
                if scorer is None:
                    scorer = Scorer(a.model)
                src = srcs[i] + [a.eos]
                al = a.length_penalty if beam > 1 else 0.0
                sx = scorer(src, x, a.eos, al, len(x) < limit(a, lens[i]))
                sy = scorer(src, y, a.eos, al, len(y) < limit(a, lens[i]))
                better["ot" if sy > sx + 1e-5 else "ct2" if sx > sy + 1e-5 else "equal"] += 1
                if shown < a.show:
                    shown += 1
                    k = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
                    print(f"  {dt} beam {beam} sentence {i}: first difference at token {k}; lengths "
                          f"ct2 {len(x)} ot {len(y)} (limit {limit(a, lens[i])}); HF score ct2 {sx:.5f} ot {sy:.5f}")
                    print(f"    ct2: {one_line(vocab.decode(x))[:120]}")
                    print(f"    ot : {one_line(vocab.decode(y))[:120]}")
            rows.append([dt, str(beam), f"{same}/{len(srcs)}", str(at_limit),
                         f"{better['ot']} / {better['ct2']} / {better['equal']}"])
    print()
    print_table(["dtype", "beam", "identical", "ot at limit", "differing: better ot / ct2 / same score"],
                rows)
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="MarianMTModel directory written by `ot export`")
    p.add_argument("--ct2-dir", help="converted model (default: /tmp/ct2_<model dir name>)")
    p.add_argument("--force", action="store_true", help="convert again")
    p.add_argument("--src-ids", required=True, help="id dump (`ot prepare --dump-ids`) whose sources "
                   "are translated")
    p.add_argument("--ref", help="reference text for BLEU")
    p.add_argument("--limit", type=int, default=200, help="first N sentences (0: all)")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--dtypes", default="f32,int8")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--max-len-a", type=float, default=1.2, help="limit a * source + b (ot's defaults)")
    p.add_argument("--max-len-b", type=float, default=10)
    p.add_argument("--early-stopping", choices=("true", "false"), default="true",
                   help="true: ot --early-stopping (HF early_stopping=True: a sentence is done once it "
                   "has beam finished hypotheses), CTranslate2's rule (patience 1: 'decoding continues "
                   "until beam_size * patience hypotheses are finished'); false: ot's default "
                   "(HF's heuristic: it may search on, never stopping earlier)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--show", type=int, default=3, help="differing sentences printed per run")
    p.add_argument("--no-validate", action="store_true")
    p.add_argument("--validate-only", action="store_true")
    p.add_argument("--ot-cmd", default=OT_CMD, help="command reading source id lines (eos included) "
                   "on stdin and writing output ids; fields {model} {batch} {dtype} {beam} {threads} "
                   "{length_penalty} {max_len_a} {max_len_b} {early_stopping}")
    a = p.parse_args()
    vocab = Vocab(a.model)
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    a.max_len = int(cfg.get("max_position_embeddings", 1024))
    a.eos = int(cfg["eos_token_id"])
    if cfg.get("vocab_size") != vocab.size:
        raise SystemExit(f"{a.model}: vocab_size {cfg.get('vocab_size')} but vocab.json has {vocab.size} tokens")
    ct2_dir = convert(a.model, vocab, a.ct2_dir or "/tmp/ct2_" + os.path.basename(os.path.abspath(a.model)),
                      a.force)
    srcs = [s for s, _ in read_dump(a.src_ids, vocab.size)]
    refs = None
    if a.ref:
        with open(a.ref, encoding="utf-8") as f:
            refs = [line.rstrip("\n") for line in f]
        if len(refs) != len(srcs):
            raise SystemExit(f"{a.ref}: {len(refs)} lines, {a.src_ids}: {len(srcs)} pairs")
    keep = [i for i, s in enumerate(srcs) if len(s) + 1 <= a.max_len][: a.limit or None]
    srcs = [srcs[i] for i in keep]
    refs = [refs[i] for i in keep] if refs else None
    toks = [vocab.tokens(s + [a.eos]) for s in srcs]
    lens = [len(s) for s in srcs]
    print(f"{len(srcs)} sentences, {sum(lens)} source tokens (+ eos each); beam {a.beam}, length_penalty "
          f"{a.length_penalty}, early_stopping {a.early_stopping}, limit min({a.max_len_a} * (source + 1) + {a.max_len_b}, {a.max_len}) with "
          f"the start token; {a.threads} threads; uptime: {os.getloadavg()[0]:.2f} "
          f"{os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    if not a.no_validate:
        validate(a, vocab, ct2_dir, srcs, toks, lens)
    if a.validate_only:
        return
    rows, outs = [], {}
    for dt in a.dtypes.split(","):
        tr = ctranslate2.Translator(ct2_dir, device="cpu", compute_type=COMPUTE[dt],
                                    intra_threads=a.threads, inter_threads=1)
        for bs in (int(x) for x in a.batches.split(",")):
            ct2_pass(tr, toks[:bs], lens[:bs], a, bs, a.beam)   # warm-up
            run_ot(a, srcs[:1], bs, dt, a.beam)
            ct, full, one = [], [], []
            for _ in range(a.repeats):   # alternating
                ct.append(ct2_pass(tr, toks, lens, a, bs, a.beam))
                full.append(run_ot(a, srcs, bs, dt, a.beam))
                one.append(run_ot(a, srcs[:1], bs, dt, a.beam)[0])
            ct2_rate = len(srcs) / median([r[0] for r in ct])
            tN, t1 = median([r[0] for r in full]), median(one)
            ot_rate = (len(srcs) - 1) / (tN - t1) if tN > t1 else float("nan")
            outs[("ct2", dt, bs)] = [vocab.ids(t) for t in ct[0][1]]
            outs[("ot", dt, bs)] = full[0][1]
            rows.append([f"batch {bs}", dt, f"{ct2_rate:.2f}", f"{ot_rate:.2f}", f"{len(srcs) / tN:.2f}",
                         f"{ot_rate / ct2_rate:.2f}x"])
            print(f"  done: {' '.join(rows[-1])}  (load {os.getloadavg()[0]:.2f})", flush=True)
    print()
    print_table(["rows", "dtype", "ct2 sent/s", "ot sent/s", "ot proc sent/s", "ot / ct2"], rows)
    print()
    for key, hyps in sorted(outs.items()):
        line = f"{key[0]} {key[1]} batch {key[2]}:"
        if refs:
            import sacrebleu
            text = [one_line(vocab.decode(h)) for h in hyps]
            line += f" BLEU {sacrebleu.metrics.BLEU().corpus_score(text, [refs]).score:.2f}"
        line += f", {sum(map(len, hyps))} tokens out"
        if key[0] == "ot":
            same = sum(x == y for x, y in zip(hyps, outs[("ct2", key[1], key[2])]))
            line += f"; identical to ct2's: {same}/{len(hyps)}"
        print(line)


if __name__ == "__main__":
    main()
