/* Data-movement lowerings (codegen/lower/lower_data*.c) against the reference
 * interpreter: each test builds a small graph, runs it with tbc_interpret,
 * with the kernel IR evaluator and JIT-compiled for the host, and compares
 * all three (integers and moved bits exactly).  Helpers in
 * tests/unit/support/codegen_check.c. */
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

/* ---- More helpers ------------------------------------------------------------*/
static tbc_op *nodev(model *md, tbc_opcode code, int n_in, tbc_value *const *ins, int n_out) {
	return tbc_op_new(md->m->main, code, "n", n_in, ins, n_out);
}
static void set_int(tbc_op *op, const char *name, int64_t v) { tbc_op_add_attr(op, name, TBC_ATTR_INT)->i = v; }
static void set_str(tbc_op *op, const char *name, const char *s) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_STRING);
	a->s = s;
	a->s_len = strlen(s);
}
static tbc_value *ints(model *md, int n, const int64_t *v) {
	double d[16];
	for (int i = 0; i < n; i++) d[i] = (double)v[i];
	int64_t dims[1] = {n};
	return constant(md, TBC_DT_I64, 1, dims, d);
}
static tbc_value *scalar_i64(model *md, int64_t v) {
	double d = (double)v;
	return constant(md, TBC_DT_I64, 0, NULL, &d);
}
/* An index input of the given dims filled with values in [lo, hi). */
static tbc_value *index_input(model *md, const char *dims, int64_t sym, int lo, int hi) {
	return input_sym(md, TBC_DT_I64, dims, sym, lo, hi);
}

/* Every dtype the data ops move: the storage views make them exact. */
static const tbc_dtype all_dtypes[] = {TBC_DT_F32, TBC_DT_F64, TBC_DT_F16, TBC_DT_BF16, TBC_DT_I8, TBC_DT_U8,
				       TBC_DT_I16, TBC_DT_U16, TBC_DT_I32, TBC_DT_U32, TBC_DT_I64, TBC_DT_U64,
				       TBC_DT_BOOL, TBC_DT_F8E4M3FN, TBC_DT_F8E5M2, TBC_DT_I4, TBC_DT_U4};
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* ---- Transpose, Slice, Concat, Split ----------------------------------------------*/
static void test_transpose_every_dtype(void **state) {
	(void)state;
	for (size_t t = 0; t < N_DTYPES; t++) {
		model md = model_new();
		tbc_value *x = input(&md, all_dtypes[t], "2,3,4");
		tbc_op *o = node(&md, TBC_OP_Transpose, 1, x, NULL, NULL);
		static const int64_t perm[3] = {2, 0, 1};
		attr_ints(o, "perm", 3, perm);
		check(&md, o->outputs[0]);
	}
}

static void test_transpose_default_reverses_and_merges_contiguous_dims(void **state) {
	(void)state;
	model md = model_new();
	check(&md, op1(&md, TBC_OP_Transpose, input(&md, TBC_DT_F32, "3,1,5")));
	model m2 = model_new();
	tbc_op *o = node(&m2, TBC_OP_Transpose, 1, input_sym(&m2, TBC_DT_F32, "N,3,4,5", 2, -1, 1), NULL, NULL);
	static const int64_t perm[4] = {0, 3, 1, 2}; /* dims 1 and 2 stay adjacent */
	attr_ints(o, "perm", 4, perm);
	check(&m2, o->outputs[0]);
}

/* ---- The device's form -------------------------------------------------------------
 * Lowered for an OpenCL device, data movement is one flat parallel loop over
 * the output (a batch of 1 still fills the grid), and a Concat or Split is a
 * kernel per input or output (kir_kernel_launch_shape: no kernel on one
 * work-item).  The evaluator runs them against the interpreter. */
