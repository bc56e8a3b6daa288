/* Training steps (passes/train.c, docs/training.md) through the runtime:
 * the step's state (the trainable weight, the optimizer's slots) is held by
 * the session, starts from the initializer (slots from zeros), is carried
 * from one run to the next, cannot be bound, can be read and written, and is
 * each session's own.  y = x @ w with an mse loss, checked against the
 * update worked out here. */
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
#include "tests/runtime/rt_train.h"

/* the batch and the first weight, short */
#define W0 RT_TRAIN_W0
#define X RT_TRAIN_X
#define T RT_TRAIN_T

/* One SGD step of mse(x @ w, t) on w, in double. */
static void sgd_step(double *w, double lr) {
	double e[4], g[6] = {0};
	for (int n = 0; n < 2; n++)
		for (int j = 0; j < 2; j++) {
			double y = 0;
			for (int k = 0; k < 3; k++) y += X[n * 3 + k] * w[k * 2 + j];
			e[n * 2 + j] = y - T[n * 2 + j];
		}
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 2; j++)
			for (int n = 0; n < 2; n++) g[k * 2 + j] += X[n * 3 + k] * 2 * e[n * 2 + j] / 4;
	for (int i = 0; i < 6; i++) w[i] -= lr * g[i];
}

static tbc_jit *compile_step(tbc_optimizer_kind opt) {
	tbc_module *m = rt_train_model();
	tbc_train_options to;
	tbc_train_options_init(&to);
	char loss[] = "mse:y:t";
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_train_parse_loss(&to, loss, d), TBC_OK);
	to.optimizer = opt;
	to.lr = 0.1;
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.train = &to;
	tbc_jit *jit = NULL;
	tbc_code rc = tbc_jit_compile(m, &o, d, &jit);
	if (rc != TBC_OK) {
		char msg[1024];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		fail_msg("compile: %s", msg);
	}
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
	return jit;
}


