/* The data-movement family, case by case as the ONNX spec states it: each
 * test builds one op over graph inputs (or constants, where a shape depends
 * on values), runs its shape rule and its kernel, and checks the inferred
 * type and the values against the spec's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "ir/kernels/kernels.h"

/* ---- A one-op harness ----------------------------------------------------*/
#define MAX_IO 8
typedef struct one_op {
	tbc_module *m;
	tbc_diags *d;
	tbc_op *op;
	tbc_value *vals[MAX_IO];
	const tbc_tensor *in[MAX_IO];
	tbc_tensor *out[MAX_IO];
	int n_in, n_out;
} one_op;

static tbc_tensor *tensor(tbc_dtype dt, int rank, const int64_t *dims, const double *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_f64(t, i, vals[i]);
	return t;
}
static tbc_tensor *itensor(tbc_dtype dt, int rank, const int64_t *dims, const int64_t *vals) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_i64(t, i, vals[i]);
	return t;
}
static tbc_tensor *ivec(tbc_dtype dt, int64_t n, const int64_t *vals) { return itensor(dt, 1, &n, vals); }
static tbc_tensor *iota(tbc_dtype dt, int rank, const int64_t *dims) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	for (int64_t i = 0; i < t->numel; i++) tbc_set_i64(t, i, i);
	return t;
}

static one_op begin(void) {
	one_op o = {.m = tbc_module_new("test"), .d = tbc_diags_create()};
	return o;
}
/* A graph input typed like t (sym: names for dims, NULL entries static). */
static void input(one_op *o, tbc_tensor *t, const char *const *sym) {
	tbc_type ty;
	tbc_type_set(&ty, t->dtype, t->rank, t->dims);
	for (int d = 0; sym && d < t->rank; d++)
		if (sym[d]) ty.dims[d] = (tbc_dim){-1, sym[d]};
	o->vals[o->n_in] = tbc_graph_add_input(o->m->main, NULL, &ty);
	o->in[o->n_in++] = t;
}
/* A constant input: the shape rule sees its value. */
static void constant(one_op *o, tbc_tensor *t) {
	o->vals[o->n_in] = tbc_graph_add_const(o->m->main, NULL, t);
	o->in[o->n_in++] = t;
}
static void omitted(one_op *o) {
	o->vals[o->n_in] = NULL;
	o->in[o->n_in++] = NULL;
}
static void op(one_op *o, tbc_opcode code, int n_out) {
	o->n_out = n_out;
	o->op = tbc_op_new(o->m->main, code, "n", o->n_in, o->vals, n_out);
}
static void attr_i(one_op *o, const char *name, int64_t v) { tbc_op_add_attr(o->op, name, TBC_ATTR_INT)->i = v; }
static void attr_ints(one_op *o, const char *name, int n, const int64_t *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_INTS);
	a->n = n;
	a->ints = tbc_arena_alloc(o->m->arena, (size_t)n * sizeof *v);
	memcpy(a->ints, v, (size_t)n * sizeof *v);
}
static void attr_s(one_op *o, const char *name, const char *v) {
	tbc_attr *a = tbc_op_add_attr(o->op, name, TBC_ATTR_STRING);
	a->s = v;
	a->s_len = strlen(v);
}

static bool infer(one_op *o) {
	tbc_infer cx = {.module = o->m, .diags = o->d};
	return tbc_infer_op(&cx, o->op);
}
/* Shape rule then kernel; every result must agree with its inferred type.
 * False when either reports an error. */
