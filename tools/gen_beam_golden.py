#!/usr/bin/python3
"""Golden results of Hugging Face transformers' generate() (greedy and beam
search) for tests/test_beam.c, on a toy model whose logits both sides compute
identically from fixed float32 tables (not needed by CI: the output is committed).

Usage:
  PYTHONPATH=/tmp/hfpy /usr/bin/python3 tools/gen_beam_golden.py [out] [out_proc]
  (default out: tests/golden/beam/beam_hf.txt, out_proc: tests/golden/beam/beam_proc.txt;
   transformers 4.40.2, torch 1.13)

Toy model: the decoder prompt is the start token; for a sequence of sentence s
whose input is [start, y1, .., yt] (t = tokens generated so far) the next-token
logits are, added in this order in float32,
    E[s] + W[last] + U[prev] + P[t]
with last = the input's last token and prev = the one before it (start when
t == 0). The sentence id travels as a model kwarg (generate() expands it to the
beams). Each sentence is generated alone with its own max_length
(= floor(a * src_len + b), capped by max_length when set) unless the case sets
one max_length for all, when the batch is generated together.

Text format (all floats printed with 9 significant digits, exact for float32):
  beam-golden 1
  dims <nsent> <V> <P rows> <eos> <pad> <start>
  E <nsent*V floats> / W <V*V> / U <V*V> / P <P*V>    (one line each, row-major)
  src <nsent ints>
  case <num_beams> <length_penalty> <early: 0 false, 1 true, 2 never>
       <max_length> <a> <b> <min_length>
  steps batch <forward calls of the batched run> | steps each <calls per sentence>
  then per sentence: out <len> <score> <len tokens after the start token>
  (score: sequences_scores for beams; for greedy the sum of the chosen
   tokens' float32 log-softmax over len^length_penalty, as C computes it)

out_proc (logits processors) has the same layout with "beam-golden 2" and
five more fields on each case line:
  <repetition_penalty> <no_repeat_ngram_size> <forced_eos_token_id (-1: off)>
  <number of bad_words_ids sequences> then each as <length> <tokens>
(the greedy score stays the model's own log-softmax of the chosen tokens).
"""
import os
import sys

import torch
from transformers import GenerationConfig, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

NSENT, V, PROWS = 5, 23, 48
EOS, PAD, START = 2, 0, 1
SRC = [3, 5, 8, 2, 11]


def tables():
    g = torch.Generator().manual_seed(20260214)
    E = (torch.randn(NSENT, V, generator=g) * 1.0).float()
    W = (torch.randn(V, V, generator=g) * 1.2).float()
    U = (torch.randn(V, V, generator=g) * 0.8).float()
    P = (torch.randn(PROWS, V, generator=g) * 0.3).float()
    # eos grows more likely with the step: hypotheses of varied lengths
    P[:, EOS] += torch.arange(PROWS, dtype=torch.float32) * 0.45 - 1.5
    for T in (E, W, U, P):
        T[:, PAD] = -4.0            # pad and start are rarely chosen
        T[:, START] = -4.0
    return E, W, U, P


class ToyConfig(PretrainedConfig):
    model_type = "beam_toy"


class Toy(PreTrainedModel):
    config_class = ToyConfig

    def __init__(self, config, tabs):
        super().__init__(config)
        self.E, self.W, self.U, self.P = tabs
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.calls = 0


    def forward(self, input_ids, src=None, **kwargs):
        self.calls += 1
        n, L = input_ids.shape
        last = input_ids[:, -1]
        prev = input_ids[:, -2] if L >= 2 else torch.full_like(last, START)
        t = L - 1
        x = self.E[src] + self.W[last]
        x = x + self.U[prev]
        x = x + self.P[t].unsqueeze(0)
        return CausalLMOutput(logits=x.unsqueeze(1))

    def prepare_inputs_for_generation(self, input_ids, src=None, **kwargs):
        return {"input_ids": input_ids, "src": src}


def fmt(x):
    return "%.9g" % float(x)


def greedy_score(model, sents, seq, lp):
    """Sum of float32 log-softmax of the chosen tokens / len^lp."""
    tot = torch.zeros((), dtype=torch.float32)
    ids = torch.tensor([[START]])
    for tok in seq:
        logits = model(ids, src=torch.tensor([sents]))["logits"][0, -1]
        tot = tot + torch.log_softmax(logits, -1)[tok]
        ids = torch.cat([ids, torch.tensor([[tok]])], 1)
    return float(torch.tensor(float(tot) / (len(seq) ** lp), dtype=torch.float32))


