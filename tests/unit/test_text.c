/* The IR's text form: print(parse(print(m))) == print(m) byte for byte, on
 * hand-written text, on a module built to hold every feature, and on every
 * model of the ONNX node suite the frontend imports; constants exact to the
 * bit; errors with file:line:col; no crash on truncated or mangled text. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tests/unit/support/need.h"
#include <sys/stat.h>

#include "ir/ir.h"

/* Parses text, prints it and returns the printed text (caller frees). */
static char *reprint(const char *text, const char *file) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, file, d);
	if (!m) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		print_error("parse failed: %s\n", msg);
	}
	assert_non_null(m);
	char *out = tbc_print(m);
	assert_non_null(out);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return out;
}

/* Canonical text prints back unchanged. */
static void assert_canonical(const char *text) {
	char *out = reprint(text, "canonical.ir");
	if (strcmp(out, text)) print_error("expected:\n%s\ngot:\n%s\n", text, out);
	assert_string_equal(out, text);
	free(out);
}

/* The message of the first diagnostic of parsing text as "t.ir". */
static char *parse_error(const char *text) {
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	assert_null(m);
	assert_true(tbc_diags_count(d) >= 1);
	const tbc_diag *g = tbc_diags_get(d, 0);
	assert_int_equal(g->code, TBC_ERR_INVALID_MODEL);
	size_t n = strlen(g->message);
	char *msg = malloc(n + 1);
	memcpy(msg, g->message, n + 1);
	tbc_diags_destroy(d);
	return msg;
}

static void assert_parse_error(const char *text, const char *want) {
	char *msg = parse_error(text);
	if (!strstr(msg, want)) print_error("wanted '%s' in '%s'\n", want, msg);
	assert_non_null(strstr(msg, want));
	free(msg);
}

/* ---- Hand-written text ---- */

static void text_of_a_small_model_is_canonical(void **state) {
	(void)state;
	assert_canonical("module ir_version 8 opset 17 producer \"tbc-test\"\n"
			 "graph main(%x: f32[N,3], %bias: f32[3]) {\n"
			 "  %w: f32[3] = const [1, 0.5, -inf]\n"
			 "  %0: f32[N,3] = Add(%x, %w) @add0\n"
			 "  %y: f32[N,3] = Relu(%0)\n"
			 "  %z: f32[N,3] = LeakyRelu(%y) {alpha = 0.1f} @\"leaky relu/1\"\n"
			 "  return %z, %y\n"
			 "}\n");
}

static void text_of_every_attribute_kind_is_canonical(void **state) {
	(void)state;
	assert_canonical("module ir_version 9 opset 21\n"
			 "graph g(%x: f32[2]) {\n"
			 "  %y: f32[2] = Identity(%x) {i = -3, f = 2.5, f32 = 0.2f, big = 1e+300, ninf = -inf, "
			 "qnan = nan, payload = nan(0x7ff8000000000001), nz = -0.0, s = \"a\\\"b\\\\c\\n\\x01\\xff\", "
			 "is = [1, -2, 9223372036854775807], fs = [0.5, 1.0, inf], ss = [\"p\", \"\"], "
			 "t = tensor i64[2] [4, -5], ts = [tensor f32[] [1.5], tensor bool[0] []], "
			 "e1 = ints[], e2 = floats[], e3 = strings[], e4 = tensors[], e5 = graphs[]}\n"
			 "  return %y\n"
			 "}\n");
}

static void text_of_subgraphs_with_outer_references_is_canonical(void **state) {
	(void)state;
	assert_canonical("module ir_version 8 opset 17\n"
			 "graph main(%c: bool[], %x: f32[4]) {\n"
			 "  %k: f32[] = const [2]\n"
			 "  %r: f32[4] = If(%c) {\n"
			 "    then_branch = graph then() {\n"
			 "      %t: f32[4] = Mul(%x, %k)\n"
			 "      return %t\n"
			 "    },\n"
			 "    else_branch = graph else() {\n"
			 "      %0: f32[4] = Neg(%x)\n"
			 "      return %0\n"
			 "    }\n"
			 "  } @if0\n"
			 "  %1: f32[4] = Identity(%r) {\n"
			 "    gs = [graph a(%i: i64[]) {\n"
			 "      return %i\n"
			 "    }, graph \"b c\"() {\n"
			 "      return %x\n"
			 "    }]\n"
			 "  }\n"
			 "  return %1\n"
			 "}\n");
}

