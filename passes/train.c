/* A training step from a model (docs/training.md): the loss, the backward
 * graph (passes/autodiff.c) and the optimizer's update, all as graph IR.
 *
 * Does: turns the main graph into one step.  Its inputs are the model's,
 * then the label (made when the model has no input of that name), then the
 * state: each trainable weight (an input of the initializer's name that
 * replaces it) and the optimizer's slots (<weight>.momentum, <weight>.adam_m,
 * <weight>.adam_v, and tbc.adam_step), then BatchNormalization's running
 * statistics (updated by the step, not trained).  Its outputs are `loss`, the model's
 * outputs, then each piece of state after the update, in the same order.
 * m->state pairs them and holds each one's value before the first step (the
 * initializer; zeros for the optimizer's slots).
 * Requires: a verified, inferred module.  Frozen initializers stay
 * constants.  Bad options (a loss output that is not float, a label of the
 * wrong type, a trainable name that is no initializer, an op without a
 * gradient rule) are errors naming what is wrong; the module is then not
 * to be used. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

void tbc_train_options_init(tbc_train_options *o) {
	memset(o, 0, sizeof *o);
	o->optimizer = TBC_OPT_SGD;
	o->lr = 0.01;
	o->momentum = 0.9;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
	o->weight_decay = 0.01;
}

tbc_code tbc_train_parse_loss(tbc_train_options *o, char *spec, tbc_diags *d) {
	char *c1 = spec ? strchr(spec, ':') : NULL;
	if (c1) {
		*c1 = 0;
		char *c2 = strchr(c1 + 1, ':');
		if (!strcmp(spec, "output") && !c2 && c1[1]) {
			o->loss = TBC_LOSS_OUTPUT;
			o->output = c1 + 1;
			return TBC_OK;
		}
		if (c2 && c2 > c1 + 1 && c2[1] && !strchr(c2 + 1, ':') &&
		    (!strcmp(spec, "cross-entropy") || !strcmp(spec, "mse"))) {
			*c2 = 0;
			o->loss = !strcmp(spec, "mse") ? TBC_LOSS_MSE : TBC_LOSS_CROSS_ENTROPY;
			o->output = c1 + 1;
			o->label = c2 + 1;
			return TBC_OK;
		}
		*c1 = ':';
	}
	tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL,
		      "--loss '%s': expected cross-entropy:OUTPUT:LABEL, mse:OUTPUT:LABEL or output:NAME", spec ? spec : "");
	return TBC_ERR_INVALID_ARGUMENT;
}

typedef struct tb {
	tbc_module *m;
	tbc_graph *g;
	tbc_diags *d;
	tbc_infer cx;
	bool failed;
} tb;

static bool err(tb *B, tbc_code code, const char *tensor, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool err(tb *B, tbc_code code, const char *tensor, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	tbc_diags_addv(B->d, code, B->m->path, NULL, NULL, tensor, fmt, ap);
	va_end(ap);
	B->failed = true;
	return false;
}

static tbc_op *mk(tb *B, tbc_opcode code, int n, tbc_value *a, tbc_value *b, tbc_value *c) {
	tbc_value *in[3] = {a, b, c};
	if (B->failed) return NULL;
	for (int i = 0; i < n; i++)
		if (!in[i]) return B->failed = true, NULL;
	tbc_op *op = tbc_op_new(B->g, code, "", n, in, 1);
	if (!op) err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
	return op;
}
static void attr_i(tb *B, tbc_op *op, const char *name, int64_t v) {
	tbc_attr *a = op ? tbc_op_add_attr(op, name, TBC_ATTR_INT) : NULL;
	if (a) a->i = v;
	else if (!B->failed) err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
}
static tbc_value *fin(tb *B, tbc_op *op) {
	if (!op || B->failed) return NULL;
	if (!tbc_infer_op(&B->cx, op)) {
		B->failed = true;
		return NULL;
	}
	return op->outputs[0];
}
static tbc_value *op1(tb *B, tbc_opcode c, tbc_value *a) { return fin(B, mk(B, c, 1, a, NULL, NULL)); }
static tbc_value *op2(tb *B, tbc_opcode c, tbc_value *a, tbc_value *b) { return fin(B, mk(B, c, 2, a, b, NULL)); }
static tbc_value *konst(tb *B, tbc_dtype dt, int rank, const int64_t *dims, const double *v) {
	if (B->failed) return NULL;
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	if (!t) return err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory"), NULL;
	for (int64_t k = 0; k < t->numel; k++) tbc_store_f64(dt, t->data, (size_t)k, v[k]);
	tbc_value *c = tbc_graph_add_const(B->g, NULL, t);
	tbc_tensor_destroy(t);
	if (!c) err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
	return c;
}
static tbc_value *scalar(tb *B, tbc_dtype dt, double v) { return konst(B, dt, 0, NULL, &v); }
static tbc_value *axes1(tb *B, int64_t a) {
	int64_t one = 1;
	double v = (double)a;
	return konst(B, TBC_DT_I64, 1, &one, &v);
}
static tbc_value *reduce(tb *B, tbc_opcode c, tbc_value *x, tbc_value *axes) {
	tbc_op *op = mk(B, c, axes ? 2 : 1, x, axes, NULL);
	attr_i(B, op, "keepdims", 0);
	return fin(B, op);
}
static tbc_value *cast(tb *B, tbc_value *x, tbc_dtype to) {
	if (!x || x->type.dtype == to) return x;
	tbc_op *op = mk(B, TBC_OP_Cast, 1, x, NULL, NULL);
	attr_i(B, op, "to", to);
	return fin(B, op);
}
static tbc_value *mul_s(tb *B, tbc_value *x, double s) { return op2(B, TBC_OP_Mul, x, scalar(B, x->type.dtype, s)); }

static bool is_float(tbc_dtype dt) {
	return dt == TBC_DT_F32 || dt == TBC_DT_F64 || dt == TBC_DT_F16 || dt == TBC_DT_BF16;
}

static tbc_value *find_output(const tbc_graph *g, const char *name) {
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] && g->outputs[i]->name && !strcmp(g->outputs[i]->name, name)) return g->outputs[i];
	return NULL;
}
static tbc_value *find_input(const tbc_graph *g, const char *name) {
	for (int i = 0; i < g->n_inputs; i++)
		if (g->inputs[i]->name && !strcmp(g->inputs[i]->name, name)) return g->inputs[i];
	return NULL;
}

static void type_text(const tbc_type *t, char *buf, size_t size) {
	size_t n = (size_t)snprintf(buf, size, "%s[", tbc_dtype_name(t->dtype));
	for (int i = 0; i < t->rank && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, t->dims[i].sym ? "%s%s" : "%s%.0s%lld", i ? "," : "",
				      t->dims[i].sym ? t->dims[i].sym : "", (long long)t->dims[i].size);
	if (n < size) snprintf(buf + n, size - n, "]");
}

/* The label input: the model's own of that name when it has the type
 * wanted, a new one otherwise. */