static bool run(one_op *o) {
	if (!infer(o)) return false;
	tbc_interp ip = {.module = o->m, .diags = o->d};
	if (tbc_ops[o->op->code].interp(&ip, o->op, o->in, o->out) != 0) return false;
	for (int i = 0; i < o->n_out; i++) {
		const tbc_type *ty = &o->op->outputs[i]->type;
		assert_int_equal(o->out[i]->dtype, ty->dtype);
		if (ty->rank < 0) continue;
		assert_int_equal(o->out[i]->rank, ty->rank);
		for (int d = 0; d < ty->rank; d++)
			if (!ty->dims[d].sym) assert_int_equal(o->out[i]->dims[d], ty->dims[d].size);
	}
	return true;
}
static void done(one_op *o) {
	for (int i = 0; i < o->n_in; i++) tbc_tensor_destroy((tbc_tensor *)o->in[i]);
	for (int i = 0; i < o->n_out; i++) tbc_tensor_destroy(o->out[i]);
	tbc_diags_destroy(o->d);
	tbc_module_destroy(o->m);
}
static const tbc_type *out_type(one_op *o, int i) { return &o->op->outputs[i]->type; }
static void expect_dims(const tbc_tensor *t, int rank, const int64_t *dims) {
	assert_int_equal(t->rank, rank);
	for (int d = 0; d < rank; d++) assert_int_equal(t->dims[d], dims[d]);
}
static void expect_i(const tbc_tensor *t, int64_t n, const int64_t *want) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_int_equal(tbc_get_i64(t, i), want[i]);
}
static void expect_f(const tbc_tensor *t, int64_t n, const double *want) {
	assert_int_equal(t->numel, n);
	for (int64_t i = 0; i < n; i++) assert_float_equal(tbc_get_f64(t, i), want[i], 1e-9);
}
static bool error_mentions(one_op *o, const char *text) {
	for (size_t i = 0; i < tbc_diags_count(o->d); i++)
		if (strstr(tbc_diags_get(o->d, i)->message, text)) return true;
	return false;
}

/* ---- Reshape ---------------------------------------------------------------*/
static void reshape_zero_and_negative_dim_is_static_with_a_constant_shape(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 3, (int64_t[]){2, 3, 4}), NULL);
	constant(&o, ivec(TBC_DT_I64, 4, (int64_t[]){2, 0, 1, -1}));
	op(&o, TBC_OP_Reshape, 1);
	assert_true(run(&o));
	assert_true(tbc_type_is_static(out_type(&o, 0)));
	expect_dims(o.out[0], 4, (int64_t[]){2, 3, 1, 4});
	done(&o);
}

static void reshape_keeps_a_symbolic_batch_through_zero_and_minus_one(void **s) {
	(void)s; /* [N,3,4] reshaped by [0,-1] is [N,12] */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 3, (int64_t[]){5, 3, 4}), (const char *[]){"N", NULL, NULL});
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){0, -1}));
	op(&o, TBC_OP_Reshape, 1);
	assert_true(run(&o));
	assert_string_equal(out_type(&o, 0)->dims[0].sym, "N");
	assert_null(out_type(&o, 0)->dims[1].sym);
	assert_int_equal(out_type(&o, 0)->dims[1].size, 12);
	done(&o);
}

static void reshape_with_a_runtime_shape_has_symbolic_dims_of_the_shape_length(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){2, 6}), NULL);
	input(&o, ivec(TBC_DT_I64, 3, (int64_t[]){3, -1, 2}), NULL);
	op(&o, TBC_OP_Reshape, 1);
	assert_true(run(&o));
	assert_int_equal(out_type(&o, 0)->rank, 3);
	for (int d = 0; d < 3; d++) assert_non_null(out_type(&o, 0)->dims[d].sym);
	expect_dims(o.out[0], 3, (int64_t[]){3, 2, 2});
	done(&o);
}

static void reshape_allowzero_keeps_a_zero_dim(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 3, (int64_t[]){0, 3, 4}), NULL);
	constant(&o, ivec(TBC_DT_I64, 3, (int64_t[]){3, 4, 0}));
	op(&o, TBC_OP_Reshape, 1);
	attr_i(&o, "allowzero", 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 3, (int64_t[]){3, 4, 0});
	done(&o);
}

static void reshape_of_wrong_element_count_is_an_error(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 1, (int64_t[]){6}), NULL);
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){4, 2}));
	op(&o, TBC_OP_Reshape, 1);
	assert_false(infer(&o));
	done(&o);
}

/* ---- Squeeze / Unsqueeze / Flatten ------------------------------------------*/
static void squeeze_without_axes_of_a_symbolic_dim_has_unknown_rank(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 3, (int64_t[]){1, 1, 4}), (const char *[]){NULL, "B", NULL});
	omitted(&o);
	op(&o, TBC_OP_Squeeze, 1);
	assert_true(run(&o));
	assert_int_equal(out_type(&o, 0)->rank, -1);
	expect_dims(o.out[0], 1, (int64_t[]){4});
	done(&o);
}

