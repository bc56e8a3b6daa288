/* Control flow: If, Loop and Scan as program-level regions
 * (docs/lower-control.md).
 *
 * A body's ops are lowered in place between control markers (kir_ctl,
 * codegen/lower/lower.h): the runner, not a kernel, branches and loops.  Loop-carried
 * values live in scratch buffers of the op; each iteration's body reads them
 * as its inputs and the kernels at the body's end copy its outputs back.  The
 * iteration number is a program symbol the runner keeps, so kernels slicing a
 * scan input or writing a scan output's row take it as a size parameter.
 *
 * A carried value may change its dims between iterations (its buffer's
 * dims are then symbols of the region and the buffer grows); its rank is
 * fixed, and each scan output's element keeps one shape (checked while
 * running, with an error naming the op). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower_internal.h"

/* ---- Symbols -----------------------------------------------------------------*/
/* A new computed symbol of region r: "cf<r>_<what>". */
static int region_sym(lower_cx *cx, int r, const char *what) {
	char name[64];
	snprintf(name, sizeof name, "cf%d_%s", r, what);
	return lower_sym_computed(cx, name);
}

/* Program symbol s as an index expression of the kernel. */
static kir_expr *sym_expr(lk *l, int s) { return kir_e_size(l->k, kir_size_param(l->k, l->cx->p->sym_names[s])); }

static void store_sym(lk *l, kir_block *b, int s, kir_expr *value) {
	kir_kernel *k = l->k;
	kir_buffer *syms = lk_syms(l);
	if (!syms) {
		k->failed = true;
		return;
	}
	kir_block_add(k, b, kir_s_store(k, syms, kir_e_index(k, s), kir_e_cast(k, TBC_DT_I64, value)));
}

static bool dims_same(tbc_dim a, tbc_dim b) {
	if (!a.sym || !b.sym) return !a.sym && !b.sym && a.size == b.size;
	return !strcmp(a.sym, b.sym);
}

/* Appends to b what gives dim the run-time value `value`: a computed symbol
 * takes it (a body's symbols are set again in each iteration, and an op's
 * result after the region); a dim of the inputs or a static one is checked. */
static bool bind_dim(lk *l, kir_block *b, const tbc_op *op, tbc_dim dim, kir_expr *value, const char *what) {
	if (lower_dim_computed(l->cx, dim)) {
		store_sym(l, b, lower_sym_computed(l->cx, dim.sym), value);
		return !l->k->failed;
	}
	return lower_shape_dim(l, b, op, dim, what, value);
}

/* A kernel giving the dims of type t (of value `name`) the dims of program
 * buffer src, dim 0 the value of symbol count instead when count >= 0; none
 * when they agree already. */
static bool bind_type(lower_cx *cx, const tbc_op *op, const tbc_type *t, int src, int count, const char *name) {
	const kir_pbuf *sb = cx->p->bufs[src];
	if (t->rank != sb->type.rank) return lower_error(cx, op, "%s has rank %d in the body but %d outside", name, t->rank, sb->type.rank);
	bool need = false;
	for (int d = 0; d < t->rank; d++) need |= (d == 0 && count >= 0) || !dims_same(t->dims[d], sb->type.dims[d]);
	if (!need) return true;
	lk l;
	if (!lk_begin(&l, cx, "bind")) return false;
	kir_block b = {0};
	for (int d = 0; d < t->rank; d++) {
		if (!(d == 0 && count >= 0) && dims_same(t->dims[d], sb->type.dims[d])) continue;
		const char *what = tbc_arena_printf(l.k->arena, "dim %d of %s", d, name);
		if (!what) return lower_error(cx, op, "out of memory");
		kir_expr *v = d == 0 && count >= 0 ? sym_expr(&l, count) : lk_dim(&l, sb->type.dims[d]);
		if (!bind_dim(&l, &b, op, t->dims[d], v, what)) return false;
	}
	return lk_end(&l, b.first);
}

/* Value v holds what program buffer src holds: its dims bound to src's, then
 * sharing src's storage (or copied into it when v is a graph output). */
static bool define_from(lower_cx *cx, const tbc_op *op, const tbc_value *v, int src, const char *name) {
	if (!v) return true;
	if (src >= 0 && cx->buf_of[v->id] == src) return true; /* v's own buffer held it all along */
	if (src < 0 || !bind_type(cx, op, &v->type, src, -1, name)) return false;
	if (cx->buf_of[v->id] >= 0) return lower_copy(cx, cx->buf_of[v->id], src);
	return lower_alias_buf(cx, v, src);
}

/* A kernel moving one slice of `big` to or from `small` (dense): the slice at
 * row syms[row] (n - 1 - row when reverse; no row when row < 0) along `axis`
 * of the dims after the batch dim, at batch index syms[batch] when batch >= 0
 * (big's dim 0 is then the batch).  to_small: small = slice, else slice =
 * small. */
