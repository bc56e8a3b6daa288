/* Lowering and the CPU backend against the reference interpreter: each test
 * builds a small graph, runs it with tbc_interpret, with the kernel IR
 * evaluator (kir_program_eval: lowering alone) and JIT-compiled for the host
 * (tbc_jit_compile + a serial host), and compares all three. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include "codegen/lower/lower.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"
#include "tests/unit/support/codegen_check.h"
#include "tests/unit/support/files.h"

static tbc_compile_options opts_at(int level) {
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.opt_level = level;
	return o;
}

/* ---- Elementwise ---------------------------------------------------------------*/
static void test_add_same_shape(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "2,3,4"), *b = input(&md, TBC_DT_F32, "2,3,4");
	check(&md, op2(&md, TBC_OP_Add, a, b));
}

static void test_add_broadcast_row_and_column(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "2,3,1"), *b = input(&md, TBC_DT_F32, "4");
	check(&md, op2(&md, TBC_OP_Add, a, b));
}

/* [2,4,1,8] + [2,1,1,8]: the size-1 dim between a broadcast dim and a full
 * one must not merge them into one loop. */
static void test_add_broadcast_across_a_unit_dim(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "2,4,1,8"), *b = input(&md, TBC_DT_F32, "2,1,1,8");
	tbc_value *c = input(&md, TBC_DT_F32, "1,4,1,1");
	check(&md, op2(&md, TBC_OP_Add, op2(&md, TBC_OP_Add, a, b), c));
}

static void test_mul_scalar_constant_inlined(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "5,7");
	double two = 2.5;
	check(&md, op2(&md, TBC_OP_Mul, a, constant(&md, TBC_DT_F32, 0, NULL, &two)));
}

static void test_sub_with_constant_vector(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F64, "3,4");
	double v[4] = {1, -2, 3.5, 1e10};
	int64_t dims[1] = {4};
	check(&md, op2(&md, TBC_OP_Sub, a, constant(&md, TBC_DT_F64, 1, dims, v)));
}

static void test_add_symbolic_batch(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "N,3", 5, -1, 1), *b = input(&md, TBC_DT_F32, "3");
	check(&md, op2(&md, TBC_OP_Add, a, b));
}

static void test_unary_float_ops(void **state) {
	(void)state;
	static const tbc_opcode ops[] = {TBC_OP_Abs, TBC_OP_Neg, TBC_OP_Exp, TBC_OP_Sin, TBC_OP_Cos, TBC_OP_Tan,
					 TBC_OP_Tanh, TBC_OP_Sinh, TBC_OP_Cosh, TBC_OP_Atan, TBC_OP_Asinh, TBC_OP_Erf,
					 TBC_OP_Floor, TBC_OP_Ceil, TBC_OP_Round, TBC_OP_Sign, TBC_OP_Relu,
					 TBC_OP_Sigmoid, TBC_OP_Softplus, TBC_OP_Softsign, TBC_OP_Mish, TBC_OP_HardSwish,
					 TBC_OP_HardSigmoid, TBC_OP_Elu, TBC_OP_Selu, TBC_OP_Celu, TBC_OP_LeakyRelu,
					 TBC_OP_ThresholdedRelu, TBC_OP_Shrink, TBC_OP_Gelu, TBC_OP_Swish, TBC_OP_Reciprocal,
					 TBC_OP_IsNaN, TBC_OP_IsInf};
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		for (int dt = 0; dt < 2; dt++) {
			model md = model_new();
			tbc_value *a = input(&md, dt ? TBC_DT_F64 : TBC_DT_F32, "3,17");
			check(&md, op1(&md, ops[i], a));
		}
	}
}

static void test_unary_positive_domain(void **state) {
	(void)state;
	static const tbc_opcode ops[] = {TBC_OP_Sqrt, TBC_OP_Log, TBC_OP_Acosh};
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, TBC_DT_F32, "40", 1, 1, 50);
		check(&md, op1(&md, ops[i], a));
	}
	static const tbc_opcode unit[] = {TBC_OP_Asin, TBC_OP_Acos, TBC_OP_Atanh};
	for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, TBC_DT_F32, "40", 1, -0.99, 0.99);
		check(&md, op1(&md, unit[i], a));
	}
}

static void test_gelu_tanh_and_attributes(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "4,5");
	tbc_op *g = node(&md, TBC_OP_Gelu, 1, a, NULL, NULL);
	tbc_attr *at = tbc_op_add_attr(g, "approximate", TBC_ATTR_STRING);
	at->s = "tanh";
	at->s_len = 4;
	tbc_op *l = node(&md, TBC_OP_LeakyRelu, 1, g->outputs[0], NULL, NULL);
	tbc_op_add_attr(l, "alpha", TBC_ATTR_FLOAT)->f = 0.3;
	check(&md, l->outputs[0]);
}

static void test_integer_arithmetic_wraps(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_I8, TBC_DT_U8, TBC_DT_I16, TBC_DT_I32, TBC_DT_U32, TBC_DT_I64,
					  TBC_DT_U64};
	static const tbc_opcode ops[] = {TBC_OP_Add, TBC_OP_Sub, TBC_OP_Mul, TBC_OP_Div, TBC_OP_Max, TBC_OP_Min,
					 TBC_OP_Mod, TBC_OP_BitwiseAnd, TBC_OP_BitwiseOr, TBC_OP_BitwiseXor,
					 TBC_OP_Equal, TBC_OP_Greater, TBC_OP_LessOrEqual};
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
		for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
			model md = model_new();
			tbc_value *a = input_sym(&md, types[t], "3,8", 1, 0, 250);
			tbc_value *b = input_sym(&md, types[t], "8", 1, 1, 120); /* no zero divisors */
			check(&md, op2(&md, ops[i], a, b));
		}
}

static void test_integer_unary(void **state) {
	(void)state;
	static const tbc_opcode ops[] = {TBC_OP_Abs, TBC_OP_Neg, TBC_OP_Sign, TBC_OP_Relu, TBC_OP_BitwiseNot};
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, TBC_DT_I8, "20", 1, -128, 127);
		check(&md, op1(&md, ops[i], a));
	}
}

static void test_mod_signs(void **state) {
	(void)state;
	for (int fm = 0; fm < 2; fm++)
		for (int dt = 0; dt < 2; dt++) {
			model md = model_new();
			tbc_dtype t = dt ? TBC_DT_F32 : TBC_DT_I32;
			tbc_value *a = input_sym(&md, t, "6,5", 1, -20, 20);
			double bv[5] = {3, -3, 7, -2, 5};
			int64_t dims[1] = {5};
			tbc_op *o = node(&md, TBC_OP_Mod, 2, a, constant(&md, t, 1, dims, bv), NULL);
			tbc_op_add_attr(o, "fmod", TBC_ATTR_INT)->i = fm;
			check(&md, o->outputs[0]);
		}
}

/* Integer Div and Mod by zero fail the run with the interpreter's message,
 * in the evaluator and in compiled code (through host->error), fused or
 * not; a divisor with no zero runs. */
static void expect_run_fails(model *md, tbc_value *out, const char *text, const tbc_compile_options *o) {
	tbc_diags *d = tbc_diags_create();
	tbc_graph_add_output(md->m->main, out);
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_tensor *got[1] = {0};
	assert_int_equal(tbc_interpret(md->m, md->in, (size_t)md->n_in, got, 1, d), TBC_ERR_RUNTIME);
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	assert_int_equal(kir_lower(md->m, lower_target(), arena, d, &p), TBC_OK);
	size_t before = tbc_diags_count(d);
	assert_int_equal(kir_program_eval(p, md->in, (size_t)md->n_in, got, 1, d), TBC_ERR_RUNTIME);
	assert_true(tbc_diags_count(d) > before);
	assert_non_null(strstr(tbc_diags_get(d, before)->message, text));
	assert_null(got[0]);
	tbc_jit *j = NULL;
	assert_int_equal(tbc_jit_compile(md->m, o, d, &j), TBC_OK);
	before = tbc_diags_count(d);
	assert_int_equal(tbc_abi_run_serial(tbc_jit_descriptor(j), md->in, (size_t)md->n_in, got, 1, d), TBC_ERR_RUNTIME);
	assert_int_equal(tbc_diags_count(d), before + 1); /* reported once, however many zeros */
	if (!strstr(tbc_diags_get(d, before)->message, text)) fprintf(stderr, "message: %s\n", tbc_diags_get(d, before)->message);
	assert_non_null(strstr(tbc_diags_get(d, before)->message, text));
	assert_null(got[0]);
	tbc_jit_destroy(j);
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
}

