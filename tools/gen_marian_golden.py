#!/usr/bin/python3
"""Hugging Face encoder-decoder checkpoints (Marian, mBART) and their outputs for
the translator's loader, forward and beam-search tests, made with `transformers`
4.40.2 over Debian's torch 1.13 (not needed by CI: the outputs are committed).

Usage:
  PYTHONPATH=/tmp/hfpy /usr/bin/python3 tools/gen_marian_golden.py [outdir]   (default: tests/golden)
  PYTHONPATH=/tmp/hfpy /usr/bin/python3 tools/gen_marian_golden.py --check DIR
      DIR: what ot_model_save_hf wrote (config.json + model.safetensors) plus
      check.safetensors (src_ids, src_mask, decoder_input_ids, logits of the C forward;
      test_encdec writes all three when OT_SAVE_HF_DIR=DIR is set). Loads DIR with
      MarianMTModel.from_pretrained, requires no missing / unexpected weights (besides
      the rebuilt sinusoid tables) and logits within nerr 1e-5 of the C ones.

Writes (tests/golden/README.md describes every file):
  hf_marian/       MarianMTModel, relu, tied embeddings (encoder = decoder = lm_head),
                   vocab 61, d_model 36, 3 encoder / 2 decoder layers, 3 heads, ffn 52,
                   scale_embedding, 32 positions, pad = decoder start = 60, eos 0,
                   bad_words_ids [[60]], forced_eos_token_id 0 (as the opus-mt configs);
                   config.json, generation_config.json, model.safetensors (save_pretrained),
                   logits.safetensors, beam.safetensors + beam.json (generate()).
  hf_marian_gelu/  the same with gelu (erf), lm_head not tied, d_model 32, 4 heads,
                   40 positions; logits only.
  hf_mbart/        MBartForConditionalGeneration (pre-norm, learned positions with offset 2,
                   layernorm_embedding, final encoder/decoder layer_norm), logits only.
Every parameter and final_logits_bias gets extra noise (LayerNorm gains not 1, biases
not 0); the script reloads each saved checkpoint and checks that it reproduces the
logits (so final_logits_bias and the tied / untied head survive save_pretrained).
"""
import json
import os
import sys

import torch
from transformers import MarianConfig, MarianMTModel, MBartConfig, MBartForConditionalGeneration

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import Golden  # noqa: E402

torch.set_default_dtype(torch.float32)   # gen_golden sets float64; checkpoints are F32

V, PAD, EOS = 61, 60, 0
B, S, T = 3, 9, 7
SRC_LENS = (9, 5, 1)
MAX_LENGTH = 12


