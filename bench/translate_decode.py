"""Incremental greedy / beam decoding for bench/translate_torch.py's Seq2Seq (eval mode).

The decoder layers' own weights are applied one position at a time: self-attention keys and
values are cached per layer, cross-attention keys and values are projected from the encoder
output once per sentence. The math is nn.TransformerDecoderLayer's post-norm forward without
dropout (check_incremental compares it with the full forward).

Beam search as Hugging Face generate (transformers 4.40) with num_beams K: each step takes the
2K best (beam score + log p) continuations; an eos among the first K closes a hypothesis with
score sum(log p) / L^length_penalty, L = tokens generated with the eos (HF's cur_len + 1 -
decoder_prompt_len, as ot's beam search); the other K best
continue. A sentence is done when it has K hypotheses (--no-early-stop: when no open beam
can beat the worst of them, HF early_stopping=False) or at its length limit
min(a * src_len + b, max_len - 1) new tokens (--hf-limit: floor(a * (src_len + eos) + b) - 1,
`ot translate --max-len-a a --max-len-b b` and HF max_length counting the decoder start), where
the open beams close as hypotheses. K = 1 is greedy.
"""
import math

import torch
import torch.nn.functional as F


def _heads(x, H):
    N, T, d = x.shape
    return x.view(N, T, H, d // H).transpose(1, 2)


def _proj(m, x, part):
    """part 0/1/2 of the fused q/k/v projection of nn.MultiheadAttention m."""
    d = m.embed_dim
    return F.linear(x, m.in_proj_weight[part * d:(part + 1) * d], m.in_proj_bias[part * d:(part + 1) * d])


def _attend(m, q, k, v, mask=None):
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    N, H, T, dh = o.shape
    return m.out_proj(o.transpose(1, 2).reshape(N, T, H * dh))


class State:
    """Per-layer caches for N rows: self k/v [N, H, t, dh], cross k/v [N, H, S, dh], the
    cross-attention mask [N, 1, 1, S] (True = attend)."""

    def __init__(self, model, mem, src_pad):
        self.H = model.dec.layers[0].self_attn.num_heads
        self.cross = [(_heads(_proj(l.multihead_attn, mem, 1), self.H),
                       _heads(_proj(l.multihead_attn, mem, 2), self.H)) for l in model.dec.layers]
        self.selfkv = [None] * len(model.dec.layers)
        self.mask = (~src_pad)[:, None, None, :]

    def reorder(self, idx):
        self.cross = [(k[idx], v[idx]) for k, v in self.cross]
        self.selfkv = [(k[idx], v[idx]) for k, v in self.selfkv]
        self.mask = self.mask[idx]


def step(model, st, tok, t):
    """tok [N] ids at position t -> log-probabilities [N, V] of the next token."""
    x = model.emb(tok[:, None]) * model.scale + model.pos[t:t + 1]
    for i, l in enumerate(model.dec.layers):
        sa = l.self_attn
        q, k, v = (_heads(_proj(sa, x, j), st.H) for j in range(3))
        if st.selfkv[i] is not None:
            k = torch.cat([st.selfkv[i][0], k], 2)
            v = torch.cat([st.selfkv[i][1], v], 2)
        st.selfkv[i] = (k, v)
        x = l.norm1(x + _attend(sa, q, k, v))
        ca = l.multihead_attn
        q = _heads(_proj(ca, x, 0), st.H)
        x = l.norm2(x + _attend(ca, q, st.cross[i][0], st.cross[i][1], st.mask))
        x = l.norm3(x + l.linear2(l.activation(l.linear1(x))))
    logits = model.head(x[:, 0])
    return F.log_softmax(logits.float(), -1)


@torch.no_grad()
def check_incremental(model, src, src_pad, dec_in):
    """Max |difference| between the incremental and the full forward's log-probabilities."""
    full = F.log_softmax(model(src, src_pad, dec_in).float(), -1)
    st = State(model, model.encode(src, src_pad), src_pad)
    return max(float((step(model, st, dec_in[:, t], t) - full[:, t]).abs().max())
               for t in range(dec_in.shape[1]))


@torch.no_grad()
def _search(model, src, src_pad, src_lens, eos, a):
    """One batch: src [N, S] -> N lists of generated ids (without the final eos)."""
    N, K, lp = src.shape[0], a.beam, a.length_penalty
    if getattr(a, "hf_limit", False):   # HF max_length / ot translate: counts the decoder start
        e = 1 if a.src_eos else 0         # and a source length with its eos
        limit = [min(math.floor(a.max_len_a * (n + e) + a.max_len_b) - 1, a.max_len - 1) for n in src_lens]
    else:
        limit = [min(int(a.max_len_a * n + a.max_len_b), a.max_len - 1) for n in src_lens]
    mem = model.encode(src, src_pad)
    rep = torch.arange(N).repeat_interleave(K)
    st = State(model, mem[rep], src_pad[rep])
    score = torch.full((N, K), float("-inf"))
    score[:, 0] = 0.0
    seqs = [[] for _ in range(N * K)]
    tok = torch.full((N * K,), eos, dtype=torch.long)
    hyps = [[] for _ in range(N)]
    done = [False] * N
    for t in range(max(limit)):
        logp = step(model, st, tok, t)
        V = logp.shape[-1]
        cand = (score[:, :, None] + logp.view(N, K, V)).view(N, K * V)
        val, idx = cand.topk(2 * K, dim=1)
        val, idx = val.tolist(), idx.tolist()
        nxt_rows, nxt_tok, nxt_score = [], [], []
        for n in range(N):
            rows, toks, scs = [], [], []
            if not done[n]:
                for j in range(2 * K):
                    b, w = divmod(idx[n][j], V)
                    if w == eos:
                        if j < K:
                            L = t + 1   # tokens generated, the eos included (HF, ot)
                            hyps[n].append((val[n][j] / (L ** lp if L else 1.0), seqs[n * K + b]))
                        continue
                    rows.append(n * K + b), toks.append(w), scs.append(val[n][j])
                    if len(rows) == K:
                        break
                if len(hyps[n]) >= K:
                    if a.early_stop:
                        done[n] = True
                    else:
                        worst = sorted(h[0] for h in hyps[n])[-K]
                        best_open = scs[0] / ((t + 1) ** lp) if scs else float("-inf")
                        done[n] = worst >= best_open
                if not done[n] and t + 1 >= limit[n]:
                    for r, w, s in zip(rows, toks, scs):
                        hyps[n].append((s / ((t + 1) ** lp), seqs[r] + [w]))
                    done[n] = True
            if done[n]:
                rows, toks, scs = [n * K] * K, [eos] * K, [float("-inf")] * K
            nxt_rows += rows
            nxt_tok += toks
            nxt_score += scs
        if all(done):
            break
        seqs = [seqs[r] + [w] for r, w in zip(nxt_rows, nxt_tok)]
        st.reorder(torch.tensor(nxt_rows))
        tok = torch.tensor(nxt_tok)
        score = torch.tensor(nxt_score).view(N, K)
    return [max(h, key=lambda x: x[0])[1] if h else [] for h in hyps]


def translate(model, srcs, src_lens, eos, a):
    """srcs: lists of source ids (with their eos); src_lens: lengths for the limit.
    Batches of --decode-batch sentences sorted by length; results in input order."""
    order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))
    out = [None] * len(srcs)
    for c in range(0, len(order), a.decode_batch):
        b = order[c:c + a.decode_batch]
        S = max(len(srcs[i]) for i in b)
        src = torch.full((len(b), S), eos, dtype=torch.long)
        pad = torch.ones((len(b), S), dtype=torch.bool)
        for r, i in enumerate(b):
            src[r, : len(srcs[i])] = torch.tensor(srcs[i])
            pad[r, : len(srcs[i])] = False
        for i, o in zip(b, _search(model, src, pad, [src_lens[i] for i in b], eos, a)):
            out[i] = o
    return out
