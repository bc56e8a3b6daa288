/* The text form's parser (grammar in docs/ir.md).  It builds the module with
 * the builder of ir/graph.c.  Names resolve lexically: a reference sees the
 * values defined before it in its own graph and in the graphs around it,
 * and a subgraph's names end with the subgraph.  Any input is safe: errors
 * stop at the first one, name file:line:col, and free everything. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symdim.h"
#include "text.h"

typedef enum tkind { T_EOF, T_PUNCT, T_IDENT, T_STRING, T_NUMBER, T_HEX, T_VALUE, T_ERROR } tkind;

typedef struct token {
	tkind kind;
	int line, col;
	const char *p; /* raw text: ident, number, hex digits, anonymous value digits */
	size_t n;
	char punct;
	char *str; /* T_STRING, named T_VALUE: decoded bytes (arena, NUL-terminated) */
	size_t str_len;
	bool anon; /* T_VALUE written %<digits> */
} token;

/* Symbol table: key -> value, one entry per visible name (no shadowing). */
typedef struct sym {
	struct sym *next;
	tbc_value *v;
	int line;
	char key[]; /* 'n' + name, or 'a' + digits */
} sym;

typedef struct parser {
	const char *src, *pos;
	int line;
	const char *line_start;
	const char *filename;
	tbc_diags *d;
	tbc_module *m;
	token tok;
	bool failed;
	int depth;
	sym **slots;
	size_t n_slots;
	sym **defs; /* definition order, for popping a graph's names */
	size_t n_defs, cap_defs;
} parser;

