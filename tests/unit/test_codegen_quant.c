/* The quantization ops lowered (codegen/lower/quant.c)
 * against the reference interpreter: each test
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
#include <unistd.h>

#include "codegen/lower/lower.h"
#include "ir/kernels/kernels.h"
#include "tbc/abi.h"
#include "tests/unit/support/codegen_check.h"

static tbc_op *nodev(model *md, tbc_opcode code, int n_in, tbc_value *const *ins, int n_out) {
	return tbc_op_new(md->m->main, code, "n", n_in, ins, n_out);
}
static void set_int(tbc_op *op, const char *name, int64_t v) { tbc_op_add_attr(op, name, TBC_ATTR_INT)->i = v; }
/* A constant 1-D (n > 1) or scalar (n == 0 with one value) tensor. */
static tbc_value *vec(model *md, tbc_dtype dt, int64_t n, const double *vals) {
	int64_t dims[1] = {n};
	return constant(md, dt, n ? 1 : 0, dims, vals);
}
static tbc_value *scalar(model *md, tbc_dtype dt, double v) { return vec(md, dt, 0, &v); }

/* ---- QuantizeLinear -------------------------------------------------------------*/
/* y = saturate(round_half_even(x / scale) + zero_point): per tensor, to every
 * integer type, with ties and out-of-range values in the data. */
static void test_quantize_per_tensor_every_integer_type(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_U8, TBC_DT_I8, TBC_DT_U16, TBC_DT_I16,
					  TBC_DT_U4, TBC_DT_I4, TBC_DT_U2, TBC_DT_I2};
	static const double zps[] = {128, -3, 30000, -100, 7, -2, 1, 0};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_F32, "N,5,7", 3, -400, 400);
		/* Halves: x / 0.5 lands on .0 and .5 steps of the data too. */
		tbc_value *ins[3] = {x, scalar(&md, TBC_DT_F32, 0.5), scalar(&md, types[i], zps[i])};
		check_outputs(&md, 1, (tbc_value *[]){nodev(&md, TBC_OP_QuantizeLinear, 3, ins, 1)->outputs[0]}, 0);
	}
}

static void test_quantize_ties_round_to_even(void **state) {
	(void)state;
	model md = model_new();
	static const int64_t d[1] = {8};
	static const double xs[8] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1000, -1000};
	tbc_value *ins[2] = {constant(&md, TBC_DT_F32, 1, d, xs), scalar(&md, TBC_DT_F32, 1.0)};
	tbc_op *q = nodev(&md, TBC_OP_QuantizeLinear, 2, ins, 1); /* no zero point: uint8 */
	ins[1] = scalar(&md, TBC_DT_F32, 1.0);
	tbc_value *zins[3] = {ins[0], ins[1], scalar(&md, TBC_DT_I8, 0)};
	tbc_op *qs = nodev(&md, TBC_OP_QuantizeLinear, 3, zins, 1);
	/* uint8: 0 2 2 0 0 0 255 0; int8: 0 2 2 -0 -2 -2 127 -128 */
	check_outputs(&md, 2, (tbc_value *[]){q->outputs[0], qs->outputs[0]}, 0);
}

