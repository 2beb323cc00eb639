/*
 * qkv_graph.h: the former name of qkv_tensor.h (tensors, the context, parameters, RNG), kept so
 * programs written against it still compile. New code includes qkv_tensor.h or qkv.h.
 */
#ifndef QKV_GRAPH_H
#define QKV_GRAPH_H

#include "qkv_tensor.h"

#endif