static void text_of_omitted_inputs_outputs_and_untyped_results_is_canonical(void **state) {
	(void)state;
	assert_canonical("module ir_version 8 opset 17\n"
			 "graph main(%x: f32[*], %\"5\": i64[?,\"batch size\",_d3], %\"\": u8[]) {\n"
			 "  %y, _ = Dropout(%x, _, _)\n"
			 "  %c: f32[*] = Clip(%y, _, %x)\n"
			 "  %0: f32[2], %1: i64[2] = TopK(%c, %\"5\") {axis = -1}\n"
			 "  LSTM(%x, %x, %x)\n"
			 "  return %0, %1, %\"\"\n"
			 "}\n");
}

static void parser_accepts_comments_spacing_and_no_header(void **state) {
	(void)state;
	char *out = reprint("# a comment\ngraph   g ( %x :f32[ 2 ,N ] )  {  # more\n"
			    " %y=Relu( %x )   return %y }",
			    "x.ir");
	assert_string_equal(out, "module ir_version 0 opset 0\n"
				 "graph g(%x: f32[2,N]) {\n"
				 "  %y = Relu(%x)\n"
				 "  return %y\n"
				 "}\n");
	free(out);
}

static void unnamed_values_are_numbered_in_print_order(void **state) {
	(void)state;
	/* Numbers in the text are labels: any numbering prints as 0, 1, 2... */
	char *out = reprint("graph g(%7: f32[2]) {\n  %42: f32[2] = Neg(%7)\n  %3: f32[2] = Abs(%42)\n  return %3\n}\n", "n.ir");
	assert_string_equal(out, "module ir_version 0 opset 0\n"
				 "graph g(%0: f32[2]) {\n"
				 "  %1: f32[2] = Neg(%0)\n"
				 "  %2: f32[2] = Abs(%1)\n"
				 "  return %2\n"
				 "}\n");
	free(out);
}

static void fresh_dim_counter_skips_dims_named_in_the_text(void **state) {
	(void)state;
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse("graph g(%x: f32[_d0,_d12]) {\n  return %x\n}\n", "d.ir", d);
	assert_non_null(m);
	tbc_dim dim = tbc_module_fresh_dim(m);
	assert_string_equal(dim.sym, "_d13");
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
}

/* The example in docs/ir.md is what the printer prints. */
static void docs_example_is_canonical(void **state) {
	(void)state;
	const char *src = getenv("TBC_SOURCE_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/docs/ir.md", src ? src : ".");
	FILE *f = fopen(path, "rb");
	if (!f) {
		TBC_TEST_NEEDS("%s", path);
	}
	static char doc[1 << 16];
	size_t n = fread(doc, 1, sizeof doc - 1, f);
	fclose(f);
	doc[n] = 0;
	char *start = strstr(doc, "## Example\n\n```\n");
	assert_non_null(start);
	start += strlen("## Example\n\n```\n");
	char *end = strstr(start, "```");
	assert_non_null(end);
	*end = 0;
	assert_canonical(start);
}

/* ---- A module built with every feature ---- */

static tbc_type ty(tbc_dtype dt, int rank, const int64_t *dims) {
	tbc_type t;
	tbc_type_set(&t, dt, rank, dims);
	return t;
}

static tbc_value *add_const_bytes(tbc_graph *g, const char *name, tbc_dtype dt, int rank, const int64_t *dims,
				  const void *bytes) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	assert_non_null(t);
	memcpy(t->data, bytes, (size_t)t->numel * tbc_dtype_size(dt));
	tbc_value *v = tbc_graph_add_const(g, name, t);
	tbc_tensor_destroy(t);
	assert_non_null(v);
	return v;
}

static tbc_value *add_const_f64(tbc_graph *g, const char *name, tbc_dtype dt, int n, const double *vals) {
	int64_t dims[1] = {n};
	tbc_tensor *t = tbc_tensor_create(dt, 1, dims);
	assert_non_null(t);
	for (int i = 0; i < n; i++) tbc_store_f64_nosat(dt, t->data, (size_t)i, vals[i]);
	tbc_value *v = tbc_graph_add_const(g, name, t);
	tbc_tensor_destroy(t);
	return v;
}

