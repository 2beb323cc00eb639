#!/usr/bin/env python3
"""bpe_reference.py: an independent implementation of qkv's byte-pair encoding (src/data/bpe.h,
docs/data.md "Subwords"), written the way subword-nmt's learn_bpe.py and apply_bpe.py are: counts
recomputed from scratch at every step, the most frequent pair chosen by max over (count, pair),
and words encoded by the loop "merge every occurrence of the present pair of lowest rank". It
cross-checks the C code, which uses incremental counts and heaps.

    scripts/bpe_reference.py fixture OUT_DIR   # tests/data/bpe_{train,eval}.txt, bpe_reference.*

`fixture` writes a synthetic corpus (syllable words, a few non-ASCII letters, runs of spaces,
leading and trailing spaces, TABs, a literal U+2581, a character seen once), the model learned
from it (bpe_reference.model: qkv's model file, 60 merges, min_frequency 2, min_char_count 2) and
the symbols of every eval line under that model (bpe_reference.tsv: the line's number, then its
symbols separated by single spaces). Standard library only.
"""
import os, random, sys

MARKER = "\u2581"
NEVER = {MARKER, "\r", "\0"}  # characters that are always byte symbols


def byte_symbols(ch):
    return ["<0x%02X>" % b for b in ch.encode("utf-8")]


def is_byte_symbol(s):
    return len(s) == 6 and s.startswith("<0x") and s.endswith(">") and all(c in "0123456789ABCDEF" for c in s[3:5])


def words(line):
    """The words of a line: the characters after each word's marker (the first word's stands
    for the start of the line, every other for the space before it)."""
    return line.split(" ") if line else []


def replace_pair(sym, pair):
    """Every occurrence of pair in sym, left to right and not overlapping, merged."""
    (a, b), out, i = pair, [], 0
    while i < len(sym):
        if i + 1 < len(sym) and sym[i] == a and sym[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(sym[i])
            i += 1
    return out


def learn(lines, merges, min_frequency, min_char_count):
    vocab = {}
    for line in lines:
        for w in words(line):
            vocab[w] = vocab.get(w, 0) + 1
    chars = {}
    for w, f in vocab.items():
        for c in w:
            if c not in NEVER:
                chars[c] = chars.get(c, 0) + f
    alphabet = sorted((c for c, n in chars.items() if n >= min_char_count), key=lambda c: c.encode("utf-8"))
    known = set(alphabet) | {MARKER}
    # a word as a tuple of symbols; None for a character outside the alphabet (no pair crosses it)
    seqs = {w: [MARKER] + [c if c in known and c != MARKER else None for c in w] for w in vocab}
    codes = []
    while len(codes) < merges:
        stats = {}
        for w, f in vocab.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                if a is not None and b is not None and not is_byte_symbol(a + b):
                    stats[(a, b)] = stats.get((a, b), 0) + f
        if not stats:
            break
        # Python compares str by code point, which is UTF-8 byte order
        best = max(stats, key=lambda p: (stats[p], p))
        if stats[best] < min_frequency:
            break
        codes.append(best)
        for w in vocab:
            seqs[w] = replace_pair(seqs[w], best)
    return alphabet, codes


def encode_word(w, alphabet, ranks, byte_fallback=True):
    known = set(alphabet)
    sym = [MARKER]
    for c in w:
        if c in known and c not in NEVER:
            sym.append(c)
        elif byte_fallback or c in NEVER:
            sym.extend(byte_symbols(c))
        else:
            sym.append(c)
    while len(sym) > 1:
        pairs = set(zip(sym, sym[1:]))
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        sym = replace_pair(sym, best)
    return sym


def encode(line, alphabet, codes, byte_fallback=True):
    ranks = {p: r for r, p in enumerate(codes)}
    out = []
    for w in words(line):
        out.extend(encode_word(w, alphabet, ranks, byte_fallback))
    return out


def synthetic(rng, n):
    onsets = ["b", "d", "k", "l", "m", "n", "p", "r", "s", "t", "st", "tr", "ñ", "ç"]
    nuclei = ["a", "e", "i", "o", "u", "ai", "ou", "é"]
    codas = ["", "", "n", "s", "r", "st", "l"]
    lexicon = ["".join(rng.choice(onsets) + rng.choice(nuclei) + rng.choice(codas) for _ in range(rng.randint(1, 3)))
               for _ in range(120)]
    weights = [1.0 / (k + 1) for k in range(len(lexicon))]  # Zipf
    lines = []
    for i in range(n):
        ws = rng.choices(lexicon, weights, k=rng.randint(1, 12))
        seps = [rng.choice([" "] * 12 + ["  ", "\t", " \t "]) for _ in ws[1:]]
        line = ws[0] + "".join(s + w for s, w in zip(seps, ws[1:]))
        if rng.random() < 0.05:
            line = " " + line
        if rng.random() < 0.05:
            line += " "
        if rng.random() < 0.1:
            line += rng.choice([".", ",", "!", "?"])
        lines.append(line)
    return lines


def fixture(out_dir):
    rng = random.Random(20261129)
    train = synthetic(rng, 400)
    train.append("z" + MARKER + "Ω")  # a literal marker and a character seen once (min_char_count 2)
    evals = synthetic(rng, 60) + ["Ωmega ☃ snow" + MARKER + "man", "  two  spaces ", "\ttab", "x"]
    alphabet, codes = learn(train, 60, 2, 2)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bpe_train.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(l + "\n" for l in train))
    with open(os.path.join(out_dir, "bpe_eval.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(l + "\n" for l in evals))
    with open(os.path.join(out_dir, "bpe_reference.model"), "w", encoding="utf-8", newline="\n") as f:
        f.write("#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: %s\n#merges: %d\n" % ("".join(alphabet), len(codes)))
        f.write("".join("%s %s\n" % p for p in codes))
    with open(os.path.join(out_dir, "bpe_reference.tsv"), "w", encoding="utf-8", newline="\n") as f:
        for i, line in enumerate(evals):
            f.write("%d\t%s\n" % (i + 1, " ".join(encode(line, alphabet, codes))))
    print("%d train lines, %d eval lines, %d characters, %d merges" % (len(train), len(evals), len(alphabet), len(codes)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "fixture":
        fixture(sys.argv[2])
    else:
        sys.exit(__doc__)
