/* Rematerialization under a memory budget (passes/remat.c, docs/memory.md):
 * a training step and an inference model compiled with and without a
 * budget give the same bits (the same kernels recomputed), memory
 * planning's arena fits the budget and is smaller than without it, and a
 * budget out of reach is an error naming the option and the smallest arena
 * reached.  The figures --stats-json writes (flops, lower bound) are here
 * too. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ir/ir.h"
#include "passes/passes.h"
#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "tests/runtime/rt_test.h"

/* Parses text into an inferred module. */
static tbc_module *parse(const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	assert_non_null(m);
	tbc_infer cx = {.module = m, .diags = d, .static_ranks = true};
	assert_true(tbc_infer_graph(&cx, m->main));
	tbc_diags_destroy(d);
	return m;
}

/* "%name: f32[dims] = const [...]" with n pseudo-random values. */
static int weight(char *out, size_t size, const char *name, const char *type, int n, int seed) {
	int k = snprintf(out, size, "  %%%s: %s = const [", name, type);
	for (int i = 0; i < n; i++) k += snprintf(out + k, size - (size_t)k, "%s%.4f", i ? ", " : "", 0.3 * sin(0.77 * i + seed));
	k += snprintf(out + k, size - (size_t)k, "]\n");
	return k;
}

/* A small CNN whose forward activations the backward pass reads long after:
 * Conv, Relu, Conv, Relu + skip, GlobalAveragePool, Gemm. */
