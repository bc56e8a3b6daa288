/* RNN, GRU and LSTM lowered for the CPU (codegen/lower/rnn.c) against the
 * reference interpreter: each test builds one recurrent op with random
 * inputs, runs it with tbc_interpret, the kernel IR evaluator and the JIT,
 * and compares all three (check_outputs, tests/unit/support). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "codegen/lower/lower.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"
#include "tests/unit/support/codegen_check.h"

enum { PLAIN, GRU, LSTM };
static const int gates[3] = {1, 3, 4};
static const tbc_opcode codes[3] = {TBC_OP_RNN, TBC_OP_GRU, TBC_OP_LSTM};

/* One recurrent op: sizes, which optional inputs and outputs it has, its
 * attributes.  Dims of X are "S,N,I" (layout 0) or "N,S,I" (layout 1); a
 * batch of 0 here is symbolic (N, 3 at run time). */
typedef struct rcase {
	int kind;
	tbc_dtype dt;
	int64_t seq, batch, in, hidden;
	const char *direction; /* NULL: forward (the default) */
	int layout;
	bool bias, lens, h0, c0, peep;
	const int64_t *lens_vals; /* with a static batch; NULL: random in [0, seq] */
	double clip;              /* 0: none */
	bool lbr, input_forget;
	int n_acts;
	const char *acts[6];
	int n_alpha, n_beta;
	double alpha[6], beta[6];
	bool no_y, no_yh, no_yc; /* outputs omitted */
} rcase;

static void set_int(tbc_op *op, const char *name, int64_t v) { tbc_op_add_attr(op, name, TBC_ATTR_INT)->i = v; }
static void set_float(tbc_op *op, const char *name, double v) { tbc_op_add_attr(op, name, TBC_ATTR_FLOAT)->f = v; }
static void set_str(tbc_op *op, const char *name, const char *v) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_STRING);
	a->s = tbc_arena_strdup(op->graph->module->arena, v);
	a->s_len = strlen(v);
}
static void set_floats(tbc_op *op, const char *name, int n, const double *v) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_FLOATS);
	a->n = n;
	a->floats = tbc_arena_array(op->graph->module->arena, (size_t)n + 1, sizeof(double));
	memcpy(a->floats, v, (size_t)n * sizeof(double));
}
static void set_strs(tbc_op *op, const char *name, int n, const char *const *v) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_STRINGS);
	a->n = n;
	a->strings = tbc_arena_array(op->graph->module->arena, (size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++) a->strings[i] = tbc_arena_strdup(op->graph->module->arena, v[i]);
}

/* A float input of n dims; a dim of 0 is the symbolic batch N. */
static tbc_value *fin(model *md, tbc_dtype dt, int n, const int64_t *d, double lo, double hi) {
	char dims[64] = "";
	for (int i = 0; i < n; i++) {
		size_t at = strlen(dims);
		if (d[i]) snprintf(dims + at, sizeof dims - at, i ? ",%lld" : "%lld", (long long)d[i]);
		else snprintf(dims + at, sizeof dims - at, i ? ",N" : "N");
	}
	return input_sym(md, dt, dims, 3, lo, hi);
}
#define FIN(md, dt, lo, hi, ...) fin(md, dt, (int)(sizeof(int64_t[]){__VA_ARGS__} / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}, lo, hi)

