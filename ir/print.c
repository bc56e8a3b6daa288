/* The text form's printer (grammar in docs/ir.md).  Output is a function of
 * the IR's structure only: unnamed values are numbered in the order they are
 * printed, not by their ids, so a pass's golden output does not depend on
 * how many values it made and threw away.  Every name the printer writes
 * is unique among the names the parser can see at that point, so
 * tbc_parse(tbc_print(m)) rebuilds m and prints the same bytes again. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symdim.h"
#include "text.h"

/* ---- Output buffer ---- */
typedef struct buf {
	char *s;
	size_t n, cap;
	bool oom;
} buf;

static void put(buf *b, const char *s, size_t n) {
	if (b->oom) return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n + 1) cap *= 2;
		char *ns = realloc(b->s, cap);
		if (!ns) {
			b->oom = true;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = 0;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buf *b, const char *fmt, ...) {
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0) return;
	if ((size_t)n < sizeof tmp) {
		put(b, tmp, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (!big) {
		b->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	put(b, big, (size_t)n);
	free(big);
}

static void indent(buf *b, int depth) {
	for (int i = 0; i < depth; i++) put(b, "  ", 2);
}

/* ---- Names ---- */
bool tbc_text_is_bare_start(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool tbc_text_is_bare_char(int c) {
	return tbc_text_is_bare_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '/';
}
bool tbc_text_is_bare(const char *s, size_t n) {
	if (n == 0 || !tbc_text_is_bare_start((unsigned char)s[0])) return false;
	for (size_t i = 1; i < n; i++)
		if (!tbc_text_is_bare_char((unsigned char)s[i])) return false;
	return true;
}

static void put_quoted(buf *b, const char *s, size_t n) {
	put(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"') puts_(b, "\\\"");
		else if (c == '\\') puts_(b, "\\\\");
		else if (c == '\n') puts_(b, "\\n");
		else if (c == '\t') puts_(b, "\\t");
		else if (c < 0x20 || c >= 0x7f) putf(b, "\\x%02x", c);
		else put(b, (const char *)&c, 1);
	}
	put(b, "\"", 1);
}

/* A name in a position where bare words are names (graph, attribute, node,
 * symbolic dim): bare when it can be, quoted otherwise. */
static void put_name(buf *b, const char *s) {
	size_t n = strlen(s);
	if (tbc_text_is_bare(s, n) && strcmp(s, "_") && strcmp(s, "inf") && strcmp(s, "nan"))
		put(b, s, n);
	else
		put_quoted(b, s, n);
}

/* ---- String sets (names in scope, names in the module) ---- */
typedef struct snode {
	struct snode *next;
	int count;
	char key[];
} snode;

typedef struct sset {
	snode **slots;
	size_t n_slots;
	bool oom;
} sset;

static uint64_t hash_str(const char *s) {
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool sset_init(sset *s, size_t n) {
	s->n_slots = 64;
	while (s->n_slots < n * 2) s->n_slots *= 2;
	s->slots = calloc(s->n_slots, sizeof *s->slots);
	s->oom = !s->slots;
	return !s->oom;
}

static snode *sset_find(const sset *s, const char *key) {
	if (!s->slots) return NULL;
	for (snode *n = s->slots[hash_str(key) & (s->n_slots - 1)]; n; n = n->next)
		if (!strcmp(n->key, key)) return n;
	return NULL;
}

static bool sset_has(const sset *s, const char *key) {
	snode *n = sset_find(s, key);
	return n && n->count > 0;
}

static void sset_add(sset *s, const char *key) {
	snode *n = sset_find(s, key);
	if (n) {
		n->count++;
		return;
	}
	if (!s->slots) return;
	size_t len = strlen(key);
	n = malloc(sizeof *n + len + 1);
	if (!n) {
		s->oom = true;
		return;
	}
	memcpy(n->key, key, len + 1);
	n->count = 1;
	size_t h = hash_str(key) & (s->n_slots - 1);
	n->next = s->slots[h];
	s->slots[h] = n;
}

static void sset_remove(sset *s, const char *key) {
	snode *n = sset_find(s, key);
	if (n && n->count > 0) n->count--;
}

static void sset_free(sset *s) {
	for (size_t i = 0; s->slots && i < s->n_slots; i++)
		for (snode *n = s->slots[i], *nx; n; n = nx) {
			nx = n->next;
			free(n);
		}
	free(s->slots);
}

/* ---- Printer state ---- */
typedef struct printer {
	buf b;
	const tbc_module *m;
	char **names;   /* by value id: how a reference to it is printed ("%x", "%3", "%\"a b\"") */
	char **scoped;  /* by value id: the name it holds in the scope set (NULL when unnamed) */
	uint32_t n_values;
	uint32_t next_anon;
	sset all;       /* every ONNX name in the module */
	sset scope;     /* names visible at the point being named */
	size_t max_const_bytes; /* 0: print every constant in full */
	int graph_depth;
} printer;

/* A broken op list (a pass linked it into a loop) must not hang a dump. */
static bool ops_loop(const tbc_graph *g) {
	const tbc_op *slow = g->first, *fast = g->first;
	while (fast && fast->next) {
		slow = slow->next;
		fast = fast->next->next;
		if (slow == fast) return true;
	}
	return false;
}

static void collect_names(printer *p, const tbc_graph *g, int depth);

static void collect_value(printer *p, const tbc_value *v) {
	if (v && v->name) sset_add(&p->all, v->name);
}

static void collect_attrs(printer *p, const tbc_op *op, int depth) {
	for (int a = 0; a < op->n_attrs; a++) {
		const tbc_attr *at = &op->attrs[a];
		if (at->kind == TBC_ATTR_GRAPH && at->graphs && at->graphs[0]) collect_names(p, at->graphs[0], depth + 1);
		if (at->kind == TBC_ATTR_GRAPHS)
			for (int k = 0; k < at->n; k++)
				if (at->graphs[k]) collect_names(p, at->graphs[k], depth + 1);
	}
}

static void collect_names(printer *p, const tbc_graph *g, int depth) {
	if (depth > TBC_MAX_SUBGRAPH_DEPTH || ops_loop(g)) return;
	for (int i = 0; i < g->n_inputs; i++) collect_value(p, g->inputs[i]);
	for (int i = 0; i < g->n_consts; i++) collect_value(p, g->consts[i]);
	for (const tbc_op *op = g->first; op; op = op->next) {
		for (int i = 0; i < op->n_outputs; i++) collect_value(p, op->outputs[i]);
		collect_attrs(p, op, depth);
	}
}

static char *dup_printed(buf *tmp) {
	if (tmp->oom) return NULL;
	char *s = tmp->s;
	tmp->s = NULL;
	tmp->n = tmp->cap = 0;
	return s;
}

static bool valid_id(const printer *p, const tbc_value *v) { return v && v->id < p->n_values; }

/* Gives v its printed name.  Unnamed values get the next number; a name
 * that is already visible (a pass left two values with one name) gets the
 * first free suffix .1, .2, ... so the text stays unambiguous. */
static void name_value(printer *p, const tbc_value *v) {
	if (!valid_id(p, v) || p->names[v->id]) return;
	buf t = {0};
	if (!v->name) {
		putf(&t, "%%%" PRIu32, p->next_anon++);
		p->names[v->id] = dup_printed(&t);
		if (!p->names[v->id]) p->b.oom = true;
		return;
	}
	char *chosen = NULL;
	if (!sset_has(&p->scope, v->name)) {
		size_t n = strlen(v->name);
		chosen = malloc(n + 1);
		if (chosen) memcpy(chosen, v->name, n + 1);
	} else {
		size_t n = strlen(v->name) + 24;
		for (unsigned k = 1; (chosen = malloc(n)); k++) {
			snprintf(chosen, n, "%s.%u", v->name, k);
			if (!sset_has(&p->scope, chosen) && !sset_has(&p->all, chosen)) break;
			free(chosen);
		}
	}
	if (!chosen) {
		p->b.oom = true;
		return;
	}
	sset_add(&p->all, chosen);
	p->scoped[v->id] = chosen;
	put(&t, "%", 1);
	size_t n = strlen(chosen);
	bool digits = n > 0;
	for (size_t i = 0; i < n; i++) digits &= chosen[i] >= '0' && chosen[i] <= '9';
	if (tbc_text_is_bare(chosen, n) && !digits)
		put(&t, chosen, n);
	else
		put_quoted(&t, chosen, n);
	p->names[v->id] = dup_printed(&t);
	if (!p->names[v->id]) p->b.oom = true;
}

static void enter_scope(printer *p, const tbc_value *v) {
	if (valid_id(p, v) && p->scoped[v->id]) sset_add(&p->scope, p->scoped[v->id]);
}
static void leave_scope(printer *p, const tbc_value *v) {
	if (valid_id(p, v) && p->scoped[v->id]) sset_remove(&p->scope, p->scoped[v->id]);
}

/* Names values in print order, mirroring the parser's scopes: a subgraph
 * sees what was defined before its op, and its own names vanish after it. */
static void name_graph(printer *p, const tbc_graph *g, int depth) {
	if (depth > TBC_MAX_SUBGRAPH_DEPTH || ops_loop(g)) return;
	for (int i = 0; i < g->n_inputs; i++) {
		name_value(p, g->inputs[i]);
		enter_scope(p, g->inputs[i]);
	}
	for (int i = 0; i < g->n_consts; i++) {
		name_value(p, g->consts[i]);
		enter_scope(p, g->consts[i]);
	}
	for (const tbc_op *op = g->first; op; op = op->next) {
		/* Numbers follow the text: the results' line comes before the body. */
		for (int i = 0; i < op->n_outputs; i++)
			if (op->outputs[i] && !op->outputs[i]->name) name_value(p, op->outputs[i]);
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n; k++)
				if (at->graphs && at->graphs[k]) name_graph(p, at->graphs[k], depth + 1);
		}
		for (int i = 0; i < op->n_outputs; i++) {
			name_value(p, op->outputs[i]);
			enter_scope(p, op->outputs[i]);
		}
	}
	for (int i = 0; i < g->n_inputs; i++) leave_scope(p, g->inputs[i]);
	for (int i = 0; i < g->n_consts; i++) leave_scope(p, g->consts[i]);
	for (const tbc_op *op = g->first; op; op = op->next)
		for (int i = 0; i < op->n_outputs; i++) leave_scope(p, op->outputs[i]);
}

static void put_ref(printer *p, const tbc_value *v) {
	if (!v) {
		puts_(&p->b, "_");
	} else if (valid_id(p, v) && p->names[v->id]) {
		puts_(&p->b, p->names[v->id]);
	} else {
		/* Not defined anywhere the printer walked: the IR is broken (the
		 * verifier says how); print something the parser will refuse. */
		putf(&p->b, "%%?%" PRIu32, v->id);
	}
}

/* ---- Types ---- */
static void put_type(buf *b, const tbc_type *t) {
	puts_(b, tbc_dtype_name(t->dtype));
	if (t->rank < 0 || t->rank > TBC_MAX_RANK) {
		puts_(b, "[*]");
		return;
	}
	put(b, "[", 1);
	for (int i = 0; i < t->rank; i++) {
		if (i) put(b, ",", 1);
		const tbc_dim *d = &t->dims[i];
		/* A derived dim is written as its polynomial (`past_seq + seq`),
		 * which the parser reads back as the same name. */
		if (d->sym && tbc_sym_is_derived(d->sym)) puts_(b, d->sym);
		else if (d->sym) put_name(b, d->sym);
		else if (d->size < 0) put(b, "?", 1);
		else putf(b, "%" PRId64, d->size);
	}
	put(b, "]", 1);
}

static bool has_type(const tbc_type *t) { return t->dtype != TBC_DT_UNDEFINED || t->rank >= 0; }

/* ---- Numbers ---- */
static bool same_bits64(double a, double b) { return !memcmp(&a, &b, sizeof a); }

/* Ensures a float literal reads as a float, not an int: "1" -> "1.0". */
static void float_marker(char *s, size_t size) {
	if (strpbrk(s, ".eEni")) return;
	size_t n = strlen(s);
	if (n + 3 <= size) memcpy(s + n, ".0", 3);
}

/* The shortest text that reads back as exactly d.  Attribute floats come
 * from float32 in ONNX; when the float32 spelling ("0.1f") is shorter than
 * the double one ("0.10000000149011612") it is used. */
static void format_double(char *out, size_t size, double d) {
	if (isnan(d)) {
		uint64_t bits;
		memcpy(&bits, &d, sizeof bits);
		if (bits == 0x7ff8000000000000ull) snprintf(out, size, "nan");
		else snprintf(out, size, "nan(0x%016" PRIx64 ")", bits);
		return;
	}
	if (isinf(d)) {
		snprintf(out, size, d < 0 ? "-inf" : "inf");
		return;
	}
	char best[64];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(best, sizeof best, "%.*g", prec, d);
		if (same_bits64(strtod(best, NULL), d)) break;
	}
	float_marker(best, sizeof best);
	float f = (float)d;
	if (same_bits64((double)f, d)) {
		char fb[64];
		for (int prec = 1; prec <= 9; prec++) {
			snprintf(fb, sizeof fb, "%.*g", prec, (double)f);
			float back = strtof(fb, NULL);
			if (!memcmp(&back, &f, sizeof f)) break;
		}
		float_marker(fb, sizeof fb - 1);
		size_t n = strlen(fb);
		if (n + 1 < strlen(best)) {
			fb[n] = 'f';
			fb[n + 1] = 0;
			snprintf(out, size, "%s", fb);
			return;
		}
	}
	snprintf(out, size, "%s", best);
}

