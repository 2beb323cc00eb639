#!/usr/bin/env python3
"""spam_reference.py: an independent implementation of `qkv data prepare spam` and
`qkv data baseline spam` (docs/data.md, "Spam vs ham"), written from the rules with regular
expressions and Python's bytes, to cross-check the C converter (recipes/mail_text.c,
mail_tokens.c, prepare_spam.c) and naive Bayes (recipes/naive_bayes.c).

    scripts/spam_reference.py prepare data/cache/spam/package/data OUT_DIR [MAX_TOKENS]
    scripts/spam_reference.py baseline SPLIT_DIR        # SPLIT_DIR/spam.{train,dev,test}.tsv

`prepare` writes spam.{train,dev,test}.{tsv,ids}, which must be byte-identical to the output of
`qkv data prepare spam`; `baseline` prints the naive Bayes figures of `qkv data baseline spam`.
Standard library only.
"""
import base64, math, os, re, sys

FOLDERS = [("easy-ham-1", "ham"), ("easy-ham-2", "ham"), ("hard-ham-1", "ham"),
           ("spam-1", "spam"), ("spam-2", "spam")]


def split_entity(raw):
    lines = raw.split(b"\n")
    try:
        e = lines.index(b"")
    except ValueError:
        return lines, []
    return lines[:e], lines[e + 1:]


def headers(hlines):
    fields = []
    for l in hlines:
        if l[:1] in (b" ", b"\t") and fields:
            fields[-1] = fields[-1] + l
        else:
            fields.append(l)
    out = []
    for f in fields:
        k = f.find(b":")
        if k > 0:
            out.append((f[:k].strip().lower(), f[k + 1:]))
    return out


def first(h, name):
    for k, v in h:
        if k == name:
            return v
    return None


def qp_decode(b):
    return re.sub(rb"=(?:[ \t]*\n|([0-9A-Fa-f]{2}))",
                  lambda m: bytes([int(m.group(1), 16)]) if m.group(1) else b"", b)


def b64_decode(b):
    """Characters outside the alphabet skipped, decoding stops at the first '='; a last group of
    one character (6 bits) gives no byte."""
    s = re.sub(rb"[^A-Za-z0-9+/]", b"", b.split(b"=")[0])
    if len(s) % 4 == 1:
        s = s[:-1]
    return base64.b64decode(s + b"=" * (-len(s) % 4))


def ctype(h):
    v = first(h, b"content-type")
    if v is None:
        return b"text/plain", None
    t = v.split(b";")[0].strip().lower()
    m = re.search(rb';\s*boundary\s*=\s*(?:"([^"]*)"|([^\s;]+))', v, re.I)
    bnd = None
    if m:
        bnd = m.group(1) if m.group(1) is not None else m.group(2)
    return t, bnd


def html_text(b):
    out = []
    i, n = 0, len(b)
    while i < n:
        c = b[i:i + 1]
        if c == b"<":
            if b.startswith(b"<!--", i):
                j = b.find(b"-->", i + 4)
                i = n if j < 0 else j + 3
                out.append(b" ")
                continue
            m = re.match(rb"<(script|style)[\s>/]", b[i:i + 8], re.I)
            if m:
                name = m.group(1).lower()
                j = b.lower().find(b"</" + name, i)
                if j < 0:
                    i = n
                else:
                    k = b.find(b">", j)
                    i = n if k < 0 else k + 1
                out.append(b" ")
                continue
            if re.match(rb"<[A-Za-z/!?]", b[i:i + 2]):
                k = b.find(b">", i)
                if k >= 0:
                    out.append(b" ")
                    i = k + 1
                    continue
            out.append(c)
            i += 1
        elif c == b"&":
            m = re.match(rb"&(#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});", b[i:i + 40])
            if not m:
                out.append(c)
                i += 1
                continue
            e = m.group(1)
            if e[:1] == b"#":
                cp = int(e[2:], 16) if e[1:2] in b"xX" else int(e[1:])
                out.append(bytes([cp]) if 0 < cp < 128 else b" ")
            else:
                out.append({b"amp": b"&", b"lt": b"<", b"gt": b">", b"quot": b'"', b"apos": b"'",
                            b"nbsp": b" "}.get(e, b" "))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return b"".join(out)


