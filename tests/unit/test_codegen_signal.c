/* DFT, LinearAttention and TfIdfVectorizer lowered (codegen/lower/signal.c)
 * against the reference interpreter: each test builds a small graph, runs it
 * with tbc_interpret, with the kernel IR evaluator and JIT-compiled, and
 * compares all three. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"
#include "tests/unit/support/codegen_check.h"

static tbc_op *nodev(model *md, tbc_opcode code, int n_in, tbc_value *const *ins, int n_out) {
	return tbc_op_new(md->m->main, code, "n", n_in, ins, n_out);
}
static void set_floats(tbc_op *op, const char *name, int n, const double *v) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_FLOATS);
	a->n = n;
	a->floats = tbc_arena_array(op->graph->module->arena, (size_t)n + 1, sizeof(double));
	memcpy(a->floats, v, (size_t)n * sizeof(double));
}
static void set_str(tbc_op *op, const char *name, const char *v) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_STRING);
	a->s = v;
	a->s_len = strlen(v);
}
static void set_float(tbc_op *op, const char *name, double v) { tbc_op_add_attr(op, name, TBC_ATTR_FLOAT)->f = v; }
static tbc_value *scalar_i64(model *md, int64_t v) {
	double d = (double)v;
	return constant(md, TBC_DT_I64, 0, NULL, &d);
}

/* ---- DFT ------------------------------------------------------------------------*/
/* DFT(x, dft_length, axis) with axis and dft_length constants (length 0: none). */
static tbc_op *dft(model *md, tbc_value *x, int64_t len, int64_t axis, bool inverse, bool onesided) {
	tbc_value *ins[3] = {x, len ? scalar_i64(md, len) : NULL, scalar_i64(md, axis)};
	tbc_op *op = nodev(md, TBC_OP_DFT, 3, ins, 1);
	if (inverse) attr_int(op, "inverse", 1);
	if (onesided) attr_int(op, "onesided", 1);
	return op;
}

/* y[k] = sum_j x[j] exp(-2 pi i j k / n) of a real signal, along each axis
 * (axis given from the front and from the back). */
static void test_dft_real_signal_along_every_axis(void **state) {
	(void)state;
	static const int64_t axes[] = {0, 1, 2, -2, -3, -4};
	for (size_t i = 0; i < sizeof axes / sizeof *axes; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "2,5,6,1");
		check_outputs(&md, 1, &dft(&md, x, 0, axes[i], false, false)->outputs[0], 1e-6);
	}
}

/* Complex input, forward and inverse (the inverse divides by n). */
static void test_dft_complex_forward_and_inverse(void **state) {
	(void)state;
	for (int inverse = 0; inverse < 2; inverse++)
		for (int axis = 0; axis < 2; axis++) {
			model md = model_new();
			tbc_value *x = input(&md, TBC_DT_F32, "3,8,2");
			check_outputs(&md, 1, &dft(&md, x, 0, axis, inverse, false)->outputs[0], 1e-6);
		}
}

/* onesided: the n/2 + 1 first bins of a real signal, n even and odd. */
static void test_dft_onesided_even_and_odd_lengths(void **state) {
	(void)state;
	static const char *shapes[] = {"2,8,1", "2,7,1", "4,1,1"};
	for (size_t i = 0; i < 3; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, shapes[i]);
		check_outputs(&md, 1, &dft(&md, x, 0, 1, false, true)->outputs[0], 1e-6);
	}
}

/* inverse + onesided: a real signal from its half spectrum (Hermitian
 * extension), n = 2 (len - 1) by default, or dft_length odd, longer or
 * shorter than the extension. */
static void test_dft_inverse_of_a_half_spectrum(void **state) {
	(void)state;
	static const int64_t lens[] = {0, 9, 7, 6, 12, 3, 1};
	for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "2,5,3,2");
		check_outputs(&md, 1, &dft(&md, x, lens[i], 1, true, true)->outputs[0], 1e-6);
	}
}

/* dft_length shorter than the signal truncates it, longer pads with zeros. */
static void test_dft_length_truncates_and_pads(void **state) {
	(void)state;
	static const int64_t lens[] = {4, 6, 10, 1};
	for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
		for (int onesided = 0; onesided < 2; onesided++) {
			model md = model_new();
			tbc_value *x = input(&md, onesided ? TBC_DT_F32 : TBC_DT_F64, onesided ? "3,6,1" : "3,6,2");
			check_outputs(&md, 1, &dft(&md, x, lens[i], -2, false, onesided)->outputs[0], 1e-6);
		}
}

