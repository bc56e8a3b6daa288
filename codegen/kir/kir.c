/* Kernel IR: builder, printer and verifier.  The rules the verifier checks
 * and the text form the printer writes are described in docs/kernel-ir.md. */
#include "codegen/kir/kir.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "codegen/target_desc.h"

/* ---- Builder -------------------------------------------------------------*/
static void *knew(kir_kernel *k, size_t size) {
	void *p = tbc_arena_alloc(k->arena, size);
	if (!p) k->failed = true;
	return p;
}

kir_kernel *kir_kernel_new(tbc_arena *arena, const char *name) {
	kir_kernel *k = tbc_arena_alloc(arena, sizeof *k);
	if (!k) return NULL;
	k->arena = arena;
	k->name = tbc_arena_strdup(arena, name ? name : "kernel");
	if (!k->name) return NULL;
	return k;
}

/* Appends to an arena array of pointers that only this function grows: its
 * room is 4, then the next power of two of its length, so it moves when
 * the length reaches one (a GEMM kernel has over a thousand variables:
 * growing by one copied the array each time). */
static bool push_ptr(kir_kernel *k, void ***arr, int *n, void *item) {
	if (*n == 0 || (*n >= 4 && (*n & (*n - 1)) == 0)) {
		size_t room = *n < 4 ? 4 : (size_t)*n * 2;
		void **grown = tbc_arena_array(k->arena, room, sizeof(void *));
		if (!grown) return k->failed = true, false;
		if (*n) memcpy(grown, *arr, (size_t)*n * sizeof(void *));
		*arr = grown;
	}
	(*arr)[*n] = item;
	(*n)++;
	return true;
}

/* ---- Variable names: "acc", "acc.1", "acc.2", ... --------------------------
 * A kernel's variables named with one stem (the name up to its first '.')
 * counted in an open-addressed table, so a new variable's number is a
 * lookup, not a pass over every variable's name. */
typedef struct kir_stem {
	const char *stem; /* arena copy; NULL: an empty slot */
	size_t len;
	int count;
} kir_stem;

static size_t stem_hash(const char *s, size_t n) {
	size_t h = 1469598103934665603u;
	for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
	return h;
}

/* The counter of the stem s[0..n), made (at 0) if new; NULL when out of memory. */
static int *stem_count(kir_kernel *k, const char *s, size_t n) {
	if (2 * (k->n_stems + 1) > k->stem_cap) {
		int cap = k->stem_cap ? 2 * k->stem_cap : 64;
		kir_stem *t = tbc_arena_array(k->arena, (size_t)cap, sizeof *t);
		if (!t) return k->failed = true, NULL;
		memset(t, 0, (size_t)cap * sizeof *t);
		for (int i = 0; i < k->stem_cap; i++) {
			kir_stem *e = &((kir_stem *)k->stems)[i];
			if (!e->stem) continue;
			size_t j = stem_hash(e->stem, e->len) & (size_t)(cap - 1);
			while (t[j].stem) j = (j + 1) & (size_t)(cap - 1);
			t[j] = *e;
		}
		k->stems = t, k->stem_cap = cap;
	}
	kir_stem *t = k->stems;
	size_t j = stem_hash(s, n) & (size_t)(k->stem_cap - 1);
	for (; t[j].stem; j = (j + 1) & (size_t)(k->stem_cap - 1))
		if (t[j].len == n && !memcmp(t[j].stem, s, n)) return &t[j].count;
	char *copy = tbc_arena_alloc(k->arena, n + 1);
	if (!copy) return k->failed = true, NULL;
	memcpy(copy, s, n);
	copy[n] = 0;
	t[j] = (kir_stem){copy, n, 0};
	k->n_stems++;
	return &t[j].count;
}

int kir_size_param(kir_kernel *k, const char *name) {
	for (int i = 0; i < k->n_sizes; i++)
		if (!strcmp(k->size_names[i], name)) return i;
	char *copy = tbc_arena_strdup(k->arena, name);
	if (!copy) return k->failed = true, -1;
	if (!push_ptr(k, (void ***)&k->size_names, &k->n_sizes, copy)) return -1;
	return k->n_sizes - 1;
}

kir_buffer *kir_buffer_new(kir_kernel *k, const char *name, tbc_dtype dtype, kir_buffer_role role, int rank,
			   kir_expr *const *dims) {
	if (rank < 0 || rank > TBC_MAX_RANK) return k->failed = true, NULL;
	kir_buffer *b = knew(k, sizeof *b);
	if (!b) return NULL;
	b->id = k->n_buffers;
	b->name = tbc_arena_strdup(k->arena, name ? name : "buf");
	b->dtype = dtype;
	b->role = role;
	b->rank = rank;
	for (int i = 0; i < rank; i++) {
		if (!dims[i]) return k->failed = true, NULL;
		b->dims[i] = dims[i];
	}
	if (!b->name || !push_ptr(k, (void ***)&k->buffers, &k->n_buffers, b)) return NULL;
	return b;
}

/* A copy of an array push_ptr grows, with its room, for a kernel of its own. */
static bool copy_ptrs(kir_kernel *k, void ***arr, int n) {
	if (!n) return *arr = NULL, true;
	size_t room = 4; /* push_ptr's: 4, else the least power of two >= n */
	while (room < (size_t)n) room *= 2;
	void **c = tbc_arena_array(k->arena, room, sizeof(void *));
	if (!c) return k->failed = true, false;
	memcpy(c, *arr, (size_t)n * sizeof(void *));
	*arr = c;
	return true;
}

kir_kernel *kir_kernel_copy(const kir_kernel *k) {
	kir_kernel *c = tbc_arena_alloc(k->arena, sizeof *c);
	if (!c) return NULL;
	*c = *k;
	c->stems = NULL, c->n_stems = c->stem_cap = 0;
	bool ok = copy_ptrs(c, (void ***)&c->buffers, c->n_buffers) && copy_ptrs(c, (void ***)&c->size_names, c->n_sizes) &&
		  copy_ptrs(c, (void ***)&c->vars, c->n_vars) && copy_ptrs(c, (void ***)&c->locals, c->n_locals);
	if (ok && k->stem_cap) { /* the same counts, in a table of its own */
		c->stems = tbc_arena_array(k->arena, (size_t)k->stem_cap, sizeof(kir_stem));
		if (c->stems) memcpy(c->stems, k->stems, (size_t)k->stem_cap * sizeof(kir_stem));
		c->n_stems = k->n_stems, c->stem_cap = k->stem_cap;
		ok = c->stems != NULL;
	}
	return ok ? c : NULL;
}

kir_var *kir_var_new(kir_kernel *k, const char *name, tbc_dtype type) {
	kir_var *v = knew(k, sizeof *v);
	if (!v) return NULL;
	if (!name) name = "t";
	/* the variables named name or name.*: its stem's count, where name has
	 * no '.' (every name is then counted under its own stem) */
	int clash = 0;
	const char *dot = strchr(name, '.');
	if (!dot) {
		int *c = stem_count(k, name, strlen(name));
		if (!c) return NULL;
		clash = *c;
	} else {
		size_t n = strlen(name);
		for (int i = 0; i < k->n_vars; i++) {
			const char *o = k->vars[i]->name;
			if (!strncmp(o, name, n) && (o[n] == 0 || o[n] == '.')) clash++;
		}
	}
	char buf[128];
	if (clash) snprintf(buf, sizeof buf, "%s.%d", name, clash);
	else snprintf(buf, sizeof buf, "%s", name);
	const char *stem_end = strchr(buf, '.');
	int *mine = stem_count(k, buf, stem_end ? (size_t)(stem_end - buf) : strlen(buf));
	if (!mine) return NULL;
	(*mine)++;
	v->id = k->n_vars;
	v->name = tbc_arena_strdup(k->arena, buf);
	v->type = type;
	int n = k->n_vars;
	if (!v->name || !push_ptr(k, (void ***)&k->vars, &n, v)) return NULL;
	k->n_vars = n;
	return v;
}

static kir_expr *enew(kir_kernel *k, kir_expr_kind kind, tbc_dtype type) {
	kir_expr *e = knew(k, sizeof *e);
	if (!e) return NULL;
	e->kind = kind;
	e->type = type;
	return e;
}

kir_expr *kir_e_int(kir_kernel *k, tbc_dtype type, int64_t v) {
	kir_expr *e = enew(k, KIR_E_INT, type);
	if (e) e->i = v;
	return e;
}
kir_expr *kir_e_index(kir_kernel *k, int64_t v) { return kir_e_int(k, KIR_INDEX, v); }

kir_expr *kir_e_float(kir_kernel *k, tbc_dtype type, double v) {
	kir_expr *e = enew(k, KIR_E_FLOAT, type);
	if (e) e->f = v;
	return e;
}

kir_expr *kir_e_var(kir_kernel *k, kir_var *v) {
	if (!v) return k->failed = true, NULL;
	kir_expr *e = enew(k, KIR_E_VAR, v->type);
	if (e) e->var = v;
	return e;
}

kir_expr *kir_e_size(kir_kernel *k, int size) {
	if (size < 0) return k->failed = true, NULL;
	kir_expr *e = enew(k, KIR_E_SIZE, KIR_INDEX);
	if (e) e->size = size;
	return e;
}

kir_expr *kir_e_load(kir_kernel *k, kir_buffer *b, kir_expr *index) {
	if (!b || !index) return k->failed = true, NULL;
	kir_expr *e = enew(k, KIR_E_LOAD, b->dtype);
	if (e) e->buf = b, e->a = index;
	return e;
}

kir_expr *kir_e_unary(kir_kernel *k, kir_unop op, kir_expr *a) {
	if (!a) return k->failed = true, NULL;
	tbc_dtype t = (op == KIR_ISNAN || op == KIR_ISINF) ? TBC_DT_BOOL : a->type;
	kir_expr *e = enew(k, KIR_E_UNARY, t);
	if (e) e->op = op, e->a = a;
	return e;
}

bool kir_e_const_index(const kir_expr *e, int64_t *out) {
	if (!e || e->kind != KIR_E_INT || e->type != KIR_INDEX) return false;
	*out = e->i;
	return true;
}