def entity_text(raw, depth):
    if depth > 8:
        return []
    h, body = split_entity(raw)
    h = headers(h)
    return body_text(h, b"\n".join(body), depth)


def body_text(h, body, depth):
    t, bnd = ctype(h)
    if t.startswith(b"multipart/") and bnd:
        parts, cur, seen = [], None, False
        for l in body.split(b"\n"):
            rest = l[2 + len(bnd):] if l.startswith(b"--" + bnd) else None
            if rest is not None and (rest.startswith(b"--") or rest.strip(b" \t") == b""):
                if cur is not None:
                    parts.append(b"\n".join(cur))
                seen = True
                if rest.startswith(b"--"):
                    cur = None
                    break
                cur = []
            elif cur is not None:
                cur.append(l)
        if cur is not None:
            parts.append(b"\n".join(cur))
        if not seen:
            return [decode(h, body, b"text/plain")]
        if t == b"multipart/alternative":
            chosen = None
            for p in parts:
                ph, _ = split_entity(p)
                if ctype(headers(ph))[0] == b"text/plain":
                    chosen = p
                    break
            if chosen is None and parts:
                chosen = parts[0]
            parts = [chosen] if chosen is not None else []
        out = []
        for p in parts:
            out += entity_text(p, depth + 1)
        return out
    if t.startswith(b"multipart/"):
        return [decode(h, body, b"text/plain")]
    if t == b"message/rfc822":
        return entity_text(body, depth + 1)
    if t.startswith(b"text/"):
        return [decode(h, body, t)]
    return []


def decode(h, body, t):
    cte = (first(h, b"content-transfer-encoding") or b"").strip().lower()
    if cte == b"quoted-printable":
        body = qp_decode(body)
    elif cte == b"base64":
        body = b64_decode(body)
    if t == b"text/html":
        body = html_text(body)
    return body


def decode_subject(s):
    ew = rb"=\?[^?\s]+\?([QqBb])\?([^?\s]*)\?="
    s = re.sub(rb"(" + ew + rb")[ \t]+(?=" + ew + rb")", rb"\1", s)

    def dec(m):
        if m.group(1) in b"Qq":
            return re.sub(rb"=([0-9A-Fa-f]{2})", lambda x: bytes([int(x.group(1), 16)]),
                          m.group(2).replace(b"_", b" "))
        return b64_decode(m.group(2))
    return re.sub(ew, dec, s)


URL = re.compile(rb"(?i:https?://|ftp://|www\.)[^\x00-\x20\x7f-\xff<>\"'`{}|\\^\[\]]*")
EMAIL = re.compile(rb"([A-Za-z0-9._%+\-]+)@([A-Za-z0-9][A-Za-z0-9.\-]*)")
LOCAL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-"
WORDCH = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'"
PUNCT = re.compile(rb"!+|\$+|\?+")
NUM = re.compile(rb"[0-9]+(?:[.,][0-9]+)*")
WORD = re.compile(rb"[A-Za-z0-9']+")


def tokens(text):
    out, i, n = [], 0, len(text)
    while i < n:
        prev = text[i - 1] if i else None
        if not (prev is not None and bytes([prev]).isalnum()):
            m = URL.match(text, i)
            if m:
                out.append("<url>")
                i = m.end()
                continue
        if prev is None or prev not in LOCAL:
            m = EMAIL.match(text, i)
            if m:
                dom = m.group(2).rstrip(b".-")
                if re.search(rb"[A-Za-z0-9]", m.group(1)) and b"." in dom:
                    out.append("<email>")
                    i = m.start(2) + len(dom)
                    continue
        m = PUNCT.match(text, i)
        if m:
            out += [chr(text[i])] * min(3, m.end() - i)
            i = m.end()
            continue
        m = NUM.match(text, i)
        if m and (m.end() == n or text[m.end()] not in WORDCH):
            s = m.group(0)
            out.append(s.decode() if s.isdigit() and len(s) <= 2 else "<num>")
            i = m.end()
            continue
        m = WORD.match(text, i)
        if m:
            t = m.group(0).lower().strip(b"'")
            if t:
                out.append("<num>" if t.isdigit() and len(t) > 2 else t.decode())
            i = m.end()
            continue
        i += 1
    return out


