/* Control flow compiled (codegen/lower/control.c): If, Loop and Scan as
 * program-level regions.  Each model, written in the IR's text form, runs
 * through the interpreter, the kernel IR evaluator and the JIT, which must
 * agree; the inputs pick the paths (branch taken, early exit, no
 * iteration). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include <string.h>

#include "tests/unit/support/codegen_check.h"

/* A model from text with random inputs in [lo, hi); vals[i] (when not NULL)
 * gives input i's values instead. */
static model from_text(const char *text, double lo, double hi, const double *const *vals) {
	model md = model_new();
	tbc_module_destroy(md.m);
	tbc_diags *d = tbc_diags_create();
	md.m = tbc_parse(text, "control.ir", d);
	if (!md.m) print_diags(d);
	assert_non_null(md.m);
	tbc_diags_destroy(d);
	const tbc_graph *g = md.m->main;
	for (int i = 0; i < g->n_inputs; i++) {
		const tbc_type *t = &g->inputs[i]->type;
		int64_t dims[TBC_MAX_RANK];
		for (int k = 0; k < t->rank; k++) dims[k] = t->dims[k].sym ? 3 : t->dims[k].size;
		md.in[i] = tbc_tensor_create(t->dtype, t->rank, dims);
		assert_non_null(md.in[i]);
		if (vals && vals[i])
			for (int64_t e = 0; e < md.in[i]->numel; e++) tbc_store_f64(t->dtype, md.in[i]->data, (size_t)e, vals[i][e]);
		else fill(&md, md.in[i], lo, hi);
	}
	md.n_in = g->n_inputs;
	return md;
}

static void check_text(const char *text, const double *const *vals) {
	model md = from_text(text, -3, 3, vals);
	check_outputs(&md, -1, NULL, 1e-5);
}

#define V(...) ((const double[]){__VA_ARGS__})

/* If on a run-time condition; the branches give outputs of different
 * lengths, so the output's size is a symbol each branch sets. */
static const char *const if_text = "graph main(%c: bool[], %x: f32[3]) {\n"
				   "  %y: f32[_n] = If(%c) {\n"
				   "    then_branch = graph t() {\n"
				   "      %a: f32[6] = Concat(%x, %x) {axis = 0}\n"
				   "      %b: f32[6] = Relu(%a)\n"
				   "      return %b\n"
				   "    },\n"
				   "    else_branch = graph e() {\n"
				   "      %n: f32[3] = Neg(%x)\n"
				   "      return %n\n"
				   "    }\n"
				   "  }\n"
				   "  %z: f32[_n] = Exp(%y)\n"
				   "  return %y, %z\n"
				   "}\n";

static void test_if_takes_either_branch(void **state) {
	(void)state;
	const double *t[2] = {V(1), NULL}, *f[2] = {V(0), NULL};
	check_text(if_text, t);
	check_text(if_text, f);
}

/* An If whose condition folds to a constant is inlined by the fold pass
 * (the compile pipeline's): the branch not taken may even give another
 * rank, as ONNX functions' expansions do when they test an input's rank. */
static const char *const if_const_text = "graph main(%x: f32[2,3]) {\n"
					 "  %r: i64[] = Size(%x)\n"
					 "  %six: i64[] = const [6]\n"
					 "  %c: bool[] = Equal(%r, %six)\n"
					 "  %y: f32[*] = If(%c) {\n"
					 "    then_branch = graph t() {\n"
					 "      %a: f32[2,3] = Relu(%x)\n"
					 "      return %a\n"
					 "    },\n"
					 "    else_branch = graph e() {\n"
					 "      %f: f32[6] = Flatten(%x) {axis = 0}\n"
					 "      return %f\n"
					 "    }\n"
					 "  }\n"
					 "  %z: f32[*] = Exp(%y)\n"
					 "  return %z\n"
					 "}\n";

/* An If on a run-time condition whose branches give ranks 0 and 1, read
 * only by a broadcasting op against a rank-1 operand: the fold pass
 * unsqueezes the rank-0 branch, so everything after it has a static rank. */
