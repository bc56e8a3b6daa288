/* Canonicalisation: every IR op has the form of the newest ai.onnx opset, so
 * kernels, shape rules and later passes know one form only.  Each rewrite
 * below turns an older opset's form (attributes that became inputs, changed
 * defaults, renamed or retired ops) into the newest one; new constant inputs
 * are CONST values of the op's graph, new helper ops are placed just before
 * (or, for a result that must be reshaped back, just after) the op.
 * Requires: op was just imported (its outputs have no uses yet).
 * Guarantees: op has the newest form, or an error is reported. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend.h"

typedef struct canon {
	tbc_op *op;
	const char *op_type;
	int64_t opset;
	tbc_diags *diags;
} canon;

static bool fail(canon *c, tbc_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(canon *c, tbc_code code, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	const tbc_module *m = c->op->graph->module;
	tbc_diags_add(c->diags, code, m->path, c->op->name, c->op_type, NULL, "%s", msg);
	return false;
}

static bool oom(canon *c) { return fail(c, TBC_ERR_NO_MEMORY, "out of memory"); }

tbc_opcode tbc_fe_canon_opcode(const char *op_type) {
	if (!strcmp(op_type, "Upsample")) return TBC_OP_Resize;
	if (!strcmp(op_type, "Scatter")) return TBC_OP_ScatterElements;
	return tbc_opcode_from_onnx(op_type);
}

/* ---- Helpers --------------------------------------------------------------*/
static tbc_value *const_tensor(canon *c, tbc_dtype dt, int rank, const int64_t *dims, const void *data) {
	tbc_tensor *t = tbc_tensor_create(dt, rank, dims);
	if (!t) return NULL;
	if (t->numel) memcpy(t->data, data, (size_t)t->numel * tbc_dtype_size(dt));
	tbc_value *v = tbc_graph_add_const(c->op->graph, NULL, t);
	tbc_tensor_destroy(t);
	return v;
}

static tbc_value *const_i64s(canon *c, const int64_t *v, int n) {
	int64_t d = n;
	return const_tensor(c, TBC_DT_I64, 1, &d, v);
}

static tbc_value *const_i64(canon *c, int64_t v) { return const_tensor(c, TBC_DT_I64, 0, NULL, &v); }

static tbc_value *const_f32(canon *c, double v) {
	float f = (float)v;
	return const_tensor(c, TBC_DT_F32, 0, NULL, &f);
}

/* Places a new op just before c->op (so it runs first). */
static tbc_op *new_before(canon *c, tbc_opcode code, int n_in, tbc_value *const *in, int n_out) {
	tbc_op *at = c->op;
	tbc_graph *g = at->graph;
	tbc_op *o = tbc_op_new(g, code, at->name, n_in, in, n_out);
	if (!o) return NULL;
	g->last = o->prev;
	if (g->last)
		g->last->next = NULL;
	else
		g->first = NULL;
	o->prev = at->prev;
	o->next = at;
	if (at->prev)
		at->prev->next = o;
	else
		g->first = o;
	at->prev = o;
	return o;
}

/* Adds a STRING attribute (tbc_op_add_attr moves the attribute array, so
 * each one is filled in before the next is added). */
static bool set_string(canon *c, const char *name, const char *value) {
	tbc_attr *a = tbc_op_add_attr(c->op, name, TBC_ATTR_STRING);
	if (!a || !(a->s = tbc_arena_strdup(c->op->graph->module->arena, value))) return oom(c);
	a->s_len = strlen(value);
	return true;
}

static bool set_int(tbc_op *op, const char *name, int64_t value) {
	tbc_attr *a = tbc_op_add_attr(op, name, TBC_ATTR_INT);
	if (a) a->i = value;
	return a != NULL;
}

static bool ensure_inputs(canon *c, int n) {
	if (c->op->n_inputs >= n) return true;
	return tbc_op_resize_inputs(c->op, n) || oom(c);
}