static void test_integer_division_by_zero_fails(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_I32, TBC_DT_U8, TBC_DT_I64};
	for (size_t t = 0; t < 3; t++)
		for (int level = 0; level <= 2; level += 2) {
			tbc_compile_options o = opts_at(level);
			model md = model_new();
			tbc_value *a = input_sym(&md, types[t], "4,8", 1, 0, 100), *b = input_sym(&md, types[t], "8", 1, 1, 9);
			memset(md.in[1]->data, 0, tbc_dtype_size(types[t]));
			/* Abs(a) / b + 1: fused at -O2. */
			tbc_value *q = op2(&md, TBC_OP_Div, op1(&md, TBC_OP_Abs, a), b);
			expect_run_fails(&md, op2(&md, TBC_OP_Add, q, a), "integer division by zero", &o);

			md = model_new();
			a = input_sym(&md, types[t], "4,8", 1, 0, 100), b = input_sym(&md, types[t], "4,8", 1, 1, 9);
			memset((char *)md.in[1]->data + 17 * tbc_dtype_size(types[t]), 0, tbc_dtype_size(types[t]));
			tbc_op *m = node(&md, TBC_OP_Mod, 2, a, b, NULL);
			tbc_op_add_attr(m, "fmod", TBC_ATTR_INT)->i = (int64_t)(t & 1);
			expect_run_fails(&md, m->outputs[0], "integer modulo by zero", &o);
		}
}

/* The kernel prints its check; a non-zero constant divisor needs none. */
static void test_division_check_in_kernel_ir(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_I32, "8"), *b = input(&md, TBC_DT_I32, "8");
	int64_t one[1] = {1};
	double three[1] = {3};
	tbc_value *q = op2(&md, TBC_OP_Div, a, b);
	tbc_value *outs[2] = {q, op2(&md, TBC_OP_Div, a, constant(&md, TBC_DT_I32, 0, one, three))};
	tbc_graph_add_output(md.m->main, outs[0]);
	tbc_graph_add_output(md.m->main, outs[1]);
	char *text = lowered_text(&md);
	const char *first = strstr(text, "error \"node 'n' (Div): integer division by zero\" if eq(");
	assert_non_null(first);
	assert_null(strstr(first + 1, "error \"")); /* one check: the constant divisor has none */
	free(text);
}

static void test_pow_float_and_integer(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "3,4", 1, 0.5, 3), *b = input_sym(&md, TBC_DT_F32, "4", 1, -2, 2);
	check(&md, op2(&md, TBC_OP_Pow, a, b));
	md = model_new();
	a = input_sym(&md, TBC_DT_I64, "3,4", 1, -5, 5);
	b = input_sym(&md, TBC_DT_I64, "4", 1, -1, 6);
	check(&md, op2(&md, TBC_OP_Pow, a, b));
	md = model_new();
	a = input_sym(&md, TBC_DT_I32, "6", 1, -5, 5);
	b = input_sym(&md, TBC_DT_F32, "6", 1, 0, 3);
	check(&md, op2(&md, TBC_OP_Pow, a, b));
}

static void test_bitshift_left_and_right(void **state) {
	(void)state;
	for (int right = 0; right < 2; right++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, TBC_DT_U8, "16", 1, 0, 255), *b = input_sym(&md, TBC_DT_U8, "16", 1, 0, 10);
		tbc_op *o = node(&md, TBC_OP_BitShift, 2, a, b, NULL);
		tbc_attr *at = tbc_op_add_attr(o, "direction", TBC_ATTR_STRING);
		at->s = right ? "RIGHT" : "LEFT";
		at->s_len = strlen(at->s);
		check(&md, o->outputs[0]);
	}
}

static void test_logic_and_where(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_BOOL, "2,5"), *b = input(&md, TBC_DT_BOOL, "5");
	tbc_value *x = input(&md, TBC_DT_F32, "2,5"), *y = input(&md, TBC_DT_F32, "1");
	tbc_value *c = op2(&md, TBC_OP_Xor, op2(&md, TBC_OP_And, a, b), op1(&md, TBC_OP_Not, op2(&md, TBC_OP_Or, a, b)));
	check(&md, node(&md, TBC_OP_Where, 3, c, x, y)->outputs[0]);
}

static void test_variadic_max_min_sum_mean(void **state) {
	(void)state;
	static const tbc_opcode ops[] = {TBC_OP_Max, TBC_OP_Min, TBC_OP_Sum, TBC_OP_Mean};
	for (size_t i = 0; i < 4; i++) {
		model md = model_new();
		tbc_value *a = input(&md, TBC_DT_F32, "2,3"), *b = input(&md, TBC_DT_F32, "3"), *c = input(&md, TBC_DT_F32, "2,1");
		check(&md, node(&md, ops[i], 3, a, b, c)->outputs[0]);
	}
}

static void test_clip_with_and_without_bounds(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "4,4");
	double lo = -1, hi = 0.5;
	check(&md, node(&md, TBC_OP_Clip, 3, a, constant(&md, TBC_DT_F32, 0, NULL, &lo), constant(&md, TBC_DT_F32, 0, NULL, &hi))
			   ->outputs[0]);
	md = model_new();
	a = input_sym(&md, TBC_DT_I32, "9", 1, -10, 10);
	tbc_value *mn = input_sym(&md, TBC_DT_I32, "", 1, -3, -2);
	check(&md, node(&md, TBC_OP_Clip, 2, a, mn, NULL)->outputs[0]);
}

static void test_prelu_broadcast_slope(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "2,3,4"), *s = input(&md, TBC_DT_F32, "3,1");
	check(&md, op2(&md, TBC_OP_PRelu, a, s));
}

static void test_cast_between_types(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_F32, TBC_DT_F64, TBC_DT_I8, TBC_DT_U8, TBC_DT_I32, TBC_DT_I64,
					  TBC_DT_U64, TBC_DT_BOOL};
	for (size_t f = 0; f < 8; f++)
		for (size_t t = 0; t < 8; t++) {
			model md = model_new();
			tbc_value *a = input_sym(&md, types[f], "12", 1, -300, 300);
			tbc_op *o = node(&md, TBC_OP_Cast, 1, a, NULL, NULL);
			tbc_op_add_attr(o, "to", TBC_ATTR_INT)->i = types[t];
			check(&md, o->outputs[0]);
		}
}

/* ---- Narrow types ------------------------------------------------------------
 * f16, bf16, float8 and f4e2m1 are held as bits and converted with integer
 * code; every conversion must give the interpreter's bits exactly. */
static const tbc_dtype narrow_floats[] = {TBC_DT_F16,	     TBC_DT_BF16,	  TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ,
					  TBC_DT_F8E5M2, TBC_DT_F8E5M2FNUZ, TBC_DT_F4E2M1,   TBC_DT_F8E8M0};

static tbc_value *cast_to(model *md, tbc_value *x, tbc_dtype to) {
	tbc_op *o = node(md, TBC_OP_Cast, 1, x, NULL, NULL);
	tbc_op_add_attr(o, "to", TBC_ATTR_INT)->i = to;
	return o->outputs[0];
}

/* Every code of each narrow float, decoded to f32 and f64. */
static void test_narrow_float_decode_every_code(void **state) {
	(void)state;
	exact_bits = true;
	for (size_t k = 0; k < sizeof narrow_floats / sizeof *narrow_floats; k++) {
		tbc_dtype dt = narrow_floats[k];
		int64_t n = tbc_dtype_size(dt) == 2 ? 65536 : dt == TBC_DT_F4E2M1 ? 16 : 256;
		char dims[16];
		snprintf(dims, sizeof dims, "%lld", (long long)n);
		model md = model_new();
		tbc_value *x = input(&md, dt, dims);
		for (int64_t i = 0; i < n; i++) tbc_store_bits(dt, md.in[0]->data, (size_t)i, (uint64_t)i);
		tbc_value *outs[2] = {cast_to(&md, x, TBC_DT_F32), cast_to(&md, x, TBC_DT_F64)};
		check_outputs(&md, 2, outs, 0);
	}
	exact_bits = false;
}

/* f32 values around every code of each format (the codes themselves, the
 * midpoints between neighbours, which must round to even, and one ulp
 * either side), random bit patterns (NaN payloads, infinities,
 * subnormals), encoded into each narrow float; also from f64, integers and
 * from one narrow float into another. */