static const char *const if_ranks_text = "graph main(%c: bool[], %x: f32[4]) {\n"
					 "  %zero: f32[] = const [0]\n"
					 "  %s: f32[*] = If(%c) {\n"
					 "    then_branch = graph t() {\n"
					 "      %a: f32[] = Identity(%zero)\n"
					 "      return %a\n"
					 "    },\n"
					 "    else_branch = graph e() {\n"
					 "      %b: f32[1] = ReduceSum(%x) {keepdims = 1}\n"
					 "      return %b\n"
					 "    }\n"
					 "  }\n"
					 "  %y: f32[*] = Mul(%x, %s)\n"
					 "  %w: f32[*] = Tanh(%y)\n"
					 "  return %w\n"
					 "}\n";

static void test_if_folded_or_of_two_ranks(void **state) {
	(void)state;
	g_fold = true;
	check_text(if_const_text, NULL);
	const double *t[2] = {V(1), NULL}, *f[2] = {V(0), NULL};
	check_text(if_ranks_text, t);
	check_text(if_ranks_text, f);
	g_fold = false;
}

/* Loop with a trip count and a condition the body computes: a running sum
 * that stops once it reaches 6, the iteration number times x gathered as a
 * scan output (as many rows as iterations ran). */
static const char *const loop_text = "graph main(%M: i64[], %c: bool[], %x: f32[2]) {\n"
				     "  %s: f32[2], %rows: f32[_k,2] = Loop(%M, %c, %x) {\n"
				     "    body = graph b(%i: i64[], %cin: bool[], %acc: f32[2]) {\n"
				     "      %six: f32[] = const [6]\n"
				     "      %fi: f32[] = Cast(%i) {to = 1}\n"
				     "      %row: f32[2] = Mul(%x, %fi)\n"
				     "      %next: f32[2] = Add(%acc, %row)\n"
				     "      %m: f32[] = ReduceMax(%next) {keepdims = 0}\n"
				     "      %go: bool[] = Less(%m, %six)\n"
				     "      return %go, %next, %row\n"
				     "    }\n"
				     "  }\n"
				     "  return %s, %rows\n"
				     "}\n";

static void test_loop_runs_until_its_trip_count_or_condition(void **state) {
	(void)state;
	const double *all[3] = {V(4), V(1), V(0.1, 0.2)};      /* the trip count ends it */
	const double *early[3] = {V(10), V(1), V(1, 0.5)};     /* the condition ends it */
	const double *none[3] = {V(0), V(1), V(1, 2)};         /* no iteration: empty rows */
	const double *never[3] = {V(5), V(0), V(1, 2)};        /* cond false from the start */
	check_text(loop_text, all);
	check_text(loop_text, early);
	check_text(loop_text, none);
	check_text(loop_text, never);
}

/* Loop without a trip count: only the condition ends it. */
static void test_loop_without_a_trip_count(void **state) {
	(void)state;
	const char *text = "graph main(%c: bool[], %x: f32[]) {\n"
			   "  %s: f32[] = Loop(_, %c, %x) {\n"
			   "    body = graph b(%i: i64[], %cin: bool[], %acc: f32[]) {\n"
			   "      %two: f32[] = const [2]\n"
			   "      %lim: f32[] = const [100]\n"
			   "      %next: f32[] = Mul(%acc, %two)\n"
			   "      %go: bool[] = Less(%next, %lim)\n"
			   "      return %go, %next\n"
			   "    }\n"
			   "  }\n"
			   "  return %s\n"
			   "}\n";
	const double *v[2] = {V(1), V(1.5)};
	check_text(text, v);
}

/* A body whose scan element's size is computed while running (a Slice of
 * the iteration number): the gathered output takes it from the first
 * iteration. */
