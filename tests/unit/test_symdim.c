/* Derived dims and symbolic values of shape tensors (ir/symdim.c,
 * ir/symval.c; docs/symbolic-shapes.md).  First the polynomials: canonical
 * text, arithmetic, exact division, evaluation, the names that are and are
 * not derived.  Then, op by op, the value inference gives a small shape
 * tensor, written as "[batch, seq + 1, ?, 3]" (? unknown), including the
 * values that must stay unknown because they depend on data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ir/ir.h"
#include "ir/symdim.h"

/* ---- Polynomials ------------------------------------------------------------ */
static const char *canon(const char *text) {
	static char buf[512];
	tbc_poly p;
	if (!tbc_poly_parse(text, &p)) return "<no parse>";
	assert_true(tbc_poly_print(&p, buf, sizeof buf));
	return buf;
}

static void poly_canonical_text_merges_and_orders_terms(void **state) {
	(void)state;
	assert_string_equal(canon("seq + past_seq"), "past_seq + seq");
	assert_string_equal(canon("seq + 0"), "seq");
	assert_string_equal(canon("1 + seq*batch"), "batch*seq + 1");
	assert_string_equal(canon("seq*batch - batch*seq"), "0");
	assert_string_equal(canon("2*n - 1 - n"), "n - 1");
	assert_string_equal(canon("-seq + 4*64"), "-seq + 256");
	assert_string_equal(canon("b*a*a + a"), "a*a*b + a");
	assert_string_equal(canon("\"odd name\" * 2"), "2*\"odd name\"");
	assert_string_equal(canon("seq +"), "<no parse>");
	assert_string_equal(canon("seq / 2"), "<no parse>");
}

static void poly_two_paths_to_one_product_are_one_dim(void **state) {
	(void)state;
	tbc_module *m = tbc_module_new("t");
	tbc_dim batch = {-1, "batch"}, seq = {-1, "seq"}, heads = {12, NULL}, hd = {64, NULL};
	/* (batch*seq)*768 and batch*(seq*12*64) */
	tbc_dim a = tbc_dim_mul(m, tbc_dim_mul(m, batch, seq), (tbc_dim){768, NULL});
	tbc_dim b = tbc_dim_mul(m, batch, tbc_dim_mul(m, seq, tbc_dim_mul(m, heads, hd)));
	assert_string_equal(a.sym, "768*batch*seq");
	assert_true(tbc_dim_eq(a, b));
	/* (past_seq + seq) + 1 - 1 is past_seq + seq; past_seq + seq - seq is past_seq */
	tbc_dim past = {-1, "past_seq"};
	tbc_dim total = tbc_dim_add(m, past, seq, 1);
	assert_string_equal(total.sym, "past_seq + seq");
	tbc_dim back = tbc_dim_add(m, total, seq, -1);
	assert_string_equal(back.sym, "past_seq");
	assert_false(tbc_sym_is_derived(back.sym));
	tbc_dim zero = tbc_dim_add(m, seq, seq, -1);
	assert_null(zero.sym);
	assert_int_equal(zero.size, 0);
	/* a negative constant is no dim */
	tbc_dim neg = tbc_dim_add(m, (tbc_dim){1, NULL}, (tbc_dim){3, NULL}, -1);
	assert_null(neg.sym);
	assert_int_equal(neg.size, -1);
	tbc_module_destroy(m);
}

static void poly_exact_division_only(void **state) {
	(void)state;
	tbc_module *m = tbc_module_new("t");
	tbc_dim n = tbc_dim_mul(m, (tbc_dim){-1, "batch"}, tbc_dim_mul(m, (tbc_dim){-1, "seq"}, (tbc_dim){768, NULL}));
	tbc_dim d = tbc_dim_mul(m, (tbc_dim){-1, "batch"}, (tbc_dim){768, NULL});
	assert_string_equal(tbc_dim_div_exact(m, n, d).sym, "seq");
	/* 2*s + 2 over s + 1 is 2 */
	tbc_dim two_s = tbc_dim_add(m, tbc_dim_mul(m, (tbc_dim){-1, "s"}, (tbc_dim){2, NULL}), (tbc_dim){2, NULL}, 1);
	tbc_dim q = tbc_dim_div_exact(m, two_s, tbc_dim_add(m, (tbc_dim){-1, "s"}, (tbc_dim){1, NULL}, 1));
	assert_null(q.sym);
	assert_int_equal(q.size, 2);
	/* seq / 2, seq / batch and (seq + 1) / seq are not exact */
	tbc_dim no = tbc_dim_div_exact(m, (tbc_dim){-1, "seq"}, (tbc_dim){2, NULL});
	assert_true(!no.sym && no.size < 0);
	no = tbc_dim_div_exact(m, (tbc_dim){-1, "seq"}, (tbc_dim){-1, "batch"});
	assert_true(!no.sym && no.size < 0);
	no = tbc_dim_div_exact(m, tbc_dim_add(m, (tbc_dim){-1, "seq"}, (tbc_dim){1, NULL}, 1), (tbc_dim){-1, "seq"});
	assert_true(!no.sym && no.size < 0);
	tbc_module_destroy(m);
}