static tbc_value *label_input(tb *B, const char *name, const tbc_type *want) {
	tbc_value *v = find_input(B->g, name);
	char a[128], b[128];
	if (!v) {
		v = tbc_graph_add_input(B->g, name, want);
		if (!v) err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
		return v;
	}
	bool ok = v->type.dtype == want->dtype && v->type.rank == want->rank;
	for (int i = 0; ok && i < want->rank; i++) ok = tbc_dim_eq(v->type.dims[i], want->dims[i]);
	if (ok) return v;
	type_text(&v->type, a, sizeof a);
	type_text(want, b, sizeof b);
	err(B, TBC_ERR_INVALID_ARGUMENT, name, "the label is %s, the loss needs %s", a, b);
	return NULL;
}

static tbc_value *build_loss(tb *B, const tbc_train_options *o) {
	tbc_value *y = find_output(B->g, o->output ? o->output : "");
	char t[128];
	if (!y) return err(B, TBC_ERR_INVALID_ARGUMENT, o->output, "the model has no output of this name for the loss"), NULL;
	if (!is_float(y->type.dtype)) {
		type_text(&y->type, t, sizeof t);
		return err(B, TBC_ERR_INVALID_ARGUMENT, o->output, "the loss reads a float output; this one is %s", t), NULL;
	}
	if (o->loss == TBC_LOSS_OUTPUT) {
		if (tbc_type_numel(&y->type) != 1) {
			type_text(&y->type, t, sizeof t);
			return err(B, TBC_ERR_INVALID_ARGUMENT, o->output, "output:NAME needs a scalar loss; this one is %s", t), NULL;
		}
		return op1(B, TBC_OP_Identity, y);
	}
	if (o->loss == TBC_LOSS_MSE) {
		tbc_value *lab = label_input(B, o->label, &y->type);
		tbc_value *e = op2(B, TBC_OP_Sub, y, lab);
		return reduce(B, TBC_OP_ReduceMean, op2(B, TBC_OP_Mul, e, e), NULL);
	}
	if (o->loss != TBC_LOSS_CROSS_ENTROPY) return err(B, TBC_ERR_INVALID_ARGUMENT, NULL, "no loss given"), NULL;
	if (y->type.rank != 2 || y->type.dims[1].sym) {
		type_text(&y->type, t, sizeof t);
		return err(B, TBC_ERR_INVALID_ARGUMENT, o->output, "cross-entropy reads logits [N, C] with C static; this output is %s", t), NULL;
	}
	tbc_type lt = {.dtype = TBC_DT_I64, .rank = 1};
	lt.dims[0] = y->type.dims[0];
	tbc_value *lab = label_input(B, o->label, &lt);
	/* -mean_n sum_c onehot(label)[n, c] * log_softmax(y)[n, c] */
	tbc_op *ls = mk(B, TBC_OP_LogSoftmax, 1, y, NULL, NULL);
	attr_i(B, ls, "axis", 1);
	tbc_value *logp = fin(B, ls);
	int64_t two = 2;
	double depth = (double)y->type.dims[1].size, off_on[2] = {0, 1};
	tbc_op *oh = mk(B, TBC_OP_OneHot, 3, lab, scalar(B, TBC_DT_I64, depth), konst(B, y->type.dtype, 1, &two, off_on));
	attr_i(B, oh, "axis", -1);
	tbc_value *picked = reduce(B, TBC_OP_ReduceSum, op2(B, TBC_OP_Mul, logp, fin(B, oh)), axes1(B, 1));
	return op1(B, TBC_OP_Neg, reduce(B, TBC_OP_ReduceMean, picked, NULL));
}