/* f16, bf16 and f64 signals: computed in double, rounded once on store. */
static void test_dft_every_float_type(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_F16, TBC_DT_BF16, TBC_DT_F64, TBC_DT_F32};
	for (size_t i = 0; i < 4; i++)
		for (int inverse = 0; inverse < 2; inverse++) {
			model md = model_new();
			tbc_value *x = input(&md, types[i], "2,6,2");
			check_outputs(&md, 1, &dft(&md, x, 0, 1, inverse, false)->outputs[0], 1e-3);
		}
}

/* A symbolic batch, and a transform along a symbolic dim (n known only at
 * run time: its twiddle table is sized then). */
static void test_dft_symbolic_dims(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,6,1", 4, -2, 2);
	check_outputs(&md, 1, &dft(&md, x, 0, 1, false, true)->outputs[0], 1e-6);
	md = model_new();
	x = input_sym(&md, TBC_DT_F32, "3,N,2", 5, -2, 2);
	check_outputs(&md, 1, &dft(&md, x, 0, 1, true, false)->outputs[0], 1e-6);
	md = model_new();
	x = input_sym(&md, TBC_DT_F32, "3,N,2", 5, -2, 2);
	check_outputs(&md, 1, &dft(&md, x, 7, 1, false, false)->outputs[0], 1e-6);
}

/* No axis input (opset 20 form): the axis is -2. */
static void test_dft_default_axis(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,5,2");
	tbc_value *y = op1(&md, TBC_OP_DFT, x);
	check_outputs(&md, 1, &y, 1e-6);
}

/* The axis as a graph input: the output shape is the input's whatever the
 * axis, so each axis gets its loop nest and the run picks one. */
static void test_dft_axis_given_at_run_time(void **state) {
	(void)state;
	static const double axes[] = {0, 1, 2, -2, -3, -4};
	for (size_t i = 0; i < sizeof axes / sizeof *axes; i++)
		for (int inverse = 0; inverse < 2; inverse++) {
			model md = model_new();
			tbc_value *x = input(&md, TBC_DT_F32, "2,3,4,2");
			tbc_value *ins[3] = {x, NULL, values_input(&md, TBC_DT_I64, 0, &axes[i])};
			tbc_op *op = nodev(&md, TBC_OP_DFT, 3, ins, 1);
			if (inverse) attr_int(op, "inverse", 1);
			check_outputs(&md, 1, &op->outputs[0], 1e-6);
		}
}

/* One-sided transforms along an axis given at run time: the axis picks
 * which output dim is resized (n/2 + 1 forward; 2 (n - 1) for the inverse
 * of a half spectrum), so a shape kernel computes the output dims. */
static void test_dft_onesided_along_a_run_time_axis(void **state) {
	(void)state;
	static const double axes[] = {0, 1, 2, -2, -4};
	for (size_t i = 0; i < sizeof axes / sizeof *axes; i++)
		for (int inverse = 0; inverse < 2; inverse++) {
			model md = model_new();
			tbc_value *x = input(&md, TBC_DT_F32, inverse ? "3,5,4,2" : "3,5,4,1");
			tbc_value *ins[3] = {x, NULL, values_input(&md, TBC_DT_I64, 0, &axes[i])};
			tbc_op *op = nodev(&md, TBC_OP_DFT, 3, ins, 1);
			attr_int(op, "onesided", 1);
			if (inverse) attr_int(op, "inverse", 1);
			check_outputs(&md, 1, &op->outputs[0], 1e-6);
		}
	model md = model_new(); /* out of range: the shape kernel fails the run as the interpreter does */
	static const double bad = 3;
	tbc_value *ins[3] = {input(&md, TBC_DT_F32, "3,5,4,1"), NULL, values_input(&md, TBC_DT_I64, 0, &bad)};
	tbc_op *op = nodev(&md, TBC_OP_DFT, 3, ins, 1);
	attr_int(op, "onesided", 1);
	check_run_fails(&md, op->outputs[0]);
}

/* An axis out of [-r, r-2] (or -1, the complex dim) fails the run, as in the
 * interpreter. */
static void test_dft_axis_out_of_range_fails_the_run(void **state) {
	(void)state;
	static const double axes[] = {-1, 3, -5};
	for (size_t i = 0; i < 3; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "2,3,4,1");
		tbc_value *ins[3] = {x, NULL, values_input(&md, TBC_DT_I32, 0, &axes[i])};
		check_run_fails(&md, nodev(&md, TBC_OP_DFT, 3, ins, 1)->outputs[0]);
	}
}

