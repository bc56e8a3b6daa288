/* The IR verifier, one test per rule: a small module built with the builder
 * verifies; each test breaks one invariant and expects the verifier to say
 * so with an INTERNAL diagnostic naming the op or value.  Then the module
 * summary that `tbc inspect` prints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ir/ir.h"

static tbc_type f32(int rank, const int64_t *dims) {
	tbc_type t;
	tbc_type_set(&t, TBC_DT_F32, rank, dims);
	return t;
}

/* graph main(%x: f32[2]) { %y: f32[2] = Relu(%x) @relu; return %y } */
typedef struct small {
	tbc_module *m;
	tbc_graph *g;
	tbc_value *x, *y;
	tbc_op *relu;
} small;

static small make_small(void) {
	small s;
	s.m = tbc_module_new("small.onnx");
	s.g = s.m->main;
	tbc_type t = f32(1, (int64_t[]){2});
	s.x = tbc_graph_add_input(s.g, "x", &t);
	s.relu = tbc_op_new(s.g, TBC_OP_Relu, "relu", 1, &s.x, 1);
	s.y = s.relu->outputs[0];
	s.y->name = "y";
	s.y->type = t;
	tbc_graph_add_output(s.g, s.y);
	return s;
}

static tbc_op *op1(tbc_graph *g, tbc_opcode code, tbc_value *in) {
	tbc_op *op = tbc_op_new(g, code, "", 1, &in, 1);
	if (in) op->outputs[0]->type = in->type;
	return op;
}

/* Verifies m expecting failure with a diagnostic whose message holds want;
 * every diagnostic is INTERNAL.  Returns that diagnostic's copy for more checks. */
static void expect_broken_flags(tbc_module *m, unsigned flags, const char *want, const char *node, const char *tensor) {
	tbc_diags *d = tbc_diags_create();
	assert_false(tbc_verify_ex(m, d, flags));
	bool found = false;
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		const tbc_diag *g = tbc_diags_get(d, i);
		assert_int_equal(g->code, TBC_ERR_INTERNAL);
		if (!strstr(g->message, want)) continue;
		found = true;
		if (node) assert_string_equal(g->node ? g->node : "", node);
		if (tensor) assert_string_equal(g->tensor ? g->tensor : "", tensor);
	}
	if (!found)
		for (size_t i = 0; i < tbc_diags_count(d); i++) {
			char buf[1024];
			tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
			print_error("got: %s\n", buf);
		}
	assert_true(found);
	tbc_diags_destroy(d);
}

static void expect_broken(tbc_module *m, const char *want) { expect_broken_flags(m, 0, want, NULL, NULL); }

static void expect_ok(tbc_module *m, unsigned flags) {
	tbc_diags *d = tbc_diags_create();
	bool ok = tbc_verify_ex(m, d, flags);
	for (size_t i = 0; i < tbc_diags_count(d); i++) {
		char buf[1024];
		tbc_diag_format(tbc_diags_get(d, i), buf, sizeof buf);
		print_error("unexpected: %s\n", buf);
	}
	assert_true(ok);
	assert_int_equal(tbc_diags_count(d), 0);
	tbc_diags_destroy(d);
}

/* If(%c) with a then and an else branch, each returning a value of its own. */
static tbc_op *add_if(small *s, tbc_graph **then_g, tbc_graph **else_g) {
	tbc_type tb;
	tbc_type_set(&tb, TBC_DT_BOOL, 0, NULL);
	tbc_value *c = tbc_graph_add_input(s->g, "c", &tb);
	tbc_op *iff = tbc_op_new(s->g, TBC_OP_If, "if", 1, &c, 1);
	iff->outputs[0]->type = s->x->type;
	const char *names[2] = {"then_branch", "else_branch"};
	tbc_graph **gs[2] = {then_g, else_g};
	for (int k = 0; k < 2; k++) {
		tbc_graph *b = tbc_graph_new(s->m, s->g, names[k]);
		b->parent_op = iff;
		tbc_op *n = op1(b, TBC_OP_Neg, s->x); /* reads x from the enclosing graph */
		tbc_graph_add_output(b, n->outputs[0]);
		tbc_attr *a = tbc_op_add_attr(iff, names[k], TBC_ATTR_GRAPH);
		a->n = 1;
		a->graphs = tbc_arena_alloc(s->m->arena, sizeof *a->graphs);
		a->graphs[0] = b;
		*gs[k] = b;
	}
	return iff;
}

