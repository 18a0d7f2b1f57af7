"""Writes bench/translate_torch.py's Seq2Seq as a Hugging Face MarianMTModel directory
(config.json, generation_config.json, model.safetensors, plus the tokenizer's vocab.json and
merges.txt), so the same trained weights can be given to CTranslate2's converter and to
`ot translate --model DIR`. With transformers importable it reloads the directory and prints
the largest logit difference against the torch model.

Names: nn.MultiheadAttention's fused in_proj [3d, d] splits into q_proj / k_proj / v_proj;
linear1 / linear2 are fc1 / fc2; encoder norm1 / norm2 are self_attn_layer_norm /
final_layer_norm; decoder norm1 / norm2 / norm3 are self_attn_layer_norm /
encoder_attn_layer_norm / final_layer_norm; the one embedding is model.shared.weight (encoder,
decoder and head all tied, as Marian stores it), final_logits_bias the trained bias
(--logits-bias) or zeros. Marian's sinusoid
table is rebuilt on load and not stored.
"""
import json
import os
import shutil

import torch


def _attn(out, pre, m, d):
    w, b = m.in_proj_weight.detach(), m.in_proj_bias.detach()
    for j, n in enumerate(("q_proj", "k_proj", "v_proj")):
        out[f"{pre}.{n}.weight"] = w[j * d:(j + 1) * d]
        out[f"{pre}.{n}.bias"] = b[j * d:(j + 1) * d]
    out[f"{pre}.out_proj.weight"] = m.out_proj.weight.detach()
    out[f"{pre}.out_proj.bias"] = m.out_proj.bias.detach()


def _copy(out, pre, m):
    out[pre + ".weight"] = m.weight.detach()
    out[pre + ".bias"] = m.bias.detach()


def state_dict_hf(model):
    d, V, out = model.d, model.V, {}
    out["model.shared.weight"] = model.emb.weight.detach()[:V]
    lb = getattr(model, "lbias", None)
    out["final_logits_bias"] = torch.zeros(1, V) if lb is None else lb.detach()[None, :V]
    for i, l in enumerate(model.enc.layers):
        p = f"model.encoder.layers.{i}"
        _attn(out, p + ".self_attn", l.self_attn, d)
        _copy(out, p + ".self_attn_layer_norm", l.norm1)
        _copy(out, p + ".fc1", l.linear1), _copy(out, p + ".fc2", l.linear2)
        _copy(out, p + ".final_layer_norm", l.norm2)
    for i, l in enumerate(model.dec.layers):
        p = f"model.decoder.layers.{i}"
        _attn(out, p + ".self_attn", l.self_attn, d)
        _copy(out, p + ".self_attn_layer_norm", l.norm1)
        _attn(out, p + ".encoder_attn", l.multihead_attn, d)
        _copy(out, p + ".encoder_attn_layer_norm", l.norm2)
        _copy(out, p + ".fc1", l.linear1), _copy(out, p + ".fc2", l.linear2)
        _copy(out, p + ".final_layer_norm", l.norm3)
    return {k: v.float().contiguous().clone() for k, v in out.items()}


def config_hf(model, a, special):
    enc, dec = model.enc.layers, model.dec.layers
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian",
        "activation_function": "relu", "d_model": a.d, "vocab_size": model.V,
        "decoder_vocab_size": model.V, "encoder_layers": len(enc), "decoder_layers": len(dec),
        "num_hidden_layers": len(enc), "encoder_attention_heads": a.heads,
        "decoder_attention_heads": a.heads, "encoder_ffn_dim": a.ff, "decoder_ffn_dim": a.ff,
        "max_position_embeddings": a.max_len, "scale_embedding": True,
        "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
        "normalize_before": False, "dropout": a.dropout, "attention_dropout": a.attn_dropout,
        "activation_dropout": a.act_dropout, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
        "init_std": a.init_std, "is_encoder_decoder": True, "use_cache": True,
        "pad_token_id": special, "eos_token_id": special, "decoder_start_token_id": special,
        "forced_eos_token_id": special, "torch_dtype": "float32",
    }


def save_hf(model, a, voc, special, out_dir):
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    save_file(state_dict_hf(model), os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_hf(model, a, special), f, indent=2)
    gen = {"decoder_start_token_id": special, "eos_token_id": special, "pad_token_id": special,
           "forced_eos_token_id": special, "num_beams": a.beam}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    for n in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(a.tokenizer, n), os.path.join(out_dir, n))
    print(f"saved MarianMTModel directory {out_dir}")
    try:
        import transformers
    except ImportError:
        return
    check_hf(model, out_dir, special, transformers)


@torch.no_grad()
def check_hf(model, out_dir, special, transformers):
    """Reloads out_dir with MarianMTModel and prints max |logits - ours| on random input."""
    hf = transformers.MarianMTModel.from_pretrained(out_dir).eval()
    was = model.training
    model.eval()
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, model.V, (2, 9), generator=g)
    src[:, -1] = special
    src[1, 5:] = special
    spad = torch.zeros(2, 9, dtype=torch.bool)
    spad[1, 6:] = True
    dec = torch.randint(0, model.V, (2, 7), generator=g)
    dec[:, 0] = special
    ours = model(src, spad, dec)
    theirs = hf(input_ids=src, attention_mask=(~spad).long(), decoder_input_ids=dec).logits
    err = float((ours - theirs).abs().max())
    print(f"reloaded with transformers {transformers.__version__} MarianMTModel: max |logit diff| {err:.2e}")
    model.train(was)