/* Moves INTS attribute `attr` to input `index` as an int64 1-D constant. */
static bool ints_attr_to_input(canon *c, const char *attr, int index) {
	const int64_t *v;
	int n = tbc_attr_ints(c->op, attr, &v);
	if (n < 0) {
		if (tbc_op_attr(c->op, attr)) return fail(c, TBC_ERR_INVALID_MODEL, "attribute '%s' must be a list of ints", attr);
		return true;
	}
	if (index < c->op->n_inputs && c->op->inputs[index])
		return fail(c, TBC_ERR_INVALID_MODEL, "'%s' is given both as attribute and as input", attr);
	tbc_value *k = const_i64s(c, v, n);
	if (!k || !ensure_inputs(c, index + 1)) return oom(c);
	tbc_op_set_input(c->op, index, k);
	tbc_op_remove_attr(c->op, attr);
	return true;
}

/* A scalar of X's element type: a float32 constant cast like input 0. */
static tbc_value *scalar_like_input0(canon *c, double v) {
	tbc_value *f = const_f32(c, v);
	if (!f) return NULL;
	tbc_value *in[2] = {f, c->op->inputs[0]};
	tbc_op *cl = new_before(c, TBC_OP_CastLike, 2, in, 1);
	return cl ? cl->outputs[0] : NULL;
}

/* Gives op a fresh output 0 and returns a new op, placed after op, that
 * produces the original output value from it (for results that need a
 * fix-up after the canonical op). */
static tbc_op *redirect_output0(canon *c, tbc_opcode code, int n_in, tbc_value *const *in_rest) {
	tbc_op *op = c->op;
	tbc_value *orig = op->outputs[0];
	tbc_value *ins[4] = {NULL};
	for (int i = 1; i < n_in; i++) ins[i] = in_rest[i - 1];
	tbc_op *after = tbc_op_new(op->graph, code, op->name, n_in, ins, 1);
	if (!after) return NULL;
	tbc_value *tmp = after->outputs[0];
	op->outputs[0] = tmp;
	tmp->def = op;
	tmp->def_index = 0;
	tmp->name = NULL;
	after->outputs[0] = orig;
	orig->def = after;
	orig->def_index = 0;
	tbc_op_set_input(after, 0, tmp);
	return after;
}

/* ---- Rewrites ------------------------------------------------------------ */
static bool is_reduce(tbc_opcode k) {
	switch (k) {
	case TBC_OP_ReduceL1: case TBC_OP_ReduceL2: case TBC_OP_ReduceLogSum: case TBC_OP_ReduceLogSumExp:
	case TBC_OP_ReduceMax: case TBC_OP_ReduceMean: case TBC_OP_ReduceMin: case TBC_OP_ReduceProd:
	case TBC_OP_ReduceSum: case TBC_OP_ReduceSumSquare: return true;
	default: return false;
	}
}

/* Softmax, LogSoftmax and Hardmax before opset 13 work on the input
 * flattened to 2-D at `axis` (default 1): Flatten, the op on axis 1, then
 * Reshape back to the input's shape. */
static bool legacy_softmax(canon *c) {
	tbc_op *op = c->op;
	int64_t axis = tbc_attr_int(op, "axis", 1);
	tbc_value *x = op->inputs[0];
	if (!x) return true;
	tbc_op *shape = new_before(c, TBC_OP_Shape, 1, &x, 1);
	tbc_op *flat = new_before(c, TBC_OP_Flatten, 1, &x, 1);
	if (!shape || !flat) return oom(c);
	tbc_attr *a = tbc_op_add_attr(flat, "axis", TBC_ATTR_INT);
	if (!a) return oom(c);
	a->i = axis;
	tbc_op_set_input(op, 0, flat->outputs[0]);
	tbc_op_remove_attr(op, "axis");
	if (!(a = tbc_op_add_attr(op, "axis", TBC_ATTR_INT))) return oom(c);
	a->i = 1;
	tbc_value *rest[1] = {shape->outputs[0]};
	return redirect_output0(c, TBC_OP_Reshape, 2, rest) || oom(c);
}

/* Legacy (opset < 7) broadcasting of binary elementwise ops: broadcast=1
 * with an axis aligns B at that axis of A instead of at the end. */