static int64_t floordiv64(int64_t a, int64_t b) {
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
	return q;
}

/* Folds index arithmetic on constants and the identities of 0 and 1. */
static kir_expr *fold_index(kir_kernel *k, kir_binop op, kir_expr *a, kir_expr *b) {
	int64_t x, y;
	bool ca = kir_e_const_index(a, &x), cb = kir_e_const_index(b, &y);
	if (ca && cb) {
		switch (op) {
		case KIR_ADD: return kir_e_index(k, (int64_t)((uint64_t)x + (uint64_t)y));
		case KIR_SUB: return kir_e_index(k, (int64_t)((uint64_t)x - (uint64_t)y));
		case KIR_MUL: return kir_e_index(k, (int64_t)((uint64_t)x * (uint64_t)y));
		case KIR_MIN: return kir_e_index(k, x < y ? x : y);
		case KIR_MAX: return kir_e_index(k, x > y ? x : y);
		case KIR_FLOORDIV: if (y != 0) return kir_e_index(k, floordiv64(x, y)); break;
		case KIR_FLOORMOD: if (y != 0) return kir_e_index(k, x - floordiv64(x, y) * y); break;
		default: break;
		}
		return NULL;
	}
	if (op == KIR_ADD && ca && x == 0) return b;
	if ((op == KIR_ADD || op == KIR_SUB) && cb && y == 0) return a;
	if (op == KIR_MUL && ca && x == 1) return b;
	if ((op == KIR_MUL || op == KIR_FLOORDIV) && cb && y == 1) return a;
	if (op == KIR_MUL && ((ca && x == 0) || (cb && y == 0))) return kir_e_index(k, 0);
	if (op == KIR_FLOORMOD && cb && y == 1) return kir_e_index(k, 0);
	return NULL;
}

kir_expr *kir_e_binary(kir_kernel *k, kir_binop op, kir_expr *a, kir_expr *b) {
	if (!a || !b) return k->failed = true, NULL;
	if (a->type == KIR_INDEX && b->type == KIR_INDEX) {
		kir_expr *f = fold_index(k, op, a, b);
		if (f) return f;
	}
	kir_expr *e = enew(k, KIR_E_BINARY, a->type);
	if (e) e->op = op, e->a = a, e->b = b;
	return e;
}

kir_expr *kir_e_add(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_ADD, a, b); }
kir_expr *kir_e_mul(kir_kernel *k, kir_expr *a, kir_expr *b) { return kir_e_binary(k, KIR_MUL, a, b); }

kir_expr *kir_e_cmp(kir_kernel *k, kir_cmp op, kir_expr *a, kir_expr *b) {
	if (!a || !b) return k->failed = true, NULL;
	kir_expr *e = enew(k, KIR_E_CMP, TBC_DT_BOOL);
	if (e) e->op = op, e->a = a, e->b = b;
	return e;
}

kir_expr *kir_e_select(kir_kernel *k, kir_expr *cond, kir_expr *a, kir_expr *b) {
	if (!cond || !a || !b) return k->failed = true, NULL;
	kir_expr *e = enew(k, KIR_E_SELECT, a->type);
	if (e) e->a = cond, e->b = a, e->c = b;
	return e;
}

kir_expr *kir_e_cast(kir_kernel *k, tbc_dtype type, kir_expr *a) {
	if (!a) return k->failed = true, NULL;
	if (a->type == type) return a;
	if (a->kind == KIR_E_INT && a->type == KIR_INDEX && type != TBC_DT_BOOL && tbc_dtype_is_int(type) &&
	    tbc_dtype_bits(type) == 64)
		return kir_e_int(k, type, a->i);
	kir_expr *e = enew(k, KIR_E_CAST, type);
	if (e) e->a = a;
	return e;
}

kir_expr *kir_e_cast_nosat(kir_kernel *k, tbc_dtype type, kir_expr *a) {
	if (!a) return k->failed = true, NULL;
	if (a->type == type) return a;
	kir_expr *e = enew(k, KIR_E_CAST, type);
	if (e) {
		e->a = a;
		e->op = KIR_CAST_NO_SATURATE;
	}
	return e;
}

kir_expr *kir_e_cast_any_nan(kir_kernel *k, tbc_dtype type, kir_expr *a) {
	kir_expr *e = kir_e_cast(k, type, a);
	if (e && e != a && e->kind == KIR_E_CAST && kir_type_is_narrow_float(a->type) &&
	    (type == TBC_DT_F32 || type == TBC_DT_F64))
		e->op = KIR_CAST_ANY_NAN;
	return e;
}

void kir_block_add(kir_kernel *k, kir_block *b, kir_stmt *s) {
	if (!s) {
		k->failed = true;
		return;
	}
	if (b->last) b->last->next = s;
	else b->first = s;
	b->last = s;
	while (b->last->next) b->last = b->last->next;
}

static kir_stmt *snew(kir_kernel *k, kir_stmt_kind kind) {
	kir_stmt *s = knew(k, sizeof *s);
	if (s) s->kind = kind;
	return s;
}

kir_stmt *kir_s_for(kir_kernel *k, kir_var *var, kir_expr *lo, kir_expr *hi, int64_t step, kir_loop_kind loop,
		    kir_stmt *body) {
	if (!var || !lo || !hi) return k->failed = true, NULL;
	kir_stmt *s = snew(k, KIR_S_FOR);
	if (s) s->var = var, s->lo = lo, s->hi = hi, s->step = step, s->loop = loop, s->body = body;
	return s;
}

kir_stmt *kir_s_store(kir_kernel *k, kir_buffer *b, kir_expr *index, kir_expr *value) {
	if (!b || !index || !value) return k->failed = true, NULL;
	kir_stmt *s = snew(k, KIR_S_STORE);
	if (s) s->buf = b, s->index = index, s->value = value;
	return s;
}

kir_stmt *kir_s_set(kir_kernel *k, kir_var *var, kir_expr *value) {
	if (!var || !value) return k->failed = true, NULL;
	kir_stmt *s = snew(k, KIR_S_SET);
	if (s) s->var = var, s->value = value;
	return s;
}

kir_stmt *kir_s_if(kir_kernel *k, kir_expr *cond, kir_stmt *body, kir_stmt *orelse) {
	if (!cond) return k->failed = true, NULL;
	kir_stmt *s = snew(k, KIR_S_IF);
	if (s) s->cond = cond, s->body = body, s->orelse = orelse;
	return s;
}

kir_stmt *kir_s_error(kir_kernel *k, kir_expr *cond, const char *message) {
	if (!cond || !message) return k->failed = true, NULL;
	kir_stmt *s = snew(k, KIR_S_ERROR);
	if (s) {
		s->cond = cond;
		s->message = tbc_arena_strdup(k->arena, message);
		if (!s->message) return k->failed = true, NULL;
	}
	return s;
}

static bool stmts_can_fail(const kir_stmt *s) {
	for (; s; s = s->next)
		if (s->kind == KIR_S_ERROR || stmts_can_fail(s->body) || stmts_can_fail(s->orelse)) return true;
	return false;
}

bool kir_kernel_can_fail(const kir_kernel *k) { return stmts_can_fail(k->body); }

/* ---- The parallel form ---------------------------------------------------*/
static bool stmts_store(const kir_stmt *s) {
	for (; s; s = s->next)
		if (s->kind == KIR_S_STORE || stmts_store(s->body) || stmts_store(s->orelse)) return true;
	return false;
}

/* Whether statement s alone (not those after it) stores. */
static bool stmt_stores(const kir_stmt *s) {
	return s->kind == KIR_S_STORE || stmts_store(s->body) || stmts_store(s->orelse);
}

/* Whether e reads no variable: the launch is computed before any statement
 * of the kernel runs (from its sizes; a bound loaded from a buffer makes
 * the largest grid, which strides over any trip count). */
static bool reads_no_var(const kir_expr *e) {
	if (!e) return true;
	if (e->kind == KIR_E_VAR) return false;
	return reads_no_var(e->a) && reads_no_var(e->b) && reads_no_var(e->c);
}

/* The one top-level parallel (or vector) loop, when every statement before
 * it stores nothing (every work-item may then run them), nothing follows it,
 * and its bounds read no variable those statements set. */
const kir_stmt *kir_kernel_grid_loop(const kir_kernel *k) {
	if (kir_kernel_is_grouped(k)) return NULL;
	const kir_stmt *grid = NULL;
	for (const kir_stmt *s = k->body; s; s = s->next) {
		if (grid) return NULL; /* after the loop: keep the order simple */
		if (s->kind == KIR_S_FOR && s->loop != KIR_LOOP_SEQUENTIAL) grid = s;
		else if (stmt_stores(s)) return NULL;
	}
	return grid && reads_no_var(grid->lo) && reads_no_var(grid->hi) ? grid : NULL;
}

kir_launch_shape kir_kernel_launch_shape(const kir_kernel *k) {
	if (kir_kernel_is_grouped(k)) return KIR_LAUNCH_GROUPS;
	return kir_kernel_grid_loop(k) ? KIR_LAUNCH_GRID : KIR_LAUNCH_SINGLE;
}

void kir_kernel_set_group(kir_kernel *k, int dims, const int64_t *size) {
	if (dims < 1 || dims > 3) {
		k->failed = true;
		return;
	}
	k->group_dims = dims;
	for (int d = 0; d < 3; d++) k->group[d] = d < dims ? size[d] : 1;
}

kir_buffer *kir_local_new(kir_kernel *k, const char *name, tbc_dtype dtype, int rank, const int64_t *dims) {
	if (rank < 1 || rank > TBC_MAX_RANK) return k->failed = true, NULL;
	kir_buffer *b = knew(k, sizeof *b);
	if (!b) return NULL;
	b->id = k->n_locals;
	b->space = KIR_MEM_LOCAL;
	b->name = tbc_arena_strdup(k->arena, name ? name : "local");
	b->dtype = dtype;
	b->role = KIR_BUF_TEMP;
	b->rank = rank;
	for (int i = 0; i < rank; i++)
		if (!(b->dims[i] = kir_e_index(k, dims[i]))) return NULL;
	if (!b->name || !push_ptr(k, (void ***)&k->locals, &k->n_locals, b)) return NULL;
	return b;
}

