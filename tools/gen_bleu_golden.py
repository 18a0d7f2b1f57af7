"""Writes tests/golden/bleu/: hypothesis / reference sets and what sacreBLEU
2.6.0 says about them, for tests/test_bleu.c and tests/cli_bleu.sh.

  PYTHONPATH=/tmp/hfpy /usr/bin/python3 tools/gen_bleu_golden.py [outdir]

Each set is a directory <name>/ with hyp.txt and ref0.txt .. ref<k-1>.txt
(UTF-8, lines split at '\\n' and right-stripped, as the sacrebleu command
reads them), and tok_<tok>_<case>.txt: every hypothesis line, then every line
of each reference file, as the tokens BLEU counts, joined by single spaces
(tok 13a | none | intl, case mixed | lc).
cases.txt lists the scored variants, one block each:

  case <name> nrefs <k> tok <13a|none|intl> lc <0|1> smooth <exp|floor|add-k|none> value <v|-1>
  score <repr>            the float, 17 significant digits
  precisions <4 x repr>
  bp <repr>   ratio <repr>   (each on its own line)
  sys_len <int>  ref_len <int>  counts <4 ints>  totals <4 ints>
  line <str(BLEUScore)>   signature <str(signature)>
  end

Use the same Python as tools/gen_bleu_tables.py (one Unicode version), and
the sacrebleu (with its `regex` module) that tools/gen_bleu_intl_tables.py
measured.
"""
import os
import sys

from sacrebleu.metrics import BLEU

SETS = {
    "punct": (
        ["The cat sat on the mat, didn't it?",
         "Prices rose 3.5% to $1,234.56 in 2019-2020 (see p. 7).",
         "He said &quot;yes&quot; &amp; left; a &lt;b&gt; tag &amp;quot; stays.",
         "A <skipped> word, e-mail: me@x.org / http://a.b/c?d=1&e=2",
         "Numbers: 1.000,5 and 12,5 or 3.14... end.",
         "x-ray 5-4 -3 [brackets] {braces} ~tilde~ `tick` ^hat_ |pipe| \\back",
         "Ends with a number 2019.",
         "'quoted' \"double\" ,comma .dot ;semi"],
        [["The cat sat on the mat, did not it?",
          "Prices rose 3.5 % to $1,234.56 in 2019-2020 (see p. 7).",
          "He said \"yes\" & left; a <b> tag &quot; stays.",
          "A word, e-mail: me@x.org / http://a.b/c?d=1&e=2",
          "Numbers: 1.000,5 and 12,5 or 3.14 ... end.",
          "x-ray 5 - 4 -3 [brackets] {braces} ~tilde~ `tick` ^hat_ |pipe| \\back",
          "Ends with a number 2019 .",
          "'quoted' \"double\" , comma . dot ; semi"]]),
    "unicode": (
        ["Café naïve façade — “quoted” «guillemets»",
         "Ελληνικά ΚΕΙΜΕΝΑ και İstanbul ŞEHİR",
         "日本語のテキスト。中文，标点！",
         "emoji 😀 👍🏽 done",
         "non\u00a0breaking\u3000ideographic\u2003em space\t tab",
         "Straße GROSS ǅ ǈ Ⅻ Ａｂｃ",
         "trailing spaces and CR   \r",
         "ΟΔΟΣ ΟΔΟΣ. ΣΑΣ Σ ΑΣ'Β ΑΣ'' ΣΑ"],
        [["Café naive façade - \"quoted\" «guillemets»",
          "ελληνικά κείμενα και istanbul şehir",
          "日本語 の テキスト 。 中文 ， 标点 ！",
          "emoji 😀 👍🏽 done",
          "non breaking ideographic em space tab",
          "strasse gross ǆ ǉ ⅻ ａｂｃ",
          "trailing spaces and CR",
          "οδος οδος. σας σ ας'β ας'' σα"]]),
    "empty": (
        ["a b c d e", "", "only the hypothesis", "", "f g h"],
        [["a b c d e", "", "", "only the reference", "f g h i"]]),
    "zero": (
        ["alpha beta gamma", "delta epsilon"],
        [["one two three four", "five six seven"]]),
    "single": (
        ["the quick brown fox jumps over the lazy dog"],
        [["the quick brown fox jumped over the lazy dog ."]]),
    "multiref": (
        ["the cat is on the mat", "there is a cat on the mat today",
         "it is a guide to action which ensures that the military always obeys the commands of the party",
         "a b", "the the the the the the the"],
        [["the cat is on the mat", "a cat is on the mat", "it is a guide to action that ensures that the military will forever heed party commands",
          "a b c d", "the cat is on the mat"],
         ["there is a cat on the mat", "there is a cat on the mat", "it is the guiding principle which guarantees the military forces always being under the command of the party",
          "a", "there is a cat on the mat"],
         ["a cat sat", "the cat was on the mat today", "it is the practical guide for the army always to heed the directions of the party",
          "a b c", ""]]),
    "intl": (
        ["L'économie française a crû de 1,5 % en 2019.",
         "« Bonjour ! » dit-il — c'était l'été… N°5, 3×4=12 ; 50 € / 60 $.",
         "東京（とうきょう）は日本の首都です。「こんにちは」、世界！",
         "中文标点：你好，世界！价格¥１２０，约合½美元。",
         "Ça coûte 1.000,50 €—vraiment? Oui: 2²=4, ٣٤٥ et Ⅻ.",
         "emoji 😀+👍🏽 #tag @user ©2024 ™ ±5° ∑x≤10 → done",
         "a.b,c;d:e!f?g (h) [i] {j} \"k\" 'l' -m- _n_ /o/ \\p\\ ^q^ `r` ~s~ |t| &quot;",
         "Straße — ÉCOLE Garçon Œuvre Ÿ; ÀÉÎÕÜ ŠĐČĆŽ.",
         "Fin 2019."],
        [["L' économie française a crû de 1,5% en 2019 .",
          "« Bonjour ! » dit-il - c'était l'été... N° 5, 3 × 4 = 12; 50 € / 60 $.",
          "東京（とうきょう）は 日本 の 首都 です 。「こんにちは」、 世界 ！",
          "中文 标点 ： 你好 ， 世界 ！ 价格 ¥ １２０ ， 约合 ½ 美元 。",
          "Ça coûte 1.000,50 € — vraiment ? Oui : 2² = 4 , ٣٤٥ et Ⅻ .",
          "emoji 😀 + 👍🏽 #tag @user © 2024 ™ ± 5 ° ∑ x ≤ 10 → done",
          "a . b , c ; d : e ! f ? g ( h ) [ i ] { j } \"k\" 'l' - m - _ n _ / o / \\ p \\ ^ q ^ ` r ` ~ s ~ | t | \" ",
          "Strasse - École garçon œuvre ÿ ; àéîõü šđčćž .",
          "fin 2019 ."]]),
    "short": (
        ["the cat", "on a mat", "x y z w"],
        [["the cat sat on the big mat", "on a mat there was a cat", "x y q w v"]]),
}