static void unsqueeze_unsorted_axes(void **s) {
	(void)s; /* [3,4,5] with axes [5,4,2] -> [3,4,1,5,1,1] */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 3, (int64_t[]){3, 4, 5}), NULL);
	constant(&o, ivec(TBC_DT_I64, 3, (int64_t[]){5, 4, 2}));
	op(&o, TBC_OP_Unsqueeze, 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 6, (int64_t[]){3, 4, 1, 5, 1, 1});
	done(&o);
}

static void unsqueeze_repeated_axis_is_an_error(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 1, (int64_t[]){3}), NULL);
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){0, -3})); /* -3 of the rank-3 result is 0 */
	op(&o, TBC_OP_Unsqueeze, 1);
	assert_false(infer(&o));
	assert_true(error_mentions(&o, "repeated"));
	done(&o);
}

static void flatten_axis_zero_gives_one_row(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 3, (int64_t[]){2, 3, 4}), (const char *[]){"N", NULL, NULL});
	op(&o, TBC_OP_Flatten, 1);
	attr_i(&o, "axis", 0);
	assert_true(run(&o));
	assert_int_equal(out_type(&o, 0)->dims[0].size, 1);
	assert_non_null(out_type(&o, 0)->dims[1].sym);
	expect_dims(o.out[0], 2, (int64_t[]){1, 24});
	done(&o);
}

/* ---- Shape / Size / ConstantOfShape -------------------------------------------*/
static void shape_start_negative_one(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 3, (int64_t[]){3, 4, 5}), NULL);
	op(&o, TBC_OP_Shape, 1);
	attr_i(&o, "start", -1);
	assert_true(run(&o));
	expect_i(o.out[0], 1, (int64_t[]){5});
	done(&o);
}

static void shape_of_a_symbolic_input_is_i64_of_the_rank(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){7, 2}), (const char *[]){"N", NULL});
	op(&o, TBC_OP_Shape, 1);
	assert_true(run(&o));
	assert_int_equal(out_type(&o, 0)->dtype, TBC_DT_I64);
	assert_int_equal(out_type(&o, 0)->dims[0].size, 2);
	expect_i(o.out[0], 2, (int64_t[]){7, 2});
	done(&o);
}

static void constant_of_shape_int32_value(void **s) {
	(void)s;
	one_op o = begin();
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){2, 3}));
	op(&o, TBC_OP_ConstantOfShape, 1);
	tbc_attr *a = tbc_op_add_attr(o.op, "value", TBC_ATTR_TENSOR);
	tbc_tensor *v = ivec(TBC_DT_I32, 1, (int64_t[]){7});
	a->tensors = tbc_arena_alloc(o.m->arena, sizeof *a->tensors);
	a->tensors[0] = tbc_tensor_copy_to_arena(o.m->arena, v);
	tbc_tensor_destroy(v);
	assert_true(run(&o));
	assert_int_equal(o.out[0]->dtype, TBC_DT_I32);
	expect_i(o.out[0], 6, (int64_t[]){7, 7, 7, 7, 7, 7});
	done(&o);
}

/* ---- Transpose / Concat / Split ---------------------------------------------*/
static void transpose_moves_f16_bits_unchanged(void **s) {
	(void)s;
	one_op o = begin();
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F16, 2, (int64_t[]){2, 3});
	uint16_t bits[6] = {0x7e01, 0x3c00, 0xfc00, 0x0001, 0x8000, 0x7bff}; /* a NaN payload, 1, -inf, ... */
	memcpy(x->data, bits, sizeof bits);
	input(&o, x, NULL);
	op(&o, TBC_OP_Transpose, 1);
	assert_true(run(&o));
	uint16_t want[6] = {0x7e01, 0x0001, 0x3c00, 0x8000, 0xfc00, 0x7bff};
	assert_memory_equal(o.out[0]->data, want, sizeof want);
	done(&o);
}

static void transpose_bad_perm_is_an_error(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){2, 3}), NULL);
	op(&o, TBC_OP_Transpose, 1);
	attr_ints(&o, "perm", 2, (int64_t[]){0, 0});
	assert_false(infer(&o));
	done(&o);
}

