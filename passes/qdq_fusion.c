/* QDQ fusion (opt-in: tbc compile --qdq-fusion, tbc_compile_options.qdq_fusion).
 *
 * Does: rewrites the integer convolutions and matrix products a QDQ model
 * (onnxruntime's quantize_static, QuantFormat.QDQ) states in float,
 *   Y = QuantizeLinear(Conv(DequantizeLinear(x), DequantizeLinear(w), B), y_scale, y_zp)
 * into QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B'),
 * and the same with MatMul into QLinearMatMul, where
 *   x is u8 or i8 with one scale and zero point;
 *   w is a constant, i8 with zero point 0 or u8 with any, one scale and zero
 *     point or one per output channel (Conv: axis 0; MatMul: a 2-D w, per
 *     column, axis 1);
 *   B (Conv only, optional) is DequantizeLinear of an int32 constant with
 *     zero point 0, or a float constant; B' is int32 with scale x_scale *
 *     w_scale: the int32 constant itself where its scale is that product
 *     (quantize_static writes it so), else round_half_even(b / (x_scale *
 *     w_scale)) in float32 as quantize_static quantizes a bias;
 *   Y is u8 or i8 with one scale and zero point, the only reader of the
 *     Conv's result, or reads it through a Relu that is its only reader
 *     where y_zp is the type's least value (then QuantizeLinear's clamp is
 *     the Relu, exactly: onnxruntime removes such a Relu too).
 * Meaning: onnxruntime's.  Its graph optimizer makes the same rewrite (the
 * QDQ selectors' QLinearConv / QLinearMatMul): exact int32 sums and one
 * requantization instead of float sums rounded at every step, so a result
 * may differ from the model's float meaning (and the interpreter's) by one
 * quantization step where the float sum lands near a rounding boundary
 * (docs/decisions.md, "QDQ models keep their float convolutions").  Hence
 * off by default.
 * When: before fold, which would turn the weights' DequantizeLinear into
 * float constants.
 * Requires: a verified, inferred module.
 * Guarantees: each rewritten op's result has the QuantizeLinear's type and
 * name; the ops it replaced are removed, and a DequantizeLinear left unread
 * too.  Every graph, subgraphs included. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/kernels/kernels.h"
#include "passes/passes.h"
#include "passes/util.h"

typedef struct qdq {
	tbc_module *m;
	tbc_infer cx;
	bool oom;
} qdq;

/* A DequantizeLinear's operands: q, its scale and zero point (or NULL). */
typedef struct dq_form {
	tbc_op *op;
	tbc_value *q, *scale, *zp;
	bool per_axis; /* one scale per element of the axis asked for */
} dq_form;

static bool is_q8(tbc_dtype t) { return t == TBC_DT_U8 || t == TBC_DT_I8; }

static int64_t numel_static(const tbc_type *t) {
	int64_t n = 1;
	for (int d = 0; d < t->rank; d++) {
		if (t->dims[d].sym) return -1;
		n *= t->dims[d].size;
	}
	return t->rank < 0 ? -1 : n;
}

/* Whether v is DequantizeLinear(q, scale[, zp]) to float32, q of dtype qt
 * (UNDEFINED: u8 or i8), with one f32 scale and zero point, or (axis >= 0)
 * one per element of q's dim `axis` (a 1-D scale, the op's axis that dim). */
static bool match_dq(tbc_value *v, tbc_dtype qt, int axis, dq_form *f) {
	tbc_op *op = v ? v->def : NULL;
	memset(f, 0, sizeof *f);
	if (!op || op->code != TBC_OP_DequantizeLinear || v->type.dtype != TBC_DT_F32) return false;
	if (tbc_attr_int(op, "block_size", 0) != 0) return false;
	f->op = op, f->q = op->inputs[0], f->scale = op->inputs[1];
	f->zp = op->n_inputs > 2 ? op->inputs[2] : NULL;
	tbc_dtype t = f->q->type.dtype;
	if (qt == TBC_DT_UNDEFINED ? !is_q8(t) : t != qt) return false;
	if (f->scale->type.dtype != TBC_DT_F32) return false;
	int64_t ns = numel_static(&f->scale->type);
	if (ns != 1) {
		int a;
		const tbc_type *qtt = &f->q->type;
		if (axis < 0 || f->scale->type.rank != 1 || axis >= qtt->rank || qtt->dims[axis].sym || qtt->dims[axis].size != ns)
			return false;
		if (!tbc_norm_axis(tbc_attr_int(op, "axis", 1), qtt->rank, &a) || a != axis) return false;
		f->per_axis = true;
	}
	return !f->zp || numel_static(&f->zp->type) == ns;
}