static bool slice_copy(lower_cx *cx, int small, int big, int axis, int batch, int row, int n, bool reverse,
		       bool to_small) {
	lk l;
	if (!lk_begin(&l, cx, to_small ? "slice" : "put_slice")) return false;
	kir_kernel *k = l.k;
	kir_buffer *sm = lk_buf(&l, small), *bg = lk_buf(&l, big);
	if (!sm || !bg) return false;
	int first = batch >= 0 ? 1 : 0;
	kir_expr *numel = kir_e_index(k, 1), *per_batch = kir_e_index(k, 1), *inner = kir_e_index(k, 1);
	for (int d = 0; d < sm->rank; d++) numel = kir_e_mul(k, numel, sm->dims[d]);
	for (int d = first; d < bg->rank; d++) per_batch = kir_e_mul(k, per_batch, bg->dims[d]);
	kir_var *e = kir_var_new(k, "e", KIR_INDEX);
	kir_expr *at = kir_e_var(k, e);
	if (row >= 0) {
		for (int d = first + axis + 1; d < bg->rank; d++) inner = kir_e_mul(k, inner, bg->dims[d]);
		kir_expr *len = bg->dims[first + axis], *r = sym_expr(&l, row);
		if (reverse) r = kir_e_binary(k, KIR_SUB, kir_e_binary(k, KIR_SUB, sym_expr(&l, n), kir_e_index(k, 1)), r);
		kir_expr *o = kir_e_binary(k, KIR_DIV, kir_e_var(k, e), inner);
		kir_expr *q = kir_e_binary(k, KIR_REM, kir_e_var(k, e), inner);
		at = kir_e_add(k, kir_e_mul(k, kir_e_add(k, kir_e_mul(k, o, len), r), inner), q);
	}
	if (batch >= 0) at = kir_e_add(k, at, kir_e_mul(k, sym_expr(&l, batch), per_batch));
	kir_stmt *st = to_small ? kir_s_store(k, sm, kir_e_var(k, e), kir_e_load(k, bg, at))
				: kir_s_store(k, bg, at, kir_e_load(k, sm, kir_e_var(k, e)));
	return lk_end(&l, kir_s_for(k, e, kir_e_index(k, 0), numel, 1, KIR_LOOP_PARALLEL, st));
}

/* A kernel failing the run when buffer src's dims differ from type t's
 * (what a scan output's element must be); none when they agree already. */
static bool check_dims(lower_cx *cx, int src, const tbc_type *t, const char *what) {
	const kir_pbuf *sb = cx->p->bufs[src];
	if (sb->type.rank != t->rank) return lower_error(cx, NULL, "%s has rank %d, not %d", what, sb->type.rank, t->rank);
	bool need = false;
	for (int d = 0; d < t->rank; d++) need |= !dims_same(sb->type.dims[d], t->dims[d]);
	if (!need) return true;
	lk l;
	if (!lk_begin(&l, cx, "check")) return false;
	kir_block b = {0};
	lk_buf(&l, src);
	for (int d = 0; d < t->rank; d++) {
		if (dims_same(sb->type.dims[d], t->dims[d])) continue;
		char msg[256];
		snprintf(msg, sizeof msg, "%s changes dim %d from one iteration to the next; compiled loops need one shape", what,
			 d);
		kir_block_add(l.k, &b, kir_s_error(l.k, kir_e_cmp(l.k, KIR_NE, lk_dim(&l, sb->type.dims[d]), lk_dim(&l, t->dims[d])),
						   msg));
	}
	return lk_end(&l, b.first);
}

/* Lowers the ops of a body (values there are scratch of the op). */
static bool lower_body(lower_cx *cx, const tbc_graph *g) {
	cx->body_depth++;
	bool ok = true;
	for (const tbc_op *op = g->first; ok && op; op = op->next) ok = lower_op(cx, op);
	cx->body_depth--;
	return ok;
}

/* The root of program buffer b. */
static int root_of(const lower_cx *cx, int b) { return cx->p->bufs[b]->alias_of >= 0 ? cx->p->bufs[b]->alias_of : b; }

/* A carried value's buffer: init's type, with each dim the body's new value
 * may give otherwise (not statically the same dim) a computed symbol of
 * region r, set from init before the loop and from the body's value at the
 * end of each iteration: a carried value may change its shape from one
 * iteration to the next (a sequence growing by a Concat), and the buffer
 * grows with it (a dynamic buffer). */