static void sgd_state_starts_from_the_initializer_and_is_carried_between_runs(void **state) {
	(void)state;
	tbc_jit *jit = compile_step(TBC_OPT_SGD);
	tbcrt_context *c = NULL;
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_context_create(NULL, &c));
	RT_OK(tbcrt_model_from_descriptor(c, tbc_jit_descriptor(jit), NULL, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_int_equal(info.n_state, 1);
	assert_int_equal(info.n_inputs, 3); /* x, the label t, the weight */
	tbcrt_state_info si;
	RT_OK(tbcrt_model_state_info(model, 0, &si));
	assert_string_equal(si.name, "w");
	assert_true(si.weight);
	assert_int_equal(si.rank, 2);
	tbcrt_state_info none;
	RT_ERR(tbcrt_model_state_info(model, 1, &none), TBCRT_ERR_INVALID_ARGUMENT, "out of range");

	tbcrt_session *s = NULL, *other = NULL;
	RT_OK(tbcrt_session_create(model, &s));
	RT_OK(tbcrt_session_create(model, &other));
	tbcrt_tensor w;
	RT_OK(tbcrt_session_state(s, 0, &w));
	assert_int_equal(w.bytes, sizeof W0);
	assert_memory_equal(w.data, W0, sizeof W0);
	/* The state binds itself. */
	int64_t wd[2] = {3, 2};
	RT_ERR(tbcrt_session_bind_input(s, si.input, TBC_DT_F32, 2, wd, W0, sizeof W0), TBCRT_ERR_INVALID_ARGUMENT,
	       "input 'w' is training state");
	float buf[6];
	RT_ERR(tbcrt_session_bind_output(s, si.output, buf, sizeof buf), TBCRT_ERR_INVALID_ARGUMENT, "training state");

	rt_train_bind_batch(model, s);
	double want[6];
	for (int i = 0; i < 6; i++) want[i] = W0[i];
	uint32_t li;
	RT_OK(tbcrt_model_find_output(model, "loss", &li));
	double prev_loss = INFINITY;
	for (int step = 0; step < 3; step++) {
		RT_OK(tbcrt_session_run(s));
		sgd_step(want, 0.1);
		RT_OK(tbcrt_session_state(s, 0, &w));
		const float *got = w.data;
		for (int i = 0; i < 6; i++)
			if (!(fabs(got[i] - want[i]) <= 1e-5 + 1e-5 * fabs(want[i])))
				fail_msg("step %d: w[%d] = %.9g, expected %.9g", step, i, got[i], want[i]);
		tbcrt_tensor loss;
		RT_OK(tbcrt_session_output(s, li, &loss));
		assert_true(*(const float *)loss.data < prev_loss);
		prev_loss = *(const float *)loss.data;
	}
	/* The other session's weight has not moved. */
	RT_OK(tbcrt_session_state(other, 0, &w));
	assert_memory_equal(w.data, W0, sizeof W0);
	/* Writing the state: the next step starts from it. */
	RT_ERR(tbcrt_session_set_state(other, 0, W0, 5), TBCRT_ERR_SHAPE_MISMATCH, "holds 24 bytes");
	float zeros[6] = {0};
	RT_OK(tbcrt_session_set_state(other, 0, zeros, sizeof zeros));
	rt_train_bind_batch(model, other);
	RT_OK(tbcrt_session_run(other));
	for (int i = 0; i < 6; i++) want[i] = 0;
	sgd_step(want, 0.1);
	RT_OK(tbcrt_session_state(other, 0, &w));
	for (int i = 0; i < 6; i++) assert_true(fabs(((const float *)w.data)[i] - want[i]) <= 1e-5);
	RT_ERR(tbcrt_session_state(other, 7, &w), TBCRT_ERR_INVALID_ARGUMENT, "out of range");

	tbcrt_session_destroy(s);
	tbcrt_session_destroy(other);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(jit);
}

static void adamw_slots_start_from_zeros(void **state) {
	(void)state;
	tbc_jit *jit = compile_step(TBC_OPT_ADAMW);
	tbcrt_context *c = NULL;
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_context_create(NULL, &c));
	RT_OK(tbcrt_model_from_descriptor(c, tbc_jit_descriptor(jit), NULL, &model));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_int_equal(info.n_state, 4); /* w, tbc.adam_step, w.adam_m, w.adam_v */
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create(model, &s));
	const char *names[4] = {"w", "tbc.adam_step", "w.adam_m", "w.adam_v"};
	for (uint32_t k = 0; k < 4; k++) {
		tbcrt_state_info si;
		RT_OK(tbcrt_model_state_info(model, k, &si));
		assert_string_equal(si.name, names[k]);
		assert_int_equal(si.weight, k == 0);
		tbcrt_tensor t;
		RT_OK(tbcrt_session_state(s, k, &t));
		for (size_t i = 0; k && i < t.bytes / 4; i++) assert_true(((const float *)t.data)[i] == 0.0f);
	}
	rt_train_bind_batch(model, s);
	RT_OK(tbcrt_session_run(s));
	RT_OK(tbcrt_session_run(s));
	tbcrt_tensor t;
	RT_OK(tbcrt_session_state(s, 1, &t));
	assert_true(*(const float *)t.data == 2.0f); /* two steps taken */
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(jit);
}

/* An artifact without state is not changed by any of this. */
static void a_model_has_no_state(void **state) {
	(void)state;
	tbc_module *m = rt_train_model();
	tbc_diags *d = tbc_diags_create();
	tbc_jit *jit = NULL;
	assert_int_equal(tbc_jit_compile(m, NULL, d, &jit), TBC_OK);
	assert_int_equal(tbc_jit_descriptor(jit)->n_state, 0);
	assert_null(tbc_jit_descriptor(jit)->state);
	tbc_jit_destroy(jit);
	tbc_diags_destroy(d);
	tbc_module_destroy(m);
}

/* Three steps of session s beside the interpreter running module m on in
 * (the inputs, the state as it starts; out: scratch of the outputs'
 * count): the loss and every state within atol + rtol * |want| at each
 * step, the interpreter fed back the state it wrote, as the session keeps
 * its own. */
