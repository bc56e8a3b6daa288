/* The accuracy budget's search (codegen/budget.c, docs/precision.md): on a
 * model whose float16 lowering overflows (a product above 65504 feeding a
 * Softmax) and one that loses a large-magnitude subtraction, the search
 * names exactly the nodes that must stay float32 and the compile then meets
 * the budget; a model already within budget keeps everything lowered; a
 * malformed budget, calibration files that do not match the model, and a
 * budget no assignment meets are errors that say what is wrong, and a
 * compile to a file then writes nothing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ir/ir.h"
#include "tbc/abi.h"
#include "tests/unit/support/files.h"
#include "tests/unit/support/command.h"

static tbc_module *parse(const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	if (!m) tbc_test_fail_with("parse", d);
	tbc_infer cx = {.module = m, .diags = d};
	assert_true(tbc_infer_graph(&cx, m->main));
	tbc_diags_destroy(d);
	return m;
}

/* x [4,8] -> MatMul (small weights) -> Relu -> MatMul by 400 (about
 * 8 * 100 * 400 = 320000 for inputs near 100: beyond float16's 65504) ->
 * Softmax (kept float32 by the policy, but it reads an infinity) -> MatMul
 * -> Tanh.  big_name "" leaves the overflowing product unnamed. */
static char *overflow_text(const char *big_name) {
	static char text[8192];
	int n = snprintf(text, sizeof text, "module ir_version 8 opset 17\ngraph main(%%x: f32[4,8]) {\n");
	const char *w[] = {"w1", "wbig", "w3"};
	for (int k = 0; k < 3; k++) {
		n += snprintf(text + n, sizeof text - (size_t)n, "  %%%s: f32[8,8] = const [", w[k]);
		for (int i = 0; i < 64; i++) {
			double v = k == 0 ? (i % 9 == 0 ? 1.0 : 0.01 * (i % 5)) : k == 1 ? 400.0 - (i % 3) : 0.1 * ((i % 7) - 3);
			n += snprintf(text + n, sizeof text - (size_t)n, "%s%g", i ? ", " : "", v);
		}
		n += snprintf(text + n, sizeof text - (size_t)n, "]\n");
	}
	snprintf(text + n, sizeof text - (size_t)n,
		 "  %%a: f32[4,8] = MatMul(%%x, %%w1) @mm1\n"
		 "  %%r: f32[4,8] = Relu(%%a) @relu1\n"
		 "  %%b: f32[4,8] = MatMul(%%r, %%wbig)%s%s\n"
		 "  %%s: f32[4,8] = Softmax(%%b) {axis = 1} @softmax\n"
		 "  %%c: f32[4,8] = MatMul(%%s, %%w3) @mm3\n"
		 "  %%y: f32[4,8] = Tanh(%%c) @tanh\n"
		 "  return %%y\n"
		 "}\n",
		 *big_name ? " @" : "", big_name);
	return text;
}

/* d = (x @ [300, 1]) - (x @ [300, 0]) with x[:, 0] = 100: 30000 + x1 minus
 * 30000.  Float16's spacing at 30000 is 16, so the lowered difference is a
 * multiple of 16; 30000 itself is exact in float16, so only the first
 * product has to stay float32 (the Sub then computes in float32: the
 * widest input wins). */
static const char *const subtraction_text =
	"module ir_version 8 opset 17\n"
	"graph main(%x: f32[4,2]) {\n"
	"  %wa: f32[2,1] = const [300, 1]\n"
	"  %wb: f32[2,1] = const [300, 0]\n"
	"  %a: f32[4,1] = MatMul(%x, %wa) @mm_a\n"
	"  %b: f32[4,1] = MatMul(%x, %wb) @mm_b\n"
	"  %d: f32[4,1] = Sub(%a, %b) @sub\n"
	"  return %d\n"
	"}\n";

/* A calibration folder under the test's scratch folder: n_sets subfolders
 * s0, s1, ... each with x.npy of the given shape, from fill(set, i). */