static int carry_buf(lower_cx *cx, int r, int k, const tbc_type *init, const tbc_type *next, const tbc_value *out,
		     const char *name) {
	/* When the op's result has this very type, its own buffer (planned
	 * with the other values, or a graph output) carries the value: no
	 * scratch, no copy after the loop. */
	bool same = out && out->type.rank == init->rank && next->rank == init->rank && lower_type_known(cx, &out->type);
	for (int d = 0; same && d < init->rank; d++)
		same = dims_same(init->dims[d], next->dims[d]) && dims_same(init->dims[d], out->type.dims[d]);
	if (same) return lower_result_buf(cx, out);
	tbc_type t = *init;
	for (int d = 0; d < t.rank && next->rank == t.rank; d++) {
		if (dims_same(t.dims[d], next->dims[d])) continue;
		char what[48];
		snprintf(what, sizeof what, "c%d_%d", k, d);
		int s = region_sym(cx, r, what);
		if (s < 0) return -1;
		t.dims[d] = (tbc_dim){0, cx->p->sym_names[s]};
	}
	return lower_temp_buf(cx, &t, name);
}

/* A kernel setting the symbols of carried buffer dims (carry_buf) from the
 * dims of buffers from[i] (v_initial before the loop, the body's values at
 * an iteration's end); none when no dim varies. */
static bool carry_dims(lower_cx *cx, int n, const int *carry, const int *from) {
	lk l;
	kir_block b = {0};
	bool begun = false;
	for (int i = 0; i < n; i++) {
		const kir_pbuf *cb = cx->p->bufs[carry[i]], *fb = cx->p->bufs[from[i]];
		for (int d = 0; d < cb->type.rank && d < fb->type.rank; d++) {
			if (!lower_dim_computed(cx, cb->type.dims[d]) || dims_same(cb->type.dims[d], fb->type.dims[d])) continue;
			if (!begun && !(begun = lk_begin(&l, cx, "carry_dims"))) return false;
			store_sym(&l, &b, lower_sym_computed(cx, cb->type.dims[d].sym), lk_dim(&l, fb->type.dims[d]));
		}
	}
	return !begun || lk_end(&l, b.first);
}

/* The body's new values of the carried buffers: src[i] into carry[i],
 * through staging copies when a source shares another carried buffer's
 * storage (a body swapping two states), after the carried dims take the
 * new values' (carry_dims). */
static bool carry_back(lower_cx *cx, const tbc_op *op, int n, const int *src, const int *carry) {
	bool stage = false;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) stage |= i != j && root_of(cx, src[i]) == root_of(cx, carry[j]);
	int *from = calloc((size_t)n + 1, sizeof *from);
	if (!from) return lower_error(cx, op, "out of memory");
	bool ok = true;
	for (int i = 0; i < n; i++) {
		from[i] = src[i];
		if (!stage || root_of(cx, src[i]) == root_of(cx, carry[i])) continue;
		/* Staged in the source's own shape: the carried buffers may grow
		 * (new memory) once their dims change, so read them first. */
		from[i] = lower_temp_buf(cx, &cx->p->bufs[src[i]]->type, "stage");
		ok = ok && from[i] >= 0 && lower_copy(cx, from[i], src[i]);
	}
	ok = ok && carry_dims(cx, n, carry, from);
	for (int i = 0; ok && i < n; i++) {
		if (root_of(cx, src[i]) == root_of(cx, carry[i])) continue;
		if (cx->p->bufs[src[i]]->type.rank != cx->p->bufs[carry[i]]->type.rank)
			ok = lower_error(cx, op, "carried value %d changes its rank in the body", i);
		else ok = lower_copy(cx, carry[i], from[i]);
	}
	free(from);
	return ok;
}

/* ---- If ----------------------------------------------------------------------*/
/* One branch: its ops, then each output's dims bound and its value copied
 * into the op's output (both branches write the same buffers). */
static bool lower_branch(lower_cx *cx, const tbc_op *op, const tbc_graph *g) {
	if (!lower_body(cx, g)) return false;
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_value *v = op->outputs[i];
		if (!v) continue;
		int src = lower_value_buf(cx, g->outputs[i]);
		char name[160];
		snprintf(name, sizeof name, "If output %d", i);
		if (src < 0 || !bind_type(cx, op, &v->type, src, -1, name)) return false;
		int dst = cx->buf_of[v->id] >= 0 ? cx->buf_of[v->id] : lower_result_buf(cx, v);
		if (dst < 0 || !lower_copy(cx, dst, src)) return false;
	}
	return true;
}