kir_expr *kir_e_local_id(kir_kernel *k, int dim) {
	if (dim < 0 || dim > 2) return k->failed = true, NULL;
	kir_expr *e = enew(k, KIR_E_LOCAL_ID, KIR_INDEX);
	if (e) e->size = dim;
	return e;
}

kir_stmt *kir_s_barrier(kir_kernel *k) { return snew(k, KIR_S_BARRIER); }

/* A register tile's description (mma, dot2, dot4: size bytes at d) copied
 * into the kernel with its n accumulators, whose array pointer sits at
 * acc_at in it; NULL (the kernel failed) when an accumulator is missing. */
static void *tile_copy(kir_kernel *k, const void *d, size_t size, size_t acc_at, kir_var *const *acc, int n) {
	for (int i = 0; i < n; i++)
		if (!acc[i]) return k->failed = true, NULL;
	char *copy = knew(k, size);
	kir_var **a = knew(k, (size_t)n * sizeof *a);
	if (!copy || !a) return NULL;
	memcpy(copy, d, size);
	memcpy(a, acc, (size_t)n * sizeof *a);
	memcpy(copy + acc_at, &a, sizeof a);
	return copy;
}

kir_stmt *kir_s_mma(kir_kernel *k, const kir_mma *m) {
	if (!m || !m->a || !m->b || !m->a_at || !m->b_at || !m->acc || m->mi < 1 || m->ni < 1 || m->mi > 8 || m->ni > 8)
		return k->failed = true, NULL;
	const kir_mma *copy = tile_copy(k, m, sizeof *m, offsetof(kir_mma, acc), m->acc, m->mi * m->ni * 4);
	kir_stmt *s = copy ? snew(k, KIR_S_MMA) : NULL;
	if (s) s->mma = copy;
	return s;
}

kir_stmt *kir_s_dot2(kir_kernel *k, const kir_dot2 *d) {
	if (!d || !d->a || !d->b || !d->b_at || !d->ldb || !d->kn || !d->acc || d->mr < 1 || d->mr > 8 || d->nv < 1 ||
	    d->nv > 4)
		return k->failed = true, NULL;
	for (int r = 0; r < d->mr; r++)
		if (!d->a_at[r]) return k->failed = true, NULL;
	const kir_dot2 *copy = tile_copy(k, d, sizeof *d, offsetof(kir_dot2, acc), d->acc, d->mr * d->nv * 16);
	kir_stmt *s = copy ? snew(k, KIR_S_DOT2) : NULL;
	if (s) s->dot2 = copy;
	return s;
}

/* Whether s or a statement after it (bodies included) is of that kind. */
static bool stmts_have(const kir_stmt *s, kir_stmt_kind kind) {
	for (; s; s = s->next)
		if (s->kind == kind || stmts_have(s->body, kind) || stmts_have(s->orelse, kind)) return true;
	return false;
}

bool kir_kernel_has_dot2(const kir_kernel *k) { return stmts_have(k->body, KIR_S_DOT2); }

kir_stmt *kir_s_tile2(kir_kernel *k, const kir_tile2 *d) {
	if (!d || !d->a || !d->b || !d->a_at || !d->lda || !d->b_at || !d->ldb || !d->acc || d->mt < 1 || d->mt > 2 ||
	    d->nt < 1 || d->nt > 2)
		return k->failed = true, NULL;
	const kir_tile2 *copy = tile_copy(k, d, sizeof *d, offsetof(kir_tile2, acc), d->acc, 256 * d->mt * d->nt);
	kir_stmt *s = copy ? snew(k, KIR_S_TILE2) : NULL;
	if (s) s->tile2 = copy;
	return s;
}

kir_stmt *kir_s_dot4(kir_kernel *k, const kir_dot4 *d) {
	if (!d || !d->a || !d->b || !d->b_at || !d->groups || !d->acc || d->mr < 1 || d->mr > KIR_DOT4_MAX_MR ||
	    d->nc < 16 || d->nc > 64 || d->nc % 16)
		return k->failed = true, NULL;
	for (int r = 0; r < d->mr; r++)
		if (!d->a_at[r]) return k->failed = true, NULL;
	const kir_dot4 *copy = tile_copy(k, d, sizeof *d, offsetof(kir_dot4, acc), d->acc, d->mr * d->nc);
	kir_stmt *s = copy ? snew(k, KIR_S_DOT4) : NULL;
	if (s) s->dot4 = copy;
	return s;
}

kir_stmt *kir_s_fma_tile(kir_kernel *k, const kir_fma_tile *d) {
	if (!d || !d->a || !d->b || !d->a_ks || !d->b_at || !d->ldb || !d->klo || !d->khi || !d->acc || d->mr < 1 ||
	    d->mr > KIR_FMA_TILE_MAX_MR || d->nc < 1 || d->nc > KIR_FMA_TILE_MAX_NC)
		return k->failed = true, NULL;
	for (int r = 0; r < d->mr; r++)
		if (!d->a_at[r] || (d->y && !d->y_at[r])) return k->failed = true, NULL;
	if (d->y && !d->resume) return k->failed = true, NULL;
	const kir_fma_tile *copy = tile_copy(k, d, sizeof *d, offsetof(kir_fma_tile, acc), d->acc, d->mr * d->nc);
	kir_stmt *s = copy ? snew(k, KIR_S_FMA_TILE) : NULL;
	if (s) s->fma_tile = copy;
	return s;
}

static int64_t static_numel(const kir_buffer *b);

int64_t kir_local_bytes(const kir_kernel *k) {
	int64_t n = 0;
	for (int i = 0; i < k->n_locals; i++) {
		int64_t e = static_numel(k->locals[i]);
		if (e < 0) return INT64_MAX;
		n += e * (int64_t)tbc_dtype_size(k->locals[i]->dtype);
	}
	return n;
}

/* Whether every mma in s has operands the target declares. */
static bool mma_fits(const kir_stmt *s, const tbc_target_desc *t) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_MMA &&
		    !(s->mma->a->dtype == TBC_DT_F16 ? t->mma_f16 : s->mma->a->dtype == TBC_DT_BF16 && t->mma_bf16))
			return false;
		if (!mma_fits(s->body, t) || !mma_fits(s->orelse, t)) return false;
	}
	return true;
}

/* Whether every tile2 in s is of a form the target declares. */
static bool tiles_fit(const kir_stmt *s, const tbc_target_desc *t) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_TILE2 && !(kir_tile2_is_int8(s->tile2) ? t->tile_i8 : t->tile_bf16)) return false;
		if (!tiles_fit(s->body, t) || !tiles_fit(s->orelse, t)) return false;
	}
	return true;
}

bool kir_fits_target(const kir_kernel *k, const tbc_target_desc *t, tbc_diags *d) {
	if (!t->dot4_u8s8 && stmts_have(k->body, KIR_S_DOT4)) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL,
			      "kernel %s does not fit target %s: it holds a byte dot product (dot4) the target does not declare",
			      k->name, t->name);
		return false;
	}
	const char *why = NULL;
	if (!t->dot_bf16 && kir_kernel_has_dot2(k)) why = "it holds a bf16 pair dot product (dot2) the target does not declare";
	else if (!t->fma_tile && stmts_have(k->body, KIR_S_FMA_TILE))
		why = "it holds a multiply-add tile (fma) the target does not declare";
	else if (!tiles_fit(k->body, t)) why = "it holds dot-product tiles (tile2) the target does not declare";
	else if (!kir_kernel_is_grouped(k)) return true;
	else if (!t->workgroups) why = "the target has no work-groups";
	else if (kir_group_items(k) > t->max_workgroup_size) why = "its work-group is larger than the target's";
	else if (kir_local_bytes(k) > t->local_mem_bytes) why = "its local buffers exceed the target's local memory";
	else if (!mma_fits(k->body, t)) why = "it holds a matrix multiply-accumulate (mma) the target does not declare";
	if (why)
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "kernel %s does not fit target %s: %s", k->name,
			      t->name, why);
	return !why;
}

/* ---- Names ---------------------------------------------------------------*/
const char *kir_type_name(tbc_dtype t) {
	if (t == KIR_INDEX) return "index";
	static const char *const names[TBC_DT_COUNT] = {
		[TBC_DT_F32] = "f32", [TBC_DT_U8] = "u8", [TBC_DT_I8] = "i8", [TBC_DT_U16] = "u16",
		[TBC_DT_I16] = "i16", [TBC_DT_I32] = "i32", [TBC_DT_I64] = "i64", [TBC_DT_BOOL] = "bool",
		[TBC_DT_F16] = "f16", [TBC_DT_F64] = "f64", [TBC_DT_U32] = "u32", [TBC_DT_U64] = "u64",
		[TBC_DT_BF16] = "bf16", [TBC_DT_F8E4M3FN] = "f8e4m3fn", [TBC_DT_F8E4M3FNUZ] = "f8e4m3fnuz",
		[TBC_DT_F8E5M2] = "f8e5m2", [TBC_DT_F8E5M2FNUZ] = "f8e5m2fnuz", [TBC_DT_U4] = "u4",
		[TBC_DT_I4] = "i4", [TBC_DT_F4E2M1] = "f4e2m1", [TBC_DT_F8E8M0] = "f8e8m0", [TBC_DT_U2] = "u2",
		[TBC_DT_I2] = "i2"};
	if ((int)t > 0 && (int)t < TBC_DT_COUNT && names[t]) return names[t];
	return "?";
}

const char *kir_unop_name(kir_unop op) {
	static const char *const names[KIR_UNOP_COUNT] = {
		"neg", "abs", "not", "sqrt", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
		"cosh", "tanh", "asinh", "acosh", "atanh", "erf", "floor", "ceil", "round_even", "trunc",
		"isnan", "isinf", "sign", "expm1", "log1p"};
	return (unsigned)op < KIR_UNOP_COUNT ? names[op] : "?";
}