static void test_narrow_float_encode_rounds_to_nearest_even(void **state) {
	(void)state;
	exact_bits = true;
	for (size_t k = 0; k < sizeof narrow_floats / sizeof *narrow_floats; k++) {
		tbc_dtype dt = narrow_floats[k];
		int64_t codes = tbc_dtype_size(dt) == 2 ? 65536 : dt == TBC_DT_F4E2M1 ? 16 : 256;
		int64_t n = codes * 4 + 4096;
		char dims[16];
		snprintf(dims, sizeof dims, "%lld", (long long)n);
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, dims);
		float *xs = md.in[0]->data;
		int64_t at = 0;
		for (int64_t c = 0; c < codes; c++) {
			uint64_t bits = (uint64_t)c;
			double v = tbc_load_f64(dt, &bits, 0);
			uint64_t next_bits = (uint64_t)(c + 1 < codes ? c + 1 : c);
			double w = tbc_load_f64(dt, &next_bits, 0);
			xs[at++] = (float)v;
			xs[at++] = (float)((v + w) / 2);
			xs[at++] = nextafterf((float)((v + w) / 2), INFINITY);
			xs[at++] = nextafterf((float)((v + w) / 2), -INFINITY);
		}
		uint32_t r = 0x9e3779b9u;
		while (at < n) {
			r ^= r << 13, r ^= r >> 17, r ^= r << 5;
			uint32_t b = at % 3 ? r : (r & 0x83ffffffu) | 0x3c000000u; /* a third near 1 */
			memcpy(&xs[at++], &b, 4);
		}
		xs[0] = INFINITY, xs[1] = -INFINITY, xs[2] = -0.0f, xs[3] = NAN, xs[4] = -NAN;
		tbc_op *nosat = node(&md, TBC_OP_Cast, 1, x, NULL, NULL); /* float8: out of range gives inf or NaN */
		tbc_op_add_attr(nosat, "to", TBC_ATTR_INT)->i = dt;
		tbc_op_add_attr(nosat, "saturate", TBC_ATTR_INT)->i = 0;
		tbc_value *outs[2] = {cast_to(&md, x, dt), nosat->outputs[0]};
		check_outputs(&md, 2, outs, 0);

		md = model_new();
		tbc_value *d = input_sym(&md, TBC_DT_F64, "4096", 1, -1000, 1000);
		tbc_value *i = input_sym(&md, TBC_DT_I64, "4096", 1, -100000, 100000);
		tbc_value *h = input_sym(&md, TBC_DT_F16, "4096", 1, -500, 500);
		tbc_value *u = input_sym(&md, TBC_DT_U8, "4096", 1, 0, 255);
		tbc_value *more[4] = {cast_to(&md, d, dt), cast_to(&md, i, dt), cast_to(&md, h, dt), cast_to(&md, u, dt)};
		check_outputs(&md, 4, more, 0);
	}
	exact_bits = false;
}

/* Elementwise ops on narrow floats compute in f32 and round on store. */
static void test_elementwise_on_f16_and_bf16(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_F16, TBC_DT_BF16, TBC_DT_F8E4M3FN};
	for (size_t k = 0; k < 3; k++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, types[k], "3,40", 1, -4, 4), *b = input_sym(&md, types[k], "40", 1, -4, 4);
		tbc_value *s = op2(&md, TBC_OP_Add, a, b), *m = op2(&md, TBC_OP_Mul, a, b);
		tbc_value *outs[4] = {s, m, op1(&md, TBC_OP_Tanh, s), op2(&md, TBC_OP_Max, op1(&md, TBC_OP_Relu, m), a)};
		exact_bits = true; /* one f32 operation rounded once: exactly the interpreter's */
		check_outputs(&md, 4, outs, 1e-3);
		exact_bits = false;
	}
}

/* int4 / uint4 / int2 / uint2: one element per byte, wrapping in their width. */
static void test_sub_byte_integers_wrap(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_I4, TBC_DT_U4, TBC_DT_I2, TBC_DT_U2};
	for (size_t k = 0; k < 4; k++) {
		model md = model_new();
		bool u = tbc_dtype_is_unsigned(types[k]);
		double lo = u ? 0 : -(double)(1 << (tbc_dtype_bits(types[k]) - 1));
		double hi = lo + (double)(1 << tbc_dtype_bits(types[k]));
		tbc_value *a = input_sym(&md, types[k], "64", 1, lo, hi), *b = input_sym(&md, types[k], "64", 1, lo, hi);
		tbc_value *outs[6] = {op2(&md, TBC_OP_Add, a, b), op2(&md, TBC_OP_Mul, a, b), op2(&md, TBC_OP_Sub, a, b),
				      cast_to(&md, a, TBC_DT_F32), cast_to(&md, cast_to(&md, b, TBC_DT_I32), types[k]),
				      op2(&md, TBC_OP_Max, a, b)};
		exact_bits = true;
		check_outputs(&md, 6, outs, 0);
		exact_bits = false;
	}
}

static void test_chain_with_reshape_alias(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "2,6");
	int64_t shape_dims[1] = {3};
	double shape[3] = {3, 2, 2};
	tbc_value *r = op2(&md, TBC_OP_Reshape, op1(&md, TBC_OP_Exp, a), constant(&md, TBC_DT_I64, 1, shape_dims, shape));
	tbc_value *outs[2] = {op1(&md, TBC_OP_Tanh, r), r};
	check_outputs(&md, 2, outs, 1e-5);
}

static void test_output_is_input_and_duplicate(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "3");
	tbc_value *e = op1(&md, TBC_OP_Exp, a);
	tbc_value *outs[3] = {a, e, e};
	check_outputs(&md, 3, outs, 1e-5);
}

/* ---- Fused regions -------------------------------------------------------------*/
/* Fused(x, b) = { t = x * b; relu(t) + t, and sigmoid(b) } */
static void test_fused_region_two_shapes(void **state) {
	(void)state;
	if (tbc_opcode_from_name("Fused") == TBC_OP_COUNT) skip();
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,4"), *b = input(&md, TBC_DT_F32, "4");
	tbc_graph *body = tbc_graph_new(md.m, md.m->main, "body");
	tbc_value *bx = tbc_graph_add_input(body, "bx", &x->type), *bb = tbc_graph_add_input(body, "bb", &b->type);
	tbc_value *ins[2] = {bx, bb};
	tbc_value *t = tbc_op_new(body, TBC_OP_Mul, "m", 2, ins, 1)->outputs[0];
	tbc_value *rt = tbc_op_new(body, TBC_OP_Relu, "r", 1, &t, 1)->outputs[0];
	tbc_value *sum_in[2] = {rt, t};
	tbc_value *s = tbc_op_new(body, TBC_OP_Add, "a", 2, sum_in, 1)->outputs[0];
	tbc_value *sg = tbc_op_new(body, TBC_OP_Sigmoid, "s", 1, &bb, 1)->outputs[0];
	tbc_graph_add_output(body, s);
	tbc_graph_add_output(body, sg);
	tbc_value *fins[2] = {x, b};
	tbc_op *f = tbc_op_new(md.m->main, tbc_opcode_from_name("Fused"), "fused", 2, fins, 2);
	tbc_attr *at = tbc_op_add_attr(f, "body", TBC_ATTR_GRAPH);
	at->graphs = tbc_arena_array(md.m->arena, 1, sizeof *at->graphs);
	at->graphs[0] = body;
	body->parent_op = f;
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, body));
	tbc_diags_destroy(d);
	tbc_value *outs[2] = {f->outputs[0], f->outputs[1]};
	check_outputs(&md, 2, outs, 1e-5);
}

/* ---- Compile paths: passes and memory planning ------------------------------------*/
static int count_ops(const tbc_graph *g) {
	int n = 0;
	for (const tbc_op *op = g->first; op; op = op->next) n++;
	return n;
}

/* The compile paths run the pipeline on a copy: the caller's module keeps
 * its ops; the stats name every pass and the arena of the plan. */
static void test_compile_runs_the_passes_on_a_copy(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,64", 5, -2, 2);
	tbc_value *a = op1(&md, TBC_OP_Exp, x);
	tbc_value *b = op1(&md, TBC_OP_Sigmoid, a);
	tbc_value *c = op2(&md, TBC_OP_Mul, a, b);
	tbc_value *out = op2(&md, TBC_OP_Add, c, x);
	tbc_graph_add_output(md.m->main, out);
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	int before = count_ops(md.m->main);
	tbc_compile_stats st;
	tbc_compile_options o = opts_at(2);
	o.stats_out = &st;
	FILE *dump = tmpfile(), *stats = tmpfile();
	o.dump_after = "fusion";
	o.dump_file = dump;
	o.stats = 1;
	o.stats_file = stats;
	tbc_jit *j = NULL;
	assert_int_equal(tbc_jit_compile(md.m, &o, d, &j), TBC_OK);
	assert_int_equal(count_ops(md.m->main), before); /* the caller's module is untouched */
	const char *names[5] = {"fold", "cse", "dce", "fusion", "memplan"};
	int seen = 0; /* in this order, among any others */
	for (int i = 0; i < st.n_passes; i++)
		if (seen < 5 && !strcmp(st.passes[i].name, names[seen])) seen++;
	assert_int_equal(seen, 5);
	assert_string_equal(st.passes[st.n_passes - 1].name, "memplan");
	assert_true(st.lowered);
	assert_int_equal(st.n_kernels, 1); /* one fused loop nest */
	assert_true(st.arena_bytes >= st.lower_bound);
	char text[8192];
	rewind(dump);
	size_t n = fread(text, 1, sizeof text - 1, dump);
	text[n] = 0;
	assert_non_null(strstr(text, "IR after fusion"));
	assert_non_null(strstr(text, "Fused"));
	rewind(stats);
	n = fread(text, 1, sizeof text - 1, stats);
	text[n] = 0;
	assert_non_null(strstr(text, "pass fusion"));
	assert_non_null(strstr(text, "lower bound"));
	fclose(dump);
	fclose(stats);
	tbc_jit_destroy(j);
	tbc_diags_destroy(d);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
}

