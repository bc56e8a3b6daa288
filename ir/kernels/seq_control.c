/* Control flow: If, Loop and Scan (opset 9+ form; the opset 8 Scan with its
 * batch axis and sequence_lens is run batch by batch on the same core).
 *
 * Shape rules infer the bodies themselves (the driver leaves control-flow
 * subgraphs to them): a body input without a declared type takes the type
 * of what flows into it, and a loop-carried value whose shape changes from
 * one iteration to the next has the changing dims made symbolic until the
 * body's types are a fixpoint. */
#include "seq_common.h"

/* ---- Tensor helpers ------------------------------------------------------ */
/* Row-major split of t's dims around axis: outer * dims[axis] * inner. */
static void split_dims(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *inner) {
	*outer = 1, *inner = 1;
	for (int i = 0; i < axis; i++) *outer *= dims[i];
	for (int i = axis + 1; i < rank; i++) *inner *= dims[i];
}

/* t with index i taken along axis (that axis removed). */
static tbc_tensor *take_along(const tbc_tensor *t, int axis, int64_t i) {
	int64_t dims[TBC_MAX_RANK], outer, inner;
	int r = 0;
	for (int k = 0; k < t->rank; k++)
		if (k != axis) dims[r++] = t->dims[k];
	tbc_tensor *s = tbc_tensor_create(t->dtype, r, dims);
	if (!s) return NULL;
	split_dims(t->rank, t->dims, axis, &outer, &inner);
	size_t es = tbc_dtype_size(t->dtype), blk = (size_t)inner * es;
	for (int64_t o = 0; o < outer; o++)
		memcpy((char *)s->data + (size_t)o * blk, (const char *)t->data + ((size_t)(o * t->dims[axis] + i)) * blk, blk);
	return s;
}

/* Stacks n tensors of one shape along a new axis; NULL when they differ
 * (*mismatch set) or memory runs out.  With n == 0 the element shape is
 * (rank, dims). */
static tbc_tensor *stack_along(tbc_tensor *const *ts, int64_t n, int axis, tbc_dtype dt, int rank, const int64_t *dims,
			       bool *mismatch) {
	*mismatch = false;
	if (n > 0) {
		dt = ts[0]->dtype, rank = ts[0]->rank, dims = ts[0]->dims;
		for (int64_t k = 1; k < n; k++)
			if (ts[k]->dtype != dt || !tbc_tensor_same_shape(ts[k], ts[0])) {
				*mismatch = true;
				return NULL;
			}
	}
	if (rank + 1 > TBC_MAX_RANK || axis < 0 || axis > rank) {
		*mismatch = true;
		return NULL;
	}
	int64_t od[TBC_MAX_RANK], outer, inner;
	for (int k = 0, r = 0; k <= rank; k++) od[k] = k == axis ? n : dims[r++];
	tbc_tensor *s = tbc_tensor_create(dt, rank + 1, od);
	if (!s) return NULL;
	split_dims(rank + 1, od, axis, &outer, &inner);
	size_t es = tbc_dtype_size(dt), blk = (size_t)inner * es;
	for (int64_t k = 0; k < n; k++)
		for (int64_t o = 0; o < outer; o++)
			memcpy((char *)s->data + ((size_t)(o * n + k)) * blk, (const char *)ts[k]->data + (size_t)o * blk, blk);
	return s;
}

/* ---- Type helpers ---------------------------------------------------------- */
/* One type that both a and b fit: dims that agree stay, others are fresh. */
static void merge_types(tbc_module *m, const tbc_type *a, const tbc_type *b, tbc_type *out) {
	tbc_type r = *a;
	if (a->rank != b->rank || a->rank < 0 || b->rank < 0) {
		r.rank = -1;
	} else {
		for (int i = 0; i < a->rank; i++)
			if (!tbc_dim_eq(a->dims[i], b->dims[i])) r.dims[i] = tbc_module_fresh_dim(m);
	}
	*out = r;
}

static bool same_type(const tbc_type *a, const tbc_type *b) {
	if (a->dtype != b->dtype || a->rank != b->rank) return false;
	for (int i = 0; i < a->rank; i++)
		if (!tbc_dim_eq(a->dims[i], b->dims[i])) return false;
	return true;
}

static void set_scalar(tbc_type *t, tbc_dtype dt) {
	t->dtype = dt;
	t->rank = 0;
}

/* Whether body input i had a type in the model (the frontend leaves an
 * undeclared one UNDEFINED). */