def run(model, nb, lp, es, max_length, sents, min_length, proc=None):
    extra = {}
    if proc is not None:
        rep, ngram, feos, bad = proc
        if rep != 1.0:
            extra["repetition_penalty"] = rep
        if ngram > 0:
            extra["no_repeat_ngram_size"] = ngram
        if feos >= 0:
            extra["forced_eos_token_id"] = feos
        if bad:
            extra["bad_words_ids"] = [list(b) for b in bad]
    gc = GenerationConfig(num_beams=nb, length_penalty=lp, early_stopping=es,
                          max_length=max_length, min_length=min_length, eos_token_id=EOS,
                          pad_token_id=PAD, bos_token_id=START, do_sample=False,
                          num_return_sequences=1, output_scores=True,
                          return_dict_in_generate=True, **extra)
    ids = torch.full((len(sents), 1), START, dtype=torch.long)
    model.calls = 0
    with torch.no_grad():
        o = model.generate(ids, generation_config=gc, src=torch.tensor(sents))
    calls = model.calls
    res = []
    for i in range(len(sents)):
        row = o.sequences[i, 1:].tolist()
        # the tokens up to and with the eos, or all when no eos (pads after)
        n = row.index(EOS) + 1 if EOS in row else len(row)
        toks = row[:n]
        if nb > 1:
            score = float(o.sequences_scores[i])
        else:
            score = greedy_score(model, sents[i], toks, lp)
        res.append((toks, score))
    return res, calls


def write_cases(model, tabs, cases, out, version):
    ES = {0: False, 1: True, 2: "never"}
    lines = ["beam-golden %d" % version,
             "dims %d %d %d %d %d %d" % (NSENT, V, PROWS, EOS, PAD, START)]
    for name, T in zip("EWUP", tabs):
        lines.append(name + " " + " ".join(fmt(v) for v in T.flatten().tolist()))
    lines.append("src " + " ".join(str(s) for s in SRC))
    for case in cases:
        nb, lp, es, ml, a, b, mn = case[:7]
        proc = case[7] if len(case) > 7 else None
        line = "case %d %s %d %d %s %s %d" % (nb, fmt(lp), es, ml, fmt(a), fmt(b), mn)
        if version >= 2:
            rep, ngram, feos, bad = proc
            line += " %s %d %d %d" % (fmt(rep), ngram, feos, len(bad))
            for seq in bad:
                line += " %d %s" % (len(seq), " ".join(map(str, seq)))
        lines.append(line)
        if ml > 0:
            res, calls = run(model, nb, lp, ES[es], ml, list(range(NSENT)), mn, proc)
            lines.append("steps batch %d" % calls)
        else:
            res, calls = [], []
            for s in range(NSENT):
                lim = int(a * SRC[s] + b)
                r, c = run(model, nb, lp, ES[es], lim, [s], mn, proc)
                res += r
                calls.append(c)
            lines.append("steps each " + " ".join(map(str, calls)))
        for toks, score in res:
            lines.append("out %d %s %s" % (len(toks), fmt(score), " ".join(map(str, toks))))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out, len(cases), "cases")


def proc_cases():
    """Each processor alone, then together, for greedy and beams."""
    procs = [
        (1.3, 0, -1, []),                       # repetition_penalty > 1
        (0.7, 0, -1, []),                       # < 1 (raises repeated tokens)
        (1.0, 2, -1, []),                       # no_repeat_ngram_size 2
        (1.0, 3, -1, []),
        (1.0, 1, -1, []),                       # no token twice
        (1.0, 0, 3, []),                        # forced_eos_token_id (not the eos)
        (1.0, 0, EOS, []),                      # forced eos = eos
        (1.0, 0, -1, [[PAD], [7], [12]]),       # single-token bad words
        (1.0, 0, -1, [[EOS], [5]]),             # [eos] is dropped as HF does
        (1.0, 0, -1, [[4, 9], [9, 4], [START, 6], [3, 3, 3]]),   # multi-token
        (1.2, 2, EOS, [[PAD], [6, 6]]),         # all together
    ]
    cases = []
    for proc in procs:
        for nb in (1, 3, 4):
            es = 2 if nb == 3 else 0
            cases.append((nb, 1.0, es, 0, 1.5, 2.0, 0, proc))   # per-sentence limits
            cases.append((nb, 0.6, es, 10, 0.0, 0.0, 4, proc))  # one max_length, min_length
    return cases


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden/beam/beam_hf.txt"
    out_proc = sys.argv[2] if len(sys.argv) > 2 else "tests/golden/beam/beam_proc.txt"
    torch.manual_seed(0)
    tabs = tables()
    model = Toy(ToyConfig(vocab_size=V, is_encoder_decoder=False), tabs).eval()
    cases = []
    for nb in (1, 2, 4, 5):
        for lp in (0.6, 1.0, 2.0):
            for es in (0, 1, 2):
                if nb == 1 and es != 0:
                    continue
                cases.append((nb, lp, es, 0, 1.5, 2.0, 0))   # limit = floor(1.5 src + 2)
    for nb in (2, 4, 5):
        for es in (0, 1, 2):
            cases.append((nb, 1.0, es, 12, 0.0, 0.0, 0))      # one max_length, batched
            cases.append((nb, -0.5, es, 0, 1.5, 2.0, 0))      # negative penalty
            cases.append((nb, 1.0, es, 0, 2.0, 1.0, 6))       # min_length
    cases.append((1, 1.0, 0, 12, 0.0, 0.0, 0))
    cases.append((1, 1.0, 0, 0, 2.0, 1.0, 6))
    write_cases(model, tabs, cases, out, 1)
    write_cases(model, tabs, proc_cases(), out_proc, 2)


if __name__ == "__main__":
    main()