static void test_quantize_per_axis_and_blocked(void **state) {
	(void)state;
	static const double sc[4] = {0.1, 0.25, 2, 0.03}, zp[4] = {-10, 0, 5, 100};
	for (int axis = 0; axis < 3; axis++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_F32, "4,4,4", 1, -5, 5);
		tbc_value *ins[3] = {x, vec(&md, TBC_DT_F32, 4, sc), vec(&md, TBC_DT_I8, 4, zp)};
		tbc_op *q = nodev(&md, TBC_OP_QuantizeLinear, 3, ins, 1);
		set_int(q, "axis", axis);
		check_outputs(&md, 1, &q->outputs[0], 0);
	}
	/* Blocked: x 3x7x2, axis 1 in blocks of 3 (the last block short). */
	for (int axis = 0; axis < 3; axis++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_F32, "3,7,2", 1, -5, 5);
		int64_t pd[3] = {3, 7, 2};
		pd[axis] = (pd[axis] + 2) / 3;
		double s[42], z[42];
		for (int i = 0; i < 42; i++) s[i] = 0.05 + 0.01 * i, z[i] = (i % 5) - 2;
		tbc_value *ins[3] = {x, constant(&md, TBC_DT_F32, 3, pd, s), constant(&md, TBC_DT_I4, 3, pd, z)};
		tbc_op *q = nodev(&md, TBC_OP_QuantizeLinear, 3, ins, 1);
		set_int(q, "axis", axis);
		set_int(q, "block_size", 3);
		check_outputs(&md, 1, &q->outputs[0], 0);
	}
	/* Blocked behind a leading dim of 1 (the axis shares its loop). */
	{
		model md = model_new();
		static const int64_t pd[4] = {1, 2, 3, 2};
		double s[12];
		for (int i = 0; i < 12; i++) s[i] = 0.1 + 0.05 * i;
		tbc_value *ins[2] = {input_sym(&md, TBC_DT_F32, "1,4,3,2", 1, -5, 5), constant(&md, TBC_DT_F32, 4, pd, s)};
		tbc_op *q = nodev(&md, TBC_OP_QuantizeLinear, 2, ins, 1);
		set_int(q, "axis", 1);
		set_int(q, "block_size", 2);
		tbc_value *dins[2] = {q->outputs[0], ins[1]};
		tbc_op *dq = nodev(&md, TBC_OP_DequantizeLinear, 2, dins, 1);
		set_int(dq, "axis", 1);
		set_int(dq, "block_size", 2);
		check_outputs(&md, 2, (tbc_value *[]){q->outputs[0], dq->outputs[0]}, 0);
	}
	/* Per axis over a symbolic batch (axis 1 of N x 4 x 5). */
	model md = model_new();
	tbc_value *ins[3] = {input_sym(&md, TBC_DT_F32, "N,4,5", 3, -5, 5), vec(&md, TBC_DT_F32, 4, sc),
			     vec(&md, TBC_DT_U8, 4, (double[]){0, 10, 128, 255})};
	check_outputs(&md, 1, &nodev(&md, TBC_OP_QuantizeLinear, 3, ins, 1)->outputs[0], 0);
}

/* f16, f64 and int32 inputs compute in their own precision (f32 for int32);
 * float8 outputs saturate or not; float4 clamps to +-6. */
static void test_quantize_precisions_and_float_outputs(void **state) {
	(void)state;
	static const tbc_dtype xt[] = {TBC_DT_F16, TBC_DT_BF16, TBC_DT_F64, TBC_DT_I32};
	for (size_t i = 0; i < sizeof xt / sizeof xt[0]; i++) {
		model md = model_new();
		tbc_value *ins[3] = {input_sym(&md, xt[i], "6,9", 1, -300, 300), scalar(&md, xt[i] == TBC_DT_I32 ? TBC_DT_F32 : xt[i], 1.7),
				     scalar(&md, TBC_DT_I8, 3)};
		check_outputs(&md, 1, &nodev(&md, TBC_OP_QuantizeLinear, 3, ins, 1)->outputs[0], 0);
	}
	static const tbc_dtype ft[] = {TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ, TBC_DT_F8E5M2, TBC_DT_F8E5M2FNUZ, TBC_DT_F4E2M1};
	for (size_t i = 0; i < sizeof ft / sizeof ft[0]; i++)
		for (int sat = 0; sat < 2; sat++) {
			model md = model_new();
			static const int64_t d[1] = {6};
			static const double big[6] = {1e9, -1e9, INFINITY, -INFINITY, 3.3, -0.1};
			tbc_value *x = input_sym(&md, TBC_DT_F32, "5,8", 1, -1000, 1000);
			tbc_value *ins[3] = {x, scalar(&md, TBC_DT_F32, 0.37), scalar(&md, ft[i], 0)};
			tbc_op *q = nodev(&md, TBC_OP_QuantizeLinear, 3, ins, 1);
			tbc_value *ins2[3] = {constant(&md, TBC_DT_F32, 1, d, big), ins[1], ins[2]};
			tbc_op *q2 = nodev(&md, TBC_OP_QuantizeLinear, 3, ins2, 1);
			if (!sat && ft[i] != TBC_DT_F4E2M1) set_int(q, "saturate", 0), set_int(q2, "saturate", 0);
			check_outputs(&md, 2, (tbc_value *[]){q->outputs[0], q2->outputs[0]}, 0);
		}
}

