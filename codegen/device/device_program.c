/* The device program of a lowered program (device_program.h): each
 * kernel's launch plan, and the table of include/tbc/abi.h around a
 * target's code -- what kir_program_run walks, as data the runtime checks
 * and walks on a device (runtime/device_table.c). */
#include "codegen/device/device_program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbc/abi.h"
#include "tbc/tbc.h"

/* ---- Launch plans ---------------------------------------------------------*/

/* Walks the statements: global buffers stored, checks in program order. */
static bool walk(tbc_dev_plan *p, const kir_stmt *s, int *cap) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_STORE && s->buf->space == KIR_MEM_GLOBAL) p->stored[s->buf->id] = true;
		if (s->kind == KIR_S_ERROR) {
			if (p->n_messages == *cap) {
				int grown_cap = *cap ? 2 * *cap : 8;
				const kir_stmt **grown = realloc(p->errors, (size_t)grown_cap * sizeof *grown);
				if (!grown) return false;
				p->errors = grown;
				*cap = grown_cap;
			}
			p->errors[p->n_messages++] = s;
		}
		if (!walk(p, s->body, cap) || !walk(p, s->orelse, cap)) return false;
	}
	return true;
}

bool tbc_dev_plan_make(const kir_kernel *k, tbc_dev_plan *out, tbc_diags *d) {
	memset(out, 0, sizeof *out);
	out->n_dims = 1;
	out->stored = calloc((size_t)k->n_buffers + 1, sizeof *out->stored);
	int cap = 0;
	if (!out->stored || !walk(out, k->body, &cap)) {
		tbc_dev_plan_free(out);
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory planning kernel %s", k->name);
		return false;
	}
	out->can_fail = kir_kernel_can_fail(k);
	if (kir_kernel_is_grouped(k)) {
		out->shape = TBC_DEV_GROUPS;
		for (const kir_stmt *s = k->body; s && s->kind == KIR_S_FOR && s->loop == KIR_LOOP_GRID && out->n_groups < 3;
		     s = s->body)
			out->groups[out->n_groups++] = s;
		for (int g = 0; g < 3; g++) out->local_size[g] = k->group[g];
		out->n_dims = out->n_groups > k->group_dims ? out->n_groups : k->group_dims;
	} else {
		out->grid = kir_kernel_grid_loop(k);
		out->shape = out->grid ? TBC_DEV_GRID : TBC_DEV_SINGLE;
	}
	return true;
}

void tbc_dev_plan_free(tbc_dev_plan *p) {
	free(p->errors);
	free(p->stored);
	memset(p, 0, sizeof *p);
}

int tbc_dev_plan_dim(const tbc_dev_plan *p, const kir_stmt *s) {
	if (p->shape == TBC_DEV_GRID && s == p->grid) return 0;
	for (int g = 0; g < p->n_groups; g++)
		if (p->groups[g] == s) return g;
	return -1;
}

int tbc_dev_plan_error(const tbc_dev_plan *p, const kir_stmt *s) {
	for (int i = 0; i < p->n_messages; i++)
		if (p->errors[i] == s) return i + 1;
	return 0;
}

/* Units launched for a trip count: all of them up to a cap (the grid and
 * group loops stride, so fewer are correct too). */
static uint64_t capped(int64_t lo, int64_t hi, int64_t step) {
	int64_t trips = hi > lo ? (hi - lo + step - 1) / step : 0;
	return trips < 1 ? 1 : trips > TBC_DEV_MAX_UNITS ? TBC_DEV_MAX_UNITS : (uint64_t)trips;
}

bool tbc_dev_launch_geometry(const kir_kernel *k, const tbc_dev_plan *p, const int64_t *sizes, uint32_t *dims,
			     uint64_t global[3], uint64_t local[3], tbc_diags *d) {
	*dims = 1;
	for (int i = 0; i < 3; i++) global[i] = 1, local[i] = 0;
	int64_t lo = 0, hi = 0;
	switch (p->shape) {
	case TBC_DEV_SINGLE: return true;
	case TBC_DEV_GRID:
		if (!kir_eval_index(k, p->grid->lo, sizes, &lo, d) || !kir_eval_index(k, p->grid->hi, sizes, &hi, d)) return false;
		global[0] = capped(lo, hi, p->grid->step);
		return true;
	case TBC_DEV_GROUPS:
		*dims = (uint32_t)p->n_dims;
		for (int g = 0; g < 3; g++) {
			uint64_t groups = 1;
			if (g < p->n_groups) {
				const kir_stmt *s = p->groups[g];
				if (!kir_eval_index(k, s->lo, sizes, &lo, d) || !kir_eval_index(k, s->hi, sizes, &hi, d)) return false;
				groups = capped(lo, hi, s->step);
			}
			local[g] = (uint64_t)p->local_size[g];
			global[g] = groups * local[g];
		}
		return true;
	}
	return false;
}

