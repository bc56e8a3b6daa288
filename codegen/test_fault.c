/* TEST ONLY: the wrong kernel `tbc check --bisect` is tested against.  The
 * compile paths call it on their own copy of the module, before the passes,
 * when tbc_compile_options.test_perturb_node is set: the node's output 0
 * becomes a fresh value and an Add of 1 (Not for a bool) after the node
 * takes over the original value, its name, readers and place among the
 * graph outputs (as frontend/canon.c's redirect_output0 does).  The passes
 * then treat the pair as any other ops (fusion may merge them), so for
 * every target, the model computes exactly as if that node's kernel were
 * off by one. */
#include "codegen/test_fault.h"

#include <string.h>

#include "ir/dtype.h"

bool tbc_test_perturb_node(tbc_module *m, const char *node, tbc_diags *d) {
	tbc_graph *g = m->main;
	tbc_op *op = g->first;
	while (op && strcmp(op->name, node)) op = op->next;
	if (!op || op->n_outputs < 1 || !op->outputs[0]) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, m->path, node, NULL, NULL,
			      "test_perturb_node: the main graph has no node of this name with an output 0");
		return false;
	}
	tbc_value *orig = op->outputs[0];
	tbc_dtype dt = orig->type.dtype;
	bool boolean = dt == TBC_DT_BOOL;
	if (!boolean && !tbc_dtype_is_float(dt) && !tbc_dtype_is_int(dt)) {
		tbc_diags_op(d, TBC_ERR_UNSUPPORTED, op, "test_perturb_node: output 0 is %s, not a number or a bool",
			     tbc_dtype_name(dt));
		return false;
	}
	tbc_value *one = NULL;
	if (!boolean) {
		tbc_tensor *t = tbc_tensor_scalar_f64(dt, 1.0);
		one = t ? tbc_graph_add_const(g, NULL, t) : NULL;
		tbc_tensor_destroy(t);
		if (!one) goto oom;
	}
	tbc_value *in[2] = {NULL, one};
	tbc_op *fix = tbc_op_new(g, boolean ? TBC_OP_Not : TBC_OP_Add, op->name, boolean ? 1 : 2, in, 1);
	if (!fix) goto oom;
	/* tbc_op_new appended it: move it just after op. */
	if (fix != op->next) {
		g->last = fix->prev;
		g->last->next = NULL;
		fix->prev = op;
		fix->next = op->next;
		op->next->prev = fix;
		op->next = fix;
	}
	tbc_value *fresh = fix->outputs[0];
	fresh->type = orig->type;
	fresh->svals = orig->svals; /* what inference knows is the node's own result */
	fresh->n_svals = orig->n_svals;
	orig->svals = NULL;
	orig->n_svals = 0;
	op->outputs[0] = fresh;
	fresh->def = op;
	fresh->def_index = 0;
	fix->outputs[0] = orig;
	orig->def = fix;
	orig->def_index = 0;
	tbc_op_set_input(fix, 0, fresh);
	return true;
oom:
	tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, node, NULL, NULL, "test_perturb_node: out of memory");
	return false;
}
