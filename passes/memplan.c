/* Memory planning: one arena for all intermediates.
 *
 * Does: gives every intermediate (an op result that is not a model output)
 * a byte offset (tbc_value.mem_offset) in one arena, 64-byte aligned, so
 * that values live at the same time never overlap and a value reuses the
 * memory of values dead before it starts.
 *  - Symbolic dims: a value's size is a static number of bytes times a
 *    product of symbols (batch N: 602112 * N).  Values of one product share
 *    a part of the arena, planned with their static factors: disjoint there,
 *    they stay disjoint for every value of the symbols (passes.h describes
 *    the layout).  Values sized by a symbol no model input carries (computed
 *    while running) are not placed: code generation allocates them.
 *  - Lifetimes: ops of the main graph are numbered in order; a value lives
 *    from its defining op to its last reader (a reader inside a subgraph
 *    counts at the op owning the subgraph).  Values inside control-flow
 *    bodies live for the whole of their owner op (a body may run many times).
 *    Nothing inside a Fused body is placed: lowering keeps those in registers.
 *  - In place: an elementwise op (or a Fused op without a reduction, or a
 *    result of a fused reduction's prologue) writes its result over an
 *    input that dies at that op when both have the same shape and element
 *    size; the two share one buffer.
 *  - Views: the result of Identity, Reshape, Flatten, Squeeze or Unsqueeze
 *    shares its input's buffer (lowering aliases it), which then lives as
 *    long as both.
 *  - Placement: in each part, buffers in some order; each goes into the
 *    smallest gap between the buffers it overlaps in time (best fit), else
 *    above them.  Four orders are tried (largest first, largest bytes x
 *    ops, longest lived, earliest) and the smallest arena kept.
 * Requires: a verified, inferred module, after the last pass that changes it.
 * Guarantees: tbc_memplan_check holds; model inputs, outputs and constants
 * have mem_offset -1. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "passes/util.h"

typedef struct mono {
	int n;
	const char *syms[TBC_MAX_RANK];
} mono;

typedef struct life {
	tbc_value *v;
	int start, end;
	int64_t bytes; /* unaligned, per unit of the part's product */
	int part;
	int buf;       /* buffer index, or -1 */
} life;

typedef struct buffer {
	int start, end, part;
	int64_t size; /* aligned */
	int64_t offset;
} buffer;

typedef struct plan {
	const tbc_module *m;
	int n_ops;
	tbc_op **ops;
	pass_ptrmap pos;
	int *index; /* value id -> index in lives, -1 */
	life *lives;
	int n_lives;
	mono *parts;
	int n_parts;
	int64_t n_unplaced;
} plan;

static int64_t align_up(int64_t n) {
	return (n + TBC_ARENA_ALIGN - 1) / TBC_ARENA_ALIGN * TBC_ARENA_ALIGN;
}

static int top_pos(const plan *P, tbc_op *op) {
	tbc_op *top = pass_top_op(P->m->main, op);
	return top ? pass_map_get(&P->pos, top) : -1;
}

/* v's size as bytes times a product of symbols (sorted); false when the
 * rank is unknown or the static factor overflows. */
static bool value_mono(const tbc_value *v, mono *mo, int64_t *bytes) {
	const tbc_type *t = &v->type;
	int64_t b = (int64_t)tbc_dtype_size(t->dtype);
	if (t->rank < 0 || b <= 0) return false;
	mo->n = 0;
	for (int i = 0; i < t->rank; i++) {
		if (t->dims[i].sym) {
			int k = mo->n++;
			while (k > 0 && strcmp(mo->syms[k - 1], t->dims[i].sym) > 0) {
				mo->syms[k] = mo->syms[k - 1];
				k--;
			}
			mo->syms[k] = t->dims[i].sym;
		} else if (t->dims[i].size != 0 && b > TBC_MAX_TENSOR_BYTES / t->dims[i].size) {
			return false;
		} else {
			b *= t->dims[i].size;
		}
	}
	*bytes = b;
	return true;
}

static bool mono_eq(const mono *a, const mono *b) {
	if (a->n != b->n) return false;
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->syms[i], b->syms[i])) return false;
	return true;
}

/* Is the symbol's value known before the run starts (a model input has it)? */
static bool sym_known(const tbc_module *m, const char *sym) {
	for (int i = 0; i < m->main->n_inputs; i++) {
		const tbc_type *t = &m->main->inputs[i]->type;
		for (int k = 0; k < t->rank; k++)
			if (t->dims[k].sym && !strcmp(t->dims[k].sym, sym)) return true;
	}
	return false;
}

