/*
 * fuzz_checkpoint.c: libFuzzer target for training checkpoints (qkv_trainer_load: the safetensors
 * file, its "qkv.config", train.* and data.* metadata and its model / optimiser / average
 * tensors) and the batcher's saved position (qkv_batch_pos_parse).
 *
 * The trainers are two tiny decoder-only models (one keeps a parameter average, ema.*), made once;
 * the seed corpus holds checkpoints saved from them (QKV_FUZZ_SEEDS=DIR writes it). The first byte picks what the rest is:
 *   bit 0-1 = 0  a whole checkpoint file
 *             1  its metadata values, '\n'-separated in the order of CKPT_KEYS, written with the
 *                trainer's own valid tensors (so the metadata parsers see every input)
 *             2  a batcher position, "epoch=3 batch=17 fingerprint=0123456789abcdef"
 *   bit 2        load into the trainer with the average
 *
 * Invariants: a checkpoint loads or is refused with a message; a refused one leaves the trainer's
 * parameters, moments and step untouched; one that loads saves again and loads back with the same
 * step and data position (epoch, batch, fingerprint) and the same parameters, bit for bit. A
 * position parses or is refused with a message, and one that parses formats back to the same text.
 */
#include "fuzz_util.h"

#include "qkv/qkv.h"
#include "qkv/qkv_data.h"

#define N_KEYS 8
static const char *const CKPT_KEYS[N_KEYS] = {"qkv.checkpoint", "qkv.config",     "train.steps",
                                               "train.rng_seed", "train.rng_step", "data.epoch",
                                               "data.batch",     "data.fingerprint"};

/* The configuration of the seed checkpoints in tests/fuzz/corpus/checkpoint: a one-layer
 * decoder-only model with tied embeddings, the smallest table of parameters (16 tensors) that has
 * every kind (embedding, attention, feed-forward, norms), so an input costs few tensors to read
 * and write. */
static const char *const MODEL_JSON =
    "{\"arch\":\"decoder\",\"tgt_vocab\":7,\"d_model\":4,\"n_heads\":1,\"dim_feedforward\":4,"
    "\"n_encoder_layers\":1,\"n_decoder_layers\":0,\"max_len\":8,\"tie_embeddings\":true}";

typedef struct fz_trainer {
    qkv_model *model;
    qkv_trainer *trainer;
    qkv_st_file *valid; /* a checkpoint it saved: the tensors of mode 1 */
} fz_trainer;

static fz_trainer trainers[2];

static void make_trainer(fz_trainer *f, double ema) {
    qkv_model_config cfg;
    FZ_REQUIRE(qkv_model_config_from_json(MODEL_JSON, &cfg) == QKV_OK);
    FZ_REQUIRE(qkv_model_new(&cfg, 1, &f->model) == QKV_OK);
    qkv_train_config tc = qkv_train_default_config();
    tc.ema_decay = ema;
    FZ_REQUIRE(qkv_trainer_new(f->model, &tc, &f->trainer) == QKV_OK);
    const char *path = fz_path("valid.ckpt");
    FZ_REQUIRE(qkv_trainer_save(f->trainer, path, 3, 17, 0x0123456789abcdefu) == QKV_OK);
    FZ_REQUIRE(qkv_st_open(path, &f->valid) == QKV_OK);
    remove(path);
}

/* QKV_FUZZ_SEEDS=DIR: write the seed corpus into DIR (after a change of MODEL_JSON or of the
 * checkpoint format): for each trainer (mode bit 2) its checkpoint (mode 0) and its metadata
 * values (mode 1), and two positions (mode 2). */
static void write_seed(const char *dir, const char *name, uint8_t mode, const void *data, size_t size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *bytes = malloc(size + 1);
    FZ_REQUIRE(bytes);
    bytes[0] = (char)mode;
    memcpy(bytes + 1, data, size);
    fz_write_file(path, bytes, size + 1);
    free(bytes);
}

static void write_seeds(const char *dir) {
    for (int t = 0; t < 2; t++) {
        const char *path = fz_path("seed.ckpt");
        FZ_REQUIRE(qkv_trainer_save(trainers[t].trainer, path, 3, 17, 0x0123456789abcdefu) == QKV_OK);
        size_t size;
        char *file = fz_read_file(path, &size);
        FZ_REQUIRE(file);
        write_seed(dir, t ? "ema_epoch3.ckpt" : "plain_epoch3.ckpt", (uint8_t)(4 * t), file, size);
        free(file);
        qkv_st_file *f = NULL;
        FZ_REQUIRE(qkv_st_open(path, &f) == QKV_OK);
        char values[8192] = "";
        for (int k = 0; k < N_KEYS; k++) {
            const char *v = qkv_st_metadata_get(f, CKPT_KEYS[k]);
            FZ_REQUIRE(v && strlen(values) + strlen(v) + 2 < sizeof values);
            strcat(strcat(values, v), k + 1 < N_KEYS ? "\n" : "");
        }
        qkv_st_close(f);
        write_seed(dir, t ? "metadata_ema.txt" : "metadata_values.txt", (uint8_t)(1 + 4 * t), values, strlen(values));
        remove(path);
    }
    const char *position = "epoch=3 batch=17 fingerprint=0123456789abcdef", *zero = "epoch=0 batch=0 fingerprint=0000000000000000";
    write_seed(dir, "position.txt", 2, position, strlen(position));
    write_seed(dir, "position_zero.txt", 2, zero, strlen(zero));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    qkv_set_num_threads(1);
    make_trainer(&trainers[0], 0);
    make_trainer(&trainers[1], 0.99);
    const char *seeds = getenv("QKV_FUZZ_SEEDS");
    if (seeds && *seeds) write_seeds(seeds);
    return 0;
}

