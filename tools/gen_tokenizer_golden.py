#!/usr/bin/env python3
"""Golden ids for tests/test_tokenizer_golden.c, from the reference GPT-2
tokenizer (tiktoken, fed the committed data/gpt2/vocab.json + merges.txt, so
nothing is downloaded), cross-checked against a second, independent
implementation: GPT-2's original encoder algorithm (the `regex` module and
merge ranks).

Usage (not run by CI; needs `pip install tiktoken regex`, e.g. in a venv):
    python3 tools/gen_tokenizer_golden.py [out.json]   (default tests/golden/tokenizer_gpt2.json)

The JSON holds
  cases:  [{"name", "text", "allow_special", "ids"}]: hand-written tricky texts
          (contractions, digits, unicode letters, emoji, whitespace runs,
          newlines, the special token) and seeded random mixes of them;
  corpus: {"path", "bytes", "tokens", "fnv1a64"}: the whole bundled corpus
          encoded, summarized by the FNV-1a-64 of its ids as little-endian
          uint32 bytes (the C test recomputes it).
"""
import json
import random
import struct
import sys

import regex
import tiktoken

VOCAB, MERGES = "data/gpt2/vocab.json", "data/gpt2/merges.txt"
CORPUS = "data/shakespeare.txt"
PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def load():
    b2u = bytes_to_unicode()
    u2b = {v: k for k, v in b2u.items()}
    vocab = json.load(open(VOCAB, encoding="utf-8"))
    lines = open(MERGES, encoding="utf-8").read().split("\n")
    merges = [tuple(l.split(" ")) for l in lines[1:] if l]
    ranks = {}
    for tok, i in vocab.items():
        if tok == EOT:
            continue
        ranks[bytes(u2b[c] for c in tok)] = i
    for r, (a, b) in enumerate(merges):  # GPT-2: merged token id == 256 + rank
        assert vocab[a + b] == 256 + r, (a, b)
    enc = tiktoken.Encoding(name="gpt2_local", pat_str=PAT, mergeable_ranks=ranks,
                            special_tokens={EOT: vocab[EOT]})
    return enc, vocab, merges, b2u