static void test_loop_scan_output_of_a_computed_size(void **state) {
	(void)state;
	const char *text = "graph main(%M: i64[], %y: f32[1]) {\n"
			   "  %res: f32[_a], %sc: f32[_b,_c] = Loop(%M, _, %y) {\n"
			   "    body = graph b(%i: i64[], %cin: bool[], %yin: f32[1]) {\n"
			   "      %x: f32[5] = const [1, 2, 3, 4, 5]\n"
			   "      %one: i64[] = const [1]\n"
			   "      %ax: i64[1] = const [0]\n"
			   "      %end: i64[] = Add(%i, %one)\n"
			   "      %s0: i64[1] = Unsqueeze(%i, %ax)\n"
			   "      %s1: i64[1] = Unsqueeze(%end, %ax)\n"
			   "      %sl: f32[_d] = Slice(%x, %s0, %s1)\n"
			   "      %yout: f32[_e] = Add(%yin, %sl)\n"
			   "      %t: bool[] = Identity(%cin)\n"
			   "      return %t, %yout, %yout\n"
			   "    }\n"
			   "  }\n"
			   "  return %res, %sc\n"
			   "}\n";
	const double *v[2] = {V(5), V(-1)};
	check_text(text, v);
}

/* Scan (opset 9+): input rows along axis 1, read in reverse; outputs
 * stacked along axis 1, one of them in reverse; two states the body swaps
 * (so copying them back needs a staging copy). */
static void test_scan_axes_directions_and_swapped_states(void **state) {
	(void)state;
	const char *text = "module ir_version 7 opset 16\n"
			   "graph main(%a: f32[2], %b: f32[2], %x: f32[2,4]) {\n"
			   "  %fa: f32[2], %fb: f32[2], %y: f32[2,4], %z: f32[4,2] = Scan(%a, %b, %x) {\n"
			   "    num_scan_inputs = 1, scan_input_axes = [1], scan_input_directions = [1],\n"
			   "    scan_output_axes = [1, 0], scan_output_directions = [1, 0],\n"
			   "    body = graph b(%sa: f32[2], %sb: f32[2], %r: f32[2]) {\n"
			   "      %na: f32[2] = Add(%sb, %r)\n"
			   "      %o: f32[2] = Mul(%sa, %r)\n"
			   "      return %na, %sa, %o, %na\n"
			   "    }\n"
			   "  }\n"
			   "  return %fa, %fb, %y, %z\n"
			   "}\n";
	check_text(text, NULL);
}

/* Scan-8: a batch dim in front of every input and output. */
static void test_scan8_runs_once_per_batch_entry(void **state) {
	(void)state;
	const char *text = "module ir_version 3 opset 8\n"
			   "graph main(%init: f32[2,3], %x: f32[2,5,3]) {\n"
			   "  %fin: f32[2,3], %ys: f32[2,5,3] = Scan(_, %init, %x) {\n"
			   "    num_scan_inputs = 1, directions = [1],\n"
			   "    body = graph b(%s: f32[3], %r: f32[3]) {\n"
			   "      %t: f32[3] = Add(%s, %r)\n"
			   "      %u: f32[3] = Tanh(%t)\n"
			   "      return %u, %t\n"
			   "    }\n"
			   "  }\n"
			   "  return %fin, %ys\n"
			   "}\n";
	check_text(text, NULL);
}

/* Scan-8 with sequence_lens: each batch entry runs its own number of rows
 * (reversed within them for direction 1); output rows past it are zero; a
 * length outside [0, T] fails the run as in the interpreter. */
static const char *const scan8_lens_text = "module ir_version 3 opset 8\n"
					   "graph main(%len: i64[3], %init: f32[3,2], %x: f32[3,4,2]) {\n"
					   "  %fin: f32[3,2], %ys: f32[3,4,2] = Scan(%len, %init, %x) {\n"
					   "    num_scan_inputs = 1, directions = [1],\n"
					   "    body = graph b(%s: f32[2], %r: f32[2]) {\n"
					   "      %t: f32[2] = Add(%s, %r)\n"
					   "      return %t, %t\n"
					   "    }\n"
					   "  }\n"
					   "  return %fin, %ys\n"
					   "}\n";