static bool legacy_broadcast(canon *c) {
	tbc_op *op = c->op;
	const tbc_attr *b = tbc_op_attr(op, "broadcast");
	const tbc_attr *ax = tbc_op_attr(op, "axis");
	if (b && b->i && ax && op->n_inputs == 2 && op->inputs[0] && op->inputs[1]) {
		int ra = op->inputs[0]->type.rank, rb = op->inputs[1]->type.rank;
		if (ra < 0 || rb < 0)
			return fail(c, TBC_ERR_UNSUPPORTED, "legacy broadcast with axis needs the ranks of both inputs");
		int64_t axis = ax->i < 0 ? ax->i + ra : ax->i;
		int64_t trailing = ra - axis - rb;
		if (axis < 0 || trailing < 0) return fail(c, TBC_ERR_INVALID_MODEL, "broadcast axis %lld is out of range", (long long)ax->i);
		if (trailing > 0) {
			int64_t axes[TBC_MAX_RANK];
			for (int64_t i = 0; i < trailing; i++) axes[i] = rb + i;
			tbc_value *k = const_i64s(c, axes, (int)trailing);
			tbc_value *in[2] = {op->inputs[1], k};
			tbc_op *u = k ? new_before(c, TBC_OP_Unsqueeze, 2, in, 1) : NULL;
			if (!u) return oom(c);
			tbc_op_set_input(op, 1, u->outputs[0]);
		}
	}
	tbc_op_remove_attr(op, "broadcast");
	if (ax && tbc_ops[op->code].category == TBC_CAT_ELEMENTWISE) tbc_op_remove_attr(op, "axis");
	return true;
}

/* PRelu before opset 7 applied a slope of shape [C] along axis 1 of X
 * (channels), not along numpy's trailing axis: unsqueeze it to [C, 1, ...]
 * so the opset-7 broadcast means the same. */
static bool legacy_prelu(canon *c) {
	tbc_op *op = c->op;
	if (op->n_inputs != 2 || !op->inputs[0] || !op->inputs[1]) return true;
	int rx = op->inputs[0]->type.rank, rs = op->inputs[1]->type.rank;
	if (rs >= 0 && rs != 1) return true; /* a scalar or a full-rank slope means the same in both */
	if (rx < 0 || rs < 0)
		return fail(c, TBC_ERR_UNSUPPORTED, "PRelu before opset 7 needs the ranks of X and slope (declare their shapes)");
	if (rx <= 2) return true; /* axis 1 is the trailing axis */
	int64_t axes[TBC_MAX_RANK];
	for (int i = 0; i < rx - 2; i++) axes[i] = 1 + i;
	tbc_value *k = const_i64s(c, axes, rx - 2);
	tbc_value *in[2] = {op->inputs[1], k};
	tbc_op *u = k ? new_before(c, TBC_OP_Unsqueeze, 2, in, 1) : NULL;
	if (!u) return oom(c);
	tbc_op_set_input(op, 1, u->outputs[0]);
	return true;
}

static bool canon_cast(canon *c) {
	const tbc_attr *to = tbc_op_attr(c->op, "to");
	if (!to || to->kind != TBC_ATTR_STRING) return true;
	/* Cast-1 named the type ("FLOAT"); later opsets use the number. */
	static const char *const names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
					    "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
					    "COMPLEX128", "BFLOAT16"};
	for (int i = 1; i < (int)(sizeof names / sizeof names[0]); i++)
		if (!strcmp(to->s, names[i])) {
			tbc_op_remove_attr(c->op, "to");
			tbc_attr *a = tbc_op_add_attr(c->op, "to", TBC_ATTR_INT);
			if (!a) return oom(c);
			a->i = i;
			return true;
		}
	return fail(c, TBC_ERR_INVALID_MODEL, "Cast to unknown type '%s'", to->s);
}

static bool canon_pad(canon *c) {
	tbc_op *op = c->op;
	if (c->opset >= 11) return true;
	const char *pads_name = tbc_op_attr(op, "pads") ? "pads" : "paddings";
	if (!tbc_op_attr(op, pads_name)) return fail(c, TBC_ERR_INVALID_MODEL, "missing attribute 'pads'");
	if (!ints_attr_to_input(c, pads_name, 1)) return false;
	double value = tbc_attr_float(op, "value", 0.0);
	tbc_op_remove_attr(op, "value");
	if (value != 0.0) {
		tbc_value *v = scalar_like_input0(c, value);
		if (!v || !ensure_inputs(c, 3)) return oom(c);
		tbc_op_set_input(op, 2, v);
	}
	return true;
}