VARIANTS = {
    "punct": [("13a", False, "exp", None), ("none", False, "exp", None), ("13a", True, "floor", None),
              ("intl", False, "exp", None)],
    "unicode": [("13a", False, "exp", None), ("13a", True, "exp", None), ("none", True, "none", None),
                ("intl", False, "exp", None), ("intl", True, "floor", None)],
    "intl": [("intl", False, "exp", None), ("intl", True, "exp", None), ("intl", False, "add-k", None),
             ("13a", False, "exp", None)],
    "empty": [("13a", False, "exp", None), ("13a", False, "add-k", None)],
    "zero": [("13a", False, "exp", None), ("13a", False, "floor", None), ("13a", False, "add-k", None)],
    "single": [("13a", False, "exp", None), ("13a", False, "none", None), ("13a", True, "floor", 0.05)],
    "multiref": [("13a", False, "exp", None), ("13a", False, "add-k", 2), ("none", True, "floor", None)],
    "short": [("13a", False, "exp", None), ("13a", False, "floor", None), ("13a", False, "add-k", None),
              ("13a", False, "none", None)],
}


def read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip() for line in f]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "bleu")
    os.makedirs(out, exist_ok=True)
    blocks = []
    for name, (hyps, refs) in SETS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for r in refs:
            assert len(r) == len(hyps), name
        write_lines(os.path.join(d, "hyp.txt"), hyps)
        for k, r in enumerate(refs):
            write_lines(os.path.join(d, "ref%d.txt" % k), r)
        # read back as the sacrebleu command does
        hyps = read_lines(os.path.join(d, "hyp.txt"))
        refs = [read_lines(os.path.join(d, "ref%d.txt" % k)) for k in range(len(refs))]
        for tok in ("13a", "none", "intl"):
            for lc in (False, True):
                b = BLEU(tokenize=tok, lowercase=lc)
                # the tokens BLEU counts (its n-grams split the segment again)
                lines = [" ".join(b._preprocess_segment(x).split()) for x in hyps + sum(refs, [])]
                write_lines(os.path.join(d, "tok_%s_%s.txt" % (tok, "lc" if lc else "mixed")), lines)
        for tok, lc, smooth, value in VARIANTS[name]:
            b = BLEU(tokenize=tok, lowercase=lc, smooth_method=smooth, smooth_value=value)
            s = b.corpus_score(hyps, refs)
            blocks += ["case %s nrefs %d tok %s lc %d smooth %s value %s" %
                       (name, len(refs), tok, int(lc), smooth, repr(float(value)) if value is not None else "-1"),
                       "score %r" % float(s.score),
                       "precisions " + " ".join(repr(float(p)) for p in s.precisions),
                       "bp %r" % float(s.bp), "ratio %r" % float(s.ratio),
                       "sys_len %d" % s.sys_len, "ref_len %d" % s.ref_len,
                       # compute_bleu adds add-k's value to the counts it was given: report raw ones
                       "counts " + " ".join(str(int(c)) for c in raw_counts(b, hyps, refs)[0]),
                       "totals " + " ".join(str(int(c)) for c in raw_counts(b, hyps, refs)[1]),
                       "line " + str(s), "signature " + str(b.get_signature()), "end"]
            print("%-9s %-5s lc=%d %-6s %s" % (name, tok, lc, smooth, s))
    with open(os.path.join(out, "cases.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(blocks) + "\n")


def raw_counts(b, hyps, refs):
    stats = b._extract_corpus_statistics(hyps, refs)
    tot = [sum(col) for col in zip(*stats)]
    n = b.max_ngram_order
    return tot[2:2 + n], tot[2 + n:]


if __name__ == "__main__":
    main()
