/* Programs at run time without a backend: symbol binding, arena layout, and
 * evaluation through the kernel IR evaluator (the oracle for backends). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/host/program.h"
#include "ir/symdim.h"
#include "tbc/abi.h"

/* Where each part starts (base[j]) and the product of its symbols
 * (scale[j]); returns the end of the last part, -1 on overflow. */
static int64_t part_bases(const kir_program *p, const int64_t *syms, int64_t *base, int64_t *scale) {
	int64_t end = 0;
	for (int j = 0; j < p->n_parts; j++) {
		const kir_part *q = &p->parts[j];
		int64_t prod = 1;
		for (int i = 0; i < q->n_syms; i++) {
			int64_t x = syms ? syms[q->syms[i]] : -1;
			if (x < 0 || (x && prod > INT64_MAX / x)) return -1;
			prod *= x;
		}
		if (prod && q->bytes > (INT64_MAX / 2 - end) / prod) return -1;
		base[j] = end;
		scale[j] = prod;
		end += q->bytes * prod;
	}
	return end;
}

int64_t kir_program_layout(const kir_program *p, const int64_t *syms, int64_t *offsets) {
	int64_t small_base[8], small_scale[8];
	int64_t *base = small_base, *scale = small_scale;
	if (p->n_parts > 8) {
		base = malloc((size_t)p->n_parts * sizeof *base);
		scale = malloc((size_t)p->n_parts * sizeof *scale);
	}
	int64_t end = base && scale ? part_bases(p, syms, base, scale) : -1;
	for (int i = 0; i < p->n_bufs && end >= 0; i++) {
		const kir_pbuf *b = p->bufs[i];
		if (offsets) offsets[i] = -1;
		if (b->role != KIR_BUF_TEMP || b->alias_of >= 0 || b->dynamic) continue;
		if (b->part >= 0 && b->part < p->n_parts) {
			if (offsets) offsets[i] = base[b->part] + b->part_offset * scale[b->part];
			continue;
		}
		int64_t bytes = kir_pbuf_bytes(p, b, syms);
		if (bytes < 0 || bytes > INT64_MAX / 2 - end) {
			end = -1;
			break;
		}
		if (offsets) offsets[i] = end;
		end += (bytes + KIR_ALIGN - 1) / KIR_ALIGN * KIR_ALIGN;
	}
	if (base != small_base) free(base);
	if (scale != small_scale) free(scale);
	if (offsets && end >= 0)
		for (int i = 0; i < p->n_bufs; i++)
			if (p->bufs[i]->alias_of >= 0) offsets[i] = offsets[p->bufs[i]->alias_of];
	return end;
}

bool kir_program_bind_syms(const kir_program *p, tbc_tensor *const *in, size_t n_in, int64_t *syms, tbc_diags *d) {
	if (n_in != (size_t)p->n_inputs) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "the model takes %d inputs, not %zu",
			      p->n_inputs, n_in);
		return false;
	}
	for (int s = 0; s < p->n_syms; s++) syms[s] = -1;
	for (int i = 0; i < p->n_inputs; i++) {
		const kir_pbuf *b = p->bufs[p->inputs[i]];
		const tbc_tensor *t = in[i];
		if (!t || t->dtype != b->type.dtype || t->rank != b->type.rank) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, b->name,
				      "input %d must be %s of rank %d", i, tbc_dtype_name(b->type.dtype), b->type.rank);
			return false;
		}
		for (int dd = 0; dd < t->rank; dd++) {
			tbc_dim dim = b->type.dims[dd];
			if (!dim.sym) {
				if (t->dims[dd] != dim.size) {
					tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, b->name,
						      "dim %d of input %d is %" PRId64 ", the model needs %" PRId64, dd, i,
						      t->dims[dd], dim.size);
					return false;
				}
				continue;
			}
			for (int s = 0; s < p->n_syms; s++) {
				if (strcmp(p->sym_names[s], dim.sym)) continue;
				if (syms[s] >= 0 && syms[s] != t->dims[dd]) {
					tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, b->name,
						      "dim %d of input %d is %" PRId64 " but %s is %" PRId64 " elsewhere", dd, i,
						      t->dims[dd], dim.sym, syms[s]);
					return false;
				}
				syms[s] = t->dims[dd];
			}
		}
	}
	/* Derived symbols, with the evaluator the runtime uses. */
	int32_t *derived = malloc(((size_t)p->n_syms + 1) * sizeof *derived);
	int64_t *poly = NULL;
	size_t len = 0;
	if (!derived || !kir_program_derived_table(p, derived, &poly, &len)) {
		free(derived);
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
		return false;
	}
	uint32_t bad = tbc_abi_derive_syms((uint32_t)p->n_syms, poly ? derived : NULL, poly, syms);
	free(derived);
	free(poly);
	if (bad < (uint32_t)p->n_syms) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL,
			      "the inputs' sizes make %s negative or too large: they fit no valid shape of the model",
			      p->sym_names[bad]);
		return false;
	}
	return true;
}