static bool lookup(void *ctx, const char *atom, int64_t *value) {
	const int64_t *v = ctx;
	if (!strcmp(atom, "batch")) *value = v[0];
	else if (!strcmp(atom, "seq")) *value = v[1];
	else return false;
	return true;
}

static void poly_evaluates_with_overflow_checks(void **state) {
	(void)state;
	tbc_poly p;
	int64_t v[2] = {3, 7}, out;
	assert_true(tbc_poly_parse("256*batch*seq - seq + 1", &p));
	assert_true(tbc_poly_eval(&p, lookup, v, &out));
	assert_int_equal(out, 256 * 3 * 7 - 7 + 1);
	int64_t huge[2] = {INT64_MAX / 2, 3};
	assert_false(tbc_poly_eval(&p, lookup, huge, &out));
	assert_true(tbc_poly_parse("batch + other", &p));
	assert_false(tbc_poly_eval(&p, lookup, v, &out)); /* an atom nobody knows */
}

static void poly_derived_names_are_canonical_compounds(void **state) {
	(void)state;
	assert_true(tbc_sym_is_derived("past_seq + 1"));
	assert_true(tbc_sym_is_derived("batch*seq"));
	assert_true(tbc_sym_is_derived("2*n"));
	assert_false(tbc_sym_is_derived("batch"));
	assert_false(tbc_sym_is_derived("batch-size")); /* a plain ONNX name, not "batch - size" */
	assert_false(tbc_sym_is_derived("seq+1"));      /* not the canonical spelling */
	assert_false(tbc_sym_is_derived("3"));
	assert_false(tbc_sym_is_derived("_d4"));
}

/* ---- Values of shape tensors -------------------------------------------------- */
static tbc_module *infer(const char *body) {
	static char text[4096];
	snprintf(text, sizeof text,
		 "module ir_version 8 opset 17\n"
		 "graph main(%%x: f32[batch,seq,256], %%p: f32[batch,4,past_seq,64], %%shape_in: i64[2], %%m: bool[batch]) {\n"
		 "  %%i0: i64[] = const [0]\n  %%i1: i64[] = const [1]\n  %%i2: i64[] = const [2]\n"
		 "  %%ax: i64[1] = const [0]\n  %%c1: i64[1] = const [1]\n  %%c2: i64[1] = const [2]\n"
		 "  %%cn1: i64[1] = const [-1]\n  %%c0: i64[1] = const [0]\n"
		 "  %%sx = Shape(%%x)\n  %%sp = Shape(%%p)\n"
		 "  %%seq = Gather(%%sx, %%i1) {axis = 0}\n  %%past = Gather(%%sp, %%i2) {axis = 0}\n"
		 "%s\n  return %%sx\n}\n",
		 body);
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	if (!m) {
		for (size_t i = 0; i < tbc_diags_count(d); i++) fprintf(stderr, "%s\n", tbc_diags_get(d, i)->message);
		fail();
	}
	tbc_infer cx = {.module = m, .diags = d, .static_ranks = true};
	assert_true(tbc_infer_graph(&cx, m->main));
	tbc_diags_destroy(d);
	return m;
}

/* The symbolic value of the value named name, "[a, b + 1, ?, 3]"; "none"
 * when inference knows none of it. */
static const char *sv(const tbc_module *m, const char *name) {
	static char buf[512];
	for (const tbc_op *op = m->main->first; op; op = op->next)
		for (int i = 0; i < op->n_outputs; i++) {
			const tbc_value *v = op->outputs[i];
			if (!v || !v->name || strcmp(v->name, name)) continue;
			if (!v->svals) return "none";
			size_t at = (size_t)snprintf(buf, sizeof buf, "[");
			for (int k = 0; k < v->n_svals; k++) {
				const tbc_sval *s = &v->svals[k];
				const char *sep = k ? ", " : "";
				if (!s->known) at += (size_t)snprintf(buf + at, sizeof buf - at, "%s?", sep);
				else if (s->sym) at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", sep, s->sym);
				else at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%lld", sep, (long long)s->c);
			}
			snprintf(buf + at, sizeof buf - at, "]");
			return buf;
		}
	return "<no such value>";
}