/* Element i of t as a literal that tbc_text_store_elem reads back to the same
 * bytes; false when there is none (a NaN payload, a stray bit in a bool). */
static bool format_elem(const tbc_tensor *t, size_t i, char *out, size_t size) {
	tbc_dtype dt = t->dtype;
	size_t es = tbc_dtype_size(dt);
	const unsigned char *want = (const unsigned char *)t->data + i * es;
	unsigned char got[16];
	if (es == 0 || es > sizeof got) return false;
	if (dt == TBC_DT_BOOL) {
		if (*want > 1) return false;
		snprintf(out, size, *want ? "true" : "false");
		return true;
	}
	const char *why;
#define CHECK() (memset(got, 0, sizeof got), tbc_text_store_elem(dt, got, 0, out, strlen(out), &why) && !memcmp(got, want, es))
	if (tbc_dtype_is_float(dt)) {
		double v = tbc_load_f64(dt, t->data, i);
		if (isnan(v) || isinf(v)) {
			snprintf(out, size, isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
			return CHECK();
		}
		/* Whole numbers read better whole: 65504, not 6.55e+04. */
		if (v == floor(v) && fabs(v) < 1e9 && !(v == 0 && signbit(v))) {
			snprintf(out, size, "%.0f", v);
			if (CHECK()) return true;
		}
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(out, size, "%.*g", prec, v);
			if (CHECK()) return true;
		}
		return false;
	}
	if (tbc_dtype_is_signed(dt))
		snprintf(out, size, "%" PRId64, tbc_load_i64(dt, t->data, i));
	else
		snprintf(out, size, "%" PRIu64, tbc_load_u64(dt, t->data, i));
	return CHECK();
#undef CHECK
}

