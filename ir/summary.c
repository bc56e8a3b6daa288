/* The module summary `tbc inspect` prints under the IR: inputs and outputs
 * with their types, ops by kind and by op (subgraphs included), and the
 * parameters (constants): element count and bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct stats {
	int64_t by_op[TBC_OP_COUNT];
	int64_t by_cat[TBC_CAT_COUNT];
	int64_t ops, sub_ops, consts, params, bits;
} stats;

static bool ops_loop(const tbc_graph *g) {
	const tbc_op *slow = g->first, *fast = g->first;
	while (fast && fast->next) {
		slow = slow->next;
		fast = fast->next->next;
		if (slow == fast) return true;
	}
	return false;
}

static void count_graph(stats *s, const tbc_graph *g, int depth) {
	if (!g || depth > TBC_MAX_SUBGRAPH_DEPTH || ops_loop(g)) return;
	for (int i = 0; i < g->n_consts; i++) {
		const tbc_tensor *t = g->consts[i] ? g->consts[i]->constant : NULL;
		if (!t) continue;
		s->consts++;
		s->params += t->numel;
		s->bits += t->numel * tbc_dtype_bits(t->dtype);
	}
	for (const tbc_op *op = g->first; op; op = op->next) {
		if ((unsigned)op->code >= TBC_OP_COUNT) continue;
		s->ops++;
		if (depth) s->sub_ops++;
		s->by_op[op->code]++;
		s->by_cat[tbc_ops[op->code].category]++;
		for (int a = 0; a < op->n_attrs; a++) {
			const tbc_attr *at = &op->attrs[a];
			int n = at->kind == TBC_ATTR_GRAPH ? 1 : at->kind == TBC_ATTR_GRAPHS ? at->n : 0;
			for (int k = 0; k < n && at->graphs; k++) count_graph(s, at->graphs[k], depth + 1);
		}
	}
}

static void put_type(FILE *f, const tbc_type *t) {
	fputs(tbc_dtype_name(t->dtype), f);
	if (t->rank < 0 || t->rank > TBC_MAX_RANK) {
		fputs("[*]", f);
		return;
	}
	fputc('[', f);
	for (int i = 0; i < t->rank; i++) {
		if (i) fputc(',', f);
		if (t->dims[i].sym) fputs(t->dims[i].sym, f);
		else if (t->dims[i].size < 0) fputc('?', f);
		else fprintf(f, "%" PRId64, t->dims[i].size);
	}
	fputc(']', f);
}

static void put_values(FILE *f, const char *title, tbc_value *const *vs, int n) {
	fprintf(f, "%s: %d\n", title, n);
	for (int i = 0; i < n; i++) {
		char nb[32];
		if (!vs[i]) continue;
		fprintf(f, "  %s: ", tbc_value_display_name(vs[i], nb, sizeof nb));
		put_type(f, &vs[i]->type);
		fputc('\n', f);
	}
}

/* Groups of 3 digits: 25557032 -> 25,557,032. */
static void put_count(FILE *f, int64_t v) {
	char d[32];
	int n = snprintf(d, sizeof d, "%" PRId64, v);
	for (int i = 0; i < n; i++) {
		fputc(d[i], f);
		int left = n - i - 1;
		if (left > 0 && left % 3 == 0 && d[i] != '-') fputc(',', f);
	}
}

typedef struct row {
	const char *name;
	int64_t n;
} row;

static int by_count(const void *a, const void *b) {
	const row *x = a, *y = b;
	if (x->n != y->n) return x->n > y->n ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void put_rows(FILE *f, row *rows, int n) {
	qsort(rows, (size_t)n, sizeof *rows, by_count);
	int w = 0;
	for (int i = 0; i < n; i++)
		if ((int)strlen(rows[i].name) > w) w = (int)strlen(rows[i].name);
	for (int i = 0; i < n; i++) {
		fprintf(f, "    %-*s  ", w, rows[i].name);
		put_count(f, rows[i].n);
		fputc('\n', f);
	}
}

char *tbc_module_summary(const tbc_module *m) {
	if (!m || !m->main) return NULL;
	char *out = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&out, &size);
	if (!f) return NULL;
	stats *s = calloc(1, sizeof *s);
	if (!s) {
		fclose(f);
		free(out);
		return NULL;
	}
	count_graph(s, m->main, 0);
	put_values(f, "inputs", m->main->inputs, m->main->n_inputs);
	put_values(f, "outputs", m->main->outputs, m->main->n_outputs);
	fputs("ops: ", f);
	put_count(f, s->ops);
	if (s->sub_ops) {
		fputs(" (", f);
		put_count(f, s->sub_ops);
		fputs(" in subgraphs)", f);
	}
	fputc('\n', f);
	row rows[(int)TBC_OP_COUNT + (int)TBC_CAT_COUNT];
	int n = 0;
	for (int c = 0; c < TBC_CAT_COUNT; c++)
		if (s->by_cat[c]) rows[n++] = (row){tbc_opcat_name((tbc_opcat)c), s->by_cat[c]};
	if (n) {
		fputs("  by kind:\n", f);
		put_rows(f, rows, n);
	}
	n = 0;
	for (int o = 0; o < TBC_OP_COUNT; o++)
		if (s->by_op[o]) rows[n++] = (row){tbc_ops[o].name, s->by_op[o]};
	if (n) {
		fputs("  by op:\n", f);
		put_rows(f, rows, n);
	}
	fputs("parameters: ", f);
	put_count(f, s->params);
	fputs(" in ", f);
	put_count(f, s->consts);
	fprintf(f, " constant%s, ", s->consts == 1 ? "" : "s");
	put_count(f, (s->bits + 7) / 8);
	fputs(" bytes\n", f);
	free(s);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