static bool lower_if(lower_cx *cx, const tbc_op *op) {
	const tbc_graph *th = tbc_attr_graph(op, "then_branch"), *el = tbc_attr_graph(op, "else_branch");
	if (!th || !el || th->n_outputs != op->n_outputs || el->n_outputs != op->n_outputs)
		return lower_error(cx, op, "If needs two branches with one output per output of the op");
	const tbc_tensor *ct = tbc_input_const(op, 0);
	if (ct && ct->numel == 1) { /* known while compiling: the taken branch alone */
		const tbc_graph *g = tbc_load_i64(ct->dtype, ct->data, 0) ? th : el;
		if (!lower_body(cx, g)) return false;
		for (int i = 0; i < op->n_outputs; i++) {
			char name[160];
			snprintf(name, sizeof name, "If output %d", i);
			if (op->outputs[i] && !define_from(cx, op, op->outputs[i], lower_value_buf(cx, g->outputs[i]), name))
				return false;
		}
		return true;
	}
	int r = cx->n_regions++;
	int c = region_sym(cx, r, "cond");
	lk l;
	if (c < 0 || !lk_begin(&l, cx, "if_cond")) return false;
	kir_buffer *cb = lk_value(&l, op->inputs[0]);
	if (!cb) return false;
	kir_block b = {0};
	store_sym(&l, &b, c, kir_e_load(l.k, cb, kir_e_index(l.k, 0)));
	if (!lk_end(&l, b.first)) return false;
	return lower_marker(cx, KIR_CTL_IF, c, -1, -1) && lower_branch(cx, op, th) &&
	       lower_marker(cx, KIR_CTL_ELSE, c, -1, -1) && lower_branch(cx, op, el) &&
	       lower_marker(cx, KIR_CTL_END_IF, c, -1, -1);
}

/* ---- Loop --------------------------------------------------------------------*/
/* A scalar scratch buffer of dtype dt set from symbol s in each iteration
 * (the body's iteration number, or its incoming condition). */
static int scalar_from_sym(lower_cx *cx, tbc_dtype dt, int s, const char *name) {
	tbc_type t = {.dtype = dt, .rank = 0};
	int b = lower_temp_buf(cx, &t, name);
	lk l;
	if (b < 0 || !lk_begin(&l, cx, name)) return -1;
	kir_buffer *kb = lk_buf(&l, b);
	if (!kb) return -1;
	kir_expr *v = sym_expr(&l, s);
	if (dt == TBC_DT_BOOL) v = kir_e_cmp(l.k, KIR_NE, v, kir_e_index(l.k, 0));
	else v = kir_e_cast(l.k, dt, v);
	return lk_end(&l, kir_s_store(l.k, kb, kir_e_index(l.k, 0), v)) ? b : -1;
}

/* Loop(M, cond, v_initial...) -> (v_final..., scan outputs...): for i = 0
 * while i < M and cond, the body maps (i, cond, v) to (cond, v, scan
 * elements).  Scan outputs gather into buffers of M rows; after the loop the
 * rows run are copied into the op's outputs. */
