/* Polynomials over symbol names: the arithmetic of derived dims, their
 * canonical text and its parser (ir/symdim.h, docs/symbolic-shapes.md).
 * Canonical text is what makes two derivations of one size the same dim, so
 * everything here keeps terms merged and sorted after every operation. */
#include "symdim.h"

#include <stdio.h>
#include <string.h>

void tbc_poly_const(tbc_poly *p, int64_t c) {
	memset(p, 0, offsetof(tbc_poly, pool));
	p->pool[0] = 0;
	if (c) {
		p->n_terms = 1;
		p->terms[0].coeff = c;
	}
}

static int intern(tbc_poly *p, const char *name) {
	for (int i = 0; i < p->n_atoms; i++)
		if (!strcmp(tbc_poly_atom_name(p, i), name)) return i;
	size_t len = strlen(name);
	if (p->n_atoms == TBC_POLY_MAX_ATOMS || !len || (size_t)p->pool_used + len + 1 > TBC_POLY_POOL) return -1;
	memcpy(p->pool + p->pool_used, name, len + 1);
	p->atom_off[p->n_atoms] = (uint16_t)p->pool_used;
	p->pool_used += (int)len + 1;
	return p->n_atoms++;
}

/* Orders monomials given by their sorted names: higher degree first, then
 * name by name. */
static int cmp_names(int da, const char *const *a, int db, const char *const *b) {
	if (da != db) return da > db ? -1 : 1;
	for (int i = 0; i < da; i++) {
		int c = strcmp(a[i], b[i]);
		if (c) return c;
	}
	return 0;
}

static void term_names(const tbc_poly *p, const tbc_poly_term *t, const char **names) {
	for (int i = 0; i < t->degree; i++) names[i] = tbc_poly_atom_name(p, t->atoms[i]);
}

/* p += coeff * (product of names); names need not be sorted. */
static bool add_term(tbc_poly *p, int64_t coeff, int degree, const char **names) {
	if (degree > TBC_POLY_MAX_DEGREE) return false;
	if (!coeff) return true;
	const char *sorted[TBC_POLY_MAX_DEGREE];
	for (int i = 0; i < degree; i++) {
		int j = i;
		while (j > 0 && strcmp(sorted[j - 1], names[i]) > 0) {
			sorted[j] = sorted[j - 1];
			j--;
		}
		sorted[j] = names[i];
	}
	int at = 0;
	for (; at < p->n_terms; at++) {
		const char *tn[TBC_POLY_MAX_DEGREE];
		term_names(p, &p->terms[at], tn);
		int c = cmp_names(degree, sorted, p->terms[at].degree, tn);
		if (c < 0) break;
		if (c == 0) {
			int64_t sum;
			if (__builtin_add_overflow(p->terms[at].coeff, coeff, &sum) || sum == INT64_MIN) return false;
			if (sum) {
				p->terms[at].coeff = sum;
			} else {
				memmove(&p->terms[at], &p->terms[at + 1], (size_t)(p->n_terms - at - 1) * sizeof *p->terms);
				p->n_terms--;
			}
			return true;
		}
	}
	if (p->n_terms == TBC_POLY_MAX_TERMS || coeff == INT64_MIN) return false;
	tbc_poly_term t = {.coeff = coeff, .degree = degree};
	for (int i = 0; i < degree; i++) {
		int a = intern(p, sorted[i]);
		if (a < 0) return false;
		t.atoms[i] = (uint8_t)a;
	}
	memmove(&p->terms[at + 1], &p->terms[at], (size_t)(p->n_terms - at) * sizeof *p->terms);
	p->terms[at] = t;
	p->n_terms++;
	return true;
}

bool tbc_poly_atom(tbc_poly *p, const char *name) {
	tbc_poly_const(p, 0);
	return add_term(p, 1, 1, &name);
}