/* Builds the op of c; *outs gets its present outputs, returns their count. */
static int build(model *md, const rcase *c, tbc_op **out_op, tbc_value **outs) {
	int D = c->direction && !strcmp(c->direction, "bidirectional") ? 2 : 1;
	int64_t G = gates[c->kind], H = c->hidden, S = c->seq, I = c->in;
	int64_t B = c->batch; /* 0: symbolic */
	tbc_value *ins[8] = {0};
	/* X: [S, B, I] or [B, S, I]; states: [D, B, H] or [B, D, H]. */
	ins[0] = c->layout ? FIN(md, c->dt, -2, 2, B, S, I) : FIN(md, c->dt, -2, 2, S, B, I);
	ins[1] = FIN(md, c->dt, -0.7, 0.7, D, G * H, I);
	ins[2] = FIN(md, c->dt, -0.7, 0.7, D, G * H, H);
	if (c->bias) ins[3] = FIN(md, c->dt, -0.5, 0.5, D, 2 * G * H);
	if (c->lens) {
		if (c->lens_vals) {
			int64_t dims[1] = {c->batch};
			double v[16];
			for (int64_t b = 0; b < c->batch; b++) v[b] = (double)c->lens_vals[b];
			ins[4] = constant(md, TBC_DT_I32, 1, dims, v);
		} else {
			char ld[24] = "N";
			if (B) snprintf(ld, sizeof ld, "%lld", (long long)B);
			ins[4] = input_sym(md, TBC_DT_I32, ld, 3, 0, (double)S + 1);
		}
	}
	for (int i = 5; i < 7; i++)
		if (i == 5 ? c->h0 : c->c0) ins[i] = c->layout ? FIN(md, c->dt, -1, 1, B, D, H) : FIN(md, c->dt, -1, 1, D, B, H);
	if (c->peep) ins[7] = FIN(md, c->dt, -0.5, 0.5, D, 3 * H);
	int n_in = 3;
	for (int i = 3; i < 8; i++)
		if (ins[i]) n_in = i + 1;
	int n_out = c->kind == LSTM ? 3 : 2;
	tbc_op *op = tbc_op_new(md->m->main, codes[c->kind], "n", n_in, ins, n_out);
	set_int(op, "hidden_size", H);
	if (c->direction) set_str(op, "direction", c->direction);
	if (c->layout) set_int(op, "layout", 1);
	if (c->clip) set_float(op, "clip", c->clip);
	if (c->lbr) set_int(op, "linear_before_reset", 1);
	if (c->input_forget) set_int(op, "input_forget", 1);
	if (c->n_acts) set_strs(op, "activations", c->n_acts, c->acts);
	if (c->n_alpha) set_floats(op, "activation_alpha", c->n_alpha, c->alpha);
	if (c->n_beta) set_floats(op, "activation_beta", c->n_beta, c->beta);
	/* Omitted outputs are NULL, as the frontend makes them for "". */
	bool omit[3] = {c->no_y, c->no_yh, c->no_yc};
	int n = 0;
	for (int i = 0; i < n_out; i++) {
		if (omit[i]) op->outputs[i] = NULL;
		else outs[n++] = op->outputs[i];
	}
	*out_op = op;
	return n;
}

static void run_case(const rcase *c, double rtol) {
	model md = model_new();
	tbc_op *op;
	tbc_value *outs[3];
	int n = build(&md, c, &op, outs);
	check_outputs(&md, n, outs, rtol);
}

/* Every dtype the interpreter computes in double and rounds on store. */
static const tbc_dtype float_types[] = {TBC_DT_F32, TBC_DT_F64, TBC_DT_F16, TBC_DT_BF16};

/* ---- RNN -------------------------------------------------------------------------*/
/* H_t = tanh(X_t W^T + H_{t-1} R^T + Wb + Rb), Y and Y_h, in every float type. */
static void test_rnn_defaults_every_float_type(void **state) {
	(void)state;
	for (size_t i = 0; i < sizeof float_types / sizeof float_types[0]; i++) {
		rcase c = {.kind = PLAIN, .dt = float_types[i], .seq = 4, .batch = 2, .in = 3, .hidden = 5, .bias = true};
		run_case(&c, float_types[i] == TBC_DT_F32 || float_types[i] == TBC_DT_F64 ? 1e-6 : 1e-2);
	}
}

/* A dynamic batch: X [S, N, I], sequence_lens [N] in [0, S], initial_h [1, N, H]. */
static void test_rnn_symbolic_batch_with_lens_and_initial_h(void **state) {
	(void)state;
	for (int layout = 0; layout < 2; layout++) {
		rcase c = {.kind = PLAIN, .dt = TBC_DT_F32, .seq = 5, .batch = 0, .in = 3, .hidden = 4, .layout = layout,
			   .bias = true, .lens = true, .h0 = true};
		run_case(&c, 1e-6);
	}
}

/* reverse walks t = len-1 .. 0; bidirectional runs both into Y's direction
 * axis, with a different activation per direction (Relu forward, Affine 0.5x+0.1
 * backward), lengths 3, 0 and 5 of 5 (Y zero past them, Y_h = the last state). */
static void test_rnn_reverse_and_bidirectional(void **state) {
	(void)state;
	static const int64_t lens[3] = {3, 0, 5};
	rcase rev = {.kind = PLAIN, .dt = TBC_DT_F32, .seq = 5, .batch = 3, .in = 2, .hidden = 3, .direction = "reverse",
		     .lens = true, .lens_vals = lens, .h0 = true};
	run_case(&rev, 1e-6);
	for (int layout = 0; layout < 2; layout++) {
		rcase bi = {.kind = PLAIN, .dt = TBC_DT_F64, .seq = 5, .batch = 3, .in = 2, .hidden = 3,
			    .direction = "bidirectional", .layout = layout, .bias = true, .lens = true, .lens_vals = lens,
			    .h0 = true, .n_acts = 2, .acts = {"Relu", "Affine"}, .n_alpha = 1, .alpha = {0.5}, .n_beta = 1,
			    .beta = {0.1}};
		run_case(&bi, 1e-6);
	}
}

