/* Diagnostics: a growable list of errors, each with where it comes from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

struct tbc_diags {
	tbc_diag *items;
	size_t n, cap;
};

tbc_diags *tbc_diags_create(void) { return calloc(1, sizeof(tbc_diags)); }

static void free_diag(tbc_diag *d) {
	free((char *)d->file);
	free((char *)d->node);
	free((char *)d->op_type);
	free((char *)d->tensor);
	free((char *)d->message);
}

void tbc_diags_destroy(tbc_diags *d) {
	if (!d) return;
	for (size_t i = 0; i < d->n; i++) free_diag(&d->items[i]);
	free(d->items);
	free(d);
}

size_t tbc_diags_count(const tbc_diags *d) { return d ? d->n : 0; }
const tbc_diag *tbc_diags_get(const tbc_diags *d, size_t i) { return d && i < d->n ? &d->items[i] : NULL; }
tbc_code tbc_diags_first_code(const tbc_diags *d) { return d && d->n ? d->items[0].code : TBC_OK; }

static char *dup(const char *s) {
	if (!s) return NULL;
	size_t n = strlen(s);
	char *r = malloc(n + 1);
	if (r) memcpy(r, s, n + 1);
	return r;
}

void tbc_diags_addv(tbc_diags *d, tbc_code code, const char *file, const char *node,
		    const char *op_type, const char *tensor, const char *fmt, va_list ap) {
	if (!d) return;
	/* A flood of errors from a hostile model helps nobody. */
	if (d->n >= 100) return;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 8;
		tbc_diag *items = realloc(d->items, cap * sizeof *items);
		if (!items) return;
		d->items = items;
		d->cap = cap;
	}
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	tbc_diag *g = &d->items[d->n++];
	g->code = code;
	g->file = dup(file);
	g->node = node && *node ? dup(node) : NULL;
	g->op_type = dup(op_type);
	g->tensor = dup(tensor);
	g->message = dup(msg);
}

void tbc_diags_add(tbc_diags *d, tbc_code code, const char *file, const char *node,
		   const char *op_type, const char *tensor, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	tbc_diags_addv(d, code, file, node, op_type, tensor, fmt, ap);
	va_end(ap);
}

void tbc_diags_op(tbc_diags *d, tbc_code code, const tbc_op *op, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	const char *file = op && op->graph && op->graph->module ? op->graph->module->path : NULL;
	tbc_diags_addv(d, code, file, op ? op->name : NULL, op ? tbc_ops[op->code].onnx_name : NULL,
		       NULL, fmt, ap);
	va_end(ap);
}

void tbc_diag_format(const tbc_diag *g, char *buf, size_t size) {
	int n = snprintf(buf, size, "%s", g->file ? g->file : "tbc");
	size_t used = n < 0 ? 0 : (size_t)n;
#define ADD(...)                                                              \
	do {                                                                  \
		if (used < size) {                                            \
			int k = snprintf(buf + used, size - used, __VA_ARGS__); \
			if (k > 0) used += (size_t)k;                         \
		}                                                             \
	} while (0)
	if (g->node || g->op_type)
		ADD(": node '%s' (%s)", g->node ? g->node : "", g->op_type ? g->op_type : "?");
	if (g->tensor) ADD(": tensor '%s'", g->tensor);
	ADD(": %s", g->message ? g->message : "");
#undef ADD
}
