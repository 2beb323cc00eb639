#!/usr/bin/env python3
"""ngram_reference.py: an independent implementation of the interpolated Kneser-Ney character
n-gram model of `qkv data baseline lm` (recipes/ngram_lm.c, docs/data.md), written from the
formulas with tuples and dictionaries, to cross-check the C code.

    scripts/ngram_reference.py score TRAIN EVAL [MAX_ORDER]   # per order: events, nats, bits/char
    scripts/ngram_reference.py fixture OUT_DIR                 # tests/data/ngram_*.{txt,tsv}

`fixture` writes a small synthetic text (ngram_train.txt, ngram_eval.txt: UTF-8, blank lines,
a character only the eval text has) and ngram_reference.tsv: for orders 1 .. 5 the events, the
nats (17 significant digits) and the discounts, which tests/datasets/test_ngram_lm.c compares
with the C model. Standard library only.

The model: each line is <bos> c_1 .. c_m <eos> (characters = Unicode code points); the events
are c_1 .. c_m and <eos>; unseen characters are <unk>; V = <unk>, <eos> and the training
characters. Adjusted counts a(g): the count when g has the model's order or starts with <bos>,
else the number of distinct left neighbours. D_k = n1 / (n1 + 2 n2) over the adjusted counts of
order k (0.5 without n1). P_0 = 1 / V; P_k(w | h) = (max(a(hw) - D_k, 0) + D_k T(h) P_{k-1}(w | h'))
/ A(h), or P_{k-1}(w | h') when A(h) = 0; an event is scored at order min(N, position + 1).
"""
import math, os, sys

BOS, EOS, UNK = "<bos>", "<eos>", "<unk>"


def events(lines, vocab=None):
    for line in lines:
        syms = [c if vocab is None or c in vocab else UNK for c in line]
        yield [BOS] + syms + [EOS]


class KneserNey:
    def __init__(self, lines, order):
        self.order = order
        self.vocab = set(c for line in lines for c in line)
        self.V = len(self.vocab) + 2
        count = {}
        for seq in events(lines):
            for j in range(1, len(seq)):
                for k in range(1, min(order, j + 1) + 1):
                    g = tuple(seq[j - k + 1:j + 1])
                    count[g] = count.get(g, 0) + 1
        left = {}
        for g in count:
            if len(g) >= 2:
                left[g[1:]] = left.get(g[1:], 0) + 1
        self.adj = {}
        for g, c in count.items():
            self.adj[g] = c if len(g) == order or g[0] == BOS else left.get(g, 0)
        self.discount = {}
        for k in range(1, order + 1):
            n1 = sum(1 for g, a in self.adj.items() if len(g) == k and a == 1)
            n2 = sum(1 for g, a in self.adj.items() if len(g) == k and a == 2)
            self.discount[k] = n1 / (n1 + 2 * n2) if n1 > 0 else 0.5
        self.total, self.types = {}, {}
        for g, a in self.adj.items():
            h = g[:-1]
            self.total[h] = self.total.get(h, 0) + a
            self.types[h] = self.types.get(h, 0) + (1 if a > 0 else 0)

    def prob(self, hist, w):
        K = min(self.order, len(hist) + 1)
        p = 1.0 / self.V
        for k in range(1, K + 1):
            h = tuple(hist[len(hist) - (k - 1):]) if k > 1 else ()
            A = self.total.get(h, 0)
            if A == 0:
                continue
            D = self.discount[k]
            p = (max(self.adj.get(h + (w,), 0) - D, 0) + D * self.types[h] * p) / A
        return p

    def score(self, lines):
        nats, n = 0.0, 0
        for seq in events(lines, self.vocab):
            for j in range(1, len(seq)):
                nats -= math.log(self.prob(seq[:j], seq[j]))
                n += 1
        return n, nats


def read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def synthetic(n, seed, extra=""):
    """n lines of words from a linear congruential generator (blank lines included)."""
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "café", "to", "it",
             "saw", "big", "red", "hat", "is", "was", "we", "at"]
    x, out = seed, []
    for i in range(n):
        x = (x * 1103515245 + 12345) % 2**32
        if (x >> 16) % 13 == 0:
            out.append("")
            continue
        length = 1 + (x >> 8) % 7
        line = []
        for _ in range(length):
            x = (x * 1103515245 + 12345) % 2**32
            line.append(words[(x >> 16) % len(words)])
        s = " ".join(line) + ("." if (x >> 4) % 3 else " !")
        out.append(s + (extra if i % 11 == 5 else ""))
    return out


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "score":
        train, dev = read_lines(sys.argv[2]), read_lines(sys.argv[3])
        for order in range(1, (int(sys.argv[4]) if len(sys.argv) > 4 else 8) + 1):
            n, nats = KneserNey(train, order).score(dev)
            print("order %d: %d events, %.6f nats/event, %.4f bits/event" %
                  (order, n, nats / n, nats / n / math.log(2)))
    elif len(sys.argv) == 3 and sys.argv[1] == "fixture":
        out = sys.argv[2]
        train, dev = synthetic(240, 7), synthetic(40, 99, extra="ß")
        for name, lines in (("ngram_train.txt", train), ("ngram_eval.txt", dev)):
            with open(os.path.join(out, name), "w", encoding="utf-8", newline="\n") as f:
                f.write("".join(l + "\n" for l in lines))
        with open(os.path.join(out, "ngram_reference.tsv"), "w", newline="\n") as f:
            f.write("# scripts/ngram_reference.py fixture: order, eval events, eval nats, "
                    "discounts D_1 .. D_order\n")
            for order in range(1, 6):
                m = KneserNey(train, order)
                n, nats = m.score(dev)
                f.write("%d\t%d\t%.17g\t%s\n" % (order, n, nats, " ".join(
                    "%.17g" % m.discount[k] for k in range(1, order + 1))))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