/* Every activation of the spec's list, with its alpha/beta; clip 0.4 on
 * every other one; Relu and Tanh both ways. */
static void test_rnn_every_activation_and_clip(void **state) {
	(void)state;
	static const char *const names[] = {"Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu",
					    "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus", "Relu", "Tanh"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		rcase c = {.kind = PLAIN, .dt = TBC_DT_F32, .seq = 3, .batch = 2, .in = 3, .hidden = 4, .bias = true,
			   .n_acts = 1, .acts = {names[i]}, .n_alpha = 1, .alpha = {0.3}, .n_beta = 1, .beta = {0.6},
			   .clip = (i < 11 ? i % 2 : i == 11) ? 0.4 : 0};
		run_case(&c, 1e-6);
	}
}

/* ---- GRU -------------------------------------------------------------------------*/
static void test_gru_defaults_every_float_type(void **state) {
	(void)state;
	for (size_t i = 0; i < sizeof float_types / sizeof float_types[0]; i++)
		for (int lbr = 0; lbr < 2; lbr++) {
			rcase c = {.kind = GRU, .dt = float_types[i], .seq = 3, .batch = 2, .in = 3, .hidden = 4, .bias = lbr,
				   .lbr = lbr};
			run_case(&c, float_types[i] == TBC_DT_F32 || float_types[i] == TBC_DT_F64 ? 1e-6 : 1e-2);
		}
}

/* linear_before_reset 0 and 1, a dynamic batch with lengths, both layouts,
 * bidirectional, clip, and custom activations (HardSigmoid 0.3/0.4, Softsign). */
static void test_gru_bidirectional_symbolic_batch_lens_clip(void **state) {
	(void)state;
	for (int lbr = 0; lbr < 2; lbr++)
		for (int layout = 0; layout < 2; layout++) {
			rcase c = {.kind = GRU, .dt = TBC_DT_F32, .seq = 4, .batch = 0, .in = 3, .hidden = 5,
				   .direction = "bidirectional", .layout = layout, .bias = true, .lens = true, .h0 = true,
				   .clip = 0.8, .lbr = lbr, .n_acts = 4, .acts = {"HardSigmoid", "Softsign", "Sigmoid", "Tanh"},
				   .n_alpha = 1, .alpha = {0.3}, .n_beta = 1, .beta = {0.4}};
			run_case(&c, 1e-6);
		}
	rcase rev = {.kind = GRU, .dt = TBC_DT_F64, .seq = 4, .batch = 2, .in = 2, .hidden = 3, .direction = "reverse"};
	run_case(&rev, 1e-6);
}

/* Y omitted (only Y_h), and Y_h omitted (only Y). */
static void test_gru_outputs_omitted(void **state) {
	(void)state;
	rcase a = {.kind = GRU, .dt = TBC_DT_F32, .seq = 3, .batch = 2, .in = 2, .hidden = 3, .bias = true, .no_y = true};
	run_case(&a, 1e-6);
	rcase b = {.kind = GRU, .dt = TBC_DT_F32, .seq = 3, .batch = 2, .in = 2, .hidden = 3, .no_yh = true};
	run_case(&b, 1e-6);
}

/* ---- LSTM ------------------------------------------------------------------------*/
static void test_lstm_defaults_every_float_type(void **state) {
	(void)state;
	for (size_t i = 0; i < sizeof float_types / sizeof float_types[0]; i++) {
		rcase c = {.kind = LSTM, .dt = float_types[i], .seq = 3, .batch = 2, .in = 3, .hidden = 4};
		run_case(&c, float_types[i] == TBC_DT_F32 || float_types[i] == TBC_DT_F64 ? 1e-6 : 1e-2);
	}
}

/* Peepholes, initial h and c, input_forget, clip, lengths with a dynamic
 * batch, bidirectional, layout 1; Y, Y_h and Y_c. */
static void test_lstm_peepholes_input_forget_bidirectional(void **state) {
	(void)state;
	for (int fg = 0; fg < 2; fg++)
		for (int layout = 0; layout < 2; layout++) {
			rcase c = {.kind = LSTM, .dt = TBC_DT_F32, .seq = 4, .batch = 0, .in = 3, .hidden = 3,
				   .direction = "bidirectional", .layout = layout, .bias = true, .lens = true, .h0 = true,
				   .c0 = true, .peep = true, .clip = fg ? 0.5 : 0, .input_forget = fg};
			run_case(&c, 1e-6);
		}
	static const int64_t lens[2] = {1, 3};
	rcase rev = {.kind = LSTM, .dt = TBC_DT_F64, .seq = 3, .batch = 2, .in = 2, .hidden = 2, .direction = "reverse",
		     .lens = true, .lens_vals = lens, .c0 = true, .n_acts = 3, .acts = {"Sigmoid", "LeakyRelu", "Elu"},
		     .n_alpha = 2, .alpha = {0.2, 0.7}};
	run_case(&rev, 1e-6);
}