static bool declared(const tbc_value *v) { return v->type.dtype != TBC_DT_UNDEFINED && v->type.rank >= 0; }

/* The type a body input starts the fixpoint from: what the op gives it
 * (init), keeping the static dims its current type (declared in the model,
 * or inferred before) has where init's are symbolic.  Starting from init on
 * every inference lets a later one (after folding made init static) refine
 * the body instead of keeping the symbols of the first. */
static void start_type(tbc_value *bv, const tbc_type *init) {
	tbc_type t = *init;
	if (declared(bv) && bv->type.rank == t.rank)
		for (int d = 0; d < t.rank; d++)
			if (t.dims[d].sym && !bv->type.dims[d].sym) t.dims[d] = bv->type.dims[d];
	bv->type = t;
}

/* Infers body with its carried inputs (carried_in[i] = body input index,
 * carried_out[i] = body output index) widened until the body maps them
 * onto themselves.  free_in[i]: whether the input's type may be widened. */
static bool infer_fixpoint(tbc_infer *cx, const tbc_op *op, tbc_graph *body, int n, const int *carried_in,
			   const int *carried_out, const bool *free_in) {
	for (int round = 0; round < 4; round++) {
		if (!tbc_infer_graph(cx, body)) return false;
		bool stable = true;
		for (int i = 0; i < n; i++) {
			tbc_value *vin = body->inputs[carried_in[i]];
			const tbc_type *tout = &body->outputs[carried_out[i]]->type;
			if (tout->dtype != vin->type.dtype)
				return tbc_infer_error(cx, op, "loop-carried value %d changes type from %s to %s in the body", i,
						       tbc_dtype_name(vin->type.dtype), tbc_dtype_name(tout->dtype));
			if (!free_in[i] || same_type(&vin->type, tout)) continue;
			tbc_type merged;
			merge_types(cx->module, &vin->type, tout, &merged);
			if (round == 3) merged.rank = -1;
			/* Only a real widening counts: fresh symbols for dims that are
			 * already symbolic on both sides would never settle. */
			bool wider = merged.rank != vin->type.rank;
			for (int d = 0; !wider && d < merged.rank; d++)
				wider = !vin->type.dims[d].sym && merged.dims[d].sym;
			if (wider) {
				vin->type = merged;
				stable = false;
			}
		}
		if (stable) return true;
	}
	return tbc_infer_graph(cx, body);
}

/* ---- If ---------------------------------------------------------------------- */
bool tbc_shape_If(tbc_infer *cx, tbc_op *op) {
	tbc_graph *th = tbc_attr_graph(op, "then_branch"), *el = tbc_attr_graph(op, "else_branch");
	const tbc_type *c = seq_in_type(op, 0);
	if (!th || !el) return tbc_infer_error(cx, op, "If needs then_branch and else_branch");
	if (c->dtype != TBC_DT_BOOL) return tbc_infer_error(cx, op, "cond must be bool");
	if (tbc_type_numel(c) > 1) return tbc_infer_error(cx, op, "cond must have one element");
	if (th->n_inputs || el->n_inputs) return tbc_infer_error(cx, op, "If branches take no inputs");
	if (!tbc_infer_graph(cx, th) || !tbc_infer_graph(cx, el)) return false;
	if (th->n_outputs != op->n_outputs || el->n_outputs != op->n_outputs)
		return tbc_infer_error(cx, op, "both branches must have %d outputs (then %d, else %d)", op->n_outputs,
				       th->n_outputs, el->n_outputs);
	for (int i = 0; i < op->n_outputs; i++) {
		const tbc_type *a = &th->outputs[i]->type, *b = &el->outputs[i]->type;
		if (a->dtype != b->dtype)
			return tbc_infer_error(cx, op, "output %d is %s in then_branch but %s in else_branch", i,
					       tbc_dtype_name(a->dtype), tbc_dtype_name(b->dtype));
		if (!op->outputs[i]) continue;
		/* A condition known before running (folded) picks the branch: its
		 * types are the outputs'. */
		const tbc_tensor *ct = tbc_input_const(op, 0);
		if (ct && ct->numel == 1) op->outputs[i]->type = tbc_get_i64(ct, 0) ? *a : *b;
		else merge_types(cx->module, a, b, &op->outputs[i]->type);
	}
	return true;
}

