/* A kernel's form for a grid target (TBC_PAR_GRID without work-groups in
 * the kernel): what lk_end does to each kernel a family lowered before it
 * becomes launches, so that every family gets a device's shape without
 * writing it twice.
 *
 *  - Split: a kernel whose body holds a parallel loop beside other storing
 *    statements (two parallel loops, as Concat and Split write one per input;
 *    a parallel fill before a sequential scatter) would run on one work-item
 *    (kir_kernel_launch_shape: SINGLE).  It becomes a kernel per parallel
 *    loop and per run of storing code between them, each after a copy of the
 *    statements before it that store nothing (the scalars they compute);
 *    launches run in order, so a later part sees what an earlier one
 *    stored, as the one kernel did.
 *  - Flatten: a parallel loop whose body is a perfect nest of loops with
 *    bounds fixed by the sizes alone (`for i parallel { for j sequential {
 *    for k vector { ... } } }`, data movement's and the reductions' kept
 *    dims) would spread only its outer trip count over the work-items.  It
 *    becomes one parallel loop over the product, each loop's variable
 *    decomposed from the flat index, so a batch of 1 still fills the grid.
 *
 * Both keep every value: a part runs the statements the kernel ran, in the
 * same order; a flattened nest runs the same iterations, which were
 * independent (a sequential loop is flattened only when its body reads no
 * buffer it stores, carries no scalar from one iteration to the next, and
 * stores each element at an index computed from the loop's variable
 * without loads, so no two iterations store one element).
 * Requires: verified kernels of lowering.  Guarantees: the parts verify as
 * the kernel did; the CPU's kernels are never touched (lk_end calls this for
 * grid targets only). */
#include <stdio.h>
#include <string.h>

#include "codegen/lower/kir_short.h"
#include "codegen/lower/lower_internal.h"

/* ---- Facts about statements and expressions ----------------------------------------*/
static bool stores(const kir_stmt *s) {
	for (; s; s = s->next)
		if (s->kind == KIR_S_STORE || stores(s->body) || stores(s->orelse)) return true;
	return false;
}

static bool can_fail(const kir_stmt *s) {
	for (; s; s = s->next)
		if (s->kind == KIR_S_ERROR || can_fail(s->body) || can_fail(s->orelse)) return true;
	return false;
}

static bool expr_reads_var(const kir_expr *e, const kir_var *v) {
	if (!e) return false;
	if (e->kind == KIR_E_VAR && e->var == v) return true;
	return expr_reads_var(e->a, v) || expr_reads_var(e->b, v) || expr_reads_var(e->c, v);
}

/* Whether an index expression is fixed by the kernel's sizes alone. */
static bool sizes_only(const kir_expr *e) {
	if (!e) return true;
	if (e->kind == KIR_E_VAR || e->kind == KIR_E_LOAD || e->kind == KIR_E_LOCAL_ID) return false;
	return sizes_only(e->a) && sizes_only(e->b) && sizes_only(e->c);
}

static bool stmts_read_var(const kir_stmt *s, const kir_var *v) {
	for (; s; s = s->next)
		if (expr_reads_var(s->lo, v) || expr_reads_var(s->hi, v) || expr_reads_var(s->index, v) ||
		    expr_reads_var(s->value, v) || expr_reads_var(s->cond, v) || stmts_read_var(s->body, v) ||
		    stmts_read_var(s->orelse, v))
			return true;
	return false;
}

/* Whether s sets (or binds as a loop variable) v. */
static bool stmts_set_var(const kir_stmt *s, const kir_var *v) {
	for (; s; s = s->next)
		if (((s->kind == KIR_S_SET || s->kind == KIR_S_FOR) && s->var == v) || stmts_set_var(s->body, v) ||
		    stmts_set_var(s->orelse, v))
			return true;
	return false;
}

static bool expr_loads(const kir_expr *e, const kir_buffer *b) {
	if (!e) return false;
	if (e->kind == KIR_E_LOAD && e->buf == b) return true;
	return expr_loads(e->a, b) || expr_loads(e->b, b) || expr_loads(e->c, b);
}

static bool stmts_load(const kir_stmt *s, const kir_buffer *b) {
	for (; s; s = s->next)
		if (expr_loads(s->lo, b) || expr_loads(s->hi, b) || expr_loads(s->index, b) || expr_loads(s->value, b) ||
		    expr_loads(s->cond, b) || stmts_load(s->body, b) || stmts_load(s->orelse, b))
			return true;
	return false;
}

