/* The ONNX frontend: import of suite models into the IR, TensorProto
 * decoding of every encoding, and the .npy / .pb tensor files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include "tests/unit/support/need.h"

#include "frontend/frontend.h"

#define SUITE "/../shared/onnx-tests/node/"

static char *suite_path(const char *rel) {
	const char *src = getenv("TBC_SOURCE_DIR");
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s%s%s", src ? src : ".", SUITE, rel);
	return buf;
}

/* Imports (without shape inference) a suite model; TBC_TEST_NEEDS it. */
static tbc_module *import_case(const char *name) {
	char rel[256];
	snprintf(rel, sizeof rel, "%s/model.onnx", name);
	const char *path = suite_path(rel);
	uint8_t *buf;
	size_t size;
	tbc_diags *d = tbc_diags_create();
	if (tbc_fe_read_file(path, TBC_MAX_MODEL_BYTES, d, &buf, &size)) {
		tbc_diags_destroy(d);
		TBC_TEST_NEEDS("the ONNX node suite (%s)", path);
	}
	tbc_fe_options opt = {.skip_infer = true};
	tbc_module *m = NULL;
	tbc_code rc = tbc_fe_load(buf, size, NULL, path, &opt, d, &m);
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char msg[1024];
		tbc_diag_format(tbc_diags_get(d, i), msg, sizeof msg);
		fprintf(stderr, "%s\n", msg);
	}
	assert_int_equal(rc, TBC_OK);
	free(buf);
	tbc_diags_destroy(d);
	return m;
}

static int count_ops(const tbc_graph *g) {
	int n = 0;
	for (const tbc_op *op = g->first; op; op = op->next) n++;
	return n;
}

static void add_imports_inputs_op_and_output(void **state) {
	(void)state;
	tbc_module *m = import_case("test_add");
	assert_int_equal(m->opset, 14);
	assert_int_equal(m->main->n_inputs, 2);
	assert_string_equal(m->main->inputs[0]->name, "x");
	assert_int_equal(m->main->inputs[0]->type.dtype, TBC_DT_F32);
	assert_int_equal(m->main->inputs[0]->type.rank, 3);
	assert_int_equal(m->main->inputs[0]->type.dims[2].size, 5);
	assert_int_equal(count_ops(m->main), 1);
	assert_int_equal(m->main->first->code, TBC_OP_Add);
	assert_ptr_equal(m->main->first->inputs[1], m->main->inputs[1]);
	assert_int_equal(m->main->n_outputs, 1);
	assert_string_equal(m->main->outputs[0]->name, "sum");
	tbc_module_destroy(m);
}

static void if_branches_become_subgraphs(void **state) {
	(void)state;
	tbc_module *m = import_case("test_if");
	tbc_op *op = m->main->first;
	assert_int_equal(op->code, TBC_OP_If);
	tbc_graph *then_g = tbc_attr_graph(op, "then_branch"), *else_g = tbc_attr_graph(op, "else_branch");
	assert_non_null(then_g);
	assert_non_null(else_g);
	assert_ptr_equal(then_g->parent, m->main);
	assert_ptr_equal(then_g->parent_op, op);
	assert_int_equal(then_g->n_outputs, 1);
	assert_int_equal(then_g->outputs[0]->kind, TBC_VALUE_CONST);
	assert_string_equal(then_g->outputs[0]->name, "then_out");
	tbc_module_destroy(m);
}

static void loop_body_sees_its_inputs_and_canonical_unsqueeze(void **state) {
	(void)state;
	tbc_module *m = import_case("test_loop11");
	tbc_op *op = m->main->first;
	assert_int_equal(op->code, TBC_OP_Loop);
	assert_int_equal(op->n_inputs, 3);
	assert_int_equal(op->n_outputs, 2);
	tbc_graph *body = tbc_attr_graph(op, "body");
	assert_non_null(body);
	assert_int_equal(body->n_inputs, 3);
	assert_int_equal(body->n_outputs, 3);
	/* Unsqueeze at opset 11 has axes as an attribute; canonical: input 1. */
	tbc_op *u = NULL;
	for (tbc_op *o = body->first; o; o = o->next)
		if (o->code == TBC_OP_Unsqueeze) u = o;
	assert_non_null(u);
	assert_int_equal(u->n_inputs, 2);
	assert_non_null(u->inputs[1]);
	assert_int_equal(u->inputs[1]->kind, TBC_VALUE_CONST);
	assert_null(tbc_op_attr(u, "axes"));
	tbc_module_destroy(m);
}

static const char *corpus(const char *file) {
	const char *src = getenv("TBC_SOURCE_DIR");
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s/tests/malformed/%s", src ? src : ".", file);
	return buf;
}

/* Twice(x) = Scale(Scale(x)): Scale's default alpha (2) on the first call,
 * Twice's beta=3 reaching the second call through ref_attr_name. */