/* Index of v's part (added when new); -1 when v cannot be placed. */
static int part_for(plan *P, const tbc_value *v, int64_t *bytes) {
	mono mo;
	if (!value_mono(v, &mo, bytes)) return -1;
	for (int i = 0; i < mo.n; i++)
		if (!sym_known(P->m, mo.syms[i])) return -1;
	for (int i = 0; i < P->n_parts; i++)
		if (mono_eq(&P->parts[i], &mo)) return i;
	P->parts[P->n_parts] = mo;
	return P->n_parts++;
}

/* Values of g (a body of the op at pos, or main when pos < 0) that get a
 * place; bodies nested in them too. */
static bool collect_graph(plan *P, const tbc_graph *g, int pos) {
	int p = pos;
	for (tbc_op *op = g->first; op; op = op->next) {
		if (pos < 0) p = pass_map_get(&P->pos, op);
		for (int i = 0; i < op->n_outputs; i++) {
			tbc_value *v = op->outputs[i];
			if (!v || pass_is_model_output(P->m, v)) continue;
			int64_t bytes = 0;
			int part = part_for(P, v, &bytes);
			if (part < 0) {
				P->n_unplaced++;
				continue;
			}
			P->index[v->id] = P->n_lives;
			P->lives[P->n_lives++] = (life){v, p, p, bytes, part, -1};
		}
		if (op->code == TBC_OP_Fused) continue;
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++)
				if (!collect_graph(P, at->graphs[k], p)) return false;
		}
	}
	return true;
}

/* Readers keep a value alive; so does a body returning it (its owner op
 * copies it out). */
static void extend_by_returns(plan *P, const tbc_graph *g) {
	for (const tbc_op *op = g->first; op; op = op->next)
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++) {
				const tbc_graph *body = at->graphs[k];
				int owner = top_pos(P, (tbc_op *)op);
				for (int i = 0; i < body->n_outputs; i++) {
					int li = P->index[body->outputs[i]->id];
					if (li >= 0 && P->lives[li].end < owner) P->lives[li].end = owner;
				}
				extend_by_returns(P, body);
			}
		}
}

static bool analyse(plan *P, const tbc_module *m) {
	memset(P, 0, sizeof *P);
	P->m = m;
	for (tbc_op *op = m->main->first; op; op = op->next) P->n_ops++;
	P->ops = malloc(((size_t)P->n_ops + 1) * sizeof *P->ops);
	P->index = malloc(((size_t)m->n_values + 1) * sizeof *P->index);
	P->lives = malloc(((size_t)m->n_values + 1) * sizeof *P->lives);
	P->parts = malloc(((size_t)m->n_values + 1) * sizeof *P->parts);
	if (!P->ops || !P->index || !P->lives || !P->parts || !pass_map_init(&P->pos, (size_t)P->n_ops + 1)) return false;
	int p = 0;
	for (tbc_op *op = m->main->first; op; op = op->next) {
		P->ops[p] = op;
		pass_map_put(&P->pos, op, p++);
	}
	for (uint32_t i = 0; i < m->n_values; i++) P->index[i] = -1;
	P->parts[P->n_parts++] = (mono){0, {NULL}}; /* part 0: static sizes */
	if (!collect_graph(P, m->main, -1)) return false;
	for (int i = 0; i < P->n_lives; i++) {
		life *l = &P->lives[i];
		for (const tbc_use *u = l->v->uses; u; u = u->next) {
			int q = top_pos(P, u->op);
			if (q > l->end) l->end = q;
		}
	}
	extend_by_returns(P, m->main);
	return true;
}

static void release(plan *P) {
	free(P->ops);
	free(P->index);
	free(P->lives);
	free(P->parts);
	pass_map_free(&P->pos);
}

static bool has_reduction(const tbc_graph *body) {
	for (const tbc_op *o = body->first; o; o = o->next)
		if (tbc_ops[o->code].category != TBC_CAT_ELEMENTWISE) return true;
	return false;
}

static bool same_shape(const tbc_value *a, const tbc_value *b) { return tbc_type_same_dims(&a->type, &b->type); }

