/*
 * qkv.h: the whole qkv API.
 *
 *   qkv_base.h      version, status codes, error messages, threads
 *   qkv_enums.h     every enumeration, one list of X(constant, name, help) each
 *   qkv_tensor.h    tensors, views, the context (step arena, tape, sticky error), parameters, RNG
 *   qkv_ops.h       the op catalogue (one header per family in ops/), every op with a proven backward
 *   qkv_nn.h        multi-head attention, Transformer encoder and decoder layers
 *   qkv_model.h     encoder-decoder, encoder-only and decoder-only models, model files
 *   qkv_decode.h    greedy, beam search and sampling with a KV cache (sessions)
 *   qkv_io.h        safetensors files, parameter save/load
 *   qkv_optim.h     SGD, Adam, AdamW, learning-rate schedules, gradient clipping
 *   qkv_train.h     the trainer: steps, scheduled sampling, guided attention, checkpoints
 *   qkv_data.h      vocabularies, corpora, datasets, batching, metrics, word features
 *   qkv_tokenizer.h text <-> symbols: characters, pre-tokenized tokens, words
 *   qkv_mt_metrics.h corpus BLEU, chrF / chrF++ as sacreBLEU defines them, bootstrap intervals
 *   qkv_viz.h       attention maps and training curves: SVG, PNG, HTML, terminal
 *   qkv_registry.h  the names, values and help of every enumeration above
 */
#ifndef QKV_QKV_H
#define QKV_QKV_H

#include "qkv_base.h"
#include "qkv_tensor.h"
#include "qkv_ops.h"
#include "qkv_nn.h"
#include "qkv_model.h"
#include "qkv_decode.h"
#include "qkv_io.h"
#include "qkv_optim.h"
#include "qkv_train.h"
#include "qkv_data.h"
#include "qkv_tokenizer.h"
#include "qkv_mt_metrics.h"
#include "qkv_viz.h"
#include "qkv_registry.h"

#endif