static bool canon_clip(canon *c) {
	tbc_op *op = c->op;
	if (c->opset >= 11) return true;
	const tbc_attr *mn = tbc_op_attr(op, "min"), *mx = tbc_op_attr(op, "max");
	double lo = mn ? tbc_attr_float(op, "min", 0) : 0, hi = mx ? tbc_attr_float(op, "max", 0) : 0;
	tbc_op_remove_attr(op, "min");
	tbc_op_remove_attr(op, "max");
	if (!ensure_inputs(c, 3)) return false;
	if (mn) {
		tbc_value *v = scalar_like_input0(c, lo);
		if (!v) return oom(c);
		tbc_op_set_input(op, 1, v);
	}
	if (mx) {
		tbc_value *v = scalar_like_input0(c, hi);
		if (!v) return oom(c);
		tbc_op_set_input(op, 2, v);
	}
	return true;
}

/* Upsample (any version) and Resize-10: Resize with scales as input 2,
 * asymmetric coordinates and floor rounding for nearest. */
static bool canon_resize(canon *c, bool upsample) {
	tbc_op *op = c->op;
	if (upsample || c->opset < 11) {
		tbc_value *scales = op->n_inputs > 1 ? op->inputs[1] : NULL;
		const double *fs;
		int n = tbc_attr_floats(op, "scales", &fs);
		if (!scales && n >= 0) {
			float f[TBC_MAX_RANK];
			if (n > TBC_MAX_RANK) return fail(c, TBC_ERR_INVALID_MODEL, "too many scales");
			for (int i = 0; i < n; i++) f[i] = (float)fs[i];
			int64_t d = n;
			scales = const_tensor(c, TBC_DT_F32, 1, &d, f);
			if (!scales) return oom(c);
		}
		tbc_op_remove_attr(op, "scales");
		if (!scales) {
			if (upsample && (tbc_op_attr(op, "width_scale") || tbc_op_attr(op, "height_scale")))
				return fail(c, TBC_ERR_UNSUPPORTED, "Upsample-1 (width_scale/height_scale) is not supported");
			return fail(c, TBC_ERR_INVALID_MODEL, "missing scales");
		}
		if (!ensure_inputs(c, 3)) return false;
		tbc_op_set_input(op, 1, NULL);
		tbc_op_set_input(op, 2, scales);
		if (!tbc_op_resize_inputs(op, 3)) return oom(c);
		const char *mode = tbc_attr_string(op, "mode", "nearest");
		if (upsample && !strcmp(mode, "bilinear")) mode = "linear";
		char m[16];
		snprintf(m, sizeof m, "%s", mode);
		tbc_op_remove_attr(op, "mode");
		tbc_op_remove_attr(op, "coordinate_transformation_mode");
		tbc_op_remove_attr(op, "nearest_mode");
		return set_string(c, "mode", m) && set_string(c, "coordinate_transformation_mode", "asymmetric") &&
		       set_string(c, "nearest_mode", "floor");
	}
	/* Opset 11-12 require roi and scales; empty constants mean "absent". */
	for (int i = 1; i < op->n_inputs && i < 3; i++) {
		const tbc_tensor *t = tbc_input_const(op, i);
		if (t && t->numel == 0) tbc_op_set_input(op, i, NULL);
	}
	return true;
}

static bool canon_split(canon *c) {
	tbc_op *op = c->op;
	if (c->opset < 13 && !ints_attr_to_input(c, "split", 1)) return false;
	bool has_sizes = op->n_inputs > 1 && op->inputs[1];
	if (!has_sizes && !tbc_op_attr(op, "num_outputs")) {
		tbc_attr *a = tbc_op_add_attr(op, "num_outputs", TBC_ATTR_INT);
		if (!a) return oom(c);
		a->i = op->n_outputs;
	}
	return true;
}