/* A fused reduction (one Reduce* with elementwise ops before and after it)
 * whose result out has the shape the reduction reads (and not the shape it
 * makes): out is a value of
 * the prologue, stored from the reduction loop, which visits each input
 * point once and reads the inputs there before storing
 * (codegen/lower/fused_reduce.c); so it may go over an input of its shape. */
static bool prologue_output(const tbc_graph *body, const tbc_value *out) {
	const tbc_op *red = NULL;
	for (const tbc_op *o = body->first; o; o = o->next) {
		if (tbc_ops[o->code].category == TBC_CAT_ELEMENTWISE) continue;
		if (red || tbc_ops[o->code].category != TBC_CAT_REDUCTION || o->n_inputs < 1 || !o->inputs[0]) return false;
		red = o;
	}
	/* Not of the result's shape too (reduced dims of 1): an epilogue value
	 * could be out then, stored after the loop read the inputs. */
	return red && red->outputs[0] && same_shape(red->inputs[0], out) && !same_shape(red->outputs[0], out);
}

/* May op write out over in?  Each element of out is then computed from the
 * element of in at the same index only, read before it is written. */
static bool in_place_ok(const tbc_op *op, const tbc_value *in, const tbc_value *out) {
	if (op->code == TBC_OP_Fused) {
		const tbc_graph *body = tbc_attr_graph(op, "body");
		if (!body || (has_reduction(body) && !prologue_output(body, out))) return false;
	} else if (tbc_ops[op->code].category != TBC_CAT_ELEMENTWISE || op->code == TBC_OP_Dropout ||
		   op->n_outputs != 1) {
		return false;
	}
	return tbc_dtype_size(in->type.dtype) == tbc_dtype_size(out->type.dtype) && same_shape(in, out);
}

static int by_size_desc(const void *a, const void *b) {
	const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
	if (x->size != y->size) return x->size > y->size ? -1 : 1;
	return x->start - y->start;
}