static void steps_match_the_interpreter(tbc_module *m, tbcrt_session *s, tbc_tensor **in, tbc_tensor **out, float atol,
					float rtol, tbc_diags *d) {
	tbc_graph *g = m->main;
	for (int step = 0; step < 3; step++) {
		assert_int_equal(tbc_interpret(m, in, (size_t)g->n_inputs, out, (size_t)g->n_outputs, d), TBC_OK);
		RT_OK(tbcrt_session_run(s));
		tbcrt_tensor lt;
		RT_OK(tbcrt_session_output(s, 0, &lt));
		float want_loss = *(const float *)out[0]->data, got_loss = *(const float *)lt.data;
		if (!(fabsf(got_loss - want_loss) <= atol + rtol * fabsf(want_loss)))
			fail_msg("step %d: loss %.9g, the interpreter %.9g", step, got_loss, want_loss);
		for (int k = 0; k < m->n_state; k++) {
			tbcrt_tensor st;
			RT_OK(tbcrt_session_state(s, (uint32_t)k, &st));
			const tbc_tensor *want = out[m->state[k].output];
			for (int64_t i = 0; i < want->numel; i++) {
				float a = ((const float *)st.data)[i], b = ((const float *)want->data)[i];
				if (!(fabsf(a - b) <= atol + rtol * fabsf(b)))
					fail_msg("step %d: state %s[%lld] = %.9g, the interpreter %.9g", step,
						 g->inputs[m->state[k].input]->name, (long long)i, a, b);
			}
			tbc_tensor_destroy(in[m->state[k].input]);
			in[m->state[k].input] = out[m->state[k].output];
			out[m->state[k].output] = NULL;
		}
		for (int i = 0; i < g->n_outputs; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	}
}

/* A small CNN (Conv, Relu, MaxPool, a depthwise Conv, AveragePool,
 * Flatten, Gemm) with cross-entropy and AdamW: three compiled steps against
 * the same step run by the reference interpreter (whose every rule is
 * checked against finite differences), the state fed back by hand. */
static char *cnn_text(void) {
	static char text[8192];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 17\ngraph main(%%x: f32[2,1,6,6]) {\n");
	const struct {
		const char *name, *type;
		int count;
	} w[] = {{"k1", "f32[4,1,3,3]", 36}, {"c1", "f32[4]", 4}, {"k2", "f32[4,1,3,3]", 36}, {"fc", "f32[3,4]", 12},
		 {"fb", "f32[3]", 3}};
	for (int i = 0; i < 5; i++) {
		n += snprintf(text + n, sizeof text - (size_t)n, "  %%%s: %s = const [", w[i].name, w[i].type);
		for (int k = 0; k < w[i].count; k++)
			n += snprintf(text + n, sizeof text - (size_t)n, "%s%.4f", k ? ", " : "", 0.4 * sin(1.7 * k + i) );
		n += snprintf(text + n, sizeof text - (size_t)n, "]\n");
	}
	snprintf(text + n, sizeof text - (size_t)n,
		 "  %%a = Conv(%%x, %%k1, %%c1) {pads = [1, 1, 1, 1]}\n"
		 "  %%r = Relu(%%a)\n"
		 "  %%p = MaxPool(%%r) {kernel_shape = [2, 2], strides = [2, 2]}\n"
		 "  %%d = Conv(%%p, %%k2) {group = 4, pads = [1, 1, 1, 1]}\n"
		 "  %%q = AveragePool(%%d) {kernel_shape = [2, 2], strides = [2, 2], pads = [0, 0, 1, 1]}\n"
		 "  %%g = GlobalAveragePool(%%q)\n"
		 "  %%f = Flatten(%%g)\n"
		 "  %%logits = Gemm(%%f, %%fc, %%fb) {transB = 1}\n"
		 "  return %%logits\n"
		 "}\n");
	return text;
}

static void cnn_adamw_steps_compiled_match_the_interpreter(void **state) {
	(void)state;
	tbc_train_options to;
	tbc_train_options_init(&to);
	char loss[] = "cross-entropy:logits:label";
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_train_parse_loss(&to, loss, d), TBC_OK);
	to.optimizer = TBC_OPT_ADAMW;
	to.lr = 0.05;
	/* The step, built here and interpreted. */
	tbc_module *ref = tbc_parse(cnn_text(), "cnn.ir", d);
	assert_non_null(ref);
	tbc_infer cx = {.module = ref, .diags = d, .static_ranks = true};
	assert_true(tbc_infer_graph(&cx, ref->main));
	tbc_module *m = tbc_module_clone(ref);
	assert_non_null(m);
	if (!tbc_train_build(m, &to, d)) {
		char msg[1024];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		fail_msg("train: %s", msg);
	}
	/* Compiled, through the runtime. */
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.train = &to;
	tbc_jit *jit = NULL;
	assert_int_equal(tbc_jit_compile(ref, &o, d, &jit), TBC_OK);
	tbcrt_context *c = NULL;
	tbcrt_model *model = NULL;
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_context_create(NULL, &c));
	RT_OK(tbcrt_model_from_descriptor(c, tbc_jit_descriptor(jit), NULL, &model));
	RT_OK(tbcrt_session_create(model, &s));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_int_equal((int)info.n_state, m->n_state);
	assert_int_equal(m->n_state, 1 + 3 * 5); /* the step count, then each weight with its two slots */

	int64_t xd[4] = {2, 1, 6, 6}, ld[1] = {2};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 4, xd), *label = tbc_tensor_create(TBC_DT_I64, 1, ld);
	for (int i = 0; i < 72; i++) ((float *)x->data)[i] = (float)cos(0.9 * i);
	((int64_t *)label->data)[0] = 2;
	((int64_t *)label->data)[1] = 0;
	RT_OK(tbcrt_session_bind_input(s, 0, TBC_DT_F32, 4, xd, x->data, 72 * 4));
	RT_OK(tbcrt_session_bind_input(s, 1, TBC_DT_I64, 1, ld, label->data, 16));
	/* The interpreter's inputs: x, label, then the state as it starts. */
	tbc_graph *g = m->main;
	tbc_tensor *in[64] = {x, label}, *out[64] = {NULL};
	assert_true(g->n_inputs <= 64 && g->n_outputs <= 64);
	for (int k = 0; k < m->n_state; k++) {
		const tbc_value *v = g->inputs[m->state[k].input];
		int64_t dims[TBC_MAX_RANK];
		for (int i = 0; i < v->type.rank; i++) dims[i] = v->type.dims[i].size;
		tbc_tensor *t = m->state[k].init ? tbc_tensor_clone(m->state[k].init) : tbc_tensor_create(v->type.dtype, v->type.rank, dims);
		if (!m->state[k].init) memset(t->data, 0, (size_t)t->numel * tbc_dtype_size(t->dtype));
		in[m->state[k].input] = t;
	}
	steps_match_the_interpreter(m, s, in, out, 1e-5f, 1e-4f, d);
	for (int i = 0; i < g->n_inputs; i++) tbc_tensor_destroy(in[i]);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(jit);
	tbc_module_destroy(m);
	tbc_module_destroy(ref);
	tbc_diags_destroy(d);
}