int tbc_interp_If(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	if (in[0]->numel != 1) return tbc_interp_error(ip, op, "cond must have one element");
	const tbc_graph *g = tbc_attr_graph(op, tbc_get_i64(in[0], 0) ? "then_branch" : "else_branch");
	if (!g || g->n_outputs != op->n_outputs) return tbc_interp_error(ip, op, "branch outputs do not match the op");
	tbc_tensor **res = calloc((size_t)g->n_outputs + 1, sizeof *res);
	if (!res) return tbc_interp_error(ip, op, "out of memory");
	int rc = tbc_interp_graph(ip, g, NULL, 0, res);
	for (int i = 0; i < g->n_outputs; i++) {
		if (rc == 0 && op->outputs[i]) out[i] = res[i];
		else tbc_tensor_destroy(res[i]);
	}
	free(res);
	return rc;
}

/* ---- Loop -------------------------------------------------------------------- */
bool tbc_shape_Loop(tbc_infer *cx, tbc_op *op) {
	tbc_graph *body = tbc_attr_graph(op, "body");
	if (!body) return tbc_infer_error(cx, op, "Loop needs a body");
	const tbc_type *M = seq_in_type(op, 0), *cond = seq_in_type(op, 1);
	if (M && (M->dtype != TBC_DT_I64 || tbc_type_numel(M) > 1)) return tbc_infer_error(cx, op, "M must be an int64 scalar");
	if (cond && (cond->dtype != TBC_DT_BOOL || tbc_type_numel(cond) > 1)) return tbc_infer_error(cx, op, "cond must be a bool scalar");
	int N = op->n_inputs - 2, K = op->n_outputs - N;
	if (body->n_inputs != N + 2 || body->n_outputs != N + 1 + K || K < 0)
		return tbc_infer_error(cx, op, "the body must take %d inputs and give 1 + %d + scan outputs (it has %d, %d)",
				       N + 2, N, body->n_inputs, body->n_outputs);
	if (!declared(body->inputs[0]) || body->inputs[0]->type.rank != 0) set_scalar(&body->inputs[0]->type, TBC_DT_I64);
	if (!declared(body->inputs[1]) || body->inputs[1]->type.rank != 0) set_scalar(&body->inputs[1]->type, TBC_DT_BOOL);
	int *cin = malloc(sizeof(int) * (size_t)(N + 1)), *cout = malloc(sizeof(int) * (size_t)(N + 1));
	bool *free_in = malloc(sizeof(bool) * (size_t)(N + 1));
	if (!cin || !cout || !free_in) {
		free(cin), free(cout), free(free_in);
		return tbc_infer_error(cx, op, "out of memory");
	}
	for (int i = 0; i < N; i++) {
		tbc_value *bv = body->inputs[2 + i];
		const tbc_type *init = seq_in_type(op, 2 + i);
		if (!init) {
			free(cin), free(cout), free(free_in);
			return tbc_infer_error(cx, op, "loop-carried input %d is missing", i);
		}
		free_in[i] = true;
		start_type(bv, init);
		cin[i] = 2 + i;
		cout[i] = 1 + i;
	}
	bool ok = infer_fixpoint(cx, op, body, N, cin, cout, free_in);
	free(cin), free(cout), free(free_in);
	if (!ok) return false;
	if (body->outputs[0]->type.dtype != TBC_DT_BOOL) return tbc_infer_error(cx, op, "the body's first output must be bool");
	for (int i = 0; i < N; i++) {
		tbc_type *t = seq_out_type(op, i);
		if (t) merge_types(cx->module, &op->inputs[2 + i]->type, &body->outputs[1 + i]->type, t);
	}
	for (int k = 0; k < K; k++) {
		tbc_type *t = seq_out_type(op, N + k);
		const tbc_type *e = &body->outputs[1 + N + k]->type;
		if (!t) continue;
		t->dtype = e->dtype;
		if (e->rank < 0 || e->rank + 1 > TBC_MAX_RANK) {
			t->rank = -1;
			continue;
		}
		t->rank = e->rank + 1;
		t->dims[0] = tbc_module_fresh_dim(cx->module);
		for (int d = 0; d < e->rank; d++) t->dims[d + 1] = e->dims[d];
	}
	return true;
}

/* Element shape of a scan output of a body that never ran: its declared
 * static dims, 0 for the unknown ones. */
static void empty_elem_shape(const tbc_type *t, int *rank, int64_t *dims) {
	*rank = t->rank < 0 ? 0 : t->rank;
	for (int d = 0; d < *rank; d++) dims[d] = t->dims[d].sym ? 0 : t->dims[d].size;
}