/* Readable "[1, 2.5, -inf]" when small and exact, else "0x" and the
 * elements' bytes in memory order (little-endian, one byte per element for
 * the 4-bit types). */
static void put_data(printer *p, const tbc_tensor *t) {
	buf *b = &p->b;
	size_t es = tbc_dtype_size(t->dtype);
	if (!t->data || t->numel < 0 || es == 0) {
		puts_(b, "<no data>");
		return;
	}
	size_t n = (size_t)t->numel;
	if (p->max_const_bytes && n * es > p->max_const_bytes) {
		putf(b, "<%zu bytes elided>", n * es);
		return;
	}
	if (n <= TBC_TEXT_READABLE_MAX) {
		char elems[TBC_TEXT_READABLE_MAX][48];
		bool ok = true;
		for (size_t i = 0; ok && i < n; i++) ok = format_elem(t, i, elems[i], sizeof elems[i]);
		if (ok) {
			put(b, "[", 1);
			for (size_t i = 0; i < n; i++) {
				if (i) put(b, ", ", 2);
				puts_(b, elems[i]);
			}
			put(b, "]", 1);
			return;
		}
	}
	static const char hex[] = "0123456789abcdef";
	const unsigned char *d = t->data;
	size_t bytes = n * es;
	char chunk[512];
	put(b, "0x", 2);
	for (size_t i = 0; i < bytes;) {
		size_t k = 0;
		for (; k + 2 <= sizeof chunk && i < bytes; i++, k += 2) {
			chunk[k] = hex[d[i] >> 4];
			chunk[k + 1] = hex[d[i] & 15];
		}
		put(b, chunk, k);
	}
}