const char *kir_binop_name(kir_binop op) {
	static const char *const names[KIR_BINOP_COUNT] = {"add", "sub", "mul", "div", "rem", "floordiv",
							   "floormod", "min", "max", "pow", "and", "or",
							   "xor", "shl", "shr", "atan2"};
	return (unsigned)op < KIR_BINOP_COUNT ? names[op] : "?";
}

static const char *cmp_name(int op) {
	static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
	return op >= 0 && op <= KIR_GE ? names[op] : "?";
}

static const char *loop_name(kir_loop_kind l) {
	return l == KIR_LOOP_PARALLEL ? "parallel" : l == KIR_LOOP_VECTOR ? "vector" : l == KIR_LOOP_GRID ? "grid" : "sequential";
}

static const char *role_name(kir_buffer_role r) {
	switch (r) {
	case KIR_BUF_INPUT: return "input";
	case KIR_BUF_OUTPUT: return "output";
	case KIR_BUF_CONST: return "const";
	case KIR_BUF_TEMP: return "temp";
	case KIR_BUF_SYMS: return "syms";
	}
	return "?";
}

/* ---- Printer -------------------------------------------------------------*/
typedef struct out {
	char *s;
	size_t len, cap;
	bool failed;
	bool canonical; /* kir_print_canonical: buffers by position, no kernel name */
} out;

/* A buffer as printed: its name, or its place in the kernel's list. */
static void put_buf(out *o, const kir_buffer *b);