/* Inputs that are statistics a model keeps, not parameters it learns:
 * BatchNormalization's running mean and variance (PyTorch's buffers). */
static bool statistics_input(const tbc_op *op, int i) {
	return op->code == TBC_OP_BatchNormalization && (i == 3 || i == 4);
}

/* Marks in dep every value the loss depends on (through the main graph's
 * op inputs), statistics inputs aside: `--trainable all` leaves them. */
static bool loss_deps(const tbc_graph *g, const tbc_value *loss, pass_bits *dep) {
	if (!pass_bits_set(dep, loss->id)) return false;
	for (const tbc_op *op = g->last; op; op = op->prev) {
		bool any = false;
		for (int i = 0; i < op->n_outputs; i++) any |= op->outputs[i] && pass_bits_get(dep, op->outputs[i]->id);
		for (int i = 0; any && i < op->n_inputs; i++)
			if (op->inputs[i] && !statistics_input(op, i) && !pass_bits_set(dep, op->inputs[i]->id)) return false;
	}
	return true;
}

static bool listed(const char *list, const char *name) {
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ",");
		if (k == n && !strncmp(p, name, n)) return true;
		p += k + (p[k] == ',');
	}
	return false;
}

/* The weights to train, in the graph's order of constants. */
static int choose_trainable(tb *B, const tbc_train_options *o, tbc_value *loss, tbc_value ***out) {
	tbc_graph *g = B->g;
	bool all = !o->trainable || !strcmp(o->trainable, "all");
	if (!all) /* every listed name must be a float initializer */
		for (const char *p = o->trainable; *p;) {
			size_t k = strcspn(p, ",");
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)(k < 255 ? k : 255), p);
			const tbc_value *c = NULL;
			for (int i = 0; i < g->n_consts && !c; i++)
				if (g->consts[i]->name && !strcmp(g->consts[i]->name, name)) c = g->consts[i];
			if (!c) return err(B, TBC_ERR_INVALID_ARGUMENT, name, "--trainable names no initializer of the model"), -1;
			if (!is_float(c->type.dtype))
				return err(B, TBC_ERR_INVALID_ARGUMENT, name, "--trainable: a %s initializer cannot be trained",
					   tbc_dtype_name(c->type.dtype)), -1;
			p += k + (p[k] == ',');
		}
	pass_bits dep = {0};
	tbc_value **w = tbc_arena_array(B->m->arena, (size_t)g->n_consts + 1, sizeof *w);
	if (!w || !loss_deps(g, loss, &dep)) {
		pass_bits_free(&dep);
		return err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory"), -1;
	}
	int n = 0;
	for (int i = 0; i < g->n_consts; i++) {
		tbc_value *c = g->consts[i];
		if (!c->name || !is_float(c->type.dtype)) continue;
		if (all ? c->type.rank >= 1 && pass_bits_get(&dep, c->id) : listed(o->trainable, c->name)) w[n++] = c;
	}
	pass_bits_free(&dep);
	if (!n) return err(B, TBC_ERR_INVALID_ARGUMENT, NULL, "nothing to train: the loss depends on no float initializer"), -1;
	*out = w;
	return n;
}