static bool no_single_kernel(const char *text) {
	/* every kernel's body is one loop (its first statement is a for) */
	for (const char *k = strstr(text, "kernel "); k; k = strstr(k + 1, "kernel ")) {
		const char *body = strstr(k, "\n  for %");
		const char *next = strstr(k + 1, "kernel ");
		if (!body || (next && body > next)) return false;
	}
	return true;
}

static void test_data_movement_on_a_device(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	static const int64_t perm[4] = {0, 2, 1, 3};
	model md = model_new();
	tbc_op *o = node(&md, TBC_OP_Transpose, 1, input_sym(&md, TBC_DT_F32, "N,3,4,5", 1, -1, 1), NULL, NULL);
	attr_ints(o, "perm", 4, perm);
	check(&md, o->outputs[0]);
	md = model_new();
	o = node(&md, TBC_OP_Transpose, 1, input_sym(&md, TBC_DT_F32, "N,3,4,5", 1, -1, 1), NULL, NULL);
	attr_ints(o, "perm", 4, perm);
	char *text = lowered_text(&md);
	assert_non_null(strstr(text, "for %f = 0 .. 60 * $N parallel {\n    %i:index = floordiv(%f, 60)"));
	assert_null(strstr(text, "sequential"));
	free(text);
	for (size_t t = 0; t < N_DTYPES; t++) {
		md = model_new();
		tbc_value *ins[3] = {input_sym(&md, all_dtypes[t], "N,2,3", 1, -4, 4),
				     input_sym(&md, all_dtypes[t], "N,0,3", 1, -4, 4),
				     input_sym(&md, all_dtypes[t], "N,4,3", 1, -4, 4)};
		o = nodev(&md, TBC_OP_Concat, 3, ins, 1);
		set_int(o, "axis", 1);
		check(&md, o->outputs[0]);
	}
	md = model_new();
	tbc_value *ins[2] = {input_sym(&md, TBC_DT_I32, "N,2,3", 1, -4, 4), input_sym(&md, TBC_DT_I32, "N,4,3", 1, -4, 4)};
	set_int(nodev(&md, TBC_OP_Concat, 2, ins, 1), "axis", 1);
	text = lowered_text(&md);
	assert_non_null(strstr(text, "_concat_p0("));
	assert_non_null(strstr(text, "_concat_p1("));
	assert_true(no_single_kernel(text));
	free(text);
	md = model_new();
	static const int64_t sizes[3] = {2, 0, 5};
	tbc_value *sin[2] = {input(&md, TBC_DT_F16, "4,7"), ints(&md, 3, sizes)};
	o = nodev(&md, TBC_OP_Split, 2, sin, 3);
	set_int(o, "axis", -1);
	tbc_value *outs[3] = {o->outputs[0], o->outputs[1], o->outputs[2]};
	check_outputs(&md, 3, outs, 0);
	/* A scatter stores at indices read from memory, which may repeat: its
	 * loop over the updates stays one work-item's (flattened, two items
	 * could store one element at once), after the copy's flat grid. */
	for (int axis = 0; axis < 2; axis++) {
		md = model_new();
		o = node(&md, TBC_OP_ScatterElements, 3, input(&md, TBC_DT_F32, "3,4"), index_input(&md, "2,3", 0, -3, 3),
			 input(&md, TBC_DT_F32, "2,3"));
		set_int(o, "axis", axis);
		check(&md, o->outputs[0]);
		md = model_new();
		o = node(&md, TBC_OP_ScatterElements, 3, input(&md, TBC_DT_F32, "3,4"), index_input(&md, "2,3", 0, -3, 3),
			 input(&md, TBC_DT_F32, "2,3"));
		set_int(o, "axis", axis);
		text = lowered_text(&md);
		assert_non_null(strstr(text, "_p1("));
		assert_non_null(strstr(text, " sequential {"));
		free(text);
	}
	g_target = NULL;
}