/* An unknown --dump-after pass is the caller's mistake. */
static void test_dump_after_unknown_pass(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "4");
	tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Exp, x));
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_compile_options o = opts_at(2);
	o.dump_after = "nosuchpass";
	tbc_jit *j = NULL;
	assert_int_equal(tbc_jit_compile(md.m, &o, d, &j), TBC_ERR_INVALID_ARGUMENT);
	assert_null(j);
	tbc_diags_destroy(d);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
}

/* Unfused (-O0), memory planning alone: a = exp(x) dies at the reshape, so
 * c = neg(x) takes a's bytes while r = reshape(a) still lives: r cannot
 * share a's storage and is copied. */
static void test_reshape_copies_when_its_source_bytes_are_reused(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "4,6");
	int64_t shape_dims[1] = {2};
	double shape[2] = {4, 6};
	tbc_value *a = op1(&md, TBC_OP_Exp, x);
	tbc_value *r = op2(&md, TBC_OP_Reshape, a, constant(&md, TBC_DT_I64, 1, shape_dims, shape));
	tbc_value *c = op1(&md, TBC_OP_Neg, x);
	tbc_value *out = op2(&md, TBC_OP_Add, r, c);
	tbc_compile_options o = opts_at(0);
	check_outputs_with(&md, 1, &out, 1e-5, &o);
}

/* Reshape of a value whose bytes nobody reuses shares them (no copy): the
 * plan of x -> exp -> reshape -> tanh needs no more than two buffers. */
static void test_reshape_shares_storage_when_safe(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,6", 4, -1, 1);
	int64_t shape_dims[1] = {3};
	double shape[3] = {0, 3, 2};
	tbc_value *a = op1(&md, TBC_OP_Exp, x);
	tbc_value *r = op2(&md, TBC_OP_Reshape, a, constant(&md, TBC_DT_I64, 1, shape_dims, shape));
	tbc_value *out = op1(&md, TBC_OP_Tanh, r);
	tbc_compile_options o = opts_at(0);
	check_outputs_with(&md, 1, &out, 1e-5, &o);
}

/* A Fused op with two outputs of one shape; memory planning writes o0 over
 * its input t (which dies there) while o1 still reads t: every value is
 * computed before the first store. */
static void test_fused_outputs_written_over_their_input(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "2,3,8");
	tbc_value *t = op1(&md, TBC_OP_Exp, x);
	t->type = x->type; /* inferred again with the graph */
	tbc_graph *body = tbc_graph_new(md.m, md.m->main, "body");
	tbc_value *bt = tbc_graph_add_input(body, "bt", &t->type);
	tbc_value *sum_in[2] = {bt, bt};
	tbc_value *o0 = tbc_op_new(body, TBC_OP_Neg, "n", 1, &bt, 1)->outputs[0];
	tbc_value *o1 = tbc_op_new(body, TBC_OP_Add, "a", 2, sum_in, 1)->outputs[0];
	tbc_graph_add_output(body, o0);
	tbc_graph_add_output(body, o1);
	tbc_op *f = tbc_op_new(md.m->main, tbc_opcode_from_name("Fused"), "fused", 1, &t, 2);
	tbc_attr *at = tbc_op_add_attr(f, "body", TBC_ATTR_GRAPH);
	at->graphs = tbc_arena_array(md.m->arena, 1, sizeof *at->graphs);
	at->graphs[0] = body;
	body->parent_op = f;
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, body));
	tbc_diags_destroy(d);
	tbc_value *out = op2(&md, TBC_OP_Add, f->outputs[0], f->outputs[1]);
	tbc_compile_options o = opts_at(0);
	check_outputs_with(&md, 1, &out, 1e-5, &o);
}

/* The same with the outputs in two nests (o1 broadcasts t to a larger
 * shape): the output written over t gets storage of its own. */
static void test_fused_two_nests_keep_their_input(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "3,8"), *y = input(&md, TBC_DT_F32, "2,3,8");
	tbc_value *t = op1(&md, TBC_OP_Exp, x);
	t->type = x->type; /* inferred again with the graph */
	tbc_graph *body = tbc_graph_new(md.m, md.m->main, "body");
	tbc_value *bt = tbc_graph_add_input(body, "bt", &t->type), *by = tbc_graph_add_input(body, "by", &y->type);
	tbc_value *o0 = tbc_op_new(body, TBC_OP_Neg, "n", 1, &bt, 1)->outputs[0];
	tbc_value *mul_in[2] = {bt, by};
	tbc_value *o1 = tbc_op_new(body, TBC_OP_Mul, "m", 2, mul_in, 1)->outputs[0];
	tbc_graph_add_output(body, o0);
	tbc_graph_add_output(body, o1);
	tbc_value *fins[2] = {t, y};
	tbc_op *f = tbc_op_new(md.m->main, tbc_opcode_from_name("Fused"), "fused", 2, fins, 2);
	tbc_attr *at = tbc_op_add_attr(f, "body", TBC_ATTR_GRAPH);
	at->graphs = tbc_arena_array(md.m->arena, 1, sizeof *at->graphs);
	at->graphs[0] = body;
	body->parent_op = f;
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, body));
	tbc_diags_destroy(d);
	tbc_value *out = op2(&md, TBC_OP_Add, f->outputs[0], f->outputs[1]);
	tbc_compile_options o = opts_at(0);
	check_outputs_with(&md, 1, &out, 1e-5, &o);
}

/* Values of a symbolic batch live in the arena part "N": their place scales
 * with N at run time. */
static void test_symbolic_values_in_a_scaled_part(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,8", 5, -1, 1);
	int64_t dims[1] = {8};
	double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	tbc_value *a = op1(&md, TBC_OP_Exp, x);
	tbc_value *y = op2(&md, TBC_OP_Add, a, constant(&md, TBC_DT_F32, 1, dims, v));
	tbc_value *z = op2(&md, TBC_OP_Mul, y, a);
	tbc_value *w = op1(&md, TBC_OP_Tanh, z);
	tbc_value *outs[2] = {op2(&md, TBC_OP_Sub, w, y), z};
	tbc_compile_options o = opts_at(0);
	check_outputs_with(&md, 2, outs, 1e-5, &o);
}

/* ---- Refusals -------------------------------------------------------------------*/
static void test_unlowered_op_is_unsupported(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "3,3");
	check_lowering_fails(&md, op1(&md, TBC_OP_Det, op1(&md, TBC_OP_Exp, a)), TBC_ERR_UNSUPPORTED,
			     "op Det has no lowering yet");
}

/* ---- Artifacts --------------------------------------------------------------------*/
static void test_program_prints_kernels(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "N,4", 2, -1, 1), *b = input(&md, TBC_DT_F32, "4");
	tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_Add, a, b));
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_arena *arena = tbc_arena_create();
	kir_program *p = NULL;
	assert_int_equal(kir_lower(md.m, lower_target(), arena, d, &p), TBC_OK);
	char *text = kir_program_print(p);
	const char *want = "kernel k0_add($N) {\n"
			   "  output t2: f32[$N, 4]\n"
			   "  input x0: f32[$N, 4]\n"
			   "  input x1: f32[4]\n"
			   "  for %i = 0 .. $N parallel {\n"
			   "    for %j = 0 .. 4 vector {\n"
			   "      t2[%j + %i * 4] = add(x0[%j + %i * 4], x1[%j])\n"
			   "    }\n"
			   "  }\n"
			   "}\n"
			   "launch k0_add(output 0, input 0, input 1)\n";
	if (strcmp(text, want)) fprintf(stderr, "%s", text);
	assert_string_equal(text, want);
	free(text);
	tbc_arena_destroy(arena);
	tbc_diags_destroy(d);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
}

/* A small model with a weight: y = relu(x * w + 1), x [N, 8], w [8]. */
static model weighted_model(void) {
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,8", 3, -2, 2);
	double w[8] = {1, -2, 3, -4, 0.5, 0.25, -0.125, 8}, one = 1;
	int64_t dims[1] = {8};
	tbc_value *y = op2(&md, TBC_OP_Add, op2(&md, TBC_OP_Mul, x, constant(&md, TBC_DT_F32, 1, dims, w)),
			   constant(&md, TBC_DT_F32, 0, NULL, &one));
	tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Relu, y));
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_diags_destroy(d);
	return md;
}

static void free_model(model *md) {
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
}

static char *read_all(const char *path, size_t *size) {
	FILE *f = fopen(path, "rb");
	if (!f) return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	*size = (size_t)n;
	return buf;
}


/* The interpreter's result for md's inputs. */
static tbc_tensor *interpret(model *md) {
	tbc_diags *d = tbc_diags_create();
	tbc_tensor *out = NULL;
	assert_int_equal(tbc_interpret(md->m, md->in, (size_t)md->n_in, &out, 1, d), TBC_OK);
	tbc_diags_destroy(d);
	return out;
}

/* ---- Vectorizable math ------------------------------------------------------------
 * f32 exp, log, tanh and erf are inline polynomials: within a few ulp of the
 * interpreter's (libm in double, rounded) over a dense range, exact at the
 * special values, and the loops using them vectorize (no libm call left). */