int tbc_interp_Loop(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_graph *body = tbc_attr_graph(op, "body");
	int N = op->n_inputs - 2, K = op->n_outputs - N;
	if (!body || body->n_inputs != N + 2 || body->n_outputs != N + 1 + K || K < 0)
		return tbc_interp_error(ip, op, "the body does not match the op");
	const tbc_tensor *M = in[0], *C = in[1];
	if ((M && M->numel != 1) || (C && C->numel != 1)) return tbc_interp_error(ip, op, "M and cond must be scalars");
	int64_t trip = M ? tbc_get_i64(M, 0) : INT64_MAX;
	bool go = C ? tbc_get_i64(C, 0) != 0 : true;
	int rc = -1;
	int64_t it = 0, cap = 0;
	tbc_tensor *iter_t = tbc_tensor_create(TBC_DT_I64, 0, NULL), *cond_t = tbc_tensor_create(TBC_DT_BOOL, 0, NULL);
	const tbc_tensor **args = calloc((size_t)N + 2, sizeof *args);
	tbc_tensor **state = calloc((size_t)N + 1, sizeof *state); /* owned carried values */
	tbc_tensor **res = calloc((size_t)(N + 1 + K) + 1, sizeof *res);
	tbc_tensor ***scans = calloc((size_t)K + 1, sizeof *scans);
	if (!iter_t || !cond_t || !args || !state || !res || !scans) {
		tbc_interp_error(ip, op, "out of memory");
		goto done;
	}
	for (int i = 0; i < N; i++)
		if (!(state[i] = tbc_tensor_clone(in[2 + i]))) {
			tbc_interp_error(ip, op, "out of memory");
			goto done;
		}
	while (go && it < trip) {
		((int64_t *)iter_t->data)[0] = it;
		((uint8_t *)cond_t->data)[0] = 1;
		args[0] = iter_t, args[1] = cond_t;
		for (int i = 0; i < N; i++) args[2 + i] = state[i];
		if (tbc_interp_graph(ip, body, args, N + 2, res) != 0) goto done;
		if (res[0]->numel != 1) {
			tbc_interp_error(ip, op, "the body's condition must be a scalar");
			goto done;
		}
		go = tbc_get_i64(res[0], 0) != 0;
		tbc_tensor_destroy(res[0]), res[0] = NULL;
		for (int i = 0; i < N; i++) {
			tbc_tensor_destroy(state[i]);
			state[i] = res[1 + i], res[1 + i] = NULL;
		}
		if (K > 0 && it == cap) {
			cap = cap ? cap * 2 : 16;
			for (int k = 0; k < K; k++) {
				tbc_tensor **g = realloc(scans[k], (size_t)cap * sizeof *g);
				if (!g) {
					tbc_interp_error(ip, op, "out of memory");
					goto done;
				}
				for (int64_t j = it; j < cap; j++) g[j] = NULL;
				scans[k] = g;
			}
		}
		for (int k = 0; k < K; k++) scans[k][it] = res[1 + N + k], res[1 + N + k] = NULL;
		it++;
	}
	for (int k = 0; k < K; k++) {
		if (!op->outputs[N + k]) continue;
		int er;
		int64_t ed[TBC_MAX_RANK];
		empty_elem_shape(&body->outputs[1 + N + k]->type, &er, ed);
		bool mismatch;
		out[N + k] = stack_along(scans[k], it, 0, body->outputs[1 + N + k]->type.dtype, er, ed, &mismatch);
		if (!out[N + k]) {
			tbc_interp_error(ip, op, mismatch ? "scan output %d changes shape between iterations" : "out of memory", k);
			goto done;
		}
	}
	for (int i = 0; i < N; i++)
		if (op->outputs[i]) out[i] = state[i], state[i] = NULL;
	rc = 0;
done:
	if (rc)
		for (int i = 0; i < op->n_outputs; i++) tbc_tensor_destroy(out[i]), out[i] = NULL;
	for (int i = 0; state && i < N; i++) tbc_tensor_destroy(state[i]);
	for (int i = 0; res && i < N + 1 + K; i++) tbc_tensor_destroy(res[i]);
	for (int k = 0; scans && k < K; k++) {
		for (int64_t j = 0; scans[k] && j < it; j++) tbc_tensor_destroy(scans[k][j]);
		free(scans[k]);
	}
	tbc_tensor_destroy(iter_t), tbc_tensor_destroy(cond_t);
	free(args), free(state), free(res), free(scans);
	return rc;
}