/* Any subset of Y, Y_h, Y_c. */
static void test_lstm_outputs_omitted(void **state) {
	(void)state;
	for (int mask = 1; mask < 7; mask++) {
		rcase c = {.kind = LSTM, .dt = TBC_DT_F32, .seq = 3, .batch = 2, .in = 2, .hidden = 3, .c0 = true,
			   .no_y = mask & 1, .no_yh = mask & 2, .no_yc = mask & 4};
		run_case(&c, 1e-6);
	}
}

/* ---- Failures ---------------------------------------------------------------------*/
/* Runs the lowered graph in the evaluator and the JIT; both must fail (the
 * interpreter fails too). */
static void rnn_run_fails(model *md, int n, tbc_value **outs) {
	tbc_diags *d = tbc_diags_create();
	for (int i = 0; i < n; i++) tbc_graph_add_output(md->m->main, outs[i]);
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_tensor *want[3] = {0}, *got[3] = {0}, *jit[3] = {0};
	assert_int_not_equal(tbc_interpret(md->m, md->in, (size_t)md->n_in, want, (size_t)n, d), TBC_OK);
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	assert_int_equal(kir_lower(md->m, lower_target(), arena, d, &p), TBC_OK);
	assert_int_not_equal(kir_program_eval(p, md->in, (size_t)md->n_in, got, (size_t)n, d), TBC_OK);
	tbc_jit *j = NULL;
	assert_int_equal(tbc_jit_compile(md->m, NULL, d, &j), TBC_OK);
	assert_int_not_equal(tbc_abi_run_serial(tbc_jit_descriptor(j), md->in, (size_t)md->n_in, jit, (size_t)n, d), TBC_OK);
	tbc_jit_destroy(j);
	for (int i = 0; i < 3; i++) {
		tbc_tensor_destroy(want[i]);
		tbc_tensor_destroy(got[i]);
		tbc_tensor_destroy(jit[i]);
	}
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	tbc_module_destroy(md->m);
}

/* A sequence length past seq_length, or negative, fails the run (never reads
 * past X). */
static void test_sequence_lens_out_of_range_fails_the_run(void **state) {
	(void)state;
	static const int64_t past[2] = {2, 4}, negative[2] = {-1, 1};
	const int64_t *bad[2] = {past, negative};
	for (int kind = 0; kind < 3; kind++)
		for (int i = 0; i < 2; i++) {
			model md = model_new();
			rcase c = {.kind = kind, .dt = TBC_DT_F32, .seq = 3, .batch = 2, .in = 2, .hidden = 2, .lens = true,
				   .lens_vals = bad[i]};
			tbc_op *op;
			tbc_value *outs[3];
			int n = build(&md, &c, &op, outs);
			rnn_run_fails(&md, n, outs);
		}
}

/* A symbolic input size is refused at compile time, never run wrong. */
static void test_symbolic_input_size_has_no_lowering(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *ins[3] = {input(&md, TBC_DT_F32, "3,2,K"), input(&md, TBC_DT_F32, "1,4,K"),
			     input(&md, TBC_DT_F32, "1,4,4")};
	tbc_op *op = tbc_op_new(md.m->main, TBC_OP_RNN, "n", 3, ins, 2);
	set_int(op, "hidden_size", 4);
	check_lowering_fails(&md, op->outputs[0], TBC_ERR_UNSUPPORTED, "no lowering yet");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rnn_defaults_every_float_type),
		cmocka_unit_test(test_rnn_symbolic_batch_with_lens_and_initial_h),
		cmocka_unit_test(test_rnn_reverse_and_bidirectional),
		cmocka_unit_test(test_rnn_every_activation_and_clip),
		cmocka_unit_test(test_gru_defaults_every_float_type),
		cmocka_unit_test(test_gru_bidirectional_symbolic_batch_lens_clip),
		cmocka_unit_test(test_gru_outputs_omitted),
		cmocka_unit_test(test_lstm_defaults_every_float_type),
		cmocka_unit_test(test_lstm_peepholes_input_forget_bidirectional),
		cmocka_unit_test(test_lstm_outputs_omitted),
		cmocka_unit_test(test_sequence_lens_out_of_range_fails_the_run),
		cmocka_unit_test(test_symbolic_input_size_has_no_lowering),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