bool kir_program_derived_table(const kir_program *p, int32_t *derived, int64_t **out_poly, size_t *out_len) {
	*out_poly = NULL;
	*out_len = 0;
	size_t len = 0, cap = 0;
	int64_t *poly = NULL;
	for (int s = 0; s < p->n_syms; s++) {
		derived[s] = -1;
		if (!p->sym_derived || !p->sym_derived[s]) continue;
		tbc_poly q;
		if (!tbc_poly_of_sym(p->sym_names[s], &q)) goto fail;
		size_t need = 1;
		for (int t = 0; t < q.n_terms; t++) need += 2 + (size_t)q.terms[t].degree;
		if (len + need > cap || !poly) {
			cap = (len + need) * 2;
			int64_t *grown = realloc(poly, cap * sizeof *poly);
			if (!grown) goto fail;
			poly = grown;
		}
		derived[s] = (int32_t)len;
		poly[len++] = q.n_terms;
		for (int t = 0; t < q.n_terms; t++) {
			poly[len++] = q.terms[t].coeff;
			poly[len++] = q.terms[t].degree;
			for (int k = 0; k < q.terms[t].degree; k++) {
				const char *atom = tbc_poly_atom_name(&q, q.terms[t].atoms[k]);
				int a = 0;
				while (a < s && strcmp(p->sym_names[a], atom)) a++;
				if (a == s) goto fail; /* lowering registers atoms first */
				poly[len++] = a;
			}
		}
	}
	*out_poly = poly;
	*out_len = len;
	return true;
fail:
	free(poly);
	return false;
}

/* The dims of buffer b given the symbols. */
static void pbuf_dims(const kir_program *p, const kir_pbuf *b, const int64_t *syms, int64_t *dims) {
	for (int d = 0; d < b->type.rank; d++) {
		dims[d] = b->type.dims[d].size;
		if (b->type.dims[d].sym)
			for (int s = 0; s < p->n_syms; s++)
				if (!strcmp(p->sym_names[s], b->type.dims[d].sym)) dims[d] = syms[s];
	}
}

/* Memory of dynamic temporaries, freed after the run. */
typedef struct dyn_block {
	struct dyn_block *next;
	_Alignas(64) unsigned char data[];
} dyn_block;

/* Whether output tensor t has the dims buffer b has given the symbols. */
static bool dims_match(const kir_program *p, const kir_pbuf *b, const int64_t *syms, const tbc_tensor *t) {
	int64_t dims[TBC_MAX_RANK];
	pbuf_dims(p, b, syms, dims);
	for (int d = 0; d < b->type.rank; d++)
		if (dims[d] != t->dims[d]) return false;
	return true;
}

/* Gives buffer i (and, through it, its root) its memory; symbols its size
 * needs are computed by then.  A dynamic root is checked at each use and
 * gets new memory when its size has grown (cap: the bytes it has), an
 * output when its dims changed (a region may compute them again). */