static void test_scan8_sequence_lens(void **state) {
	(void)state;
	const double *v[3] = {V(4, 0, 2), NULL, NULL};
	check_text(scan8_lens_text, v);
	const double *bad[3] = {V(1, 5, 2), NULL, NULL};
	model md = from_text(scan8_lens_text, -1, 1, bad);
	check_run_fails_as(&md, NULL, "outside", "sequence_lens entry is outside");
}

/* A Loop inside a Loop, and an If inside the inner body. */
static void test_nested_regions(void **state) {
	(void)state;
	const char *text = "graph main(%M: i64[], %x: f32[3]) {\n"
			   "  %out: f32[3] = Loop(%M, _, %x) {\n"
			   "    body = graph outer(%i: i64[], %c: bool[], %v: f32[3]) {\n"
			   "      %three: i64[] = const [3]\n"
			   "      %w: f32[3] = Loop(%three, _, %v) {\n"
			   "        body = graph inner(%j: i64[], %d: bool[], %u: f32[3]) {\n"
			   "          %one: i64[] = const [1]\n"
			   "          %odd: i64[] = BitwiseAnd(%j, %one)\n"
			   "          %is: bool[] = Equal(%odd, %one)\n"
			   "          %n: f32[3] = If(%is) {\n"
			   "            then_branch = graph t() {\n"
			   "              %p: f32[3] = Sin(%u)\n"
			   "              return %p\n"
			   "            },\n"
			   "            else_branch = graph e() {\n"
			   "              %q: f32[3] = Cos(%u)\n"
			   "              return %q\n"
			   "            }\n"
			   "          }\n"
			   "          return %d, %n\n"
			   "        }\n"
			   "      }\n"
			   "      return %c, %w\n"
			   "    }\n"
			   "  }\n"
			   "  return %out\n"
			   "}\n";
	const double *v[2] = {V(3), NULL};
	check_text(text, v);
}

/* Carried values whose shape changes from one iteration to the next: a
 * sequence growing by a Concat of its column sums (the carried buffer grows
 * with it), and a vector cut down by a Slice. */
static void test_carried_values_may_change_shape(void **state) {
	(void)state;
	const char *grow = "graph main(%M: i64[], %x: f32[1,2]) {\n"
			   "  %s: f32[_a,2] = Loop(%M, _, %x) {\n"
			   "    body = graph b(%i: i64[], %c: bool[], %v: f32[_v,2]) {\n"
			   "      %ax: i64[1] = const [0]\n"
			   "      %r: f32[1,2] = ReduceSum(%v, %ax) {keepdims = 1}\n"
			   "      %w: f32[_w,2] = Concat(%v, %r) {axis = 0}\n"
			   "      return %c, %w\n"
			   "    }\n"
			   "  }\n"
			   "  return %s\n"
			   "}\n";
	const double *g[2] = {V(6), V(1, -0.5)};
	check_text(grow, g);
	const char *shrink = "graph main(%M: i64[], %x: f32[5]) {\n"
			     "  %s: f32[_a] = Loop(%M, _, %x) {\n"
			     "    body = graph b(%i: i64[], %c: bool[], %v: f32[_v]) {\n"
			     "      %ax: i64[1] = const [0]\n"
			     "      %n: i64[1] = const [-1]\n"
			     "      %u: f32[_u] = Slice(%v, %ax, %n)\n"
			     "      return %c, %u\n"
			     "    }\n"
			     "  }\n"
			     "  return %s\n"
			     "}\n";
	const double *h[2] = {V(3), V(1, 2, 3, 4, 5)};
	check_text(shrink, h);
}

/* A Loop's scan output element must keep one shape (the rows are stacked):
 * a body giving rows of another length in a later iteration fails the run,
 * in the interpreter and compiled alike. */