/* The parameter and moment blocks of the trainer's model. */
static size_t state_bytes(const fz_trainer *f) {
    return (size_t)qkv_params_numel(f->model->params) * sizeof(qkv_real);
}

static void snapshot(const fz_trainer *f, char *out) {
    const size_t n = state_bytes(f);
    for (int b = 0; b < 3; b++)
        memcpy(out + b * n, qkv_params_block(f->model->params, (qkv_param_block)(b == 0 ? QKV_BLOCK_DATA : b == 1 ? QKV_BLOCK_M : QKV_BLOCK_V)), n);
}

static void load_checkpoint(fz_trainer *f, const char *path) {
    const size_t n = state_bytes(f);
    char *before = malloc(3 * n), *after = malloc(3 * n);
    FZ_REQUIRE(before && after);
    snapshot(f, before);
    const int64_t steps = qkv_trainer_steps(f->trainer);
    int64_t epoch = -1, batch = -1;
    uint64_t fp = 0;
    qkv_status st = qkv_trainer_load(f->trainer, path, &epoch, &batch, &fp);
    if (st) {
        FZ_REQUIRE(qkv_last_error()[0] != '\0');
        snapshot(f, after);
        FZ_REQUIRE(!memcmp(before, after, 3 * n) && qkv_trainer_steps(f->trainer) == steps);
    } else {
        FZ_REQUIRE(epoch >= 0 && batch >= 0);
        const char *again = fz_path("again.ckpt");
        FZ_REQUIRE(qkv_trainer_save(f->trainer, again, epoch, batch, fp) == QKV_OK);
        snapshot(f, before);
        int64_t e2 = -1, b2 = -1;
        uint64_t fp2 = 0;
        const int64_t steps2 = qkv_trainer_steps(f->trainer);
        FZ_REQUIRE(qkv_trainer_load(f->trainer, again, &e2, &b2, &fp2) == QKV_OK);
        FZ_REQUIRE(e2 == epoch && b2 == batch && fp2 == fp && qkv_trainer_steps(f->trainer) == steps2);
        snapshot(f, after);
        FZ_REQUIRE(!memcmp(before, after, 3 * n));
        remove(again);
    }
    free(before);
    free(after);
}

/* Mode 1: the valid tensors with the given metadata values (missing ones left out). */
static void load_with_metadata(fz_trainer *f, fz_reader *r) {
    const char *keys[N_KEYS], *values[N_KEYS];
    char *owned[N_KEYS];
    int n = 0;
    while (n < N_KEYS && r->n) {
        size_t len;
        const char *v = fz_field(r, '\n', &len);
        owned[n] = fz_strndup(v, len);
        keys[n] = CKPT_KEYS[n];
        values[n] = owned[n];
        n++;
    }
    const int64_t nt = qkv_st_count(f->valid);
    qkv_st_tensor *ts = calloc((size_t)nt, sizeof *ts);
    qkv_st_entry *es = calloc((size_t)nt, sizeof *es); /* the shapes live in the entries */
    FZ_REQUIRE(ts && es);
    for (int64_t i = 0; i < nt; i++) {
        FZ_REQUIRE(qkv_st_get(f->valid, i, &es[i]) == QKV_OK);
        ts[i] = (qkv_st_tensor){es[i].name, es[i].dtype_name, es[i].ndim, es[i].shape, es[i].data};
    }
    const char *path = fz_path("meta.ckpt");
    /* metadata must be UTF-8 without NUL bytes: the writer refuses anything else with a message */
    qkv_status st = qkv_st_save(path, ts, nt, keys, values, n);
    FZ_REQUIRE(st == QKV_OK || (st == QKV_ERR_INVALID_ARG && qkv_last_error()[0] != '\0'));
    if (!st) load_checkpoint(f, path);
    remove(path);
    free(ts);
    free(es);
    for (int i = 0; i < n; i++)
        free(owned[i]);
}

static void parse_position(const uint8_t *data, size_t size) {
    char *s = fz_strndup(data, size);
    qkv_batch_pos pos;
    qkv_status st = qkv_batch_pos_parse(s, &pos);
    FZ_REQUIRE(st == QKV_OK || (st == QKV_ERR_FORMAT && qkv_last_error()[0] != '\0'));
    if (!st) {
        char back[128];
        qkv_batch_pos_format(pos, back, sizeof back);
        FZ_REQUIRE(!strcmp(back, s));
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t mode = fz_byte(&r);
    fz_trainer *f = &trainers[(mode >> 2) & 1];
    switch (mode & 3) {
    case 0: {
        const char *path = fz_path("input.ckpt");
        fz_write_file(path, r.p, r.n);
        load_checkpoint(f, path);
        remove(path);
        break;
    }
    case 1:
        load_with_metadata(f, &r);
        break;
    default:
        parse_position(r.p, r.n);
        break;
    }
    return 0;
}