static void test_slice_negative_steps_and_clamped_bounds(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "5,6,7");
	static const int64_t st[3] = {-1, 1, -100}, en[3] = {-1000, 1000, 6}, ax[3] = {0, 1, 2}, sp[3] = {-2, 2, 3};
	tbc_value *ins[5] = {x, ints(&md, 3, st), ints(&md, 3, en), ints(&md, 3, ax), ints(&md, 3, sp)};
	check(&md, nodev(&md, TBC_OP_Slice, 5, ins, 1)->outputs[0]);
}

static void test_slice_keeps_symbolic_batch(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_I32, "N,8", 3, -50, 50);
	static const int64_t st[1] = {2}, en[1] = {-1}, ax[1] = {-1};
	tbc_value *ins[4] = {x, ints(&md, 1, st), ints(&md, 1, en), ints(&md, 1, ax)};
	check(&md, nodev(&md, TBC_OP_Slice, 4, ins, 1)->outputs[0]);
}

static void test_concat_axis1_symbolic_batch_every_dtype(void **state) {
	(void)state;
	for (size_t t = 0; t < N_DTYPES; t++) {
		model md = model_new();
		tbc_value *ins[3] = {input_sym(&md, all_dtypes[t], "N,2,3", 2, -4, 4),
				     input_sym(&md, all_dtypes[t], "N,0,3", 2, -4, 4),
				     input_sym(&md, all_dtypes[t], "N,4,3", 2, -4, 4)};
		tbc_op *o = nodev(&md, TBC_OP_Concat, 3, ins, 1);
		set_int(o, "axis", 1);
		check(&md, o->outputs[0]);
	}
}

static void test_split_sizes_and_equal_parts(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F16, "4,7");
	static const int64_t sizes[3] = {2, 0, 5};
	tbc_value *ins[2] = {x, ints(&md, 3, sizes)};
	tbc_op *o = nodev(&md, TBC_OP_Split, 2, ins, 3);
	set_int(o, "axis", -1);
	tbc_value *outs[3] = {o->outputs[0], o->outputs[1], o->outputs[2]};
	check_outputs(&md, 3, outs, 0);

	model m2 = model_new();
	tbc_op *p = nodev(&m2, TBC_OP_Split, 1, (tbc_value *[]){input_sym(&m2, TBC_DT_I64, "N,6", 3, -9, 9)}, 2);
	set_int(p, "axis", 1);
	set_int(p, "num_outputs", 2);
	tbc_value *o2[2] = {p->outputs[0], p->outputs[1]};
	check_outputs(&m2, 2, o2, 0);
}

/* ---- Expand, Tile, Pad, DepthToSpace ------------------------------------------------*/
static void test_expand_and_tile(void **state) {
	(void)state;
	model md = model_new();
	static const int64_t shape[3] = {2, 3, 4};
	check(&md, op2(&md, TBC_OP_Expand, input(&md, TBC_DT_BF16, "3,1"), ints(&md, 3, shape)));
	model m2 = model_new();
	static const int64_t reps[3] = {2, 1, 3};
	check(&m2, op2(&m2, TBC_OP_Tile, input(&m2, TBC_DT_U8, "2,3,2"), ints(&m2, 3, reps)));
	model m3 = model_new();
	static const int64_t reps1[2] = {1, 2};
	check(&m3, op2(&m3, TBC_OP_Tile, input_sym(&m3, TBC_DT_F32, "N,3", 4, -1, 1), ints(&m3, 2, reps1)));
}

static void test_pad_every_mode_with_crops(void **state) {
	(void)state;
	static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
	for (int mi = 0; mi < 4; mi++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "3,4,5");
		/* begin: 2, 0, -1; end: 1, 5, 2 (dim 1 padded past its own size). */
		static const int64_t pads[6] = {2, 0, -1, 1, 5, 2};
		double cv = 7.5;
		tbc_value *ins[3] = {x, ints(&md, 6, pads), constant(&md, TBC_DT_F32, 0, NULL, &cv)};
		tbc_op *o = nodev(&md, TBC_OP_Pad, 3, ins, 1);
		set_str(o, "mode", modes[mi]);
		check(&md, o->outputs[0]);
	}
}