/* A constant of one value of dtype dt, v (a zero point the op needs). */
static tbc_value *const_scalar(qdq *Q, tbc_graph *g, tbc_dtype dt, int64_t v) {
	tbc_tensor *t = tbc_tensor_create(dt, 0, NULL);
	if (!t) return Q->oom = true, NULL;
	tbc_store_i64(dt, t->data, 0, v);
	char name[64];
	snprintf(name, sizeof name, "qdq_fusion_%s_%lld", tbc_dtype_name(dt), (long long)v);
	tbc_value *c = tbc_graph_add_const(g, name, t);
	tbc_tensor_destroy(t);
	if (!c) Q->oom = true;
	return c;
}

/* Whether zero point zp (NULL: 0) of a constant weight is allowed: u8
 * weights any, i8 weights only 0 (as onnxruntime's selectors ask). */
static bool weight_zp_ok(const tbc_value *w, const tbc_value *zp) {
	if (!zp || w->type.dtype == TBC_DT_U8) return true;
	const tbc_tensor *z = zp->kind == TBC_VALUE_CONST ? zp->constant : NULL;
	if (!z) return false;
	for (int64_t i = 0; i < z->numel; i++)
		if (tbc_load_i64(z->dtype, z->data, (size_t)i) != 0) return false;
	return true;
}

/* The QuantizeLinear reading y (through a Relu the rule allows), or NULL;
 * *relu the Relu when there is one. */
static tbc_op *match_q(qdq *Q, tbc_value *y, tbc_op **relu) {
	*relu = NULL;
	if (tbc_value_use_count(y) != 1 || pass_is_returned(Q->m, y)) return NULL;
	tbc_op *r = y->uses->op;
	if (r->code == TBC_OP_Relu) { /* (its only input is y) */
		if (!r->outputs[0] || tbc_value_use_count(r->outputs[0]) != 1 || pass_is_returned(Q->m, r->outputs[0])) return NULL;
		*relu = r;
		y = r->outputs[0];
		r = y->uses->op;
	}
	if (r->code != TBC_OP_QuantizeLinear || r->inputs[0] != y || !r->outputs[0] || !is_q8(r->outputs[0]->type.dtype)) return NULL;
	if (tbc_attr_int(r, "block_size", 0) != 0 || tbc_attr_int(r, "precision", 0) != 0) return NULL;
	const tbc_value *s = r->inputs[1], *z = r->n_inputs > 2 ? r->inputs[2] : NULL;
	if (s->type.dtype != TBC_DT_F32 || numel_static(&s->type) != 1 || (z && numel_static(&z->type) != 1)) return NULL;
	if (*relu) { /* the clamp at y_zp is the Relu only where y_zp is the least value */
		const tbc_tensor *zt = z && z->kind == TBC_VALUE_CONST ? z->constant : NULL;
		int64_t least = r->outputs[0]->type.dtype == TBC_DT_I8 ? -128 : 0;
		int64_t zv = zt ? tbc_load_i64(zt->dtype, zt->data, 0) : z ? least + 1 : 0;
		if (zv != least) return NULL;
	}
	return r;
}

/* The int32 bias B' of a Conv's bias b (NULL: none) with scale x_scale *
 * w_scale (constants); false when b's form is not one this pass takes. */
