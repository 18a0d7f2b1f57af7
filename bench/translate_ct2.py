#!/usr/bin/env python3
"""Translation speed: CTranslate2 against `ot translate` on the same Hugging Face MarianMTModel
directory, beam search at batch 1 and batch 16, f32 and int8, sentences per second. Not run by
CI (benchmarks print numbers and assert nothing).

Environment (once; the same venv as bench/translate_torch.py):
  python3 -m venv /tmp/peers
  /tmp/peers/bin/pip install torch ctranslate2==4.8.5 sacrebleu==2.6.0 transformers safetensors
Run from the repository root:
  /tmp/peers/bin/python bench/translate_ct2.py --model MODEL_DIR --src-ids out/translate/ids.test \\
      [--ref data/translate/test.fr] [--limit 300] \\
      [--ot-cmd 'build/ot translate --model {model} --beam {beam} --batch {batch} --dtype {dtype}']

Conversion: CTranslate2's own TransformersConverter (the code behind ct2-transformers-converter)
with its Marian loader, given the vocabulary instead of a tokenizer. Its Marian loader assumes
an opus-mt checkpoint: SentencePiece files read through MarianTokenizer, a "<pad>" row last in
the vocabulary that it deletes, and a decoder that starts from a zero embedding (the pad row of
HF Marian). ot's checkpoints have none of these: the vocabulary is byte-level BPE (vocab.json),
and the one special token <|endoftext|> is eos, decoder start and pad, with a learned
embedding. So the loader here is Marian's with three changes: the vocabulary is vocab.json's
tokens in id order, no row is removed, and the decoder starts from the embedding of
<|endoftext|> (start_from_zero_embedding = False; eos = start = unk = <|endoftext|>). The
weights go through the Bart/Marian loader unchanged. The model is converted once (float32);
int8 is CTranslate2's compute_type="int8" at load time (weights quantized per row).

Input: the source side of an id dump (`ot prepare --dump-ids`: `src ids<TAB>tgt ids`) turned
into vocabulary strings, with the eos token appended (as ot's trainer feeds sources); or
--src-text lines, encoded with transformers' GPT2TokenizerFast over the same vocab.json and
merges.txt. The ot command reads the same sentences as text on stdin (the ids decoded: byte-level
BPE is lossless) and writes one translation per line. Limits as ot's: beam 4, length_penalty 1.0,
max_decoding_length = a * src_len + b (the longest sentence of the batch; CTranslate2 takes one
limit per batch), capped by the model's positions.

Timing: each configuration translates the --limit sentences in input order, in consecutive
batches, --repeats times after a warm-up batch; sent/s = sentences / median pass time. For ot,
the whole process is timed with all sentences and with one sentence: "ot sent/s" is the
marginal rate (N - 1) / (t_N - t_1), without start-up and model loading; "ot proc" is N / t_N.
"""
import argparse
import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from translate_util import SPECIAL, Vocab, median, one_line, print_table, read_dump  # noqa: E402

import ctranslate2  # noqa: E402

COMPUTE = {"f32": "float32", "int8": "int8"}