/* ---- DequantizeLinear -----------------------------------------------------------*/
/* y = (x - zero_point) * scale. */
static void test_dequantize_types_axes_blocks(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_U8, TBC_DT_I8, TBC_DT_U16, TBC_DT_I16, TBC_DT_U4,
					  TBC_DT_I4, TBC_DT_U2, TBC_DT_I2, TBC_DT_I32};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, types[i], "N,3,4", 2, -200, 200);
		tbc_value *ins[3] = {x, vec(&md, TBC_DT_F32, 3, (double[]){0.5, 0.031, 7}),
				     vec(&md, types[i], 3, (double[]){1, 0, -1 + (types[i] == TBC_DT_U8 || types[i] == TBC_DT_U16 ||
										  types[i] == TBC_DT_U4 || types[i] == TBC_DT_U2
									  ? 2
									  : 0)})};
		check_outputs(&md, 1, &nodev(&md, TBC_OP_DequantizeLinear, 3, ins, 1)->outputs[0], 0);
	}
	/* Blocked along axis 0, output f16; an f64 scale computes in f64. */
	model md = model_new();
	double s[12], z[12];
	for (int i = 0; i < 12; i++) s[i] = 0.1 * (i + 1), z[i] = i % 3;
	static const int64_t pd[2] = {2, 6};
	tbc_value *ins[3] = {input_sym(&md, TBC_DT_U8, "7,6", 1, 0, 255), constant(&md, TBC_DT_F32, 2, pd, s),
			     constant(&md, TBC_DT_U8, 2, pd, z)};
	tbc_op *dq = nodev(&md, TBC_OP_DequantizeLinear, 3, ins, 1);
	set_int(dq, "axis", 0);
	set_int(dq, "block_size", 4);
	set_int(dq, "output_dtype", TBC_DT_F16);
	tbc_value *ins2[2] = {input_sym(&md, TBC_DT_I16, "3,5", 1, -3000, 3000), scalar(&md, TBC_DT_F64, 1e-3)};
	tbc_op *dq2 = nodev(&md, TBC_OP_DequantizeLinear, 2, ins2, 1);
	check_outputs(&md, 2, (tbc_value *[]){dq->outputs[0], dq2->outputs[0]}, 0);
}

static void test_dequantize_float8_and_float4(void **state) {
	(void)state;
	static const tbc_dtype ft[] = {TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ, TBC_DT_F8E5M2, TBC_DT_F8E5M2FNUZ, TBC_DT_F4E2M1};
	for (size_t i = 0; i < sizeof ft / sizeof ft[0]; i++) {
		model md = model_new();
		tbc_value *ins[3] = {input_sym(&md, ft[i], "4,6", 1, -6, 6), scalar(&md, TBC_DT_F32, 2.5), scalar(&md, ft[i], 0)};
		check_outputs(&md, 1, &nodev(&md, TBC_OP_DequantizeLinear, 3, ins, 1)->outputs[0], 0);
	}
}

/* ---- DynamicQuantizeLinear -------------------------------------------------------*/
static void test_dynamic_quantize(void **state) {
	(void)state;
	static const double ranges[][2] = {{-3, 5}, {1, 9}, {-9, -1}, {0, 0}};
	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_F32, "N,5", 7, ranges[i][0], ranges[i][1]);
		tbc_op *q = nodev(&md, TBC_OP_DynamicQuantizeLinear, 1, &x, 3);
		check_outputs(&md, 3, q->outputs, 0);
	}
	/* Only y wanted: scale and zero point go to scratch. */
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "3,4,5", 1, -2, 7);
	tbc_op *q = nodev(&md, TBC_OP_DynamicQuantizeLinear, 1, &x, 3);
	check_outputs(&md, 1, q->outputs, 0);
}

/* The range over tensors long enough for the range kernel's 16 lanes
 * (chunks of 16 values and more), with the values its rule turns on: NaN
 * never replaces, -0 never replaces the +0 the range starts from (a
 * tensor of zeros and -0s, of negatives and -0s, of positives and NaNs,
 * of NaNs alone), a lone extreme in any lane.  Scale, zero point and y
 * against the interpreter, exactly. */
static void test_dynamic_quantize_range_lanes(void **state) {
	(void)state;
	for (int form = 0; form < 6; form++)
		for (int64_t n = 256; n <= 4100; n += 3844) {
			model md = model_new();
			tbc_value *x = input_sym(&md, TBC_DT_F32, "3,N", n, form == 2 ? -9 : -3, form == 2 ? -1 : 5);
			float *p = md.in[md.n_in - 1]->data;
			for (int64_t i = 0; i < 3 * n; i++) {
				if (form == 1) p[i] = i % 2 ? -0.0f : 0.0f;
				if (form == 2 && i % 5 == 0) p[i] = -0.0f;
				if (form == 3 && i % 7 == 0) p[i] = NAN;
				if (form == 4) p[i] = NAN;
			}
			if (form == 5) p[n + 37] = 1e6f, p[2 * n - 3] = -1e6f; /* one lane's, another's */
			tbc_op *q = nodev(&md, TBC_OP_DynamicQuantizeLinear, 1, &x, 3);
			check_outputs(&md, 3, q->outputs, 0);
		}
}