static const char *make_calib(const char *name, int n_sets, int rank, const int64_t *dims,
			      float (*fill)(int set, int64_t i)) {
	static char dir[256];
	snprintf(dir, sizeof dir, "%s", tmp_path(name));
	mkdir(dir, 0777);
	for (int s = 0; s < n_sets; s++) {
		char sub[300], file[320];
		snprintf(sub, sizeof sub, "%s/s%d", dir, s);
		mkdir(sub, 0777);
		snprintf(file, sizeof file, "%s/x.npy", sub);
		tbc_tensor *t = tbc_tensor_create(TBC_DT_F32, rank, dims);
		assert_non_null(t);
		for (int64_t i = 0; i < t->numel; i++) ((float *)t->data)[i] = fill(s, i);
		tbc_diags *d = tbc_diags_create();
		assert_int_equal(tbc_tensor_write_npy(file, t, d), TBC_OK);
		tbc_diags_destroy(d);
		tbc_tensor_destroy(t);
	}
	return dir;
}

static float near_100(int set, int64_t i) { return 90.0f + (float)((i * 7 + set * 3) % 20); }
static float small(int set, int64_t i) { return 0.01f * (float)((i * 5 + set) % 7) - 0.03f; }
/* x[:, 0] = 100, x[:, 1] in [-1, 1). */
static float hundred_and_small(int set, int64_t i) {
	return i % 2 == 0 ? 100.0f : (float)sin(1.3 * (double)i + set) * 0.9f;
}

static const int64_t x_dims[2] = {4, 8};
static const int64_t sub_dims[2] = {4, 2};

static void options(tbc_compile_options *o, int precision, const char *budget, const char *calib, FILE *report) {
	tbc_compile_options_init(o);
	o->precision = precision;
	o->accuracy_budget = budget;
	o->calibrate = calib;
	o->stats_file = report;
}

/* The search's answer, or the test fails with the library's message. */
static char *search_ok(const tbc_module *m, const tbc_compile_options *o) {
	tbc_diags *d = tbc_diags_create();
	char *exclude = NULL;
	if (tbc_precision_search(m, o, d, &exclude) != TBC_OK) tbc_test_fail_with("search", d);
	tbc_diags_destroy(d);
	assert_non_null(exclude);
	return exclude;
}

/* The search's error: its code, the first message into msg. */
static tbc_code search_fails(const tbc_module *m, const tbc_compile_options *o, char *msg, size_t size) {
	tbc_diags *d = tbc_diags_create();
	char *exclude = (char *)"unchanged";
	tbc_code rc = tbc_precision_search(m, o, d, &exclude);
	assert_int_not_equal(rc, TBC_OK);
	assert_null(exclude);
	assert_true(tbc_diags_count(d) > 0);
	tbc_diag_format(tbc_diags_get(d, 0), msg, size);
	printf("error: %s\n", msg);
	tbc_diags_destroy(d);
	return rc;
}

#define HAS(s, text)                                                                  \
	do {                                                                          \
		if (!strstr((s), (text))) fail_msg("expected \"%s\" in: %s", (text), (s)); \
	} while (0)

/* Runs m compiled with o (JIT) on the calibration input of set 0. */
static tbc_tensor *run_jit(const tbc_module *m, const tbc_compile_options *o, int rank, const int64_t *dims,
			   float (*fill)(int, int64_t)) {
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, rank, dims);
	for (int64_t i = 0; i < x->numel; i++) ((float *)x->data)[i] = fill(0, i);
	tbc_diags *d = tbc_diags_create();
	tbc_jit *jit = NULL;
	if (tbc_jit_compile(m, o, d, &jit) != TBC_OK) tbc_test_fail_with("jit", d);
	tbc_tensor *y = NULL;
	if (tbc_abi_run_serial(tbc_jit_descriptor(jit), &x, 1, &y, 1, d) != TBC_OK) tbc_test_fail_with("run", d);
	tbc_jit_destroy(jit);
	tbc_diags_destroy(d);
	tbc_tensor_destroy(x);
	return y;
}

static double cosine(const tbc_tensor *a, const tbc_tensor *b) {
	double dot = 0, na = 0, nb = 0;
	for (int64_t i = 0; i < a->numel; i++) {
		double x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
		if (!isfinite(x) || !isfinite(y)) return -1;
		dot += x * y, na += x * x, nb += y * y;
	}
	return dot / sqrt(na * nb);
}