static double ulps(float want, float got) {
	if (isnan(want) || isnan(got)) return isnan(want) && isnan(got) ? 0 : INFINITY;
	if (want == got) return 0;
	if (isinf(want) || isinf(got)) return INFINITY;
	double sp = nextafterf(fabsf(want), INFINITY) - fabsf(want);
	return fabs((double)want - (double)got) / sp;
}

static void test_vector_math_accuracy(void **state) {
	(void)state;
	static const struct {
		tbc_opcode op;
		double lo, hi, max_ulps;
	} cases[] = {{TBC_OP_Exp, -110, 90, 1.0}, {TBC_OP_Log, 0, 1e6, 1.0}, {TBC_OP_Tanh, -12, 12, 1.5},
		     {TBC_OP_Erf, -5, 5, 2.5}, {TBC_OP_Sigmoid, -100, 100, 3.0}};
	static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 1e-40f, -1e-40f, 1.0f, -1.0f,
					88.72283f, 88.7229f, -87.33654f, -103.972f, -104.0f, 3.4e38f, 0.625f, 0.99999994f, 4.0f};
	enum { N = 200000 };
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "200000");
		float *xs = md.in[0]->data;
		for (int i = 0; i < N; i++) xs[i] = (float)(cases[k].lo + (cases[k].hi - cases[k].lo) * i / (N - 1));
		/* log over the whole range of magnitudes too */
		if (cases[k].op == TBC_OP_Log)
			for (int i = 0; i < N / 2; i++) xs[i] = ldexpf(1.0f + (float)i / (N / 2), -149 + i % 277);
		memcpy(xs, special, sizeof special);
		tbc_graph_add_output(md.m->main, op1(&md, cases[k].op, x));
		tbc_diags *d = tbc_diags_create();
		tbc_infer cx = {.module = md.m, .diags = d};
		assert_true(tbc_infer_graph(&cx, md.m->main));
		tbc_tensor *want = interpret(&md), *got = NULL;
		assert_int_equal(tbc_run_cpu(md.m, md.in, 1, &got, 1, d), TBC_OK);
		const float *w = want->data, *g = got->data;
		double worst = 0;
		int at = 0;
		for (int i = 0; i < N; i++) {
			double u = ulps(w[i], g[i]);
			if (i < 5 && memcmp(&w[i], &g[i], 4) && !(isnan(w[i]) && isnan(g[i]))) u = INFINITY; /* 0, -0, inf, -inf, NaN */
			if (u > worst) worst = u, at = i;
		}
		if (worst > cases[k].max_ulps)
			fprintf(stderr, "%s(%.9g): want %.9g got %.9g (%.2f ulp)\n", tbc_ops[cases[k].op].name, xs[at], w[at],
				g[at], worst);
		assert_true(worst <= cases[k].max_ulps);
		tbc_tensor_destroy(want);
		tbc_tensor_destroy(got);
		tbc_diags_destroy(d);
		tbc_tensor_destroy(md.in[0]);
		tbc_module_destroy(md.m);
	}
}

/* Pow by a constant 2, 3 or 4 is products in f64, rounded once to f32: the
 * interpreter's pow() to the bit, specials included, and no pow call. */
static void test_pow_by_small_constant_integers(void **state) {
	(void)state;
	static const double xs[] = {-0.0, 0.0, 1.5, -2.25, 1e-20, -3e12, 7e25, INFINITY, -INFINITY, NAN, 0.1, -0.7, 1.0000001, 3.14159};
	const int n = (int)(sizeof xs / sizeof *xs);
	for (int e = 2; e <= 4; e++) {
		model md = model_new();
		int64_t dims[1] = {n};
		tbc_value *x = input(&md, TBC_DT_F32, "14");
		for (int i = 0; i < n; i++) ((float *)md.in[md.n_in - 1]->data)[i] = (float)xs[i];
		double ev = e;
		tbc_value *y = op2(&md, TBC_OP_Pow, x, constant(&md, TBC_DT_F32, 0, dims, &ev));
		check_outputs(&md, 1, (tbc_value *[]){y}, 0);
	}
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "64");
	double three = 3;
	tbc_graph_add_output(md.m->main, op2(&md, TBC_OP_Pow, x, constant(&md, TBC_DT_F32, 0, NULL, &three)));
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	const char *path = tmp_path("pow3.ll");
	assert_int_equal(tbc_compile_to_file(md.m, &o, path, d), TBC_OK);
	size_t len;
	char *ir = read_all(path, &len);
	assert_non_null(ir);
	assert_null(strstr(ir, "@powf"));
	assert_null(strstr(ir, "@llvm.pow"));
	assert_non_null(strstr(ir, "fpext"));
	free(ir);
	tbc_diags_destroy(d);
	tbc_tensor_destroy(md.in[0]);
	tbc_module_destroy(md.m);
}

/* Two launches whose kernels are the same code over other buffers share
 * one compiled function; both results stay right. */
static void test_identical_kernels_share_one_function(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input(&md, TBC_DT_F32, "4,33"), *b = input(&md, TBC_DT_F32, "4,33"), *c = input(&md, TBC_DT_F32, "5,33");
	tbc_value *ya = op1(&md, TBC_OP_Sigmoid, a), *yb = op1(&md, TBC_OP_Sigmoid, b), *yc = op1(&md, TBC_OP_Sigmoid, c);
	check_outputs(&md, 3, (tbc_value *[]){ya, yb, yc}, 0);
	md = model_new();
	a = input(&md, TBC_DT_F32, "4,33"), b = input(&md, TBC_DT_F32, "4,33"), c = input(&md, TBC_DT_F32, "5,33");
	tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Sigmoid, a));
	tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Sigmoid, b));
	tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Sigmoid, c));
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.opt_level = 0; /* every kernel function stays in the text */
	const char *path = tmp_path("shared.ll");
	assert_int_equal(tbc_compile_to_file(md.m, &o, path, d), TBC_OK);
	size_t len;
	char *ir = read_all(path, &len);
	assert_non_null(ir);
	assert_non_null(strstr(ir, "define internal void @tbc.k0.k0_sigmoid("));
	assert_null(strstr(ir, "define internal void @tbc.k1.")); /* the same code as k0 */
	assert_non_null(strstr(ir, "define internal void @tbc.k2.k2_sigmoid(")); /* five rows: other code */
	free(ir);
	tbc_diags_destroy(d);
	for (int i = 0; i < md.n_in; i++) tbc_tensor_destroy(md.in[i]);
	tbc_module_destroy(md.m);
}

/* The optimized LLVM IR (malloc'd) of one op over an f32 tensor of the
 * given dims, compiled for haswell (AVX2); LayerNormalization with a scale
 * of ones over the last dim (of 128). */
static char *haswell_ir(tbc_opcode op, const char *dims) {
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, dims);
	if (op == TBC_OP_LayerNormalization) {
		double ones[128];
		for (int i = 0; i < 128; i++) ones[i] = 1;
		tbc_graph_add_output(md.m->main, op2(&md, op, x, constant(&md, TBC_DT_F32, 1, (const int64_t[]){128}, ones)));
	} else {
		tbc_graph_add_output(md.m->main, op1(&md, op, x));
	}
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.target_triple = "x86_64-unknown-linux-gnu";
	o.cpu = "haswell";
	const char *path = tmp_path("op.ll");
	assert_int_equal(tbc_compile_to_file(md.m, &o, path, d), TBC_OK);
	size_t n;
	char *ir = read_all(path, &n);
	assert_non_null(ir);
	tbc_diags_destroy(d);
	tbc_tensor_destroy(md.in[0]);
	tbc_module_destroy(md.m);
	return ir;
}

/* Softmax's f64 sum of exp terms may be reassociated (kir_var.reassoc), so
 * its loop vectorizes with partial sums (and its exp with it); the result
 * still matches the interpreter (test_codegen_reduce, the suite). */
static void test_softmax_sum_vectorizes(void **state) {
	(void)state;
	char *ir = haswell_ir(TBC_OP_Softmax, "8,128");
	assert_non_null(strstr(ir, "fadd reassoc <"));
	assert_non_null(strstr(ir, "@llvm.vector.reduce.fadd"));
	free(ir);
}

/* So are GlobalAveragePool's f64 sum of f32 terms, LayerNormalization's
 * f64 sums for its mean and variance and the f64 sums of ReduceMean and the
 * like: ordered, they were a chain of scalar f64 adds. */
static void test_pool_and_norm_sums_vectorize(void **state) {
	(void)state;
	static const struct {
		tbc_opcode op;
		const char *dims;
	} cases[] = {{TBC_OP_GlobalAveragePool, "2,16,16,16"}, {TBC_OP_LayerNormalization, "8,128"}, {TBC_OP_ReduceMean, "8,128"},
		     {TBC_OP_ReduceSumSquare, "8,128"}};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char *ir = haswell_ir(cases[i].op, cases[i].dims);
		if (!strstr(ir, "fadd reassoc <")) fail_msg("%s: no vector reassociable fadd", tbc_ops[cases[i].op].name);
		free(ir);
	}
}