static bool stores_to(const kir_stmt *s, const kir_buffer *b) {
	for (; s; s = s->next)
		if ((s->kind == KIR_S_STORE && s->buf == b) || stores_to(s->body, b) || stores_to(s->orelse, b)) return true;
	return false;
}

/* Whether body reads a buffer it stores (a recurrence through memory). */
static bool reads_what_it_stores(const kir_kernel *k, const kir_stmt *body) {
	for (int b = 0; b < k->n_buffers; b++)
		if (stores_to(body, k->buffers[b]) && stmts_load(body, k->buffers[b])) return true;
	return false;
}

/* Whether a variable is set inside body before it is read there, in every
 * iteration: the first statement of body mentioning it (at the top level)
 * is a set of it reading nothing of it.  Anything else may carry a value
 * from one iteration to the next. */
static bool set_before_read(const kir_stmt *body, const kir_var *v) {
	bool inside = false; /* v lives inside a loop above: read no more after it */
	for (const kir_stmt *s = body; s; s = s->next) {
		if (s->kind == KIR_S_SET && s->var == v) return !expr_reads_var(s->value, v);
		kir_stmt one = *s;
		one.next = NULL;
		bool mentions = stmts_read_var(&one, v) || stmts_set_var(&one, v);
		if (!mentions) continue;
		/* A loop whose body sets v before reading it, each iteration. */
		if (inside || s->kind != KIR_S_FOR || expr_reads_var(s->lo, v) || expr_reads_var(s->hi, v) ||
		    !set_before_read(s->body, v))
			return false;
		inside = true;
	}
	return true;
}

static bool binds(const kir_stmt *s, const kir_var *v) {
	for (; s; s = s->next)
		if ((s->kind == KIR_S_FOR && s->var == v) || binds(s->body, v) || binds(s->orelse, v)) return true;
	return false;
}

/* Whether no scalar flows from one iteration of a sequential loop to the
 * next: every variable set in its body is set before it is read (a loop
 * variable is bound afresh, and loop variables are never set). */
static bool carries_nothing(const kir_kernel *k, const kir_stmt *loop) {
	for (int i = 0; i < k->n_vars; i++) {
		const kir_var *v = k->vars[i];
		if (!binds(loop->body, v) && stmts_set_var(loop->body, v) && !set_before_read(loop->body, v)) return false;
	}
	return true;
}

/* The same questions of one statement (the functions above walk a list). */
static bool stmt_stores(const kir_stmt *s) {
	kir_stmt one = *s;
	one.next = NULL;
	return stores(&one);
}

static bool stmt_sets_var(const kir_stmt *s, const kir_var *v) {
	kir_stmt one = *s;
	one.next = NULL;
	return stmts_set_var(&one, v);
}

static bool stmt_reads_var(const kir_stmt *s, const kir_var *v) {
	kir_stmt one = *s;
	one.next = NULL;
	return stmts_read_var(&one, v);
}

/* Whether e, a store's index inside root, is computed without loads from
 * loop variables, sizes, constants and locals that are either set outside
 * root (the same for every iteration of it) or set inside it only to such
 * values; *uses is set when it reads v. */
static bool pure_index(const kir_stmt *root, const kir_expr *e, const kir_var *v, bool *uses, int depth);

static bool sets_pure(const kir_stmt *s, const kir_stmt *root, const kir_var *x, const kir_var *v, bool *uses,
		      int depth) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_SET && s->var == x && !pure_index(root, s->value, v, uses, depth + 1)) return false;
		if (!sets_pure(s->body, root, x, v, uses, depth) || !sets_pure(s->orelse, root, x, v, uses, depth)) return false;
	}
	return true;
}

static bool pure_index(const kir_stmt *root, const kir_expr *e, const kir_var *v, bool *uses, int depth) {
	if (!e) return true;
	if (depth > 16 || e->kind == KIR_E_LOAD) return false;
	if (e->kind == KIR_E_VAR) {
		kir_stmt one = *root;
		one.next = NULL;
		if (e->var == v) *uses = true;
		else if (!binds(&one, e->var) && stmts_set_var(&one, e->var) && !sets_pure(&one, root, e->var, v, uses, depth))
			return false;
		return true;
	}
	return pure_index(root, e->a, v, uses, depth) && pure_index(root, e->b, v, uses, depth) &&
	       pure_index(root, e->c, v, uses, depth);
}