static void fp16_overflow_keeps_exactly_the_overflowing_matmul(void **state) {
	(void)state;
	tbc_module *m = parse(overflow_text("mm_big"));
	const char *calib = make_calib("overflow", 2, 2, x_dims, near_100);
	/* Lowered everywhere, the product overflows and Softmax gives NaN. */
	tbc_compile_options plain;
	tbc_compile_options_init(&plain);
	plain.precision = TBC_DT_F16;
	tbc_tensor *want = run_jit(m, NULL, 2, x_dims, near_100), *bad = run_jit(m, &plain, 2, x_dims, near_100);
	assert_true(cosine(bad, want) < 0.999);
	tbc_tensor_destroy(bad);

	FILE *report = tmpfile();
	tbc_compile_options o;
	options(&o, TBC_DT_F16, "cosine=0.999", calib, report);
	char *exclude = search_ok(m, &o);
	assert_string_equal(exclude, "mm_big");
	free(exclude);
	char text[8192];
	rewind(report);
	size_t n = fread(text, 1, sizeof text - 1, report);
	text[n] = 0;
	fclose(report);
	printf("%s", text);
	HAS(text, "kept in float32: 'mm_big' (MatMul): lowering it: output 'y' is not finite (set 's0')");
	HAS(text, "met with 1 of 5 lowered nodes kept in float32");

	/* The compile with the budget meets it, and says what it did. */
	tbc_compile_stats st;
	report = tmpfile();
	options(&o, TBC_DT_F16, "cosine=0.999", calib, report);
	o.stats_out = &st;
	tbc_tensor *got = run_jit(m, &o, 2, x_dims, near_100);
	fclose(report);
	assert_true(cosine(got, want) >= 0.999);
	assert_int_equal(st.budget_kept, 1);
	/* The reference, everything lowered, then four steps of bisection. */
	assert_int_equal(st.budget_compiles, 6);
	assert_true(st.budget_seconds > 0);
	assert_true(st.precision_ops >= 4); /* the others still lowered */
	tbc_tensor_destroy(got);
	tbc_tensor_destroy(want);
	tbc_module_destroy(m);
}

static void a_large_subtraction_keeps_only_the_product_float16_rounds(void **state) {
	(void)state;
	tbc_module *m = parse(subtraction_text);
	const char *calib = make_calib("subtraction", 3, 2, sub_dims, hundred_and_small);
	tbc_compile_options o;
	FILE *report = tmpfile();
	options(&o, TBC_DT_F16, "rtol=0,atol=0.01", calib, report);
	char *exclude = search_ok(m, &o);
	fclose(report);
	assert_string_equal(exclude, "mm_a");
	free(exclude);
	/* With mm_a excluded the difference is within atol. */
	tbc_tensor *want = run_jit(m, NULL, 2, sub_dims, hundred_and_small);
	o.stats_file = NULL;
	o.accuracy_budget = NULL;
	o.precision_exclude = "mm_a";
	tbc_tensor *got = run_jit(m, &o, 2, sub_dims, hundred_and_small);
	for (int64_t i = 0; i < got->numel; i++)
		assert_true(fabs(((float *)got->data)[i] - ((float *)want->data)[i]) <= 0.01);
	tbc_tensor_destroy(got);
	tbc_tensor_destroy(want);
	tbc_module_destroy(m);
}

static void a_model_within_budget_keeps_everything_lowered(void **state) {
	(void)state;
	tbc_module *m = parse(overflow_text("mm_big"));
	const char *calib = make_calib("within", 2, 2, x_dims, small);
	tbc_compile_options o;
	tbc_compile_stats st;
	FILE *report = tmpfile();
	options(&o, TBC_DT_BF16, "cosine=0.99,top1", calib, report);
	o.stats_out = &st;
	char *exclude = search_ok(m, &o);
	fclose(report);
	assert_string_equal(exclude, "");
	free(exclude);
	assert_int_equal(st.budget_compiles, 2); /* the reference and everything lowered */
	assert_int_equal(st.budget_kept, 0);
	/* The user's own exclusions come first in the answer. */
	report = tmpfile();
	options(&o, TBC_DT_BF16, "cosine=0.99", calib, report);
	o.precision_exclude = "Tanh";
	exclude = search_ok(m, &o);
	fclose(report);
	assert_string_equal(exclude, "Tanh");
	free(exclude);
	tbc_module_destroy(m);
}

