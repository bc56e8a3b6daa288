/* The reference interpreter's driver: runs a graph op by op in order, keeps
 * each value's tensor until its last use, recurses into subgraphs for the
 * control-flow kernels, and checks every result against its inferred type,
 * which is how shape inference is tested by every case the interpreter runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "symdim.h"

struct tbc_slot {
	const tbc_tensor *t;
	bool owned;
};

static void slot_clear(struct tbc_slot *s) {
	if (s->owned) tbc_tensor_destroy((tbc_tensor *)s->t);
	s->t = NULL;
	s->owned = false;
}

/* Marks in last[] the position pos for every value op reads, including the
 * outer-scope values its subgraphs read. */
static void mark_reads(const tbc_op *op, int pos, int *last) {
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i]) last[op->inputs[i]->id] = pos;
	for (int a = 0; a < op->n_attrs; a++) {
		const tbc_attr *at = &op->attrs[a];
		if (at->kind != TBC_ATTR_GRAPH && at->kind != TBC_ATTR_GRAPHS) continue;
		for (int k = 0; k < (at->kind == TBC_ATTR_GRAPH ? 1 : at->n); k++) {
			const tbc_graph *sg = at->graphs[k];
			for (const tbc_op *o = sg->first; o; o = o->next) mark_reads(o, pos, last);
			for (int i = 0; i < sg->n_outputs; i++) last[sg->outputs[i]->id] = pos;
		}
	}
}

static void format_type(const tbc_type *t, char *buf, size_t size) {
	size_t used = (size_t)snprintf(buf, size, "%s[", tbc_dtype_name(t->dtype));
	if (t->rank < 0) used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "?");
	for (int i = 0; i < t->rank && used < size; i++) {
		if (t->dims[i].sym)
			used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "", t->dims[i].sym);
		else
			used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)t->dims[i].size);
	}
	if (used < size) snprintf(buf + used, size - used, "]");
}

/* The size of the main graph's input dim named atom in this run. */
static bool input_sym(void *ctx, const char *atom, int64_t *value) {
	const tbc_interp *ip = ctx;
	const tbc_graph *g = ip->module->main;
	for (int i = 0; i < g->n_inputs; i++) {
		const tbc_type *t = &g->inputs[i]->type;
		for (int d = 0; d < t->rank && d < ip->main_inputs[i]->rank; d++)
			if (t->dims[d].sym && !strcmp(t->dims[d].sym, atom)) {
				*value = ip->main_inputs[i]->dims[d];
				return true;
			}
	}
	return false;
}

/* Whether a symbolic dim agrees with the size the kernel produced, where its
 * value follows from the inputs' dims (others, such as NonZero's count,
 * may be anything). */
static bool sym_agrees(const tbc_interp *ip, const char *sym, int64_t size) {
	tbc_poly p;
	int64_t want;
	if (!ip->main_inputs || !tbc_poly_of_sym(sym, &p) || !tbc_poly_eval(&p, input_sym, (void *)ip, &want)) return true;
	return want == size;
}

static bool check_result(tbc_interp *ip, const tbc_op *op, int i, const tbc_tensor *t) {
	const tbc_type *ty = &op->outputs[i]->type;
	bool ok = t->dtype == ty->dtype && (ty->rank < 0 || ty->rank == t->rank);
	for (int d = 0; ok && ty->rank >= 0 && d < t->rank; d++)
		if (ty->dims[d].sym ? !sym_agrees(ip, ty->dims[d].sym, t->dims[d]) : ty->dims[d].size != t->dims[d]) ok = false;
	if (ok) return true;
	tbc_type actual;
	tbc_type_set(&actual, t->dtype, t->rank, t->dims);
	char a[256], b[256];
	format_type(ty, a, sizeof a);
	format_type(&actual, b, sizeof b);
	tbc_diags_op(ip->diags, TBC_ERR_INTERNAL, op,
		     "output %d: shape inference gave %s but the kernel produced %s (bug in tbc)", i, a, b);
	return false;
}