/* Whether every store in s (inside root) goes to an element its index
 * computes from loop's variable without loads: different iterations of a
 * sequential loop then store different elements (an index that does not
 * read the variable would be stored by every iteration, the last value
 * winning; one read from memory may repeat). */
static bool stores_by(const kir_stmt *s, const kir_stmt *root, const kir_var *loopvar) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_STORE) {
			bool uses = false;
			if (!pure_index(root, s->index, loopvar, &uses, 0) || !uses) return false;
		}
		if (!stores_by(s->body, root, loopvar) || !stores_by(s->orelse, root, loopvar)) return false;
	}
	return true;
}

/* ---- Flatten ---------------------------------------------------------------------*/
static bool flat_bounds(const kir_stmt *s) {
	int64_t lo;
	return s->kind == KIR_S_FOR && s->step == 1 && kir_e_const_index(s->lo, &lo) && lo == 0 && sizes_only(s->hi) &&
	       s->loop != KIR_LOOP_GRID;
}

#define MAX_NEST (2 * TBC_MAX_RANK)

/* grid (a top-level parallel loop) as one parallel loop over its perfect
 * nest; grid itself when there is nothing to flatten. */
static kir_stmt *flatten(kir_kernel *k, kir_stmt *grid) {
	if (!flat_bounds(grid)) return grid;
	kir_stmt *loops[MAX_NEST];
	kir_stmt *pre[MAX_NEST]; /* the sets before loop d in loop d-1's body (a list) */
	int n = 0;
	loops[n] = grid;
	pre[n++] = NULL;
	while (n < MAX_NEST) {
		kir_stmt *body = loops[n - 1]->body, *s = body;
		while (s && s->kind == KIR_S_SET) s = s->next;
		if (!s || s->kind != KIR_S_FOR || s->next || !flat_bounds(s)) break;
		/* The sets before the loop are recomputed per flat iteration: none
		 * may be set again inside it. */
		bool ok = true;
		for (kir_stmt *p = body; p != s && ok; p = p->next) ok = !stmts_set_var(s, p->var);
		if (s->loop == KIR_LOOP_SEQUENTIAL)
			ok = ok && !reads_what_it_stores(k, s->body) && carries_nothing(k, s) && stores_by(s->body, grid, s->var);
		if (!ok) break;
		pre[n] = body == s ? NULL : body;
		loops[n++] = s;
	}
	if (n == 1) return grid;
	kir_var *f = kir_var_new(k, "f", KIR_INDEX);
	kir_expr *fv = V(k, f), *stride = I(k, 1), *strides[MAX_NEST];
	for (int d = n - 1; d >= 0; d--) {
		strides[d] = stride;
		stride = MUL(k, stride, loops[d]->hi);
	}
	kir_block b = {0};
	for (int d = 0; d < n; d++) {
		for (kir_stmt *p = pre[d]; p && p != loops[d]; p = p->next) kir_block_add(k, &b, kir_s_set(k, p->var, p->value));
		kir_expr *q = DIV(k, fv, strides[d]);
		kir_block_add(k, &b, kir_s_set(k, loops[d]->var, d == 0 ? q : MOD(k, q, loops[d]->hi)));
	}
	kir_stmt *inner = loops[n - 1]->body;
	if (b.last) b.last->next = inner;
	return kir_s_for(k, f, I(k, 0), stride, 1, KIR_LOOP_PARALLEL, b.first);
}

/* ---- Split -----------------------------------------------------------------------*/
static kir_stmt *clone(kir_kernel *k, const kir_stmt *s) {
	kir_stmt *c = tbc_arena_alloc(k->arena, sizeof *c);
	if (!c) return k->failed = true, NULL;
	*c = *s;
	c->next = NULL;
	return c;
}

static bool is_parallel_loop(const kir_stmt *s) { return s->kind == KIR_S_FOR && s->loop != KIR_LOOP_SEQUENTIAL; }

/* The parts of k's top-level statements s[0..n): part[i] >= 0 for a
 * statement of a part, -1 for one that only computes scalars (copied before
 * every later part).  Each parallel loop is a part; the statements from a
 * storing one up to the next parallel loop are one (code for one
 * work-item, such as a scatter after a parallel fill).  The number of
 * parts, or 0 when k stays whole: fewer than two parts, none a parallel
 * loop, a part setting a scalar a later statement reads, or a check after
 * the last parallel loop that no part holds. */