static tbc_module *build_everything(void) {
	tbc_module *m = tbc_module_new("everything");
	m->ir_version = 10;
	m->opset = 21;
	m->producer = "builder \"test\"";
	tbc_graph *g = m->main;
	tbc_type tx = ty(TBC_DT_F32, 2, (int64_t[]){1, 3});
	tx.dims[0] = (tbc_dim){-1, "batch size"};
	tbc_value *x = tbc_graph_add_input(g, "x", &tx);
	tbc_type tc = ty(TBC_DT_BOOL, 0, NULL);
	tbc_value *c = tbc_graph_add_input(g, "1", &tc); /* a name that looks like a number */
	tbc_type tu = ty(TBC_DT_I64, 1, (int64_t[]){2});
	tbc_value *u = tbc_graph_add_input(g, NULL, &tu); /* unnamed */
	tbc_type tr = {TBC_DT_F16, -1, {{0, NULL}}};
	tbc_value *odd = tbc_graph_add_input(g, "odd \"name\"\twith\\ \xc3\xa9", &tr);

	/* Constants of every dtype, with the awkward values of each. */
	double fvals[] = {0.0, -0.0, 1.0, -2.5, 0.1, 1e-40, 3.4028234663852886e38, INFINITY, -INFINITY, NAN, 1.0 / 3};
	int nf = (int)(sizeof fvals / sizeof *fvals);
	tbc_dtype floats[] = {TBC_DT_F32, TBC_DT_F64, TBC_DT_F16, TBC_DT_BF16, TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ,
			      TBC_DT_F8E5M2, TBC_DT_F8E5M2FNUZ, TBC_DT_F4E2M1};
	for (size_t i = 0; i < sizeof floats / sizeof *floats; i++) add_const_f64(g, NULL, floats[i], nf, fvals);
	double ivals[] = {0, 1, -1, 7, -8, 100, -100, 127, -128};
	tbc_dtype ints[] = {TBC_DT_I8, TBC_DT_I16, TBC_DT_I32, TBC_DT_I64, TBC_DT_I4};
	for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
		int n = ints[i] == TBC_DT_I4 ? 5 : 9;
		int64_t dims[1] = {n};
		tbc_tensor *t = tbc_tensor_create(ints[i], 1, dims);
		for (int k = 0; k < n; k++) tbc_store_i64(ints[i], t->data, (size_t)k, (int64_t)ivals[k]);
		tbc_graph_add_const(g, NULL, t);
		tbc_tensor_destroy(t);
	}
	uint64_t uvals[] = {0, 1, 15, 255, 65535, 4294967295u, UINT64_MAX};
	tbc_dtype uints[] = {TBC_DT_U4, TBC_DT_U8, TBC_DT_U16, TBC_DT_U32, TBC_DT_U64};
	int un[] = {3, 4, 5, 6, 7};
	for (size_t i = 0; i < sizeof uints / sizeof *uints; i++) {
		int64_t dims[1] = {un[i]};
		tbc_tensor *t = tbc_tensor_create(uints[i], 1, dims);
		for (int k = 0; k < un[i]; k++) tbc_store_u64(uints[i], t->data, (size_t)k, uvals[k]);
		tbc_graph_add_const(g, NULL, t);
		tbc_tensor_destroy(t);
	}
	/* Bit patterns no literal spells: a NaN payload, a bool byte of 2, every
	 * float8 code; these print as hex. */
	uint32_t payload[2] = {0x7fc00001u, 0xffffffffu};
	add_const_bytes(g, "nan payload", TBC_DT_F32, 1, (int64_t[]){2}, payload);
	unsigned char bools[3] = {0, 1, 2};
	add_const_bytes(g, "bool2", TBC_DT_BOOL, 1, (int64_t[]){3}, bools);
	unsigned char codes[256];
	for (int i = 0; i < 256; i++) codes[i] = (unsigned char)i;
	tbc_dtype f8[] = {TBC_DT_F8E4M3FN, TBC_DT_F8E4M3FNUZ, TBC_DT_F8E5M2, TBC_DT_F8E5M2FNUZ};
	for (size_t i = 0; i < 4; i++) add_const_bytes(g, NULL, f8[i], 2, (int64_t[]){16, 16}, codes);
	uint16_t h[4] = {0x7e01, 0xfc00, 0x0001, 0x8000};
	add_const_bytes(g, "f16 bits", TBC_DT_F16, 1, (int64_t[]){4}, h);
	add_const_bytes(g, "bf16 bits", TBC_DT_BF16, 1, (int64_t[]){4}, h);
	add_const_bytes(g, "empty", TBC_DT_F32, 2, (int64_t[]){0, 3}, codes);
	float w[3] = {1, 2, 3};
	tbc_value *wv = add_const_bytes(g, "w", TBC_DT_F32, 1, (int64_t[]){3}, w);

	/* Ops: a result left unnamed, two results with one name, omitted inputs
	 * and outputs, attributes of every kind, subgraphs reading outer values. */
	tbc_op *add = tbc_op_new(g, TBC_OP_Add, "add", 2, (tbc_value *[]){x, wv}, 1);
	add->outputs[0]->type = tx;
	tbc_op *n1 = tbc_op_new(g, TBC_OP_Neg, "", 1, (tbc_value *[]){add->outputs[0]}, 1);
	n1->outputs[0]->name = "dup";
	n1->outputs[0]->type = tx;
	tbc_op *n2 = tbc_op_new(g, TBC_OP_Neg, "", 1, (tbc_value *[]){n1->outputs[0]}, 1);
	n2->outputs[0]->name = "dup";
	n2->outputs[0]->type = tx;
	tbc_op *n3 = tbc_op_new(g, TBC_OP_Abs, "", 1, (tbc_value *[]){n2->outputs[0]}, 1);
	n3->outputs[0]->name = "dup.1"; /* the suffix the printer would pick is taken */
	n3->outputs[0]->type = tx;
	tbc_op *drop = tbc_op_new(g, TBC_OP_Dropout, "drop", 3, (tbc_value *[]){n3->outputs[0], NULL, NULL}, 2);
	drop->outputs[0]->type = tx;
	drop->outputs[1] = NULL;
	tbc_attr *a = tbc_op_add_attr(drop, "seed", TBC_ATTR_INT);
	a->i = INT64_MIN;
	a = tbc_op_add_attr(drop, "ratio", TBC_ATTR_FLOAT);
	a->f = (double)0.3f;
	a = tbc_op_add_attr(drop, "exact", TBC_ATTR_FLOAT);
	a->f = 0.1;
	a = tbc_op_add_attr(drop, "bytes", TBC_ATTR_STRING);
	a->s = "nul\0inside\x7f";
	a->s_len = 11;
	a = tbc_op_add_attr(drop, "list of ints", TBC_ATTR_INTS);
	a->n = 3;
	a->ints = tbc_arena_array(m->arena, 3, sizeof *a->ints);
	memcpy(a->ints, (int64_t[]){INT64_MIN, 0, INT64_MAX}, 3 * sizeof *a->ints);
	a = tbc_op_add_attr(drop, "fl", TBC_ATTR_FLOATS);
	a->n = 4;
	a->floats = tbc_arena_array(m->arena, 4, sizeof *a->floats);
	memcpy(a->floats, (double[]){1e-310, -0.0, 5e-324, 1.7976931348623157e308}, 4 * sizeof *a->floats);
	a = tbc_op_add_attr(drop, "ss", TBC_ATTR_STRINGS);
	a->n = 2;
	a->strings = tbc_arena_array(m->arena, 2, sizeof *a->strings);
	a->strings[0] = "a,b";
	a->strings[1] = "\"q\"";
	int64_t td[2] = {2, 2};
	tbc_tensor *tt = tbc_tensor_create(TBC_DT_F16, 2, td);
	tbc_store_f64(TBC_DT_F16, tt->data, 3, 0.1);
	a = tbc_op_add_attr(drop, "t", TBC_ATTR_TENSOR);
	a->n = 1;
	a->tensors = tbc_arena_alloc(m->arena, sizeof *a->tensors);
	a->tensors[0] = tbc_tensor_copy_to_arena(m->arena, tt);
	a = tbc_op_add_attr(drop, "ts", TBC_ATTR_TENSORS);
	a->n = 2;
	a->tensors = tbc_arena_array(m->arena, 2, sizeof *a->tensors);
	a->tensors[0] = a->tensors[1] = tbc_tensor_copy_to_arena(m->arena, tt);
	tbc_tensor_destroy(tt);

	/* If: then_branch reads x and w from outside; else_branch shadows nothing. */
	tbc_op *iff = tbc_op_new(g, TBC_OP_If, "if", 1, (tbc_value *[]){c}, 1);
	iff->outputs[0]->type = tx;
	tbc_graph *then_g = tbc_graph_new(m, g, "then");
	then_g->parent_op = iff;
	tbc_op *t1 = tbc_op_new(then_g, TBC_OP_Mul, "", 2, (tbc_value *[]){drop->outputs[0], wv}, 1);
	t1->outputs[0]->type = tx;
	t1->outputs[0]->name = "dup"; /* visible outside as dup: renamed */
	tbc_graph_add_output(then_g, t1->outputs[0]);
	tbc_graph *else_g = tbc_graph_new(m, g, "else");
	else_g->parent_op = iff;
	tbc_op *e1 = tbc_op_new(else_g, TBC_OP_Identity, "", 1, (tbc_value *[]){x}, 1);
	e1->outputs[0]->type = tx;
	e1->outputs[0]->name = "inner"; /* the same name in a sibling graph is fine */
	tbc_graph_add_output(else_g, e1->outputs[0]);
	a = tbc_op_add_attr(iff, "then_branch", TBC_ATTR_GRAPH);
	a->n = 1;
	a->graphs = tbc_arena_alloc(m->arena, sizeof *a->graphs);
	a->graphs[0] = then_g;
	a = tbc_op_add_attr(iff, "else_branch", TBC_ATTR_GRAPH);
	a->n = 1;
	a->graphs = tbc_arena_alloc(m->arena, sizeof *a->graphs);
	a->graphs[0] = else_g;
	(void)odd;
	(void)u;

	tbc_graph_add_output(g, iff->outputs[0]);
	tbc_graph_add_output(g, n2->outputs[0]);
	tbc_graph_add_output(g, u);
	return m;
}