class Reference:
    """GPT-2's encoder.py algorithm, written out (second opinion)."""

    def __init__(self, vocab, merges, b2u):
        self.vocab, self.b2u = vocab, b2u
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.pat = regex.compile(PAT)

    def bpe(self, word):
        word = list(word)
        while len(word) > 1:
            pairs = [(self.ranks.get((word[i], word[i + 1]), 1 << 30), i) for i in range(len(word) - 1)]
            r, i = min(pairs)
            if r == 1 << 30:
                break
            a, b = word[i], word[i + 1]
            out, j = [], 0
            while j < len(word):  # merge every occurrence, left to right
                if j + 1 < len(word) and word[j] == a and word[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(word[j])
                    j += 1
            word = out
        return word

    def encode(self, text, allow_special):
        parts = text.split(EOT) if allow_special else [text]
        ids = []
        for k, part in enumerate(parts):
            if k:
                ids.append(self.vocab[EOT])
            for piece in self.pat.findall(part):
                u = "".join(self.b2u[b] for b in piece.encode("utf-8"))
                ids.extend(self.vocab[t] for t in self.bpe(u))
        return ids


CASES = [
    ("empty", ""),
    ("hello", "Hello world"),
    ("contractions", "I'm sure you'll see they're right: it's what we've said, he'd know, don't you?"),
    ("contractions_upper", "DON'T YOU'LL I'M 'S 'T 'RE 'Ve 'lL"),
    ("quotes", "'''quoted''' '' ' 's 'x ''s ‘curly’ “double”"),
    ("digits", "123 4567 89012345 3.14159 1,000,000 2024-05-20 0x1F 1e-9 ½ ² Ⅻ ٣٤ １２"),
    ("spaces", "a  b   c    d\t\te \t f\u00a0g\u3000h"),
    ("trailing_spaces", "end   "),
    ("only_spaces", "     "),
    ("leading_space", " leading and  double"),
    ("newlines", "line one\nline two\n\nparagraph\n\n\n   indented\r\nwindows\n"),
    ("unicode_letters", "naïve café Straße Ελληνικά русский текст 中文字符 日本語のテキスト 한국어 עברית العربية"),
    ("combining", "e\u0301 n\u0303o Devanagari: हिन्दी भाषा Thai: ภาษาไทย"),
    ("emoji", "I ❤️ 🍕! 👍🏽 👨‍👩‍👧‍👦 🇺🇸🇫🇷 ✨✨ 😀😃😄"),
    ("symbols", "$%^&*()_+-=[]{}|;:,.<>/?`~ @user #tag -- ... !!! ??? ©®™ €£¥"),
    ("code", "def foo(x):\n    return x ** 2  # square\n\nif __name__ == '__main__':\n\tprint(foo(3))\n"),
    ("url", "https://example.com/path?q=1&r=two#frag mailto:a.b@c.org"),
    ("zero_width", "zero\u200bwidth\u200djoin\ufefffeff"),
    ("mixed_scripts", "abc123def ΑΒΓ123 中文123 x1y2z3"),
    ("special_text", "text <|endoftext|> more"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis " * 3 + "a" * 300 + " " + "x" * 1000),
    ("long_space", " " * 500 + "word" + "\n" * 300),
]
SPECIAL_CASES = [
    ("special_token", "first document<|endoftext|>second document"),
    ("special_edges", "<|endoftext|>  spaces before<|endoftext|><|endoftext|>\n<|endoftext|>"),
]

ALPHABET = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") +
            list("  \t\n\n\r'''.,;:!?-\"()[]{}$%&*/\\_") +
            ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S"] +
            list("éßñüøåçÉ") + list("αβγδΩ") + list("жизнь") + list("中文字") + list("日本") +
            list("½²٣１") + ["\u00a0", "\u3000", "\u2028", "\u0301", "\u200b"] +
            ["❤️", "🍕", "👍🏽", "😀", "🇺🇸"])


def random_cases(n, seed=20240520):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.randint(0, 60)
        out.append((f"random_{i}", "".join(rng.choice(ALPHABET) for _ in range(k))))
    return out


def fnv1a64(ids):
    h = 0xcbf29ce484222325
    for b in struct.pack(f"<{len(ids)}I", *ids):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden/tokenizer_gpt2.json"
    enc, vocab, merges, b2u = load()
    ref = Reference(vocab, merges, b2u)
    cases = []
    for allow, lst in ((False, CASES + random_cases(300)), (True, SPECIAL_CASES)):
        for name, text in lst:
            if allow:
                ids = enc.encode(text, allowed_special={EOT})
            else:
                ids = enc.encode(text, disallowed_special=())
            want = ref.encode(text, allow)
            if ids != want:
                sys.exit(f"{name}: tiktoken and the reference disagree:\n{ids}\n{want}")
            assert enc.decode(ids) == text
            cases.append({"name": name, "text": text, "allow_special": allow, "ids": ids})
    corpus = open(CORPUS, "rb").read()
    cids = enc.encode(corpus.decode("utf-8"), disallowed_special=())
    assert cids[:5000] == ref.encode(corpus[:20000].decode("utf-8"), False)[:5000]
    doc = {
        "source": "tiktoken %s with data/gpt2/vocab.json + merges.txt; cross-checked with GPT-2's "
                  "encoder algorithm (regex %s)" % (tiktoken.__version__, regex.__version__),
        "cases": cases,
        "corpus": {"path": CORPUS, "bytes": len(corpus), "tokens": len(cids),
                   "fnv1a64": "%016x" % fnv1a64(cids)},
    }
    with open(out, "w", encoding="ascii") as f:
        json.dump(doc, f, ensure_ascii=True, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"{out}: {len(cases)} cases, corpus {len(corpus)} bytes -> {len(cids)} tokens")


if __name__ == "__main__":
    main()