/* Load-time values (ABI 5, docs/load-time.md) in a training step: y =
 * (x @ Expand(row, [64, 512])) @ w, the Expand 128 KiB, too large to fold.
 * With only w trainable, row stays a constant and the Expand is computed
 * once per session (init) beside the state; with every weight trainable,
 * row is state (an input) and nothing may be computed from it at load time.
 * Either way three SGD steps match the interpreter, state fed back by hand. */
static const char *expand_text(void) {
	static char text[32768];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 17\ngraph main(%%x: f32[2,64]) {\n  %%row: f32[1,512] = const [");
	for (int i = 0; i < 512; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%s%.4f", i ? ", " : "", 0.05 * sin(0.3 * i));
	n += snprintf(text + n, sizeof text - (size_t)n, "]\n  %%w: f32[512,2] = const [");
	for (int i = 0; i < 1024; i++) n += snprintf(text + n, sizeof text - (size_t)n, "%s%.4f", i ? ", " : "", 0.05 * cos(0.7 * i));
	snprintf(text + n, sizeof text - (size_t)n,
		 "]\n"
		 "  %%shape: i64[2] = const [64, 512]\n"
		 "  %%big: f32[64,512] = Expand(%%row, %%shape)\n"
		 "  %%h: f32[2,512] = MatMul(%%x, %%big)\n"
		 "  %%y: f32[2,2] = MatMul(%%h, %%w)\n"
		 "  return %%y\n"
		 "}\n");
	return text;
}

static void expand_steps_match_the_interpreter(const char *trainable, uint64_t *load_time_bytes, uint32_t *n_state) {
	tbc_train_options to;
	tbc_train_options_init(&to);
	char loss[] = "mse:y:t";
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_train_parse_loss(&to, loss, d), TBC_OK);
	to.optimizer = TBC_OPT_SGD;
	to.lr = 0.001;
	to.trainable = trainable;
	tbc_module *ref = tbc_parse(expand_text(), "expand.ir", d);
	assert_non_null(ref);
	tbc_infer cx = {.module = ref, .diags = d, .static_ranks = true};
	assert_true(tbc_infer_graph(&cx, ref->main));
	tbc_module *m = tbc_module_clone(ref);
	assert_non_null(m);
	assert_true(tbc_train_build(m, &to, d));
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.train = &to;
	tbc_jit *jit = NULL;
	assert_int_equal(tbc_jit_compile(ref, &o, d, &jit), TBC_OK);
	tbcrt_context *c = NULL;
	tbcrt_model *model = NULL;
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_context_create(NULL, &c));
	RT_OK(tbcrt_model_from_descriptor(c, tbc_jit_descriptor(jit), NULL, &model));
	RT_OK(tbcrt_session_create(model, &s));
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	assert_int_equal((int)info.n_state, m->n_state);
	*load_time_bytes = info.load_time_bytes;
	*n_state = info.n_state;
	tbcrt_session_stats stats;
	RT_OK(tbcrt_session_get_stats(s, &stats));
	assert_int_equal(stats.init_runs, info.load_time_bytes ? 1 : 0);

	int64_t xd[2] = {2, 64}, td[2] = {2, 2};
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, xd), *t = tbc_tensor_create(TBC_DT_F32, 2, td);
	for (int i = 0; i < 128; i++) ((float *)x->data)[i] = (float)cos(0.9 * i);
	for (int i = 0; i < 4; i++) ((float *)t->data)[i] = (float)(0.5 * i - 1);
	uint32_t xi, ti;
	RT_OK(tbcrt_model_find_input(model, "x", &xi));
	RT_OK(tbcrt_model_find_input(model, "t", &ti));
	RT_OK(tbcrt_session_bind_input(s, xi, TBC_DT_F32, 2, xd, x->data, 128 * 4));
	RT_OK(tbcrt_session_bind_input(s, ti, TBC_DT_F32, 2, td, t->data, 4 * 4));
	tbc_graph *g = m->main;
	tbc_tensor *in[16] = {NULL}, *out[16] = {NULL};
	assert_true(g->n_inputs <= 16 && g->n_outputs <= 16);
	in[xi] = x;
	in[ti] = t;
	for (int k = 0; k < m->n_state; k++) {
		assert_non_null(m->state[k].init); /* SGD: the weights alone */
		in[m->state[k].input] = tbc_tensor_clone(m->state[k].init);
	}
	steps_match_the_interpreter(m, s, in, out, 1e-4f, 1e-3f, d);
	RT_OK(tbcrt_session_get_stats(s, &stats));
	assert_int_equal(stats.init_runs, info.load_time_bytes ? 1 : 0); /* once, not per step */
	assert_int_equal(stats.runs, 3);
	for (int i = 0; i < g->n_inputs; i++) tbc_tensor_destroy(in[i]);
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
	tbc_jit_destroy(jit);
	tbc_module_destroy(m);
	tbc_module_destroy(ref);
	tbc_diags_destroy(d);
}

static void load_time_values_come_from_constants_never_from_state(void **state) {
	(void)state;
	uint64_t bytes = 0;
	uint32_t n_state = 0;
	expand_steps_match_the_interpreter("w", &bytes, &n_state);
	assert_int_equal(n_state, 1);
	assert_true(bytes >= 64 * 512 * 4); /* the Expand of the frozen row, computed once */
	expand_steps_match_the_interpreter(NULL, &bytes, &n_state);
	assert_int_equal(n_state, 2);
	assert_int_equal(bytes, 0); /* row is state: its Expand is computed at every step */
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sgd_state_starts_from_the_initializer_and_is_carried_between_runs),
		cmocka_unit_test(adamw_slots_start_from_zeros),
		cmocka_unit_test(a_model_has_no_state),
		cmocka_unit_test(cnn_adamw_steps_compiled_match_the_interpreter),
		cmocka_unit_test(load_time_values_come_from_constants_never_from_state),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