def convert(model_dir, vocab, out_dir, force):
    """model_dir (HF MarianMTModel) -> CTranslate2 model directory out_dir (float32)."""
    if os.path.exists(os.path.join(out_dir, "model.bin")) and not force:
        return out_dir
    from ctranslate2.converters import transformers as ct2t
    tokens = vocab.tokens(range(vocab.size))
    special = vocab.id2tok[vocab.special]

    class Loader(ct2t.MarianMTLoader):
        def get_model_spec(self, model):
            model.config.normalize_before = False
            model.config.normalize_embedding = False
            return ct2t.BartLoader.get_model_spec(self, model)   # no pad row removed

        def set_config(self, config, model, tokenizer):
            config.bos_token = config.eos_token = config.unk_token = special
            config.decoder_start_token = special

        def set_decoder(self, spec, decoder):
            ct2t.BartLoader.set_decoder(self, spec, decoder)
            spec.start_from_zero_embedding = False

        def get_vocabulary(self, model, tokenizer):
            return tokens

    class Converter(ct2t.TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return None   # the loader above takes the vocabulary from vocab.json

    saved = ct2t._MODEL_LOADERS["MarianConfig"]
    ct2t._MODEL_LOADERS["MarianConfig"] = Loader()
    try:
        Converter(model_dir).convert(out_dir, force=True)
    finally:
        ct2t._MODEL_LOADERS["MarianConfig"] = saved
    print(f"converted {model_dir} -> {out_dir} (CTranslate2 {ctranslate2.__version__})")
    return out_dir


def load_sources(a, vocab):
    """-> (source id lists without eos, their texts)."""
    if a.src_ids:
        srcs = [s for s, _ in read_dump(a.src_ids, vocab.size)]
    else:
        from transformers import GPT2TokenizerFast
        tok = GPT2TokenizerFast.from_pretrained(a.tokenizer)
        with open(a.src_text, encoding="utf-8") as f:
            srcs = [tok.encode(line.rstrip("\n")) for line in f]
    srcs = [s[: a.max_len - 1] for s in srcs]   # with the eos: at most max_len positions
    if a.limit:
        srcs = srcs[: a.limit]
    return srcs, [vocab.decode(s) for s in srcs]


def limit_of(a, lens):
    return min(int(a.max_len_a * max(lens) + a.max_len_b), a.max_len - 1)


def ct2_pass(tr, toks, lens, a, bs):
    """One pass over all sentences in batches of bs -> (seconds, output token lists)."""
    out = []
    t0 = time.perf_counter()
    for i in range(0, len(toks), bs):
        r = tr.translate_batch(toks[i:i + bs], beam_size=a.beam, length_penalty=a.length_penalty,
                               max_decoding_length=limit_of(a, lens[i:i + bs]), max_batch_size=0)
        out += [x.hypotheses[0] for x in r]
    return time.perf_counter() - t0, out


def run_ot(a, texts, bs, dtype):
    """Runs the --ot-cmd template on texts -> (seconds, stdout lines, stderr)."""
    cmd = a.ot_cmd.format(model=a.model, batch=bs, dtype=dtype, beam=a.beam, threads=a.threads,
                          max_len_a=a.max_len_a, max_len_b=a.max_len_b)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(a.threads))
    t0 = time.perf_counter()
    p = subprocess.run(shlex.split(cmd), input="".join(t.replace("\n", " ") + "\n" for t in texts),
                       capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"`{cmd}` exited with {p.returncode}:\n{p.stderr[-2000:]}")
    lines = p.stdout.split("\n")[:-1] if p.stdout.endswith("\n") else p.stdout.split("\n")
    if len(lines) != len(texts):
        print(f"warning: `{cmd}` wrote {len(lines)} lines for {len(texts)} sentences")
    return dt, lines, p.stderr