/* ---- Scan -------------------------------------------------------------------- */
typedef struct {
	bool v8;            /* opset 8 form: input 0 is sequence_lens, every value has a batch axis */
	int first;          /* index of the first state input */
	int n_state, n_scan, n_out_scan;
	int64_t in_axes[64], in_dirs[64], out_axes[64], out_dirs[64];
} scan_cfg;

static bool scan_is_v8(const tbc_op *op) {
	return op->graph && op->graph->module && op->graph->module->opset > 0 && op->graph->module->opset < 9;
}

/* Reads the attributes; in_rank[i] / out_rank[k] are the ranks of the scan
 * inputs and of the body's scan outputs (-1 unknown).  NULL or a message. */
static const char *scan_parse(const tbc_op *op, const tbc_graph *body, scan_cfg *c, const int *in_rank) {
	c->v8 = scan_is_v8(op);
	c->first = c->v8 ? 1 : 0;
	c->n_scan = (int)tbc_attr_int(op, "num_scan_inputs", 0);
	c->n_state = op->n_inputs - c->first - c->n_scan;
	c->n_out_scan = op->n_outputs - c->n_state;
	if (c->n_scan <= 0 || c->n_state < 0 || c->n_out_scan < 0 || c->n_scan > 64 || c->n_out_scan > 64)
		return "num_scan_inputs does not fit the inputs and outputs";
	if (!body || body->n_inputs != c->n_state + c->n_scan || body->n_outputs != op->n_outputs)
		return "the body's inputs and outputs do not match the op";
	const int64_t *v;
	int n = tbc_attr_ints(op, c->v8 ? "directions" : "scan_input_directions", &v);
	for (int i = 0; i < c->n_scan; i++) c->in_dirs[i] = i < n ? v[i] : 0;
	n = c->v8 ? -1 : tbc_attr_ints(op, "scan_input_axes", &v);
	for (int i = 0; i < c->n_scan; i++) {
		c->in_axes[i] = i < n ? v[i] : 0;
		int r = in_rank[i] - (c->v8 ? 1 : 0);
		if (r >= 0) {
			if (c->in_axes[i] < -r || c->in_axes[i] >= r) return "scan_input_axes is out of range";
			if (c->in_axes[i] < 0) c->in_axes[i] += r;
		}
	}
	n = c->v8 ? -1 : tbc_attr_ints(op, "scan_output_directions", &v);
	for (int i = 0; i < c->n_out_scan; i++) c->out_dirs[i] = i < n ? v[i] : 0;
	n = c->v8 ? -1 : tbc_attr_ints(op, "scan_output_axes", &v);
	for (int i = 0; i < c->n_out_scan; i++) {
		c->out_axes[i] = i < n ? v[i] : 0;
		int r = body->outputs[c->n_state + i]->type.rank;
		if (r >= 0 && !c->v8) {
			if (c->out_axes[i] < -(r + 1) || c->out_axes[i] > r) return "scan_output_axes is out of range";
			if (c->out_axes[i] < 0) c->out_axes[i] += r + 1;
		}
	}
	for (int i = 0; i < c->n_scan; i++)
		if (c->in_dirs[i] != 0 && c->in_dirs[i] != 1) return "scan directions must be 0 or 1";
	for (int i = 0; i < c->n_out_scan; i++)
		if (c->out_dirs[i] != 0 && c->out_dirs[i] != 1) return "scan directions must be 0 or 1";
	return NULL;
}

/* t without dim ax. */
static void drop_dim(const tbc_type *t, int ax, tbc_type *out) {
	*out = *t;
	if (t->rank < 0) return;
	out->rank = t->rank - 1;
	for (int d = ax; d < out->rank; d++) out->dims[d] = t->dims[d + 1];
}

/* t with dim `dim` inserted at ax. */
static void insert_dim(const tbc_type *t, int ax, tbc_dim dim, tbc_type *out) {
	tbc_type r = *t; /* out may be t */
	if (t->rank < 0 || t->rank + 1 > TBC_MAX_RANK) {
		r.rank = -1;
	} else {
		r.rank = t->rank + 1;
		for (int d = 0; d < r.rank; d++) r.dims[d] = d < ax ? t->dims[d] : d == ax ? dim : t->dims[d - 1];
	}
	*out = r;
}