static void put_tensor_literal(printer *p, const tbc_tensor *t) {
	if (!t) {
		puts_(&p->b, "<no tensor>");
		return;
	}
	tbc_type ty;
	tbc_type_set(&ty, t->dtype, t->rank, t->dims);
	puts_(&p->b, "tensor ");
	put_type(&p->b, &ty);
	put(&p->b, " ", 1);
	put_data(p, t);
}

/* ---- Graphs, ops, attributes ---- */
static void print_graph(printer *p, const tbc_graph *g, int depth);

static bool op_has_graph(const tbc_op *op) {
	for (int a = 0; a < op->n_attrs; a++)
		if (op->attrs[a].kind == TBC_ATTR_GRAPH || (op->attrs[a].kind == TBC_ATTR_GRAPHS && op->attrs[a].n > 0))
			return true;
	return false;
}

static void put_attr_value(printer *p, const tbc_attr *at, int depth) {
	buf *b = &p->b;
	char num[64];
	switch (at->kind) {
	case TBC_ATTR_INT: putf(b, "%" PRId64, at->i); break;
	case TBC_ATTR_FLOAT:
		format_double(num, sizeof num, at->f);
		puts_(b, num);
		break;
	case TBC_ATTR_STRING:
		put_quoted(b, at->s ? at->s : "", at->s ? at->s_len : 0);
		break;
	case TBC_ATTR_INTS:
	case TBC_ATTR_FLOATS:
	case TBC_ATTR_STRINGS:
	case TBC_ATTR_TENSORS:
	case TBC_ATTR_GRAPHS: {
		static const char *const empty[] = {[TBC_ATTR_INTS] = "ints", [TBC_ATTR_FLOATS] = "floats",
						    [TBC_ATTR_STRINGS] = "strings", [TBC_ATTR_TENSORS] = "tensors",
						    [TBC_ATTR_GRAPHS] = "graphs"};
		if (at->n <= 0) {
			puts_(b, empty[at->kind]);
			puts_(b, "[]");
			break;
		}
		put(b, "[", 1);
		for (int k = 0; k < at->n; k++) {
			if (k) put(b, ", ", 2);
			if (at->kind == TBC_ATTR_INTS) {
				putf(b, "%" PRId64, at->ints[k]);
			} else if (at->kind == TBC_ATTR_FLOATS) {
				format_double(num, sizeof num, at->floats[k]);
				puts_(b, num);
			} else if (at->kind == TBC_ATTR_STRINGS) {
				const char *s = at->strings[k] ? at->strings[k] : "";
				put_quoted(b, s, strlen(s));
			} else if (at->kind == TBC_ATTR_TENSORS) {
				put_tensor_literal(p, at->tensors[k]);
			} else {
				print_graph(p, at->graphs[k], depth);
			}
		}
		put(b, "]", 1);
		break;
	}
	case TBC_ATTR_TENSOR: put_tensor_literal(p, at->tensors ? at->tensors[0] : NULL); break;
	case TBC_ATTR_GRAPH: print_graph(p, at->graphs ? at->graphs[0] : NULL, depth); break;
	default: putf(b, "<bad attribute kind %d>", (int)at->kind); break;
	}
}