__attribute__((format(printf, 2, 3))) static void put(out *o, const char *fmt, ...) {
	if (o->failed) return;
	va_list ap;
	va_start(ap, fmt);
	char tmp[256];
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0) {
		o->failed = true;
		return;
	}
	if (o->len + (size_t)n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 1024;
		while (cap < o->len + (size_t)n + 1) cap *= 2;
		char *s = realloc(o->s, cap);
		if (!s) {
			o->failed = true;
			return;
		}
		o->s = s;
		o->cap = cap;
	}
	if ((size_t)n < sizeof tmp) {
		memcpy(o->s + o->len, tmp, (size_t)n + 1);
	} else {
		va_start(ap, fmt);
		vsnprintf(o->s + o->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	o->len += (size_t)n;
}

static bool is_infix(const kir_expr *e) {
	return e->kind == KIR_E_BINARY && e->type == KIR_INDEX &&
	       (e->op == KIR_ADD || e->op == KIR_SUB || e->op == KIR_MUL);
}

static void print_expr(out *o, const kir_kernel *k, const kir_expr *e, int prec);

static void print_float(out *o, double f) {
	char buf[64];
	snprintf(buf, sizeof buf, "%.17g", f);
	/* The shortest text that reads back the same double. */
	for (int p = 1; p <= 17; p++) {
		char t[64];
		snprintf(t, sizeof t, "%.*g", p, f);
		if (strtod(t, NULL) == f || f != f) {
			memcpy(buf, t, sizeof t);
			break;
		}
	}
	put(o, "%s", buf);
	if (!strpbrk(buf, ".eEn")) put(o, ".0");
}

/* prec: the binding strength the context needs (0 none, 1 +/-, 2 *): an
 * infix index expression binding more loosely gets parentheses. */
static void print_expr(out *o, const kir_kernel *k, const kir_expr *e, int prec) {
	if (!e) {
		put(o, "<null>");
		return;
	}
	switch (e->kind) {
	case KIR_E_INT:
		put(o, "%" PRId64, e->i);
		if (e->type != KIR_INDEX) put(o, ":%s", kir_type_name(e->type));
		return;
	case KIR_E_FLOAT:
		print_float(o, e->f);
		put(o, ":%s", kir_type_name(e->type));
		return;
	case KIR_E_VAR: put(o, "%%%s", e->var ? e->var->name : "?"); return;
	case KIR_E_SIZE:
		put(o, "$%s", e->size >= 0 && e->size < k->n_sizes ? k->size_names[e->size] : "?");
		return;
	case KIR_E_LOAD:
		put_buf(o, e->buf);
		put(o, "[");
		print_expr(o, k, e->a, 0);
		put(o, "]");
		return;
	case KIR_E_UNARY:
		put(o, "%s(", kir_unop_name((kir_unop)e->op));
		print_expr(o, k, e->a, 0);
		put(o, ")");
		return;
	case KIR_E_BINARY:
		if (is_infix(e)) {
			const char *sym = e->op == KIR_ADD ? "+" : e->op == KIR_SUB ? "-" : "*";
			int own = e->op == KIR_MUL ? 2 : 1;
			bool parens = own < prec;
			if (parens) put(o, "(");
			print_expr(o, k, e->a, own);
			put(o, " %s ", sym);
			print_expr(o, k, e->b, e->op == KIR_SUB ? 2 : own);
			if (parens) put(o, ")");
			return;
		}
		put(o, "%s(", kir_binop_name((kir_binop)e->op));
		print_expr(o, k, e->a, 0);
		put(o, ", ");
		print_expr(o, k, e->b, 0);
		put(o, ")");
		return;
	case KIR_E_CMP:
		put(o, "%s(", cmp_name(e->op));
		print_expr(o, k, e->a, 0);
		put(o, ", ");
		print_expr(o, k, e->b, 0);
		put(o, ")");
		return;
	case KIR_E_SELECT:
		put(o, "select(");
		print_expr(o, k, e->a, 0);
		put(o, ", ");
		print_expr(o, k, e->b, 0);
		put(o, ", ");
		print_expr(o, k, e->c, 0);
		put(o, ")");
		return;
	case KIR_E_CAST:
		put(o, "%s%s(", kir_type_name(e->type),
		    e->op == KIR_CAST_NO_SATURATE ? ".nosat" : e->op == KIR_CAST_ANY_NAN ? ".anynan" : "");
		print_expr(o, k, e->a, 0);
		put(o, ")");
		return;
	case KIR_E_LOCAL_ID: put(o, "local_id(%d)", e->size); return;
	}
	put(o, "?");
}

/* The common part of a CPU register tile's line (dot2, dot4):
 * NAME [MR x NC] (%acc, ...) += a[row0, ...] * b[b_at */
static void print_cpu_tile(out *o, const kir_kernel *k, const char *name, int mr, int nc, struct kir_var *const *acc,
			   const kir_buffer *a, struct kir_expr *const *a_at, const kir_expr *a_step, const kir_buffer *b,
			   const kir_expr *b_at) {
	put(o, "%s [%d x %d] (", name, mr, nc);
	for (int i = 0; i < mr * nc; i++) put(o, "%s%%%s", i ? ", " : "", acc[i]->name);
	put(o, ") += ");
	put_buf(o, a);
	put(o, "[");
	for (int r = 0; r < mr; r++) {
		if (r) put(o, ", ");
		print_expr(o, k, a_at[r], 0);
	}
	if (a_step) {
		put(o, "; step ");
		print_expr(o, k, a_step, 0);
	}
	put(o, "] * ");
	put_buf(o, b);
	put(o, "[");
	print_expr(o, k, b_at, 0);
}

static void print_stmts(out *o, const kir_kernel *k, const kir_stmt *s, int depth) {
	for (; s; s = s->next) {
		for (int i = 0; i < depth; i++) put(o, "  ");
		switch (s->kind) {
		case KIR_S_FOR:
			put(o, "for %%%s = ", s->var ? s->var->name : "?");
			print_expr(o, k, s->lo, 0);
			put(o, " .. ");
			print_expr(o, k, s->hi, 0);
			if (s->step != 1) put(o, " step %" PRId64, s->step);
			put(o, " %s {\n", loop_name(s->loop));
			print_stmts(o, k, s->body, depth + 1);
			for (int i = 0; i < depth; i++) put(o, "  ");
			put(o, "}\n");
			break;
		case KIR_S_STORE:
			put_buf(o, s->buf);
			put(o, "[");
			print_expr(o, k, s->index, 0);
			put(o, "] = ");
			print_expr(o, k, s->value, 0);
			put(o, "\n");
			break;
		case KIR_S_SET:
			put(o, "%%%s:%s%s = ", s->var ? s->var->name : "?", s->var ? kir_type_name(s->var->type) : "?",
			    o->canonical && s->var && s->var->reassoc ? " reassoc" : "");
			print_expr(o, k, s->value, 0);
			put(o, "\n");
			break;
		case KIR_S_IF:
			put(o, "if ");
			print_expr(o, k, s->cond, 0);
			put(o, " {\n");
			print_stmts(o, k, s->body, depth + 1);
			for (int i = 0; i < depth; i++) put(o, "  ");
			if (s->orelse) {
				put(o, "} else {\n");
				print_stmts(o, k, s->orelse, depth + 1);
				for (int i = 0; i < depth; i++) put(o, "  ");
			}
			put(o, "}\n");
			break;
		case KIR_S_ERROR:
			put(o, "error \"%s\" if ", s->message ? s->message : "");
			print_expr(o, k, s->cond, 0);
			put(o, "\n");
			break;
		case KIR_S_BARRIER: put(o, "barrier\n"); break;
		case KIR_S_MMA: {
			const kir_mma *m = s->mma;
			put(o, "mma.m16n8k16 [%d x %d] (", m->mi, m->ni);
			for (int i = 0; i < m->mi * m->ni * 4; i++) put(o, "%s%%%s", i ? ", " : "", m->acc[i]->name);
			put(o, ") += ");
			put_buf(o, m->a);
			put(o, "[");
			print_expr(o, k, m->a_at, 0);
			put(o, "; %" PRId64 "] * ", m->lda);
			put_buf(o, m->b);
			put(o, "[");
			print_expr(o, k, m->b_at, 0);
			put(o, "; %" PRId64 "]\n", m->ldb);
			break;
		}
		case KIR_S_DOT2: {
			const kir_dot2 *m = s->dot2;
			print_cpu_tile(o, k, "dot2.bf16", m->mr, 16 * m->nv, m->acc, m->a, m->a_at, NULL, m->b, m->b_at);
			put(o, "; pairs ");
			print_expr(o, k, m->ldb, 0);
			put(o, "] over ");
			print_expr(o, k, m->kn, 0);
			put(o, "\n");
			break;
		}
		case KIR_S_TILE2: {
			const kir_tile2 *m = s->tile2;
			put(o, "tile2.%s [%d x %d] (%%%s .. %%%s) += ", kir_type_name(m->a->dtype), 16 * m->mt, 16 * m->nt, m->acc[0]->name,
			    m->acc[256 * m->mt * m->nt - 1]->name);
			put_buf(o, m->a);
			put(o, "[");
			print_expr(o, k, m->a_at, 0);
			put(o, "; rows ");
			print_expr(o, k, m->lda, 0);
			put(o, "] * ");
			put_buf(o, m->b);
			put(o, "[");
			print_expr(o, k, m->b_at, 0);
			put(o, kir_tile2_is_int8(m) ? "; groups " : "; pairs ");
			print_expr(o, k, m->ldb, 0);
			put(o, "] over %" PRId64 "\n", m->kn);
			break;
		}
		case KIR_S_DOT4: {
			const kir_dot4 *m = s->dot4;
			print_cpu_tile(o, k, "dot4", m->mr, m->nc, m->acc, m->a, m->a_at, NULL, m->b, m->b_at);
			put(o, "; %" PRId64 "] over ", m->ldb);
			print_expr(o, k, m->groups, 0);
			put(o, "\n");
			break;
		}
		case KIR_S_FMA_TILE: {
			const kir_fma_tile *m = s->fma_tile;
			char name[16];
			snprintf(name, sizeof name, "fma.%s", kir_type_name(m->a->dtype));
			print_cpu_tile(o, k, name, m->mr, m->nc, m->acc, m->a, m->a_at, m->a_ks, m->b, m->b_at);
			put(o, "; ");
			print_expr(o, k, m->ldb, 0);
			put(o, "] over ");
			print_expr(o, k, m->klo, 0);
			put(o, " .. ");
			print_expr(o, k, m->khi, 0);
			if (m->y) {
				put(o, " from ");
				put_buf(o, m->y);
				put(o, "[");
				for (int r = 0; r < m->mr; r++) {
					if (r) put(o, ", ");
					print_expr(o, k, m->y_at[r], 0);
				}
				put(o, "] if ");
				print_expr(o, k, m->resume, 0);
			}
			put(o, "\n");
			break;
		}
		}
	}
}

static void put_buf(out *o, const kir_buffer *b) {
	if (!b) put(o, "?");
	else if (o->canonical) put(o, "%c%d", b->space == KIR_MEM_LOCAL ? 'l' : 'b', b->id);
	else put(o, "%s", b->name);
}

static char *print_kernel(const kir_kernel *k, bool canonical) {
	out o = {.canonical = canonical};
	put(&o, "kernel %s(", canonical ? "" : k->name);
	for (int i = 0; i < k->n_sizes; i++) put(&o, "%s$%s", i ? ", " : "", k->size_names[i]);
	put(&o, ")");
	for (int d = 0; d < k->group_dims; d++) put(&o, "%s%" PRId64, d ? ", " : " group(", k->group[d]);
	if (k->group_dims) put(&o, ")");
	put(&o, "%s {\n", k->contract ? " contract" : "");
	for (int i = 0; i < k->n_buffers + k->n_locals; i++) {
		const kir_buffer *b = i < k->n_buffers ? k->buffers[i] : k->locals[i - k->n_buffers];
		put(&o, "  %s ", b->space == KIR_MEM_LOCAL ? "local" : role_name(b->role));
		put_buf(&o, b);
		put(&o, ": %s[", kir_type_name(b->dtype));
		for (int d = 0; d < b->rank; d++) {
			if (d) put(&o, ", ");
			print_expr(&o, k, b->dims[d], 0);
		}
		put(&o, "]\n");
	}
	print_stmts(&o, k, k->body, 1);
	put(&o, "}\n");
	if (o.failed) {
		free(o.s);
		return NULL;
	}
	return o.s;
}

char *kir_print(const kir_kernel *k) { return print_kernel(k, false); }
char *kir_print_canonical(const kir_kernel *k) { return print_kernel(k, true); }

/* ---- Verifier ------------------------------------------------------------*/
typedef struct range {
	bool known;
	int64_t lo, hi; /* inclusive */
} range;

typedef struct vscope {
	const kir_var *var;
	range r;
	int loop_depth;   /* depth of parallel/vector loops enclosing its definition */
} vscope;

typedef struct verifier {
	const kir_kernel *k;
	tbc_diags *d;
	bool ok;
	vscope *scope;
	int n_scope, cap_scope;
	int par_depth;     /* parallel or vector loops around the current statement */
	bool in_vector;
	bool *is_loop_var; /* by var id */
	/* Grouped kernels: the grid loops of the nest (outermost first), whether
	 * the current statement runs per work-item, whether every item of a
	 * group reaches it alike, and the variables every item holds alike. */
	const kir_stmt *grid[3];
	int n_grid;
	bool in_group, uniform, has_barrier;
	int64_t lid_lo[3], lid_hi[3]; /* local_id ranges, narrowed inside `if`s testing them */
	bool *uniform_var; /* by var id */
} verifier;

__attribute__((format(printf, 2, 3))) static void verr(verifier *v, const char *fmt, ...) {
	v->ok = false;
	if (!v->d) return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbc_diags_add(v->d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "kernel %s: %s", v->k->name, msg);
}

static bool is_valid_type(tbc_dtype t) { return t == KIR_INDEX || tbc_dtype_supported(t); }
static bool is_intlike(tbc_dtype t) { return t == KIR_INDEX || tbc_dtype_is_int(t); }

static const vscope *find_scope(const verifier *v, const kir_var *var) {
	for (int i = v->n_scope - 1; i >= 0; i--)
		if (v->scope[i].var == var) return &v->scope[i];
	return NULL;
}

static bool push_scope(verifier *v, const kir_var *var, range r) {
	if (v->n_scope == v->cap_scope) {
		int cap = v->cap_scope ? v->cap_scope * 2 : 16;
		vscope *s = realloc(v->scope, (size_t)cap * sizeof *s);
		if (!s) {
			verr(v, "out of memory");
			return false;
		}
		v->scope = s;
		v->cap_scope = cap;
	}
	v->scope[v->n_scope++] = (vscope){var, r, v->par_depth};
	return true;
}

static int64_t sat_add(int64_t a, int64_t b) {
	if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
	if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
	return a + b;
}
static int64_t sat_mul(int64_t a, int64_t b) {
	int64_t r;
	if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
	return r;
}

/* Interval of an index expression, from the ranges of the loops around it. */
static range expr_range(const verifier *v, const kir_expr *e) {
	range u = {false, 0, 0};
	if (!e || e->type != KIR_INDEX) return u;
	switch (e->kind) {
	case KIR_E_INT: return (range){true, e->i, e->i};
	case KIR_E_VAR: {
		const vscope *s = find_scope(v, e->var);
		return s ? s->r : u;
	}
	case KIR_E_BINARY: {
		range a = expr_range(v, e->a), b = expr_range(v, e->b);
		if (!a.known || !b.known) return u;
		switch (e->op) {
		case KIR_ADD: return (range){true, sat_add(a.lo, b.lo), sat_add(a.hi, b.hi)};
		case KIR_SUB: return (range){true, sat_add(a.lo, -b.hi), sat_add(a.hi, -b.lo)};
		case KIR_MUL: {
			int64_t c[4] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo), sat_mul(a.hi, b.hi)};
			range r = {true, c[0], c[0]};
			for (int i = 1; i < 4; i++) {
				if (c[i] < r.lo) r.lo = c[i];
				if (c[i] > r.hi) r.hi = c[i];
			}
			return r;
		}
		case KIR_MIN: return (range){true, a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi};
		case KIR_MAX: return (range){true, a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
		case KIR_FLOORDIV:
			if (b.lo > 0 && b.lo == b.hi) return (range){true, floordiv64(a.lo, b.lo), floordiv64(a.hi, b.lo)};
			return u;
		case KIR_FLOORMOD:
			if (b.lo > 0) return (range){true, 0, b.hi - 1};
			return u;
		default: return u;
		}
	}
	case KIR_E_SELECT: {
		range a = expr_range(v, e->b), b = expr_range(v, e->c);
		if (!a.known || !b.known) return u;
		return (range){true, a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
	}
	case KIR_E_LOCAL_ID:
		if (e->size < 0 || e->size >= v->k->group_dims) return u;
		return (range){true, v->lid_lo[e->size], v->lid_hi[e->size]};
	default: return u;
	}
}

/* Whether every work-item of a group computes the same value: no loads,
 * no local_id, only variables every item holds alike. */
static bool is_uniform(const verifier *v, const kir_expr *e) {
	if (!e) return true;
	switch (e->kind) {
	case KIR_E_LOAD:
	case KIR_E_LOCAL_ID: return false;
	case KIR_E_VAR: return e->var && e->var->id >= 0 && e->var->id < v->k->n_vars && v->uniform_var[e->var->id];
	default: return is_uniform(v, e->a) && is_uniform(v, e->b) && is_uniform(v, e->c);
	}
}

/* Whether the host computes e from the sizes alone (a grid loop's bounds). */
static bool is_host_expr(const kir_expr *e) {
	if (!e) return true;
	if (e->kind == KIR_E_LOAD || e->kind == KIR_E_LOCAL_ID || e->kind == KIR_E_VAR) return false;
	return is_host_expr(e->a) && is_host_expr(e->b) && is_host_expr(e->c);
}

/* Element count of a buffer when its dims are constants, else -1. */
static int64_t static_numel(const kir_buffer *b) {
	int64_t n = 1;
	for (int d = 0; d < b->rank; d++) {
		int64_t x;
		if (!kir_e_const_index(b->dims[d], &x) || x < 0) return -1;
		n = sat_mul(n, x);
	}
	return n;
}

static void check_access(verifier *v, const kir_buffer *b, const kir_expr *index, const char *what) {
	bool local = b && b->space == KIR_MEM_LOCAL;
	if (!b || b->id < 0 || b->id >= (local ? v->k->n_locals : v->k->n_buffers) ||
	    (local ? v->k->locals : v->k->buffers)[b->id] != b) {
		verr(v, "%s of a buffer that is not the kernel's", what);
		return;
	}
	if (local && !v->in_group) verr(v, "%s of local buffer %s outside a work-group", what, b->name);
	if (!index || index->type != KIR_INDEX) {
		verr(v, "%s of %s: the index is not an index expression", what, b->name);
		return;
	}
	int64_t n = static_numel(b);
	range r = expr_range(v, index);
	if (n >= 0 && r.known && (r.lo < 0 || r.hi >= n))
		verr(v, "%s of %s: index in [%" PRId64 ", %" PRId64 "] is outside the buffer's %" PRId64 " elements",
		     what, b->name, r.lo, r.hi, n);
}

static void check_expr(verifier *v, const kir_expr *e);

static void need_type(verifier *v, const kir_expr *e, tbc_dtype t, const char *what) {
	if (e && e->type != t)
		verr(v, "%s is %s, expected %s", what, kir_type_name(e->type), kir_type_name(t));
}

static void check_expr(verifier *v, const kir_expr *e) {
	if (!e) {
		verr(v, "missing expression");
		return;
	}
	if (!is_valid_type(e->type)) {
		verr(v, "an expression has type %d, which the kernel IR does not know", (int)e->type);
		return;
	}
	switch (e->kind) {
	case KIR_E_INT:
		if (!is_intlike(e->type) && e->type != TBC_DT_BOOL)
			verr(v, "integer constant of type %s", kir_type_name(e->type));
		return;
	case KIR_E_FLOAT:
		if (!tbc_dtype_is_float(e->type)) verr(v, "float constant of type %s", kir_type_name(e->type));
		return;
	case KIR_E_VAR:
		if (!e->var || e->var->id < 0 || e->var->id >= v->k->n_vars || v->k->vars[e->var->id] != e->var)
			verr(v, "a variable that is not the kernel's");
		else if (!find_scope(v, e->var))
			verr(v, "%%%s is used where it is not defined", e->var->name);
		else if (e->type != e->var->type)
			verr(v, "%%%s is used as %s but is %s", e->var->name, kir_type_name(e->type),
			     kir_type_name(e->var->type));
		return;
	case KIR_E_SIZE:
		if (e->size < 0 || e->size >= v->k->n_sizes) verr(v, "size parameter %d does not exist", e->size);
		need_type(v, e, KIR_INDEX, "a size parameter");
		return;
	case KIR_E_LOAD:
		check_expr(v, e->a);
		check_access(v, e->buf, e->a, "load");
		if (e->buf && e->type != e->buf->dtype)
			verr(v, "load of %s has type %s, the buffer holds %s", e->buf->name, kir_type_name(e->type),
			     kir_type_name(e->buf->dtype));
		return;
	case KIR_E_UNARY: {
		check_expr(v, e->a);
		if (!e->a) return;
		tbc_dtype t = e->a->type;
		kir_unop op = (kir_unop)e->op;
		if ((unsigned)op >= KIR_UNOP_COUNT) {
			verr(v, "unknown unary op %d", e->op);
			return;
		}
		if (kir_type_is_narrow_float(t)) {
			verr(v, "%s on %s: narrow floats are only loaded, stored, selected and cast",
			     kir_unop_name(op), kir_type_name(t));
			return;
		}
		if (op == KIR_ISNAN || op == KIR_ISINF) {
			if (!tbc_dtype_is_float(t)) verr(v, "%s of %s", kir_unop_name(op), kir_type_name(t));
			need_type(v, e, TBC_DT_BOOL, kir_unop_name(op));
			return;
		}
		need_type(v, e, t, kir_unop_name(op));
		if (op == KIR_NOT) {
			if (tbc_dtype_is_float(t)) verr(v, "not of %s", kir_type_name(t));
		} else if (op == KIR_NEG || op == KIR_ABS || op == KIR_SIGN) {
			if (t == TBC_DT_BOOL) verr(v, "%s of bool", kir_unop_name(op));
		} else if (!tbc_dtype_is_float(t)) {
			verr(v, "%s of %s: needs a float", kir_unop_name(op), kir_type_name(t));
		}
		return;
	}
	case KIR_E_BINARY: {
		check_expr(v, e->a);
		check_expr(v, e->b);
		if (!e->a || !e->b) return;
		kir_binop op = (kir_binop)e->op;
		if ((unsigned)op >= KIR_BINOP_COUNT) {
			verr(v, "unknown binary op %d", e->op);
			return;
		}
		tbc_dtype t = e->a->type;
		if (e->b->type != t)
			verr(v, "%s of %s and %s", kir_binop_name(op), kir_type_name(t), kir_type_name(e->b->type));
		need_type(v, e, t, kir_binop_name(op));
		if (kir_type_is_narrow_float(t)) {
			verr(v, "%s on %s: narrow floats are only loaded, stored, selected and cast",
			     kir_binop_name(op), kir_type_name(t));
			return;
		}
		switch (op) {
		case KIR_AND:
		case KIR_OR:
		case KIR_XOR:
			if (tbc_dtype_is_float(t)) verr(v, "%s of %s", kir_binop_name(op), kir_type_name(t));
			break;
		case KIR_SHL:
		case KIR_SHR:
		case KIR_FLOORDIV:
		case KIR_FLOORMOD:
			if (!is_intlike(t)) verr(v, "%s of %s", kir_binop_name(op), kir_type_name(t));
			break;
		case KIR_ATAN2:
			if (!tbc_dtype_is_float(t)) verr(v, "%s of %s", kir_binop_name(op), kir_type_name(t));
			break;
		default:
			if (t == TBC_DT_BOOL) verr(v, "%s of bool", kir_binop_name(op));
			break;
		}
		return;
	}
	case KIR_E_CMP:
		check_expr(v, e->a);
		check_expr(v, e->b);
		if (!e->a || !e->b) return;
		if (e->op < KIR_EQ || e->op > KIR_GE) verr(v, "unknown comparison %d", e->op);
		if (e->a->type != e->b->type)
			verr(v, "%s of %s and %s", cmp_name(e->op), kir_type_name(e->a->type), kir_type_name(e->b->type));
		if (kir_type_is_narrow_float(e->a->type)) verr(v, "comparison of %s", kir_type_name(e->a->type));
		need_type(v, e, TBC_DT_BOOL, "a comparison");
		return;
	case KIR_E_SELECT:
		check_expr(v, e->a);
		check_expr(v, e->b);
		check_expr(v, e->c);
		if (!e->a || !e->b || !e->c) return;
		need_type(v, e->a, TBC_DT_BOOL, "the condition of select");
		if (e->b->type != e->c->type)
			verr(v, "select of %s and %s", kir_type_name(e->b->type), kir_type_name(e->c->type));
		need_type(v, e, e->b->type, "select");
		return;
	case KIR_E_CAST:
		check_expr(v, e->a);
		if (e->op == KIR_CAST_NO_SATURATE && !(tbc_dtype_is_float(e->type) && tbc_dtype_bits(e->type) <= 8))
			verr(v, "a cast without saturation to %s (float8 and f4 only)", kir_type_name(e->type));
		else if (e->op == KIR_CAST_ANY_NAN &&
			 !(kir_type_is_narrow_float(e->a->type) && (e->type == TBC_DT_F32 || e->type == TBC_DT_F64)))
			verr(v, "a cast with any NaN from %s to %s (narrow floats to f32 or f64 only)", kir_type_name(e->a->type),
			     kir_type_name(e->type));
		else if (e->op != 0 && e->op != KIR_CAST_NO_SATURATE && e->op != KIR_CAST_ANY_NAN)
			verr(v, "cast with unknown mode %d", e->op);
		return;
	case KIR_E_LOCAL_ID:
		need_type(v, e, KIR_INDEX, "local_id");
		if (!v->in_group) verr(v, "local_id outside a work-group");
		else if (e->size < 0 || e->size >= v->k->group_dims)
			verr(v, "local_id(%d) of a group of %d dims", e->size, v->k->group_dims);
		return;
	}
	verr(v, "unknown expression kind %d", (int)e->kind);
}

static void check_stmts(verifier *v, const kir_stmt *s);

/* One operand of an mma: a local f16 or bf16 buffer read from element at
 * over rows rows of pitch ld, cols columns. */
static void check_mma_operand(verifier *v, const kir_buffer *b, const kir_expr *at, int64_t ld, int64_t rows,
			      int64_t cols, const char *which) {
	check_expr(v, at);
	check_access(v, b, at, "mma operand");
	if (!b || !at) return;
	if (b->space != KIR_MEM_LOCAL) verr(v, "mma operand %s: %s is not a local buffer", which, b->name);
	if (b->dtype != TBC_DT_F16 && b->dtype != TBC_DT_BF16)
		verr(v, "mma operand %s: %s holds %s, not f16 or bf16", which, b->name, kir_type_name(b->dtype));
	if (ld <= 0 || ld % 8 || ld < cols) verr(v, "mma operand %s: row pitch %" PRId64 " (a multiple of 8, >= %" PRId64 ")", which, ld, cols);
	int64_t n = static_numel(b);
	range r = expr_range(v, at);
	int64_t last = sat_add(r.hi, sat_add(sat_mul(rows - 1, ld), cols - 1));
	if (n >= 0 && r.known && (r.lo < 0 || last >= n))
		verr(v, "mma operand %s: elements [%" PRId64 ", %" PRId64 "] of %s, outside its %" PRId64, which, r.lo, last,
		     b->name, n);
}

/* A dot2's operands: bf16 buffers, index expressions; f32 accumulators
 * defined before it.  (The evaluator checks every element it reads.) */
/* The accumulators of a register tile (mma, dot2, dot4): n of the kernel's
 * locals of one type, defined before the tile within its parallel or vector
 * loop and not loop variables; the tile leaves their ranges unknown. */
static void check_tile_acc(verifier *v, struct kir_var *const *acc, int n, tbc_dtype type, const char *what) {
	for (int i = 0; i < n; i++) {
		const kir_var *x = acc[i];
		if (!x || x->id < 0 || x->id >= v->k->n_vars || v->k->vars[x->id] != x) {
			verr(v, "%s: an accumulator that is not the kernel's", what);
			continue;
		}
		if (x->type != type)
			verr(v, "%s accumulator %%%s is %s, not %s", what, x->name, kir_type_name(x->type), kir_type_name(type));
		const vscope *prev = find_scope(v, x);
		if (!prev) verr(v, "%s accumulator %%%s is not defined before it", what, x->name);
		else if (v->is_loop_var[x->id]) verr(v, "%s accumulator %%%s is a loop variable", what, x->name);
		else if (prev->loop_depth < v->par_depth)
			verr(v, "%s accumulator %%%s is defined outside a parallel or vector loop", what, x->name);
		else v->scope[prev - v->scope].r.known = false;
	}
}

static void check_dot4(verifier *v, const kir_dot4 *m) {
	if (!m || !m->acc || !m->a || !m->b || m->mr < 1 || m->mr > KIR_DOT4_MAX_MR || m->nc < 16 || m->nc > 64 || m->nc % 16) {
		verr(v, "a malformed dot4");
		return;
	}
	if (m->a->dtype != TBC_DT_U8 && m->a->dtype != TBC_DT_I8)
		verr(v, "dot4 operand a: %s holds %s, not u8 or i8", m->a->name, kir_type_name(m->a->dtype));
	if (m->b->dtype != TBC_DT_I8) verr(v, "dot4 operand b: %s holds %s, not i8", m->b->name, kir_type_name(m->b->dtype));
	if (m->ldb < 4 * (int64_t)m->nc) verr(v, "dot4 operand b: %" PRId64 " elements between groups, fewer than 4 x %d", m->ldb, m->nc);
	for (int r = 0; r < m->mr; r++) {
		check_expr(v, m->a_at[r]);
		need_type(v, m->a_at[r], KIR_INDEX, "a dot4 row");
		check_access(v, m->a, m->a_at[r], "dot4 operand");
	}
	check_expr(v, m->b_at);
	need_type(v, m->b_at, KIR_INDEX, "a dot4 operand");
	check_access(v, m->b, m->b_at, "dot4 operand");
	check_expr(v, m->groups);
	need_type(v, m->groups, KIR_INDEX, "a dot4 depth");
	check_tile_acc(v, m->acc, m->mr * m->nc, TBC_DT_I32, "dot4");
}

static void check_dot2(verifier *v, const kir_dot2 *m) {
	if (!m || !m->a || !m->b || m->mr < 1 || m->mr > 8 || m->nv < 1 || m->nv > 4) {
		verr(v, "a malformed dot2");
		return;
	}
	if (m->a->dtype != TBC_DT_BF16 || m->b->dtype != TBC_DT_BF16)
		verr(v, "dot2 of %s by %s, not bf16", kir_type_name(m->a->dtype), kir_type_name(m->b->dtype));
	if (m->a->space != KIR_MEM_GLOBAL || m->b->space != KIR_MEM_GLOBAL) verr(v, "dot2 operand in local memory");
	if (v->in_group) verr(v, "dot2 inside a work-group");
	const kir_expr *ix[11] = {m->b_at, m->ldb, m->kn};
	for (int r = 0; r < m->mr; r++) ix[3 + r] = m->a_at[r];
	for (int i = 0; i < 3 + m->mr; i++) {
		check_expr(v, ix[i]);
		if (ix[i]) need_type(v, ix[i], KIR_INDEX, "a dot2 operand's index");
	}
	check_tile_acc(v, m->acc, m->mr * m->nv * 16, TBC_DT_F32, "dot2");
}

static void check_fma_tile(verifier *v, const kir_fma_tile *m) {
	if (!m || !m->acc || !m->a || !m->b || m->mr < 1 || m->mr > KIR_FMA_TILE_MAX_MR || m->nc < 1 ||
	    m->nc > KIR_FMA_TILE_MAX_NC) {
		verr(v, "a malformed fma tile");
		return;
	}
	tbc_dtype t = m->a->dtype;
	if ((t != TBC_DT_F32 && t != TBC_DT_F64) || m->b->dtype != t)
		verr(v, "fma tile of %s by %s, not f32 or f64 alike", kir_type_name(t), kir_type_name(m->b->dtype));
	if (m->a->space != KIR_MEM_GLOBAL || m->b->space != KIR_MEM_GLOBAL) verr(v, "fma tile operand in local memory");
	if (v->in_group) verr(v, "fma tile inside a work-group");
	if (!v->k->contract) verr(v, "fma tile in a kernel not marked contract (its products add with one rounding)");
	const kir_expr *ix[5 + KIR_FMA_TILE_MAX_MR] = {m->a_ks, m->ldb, m->klo, m->khi, m->b_at};
	for (int r = 0; r < m->mr; r++) ix[5 + r] = m->a_at[r];
	for (int i = 0; i < 5 + m->mr; i++) {
		check_expr(v, ix[i]);
		if (ix[i]) need_type(v, ix[i], KIR_INDEX, "an fma tile operand's index");
	}
	/* the elements of k = 0 (the evaluator checks every element it reads) */
	for (int r = 0; r < m->mr; r++) check_access(v, m->a, m->a_at[r], "fma tile operand");
	check_access(v, m->b, m->b_at, "fma tile operand");
	if (m->y) {
		if (m->y->dtype != t) verr(v, "fma tile resuming from %s sums of %s", kir_type_name(m->y->dtype), kir_type_name(t));
		if (m->y->space != KIR_MEM_GLOBAL) verr(v, "fma tile resuming from local memory");
		check_expr(v, m->resume);
		if (m->resume) need_type(v, m->resume, TBC_DT_BOOL, "an fma tile's resume condition");
		for (int r = 0; r < m->mr; r++) {
			check_expr(v, m->y_at[r]);
			check_access(v, m->y, m->y_at[r], "fma tile resume");
		}
	}
	check_tile_acc(v, m->acc, m->mr * m->nc, t, "fma tile");
}

static void check_tile2(verifier *v, const kir_tile2 *m) {
	if (!m || !m->a || !m->b || m->mt < 1 || m->mt > 2 || m->nt < 1 || m->nt > 2) {
		verr(v, "a malformed tile2");
		return;
	}
	bool int8 = kir_tile2_is_int8(m);
	if (int8 ? (m->a->dtype != TBC_DT_U8 && m->a->dtype != TBC_DT_I8) || m->b->dtype != TBC_DT_I8
		 : m->b->dtype != TBC_DT_BF16)
		verr(v, "tile2 of %s by %s, not bf16 by bf16 or u8/i8 by i8", kir_type_name(m->a->dtype),
		     kir_type_name(m->b->dtype));
	if (m->a->space != KIR_MEM_GLOBAL || m->b->space != KIR_MEM_GLOBAL) verr(v, "tile2 operand in local memory");
	if (v->in_group) verr(v, "tile2 inside a work-group");
	if (m->kn < 2 || m->kn % (int8 ? 4 : 2))
		verr(v, "tile2 over %" PRId64 " k values, not a multiple of %d", m->kn, int8 ? 4 : 2);
	const kir_expr *ix[4] = {m->a_at, m->lda, m->b_at, m->ldb};
	for (int i = 0; i < 4; i++) {
		check_expr(v, ix[i]);
		if (ix[i]) need_type(v, ix[i], KIR_INDEX, "a tile2 operand's index");
	}
	check_tile_acc(v, m->acc, 256 * m->mt * m->nt, int8 ? TBC_DT_I32 : TBC_DT_F32, "tile2");
}

static void check_mma(verifier *v, const kir_mma *m) {
	v->has_barrier = true; /* items leaving early would leave their warp short */
	if (!m || !m->acc || m->mi < 1 || m->ni < 1 || m->mi > 8 || m->ni > 8) {
		verr(v, "a malformed mma");
		return;
	}
	if (!v->k->contract) verr(v, "mma in a kernel not marked contract (its sums round as the device's do)");
	if (!v->in_group) verr(v, "mma outside a work-group");
	else if (!v->uniform) verr(v, "mma where the work-items of a group may not all reach it");
	if (kir_group_items(v->k) % 32) verr(v, "mma in a group of %" PRId64 " items, not whole warps of 32", kir_group_items(v->k));
	check_mma_operand(v, m->a, m->a_at, m->lda, 16 * (int64_t)m->mi, 16, "a");
	check_mma_operand(v, m->b, m->b_at, m->ldb, 16, 8 * (int64_t)m->ni, "b");
	if (m->a && m->b && m->a->dtype != m->b->dtype)
		verr(v, "mma of %s by %s", kir_type_name(m->a->dtype), kir_type_name(m->b->dtype));
	check_tile_acc(v, m->acc, m->mi * m->ni * 4, TBC_DT_F32, "mma");
}

static void check_stmt(verifier *v, const kir_stmt *s) {
	switch (s->kind) {
	case KIR_S_FOR: {
		check_expr(v, s->lo);
		check_expr(v, s->hi);
		need_type(v, s->lo, KIR_INDEX, "a loop's lower bound");
		need_type(v, s->hi, KIR_INDEX, "a loop's upper bound");
		if (!s->var || s->var->id < 0 || s->var->id >= v->k->n_vars || v->k->vars[s->var->id] != s->var) {
			verr(v, "a loop over a variable that is not the kernel's");
			return;
		}
		if (s->var->type != KIR_INDEX) verr(v, "loop variable %%%s is not an index", s->var->name);
		if (find_scope(v, s->var)) verr(v, "loop variable %%%s is already defined", s->var->name);
		if (s->step <= 0) verr(v, "loop over %%%s has step %" PRId64 ", not positive", s->var->name, s->step);
		if ((unsigned)s->loop > KIR_LOOP_GRID) verr(v, "loop over %%%s has an unknown kind", s->var->name);
		if (s->loop == KIR_LOOP_PARALLEL && v->in_vector)
			verr(v, "parallel loop over %%%s inside a vector loop", s->var->name);
		bool grid = s->loop == KIR_LOOP_GRID, grid_inner = false;
		if (grid) {
			int at = -1;
			for (int g = 0; g < v->n_grid; g++)
				if (v->grid[g] == s) at = g;
			if (at < 0) verr(v, "grid loop over %%%s is not in the kernel's grid nest", s->var->name);
			else if (!is_host_expr(s->lo) || !is_host_expr(s->hi))
				verr(v, "grid loop over %%%s: bounds must be computed from the sizes alone", s->var->name);
			grid_inner = at >= 0 && at == v->n_grid - 1;
		}
		range lo = expr_range(v, s->lo), hi = expr_range(v, s->hi);
		range r = {lo.known && hi.known, lo.lo, hi.hi - 1};
		if (!push_scope(v, s->var, r)) return;
		int saved = v->n_scope;
		bool par = s->loop == KIR_LOOP_PARALLEL || s->loop == KIR_LOOP_VECTOR, was_vector = v->in_vector;
		bool was_uniform = v->uniform;
		if (grid || (v->in_group && !par && v->uniform && is_uniform(v, s->lo) && is_uniform(v, s->hi)))
			v->uniform_var[s->var->id] = true;
		else v->uniform = false;
		if (grid_inner) v->in_group = v->uniform = true;
		if (par) v->par_depth++;
		if (s->loop == KIR_LOOP_VECTOR) v->in_vector = true;
		check_stmts(v, s->body);
		if (par) v->par_depth--;
		if (grid_inner) v->in_group = false;
		v->uniform = was_uniform;
		v->in_vector = was_vector;
		v->n_scope = saved - 1;
		return;
	}
	case KIR_S_STORE:
		check_expr(v, s->index);
		check_expr(v, s->value);
		check_access(v, s->buf, s->index, "store");
		if (s->buf && s->buf->space == KIR_MEM_GLOBAL && (s->buf->role == KIR_BUF_INPUT || s->buf->role == KIR_BUF_CONST))
			verr(v, "store to %s, which is read only", s->buf->name);
		if (s->buf && s->value && s->value->type != s->buf->dtype)
			verr(v, "store of %s into %s, which holds %s", kir_type_name(s->value->type), s->buf->name,
			     kir_type_name(s->buf->dtype));
		return;
	case KIR_S_SET: {
		check_expr(v, s->value);
		if (!s->var || s->var->id < 0 || s->var->id >= v->k->n_vars || v->k->vars[s->var->id] != s->var) {
			verr(v, "a set of a variable that is not the kernel's");
			return;
		}
		if (v->is_loop_var[s->var->id]) verr(v, "%%%s is a loop variable and cannot be set", s->var->name);
		if (s->value && s->value->type != s->var->type)
			verr(v, "%%%s is %s but is set to %s", s->var->name, kir_type_name(s->var->type),
			     kir_type_name(s->value->type));
		const vscope *prev = find_scope(v, s->var);
		if (prev && prev->loop_depth < v->par_depth)
			verr(v, "%%%s is defined outside a parallel or vector loop and set inside it", s->var->name);
		if (!prev) push_scope(v, s->var, expr_range(v, s->value));
		else v->scope[prev - v->scope].r.known = false; /* set again (a counter): any value from here on */
		return;
	}
	case KIR_S_IF: {
		check_expr(v, s->cond);
		need_type(v, s->cond, TBC_DT_BOOL, "the condition of if");
		int saved = v->n_scope;
		bool was_uniform = v->uniform;
		if (!is_uniform(v, s->cond)) v->uniform = false;
		/* `if lt(local_id(d), n)` / `if eq(local_id(d), n)`: the body's items
		 * have local_id(d) < n / == n (the tree steps of a reduction). */
		int64_t lo[3], hi[3];
		memcpy(lo, v->lid_lo, sizeof lo);
		memcpy(hi, v->lid_hi, sizeof hi);
		const kir_expr *c = s->cond;
		if (c && c->kind == KIR_E_CMP && c->a && c->a->kind == KIR_E_LOCAL_ID && c->a->size >= 0 && c->a->size < 3) {
			range n = expr_range(v, c->b);
			int dd = c->a->size;
			if (n.known && c->op == KIR_LT && n.hi - 1 < v->lid_hi[dd]) v->lid_hi[dd] = n.hi - 1;
			if (n.known && c->op == KIR_EQ && n.lo == n.hi) v->lid_lo[dd] = v->lid_hi[dd] = n.lo;
		}
		check_stmts(v, s->body);
		memcpy(v->lid_lo, lo, sizeof lo);
		memcpy(v->lid_hi, hi, sizeof hi);
		v->n_scope = saved;
		check_stmts(v, s->orelse);
		v->n_scope = saved;
		v->uniform = was_uniform;
		return;
	}
	case KIR_S_BARRIER:
		v->has_barrier = true;
		if (!v->in_group) verr(v, "barrier outside a work-group");
		else if (!v->uniform) verr(v, "barrier where the work-items of a group may not all reach it");
		return;
	case KIR_S_ERROR:
		check_expr(v, s->cond);
		need_type(v, s->cond, TBC_DT_BOOL, "the condition of error");
		if (!s->message) verr(v, "error without a message");
		return;
	case KIR_S_MMA: check_mma(v, s->mma); return;
	case KIR_S_DOT2: check_dot2(v, s->dot2); return;
	case KIR_S_TILE2: check_tile2(v, s->tile2); return;
	case KIR_S_DOT4: check_dot4(v, s->dot4); return;
	case KIR_S_FMA_TILE: check_fma_tile(v, s->fma_tile); return;
	}
	verr(v, "unknown statement kind %d", (int)s->kind);
}

static void check_stmts(verifier *v, const kir_stmt *s) {
	for (; s; s = s->next) check_stmt(v, s);
}

static void mark_loop_vars(verifier *v, const kir_stmt *s) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_FOR && s->var && s->var->id >= 0 && s->var->id < v->k->n_vars) {
			v->is_loop_var[s->var->id] = true;
			mark_loop_vars(v, s->body);
		} else if (s->kind == KIR_S_IF) {
			mark_loop_vars(v, s->body);
			mark_loop_vars(v, s->orelse);
		}
	}
}