static void concat_axis_1_of_a_symbolic_batch(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_I8, 2, (int64_t[]){2, 1}), (const char *[]){"N", NULL});
	input(&o, iota(TBC_DT_I8, 2, (int64_t[]){2, 2}), (const char *[]){"N", NULL});
	op(&o, TBC_OP_Concat, 1);
	attr_i(&o, "axis", -1);
	assert_true(run(&o));
	assert_string_equal(out_type(&o, 0)->dims[0].sym, "N");
	assert_int_equal(out_type(&o, 0)->dims[1].size, 3);
	expect_i(o.out[0], 6, (int64_t[]){0, 0, 1, 1, 2, 3});
	done(&o);
}

static void split_num_outputs_makes_the_last_chunk_smaller(void **s) {
	(void)s; /* opset 18: 7 into 3 is 3, 3, 1 */
	one_op o = begin();
	input(&o, iota(TBC_DT_I64, 1, (int64_t[]){7}), NULL);
	op(&o, TBC_OP_Split, 3);
	attr_i(&o, "num_outputs", 3);
	assert_true(run(&o));
	expect_i(o.out[0], 3, (int64_t[]){0, 1, 2});
	expect_i(o.out[1], 3, (int64_t[]){3, 4, 5});
	expect_i(o.out[2], 1, (int64_t[]){6});
	done(&o);
}

static void split_variable_parts_from_the_split_input(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){2, 6}), NULL);
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){2, 4}));
	op(&o, TBC_OP_Split, 2);
	attr_i(&o, "axis", 1);
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){0, 1, 6, 7});
	expect_f(o.out[1], 8, (double[]){2, 3, 4, 5, 8, 9, 10, 11});
	done(&o);
}

/* ---- Slice -----------------------------------------------------------------*/
static void slice_negative_steps_walk_backwards(void **s) {
	(void)s; /* x[::-1][::2] on [0..9]: starts -1, ends INT64_MIN, step -2 */
	one_op o = begin();
	input(&o, iota(TBC_DT_I32, 1, (int64_t[]){10}), NULL);
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){-1}));
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){INT64_MIN}));
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){0}));
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){-2}));
	op(&o, TBC_OP_Slice, 1);
	assert_true(run(&o));
	expect_i(o.out[0], 5, (int64_t[]){9, 7, 5, 3, 1});
	done(&o);
}

static void slice_end_out_of_bounds_clamps(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){2, 5}), NULL);
	constant(&o, ivec(TBC_DT_I32, 1, (int64_t[]){3}));
	constant(&o, ivec(TBC_DT_I32, 1, (int64_t[]){1000}));
	constant(&o, ivec(TBC_DT_I32, 1, (int64_t[]){1}));
	op(&o, TBC_OP_Slice, 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 2, (int64_t[]){2, 2});
	expect_f(o.out[0], 4, (double[]){3, 4, 8, 9});
	done(&o);
}

static void slice_of_a_whole_symbolic_dim_keeps_it(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){3, 5}), (const char *[]){"N", NULL});
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){0, 1}));
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){INT64_MAX, 3}));
	op(&o, TBC_OP_Slice, 1);
	assert_true(run(&o));
	assert_string_equal(out_type(&o, 0)->dims[0].sym, "N");
	assert_int_equal(out_type(&o, 0)->dims[1].size, 2);
	done(&o);
}

/* ---- Gather family ---------------------------------------------------------*/
static void gather_negative_indices_count_from_the_end(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_U8, 1, (int64_t[]){10}), NULL);
	input(&o, ivec(TBC_DT_I32, 3, (int64_t[]){0, -9, -10}), NULL);
	op(&o, TBC_OP_Gather, 1);
	assert_true(run(&o));
	expect_i(o.out[0], 3, (int64_t[]){0, 1, 0});
	done(&o);
}

static void gather_index_out_of_range_is_a_runtime_error(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 1, (int64_t[]){3}), NULL);
	input(&o, ivec(TBC_DT_I64, 1, (int64_t[]){3}), NULL);
	op(&o, TBC_OP_Gather, 1);
	assert_false(run(&o));
	assert_true(error_mentions(&o, "out of range"));
	done(&o);
}