static void well_formed_module_verifies(void **state) {
	(void)state;
	small s = make_small();
	tbc_graph *t, *e;
	add_if(&s, &t, &e);
	int64_t d3[1] = {3};
	tbc_tensor *k = tbc_tensor_create(TBC_DT_I64, 1, d3);
	tbc_graph_add_const(s.g, "k", k);
	tbc_tensor_destroy(k);
	expect_ok(s.m, 0);
	tbc_module_destroy(s.m);
}

static void ssa_value_defined_twice(void **state) {
	(void)state;
	small s = make_small();
	tbc_op *neg = op1(s.g, TBC_OP_Neg, s.x);
	neg->outputs[0] = s.y; /* y is now the result of two ops */
	expect_broken_flags(s.m, 0, "defined more than once", NULL, "y");
	tbc_module_destroy(s.m);
}

static void ssa_use_before_definition(void **state) {
	(void)state;
	small s = make_small();
	/* A Neg before the Relu reading the Relu's result. */
	tbc_op_remove(s.relu);
	tbc_op *neg = tbc_op_new(s.g, TBC_OP_Neg, "neg", 1, NULL, 1);
	neg->outputs[0]->type = s.x->type;
	tbc_op *relu = op1(s.g, TBC_OP_Relu, s.x);
	relu->outputs[0]->name = "y2";
	tbc_op_set_input(neg, 0, relu->outputs[0]);
	s.g->outputs[0] = neg->outputs[0];
	expect_broken_flags(s.m, 0, "input 0 (y2) is not defined before this op", "neg", NULL);
	tbc_module_destroy(s.m);
}

static void ssa_use_of_a_value_from_a_sibling_subgraph(void **state) {
	(void)state;
	small s = make_small();
	tbc_graph *t, *e;
	add_if(&s, &t, &e);
	/* else_branch returns then_branch's value: out of its scope. */
	tbc_op *id = op1(e, TBC_OP_Identity, t->outputs[0]);
	id->name = "stray";
	expect_broken_flags(s.m, 0, "is not defined before this op in its graph or an enclosing one", "stray", NULL);
	tbc_module_destroy(s.m);
}

static void ssa_subgraph_cannot_read_its_own_ops_result(void **state) {
	(void)state;
	small s = make_small();
	tbc_graph *t, *e;
	tbc_op *iff = add_if(&s, &t, &e);
	op1(t, TBC_OP_Identity, iff->outputs[0]); /* a cycle through the If */
	expect_broken(s.m, "is not defined before this op");
	tbc_module_destroy(s.m);
}

static void graph_output_must_be_defined(void **state) {
	(void)state;
	small s = make_small();
	tbc_op_remove(s.relu); /* y's definition is gone; the graph still returns it */
	expect_broken(s.m, "output 0 (y) is not defined in the graph or an enclosing one");
	tbc_module_destroy(s.m);
	s = make_small();
	s.g->outputs[0] = NULL;
	expect_broken(s.m, "output 0 is NULL");
	tbc_module_destroy(s.m);
}

static void use_list_missing_an_entry(void **state) {
	(void)state;
	small s = make_small();
	s.x->uses = NULL; /* Relu reads x but x does not know */
	expect_broken_flags(s.m, 0, "input 0 (x) is missing from the value's use list", "relu", NULL);
	expect_broken_flags(s.m, 0, "use list has 0 entries but the value is an input 1 times", NULL, "x");
	tbc_module_destroy(s.m);
}

static void use_list_with_a_stray_entry(void **state) {
	(void)state;
	small s = make_small();
	tbc_use *u = tbc_arena_alloc(s.m->arena, sizeof *u);
	u->op = s.relu;
	u->index = 0;
	u->next = s.y->uses;
	s.y->uses = u; /* y claims Relu reads it: it does not */
	expect_broken_flags(s.m, 0, "use list entry (input 0 of Relu) does not match the op's inputs", NULL, "y");
	tbc_module_destroy(s.m);
}