bool tbc_poly_add(const tbc_poly *a, const tbc_poly *b, int64_t sign, tbc_poly *out) {
	tbc_poly r = *a;
	for (int i = 0; i < b->n_terms; i++) {
		const char *n[TBC_POLY_MAX_DEGREE];
		term_names(b, &b->terms[i], n);
		int64_t c;
		if (__builtin_mul_overflow(b->terms[i].coeff, sign, &c) || !add_term(&r, c, b->terms[i].degree, n))
			return false;
	}
	*out = r;
	return true;
}

bool tbc_poly_mul(const tbc_poly *a, const tbc_poly *b, tbc_poly *out) {
	tbc_poly r;
	tbc_poly_const(&r, 0);
	for (int i = 0; i < a->n_terms; i++)
		for (int j = 0; j < b->n_terms; j++) {
			const tbc_poly_term *ta = &a->terms[i], *tb = &b->terms[j];
			if (ta->degree + tb->degree > TBC_POLY_MAX_DEGREE) return false;
			const char *n[TBC_POLY_MAX_DEGREE];
			term_names(a, ta, n);
			term_names(b, tb, n + ta->degree);
			int64_t c;
			if (__builtin_mul_overflow(ta->coeff, tb->coeff, &c) || !add_term(&r, c, ta->degree + tb->degree, n))
				return false;
		}
	*out = r;
	return true;
}

bool tbc_poly_is_const(const tbc_poly *p, int64_t *c) {
	if (p->n_terms > 1 || (p->n_terms == 1 && p->terms[0].degree)) return false;
	*c = p->n_terms ? p->terms[0].coeff : 0;
	return true;
}

bool tbc_poly_eq(const tbc_poly *a, const tbc_poly *b) {
	if (a->n_terms != b->n_terms) return false;
	for (int i = 0; i < a->n_terms; i++) {
		const char *na[TBC_POLY_MAX_DEGREE], *nb[TBC_POLY_MAX_DEGREE];
		term_names(a, &a->terms[i], na);
		term_names(b, &b->terms[i], nb);
		if (a->terms[i].coeff != b->terms[i].coeff ||
		    cmp_names(a->terms[i].degree, na, b->terms[i].degree, nb))
			return false;
	}
	return true;
}

bool tbc_poly_nonneg(const tbc_poly *p) {
	for (int i = 0; i < p->n_terms; i++)
		if (p->terms[i].coeff < 0) return false;
	return true;
}

bool tbc_poly_div_exact(const tbc_poly *a, const tbc_poly *b, tbc_poly *out) {
	if (!b->n_terms) return false;
	if (b->n_terms == 1) {
		const tbc_poly_term *tb = &b->terms[0];
		const char *nb[TBC_POLY_MAX_DEGREE];
		term_names(b, tb, nb);
		tbc_poly r;
		tbc_poly_const(&r, 0);
		for (int i = 0; i < a->n_terms; i++) {
			const tbc_poly_term *ta = &a->terms[i];
			if (ta->coeff % tb->coeff) return false;
			const char *n[TBC_POLY_MAX_DEGREE];
			term_names(a, ta, n);
			int left = ta->degree;
			for (int k = 0; k < tb->degree; k++) {
				int j = 0;
				while (j < left && strcmp(n[j], nb[k])) j++;
				if (j == left) return false; /* an atom of b this term lacks */
				n[j] = n[--left];
			}
			if (!add_term(&r, ta->coeff / tb->coeff, left, n)) return false;
		}
		*out = r;
		return true;
	}
	/* a = k*b for a constant k: the leading terms give k. */
	if (!a->n_terms || a->terms[0].coeff % b->terms[0].coeff) return false;
	tbc_poly k, kb;
	tbc_poly_const(&k, a->terms[0].coeff / b->terms[0].coeff);
	if (!tbc_poly_mul(&k, b, &kb) || !tbc_poly_eq(&kb, a)) return false;
	*out = k;
	return true;
}

/* ---- Text --------------------------------------------------------------- */
static bool bare_atom(const char *s) {
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return false;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' ||
		      *s == '.'))
			return false;
	return true;
}