static char *cnn_text(void) {
	static char text[65536];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 17\ngraph main(%%x: f32[4,2,12,12]) {\n");
	n += weight(text + n, sizeof text - (size_t)n, "k1", "f32[8,2,3,3]", 144, 1);
	n += weight(text + n, sizeof text - (size_t)n, "k2", "f32[8,8,3,3]", 576, 2);
	n += weight(text + n, sizeof text - (size_t)n, "k3", "f32[8,8,3,3]", 576, 3);
	n += weight(text + n, sizeof text - (size_t)n, "fc", "f32[3,8]", 24, 4);
	snprintf(text + n, sizeof text - (size_t)n,
		 "  %%a = Conv(%%x, %%k1) {pads = [1, 1, 1, 1]}\n"
		 "  %%r = Relu(%%a)\n"
		 "  %%b = Conv(%%r, %%k2) {pads = [1, 1, 1, 1]}\n"
		 "  %%s = Sigmoid(%%b)\n"
		 "  %%c = Conv(%%s, %%k3) {pads = [1, 1, 1, 1]}\n"
		 "  %%t = Tanh(%%c)\n"
		 "  %%u = Add(%%t, %%r)\n"
		 "  %%g = GlobalAveragePool(%%u)\n"
		 "  %%f = Flatten(%%g)\n"
		 "  %%logits = Gemm(%%f, %%fc) {transB = 1}\n"
		 "  return %%logits\n"
		 "}\n");
	return text;
}

/* Inference: Sigmoid(x) is read at the very end, after a chain of
 * products; recomputing it there from x frees its buffer in between. */
static char *skip_text(void) {
	static char text[65536];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 17\ngraph main(%%x: f32[64,32]) {\n");
	n += weight(text + n, sizeof text - (size_t)n, "w1", "f32[32,32]", 1024, 1);
	n += weight(text + n, sizeof text - (size_t)n, "w2", "f32[32,32]", 1024, 2);
	n += weight(text + n, sizeof text - (size_t)n, "w3", "f32[32,32]", 1024, 3);
	snprintf(text + n, sizeof text - (size_t)n,
		 "  %%s = Sigmoid(%%x)\n"
		 "  %%e = Exp(%%s)\n"
		 "  %%h1 = MatMul(%%e, %%w1)\n"
		 "  %%r1 = Relu(%%h1)\n"
		 "  %%h2 = MatMul(%%r1, %%w2)\n"
		 "  %%r2 = Tanh(%%h2)\n"
		 "  %%h3 = MatMul(%%r2, %%w3)\n"
		 "  %%y = Add(%%h3, %%e)\n"
		 "  return %%y\n"
		 "}\n");
	return text;
}

static void fail_with_diags(const char *what, tbc_diags *d) {
	char msg[1024] = "";
	if (tbc_diags_count(d)) tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
	fail_msg("%s: %s", what, msg);
}

static tbc_jit *compile(const tbc_module *m, const tbc_train_options *to, double percent, tbc_compile_stats *st) {
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.train = to;
	o.memory_budget_percent = percent;
	o.stats_out = st;
	tbc_diags *d = tbc_diags_create();
	tbc_jit *jit = NULL;
	if (tbc_jit_compile(m, &o, d, &jit) != TBC_OK) fail_with_diags("compile", d);
	tbc_diags_destroy(d);
	return jit;
}

/* The budget was met and made the plan smaller. */
static void assert_fits(const tbc_compile_stats *free_st, const tbc_compile_stats *st, double percent) {
	assert_true(st->memory_budget_bytes > 0);
	assert_int_equal(st->plan_bytes_unconstrained, free_st->plan_bytes);
	assert_true(st->memory_budget_bytes <= (int64_t)((double)free_st->plan_bytes * percent / 100.0));
	if (st->plan_bytes > st->memory_budget_bytes)
		fail_msg("arena %lld bytes over the budget %lld", (long long)st->plan_bytes, (long long)st->memory_budget_bytes);
	assert_true(st->plan_bytes < free_st->plan_bytes);
	assert_true(st->recompute_ops > 0);
	assert_true(st->recompute_flops > 0 && st->recompute_flops < st->flops);
	assert_true(st->op_lower_bound > 0 && st->op_lower_bound <= st->plan_bytes);
}

static void cnn_step_under_a_budget_gives_the_same_bits(void **state) {
	(void)state;
	tbc_module *m = parse(cnn_text());
	tbc_train_options to;
	tbc_train_options_init(&to);
	char loss[] = "cross-entropy:logits:label";
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_train_parse_loss(&to, loss, d), TBC_OK);
	to.optimizer = TBC_OPT_ADAMW;
	to.lr = 0.05;
	tbc_compile_stats free_st, st;
	tbc_jit *a = compile(m, &to, 0, &free_st);
	tbc_jit *b = compile(m, &to, 60, &st);
	assert_int_equal(free_st.memory_budget_bytes, 0);
	assert_true(free_st.recompute_flops == 0 && free_st.flops > 0);
	assert_fits(&free_st, &st, 60);

	tbcrt_context *c = NULL;
	RT_OK(tbcrt_context_create(NULL, &c));
	tbcrt_model *ma = NULL, *mb = NULL;
	tbcrt_session *sa = NULL, *sb = NULL;
	RT_OK(tbcrt_model_from_descriptor(c, tbc_jit_descriptor(a), NULL, &ma));
	RT_OK(tbcrt_model_from_descriptor(c, tbc_jit_descriptor(b), NULL, &mb));
	RT_OK(tbcrt_session_create(ma, &sa));
	RT_OK(tbcrt_session_create(mb, &sb));
	tbcrt_model_info ia, ib;
	RT_OK(tbcrt_model_get_info(ma, &ia));
	RT_OK(tbcrt_model_get_info(mb, &ib));
	assert_int_equal(ia.n_state, ib.n_state);
	float x[4 * 2 * 12 * 12];
	for (int i = 0; i < 4 * 2 * 12 * 12; i++) x[i] = (float)cos(0.37 * i);
	int64_t label[4] = {2, 0, 1, 2}, xd[4] = {4, 2, 12, 12}, ld[1] = {4};
	tbcrt_session *ss[2] = {sa, sb};
	for (int k = 0; k < 2; k++) {
		RT_OK(tbcrt_session_bind_input(ss[k], 0, TBC_DT_F32, 4, xd, x, sizeof x));
		RT_OK(tbcrt_session_bind_input(ss[k], 1, TBC_DT_I64, 1, ld, label, sizeof label));
	}
	for (int step = 0; step < 3; step++) {
		RT_OK(tbcrt_session_run(sa));
		RT_OK(tbcrt_session_run(sb));
		for (uint32_t o = 0; o < ia.n_outputs; o++) {
			tbcrt_tensor ta, tb;
			RT_OK(tbcrt_session_output(sa, o, &ta));
			RT_OK(tbcrt_session_output(sb, o, &tb));
			assert_int_equal(ta.bytes, tb.bytes);
			if (memcmp(ta.data, tb.data, ta.bytes)) fail_msg("step %d: output %u differs under the budget", step, o);
		}
		for (uint32_t k = 0; k < ia.n_state; k++) {
			tbcrt_tensor ta, tb;
			RT_OK(tbcrt_session_state(sa, k, &ta));
			RT_OK(tbcrt_session_state(sb, k, &tb));
			assert_int_equal(ta.bytes, tb.bytes);
			if (memcmp(ta.data, tb.data, ta.bytes)) fail_msg("step %d: state %u differs under the budget", step, k);
		}
	}
	tbcrt_session_destroy(sa);
	tbcrt_session_destroy(sb);
	tbcrt_model_destroy(ma);
	tbcrt_model_destroy(mb);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(a);
	tbc_jit_destroy(b);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

static void inference_under_a_budget_gives_the_same_bits(void **state) {
	(void)state;
	tbc_module *m = parse(skip_text());
	tbc_compile_stats free_st, st;
	tbc_jit *a = compile(m, NULL, 0, &free_st);
	tbc_jit *b = compile(m, NULL, 80, &st);
	assert_fits(&free_st, &st, 80);
	int64_t xd[2] = {64, 32};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, xd);
	for (int i = 0; i < 64 * 32; i++) ((float *)x->data)[i] = (float)sin(0.11 * i);
	tbc_tensor *ya = NULL, *yb = NULL;
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_abi_run_serial(tbc_jit_descriptor(a), &x, 1, &ya, 1, d), TBC_OK);
	assert_int_equal(tbc_abi_run_serial(tbc_jit_descriptor(b), &x, 1, &yb, 1, d), TBC_OK);
	assert_int_equal(ya->numel, yb->numel);
	assert_memory_equal(ya->data, yb->data, (size_t)ya->numel * sizeof(float));
	tbc_tensor_destroy(x);
	tbc_tensor_destroy(ya);
	tbc_tensor_destroy(yb);
	tbc_diags_destroy(d);
	tbc_jit_destroy(a);
	tbc_jit_destroy(b);
	tbc_module_destroy(m);
}