static int by_offset(const void *a, const void *b) {
	const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Ops whose result lowering makes a view of their input's storage
 * (codegen/lower/lower.c, lower_alias): the same bytes, read in another
 * shape. */
bool tbc_memplan_is_view(const tbc_op *op) {
	switch (op->code) {
	case TBC_OP_Identity:
	case TBC_OP_Reshape:
	case TBC_OP_Flatten:
	case TBC_OP_Squeeze:
	case TBC_OP_Unsqueeze: return true;
	default: return false;
	}
}

/* The life whose buffer a view result l shares: its input's, when that is
 * placed in the same part with the same bytes; else NULL. */
static const life *view_source(const plan *P, const life *l) {
	const tbc_op *def = l->v->def;
	if (def->graph != P->m->main || !tbc_memplan_is_view(def) || def->n_inputs < 1 || !def->inputs[0]) return NULL;
	int li = P->index[def->inputs[0]->id];
	if (li < 0) return NULL;
	const life *src = &P->lives[li];
	return src->bytes == l->bytes && src->part == l->part ? src : NULL;
}

/* Buffers in definition order, in-place results joining their input's,
 * views sharing their input's (sets each life's buf; bufs has room for
 * n_lives).  Returns how many. */
static int assign_buffers(plan *P, buffer *bufs) {
	const tbc_module *m = P->m;
	int n_bufs = 0;
	for (int i = 0; i < P->n_lives; i++) {
		life *l = &P->lives[i];
		const tbc_op *def = l->v->def;
		bool top = def->graph == m->main;
		/* A view lives in its input's buffer, which lives as long as both
		 * (lowering aliases it; an in-place writer later sees the buffer
		 * still read and keeps off it). */
		const life *vs = view_source(P, l);
		if (vs && vs->buf >= 0) {
			l->buf = vs->buf;
			if (bufs[vs->buf].end < l->end) bufs[vs->buf].end = l->end;
			continue;
		}
		for (int k = 0; top && k < def->n_inputs && l->buf < 0; k++) {
			const tbc_value *in = def->inputs[k];
			int li = in ? P->index[in->id] : -1;
			if (li < 0 || li >= i) continue;
			life *src = &P->lives[li];
			buffer *b = src->buf >= 0 ? &bufs[src->buf] : NULL;
			/* The input dies here and no other result took its buffer. */
			if (!b || src->end != l->start || b->end != l->start || pass_is_returned(m, in)) continue;
			if (l->bytes != src->bytes || !in_place_ok(def, in, l->v)) continue;
			bool taken = false;
			for (int o = 0; o < def->n_outputs; o++)
				if (def->outputs[o] && def->outputs[o] != l->v && P->index[def->outputs[o]->id] >= 0 &&
				    P->lives[P->index[def->outputs[o]->id]].buf == src->buf)
					taken = true;
			if (taken) continue;
			l->buf = src->buf;
			b->end = l->end;
		}
		if (l->buf < 0) {
			l->buf = n_bufs;
			bufs[n_bufs++] = (buffer){l->start, l->end, l->part, align_up(l->bytes), -1};
		}
	}
	return n_bufs;
}

static int64_t span(const buffer *b) { return (int64_t)(b->end - b->start + 1); }

/* Orders tried for placement; the one giving the smallest arena wins. */
static int by_area_desc(const void *a, const void *b) {
	const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
	int64_t ax = x->size * span(x), ay = y->size * span(y);
	if (ax != ay) return ax > ay ? -1 : 1;
	return by_size_desc(a, b);
}

static int by_span_desc(const void *a, const void *b) {
	const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
	if (span(x) != span(y)) return span(x) > span(y) ? -1 : 1;
	return by_size_desc(a, b);
}

static int by_start(const void *a, const void *b) {
	const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
	if (x->start != y->start) return x->start - y->start;
	return by_size_desc(a, b);
}

/* Places the buffers in the given order, each into the smallest gap
 * between the buffers it overlaps in time (best fit), else above them;
 * returns the arena (the parts' sizes summed).  near has room for n. */
static int64_t place(buffer **order, int n, buffer **near, int n_parts, int64_t *part_top) {
	for (int j = 0; j < n_parts; j++) part_top[j] = 0;
	for (int i = 0; i < n; i++) {
		buffer *b = order[i];
		int n_near = 0;
		for (int k = 0; k < i; k++)
			if (order[k]->part == b->part && order[k]->start <= b->end && b->start <= order[k]->end &&
			    order[k]->size > 0)
				near[n_near++] = order[k];
		qsort(near, (size_t)n_near, sizeof *near, by_offset);
		int64_t top = 0, best = -1, best_gap = INT64_MAX;
		for (int k = 0; k < n_near; k++) {
			int64_t gap = near[k]->offset - top;
			if (gap >= b->size && gap < best_gap) {
				best_gap = gap;
				best = top;
			}
			if (near[k]->offset + near[k]->size > top) top = near[k]->offset + near[k]->size;
		}
		b->offset = best >= 0 ? best : top;
		if (b->offset + b->size > part_top[b->part]) part_top[b->part] = b->offset + b->size;
	}
	int64_t total = 0;
	for (int j = 0; j < n_parts; j++) total += part_top[j];
	return total;
}

bool tbc_pass_memplan(tbc_module *m, tbc_diags *d) {
	plan P;
	buffer *bufs = NULL;
	buffer **order = NULL, **near = NULL;
	int64_t *best_offset = NULL, *part_top = NULL;
	bool ok = analyse(&P, m);
	/* Clear any earlier plan. */
	for (int i = 0; ok && i < P.n_lives; i++) P.lives[i].v->mem_offset = -1;
	if (ok) {
		bufs = calloc((size_t)P.n_lives + 1, sizeof *bufs);
		order = calloc((size_t)P.n_lives + 1, sizeof *order);
		near = calloc((size_t)P.n_lives + 1, sizeof *near);
		best_offset = calloc((size_t)P.n_lives + 1, sizeof *best_offset);
		part_top = calloc((size_t)P.n_parts + 1, sizeof *part_top);
		ok = bufs && order && near && best_offset && part_top;
	}
	int n_bufs = ok ? assign_buffers(&P, bufs) : 0;
	/* Largest first is the classic; a long-lived buffer first, or the
	 * largest area of bytes times ops, packs some schedules tighter (a
	 * view keeps its input's buffer alive longer).  Ties keep the first. */
	int (*const orders[])(const void *, const void *) = {by_size_desc, by_area_desc, by_span_desc, by_start};
	int64_t best = INT64_MAX;
	for (size_t o = 0; ok && o < sizeof orders / sizeof *orders; o++) {
		for (int i = 0; i < n_bufs; i++) order[i] = &bufs[i];
		qsort(order, (size_t)n_bufs, sizeof *order, orders[o]);
		int64_t total = place(order, n_bufs, near, P.n_parts, part_top);
		if (total < best) {
			best = total;
			for (int i = 0; i < n_bufs; i++) best_offset[i] = bufs[i].offset;
		}
	}
	for (int i = 0; ok && i < n_bufs; i++) bufs[i].offset = best_offset[i];
	for (int i = 0; ok && i < P.n_lives; i++) P.lives[i].v->mem_offset = bufs[P.lives[i].buf].offset;
	if (!ok) tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory planning memory");
	free(bufs);
	free(order);
	free(near);
	free(best_offset);
	free(part_top);
	release(&P);
	return ok;
}

/* ---- checking and measuring ---- */

/* Is w written in place over v at w's defining op? */
static bool in_place_pair(const plan *P, const life *v, const life *w) {
	const tbc_op *def = w->v->def;
	if (def->graph != P->m->main || v->end != w->start || v->v->mem_offset != w->v->mem_offset ||
	    v->bytes != w->bytes || v->part != w->part)
		return false;
	for (int k = 0; k < def->n_inputs; k++)
		if (def->inputs[k] == v->v) return in_place_ok(def, v->v, w->v);
	return false;
}

/* The value whose storage v reads through views (v itself when none). */
static const life *storage_root(const plan *P, const life *v) {
	for (const life *s; (s = view_source(P, v)) && s->v->mem_offset == v->v->mem_offset;) v = s;
	return v;
}

/* Part sizes from the offsets the module holds. */
static void part_sizes(const plan *P, int64_t *bytes) {
	for (int j = 0; j < P->n_parts; j++) bytes[j] = 0;
	for (int i = 0; i < P->n_lives; i++) {
		const life *l = &P->lives[i];
		if (l->v->mem_offset >= 0 && l->v->mem_offset + align_up(l->bytes) > bytes[l->part])
			bytes[l->part] = l->v->mem_offset + align_up(l->bytes);
	}
}

int tbc_memplan_layout(const tbc_module *m, tbc_memplan_part *out, int max) {
	plan P;
	int n = 0;
	int64_t *bytes = NULL;
	if (analyse(&P, m) && (bytes = malloc(((size_t)P.n_parts + 1) * sizeof *bytes))) {
		part_sizes(&P, bytes);
		n = P.n_parts;
		for (int j = 0; j < n && j < max; j++) {
			out[j].n_syms = P.parts[j].n;
			memcpy(out[j].syms, P.parts[j].syms, sizeof out[j].syms);
			out[j].bytes = bytes[j];
		}
	}
	free(bytes);
	release(&P);
	return n;
}

int tbc_memplan_part_of(const tbc_memplan_part *parts, int n_parts, const tbc_value *v) {
	mono mo;
	int64_t bytes;
	if (v->mem_offset < 0 || !value_mono(v, &mo, &bytes)) return -1;
	for (int j = 0; j < n_parts; j++) {
		bool eq = parts[j].n_syms == mo.n;
		for (int i = 0; eq && i < mo.n; i++) eq = !strcmp(parts[j].syms[i], mo.syms[i]);
		if (eq) return j;
	}
	return -1;
}

int64_t tbc_memplan_arena_bytes(const tbc_module *m) {
	tbc_memplan_part parts[64];
	int n = tbc_memplan_layout(m, parts, 64);
	int64_t total = 0;
	if (n > 64) {
		tbc_memplan_part *many = malloc((size_t)n * sizeof *many);
		if (!many) return -1;
		n = tbc_memplan_layout(m, many, n);
		for (int j = 0; j < n; j++) total += many[j].bytes;
		free(many);
		return total;
	}
	for (int j = 0; j < n; j++) total += parts[j].bytes;
	return total;
}

static bool fail(tbc_diags *d, const tbc_module *m, const tbc_value *v, const char *what, long long a, long long b) {
	char buf[32];
	tbc_diags_add(d, TBC_ERR_INTERNAL, m->path, NULL, NULL, tbc_value_display_name(v, buf, sizeof buf),
		      "memory plan: %s (%lld, %lld)", what, a, b);
	return false;
}

bool tbc_memplan_check(const tbc_module *m, tbc_diags *d) {
	plan P;
	int64_t *bytes = NULL;
	bool ok = analyse(&P, m) && (bytes = malloc(((size_t)P.n_parts + 1) * sizeof *bytes));
	if (!ok) {
		release(&P);
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory");
		return false;
	}
	part_sizes(&P, bytes);
	for (int i = 0; ok && i < P.n_lives; i++) {
		const life *l = &P.lives[i];
		int64_t off = l->v->mem_offset;
		if (off < 0) ok = fail(d, m, l->v, "intermediate has no place (bytes, offset)", (long long)l->bytes, (long long)off);
		else if (off % TBC_ARENA_ALIGN) ok = fail(d, m, l->v, "offset not aligned (offset, alignment)", (long long)off, TBC_ARENA_ALIGN);
		else if (off + l->bytes > bytes[l->part]) ok = fail(d, m, l->v, "ends past its part (end, part bytes)", (long long)(off + l->bytes), (long long)bytes[l->part]);
	}
	for (int i = 0; ok && i < P.n_lives; i++)
		for (int k = i + 1; ok && k < P.n_lives; k++) {
			const life *a = &P.lives[i], *b = &P.lives[k];
			if (a->part != b->part || !a->bytes || !b->bytes || a->start > b->end || b->start > a->end) continue;
			int64_t ao = a->v->mem_offset, bo = b->v->mem_offset;
			if (ao >= bo + b->bytes || bo >= ao + a->bytes) continue;
			if (in_place_pair(&P, a, b) || in_place_pair(&P, b, a)) continue;
			if (ao == bo && storage_root(&P, a) == storage_root(&P, b)) continue;
			char buf[32];
			tbc_diags_add(d, TBC_ERR_INTERNAL, m->path, NULL, NULL, tbc_value_display_name(a->v, buf, sizeof buf),
				      "memory plan: overlaps value %u (ops %d..%d and %d..%d, bytes %lld+%lld and %lld+%lld)",
				      b->v->id, a->start, a->end, b->start, b->end, (long long)ao, (long long)a->bytes,
				      (long long)bo, (long long)b->bytes);
			ok = false;
		}
	/* Nothing else may claim a place: inputs, constants, model outputs,
	 * values sized while running. */
	for (int i = 0; ok && i < m->main->n_inputs; i++)
		if (m->main->inputs[i]->mem_offset != -1) ok = fail(d, m, m->main->inputs[i], "model input has an offset (offset, index)", (long long)m->main->inputs[i]->mem_offset, i);
	for (int i = 0; ok && i < m->main->n_outputs; i++)
		if (m->main->outputs[i]->mem_offset != -1) ok = fail(d, m, m->main->outputs[i], "model output has an offset (offset, index)", (long long)m->main->outputs[i]->mem_offset, i);
	for (int i = 0; ok && i < m->main->n_consts; i++)
		if (m->main->consts[i]->mem_offset != -1) ok = fail(d, m, m->main->consts[i], "constant has an offset (offset, index)", (long long)m->main->consts[i]->mem_offset, i);
	for (const tbc_op *op = m->main->first; ok && op; op = op->next)
		for (int i = 0; ok && i < op->n_outputs; i++) {
			const tbc_value *v = op->outputs[i];
			if (v && v->mem_offset != -1 && P.index[v->id] < 0)
				ok = fail(d, m, v, "value sized while running has an offset (offset, id)", (long long)v->mem_offset, v->id);
		}
	free(bytes);
	release(&P);
	return ok;
}

bool tbc_memplan_measure(const tbc_module *m, tbc_memplan_stats *out, tbc_diags *d) {
	memset(out, 0, sizeof *out);
	plan P;
	int64_t *at = NULL, *bytes = NULL;
	bool ok = analyse(&P, m) && (at = calloc((size_t)P.n_ops + 1, sizeof *at)) &&
		  (bytes = malloc(((size_t)P.n_parts + 1) * sizeof *bytes));
	if (!ok) {
		free(at);
		release(&P);
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory");
		return false;
	}
	out->n_unplaced = P.n_unplaced;
	out->n_parts = P.n_parts;
	part_sizes(&P, bytes);
	for (int j = 0; j < P.n_parts; j++) out->arena_bytes += bytes[j];
	for (int i = 0; i < P.n_lives; i++) {
		const life *l = &P.lives[i];
		if (l->v->mem_offset < 0) continue;
		out->n_placed++;
		out->total_bytes += l->bytes;
		/* A result written in place over an input is one buffer with it;
		 * so is a view with the value it views. */
		bool shared = false;
		const tbc_op *def = l->v->def;
		for (int k = 0; k < def->n_inputs && !shared; k++) {
			int li = def->inputs[k] ? P.index[def->inputs[k]->id] : -1;
			if (li >= 0 && in_place_pair(&P, &P.lives[li], l)) shared = true;
		}
		if (shared) out->n_in_place++;
		const life *root = storage_root(&P, l);
		if (root != l) {
			/* Counted where it outlives the storage it views, once. */
			int from = root->end + 1;
			for (int j = 0; j < i; j++)
				if (P.lives[j].v->mem_offset == l->v->mem_offset && storage_root(&P, &P.lives[j]) == root &&
				    P.lives[j].end + 1 > from)
					from = P.lives[j].end + 1;
			for (int p = from; p <= l->end; p++) at[p] += l->bytes;
			continue;
		}
		for (int p = shared ? l->start + 1 : l->start; p <= l->end; p++) at[p] += l->bytes;
	}
	for (int p = 0; p < P.n_ops; p++)
		if (at[p] > out->lower_bound) out->lower_bound = at[p];
	free(at);
	free(bytes);
	release(&P);
	return true;
}

/* ---- the liveness profile (for rematerialization) ---- */

/* The buffer of op's k-th input (then results); -1 when it has no place. */
static int io_buf(const plan *P, const tbc_op *op, int k) {
	const tbc_value *v = k < op->n_inputs ? op->inputs[k] : op->outputs[k - op->n_inputs];
	int li = v ? P->index[v->id] : -1;
	return li < 0 ? -1 : P->lives[li].buf;
}

bool tbc_memplan_profile_make(const tbc_module *m, tbc_memplan_profile *out) {
	memset(out, 0, sizeof *out);
	plan P;
	buffer *bufs = NULL;
	bool ok = analyse(&P, m) && (bufs = calloc((size_t)P.n_lives + 1, sizeof *bufs));
	size_t nv = (size_t)m->n_values + 1;
	if (ok) {
		out->n_ops = P.n_ops;
		out->n_values = m->n_values;
		out->ops = malloc(((size_t)P.n_ops + 1) * sizeof *out->ops);
		out->live = calloc((size_t)P.n_ops + 2, sizeof *out->live);
		out->start = malloc(nv * sizeof *out->start);
		out->end = malloc(nv * sizeof *out->end);
		out->bytes = calloc(nv, sizeof *out->bytes);
		out->buf = malloc(nv * sizeof *out->buf);
		ok = out->ops && out->live && out->start && out->end && out->bytes && out->buf;
	}
	if (ok) {
		memcpy(out->ops, P.ops, (size_t)P.n_ops * sizeof *out->ops);
		for (size_t i = 0; i < nv; i++) out->start[i] = out->end[i] = out->buf[i] = -1;
		int n_bufs = assign_buffers(&P, bufs);
		for (int i = 0; i < P.n_lives; i++) {
			const life *l = &P.lives[i];
			out->start[l->v->id] = l->start;
			out->end[l->v->id] = l->end;
			out->bytes[l->v->id] = align_up(l->bytes);
			out->buf[l->v->id] = l->buf;
		}
		/* Each buffer counts from its first op to its last (a difference
		 * array: sizes added at the start, taken off after the end). */
		for (int b = 0; b < n_bufs; b++) {
			out->live[bufs[b].start] += bufs[b].size;
			out->live[bufs[b].end + 1] -= bufs[b].size;
		}
		for (int p = 1; p < P.n_ops; p++) out->live[p] += out->live[p - 1];
		for (int p = 0; p < P.n_ops; p++)
			if (out->live[p] > out->peak) out->peak = out->live[p];
		/* What any schedule of these ops needs at op p: its placed inputs
		 * and results, a buffer shared in place once. */
		for (int p = 0; p < P.n_ops; p++) {
			const tbc_op *op = P.ops[p];
			int64_t sum = 0;
			int n_io = op->n_inputs + op->n_outputs;
			for (int k = 0; k < n_io; k++) {
				int b = io_buf(&P, op, k);
				bool dup = b < 0;
				for (int j = 0; j < k && !dup; j++) dup = io_buf(&P, op, j) == b;
				if (!dup) sum += bufs[b].size;
			}
			if (sum > out->op_bound) out->op_bound = sum;
		}
	}
	free(bufs);
	release(&P);
	if (!ok) tbc_memplan_profile_free(out);
	return ok;
}

void tbc_memplan_profile_free(tbc_memplan_profile *p) {
	free(p->ops);
	free(p->live);
	free(p->start);
	free(p->end);
	free(p->bytes);
	free(p->buf);
	memset(p, 0, sizeof *p);
}