static bool lower_loop(lower_cx *cx, const tbc_op *op) {
	const tbc_graph *body = tbc_attr_graph(op, "body");
	int N = op->n_inputs - 2, K = op->n_outputs - N;
	if (!body || N < 0 || K < 0 || body->n_inputs != N + 2 || body->n_outputs != N + 1 + K)
		return lower_error(cx, op, "the Loop body does not match the op");
	const tbc_value *M = op->inputs[0], *cond = op->inputs[1];
	int r = cx->n_regions++;
	int i_sym = region_sym(cx, r, "i"), c_sym = region_sym(cx, r, "cond"), n_sym = M ? region_sym(cx, r, "n") : -1;
	/* Without a trip count the gathered rows grow with the iterations: their
	 * count so far is a symbol and the buffers keep their rows when they
	 * grow (kir_pbuf.keep). */
	int rows_sym = !M && K > 0 ? region_sym(cx, r, "rows") : -1;
	int *carry = calloc((size_t)(2 * N + K + 1), sizeof *carry);
	if (i_sym < 0 || c_sym < 0 || (M && n_sym < 0) || (!M && K > 0 && rows_sym < 0) || !carry) {
		free(carry);
		return lower_error(cx, op, "out of memory");
	}
	int *src = carry + N, *gather = carry + 2 * N;
	bool ok = true;
	/* Scan elements: dims known before the loop stay; the others become
	 * symbols set by the first iteration (0 when none runs). */
	tbc_type *gt = calloc((size_t)K + 1, sizeof *gt);
	if (!gt) ok = lower_error(cx, op, "out of memory");
	lk l;
	kir_block b = {0};
	ok = ok && lk_begin(&l, cx, "loop_init");
	if (ok && M) {
		kir_buffer *mb = lk_value(&l, M);
		ok = mb && (store_sym(&l, &b, n_sym, kir_e_load(l.k, mb, kir_e_index(l.k, 0))), true);
	}
	if (ok) {
		kir_expr *cv = kir_e_index(l.k, 1);
		kir_buffer *cb = cond ? lk_value(&l, cond) : NULL;
		if (cb) cv = kir_e_load(l.k, cb, kir_e_index(l.k, 0));
		ok = (!cond || cb) && (store_sym(&l, &b, c_sym, cv), true);
		if (rows_sym >= 0) store_sym(&l, &b, rows_sym, kir_e_index(l.k, 0));
	}
	for (int k = 0; ok && k < K; k++) {
		const tbc_type *e = &body->outputs[1 + N + k]->type;
		if (e->rank < 0 || e->rank + 1 > TBC_MAX_RANK) {
			ok = lower_error(cx, op, "scan output %d of the Loop body has no known rank", k);
			break;
		}
		gt[k].dtype = e->dtype;
		gt[k].rank = e->rank + 1;
		gt[k].dims[0] = (tbc_dim){0, cx->p->sym_names[M ? n_sym : rows_sym]};
		for (int d = 0; ok && d < e->rank; d++) {
			gt[k].dims[1 + d] = e->dims[d];
			if (lower_dim_known(cx, e->dims[d])) continue;
			char what[32];
			snprintf(what, sizeof what, "s%d_%d", k, d);
			int s = region_sym(cx, r, what);
			ok = s >= 0;
			if (ok) {
				gt[k].dims[1 + d].sym = cx->p->sym_names[s];
				store_sym(&l, &b, s, kir_e_index(l.k, 0));
			}
		}
	}
	ok = ok && lk_end(&l, b.first);
	for (int k = 0; ok && k < N; k++) { /* the carried values start as v_initial */
		const tbc_value *init = op->inputs[2 + k];
		carry[k] = init ? carry_buf(cx, r, k, &init->type, &body->outputs[1 + k]->type, op->outputs[k], "carry") : -1;
		if (carry[k] < 0) ok = lower_error(cx, op, "loop-carried input %d is missing or has no known shape", k);
		else src[k] = lower_value_buf(cx, init);
		ok = ok && src[k] >= 0;
	}
	ok = ok && carry_dims(cx, N, carry, src);
	for (int k = 0; ok && k < N; k++) ok = lower_copy(cx, carry[k], src[k]);
	for (int k = 0; ok && k < K; k++) {
		ok = (gather[k] = lower_temp_buf(cx, &gt[k], "gather")) >= 0;
		if (ok) cx->p->bufs[gather[k]]->keep = rows_sym >= 0;
	}
	ok = ok && lower_marker(cx, KIR_CTL_LOOP, i_sym, n_sym, c_sym);
	/* The body: its inputs, its ops, then its outputs back. */
	int it = ok ? scalar_from_sym(cx, body->inputs[0]->type.dtype == TBC_DT_UNDEFINED ? TBC_DT_I64 : body->inputs[0]->type.dtype,
				      i_sym, "iter")
		    : -1;
	int ci = it >= 0 ? scalar_from_sym(cx, TBC_DT_BOOL, c_sym, "cond_in") : -1;
	ok = ok && it >= 0 && ci >= 0;
	if (ok) cx->buf_of[body->inputs[0]->id] = it, cx->buf_of[body->inputs[1]->id] = ci;
	for (int k = 0; ok && k < N; k++) {
		char name[160];
		snprintf(name, sizeof name, "loop-carried value %d", k);
		ok = define_from(cx, op, body->inputs[2 + k], carry[k], name);
	}
	ok = ok && lower_body(cx, body);
	if (ok && rows_sym >= 0) { /* the gathered rows grow by this one */
		ok = lk_begin(&l, cx, "rows");
		b = (kir_block){0};
		if (ok) store_sym(&l, &b, rows_sym, kir_e_add(l.k, sym_expr(&l, i_sym), kir_e_index(l.k, 1)));
		ok = ok && lk_end(&l, b.first);
	}
	for (int k = 0; ok && k < K; k++) { /* row i of each scan output, before a carried value changes */
		int s = lower_value_buf(cx, body->outputs[1 + N + k]);
		ok = s >= 0 && lk_begin(&l, cx, "scan_shape");
		if (!ok) break;
		b = (kir_block){0};
		const kir_pbuf *sb = cx->p->bufs[s];
		for (int d = 0; ok && d < sb->type.rank; d++) {
			tbc_dim want = gt[k].dims[1 + d];
			if (dims_same(want, sb->type.dims[d])) continue;
			char msg[256];
			snprintf(msg, sizeof msg, "Loop '%s': scan output %d changes dim %d from one iteration to the next; compiled loops need one shape",
				 op->name, k, d);
			kir_expr *have = lk_dim(&l, sb->type.dims[d]);
			kir_stmt *fail = kir_s_error(l.k, kir_e_cmp(l.k, KIR_NE, lk_dim(&l, want), have), msg);
			if (want.sym != body->outputs[1 + N + k]->type.dims[d].sym) { /* a symbol of the first iteration */
				kir_block first = {0};
				store_sym(&l, &first, lower_sym_computed(cx, want.sym), have);
				fail = kir_s_if(l.k, kir_e_cmp(l.k, KIR_EQ, sym_expr(&l, i_sym), kir_e_index(l.k, 0)), first.first, fail);
			}
			kir_block_add(l.k, &b, fail);
		}
		if (b.first) ok = lk_end(&l, b.first);
		ok = ok && slice_copy(cx, s, gather[k], 0, -1, i_sym, n_sym, false, false);
	}
	if (ok) { /* the condition for the next iteration */
		ok = lk_begin(&l, cx, "cond_out");
		kir_buffer *cb = ok ? lk_value(&l, body->outputs[0]) : NULL;
		b = (kir_block){0};
		if (cb) store_sym(&l, &b, c_sym, kir_e_load(l.k, cb, kir_e_index(l.k, 0)));
		ok = cb && lk_end(&l, b.first);
	}
	for (int k = 0; ok && k < N; k++) ok = (src[k] = lower_value_buf(cx, body->outputs[1 + k])) >= 0;
	ok = ok && carry_back(cx, op, N, src, carry) && lower_marker(cx, KIR_CTL_END_LOOP, i_sym, n_sym, c_sym);
	/* After the loop: the final values, and the rows run of each scan output. */
	for (int k = 0; ok && k < N; k++) {
		char name[160];
		snprintf(name, sizeof name, "Loop output %d", k);
		ok = define_from(cx, op, op->outputs[k], carry[k], name);
	}
	for (int k = 0; ok && k < K; k++) {
		const tbc_value *v = op->outputs[N + k];
		if (!v) continue;
		char name[160];
		snprintf(name, sizeof name, "Loop scan output %d", k);
		ok = bind_type(cx, op, &v->type, gather[k], i_sym, name);
		int dst = ok ? (cx->buf_of[v->id] >= 0 ? cx->buf_of[v->id] : lower_result_buf(cx, v)) : -1;
		ok = dst >= 0 && lower_copy(cx, dst, gather[k]);
	}
	free(gt);
	free(carry);
	return ok;
}

