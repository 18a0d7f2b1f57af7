#!/usr/bin/env python3
"""Builds the En-Fr parallel corpus in data/translate/ from the LibreOffice help pages.

Usage: make_translate_data.py EN_ROOT FR_ROOT OUT_DIR
  EN_ROOT, FR_ROOT: usr/share/libreoffice/help/en-US and .../fr unpacked from the Debian
  packages libreoffice-help-en-us and libreoffice-help-fr (see tools/make_translate_data.sh).

Pages are paired by path; inside a page, paragraphs and headings are paired by their id
attribute (par_id..., hd_id..., bm_id...; an id used n times in both pages pairs by order).
Text is the element's visible text (inline markup dropped; of a platform switch only the
default branch), whitespace collapsed, NFC. Pairs are dropped when a side is empty, has no
letter, is longer than MAX_CHARS, when both sides are equal, or when the length ratio is
implausible; the first pair of each English sentence (pages in byte order) is kept. The split
is by SHA-256 of the English text: the 1,500 smallest hashes are test, the next 1,500 valid.
Standard library only; the output depends on the input files alone.
"""
import hashlib, html.parser, os, re, sys, unicodedata

MAX_CHARS = 300
N_TEST = N_VALID = 1500
BLOCK = {"p", "h1", "h2", "h3", "h4", "h5", "h6"}
SKIP = {"script", "style", "noscript", "head"}


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.items = []          # (id, text) in document order
        self.cur = None          # [id, parts] of the open block element
        self.stack = []          # (tag, hides) for every open element inside the block
        self.hidden = 0          # open hidden non-default spans inside the block
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in SKIP:
            self.skip += 1
            return
        if self.cur is None:
            if tag in BLOCK and a.get("id"):
                self.cur, self.stack, self.hidden = [a["id"], []], [], 0
            return
        if tag in ("br", "img", "meta", "input", "hr", "wbr"):
            if tag == "br":
                self.cur[1].append(" ")
            return
        hides = "hidden" in a and not (a.get("id") or "").startswith("default")
        self.stack.append((tag, hides))
        self.hidden += hides

    def handle_endtag(self, tag):
        if tag in SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if self.cur is None:
            return
        if tag in BLOCK and not any(t == tag for t, _ in self.stack):
            self.items.append((self.cur[0], "".join(self.cur[1])))
            self.cur = None
            return
        while self.stack:
            t, h = self.stack.pop()
            self.hidden -= h
            if t == tag:
                break

    def handle_data(self, data):
        if self.cur is not None and not self.skip and not self.hidden:
            self.cur[1].append(data)


def clean(s):
    s = unicodedata.normalize("NFC", s)
    s = s.replace("\u00a0", " ").replace("\u202f", " ")
    return re.sub(r"\s+", " ", s).strip()


def paragraphs(path):
    p = Page()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    p.close()
    byid = {}
    for i, t in p.items:
        byid.setdefault(i, []).append(clean(t))
    return byid


def keep(en, fr):
    if not en or not fr or en == fr:
        return False
    if len(en) > MAX_CHARS or len(fr) > MAX_CHARS:
        return False
    if not any(c.isalpha() for c in en) or not any(c.isalpha() for c in fr):
        return False
    r = len(fr) / len(en)
    return 0.5 <= r <= 3.0 or (len(en) < 20 and r <= 5.0)


def main():
    en_root, fr_root, out = sys.argv[1:4]
    pages = []
    for d, _, files in os.walk(en_root):
        for f in files:
            if f.endswith(".html"):
                pages.append(os.path.relpath(os.path.join(d, f), en_root))
    pages.sort(key=lambda s: s.encode())
    seen, pairs, stats = set(), [], {"pages": 0, "aligned": 0}
    for rel in pages:
        frp = os.path.join(fr_root, rel)
        if not os.path.exists(frp):
            continue
        stats["pages"] += 1
        en, fr = paragraphs(os.path.join(en_root, rel)), paragraphs(frp)
        for i in sorted(en):
            if i not in fr or len(en[i]) != len(fr[i]):
                continue
            for e, f in zip(en[i], fr[i]):
                stats["aligned"] += 1
                if keep(e, f) and e not in seen:
                    seen.add(e)
                    pairs.append((e, f))
    pairs.sort(key=lambda p: hashlib.sha256(p[0].encode()).hexdigest())
    splits = {"test": pairs[:N_TEST], "valid": pairs[N_TEST:N_TEST + N_VALID],
              "train": pairs[N_TEST + N_VALID:]}
    os.makedirs(out, exist_ok=True)
    for name, ps in splits.items():
        for side, k in (("en", 0), ("fr", 1)):
            with open(os.path.join(out, f"{name}.{side}"), "w", encoding="utf-8", newline="\n") as f:
                for p in ps:
                    f.write(p[k] + "\n")
    print(f"pages {stats['pages']}, aligned paragraphs {stats['aligned']}, kept pairs {len(pairs)}: "
          + ", ".join(f"{k} {len(v)}" for k, v in splits.items()))


if __name__ == "__main__":
    main()
