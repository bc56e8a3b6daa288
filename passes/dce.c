/* Dead code elimination.
 *
 * Does: removes ops none of whose results is read (by an op or by a graph's
 * return, in any graph), constants nobody reads, and marks unread optional
 * results of the ops that stay as not wanted ('_'), so kernels may skip
 * them.  Bodies are cleaned before the graph around them, and each graph
 * last op first, so a dead chain goes in one run.
 * Requires: a verified module.
 * Guarantees: the module computes the same outputs.  Ops with effects
 * (Dropout in training mode, or a control-flow op holding one) stay; graph
 * inputs stay (they are the model's, or a body's, interface); results below
 * an op's minimum output count stay, as do those of ops with subgraphs,
 * whose outputs are positional. */
#include "passes/passes.h"
#include "passes/util.h"

static bool read_anywhere(const tbc_module *m, const tbc_value *v) {
	return v->uses || pass_is_returned(m, v);
}

static void dce_graph(tbc_module *m, tbc_graph *g) {
	for (tbc_op *op = g->first; op; op = op->next)
		for (int a = 0; a < op->n_attrs; a++) {
			tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++) dce_graph(m, at->graphs[k]);
		}
	for (tbc_op *op = g->last, *prev; op; op = prev) {
		prev = op->prev;
		bool live = pass_has_effects(op);
		for (int i = 0; i < op->n_outputs && !live; i++)
			if (op->outputs[i] && read_anywhere(m, op->outputs[i])) live = true;
		if (!live) {
			pass_remove_op(op);
			continue;
		}
		if (pass_has_graph_attr(op)) continue;
		for (int i = tbc_ops[op->code].min_outputs; i < op->n_outputs; i++)
			if (op->outputs[i] && !read_anywhere(m, op->outputs[i])) op->outputs[i] = NULL;
	}
	int kept = 0;
	for (int i = 0; i < g->n_consts; i++)
		if (read_anywhere(m, g->consts[i])) g->consts[kept++] = g->consts[i];
	g->n_consts = kept;
}

bool tbc_pass_dce(tbc_module *m, tbc_diags *d) {
	(void)d;
	dce_graph(m, m->main);
	return true;
}