static tbc_code eval_place(const kir_program *p, int i, int64_t *syms, tbc_tensor *const *in, tbc_tensor **out,
			   void *weights, void *arena, const int64_t *offsets, void **ptrs, int64_t *cap, dyn_block **dyn) {
	const kir_pbuf *b = p->bufs[i];
	int r = b->alias_of >= 0 ? b->alias_of : i;
	const kir_pbuf *root = p->bufs[r];
	void *old = NULL; /* what a growing `keep` buffer held */
	if (ptrs[r] && root->dynamic) {
		if (root->role == KIR_BUF_OUTPUT ? !dims_match(p, root, syms, out[root->io_index])
						 : kir_pbuf_bytes(p, root, syms) > cap[r]) {
			if (root->role == KIR_BUF_OUTPUT) {
				tbc_tensor_destroy(out[root->io_index]);
				out[root->io_index] = NULL;
			}
			old = root->keep ? ptrs[r] : NULL;
			ptrs[r] = NULL;
		}
	}
	if (!ptrs[r]) {
		int64_t dims[TBC_MAX_RANK];
		switch (root->role) {
		case KIR_BUF_INPUT: ptrs[r] = in[root->io_index]->data; break;
		case KIR_BUF_CONST: ptrs[r] = (char *)weights + root->offset; break;
		case KIR_BUF_SYMS: ptrs[r] = syms; break;
		case KIR_BUF_OUTPUT:
			pbuf_dims(p, root, syms, dims);
			for (int d = 0; d < root->type.rank; d++)
				if (dims[d] < 0) return TBC_ERR_INTERNAL; /* a symbol not computed before its use */
			out[root->io_index] = tbc_tensor_create(root->type.dtype, root->type.rank, dims);
			if (!out[root->io_index]) return TBC_ERR_NO_MEMORY;
			ptrs[r] = out[root->io_index]->data;
			break;
		case KIR_BUF_TEMP:
			if (!root->dynamic) {
				ptrs[r] = (char *)arena + offsets[r];
				break;
			}
			int64_t bytes = kir_pbuf_bytes(p, root, syms);
			if (bytes < 0) return TBC_ERR_NO_MEMORY;
			if (root->keep && old && bytes < cap[r] * 2) bytes = cap[r] * 2;
			dyn_block *x = aligned_alloc(64, sizeof *x + ((size_t)bytes + 63) / 64 * 64);
			if (!x) return TBC_ERR_NO_MEMORY;
			x->next = *dyn;
			*dyn = x;
			if (old) memcpy(x->data, old, (size_t)cap[r]);
			ptrs[r] = x->data;
			cap[r] = bytes;
			break;
		}
	}
	ptrs[i] = ptrs[r];
	return TBC_OK;
}

bool kir_program_match(const kir_program *p, int *match) {
	int depth = 0, small[64], *open = p->n_launches > 64 ? malloc((size_t)p->n_launches * sizeof *open) : small;
	if (!open) return false;
	bool ok = true;
	for (int l = 0; l < p->n_launches && ok; l++) {
		match[l] = -1;
		switch (p->launches[l].ctl) {
		case KIR_CTL_KERNEL: break;
		case KIR_CTL_IF:
		case KIR_CTL_LOOP: open[depth++] = l; break;
		case KIR_CTL_ELSE:
			ok = depth > 0 && p->launches[open[depth - 1]].ctl == KIR_CTL_IF;
			if (ok) match[open[depth - 1]] = l, open[depth - 1] = l;
			break;
		case KIR_CTL_END_IF:
		case KIR_CTL_END_LOOP: {
			kir_ctl want = p->launches[l].ctl == KIR_CTL_END_IF ? KIR_CTL_ELSE : KIR_CTL_LOOP;
			ok = depth > 0 && p->launches[open[depth - 1]].ctl == want;
			if (ok) match[open[depth - 1]] = l, match[l] = open[depth - 1], depth--;
			break;
		}
		}
	}
	if (open != small) free(open);
	return ok && depth == 0;
}

static bool eval_kernel(void *ctx, const kir_kernel *k, void *const *buffers, const int64_t *sizes, tbc_diags *d) {
	(void)ctx;
	return kir_eval(k, buffers, sizes, d);
}

tbc_code kir_program_eval(const kir_program *p, tbc_tensor *const *in, size_t n_in, tbc_tensor **out, size_t n_out,
			  tbc_diags *d) {
	kir_kernel_runner evaluator = {eval_kernel, NULL};
	return kir_program_run(p, &evaluator, in, n_in, out, n_out, d);
}