static void built_module_round_trips_and_verifies(void **state) {
	(void)state;
	tbc_module *m = build_everything();
	tbc_diags *d = tbc_diags_create();
	assert_true(tbc_verify(m, d));
	char *a = tbc_print(m);
	assert_non_null(a);
	tbc_module *m2 = tbc_parse(a, "everything.ir", d);
	if (!m2) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		print_error("%s\n%s\n", a, msg);
	}
	assert_non_null(m2);
	if (!tbc_verify(m2, d)) {
		char msg[1200];
		tbc_diag_format(tbc_diags_get(d, 0), msg, sizeof msg);
		print_error("%s\n", msg);
		fail();
	}
	char *b = tbc_print(m2);
	assert_string_equal(a, b);
	/* Constants are equal to the bit. */
	assert_int_equal(m->main->n_consts, m2->main->n_consts);
	for (int i = 0; i < m->main->n_consts; i++) {
		const tbc_tensor *x = m->main->consts[i]->constant, *y = m2->main->consts[i]->constant;
		assert_int_equal(x->dtype, y->dtype);
		assert_int_equal(x->numel, y->numel);
		assert_memory_equal(x->data, y->data, (size_t)x->numel * tbc_dtype_size(x->dtype) + (x->numel == 0));
	}
	/* So are the attributes' floats and strings. */
	const tbc_op *drop = m2->main->first->next->next->next->next;
	assert_string_equal(tbc_ops[drop->code].name, "Dropout");
	assert_int_equal(tbc_attr_int(drop, "seed", 0), INT64_MIN);
	double r = tbc_attr_float(drop, "ratio", 0), want = (double)0.3f;
	assert_memory_equal(&r, &want, sizeof r);
	const tbc_attr *s = tbc_op_attr(drop, "bytes");
	assert_int_equal(s->s_len, 11);
	assert_memory_equal(s->s, "nul\0inside\x7f", 11);
	const double *fl;
	assert_int_equal(tbc_attr_floats(drop, "fl", &fl), 4);
	double fwant[] = {1e-310, -0.0, 5e-324, 1.7976931348623157e308};
	assert_memory_equal(fl, fwant, sizeof fwant);
	/* The duplicate names were made unique, and names are kept otherwise. */
	assert_non_null(strstr(a, "%dup: f32"));
	assert_non_null(strstr(a, "%dup.2: f32"));
	assert_non_null(strstr(a, "%\"1\": bool[]"));
	assert_non_null(strstr(a, "%\"odd \\\"name\\\"\\twith\\\\ \\xc3\\xa9\": f16[*]"));
	assert_non_null(strstr(a, "f32[\"batch size\",3]"));
	free(a);
	free(b);
	tbc_module_destroy(m);
	tbc_module_destroy(m2);
	tbc_diags_destroy(d);
}

