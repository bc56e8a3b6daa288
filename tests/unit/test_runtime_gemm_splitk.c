/* Split-K for GEMMs with few tiles on devices (codegen/lower/gemm_splitk.c):
 * when it is chosen (the cuda, rocm and opencl descriptions; never for
 * f64, symbolic sizes, tiles that fill the device or the CPU), what the
 * kernel IR evaluator computes for it against the interpreter (grid loops
 * run backwards, so slices that raced would show), TBC_GEMM_SPLITK forcing
 * and refusing it, and the OpenCL artifact run on PoCL: the interpreter's
 * results within f32 rounding, the same bits on every run, and close to
 * what the one-pass kernel gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/target_desc.h"
#include "tbc/tbc.h"
/* PoCL under AddressSanitizer needs slow unwinding on every malloc
 * (support/pocl.h), which deadlocks with the JIT's registration of its
 * frames (test_runtime_opencl_model.c says so too), and this program JITs
 * the CPU's form of every case: so a sanitized build leaves PoCL out. */
#include "tests/unit/support/sanitized.h"
#if !TBC_TEST_SANITIZED
#include "tests/runtime/rt_device.h"
#else
#include "tests/runtime/rt_test.h"
#endif
#include "tests/unit/support/codegen_check.h"
#include "tests/unit/support/files.h"

/* ---- Graphs -------------------------------------------------------------------*/

/* A symbolic dim of a or b is `batch` in the test's tensors. */
static tbc_value *matmul_n(model *md, tbc_dtype dt, const char *a, const char *b, int64_t batch) {
	return op2(md, TBC_OP_MatMul, input_sym(md, dt, a, batch, -1, 1), input_sym(md, dt, b, batch, -1, 1));
}
static tbc_value *matmul(model *md, tbc_dtype dt, const char *a, const char *b) { return matmul_n(md, dt, a, b, 3); }

/* Conv of x by w (3 x 3, pads 1) with a bias of `bias` channels (NULL:
 * none) in `group` groups; a symbolic batch is 1 in the test's tensors. */
static tbc_value *conv3x3(model *md, const char *x, const char *w, const char *bias, int64_t group) {
	tbc_value *b = bias ? input_sym(md, TBC_DT_F32, bias, 3, -1, 1) : NULL;
	tbc_op *o = node(md, TBC_OP_Conv, b ? 3 : 2, input_sym(md, TBC_DT_F32, x, 1, -1, 1),
			 input_sym(md, TBC_DT_F32, w, 3, -1, 1), b);
	attr_ints(o, "pads", 4, (int64_t[]){1, 1, 1, 1});
	if (group != 1) attr_int(o, "group", group);
	return o->outputs[0];
}

static tbc_op *gemm_op(model *md, tbc_value *a, tbc_value *b, tbc_value *c, double alpha, double beta) {
	tbc_op *o = node(md, TBC_OP_Gemm, 3, a, b, c);
	attr_int(o, "transA", 1);
	attr_int(o, "transB", 1);
	tbc_op_add_attr(o, "alpha", TBC_ATTR_FLOAT)->f = alpha;
	tbc_op_add_attr(o, "beta", TBC_ATTR_FLOAT)->f = beta;
	return o;
}

/* The program text of md (lowered for g_target) with out as its output. */
static char *lowered(model *md, tbc_value *out) {
	tbc_graph_add_output(md->m->main, out);
	return lowered_text(md);
}

static void has(const char *text, const char *what) {
	if (!strstr(text, what)) {
		if (getenv("TBC_TEST_VERBOSE")) fputs(text, stderr);
		fail_msg("the lowered program has no \"%s\"", what);
	}
}

/* ---- When ---------------------------------------------------------------------*/
/* ResNet-50's last 3 x 3 convolutions at batch 1 on an H100/H200 (sm_90,
 * 132 SMs): 512 channels x 49 pixels make 32 tiles of 32 x 32, K = 4608 is
 * 144 steps of 32: 16 slices of 9 steps, 512 groups.  With the batch known
 * only while running (the bench model's), the slices are computed while
 * running.  A 1024^3 MatMul fills the device alone; f64, a symbolic row
 * count and the CPU stay one pass. */