typedef struct state_list {
	tbc_value *in[4 * 1024];
	tbc_value *out[4 * 1024];
	const tbc_tensor *init[4 * 1024];
	bool weight[4 * 1024];
	int n;
} state_list;

static tbc_value *state_input(tb *B, state_list *S, const char *name, const tbc_type *t, const tbc_tensor *init) {
	if (B->failed) return NULL;
	if (S->n == (int)(sizeof S->in / sizeof *S->in))
		return err(B, TBC_ERR_UNSUPPORTED, NULL, "more than %d pieces of training state", S->n), NULL;
	tbc_value *v = tbc_graph_add_input(B->g, name, t);
	if (!v) return err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory"), NULL;
	S->in[S->n] = v;
	S->init[S->n] = init;
	S->weight[S->n] = init != NULL; /* the optimizer's state starts from zeros */
	S->out[S->n++] = NULL;
	return v;
}

static void state_output(tb *B, state_list *S, tbc_value *in, tbc_value *out) {
	for (int i = 0; out && i < S->n; i++)
		if (S->in[i] == in) {
			S->out[i] = out;
			out->name = tbc_arena_printf(B->m->arena, "%s.next", in->name);
			if (!out->name) err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
			return;
		}
}

static char *slot_name(tb *B, const tbc_value *w, const char *slot) {
	char *s = tbc_arena_printf(B->m->arena, "%s.%s", w->name, slot);
	if (!s) err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
	return s;
}

/* Dropout in training mode draws its mask from its seed (ONNX's reference:
 * numpy's MT19937), the same mask every run.  In a training step each step
 * must draw another, as a framework's dropout does: each such Dropout of
 * the main graph gets tbc's seed offset (its fourth input, added to the
 * seed) from one more piece of state, tbc.dropout_step (int64, 0 before the
 * first step, +1 each step): offset = step * 1000003.  A Dropout without a
 * seed attribute gets its position among them as its seed, so no two draw
 * the same mask.  The gradient rule recomputes the mask from the same
 * inputs (passes/autodiff.c).  Run before autodiff. */