/* t without dim d. */
static tbc_type drop_dim(const tbc_type *t, int d) {
	tbc_type r = *t;
	for (int i = d; i + 1 < t->rank; i++) r.dims[i] = t->dims[i + 1];
	r.rank = t->rank - 1;
	return r;
}

/* The type of one row of a Scan input or output of type t: without the row
 * axis (of the dims after the batch dim) and Scan-8's batch dim. */
static tbc_type scan_row_type(const tbc_type *t, int axis, bool v8) {
	tbc_type r = drop_dim(t, (v8 ? 1 : 0) + axis);
	return v8 ? drop_dim(&r, 0) : r;
}

/* Scan-8 with sequence_lens, in the batch loop: this entry's row count
 * sequence_lens[b] (checked to be in [0, T] as the interpreter does) into
 * symbol n, and the entry's scan output rows zeroed (those past the count
 * stay zero). */
static bool scan8_length(lower_cx *cx, const tbc_op *op, const tbc_value *lens, const tbc_value *x0, int n, int b,
			 int S, int K) {
	lk l;
	if (!lk_begin(&l, cx, "scan_len")) return false;
	kir_kernel *k = l.k;
	kir_buffer *lb = lk_value(&l, lens), *xb = lk_value(&l, x0);
	if (!lb || !xb || xb->rank < 2) return lb && xb ? lower_error(cx, op, "scan input 0 lacks its time axis") : false;
	kir_block blk = {0};
	kir_var *len = kir_var_new(k, "len", KIR_INDEX);
	kir_block_add(k, &blk, kir_s_set(k, len, kir_e_cast(k, KIR_INDEX, kir_e_load(k, lb, sym_expr(&l, b)))));
	kir_expr *v = kir_e_var(k, len), *T = xb->dims[1];
	char msg[256];
	snprintf(msg, sizeof msg, "Scan '%s': a sequence_lens entry is outside [0, the time axis' length]", op->name);
	kir_expr *bad = kir_e_binary(k, KIR_OR, kir_e_cmp(k, KIR_LT, v, kir_e_index(k, 0)), kir_e_cmp(k, KIR_GT, v, T));
	kir_block_add(k, &blk, kir_s_error(k, bad, msg));
	store_sym(&l, &blk, n, v);
	for (int i = 0; i < K; i++) {
		const tbc_value *out = op->outputs[S + i];
		if (!out) continue;
		int dst = cx->buf_of[out->id] >= 0 ? cx->buf_of[out->id] : lower_result_buf(cx, out);
		kir_buffer *ob = dst >= 0 ? lk_buf(&l, dst) : NULL;
		if (!ob) return false;
		kir_expr *per = kir_e_index(k, 1);
		for (int d = 1; d < ob->rank; d++) per = kir_e_mul(k, per, ob->dims[d]);
		kir_var *e = kir_var_new(k, "e", KIR_INDEX);
		kir_expr *at = kir_e_add(k, kir_e_mul(k, sym_expr(&l, b), per), kir_e_var(k, e));
		kir_stmt *zero = kir_s_store(k, ob, at, kir_e_cast(k, out->type.dtype, kir_e_index(k, 0)));
		kir_block_add(k, &blk, kir_s_for(k, e, kir_e_index(k, 0), per, 1, KIR_LOOP_PARALLEL, zero));
	}
	return lk_end(&l, blk.first);
}