@torch.no_grad()
def load_hf(model, path):
    """The inverse of state_dict_hf: loads a MarianMTModel model.safetensors (a directory holding
    one: a --save-hf directory, an `ot train` checkpoint or an `ot export` directory) into the
    Seq2Seq model; q/k/v join into in_proj. Refuses a file whose names or shapes do not fit."""
    from safetensors.torch import load_file
    f = os.path.join(path, "model.safetensors") if os.path.isdir(path) else path
    sd = load_file(f)
    want = state_dict_hf(model)
    missing = sorted(set(want) - set(sd))
    if missing:
        raise SystemExit(f"--load-hf {f}: tensors missing: {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''}")
    for k, v in want.items():
        if tuple(sd[k].shape) != tuple(v.shape):
            raise SystemExit(f"--load-hf {f}: {k} is {tuple(sd[k].shape)}, the model's is {tuple(v.shape)}")
    for name, p, rows in _param_names(model):   # the fused qkv_proj from the file's q/k/v
        if ".qkv_proj." in name:
            t = torch.cat([sd[name.replace("qkv_proj", n + "_proj")] for n in "qkv"])
        else:
            t = sd[name].reshape(-1) if name == "final_logits_bias" else sd[name]
        if rows is None:
            p[:] = t
        else:
            p[:rows] = t
            p[rows:] = 0
    print(f"loaded {f}")


def _param_names(model):
    """(HF name, parameter, rows) for every trained tensor of the Seq2Seq model; attention
    in_proj as ot's fused qkv_proj (rows q, k, v), the embedding's first V rows."""
    out = [("model.shared.weight", model.emb.weight, model.V)]
    if getattr(model, "lbias", None) is not None:
        out.append(("final_logits_bias", model.lbias, None))
    def attn(pre, m):
        out.extend([(pre + ".qkv_proj.weight", m.in_proj_weight, None), (pre + ".qkv_proj.bias", m.in_proj_bias, None),
                    (pre + ".out_proj.weight", m.out_proj.weight, None), (pre + ".out_proj.bias", m.out_proj.bias, None)])
    def lin(pre, m):
        out.extend([(pre + ".weight", m.weight, None), (pre + ".bias", m.bias, None)])
    for i, l in enumerate(model.enc.layers):
        p = f"model.encoder.layers.{i}"
        attn(p + ".self_attn", l.self_attn)
        for n, m in (("self_attn_layer_norm", l.norm1), ("fc1", l.linear1), ("fc2", l.linear2),
                     ("final_layer_norm", l.norm2)):
            lin(f"{p}.{n}", m)
    for i, l in enumerate(model.dec.layers):
        p = f"model.decoder.layers.{i}"
        attn(p + ".self_attn", l.self_attn)
        attn(p + ".encoder_attn", l.multihead_attn)
        for n, m in (("self_attn_layer_norm", l.norm1), ("encoder_attn_layer_norm", l.norm2), ("fc1", l.linear1),
                     ("fc2", l.linear2), ("final_layer_norm", l.norm3)):
            lin(f"{p}.{n}", m)
    return out


@torch.no_grad()
def load_ot_state(model, opt, ckpt):
    """Continues an `ot train` run in torch: the weights of checkpoint directory ckpt
    (load_hf) and its Adam moments (optimizer.safetensors: exp_avg.<name>, exp_avg_sq.<name>)
    as torch.optim.Adam's state at the checkpoint's step. Returns that step."""
    from safetensors import safe_open
    load_hf(model, ckpt)
    f = safe_open(os.path.join(ckpt, "optimizer.safetensors"), "pt")
    meta = f.metadata() or {}
    step = int(meta.get("step", meta.get("train.step", "0")))
    if step <= 0:
        raise SystemExit(f"--resume-ot {ckpt}: no step in optimizer.safetensors' metadata "
                         f"(keys: {', '.join(sorted(meta)[:6])} ...)")
    keys = set(f.keys())
    for name, p, rows in _param_names(model):
        st = {"step": torch.tensor(float(step))}
        for k in ("exp_avg", "exp_avg_sq"):
            if f"{k}.{name}" not in keys:
                raise SystemExit(f"--resume-ot {ckpt}: {k}.{name} missing")
            t = f.get_tensor(f"{k}.{name}").float().reshape(-1)
            z = torch.zeros_like(p)
            z.reshape(-1)[: t.numel()] = t
            if t.numel() != (p.numel() if rows is None else rows * p.shape[1]):
                raise SystemExit(f"--resume-ot {ckpt}: {k}.{name} has {t.numel()} values, the model's "
                                 f"{p.numel()}")
            st[k] = z
        opt.state[p] = st
    print(f"continuing ot's run from {ckpt}: weights and Adam moments at step {step}")
    return step