/* A grouped kernel's body is a nest of 1-3 grid loops and nothing else. */
static void find_grid_nest(verifier *v) {
	const kir_kernel *k = v->k;
	if (!kir_kernel_is_grouped(k)) return;
	if (k->group_dims > 3) verr(v, "a work-group of %d dims", k->group_dims);
	for (const kir_stmt *s = k->body; s && s->kind == KIR_S_FOR && s->loop == KIR_LOOP_GRID && !s->next; s = s->body) {
		if (v->n_grid == 3) {
			verr(v, "more than 3 grid loops");
			return;
		}
		if (s->step != 1) verr(v, "grid loop over %%%s has step %" PRId64 ", not 1", s->var ? s->var->name : "?", s->step);
		v->grid[v->n_grid++] = s;
	}
	if (!v->n_grid) verr(v, "a grouped kernel's body is not a nest of grid loops");
}

static void check_locals(verifier *v) {
	const kir_kernel *k = v->k;
	if (k->n_locals && !kir_kernel_is_grouped(k)) verr(v, "local buffers in a kernel without work-groups");
	for (int d = 0; d < k->group_dims && d < 3; d++)
		if (k->group[d] < 1) verr(v, "work-group dim %d has %" PRId64 " items", d, k->group[d]);
	for (int i = 0; i < k->n_locals; i++) {
		const kir_buffer *b = k->locals[i];
		if (b->id != i || b->space != KIR_MEM_LOCAL) verr(v, "local buffer %s has id %d at position %d", b->name, b->id, i);
		if (!tbc_dtype_supported(b->dtype)) verr(v, "local buffer %s has an unknown dtype", b->name);
		if (static_numel(b) < 1) verr(v, "local buffer %s has no static size", b->name);
		for (int j = 0; j < k->n_buffers; j++)
			if (!strcmp(k->buffers[j]->name, b->name)) verr(v, "two buffers are named %s", b->name);
		for (int j = 0; j < i; j++)
			if (!strcmp(k->locals[j]->name, b->name)) verr(v, "two buffers are named %s", b->name);
	}
}