bool tbc_shape_Scan(tbc_infer *cx, tbc_op *op) {
	tbc_graph *body = tbc_attr_graph(op, "body");
	scan_cfg c;
	int in_rank[64];
	int first = scan_is_v8(op) ? 1 : 0, n_scan = (int)tbc_attr_int(op, "num_scan_inputs", 0);
	/* num_scan_inputs is untrusted: scan_parse rejects a count that does not
	 * fit, but the ranks are read first, so only valid indices are read. */
	for (int i = 0; i < n_scan && i < 64; i++) {
		int k = op->n_inputs - n_scan + i;
		const tbc_type *t = k >= 0 ? seq_in_type(op, k) : NULL;
		in_rank[i] = t ? t->rank : -1;
	}
	const char *msg = scan_parse(op, body, &c, in_rank);
	if (msg) return tbc_infer_error(cx, op, "%s", msg);
	(void)first;
	tbc_module *m = cx->module;
	tbc_dim batch = tbc_module_fresh_dim(m), len = tbc_module_fresh_dim(m);
	int S = c.n_state;
	bool free_in[64 + 64];
	int cin[128], cout[128];
	if (S > 64) return tbc_infer_error(cx, op, "too many scan states");
	for (int i = 0; i < S; i++) {
		const tbc_type *init = seq_in_type(op, c.first + i);
		if (!init) return tbc_infer_error(cx, op, "state input %d is missing", i);
		tbc_type bt = *init;
		if (c.v8) {
			if (init->rank < 1) return tbc_infer_error(cx, op, "states need a batch axis");
			batch = init->dims[0];
			drop_dim(init, 0, &bt);
		}
		tbc_value *bv = body->inputs[i];
		free_in[i] = true;
		start_type(bv, &bt);
		cin[i] = i, cout[i] = i;
	}
	for (int i = 0; i < c.n_scan; i++) {
		const tbc_type *t = seq_in_type(op, c.first + S + i);
		if (!t) return tbc_infer_error(cx, op, "scan input %d is missing", i);
		tbc_type bt = *t;
		if (t->rank >= 0) {
			int ax = (int)c.in_axes[i] + (c.v8 ? 1 : 0);
			if (ax >= t->rank) return tbc_infer_error(cx, op, "scan input %d has no axis %d", i, ax);
			if (i == 0) len = t->dims[ax];
			drop_dim(t, ax, &bt);
			if (c.v8) {
				batch = t->dims[0];
				drop_dim(&bt, 0, &bt);
			}
		}
		start_type(body->inputs[S + i], &bt);
	}
	if (!infer_fixpoint(cx, op, body, S, cin, cout, free_in)) return false;
	/* The axes of the scan outputs are known only now. */
	for (int i = 0; i < c.n_scan; i++) in_rank[i] = seq_in_type(op, c.first + S + i)->rank;
	if ((msg = scan_parse(op, body, &c, in_rank))) return tbc_infer_error(cx, op, "%s", msg);
	for (int i = 0; i < S; i++) {
		tbc_type *t = seq_out_type(op, i);
		if (!t) continue;
		if (c.v8) {
			tbc_type st;
			insert_dim(&body->outputs[i]->type, 0, batch, &st);
			merge_types(m, &op->inputs[c.first + i]->type, &st, t);
		} else {
			merge_types(m, &op->inputs[c.first + i]->type, &body->outputs[i]->type, t);
		}
	}
	for (int k = 0; k < c.n_out_scan; k++) {
		tbc_type *t = seq_out_type(op, S + k);
		if (!t) continue;
		insert_dim(&body->outputs[S + k]->type, (int)c.out_axes[k], len, t);
		if (c.v8) insert_dim(t, 0, batch, t);
	}
	return true;
}

/* One Scan over inputs states[S] and scans[n_scan] (no batch axis): writes
 * the final states and the scan outputs into res (owned). len is the number
 * of iterations (<= every scan input's length along its axis). */