/* ---- MatMulInteger, QLinearMatMul ------------------------------------------------*/
static void test_matmul_integer(void **state) {
	(void)state;
	static const char *const shapes[][2] = {{"4,3", "3,5"}, {"2,4,3", "3,5"}, {"3", "3,5"}, {"4,3", "3"},
						{"2,1,4,3", "3,3,5"}, {"N,4,7", "7,6"}, {"13,37", "37,50"}, {"7,20", "2,20,19"},
						/* symbolic rows and columns (a dynamic-axes export) */
						{"N,S,7", "7,6"}, {"S,7", "7,C"},
						/* sums in f32 (K = 7 ...), in f64 (K * 255 * 255 >= 2^24 once
						 * shifted by the zero points) and in int32 (K symbolic) */
						{"3,300", "300,4"}, {"3,K", "K,4"}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		model md = model_new();
		tbc_value *a = input_sym(&md, TBC_DT_U8, shapes[i][0], 2, 0, 255);
		tbc_value *b = input_sym(&md, TBC_DT_I8, shapes[i][1], 2, -128, 127);
		tbc_value *ins[4] = {a, b, scalar(&md, TBC_DT_U8, 12), scalar(&md, TBC_DT_I8, -5)};
		tbc_value *y0 = nodev(&md, TBC_OP_MatMulInteger, 2, ins, 1)->outputs[0];
		tbc_value *y1 = nodev(&md, TBC_OP_MatMulInteger, 4, ins, 1)->outputs[0];
		check_outputs(&md, 2, (tbc_value *[]){y0, y1}, 0);
	}
	/* Per-row zero points of a, per-column of b. */
	model md = model_new();
	tbc_value *ins[4] = {input_sym(&md, TBC_DT_I8, "4,3", 1, -128, 127), input_sym(&md, TBC_DT_U8, "3,2", 1, 0, 255),
			     vec(&md, TBC_DT_I8, 4, (double[]){1, -2, 3, -4}), vec(&md, TBC_DT_U8, 2, (double[]){100, 200})};
	tbc_value *y0 = nodev(&md, TBC_OP_MatMulInteger, 4, ins, 1)->outputs[0];
	ins[2] = scalar(&md, TBC_DT_I8, 0); /* zero constants: no shift kernel */
	ins[3] = vec(&md, TBC_DT_U8, 2, (double[]){0, 0});
	tbc_value *y1 = nodev(&md, TBC_OP_MatMulInteger, 4, ins, 1)->outputs[0];
	check_outputs(&md, 2, (tbc_value *[]){y0, y1}, 0);
}

static void test_matmul_integer_full_rank_zero_point_is_refused(void **state) {
	(void)state;
	model md = model_new();
	static const int64_t zd[2] = {4, 1};
	static const double z[4] = {1, 2, 3, 4};
	tbc_value *ins[3] = {input_sym(&md, TBC_DT_U8, "4,3", 1, 0, 255), input_sym(&md, TBC_DT_U8, "3,2", 1, 0, 255),
			     constant(&md, TBC_DT_U8, 2, zd, z)};
	check_lowering_fails(&md, nodev(&md, TBC_OP_MatMulInteger, 3, ins, 1)->outputs[0], TBC_ERR_UNSUPPORTED,
			     "no lowering yet");
}