static void test_vector_math_vectorizes(void **state) {
	(void)state;
	static const tbc_opcode ops[] = {TBC_OP_Exp, TBC_OP_Log, TBC_OP_Tanh, TBC_OP_Erf, TBC_OP_Sigmoid, TBC_OP_Gelu};
	for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
		char *ir = haswell_ir(ops[k], "64,1024");
		if (!strstr(ir, "<8 x float>")) fprintf(stderr, "%s: no <8 x float> in the IR\n", tbc_ops[ops[k]].name);
		assert_non_null(strstr(ir, "<8 x float>"));
		assert_null(strstr(ir, "@expf"));
		assert_null(strstr(ir, "@logf"));
		assert_null(strstr(ir, "@tanhf"));
		assert_null(strstr(ir, "@erff"));
		free(ir);
	}
}

static void test_object_is_deterministic_with_header(void **state) {
	(void)state;
	model md = weighted_model();
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.prefix = "tiny";
	char a[512], b[512];
	snprintf(a, sizeof a, "%s", tmp_path("a.o"));
	snprintf(b, sizeof b, "%s", tmp_path("b.o"));
	assert_int_equal(tbc_compile_to_file(md.m, &o, a, d), TBC_OK);
	assert_int_equal(tbc_compile_to_file(md.m, &o, b, d), TBC_OK);
	size_t na, nb;
	char *da = read_all(a, &na), *db = read_all(b, &nb);
	assert_non_null(da);
	assert_non_null(db);
	assert_int_equal(na, nb);
	assert_memory_equal(da, db, na);
	free(da);
	free(db);
	size_t nh;
	char *h = read_all(tmp_path("a.h"), &nh);
	assert_non_null(h);
	assert_non_null(strstr(h, "const struct tbc_abi_model *tiny_descriptor(void);"));
	assert_non_null(strstr(h, "#define TINY_INPUT0_NAME \"x0\""));
	assert_non_null(strstr(h, "#define TINY_INPUT0_DIMS {-1, 8}"));
	assert_non_null(strstr(h, "#define TINY_SYM0_NAME \"N\""));
	free(h);
	tbc_diags_destroy(d);
	free_model(&md);
}

/* Artifacts holding OpenCL code (the table and the source in the
 * descriptor) and the .cl source alone are byte-identical from run to run
 * too; the .cl names the model and holds one __kernel per kernel. */
static void test_opencl_artifacts_are_deterministic(void **state) {
	(void)state;
	static const unsigned targets[] = {TBC_TARGETS_OPENCL, TBC_TARGETS_CPU | TBC_TARGETS_OPENCL, TBC_TARGETS_OPENCL};
	static const char *const names[][2] = {{"ocl_a.o", "ocl_b.o"}, {"both_a.o", "both_b.o"}, {"src_a.cl", "src_b.cl"}};
	for (int t = 0; t < 3; t++) {
		model md = weighted_model();
		tbc_diags *d = tbc_diags_create();
		tbc_compile_options o;
		tbc_compile_options_init(&o);
		o.targets = targets[t];
		char a[512], b[512];
		snprintf(a, sizeof a, "%s", tmp_path(names[t][0]));
		snprintf(b, sizeof b, "%s", tmp_path(names[t][1]));
		tbc_code rc = tbc_compile_to_file(md.m, &o, a, d);
		if (rc) print_diags(d);
		assert_int_equal(rc, TBC_OK);
		assert_int_equal(tbc_compile_to_file(md.m, &o, b, d), TBC_OK);
		size_t na, nb;
		char *da = read_all(a, &na), *db = read_all(b, &nb);
		assert_non_null(da);
		assert_non_null(db);
		assert_int_equal(na, nb);
		assert_memory_equal(da, db, na);
		if (t == 2) {
			assert_non_null(strstr(da, "Generated by tbc"));
			assert_non_null(strstr(da, "__kernel void tbc_k0_"));
		}
		free(da);
		free(db);
		tbc_diags_destroy(d);
		free_model(&md);
	}
	/* .cl without the opencl target is refused. */
	model md = weighted_model();
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = TBC_TARGETS_CPU;
	assert_int_equal(tbc_compile_to_file(md.m, &o, tmp_path("cpu.cl"), d), TBC_ERR_INVALID_ARGUMENT);
	tbc_diags_destroy(d);
	free_model(&md);
}

static void test_shared_object_runs_like_the_interpreter(void **state) {
	(void)state;
	model md = weighted_model();
	tbc_diags *d = tbc_diags_create();
	char so[512];
	snprintf(so, sizeof so, "%s", tmp_path("m.so"));
	tbc_code rc = tbc_compile_to_file(md.m, NULL, so, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!h) fprintf(stderr, "%s\n", dlerror());
	assert_non_null(h);
	tbc_abi_descriptor_fn fn;
	void *sym = dlsym(h, "tbc_model_descriptor");
	assert_non_null(sym);
	memcpy(&fn, &sym, sizeof fn);
	const tbc_abi_model *model = fn();
	assert_int_equal(model->magic, TBC_ABI_MAGIC);
	assert_int_equal(model->n_syms, 1);
	assert_string_equal(model->sym_names[0], "N");
	assert_int_equal(model->weights_size, 64);
	tbc_tensor *got = NULL, *want = interpret(&md);
	assert_int_equal(tbc_abi_run_serial(model, md.in, 1, &got, 1, d), TBC_OK);
	compare("shared object", want, got, 1e-6);
	tbc_tensor_destroy(got);
	tbc_tensor_destroy(want);
	dlclose(h);
	tbc_diags_destroy(d);
	free_model(&md);
}

static void test_external_weights_file(void **state) {
	(void)state;
	model md = weighted_model();
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.weights = TBC_WEIGHTS_EXTERNAL;
	char so[512];
	snprintf(so, sizeof so, "%s", tmp_path("ext.so"));
	assert_int_equal(tbc_compile_to_file(md.m, &o, so, d), TBC_OK);
	size_t n;
	char *w = read_all(tmp_path("ext.so.weights"), &n);
	assert_non_null(w);
	assert_int_equal(n, 64);
	float w0;
	memcpy(&w0, w, 4);
	assert_true(w0 == 1.0f);
	free(w);
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	void *sym = dlsym(h, "tbc_model_descriptor");
	tbc_abi_descriptor_fn fn;
	memcpy(&fn, &sym, sizeof fn);
	const tbc_abi_model *model = fn();
	assert_null(model->weights);
	assert_string_equal(model->weights_file, "ext.so.weights");
	dlclose(h);
	tbc_diags_destroy(d);
	free_model(&md);
}

/* A program big enough to be split over LLVM modules compiled in parallel
 * (docs/compile-time.md): four MatMuls with constant weights of other
 * shapes, each with its activation. */
static model split_model(void) {
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,64", 5, -1, 1);
	static const int64_t widths[] = {96, 48, 80, 40};
	int64_t k = 64;
	for (int i = 0; i < 4; i++) {
		int64_t dims[2] = {k, widths[i]};
		double *w = malloc((size_t)(k * widths[i]) * sizeof *w);
		assert_non_null(w);
		for (int64_t j = 0; j < k * widths[i]; j++) w[j] = rnd(&md) - 0.5;
		x = op2(&md, TBC_OP_MatMul, x, constant(&md, TBC_DT_F32, 2, dims, w));
		x = op1(&md, i % 2 ? TBC_OP_Sigmoid : TBC_OP_Tanh, x);
		free(w);
		k = widths[i];
	}
	tbc_graph_add_output(md.m->main, x);
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md.m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md.m->main));
	tbc_diags_destroy(d);
	return md;
}

/* The split program's shared object is the same bytes on 1, 2 or 3
 * threads (the split depends on the program alone) and runs as the
 * interpreter; its .o is one relocatable object with the descriptor, the
 * kernels' symbols hidden; the JIT, which adds the objects one by one, runs
 * it too. */