static void use_list_naming_a_removed_op(void **state) {
	(void)state;
	small s = make_small();
	tbc_op *neg = op1(s.g, TBC_OP_Neg, s.x);
	/* Unlink by hand without clearing inputs, as a careless pass would. */
	s.g->last = neg->prev;
	neg->prev->next = NULL;
	expect_broken_flags(s.m, 0, "use list names an op that is not in any graph", NULL, "x");
	tbc_module_destroy(s.m);
}

static void arity_within_ops_def(void **state) {
	(void)state;
	small s = make_small();
	tbc_op *add = tbc_op_new(s.g, TBC_OP_Add, "add3", 3, (tbc_value *[]){s.x, s.x, s.x}, 1);
	add->outputs[0]->type = s.x->type;
	expect_broken_flags(s.m, 0, "has 3 inputs; ops.def allows 2 to 2", "add3", NULL);
	tbc_module_destroy(s.m);
	s = make_small();
	tbc_value *k = tbc_graph_add_input(s.g, "k", &(tbc_type){TBC_DT_I64, 1, {{1, NULL}}});
	tbc_op *topk = tbc_op_new(s.g, TBC_OP_TopK, "topk", 2, (tbc_value *[]){s.x, k}, 1);
	topk->outputs[0]->type = s.x->type;
	expect_broken_flags(s.m, 0, "has 1 outputs; ops.def allows 2 to 2", "topk", NULL);
	tbc_module_destroy(s.m);
	/* Variadic: Concat takes any number from 1. */
	s = make_small();
	tbc_op *cat = tbc_op_new(s.g, TBC_OP_Concat, "cat", 0, NULL, 1);
	cat->outputs[0]->type = s.x->type;
	expect_broken_flags(s.m, 0, "has 0 inputs; ops.def allows 1 to -1", "cat", NULL);
	tbc_module_destroy(s.m);
}

static void opcode_outside_ops_def(void **state) {
	(void)state;
	small s = make_small();
	s.relu->code = TBC_OP_COUNT;
	expect_broken_flags(s.m, 0, "is not in ops.def", "relu", NULL);
	tbc_module_destroy(s.m);
}

static void every_value_has_a_supported_dtype(void **state) {
	(void)state;
	small s = make_small();
	s.x->type.dtype = TBC_DT_STRING;
	expect_broken_flags(s.m, 0, "element type string (8) is not supported", NULL, "x");
	tbc_module_destroy(s.m);
	/* A result without a type: wrong after inference, fine before it. */
	s = make_small();
	s.y->type = (tbc_type){TBC_DT_UNDEFINED, -1, {{0, NULL}}};
	expect_broken_flags(s.m, 0, "element type undefined (0) is not supported", NULL, "y");
	expect_ok(s.m, TBC_VERIFY_ALLOW_UNTYPED);
	tbc_module_destroy(s.m);
}

static void rank_at_most_the_limit_and_dims_static_or_named(void **state) {
	(void)state;
	small s = make_small();
	s.y->type.rank = TBC_MAX_RANK + 1;
	expect_broken_flags(s.m, 0, "rank 17 is outside -1..16", NULL, "y");
	s.y->type.rank = TBC_MAX_RANK; /* at the limit: fine */
	for (int i = 0; i < TBC_MAX_RANK; i++) s.y->type.dims[i] = (tbc_dim){1, NULL};
	expect_ok(s.m, 0);
	s.y->type.dims[3] = (tbc_dim){-1, NULL};
	expect_broken_flags(s.m, 0, "dim 3 is neither static nor named", NULL, "y");
	s.y->type.dims[3] = (tbc_dim){-1, "N"};
	expect_ok(s.m, 0);
	tbc_module_destroy(s.m);
}