#define EXPECT(body, name, want)                          \
	do {                                              \
		tbc_module *m_ = infer(body);             \
		assert_string_equal(sv(m_, name), want);  \
		tbc_module_destroy(m_);                   \
	} while (0)

static void Shape_of_symbolic_dims_is_their_names(void **state) {
	(void)state;
	EXPECT("", "sx", "[batch, seq, 256]");
	EXPECT("  %s = Shape(%p) {start = 1, end = -1}", "s", "[4, past_seq]");
}

static void Size_is_the_product(void **state) {
	(void)state;
	EXPECT("  %n = Size(%x)", "n", "[256*batch*seq]");
}

static void Gather_picks_elements(void **state) {
	(void)state;
	EXPECT("", "seq", "[seq]");
	EXPECT("  %ix: i64[2] = const [2, -3]\n  %g = Gather(%sx, %ix) {axis = 0}", "g", "[256, batch]");
}

static void Slice_of_a_shape(void **state) {
	(void)state;
	EXPECT("  %s = Slice(%sx, %c0, %cn1)", "s", "[batch, seq]");
	EXPECT("  %st: i64[1] = const [-1]\n  %en: i64[1] = const [-4]\n  %sp1 = Slice(%sx, %st, %en, %ax, %cn1)", "sp1",
	       "[256, seq, batch]");
}

static void Concat_Unsqueeze_Squeeze_keep_elements(void **state) {
	(void)state;
	EXPECT("  %u = Unsqueeze(%seq, %ax)\n  %hd: i64[2] = const [4, 64]\n  %c = Concat(%u, %hd) {axis = 0}", "c",
	       "[seq, 4, 64]");
	EXPECT("  %u = Unsqueeze(%seq, %ax)\n  %q = Squeeze(%u, %ax)", "q", "[seq]");
}

static void Cast_between_integers_keeps_values(void **state) {
	(void)state;
	EXPECT("  %a = Cast(%sx) {to = 6}\n  %b = Cast(%a) {to = 7}", "b", "[batch, seq, 256]");
	EXPECT("  %f = Cast(%sx) {to = 1}\n  %b = Cast(%f) {to = 7}", "b", "none"); /* through float: not tracked */
}

static void Add_Sub_Mul_are_polynomials(void **state) {
	(void)state;
	EXPECT("  %t = Add(%past, %seq)", "t", "[past_seq + seq]");
	EXPECT("  %t = Add(%past, %seq)\n  %u = Add(%t, %i1)\n  %v = Sub(%u, %seq)", "v", "[past_seq + 1]");
	EXPECT("  %t = Mul(%sx, %i2)", "t", "[2*batch, 2*seq, 512]");
}

static void Div_only_when_exact(void **state) {
	(void)state;
	EXPECT("  %four: i64[] = const [4]\n  %t = Mul(%sx, %four)\n  %q = Div(%t, %four)", "q", "[batch, seq, 256]");
	EXPECT("  %three: i64[] = const [3]\n  %q = Div(%sx, %three)", "q", "[?, ?, 85]");
}

static void Max_Min_with_a_size(void **state) {
	(void)state;
	EXPECT("  %a = Max(%seq, %i0)\n  %b = Min(%seq, %i0)\n  %c = Max(%seq, %past)", "a", "[seq]");
	EXPECT("  %a = Max(%seq, %i0)\n  %b = Min(%seq, %i0)", "b", "[0]");
	EXPECT("  %c = Max(%seq, %past)", "c", "none");
}

static void Equal_and_Where_decide_what_sizes_decide(void **state) {
	(void)state;
	/* torch's expand(-1, ...) export: Where(Equal(shape, -1), ones, shape) */
	EXPECT("  %e = Equal(%sx, %cn1)", "e", "[0, 0, 0]");
	EXPECT("  %e = Equal(%sx, %cn1)\n  %o: i64[3] = const [1, 1, 1]\n  %w = Where(%e, %o, %sx)", "w",
	       "[batch, seq, 256]");
	EXPECT("  %e = Equal(%sx, %c1)", "e", "[?, ?, 0]"); /* a size may be 1 */
}