def inputs(seed):
    """src_ids [B,S] right-padded with PAD, each row ending with EOS at its last
    valid position (as Marian tokenizers write it); src_mask [B,S]; decoder_input_ids
    [B,T] starting with the decoder start token (= PAD)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((B, S), PAD, dtype=torch.int64)
    mask = torch.zeros((B, S), dtype=torch.int64)
    for b, n in enumerate(SRC_LENS):
        src[b, :n - 1] = torch.randint(1, PAD, (n - 1,), generator=g)
        src[b, n - 1] = EOS
        mask[b, :n] = 1
    dec = torch.randint(1, PAD, (B, T), generator=g)
    dec[:, 0] = PAD
    return src, mask, dec


def add_noise(model, seed, emb_std=0.45, ln_noise=0.3, scale=0.05, bias_scale=0.5, eos_bias=1.5):
    """Token embeddings redrawn with emb_std, LayerNorm gains get ln_noise more, every
    parameter then gets scale * N(0,1) and final_logits_bias bias_scale * N(0,1) plus
    eos_bias on EOS (so that hypotheses end at different lengths). The values were
    picked so that beam search differs from greedy and the runs end at varied lengths.
    The first two draws continue the generator state left by the model's construction;
    the rest start from manual_seed(seed)."""
    with torch.no_grad():
        for emb in {id(e): e for e in (model.get_input_embeddings(), model.get_encoder().embed_tokens,
                                       model.get_decoder().embed_tokens)}.values():
            emb.weight.normal_(0.0, emb_std)
        for name, p in model.named_parameters():
            if ("layer_norm" in name or "layernorm" in name) and name.endswith("weight"):
                p.add_(ln_noise * torch.randn_like(p))
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():   # tied tensors appear once
            if isinstance(model, MarianMTModel) and "embed_positions" in name:
                continue    # Marian's sinusoid table is a (frozen) Parameter, rebuilt on load, not saved
            p.add_(scale * torch.randn_like(p))
        model.final_logits_bias.add_(bias_scale * torch.randn_like(model.final_logits_bias))
        model.final_logits_bias[0, EOS] += eos_bias


def forward(model, src, mask, dec):
    with torch.no_grad():
        out = model(input_ids=src, attention_mask=mask, decoder_input_ids=dec)
    return out.logits.float(), out.encoder_last_hidden_state.float()


def save(model, outdir, name, src, mask, dec, extra=None):
    """save_pretrained + reload check + logits.safetensors; returns the directory."""
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    model.eval()
    model.save_pretrained(d, safe_serialization=True)
    os.chmod(os.path.join(d, "model.safetensors"), 0o644)
    logits, enc = forward(model, src, mask, dec)
    again = type(model).from_pretrained(d).eval()
    l2, e2 = forward(again, src, mask, dec)
    assert torch.equal(again.final_logits_bias, model.final_logits_bias), "final_logits_bias lost on reload"
    assert float(model.final_logits_bias.abs().max()) > 0
    assert torch.equal(logits, l2) and torch.equal(enc, e2), name + ": reloaded model differs"
    g = Golden("logits")
    g.case()
    g.prefix = ""
    g.put("src_ids", src.to(torch.int32))
    g.put("src_mask", mask.to(torch.int32))
    g.put("decoder_input_ids", dec.to(torch.int32))
    g.put("logits", logits)
    g.put("encoder_out", enc)
    for k, v in (extra or {}).items():
        g.put(k, v)
    g.set("B", B)
    g.set("S", S)
    g.set("T", T)
    g.set("V", logits.shape[-1])
    g.write(d)
    return d


def report(d):
    total = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print("%-28s %7d bytes in %s" % (os.path.relpath(d), total, ", ".join(sorted(os.listdir(d)))))


def marian_config(**kw):
    base = dict(vocab_size=V, d_model=36, encoder_layers=3, decoder_layers=2, encoder_attention_heads=3,
                decoder_attention_heads=3, encoder_ffn_dim=52, decoder_ffn_dim=52, activation_function="relu",
                scale_embedding=True, max_position_embeddings=32, pad_token_id=PAD, decoder_start_token_id=PAD,
                eos_token_id=EOS, forced_eos_token_id=EOS, bad_words_ids=[[PAD]], dropout=0.0,
                attention_dropout=0.0, activation_dropout=0.0, init_std=0.2, attn_implementation="eager")
    base.update(kw)
    return MarianConfig(**base)


RUNS = [  # name, generate() kwargs besides the inputs
    ("greedy", dict(num_beams=1, do_sample=False, max_length=MAX_LENGTH)),
    ("beam4_lp10_esT", dict(num_beams=4, length_penalty=1.0, early_stopping=True)),
    ("beam4_lp10_esF", dict(num_beams=4, length_penalty=1.0, early_stopping=False)),
    ("beam4_lp06_esT", dict(num_beams=4, length_penalty=0.6, early_stopping=True)),
    ("beam4_lp06_esF", dict(num_beams=4, length_penalty=0.6, early_stopping=False)),
]
for _, kw in RUNS[1:]:
    kw.update(do_sample=False, max_length=MAX_LENGTH, num_return_sequences=1)


def generate_all(model, src, mask):
    """Runs every RUNS entry; returns {name: (kwargs, sequences [B,L], lengths [B], scores [B] or None)}.
    length = tokens up to and including the first EOS, counting the decoder start token."""
    res = {}
    for name, kw in RUNS:
        with torch.no_grad():
            out = model.generate(input_ids=src, attention_mask=mask, return_dict_in_generate=True,
                                 output_scores=True, **kw)
        seq = out.sequences
        lens = []
        for row in seq.tolist():
            lens.append(row.index(EOS, 1) + 1 if EOS in row[1:] else len(row))
        scores = out.sequences_scores.float() if getattr(out, "sequences_scores", None) is not None else None
        res[name] = (kw, seq, torch.tensor(lens), scores)
    return res


def write_beam(d, model, src, mask, res):
    gc = model.generation_config
    settings = {k: getattr(gc, k) for k in (
        "decoder_start_token_id", "pad_token_id", "eos_token_id", "bos_token_id", "forced_eos_token_id",
        "forced_bos_token_id", "bad_words_ids", "no_repeat_ngram_size", "repetition_penalty", "min_length",
        "min_new_tokens", "max_new_tokens", "renormalize_logits", "suppress_tokens", "begin_suppress_tokens",
        "num_beam_groups", "diversity_penalty", "remove_invalid_values")}
    g = Golden("beam")
    g.case()
    g.prefix = ""
    g.put("src_ids", src.to(torch.int32))
    g.put("src_mask", mask.to(torch.int32))
    js = {"generation_config_in_effect": settings, "src_ids": src.tolist(), "src_mask": mask.tolist(), "runs": {}}
    for name, (kw, seq, lens, scores) in res.items():
        g.put(name + ".sequences", seq.to(torch.int32))
        g.put(name + ".lengths", lens.to(torch.int32))
        if scores is not None:
            g.put(name + ".scores", scores)
        g.set(name + ".kwargs", json.dumps(kw, sort_keys=True))
        js["runs"][name] = {"kwargs": kw, "sequences": seq.tolist(), "lengths": lens.tolist(),
                            "sequences_scores": None if scores is None else [float(x) for x in scores]}
    g.set("runs", ",".join(res))
    g.set("generation_config", json.dumps(settings, sort_keys=True))
    g.write(d)
    with open(os.path.join(d, "beam.json"), "w") as f:
        json.dump(js, f, indent=1, sort_keys=True)
        f.write("\n")


def sinusoids(model):
    assert torch.equal(model.model.encoder.embed_positions.weight, model.model.decoder.embed_positions.weight)
    return {"sinusoid_pos": model.model.encoder.embed_positions.weight.detach().float()}


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
    src, mask, dec = inputs(14)

    # hf_marian: relu, tied three ways, with beam search outputs.
    torch.manual_seed(145)
    m = MarianMTModel(marian_config()).eval()
    add_noise(m, 146)
    d = save(m, outdir, "hf_marian", src, mask, dec, sinusoids(m))
    res = generate_all(m, src, mask)
    write_beam(d, m, src, mask, res)
    for name, (_, seq, lens, scores) in res.items():
        print("  %-16s lens %s scores %s" % (name, lens.tolist(), None if scores is None else
                                              ["%.4f" % x for x in scores]))
        for row in seq.tolist():
            print("      ", row)
    report(d)

    # hf_marian_gelu: exact gelu, separate (untied) lm_head, 4 heads of 8.
    torch.manual_seed(143)
    m = MarianMTModel(marian_config(activation_function="gelu", tie_word_embeddings=False, d_model=32,
                                    encoder_attention_heads=4, decoder_attention_heads=4,
                                    max_position_embeddings=40)).eval()
    add_noise(m, 144)
    assert m.lm_head.weight.data_ptr() != m.model.shared.weight.data_ptr()
    report(save(m, outdir, "hf_marian_gelu", src, mask, dec, sinusoids(m)))

    # hf_mbart: pre-norm, learned positions (offset 2), embedding and final layer norms.
    torch.manual_seed(145)
    cfg = MBartConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                      decoder_attention_heads=4, encoder_ffn_dim=44, decoder_ffn_dim=44,
                      activation_function="gelu", scale_embedding=True, max_position_embeddings=24,
                      pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=EOS, bos_token_id=1,
                      forced_eos_token_id=EOS, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                      init_std=0.2, attn_implementation="eager")
    m = MBartForConditionalGeneration(cfg).eval()
    add_noise(m, 146)
    report(save(m, outdir, "hf_mbart", src, mask, dec))


def check(d):
    """--check DIR: MarianMTModel.from_pretrained loads what ot_model_save_hf wrote and
    reproduces the logits the C forward computed (check.safetensors)."""
    from safetensors.torch import load_file
    m, info = MarianMTModel.from_pretrained(d, output_loading_info=True)
    m.eval()
    rebuilt = {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}
    missing = [k for k in info["missing_keys"] if k not in rebuilt]
    bad = missing + list(info["unexpected_keys"]) + list(info["mismatched_keys"])
    t = load_file(os.path.join(d, "check.safetensors"))
    with torch.no_grad():
        out = m(input_ids=t["src_ids"].long(), attention_mask=t["src_mask"].long(),
                decoder_input_ids=t["decoder_input_ids"].long()).logits.float()
    want = t["logits"].reshape(out.shape)
    nerr = float((out - want).norm() / want.norm())
    print("check %s: missing %s, unexpected %s, mismatched %s; logits nerr %.3g" % (
        d, missing, info["unexpected_keys"], info["mismatched_keys"], nerr))
    ok = not bad and nerr < 1e-5
    print("check: %s" % ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    main()