/* dft_length given at run time makes the output shape depend on the data. */
static void test_dft_length_at_run_time_is_refused(void **state) {
	(void)state;
	model md = model_new();
	double n = 4;
	tbc_value *x = input(&md, TBC_DT_F32, "2,6,1");
	tbc_value *ins[3] = {x, values_input(&md, TBC_DT_I64, 0, &n), scalar_i64(&md, 1)};
	check_lowering_fails(&md, nodev(&md, TBC_OP_DFT, 3, ins, 1)->outputs[0], TBC_ERR_UNSUPPORTED, "depends on the data");
}

/* Power-of-two lengths from 32 on take the radix-2 FFT: forward real and
 * complex, inverse, onesided, the inverse of a half spectrum, zero padding
 * and truncation through dft_length; equal to the direct sum within double
 * rounding. */
static void test_dft_radix2_lengths(void **state) {
	(void)state;
	static const struct {
		const char *shape;
		int64_t len, axis;
		bool inverse, onesided;
	} cases[] = {
		{"3,32,1", 0, 1, false, false},  {"2,64,2", 0, 1, false, false}, {"2,64,2", 0, 1, true, false},
		{"128,2,1", 0, 0, false, true},  {"2,33,2", 0, 1, true, true},   {"2,20,3,2", 64, 1, true, true},
		{"2,40,2", 64, 1, true, true},   {"4,20,2", 32, 1, false, false}, {"4,50,1", 32, -2, false, true},
		{"2,32,2,2", 0, 1, false, false}, {"2,3,256,2", 0, 2, true, false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, cases[i].shape);
		tbc_op *op = dft(&md, x, cases[i].len, cases[i].axis, cases[i].inverse, cases[i].onesided);
		check_outputs(&md, 1, &op->outputs[0], 1e-6);
	}
	/* A symbolic batch; an axis at run time picking between the FFT (64)
	 * and the direct sum (6). */
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F64, "N,64,2", 3, -1, 1);
	check_outputs(&md, 1, &dft(&md, x, 0, 1, false, false)->outputs[0], 1e-9);
	for (int a = 0; a < 2; a++) {
		md = model_new();
		double axis = a;
		x = input(&md, TBC_DT_F32, "64,6,2");
		tbc_value *ins[3] = {x, NULL, values_input(&md, TBC_DT_I64, 0, &axis)};
		check_outputs(&md, 1, &nodev(&md, TBC_OP_DFT, 3, ins, 1)->outputs[0], 1e-6);
	}
}

/* ---- LinearAttention -------------------------------------------------------------*/
typedef struct la_case {
	const char *rule;
	int64_t hq, hkv, dk, dv;
	bool past, decay_per_head, beta_scalar;
	tbc_dtype dt, state_dt;
	double scale;
	const char *bt; /* batch and time dims: "2,5" or symbolic "N,N" */
} la_case;

static void check_linear_attention(const la_case *c) {
	model md = model_new();
	bool gated = !strcmp(c->rule, "gated") || !strcmp(c->rule, "gated_delta");
	bool delta = !strcmp(c->rule, "delta") || !strcmp(c->rule, "gated_delta");
	char dims[64];
	snprintf(dims, sizeof dims, "%s,%lld", c->bt, (long long)(c->hq * c->dk));
	tbc_value *q = input_sym(&md, c->dt, dims, 3, -1, 1);
	snprintf(dims, sizeof dims, "%s,%lld", c->bt, (long long)(c->hkv * c->dk));
	/* Keys of small norm keep the delta rule stable. */
	tbc_value *k = input_sym(&md, c->dt, dims, 3, -0.4, 0.4);
	snprintf(dims, sizeof dims, "%s,%lld", c->bt, (long long)(c->hkv * c->dv));
	tbc_value *v = input_sym(&md, c->dt, dims, 3, -1, 1);
	tbc_value *ins[6] = {q, k, v, NULL, NULL, NULL};
	if (c->past) {
		snprintf(dims, sizeof dims, "%c,%lld,%lld,%lld", c->bt[0], (long long)c->hkv, (long long)c->dk, (long long)c->dv);
		ins[3] = input_sym(&md, c->state_dt, dims, 3, -0.5, 0.5);
	}
	if (gated) {
		snprintf(dims, sizeof dims, "%s,%lld", c->bt, (long long)(c->decay_per_head ? c->hkv : c->hkv * c->dk));
		ins[4] = input_sym(&md, c->dt, dims, 3, -1, 0);
	}
	if (delta) {
		snprintf(dims, sizeof dims, "%s,%lld", c->bt, (long long)(c->beta_scalar ? 1 : c->hkv));
		ins[5] = input_sym(&md, c->dt, dims, 3, 0, 1);
	}
	int n_in = delta ? 6 : gated ? 5 : c->past ? 4 : 3;
	tbc_op *op = nodev(&md, TBC_OP_LinearAttention, n_in, ins, 2);
	attr_int(op, "q_num_heads", c->hq);
	attr_int(op, "kv_num_heads", c->hkv);
	set_str(op, "update_rule", c->rule);
	if (c->scale) set_float(op, "scale", c->scale);
	double rtol = c->dt == TBC_DT_F16 || c->dt == TBC_DT_BF16 ? 1e-2 : 1e-6;
	check_outputs(&md, 2, op->outputs, rtol);
}

