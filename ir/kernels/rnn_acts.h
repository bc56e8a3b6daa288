/* The activation functions of RNN, GRU and LSTM as the interpreter reads
 * them from an op's attributes (ir/kernels/seq_rnn.c); the CPU lowering
 * (codegen/lower/rnn.c) reads them the same way. */
#ifndef TBC_IR_KERNELS_RNN_ACTS_H
#define TBC_IR_KERNELS_RNN_ACTS_H

#include "ir/ir.h"

enum rnn_kind { RNN_PLAIN, RNN_GRU, RNN_LSTM };

typedef enum {
	ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU,
	ACT_SCALEDTANH, ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
} act_kind;

typedef struct {
	act_kind kind;
	double alpha, beta;
} act_fn;

/* acts[d][k]: the function (with its alpha and beta) of direction d and
 * activation k.  Alphas and betas are consumed in order by the activations
 * that take them (as onnxruntime does); one list of activations for a
 * bidirectional op serves both directions.  Returns NULL or a message. */
const char *tbc_rnn_parse_acts(const tbc_op *op, enum rnn_kind kind, int num_dir, act_fn acts[2][3]);

#endif