static bool quantized_bias(qdq *Q, tbc_graph *g, tbc_value *b, const dq_form *x, const dq_form *w, int64_t M, const char *name,
			   tbc_value **out) {
	*out = NULL;
	if (!b) return true;
	dq_form bf;
	const tbc_tensor *bq = NULL, *bs = NULL, *bfl = NULL;
	if (match_dq(b, TBC_DT_I32, 0, &bf)) {
		if (bf.q->kind != TBC_VALUE_CONST || bf.scale->kind != TBC_VALUE_CONST) return false;
		if (bf.zp) {
			const tbc_tensor *z = bf.zp->kind == TBC_VALUE_CONST ? bf.zp->constant : NULL;
			for (int64_t i = 0; z && i < z->numel; i++)
				if (tbc_load_i64(z->dtype, z->data, (size_t)i) != 0) z = NULL;
			if (!z) return false;
		}
		bq = bf.q->constant, bs = bf.scale->constant;
	} else if (b->kind == TBC_VALUE_CONST && b->type.dtype == TBC_DT_F32) {
		bfl = b->constant;
	} else {
		return false;
	}
	const tbc_tensor *t = bq ? bq : bfl;
	if (t->rank != 1 || t->numel != M) return false;
	const tbc_tensor *xs = x->scale->kind == TBC_VALUE_CONST ? x->scale->constant : NULL;
	const tbc_tensor *ws = w->scale->kind == TBC_VALUE_CONST ? w->scale->constant : NULL;
	/* The product is what the bias is divided by: without constant scales
	 * only an int32 bias already in it can be kept, and that cannot be
	 * told either. */
	if (!xs || !ws) return false;
	int64_t dims[1] = {M};
	tbc_tensor *q = tbc_tensor_create(TBC_DT_I32, 1, dims);
	if (!q) return Q->oom = true, false;
	bool kept = bq != NULL;
	for (int64_t m = 0; m < M; m++) {
		float scale = (float)tbc_load_f64(xs->dtype, xs->data, 0) *
			      (float)tbc_load_f64(ws->dtype, ws->data, (size_t)(ws->numel == 1 ? 0 : m));
		double v;
		if (bq && (float)tbc_load_f64(bs->dtype, bs->data, (size_t)(bs->numel == 1 ? 0 : m)) == scale) {
			v = (double)tbc_load_i64(bq->dtype, bq->data, (size_t)m);
		} else {
			kept = false;
			float bv = bq ? (float)((float)tbc_load_i64(bq->dtype, bq->data, (size_t)m) *
						(float)tbc_load_f64(bs->dtype, bs->data, (size_t)(bs->numel == 1 ? 0 : m)))
				      : (float)tbc_load_f64(bfl->dtype, bfl->data, (size_t)m);
			v = nearbyint((double)(bv / scale)); /* round half to even: the default rounding mode */
			v = v < -2147483648.0 ? -2147483648.0 : v > 2147483647.0 ? 2147483647.0 : v;
		}
		tbc_store_i64(TBC_DT_I32, q->data, (size_t)m, (int64_t)v);
	}
	char nm[256];
	snprintf(nm, sizeof nm, "%s_bias", name);
	*out = kept ? bf.q : tbc_graph_add_const(g, nm, q);
	tbc_tensor_destroy(q);
	if (!*out) Q->oom = true;
	return *out != NULL;
}

/* Removes op when nobody reads its result any more. */
static void drop_if_unread(qdq *Q, tbc_op *op) {
	if (op && op->outputs[0] && tbc_value_use_count(op->outputs[0]) == 0 && !pass_is_returned(Q->m, op->outputs[0]))
		pass_remove_op(op);
}

/* Puts new op `code` of inputs in[0..n) in the place of QuantizeLinear q
 * (its result's type and name), removing q, the Relu (if any), the
 * contraction c and the DequantizeLinears nobody reads after. */
static bool replace(qdq *Q, tbc_op *c, tbc_op *relu, tbc_op *q, tbc_opcode code, int n, tbc_value *const *in,
		    tbc_op *const *dqs) {
	tbc_graph *g = q->graph;
	tbc_op *op = tbc_op_new(g, code, c->name, n, in, 1);
	if (!op) return Q->oom = true, false;
	pass_unlink(op);
	pass_insert_before(op, q);
	for (int i = 0; code == TBC_OP_QLinearConv && i < c->n_attrs; i++) {
		tbc_attr *a = tbc_op_add_attr(op, c->attrs[i].name, c->attrs[i].kind);
		if (!a) return Q->oom = true, false;
		*a = c->attrs[i];
	}
	tbc_value *y = q->outputs[0];
	if (!tbc_infer_op(&Q->cx, op) || !pass_same_type(&op->outputs[0]->type, &y->type)) {
		pass_remove_op(op); /* inference disagrees: leave the model as it is */
		return false;
	}
	op->outputs[0]->name = y->name;
	pass_replace_value(Q->m, y, op->outputs[0]);
	pass_remove_op(q);
	if (relu) pass_remove_op(relu);
	pass_remove_op(c);
	for (int i = 0; i < 3; i++) drop_if_unread(Q, dqs[i]);
	return true;
}

/* The zero point of a DequantizeLinear form, or a constant 0 of q's type. */
static tbc_value *zp_or_zero(qdq *Q, tbc_graph *g, const dq_form *f) {
	return f->zp ? f->zp : const_scalar(Q, g, f->q->type.dtype, 0);
}