static void malformed_budgets_are_refused(void **state) {
	(void)state;
	tbc_module *m = parse(overflow_text("mm_big"));
	const char *calib = make_calib("malformed", 1, 2, x_dims, small);
	static const struct {
		const char *budget, *says;
	} cases[] = {
		{"", "empty"},
		{"cosine=2", "'cosine=2' is a cosine similarity: above 0, at most 1"},
		{"cosine=0", "above 0"},
		{"rtol=-1", "'rtol=-1' cannot be negative"},
		{"rtol=abc", "'rtol=abc' wants a number"},
		{"atol=", "'atol=' wants a number"},
		{"top1=3", "top1 takes no value"},
		{"cosine=0.9,cosine=0.8", "is given twice"},
		{"top5", "'top5' is not rtol=R, atol=A, cosine=C or top1"},
		{"cosine=0.9,", "ends with a comma"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		tbc_compile_options o;
		options(&o, TBC_DT_F16, cases[k].budget, calib, NULL);
		char msg[1024];
		assert_int_equal(search_fails(m, &o, msg, sizeof msg), TBC_ERR_INVALID_ARGUMENT);
		HAS(msg, cases[k].says);
	}
	/* A budget needs a lower precision and the model's interface. */
	tbc_compile_options o;
	char msg[1024];
	options(&o, TBC_DT_F32, "top1", calib, NULL);
	search_fails(m, &o, msg, sizeof msg);
	HAS(msg, "--precision fp16, bf16 or fp8");
	options(&o, TBC_DT_F16, "top1", calib, NULL);
	o.keep_io_types = 0;
	search_fails(m, &o, msg, sizeof msg);
	HAS(msg, "--keep-io-types");
	/* Nothing is written when the budget is refused. */
	const char *out = tmp_path("refused.o");
	options(&o, TBC_DT_F16, "cosine=7", calib, NULL);
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_compile_to_file(m, &o, out, d), TBC_ERR_INVALID_ARGUMENT);
	tbc_diags_destroy(d);
	assert_int_not_equal(access(out, F_OK), 0);
	tbc_module_destroy(m);
}

static void write_npy(const char *path, tbc_dtype dt, int rank, const int64_t *dims) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	memset(t->data, 0, (size_t)t->numel * tbc_dtype_size(dt));
	tbc_diags *d = tbc_diags_create();
	assert_int_equal(tbc_tensor_write_npy(path, t, d), TBC_OK);
	tbc_diags_destroy(d);
	tbc_tensor_destroy(t);
}

/* Each bad folder: its first set holds what the case writes. */
static void calibration_files_that_do_not_match_are_named(void **state) {
	(void)state;
	tbc_module *m = parse(overflow_text("mm_big"));
	const int64_t wrong_dims[2] = {4, 9}, rank3[3] = {1, 4, 8};
	const struct {
		const char *dir, *file;
		tbc_dtype dt;
		int rank;
		const int64_t *dims;
		const char *says;
	} cases[] = {
		{"c_name", "z.npy", TBC_DT_F32, 2, x_dims, "c_name/s/z.npy: tensor 'z': the model has no input named 'z'"},
		{"c_dtype", "x.npy", TBC_DT_F64, 2, x_dims,
		 "c_dtype/s/x.npy: tensor 'x': calibration input is f64[4,8], the model's input 'x' is f32[4,8]"},
		{"c_shape", "x.npy", TBC_DT_F32, 2, wrong_dims, "c_shape/s/x.npy: tensor 'x': calibration input is f32[4,9]"},
		{"c_rank", "x.npy", TBC_DT_F32, 3, rank3, "c_rank/s/x.npy: tensor 'x': calibration input is f32[1,4,8]"},
		{"c_other", "notes.txt", TBC_DT_F32, 2, x_dims, "c_other/s/notes.txt: not an input file"},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		char dir[256], sub[300], file[400];
		snprintf(dir, sizeof dir, "%s", tmp_path(cases[k].dir));
		mkdir(dir, 0777);
		snprintf(sub, sizeof sub, "%s/s", dir);
		mkdir(sub, 0777);
		snprintf(file, sizeof file, "%s/%s", sub, cases[k].file);
		write_npy(file, cases[k].dt, cases[k].rank, cases[k].dims);
		tbc_compile_options o;
		options(&o, TBC_DT_F16, "top1", dir, NULL);
		char msg[1024];
		search_fails(m, &o, msg, sizeof msg);
		HAS(msg, cases[k].says);
	}
	/* A set without the input, a folder without sets, and no folder. */
	char dir[256], sub[300];
	snprintf(dir, sizeof dir, "%s", tmp_path("c_missing"));
	mkdir(dir, 0777);
	snprintf(sub, sizeof sub, "%s/s", dir);
	mkdir(sub, 0777);
	tbc_compile_options o;
	options(&o, TBC_DT_F16, "top1", dir, NULL);
	char msg[1024];
	search_fails(m, &o, msg, sizeof msg);
	HAS(msg, "c_missing/s: tensor 'x': the calibration set has no x.npy");
	snprintf(dir, sizeof dir, "%s", tmp_path("c_flat"));
	mkdir(dir, 0777);
	snprintf(sub, sizeof sub, "%s/x.npy", dir);
	write_npy(sub, TBC_DT_F32, 2, x_dims);
	options(&o, TBC_DT_F16, "top1", dir, NULL);
	search_fails(m, &o, msg, sizeof msg);
	HAS(msg, "has no subfolder: each set of inputs is a subfolder of NAME.npy files (found 'x.npy' at the top)");
	options(&o, TBC_DT_F16, "top1", tmp_path("no_such_folder"), NULL);
	assert_int_equal(search_fails(m, &o, msg, sizeof msg), TBC_ERR_IO);
	HAS(msg, "does not exist");
	tbc_module_destroy(m);
}