typedef struct sbuf {
	char *p;
	size_t size, used;
	bool ok;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
	if (!b->ok || b->used + n >= b->size) {
		b->ok = false;
		return;
	}
	memcpy(b->p + b->used, s, n);
	b->used += n;
	b->p[b->used] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_atom(sbuf *b, const char *s) {
	if (bare_atom(s)) {
		puts_(b, s);
		return;
	}
	put(b, "\"", 1);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\') put(b, "\\", 1);
		put(b, s, 1);
	}
	put(b, "\"", 1);
}

bool tbc_poly_print(const tbc_poly *p, char *buf, size_t size) {
	sbuf b = {buf, size, 0, size > 0};
	if (size) buf[0] = 0;
	if (!p->n_terms) puts_(&b, "0");
	for (int i = 0; i < p->n_terms; i++) {
		const tbc_poly_term *t = &p->terms[i];
		int64_t c = t->coeff;
		if (i) puts_(&b, c < 0 ? " - " : " + ");
		else if (c < 0) puts_(&b, "-");
		uint64_t mag = c < 0 ? (uint64_t)0 - (uint64_t)c : (uint64_t)c;
		char num[32];
		if (!t->degree || mag != 1) {
			snprintf(num, sizeof num, "%llu%s", (unsigned long long)mag, t->degree ? "*" : "");
			puts_(&b, num);
		}
		for (int k = 0; k < t->degree; k++) {
			if (k) puts_(&b, "*");
			put_atom(&b, tbc_poly_atom_name(p, t->atoms[k]));
		}
	}
	return b.ok;
}

static void skip_spaces(const char **s) {
	while (**s == ' ') (*s)++;
}

/* One factor: an integer (multiplied into *coeff) or an atom (appended). */
static bool parse_factor(const char **s, int64_t *coeff, char names[][TBC_POLY_POOL], int *degree) {
	skip_spaces(s);
	const char *q = *s;
	if (*q >= '0' && *q <= '9') {
		int64_t v = 0;
		for (; *q >= '0' && *q <= '9'; q++)
			if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *q - '0', &v)) return false;
		*s = q;
		return !__builtin_mul_overflow(*coeff, v, coeff);
	}
	if (*degree == TBC_POLY_MAX_DEGREE) return false;
	char *out = names[*degree];
	size_t n = 0;
	if (*q == '"') {
		for (q++; *q && *q != '"'; q++) {
			if (*q == '\\' && (q[1] == '"' || q[1] == '\\')) q++;
			if (n + 1 >= TBC_POLY_POOL) return false;
			out[n++] = *q;
		}
		if (*q != '"') return false;
		q++;
	} else {
		while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_' ||
		       *q == '.') {
			if (n + 1 >= TBC_POLY_POOL) return false;
			out[n++] = *q++;
		}
	}
	out[n] = 0;
	if (!n) return false;
	(*degree)++;
	*s = q;
	return true;
}

bool tbc_poly_parse(const char *text, tbc_poly *p) {
	tbc_poly_const(p, 0);
	const char *s = text;
	int64_t sign = 1;
	skip_spaces(&s);
	if (*s == '-') {
		sign = -1;
		s++;
	}
	for (;;) {
		int64_t coeff = sign;
		char names[TBC_POLY_MAX_DEGREE][TBC_POLY_POOL];
		int degree = 0;
		if (!parse_factor(&s, &coeff, names, &degree)) return false;
		skip_spaces(&s);
		while (*s == '*') {
			s++;
			if (!parse_factor(&s, &coeff, names, &degree)) return false;
			skip_spaces(&s);
		}
		const char *n[TBC_POLY_MAX_DEGREE];
		for (int i = 0; i < degree; i++) n[i] = names[i];
		if (!add_term(p, coeff, degree, n)) return false;
		if (!*s) return true;
		if (*s != '+' && *s != '-') return false;
		sign = *s == '-' ? -1 : 1;
		s++;
	}
}