def bleu(hyps, refs):
    import sacrebleu
    return sacrebleu.metrics.BLEU().corpus_score(hyps, [refs[: len(hyps)]]).score


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="Hugging Face MarianMTModel directory")
    p.add_argument("--tokenizer", help="vocab.json + merges.txt directory (default: --model)")
    p.add_argument("--ct2-dir", help="converted model (default: /tmp/ct2_<model dir name>)")
    p.add_argument("--force", action="store_true", help="convert again")
    p.add_argument("--src-ids", help="id dump whose source side is translated")
    p.add_argument("--src-text", help="source text, one sentence a line (instead of --src-ids)")
    p.add_argument("--ref", help="reference text for a BLEU sanity check")
    p.add_argument("--compare", help="translations of the same sources (e.g. translate_torch.py "
                   "--hyp-out): count identical lines")
    p.add_argument("--limit", type=int, default=300, help="first N sentences (0: all)")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--dtypes", default="f32,int8")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--max-len-a", type=float, default=1.5)
    p.add_argument("--max-len-b", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ot-cmd", help="command template reading sources on stdin; fields {model} "
                   "{batch} {dtype} {beam} {threads} {max_len_a} {max_len_b}")
    a = p.parse_args()
    if not (a.src_ids or a.src_text):
        p.error("give --src-ids or --src-text")
    a.tokenizer = a.tokenizer or a.model
    vocab = Vocab(a.tokenizer)
    import json
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    a.max_len = int(cfg.get("max_position_embeddings", 1024))
    if cfg.get("vocab_size") != vocab.size:
        raise SystemExit(f"{a.model}: vocab_size {cfg.get('vocab_size')} but {a.tokenizer}/vocab.json "
                         f"has {vocab.size} tokens")
    ct2_dir = convert(a.model, vocab, a.ct2_dir or "/tmp/ct2_" + os.path.basename(os.path.abspath(a.model)),
                      a.force)
    srcs, texts = load_sources(a, vocab)
    toks = [vocab.tokens(s) + [SPECIAL] for s in srcs]
    lens = [len(s) for s in srcs]
    refs = None
    if a.ref:
        with open(a.ref, encoding="utf-8") as f:
            refs = [line.rstrip("\n") for line in f]
    print(f"{len(srcs)} sentences, {sum(lens)} source tokens; beam {a.beam}, length_penalty "
          f"{a.length_penalty}, max length {a.max_len_a} * src + {a.max_len_b} (<= {a.max_len - 1}); "
          f"{a.threads} threads; median of {a.repeats}")
    rows, outs = [], {}
    for dt in a.dtypes.split(","):
        tr = ctranslate2.Translator(ct2_dir, device="cpu", compute_type=COMPUTE[dt],
                                    intra_threads=a.threads, inter_threads=1)
        for bs in (int(x) for x in a.batches.split(",")):
            ct2_pass(tr, toks[:bs], lens[:bs], a, bs)   # warm-up
            runs = [ct2_pass(tr, toks, lens, a, bs) for _ in range(a.repeats)]
            ct2_rate = len(toks) / median([r[0] for r in runs])
            hyps = [one_line(vocab.decode(vocab.ids(t), skip={vocab.special})) for t in runs[0][1]]
            outs[("ct2", dt, bs)] = hyps
            row = [f"batch {bs}", dt, f"{ct2_rate:.2f}"]
            if a.ot_cmd:
                full = [run_ot(a, texts, bs, dt) for _ in range(a.repeats)]
                one = [run_ot(a, texts[:1], bs, dt)[0] for _ in range(a.repeats)]
                tN, t1 = median([r[0] for r in full]), median(one)
                ot_rate = (len(texts) - 1) / (tN - t1) if tN > t1 else float("nan")
                outs[("ot", dt, bs)] = [one_line(x) for x in full[0][1]]
                row += [f"{ot_rate:.2f}", f"{len(texts) / tN:.2f}", f"{ot_rate / ct2_rate:.2f}x"]
            else:
                row += ["-", "-", "-"]
            rows.append(row)
            print(f"  done: {' '.join(row)}", flush=True)
    print()
    print_table(["rows", "dtype", "ct2 sent/s", "ot sent/s", "ot proc sent/s", "ot / ct2"], rows)
    print()
    cmp = None
    if a.compare:
        with open(a.compare, encoding="utf-8") as f:
            cmp = [line.rstrip("\n") for line in f]
    for key, hyps in sorted(outs.items()):
        line = f"{key[0]} {key[1]} batch {key[2]}:"
        if refs:
            line += f" BLEU {bleu(hyps, refs):.2f} (first {len(hyps)} references)"
        ref_key = ("ct2", key[1], key[2])
        if cmp:
            line += f"; identical to {a.compare}: {sum(x == y for x, y in zip(hyps, cmp))}/{len(hyps)}"
        if key[0] == "ot":
            same = sum(x == y for x, y in zip(hyps, outs[ref_key]))
            line += f"; identical to ct2's: {same}/{len(hyps)}"
        print(line)
    first = outs[min(outs)]
    for i in range(min(3, len(texts))):
        print(f"  src: {texts[i][:100]}\n  ct2: {first[i][:100]}")


if __name__ == "__main__":
    main()