static void gather_elements_axis_1(void **s) {
	(void)s; /* data [[1,2],[3,4]], indices [[0,0],[1,0]] -> [[1,1],[4,3]] */
	one_op o = begin();
	input(&o, itensor(TBC_DT_I64, 2, (int64_t[]){2, 2}, (int64_t[]){1, 2, 3, 4}), NULL);
	input(&o, itensor(TBC_DT_I64, 2, (int64_t[]){2, 2}, (int64_t[]){0, 0, 1, 0}), NULL);
	op(&o, TBC_OP_GatherElements, 1);
	attr_i(&o, "axis", 1);
	assert_true(run(&o));
	expect_i(o.out[0], 4, (int64_t[]){1, 1, 4, 3});
	done(&o);
}

static void gathernd_batch_dims_1(void **s) {
	(void)s; /* data [[[0,1],[2,3]],[[4,5],[6,7]]], indices [[1],[0]] -> [[2,3],[4,5]] */
	one_op o = begin();
	input(&o, iota(TBC_DT_I32, 3, (int64_t[]){2, 2, 2}), NULL);
	input(&o, itensor(TBC_DT_I64, 2, (int64_t[]){2, 1}, (int64_t[]){1, 0}), NULL);
	op(&o, TBC_OP_GatherND, 1);
	attr_i(&o, "batch_dims", 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 2, (int64_t[]){2, 2});
	expect_i(o.out[0], 4, (int64_t[]){2, 3, 4, 5});
	done(&o);
}

/* ---- Scatter family --------------------------------------------------------*/
static void scatternd_add_of_int64_is_exact(void **s) {
	(void)s; /* 2^53 + 1 is not a double: the sum must not go through one */
	one_op o = begin();
	input(&o, ivec(TBC_DT_I64, 2, (int64_t[]){(INT64_C(1) << 53), 5}), NULL);
	input(&o, itensor(TBC_DT_I64, 2, (int64_t[]){2, 1}, (int64_t[]){0, 0}), NULL);
	input(&o, ivec(TBC_DT_I64, 2, (int64_t[]){1, 2}), NULL);
	op(&o, TBC_OP_ScatterND, 1);
	attr_s(&o, "reduction", "add");
	assert_true(run(&o));
	expect_i(o.out[0], 2, (int64_t[]){(INT64_C(1) << 53) + 3, 5});
	done(&o);
}

static void scatter_elements_reduction_max_of_uint64(void **s) {
	(void)s;
	one_op o = begin();
	tbc_tensor *x = tbc_tensor_create(TBC_DT_U64, 1, (int64_t[]){3});
	tbc_tensor *u = tbc_tensor_create(TBC_DT_U64, 1, (int64_t[]){2});
	((uint64_t *)x->data)[0] = UINT64_MAX - 1;
	((uint64_t *)u->data)[0] = UINT64_MAX;
	((uint64_t *)u->data)[1] = 7;
	input(&o, x, NULL);
	input(&o, ivec(TBC_DT_I64, 2, (int64_t[]){0, -1}), NULL);
	input(&o, u, NULL);
	op(&o, TBC_OP_ScatterElements, 1);
	attr_s(&o, "reduction", "max");
	assert_true(run(&o));
	assert_true(((uint64_t *)o.out[0]->data)[0] == UINT64_MAX);
	assert_true(((uint64_t *)o.out[0]->data)[2] == 7);
	done(&o);
}

static void tensor_scatter_circular_wraps_around_the_cache(void **s) {
	(void)s; /* cache [1,1,4,1], update of 2 steps written at 3: positions 3 and 0 */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 4, (int64_t[]){1, 1, 4, 1}, (double[]){0, 0, 0, 0}), NULL);
	input(&o, tensor(TBC_DT_F32, 4, (int64_t[]){1, 1, 2, 1}, (double[]){8, 9}), NULL);
	input(&o, ivec(TBC_DT_I64, 1, (int64_t[]){3}), NULL);
	op(&o, TBC_OP_TensorScatter, 1);
	attr_s(&o, "mode", "circular");
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){9, 0, 0, 8});
	done(&o);
}