/* Whether p, parsed from sym, is a compound polynomial whose canonical text
 * is sym itself (a plain name such as `batch-size` parses as a difference
 * but is not written that way, so it stays one atom). */
static bool derived_parse(const char *sym, tbc_poly *p) {
	if (!tbc_poly_parse(sym, p)) return false;
	int64_t c;
	if (tbc_poly_is_const(p, &c)) return false;
	if (p->n_terms == 1 && p->terms[0].degree == 1 && p->terms[0].coeff == 1) return false;
	char buf[TBC_POLY_POOL * 2];
	return tbc_poly_print(p, buf, sizeof buf) && !strcmp(buf, sym);
}

bool tbc_sym_is_derived(const char *sym) {
	tbc_poly p;
	return sym && derived_parse(sym, &p);
}

bool tbc_poly_of_sym(const char *sym, tbc_poly *p) {
	if (derived_parse(sym, p)) return true;
	return tbc_poly_atom(p, sym);
}

bool tbc_poly_of_dim(tbc_dim d, tbc_poly *p) {
	if (d.sym) return tbc_poly_of_sym(d.sym, p);
	if (d.size < 0) return false;
	tbc_poly_const(p, d.size);
	return true;
}

bool tbc_poly_eval(const tbc_poly *p, bool (*lookup)(void *ctx, const char *atom, int64_t *value), void *ctx,
		   int64_t *out) {
	int64_t sum = 0;
	for (int i = 0; i < p->n_terms; i++) {
		int64_t t = p->terms[i].coeff;
		for (int k = 0; k < p->terms[i].degree; k++) {
			int64_t v;
			if (!lookup(ctx, tbc_poly_atom_name(p, p->terms[i].atoms[k]), &v) || __builtin_mul_overflow(t, v, &t))
				return false;
		}
		if (__builtin_add_overflow(sum, t, &sum)) return false;
	}
	*out = sum;
	return true;
}

/* ---- Dims ---------------------------------------------------------------- */
tbc_dim tbc_dim_of_poly(tbc_module *m, const tbc_poly *p) {
	int64_t c;
	if (tbc_poly_is_const(p, &c)) return c >= 0 ? (tbc_dim){c, NULL} : (tbc_dim){-1, NULL};
	const char *name;
	char buf[TBC_POLY_POOL * 2];
	if (p->n_terms == 1 && p->terms[0].degree == 1 && p->terms[0].coeff == 1)
		name = tbc_poly_atom_name(p, p->terms[0].atoms[0]);
	else if (tbc_poly_print(p, buf, sizeof buf)) name = buf;
	else return (tbc_dim){-1, NULL};
	const char *s = tbc_arena_strdup(m->arena, name);
	return s ? (tbc_dim){-1, s} : (tbc_dim){-1, NULL};
}

tbc_dim tbc_dim_add(tbc_module *m, tbc_dim a, tbc_dim b, int64_t sign) {
	tbc_poly pa, pb, r;
	if (!tbc_poly_of_dim(a, &pa) || !tbc_poly_of_dim(b, &pb) || !tbc_poly_add(&pa, &pb, sign, &r))
		return (tbc_dim){-1, NULL};
	return tbc_dim_of_poly(m, &r);
}

tbc_dim tbc_dim_mul(tbc_module *m, tbc_dim a, tbc_dim b) {
	tbc_poly pa, pb, r;
	if (!tbc_poly_of_dim(a, &pa) || !tbc_poly_of_dim(b, &pb) || !tbc_poly_mul(&pa, &pb, &r)) return (tbc_dim){-1, NULL};
	return tbc_dim_of_poly(m, &r);
}

tbc_dim tbc_dim_div_exact(tbc_module *m, tbc_dim a, tbc_dim b) {
	tbc_poly pa, pb, r;
	if (!tbc_poly_of_dim(a, &pa) || !tbc_poly_of_dim(b, &pb) || !tbc_poly_div_exact(&pa, &pb, &r))
		return (tbc_dim){-1, NULL};
	return tbc_dim_of_poly(m, &r);
}
