"""Helpers shared by bench/translate_torch.py and bench/translate_ct2.py (no third-party
imports here): the id dumps of `ot prepare --task translate --dump-ids FILE`, the
tokenizer's vocabulary and GPT-2 byte-level decoding, medians, table printing.

Id dump format: one line per sentence pair, `src ids<TAB>tgt ids`, each side a list of
space-separated integers; the target carries neither the decoder start nor the eos.
The tokenizer directory holds vocab.json + merges.txt in GPT-2's format (byte-level BPE),
whose one special token `<|endoftext|>` is eos = decoder start = source padding.
"""
import json
import os
import statistics

SPECIAL = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's reversible map from the 256 byte values to printable characters: the
    printable Latin-1 bytes ('!'..'~', '\xa1'..'\xac', '\xae'..'\xff') map to themselves,
    every other byte b to chr(256 + k), k counting those bytes in increasing order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, k = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + k)
            k += 1
    return out


class Vocab:
    """vocab.json of a GPT-2-format tokenizer directory: token string <-> id, and
    byte-level decoding of ids back to text."""

    def __init__(self, tok_dir, special=SPECIAL):
        path = os.path.join(tok_dir, "vocab.json")
        with open(path, encoding="utf-8") as f:
            self.tok2id = json.load(f)
        self.size = max(self.tok2id.values()) + 1
        self.id2tok = [None] * self.size
        for t, i in self.tok2id.items():
            self.id2tok[i] = t
        missing = [i for i, t in enumerate(self.id2tok) if t is None]
        if missing:
            raise SystemExit(f"{path}: ids {missing[:5]}... have no token (ids must be 0..{self.size - 1})")
        if special not in self.tok2id:
            raise SystemExit(f"{path}: no {special!r} token; give its id with --special-id")
        self.special = self.tok2id[special]
        self.byte_of = {c: b for b, c in bytes_to_unicode().items()}

    def decode(self, ids, skip=()):
        """ids -> text: token strings concatenated, each character mapped back to its byte,
        the bytes read as UTF-8 (invalid sequences become U+FFFD); ids in skip dropped."""
        buf = bytearray()
        for i in ids:
            if i in skip:
                continue
            for c in self.id2tok[i]:
                b = self.byte_of.get(c)
                if b is None:   # a special token's characters are not byte symbols
                    buf.extend(c.encode("utf-8"))
                else:
                    buf.append(b)
        return buf.decode("utf-8", errors="replace")

    def tokens(self, ids):
        return [self.id2tok[i] for i in ids]

    def ids(self, tokens):
        return [self.tok2id[t] for t in tokens]


def read_dump(path, vocab_size=None):
    """Reads an id dump: a list of (src ids, tgt ids) pairs of lists of ints."""
    pairs = []
    with open(path, encoding="ascii") as f:
        for ln, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if "\t" not in line:
                raise SystemExit(f"{path}:{ln}: expected 'src ids<TAB>tgt ids'")
            s, t = line.split("\t", 1)
            try:
                src = [int(x) for x in s.split()]
                tgt = [int(x) for x in t.split()]
            except ValueError:
                raise SystemExit(f"{path}:{ln}: ids must be integers")
            if vocab_size is not None:
                bad = [x for x in src + tgt if x < 0 or x >= vocab_size]
                if bad:
                    raise SystemExit(f"{path}:{ln}: id {bad[0]} outside the vocabulary [0, {vocab_size})")
            pairs.append((src, tgt))
    return pairs


def one_line(text):
    """A translation as one output line: no newlines inside, outer whitespace stripped."""
    return text.replace("\r", " ").replace("\n", " ").strip()


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def print_table(header, rows):
    """Prints rows (lists of strings) under header, columns padded to their widest cell."""
    cells = [header] + rows
    w = [max(len(r[j]) for r in cells) for j in range(len(header))]
    line = lambda r: "  ".join(c.rjust(w[j]) if j else c.ljust(w[j]) for j, c in enumerate(r))
    print(line(header))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print(line(r))