static void test_pad_axes_one_element_dim_and_symbolic_batch(void **state) {
	(void)state;
	static const char *const modes[] = {"constant", "reflect", "edge", "wrap"};
	for (int mi = 0; mi < 4; mi++) {
		model md = model_new();
		tbc_value *x = input_sym(&md, TBC_DT_I16, "N,1,3", 2, -9, 9);
		static const int64_t pads[4] = {3, 2, 1, 4}, axes[2] = {1, -1};
		tbc_value *ins[4] = {x, ints(&md, 4, pads), NULL, ints(&md, 2, axes)};
		tbc_op *o = nodev(&md, TBC_OP_Pad, 4, ins, 1);
		set_str(o, "mode", modes[mi]);
		check(&md, o->outputs[0]);
	}
}

static void test_depth_to_space_and_back(void **state) {
	(void)state;
	for (int crd = 0; crd < 2; crd++) {
		model md = model_new();
		tbc_op *o = node(&md, TBC_OP_DepthToSpace, 1, input_sym(&md, TBC_DT_F32, "N,8,2,3", 2, -1, 1), NULL, NULL);
		set_int(o, "blocksize", 2);
		set_str(o, "mode", crd ? "CRD" : "DCR");
		check(&md, o->outputs[0]);
	}
	model md = model_new();
	tbc_op *o = node(&md, TBC_OP_SpaceToDepth, 1, input(&md, TBC_DT_I8, "2,3,4,6"), NULL, NULL);
	set_int(o, "blocksize", 2);
	check(&md, o->outputs[0]);
}

/* ---- Gather family ----------------------------------------------------------------------*/
static void test_gather_axes_negative_indices_every_dtype(void **state) {
	(void)state;
	for (size_t t = 0; t < N_DTYPES; t++)
		for (int axis = -3; axis < 3; axis++) {
			model md = model_new();
			tbc_value *x = input(&md, all_dtypes[t], "3,4,5");
			tbc_value *idx = index_input(&md, "2,3", 0, -3, 3);
			tbc_op *o = node(&md, TBC_OP_Gather, 2, x, idx, NULL);
			set_int(o, "axis", axis);
			check(&md, o->outputs[0]);
		}
}

static void test_gather_symbolic_batch_int32_indices(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "N,6", 3, -1, 1);
	tbc_value *idx = input_sym(&md, TBC_DT_I32, "N,2", 3, -6, 6);
	tbc_op *o = node(&md, TBC_OP_Gather, 2, x, idx, NULL);
	set_int(o, "axis", 1);
	check(&md, o->outputs[0]);
}

static void test_gather_elements_and_nd(void **state) {
	(void)state;
	for (int axis = 0; axis < 2; axis++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F64, "4,5");
		tbc_value *idx = index_input(&md, "3,2", 0, -4, 4);
		tbc_op *o = node(&md, TBC_OP_GatherElements, 2, x, idx, NULL);
		set_int(o, "axis", axis);
		check(&md, o->outputs[0]);
	}
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_I32, "2,3,4,5");
	tbc_value *idx = index_input(&md, "2,6,2", 0, -3, 3);
	tbc_op *o = node(&md, TBC_OP_GatherND, 2, x, idx, NULL);
	set_int(o, "batch_dims", 1);
	check(&md, o->outputs[0]);
	model m2 = model_new();
	check(&m2, op2(&m2, TBC_OP_GatherND, input(&m2, TBC_DT_BF16, "3,4"), index_input(&m2, "5,2", 0, -3, 3)));
}

/* An index past the axis (or before its front) fails the run, as the
 * interpreter reports it, in the evaluator and the compiled code alike
 * (docs/lower-data.md); the kernels also clamp it, for a device whose
 * failed check lets the kernel finish. */