static bool fail(parser *P, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool fail(parser *P, int line, int col, const char *fmt, ...) {
	if (P->failed) return false;
	P->failed = true;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tbc_diags_add(P->d, TBC_ERR_INVALID_MODEL, NULL, NULL, NULL, NULL, "%s:%d:%d: %s",
		      P->filename ? P->filename : "<input>", line, col, msg);
	return false;
}

#define FAIL_AT(t, ...) fail(P, (t)->line, (t)->col, __VA_ARGS__)
#define FAIL(...) FAIL_AT(&P->tok, __VA_ARGS__)

static void *alloc(parser *P, size_t n) {
	void *p = tbc_arena_alloc(P->m->arena, n);
	if (!p) FAIL("out of memory");
	return p;
}

/* ---- Lexer ---- */
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_hex(int c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static int hex_val(int c) { return is_digit(c) ? c - '0' : (c | 32) - 'a' + 10; }

/* Decodes the quoted string starting at P->pos (on the opening quote). */
static bool lex_string(parser *P, token *t) {
	const char *s = ++P->pos;
	size_t n = 0;
	/* First pass: find the end and the decoded length. */
	const char *q = s;
	for (;;) {
		unsigned char c = (unsigned char)*q;
		if (c == 0 || c == '\n') return fail(P, t->line, t->col, "unterminated string");
		if (c == '"') break;
		if (c == '\\') {
			char e = q[1];
			if (e == 'x') {
				if (!is_hex((unsigned char)q[2]) || !is_hex((unsigned char)q[3]))
					return fail(P, P->line, (int)(q - P->line_start) + 1, "\\x needs two hex digits");
				q += 4;
			} else if (e == '"' || e == '\\' || e == 'n' || e == 't' || e == 'r') {
				q += 2;
			} else {
				return fail(P, P->line, (int)(q - P->line_start) + 1, "unknown escape in string");
			}
		} else {
			q++;
		}
		n++;
	}
	char *out = alloc(P, n + 1);
	if (!out) return false;
	size_t k = 0;
	for (const char *r = s; r < q;) {
		if (*r != '\\') {
			out[k++] = *r++;
			continue;
		}
		char e = r[1];
		if (e == 'x') {
			out[k++] = (char)(hex_val((unsigned char)r[2]) * 16 + hex_val((unsigned char)r[3]));
			r += 4;
		} else {
			out[k++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
			r += 2;
		}
	}
	t->str = out;
	t->str_len = n;
	P->pos = q + 1;
	return true;
}

static bool starts(const char *p, const char *w) { return !strncmp(p, w, strlen(w)); }

/* [+-]? digits [. digits] [e [+-] digits] [f] -- or inf, nan, nan(0x...) with a sign. */
static bool lex_number(parser *P, token *t) {
	const char *p = P->pos;
	if (*p == '+' || *p == '-') p++;
	if (starts(p, "inf") || starts(p, "nan")) {
		p += 3;
		if (p[-3] == 'n' && *p == '(') {
			const char *close = strchr(p, ')');
			if (!close || close - p > 24) return fail(P, t->line, t->col, "malformed nan(...)");
			p = close + 1;
		}
	} else {
		while (is_digit((unsigned char)*p)) p++;
		if (*p == '.') {
			p++;
			while (is_digit((unsigned char)*p)) p++;
		}
		if ((*p == 'e' || *p == 'E') &&
		    (is_digit((unsigned char)p[1]) || ((p[1] == '+' || p[1] == '-') && is_digit((unsigned char)p[2])))) {
			p += 2;
			while (is_digit((unsigned char)*p)) p++;
		}
		if (*p == 'f') p++;
	}
	if (tbc_text_is_bare_char((unsigned char)*p)) return fail(P, t->line, t->col, "malformed number");
	t->kind = T_NUMBER;
	t->p = P->pos;
	t->n = (size_t)(p - P->pos);
	P->pos = p;
	return true;
}

static void next(parser *P) {
	token *t = &P->tok;
	memset(t, 0, sizeof *t);
	if (P->failed) {
		t->kind = T_ERROR;
		return;
	}
	for (;;) {
		char c = *P->pos;
		if (c == '\n') {
			P->pos++;
			P->line++;
			P->line_start = P->pos;
		} else if (c == ' ' || c == '\t' || c == '\r') {
			P->pos++;
		} else if (c == '#') {
			while (*P->pos && *P->pos != '\n') P->pos++;
		} else {
			break;
		}
	}
	t->line = P->line;
	t->col = (int)(P->pos - P->line_start) + 1;
	const char *p = P->pos;
	unsigned char c = (unsigned char)*p;
	bool ok = true;
	if (c == 0) {
		t->kind = T_EOF;
	} else if (c == '%') {
		t->kind = T_VALUE;
		P->pos++;
		if (*P->pos == '"') {
			ok = lex_string(P, t);
		} else {
			const char *s = P->pos;
			while (tbc_text_is_bare_char((unsigned char)*P->pos)) P->pos++;
			t->p = s;
			t->n = (size_t)(P->pos - s);
			if (!t->n) {
				ok = fail(P, t->line, t->col, "expected a value name after '%%'");
			} else {
				t->anon = true;
				for (size_t i = 0; i < t->n; i++) t->anon &= is_digit((unsigned char)s[i]);
				if (!t->anon) {
					t->str = tbc_arena_strndup(P->m->arena, s, t->n);
					t->str_len = t->n;
					if (!t->str) ok = fail(P, t->line, t->col, "out of memory");
				}
			}
		}
	} else if (c == '"') {
		t->kind = T_STRING;
		ok = lex_string(P, t);
	} else if (c == '0' && (p[1] == 'x' || p[1] == 'X')) {
		const char *s = p + 2;
		while (is_hex((unsigned char)*s)) s++;
		if (tbc_text_is_bare_char((unsigned char)*s)) {
			ok = fail(P, t->line, t->col, "malformed hex data");
		} else {
			t->kind = T_HEX;
			t->p = p + 2;
			t->n = (size_t)(s - (p + 2));
			P->pos = s;
		}
	} else if (is_digit(c) || ((c == '-' || c == '+') && (is_digit((unsigned char)p[1]) || p[1] == '.' ||
							   starts(p + 1, "inf") || starts(p + 1, "nan"))) ||
		   (c == '.' && is_digit((unsigned char)p[1])) ||
		   ((starts(p, "inf") || starts(p, "nan")) && !tbc_text_is_bare_char((unsigned char)p[3]))) {
		ok = lex_number(P, t);
	} else if (tbc_text_is_bare_start(c)) {
		const char *s = p;
		while (tbc_text_is_bare_char((unsigned char)*s)) s++;
		t->kind = T_IDENT;
		t->p = p;
		t->n = (size_t)(s - p);
		P->pos = s;
	} else if (strchr("(){}[],=:@*?", c)) {
		t->kind = T_PUNCT;
		t->punct = (char)c;
		P->pos++;
	} else if (c == '<') {
		ok = fail(P, t->line, t->col, "unexpected '<' (was this printed with constant data left out?)");
	} else {
		ok = fail(P, t->line, t->col, c >= 0x20 && c < 0x7f ? "unexpected character '%c'" : "unexpected byte 0x%02x", c);
	}
	if (!ok) t->kind = T_ERROR;
}

static bool is_punct(const parser *P, char c) { return P->tok.kind == T_PUNCT && P->tok.punct == c; }
static bool is_word(const parser *P, const char *w) {
	return P->tok.kind == T_IDENT && P->tok.n == strlen(w) && !memcmp(P->tok.p, w, P->tok.n);
}

static const char *describe(const token *t) {
	switch (t->kind) {
	case T_EOF: return "end of input";
	case T_PUNCT: return "punctuation";
	case T_IDENT: return "a word";
	case T_STRING: return "a string";
	case T_NUMBER: return "a number";
	case T_HEX: return "hex data";
	case T_VALUE: return "a value";
	default: return "an error";
	}
}

static bool expect(parser *P, char c) {
	if (!is_punct(P, c)) {
		if (P->tok.kind == T_PUNCT) return FAIL("expected '%c', found '%c'", c, P->tok.punct);
		return FAIL("expected '%c', found %s", c, describe(&P->tok));
	}
	next(P);
	return !P->failed;
}

/* A name: a bare word or a quoted string without NUL bytes; arena copy. */
static const char *parse_name(parser *P, const char *what) {
	const char *s = NULL;
	if (P->tok.kind == T_IDENT) {
		s = tbc_arena_strndup(P->m->arena, P->tok.p, P->tok.n);
	} else if (P->tok.kind == T_STRING) {
		if (memchr(P->tok.str, 0, P->tok.str_len)) {
			FAIL("%s contains a NUL byte", what);
			return NULL;
		}
		s = P->tok.str;
	} else {
		FAIL("expected %s, found %s", what, describe(&P->tok));
		return NULL;
	}
	if (!s) {
		FAIL("out of memory");
		return NULL;
	}
	next(P);
	return P->failed ? NULL : s;
}

/* ---- Numbers ---- */
static bool tok_copy(const char *s, size_t n, char *buf, size_t size) {
	if (n + 1 > size) return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	return true;
}

static bool literal_is_float(const char *s, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (strchr(".eEfin", s[i])) return true;
	return false;
}

static bool read_double(const char *s, size_t n, double *out) {
	char b[64];
	if (!tok_copy(s, n, b, sizeof b)) return false;
	const char *p = b;
	bool neg = *p == '-';
	if (*p == '-' || *p == '+') p++;
	if (!strcmp(p, "inf")) {
		*out = neg ? -INFINITY : INFINITY;
		return true;
	}
	if (!strcmp(p, "nan")) {
		*out = neg ? -NAN : NAN;
		return true;
	}
	if (!strncmp(p, "nan(0x", 6)) {
		char *end;
		errno = 0;
		uint64_t bits = strtoull(p + 6, &end, 16);
		if (errno || end == p + 6 || strcmp(end, ")")) return false;
		double d;
		memcpy(&d, &bits, sizeof d);
		if (!isnan(d)) return false;
		if (neg) d = -d;
		*out = d;
		return true;
	}
	size_t len = strlen(b);
	char *end;
	if (len && b[len - 1] == 'f') {
		b[len - 1] = 0;
		float f = strtof(b, &end);
		if (end == b || *end) return false;
		*out = f;
		return true;
	}
	*out = strtod(b, &end);
	return end != b && !*end;
}

static bool read_int(const char *s, size_t n, int64_t *out) {
	char b[32];
	if (!tok_copy(s, n, b, sizeof b) || literal_is_float(b, n)) return false;
	char *end;
	errno = 0;
	long long v = strtoll(b, &end, 10);
	if (errno || end == b || *end) return false;
	*out = v;
	return true;
}

bool tbc_text_store_elem(tbc_dtype dt, void *base, size_t i, const char *tok, size_t n, const char **why) {
	*why = "malformed literal";
	if (dt == TBC_DT_BOOL) {
		bool t = (n == 4 && !memcmp(tok, "true", 4)) || (n == 1 && *tok == '1');
		bool f = (n == 5 && !memcmp(tok, "false", 5)) || (n == 1 && *tok == '0');
		if (!t && !f) {
			*why = "expected true or false";
			return false;
		}
		((unsigned char *)base)[i] = t;
		return true;
	}
	if (tbc_dtype_is_float(dt)) {
		double v;
		if (!read_double(tok, n, &v)) return false;
		tbc_store_f64_nosat(dt, base, i, v);
		return true;
	}
	if (!tbc_dtype_is_int(dt)) {
		*why = "this element type has no literals";
		return false;
	}
	char b[32];
	if (!tok_copy(tok, n, b, sizeof b) || literal_is_float(b, n)) {
		*why = "expected an integer";
		return false;
	}
	char *end;
	errno = 0;
	*why = "integer out of range for the element type";
	if (tbc_dtype_is_signed(dt)) {
		long long v = strtoll(b, &end, 10);
		if (errno || end == b || *end) return false;
		tbc_store_i64(dt, base, i, v);
		return tbc_load_i64(dt, base, i) == v;
	}
	if (b[0] == '-') return false;
	unsigned long long v = strtoull(b, &end, 10);
	if (errno || end == b || *end) return false;
	tbc_store_u64(dt, base, i, v);
	return tbc_load_u64(dt, base, i) == v;
}

/* ---- Symbols ---- */
static uint64_t hash_bytes(const char *s, size_t n) {
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

/* The key of a value token: 'a' + digits or 'n' + name, in buf or malloc'd. */
static char *value_key(parser *P, const token *t, size_t *len) {
	const char *s = t->anon ? t->p : t->str;
	size_t n = t->anon ? t->n : t->str_len;
	char *k = malloc(n + 2);
	if (!k) {
		FAIL_AT(t, "out of memory");
		return NULL;
	}
	k[0] = t->anon ? 'a' : 'n';
	memcpy(k + 1, s, n);
	k[n + 1] = 0;
	*len = n + 1;
	return k;
}

/* A value token as written, for messages: %x, %3 or %"odd name" (cut short). */
static const char *show_value(const token *t, char *buf, size_t size) {
	const char *s = t->anon ? t->p : t->str;
	size_t n = t->anon ? t->n : t->str_len;
	bool quote = !t->anon && !tbc_text_is_bare(s, n);
	size_t k = 0;
	buf[k++] = '%';
	if (quote) buf[k++] = '"';
	for (size_t i = 0; i < n && k + 8 < size; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') k += (size_t)snprintf(buf + k, size - k, "\\x%02x", c);
		else buf[k++] = (char)c;
	}
	if (quote) buf[k++] = '"';
	buf[k] = 0;
	return buf;
}

static sym **sym_slot(parser *P, const char *key, size_t n) {
	sym **pp = &P->slots[hash_bytes(key, n) & (P->n_slots - 1)];
	for (; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->key, key)) return pp;
	return pp;
}

static tbc_value *lookup(parser *P, const token *t) {
	size_t n;
	char *key = value_key(P, t, &n);
	if (!key) return NULL;
	sym *s = *sym_slot(P, key, n);
	free(key);
	if (!s) {
		char nb[160];
		FAIL_AT(t, "undefined value %s", show_value(t, nb, sizeof nb));
		return NULL;
	}
	return s->v;
}

static bool define(parser *P, const token *t, tbc_value *v) {
	size_t n;
	char *key = value_key(P, t, &n);
	if (!key) return false;
	sym **pp = sym_slot(P, key, n);
	if (*pp) {
		int first = (*pp)->line;
		free(key);
		char nb[160];
		return FAIL_AT(t, "redefinition of %s (defined at line %d)", show_value(t, nb, sizeof nb), first);
	}
	if (P->n_defs == P->cap_defs) {
		size_t cap = P->cap_defs ? P->cap_defs * 2 : 64;
		sym **nd = realloc(P->defs, cap * sizeof *nd);
		if (!nd) {
			free(key);
			return FAIL_AT(t, "out of memory");
		}
		P->defs = nd;
		P->cap_defs = cap;
	}
	sym *s = malloc(sizeof *s + n + 1);
	if (!s) {
		free(key);
		return FAIL_AT(t, "out of memory");
	}
	memcpy(s->key, key, n + 1);
	free(key);
	s->v = v;
	s->line = t->line;
	s->next = NULL;
	*pp = s;
	P->defs[P->n_defs++] = s;
	if (!t->anon) {
		v->name = t->str; /* arena-owned */
		if (memchr(t->str, 0, t->str_len)) return FAIL_AT(t, "value name contains a NUL byte");
	}
	return true;
}

/* Forgets the names defined since mark (the end of a graph's scope). */
static void pop_defs(parser *P, size_t mark) {
	while (P->n_defs > mark) {
		sym *s = P->defs[--P->n_defs];
		sym **pp = sym_slot(P, s->key, strlen(s->key));
		if (*pp == s) *pp = s->next;
		free(s);
	}
}

/* ---- Types and data ---- */
static void note_sym(parser *P, const char *s) {
	/* Fresh dims are named _d<N>; keep the module's counter past those in the text. */
	if (s[0] != '_' || s[1] != 'd' || !is_digit((unsigned char)s[2])) return;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s + 2, &end, 10);
	if (!*end && !errno && n < UINT32_MAX && n >= P->m->n_syms) P->m->n_syms = (uint32_t)n + 1;
}

/* A derived dim written as its polynomial (`past_seq + seq`, `2*n`: the
 * canonical text tbc_poly_print writes, ir/symdim.h): the raw text up to
 * the next ',' or ']' outside quotes, taken when it is exactly such text.
 * False (nothing consumed) for anything else, which the token rules read. */
static bool parse_derived_dim(parser *P, tbc_dim *d) {
	if (P->tok.kind != T_IDENT && P->tok.kind != T_NUMBER && P->tok.kind != T_STRING) return false;
	const char *start = P->line_start + (P->tok.col - 1), *q = start;
	while (*q && *q != ',' && *q != ']' && *q != '\n') {
		if (*q == '"') {
			for (q++; *q && *q != '"' && *q != '\n'; q++)
				if (*q == '\\' && q[1]) q++;
			if (*q != '"') return false;
		}
		q++;
	}
	const char *end = q;
	while (end > start && end[-1] == ' ') end--;
	size_t n = (size_t)(end - start);
	if (n == 0 || n >= 1024 || (!memchr(start, ' ', n) && !memchr(start, '*', n))) return false;
	char text[1024];
	memcpy(text, start, n);
	text[n] = 0;
	if (!tbc_sym_is_derived(text)) return false;
	const char *s = tbc_arena_strdup(P->m->arena, text);
	if (!s) return FAIL("out of memory");
	*d = (tbc_dim){-1, s};
	P->pos = end;
	next(P);
	return !P->failed;
}

static bool parse_type(parser *P, tbc_type *ty) {
	memset(ty, 0, sizeof *ty);
	if (P->tok.kind != T_IDENT) return FAIL("expected a type, found %s", describe(&P->tok));
	char name[32];
	tbc_dtype dt = TBC_DT_COUNT;
	if (tok_copy(P->tok.p, P->tok.n, name, sizeof name)) {
		if (!strcmp(name, "undefined")) dt = TBC_DT_UNDEFINED;
		for (int i = 1; i < TBC_DT_COUNT && dt == TBC_DT_COUNT; i++)
			if (tbc_dtype_valid(i) && !strcmp(tbc_dtype_name((tbc_dtype)i), name)) dt = (tbc_dtype)i;
	}
	if (dt == TBC_DT_COUNT) return FAIL("unknown element type '%.*s'", (int)(P->tok.n > 40 ? 40 : P->tok.n), P->tok.p);
	ty->dtype = dt;
	next(P);
	if (!expect(P, '[')) return false;
	if (is_punct(P, '*')) {
		ty->rank = -1;
		next(P);
		return expect(P, ']');
	}
	while (!is_punct(P, ']')) {
		if (ty->rank && !expect(P, ',')) return false;
		if (ty->rank >= TBC_MAX_RANK) return FAIL("rank above the limit of %d", TBC_MAX_RANK);
		tbc_dim *d = &ty->dims[ty->rank];
		if (parse_derived_dim(P, d)) {
			/* read */
		} else if (P->tok.kind == T_NUMBER) {
			int64_t v;
			if (!read_int(P->tok.p, P->tok.n, &v) || v < 0) return FAIL("a dim must be a non-negative integer");
			*d = (tbc_dim){v, NULL};
			next(P);
		} else if (is_punct(P, '?')) {
			*d = (tbc_dim){-1, NULL};
			next(P);
		} else if (P->tok.kind == T_IDENT || P->tok.kind == T_STRING) {
			const char *s = parse_name(P, "a dim name");
			if (!s) return false;
			note_sym(P, s);
			*d = (tbc_dim){-1, s};
		} else {
			return FAIL("expected a dim, found %s", describe(&P->tok));
		}
		ty->rank++;
		if (P->failed) return false;
	}
	next(P);
	return !P->failed;
}

/* Reads data for a tensor of static type ty into a new malloc'd buffer
 * (*out, which the caller frees).  The amount must match the type. */
static bool parse_data(parser *P, const tbc_type *ty, const token *at, tbc_tensor *t) {
	memset(t, 0, sizeof *t);
	if (ty->rank < 0) return FAIL_AT(at, "a tensor needs a known rank");
	int64_t dims[TBC_MAX_RANK];
	for (int i = 0; i < ty->rank; i++) {
		if (ty->dims[i].sym || ty->dims[i].size < 0) return FAIL_AT(at, "a tensor needs static dims");
		dims[i] = ty->dims[i].size;
	}
	size_t es = tbc_dtype_size(ty->dtype);
	if (!tbc_dtype_supported(ty->dtype) || es == 0)
		return FAIL_AT(at, "tensors of element type %s are not supported", tbc_dtype_name(ty->dtype));
	int64_t numel = tbc_shape_numel(ty->rank, dims);
	if (numel < 0 || numel > TBC_MAX_TENSOR_BYTES / (int64_t)es) return FAIL_AT(at, "tensor too large");
	t->dtype = ty->dtype;
	t->rank = ty->rank;
	memcpy(t->dims, dims, sizeof(int64_t) * (size_t)ty->rank);
	t->numel = numel;
	size_t want = (size_t)numel * es;
	if (P->tok.kind == T_HEX) {
		if (P->tok.n != want * 2)
			return FAIL("hex data holds %zu bytes, the type needs %zu", P->tok.n / 2, want);
		unsigned char *data = malloc(want ? want : 1);
		if (!data) return FAIL("out of memory");
		for (size_t i = 0; i < want; i++)
			data[i] = (unsigned char)(hex_val((unsigned char)P->tok.p[2 * i]) * 16 + hex_val((unsigned char)P->tok.p[2 * i + 1]));
		t->data = data;
		next(P);
		if (P->failed) {
			free(t->data);
			t->data = NULL;
		}
		return !P->failed;
	}
	if (!is_punct(P, '[')) return FAIL("expected tensor data ('[' or 0x...), found %s", describe(&P->tok));
	next(P);
	size_t cap = 16, n = 0;
	unsigned char *data = malloc(cap * es);
	if (!data) return FAIL("out of memory");
	while (!is_punct(P, ']')) {
		if (n && !expect(P, ',')) break;
		if (P->tok.kind != T_NUMBER && P->tok.kind != T_IDENT) {
			FAIL("expected a number, found %s", describe(&P->tok));
			break;
		}
		if ((int64_t)n >= numel) {
			FAIL("more elements than the type's %" PRId64, numel);
			break;
		}
		if (n == cap) {
			cap *= 2;
			unsigned char *nd = realloc(data, cap * es);
			if (!nd) {
				FAIL("out of memory");
				break;
			}
			data = nd;
		}
		const char *why;
		if (!tbc_text_store_elem(ty->dtype, data, n, P->tok.p, P->tok.n, &why)) {
			FAIL("%s (%s)", why, tbc_dtype_name(ty->dtype));
			break;
		}
		n++;
		next(P);
		if (P->failed) break;
	}
	if (!P->failed && (int64_t)n != numel) FAIL("%zu elements given, the type needs %" PRId64, n, numel);
	if (!P->failed) next(P);
	if (P->failed) {
		free(data);
		return false;
	}
	t->data = data;
	return true;
}

/* "tensor TYPE DATA" into the arena. */
static tbc_tensor *parse_tensor_literal(parser *P) {
	token at = P->tok;
	next(P); /* tensor */
	tbc_type ty;
	if (!parse_type(P, &ty)) return NULL;
	tbc_tensor t;
	if (!parse_data(P, &ty, &at, &t)) return NULL;
	tbc_tensor *c = tbc_tensor_copy_to_arena(P->m->arena, &t);
	free(t.data);
	if (!c) FAIL_AT(&at, "out of memory");
	return c;
}

/* ---- Graphs ---- */
static tbc_graph *parse_graph(parser *P, tbc_graph *g, tbc_graph *parent);

typedef struct elist {
	token *t;
	int n, cap;
} elist;

static bool elist_push(parser *P, elist *l, const token *t) {
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 8;
		if (cap > (1 << 28)) return FAIL("list too long");
		token *nt = tbc_arena_array(P->m->arena, (size_t)cap, sizeof *nt);
		if (!nt) return FAIL("out of memory");
		if (l->n) memcpy(nt, l->t, (size_t)l->n * sizeof *nt);
		l->t = nt;
		l->cap = cap;
	}
	l->t[l->n++] = *t;
	return true;
}

static bool parse_list(parser *P, tbc_attr *at, int kind_hint, tbc_graph *g) {
	token open = P->tok;
	if (!expect(P, '[')) return false;
	elist toks = {0};
	tbc_tensor **tensors = NULL;
	tbc_graph **graphs = NULL;
	int n = 0, cap = 0, kind = kind_hint;
	while (!is_punct(P, ']')) {
		if (n && !expect(P, ',')) return false;
		int k;
		if (P->tok.kind == T_NUMBER || is_word(P, "inf") || is_word(P, "nan"))
			k = literal_is_float(P->tok.p, P->tok.n) ? TBC_ATTR_FLOATS : TBC_ATTR_INTS;
		else if (P->tok.kind == T_STRING) k = TBC_ATTR_STRINGS;
		else if (is_word(P, "tensor")) k = TBC_ATTR_TENSORS;
		else if (is_word(P, "graph")) k = TBC_ATTR_GRAPHS;
		else return FAIL("expected a list element, found %s", describe(&P->tok));
		bool numeric = k == TBC_ATTR_INTS || k == TBC_ATTR_FLOATS;
		if (kind < 0) kind = k;
		else if (kind == TBC_ATTR_INTS && k == TBC_ATTR_FLOATS && kind_hint < 0) kind = TBC_ATTR_FLOATS;
		else if (!(kind == k || (kind == TBC_ATTR_FLOATS && numeric))) return FAIL("list elements of different kinds");
		if (k == TBC_ATTR_TENSORS || k == TBC_ATTR_GRAPHS) {
			if (n == cap) {
				cap = cap ? cap * 2 : 4;
				if (cap > (1 << 24)) return FAIL("list too long");
				void *na = tbc_arena_array(P->m->arena, (size_t)cap, sizeof(void *));
				if (!na) return FAIL("out of memory");
				if (n) memcpy(na, k == TBC_ATTR_TENSORS ? (void *)tensors : (void *)graphs, (size_t)n * sizeof(void *));
				if (k == TBC_ATTR_TENSORS) tensors = na;
				else graphs = na;
			}
			if (k == TBC_ATTR_TENSORS) {
				if (!(tensors[n] = parse_tensor_literal(P))) return false;
			} else if (!(graphs[n] = parse_graph(P, NULL, g))) {
				return false;
			}
		} else {
			if (k == TBC_ATTR_STRINGS && memchr(P->tok.str, 0, P->tok.str_len))
				return FAIL("a string in a list cannot hold a NUL byte");
			if (!elist_push(P, &toks, &P->tok)) return false;
			next(P);
		}
		n++;
		if (P->failed) return false;
	}
	next(P);
	if (kind < 0) return FAIL_AT(&open, "an empty list needs its kind: ints[], floats[], strings[], tensors[] or graphs[]");
	at->kind = (tbc_attr_kind)kind;
	at->n = n;
	if (kind == TBC_ATTR_TENSORS) at->tensors = tensors;
	if (kind == TBC_ATTR_GRAPHS) at->graphs = graphs;
	if (kind == TBC_ATTR_INTS) {
		at->ints = tbc_arena_array(P->m->arena, (size_t)(n ? n : 1), sizeof *at->ints);
		if (!at->ints) return FAIL("out of memory");
		for (int i = 0; i < n; i++)
			if (!read_int(toks.t[i].p, toks.t[i].n, &at->ints[i])) return FAIL_AT(&toks.t[i], "malformed integer");
	} else if (kind == TBC_ATTR_FLOATS) {
		at->floats = tbc_arena_array(P->m->arena, (size_t)(n ? n : 1), sizeof *at->floats);
		if (!at->floats) return FAIL("out of memory");
		for (int i = 0; i < n; i++)
			if (!read_double(toks.t[i].p, toks.t[i].n, &at->floats[i])) return FAIL_AT(&toks.t[i], "malformed number");
	} else if (kind == TBC_ATTR_STRINGS) {
		at->strings = tbc_arena_array(P->m->arena, (size_t)(n ? n : 1), sizeof *at->strings);
		if (!at->strings) return FAIL("out of memory");
		for (int i = 0; i < n; i++) at->strings[i] = toks.t[i].str;
	}
	return !P->failed;
}

static bool parse_attr_value(parser *P, tbc_attr *at, tbc_graph *g) {
	if (P->tok.kind == T_NUMBER || is_word(P, "inf") || is_word(P, "nan")) {
		if (literal_is_float(P->tok.p, P->tok.n)) {
			at->kind = TBC_ATTR_FLOAT;
			if (!read_double(P->tok.p, P->tok.n, &at->f)) return FAIL("malformed number");
		} else {
			at->kind = TBC_ATTR_INT;
			if (!read_int(P->tok.p, P->tok.n, &at->i)) return FAIL("malformed or out-of-range integer");
		}
		next(P);
		return !P->failed;
	}
	if (P->tok.kind == T_STRING) {
		at->kind = TBC_ATTR_STRING;
		at->s = P->tok.str;
		at->s_len = P->tok.str_len;
		next(P);
		return !P->failed;
	}
	if (is_punct(P, '[')) return parse_list(P, at, -1, g);
	static const struct {
		const char *word;
		tbc_attr_kind kind;
	} lists[] = {{"ints", TBC_ATTR_INTS}, {"floats", TBC_ATTR_FLOATS}, {"strings", TBC_ATTR_STRINGS},
		     {"tensors", TBC_ATTR_TENSORS}, {"graphs", TBC_ATTR_GRAPHS}};
	for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
		if (is_word(P, lists[i].word)) {
			next(P);
			return !P->failed && parse_list(P, at, (int)lists[i].kind, g);
		}
	if (is_word(P, "tensor")) {
		at->kind = TBC_ATTR_TENSOR;
		at->n = 1;
		at->tensors = alloc(P, sizeof *at->tensors);
		return at->tensors && (at->tensors[0] = parse_tensor_literal(P)) != NULL;
	}
	if (is_word(P, "graph")) {
		at->kind = TBC_ATTR_GRAPH;
		at->n = 1;
		at->graphs = alloc(P, sizeof *at->graphs);
		return at->graphs && (at->graphs[0] = parse_graph(P, NULL, g)) != NULL;
	}
	return FAIL("expected an attribute value, found %s", describe(&P->tok));
}

typedef struct result {
	token name; /* T_VALUE, or T_IDENT "_" */
	bool skip, typed;
	tbc_type type;
} result;

/* [results '='] Op '(' operands ')' [attrs] ['@' name]  |  %v ':' type '=' 'const' data */
static bool parse_stmt(parser *P, tbc_graph *g) {
	result *res = NULL;
	int n_res = 0, cap_res = 0;
	if (P->tok.kind == T_VALUE || is_word(P, "_")) {
		for (;;) {
			if (n_res == cap_res) {
				cap_res = cap_res ? cap_res * 2 : 4;
				if (cap_res > (1 << 20)) return FAIL("too many results");
				result *nr = tbc_arena_array(P->m->arena, (size_t)cap_res, sizeof *nr);
				if (!nr) return FAIL("out of memory");
				if (n_res) memcpy(nr, res, (size_t)n_res * sizeof *nr);
				res = nr;
			}
			result *r = &res[n_res++];
			r->name = P->tok;
			if (is_word(P, "_")) r->skip = true;
			else if (P->tok.kind != T_VALUE) return FAIL("expected a result, found %s", describe(&P->tok));
			next(P);
			if (P->failed) return false;
			if (!r->skip && is_punct(P, ':')) {
				next(P);
				if (!parse_type(P, &r->type)) return false;
				r->typed = true;
			} else {
				r->type.rank = -1;
			}
			if (!is_punct(P, ',')) break;
			next(P);
		}
		if (!expect(P, '=')) return false;
	}
	if (is_word(P, "const")) {
		token at = P->tok;
		if (n_res != 1 || res[0].skip) return FAIL("a constant defines exactly one value");
		if (!res[0].typed) return FAIL_AT(&res[0].name, "a constant needs a type");
		next(P);
		tbc_tensor t;
		if (P->failed || !parse_data(P, &res[0].type, &at, &t)) return false;
		tbc_value *v = tbc_graph_add_const(g, NULL, &t);
		free(t.data);
		if (!v) return FAIL_AT(&at, "out of memory");
		return define(P, &res[0].name, v);
	}
	if (P->tok.kind != T_IDENT) return FAIL("expected an op name, found %s", describe(&P->tok));
	token op_tok = P->tok;
	char opname[64];
	tbc_opcode code = TBC_OP_COUNT;
	if (tok_copy(P->tok.p, P->tok.n, opname, sizeof opname)) code = tbc_opcode_from_name(opname);
	if (code == TBC_OP_COUNT) return FAIL("unknown op '%.*s'", (int)(P->tok.n > 64 ? 64 : P->tok.n), P->tok.p);
	next(P);
	if (!expect(P, '(')) return false;
	tbc_value **ins = NULL;
	int n_in = 0, cap_in = 0;
	while (!is_punct(P, ')')) {
		if (n_in && !expect(P, ',')) return false;
		if (n_in == cap_in) {
			cap_in = cap_in ? cap_in * 2 : 4;
			if (cap_in > (1 << 20)) return FAIL("too many operands");
			tbc_value **ni = tbc_arena_array(P->m->arena, (size_t)cap_in, sizeof *ni);
			if (!ni) return FAIL("out of memory");
			if (n_in) memcpy(ni, ins, (size_t)n_in * sizeof *ni);
			ins = ni;
		}
		if (is_word(P, "_")) {
			ins[n_in] = NULL;
		} else if (P->tok.kind == T_VALUE) {
			if (!(ins[n_in] = lookup(P, &P->tok))) return false;
		} else {
			return FAIL("expected an operand, found %s", describe(&P->tok));
		}
		n_in++;
		next(P);
		if (P->failed) return false;
	}
	next(P);
	tbc_attr *attrs = NULL;
	int n_attrs = 0, cap_attrs = 0;
	if (is_punct(P, '{')) {
		next(P);
		while (!is_punct(P, '}')) {
			if (n_attrs && !expect(P, ',')) return false;
			if (n_attrs == cap_attrs) {
				cap_attrs = cap_attrs ? cap_attrs * 2 : 4;
				if (cap_attrs > (1 << 16)) return FAIL("too many attributes");
				tbc_attr *na = tbc_arena_array(P->m->arena, (size_t)cap_attrs, sizeof *na);
				if (!na) return FAIL("out of memory");
				if (n_attrs) memcpy(na, attrs, (size_t)n_attrs * sizeof *na);
				attrs = na;
			}
			tbc_attr *at = &attrs[n_attrs];
			memset(at, 0, sizeof *at);
			token name_tok = P->tok;
			if (!(at->name = parse_name(P, "an attribute name"))) return false;
			for (int i = 0; i < n_attrs; i++)
				if (!strcmp(attrs[i].name, at->name)) return FAIL_AT(&name_tok, "attribute '%s' given twice", at->name);
			if (!expect(P, '=') || !parse_attr_value(P, at, g)) return false;
			n_attrs++;
		}
		next(P);
	}
	const char *node = NULL;
	if (is_punct(P, '@')) {
		next(P);
		if (P->failed || !(node = parse_name(P, "a node name"))) return false;
	}
	if (P->failed) return false;
	tbc_op *op = tbc_op_new(g, code, node, n_in, ins, n_res);
	if (!op) return FAIL_AT(&op_tok, "out of memory");
	for (int a = 0; a < n_attrs; a++) {
		tbc_attr *at = tbc_op_add_attr(op, attrs[a].name, attrs[a].kind);
		if (!at) return FAIL_AT(&op_tok, "out of memory");
		const char *name = at->name;
		*at = attrs[a];
		at->name = name;
		int ng = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
		for (int k = 0; k < ng; k++) at->graphs[k]->parent_op = op;
	}
	for (int i = 0; i < n_res; i++) {
		if (res[i].skip) {
			op->outputs[i] = NULL;
			continue;
		}
		op->outputs[i]->type = res[i].type;
		if (!define(P, &res[i].name, op->outputs[i])) return false;
	}
	return true;
}

/* graph NAME '(' params ')' '{' stmts 'return' refs '}'.  g is the graph to
 * fill (the module's main graph), or NULL for a new subgraph of parent. */
static tbc_graph *parse_graph(parser *P, tbc_graph *g, tbc_graph *parent) {
	if (!is_word(P, "graph")) {
		FAIL("expected 'graph', found %s", describe(&P->tok));
		return NULL;
	}
	if (P->depth > TBC_MAX_SUBGRAPH_DEPTH) {
		FAIL("subgraphs nested deeper than %d", TBC_MAX_SUBGRAPH_DEPTH);
		return NULL;
	}
	next(P);
	const char *name = parse_name(P, "a graph name");
	if (!name) return NULL;
	if (!g) g = tbc_graph_new(P->m, parent, name);
	else g->name = name;
	if (!g) {
		FAIL("out of memory");
		return NULL;
	}
	P->depth++;
	size_t mark = P->n_defs;
	bool ok = expect(P, '(');
	while (ok && !is_punct(P, ')')) {
		if (g->n_inputs && !(ok = expect(P, ','))) break;
		if (P->tok.kind != T_VALUE) {
			ok = FAIL("expected a graph input, found %s", describe(&P->tok));
			break;
		}
		token vt = P->tok;
		next(P);
		tbc_type ty;
		if (!(ok = expect(P, ':') && parse_type(P, &ty))) break;
		tbc_value *v = tbc_graph_add_input(g, NULL, &ty);
		if (!v) ok = FAIL_AT(&vt, "out of memory");
		else ok = define(P, &vt, v);
	}
	if (ok) next(P);
	ok = ok && !P->failed && expect(P, '{');
	while (ok && !is_word(P, "return")) {
		if (P->tok.kind == T_EOF || is_punct(P, '}')) {
			ok = FAIL("expected a statement or 'return'");
			break;
		}
		ok = parse_stmt(P, g);
	}
	if (ok) {
		next(P);
		while (ok && P->tok.kind == T_VALUE) {
			tbc_value *v = lookup(P, &P->tok);
			ok = v && tbc_graph_add_output(g, v);
			if (v && !ok) FAIL("out of memory");
			if (ok) next(P);
			if (ok && is_punct(P, ',')) {
				next(P);
				if (P->tok.kind != T_VALUE) ok = FAIL("expected a value after ','");
			}
		}
		ok = ok && !P->failed && expect(P, '}');
	}
	pop_defs(P, mark);
	P->depth--;
	return ok && !P->failed ? g : NULL;
}

static bool parse_module(parser *P) {
	if (is_word(P, "module")) {
		next(P);
		while (!P->failed && !is_word(P, "graph")) {
			if (is_word(P, "ir_version") || is_word(P, "opset")) {
				bool irv = is_word(P, "ir_version");
				next(P);
				int64_t v;
				if (P->tok.kind != T_NUMBER || !read_int(P->tok.p, P->tok.n, &v)) return FAIL("expected an integer");
				if (irv) P->m->ir_version = v;
				else P->m->opset = v;
				next(P);
			} else if (is_word(P, "producer")) {
				next(P);
				if (P->tok.kind != T_STRING) return FAIL("expected a string");
				if (memchr(P->tok.str, 0, P->tok.str_len)) return FAIL("producer contains a NUL byte");
				P->m->producer = P->tok.str;
				next(P);
			} else {
				return FAIL("expected ir_version, opset, producer or graph, found %s", describe(&P->tok));
			}
		}
	}
	if (!parse_graph(P, P->m->main, NULL)) return false;
	if (P->tok.kind != T_EOF) return FAIL("expected end of input, found %s", describe(&P->tok));
	return true;
}

tbc_module *tbc_parse(const char *text, const char *filename, tbc_diags *d) {
	parser P = {0};
	P.filename = filename;
	P.d = d;
	P.src = P.pos = P.line_start = text ? text : "";
	P.line = 1;
	P.m = tbc_module_new(filename);
	if (!P.m) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, filename, NULL, NULL, NULL, "out of memory");
		return NULL;
	}
	P.n_slots = 1 << 14;
	P.slots = calloc(P.n_slots, sizeof *P.slots);
	if (!P.slots) {
		tbc_module_destroy(P.m);
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, filename, NULL, NULL, NULL, "out of memory");
		return NULL;
	}
	next(&P);
	bool ok = !P.failed && parse_module(&P);
	pop_defs(&P, 0);
	free(P.defs);
	free(P.slots);
	if (!ok || P.failed) {
		tbc_module_destroy(P.m);
		return NULL;
	}
	return P.m;
}
