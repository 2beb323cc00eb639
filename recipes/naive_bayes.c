/*
 * naive_bayes.c: multinomial naive Bayes over the tokens of a labeled corpus, the reference
 * classifier the Transformer's classification results are compared with (docs/data.md, RESULTS.md).
 *
 * Training on documents d with labels y_d (a bag of words: token order ignored):
 *   P(c)     = N_c / N                                   documents of class c / documents
 *   P(w | c) = (n_{w,c} + alpha) / (n_c + alpha |V|)     Laplace / Lidstone smoothing, alpha > 0
 * with n_{w,c} the occurrences of token w in the documents of class c, n_c = sum_w n_{w,c}, and V
 * the distinct tokens of the training corpus. A document's score for class c is
 *   s_c = log P(c) + sum over its tokens t in V of log P(t | c)      (tokens outside V ignored)
 * the prediction is argmax_c s_c (ties: the first class in byte order), and the posterior is
 * P(c | d) = exp(s_c - logsumexp_c' s_c'). Sums run in double, in token order: deterministic.
 *
 * Reference: McCallum & Nigam, "A Comparison of Event Models for Naive Bayes Text
 * Classification" (AAAI-98 workshop), the multinomial model; scikit-learn's MultinomialNB with
 * alpha = 1 on CountVectorizer counts computes the same scores.
 */
#include "recipes.h"
#include "data/data_internal.h"

#include <math.h>
#include <stdlib.h>

#define WHO "qkv_nb"

struct qkv_nb {
    qkv_vocab *words;   /* the training tokens (and the reserved symbols, unused unless seen) */
    qkv_vocab *classes; /* the labels, in byte order (ids from QKV_VOCAB_RESERVED) */
    int32_t n_classes, n_words;
    bool *seen;        /* (words size) the token occurs in the training corpus */
    double *log_prior; /* (C) */
    double *log_lik;   /* (words size, C) log P(w | c) */
};

void qkv_nb_free(qkv_nb *m) {
    if (!m) return;
    qkv_vocab_free(m->words);
    qkv_vocab_free(m->classes);
    free(m->seen);
    free(m->log_prior);
    free(m->log_lik);
    free(m);
}

qkv_status qkv_nb_train(const qkv_corpus *train, double alpha, qkv_nb **out) {
    if (!train || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: NULL argument", WHO);
    *out = NULL;
    if (qkv_corpus_kind_of(train) != QKV_CORPUS_LABELED)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: %s is not a labeled corpus", WHO,
                         qkv_corpus_name(train));
    if (!(alpha > 0) || !isfinite(alpha))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: alpha is %g, must be positive", WHO,
                         alpha);
    int64_t n_docs = qkv_corpus_size(train);
    if (n_docs == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: %s has no examples", WHO,
                         qkv_corpus_name(train));
    qkv_nb *m = calloc(1, sizeof *m);
    if (!m) return QKV_ERROR(QKV_ERR_OOM, "%s_train: out of memory", WHO);
    qkv_status st = qkv_vocab_build(train, QKV_FIELD_TGT, 1, true, &m->classes);
    if (!st) st = qkv_vocab_build(train, QKV_FIELD_SRC, 1, true, &m->words);
    if (st) {
        qkv_nb_free(m);
        return st;
    }
    int32_t C = m->n_classes = qkv_vocab_size(m->classes) - QKV_VOCAB_RESERVED;
    int32_t W = qkv_vocab_size(m->words);
    int64_t *docs = calloc((size_t)C, sizeof *docs), *total = calloc((size_t)C, sizeof *total);
    int64_t *count = calloc((size_t)W * (size_t)C, sizeof *count);
    m->seen = calloc((size_t)W, sizeof *m->seen);
    m->log_prior = malloc((size_t)C * sizeof *m->log_prior);
    m->log_lik = malloc((size_t)W * (size_t)C * sizeof *m->log_lik);
    if (!docs || !total || !count || !m->seen || !m->log_prior || !m->log_lik) {
        st = QKV_ERROR(QKV_ERR_OOM, "%s_train: out of memory", WHO);
        goto done;
    }
    for (int64_t i = 0; i < n_docs; i++) {
        size_t len;
        const char *label = qkv_corpus_symbol(train, i, QKV_FIELD_TGT, 0, &len);
        int32_t c = qkv_vocab_find(m->classes, label, len) - QKV_VOCAB_RESERVED;
        if (c < 0) { /* "<pad>", "<unk>", "<bos>" or "<eos>": not in the class vocabulary */
            char q[200];
            st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: the label %s is a reserved symbol",
                           qkv_corpus_name(train), (long long)qkv_corpus_line(train, i),
                           qkv__quote(q, sizeof q, label, len));
            goto done;
        }
        docs[c]++;
        for (int64_t k = 0; k < qkv_corpus_length(train, i, QKV_FIELD_SRC); k++) {
            const char *t = qkv_corpus_symbol(train, i, QKV_FIELD_SRC, k, &len);
            int32_t w = qkv_vocab_find(m->words, t, len);
            count[(size_t)w * (size_t)C + (size_t)c]++;
            total[c]++;
            m->seen[w] = true;
        }
    }
    for (int32_t w = 0; w < W; w++)
        m->n_words += m->seen[w];
    for (int32_t c = 0; c < C; c++) {
        m->log_prior[c] = log((double)docs[c] / (double)n_docs);
        double denom = log((double)total[c] + alpha * (double)m->n_words);
        for (int32_t w = 0; w < W; w++)
            m->log_lik[(size_t)w * (size_t)C + (size_t)c] =
                log((double)count[(size_t)w * (size_t)C + (size_t)c] + alpha) - denom;
    }