static void test_gather_out_of_range_index_fails_the_run(void **state) {
	(void)state;
	static const int64_t bad[2][3] = {{7, 0, 1}, {0, -9, 1}};
	for (int b = 0; b < 2; b++) {
		model md = model_new();
		tbc_value *x = input(&md, TBC_DT_F32, "3,2");
		check_run_fails_as(&md, op2(&md, TBC_OP_Gather, x, ints(&md, 3, bad[b])), "out of range",
				   "an index is out of range for axis 0");
	}
}

static void test_scatter_nd_repeated_indices_apply_in_order(void **state) {
	(void)state;
	static const char *const reds[] = {"none", "add", "mul", "max", "min"};
	for (int r = 0; r < 5; r++) {
		model md = model_new();
		tbc_value *x = input(&md, r == 2 ? TBC_DT_I32 : TBC_DT_F32, "4,3");
		static const int64_t idx[4] = {1, 3, 1, -4};
		int64_t dims[2] = {4, 1};
		double dv[4];
		for (int i = 0; i < 4; i++) dv[i] = (double)idx[i];
		tbc_value *iv = constant(&md, TBC_DT_I64, 2, dims, dv);
		tbc_value *u = input(&md, r == 2 ? TBC_DT_I32 : TBC_DT_F32, "4,3");
		tbc_op *o = node(&md, TBC_OP_ScatterND, 3, x, iv, u);
		set_str(o, "reduction", reds[r]);
		check(&md, o->outputs[0]);
	}
}

static void test_scatter_elements_reductions_and_dtypes(void **state) {
	(void)state;
	static const char *const reds[] = {"none", "add", "mul", "max", "min"};
	static const tbc_dtype dts[] = {TBC_DT_F32, TBC_DT_I64, TBC_DT_U8, TBC_DT_BOOL, TBC_DT_F64};
	for (int r = 0; r < 5; r++)
		for (int t = 0; t < 5; t++)
			for (int axis = 0; axis < 2; axis++) {
				model md = model_new();
				tbc_value *x = input(&md, dts[t], "3,4");
				tbc_value *iv = index_input(&md, "2,3", 0, -3, 3);
				tbc_value *u = input(&md, dts[t], "2,3");
				tbc_op *o = node(&md, TBC_OP_ScatterElements, 3, x, iv, u);
				set_str(o, "reduction", reds[r]);
				set_int(o, "axis", axis);
				check(&md, o->outputs[0]);
			}
	model md = model_new();
	tbc_op *o = node(&md, TBC_OP_ScatterElements, 3, input(&md, TBC_DT_F16, "3"), index_input(&md, "2", 0, 0, 3),
			 input(&md, TBC_DT_F16, "2"));
	check(&md, o->outputs[0]);
}

/* ---- Generators ---------------------------------------------------------------------------*/
static void test_onehot_axes_and_float_indices(void **state) {
	(void)state;
	for (int axis = -2; axis < 2; axis++) {
		model md = model_new();
		tbc_value *idx = input_sym(&md, axis == 0 ? TBC_DT_F32 : TBC_DT_I32, "3,N", 2, -6, 7);
		double depth = 5, vals[2] = {-1, 4};
		int64_t two[1] = {2};
		tbc_value *ins[3] = {idx, constant(&md, TBC_DT_I64, 0, NULL, &depth), constant(&md, TBC_DT_F16, 1, two, vals)};
		tbc_op *o = nodev(&md, TBC_OP_OneHot, 3, ins, 1);
		set_int(o, "axis", axis);
		check(&md, o->outputs[0]);
	}
}

static void test_shape_and_size_static_and_symbolic(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input_sym(&md, TBC_DT_F32, "2,N,4,M", 3, -1, 1);
	tbc_op *s = node(&md, TBC_OP_Shape, 1, x, NULL, NULL);
	set_int(s, "start", 1);
	tbc_value *outs[3] = {s->outputs[0], op1(&md, TBC_OP_Size, x), op1(&md, TBC_OP_Shape, x)};
	check_outputs(&md, 3, outs, 0);
}