static void dropout_steps(tb *B, state_list *S, tbc_value **keep, int n_keep) {
	tbc_op *mul = NULL;
	int n = 0;
	for (tbc_op *op = B->g->first; op && !B->failed; op = op->next) {
		if (op->code != TBC_OP_Dropout || op->n_inputs > 3 || !pass_has_effects(op)) continue;
		if (!mul) {
			tbc_type t = {.dtype = TBC_DT_I64, .rank = 0};
			tbc_value *step = state_input(B, S, "tbc.dropout_step", &t, NULL);
			state_output(B, S, step, op2(B, TBC_OP_Add, step, scalar(B, TBC_DT_I64, 1)));
			mul = mk(B, TBC_OP_Mul, 2, step, scalar(B, TBC_DT_I64, 1000003), NULL);
			if (!fin(B, mul)) return;
			pass_unlink(mul);
			pass_insert_before(mul, op);
		}
		tbc_value *in[4] = {op->inputs[0], op->n_inputs > 1 ? op->inputs[1] : NULL, op->inputs[2], mul->outputs[0]};
		tbc_op *d = tbc_op_new(B->g, TBC_OP_Dropout, op->name, 4, in, op->n_outputs);
		if (!d) return (void)err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
		for (int a = 0; a < op->n_attrs; a++) {
			tbc_attr *at = tbc_op_add_attr(d, op->attrs[a].name, op->attrs[a].kind);
			if (!at) return (void)err(B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
			const char *keep = at->name;
			*at = op->attrs[a]; /* arrays in the same arena, never freed */
			at->name = keep;
		}
		if (!tbc_op_attr(d, "seed")) attr_i(B, d, "seed", n);
		pass_unlink(d);
		pass_insert_before(d, op);
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i]) {
				d->outputs[i]->type = op->outputs[i]->type;
				d->outputs[i]->name = op->outputs[i]->name;
				op->outputs[i]->name = NULL;
				pass_replace_value(B->m, op->outputs[i], d->outputs[i]);
				for (int k = 0; k < n_keep; k++) /* the loss and the model's outputs */
					if (keep[k] == op->outputs[i]) keep[k] = d->outputs[i];
			}
		pass_remove_op(op);
		op = d;
		n++;
	}
}

/* The optimizer's update of weight w (now the state input) by gradient gr. */
static void update(tb *B, const tbc_train_options *o, state_list *S, tbc_value *w, tbc_value *gr, tbc_value *c1,
		   tbc_value *c2) {
	tbc_value *next = NULL;
	if (o->optimizer == TBC_OPT_SGD) {
		next = op2(B, TBC_OP_Sub, w, mul_s(B, gr, o->lr));
	} else if (o->optimizer == TBC_OPT_MOMENTUM) {
		tbc_value *v = state_input(B, S, slot_name(B, w, "momentum"), &w->type, NULL);
		tbc_value *vn = op2(B, TBC_OP_Add, mul_s(B, v, o->momentum), gr);
		state_output(B, S, v, vn);
		next = op2(B, TBC_OP_Sub, w, mul_s(B, vn, o->lr));
	} else {
		tbc_value *m = state_input(B, S, slot_name(B, w, "adam_m"), &w->type, NULL);
		tbc_value *v = state_input(B, S, slot_name(B, w, "adam_v"), &w->type, NULL);
		tbc_value *mn = op2(B, TBC_OP_Add, mul_s(B, m, o->beta1), mul_s(B, gr, 1 - o->beta1));
		tbc_value *vn = op2(B, TBC_OP_Add, mul_s(B, v, o->beta2), mul_s(B, op2(B, TBC_OP_Mul, gr, gr), 1 - o->beta2));
		state_output(B, S, m, mn);
		state_output(B, S, v, vn);
		tbc_value *mhat = op2(B, TBC_OP_Div, mn, cast(B, c1, w->type.dtype));
		tbc_value *vhat = op2(B, TBC_OP_Div, vn, cast(B, c2, w->type.dtype));
		tbc_value *den = op2(B, TBC_OP_Add, op1(B, TBC_OP_Sqrt, vhat), scalar(B, w->type.dtype, o->eps));
		tbc_value *step = op2(B, TBC_OP_Div, mhat, den);
		if (o->weight_decay != 0) step = op2(B, TBC_OP_Add, step, mul_s(B, w, o->weight_decay));
		next = op2(B, TBC_OP_Sub, w, mul_s(B, step, o->lr));
	}
	state_output(B, S, w, next);
}

