"""patch() under Hugging Face transformers: tiny random GPT-2 and Llama (no downloads)."""
import warnings

import pytest
import torch

import ops_transformer as ot
from ops_transformer import attention

transformers = pytest.importorskip("transformers")


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                  attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg)


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg)


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = attention.flash_fwd

    def f(*a):
        calls.append(a[0].shape)
        return real(*a)
    monkeypatch.setattr(attention, "flash_fwd", f)
    yield calls
    ot.unpatch()


@pytest.mark.parametrize("make", [_gpt2, _llama])
def test_generate_and_train_step(make, counted):
    torch.manual_seed(0)
    model = make()
    model.config._attn_implementation = "sdpa"
    ids = torch.randint(0, 97, (1, 9))
    gen = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    model.eval()
    ref_tokens = model.generate(ids, **gen)
    batch = torch.randint(0, 97, (2, 16))
    am = torch.ones(2, 16, dtype=torch.long)
    am[1, 11:] = 0                                     # right padding
    labels = batch.masked_fill(am == 0, -100)
    model.train()
    ref_loss = model(batch, attention_mask=am, labels=labels).loss
    ref_grads = torch.autograd.grad(ref_loss, list(model.parameters()))

    ot.patch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no fallback on these paths
        model.eval()
        tokens = model.generate(ids, **gen)
        model.train()
        loss = model(batch, attention_mask=am, labels=labels).loss
        grads = torch.autograd.grad(loss, list(model.parameters()))
    assert counted, "our kernel was not called"
    assert torch.equal(tokens, ref_tokens)
    assert abs(loss.item() - ref_loss.item()) < 1e-5
    for a, b in zip(grads, ref_grads):
        assert (a - b).abs().max() <= 1e-4 * max(1.0, b.abs().max().item())


def test_gpt2_attention_dropout_runs_on_our_kernel(counted):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                  attn_pdrop=0.1, resid_pdrop=0.0, embd_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg).train()
    model.config._attn_implementation = "sdpa"
    batch = torch.randint(0, 97, (2, 16))
    ot.patch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.manual_seed(1)
        loss = model(batch, labels=batch).loss
        torch.manual_seed(1)
        again = model(batch, labels=batch).loss
        loss.backward()
    assert counted and torch.isfinite(loss) and loss.item() == again.item()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
