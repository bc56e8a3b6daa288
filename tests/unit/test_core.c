/* Core IR pieces: the arena, tensors and their limits, the shared kernel
 * helpers, the builder's use lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "ir/kernels/kernels.h"

static void arena_allocations_are_zeroed_aligned_and_survive_growth(void **state) {
	(void)state;
	tbc_arena *a = tbc_arena_create();
	unsigned char *small = tbc_arena_alloc(a, 3);
	assert_non_null(small);
	assert_int_equal((uintptr_t)small % 16, 0);
	small[0] = 7;
	unsigned char *big = tbc_arena_alloc(a, 1 << 20); /* larger than a chunk */
	assert_non_null(big);
	assert_int_equal(big[12345], 0);
	unsigned char *after = tbc_arena_alloc(a, 8);
	assert_non_null(after);
	assert_int_equal(small[0], 7);
	assert_null(tbc_arena_array(a, SIZE_MAX / 2, 4)); /* n * size overflows */
	assert_string_equal(tbc_arena_strdup(a, "relu"), "relu");
	tbc_arena_destroy(a);
}

static void tensor_create_rejects_overflowing_and_negative_shapes(void **state) {
	(void)state;
	int64_t huge[2] = {INT64_MAX / 2, 4};
	assert_null(tbc_tensor_create(TBC_DT_F32, 2, huge));
	int64_t neg[1] = {-1};
	assert_null(tbc_tensor_create(TBC_DT_F32, 1, neg));
	assert_null(tbc_tensor_create(TBC_DT_STRING, 0, NULL));
	assert_null(tbc_tensor_create(TBC_DT_F32, TBC_MAX_RANK + 1, huge));
	int64_t empty[2] = {0, 5};
	tbc_tensor *t = tbc_tensor_create(TBC_DT_I64, 2, empty);
	assert_non_null(t);
	assert_int_equal(t->numel, 0);
	tbc_tensor_destroy(t);
}

static void f16_and_bf16_round_to_nearest_even(void **state) {
	(void)state;
	assert_int_equal(tbc_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(tbc_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(tbc_f32_to_f16(65520.0f), 0x7c00); /* rounds up to inf */
	assert_int_equal(tbc_f32_to_f16(-0.0f), 0x8000);
	assert_int_equal(tbc_f32_to_f16(5.9604645e-08f), 0x0001); /* smallest subnormal */
	/* 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to even (1). */
	assert_int_equal(tbc_f64_to_f16(1.0 + 1.0 / 2048), 0x3c00);
	assert_int_equal(tbc_f64_to_f16(1.0 + 3.0 / 2048), 0x3c02);
	assert_true(tbc_f16_to_f32(0x7e00) != tbc_f16_to_f32(0x7e00)); /* NaN */
	assert_int_equal(tbc_f32_to_bf16(1.0f), 0x3f80);
	assert_true(tbc_bf16_to_f32(0x3f80) == 1.0f);
}

static void broadcast_dims_follow_numpy(void **state) {
	(void)state;
	int64_t a[3] = {2, 1, 4}, b[2] = {3, 1}, out[TBC_MAX_RANK];
	int r;
	assert_true(tbc_broadcast_dims(3, a, 2, b, &r, out));
	assert_int_equal(r, 3);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 3);
	assert_int_equal(out[2], 4);
	int64_t c[1] = {5};
	assert_false(tbc_broadcast_dims(3, a, 1, c, &r, out));
	int64_t s[3];
	tbc_broadcast_strides(2, b, 3, s);
	assert_int_equal(s[0], 0);
	assert_int_equal(s[1], 1);
	assert_int_equal(s[2], 0);
}

static void norm_axis_accepts_minus_rank_to_rank_minus_one(void **state) {
	(void)state;
	int ax;
	assert_true(tbc_norm_axis(-3, 3, &ax));
	assert_int_equal(ax, 0);
	assert_true(tbc_norm_axis(2, 3, &ax));
	assert_int_equal(ax, 2);
	assert_false(tbc_norm_axis(3, 3, &ax));
	assert_false(tbc_norm_axis(-4, 3, &ax));
}

static void builder_keeps_use_lists_in_step_with_inputs(void **state) {
	(void)state;
	tbc_module *m = tbc_module_new("t.onnx");
	tbc_type ty;
	int64_t dims[1] = {4};
	tbc_type_set(&ty, TBC_DT_F32, 1, dims);
	tbc_value *x = tbc_graph_add_input(m->main, "x", &ty);
	tbc_value *y = tbc_graph_add_input(m->main, "y", &ty);
	tbc_value *xy[2] = {x, y};
	tbc_op *add = tbc_op_new(m->main, TBC_OP_Add, "add0", 2, xy, 1);
	assert_int_equal(tbc_value_use_count(x), 1);
	tbc_op_set_input(add, 1, x);
	assert_int_equal(tbc_value_use_count(x), 2);
	assert_int_equal(tbc_value_use_count(y), 0);
	tbc_value_replace_uses(x, y);
	assert_int_equal(tbc_value_use_count(x), 0);
	assert_int_equal(tbc_value_use_count(y), 2);
	assert_ptr_equal(add->outputs[0]->def, add);
	tbc_op_remove(add);
	assert_null(m->main->first);
	assert_int_equal(tbc_value_use_count(y), 0);
	tbc_module_destroy(m);
}

static void opcodes_map_both_ways(void **state) {
	(void)state;
	assert_int_equal(tbc_opcode_from_onnx("Conv"), TBC_OP_Conv);
	assert_int_equal(tbc_opcode_from_name("MatMul"), TBC_OP_MatMul);
	assert_int_equal(tbc_opcode_from_onnx("NoSuchOp"), TBC_OP_COUNT);
	assert_string_equal(tbc_opcat_name(tbc_ops[TBC_OP_ReduceSum].category), "reduction");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(arena_allocations_are_zeroed_aligned_and_survive_growth),
		cmocka_unit_test(tensor_create_rejects_overflowing_and_negative_shapes),
		cmocka_unit_test(f16_and_bf16_round_to_nearest_even),
		cmocka_unit_test(broadcast_dims_follow_numpy),
		cmocka_unit_test(norm_axis_accepts_minus_rank_to_rank_minus_one),
		cmocka_unit_test(builder_keeps_use_lists_in_step_with_inputs),
		cmocka_unit_test(opcodes_map_both_ways),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