int tbc_interp_graph(tbc_interp *ip, const tbc_graph *g, const tbc_tensor *const *in, int n_in, tbc_tensor **out) {
	struct tbc_slot *env = ip->env;
	if (n_in != g->n_inputs) {
		tbc_diags_add(ip->diags, TBC_ERR_RUNTIME, ip->module->path, NULL, NULL, NULL,
			      "graph '%s' takes %d inputs, got %d", g->name, g->n_inputs, n_in);
		return -1;
	}
	int n_ops = 0;
	for (const tbc_op *op = g->first; op; op = op->next) n_ops++;
	int *last = malloc(ip->module->n_values * sizeof *last);
	if (!last) return -1;
	for (uint32_t i = 0; i < ip->module->n_values; i++) last[i] = -1;
	int pos = 0;
	for (const tbc_op *op = g->first; op; op = op->next) mark_reads(op, pos++, last);
	for (int i = 0; i < g->n_outputs; i++) last[g->outputs[i]->id] = n_ops;

	for (int i = 0; i < g->n_inputs; i++) env[g->inputs[i]->id] = (struct tbc_slot){in[i], false};
	for (int i = 0; i < g->n_consts; i++) env[g->consts[i]->id] = (struct tbc_slot){g->consts[i]->constant, false};

	int rc = 0;
	pos = 0;
	for (const tbc_op *op = g->first; op && rc == 0; op = op->next, pos++) {
		const tbc_tensor *args[256];
		tbc_tensor *res[256];
		if (op->n_inputs > 256 || op->n_outputs > 256) {
			rc = tbc_interp_error(ip, op, "too many inputs or outputs");
			break;
		}
		for (int i = 0; i < op->n_inputs; i++) {
			args[i] = op->inputs[i] ? env[op->inputs[i]->id].t : NULL;
			if (op->inputs[i] && !args[i]) {
				tbc_diags_op(ip->diags, TBC_ERR_INTERNAL, op, "input %d has no value (bug in tbc)", i);
				rc = -1;
			}
		}
		for (int i = 0; i < op->n_outputs; i++) res[i] = NULL;
		if (rc == 0) rc = tbc_ops[op->code].interp(ip, op, args, res);
		for (int i = 0; i < op->n_outputs; i++) {
			tbc_value *v = op->outputs[i];
			if (rc == 0 && v && !res[i]) {
				tbc_diags_op(ip->diags, TBC_ERR_INTERNAL, op, "kernel produced no output %d (bug in tbc)", i);
				rc = -1;
			}
			if (rc == 0 && v && ip->check_types && !check_result(ip, op, i, res[i])) rc = -1;
			if (rc != 0 || !v) {
				tbc_tensor_destroy(res[i]);
				continue;
			}
			slot_clear(&env[v->id]);
			env[v->id] = (struct tbc_slot){res[i], true};
			if (last[v->id] < 0) slot_clear(&env[v->id]); /* never read */
		}
		/* Free what this op was the last to read. */
		for (int i = 0; rc == 0 && i < op->n_inputs; i++) {
			tbc_value *v = op->inputs[i];
			if (v && v->graph == g && v->kind == TBC_VALUE_RESULT && last[v->id] == pos) slot_clear(&env[v->id]);
		}
	}

	for (int i = 0; i < g->n_outputs; i++) out[i] = NULL;
	for (int i = 0; rc == 0 && i < g->n_outputs; i++) {
		const tbc_value *v = g->outputs[i];
		struct tbc_slot *s = &env[v->id];
		if (!s->t) {
			tbc_diags_add(ip->diags, TBC_ERR_INTERNAL, ip->module->path, NULL, NULL, v->name,
				      "graph output has no value (bug in tbc)");
			rc = -1;
			break;
		}
		bool later = false;
		for (int k = i + 1; k < g->n_outputs; k++) later |= g->outputs[k] == v;
		if (s->owned && !later) {
			out[i] = (tbc_tensor *)s->t;
			s->t = NULL;
			s->owned = false;
		} else if (!(out[i] = tbc_tensor_clone(s->t))) {
			tbc_diags_add(ip->diags, TBC_ERR_NO_MEMORY, ip->module->path, NULL, NULL, v->name, "out of memory");
			rc = -1;
		}
	}
	/* Whatever is left (on error, or values still held) goes now. */
	for (const tbc_op *op = g->first; op; op = op->next)
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i]) slot_clear(&env[op->outputs[i]->id]);
	for (int i = 0; i < g->n_inputs; i++) env[g->inputs[i]->id] = (struct tbc_slot){NULL, false};
	if (rc != 0)
		for (int i = 0; i < g->n_outputs; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	free(last);
	return rc;
}