static void print_op(printer *p, const tbc_op *op, int depth) {
	buf *b = &p->b;
	indent(b, depth);
	for (int i = 0; i < op->n_outputs; i++) {
		if (i) put(b, ", ", 2);
		const tbc_value *v = op->outputs[i];
		put_ref(p, v);
		if (v && has_type(&v->type)) {
			put(b, ": ", 2);
			put_type(b, &v->type);
		}
	}
	if (op->n_outputs) put(b, " = ", 3);
	if ((unsigned)op->code < TBC_OP_COUNT) puts_(b, tbc_ops[op->code].name);
	else putf(b, "<bad op %d>", (int)op->code);
	put(b, "(", 1);
	for (int i = 0; i < op->n_inputs; i++) {
		if (i) put(b, ", ", 2);
		put_ref(p, op->inputs[i]);
	}
	put(b, ")", 1);
	if (op->n_attrs) {
		bool tall = op_has_graph(op);
		put(b, tall ? " {\n" : " {", tall ? 3 : 2);
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			if (a) put(b, tall ? ",\n" : ", ", 2);
			if (tall) indent(b, depth + 1);
			put_name(b, at->name ? at->name : "");
			put(b, " = ", 3);
			put_attr_value(p, at, depth + 1);
		}
		if (tall) {
			put(b, "\n", 1);
			indent(b, depth);
		}
		put(b, "}", 1);
	}
	if (op->name && *op->name) {
		put(b, " @", 2);
		put_name(b, op->name);
	}
	put(b, "\n", 1);
}