static void test_qlinear_matmul(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_U8, TBC_DT_I8};
	static const tbc_dtype stypes[] = {TBC_DT_F32, TBC_DT_F16};
	for (int ti = 0; ti < 2; ti++)
		for (int si = 0; si < 2; si++) {
			model md = model_new();
			tbc_dtype t = types[ti], st = stypes[si];
			double lo = t == TBC_DT_U8 ? 0 : -128, hi = t == TBC_DT_U8 ? 255 : 127;
			tbc_value *ins[8] = {input_sym(&md, t, "2,4,9", 1, lo, hi), scalar(&md, st, 0.0066), scalar(&md, t, lo + 113),
					     input_sym(&md, t, "9,5", 1, lo, hi),   scalar(&md, st, 0.00705), scalar(&md, t, lo + 114),
					     scalar(&md, st, 0.0107),               scalar(&md, t, lo + 118)};
			tbc_value *y0 = nodev(&md, TBC_OP_QLinearMatMul, 8, ins, 1)->outputs[0];
			/* Per-row a scale, per-column b scale and y zero point. */
			ins[1] = vec(&md, st, 2, (double[]){0.01, 0.02});
			ins[4] = vec(&md, st, 5, (double[]){0.01, 0.02, 0.005, 0.03, 0.001});
			ins[7] = vec(&md, t, 5, (double[]){lo + 1, lo + 100, lo + 50, lo + 7, lo + 200});
			ins[0] = input_sym(&md, t, "3,2,9", 1, lo, hi);
			tbc_value *y1 = nodev(&md, TBC_OP_QLinearMatMul, 8, ins, 1)->outputs[0];
			/* Rows known at run time: per-tensor a scale again. */
			ins[0] = input_sym(&md, t, "N,S,9", 3, lo, hi);
			ins[1] = scalar(&md, st, 0.0066);
			tbc_value *y2 = nodev(&md, TBC_OP_QLinearMatMul, 8, ins, 1)->outputs[0];
			check_outputs(&md, 3, (tbc_value *[]){y0, y1, y2}, 0);
		}
}

/* ---- ConvInteger, QLinearConv -----------------------------------------------------*/
static void test_conv_integer_pads_strides_groups(void **state) {
	(void)state;
	{
		model md = model_new();
		tbc_value *ins[4] = {input_sym(&md, TBC_DT_U8, "N,4,7,6", 2, 0, 255), input_sym(&md, TBC_DT_U8, "6,2,3,2", 1, 0, 255),
				     scalar(&md, TBC_DT_U8, 100), vec(&md, TBC_DT_U8, 6, (double[]){1, 2, 3, 4, 5, 6})};
		tbc_op *c = nodev(&md, TBC_OP_ConvInteger, 4, ins, 1);
		set_int(c, "group", 2);
		attr_ints(c, "pads", 4, (int64_t[]){1, 0, 2, 1});
		attr_ints(c, "strides", 2, (int64_t[]){2, 1});
		attr_ints(c, "dilations", 2, (int64_t[]){1, 2});
		check_outputs(&md, 1, &c->outputs[0], 0);
	}
	{ /* 1-D, SAME_UPPER, int8. */
		model md = model_new();
		tbc_value *ins[2] = {input_sym(&md, TBC_DT_I8, "2,3,9", 1, -128, 127), input_sym(&md, TBC_DT_I8, "4,3,4", 1, -128, 127)};
		tbc_op *c = nodev(&md, TBC_OP_ConvInteger, 2, ins, 1);
		tbc_attr *a = tbc_op_add_attr(c, "auto_pad", TBC_ATTR_STRING);
		a->s = "SAME_UPPER";
		a->s_len = strlen(a->s);
		check_outputs(&md, 1, &c->outputs[0], 0);
	}
}

static void test_qlinear_conv_with_bias(void **state) {
	(void)state;
	static const tbc_dtype types[] = {TBC_DT_U8, TBC_DT_I8};
	for (int ti = 0; ti < 2; ti++) {
		model md = model_new();
		tbc_dtype t = types[ti];
		double lo = t == TBC_DT_U8 ? 0 : -128, hi = t == TBC_DT_U8 ? 255 : 127;
		tbc_value *ins[9] = {input_sym(&md, t, "1,3,6,5", 1, lo, hi),
				     scalar(&md, TBC_DT_F32, 0.0039),
				     scalar(&md, t, lo + 100),
				     input_sym(&md, t, "4,3,3,3", 1, lo, hi),
				     vec(&md, TBC_DT_F32, 4, (double[]){0.002, 0.001, 0.0005, 0.003}),
				     scalar(&md, t, 0),
				     scalar(&md, TBC_DT_F32, 0.07),
				     scalar(&md, t, lo + 90),
				     vec(&md, TBC_DT_I32, 4, (double[]){-1000, 50, 3000, 0})};
		tbc_op *c = nodev(&md, TBC_OP_QLinearConv, 9, ins, 1);
		attr_ints(c, "pads", 4, (int64_t[]){1, 1, 1, 1});
		check_outputs(&md, 1, &c->outputs[0], 0);
	}
}

/* Per-tensor QuantizeLinear / DequantizeLinear are elementwise: fusion
 * merges them with their neighbours into one loop nest (a QDQ model's
 * residual Add: two DequantizeLinear, the Add, a Relu, a QuantizeLinear),
 * computed as their own kernels compute them, bit for bit; a per-axis
 * DequantizeLinear stays a kernel of its own. */