static bool canon_batchnorm(canon *c) {
	tbc_op *op = c->op;
	if (c->opset >= 14) return true;
	if (c->opset < 9 && tbc_attr_int(op, "spatial", 1) == 0)
		return fail(c, TBC_ERR_UNSUPPORTED, "BatchNormalization with spatial=0 is not supported");
	tbc_op_remove_attr(op, "spatial");
	tbc_op_remove_attr(op, "is_test");
	for (int i = 1; i < op->n_outputs; i++)
		if (op->outputs[i])
			return fail(c, TBC_ERR_UNSUPPORTED, "training-mode outputs of BatchNormalization-%lld are not supported",
				    (long long)c->opset);
	op->n_outputs = 1;
	return true;
}

/* GroupNormalization-18 scales per group; 21 per channel.  scale_c =
 * Reshape(Expand(Reshape(scale, [G, 1]), [G, C/G]), [-1]). */
static bool canon_groupnorm(canon *c) {
	tbc_op *op = c->op;
	if (c->opset >= 21 || op->n_inputs < 3 || !op->inputs[0]) return true;
	int64_t g = tbc_attr_int(op, "num_groups", 0);
	if (g <= 0) return fail(c, TBC_ERR_INVALID_MODEL, "num_groups must be positive");
	tbc_value *x = op->inputs[0];
	tbc_op *shape = new_before(c, TBC_OP_Shape, 1, &x, 1);
	if (!shape) return oom(c);
	if (!set_int(shape, "start", 1) || !set_int(shape, "end", 2)) return oom(c);
	int64_t gv = g, g1[2] = {g, 1}, minus1 = -1;
	tbc_value *gk = const_i64s(c, &gv, 1);
	tbc_value *in[2] = {shape->outputs[0], gk};
	tbc_op *div = gk ? new_before(c, TBC_OP_Div, 2, in, 1) : NULL;
	if (!div) return oom(c);
	tbc_value *cin[2] = {gk, div->outputs[0]};
	tbc_op *cat = new_before(c, TBC_OP_Concat, 2, cin, 1);
	tbc_attr *ca = cat ? tbc_op_add_attr(cat, "axis", TBC_ATTR_INT) : NULL;
	tbc_value *kg1 = const_i64s(c, g1, 2), *km1 = const_i64s(c, &minus1, 1);
	if (!ca || !kg1 || !km1) return oom(c);
	ca->i = 0;
	for (int i = 1; i <= 2; i++) {
		tbc_value *r1in[2] = {op->inputs[i], kg1};
		tbc_op *r1 = r1in[0] ? new_before(c, TBC_OP_Reshape, 2, r1in, 1) : NULL;
		if (!r1) return r1in[0] ? oom(c) : true;
		tbc_value *ein[2] = {r1->outputs[0], cat->outputs[0]};
		tbc_op *ex = new_before(c, TBC_OP_Expand, 2, ein, 1);
		tbc_value *r2in[2] = {ex ? ex->outputs[0] : NULL, km1};
		tbc_op *r2 = ex ? new_before(c, TBC_OP_Reshape, 2, r2in, 1) : NULL;
		if (!r2) return oom(c);
		tbc_op_set_input(op, i, r2->outputs[0]);
	}
	return true;
}

/* DFT-17..19: axis attribute (default 1) -> input 2. */
static bool canon_dft(canon *c) {
	tbc_op *op = c->op;
	if (c->opset >= 20) return true;
	int64_t axis = tbc_attr_int(op, "axis", 1);
	tbc_op_remove_attr(op, "axis");
	tbc_value *k = const_i64(c, axis);
	if (!k || !ensure_inputs(c, 3)) return oom(c);
	tbc_op_set_input(op, 2, k);
	return true;
}

static bool canon_lppool(canon *c) {
	const tbc_attr *p = tbc_op_attr(c->op, "p");
	if (!p || p->kind != TBC_ATTR_FLOAT) return true;
	double v = p->f;
	/* Old models spell p as a float; it must still be a whole number of a
	 * sane size (the model is untrusted: C leaves converting 1e32 undefined). */
	if (!(v >= 1 && v <= 1e6) || v != floor(v))
		return fail(c, TBC_ERR_INVALID_MODEL, "LpPool's p must be a whole number from 1 to 1e6, got %g", v);
	tbc_op_remove_attr(c->op, "p");
	tbc_attr *a = tbc_op_add_attr(c->op, "p", TBC_ATTR_INT);
	if (!a) return oom(c);
	a->i = (int64_t)v;
	return true;
}