static void test_parallel_modules(void **state) {
	(void)state;
	model md = split_model();
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	tbc_compile_stats st;
	o.stats_out = &st;
	char *first = NULL;
	size_t first_n = 0;
	for (int threads = 1; threads <= 3; threads++) {
		o.compile_threads = threads;
		const char *so = tmp_path("split.so");
		tbc_code rc = tbc_compile_to_file(md.m, &o, so, d);
		if (rc) print_diags(d);
		assert_int_equal(rc, TBC_OK);
		assert_true(st.llvm_modules >= 3); /* the host and two kernel modules at least */
		assert_int_equal(st.llvm_threads, threads);
		size_t n;
		char *bytes = read_all(so, &n);
		assert_non_null(bytes);
		if (!first) {
			first = bytes, first_n = n;
			continue;
		}
		assert_int_equal(n, first_n);
		assert_memory_equal(bytes, first, n);
		free(bytes);
	}
	free(first);
	void *h = dlopen(tmp_path("split.so"), RTLD_NOW | RTLD_LOCAL);
	if (!h) fprintf(stderr, "%s\n", dlerror());
	assert_non_null(h);
	void *sym = dlsym(h, "tbc_model_descriptor");
	assert_non_null(sym);
	tbc_abi_descriptor_fn fn;
	memcpy(&fn, &sym, sizeof fn);
	tbc_tensor *got = NULL, *want = interpret(&md);
	assert_int_equal(tbc_abi_run_serial(fn(), md.in, 1, &got, 1, d), TBC_OK);
	compare("split shared object", want, got, 1e-5);
	tbc_tensor_destroy(got);
	tbc_tensor_destroy(want);
	dlclose(h);
	o.stats_out = NULL;
	o.compile_threads = 2;
	o.prefix = "split";
	char obj[512];
	snprintf(obj, sizeof obj, "%s", tmp_path("split.o"));
	assert_int_equal(tbc_compile_to_file(md.m, &o, obj, d), TBC_OK);
	size_t n;
	unsigned char *e = (unsigned char *)read_all(obj, &n);
	assert_non_null(e);
	assert_true(n > 20 && e[0] == 0x7f && e[1] == 'E' && e[16] == 1); /* ELF, ET_REL */
	free(e);
	if (access("/usr/bin/llvm-nm-19", X_OK) == 0) {
		char cmd[2048], out[600], so[512];
		snprintf(so, sizeof so, "%s", tmp_path("split.so"));
		snprintf(out, sizeof out, "%s", tmp_path("split.nm"));
		/* The shared object's kernels are local symbols there, not exported. */
		snprintf(cmd, sizeof cmd, "llvm-nm-19 %s > %s", so, out);
		assert_int_equal(system(cmd), 0);
		char *syms = read_all(out, &n);
		assert_non_null(syms);
		assert_non_null(strstr(syms, " t model.k"));
		free(syms);
		snprintf(cmd, sizeof cmd, "llvm-nm-19 -D %s > %s", so, out);
		assert_int_equal(system(cmd), 0);
		syms = read_all(out, &n);
		assert_non_null(syms);
		assert_non_null(strstr(syms, " T tbc_model_descriptor"));
		assert_null(strstr(syms, "model.k"));
		free(syms);
		snprintf(cmd, sizeof cmd, "llvm-nm-19 %s > %s", obj, out);
		assert_int_equal(system(cmd), 0);
		syms = read_all(out, &n);
		assert_non_null(syms);
		assert_non_null(strstr(syms, " T split_descriptor"));
		assert_non_null(strstr(syms, " split.weights")); /* the data object's */
		assert_non_null(strstr(syms, " T split.k")); /* kernels from the kernel modules */
		free(syms);
	}
	tbc_diags_destroy(d);
	check_outputs(&md, -1, NULL, 1e-5); /* JIT: several objects in one JITDylib */
}

/* -O1's short pipeline (codegen/llvm/llvm_machine.c) keeps what the
 * kernels need: the GEMM tiles and an elementwise loop are vector code for
 * haswell, and the split program runs as the interpreter. */
static void test_o1_pipeline_vectorizes(void **state) {
	(void)state;
	for (int which = 0; which < 2; which++) {
		model md = which ? model_new() : split_model();
		if (which) {
			tbc_value *x = input(&md, TBC_DT_F32, "64,1024");
			tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Exp, op2(&md, TBC_OP_Add, x, x)));
			tbc_diags *d = tbc_diags_create();
			tbc_infer cx = {.module = md.m, .diags = d};
			assert_true(tbc_infer_graph(&cx, md.m->main));
			tbc_diags_destroy(d);
		}
		tbc_diags *d = tbc_diags_create();
		tbc_compile_options o = opts_at(1);
		o.target_triple = "x86_64-unknown-linux-gnu";
		o.cpu = "haswell";
		const char *path = tmp_path("o1.ll");
		tbc_code rc = tbc_compile_to_file(md.m, &o, path, d);
		if (rc) print_diags(d);
		assert_int_equal(rc, TBC_OK);
		size_t n;
		char *ir = read_all(path, &n);
		assert_non_null(ir);
		assert_non_null(strstr(ir, "<8 x float>"));
		if (!which) assert_non_null(strstr(ir, "@llvm.fma.v8f32"));
		else assert_null(strstr(ir, "@expf"));
		free(ir);
		tbc_diags_destroy(d);
		free_model(&md);
	}
	model md = split_model();
	tbc_compile_options o = opts_at(1);
	check_outputs_with(&md, -1, NULL, 1e-5, &o);
}

/* -O1 compiles what -O2 does: a Winograd convolution over a 7 x 7 map
 * (its transforms left InstCombine short of a fixed point after one
 * iteration, and `instcombine` named in a pipeline's text aborted the
 * process there), against the interpreter. */
static void test_o1_compiles_a_winograd_convolution(void **state) {
	(void)state;
	model md = model_new();
	int64_t n = 32 * 16 * 9;
	double *v = malloc((size_t)n * sizeof *v);
	assert_non_null(v);
	for (int64_t j = 0; j < n; j++) v[j] = (double)((j * 37) % 19 - 9) / 16.0;
	tbc_value *w = constant(&md, TBC_DT_F32, 4, (const int64_t[]){32, 16, 3, 3}, v);
	free(v);
	tbc_op *o = node(&md, TBC_OP_Conv, 2, input(&md, TBC_DT_F32, "1,16,7,7"), w, NULL);
	tbc_attr *a = tbc_op_add_attr(o, "pads", TBC_ATTR_INTS);
	a->n = 4, a->ints = tbc_arena_array(md.m->arena, 4, sizeof *a->ints);
	for (int i = 0; i < 4; i++) a->ints[i] = 1;
	tbc_compile_options opts = opts_at(1);
	check_outputs_with(&md, 1, (tbc_value *[]){o->outputs[0]}, 1e-4, &opts);
}

/* -O1 emits CPU code without LLVM's loop strength reduction, a setting of
 * the whole process (codegen/llvm/llvm_machine.c): its code differs from
 * -O1 with it (TBC_O1_LSR=1), -O2 after -O1 is the same bytes as before,
 * and -O1 and -O2 compiles side by side on two threads each give their own
 * bytes (an emission waits for the other setting's to finish). */
typedef struct lsr_compile {
	model *md;
	int level;
	const char *path;
	tbc_code rc;
} lsr_compile;

static void *lsr_compile_run(void *arg) {
	lsr_compile *lc = arg;
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o = opts_at(lc->level);
	o.compile_threads = 2;
	lc->rc = tbc_compile_to_file(lc->md->m, &o, lc->path, d);
	if (lc->rc) print_diags(d);
	tbc_diags_destroy(d);
	return NULL;
}

static char *lsr_compiled(model *md, int level, const char *name, size_t *n) {
	char path[512];
	snprintf(path, sizeof path, "%s", tmp_path(name));
	lsr_compile lc = {md, level, path, TBC_OK};
	lsr_compile_run(&lc);
	assert_int_equal(lc.rc, TBC_OK);
	char *bytes = read_all(lc.path, n);
	assert_non_null(bytes);
	return bytes;
}

static void test_o1_without_strength_reduction(void **state) {
	(void)state;
	model md = split_model();
	size_t n2, n1, n1lsr, n2again;
	char *o2 = lsr_compiled(&md, 2, "lsr_o2.so", &n2);
	char *o1 = lsr_compiled(&md, 1, "lsr_o1.so", &n1);
	setenv("TBC_O1_LSR", "1", 1);
	char *o1lsr = lsr_compiled(&md, 1, "lsr_o1lsr.so", &n1lsr);
	unsetenv("TBC_O1_LSR");
	assert_true(n1 != n1lsr || memcmp(o1, o1lsr, n1) != 0);
	char *o2again = lsr_compiled(&md, 2, "lsr_o2again.so", &n2again);
	assert_int_equal(n2again, n2);
	assert_memory_equal(o2again, o2, n2);
	free(o2again);
	for (int round = 0; round < 4; round++) {
		char path1[512], path2[512]; /* tmp_path's buffer is its own */
		snprintf(path1, sizeof path1, "%s", tmp_path("lsr_t1.so"));
		snprintf(path2, sizeof path2, "%s", tmp_path("lsr_t2.so"));
		lsr_compile lc[2] = {{&md, 1, path1, TBC_OK}, {&md, 2, path2, TBC_OK}};
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, lsr_compile_run, &lc[round % 2]), 0);
		lsr_compile_run(&lc[1 - round % 2]);
		pthread_join(t, NULL);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(lc[i].rc, TBC_OK);
			size_t n;
			char *bytes = read_all(lc[i].path, &n);
			assert_non_null(bytes);
			assert_int_equal(n, i ? n2 : n1);
			assert_memory_equal(bytes, i ? o2 : o1, n);
			free(bytes);
		}
	}
	free(o2), free(o1), free(o1lsr);
	free_model(&md);
}

