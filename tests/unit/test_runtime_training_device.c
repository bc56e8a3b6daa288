/* Training steps on a device other than the CPU (docs/training.md, "On a
 * device"): the state stays in the device's memory between runs, and every
 * step there matches the same artifact's step on the CPU; the state read
 * back (tbcrt_session_state), written (tbcrt_session_set_state) and changed
 * through the memory tbcrt_session_state lends behaves as on the CPU.  Runs
 * on opencl:0 (PoCL here); the CUDA and HIP devices share the code
 * (runtime/device_session.c) and are checked on a GPU by
 * tests/conformance/device_training.sh.
 *
 * Artifacts are shared objects, not the JIT: PoCL under ASan (support/pocl.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "tests/runtime/rt_device.h"
#include "tests/runtime/rt_train.h"
#include "tests/unit/support/files.h"

/* rt_train.h's y = x @ w, mse against t, with AdamW (state: w, its step
 * count and its two slots), compiled for the CPU and OpenCL into path. */
static void compile_step(const char *path) {
	tbc_module *m = rt_train_model();
	tbc_diags *d = tbc_diags_create();
	tbc_train_options to;
	tbc_train_options_init(&to);
	char loss[] = "mse:y:t";
	assert_int_equal(tbc_train_parse_loss(&to, loss, d), TBC_OK);
	to.optimizer = TBC_OPT_ADAMW;
	to.lr = 0.05;
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = TBC_TARGETS_CPU | TBC_TARGETS_OPENCL;
	o.train = &to;
	compile_to(m, &o, path);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

static tbcrt_session *session_on(tbcrt_model *model, uint32_t device) {
	tbcrt_session *s = rt_session_on(model, device);
	rt_train_bind_batch(model, s);
	return s;
}

/* Every piece of state and the loss agree between the two sessions. */
static void same_state(tbcrt_model *model, tbcrt_session *cpu, tbcrt_session *dev, const char *when) {
	tbcrt_model_info info;
	RT_OK(tbcrt_model_get_info(model, &info));
	for (uint32_t k = 0; k < info.n_state; k++) {
		tbcrt_tensor a, b;
		RT_OK(tbcrt_session_state(cpu, k, &a));
		RT_OK(tbcrt_session_state(dev, k, &b));
		assert_int_equal(a.bytes, b.bytes);
		const float *x = a.data, *y = b.data;
		for (size_t i = 0; i < a.bytes / sizeof(float); i++)
			if (!(fabsf(x[i] - y[i]) <= 1e-5f + 1e-5f * fabsf(x[i])))
				fail_msg("%s: state %u [%zu]: cpu %.9g, opencl %.9g", when, k, i, x[i], y[i]);
	}
}

static float loss_of(tbcrt_model *model, tbcrt_session *s) {
	uint32_t li;
	RT_OK(tbcrt_model_find_output(model, "loss", &li));
	tbcrt_tensor loss;
	RT_OK(tbcrt_session_output(s, li, &loss));
	return *(const float *)loss.data;
}

static void adamw_steps_on_opencl_match_the_cpu(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(2);
	(void)rt_device_or_skip(c, "opencl:0");
	uint32_t ocl;
	RT_OK(tbcrt_device_find(c, "opencl:0", &ocl));
	const char *so = tmp_path("adamw_step.so");
	compile_step(so);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	tbcrt_session *cpu = session_on(model, 0), *dev = session_on(model, ocl);
	same_state(model, cpu, dev, "before the first step");
	float prev = INFINITY;
	char when[64];
	for (int step = 1; step <= 4; step++) {
		RT_OK(tbcrt_session_run(cpu));
		RT_OK(tbcrt_session_run(dev));
		snprintf(when, sizeof when, "after step %d", step);
		same_state(model, cpu, dev, when);
		float l = loss_of(model, dev);
		assert_true(fabsf(l - loss_of(model, cpu)) <= 1e-5f * fabsf(l) + 1e-7f);
		assert_true(l < prev); /* it trains */
		prev = l;
	}
	/* The step count is the device's: four steps taken. */
	tbcrt_tensor t;
	RT_OK(tbcrt_session_state(dev, 1, &t));
	assert_true(*(const float *)t.data == 4.0f);

	/* Written through tbcrt_session_set_state, and through the memory
	 * tbcrt_session_state lends: the next step starts from it on both. */
	float w[6] = {0.1f, 0.2f, 0.3f, -0.1f, -0.2f, -0.3f};
	RT_OK(tbcrt_session_set_state(cpu, 0, w, sizeof w));
	RT_OK(tbcrt_session_set_state(dev, 0, w, sizeof w));
	RT_ERR(tbcrt_session_set_state(dev, 0, w, 5), TBCRT_ERR_SHAPE_MISMATCH, "holds 24 bytes");
	same_state(model, cpu, dev, "after set_state");
	RT_OK(tbcrt_session_run(cpu));
	RT_OK(tbcrt_session_run(dev));
	same_state(model, cpu, dev, "after a step from the state set");
	tbcrt_tensor a, b;
	RT_OK(tbcrt_session_state(cpu, 2, &a)); /* w.adam_m */
	RT_OK(tbcrt_session_state(dev, 2, &b));
	for (size_t i = 0; i < a.bytes / sizeof(float); i++) ((float *)a.data)[i] = ((float *)b.data)[i] = 0.5f;
	RT_OK(tbcrt_session_run(cpu));
	RT_OK(tbcrt_session_run(dev));
	same_state(model, cpu, dev, "after a step from the state written in place");

	tbcrt_session_destroy(cpu);
	tbcrt_session_destroy(dev);
	tbcrt_model_destroy(model);
	tbcrt_context_destroy(c);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(adamw_steps_on_opencl_match_the_cpu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