static void test_qdq_per_tensor_fused_into_loops(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_U8, "N,4,5,6", 2, 0, 256);
	tbc_value *b = input_sym(&md, TBC_DT_I8, "N,4,5,6", 2, -128, 128);
	tbc_value *da = nodev(&md, TBC_OP_DequantizeLinear, 3, (tbc_value *[]){a, scalar(&md, TBC_DT_F32, 0.05), scalar(&md, TBC_DT_U8, 7)}, 1)->outputs[0];
	tbc_value *db = nodev(&md, TBC_OP_DequantizeLinear, 3, (tbc_value *[]){b, scalar(&md, TBC_DT_F32, 0.031), scalar(&md, TBC_DT_I8, -3)}, 1)->outputs[0];
	tbc_value *sum = nodev(&md, TBC_OP_Add, 2, (tbc_value *[]){da, db}, 1)->outputs[0];
	tbc_value *r = nodev(&md, TBC_OP_Relu, 1, &sum, 1)->outputs[0];
	tbc_value *q1 = nodev(&md, TBC_OP_QuantizeLinear, 3, (tbc_value *[]){r, scalar(&md, TBC_DT_F32, 0.04), scalar(&md, TBC_DT_U8, 2)}, 1)->outputs[0];
	/* float -> int8 (saturating: x / 0.5 reaches +-200) -> float */
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,7", 2, -100, 100);
	tbc_value *x1 = nodev(&md, TBC_OP_Mul, 2, (tbc_value *[]){x, scalar(&md, TBC_DT_F32, 1.0)}, 1)->outputs[0];
	tbc_value *qx = nodev(&md, TBC_OP_QuantizeLinear, 3, (tbc_value *[]){x1, scalar(&md, TBC_DT_F32, 0.5), scalar(&md, TBC_DT_I8, -3)}, 1)->outputs[0];
	tbc_value *dx = nodev(&md, TBC_OP_DequantizeLinear, 2, (tbc_value *[]){qx, scalar(&md, TBC_DT_F32, 0.25)}, 1)->outputs[0];
	/* 16-bit types */
	tbc_value *c = input_sym(&md, TBC_DT_U16, "N,9", 2, 0, 65536);
	tbc_value *dc = nodev(&md, TBC_OP_DequantizeLinear, 3, (tbc_value *[]){c, scalar(&md, TBC_DT_F32, 0.002), scalar(&md, TBC_DT_U16, 1000)}, 1)->outputs[0];
	tbc_value *m3 = nodev(&md, TBC_OP_Mul, 2, (tbc_value *[]){dc, scalar(&md, TBC_DT_F32, 3.0)}, 1)->outputs[0];
	tbc_value *q16 = nodev(&md, TBC_OP_QuantizeLinear, 3, (tbc_value *[]){m3, scalar(&md, TBC_DT_F32, 0.01), scalar(&md, TBC_DT_I16, -5)}, 1)->outputs[0];
	/* per axis: a kernel of its own, the Relu after it alone */
	tbc_op *pa = nodev(&md, TBC_OP_DequantizeLinear, 2, (tbc_value *[]){a, vec(&md, TBC_DT_F32, 4, (double[]){0.1, 0.2, 0.3, 0.4})}, 1);
	set_int(pa, "axis", 1);
	tbc_value *pr = nodev(&md, TBC_OP_Relu, 1, &pa->outputs[0], 1)->outputs[0];
	g_fuse = 3;
	check_outputs(&md, 4, (tbc_value *[]){q1, dx, q16, pr}, 0);
	g_fuse = 0;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantize_per_tensor_every_integer_type),
		cmocka_unit_test(test_quantize_ties_round_to_even),
		cmocka_unit_test(test_quantize_per_axis_and_blocked),
		cmocka_unit_test(test_quantize_precisions_and_float_outputs),
		cmocka_unit_test(test_dequantize_types_axes_blocks),
		cmocka_unit_test(test_dequantize_float8_and_float4),
		cmocka_unit_test(test_dynamic_quantize),
		cmocka_unit_test(test_dynamic_quantize_range_lanes),
		cmocka_unit_test(test_matmul_integer),
		cmocka_unit_test(test_matmul_integer_full_rank_zero_point_is_refused),
		cmocka_unit_test(test_qlinear_matmul),
		cmocka_unit_test(test_conv_integer_pads_strides_groups),
		cmocka_unit_test(test_qlinear_conv_with_bias),
		cmocka_unit_test(test_qdq_per_tensor_fused_into_loops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
