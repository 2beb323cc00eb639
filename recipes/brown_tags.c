/*
 * brown_tags.c: Brown corpus tags -> the 12 universal tags of Petrov, Das & McDonald, "A Universal
 * Part-of-Speech Tagset" (LREC 2012, arXiv:1104.2086): . ADJ ADP ADV CONJ DET NOUN NUM PRON PRT
 * VERB X.
 *
 * The published mapping (en-brown.map of slavpetrov/universal-pos-tags, CC BY-SA 4.0, which NLTK
 * uses for brown.tagged_words(tagset="universal")) is a 472-line table. It is not copied here; it
 * is re-expressed as rules that give the same answer for each of the 472 tags of the corpus:
 *
 *   1. a foreign word "FW-..." -> X;
 *   2. strip the suffixes -HL (headline), -TL (title), -NC (cited) from the end, repeatedly;
 *   3. a simple tag: the base table below; else a tag starting with a verb prefix (BE, HV, DO, MD,
 *      VB: BEZ, HVD, DOD*, MD*, VBG ...) -> VERB; else X (NLTK maps unknown tags to X);
 *   4. a contraction "A+B": more than two parts -> X (WDT+BER+PP); A = DO -> X ("d'you");
 *      A a verb, HV or MD -> VERB ("let's", "must've", "gonna"); A = WRB or B a verb form ->
 *      PRT ("it's", "where's"); else the base tag of A (NN+NN, IN+IN, RB+CS ...), or X.
 */
#include "recipes.h"
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct tag_rule {
    const char *tag, *universal;
} tag_rule;

/* Simple Brown tags (no suffix, no '+') whose universal tag is not given by the verb-prefix rule;
 * sorted by strcmp for bsearch. */
static const tag_rule base_tags[] = {
    {"'", "."},       {"''", "."},     {"(", "."},       {")", "."},      {"*", "ADV"},
    {",", "."},       {"--", "."},     {".", "."},       {":", "."},      {"ABL", "PRT"},
    {"ABN", "PRT"},   {"ABX", "DET"},  {"AP", "ADJ"},    {"AP$", "PRT"},  {"AT", "DET"},
    {"CC", "CONJ"},   {"CD", "NUM"},   {"CD$", "NOUN"},  {"CS", "ADP"},   {"DT", "DET"},
    {"DT$", "DET"},   {"DTI", "DET"},  {"DTS", "DET"},   {"DTX", "DET"},  {"EX", "PRT"},
    {"IN", "ADP"},    {"JJ", "ADJ"},   {"JJ$", "PRT"},   {"JJR", "ADJ"},  {"JJS", "ADJ"},
    {"JJT", "ADJ"},   {"NIL", "X"},    {"NN", "NOUN"},   {"NN$", "NOUN"}, {"NNS", "NOUN"},
    {"NNS$", "NOUN"}, {"NP", "NOUN"},  {"NP$", "NOUN"},  {"NPS", "NOUN"}, {"NPS$", "NOUN"},
    {"NR", "NOUN"},   {"NR$", "NOUN"}, {"NRS", "NOUN"},  {"OD", "ADJ"},   {"PN", "NOUN"},
    {"PN$", "NOUN"},  {"PP$", "DET"},  {"PP$$", "PRON"}, {"PPL", "PRON"}, {"PPLS", "PRON"},
    {"PPO", "PRON"},  {"PPS", "PRON"}, {"PPSS", "PRON"}, {"QL", "ADV"},   {"QLP", "ADV"},
    {"RB", "ADV"},    {"RB$", "PRT"},  {"RBR", "ADV"},   {"RBT", "ADV"},  {"RN", "ADV"},
    {"RP", "PRT"},    {"TO", "PRT"},   {"UH", "PRT"},    {"WDT", "DET"},  {"WP$", "DET"},
    {"WPO", "PRON"},  {"WPS", "PRON"}, {"WQL", "ADV"},   {"WRB", "ADV"},  {"``", "."},
};

static int by_tag(const void *key, const void *elem) {
    const tag_rule *r = elem;
    return strcmp(key, r->tag);
}

static bool starts_with(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

static bool verb_prefix(const char *s, size_t n) {
    return starts_with(s, n, "BE") || starts_with(s, n, "HV") || starts_with(s, n, "DO") ||
           starts_with(s, n, "MD") || starts_with(s, n, "VB");
}

/* The universal tag of the simple tag s[0, n), or NULL. */
static const char *base_universal(const char *s, size_t n) {
    char key[64];
    if (n < sizeof key) {
        memcpy(key, s, n);
        key[n] = '\0';
        const tag_rule *r = bsearch(key, base_tags, sizeof base_tags / sizeof *base_tags,
                                    sizeof *base_tags, by_tag);
        if (r) return r->universal;
    }
    return verb_prefix(s, n) ? "VERB" : NULL;
}

const char *qkv_brown_universal_tag(const char *tag) {
    if (!tag) return "X";
    size_t n = strlen(tag);
    if (starts_with(tag, n, "FW-")) return "X";
    static const char *const suffixes[] = {"-HL", "-TL", "-NC"};
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < 3; i++)
            if (n > 3 && memcmp(tag + n - 3, suffixes[i], 3) == 0) {
                n -= 3;
                changed = true;
            }
    }
    const char *plus = memchr(tag, '+', n);
    if (!plus) {
        const char *u = base_universal(tag, n);
        return u ? u : "X";
    }
    size_t na = (size_t)(plus - tag);
    const char *b = plus + 1;
    size_t nb = n - na - 1;
    if (memchr(b, '+', nb)) return "X";
    if (na == 2 && memcmp(tag, "DO", 2) == 0) return "X";
    if (starts_with(tag, na, "VB") || starts_with(tag, na, "HV") || starts_with(tag, na, "MD"))
        return "VERB";
    if ((na == 3 && memcmp(tag, "WRB", 3) == 0) || verb_prefix(b, nb)) return "PRT";
    const char *u = base_universal(tag, na);
    return u ? u : "X";
}