/* ---- The table ------------------------------------------------------------*/

typedef struct words {
	int64_t *w;
	size_t n, cap;
	bool oom;
} words;

static void put(words *o, int64_t v) {
	if (o->oom) return;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 1024;
		int64_t *grown = realloc(o->w, cap * sizeof *grown);
		if (!grown) {
			o->oom = true;
			return;
		}
		o->w = grown;
		o->cap = cap;
	}
	o->w[o->n++] = v;
}

/* Bytes: their count, then the bytes zero-padded to whole words. */
static void put_bytes(words *o, const void *bytes, size_t n) {
	put(o, (int64_t)n);
	for (size_t i = 0; i < n; i += 8) {
		int64_t w = 0;
		memcpy(&w, (const char *)bytes + i, n - i < 8 ? n - i : 8);
		put(o, w);
	}
}

static void put_string(words *o, const char *s) { put_bytes(o, s, s ? strlen(s) : 0); }

/* Postfix form of an index expression; false for anything but constants,
 * sizes and the integer arithmetic the table knows. */
static bool expr_ops(words *o, const kir_expr *e, int depth) {
	if (!e || depth > 64) return false;
	switch (e->kind) {
	case KIR_E_INT:
		put(o, TBC_ABI_EXPR_CONST), put(o, e->i);
		return true;
	case KIR_E_SIZE:
		put(o, TBC_ABI_EXPR_SIZE), put(o, e->size);
		return true;
	case KIR_E_BINARY: {
		int op;
		switch (e->op) {
		case KIR_ADD: op = TBC_ABI_EXPR_ADD; break;
		case KIR_SUB: op = TBC_ABI_EXPR_SUB; break;
		case KIR_MUL: op = TBC_ABI_EXPR_MUL; break;
		case KIR_DIV: op = TBC_ABI_EXPR_DIV; break;
		case KIR_REM: op = TBC_ABI_EXPR_REM; break;
		case KIR_FLOORDIV: op = TBC_ABI_EXPR_FLOORDIV; break;
		case KIR_FLOORMOD: op = TBC_ABI_EXPR_FLOORMOD; break;
		case KIR_MIN: op = TBC_ABI_EXPR_MIN; break;
		case KIR_MAX: op = TBC_ABI_EXPR_MAX; break;
		default: return false;
		}
		if (!expr_ops(o, e->a, depth + 1) || !expr_ops(o, e->b, depth + 1)) return false;
		put(o, op), put(o, 0);
		return true;
	}
	default: return false;
	}
}

/* The grid's bounds; an expression the table cannot hold becomes the
 * largest grid (the loop is grid-stride, so any size is correct). */
static void put_expr(words *o, const kir_expr *e, int64_t fallback) {
	words ops = {0};
	if (e && expr_ops(&ops, e, 0) && !ops.oom) {
		put(o, (int64_t)ops.n / 2);
		for (size_t i = 0; i < ops.n; i++) put(o, ops.w[i]);
	} else {
		put(o, 1), put(o, TBC_ABI_EXPR_CONST), put(o, fallback);
	}
	free(ops.w);
}

/* tbc_<kernel>_<node>: C identifier characters only, at most 80 bytes. */
static void kernel_name(const kir_kernel *k, const char *node, char *out, size_t size) {
	int n = snprintf(out, size, "tbc_%s%s%s", k->name, node && *node ? "_" : "", node ? node : "");
	size_t len = n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
	for (size_t i = 4; i < len; i++)
		if (!((out[i] >= 'a' && out[i] <= 'z') || (out[i] >= 'A' && out[i] <= 'Z') || (out[i] >= '0' && out[i] <= '9')))
			out[i] = '_';
}