def message_tokens(raw):
    raw = raw.replace(b"\r\n", b"\n")
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    hl, body = split_entity(raw)
    h = headers(hl)
    subj = first(h, b"subject")
    texts = [decode_subject(subj)] if subj is not None else []
    texts += body_text(h, b"\n".join(body), 0)
    return tokens(b"\n".join(texts))


def fnv(key):
    h = 0x811C9DC5
    for b in key:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def prepare(data_dir, out_dir, max_tokens=256):
    seen = {}
    out = {s: [] for s in ("train", "dev", "test")}
    ids = {s: [] for s in ("train", "dev", "test")}
    lengths, empty, dups, conflicts, trunc = [], 0, 0, 0, 0
    for folder, label in FOLDERS:
        for name in sorted(os.listdir(os.path.join(data_dir, folder))):
            if not name.endswith(".txt"):
                continue
            key = folder + "/" + name[:-4]
            toks = message_tokens(open(os.path.join(data_dir, folder, name), "rb").read())
            if not toks:
                empty += 1
                continue
            line = " ".join(toks[:max_tokens])
            if line in seen:
                dups += 1
                conflicts += seen[line] != label
                continue
            seen[line] = label
            lengths.append(len(toks))
            trunc += len(toks) > max_tokens
            b = fnv(key.encode()) % 100
            s = "train" if b < 80 else "dev" if b < 90 else "test"
            out[s].append(label + "\t" + line + "\n")
            ids[s].append(key + "\n")
    os.makedirs(out_dir, exist_ok=True)
    for s in out:
        open(os.path.join(out_dir, "spam.%s.tsv" % s), "w").write("".join(out[s]))
        open(os.path.join(out_dir, "spam.%s.ids" % s), "w").write("".join(ids[s]))
    lengths.sort()
    print("empty", empty, "duplicates", dups, "conflicts", conflicts, "truncated", trunc)
    print("lengths n=%d" % len(lengths), {q: lengths[min(len(lengths) - 1, q * len(lengths) // 100)] for q in (10, 25, 50, 75, 90, 99)}, "max", lengths[-1])
    for s in out:
        print(s, len(out[s]), sum(l.startswith("spam") for l in out[s]))


def read(path):
    rows = []
    for l in open(path):
        lab, toks = l.rstrip("\n").split("\t")
        rows.append((lab, toks.split(" ")))
    return rows


def naive_bayes(train, evals, alpha=1.0, positive="spam"):
    labels = sorted({l for l, _ in train})
    vocab = sorted({t for _, ts in train for t in ts})
    V = len(vocab)
    cnt = {c: {} for c in labels}
    tot = {c: 0 for c in labels}
    docs = {c: 0 for c in labels}
    for l, ts in train:
        docs[l] += 1
        for t in ts:
            cnt[l][t] = cnt[l].get(t, 0) + 1
            tot[l] += 1
    vs = set(vocab)
    for path, rows in evals:
        tp = fp = fn = correct = 0
        for l, ts in rows:
            best, bs = None, None
            for c in labels:
                s = math.log(docs[c] / len(train))
                for t in ts:
                    if t in vs:
                        s += math.log((cnt[c].get(t, 0) + alpha) / (tot[c] + alpha * V))
                if bs is None or s > bs:
                    best, bs = c, s
            correct += best == l
            tp += best == positive and l == positive
            fp += best == positive and l != positive
            fn += best != positive and l == positive
        p = tp / (tp + fp) if tp + fp else 0
        r = tp / (tp + fn) if tp + fn else 0
        f = 2 * p * r / (p + r) if p + r else 0
        print("%s: %d examples, accuracy %.4f (%d), %s precision %.4f recall %.4f F1 %.4f (tp %d fp %d fn %d)" %
              (path, len(rows), correct / len(rows), correct, positive, p, r, f, tp, fp, fn))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 256)
    elif len(sys.argv) == 3 and sys.argv[1] == "baseline":
        d = sys.argv[2]
        naive_bayes(read(d + "/spam.train.tsv"),
                    [(d + "/spam.%s.tsv" % s, read(d + "/spam.%s.tsv" % s)) for s in ("dev", "test")])
    else:
        sys.exit(__doc__)