static void test_scan_rows_of_another_shape_fail_the_run(void **state) {
	(void)state;
	const char *text = "graph main(%M: i64[], %x: f32[4]) {\n"
			   "  %s: f32[4], %rows: f32[_k,_l] = Loop(%M, _, %x) {\n"
			   "    body = graph b(%i: i64[], %c: bool[], %v: f32[4]) {\n"
			   "      %ax: i64[1] = const [0]\n"
			   "      %e: i64[1] = Unsqueeze(%i, %ax)\n"
			   "      %row: f32[_r] = Slice(%v, %ax, %e)\n"
			   "      return %c, %v, %row\n"
			   "    }\n"
			   "  }\n"
			   "  return %s, %rows\n"
			   "}\n";
	const double *v[2] = {V(3), V(1, 2, 3, 4)};
	model md = from_text(text, 0, 1, v);
	check_run_fails_as(&md, NULL, NULL, "scan output 0 changes dim 0");
}

/* The program's text shows the regions: markers between the kernels. */
static void test_program_text_shows_the_regions(void **state) {
	(void)state;
	const char *texts[2] = {if_text, loop_text};
	const char *want[2][2] = {{"if cf0_cond {", "} else {"}, {"loop cf0_i < cf0_n while cf0_cond {", "launch k"}};
	for (int t = 0; t < 2; t++) {
		model md = from_text(texts[t], 0, 1, NULL);
		char *text = lowered_text(&md);
		for (int w = 0; w < 2; w++) {
			if (!strstr(text, want[t][w])) print_error("%s\n", text);
			assert_non_null(strstr(text, want[t][w]));
		}
		free(text);
	}
}

/* A Loop without a trip count gathering rows: only the condition ends it,
 * so the gathered buffers grow while it runs (keeping their rows; 1, 40 and
 * 0 iterations). */
static const char *const while_text = "graph main(%lim: f32[], %x: f32[3]) {\n"
				      "  %s: f32[3], %rows: f32[_k,3] = Loop(_, _, %x) {\n"
				      "    body = graph b(%i: i64[], %cin: bool[], %v: f32[3]) {\n"
				      "      %one: f32[] = const [1]\n"
				      "      %w: f32[3] = Add(%v, %one)\n"
				      "      %m: f32[] = ReduceMax(%w) {keepdims = 0}\n"
				      "      %go: bool[] = Less(%m, %lim)\n"
				      "      %fi: f32[] = Cast(%i) {to = 1}\n"
				      "      %row: f32[3] = Mul(%w, %fi)\n"
				      "      return %go, %w, %row\n"
				      "    }\n"
				      "  }\n"
				      "  return %s, %rows\n"
				      "}\n";

static void test_a_loop_without_trip_count_gathers_rows(void **state) {
	(void)state;
	const double *once[2] = {V(0), V(1, 2, 3)}, *many[2] = {V(40), V(0, 0.5, -1)};
	check_text(while_text, once);
	check_text(while_text, many);
	const char *never = "graph main(%c: bool[], %x: f32[2]) {\n" /* cond false before the first iteration */
			    "  %s: f32[2], %rows: f32[_k,2] = Loop(_, %c, %x) {\n"
			    "    body = graph b(%i: i64[], %cin: bool[], %v: f32[2]) {\n"
			    "      %w: f32[2] = Neg(%v)\n"
			    "      return %cin, %w, %w\n"
			    "    }\n"
			    "  }\n"
			    "  return %s, %rows\n"
			    "}\n";
	const double *f[2] = {V(0), NULL};
	check_text(never, f);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_if_takes_either_branch),
		cmocka_unit_test(test_if_folded_or_of_two_ranks),
		cmocka_unit_test(test_loop_runs_until_its_trip_count_or_condition),
		cmocka_unit_test(test_loop_without_a_trip_count),
		cmocka_unit_test(test_loop_scan_output_of_a_computed_size),
		cmocka_unit_test(test_scan_axes_directions_and_swapped_states),
		cmocka_unit_test(test_scan8_runs_once_per_batch_entry),
		cmocka_unit_test(test_scan8_sequence_lens),
		cmocka_unit_test(test_nested_regions),
		cmocka_unit_test(test_carried_values_may_change_shape),
		cmocka_unit_test(test_scan_rows_of_another_shape_fail_the_run),
		cmocka_unit_test(test_program_text_shows_the_regions),
		cmocka_unit_test(test_a_loop_without_trip_count_gathers_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