done:
    free(docs);
    free(total);
    free(count);
    if (st) {
        qkv_nb_free(m);
        return st;
    }
    *out = m;
    return QKV_OK;
}

int32_t qkv_nb_num_classes(const qkv_nb *m) {
    return m ? m->n_classes : 0;
}

int32_t qkv_nb_vocab_size(const qkv_nb *m) {
    return m ? m->n_words : 0;
}

const char *qkv_nb_class_name(const qkv_nb *m, int32_t k) {
    if (!m || k < 0 || k >= m->n_classes) return NULL;
    return qkv_vocab_symbol(m->classes, k + QKV_VOCAB_RESERVED);
}

int32_t qkv_nb_class_index(const qkv_nb *m, const char *label, size_t len) {
    if (!m || !label) return -1;
    int32_t id = qkv_vocab_find(m->classes, label, len);
    return id < QKV_VOCAB_RESERVED ? -1 : id - QKV_VOCAB_RESERVED;
}

qkv_status qkv_nb_predict(const qkv_nb *m, const qkv_corpus *c, int64_t i, int32_t *label,
                          double *log_post) {
    if (!m || !c || !label) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_predict: NULL argument", WHO);
    if (qkv_corpus_kind_of(c) != QKV_CORPUS_LABELED || i < 0 || i >= qkv_corpus_size(c))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "%s_predict: example %lld of %s: not a labeled corpus or out of range",
                         WHO, (long long)i, qkv_corpus_name(c));
    int32_t C = m->n_classes;
    double stack[16];
    double *s = log_post ? log_post : C <= 16 ? stack : malloc((size_t)C * sizeof *s);
    if (!s) return QKV_ERROR(QKV_ERR_OOM, "%s_predict: out of memory", WHO);
    for (int32_t k = 0; k < C; k++)
        s[k] = m->log_prior[k];
    for (int64_t t = 0; t < qkv_corpus_length(c, i, QKV_FIELD_SRC); t++) {
        size_t len;
        const char *tok = qkv_corpus_symbol(c, i, QKV_FIELD_SRC, t, &len);
        int32_t w = qkv_vocab_find(m->words, tok, len);
        if (w < 0 || !m->seen[w]) continue;
        const double *row = m->log_lik + (size_t)w * (size_t)C;
        for (int32_t k = 0; k < C; k++)
            s[k] += row[k];
    }
    int32_t best = 0;
    for (int32_t k = 1; k < C; k++)
        if (s[k] > s[best]) best = k;
    *label = best;
    if (log_post) { /* normalise: log P(c | d) = s_c - logsumexp(s) */
        double z = 0;
        for (int32_t k = 0; k < C; k++)
            z += exp(s[k] - s[best]);
        double lse = s[best] + log(z);
        for (int32_t k = 0; k < C; k++)
            s[k] -= lse;
    }
    if (s != log_post && s != stack) free(s);
    return QKV_OK;
}