tbc_code kir_program_run(const kir_program *p, const kir_kernel_runner *runner, tbc_tensor *const *in, size_t n_in,
			 tbc_tensor **out, size_t n_out, tbc_diags *d) {
	for (size_t i = 0; i < n_out; i++) out[i] = NULL;
	if (n_out != (size_t)p->n_outputs) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "the model gives %d outputs, not %zu",
			      p->n_outputs, n_out);
		return TBC_ERR_INVALID_ARGUMENT;
	}
	int64_t *syms = calloc((size_t)p->n_syms + 1, sizeof *syms);
	int64_t *offsets = calloc((size_t)p->n_bufs + 1, sizeof *offsets);
	int64_t *cap = calloc((size_t)p->n_bufs + 1, sizeof *cap);
	int *match = calloc((size_t)p->n_launches + 1, sizeof *match);
	void **ptrs = calloc((size_t)p->n_bufs + 1, sizeof *ptrs);
	void *weights = malloc((size_t)p->weights_size + 1);
	void *arena = NULL;
	dyn_block *dyn = NULL;
	tbc_code rc = TBC_OK;
	if (!syms || !offsets || !cap || !match || !ptrs || !weights || !kir_program_match(p, match)) {
		rc = TBC_ERR_NO_MEMORY;
		goto done;
	}
	if (!kir_program_bind_syms(p, in, n_in, syms, d)) {
		rc = TBC_ERR_INVALID_ARGUMENT;
		goto done;
	}
	int64_t arena_bytes = kir_program_layout(p, syms, offsets);
	if (arena_bytes < 0 || !(arena = calloc(1, (size_t)arena_bytes + 1))) {
		rc = TBC_ERR_NO_MEMORY;
		goto done;
	}
	kir_program_weights(p, weights);
	/* Every buffer gets its memory at its first use, when the launches
	 * before have computed the symbols a dynamic one needs. */
	for (int l = 0; l < p->n_launches && rc == TBC_OK; l++) {
		const kir_launch *la = &p->launches[l];
		const int *cs = la->ctl_sym;
		switch (la->ctl) {
		case KIR_CTL_KERNEL: break;
		case KIR_CTL_IF:
			if (!syms[cs[0]]) l = match[l]; /* on at the ELSE */
			continue;
		case KIR_CTL_ELSE: l = match[l]; continue; /* the then-branch is done: on at the END_IF */
		case KIR_CTL_END_IF: continue;
		case KIR_CTL_LOOP:
		case KIR_CTL_END_LOOP: {
			int head = la->ctl == KIR_CTL_LOOP ? l : match[l];
			if (la->ctl == KIR_CTL_LOOP) syms[cs[0]] = 0;
			else syms[cs[0]]++;
			bool more = (cs[1] < 0 || syms[cs[0]] < syms[cs[1]]) && (cs[2] < 0 || syms[cs[2]] != 0);
			l = more ? head : match[head];
			continue;
		}
		}
		void *bufs[256];
		int64_t sizes[64];
		if (la->kernel->n_buffers > 256 || la->kernel->n_sizes > 64) {
			rc = TBC_ERR_INTERNAL;
			break;
		}
		for (int a = 0; a < la->kernel->n_buffers && rc == TBC_OK; a++) {
			int pb = la->args[a], root = p->bufs[pb]->alias_of >= 0 ? p->bufs[pb]->alias_of : pb;
			if (!ptrs[pb] || p->bufs[root]->dynamic)
				rc = eval_place(p, pb, syms, in, out, weights, arena, offsets, ptrs, cap, &dyn);
			bufs[a] = ptrs[pb];
		}
		for (int s = 0; s < la->kernel->n_sizes; s++) sizes[s] = syms[la->syms[s]];
		if (rc == TBC_OK && !runner->run(runner->ctx, la->kernel, bufs, sizes, d)) rc = TBC_ERR_RUNTIME;
	}
	for (int i = 0; i < p->n_outputs && rc == TBC_OK; i++) /* an empty output no launch wrote */
		if (!out[i]) rc = eval_place(p, p->outputs[i], syms, in, out, weights, arena, offsets, ptrs, cap, &dyn);
done:
	if (rc != TBC_OK)
		for (size_t i = 0; i < n_out; i++) {
			tbc_tensor_destroy(out[i]);
			out[i] = NULL;
		}
	for (dyn_block *x = dyn, *next; x; x = next) {
		next = x->next;
		free(x);
	}
	free(syms);
	free(offsets);
	free(cap);
	free(match);
	free(ptrs);
	free(weights);
	free(arena);
	return rc;
}