static void onehot_out_of_range_index_is_all_off(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, ivec(TBC_DT_I64, 3, (int64_t[]){1, -1, 5}), NULL);
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){3}));
	input(&o, tensor(TBC_DT_F32, 1, (int64_t[]){2}, (double[]){0, 1}), NULL);
	op(&o, TBC_OP_OneHot, 1);
	assert_true(run(&o));
	assert_true(tbc_type_is_static(out_type(&o, 0)));
	expect_f(o.out[0], 9, (double[]){0, 1, 0, 0, 0, 1, 0, 0, 0});
	done(&o);
}

/* ---- Pad / CenterCropPad ----------------------------------------------------*/
static tbc_tensor *pad_1d(one_op *o, const char *mode, int64_t before, int64_t after) {
	input(o, tensor(TBC_DT_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3}), NULL);
	constant(o, ivec(TBC_DT_I64, 2, (int64_t[]){before, after}));
	op(o, TBC_OP_Pad, 1);
	attr_s(o, "mode", mode);
	assert_true(run(o));
	return o->out[0];
}

static void pad_modes_on_1_2_3(void **s) {
	(void)s;
	one_op a = begin(), b = begin(), c = begin(), d = begin();
	expect_f(pad_1d(&a, "reflect", 2, 3), 8, (double[]){3, 2, 1, 2, 3, 2, 1, 2});
	expect_f(pad_1d(&b, "edge", 2, 1), 6, (double[]){1, 1, 1, 2, 3, 3});
	expect_f(pad_1d(&c, "wrap", 2, 2), 7, (double[]){2, 3, 1, 2, 3, 1, 2});
	expect_f(pad_1d(&d, "constant", -1, 1), 3, (double[]){2, 3, 0});
	done(&a);
	done(&b);
	done(&c);
	done(&d);
}

static void pad_constant_value_and_axes(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_I32, 2, (int64_t[]){2, 2}), NULL);
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){1, 0}));
	input(&o, itensor(TBC_DT_I32, 0, NULL, (int64_t[]){-1}), NULL);
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){-1}));
	op(&o, TBC_OP_Pad, 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 2, (int64_t[]){2, 3});
	expect_i(o.out[0], 6, (int64_t[]){-1, 0, 1, -1, 2, 3});
	done(&o);
}

static void center_crop_pad_crops_one_axis_and_pads_another(void **s) {
	(void)s; /* [4,2] to [2,4]: rows 1..2, columns placed at 1 */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){4, 2}), NULL);
	constant(&o, ivec(TBC_DT_I64, 2, (int64_t[]){2, 4}));
	op(&o, TBC_OP_CenterCropPad, 1);
	assert_true(run(&o));
	expect_f(o.out[0], 8, (double[]){0, 2, 3, 0, 0, 4, 5, 0});
	done(&o);
}

/* ---- Tile / Expand / DepthToSpace -------------------------------------------*/
static void tile_repeats_each_dim(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_BOOL, 1, (int64_t[]){2}), NULL);
	constant(&o, ivec(TBC_DT_I64, 1, (int64_t[]){3}));
	op(&o, TBC_OP_Tile, 1);
	assert_true(run(&o));
	expect_i(o.out[0], 6, (int64_t[]){0, 1, 0, 1, 0, 1});
	done(&o);
}

static void expand_dim_changed_broadcasts_both_ways(void **s) {
	(void)s; /* [3,1] expanded by [2,1,6] is [2,3,6] */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){3, 1}), NULL);
	constant(&o, ivec(TBC_DT_I64, 3, (int64_t[]){2, 1, 6}));
	op(&o, TBC_OP_Expand, 1);
	assert_true(run(&o));
	expect_dims(o.out[0], 3, (int64_t[]){2, 3, 6});
	assert_float_equal(tbc_get_f64(o.out[0], 6 * 2 + 5), 2, 0);
	done(&o);
}

static void depth_to_space_crd_mode(void **s) {
	(void)s; /* [1,4,1,1] with blocksize 2: CRD gives [[0,1],[2,3]] */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 4, (int64_t[]){1, 4, 1, 1}), NULL);
	op(&o, TBC_OP_DepthToSpace, 1);
	attr_i(&o, "blocksize", 2);
	attr_s(&o, "mode", "CRD");
	assert_true(run(&o));
	expect_dims(o.out[0], 4, (int64_t[]){1, 1, 2, 2});
	expect_f(o.out[0], 4, (double[]){0, 1, 2, 3});
	done(&o);
}