static int scan_core(tbc_interp *ip, const tbc_op *op, const tbc_graph *body, const scan_cfg *c,
		     const tbc_tensor *const *states, const tbc_tensor *const *scans, int64_t len, tbc_tensor **res) {
	int S = c->n_state, NS = c->n_scan, K = c->n_out_scan, rc = -1;
	const tbc_tensor **args = calloc((size_t)(S + NS) + 1, sizeof *args);
	tbc_tensor **st = calloc((size_t)S + 1, sizeof *st), **slices = calloc((size_t)NS + 1, sizeof *slices);
	tbc_tensor **bo = calloc((size_t)(S + K) + 1, sizeof *bo);
	tbc_tensor **acc = calloc((size_t)(K * (len ? len : 1)) + 1, sizeof *acc);
	int64_t done_it = 0;
	if (!args || !st || !slices || !bo || !acc) goto oom;
	for (int i = 0; i < S; i++)
		if (!(st[i] = tbc_tensor_clone(states[i]))) goto oom;
	for (int64_t it = 0; it < len; it++) {
		for (int i = 0; i < S; i++) args[i] = st[i];
		for (int i = 0; i < NS; i++) {
			int64_t pos = c->in_dirs[i] ? len - 1 - it : it;
			if (!(slices[i] = take_along(scans[i], (int)c->in_axes[i], pos))) goto oom;
			args[S + i] = slices[i];
		}
		int r = tbc_interp_graph(ip, body, args, S + NS, bo);
		for (int i = 0; i < NS; i++) tbc_tensor_destroy(slices[i]), slices[i] = NULL;
		if (r != 0) goto done;
		for (int i = 0; i < S; i++) tbc_tensor_destroy(st[i]), st[i] = bo[i], bo[i] = NULL;
		for (int k = 0; k < K; k++) acc[k * len + (c->out_dirs[k] ? len - 1 - it : it)] = bo[S + k], bo[S + k] = NULL;
		done_it = it + 1;
	}
	for (int k = 0; k < K; k++) {
		int er;
		int64_t ed[TBC_MAX_RANK];
		empty_elem_shape(&body->outputs[S + k]->type, &er, ed);
		bool mismatch;
		res[S + k] = stack_along(acc + k * len, len, (int)c->out_axes[k], body->outputs[S + k]->type.dtype, er, ed,
					 &mismatch);
		if (!res[S + k]) {
			if (!mismatch) goto oom;
			tbc_interp_error(ip, op, "scan output %d changes shape between iterations or has a bad axis", k);
			goto done;
		}
	}
	for (int i = 0; i < S; i++) res[i] = st[i], st[i] = NULL;
	rc = 0;
	goto done;
oom:
	tbc_interp_error(ip, op, "out of memory");
done:
	if (rc)
		for (int i = 0; i < S + K; i++) tbc_tensor_destroy(res[i]), res[i] = NULL;
	for (int i = 0; st && i < S; i++) tbc_tensor_destroy(st[i]);
	for (int i = 0; bo && i < S + K; i++) tbc_tensor_destroy(bo[i]);
	for (int64_t j = 0; acc && j < (int64_t)K * len; j++) tbc_tensor_destroy(acc[j]);
	(void)done_it;
	free(args), free(st), free(slices), free(bo), free(acc);
	return rc;
}