static int parts_of(const kir_kernel *k, const kir_stmt *const *s, int n, int *part) {
	int parts = 0, run = -1, loops = 0;
	for (int i = 0; i < n; i++) {
		if (is_parallel_loop(s[i])) {
			part[i] = parts++;
			run = -1;
			loops++;
		} else if (stmt_stores(s[i]) || run >= 0) {
			if (run < 0) run = parts++;
			part[i] = run;
		} else {
			part[i] = -1;
		}
	}
	if (parts < 2 || loops == 0) return 0;
	for (int i = 0; i < n; i++) {
		bool later_part = false;
		for (int j = i + 1; j < n && !later_part; j++) later_part = part[j] >= 0;
		if (part[i] < 0) {
			if (can_fail(s[i]) && !later_part) return 0; /* it would be dropped */
			continue;
		}
		for (int v = 0; v < k->n_vars; v++) {
			if (!stmt_sets_var(s[i], k->vars[v])) continue;
			for (int j = i + 1; j < n; j++)
				if (part[j] != part[i] && stmt_reads_var(s[j], k->vars[v])) return 0;
		}
	}
	return parts;
}

/* The body of part `want` of k for a grid target: the scalar statements
 * before it, then its own statements.  A parallel loop is flattened, and the
 * scalar sets before it that its bounds do not read move into it (each
 * work-item computes them), so the body is the one loop a device spreads
 * over its work-items. */
static kir_stmt *part_body(kir_kernel *k, const kir_stmt *const *s, int n, const int *part, int want) {
	int first = 0;
	while (first < n && part[first] != want) first++;
	const kir_stmt *loop = first < n && is_parallel_loop(s[first]) ? s[first] : NULL;
	bool sink = loop != NULL;
	for (int i = 0; i < first && sink; i++)
		if (part[i] < 0)
			sink = s[i]->kind == KIR_S_SET && !expr_reads_var(loop->lo, s[i]->var) && !expr_reads_var(loop->hi, s[i]->var);
	kir_block b = {0}, sunk = {0};
	for (int i = 0; i < first; i++)
		if (part[i] < 0) kir_block_add(k, sink ? &sunk : &b, clone(k, s[i]));
	if (!loop) {
		for (int i = first; i < n; i++)
			if (part[i] == want) kir_block_add(k, &b, clone(k, s[i]));
		return b.first;
	}
	kir_stmt *own = flatten(k, clone(k, loop));
	if (own && sunk.first) {
		sunk.last->next = own->body;
		own->body = sunk.first;
	}
	kir_block_add(k, &b, own);
	return b.first;
}

int lower_device_form(kir_kernel *k, kir_kernel ***out) {
	*out = tbc_arena_array(k->arena, 1, sizeof **out);
	if (!*out) return -1;
	(*out)[0] = k;
	int n = 0;
	for (const kir_stmt *st = k->body; st; st = st->next) n++;
	if (kir_kernel_is_grouped(k) || n == 0) return 1;
	const kir_stmt **s = tbc_arena_array(k->arena, (size_t)n, sizeof *s);
	int *part = tbc_arena_array(k->arena, (size_t)n, sizeof *part);
	if (!s || !part) return -1;
	n = 0;
	for (const kir_stmt *st = k->body; st; st = st->next) s[n++] = st;
	int parts = kir_kernel_launch_shape(k) == KIR_LAUNCH_SINGLE ? parts_of(k, s, n, part) : 0;
	if (parts == 0) {
		/* Whole: scalar statements, then one parallel loop. */
		bool one_loop = is_parallel_loop(s[n - 1]);
		for (int i = 0; i < n - 1 && one_loop; i++) one_loop = !stmt_stores(s[i]) && !is_parallel_loop(s[i]);
		if (!one_loop) return 1;
		for (int i = 0; i < n; i++) part[i] = i == n - 1 ? 0 : -1;
		k->body = part_body(k, s, n, part, 0);
		return k->body && !k->failed ? 1 : -1;
	}
	kir_kernel **kernels = tbc_arena_array(k->arena, (size_t)parts, sizeof *kernels);
	if (!kernels) return -1;
	for (int p = 0; p < parts; p++) {
		kir_kernel *pk = kir_kernel_copy(k);
		if (!pk) return -1;
		char name[160];
		snprintf(name, sizeof name, "%s_p%d", k->name, p);
		pk->name = tbc_arena_strdup(k->arena, name);
		pk->body = part_body(pk, s, n, part, p);
		if (!pk->name || !pk->body || pk->failed) return -1;
		kernels[p] = pk;
	}
	*out = kernels;
	return parts;
}