/* Each update rule, with and without a past state. */
static void test_linear_attention_every_update_rule(void **state) {
	(void)state;
	static const char *rules[] = {"linear", "gated", "delta", "gated_delta"};
	for (int r = 0; r < 4; r++)
		for (int past = 0; past < 2; past++)
			check_linear_attention(&(la_case){rules[r], 2, 2, 4, 3, past, false, false, TBC_DT_F32, TBC_DT_F32, 0, "2,5"});
}

/* Grouped and multi-query heads; decay per head; beta shared by the heads. */
static void test_linear_attention_gqa_mqa_and_broadcast_gates(void **state) {
	(void)state;
	check_linear_attention(&(la_case){"gated_delta", 4, 2, 4, 5, true, false, false, TBC_DT_F32, TBC_DT_F32, 0, "2,3"});
	check_linear_attention(&(la_case){"gated_delta", 6, 1, 3, 4, false, true, true, TBC_DT_F32, TBC_DT_F32, 0, "1,4"});
	check_linear_attention(&(la_case){"gated", 2, 2, 8, 8, true, true, false, TBC_DT_F32, TBC_DT_F32, 0, "3,2"});
	check_linear_attention(&(la_case){"delta", 4, 4, 2, 6, true, false, true, TBC_DT_F32, TBC_DT_F32, 0.3, "2,4"});
}

/* f16, bf16, f64; a state of another type than the query (present_state
 * takes past_state's type). */
static void test_linear_attention_float_types(void **state) {
	(void)state;
	check_linear_attention(&(la_case){"gated_delta", 4, 2, 4, 4, false, false, false, TBC_DT_F16, TBC_DT_F16, 0, "2,3"});
	check_linear_attention(&(la_case){"gated_delta", 2, 2, 4, 4, true, false, false, TBC_DT_F16, TBC_DT_F32, 0, "2,3"});
	check_linear_attention(&(la_case){"linear", 2, 1, 4, 4, true, false, false, TBC_DT_BF16, TBC_DT_BF16, 0, "2,3"});
	check_linear_attention(&(la_case){"gated_delta", 2, 2, 5, 3, true, false, false, TBC_DT_F64, TBC_DT_F64, 0.5, "2,6"});
}

/* Symbolic batch and sequence length. */
static void test_linear_attention_symbolic_batch_and_time(void **state) {
	(void)state;
	check_linear_attention(&(la_case){"gated_delta", 4, 2, 4, 3, true, false, false, TBC_DT_F32, TBC_DT_F32, 0, "B,T"});
	check_linear_attention(&(la_case){"linear", 2, 2, 3, 3, false, false, false, TBC_DT_F32, TBC_DT_F32, 0, "B,1"});
}

/* ---- TfIdfVectorizer ---------------------------------------------------------------*/
/* Pool: unigrams {1, 3, 3 (again)}, bigrams {(1,2), (2,1), (3,3)}, trigrams
 * {(1,2,3), (9,9,9)}; outputs 0..6, two grams sharing output 2, output 6
 * counted by none. */
