/* A lowered program as an OpenCL artifact: its kernels printed into one
 * source (a header comment naming the model, the preamble, one __kernel per
 * kernel, each once however many launches it has), and the device program
 * table of include/tbc/abi.h around it -- what kir_program_run walks, as
 * data the runtime checks and walks on a device (runtime/device_table.c).
 *
 * Determinism: everything is written in program order from the program's
 * own numbers and names; no pointer or hash reaches the bytes. */
#include "codegen/opencl/opencl_program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opencl/opencl_c.h"
#include "tbc/abi.h"
#include "tbc/tbc.h"

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

/* A string: its length, then its bytes zero-padded to whole words. */
static void put_string(words *o, const char *s) {
	size_t n = s ? strlen(s) : 0;
	put(o, (int64_t)n);
	for (size_t i = 0; i < n; i += 8) {
		int64_t w = 0;
		memcpy(&w, s + i, n - i < 8 ? n - i : 8);
		put(o, w);
	}
}

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

static void put_comment(FILE *f, const char *s) {
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '*' && s[1] == '/') fputs("* ", f);
		else if (c < 32 || c >= 127) fputc('?', f);
		else fputc(c, f);
	}
}

typedef struct printed {
	const kir_kernel *k;
	char name[80];
	tbc_ocl_kernel ocl;
} printed;

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

static void put_tables(words *o, const kir_program *p, const printed *ks, int n_ks, const int *kernel_of) {
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
	for (int i = 0; i < n_ks; i++) {
		const kir_kernel *k = ks[i].k;
		const tbc_ocl_kernel *c = &ks[i].ocl;
		put_string(o, ks[i].name);
		put(o, k->n_buffers);
		put(o, k->n_sizes);
		/* The launch geometry, as tbc_ocl_launch_geometry computes it: per
		 * dim a loop's step and bounds, and the work-group size (0: any). */
		if (c->shape == TBC_OCL_GROUPS) {
			int nd = c->n_groups > k->group_dims ? c->n_groups : k->group_dims;
			put(o, 2), put(o, nd);
			for (int g = 0; g < nd; g++) {
				bool loop = g < c->n_groups;
				put(o, loop ? c->group_step[g] : 1);
				put_expr(o, loop ? c->group_lo[g] : NULL, 0);
				put_expr(o, loop ? c->group_hi[g] : NULL, 1);
				put(o, c->local_size[g]);
			}
		} else {
			bool grid = c->shape == TBC_OCL_GRID;
			put(o, grid ? 1 : 0), put(o, 1);
			put(o, grid ? c->grid_step : 1);
			put_expr(o, grid ? c->grid_lo : NULL, 0);
			put_expr(o, grid ? c->grid_hi : NULL, grid ? 65536 : 1);
			put(o, 0);
		}
		for (int b = 0; b < k->n_buffers; b++) put(o, c->stored[b] ? 1 : 0);
		for (int b = 0; b < k->n_buffers; b++) { /* what the kernel may touch */
			const kir_buffer *kb = k->buffers[b];
			put(o, kb->dtype == KIR_INDEX ? 8 : (int64_t)tbc_dtype_size(kb->dtype));
			put(o, kb->rank);
			for (int d = 0; d < kb->rank; d++) put_expr(o, kb->dims[d], 0);
		}
		put(o, c->has_status ? c->n_messages : 0);
		for (int m = 0; c->has_status && m < c->n_messages; m++) put_string(o, c->messages[m]);
	}
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

bool tbc_ocl_program_make(const kir_program *p, const char *model_name, const char *const *op_names, int n_ops,
			  tbc_ocl_program *out, tbc_diags *d) {
	memset(out, 0, sizeof *out);
	printed *ks = calloc((size_t)p->n_launches + 1, sizeof *ks);
	int *kernel_of = calloc((size_t)p->n_launches + 1, sizeof *kernel_of);
	char *src = NULL;
	size_t src_size = 0;
	FILE *f = ks && kernel_of ? open_memstream(&src, &src_size) : NULL;
	int n_ks = 0;
	bool ok = f != NULL;
	if (ok) {
		int n_kernels = 0;
		for (int l = 0; l < p->n_launches; l++) n_kernels += p->launches[l].ctl == KIR_CTL_KERNEL;
		fputs("/* Generated by tbc " TBC_VERSION_STRING " from the model '", f);
		put_comment(f, model_name ? model_name : p->name);
		fprintf(f, "': OpenCL C 1.2, %d launches.\n * libtbcrt runs it from the artifact's launch table "
			   "(docs/opencl.md); kernels are\n * named tbc_<kernel>_<ONNX node>. */\n",
			n_kernels);
		fputs(tbc_ocl_preamble(), f);
	}
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
		const char *node = op_names && pos >= 0 && pos < n_ops ? op_names[pos] : NULL;
		printed *slot = &ks[n_ks];
		kernel_name(k, node, slot->name, sizeof slot->name);
		if (!tbc_ocl_print_kernel(k, slot->name, &slot->ocl, d)) {
			ok = false;
			break;
		}
		slot->k = k;
		kernel_of[l] = n_ks++;
		fputs("\n/* ", f);
		put_comment(f, k->name);
		if (node && *node) {
			fputs(" of node '", f);
			put_comment(f, node);
			fputs("'", f);
		}
		fprintf(f, " */\n%s", slot->ocl.source);
	}
	if (f && fclose(f) != 0) ok = false;
	words o = {0};
	if (ok) {
		put(&o, (int64_t)TBC_ABI_DEVICE_MAGIC);
		put(&o, TBC_ABI_DEVICE_VERSION);
		put(&o, TBC_ABI_DEVICE_OPENCL_C);
		put_string(&o, src);
		put_string(&o, "-cl-std=CL1.2");
		put_tables(&o, p, ks, n_ks, kernel_of);
		ok = !o.oom;
	}
	for (int i = 0; ks && i < n_ks; i++) tbc_ocl_kernel_free(&ks[i].ocl);
	free(ks);
	free(kernel_of);
	if (!ok) {
		if (!tbc_diags_first_code(d)) tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
		free(src);
		free(o.w);
		return false;
	}
	out->source = src;
	out->table = o.w;
	out->table_size = o.n * sizeof *o.w;
	return true;
}

void tbc_ocl_program_free(tbc_ocl_program *o) {
	free(o->source);
	free(o->table);
	memset(o, 0, sizeof *o);
}