static void test_split_k_where_the_tiles_are_few(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_cuda(90);
	assert_int_equal(dev.compute_units, 132);
	g_target = &dev;
	model md = model_new();
	char *text = lowered(&md, conv3x3(&md, "1,512,7,7", "512,512,3,3", "512", 1));
	has(text, "kernel k1_conv_slices() group(16, 16)");
	has(text, "for %slice = 0 .. 16 grid");
	has(text, "for %kt = %slice * 9 .. min(%slice * 9 + 9, 144) sequential");
	has(text, "temp splitk: f32[1, 401408]"); /* 16 x 512 x 49 */
	has(text, "kernel k1_conv() contract {"); /* the sum and the epilogue */
	has(text, "for %f = 0 .. 25088 parallel");
	has(text, "for %sl = 1 .. 16 sequential");
	free(text);
	md = model_new();
	text = lowered(&md, matmul(&md, TBC_DT_F32, "1024,1024", "1024,1024"));
	assert_null(strstr(text, "_slices"));
	free(text);
	md = model_new();
	text = lowered(&md, matmul(&md, TBC_DT_F64, "3,2048", "2048,40"));
	assert_null(strstr(text, "_slices"));
	free(text);
	/* A batch known only while running: one pass unless asked for
	 * (TBC_GEMM_SPLITK_DYNAMIC=1; measured slower on an H200), then
	 * slices computed while running. */
	assert_int_equal(unsetenv("TBC_GEMM_SPLITK_DYNAMIC"), 0);
	md = model_new();
	text = lowered(&md, conv3x3(&md, "N,512,7,7", "512,512,3,3", "512", 1));
	assert_null(strstr(text, "_slices"));
	free(text);
	assert_int_equal(setenv("TBC_GEMM_SPLITK_DYNAMIC", "1", 1), 0);
	md = model_new();
	text = lowered(&md, conv3x3(&md, "N,512,7,7", "512,512,3,3", "512", 1));
	has(text, "kernel k1_conv_slices($N) group(16, 16)");
	/* the tile stays 64 x 64 (8 tiles an image) without the batch: batches
	 * up to 16 split, 16 in 5 slices taking the most partials, 80 x 25088 */
	has(text, "temp splitk: f32[1, 2007040]");
	free(text);
	md = model_new();
	text = lowered(&md, matmul(&md, TBC_DT_F32, "N,2048", "2048,40"));
	assert_null(strstr(text, "_slices"));
	free(text);
	/* a matrix-vector product on an MI300X (304 CUs): 16 tiles of 256
	 * columns, 256 steps of 16: the most slices, 64 */
	dev = tbc_target_desc_rocm("gfx942");
	md = model_new();
	text = lowered(&md, matmul(&md, TBC_DT_F32, "1,4096", "4096,4096"));
	has(text, "for %slice = 0 .. 64 grid");
	free(text);
	g_target = NULL;
	md = model_new();
	text = lowered(&md, matmul(&md, TBC_DT_F32, "3,2048", "2048,40"));
	assert_null(strstr(text, "_slices"));
	free(text);
}

/* ---- What -----------------------------------------------------------------------*/
/* Lowered for an OpenCL device (16 groups of 64 fill it) and for sm_90,
 * each split GEMM against the interpreter: a few rows, a batch, Gemm's
 * transposes, alpha, beta and C in the epilogue, Conv's bias, groups. */
static void test_split_k_matches_the_interpreter(void **state) {
	(void)state;
	double atol = g_atol;
	g_atol = 1e-4; /* sums of thousands of products */
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	model md = model_new();
	char *text = lowered(&md, matmul(&md, TBC_DT_F32, "3,2048", "2048,40"));
	has(text, "for %slice = 0 .. 16 grid"); /* 256 steps of 8: 16 slices of 16 */
	free(text);
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){matmul(&md, TBC_DT_F32, "3,2048", "2048,40")}, 1e-4);
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){matmul(&md, TBC_DT_F32, "3,8,512", "512,16")}, 1e-4);
	md = model_new();
	tbc_value *a = input_sym(&md, TBC_DT_F32, "1000,5", 3, -1, 1), *b = input_sym(&md, TBC_DT_F32, "30,1000", 3, -1, 1);
	tbc_value *c = input_sym(&md, TBC_DT_F32, "30", 3, -1, 1);
	check_outputs(&md, 1, (tbc_value *[]){gemm_op(&md, a, b, c, 0.5, -2)->outputs[0]}, 1e-4);
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){conv3x3(&md, "1,128,7,7", "64,128,3,3", "64", 1)}, 1e-4);
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){conv3x3(&md, "2,64,5,5", "32,32,3,3", "32", 2)}, 1e-4);
	md = model_new(); /* the groups' GEMMs (batch x group = 4 of them) are split */
	text = lowered(&md, conv3x3(&md, "2,64,5,5", "32,32,3,3", "32", 2));
	has(text, "for %batch = 0 .. 16 grid"); /* 4 (batch, group) pairs x 4 slices */
	free(text);
	/* a batch known only while running: split at 1 (8 slices of 4 steps),
	 * at 5 (4 slices: 5 groups of 64 x 4 reach the 1024 items), one pass
	 * at 16 (16 tiles fill the 16 units) */
	static const int64_t batches[] = {1, 5, 16};
	for (int i = 0; i < 3; i++) {
		md = model_new();
		check_outputs(&md, 1, (tbc_value *[]){matmul_n(&md, TBC_DT_F32, "N,3,256", "256,8", batches[i])}, 1e-4);
	}
	dev = tbc_target_desc_cuda(90); /* 256 items of 2 x 2 outputs, TK 32 */
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){conv3x3(&md, "1,64,7,7", "128,64,3,3", NULL, 1)}, 1e-4);
	md = model_new();
	text = lowered(&md, conv3x3(&md, "1,64,7,7", "128,64,3,3", NULL, 1));
	has(text, "for %slice = 0 .. 4 grid"); /* 18 steps: 4 slices of 5 */
	free(text);
	md = model_new(); /* and with the batch known only while running */
	check_outputs(&md, 1, (tbc_value *[]){conv3x3(&md, "N,64,7,7", "128,64,3,3", "128", 1)}, 1e-4);
	g_target = NULL;
	g_atol = atol;
}