static void float_attributes_read_back_to_the_same_double(void **state) {
	(void)state;
	uint64_t nan_bits[] = {0x7ff8000000000000ull, 0x7ff0000000000001ull, 0xfff8000000000000ull, 0x7ff4000000000abcull};
	double vals[32];
	int n = 0;
	double plain[] = {0.1, (double)0.1f, 1.0 / 3, (double)(1.0f / 3), 1e-320, -1e-320, 123456789.0, 1e23, -0.0, 0.0,
			  INFINITY, -INFINITY, 2.2250738585072014e-308, (double)1.17549435e-38f, 16777217.0, 0.5};
	for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) vals[n++] = plain[i];
	for (size_t i = 0; i < 4; i++) memcpy(&vals[n++], &nan_bits[i], sizeof(double));
	tbc_module *m = tbc_module_new(NULL);
	tbc_type t = ty(TBC_DT_F32, 0, NULL);
	tbc_value *x = tbc_graph_add_input(m->main, "x", &t);
	tbc_op *op = tbc_op_new(m->main, TBC_OP_Relu, "", 1, &x, 1);
	op->outputs[0]->type = t;
	tbc_attr *a = tbc_op_add_attr(op, "fs", TBC_ATTR_FLOATS);
	a->n = n;
	a->floats = vals;
	for (int i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%d", i);
		tbc_op_add_attr(op, name, TBC_ATTR_FLOAT)->f = vals[i];
	}
	tbc_graph_add_output(m->main, op->outputs[0]);
	char *text = tbc_print(m);
	tbc_diags *d = tbc_diags_create();
	tbc_module *m2 = tbc_parse(text, "f.ir", d);
	assert_non_null(m2);
	const tbc_op *op2 = m2->main->first;
	const double *back;
	assert_int_equal(tbc_attr_floats(op2, "fs", &back), n);
	assert_memory_equal(back, vals, (size_t)n * sizeof *vals);
	for (int i = 0; i < n; i++) assert_memory_equal(&op2->attrs[i + 1].f, &vals[i], sizeof(double));
	/* Readable where it can be. */
	assert_non_null(strstr(text, "f0 = 0.1,"));
	assert_non_null(strstr(text, "f1 = 0.1f,"));
	free(text);
	tbc_module_destroy(m);
	tbc_module_destroy(m2);
	tbc_diags_destroy(d);
}