bool tbc_fe_canon_op(tbc_op *op, const char *op_type, int64_t opset, tbc_diags *diags) {
	canon cx = {op, op_type, opset, diags}, *c = &cx;
	/* Attributes retired long ago that carry no meaning now. */
	tbc_op_remove_attr(op, "consumed_inputs");
	if (tbc_op_attr(op, "broadcast") && !legacy_broadcast(c)) return false;
	if (is_reduce(op->code)) {
		int64_t since = op->code == TBC_OP_ReduceSum ? 13 : 18;
		return opset >= since || ints_attr_to_input(c, "axes", 1);
	}
	switch (op->code) {
	case TBC_OP_Squeeze:
	case TBC_OP_Unsqueeze:
		return opset >= 13 || ints_attr_to_input(c, "axes", 1);
	case TBC_OP_Split: return canon_split(c);
	case TBC_OP_Slice:
		if (opset >= 10) return true;
		return ints_attr_to_input(c, "starts", 1) && ints_attr_to_input(c, "ends", 2) &&
		       ints_attr_to_input(c, "axes", 3);
	case TBC_OP_Pad: return canon_pad(c);
	case TBC_OP_Clip: return canon_clip(c);
	case TBC_OP_TopK:
		if (opset >= 10) return true;
		{
			int64_t k = tbc_attr_int(op, "k", -1);
			if (k < 0) return fail(c, TBC_ERR_INVALID_MODEL, "missing or negative attribute 'k'");
			tbc_op_remove_attr(op, "k");
			tbc_value *kv = const_i64s(c, &k, 1);
			if (!kv || !ensure_inputs(c, 2)) return oom(c);
			tbc_op_set_input(op, 1, kv);
		}
		return true;
	case TBC_OP_Resize: return canon_resize(c, !strcmp(op_type, "Upsample"));
	case TBC_OP_Dropout:
		tbc_op_remove_attr(op, "is_test");
		/* Inference: the ratio does not matter; newer opsets take it as input 1. */
		if (opset < 12) tbc_op_remove_attr(op, "ratio");
		return true;
	case TBC_OP_BatchNormalization: return canon_batchnorm(c);
	case TBC_OP_GroupNormalization: return canon_groupnorm(c);
	case TBC_OP_Cast: return canon_cast(c);
	case TBC_OP_Softmax:
	case TBC_OP_LogSoftmax:
	case TBC_OP_Hardmax: return opset >= 13 || legacy_softmax(c);
	case TBC_OP_Reshape:
		return opset >= 5 || ints_attr_to_input(c, "shape", 1);
	case TBC_OP_Concat:
		if (opset < 4 && !tbc_op_attr(op, "axis")) {
			tbc_attr *a = tbc_op_add_attr(op, "axis", TBC_ATTR_INT);
			if (!a) return oom(c);
			a->i = 1;
		}
		return true;
	case TBC_OP_GRU:
	case TBC_OP_LSTM:
	case TBC_OP_RNN:
		tbc_op_remove_attr(op, "output_sequence");
		return true;
	case TBC_OP_Gemm:
		return true;
	case TBC_OP_PRelu: return opset >= 7 || legacy_prelu(c);
	case TBC_OP_LpPool:
	case TBC_OP_GlobalLpPool: return canon_lppool(c);
	case TBC_OP_DFT: return canon_dft(c);
	case TBC_OP_GridSample: {
		/* GridSample-16 named its modes bilinear and bicubic; 20 says linear and cubic. */
		const char *mode = tbc_attr_string(op, "mode", NULL);
		if (opset >= 20 || !mode) return true;
		const char *renamed = !strcmp(mode, "bilinear") ? "linear" : !strcmp(mode, "bicubic") ? "cubic" : NULL;
		if (!renamed) return true;
		tbc_op_remove_attr(op, "mode");
		return set_string(c, "mode", renamed);
	}
	/* Scan-8 (batch axis, sequence_lens input) is left as it is: the Scan
	 * rule and kernel tell it apart by the module's opset. */
	case TBC_OP_Tile:
		if (opset < 6) return fail(c, TBC_ERR_UNSUPPORTED, "Tile-1 is not supported");
		return true;
	default: return true;
	}
}