static void functions_are_inlined_with_attribute_references_and_defaults(void **state) {
	(void)state;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	assert_int_equal(tbc_module_load_onnx(corpus("function_ok.onnx"), d, &m), TBC_OK);
	int64_t dims[2] = {2, 3};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, dims);
	for (int i = 0; i < 6; i++) ((float *)x->data)[i] = (float)i;
	tbc_tensor *y = NULL;
	assert_int_equal(tbc_interpret(m, &x, 1, &y, 1, d), TBC_OK);
	for (int i = 0; i < 6; i++) assert_true(((float *)y->data)[i] == (float)(i * 6));
	assert_string_equal(tbc_module_output_name(m, 0), "y");
	tbc_tensor_destroy(x);
	tbc_tensor_destroy(y);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

/* The model size limit (2 GiB - 1): one byte past it is refused before
 * anything is read (a sparse file costs no disk). */
static void model_one_byte_past_the_size_limit_is_refused(void **state) {
	(void)state;
	char path[] = "/tmp/tbc_test_big_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)TBC_MAX_MODEL_BYTES + 1), 0);
	close(fd);
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = NULL;
	assert_int_equal(tbc_module_load_onnx(path, d, &m), TBC_ERR_UNSUPPORTED);
	assert_null(m);
	assert_non_null(strstr(tbc_diags_get(d, 0)->message, "more than the limit"));
	tbc_diags_destroy(d);
	/* In memory, the limit is checked on the size alone. */
	d = tbc_diags_create();
	assert_int_equal(tbc_module_load_onnx_memory("", TBC_MAX_MODEL_BYTES + 1, NULL, "big", d, &m), TBC_ERR_UNSUPPORTED);
	tbc_diags_destroy(d);
	unlink(path);
}

/* ---- TensorProto decoding ---- */
static tbc_tensor *decode(Onnx__TensorProto *tp, tbc_code want) {
	tbc_diags *d = tbc_diags_create();
	tbc_tensor *t = NULL;
	tbc_code rc = tbc_fe_tensor_from_proto(tp, NULL, "test", d, &t);
	assert_int_equal(rc, want);
	if (want) assert_null(t);
	tbc_diags_destroy(d);
	return t;
}

static void int4_raw_data_unpacks_low_nibble_first_and_sign_extends(void **state) {
	(void)state;
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	int64_t dims[1] = {3};
	uint8_t raw[2] = {0x7F, 0x08}; /* 15 -> -1, 7, 8 -> -8 */
	tp.n_dims = 1;
	tp.dims = dims;
	tp.has_data_type = 1;
	tp.data_type = TBC_DT_I4;
	tp.has_raw_data = 1;
	tp.raw_data.len = 2;
	tp.raw_data.data = raw;
	tbc_tensor *t = decode(&tp, TBC_OK);
	int8_t *v = t->data;
	assert_int_equal(v[0], -1);
	assert_int_equal(v[1], 7);
	assert_int_equal(v[2], -8);
	tbc_tensor_destroy(t);
	tp.data_type = TBC_DT_U4;
	t = decode(&tp, TBC_OK);
	assert_int_equal(((uint8_t *)t->data)[0], 15);
	assert_int_equal(((uint8_t *)t->data)[2], 8);
	tbc_tensor_destroy(t);
}

static void int2_raw_data_unpacks_four_per_byte_low_bits_first(void **state) {
	(void)state;
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	int64_t dims[1] = {5};
	uint8_t raw[2] = {0xE4, 0x01}; /* 0b11100100: 0, 1, 2 -> -2, 3 -> -1; then 1 */
	tp.n_dims = 1;
	tp.dims = dims;
	tp.has_data_type = 1;
	tp.data_type = TBC_DT_I2;
	tp.has_raw_data = 1;
	tp.raw_data.len = 2;
	tp.raw_data.data = raw;
	tbc_tensor *t = decode(&tp, TBC_OK);
	int8_t *v = t->data;
	assert_int_equal(v[0], 0);
	assert_int_equal(v[1], 1);
	assert_int_equal(v[2], -2);
	assert_int_equal(v[3], -1);
	assert_int_equal(v[4], 1);
	tbc_tensor_destroy(t);
	tp.raw_data.len = 1; /* 5 elements need 2 bytes */
	decode(&tp, TBC_ERR_INVALID_MODEL);
}

static void float16_from_int32_data_keeps_bit_patterns(void **state) {
	(void)state;
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	int64_t dims[1] = {2};
	int32_t bits[2] = {0x3C00, 0xC000}; /* 1.0, -2.0 */
	tp.n_dims = 1;
	tp.dims = dims;
	tp.has_data_type = 1;
	tp.data_type = TBC_DT_F16;
	tp.n_int32_data = 2;
	tp.int32_data = bits;
	tbc_tensor *t = decode(&tp, TBC_OK);
	assert_true(tbc_load_f64(TBC_DT_F16, t->data, 0) == 1.0);
	assert_true(tbc_load_f64(TBC_DT_F16, t->data, 1) == -2.0);
	tbc_tensor_destroy(t);
}