static void constants_have_data_matching_their_type(void **state) {
	(void)state;
	small s = make_small();
	int64_t d3[1] = {3};
	tbc_tensor *t = tbc_tensor_create(TBC_DT_F32, 1, d3);
	tbc_value *k = tbc_graph_add_const(s.g, "k", t);
	tbc_tensor_destroy(t);
	expect_ok(s.m, 0);
	k->type.dims[0].size = 4;
	expect_broken_flags(s.m, 0, "constant data (f32, rank 1) does not match the value's type", NULL, "k");
	k->type.dims[0].size = 3;
	k->type.dtype = TBC_DT_F16;
	expect_broken(s.m, "does not match the value's type");
	k->type.dtype = TBC_DT_F32;
	k->type.dims[0] = (tbc_dim){-1, "N"};
	expect_broken(s.m, "does not match the value's type");
	k->type.dims[0] = (tbc_dim){3, NULL};
	k->constant->numel = 2;
	expect_broken(s.m, "element count does not match its dims");
	k->constant = NULL;
	expect_broken_flags(s.m, 0, "constant has no data", NULL, "k");
	tbc_module_destroy(s.m);
}

static void value_kind_and_links_match_the_definition(void **state) {
	(void)state;
	small s = make_small();
	s.x->kind = TBC_VALUE_RESULT;
	expect_broken_flags(s.m, 0, "is a graph input but its kind says op result", NULL, "x");
	s.x->kind = TBC_VALUE_INPUT;
	s.y->def_index = 1;
	expect_broken_flags(s.m, 0, "def link does not name output 0", NULL, "y");
	s.y->def_index = 0;
	tbc_graph *other = tbc_graph_new(s.m, NULL, "other");
	s.y->graph = other;
	expect_broken(s.m, "graph link does not name the graph that defines it");
	s.y->graph = s.g;
	s.x->id = s.m->n_values + 5;
	expect_broken(s.m, "is not below the module's value count");
	tbc_module_destroy(s.m);
}

static void subgraph_parent_links(void **state) {
	(void)state;
	small s = make_small();
	tbc_graph *t, *e;
	tbc_op *iff = add_if(&s, &t, &e);
	t->parent = NULL;
	expect_broken(s.m, "graph 'then_branch': parent link is wrong");
	t->parent = s.g;
	e->parent_op = s.relu;
	expect_broken(s.m, "graph 'else_branch': parent_op link is wrong");
	e->parent_op = iff;
	expect_ok(s.m, 0);
	tbc_module_destroy(s.m);
}

static void no_cycles_in_op_lists_or_subgraphs(void **state) {
	(void)state;
	small s = make_small();
	tbc_op *neg = op1(s.g, TBC_OP_Neg, s.y);
	neg->next = s.relu; /* relu -> neg -> relu -> ... */
	expect_broken(s.m, "op list has a cycle");
	/* A dump of the broken IR still ends. */
	char *text = tbc_print(s.m);
	assert_non_null(strstr(text, "# the op list loops"));
	free(text);
	free(tbc_module_summary(s.m));
	tbc_module_destroy(s.m);
	/* One subgraph under two ops, and a subgraph holding its own op. */
	s = make_small();
	tbc_graph *t, *e;
	tbc_op *iff = add_if(&s, &t, &e);
	iff->attrs[1].graphs[0] = t;
	expect_broken(s.m, "reachable twice");
	tbc_module_destroy(s.m);
	s = make_small();
	iff = add_if(&s, &t, &e);
	tbc_op *inner = tbc_op_new(t, TBC_OP_If, "inner", 1, (tbc_value *[]){iff->inputs[0]}, 1);
	inner->outputs[0]->type = s.x->type;
	tbc_attr *a = tbc_op_add_attr(inner, "then_branch", TBC_ATTR_GRAPH);
	a->n = 1;
	a->graphs = tbc_arena_alloc(s.m->arena, sizeof *a->graphs);
	a->graphs[0] = t; /* t contains inner, whose branch is t */
	expect_broken(s.m, "reachable twice");
	text = tbc_print(s.m);
	assert_non_null(strstr(text, "<graph nested too deep>"));
	free(text);
	free(tbc_module_summary(s.m));
	tbc_module_destroy(s.m);
}

