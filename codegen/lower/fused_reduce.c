/* Fused regions that hold a reduction (passes/fusion.c: an elementwise
 * prologue computing the input of one Reduce*, the reduction, an elementwise
 * epilogue on its result) -> one kernel:
 *
 *   for each output point (parallel over the kept dims) {
 *     acc = init
 *     for the reduced dims (sequential) { acc = acc (+) prologue(x...) }
 *     result = finish(acc); outputs = epilogue(result, ...)
 *   }
 *
 * The prologue is computed inline at each input point (its values never
 * reach memory unless the region outputs them: then they are stored from the
 * reduction loop, which visits every input point exactly once); the epilogue
 * runs once per output point.  Scalar definitions come from the elementwise
 * table (lower_ew_expr); the reduction from rs_reduce (codegen/lower/reduce.c), so a
 * fused reduction computes exactly what the unfused one does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/lower/lower_reduce.h"

typedef struct fr {
	lower_cx *cx;
	lk *l;
	rspace *s;
	const tbc_op *op;      /* the Fused op */
	const tbc_graph *body;
	const tbc_op *red;     /* the Reduce* in the body */
	bool *post;            /* by value id: depends on the reduction's result */
	kir_expr **pre_memo, **post_memo;
	kir_expr *result;
	int out_map[TBC_MAX_RANK], out_rank; /* the result's dims as space dims */
	int *out_buf;          /* program buffer of each Fused output */
	bool failed;
} fr;

static bool fail(fr *f, const char *why) {
	if (!f->failed) lower_error(f->cx, f->op, "a fused reduction %s has no lowering yet", why);
	f->failed = true;
	return false;
}

static bool same_dims(const tbc_type *a, const tbc_type *b) { return tbc_type_same_dims(a, b); }

/* A body input or constant read at the current point of frame (n, map). */
static kir_expr *leaf(fr *f, const tbc_value *v, int n, const int *map) {
	kir_kernel *k = f->l->k;
	const tbc_value *src = v;
	if (v->kind == TBC_VALUE_INPUT) {
		src = NULL;
		for (int i = 0; i < f->body->n_inputs; i++)
			if (f->body->inputs[i] == v) src = f->op->inputs[i];
		if (!src) return fail(f, "reading a value from outside"), NULL;
	}
	const tbc_tensor *t = src->kind == TBC_VALUE_CONST ? src->constant : NULL;
	tbc_dtype dt = src->type.dtype;
	if (t && t->numel == 1 && (dt == TBC_DT_F32 || dt == TBC_DT_F64))
		return kir_e_float(k, dt, tbc_load_f64(dt, t->data, 0));
	if (t && t->numel == 1 && (tbc_dtype_is_int(dt) || dt == TBC_DT_BOOL))
		return kir_e_int(k, dt, tbc_dtype_is_unsigned(dt) ? (int64_t)tbc_load_u64(dt, t->data, 0)
								   : tbc_load_i64(dt, t->data, 0));
	kir_buffer *b = lk_value(f->l, src);
	if (!b) return NULL;
	return kir_e_load(k, b, rs_index_map(f->s, &src->type, n, map));
}

static kir_expr *value(fr *f, const tbc_value *v, bool post);

static kir_expr *compute(fr *f, const tbc_value *v, bool post) {
	const tbc_op *op = v->def;
	if (!lower_ew_supported(op) || op->n_outputs != 1 || op->n_inputs > 16)
		return fail(f, "holding this op"), NULL;
	kir_expr *x[16] = {0};
	for (int i = 0; i < op->n_inputs; i++)
		if (op->inputs[i] && !(x[i] = value(f, op->inputs[i], post))) return NULL;
	kir_expr *e = lower_ew_expr(f->cx, f->l->k, op, x);
	if (!e) {
		f->failed = true;
		return NULL;
	}
	if (tbc_value_use_count(v) > 1) {
		char name[32];
		snprintf(name, sizeof name, "v%u", v->id);
		e = rs_local(f->s, name, e);
	}
	return e;
}

/* v's value at the current input point (pre) or output point (post). */
static kir_expr *value(fr *f, const tbc_value *v, bool post) {
	kir_expr **memo = post ? f->post_memo : f->pre_memo;
	if (memo[v->id]) return memo[v->id];
	kir_expr *e;
	if (v->kind != TBC_VALUE_RESULT) {
		int map[TBC_MAX_RANK];
		for (int d = 0; d < f->s->rank; d++) map[d] = d;
		e = post ? leaf(f, v, f->out_rank, f->out_map) : leaf(f, v, f->s->rank, map);
	} else if (v == f->red->outputs[0]) {
		e = post ? f->result : (fail(f, "reading its result before it is known"), NULL);
	} else if (f->post[v->id] != post) {
		e = (fail(f, "mixing values before and after the reduction"), NULL);
	} else {
		e = compute(f, v, post);
	}
	memo[v->id] = e;
	return e;
}

static bool is_pre_output(fr *f, int i) {
	const tbc_value *v = f->body->outputs[i];
	return v->kind == TBC_VALUE_RESULT && !f->post[v->id] && v != f->red->outputs[0];
}

/* e held in a variable set here: its loads happen before the statements
 * that follow. */
static kir_expr *now(rspace *s, kir_expr *e, const char *name) {
	kir_var *t = kir_var_new(s->k, name, e->type);
	if (!t) return NULL;
	kir_block_add(s->k, &s->inner, kir_s_set(s->k, t, e));
	return kir_e_var(s->k, t);
}

/* The reduction's input at the current point; in the first pass the region's
 * outputs computed before the reduction are stored too.  Every value is
 * computed before any store: memory planning may write an output over an
 * input that dies here (passes/memplan.c), which the point reads first. */