static void test_constant_of_shape_range_eyelike_trilu(void **state) {
	(void)state;
	model md = model_new();
	static const int64_t shape[2] = {3, 4};
	tbc_value *c = op1(&md, TBC_OP_ConstantOfShape, ints(&md, 2, shape));
	double start = 1.5, limit = 9, delta = 0.75;
	tbc_value *rin[3] = {constant(&md, TBC_DT_F32, 0, NULL, &start), constant(&md, TBC_DT_F32, 0, NULL, &limit),
			     constant(&md, TBC_DT_F32, 0, NULL, &delta)};
	tbc_value *rng = nodev(&md, TBC_OP_Range, 3, rin, 1)->outputs[0];
	tbc_value *irin[3] = {scalar_i64(&md, 10), scalar_i64(&md, -3), scalar_i64(&md, -4)};
	tbc_value *irng = nodev(&md, TBC_OP_Range, 3, irin, 1)->outputs[0];
	tbc_op *eye = node(&md, TBC_OP_EyeLike, 1, input(&md, TBC_DT_I32, "4,6"), NULL, NULL);
	set_int(eye, "k", 2);
	set_int(eye, "dtype", TBC_DT_BF16);
	tbc_value *outs[4] = {c, rng, irng, eye->outputs[0]};
	check_outputs(&md, 4, outs, 0);
	for (int upper = 0; upper < 2; upper++)
		for (int kk = -2; kk <= 3; kk += 5) {
			model m2 = model_new();
			tbc_op *t = node(&m2, TBC_OP_Trilu, 2, input_sym(&m2, TBC_DT_F16, "N,4,5", 2, -3, 3), scalar_i64(&m2, kk),
					 NULL);
			set_int(t, "upper", upper);
			check(&m2, t->outputs[0]);
		}
}

/* starts given while running: the shape kernel of codegen/lower/data*.c
 * (tests/unit/test_codegen_dyn_data.c has the rest). */
static void test_non_constant_slice(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "5");
	tbc_value *st = index_input(&md, "1", 0, 0, 2);
	static const int64_t en[1] = {4};
	tbc_value *ins[3] = {x, st, ints(&md, 1, en)};
	check(&md, nodev(&md, TBC_OP_Slice, 3, ins, 1)->outputs[0]);
}

/* ---- ReverseSequence / TensorScatter --------------------------------------------------------*/
static void test_reverse_sequence_both_layouts_every_dtype(void **state) {
	(void)state;
	for (size_t t = 0; t < sizeof all_dtypes / sizeof *all_dtypes; t++)
		for (int ta = 0; ta < 2; ta++) {
			model md = model_new();
			/* [T, B, 3] with time_axis 0, [B, T, 3] with time_axis 1; T = 5, B symbolic (4). */
			tbc_value *x = input_sym(&md, all_dtypes[t], ta ? "N,5,3" : "5,N,3", 4, -3, 3);
			tbc_value *lens = index_input(&md, "N", 4, 0, 6); /* lengths in [0, 5] */
			tbc_op *o = node(&md, TBC_OP_ReverseSequence, 2, x, lens, NULL);
			set_int(o, "time_axis", ta);
			set_int(o, "batch_axis", 1 - ta);
			check(&md, o->outputs[0]);
		}
}

/* A length past the time steps fails the run, as in the interpreter. */
static void test_reverse_sequence_bad_length_fails_the_run(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *x = input(&md, TBC_DT_F32, "4,3");
	static const int64_t lens[3] = {1, 5, 2};
	tbc_op *o = node(&md, TBC_OP_ReverseSequence, 2, x, ints(&md, 3, lens), NULL);
	set_int(o, "time_axis", 0);
	set_int(o, "batch_axis", 1);
	check_run_fails(&md, o->outputs[0]);
}