/* TBC_GEMM_SPLITK=S forces S slices (at most one per step of K); 1 keeps
 * one pass. */
static void test_split_k_forced_and_refused(void **state) {
	(void)state;
	static tbc_target_desc dev;
	dev = tbc_target_desc_opencl_default();
	g_target = &dev;
	assert_int_equal(setenv("TBC_GEMM_SPLITK", "3", 1), 0);
	model md = model_new();
	char *text = lowered(&md, matmul(&md, TBC_DT_F32, "33,40", "40,65")); /* 3 steps of 16 */
	has(text, "for %slice = 0 .. 3 grid");
	free(text);
	md = model_new();
	check_outputs(&md, 1, (tbc_value *[]){matmul(&md, TBC_DT_F32, "33,40", "40,65")}, 1e-4);
	assert_int_equal(setenv("TBC_GEMM_SPLITK", "1", 1), 0);
	md = model_new();
	text = lowered(&md, matmul(&md, TBC_DT_F32, "3,2048", "2048,40"));
	assert_null(strstr(text, "_slices"));
	free(text);
	assert_int_equal(unsetenv("TBC_GEMM_SPLITK"), 0);
	g_target = NULL;
}

/* ---- On PoCL --------------------------------------------------------------------*/
#if !TBC_TEST_SANITIZED
typedef struct run_out {
	float *y[2];
	int64_t n[2];
	bool split; /* a kernel named *_slices in the artifact */
} run_out;

/* md's graph (its outputs added) compiled for OpenCL, run on opencl:0
 * twice: the two runs' outputs must have the same bits. */
static run_out run_on_opencl(tbcrt_context *c, uint32_t ocl, model *md, const char *name) {
	char so[256];
	snprintf(so, sizeof so, "%s", tmp_path(name));
	tbc_compile_options o;
	tbc_compile_options_init(&o);
	o.targets = TBC_TARGETS_OPENCL;
	compile_to(md->m, &o, so);
	tbcrt_model *model = NULL;
	RT_OK(tbcrt_model_load(c, so, &model));
	run_out r = {0};
	tbcrt_device_code_info dc;
	RT_OK(tbcrt_model_device_code(model, 0, &dc));
	for (uint32_t k = 0; k < dc.n_kernels; k++) {
		tbcrt_kernel_info ki;
		RT_OK(tbcrt_model_device_kernel(model, 0, k, &ki));
		r.split |= strstr(ki.name, "_slices") != NULL;
	}
	tbcrt_session_options so_;
	tbcrt_session_options_init(&so_);
	so_.device = ocl;
	tbcrt_session *s = NULL;
	RT_OK(tbcrt_session_create_with(model, &so_, &s));
	for (int i = 0; i < md->n_in; i++) {
		tbc_tensor *t = md->in[i];
		RT_OK(tbcrt_session_bind_input(s, (uint32_t)i, (int32_t)t->dtype, (uint32_t)t->rank, t->dims, t->data,
					       (size_t)t->numel * tbc_dtype_size(t->dtype)));
	}
	int n_out = md->m->main->n_outputs;
	assert_true(n_out <= 2);
	for (int run = 0; run < 2; run++) {
		RT_OK(tbcrt_session_run(s));
		for (int i = 0; i < n_out; i++) {
			tbcrt_tensor t;
			RT_OK(tbcrt_session_output(s, (uint32_t)i, &t));
			if (run == 0) {
				r.n[i] = (int64_t)(t.bytes / 4);
				r.y[i] = malloc(t.bytes);
				memcpy(r.y[i], t.data, t.bytes);
			} else if (memcmp(r.y[i], t.data, t.bytes)) {
				fail_msg("%s: output %d differs between two runs", name, i);
			}
		}
	}
	tbcrt_session_destroy(s);
	tbcrt_model_destroy(model);
	return r;
}