static void uint32_from_uint64_data(void **state) {
	(void)state;
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	int64_t dims[1] = {1};
	uint64_t v[1] = {4000000000u};
	tp.n_dims = 1;
	tp.dims = dims;
	tp.has_data_type = 1;
	tp.data_type = TBC_DT_U32;
	tp.n_uint64_data = 1;
	tp.uint64_data = v;
	tbc_tensor *t = decode(&tp, TBC_OK);
	assert_int_equal(((uint32_t *)t->data)[0], 4000000000u);
	tbc_tensor_destroy(t);
}

static void raw_data_shorter_than_shape_is_rejected(void **state) {
	(void)state;
	Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
	int64_t dims[2] = {1000000, 1000000};
	uint8_t raw[4] = {0};
	tp.n_dims = 2;
	tp.dims = dims;
	tp.has_data_type = 1;
	tp.data_type = TBC_DT_F32;
	tp.has_raw_data = 1;
	tp.raw_data.len = 4;
	tp.raw_data.data = raw;
	decode(&tp, TBC_ERR_INVALID_MODEL);
	dims[0] = -1;
	decode(&tp, TBC_ERR_INVALID_MODEL);
	tp.data_type = TBC_DT_STRING;
	decode(&tp, TBC_ERR_UNSUPPORTED);
	tp.data_type = 99;
	decode(&tp, TBC_ERR_INVALID_MODEL);
}

/* ---- Tensor files ---- */
static void npy_round_trip_keeps_dtype_shape_and_values(void **state) {
	(void)state;
	char path[] = "/tmp/tbc_test_frontend_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	int64_t dims[2] = {2, 3};
	tbc_tensor *t = tbc_tensor_create(TBC_DT_I16, 2, dims);
	for (int i = 0; i < 6; i++) ((int16_t *)t->data)[i] = (int16_t)(i * 1000 - 2500);
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_tensor_write_npy(path, t, d), TBC_OK);
	tbc_tensor *r = NULL;
	char *name = NULL;
	assert_int_equal(tbc_tensor_read_file(path, d, &r, &name), TBC_OK);
	assert_null(name);
	assert_int_equal(r->dtype, TBC_DT_I16);
	assert_int_equal(r->rank, 2);
	assert_int_equal(r->dims[1], 3);
	assert_memory_equal(r->data, t->data, 12);
	tbc_tensor_destroy(r);
	/* bfloat16 has no NumPy dtype: it is written as float32. */
	tbc_tensor *b = tbc_tensor_create(TBC_DT_BF16, 1, dims);
	((uint16_t *)b->data)[0] = 0x3FC0; /* 1.5 */
	assert_int_equal(tbc_tensor_write_npy(path, b, d), TBC_OK);
	assert_int_equal(tbc_tensor_read_file(path, d, &r, NULL), TBC_OK);
	assert_int_equal(r->dtype, TBC_DT_F32);
	assert_true(((float *)r->data)[0] == 1.5f);
	tbc_tensor_destroy(r);
	tbc_tensor_destroy(b);
	tbc_tensor_destroy(t);
	tbc_diags_destroy(d);
	unlink(path);
}

static void suite_pb_input_reads_with_its_name(void **state) {
	(void)state;
	tbc_diags *d = tbc_diags_create();
	tbc_tensor *t = NULL;
	char *name = NULL;
	tbc_code rc = tbc_tensor_read_file(suite_path("test_add/test_data_set_0/input_0.pb"), d, &t, &name);
	if (rc == TBC_ERR_IO) {
		tbc_diags_destroy(d);
		TBC_TEST_NEEDS("the ONNX node suite (test_add's input)");
	}
	assert_int_equal(rc, TBC_OK);
	assert_string_equal(name, "x");
	assert_int_equal(t->dtype, TBC_DT_F32);
	assert_int_equal(t->numel, 60);
	free(name);
	tbc_tensor_destroy(t);
	tbc_diags_destroy(d);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(add_imports_inputs_op_and_output),
		cmocka_unit_test(if_branches_become_subgraphs),
		cmocka_unit_test(loop_body_sees_its_inputs_and_canonical_unsqueeze),
		cmocka_unit_test(functions_are_inlined_with_attribute_references_and_defaults),
		cmocka_unit_test(model_one_byte_past_the_size_limit_is_refused),
		cmocka_unit_test(int4_raw_data_unpacks_low_nibble_first_and_sign_extends),
		cmocka_unit_test(int2_raw_data_unpacks_four_per_byte_low_bits_first),
		cmocka_unit_test(float16_from_int32_data_keeps_bit_patterns),
		cmocka_unit_test(uint32_from_uint64_data),
		cmocka_unit_test(raw_data_shorter_than_shape_is_rejected),
		cmocka_unit_test(npy_round_trip_keeps_dtype_shape_and_values),
		cmocka_unit_test(suite_pb_input_reads_with_its_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