static void a_budget_no_assignment_meets_says_the_best_reached(void **state) {
	(void)state;
	/* The overflowing product has no name: no exclusion can reach it. */
	tbc_module *m = parse(overflow_text(""));
	const char *calib = make_calib("unmeetable", 1, 2, x_dims, near_100);
	tbc_compile_options o;
	FILE *report = tmpfile();
	options(&o, TBC_DT_F16, "cosine=0.999", calib, report);
	char msg[2048];
	assert_int_equal(search_fails(m, &o, msg, sizeof msg), TBC_ERR_INVALID_ARGUMENT);
	fclose(report);
	HAS(msg, "no assignment can meet the accuracy budget 'cosine=0.999'");
	HAS(msg, "the best reached is: output 'y' is not finite (set 's0')");
	HAS(msg, "1 lowered node without a name cannot be moved back");
	/* A budget the float32 model misses against itself: its output is not
	 * finite, so no cosine is defined. */
	tbc_module *inf = parse("module ir_version 8 opset 17\n"
				"graph main(%x: f32[4,8]) {\n"
				"  %k: f32[] = const [3e38]\n"
				"  %y: f32[4,8] = Mul(%x, %k) @mul\n"
				"  return %y\n"
				"}\n");
	report = tmpfile();
	options(&o, TBC_DT_F16, "cosine=0.9", calib, report);
	search_fails(inf, &o, msg, sizeof msg);
	fclose(report);
	HAS(msg, "the float32 model's own outputs miss it: output 'y' is not finite");
	tbc_module_destroy(inf);
	tbc_module_destroy(m);
}

/* The bound: a search allowed 3 compiles stops after one step, keeps the
 * undecided nodes float32 and still meets the budget. */
static void the_search_stops_at_its_bound_and_stays_within_budget(void **state) {
	(void)state;
	tbc_module *m = parse(overflow_text("mm_big"));
	const char *calib = make_calib("bound", 1, 2, x_dims, near_100);
	tbc_compile_options o;
	tbc_compile_stats st;
	FILE *report = tmpfile();
	options(&o, TBC_DT_F16, "cosine=0.999", calib, report);
	o.budget_max_compiles = 3;
	o.stats_out = &st;
	char *exclude = search_ok(m, &o);
	char text[8192];
	rewind(report);
	size_t n = fread(text, 1, sizeof text - 1, report);
	text[n] = 0;
	fclose(report);
	printf("%s", text);
	/* The one step lowered mm_big, mm3 and tanh with mm1 and relu1
	 * float32: it missed, so every node stays float32. */
	assert_string_equal(exclude, "mm1,relu1,mm_big,mm3,tanh");
	HAS(text, "'mm1' (MatMul): undecided when the search's bound of 3 compiles was reached");
	assert_int_equal(st.budget_compiles, 3);
	free(exclude);
	tbc_module_destroy(m);
}