/* ---- Scan --------------------------------------------------------------------*/
/* Scan(states..., scan inputs...) -> (final states..., scan outputs...): the
 * body runs once per row of the scan inputs (along their axes, reversed where
 * a direction is 1), mapping (states, rows) to (states, output rows).
 * Scan-8 has a leading batch dim on every input and output and runs the loop
 * once per batch entry. */
static bool lower_scan(lower_cx *cx, const tbc_op *op) {
	const tbc_graph *body = tbc_attr_graph(op, "body");
	bool v8 = op->graph && op->graph->module && op->graph->module->opset > 0 && op->graph->module->opset < 9;
	int first = v8 ? 1 : 0, n_scan = (int)tbc_attr_int(op, "num_scan_inputs", 0);
	int S = op->n_inputs - first - n_scan, K = op->n_outputs - S;
	if (!body || n_scan <= 0 || S < 0 || K < 0 || body->n_inputs != S + n_scan || body->n_outputs != S + K ||
	    n_scan > 64 || K > 64)
		return lower_error(cx, op, "the Scan body does not match the op");
	const tbc_value *lens = v8 ? op->inputs[0] : NULL;
	int64_t in_axes[64], in_dirs[64], out_axes[64], out_dirs[64];
	const int64_t *v;
	int n = tbc_attr_ints(op, v8 ? "directions" : "scan_input_directions", &v);
	for (int j = 0; j < n_scan; j++) in_dirs[j] = j < n ? v[j] : 0;
	n = v8 ? 0 : tbc_attr_ints(op, "scan_input_axes", &v);
	for (int j = 0; j < n_scan; j++) {
		int rank = op->inputs[first + S + j]->type.rank - first;
		in_axes[j] = j < n ? v[j] : 0;
		if (in_axes[j] < 0) in_axes[j] += rank;
		if (in_axes[j] < 0 || in_axes[j] >= rank) return lower_error(cx, op, "scan_input_axes is out of range");
	}
	n = v8 ? 0 : tbc_attr_ints(op, "scan_output_directions", &v);
	for (int k = 0; k < K; k++) out_dirs[k] = k < n ? v[k] : 0;
	n = v8 ? 0 : tbc_attr_ints(op, "scan_output_axes", &v);
	for (int k = 0; k < K; k++) {
		int rank = body->outputs[S + k]->type.rank;
		out_axes[k] = k < n ? v[k] : 0;
		if (out_axes[k] < 0) out_axes[k] += rank + 1;
		if (out_axes[k] < 0 || out_axes[k] > rank) return lower_error(cx, op, "scan_output_axes is out of range");
	}
	for (int k = 0; k < K; k++)
		if (op->outputs[S + k] && !lower_type_known(cx, &op->outputs[S + k]->type))
			return lower_error(cx, op, "scan output %d has a shape known only in the body; no lowering yet", k);
	int r = cx->n_regions++;
	int i_sym = region_sym(cx, r, "i"), n_sym = region_sym(cx, r, "n");
	int b_sym = v8 ? region_sym(cx, r, "b") : -1, nb_sym = v8 ? region_sym(cx, r, "nb") : -1;
	int *carry = calloc((size_t)(2 * S + 1), sizeof *carry);
	if (i_sym < 0 || n_sym < 0 || (v8 && (b_sym < 0 || nb_sym < 0)) || !carry) {
		free(carry);
		return lower_error(cx, op, "out of memory");
	}
	int *src = carry + S;
	/* The number of rows (and of batch entries): every scan input must agree. */
	lk l;
	kir_block b = {0};
	bool ok = lk_begin(&l, cx, "scan_init");
	kir_expr *len0 = NULL;
	for (int j = 0; ok && j < n_scan; j++) {
		kir_buffer *x = lk_value(&l, op->inputs[first + S + j]);
		if (!x) {
			ok = false;
			break;
		}
		kir_expr *len = x->dims[first + in_axes[j]];
		if (j == 0) {
			len0 = len;
			store_sym(&l, &b, n_sym, len);
			if (v8) store_sym(&l, &b, nb_sym, x->dims[0]);
			continue;
		}
		char msg[256];
		snprintf(msg, sizeof msg, "Scan '%s': scan input %d has another length along its axis than scan input 0",
			 op->name, j);
		kir_block_add(l.k, &b, kir_s_error(l.k, kir_e_cmp(l.k, KIR_NE, len, len0), msg));
	}
	ok = ok && lk_end(&l, b.first);
	for (int k = 0; ok && k < S; k++) {
		const tbc_value *init = op->inputs[first + k];
		tbc_type t = init ? init->type : (tbc_type){0};
		if (v8 && t.rank > 0) t = drop_dim(&t, 0);
		carry[k] = init ? carry_buf(cx, r, k, &t, &body->outputs[k]->type, v8 ? NULL : op->outputs[k], "state") : -1;
		if (carry[k] < 0) ok = lower_error(cx, op, "state %d is missing or has no known shape", k);
		else if (!v8) ok = (src[k] = lower_value_buf(cx, init)) >= 0;
	}
	if (ok && !v8) ok = carry_dims(cx, S, carry, src);
	for (int k = 0; ok && !v8 && k < S; k++) ok = lower_copy(cx, carry[k], src[k]);
	if (ok && v8) { /* the loop over the batch: the states start from their entry */
		ok = lower_marker(cx, KIR_CTL_LOOP, b_sym, nb_sym, -1);
		for (int k = 0; ok && k < S; k++)
			ok = slice_copy(cx, carry[k], lower_value_buf(cx, op->inputs[first + k]), 0, b_sym, -1, -1, false, true);
		if (ok && lens) ok = scan8_length(cx, op, lens, op->inputs[first + S], n_sym, b_sym, S, K);
	}
	ok = ok && lower_marker(cx, KIR_CTL_LOOP, i_sym, n_sym, -1);
	for (int j = 0; ok && j < n_scan; j++) { /* this iteration's rows */
		const tbc_value *x = op->inputs[first + S + j];
		tbc_type t = scan_row_type(&x->type, (int)in_axes[j], v8);
		int row = lower_temp_buf(cx, &t, "row");
		char name[160];
		snprintf(name, sizeof name, "scan input %d", j);
		ok = row >= 0 &&
		     slice_copy(cx, row, lower_value_buf(cx, x), (int)in_axes[j], b_sym, i_sym, n_sym, in_dirs[j] != 0, true) &&
		     define_from(cx, op, body->inputs[S + j], row, name);
	}
	for (int k = 0; ok && k < S; k++) {
		char name[160];
		snprintf(name, sizeof name, "state %d", k);
		ok = define_from(cx, op, body->inputs[k], carry[k], name);
	}
	ok = ok && lower_body(cx, body);
	for (int k = 0; ok && k < K; k++) { /* output rows, before a state changes */
		const tbc_value *out = op->outputs[S + k];
		if (!out) continue;
		int s = lower_value_buf(cx, body->outputs[S + k]);
		int dst = cx->buf_of[out->id] >= 0 ? cx->buf_of[out->id] : lower_result_buf(cx, out);
		if (s < 0 || dst < 0) {
			ok = false;
			break;
		}
		tbc_type want = scan_row_type(&out->type, (int)out_axes[k], v8);
		char what[160];
		snprintf(what, sizeof what, "Scan '%s': scan output %d", op->name, k);
		ok = check_dims(cx, s, &want, what) &&
		     slice_copy(cx, s, dst, (int)out_axes[k], b_sym, i_sym, n_sym, out_dirs[k] != 0, false);
	}
	for (int k = 0; ok && k < S; k++) ok = (src[k] = lower_value_buf(cx, body->outputs[k])) >= 0;
	ok = ok && carry_back(cx, op, S, src, carry) && lower_marker(cx, KIR_CTL_END_LOOP, i_sym, n_sym, -1);
	if (ok && v8) { /* the batch entry's final states */
		for (int k = 0; ok && k < S; k++) {
			const tbc_value *out = op->outputs[k];
			if (!out) continue;
			int dst = cx->buf_of[out->id] >= 0 ? cx->buf_of[out->id] : lower_result_buf(cx, out);
			ok = dst >= 0 && slice_copy(cx, carry[k], dst, 0, b_sym, -1, -1, false, false);
		}
		ok = ok && lower_marker(cx, KIR_CTL_END_LOOP, b_sym, nb_sym, -1);
	}
	for (int k = 0; ok && !v8 && k < S; k++) {
		char name[160];
		snprintf(name, sizeof name, "Scan output %d", k);
		ok = define_from(cx, op, op->outputs[k], carry[k], name);
	}
	free(carry);
	return ok;
}

bool lower_control(lower_cx *cx, const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_If: return lower_if(cx, op);
	case TBC_OP_Loop: return lower_loop(cx, op);
	case TBC_OP_Scan: return lower_scan(cx, op);
	default: return lower_unsupported(cx, op);
	}
}