static void close_to(const char *what, const float *got, const float *want, int64_t n, double tol) {
	for (int64_t i = 0; i < n; i++)
		if (!(fabs((double)got[i] - want[i]) <= tol + tol * fabs((double)want[i])))
			fail_msg("%s: [%lld] = %.9g, expected %.9g", what, (long long)i, got[i], want[i]);
}

/* md's outputs on PoCL, split and in one pass (TBC_GEMM_SPLITK=1), against
 * the interpreter and each other; whether the artifact split. */
static bool check_on_opencl(tbcrt_context *c, uint32_t ocl, model *md, int n_out) {
	tbc_diags *d = tbc_diags_create();
	tbc_infer cx = {.module = md->m, .diags = d};
	assert_true(tbc_infer_graph(&cx, md->m->main));
	tbc_tensor *want[2] = {0};
	assert_int_equal(tbc_interpret(md->m, md->in, (size_t)md->n_in, want, (size_t)n_out, d), TBC_OK);
	run_out split = run_on_opencl(c, ocl, md, "splitk.so");
	assert_int_equal(setenv("TBC_GEMM_SPLITK", "1", 1), 0);
	run_out one = run_on_opencl(c, ocl, md, "onepass.so");
	assert_int_equal(unsetenv("TBC_GEMM_SPLITK"), 0);
	assert_false(one.split);
	for (int i = 0; i < n_out; i++) {
		assert_int_equal(split.n[i], want[i]->numel);
		close_to("split-K against the interpreter", split.y[i], want[i]->data, split.n[i], 1e-4);
		close_to("one pass against the interpreter", one.y[i], want[i]->data, one.n[i], 1e-4);
		close_to("split-K against one pass", split.y[i], one.y[i], split.n[i], 1e-4);
		free(split.y[i]);
		free(one.y[i]);
		tbc_tensor_destroy(want[i]);
	}
	tbc_diags_destroy(d);
	for (int i = 0; i < md->n_in; i++) tbc_tensor_destroy(md->in[i]);
	tbc_module_destroy(md->m);
	return split.split;
}

/* A MatMul of 3 rows and K 2048, and a Conv (K 1152) then Relu, compiled
 * for OpenCL: both split (16 and 15 slices), run on PoCL; a MatMul whose
 * batch is known only while running, at batch 1 (8 slices) and 16 (one
 * slice: the grouped kernel stores y, the sum kernel runs no item). */
static void test_split_k_runs_on_opencl(void **state) {
	(void)state;
	tbcrt_context *c = rt_context(2);
	(void)rt_device_or_skip(c, "opencl:0");
	uint32_t ocl;
	RT_OK(tbcrt_device_find(c, "opencl:0", &ocl));
	model md = model_new();
	tbc_graph_add_output(md.m->main, matmul(&md, TBC_DT_F32, "3,2048", "2048,40"));
	tbc_graph_add_output(md.m->main, op1(&md, TBC_OP_Relu, conv3x3(&md, "1,128,7,7", "64,128,3,3", "64", 1)));
	assert_true(check_on_opencl(c, ocl, &md, 2));
	static const int64_t batches[] = {1, 16};
	for (int i = 0; i < 2; i++) {
		md = model_new();
		tbc_graph_add_output(md.m->main, matmul_n(&md, TBC_DT_F32, "N,3,256", "256,8", batches[i]));
		assert_true(check_on_opencl(c, ocl, &md, 1));
	}
	tbcrt_context_destroy(c);
}
#else
static void test_split_k_runs_on_opencl(void **state) {
	(void)state;
	printf("skipped: PoCL in a sanitized build (its unwinding deadlocks with the JIT this program uses)\n");
	skip();
}
#endif

int main(void) {
#if !TBC_TEST_SANITIZED
	tbc_pocl_setup();
#endif
	/* the run-time split is opt-in (gemm_splitk.c); its cases are checked here */
	setenv("TBC_GEMM_SPLITK_DYNAMIC", "1", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_k_where_the_tiles_are_few),
		cmocka_unit_test(test_split_k_matches_the_interpreter),
		cmocka_unit_test(test_split_k_forced_and_refused),
		cmocka_unit_test(test_split_k_runs_on_opencl),
	};
	return cmocka_run_group_tests(tests, NULL, tbc_test_remove_dir);
}