static void ConstantOfShape_Range_Expand_of_short_vectors(void **state) {
	(void)state;
	EXPECT("  %three: i64[1] = const [3]\n  %k = ConstantOfShape(%three) {value = tensor i64[1] [7]}", "k", "[7, 7, 7]");
	EXPECT("  %st: i64[] = const [2]\n  %lim: i64[] = const [5]\n  %r = Range(%st, %lim, %i1)", "r", "[2, 3, 4]");
	EXPECT("  %u = Unsqueeze(%seq, %ax)\n  %e = Expand(%u, %c2)", "e", "[seq, seq]");
}

static void data_dependent_values_stay_unknown(void **state) {
	(void)state;
	/* a shape tensor that is a graph input, and NonZero's count taken as a
	 * plain symbol of its own (known to be that count, not derived) */
	EXPECT("  %a = Add(%shape_in, %c1)", "a", "none");
	EXPECT("  %nz = NonZero(%m)\n  %s = Shape(%nz)", "s", "[1, _d0]");
	tbc_module *m = infer("  %r = Reshape(%x, %shape_in)\n  %nz = NonZero(%m)");
	for (const tbc_op *op = m->main->first; op; op = op->next) {
		if (op->code != TBC_OP_Reshape && op->code != TBC_OP_NonZero) continue;
		const tbc_type *t = &op->outputs[0]->type;
		for (int d = 0; d < t->rank; d++)
			if (t->dims[d].sym) assert_false(tbc_sym_is_derived(t->dims[d].sym));
		if (op->code == TBC_OP_Reshape) assert_string_equal(t->dims[0].sym, "_d0");
	}
	tbc_module_destroy(m);
}

/* The interpreter checks every result against its inferred type; a derived
 * dim is evaluated from the inputs' sizes and compared too. */
static int interpret_flatten(const char *dim) {
	char text[256];
	snprintf(text, sizeof text,
		 "module ir_version 8 opset 17\ngraph main(%%x: f32[n,past]) {\n  %%y: f32[%s] = Flatten(%%x) {axis = 0}\n"
		 "  return %%y\n}\n",
		 dim);
	tbc_diags *d = tbc_diags_create();
	tbc_module *m = tbc_parse(text, "t.ir", d);
	assert_non_null(m);
	tbc_tensor *x = tbc_tensor_create(TBC_DT_F32, 2, (int64_t[]){3, 5});
	tbc_tensor *y = NULL;
	tbc_code rc = tbc_interpret(m, &x, 1, &y, 1, d);
	int code = rc == TBC_OK ? 0 : (int)tbc_diags_first_code(d);
	tbc_tensor_destroy(x);
	tbc_tensor_destroy(y);
	tbc_module_destroy(m);
	tbc_diags_destroy(d);
	return code;
}

static void interpreter_checks_derived_dims_against_results(void **state) {
	(void)state;
	assert_int_equal(interpret_flatten("1,n*past"), 0);
	assert_int_equal(interpret_flatten("1,n*past + 1"), TBC_ERR_INTERNAL);
	assert_int_equal(interpret_flatten("1,n"), TBC_ERR_INTERNAL);
	assert_int_equal(interpret_flatten("1,other"), 0); /* a symbol no input gives: anything */
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(poly_canonical_text_merges_and_orders_terms),
		cmocka_unit_test(poly_two_paths_to_one_product_are_one_dim),
		cmocka_unit_test(poly_exact_division_only),
		cmocka_unit_test(poly_evaluates_with_overflow_checks),
		cmocka_unit_test(poly_derived_names_are_canonical_compounds),
		cmocka_unit_test(Shape_of_symbolic_dims_is_their_names),
		cmocka_unit_test(Size_is_the_product),
		cmocka_unit_test(Gather_picks_elements),
		cmocka_unit_test(Slice_of_a_shape),
		cmocka_unit_test(Concat_Unsqueeze_Squeeze_keep_elements),
		cmocka_unit_test(Cast_between_integers_keeps_values),
		cmocka_unit_test(Add_Sub_Mul_are_polynomials),
		cmocka_unit_test(Div_only_when_exact),
		cmocka_unit_test(Max_Min_with_a_size),
		cmocka_unit_test(Equal_and_Where_decide_what_sizes_decide),
		cmocka_unit_test(ConstantOfShape_Range_Expand_of_short_vectors),
		cmocka_unit_test(data_dependent_values_stay_unknown),
		cmocka_unit_test(interpreter_checks_derived_dims_against_results),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
