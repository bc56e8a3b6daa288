/* The training tests' model (tests/unit/test_runtime_training*.c): y = x @ w
 * with w [3, 2] a weight, an mse loss against t, one batch of two rows. */
#ifndef RT_TRAIN_H
#define RT_TRAIN_H

#include "ir/ir.h"
#include "tbc/runtime.h"
#include "tbc/tbc.h"
#include "tests/runtime/rt_test.h"

static const float RT_TRAIN_W0[6] = {0.5f, -0.25f, 0.75f, 0.125f, -0.5f, 0.25f};
static const float RT_TRAIN_X[6] = {1, 2, -1, 0.5f, -1.5f, 2};
static const float RT_TRAIN_T[4] = {0.25f, -1, 0.5f, 1.5f};

static inline tbc_module *rt_train_model(void) {
	const char *text = "module ir_version 8 opset 17\n"
			   "graph main(%x: f32[2,3]) {\n"
			   "  %w: f32[3,2] = const [0.5, -0.25, 0.75, 0.125, -0.5, 0.25]\n"
			   "  %y = MatMul(%x, %w)\n"
			   "  return %y\n"
			   "}\n";
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	assert_non_null(m);
	tbc_infer cx = {.module = m, .diags = d};
	assert_true(tbc_infer_graph(&cx, m->main));
	tbc_diags_destroy(d);
	return m;
}

/* Binds x and t (the label) of the batch. */
static inline void rt_train_bind_batch(tbcrt_model *model, tbcrt_session *s) {
	uint32_t xi, ti;
	RT_OK(tbcrt_model_find_input(model, "x", &xi));
	RT_OK(tbcrt_model_find_input(model, "t", &ti));
	int64_t xd[2] = {2, 3}, td[2] = {2, 2};
	RT_OK(tbcrt_session_bind_input(s, xi, TBC_DT_F32, 2, xd, RT_TRAIN_X, sizeof RT_TRAIN_X));
	RT_OK(tbcrt_session_bind_input(s, ti, TBC_DT_F32, 2, td, RT_TRAIN_T, sizeof RT_TRAIN_T));
}

#endif