/* BatchNormalization with the batch's statistics (training_mode=1) keeps
 * running ones in its initializers 3 and 4: they become state, updated
 * each step as the op's running outputs are defined (ONNX):
 *   running = running * momentum + batch * (1 - momentum),
 * the batch's mean and biased variance over all but dim 1.  So the step
 * carries them as a framework's training does, and --save and --export
 * write them with the weights.  An op whose statistics are not named
 * initializers, or are read by another op too, keeps them constant. */
static void running_statistics(tb *B, state_list *S) {
	for (tbc_op *op = B->g->first; op && !B->failed; op = op->next) {
		if (op->code != TBC_OP_BatchNormalization || !tbc_attr_int(op, "training_mode", 0) || op->n_inputs < 5) continue;
		tbc_value *x = op->inputs[0], *st[2] = {op->inputs[3], op->inputs[4]};
		bool ok = x->type.rank >= 2;
		for (int k = 0; k < 2; k++)
			ok = ok && st[k]->constant && st[k]->name && st[k]->uses && !st[k]->uses->next && is_float(st[k]->type.dtype);
		if (!ok) continue;
		double av[TBC_MAX_RANK], sv[TBC_MAX_RANK]; /* axes but 1; the shape [1, -1, 1..] */
		int n = 0, r = x->type.rank;
		for (int i = 0; i < r; i++) {
			if (i != 1) av[n++] = (double)i;
			sv[i] = i == 1 ? -1 : 1;
		}
		int64_t na = n, nr = r;
		tbc_value *ax = konst(B, TBC_DT_I64, 1, &na, av);
		tbc_value *bm = reduce(B, TBC_OP_ReduceMean, x, ax);
		tbc_value *xc = op2(B, TBC_OP_Sub, x, op2(B, TBC_OP_Reshape, bm, konst(B, TBC_DT_I64, 1, &nr, sv)));
		tbc_value *bv = reduce(B, TBC_OP_ReduceMean, op2(B, TBC_OP_Mul, xc, xc), ax);
		tbc_value *batch[2] = {bm, bv};
		double mom = tbc_attr_float(op, "momentum", 0.9);
		for (int k = 0; k < 2 && !B->failed; k++) {
			tbc_value *c = st[k];
			tbc_value *in = state_input(B, S, c->name, &c->type, c->constant);
			if (!in) return;
			pass_replace_value(B->m, c, in);
			c->name = NULL;
			tbc_value *b = cast(B, batch[k], in->type.dtype);
			state_output(B, S, in, op2(B, TBC_OP_Add, mul_s(B, in, mom), mul_s(B, b, 1 - mom)));
		}
	}
}