tbc_code tbc_interpret(const tbc_module *m, tbc_tensor *const *inputs, size_t n_inputs, tbc_tensor **out_outputs,
		       size_t n_outputs, tbc_diags *diags) {
	const tbc_graph *g = m->main;
	for (size_t i = 0; i < n_outputs; i++) out_outputs[i] = NULL;
	if (n_outputs != (size_t)g->n_outputs) {
		tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, NULL,
			      "the model has %d outputs, %zu were asked for", g->n_outputs, n_outputs);
		return TBC_ERR_INVALID_ARGUMENT;
	}
	if (n_inputs != (size_t)g->n_inputs) {
		tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, NULL,
			      "the model takes %d inputs, %zu were given", g->n_inputs, n_inputs);
		return TBC_ERR_INVALID_ARGUMENT;
	}
	/* Inputs must match the declared types: dtype, rank and static dims;
	 * a symbolic dim must have the same size everywhere it appears. */
	for (size_t i = 0; i < n_inputs; i++) {
		const tbc_value *v = g->inputs[i];
		const tbc_tensor *t = inputs[i];
		bool ok = t && t->dtype == v->type.dtype && (v->type.rank < 0 || v->type.rank == t->rank);
		for (int d = 0; ok && v->type.rank >= 0 && d < t->rank; d++) {
			const tbc_dim *dim = &v->type.dims[d];
			if (!dim->sym && dim->size != t->dims[d]) ok = false;
			for (size_t k = 0; ok && dim->sym && k <= i; k++) {
				const tbc_value *w = g->inputs[k];
				for (int e = 0; e < w->type.rank && (k < i || e < d); e++)
					if (w->type.dims[e].sym && !strcmp(w->type.dims[e].sym, dim->sym) &&
					    inputs[k]->rank > e && inputs[k]->dims[e] != t->dims[d])
						ok = false;
			}
		}
		if (!ok) {
			char want[256], got[256] = "nothing";
			format_type(&v->type, want, sizeof want);
			if (t) {
				tbc_type tt;
				tbc_type_set(&tt, t->dtype, t->rank, t->dims);
				format_type(&tt, got, sizeof got);
			}
			tbc_diags_add(diags, TBC_ERR_INVALID_ARGUMENT, m->path, NULL, NULL, v->name,
				      "input expects %s, got %s", want, got);
			return TBC_ERR_INVALID_ARGUMENT;
		}
	}
	tbc_interp ip = {m, diags, calloc(m->n_values ? m->n_values : 1, sizeof(struct tbc_slot)), true,
			 (const tbc_tensor *const *)inputs};
	if (!ip.env) return TBC_ERR_NO_MEMORY;
	int rc = tbc_interp_graph(&ip, g, (const tbc_tensor *const *)inputs, (int)n_inputs, out_outputs);
	free(ip.env);
	if (rc == 0) return TBC_OK;
	tbc_code c = tbc_diags_first_code(diags);
	return c == TBC_OK ? TBC_ERR_RUNTIME : c;
}