static void large_constants_print_as_hex_and_small_ones_readable(void **state) {
	(void)state;
	char *out = reprint("graph g() {\n  %a: i8[3] = const [1, -2, 3]\n"
			    "  %b: u8[40] = const 0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627\n"
			    "  %c: f32[2] = const 0x0000803f0000c0ff\n"
			    "  return %a, %b, %c\n}\n",
			    "h.ir");
	assert_non_null(strstr(out, "%a: i8[3] = const [1, -2, 3]\n"));
	assert_non_null(strstr(out, "%b: u8[40] = const 0x0001020304"));
	/* 1.0 and a NaN whose sign is set: the NaN keeps its bits through hex. */
	assert_non_null(strstr(out, "%c: f32[2] = const 0x0000803f0000c0ff\n"));
	free(out);
}

/* ---- Errors ---- */

static void errors_name_file_line_and_column(void **state) {
	(void)state;
	assert_parse_error("", "t.ir:1:1: expected 'graph', found end of input");
	assert_parse_error("graph g() {\n  return %x\n}\n", "t.ir:2:10: undefined value %x");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Frobnicate(%x)\n  return %y\n}\n", "t.ir:2:8: unknown op 'Frobnicate'");
	assert_parse_error("graph g(%x: f99[2]) {\n  return %x\n}\n", "t.ir:1:13: unknown element type 'f99'");
	assert_parse_error("graph g(%x: f32[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]) {return %x}", "rank above the limit of 16");
	assert_parse_error("graph g(%x: f32[-1]) {return %x}", "a dim must be a non-negative integer");
	assert_parse_error("graph \"g() {return}", "t.ir:1:7: unterminated string");
	assert_parse_error("graph \"\\q\"() {return}", "unknown escape");
	assert_parse_error("graph g() {\n  %a: f32[3] = const [1, 2]\n  return %a\n}", "2 elements given, the type needs 3");
	assert_parse_error("graph g() {\n  %a: f32[1] = const [1, 2]\n  return %a\n}", "more elements than the type's 1");
	assert_parse_error("graph g() {\n  %a: f32[2] = const 0x0000\n  return %a\n}", "hex data holds 2 bytes, the type needs 8");
	assert_parse_error("graph g() {\n  %a: i8[1] = const [300]\n  return %a\n}", "integer out of range for the element type");
	assert_parse_error("graph g() {\n  %a: u8[1] = const [-1]\n  return %a\n}", "integer out of range");
	assert_parse_error("graph g() {\n  %a: bool[1] = const [2]\n  return %a\n}", "expected true or false");
	assert_parse_error("graph g() {\n  %a: f32[N] = const [1]\n  return %a\n}", "a tensor needs static dims");
	assert_parse_error("graph g() {\n  %a = const [1]\n  return %a\n}", "a constant needs a type");
	assert_parse_error("graph g(%x: f32[2]) {\n  %x = Relu(%x)\n  return %x\n}", "t.ir:2:3: redefinition of %x (defined at line 1)");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x) {a = 1, a = 2}\n  return %y\n}", "attribute 'a' given twice");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x) {a = []}\n  return %y\n}", "an empty list needs its kind");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x) {a = [1, \"s\"]}\n  return %y\n}", "list elements of different kinds");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x) {a = ints[1.5]}\n  return %y\n}", "list elements of different kinds");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x) {a = 99999999999999999999}\n  return %y\n}", "out-of-range integer");
	assert_parse_error("graph g() {\n  %a: f32[2] = const <8 bytes elided>\n  return %a\n}", "constant data left out");
	assert_parse_error("graph g() {\n  return\n} trailing", "t.ir:3:3: expected end of input");
	assert_parse_error("graph g() {\n  %y = Relu(%x)\n", "undefined value %x");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x)\n", "expected a statement or 'return'");
	assert_parse_error("graph g() { return } \x01", "unexpected byte 0x01");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x) @\"a\\x00b\"\n  return %y\n}", "a node name contains a NUL byte");
	assert_parse_error("module opset x graph g() {return}", "expected an integer");
	assert_parse_error("graph g(%x: f32[2]) {\n  %y = Relu(%x) {a = 12abc}\n  return %y\n}", "malformed number");
}