static tbc_op *tfidf(model *md, tbc_value *x, const char *mode, int64_t min_n, int64_t max_n, int64_t skip,
		     bool weights) {
	static const int64_t counts[3] = {0, 3, 9};
	static const int64_t pool[15] = {1, 3, 3, 1, 2, 2, 1, 3, 3, 1, 2, 3, 9, 9, 9};
	static const int64_t indexes[8] = {0, 1, 5, 2, 3, 2, 4, 5};
	static const double w[7] = {0.5, 2, 0.25, 1.5, 3, 0.75, 9};
	tbc_op *op = nodev(md, TBC_OP_TfIdfVectorizer, 1, &x, 1);
	set_str(op, "mode", mode);
	attr_int(op, "min_gram_length", min_n);
	attr_int(op, "max_gram_length", max_n);
	attr_int(op, "max_skip_count", skip);
	attr_ints(op, "ngram_counts", 3, counts);
	attr_ints(op, "pool_int64s", 15, pool);
	attr_ints(op, "ngram_indexes", 8, indexes);
	if (weights) set_floats(op, "weights", 7, w);
	return op;
}

/* TF, IDF and TFIDF, with and without weights, over gram lengths and skips. */
static void test_tfidf_modes_lengths_and_skips(void **state) {
	(void)state;
	static const char *modes[] = {"TF", "IDF", "TFIDF"};
	static const int64_t lens[][2] = {{1, 1}, {1, 2}, {2, 2}, {1, 3}, {2, 3}, {3, 3}, {2, 5}};
	for (int m = 0; m < 3; m++)
		for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
			for (int skip = 0; skip < 4; skip += 3)
				for (int w = 0; w < 2; w++) {
					model md = model_new();
					tbc_value *x = input_sym(&md, TBC_DT_I64, "3,12", 1, 0, 4);
					check_outputs(&md, 1, &tfidf(&md, x, modes[m], lens[l][0], lens[l][1], skip, w)->outputs[0], 0);
				}
}

/* int32 tokens, one row or a batch (a symbolic one too), and a single token. */
static void test_tfidf_input_types_and_shapes(void **state) {
	(void)state;
	static const char *shapes[] = {"10", "2,7", "N,9", "", "2,1", "2,0"};
	for (int t = 0; t < 2; t++)
		for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
			model md = model_new();
			tbc_value *x = input_sym(&md, t ? TBC_DT_I32 : TBC_DT_I64, shapes[s], 4, 0, 4);
			check_outputs(&md, 1, &tfidf(&md, x, "TFIDF", 1, 3, 2, true)->outputs[0], 0);
		}
}

/* A pool token beyond int32 never matches an int32 input. */
static void test_tfidf_pool_token_beyond_int32(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_I32, "2,8", 1, 0, 3);
	tbc_op *op = nodev(&md, TBC_OP_TfIdfVectorizer, 1, &x, 1);
	set_str(op, "mode", "TF");
	attr_int(op, "min_gram_length", 1);
	attr_int(op, "max_gram_length", 2);
	attr_int(op, "max_skip_count", 1);
	attr_ints(op, "ngram_counts", 2, (int64_t[]){0, 3});
	attr_ints(op, "pool_int64s", 7, (int64_t[]){1, 4294967297, 2, 1, 2, 4294967297, 1});
	attr_ints(op, "ngram_indexes", 5, (int64_t[]){0, 1, 2, 3, 4});
	check_outputs(&md, 1, &op->outputs[0], 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dft_real_signal_along_every_axis),
		cmocka_unit_test(test_dft_complex_forward_and_inverse),
		cmocka_unit_test(test_dft_onesided_even_and_odd_lengths),
		cmocka_unit_test(test_dft_inverse_of_a_half_spectrum),
		cmocka_unit_test(test_dft_length_truncates_and_pads),
		cmocka_unit_test(test_dft_every_float_type),
		cmocka_unit_test(test_dft_symbolic_dims),
		cmocka_unit_test(test_dft_radix2_lengths),
		cmocka_unit_test(test_dft_default_axis),
		cmocka_unit_test(test_dft_axis_given_at_run_time),
		cmocka_unit_test(test_dft_onesided_along_a_run_time_axis),
		cmocka_unit_test(test_dft_axis_out_of_range_fails_the_run),
		cmocka_unit_test(test_dft_length_at_run_time_is_refused),
		cmocka_unit_test(test_linear_attention_every_update_rule),
		cmocka_unit_test(test_linear_attention_gqa_mqa_and_broadcast_gates),
		cmocka_unit_test(test_linear_attention_float_types),
		cmocka_unit_test(test_linear_attention_symbolic_batch_and_time),
		cmocka_unit_test(test_tfidf_modes_lengths_and_skips),
		cmocka_unit_test(test_tfidf_input_types_and_shapes),
		cmocka_unit_test(test_tfidf_pool_token_beyond_int32),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