bool kir_verify(const kir_kernel *k, tbc_diags *d) {
	verifier v = {.k = k, .d = d, .ok = true};
	if (k->failed) verr(&v, "building ran out of memory");
	for (int i = 0; i < k->n_buffers; i++) {
		const kir_buffer *b = k->buffers[i];
		if (b->id != i) verr(&v, "buffer %s has id %d at position %d", b->name, b->id, i);
		if (!tbc_dtype_supported(b->dtype)) verr(&v, "buffer %s has an unknown dtype", b->name);
		for (int j = 0; j < i; j++)
			if (!strcmp(k->buffers[j]->name, b->name)) verr(&v, "two buffers are named %s", b->name);
		for (int dd = 0; dd < b->rank; dd++) {
			check_expr(&v, b->dims[dd]);
			need_type(&v, b->dims[dd], KIR_INDEX, "a buffer dim");
		}
	}
	check_locals(&v);
	for (int dd = 0; dd < 3; dd++) v.lid_hi[dd] = dd < k->group_dims ? k->group[dd] - 1 : 0;
	v.is_loop_var = calloc((size_t)k->n_vars + 1, sizeof(bool));
	v.uniform_var = calloc((size_t)k->n_vars + 1, sizeof(bool));
	if (!v.is_loop_var || !v.uniform_var) {
		free(v.is_loop_var);
		free(v.uniform_var);
		verr(&v, "out of memory");
		return false;
	}
	mark_loop_vars(&v, k->body);
	find_grid_nest(&v);
	check_stmts(&v, k->body);
	if (v.has_barrier && kir_kernel_can_fail(k))
		verr(&v, "a kernel with barriers has error checks (an item leaving early would never reach them)");
	free(v.is_loop_var);
	free(v.uniform_var);
	free(v.scope);
	return v.ok;
}