static void fuse_conv(qdq *Q, tbc_graph *g, tbc_op *c) {
	dq_form x, w;
	tbc_op *relu, *q;
	if (c->n_inputs < 2 || !c->outputs[0] || c->outputs[0]->type.dtype != TBC_DT_F32) return;
	if (!match_dq(c->inputs[0], TBC_DT_UNDEFINED, -1, &x) || !match_dq(c->inputs[1], TBC_DT_UNDEFINED, 0, &w)) return;
	if (w.q->kind != TBC_VALUE_CONST || !weight_zp_ok(w.q, w.zp) || w.q->type.rank < 3 || w.q->type.dims[0].sym) return;
	if (!(q = match_q(Q, c->outputs[0], &relu))) return;
	tbc_value *b = NULL;
	tbc_value *bias = c->n_inputs > 2 ? c->inputs[2] : NULL;
	char buf[200];
	const char *yname = tbc_value_display_name(q->outputs[0], buf, sizeof buf);
	if (!quantized_bias(Q, g, bias, &x, &w, w.q->type.dims[0].size, yname, &b)) return;
	tbc_value *yz = q->n_inputs > 2 ? q->inputs[2] : const_scalar(Q, g, q->outputs[0]->type.dtype, 0);
	tbc_value *in[9] = {x.q, x.scale, zp_or_zero(Q, g, &x), w.q, w.scale, zp_or_zero(Q, g, &w), q->inputs[1], yz, b};
	if (Q->oom) return;
	tbc_op *dqs[3] = {x.op, w.op, bias ? bias->def : NULL};
	replace(Q, c, relu, q, TBC_OP_QLinearConv, b ? 9 : 8, in, dqs);
}

static void fuse_matmul(qdq *Q, tbc_graph *g, tbc_op *c) {
	dq_form a, b;
	tbc_op *relu, *q;
	if (!c->outputs[0] || c->outputs[0]->type.dtype != TBC_DT_F32) return;
	if (!match_dq(c->inputs[0], TBC_DT_UNDEFINED, -1, &a) || !match_dq(c->inputs[1], TBC_DT_UNDEFINED, 1, &b)) return;
	if (b.q->kind != TBC_VALUE_CONST || b.q->type.rank != 2 || !weight_zp_ok(b.q, b.zp) || a.q->type.rank < 1) return;
	if (!(q = match_q(Q, c->outputs[0], &relu))) return;
	tbc_value *yz = q->n_inputs > 2 ? q->inputs[2] : const_scalar(Q, g, q->outputs[0]->type.dtype, 0);
	tbc_value *in[8] = {a.q, a.scale, zp_or_zero(Q, g, &a), b.q, b.scale, zp_or_zero(Q, g, &b), q->inputs[1], yz};
	if (Q->oom) return;
	tbc_op *dqs[3] = {a.op, b.op, NULL};
	replace(Q, c, relu, q, TBC_OP_QLinearMatMul, 8, in, dqs);
}

/* The contractions first: a rewrite removes ops around the one it
 * rewrites (never another Conv or MatMul). */
static bool fuse_graph(tbc_graph *g, void *ctx) {
	qdq *Q = ctx;
	size_t n = 0, i = 0;
	for (tbc_op *op = g->first; op; op = op->next) n += op->code == TBC_OP_Conv || op->code == TBC_OP_MatMul;
	if (!n) return true;
	tbc_op **todo = tbc_arena_array(Q->m->arena, n, sizeof *todo);
	if (!todo) return Q->oom = true, false;
	for (tbc_op *op = g->first; op; op = op->next)
		if (op->code == TBC_OP_Conv || op->code == TBC_OP_MatMul) todo[i++] = op;
	for (i = 0; i < n && !Q->oom; i++) {
		if (todo[i]->code == TBC_OP_Conv) fuse_conv(Q, g, todo[i]);
		else fuse_matmul(Q, g, todo[i]);
	}
	return !Q->oom;
}

bool tbc_pass_qdq_fusion(tbc_module *m, tbc_diags *d) {
	tbc_diags *scratch = tbc_diags_create();
	if (!scratch) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory in the QDQ fusion pass");
		return false;
	}
	qdq Q = {.m = m, .cx = {.module = m, .diags = scratch}};
	bool ok = pass_each_graph(m->main, fuse_graph, &Q) && !Q.oom;
	tbc_diags_destroy(scratch);
	if (!ok) tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory in the QDQ fusion pass");
	return ok;
}