bool tbc_train_build(tbc_module *m, const tbc_train_options *o, tbc_diags *d) {
	tb B = {.m = m, .g = m->main, .d = d, .cx = {.module = m, .diags = d, .static_ranks = true}};
	tbc_graph *g = m->main;
	if (o->optimizer < TBC_OPT_SGD || o->optimizer > TBC_OPT_ADAMW || !(o->lr > 0) || !isfinite(o->lr))
		return err(&B, TBC_ERR_INVALID_ARGUMENT, NULL, "the optimizer needs a known kind and a learning rate > 0");
	int n_model_out = g->n_outputs;
	tbc_value **model_out = tbc_arena_array(m->arena, (size_t)n_model_out + 1, sizeof *model_out);
	state_list *S = calloc(1, sizeof *S);
	if (!model_out || !S) {
		free(S);
		return err(&B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
	}
	for (int i = 0; i < n_model_out; i++) model_out[i] = g->outputs[i];
	tbc_value *loss = build_loss(&B, o);
	tbc_value **w = NULL;
	int n_w = loss ? choose_trainable(&B, o, loss, &w) : -1;
	tbc_value **grads = n_w > 0 ? tbc_arena_array(m->arena, (size_t)n_w, sizeof *grads) : NULL;
	if (n_w > 0 && !grads) err(&B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
	/* Each trainable initializer becomes state: an input of its name. */
	for (int i = 0; !B.failed && i < n_w; i++) {
		tbc_value *c = w[i];
		tbc_value *in = state_input(&B, S, c->name, &c->type, c->constant);
		if (!in) break;
		pass_replace_value(m, c, in);
		c->name = NULL;
		w[i] = in;
	}
	if (!B.failed) {
		model_out[n_model_out] = loss; /* the step's values, held while Dropouts are replaced */
		dropout_steps(&B, S, model_out, n_model_out + 1);
		loss = model_out[n_model_out];
	}
	if (!B.failed && !tbc_autodiff(m, loss, n_w, w, grads, d)) B.failed = true;
	tbc_value *c1 = NULL, *c2 = NULL;
	if (!B.failed && o->optimizer == TBC_OPT_ADAMW) { /* bias corrections 1 - beta^t of step t */
		tbc_type st = {.dtype = TBC_DT_F32, .rank = 0};
		tbc_value *t = state_input(&B, S, "tbc.adam_step", &st, NULL);
		tbc_value *tn = op2(&B, TBC_OP_Add, t, scalar(&B, TBC_DT_F32, 1));
		state_output(&B, S, t, tn);
		c1 = op2(&B, TBC_OP_Sub, scalar(&B, TBC_DT_F32, 1), op2(&B, TBC_OP_Pow, scalar(&B, TBC_DT_F32, o->beta1), tn));
		c2 = op2(&B, TBC_OP_Sub, scalar(&B, TBC_DT_F32, 1), op2(&B, TBC_OP_Pow, scalar(&B, TBC_DT_F32, o->beta2), tn));
	}
	for (int i = 0; !B.failed && i < n_w; i++) update(&B, o, S, w[i], grads[i], c1, c2);
	if (!B.failed) running_statistics(&B, S);
	/* loss, the model's outputs, the state after the step */
	if (!B.failed) {
		loss->name = "loss";
		g->n_outputs = 0;
		bool ok = tbc_graph_add_output(g, loss);
		for (int i = 0; ok && i < n_model_out; i++) ok = tbc_graph_add_output(g, model_out[i]);
		m->state = tbc_arena_array(m->arena, (size_t)S->n, sizeof *m->state);
		ok = ok && m->state;
		for (int i = 0; ok && i < S->n; i++) {
			if (!S->out[i]) {
				ok = false;
				err(&B, TBC_ERR_INTERNAL, S->in[i]->name, "state without its update (bug in tbc)");
				break;
			}
			m->state[i] = (tbc_state){g->n_inputs - S->n + i, g->n_outputs, S->init[i], S->weight[i]};
			ok = tbc_graph_add_output(g, S->out[i]);
		}
		if (ok) m->n_state = S->n;
		else if (!B.failed) err(&B, TBC_ERR_NO_MEMORY, NULL, "out of memory");
	}
	free(S);
	return !B.failed;
}