static int role_of(kir_buffer_role r) {
	switch (r) {
	case KIR_BUF_INPUT: return TBC_ABI_BUF_INPUT;
	case KIR_BUF_OUTPUT: return TBC_ABI_BUF_OUTPUT;
	case KIR_BUF_CONST: return TBC_ABI_BUF_CONST;
	case KIR_BUF_TEMP: return TBC_ABI_BUF_TEMP;
	case KIR_BUF_SYMS: return TBC_ABI_BUF_SYMS;
	}
	return -1;
}

static int sym_index(const kir_program *p, const char *name) {
	for (int s = 0; s < p->n_syms; s++)
		if (!strcmp(p->sym_names[s], name)) return s;
	return -1;
}

static void put_kernel(words *o, const tbc_dev_kernel *dk) {
	const kir_kernel *k = dk->k;
	const tbc_dev_plan *c = &dk->plan;
	put_string(o, dk->name);
	put(o, k->n_buffers);
	put(o, k->n_sizes);
	/* The launch geometry, as tbc_dev_launch_geometry computes it: per dim
	 * a loop's step and bounds, and the work-group size (0: any). */
	if (c->shape == TBC_DEV_GROUPS) {
		put(o, 2), put(o, c->n_dims);
		for (int g = 0; g < c->n_dims; g++) {
			const kir_stmt *loop = g < c->n_groups ? c->groups[g] : NULL;
			put(o, loop ? loop->step : 1);
			put_expr(o, loop ? loop->lo : NULL, 0);
			put_expr(o, loop ? loop->hi : NULL, 1);
			put(o, c->local_size[g]);
		}
	} else {
		const kir_stmt *grid = c->grid;
		put(o, grid ? 1 : 0), put(o, 1);
		put(o, grid ? grid->step : 1);
		put_expr(o, grid ? grid->lo : NULL, 0);
		put_expr(o, grid ? grid->hi : NULL, grid ? TBC_DEV_MAX_UNITS : 1);
		put(o, 0);
	}
	for (int b = 0; b < k->n_buffers; b++) put(o, c->stored[b] ? 1 : 0);
	for (int b = 0; b < k->n_buffers; b++) { /* what the kernel may touch */
		const kir_buffer *kb = k->buffers[b];
		put(o, kb->dtype == KIR_INDEX ? 8 : (int64_t)tbc_dtype_size(kb->dtype));
		put(o, kb->rank);
		for (int d = 0; d < kb->rank; d++) put_expr(o, kb->dims[d], 0);
	}
	put(o, c->can_fail ? c->n_messages : 0);
	for (int m = 0; c->can_fail && m < c->n_messages; m++) put_string(o, c->errors[m]->message);
}

static void put_tables(words *o, const kir_program *p, const tbc_dev_kernel *ks, int n_ks, const int *kernel_of) {
	put(o, p->n_syms);
	put(o, p->syms_buf);
	put(o, p->n_bufs);
	for (int i = 0; i < p->n_bufs; i++) {
		const kir_pbuf *b = p->bufs[i];
		put(o, role_of(b->role));
		put(o, b->role == KIR_BUF_SYMS ? TBC_DT_I64 : (int64_t)b->type.dtype);
		put(o, b->io_index);
		put(o, b->alias_of);
		put(o, (b->dynamic ? 1 : 0) | (b->keep ? 2 : 0));
		put(o, b->role == KIR_BUF_CONST ? b->offset : 0);
		put(o, b->role == KIR_BUF_TEMP ? b->part : -1);
		put(o, b->role == KIR_BUF_TEMP && b->part >= 0 ? b->part_offset : 0);
		put(o, b->type.rank);
		for (int d = 0; d < b->type.rank; d++)
			put(o, b->type.dims[d].sym ? -1 - sym_index(p, b->type.dims[d].sym) : b->type.dims[d].size);
	}
	put(o, p->n_parts);
	for (int j = 0; j < p->n_parts; j++) {
		put(o, p->parts[j].bytes);
		put(o, p->parts[j].n_syms);
		for (int s = 0; s < p->parts[j].n_syms; s++) put(o, p->parts[j].syms[s]);
	}
	put(o, p->n_inputs);
	for (int i = 0; i < p->n_inputs; i++) put(o, p->inputs[i]);
	put(o, p->n_outputs);
	for (int i = 0; i < p->n_outputs; i++) put(o, p->outputs[i]);
	put(o, n_ks);
	for (int i = 0; i < n_ks; i++) put_kernel(o, &ks[i]);
	put(o, p->n_launches);
	for (int l = 0; l < p->n_launches; l++) {
		const kir_launch *la = &p->launches[l];
		put(o, (int64_t)la->ctl);
		for (int j = 0; j < 3; j++) put(o, la->ctl == KIR_CTL_KERNEL ? -1 : la->ctl_sym[j]);
		put(o, la->ctl == KIR_CTL_KERNEL ? kernel_of[l] : -1);
		if (la->ctl != KIR_CTL_KERNEL) continue;
		for (int a = 0; a < la->kernel->n_buffers; a++) put(o, la->args[a]);
		for (int s = 0; s < la->kernel->n_sizes; s++) put(o, la->syms[s]);
	}
}