static void subgraph_names_end_with_the_subgraph(void **state) {
	(void)state;
	assert_parse_error("graph g(%c: bool[]) {\n"
			   "  %r = If(%c) {then_branch = graph t() {\n    %in = Not(%c)\n    return %in\n  }}\n"
			   "  %s = Not(%in)\n"
			   "  return %s\n}",
			   "t.ir:6:12: undefined value %in");
	/* A result is not visible inside its own op's subgraphs. */
	assert_parse_error("graph g(%c: bool[]) {\n"
			   "  %r = If(%c) {then_branch = graph t() {\n    return %r\n  }}\n"
			   "  return %r\n}",
			   "t.ir:3:12: undefined value %r");
}

static void nesting_beyond_the_limit_is_an_error(void **state) {
	(void)state;
	size_t cap = 64 * 1024, n = 0;
	char *s = malloc(cap);
	n += (size_t)snprintf(s + n, cap - n, "graph g(%%c: bool[]) {\n");
	for (int i = 0; i < TBC_MAX_SUBGRAPH_DEPTH + 1; i++)
		n += (size_t)snprintf(s + n, cap - n, "%%r%d = If(%%c) {then_branch = graph t() {\n", i);
	n += (size_t)snprintf(s + n, cap - n, "return %%c }}\n");
	char *msg = parse_error(s);
	assert_non_null(strstr(msg, "subgraphs nested deeper than 32"));
	free(msg);
	/* At the limit it parses. */
	n = (size_t)snprintf(s, cap, "graph g(%%c: bool[]) {\n");
	for (int i = 0; i < TBC_MAX_SUBGRAPH_DEPTH; i++)
		n += (size_t)snprintf(s + n, cap - n, "%%r%d = If(%%c) {then_branch = graph t() {\n", i);
	n += (size_t)snprintf(s + n, cap - n, "return %%c\n");
	for (int i = TBC_MAX_SUBGRAPH_DEPTH - 1; i >= 0; i--) n += (size_t)snprintf(s + n, cap - n, "}}\nreturn %%r%d\n", i);
	snprintf(s + n, cap - n, "}\n");
	char *out = reprint(s, "deep.ir");
	free(out);
	free(s);
}

/* Every prefix of a valid text, and single-byte changes all over it, parse
 * or fail cleanly (the sanitizer build checks for leaks and bad reads). */