static void test_aarch64_cross_object(void **state) {
	(void)state;
	model md = weighted_model();
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.target_triple = "aarch64-linux-gnu";
	o.cpu = "neoverse-n1";
	char obj[512];
	snprintf(obj, sizeof obj, "%s", tmp_path("arm.o"));
	tbc_code rc = tbc_compile_to_file(md.m, &o, obj, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	size_t n;
	unsigned char *e = (unsigned char *)read_all(obj, &n);
	assert_non_null(e);
	assert_true(n > 20 && e[0] == 0x7f && e[1] == 'E' && e[18] == 183); /* ELF, EM_AARCH64 */
	free(e);
	if (access("/usr/bin/llvm-objdump-19", X_OK) == 0) {
		char cmd[2048], out[600];
		snprintf(out, sizeof out, "%s", tmp_path("arm.dis"));
		snprintf(cmd, sizeof cmd, "llvm-objdump-19 -d %s > %s", obj, out);
		assert_int_equal(system(cmd), 0);
		char *dis = read_all(out, &n);
		assert_non_null(dis);
		assert_non_null(strstr(dis, "aarch64"));
		assert_non_null(strstr(dis, "<model_descriptor>:"));
		assert_non_null(strstr(dis, "fmla") ? dis : strstr(dis, "fmul"));
		free(dis);
	}
	o.target_triple = "riscv64-linux-gnu";
	assert_int_equal(tbc_compile_to_file(md.m, &o, obj, d), TBC_ERR_UNSUPPORTED);
	tbc_diags_destroy(d);
	free_model(&md);
}

/* The feature list of an artifact compiled for cpu (with the triple): the
 * descriptor's string constant in the LLVM IR (the only one that starts
 * with '+'); malloc'd. */
static char *features_of(const char *triple, const char *cpu) {
	model md = weighted_model();
	tbc_diags *d = tbc_diags_create();
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.target_triple = triple;
	o.cpu = cpu;
	const char *ll = tmp_path("cpu.ll");
	tbc_code rc = tbc_compile_to_file(md.m, &o, ll, d);
	if (rc) print_diags(d);
	assert_int_equal(rc, TBC_OK);
	size_t n;
	char *ir = read_all(ll, &n);
	assert_non_null(ir);
	const char *s = strstr(ir, "c\"+");
	assert_non_null(s);
	const char *e = strstr(s, "\\00\"");
	assert_non_null(e);
	char *f = strndup(s + 2, (size_t)(e - s - 2));
	free(ir);
	tbc_diags_destroy(d);
	free_model(&md);
	return f;
}

static bool lists(const char *features, const char *name) {
	size_t n = strlen(name);
	for (const char *s = features; (s = strstr(s, name)); s += n)
		if ((s == features || s[-1] == ',') && (s[n] == ',' || !s[n])) return true;
	return false;
}

/* A CPU named without features: the artifact lists the features LLVM's
 * tables give that CPU (and the runtime can check), less those only
 * intrinsics use, so the runtime refuses it on a host without one. */
static void test_a_named_cpu_records_its_features(void **state) {
	(void)state;
	char *f = features_of(NULL, "haswell");
	assert_true(lists(f, "+avx2") && lists(f, "+fma") && lists(f, "+bmi2") && lists(f, "+sse4.2"));
	assert_false(lists(f, "+avx512f") || lists(f, "+sse4a"));
	assert_false(lists(f, "+invpcid") || lists(f, "+aes") || lists(f, "+rdrnd")); /* intrinsics only */
	free(f);
	f = features_of(NULL, "x86-64-v4"); /* the psABI level: AVX-512 F, BW, CD, DQ, VL */
	assert_true(lists(f, "+avx512f") && lists(f, "+avx512bw") && lists(f, "+avx512vl") && lists(f, "+avx2"));
	assert_false(lists(f, "+avx512fp16"));
	free(f);
	f = features_of("aarch64-linux-gnu", "neoverse-n1");
	assert_true(lists(f, "+neon") && lists(f, "+dotprod") && lists(f, "+lse") && lists(f, "+fullfp16"));
	assert_false(lists(f, "+sve") || lists(f, "+crc"));
	free(f);
	f = features_of("aarch64-linux-gnu", "a64fx");
	assert_true(lists(f, "+sve") && lists(f, "+neon"));
	free(f);
}

/* LLVM only warns about a CPU or feature it does not know, and an unknown
 * x86-64 CPU then aborts the process: tbc refuses such names itself. */
static void test_unknown_cpu_or_feature_names_are_refused(void **state) {
	(void)state;
	static const struct {
		const char *triple, *cpu, *features, *message;
	} bad[] = {
		{NULL, "bogus", NULL, "--cpu bogus: LLVM knows no such CPU for x86_64"},
		{"x86_64-linux-gnu", "i386", NULL, "--cpu i386: LLVM knows no such CPU"},
		{"aarch64-linux-gnu", "haswell", NULL, "--cpu haswell: LLVM knows no such CPU for aarch64"},
		{NULL, "haswell", "+avx2,+quantum", "--features: '+quantum' is not +NAME or -NAME of a feature"},
		{NULL, NULL, "avx2", "--features: 'avx2' is not +NAME"},
		{"aarch64-linux-gnu", NULL, "+neon,,+sve", "--features: '' is not"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		model md = weighted_model();
		tbc_diags *d = tbc_diags_create();
		tbc_compile_options o;
		tbc_compile_options_init(&o);
		o.target_triple = bad[i].triple;
		o.cpu = bad[i].cpu;
		o.features = bad[i].features;
		assert_int_equal(tbc_compile_to_file(md.m, &o, tmp_path("bad.o"), d), TBC_ERR_INVALID_ARGUMENT);
		const char *msg = tbc_diags_get(d, 0)->message;
		if (!strstr(msg, bad[i].message)) fprintf(stderr, "case %zu: %s\n", i, msg);
		assert_non_null(strstr(msg, bad[i].message));
		tbc_diags_destroy(d);
		free_model(&md);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_same_shape),
		cmocka_unit_test(test_add_broadcast_row_and_column),
		cmocka_unit_test(test_add_broadcast_across_a_unit_dim),
		cmocka_unit_test(test_mul_scalar_constant_inlined),
		cmocka_unit_test(test_sub_with_constant_vector),
		cmocka_unit_test(test_add_symbolic_batch),
		cmocka_unit_test(test_unary_float_ops),
		cmocka_unit_test(test_unary_positive_domain),
		cmocka_unit_test(test_gelu_tanh_and_attributes),
		cmocka_unit_test(test_integer_arithmetic_wraps),
		cmocka_unit_test(test_integer_unary),
		cmocka_unit_test(test_mod_signs),
		cmocka_unit_test(test_integer_division_by_zero_fails),
		cmocka_unit_test(test_division_check_in_kernel_ir),
		cmocka_unit_test(test_pow_float_and_integer),
		cmocka_unit_test(test_pow_by_small_constant_integers),
		cmocka_unit_test(test_identical_kernels_share_one_function),
		cmocka_unit_test(test_bitshift_left_and_right),
		cmocka_unit_test(test_logic_and_where),
		cmocka_unit_test(test_variadic_max_min_sum_mean),
		cmocka_unit_test(test_clip_with_and_without_bounds),
		cmocka_unit_test(test_prelu_broadcast_slope),
		cmocka_unit_test(test_cast_between_types),
		cmocka_unit_test(test_narrow_float_decode_every_code),
		cmocka_unit_test(test_narrow_float_encode_rounds_to_nearest_even),
		cmocka_unit_test(test_elementwise_on_f16_and_bf16),
		cmocka_unit_test(test_sub_byte_integers_wrap),
		cmocka_unit_test(test_chain_with_reshape_alias),
		cmocka_unit_test(test_output_is_input_and_duplicate),
		cmocka_unit_test(test_fused_region_two_shapes),
		cmocka_unit_test(test_compile_runs_the_passes_on_a_copy),
		cmocka_unit_test(test_dump_after_unknown_pass),
		cmocka_unit_test(test_reshape_copies_when_its_source_bytes_are_reused),
		cmocka_unit_test(test_reshape_shares_storage_when_safe),
		cmocka_unit_test(test_fused_outputs_written_over_their_input),
		cmocka_unit_test(test_fused_two_nests_keep_their_input),
		cmocka_unit_test(test_symbolic_values_in_a_scaled_part),
		cmocka_unit_test(test_unlowered_op_is_unsupported),
		cmocka_unit_test(test_program_prints_kernels),
		cmocka_unit_test(test_vector_math_accuracy),
		cmocka_unit_test(test_vector_math_vectorizes),
		cmocka_unit_test(test_object_is_deterministic_with_header),
		cmocka_unit_test(test_parallel_modules),
		cmocka_unit_test(test_o1_pipeline_vectorizes),
		cmocka_unit_test(test_o1_compiles_a_winograd_convolution),
		cmocka_unit_test(test_o1_without_strength_reduction),
		cmocka_unit_test(test_opencl_artifacts_are_deterministic),
		cmocka_unit_test(test_shared_object_runs_like_the_interpreter),
		cmocka_unit_test(test_external_weights_file),
		cmocka_unit_test(test_aarch64_cross_object),
		cmocka_unit_test(test_a_named_cpu_records_its_features),
		cmocka_unit_test(test_softmax_sum_vectorizes),
		cmocka_unit_test(test_pool_and_norm_sums_vectorize),
		cmocka_unit_test(test_unknown_cpu_or_feature_names_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