bool tbc_dev_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			  const tbc_dev_target *t, tbc_dev_program *out, tbc_diags *d) {
	memset(out, 0, sizeof *out);
	tbc_dev_kernel *ks = calloc((size_t)p->n_launches + 1, sizeof *ks);
	int *kernel_of = calloc((size_t)p->n_launches + 1, sizeof *kernel_of);
	int n_ks = 0;
	bool ok = ks && kernel_of;
	if (!ok) tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
	for (int l = 0; ok && l < p->n_launches; l++) {
		kernel_of[l] = -1;
		if (p->launches[l].ctl != KIR_CTL_KERNEL) continue;
		const kir_kernel *k = p->launches[l].kernel;
		int found = -1;
		for (int i = 0; i < n_ks && found < 0; i++)
			if (ks[i].k == k) found = i;
		if (found >= 0) {
			kernel_of[l] = found;
			continue;
		}
		int pos = p->launches[l].op_pos;
		tbc_dev_kernel *slot = &ks[n_ks];
		slot->k = k;
		slot->node = op_names && pos >= 0 && pos < n_ops ? op_names[pos] : NULL;
		kernel_name(k, slot->node, slot->name, sizeof slot->name);
		if (!tbc_dev_plan_make(k, &slot->plan, d)) ok = false;
		else kernel_of[l] = n_ks++;
	}
	if (ok) ok = t->emit(t->user, p, model_name ? model_name : p->name, ks, n_ks, &out->code, &out->code_size, d);
	words o = {0};
	if (ok) {
		put(&o, (int64_t)TBC_ABI_DEVICE_MAGIC);
		put(&o, TBC_ABI_DEVICE_VERSION);
		put(&o, t->kind);
		put_bytes(&o, out->code, out->code_size);
		put_string(&o, t->options);
		put_tables(&o, p, ks, n_ks, kernel_of);
		put(&o, 0); /* the binary (version 3): none until tbc_dev_program_set_binary */
		if (o.oom) {
			ok = false;
			tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
		}
	}
	for (int i = 0; ks && i < n_ks; i++) tbc_dev_plan_free(&ks[i].plan);
	free(ks);
	free(kernel_of);
	if (!ok) {
		if (!tbc_diags_first_code(d)) tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "device program failed");
		free(o.w);
		tbc_dev_program_free(out);
		return false;
	}
	out->table = o.w;
	out->table_size = o.n * sizeof *o.w;
	return true;
}

bool tbc_dev_program_set_binary(tbc_dev_program *o, const void *bin, size_t size) {
	/* The table ends with the binary's string, empty (one word: length 0). */
	size_t pad = (size + 7) / 8 * 8;
	if (o->table_size < 8 || size > SIZE_MAX / 2 || o->table_size - 8 > SIZE_MAX / 2 - pad - 8) return false;
	size_t at = o->table_size - 8, total = at + 8 + pad;
	unsigned char *t = realloc(o->table, total);
	if (!t) return false;
	int64_t len = (int64_t)size;
	memcpy(t + at, &len, 8);
	if (size) memcpy(t + at + 8, bin, size);
	memset(t + at + 8 + size, 0, pad - size);
	o->table = t;
	o->table_size = total;
	return true;
}

void tbc_dev_program_free(tbc_dev_program *o) {
	free(o->code);
	free(o->table);
	memset(o, 0, sizeof *o);
}

bool tbc_dev_arch_check(const char *target, const char *what, const char *arch, const char *const *accepted, size_t n,
			tbc_diags *d) {
	if (!arch) return true;
	char list[512] = "";
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(arch, accepted[i])) return true;
		int w = snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", accepted[i]);
		if (w > 0 && (size_t)w < sizeof list - at) at += (size_t)w;
	}
	tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "%s: unknown %s '%s'; accepted: %s", target, what,
		      arch, list);
	return false;
}