/* `tbc compile` as a user runs it, on examples/models/tiny_cnn.onnx
 * (image f32[N,3,32,32]): a budget met, a calibration file of the wrong
 * shape named with nothing written, options that need each other. */
static char *tbc_cmd(const char *args, int *out_status) {
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "compile %s", args);
	char *out = test_tbc("", cmd, true, out_status);
	printf("$ tbc compile %s\n%s[exit %d]\n", args, out, *out_status);
	return out;
}

static float pixel(int set, int64_t i) { return (float)sin(0.05 * (double)i + set); }

static void the_command_searches_and_refuses_what_does_not_match(void **state) {
	(void)state;
	const int64_t image[4] = {2, 3, 32, 32}, wrong[4] = {2, 3, 32, 31};
	char calib[256], args[1024], out_so[256];
	snprintf(calib, sizeof calib, "%s", tmp_path("cnn_calib"));
	mkdir(calib, 0777);
	for (int s = 0; s < 2; s++) {
		char sub[300], file[320];
		snprintf(sub, sizeof sub, "%s/s%d", calib, s);
		mkdir(sub, 0777);
		snprintf(file, sizeof file, "%s/image.npy", sub);
		tbc_tensor *t = tbc_tensor_create(TBC_DT_F32, 4, image);
		for (int64_t i = 0; i < t->numel; i++) ((float *)t->data)[i] = pixel(s, i);
		tbc_diags *d = tbc_diags_create();
		assert_int_equal(tbc_tensor_write_npy(file, t, d), TBC_OK);
		tbc_diags_destroy(d);
		tbc_tensor_destroy(t);
	}
	snprintf(out_so, sizeof out_so, "%s", tmp_path("cnn.o"));
	int status;
	snprintf(args, sizeof args,
		 "examples/models/tiny_cnn.onnx --precision fp16 --accuracy-budget cosine=0.999,top1 --calibrate %s "
		 "--stats -o %s",
		 calib, out_so);
	char *out = tbc_cmd(args, &status);
	assert_int_equal(status, 0);
	HAS(out, "tbc: accuracy budget 'cosine=0.999,top1' for fp16: 2 calibration sets");
	HAS(out, "tbc: accuracy budget met with 0 of");
	HAS(out, "tbc: accuracy budget search: 2 compiles (bound 64), 2 runs each");
	assert_int_equal(access(out_so, F_OK), 0);
	free(out);
	/* A second set whose image is 31 wide: named, and nothing written. */
	char bad[320];
	snprintf(bad, sizeof bad, "%s/s1/image.npy", calib);
	write_npy(bad, TBC_DT_F32, 4, wrong);
	unlink(out_so);
	out = tbc_cmd(args, &status);
	assert_int_equal(status, 1);
	HAS(out, "s1/image.npy: tensor 'image': calibration input is f32[2,3,32,31], the model's input 'image' is "
		 "f32[N,3,32,32]");
	assert_int_not_equal(access(out_so, F_OK), 0);
	free(out);
	out = tbc_cmd("examples/models/tiny_cnn.onnx --precision fp16 --accuracy-budget top1 -o x.o", &status);
	assert_int_equal(status, 2);
	HAS(out, "--accuracy-budget needs --calibrate DIR");
	free(out);
	out = tbc_cmd("examples/models/tiny_cnn.onnx --precision fp16 --accuracy-budget top1 --calibrate d "
		      "--budget-max-compiles 2 -o x.o",
		      &status);
	assert_int_equal(status, 2);
	HAS(out, "--budget-max-compiles wants a count from 3 to 10000, got '2'");
	free(out);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fp16_overflow_keeps_exactly_the_overflowing_matmul),
		cmocka_unit_test(a_large_subtraction_keeps_only_the_product_float16_rounds),
		cmocka_unit_test(a_model_within_budget_keeps_everything_lowered),
		cmocka_unit_test(malformed_budgets_are_refused),
		cmocka_unit_test(calibration_files_that_do_not_match_are_named),
		cmocka_unit_test(a_budget_no_assignment_meets_says_the_best_reached),
		cmocka_unit_test(the_search_stops_at_its_bound_and_stays_within_budget),
		cmocka_unit_test(the_command_searches_and_refuses_what_does_not_match),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