static void truncated_or_mangled_text_never_crashes(void **state) {
	(void)state;
	tbc_module *m = build_everything();
	char *text = tbc_print(m);
	tbc_module_destroy(m);
	size_t n = strlen(text);
	char *buf = malloc(n + 1);
	int parsed = 0;
	for (size_t cut = 0; cut + 1 < n; cut += 7) {
		memcpy(buf, text, cut);
		buf[cut] = 0;
		tbc_diags *d = tbc_diags_create();
		tbc_module *p = tbc_parse(buf, "cut.ir", d);
		parsed += p != NULL;
		tbc_module_destroy(p);
		tbc_diags_destroy(d);
	}
	assert_int_equal(parsed, 0); /* nothing short of the whole text is complete */
	uint32_t seed = 12345;
	static const char alphabet[] = "%\"\\{}[](),=:@_#0x9.-e\nfgraph";
	for (int k = 0; k < 3000; k++) {
		memcpy(buf, text, n + 1);
		for (int j = 0; j < 3; j++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % n;
			seed = seed * 1103515245u + 12345u;
			buf[at] = (seed >> 16) & 1 ? alphabet[(seed >> 8) % (sizeof alphabet - 1)] : (char)(seed >> 8);
			if (!buf[at]) buf[at] = ' ';
		}
		tbc_diags *d = tbc_diags_create();
		tbc_module *p = tbc_parse(buf, "mangled.ir", d);
		if (p) {
			/* Whatever parses also prints and verifies or says why not. */
			char *again = tbc_print(p);
			free(again);
			tbc_verify_ex(p, d, TBC_VERIFY_ALLOW_UNTYPED);
		}
		tbc_module_destroy(p);
		tbc_diags_destroy(d);
	}
	free(buf);
	free(text);
}

/* ---- The ONNX node suite ---- */

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void every_suite_model_that_imports_round_trips(void **state) {
	(void)state;
	const char *src = getenv("TBC_SOURCE_DIR");
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/../shared/onnx-tests/node", src ? src : ".");
	DIR *dp = opendir(dir);
	if (!dp) {
		TBC_TEST_NEEDS("the ONNX node suite at %s", dir);
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *e; (e = readdir(dp));) {
		if (e->d_name[0] == '.') continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			names = realloc(names, cap * sizeof *names);
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(dp);
	qsort(names, n, sizeof *names, by_name);
	int imported = 0, round_tripped = 0, failed = 0, verified = 0;
	for (size_t i = 0; i < n; i++) {
		char path[8192];
		snprintf(path, sizeof path, "%s/%s/model.onnx", dir, names[i]);
		struct stat st;
		if (stat(path, &st) != 0) continue;
		tbc_diags *d = tbc_diags_create();
		tbc_module *m = NULL;
		if (tbc_module_load_onnx(path, d, &m) == TBC_OK && m) {
			imported++;
			verified += tbc_verify(m, d);
			char *a = tbc_print(m);
			tbc_module *m2 = a ? tbc_parse(a, names[i], d) : NULL;
			char *b = m2 ? tbc_print(m2) : NULL;
			if (a && b && !strcmp(a, b)) {
				round_tripped++;
			} else {
				failed++;
				char msg[1200] = "";
				if (tbc_diags_count(d)) tbc_diag_format(tbc_diags_get(d, tbc_diags_count(d) - 1), msg, sizeof msg);
				print_error("%s does not round-trip %s\n", names[i], msg);
			}
			free(a);
			free(b);
			tbc_module_destroy(m2);
		}
		tbc_module_destroy(m);
		tbc_diags_destroy(d);
		free(names[i]);
	}
	free(names);
	print_message("suite: %d models imported, %d round-trip, %d verify\n", imported, round_tripped, verified);
	assert_int_equal(failed, 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_of_a_small_model_is_canonical),
		cmocka_unit_test(text_of_every_attribute_kind_is_canonical),
		cmocka_unit_test(text_of_subgraphs_with_outer_references_is_canonical),
		cmocka_unit_test(text_of_omitted_inputs_outputs_and_untyped_results_is_canonical),
		cmocka_unit_test(parser_accepts_comments_spacing_and_no_header),
		cmocka_unit_test(unnamed_values_are_numbered_in_print_order),
		cmocka_unit_test(fresh_dim_counter_skips_dims_named_in_the_text),
		cmocka_unit_test(docs_example_is_canonical),
		cmocka_unit_test(built_module_round_trips_and_verifies),
		cmocka_unit_test(float_attributes_read_back_to_the_same_double),
		cmocka_unit_test(large_constants_print_as_hex_and_small_ones_readable),
		cmocka_unit_test(errors_name_file_line_and_column),
		cmocka_unit_test(subgraph_names_end_with_the_subgraph),
		cmocka_unit_test(nesting_beyond_the_limit_is_an_error),
		cmocka_unit_test(truncated_or_mangled_text_never_crashes),
		cmocka_unit_test(every_suite_model_that_imports_round_trips),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
