/*
 * qkv_ops.h: the op catalogue. One header per family under ops/; each op has a forward, a
 * backward (accumulating), a reference kernel and a fast kernel.
 *
 * Conventions shared by every op:
 * - ops take the context first and return a new step tensor, or NULL after recording a sticky
 *   error on the context (and then every later op returns NULL too);
 * - real tensors have dtype QKV_REAL (F32 in the product build, F64 in the test build);
 *   index tensors (token ids, targets, masks) are I32;
 * - an op records a tape entry when gradients are enabled and an input requires a gradient;
 *   ops that have no gradient (argmax, constant tables) refuse to record and say so;
 * - kernels need contiguous inputs: an op handed a strided view copies it first through
 *   qkv_contiguous (which has its own backward), so views are always safe to pass.
 *
 * Dimension legend: B batch, T query/target length, S key/source length, C model width,
 * H heads, D head size, V vocabulary, N rows (any leading dims flattened).
 */
#ifndef QKV_OPS_H
#define QKV_OPS_H

#include "ops/dense.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "ops/norm.h"
#include "ops/embedding.h"
#include "ops/softmax.h"
#include "ops/attention.h"
#include "ops/posenc.h"

#endif