int tbc_interp_Scan(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) {
	const tbc_graph *body = tbc_attr_graph(op, "body");
	scan_cfg c;
	int in_rank[64];
	int n_scan = (int)tbc_attr_int(op, "num_scan_inputs", 0);
	for (int i = 0; i < n_scan && i < 64; i++) {
		int k = op->n_inputs - n_scan + i;
		const tbc_tensor *t = k >= 0 ? in[k] : NULL;
		in_rank[i] = t ? t->rank : -1;
	}
	const char *msg = scan_parse(op, body, &c, in_rank);
	if (msg) return tbc_interp_error(ip, op, "%s", msg);
	int S = c.n_state, NS = c.n_scan, K = c.n_out_scan;
	for (int i = 0; i < S + NS; i++)
		if (!in[c.first + i]) return tbc_interp_error(ip, op, "input %d is missing", c.first + i);
	if (!c.v8) {
		int64_t len = -1;
		for (int i = 0; i < NS; i++) {
			const tbc_tensor *t = in[S + i];
			if (c.in_axes[i] >= t->rank) return tbc_interp_error(ip, op, "scan input %d has no axis %lld", i, (long long)c.in_axes[i]);
			int64_t l = t->dims[c.in_axes[i]];
			if (len >= 0 && l != len) return tbc_interp_error(ip, op, "scan inputs have different lengths");
			len = l;
		}
		tbc_tensor **res = calloc((size_t)(S + K) + 1, sizeof *res);
		if (!res) return tbc_interp_error(ip, op, "out of memory");
		int rc = scan_core(ip, op, body, &c, in + c.first, in + c.first + S, len, res);
		for (int i = 0; i < S + K; i++) {
			if (rc == 0 && op->outputs[i]) out[i] = res[i];
			else tbc_tensor_destroy(res[i]);
		}
		free(res);
		return rc;
	}
	/* Opset 8: batch axis 0 everywhere, the time axis is 1 in scan inputs
	 * and outputs; each batch runs its own sequence_lens[b] steps and the
	 * scan outputs are zero past that. */
	const tbc_tensor *lens = in[0];
	int64_t B = -1, T = -1;
	for (int i = 0; i < S + NS; i++) {
		const tbc_tensor *t = in[1 + i];
		if (t->rank < (i < S ? 1 : 2)) return tbc_interp_error(ip, op, "input %d lacks the batch (and time) axes", 1 + i);
		if (B >= 0 && t->dims[0] != B) return tbc_interp_error(ip, op, "inputs have different batch sizes");
		B = t->dims[0];
		if (i >= S) {
			if (T >= 0 && t->dims[1] != T) return tbc_interp_error(ip, op, "scan inputs have different lengths");
			T = t->dims[1];
		}
	}
	if (lens && lens->numel != B) return tbc_interp_error(ip, op, "sequence_lens must have one entry per batch");
	for (int i = 0; i < NS; i++) c.in_axes[i] = 0;
	for (int k = 0; k < K; k++) c.out_axes[k] = 0;
	int rc = -1;
	const tbc_tensor **bin = calloc((size_t)(S + NS) + 1, sizeof *bin);
	tbc_tensor **owned = calloc((size_t)(S + NS) + 1, sizeof *owned);
	tbc_tensor **res = calloc((size_t)(S + K) + 1, sizeof *res);
	tbc_tensor ***per = calloc((size_t)(S + K) + 1, sizeof *per); /* per[i][b] */
	if (!bin || !owned || !res || !per) goto oom;
	for (int i = 0; i < S + K; i++)
		if (!(per[i] = calloc((size_t)B + 1, sizeof **per))) goto oom;
	for (int64_t b = 0; b < B; b++) {
		int64_t len = lens ? tbc_get_i64(lens, b) : T;
		if (len < 0 || len > T) {
			tbc_interp_error(ip, op, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b, (long long)len, (long long)T);
			goto done;
		}
		for (int i = 0; i < S + NS; i++) {
			if (!(owned[i] = take_along(in[1 + i], 0, b))) goto oom;
			bin[i] = owned[i];
		}
		int r = scan_core(ip, op, body, &c, bin, bin + S, len, res);
		for (int i = 0; i < S + NS; i++) tbc_tensor_destroy(owned[i]), owned[i] = NULL;
		if (r) goto done;
		for (int i = 0; i < S + K; i++) {
			tbc_tensor *t = res[i];
			res[i] = NULL;
			if (i >= S && len < T) { /* pad the time axis with zeros */
				int64_t d[TBC_MAX_RANK];
				for (int k = 0; k < t->rank; k++) d[k] = t->dims[k];
				d[0] = T;
				tbc_tensor *p = tbc_tensor_create(t->dtype, t->rank, d);
				if (!p) {
					tbc_tensor_destroy(t);
					goto oom;
				}
				memcpy(p->data, t->data, (size_t)t->numel * tbc_dtype_size(t->dtype));
				tbc_tensor_destroy(t);
				t = p;
			}
			per[i][b] = t;
		}
	}
	for (int i = 0; i < S + K; i++) {
		if (!op->outputs[i]) continue;
		int er;
		int64_t ed[TBC_MAX_RANK];
		empty_elem_shape(&body->outputs[i]->type, &er, ed);
		if (i >= S && er + 1 <= TBC_MAX_RANK) {
			memmove(ed + 1, ed, (size_t)er * sizeof *ed);
			ed[0] = T < 0 ? 0 : T;
			er++;
		}
		bool mismatch;
		if (!(out[i] = stack_along(per[i], B, 0, body->outputs[i]->type.dtype, er, ed, &mismatch))) {
			if (!mismatch) goto oom;
			tbc_interp_error(ip, op, "output %d has different shapes across the batch", i);
			goto done;
		}
	}
	rc = 0;
	goto done;
oom:
	tbc_interp_error(ip, op, "out of memory");
done:
	if (rc)
		for (int i = 0; i < op->n_outputs; i++) tbc_tensor_destroy(out[i]), out[i] = NULL;
	for (int i = 0; per && i < S + K; i++) {
		for (int64_t b = 0; per[i] && b < B; b++) tbc_tensor_destroy(per[i][b]);
		free(per[i]);
	}
	for (int i = 0; owned && i < S + NS; i++) tbc_tensor_destroy(owned[i]);
	for (int i = 0; res && i < S + K; i++) tbc_tensor_destroy(res[i]);
	free(bin), free(owned), free(res), free(per);
	return rc;
}