/* 1 byte: out of reach.  The error names the option and the smallest arena. */
static void a_budget_out_of_reach_names_the_option_and_the_smallest_arena(void **state) {
	(void)state;
	tbc_module *m = parse(skip_text());
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.memory_budget_bytes = 1;
	tbc_diags *d = tbc_diags_create();
	tbc_jit *jit = NULL;
	assert_int_equal(tbc_jit_compile(m, &o, d, &jit), TBC_ERR_INVALID_ARGUMENT);
	assert_null(jit);
	char msg[1024];
	tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
	if (!strstr(msg, "--memory-budget") || !strstr(msg, "cannot be met") || !strstr(msg, "at the smallest"))
		fail_msg("unexpected message: %s", msg);
	tbc_diags_destroy(d);
	/* A percentage out of (0, 100] is refused too. */
	tbc_compile_options_init(&o);
	o.memory_budget_percent = 150;
	d = tbc_diags_create();
	assert_int_equal(tbc_jit_compile(m, &o, d, &jit), TBC_ERR_INVALID_ARGUMENT);
	tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
	assert_non_null(strstr(msg, "--memory-budget"));
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* A budget the plan already fits changes nothing. */
static void a_budget_already_met_recomputes_nothing(void **state) {
	(void)state;
	tbc_module *m = parse(skip_text());
	tbc_compile_stats st;
	tbc_jit *a = compile(m, NULL, 100, &st);
	assert_int_equal(st.recompute_ops, 0);
	assert_true(st.recompute_flops == 0);
	assert_int_equal(st.plan_bytes, st.plan_bytes_unconstrained);
	/* 2 * 64 * 32 * 32 per MatMul, three of them, and the elementwise ops. */
	assert_true(st.flops >= 3.0 * 2 * 64 * 32 * 32);
	tbc_jit_destroy(a);
	tbc_module_destroy(m);
}


/* Two values live across the peak and read early and late, of one size: a
 * MatMul's result and a Sigmoid of the input (read early too, so that
 * moving them to their readers does not help).  A budget one of them meets
 * is met by recomputing the Sigmoid (from x, which is always there); the
 * product is recomputed only when the budget needs both. */
static const char *two_candidates =
	"module ir_version 8 opset 17\n"
	"graph main(%x: f32[64,64], %w: f32[64,64]) {\n"
	"  %m = MatMul(%x, %w)\n"
	"  %s = Sigmoid(%x)\n"
	"  %e = Add(%m, %s)\n"
	"  %a = Tanh(%e)\n"
	"  %b = Exp(%a)\n"
	"  %c = Add(%a, %b)\n"
	"  %d = Add(%c, %m)\n"
	"  %y = Add(%d, %s)\n"
	"  return %y\n"
	"}\n";

static int count_ops(const tbc_module *m, tbc_opcode code) {
	int n = 0;
	for (const tbc_op *op = m->main->first; op; op = op->next) n += op->code == code;
	return n;
}

static tbc_module *remat_at(int64_t budget, tbc_pipeline_stats *st) {
	tbc_module *m = parse(two_candidates);
	tbc_pipeline_options po = tbc_pipeline_defaults();
	po.opt_level = 0; /* the ops as written: no fusion */
	po.verify = true;
	tbc_remat_options ro = {budget, 0};
	po.remat = budget ? &ro : NULL;
	memset(st, 0, sizeof *st);
	po.stats = st;
	tbc_diags *d = tbc_diags_create();
	if (!tbc_run_pipeline(m, &po, d)) fail_with_diags("pipeline", d);
	assert_true(tbc_memplan_check(m, d));
	tbc_diags_destroy(d);
	return m;
}

static void a_product_is_recomputed_only_when_nothing_else_helps(void **state) {
	(void)state;
	tbc_pipeline_stats st;
	tbc_module *m = remat_at(0, &st);
	int64_t free_arena = tbc_memplan_arena_bytes(m);
	tbc_module_destroy(m);
	const int64_t value = 64 * 64 * 4;

	m = remat_at(free_arena - value, &st);
	assert_true(tbc_memplan_arena_bytes(m) <= free_arena - value);
	assert_int_equal(count_ops(m, TBC_OP_Sigmoid), 2);
	assert_int_equal(count_ops(m, TBC_OP_MatMul), 1);
	assert_true(st.remat.recompute_flops == 64.0 * 64);
	tbc_module_destroy(m);

	m = remat_at(free_arena - 2 * value, &st);
	assert_true(tbc_memplan_arena_bytes(m) <= free_arena - 2 * value);
	assert_int_equal(count_ops(m, TBC_OP_Sigmoid), 2);
	assert_int_equal(count_ops(m, TBC_OP_MatMul), 2);
	tbc_module_destroy(m);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cnn_step_under_a_budget_gives_the_same_bits),
		cmocka_unit_test(inference_under_a_budget_gives_the_same_bits),
		cmocka_unit_test(a_budget_out_of_reach_names_the_option_and_the_smallest_arena),
		cmocka_unit_test(a_budget_already_met_recomputes_nothing),
		cmocka_unit_test(a_product_is_recomputed_only_when_nothing_else_helps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