static kir_expr *elem(void *p, rspace *s, bool first) {
	fr *f = p;
	memset(f->pre_memo, 0, ((size_t)f->cx->m->n_values + 1) * sizeof *f->pre_memo);
	kir_expr *x = value(f, f->red->inputs[0], false);
	if (!first || !x) return x;
	int n = 0;
	for (int i = 0; i < f->body->n_outputs; i++) n += f->out_buf[i] >= 0 && is_pre_output(f, i);
	if (!n) return x;
	kir_expr **vals = calloc((size_t)f->body->n_outputs + 1, sizeof *vals);
	if (!vals) return fail(f, "(out of memory)"), NULL;
	x = now(s, x, "x");
	for (int i = 0; x && i < f->body->n_outputs; i++) {
		if (f->out_buf[i] < 0 || !is_pre_output(f, i)) continue;
		const tbc_value *ov = f->op->outputs[i];
		if (!same_dims(&ov->type, &f->red->inputs[0]->type)) {
			free(vals);
			return fail(f, "with an output of another shape"), NULL;
		}
		kir_expr *v = value(f, f->body->outputs[i], false);
		vals[i] = v ? now(s, kir_e_cast(s->k, ov->type.dtype, v), "o") : NULL;
		if (!vals[i]) x = NULL;
	}
	for (int i = 0; x && i < f->body->n_outputs; i++) {
		if (!vals[i]) continue;
		kir_buffer *b = lk_buf(f->l, f->out_buf[i]);
		if (!b) x = NULL;
		else kir_block_add(s->k, &s->inner, kir_s_store(s->k, b, rs_linear(s), vals[i]));
	}
	free(vals);
	return x;
}

lower_result lower_fused_reduce(lower_cx *cx, const tbc_op *op) {
	const tbc_graph *body = tbc_attr_graph(op, "body");
	if (!body) return LOWER_NOT_MINE;
	const tbc_op *red = NULL;
	int n_red = 0;
	rkind kind = RK_SUM;
	for (const tbc_op *o = body->first; o; o = o->next) {
		rkind rk;
		if (rk_of(o->code, &rk)) red = o, kind = rk, n_red++;
	}
	if (!red) return LOWER_NOT_MINE;
	fr f = {.cx = cx, .op = op, .body = body, .red = red};
	if (n_red > 1 || body->n_outputs != op->n_outputs) return fail(&f, "with several reductions"), LOWER_FAILED;
	const tbc_value *x = red->inputs[0];
	bool mask[TBC_MAX_RANK];
	if (x->type.rank < 0 || !rs_reduce_mask(red, x->type.rank, mask))
		return fail(&f, "with axes known only at run time"), LOWER_FAILED;
	size_t nv = (size_t)cx->m->n_values + 1;
	f.post = calloc(nv, sizeof *f.post);
	f.pre_memo = calloc(nv, sizeof *f.pre_memo);
	f.post_memo = calloc(nv, sizeof *f.post_memo);
	f.out_buf = calloc((size_t)op->n_outputs + 1, sizeof *f.out_buf);
	lk l;
	rspace s;
	bool ok = f.post && f.pre_memo && f.post_memo && f.out_buf;
	if (ok) {
		f.post[red->outputs[0]->id] = true;
		for (const tbc_op *o = body->first; o; o = o->next)
			for (int i = 0; i < o->n_inputs; i++)
				if (o->inputs[i] && f.post[o->inputs[i]->id])
					for (int j = 0; j < o->n_outputs; j++)
						if (o->outputs[j]) f.post[o->outputs[j]->id] = true;
		for (int i = 0; i < op->n_outputs; i++) {
			f.out_buf[i] = -1;
			if (!op->outputs[i]) continue;
			if (body->outputs[i]->kind != TBC_VALUE_RESULT) {
				ok = fail(&f, "passing a value through");
				break;
			}
			if ((f.out_buf[i] = lower_result_buf(cx, op->outputs[i])) < 0) ok = false;
		}
	}
	ok = ok && lk_begin(&l, cx, "fused_reduce") && rs_begin_type(&l, &s, &x->type, mask);
	if (ok) {
		f.l = &l;
		f.s = &s;
		bool keep = tbc_attr_int(red, "keepdims", 1) != 0;
		for (int d = 0; d < x->type.rank; d++) {
			if (!mask[d]) f.out_map[f.out_rank++] = d;
			else if (keep) f.out_map[f.out_rank++] = -1;
		}
		rs_group(&s); /* devices: a work-group per output point of a long reduction */
		kir_expr *r = rs_reduce(&s, red, kind, x->type.dtype, elem, &f);
		if (!r || f.failed) ok = false;
		if (ok) f.result = rs_local(&s, "r", r);
		for (int i = 0; ok && i < op->n_outputs; i++) {
			if (f.out_buf[i] < 0 || is_pre_output(&f, i)) continue;
			const tbc_value *ov = op->outputs[i];
			if (!same_dims(&ov->type, &red->outputs[0]->type)) {
				ok = fail(&f, "with an output of another shape");
				break;
			}
			kir_expr *v = value(&f, body->outputs[i], true);
			kir_buffer *b = v ? lk_buf(&l, f.out_buf[i]) : NULL;
			if (!b) {
				ok = false;
				break;
			}
			rs_store(&s, b, rs_out_linear(&s), kir_e_cast(l.k, ov->type.dtype, v));
		}
		ok = ok && lk_end(&l, rs_finish(&s));
	}
	free(f.post);
	free(f.pre_memo);
	free(f.post_memo);
	free(f.out_buf);
	return ok ? LOWER_OK : LOWER_FAILED;
}