static void op_links_are_consistent(void **state) {
	(void)state;
	small s = make_small();
	tbc_op *neg = op1(s.g, TBC_OP_Neg, s.y);
	neg->prev = NULL;
	expect_broken(s.m, "prev link is wrong");
	neg->prev = s.relu;
	s.g->last = s.relu;
	expect_broken(s.m, "last link is wrong");
	s.g->last = neg;
	tbc_graph *other = tbc_graph_new(s.m, NULL, "other");
	neg->graph = other;
	expect_broken(s.m, "graph link does not name the graph that lists it");
	tbc_module_destroy(s.m);
}

static void diagnostics_are_internal_and_name_the_op(void **state) {
	(void)state;
	small s = make_small();
	tbc_op_resize_inputs(s.relu, 2);
	tbc_diags *d = tbc_diags_create();
	assert_false(tbc_verify(s.m, d));
	assert_int_equal(tbc_diags_count(d), 1);
	const tbc_diag *g = tbc_diags_get(d, 0);
	assert_int_equal(g->code, TBC_ERR_INTERNAL);
	assert_string_equal(g->file, "small.onnx");
	assert_string_equal(g->node, "relu");
	assert_string_equal(g->op_type, "Relu");
	char buf[512];
	tbc_diag_format(g, buf, sizeof buf);
	assert_string_equal(buf, "small.onnx: node 'relu' (Relu): IR verifier: has 2 inputs; ops.def allows 1 to 1 (bug in tbc)");
	tbc_diags_destroy(d);
	tbc_module_destroy(s.m);
}

/* ---- Summary ---- */

static void summary_counts_ops_by_kind_and_parameters(void **state) {
	(void)state;
	small s = make_small();
	int64_t dw[2] = {1000, 3};
	tbc_tensor *w = tbc_tensor_create(TBC_DT_F32, 2, dw);
	tbc_graph_add_const(s.g, "w", w);
	tbc_tensor_destroy(w);
	int64_t dq[1] = {5};
	tbc_tensor *q = tbc_tensor_create(TBC_DT_I4, 1, dq);
	tbc_graph_add_const(s.g, "q", q);
	tbc_tensor_destroy(q);
	tbc_graph *t, *e;
	add_if(&s, &t, &e);
	s.x->type.dims[0] = (tbc_dim){-1, "N"};
	char *sum = tbc_module_summary(s.m);
	assert_non_null(sum);
	const char *want = "inputs: 2\n"
			   "  x: f32[N]\n"
			   "  c: bool[]\n"
			   "outputs: 1\n"
			   "  y: f32[2]\n"
			   "ops: 4 (2 in subgraphs)\n"
			   "  by kind:\n"
			   "    elementwise   3\n"
			   "    control flow  1\n"
			   "  by op:\n"
			   "    Neg   2\n"
			   "    If    1\n"
			   "    Relu  1\n"
			   "parameters: 3,005 in 2 constants, 12,003 bytes\n";
	if (strcmp(sum, want)) print_error("%s", sum);
	assert_string_equal(sum, want);
	free(sum);
	tbc_module_destroy(s.m);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(well_formed_module_verifies),
		cmocka_unit_test(ssa_value_defined_twice),
		cmocka_unit_test(ssa_use_before_definition),
		cmocka_unit_test(ssa_use_of_a_value_from_a_sibling_subgraph),
		cmocka_unit_test(ssa_subgraph_cannot_read_its_own_ops_result),
		cmocka_unit_test(graph_output_must_be_defined),
		cmocka_unit_test(use_list_missing_an_entry),
		cmocka_unit_test(use_list_with_a_stray_entry),
		cmocka_unit_test(use_list_naming_a_removed_op),
		cmocka_unit_test(arity_within_ops_def),
		cmocka_unit_test(opcode_outside_ops_def),
		cmocka_unit_test(every_value_has_a_supported_dtype),
		cmocka_unit_test(rank_at_most_the_limit_and_dims_static_or_named),
		cmocka_unit_test(constants_have_data_matching_their_type),
		cmocka_unit_test(value_kind_and_links_match_the_definition),
		cmocka_unit_test(subgraph_parent_links),
		cmocka_unit_test(no_cycles_in_op_lists_or_subgraphs),
		cmocka_unit_test(op_links_are_consistent),
		cmocka_unit_test(diagnostics_are_internal_and_name_the_op),
		cmocka_unit_test(summary_counts_ops_by_kind_and_parameters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