/* ---- Compress / NonZero / Unique ---------------------------------------------*/
static void compress_without_axis_flattens(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){2, 2}), NULL);
	input(&o, ivec(TBC_DT_BOOL, 3, (int64_t[]){0, 1, 1}), NULL);
	op(&o, TBC_OP_Compress, 1);
	assert_true(run(&o));
	expect_f(o.out[0], 2, (double[]){1, 2});
	done(&o);
}

static void nonzero_lists_coordinates_column_by_column(void **s) {
	(void)s; /* [[1,0],[1,1]] -> [[0,1,1],[0,0,1]] */
	one_op o = begin();
	input(&o, itensor(TBC_DT_I8, 2, (int64_t[]){2, 2}, (int64_t[]){1, 0, 1, 1}), NULL);
	op(&o, TBC_OP_NonZero, 1);
	assert_true(run(&o));
	assert_non_null(out_type(&o, 0)->dims[1].sym);
	expect_i(o.out[0], 6, (int64_t[]){0, 1, 1, 0, 0, 1});
	done(&o);
}

static void unique_not_sorted_without_axis(void **s) {
	(void)s; /* [2,1,1,3,4,3]: y [2,1,3,4], indices [0,1,3,4], inverse [0,1,1,2,3,2], counts [1,2,2,1] */
	one_op o = begin();
	input(&o, tensor(TBC_DT_F32, 1, (int64_t[]){6}, (double[]){2, 1, 1, 3, 4, 3}), NULL);
	op(&o, TBC_OP_Unique, 4);
	attr_i(&o, "sorted", 0);
	assert_true(run(&o));
	expect_f(o.out[0], 4, (double[]){2, 1, 3, 4});
	expect_i(o.out[1], 4, (int64_t[]){0, 1, 3, 4});
	expect_i(o.out[2], 6, (int64_t[]){0, 1, 1, 2, 3, 2});
	expect_i(o.out[3], 4, (int64_t[]){1, 2, 2, 1});
	done(&o);
}

static void unique_sorted_with_axis(void **s) {
	(void)s; /* rows [[1,0,0],[1,0,0],[2,3,4]] -> [[1,0,0],[2,3,4]], inverse [0,0,1] */
	one_op o = begin();
	input(&o, itensor(TBC_DT_I64, 2, (int64_t[]){3, 3}, (int64_t[]){1, 0, 0, 1, 0, 0, 2, 3, 4}), NULL);
	op(&o, TBC_OP_Unique, 4);
	attr_i(&o, "axis", 0);
	assert_true(run(&o));
	expect_i(o.out[0], 6, (int64_t[]){1, 0, 0, 2, 3, 4});
	expect_i(o.out[1], 2, (int64_t[]){0, 2});
	expect_i(o.out[2], 3, (int64_t[]){0, 0, 1});
	expect_i(o.out[3], 2, (int64_t[]){2, 1});
	done(&o);
}

/* ---- Trilu / EyeLike / Range / ReverseSequence -------------------------------*/
static void trilu_lower_with_negative_k(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_I16, 2, (int64_t[]){3, 3}), NULL);
	input(&o, itensor(TBC_DT_I64, 0, NULL, (int64_t[]){-1}), NULL);
	op(&o, TBC_OP_Trilu, 1);
	attr_i(&o, "upper", 0);
	assert_true(run(&o));
	expect_i(o.out[0], 9, (int64_t[]){0, 0, 0, 3, 0, 0, 6, 7, 0});
	done(&o);
}

static void eyelike_off_main_diagonal_with_dtype(void **s) {
	(void)s;
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){2, 3}), NULL);
	op(&o, TBC_OP_EyeLike, 1);
	attr_i(&o, "k", 1);
	attr_i(&o, "dtype", TBC_DT_I32);
	assert_true(run(&o));
	assert_int_equal(o.out[0]->dtype, TBC_DT_I32);
	expect_i(o.out[0], 6, (int64_t[]){0, 1, 0, 0, 0, 1});
	done(&o);
}