static void test_tensor_scatter_linear_and_circular(void **state) {
	(void)state;
	for (int circ = 0; circ < 2; circ++)
		for (int with_idx = 0; with_idx < 2; with_idx++) {
			model md = model_new();
			/* cache [B, 2, 6, 3], update [B, 2, 3, 3] on axis 2 (-2). */
			tbc_value *c = input_sym(&md, circ ? TBC_DT_F16 : TBC_DT_F32, "N,2,6,3", 3, -3, 3);
			tbc_value *u = input_sym(&md, circ ? TBC_DT_F16 : TBC_DT_F32, "N,2,3,3", 3, -3, 3);
			tbc_value *w = with_idx ? index_input(&md, "N", 3, circ ? 0 : 0, circ ? 6 : 4) : NULL;
			tbc_op *o = node(&md, TBC_OP_TensorScatter, with_idx ? 3 : 2, c, u, w);
			if (circ) set_str(o, "mode", "circular");
			check(&md, o->outputs[0]);
		}
	/* 3-D, axis 1, one-step update (decode). */
	model md = model_new();
	tbc_value *c = input(&md, TBC_DT_I64, "3,4,5"), *u = input(&md, TBC_DT_I64, "3,1,5");
	static const int64_t wi[3] = {0, 3, 2};
	tbc_op *o = node(&md, TBC_OP_TensorScatter, 3, c, u, ints(&md, 3, wi));
	set_int(o, "axis", 1);
	check(&md, o->outputs[0]);
}

static void test_tensor_scatter_write_past_the_end_fails_the_run(void **state) {
	(void)state;
	model md = model_new();
	tbc_value *c = input(&md, TBC_DT_F32, "2,4,5"), *u = input(&md, TBC_DT_F32, "2,2,5");
	static const int64_t wi[2] = {0, 3};
	tbc_op *o = node(&md, TBC_OP_TensorScatter, 3, c, u, ints(&md, 2, wi));
	set_int(o, "axis", 1);
	check_run_fails(&md, o->outputs[0]);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transpose_every_dtype),
		cmocka_unit_test(test_transpose_default_reverses_and_merges_contiguous_dims),
		cmocka_unit_test(test_data_movement_on_a_device),
		cmocka_unit_test(test_slice_negative_steps_and_clamped_bounds),
		cmocka_unit_test(test_slice_keeps_symbolic_batch),
		cmocka_unit_test(test_concat_axis1_symbolic_batch_every_dtype),
		cmocka_unit_test(test_split_sizes_and_equal_parts),
		cmocka_unit_test(test_expand_and_tile),
		cmocka_unit_test(test_pad_every_mode_with_crops),
		cmocka_unit_test(test_pad_axes_one_element_dim_and_symbolic_batch),
		cmocka_unit_test(test_depth_to_space_and_back),
		cmocka_unit_test(test_gather_axes_negative_indices_every_dtype),
		cmocka_unit_test(test_gather_symbolic_batch_int32_indices),
		cmocka_unit_test(test_gather_elements_and_nd),
		cmocka_unit_test(test_gather_out_of_range_index_fails_the_run),
		cmocka_unit_test(test_scatter_nd_repeated_indices_apply_in_order),
		cmocka_unit_test(test_scatter_elements_reductions_and_dtypes),
		cmocka_unit_test(test_onehot_axes_and_float_indices),
		cmocka_unit_test(test_shape_and_size_static_and_symbolic),
		cmocka_unit_test(test_constant_of_shape_range_eyelike_trilu),
		cmocka_unit_test(test_non_constant_slice),
		cmocka_unit_test(test_reverse_sequence_both_layouts_every_dtype),
		cmocka_unit_test(test_reverse_sequence_bad_length_fails_the_run),
		cmocka_unit_test(test_tensor_scatter_linear_and_circular),
		cmocka_unit_test(test_tensor_scatter_write_past_the_end_fails_the_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