/* The header is at the caller's position; the body is indented one level
 * deeper than depth and the closing brace at depth. */
static void print_graph(printer *p, const tbc_graph *g, int depth) {
	buf *b = &p->b;
	if (!g) {
		puts_(b, "<no graph>");
		return;
	}
	if (++p->graph_depth > TBC_MAX_SUBGRAPH_DEPTH + 1) {
		puts_(b, "<graph nested too deep>");
		p->graph_depth--;
		return;
	}
	puts_(b, "graph ");
	put_name(b, g->name ? g->name : "");
	put(b, "(", 1);
	for (int i = 0; i < g->n_inputs; i++) {
		if (i) put(b, ", ", 2);
		put_ref(p, g->inputs[i]);
		if (g->inputs[i]) {
			put(b, ": ", 2);
			put_type(b, &g->inputs[i]->type);
		}
	}
	puts_(b, ") {\n");
	for (int i = 0; i < g->n_consts; i++) {
		const tbc_value *v = g->consts[i];
		if (!v) continue;
		indent(b, depth + 1);
		put_ref(p, v);
		put(b, ": ", 2);
		put_type(b, &v->type);
		puts_(b, " = const ");
		if (v->constant) put_data(p, v->constant);
		else puts_(b, "<no data>");
		put(b, "\n", 1);
	}
	if (ops_loop(g)) {
		indent(b, depth + 1);
		puts_(b, "# the op list loops\n");
	} else {
		for (const tbc_op *op = g->first; op; op = op->next) print_op(p, op, depth + 1);
	}
	indent(b, depth + 1);
	puts_(b, "return");
	for (int i = 0; i < g->n_outputs; i++) {
		put(b, i ? ", " : " ", i ? 2 : 1);
		put_ref(p, g->outputs[i]);
	}
	put(b, "\n", 1);
	indent(b, depth);
	put(b, "}", 1);
	p->graph_depth--;
}

static char *print_module(const tbc_module *m, size_t max_const_bytes) {
	printer p = {0};
	p.m = m;
	p.max_const_bytes = max_const_bytes;
	p.n_values = m->n_values;
	p.names = calloc(m->n_values ? m->n_values : 1, sizeof *p.names);
	p.scoped = calloc(m->n_values ? m->n_values : 1, sizeof *p.scoped);
	if (!p.names || !p.scoped || !sset_init(&p.all, m->n_values) || !sset_init(&p.scope, m->n_values)) p.b.oom = true;
	if (!p.b.oom && m->main) {
		collect_names(&p, m->main, 0);
		name_graph(&p, m->main, 0);
	}
	putf(&p.b, "module ir_version %" PRId64 " opset %" PRId64, m->ir_version, m->opset);
	if (m->producer) {
		puts_(&p.b, " producer ");
		put_quoted(&p.b, m->producer, strlen(m->producer));
	}
	put(&p.b, "\n", 1);
	if (m->main) {
		print_graph(&p, m->main, 0);
		put(&p.b, "\n", 1);
	}
	for (uint32_t i = 0; p.names && i < p.n_values; i++) free(p.names[i]);
	for (uint32_t i = 0; p.scoped && i < p.n_values; i++) free(p.scoped[i]);
	free(p.names);
	free(p.scoped);
	sset_free(&p.all);
	sset_free(&p.scope);
	if (p.b.oom || p.all.oom || p.scope.oom) {
		free(p.b.s);
		return NULL;
	}
	return p.b.s;
}

char *tbc_print(const tbc_module *m) {
	if (!m) return NULL;
	return print_module(m, 0);
}

char *tbc_print_abridged(const tbc_module *m, size_t max_const_bytes) {
	if (!m) return NULL;
	return print_module(m, max_const_bytes);
}
