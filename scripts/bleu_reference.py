#!/usr/bin/python3
"""bleu_reference.py: reference figures for qkv's corpus BLEU and 13a tokenizer (src/data/bleu.c,
tests/datasets/test_bleu.c), computed by code that shares nothing with the C code.

    /usr/bin/python3 scripts/bleu_reference.py nltk > tests/data/bleu_nltk.tsv
    /usr/bin/python3 scripts/bleu_reference.py tok13a      # the 13a cases of test_bleu.c

`nltk` needs NLTK (Debian: apt-get install python3-nltk; standard library otherwise). It draws
a fixed set of corpora (random.Random(2024): words from a small vocabulary, references made by
editing the hypothesis, one to three references a sentence, some sentences shorter or longer
than their references) and writes each with NLTK's corpus_bleu (Papineni et al. 2002: clipped
counts against the most frequent reference count, the closest reference length with ties to the
shorter, no smoothing, weights 1/4). Every corpus has matches of all four orders, where NLTK's
unsmoothed BLEU and sacreBLEU's (whose exp smoothing then does nothing) are the same number.
The lines, tab-separated:

    corpus  ID  NLTK_BLEU(0..1, repr)  SENTENCES  MAX_REFS
    sent    ID  HYPOTHESIS  REFERENCE_1 [REFERENCE_2 ...]       (tokens joined by spaces)

`tok13a` prints the 13a tokenization of the tricky strings of test_bleu.c (as C string literals),
by the mteval-v13a rules written as Python's re.sub (tokenizer_13a.py of sacreBLEU 2.x).
"""
import random
import re
import sys

VOCAB = ("the a of to and in is was it that he she they we you this for on with as at by from "
         "cat dog house river tree stone light night day bird song wind rain").split()


def edit(rng, words):
    out = list(words)
    for _ in range(rng.randint(0, 3)):
        op = rng.random()
        i = rng.randrange(len(out) + 1)
        if op < 0.4 and out:
            out[min(i, len(out) - 1)] = rng.choice(VOCAB)
        elif op < 0.7 and len(out) > 1:
            del out[min(i, len(out) - 1)]
        else:
            out.insert(i, rng.choice(VOCAB))
    return out


def corpus(rng, cid):
    n = rng.choice([1, 2, 3, 5, 8, 13, 30])
    max_refs = 1 + cid % 3
    sents = []
    for _ in range(n):
        hyp = [rng.choice(VOCAB) for _ in range(rng.randint(4, 18))]
        refs = [edit(rng, hyp) for _ in range(rng.randint(1, max_refs))]
        if rng.random() < 0.2:  # a much shorter hypothesis: brevity penalty
            hyp = hyp[: max(4, len(hyp) // 2)]
        sents.append((hyp, refs))
    return sents


def nltk_fixture():
    from nltk.translate.bleu_score import corpus_bleu

    rng = random.Random(2024)
    w = sys.stdout.write
    w("# scripts/bleu_reference.py nltk (NLTK %s): corpus ID BLEU SENTENCES MAX_REFS / "
      "sent ID HYP REFS...\n" % __import__("nltk").__version__)
    for cid in range(24):
        while True:  # redraw a corpus with an order without matches (NLTK's BLEU is then 0)
            sents = corpus(rng, cid)
            score = corpus_bleu([r for _, r in sents], [h for h, _ in sents])
            if score > 1e-6:
                break
        w("corpus\t%d\t%r\t%d\t%d\n" % (cid, score, len(sents), max(len(r) for _, r in sents)))
        for hyp, refs in sents:
            w("sent\t%d\t%s\n" % (cid, "\t".join(" ".join(t) for t in [hyp] + refs)))


def tok13a(line):
    line = line.rstrip()
    for a, b in (("<skipped>", ""), ("-\n", ""), ("\n", " "), ("&quot;", '"'), ("&amp;", "&"),
                 ("&lt;", "<"), ("&gt;", ">")):
        line = line.replace(a, b)
    line = " %s " % line
    line = re.sub(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 ", line)
    line = re.sub(r"([^0-9])([\.,])", r"\1 \2 ", line)
    line = re.sub(r"([\.,])([^0-9])", r" \1 \2", line)
    line = re.sub(r"([0-9])(-)", r"\1 \2 ", line)
    return " ".join(line.split())


TRICKY = [
    "Hello, world!",
    "It's 3.5 or 1,000.00 items.",
    "a-b 1-2 x--y 3- -4",
    "&quot;quoted&quot; &amp;lt; &lt;tag&gt; &AMP;",
    "line-\nbreak two\nlines",
    "<skipped> word <skip>",
    "U.S.A. e.g. etc... a..b .5 5. ,a 1.a a.1 1,a",
    "$5.00, 50% (approx.) [x]{y}|z~w^v_u`t",
    "tab\tand\u00a0nbsp\u3000ideographic\u2028sep  ",
    "caf\u00e9. na\u00efve, \u00ab\u00a0guillemets\u00a0\u00bb \u2014 dash",
    "\u00c9COLE Stra\u00dfe \u039f\u0394\u039f\u03a3 \u0130stanbul",
    "",
    "   ",
]


def c_literal(s):
    out = []
    for ch in s.encode("utf-8"):
        if ch == 0x22 or ch == 0x5C:
            out.append("\\" + chr(ch))
        elif 0x20 <= ch < 0x7F:
            out.append(chr(ch))
        else:
            out.append('\\x%02X""' % ch)
    return '"' + "".join(out) + '"'


def main():
    if sys.argv[1:] == ["nltk"]:
        nltk_fixture()
    elif sys.argv[1:] == ["tok13a"]:
        for s in TRICKY:
            print("    {%s, %s, %s}," % (c_literal(s), c_literal(tok13a(s)),
                                        c_literal(tok13a(s.lower()))))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