static void range_int64_near_the_limit_is_exact(void **s) {
	(void)s;
	one_op o = begin();
	constant(&o, itensor(TBC_DT_I64, 0, NULL, (int64_t[]){INT64_MAX - 4}));
	constant(&o, itensor(TBC_DT_I64, 0, NULL, (int64_t[]){INT64_MAX}));
	constant(&o, itensor(TBC_DT_I64, 0, NULL, (int64_t[]){3}));
	op(&o, TBC_OP_Range, 1);
	assert_true(run(&o));
	assert_int_equal(out_type(&o, 0)->dims[0].size, 2);
	expect_i(o.out[0], 2, (int64_t[]){INT64_MAX - 4, INT64_MAX - 1});
	done(&o);
}

static void reverse_sequence_time_major(void **s) {
	(void)s; /* time_axis 0, batch_axis 1, x[t][b] = 4t + b, lens [4,3,2,1] */
	one_op o = begin();
	input(&o, iota(TBC_DT_F32, 2, (int64_t[]){4, 4}), NULL);
	input(&o, ivec(TBC_DT_I64, 4, (int64_t[]){4, 3, 2, 1}), NULL);
	op(&o, TBC_OP_ReverseSequence, 1);
	assert_true(run(&o));
	expect_f(o.out[0], 16, (double[]){12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15});
	done(&o);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reshape_zero_and_negative_dim_is_static_with_a_constant_shape),
		cmocka_unit_test(reshape_keeps_a_symbolic_batch_through_zero_and_minus_one),
		cmocka_unit_test(reshape_with_a_runtime_shape_has_symbolic_dims_of_the_shape_length),
		cmocka_unit_test(reshape_allowzero_keeps_a_zero_dim),
		cmocka_unit_test(reshape_of_wrong_element_count_is_an_error),
		cmocka_unit_test(squeeze_without_axes_of_a_symbolic_dim_has_unknown_rank),
		cmocka_unit_test(unsqueeze_unsorted_axes),
		cmocka_unit_test(unsqueeze_repeated_axis_is_an_error),
		cmocka_unit_test(flatten_axis_zero_gives_one_row),
		cmocka_unit_test(shape_start_negative_one),
		cmocka_unit_test(shape_of_a_symbolic_input_is_i64_of_the_rank),
		cmocka_unit_test(constant_of_shape_int32_value),
		cmocka_unit_test(transpose_moves_f16_bits_unchanged),
		cmocka_unit_test(transpose_bad_perm_is_an_error),
		cmocka_unit_test(concat_axis_1_of_a_symbolic_batch),
		cmocka_unit_test(split_num_outputs_makes_the_last_chunk_smaller),
		cmocka_unit_test(split_variable_parts_from_the_split_input),
		cmocka_unit_test(slice_negative_steps_walk_backwards),
		cmocka_unit_test(slice_end_out_of_bounds_clamps),
		cmocka_unit_test(slice_of_a_whole_symbolic_dim_keeps_it),
		cmocka_unit_test(gather_negative_indices_count_from_the_end),
		cmocka_unit_test(gather_index_out_of_range_is_a_runtime_error),
		cmocka_unit_test(gather_elements_axis_1),
		cmocka_unit_test(gathernd_batch_dims_1),
		cmocka_unit_test(scatternd_add_of_int64_is_exact),
		cmocka_unit_test(scatter_elements_reduction_max_of_uint64),
		cmocka_unit_test(tensor_scatter_circular_wraps_around_the_cache),
		cmocka_unit_test(onehot_out_of_range_index_is_all_off),
		cmocka_unit_test(pad_modes_on_1_2_3),
		cmocka_unit_test(pad_constant_value_and_axes),
		cmocka_unit_test(center_crop_pad_crops_one_axis_and_pads_another),
		cmocka_unit_test(tile_repeats_each_dim),
		cmocka_unit_test(expand_dim_changed_broadcasts_both_ways),
		cmocka_unit_test(depth_to_space_crd_mode),
		cmocka_unit_test(compress_without_axis_flattens),
		cmocka_unit_test(nonzero_lists_coordinates_column_by_column),
		cmocka_unit_test(unique_not_sorted_without_axis),
		cmocka_unit_test(unique_sorted_with_axis),
		cmocka_unit_test(trilu_lower_with_negative_k),
		cmocka_unit_test(eyelike_off_main_diagonal_with_dtype),
		cmocka_unit_test(range_int64_near_the_limit_is_exact),
		cmocka_unit_test(reverse_sequence_time_major),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
