/* The compiler library's entry points for native code: options, lowering a
 * module into a program and handing it to a target, and a minimal serial
 * host that runs a compiled model on host tensors (tests and tools; the
 * runtime library has the threaded one). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/compile.h"
#include "tbc/abi.h"

void tbc_compile_options_init(tbc_compile_options *o) {
	memset(o, 0, sizeof *o);
	o->opt_level = 2;
	o->weights = TBC_WEIGHTS_EMBED;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

tbc_code tbc_codegen(const tbc_module *m, const tbc_compile_options *o, const tbc_emit_info *info, tbc_diags *d,
		     tbc_program_fn with_program, void *user, void **out_data, size_t *out_size) {
	*out_data = NULL;
	*out_size = 0;
	tbc_compile_options dflt;
	if (!o) {
		tbc_compile_options_init(&dflt);
		o = &dflt;
	}
	if (!m || !m->main) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "no module to compile");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	tbc_arena *arena = tbc_arena_create();
	if (!arena) return TBC_ERR_NO_MEMORY;
	double t0 = now();
	kir_program *p = NULL;
	tbc_code rc = kir_lower(m, arena, d, &p);
	double t1 = now();
	if (rc == TBC_OK && with_program && !with_program(p, user, d))
		rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_IO;
	if (rc == TBC_OK) rc = tbc_target_cpu.emit(p, o, info, d, out_data, out_size);
	double t2 = now();
	if (rc == TBC_OK && o->stats)
		fprintf(stderr,
			"tbc: %d kernels, weights %" PRIu64 " bytes, arena %" PRIu64 " bytes static; lowering %.3f s, "
			"LLVM %.3f s\n",
			p->n_launches, p->weights_size, p->arena_static, t1 - t0, t2 - t1);
	tbc_arena_destroy(arena);
	return rc;
}

/* ---- A serial host ----------------------------------------------------------*/
typedef struct serial_host {
	tbc_diags *d;
	void **allocs;
	size_t n_allocs, cap_allocs;
} serial_host;

static void serial_parallel_for(void *ctx, void (*body)(void *closure, int64_t begin, int64_t end), void *closure,
				int64_t n, int64_t grain) {
	(void)ctx;
	(void)grain;
	body(closure, 0, n);
}

static void *serial_alloc(void *ctx, uint64_t bytes) {
	serial_host *h = ctx;
	if (h->n_allocs == h->cap_allocs) {
		size_t cap = h->cap_allocs ? h->cap_allocs * 2 : 8;
		void **grown = realloc(h->allocs, cap * sizeof *grown);
		if (!grown) return NULL;
		h->allocs = grown;
		h->cap_allocs = cap;
	}
	void *p = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64 + 64));
	if (p) h->allocs[h->n_allocs++] = p;
	return p;
}

static int32_t serial_error(void *ctx, int32_t code, const char *message) {
	serial_host *h = ctx;
	tbc_diags_add(h->d, TBC_ERR_RUNTIME, NULL, NULL, NULL, NULL, "%s", message);
	return code ? code : 1;
}

tbc_code tbc_abi_run_serial(const tbc_abi_model *model, tbc_tensor *const *inputs, size_t n_inputs,
			    tbc_tensor **out_outputs, size_t n_outputs, tbc_diags *d) {
	for (size_t i = 0; i < n_outputs; i++) out_outputs[i] = NULL;
	if (!model || model->magic != TBC_ABI_MAGIC || model->abi_version != TBC_ABI_VERSION) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "not a tbc model of ABI version %u",
			      TBC_ABI_VERSION);
		return TBC_ERR_INVALID_ARGUMENT;
	}
	if (n_inputs != model->n_inputs || n_outputs != model->n_outputs) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL,
			      "the model takes %u inputs and gives %u outputs, not %zu and %zu", model->n_inputs,
			      model->n_outputs, n_inputs, n_outputs);
		return TBC_ERR_INVALID_ARGUMENT;
	}
	if (!model->weights && model->weights_size) {
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, NULL, NULL, NULL, NULL,
			      "the serial host does not load external weights (%s)", model->weights_file);
		return TBC_ERR_UNSUPPORTED;
	}
	int64_t syms[64];
	if (model->n_syms > 64) return TBC_ERR_UNSUPPORTED;
	for (uint32_t s = 0; s < model->n_syms; s++) syms[s] = -1;
	for (uint32_t i = 0; i < model->n_inputs; i++) {
		const tbc_abi_tensor *t = &model->inputs[i];
		const tbc_tensor *x = inputs[i];
		bool ok = x && x->dtype == (tbc_dtype)t->dtype && x->rank == t->rank;
		for (int k = 0; ok && k < t->rank; k++) {
			if (t->dims[k] >= 0) ok = x->dims[k] == t->dims[k];
			else if (syms[t->sym[k]] < 0) syms[t->sym[k]] = x->dims[k];
			else ok = syms[t->sym[k]] == x->dims[k];
		}
		if (!ok) {
			tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, t->name,
				      "input %u does not have the model's dtype and shape", i);
			return TBC_ERR_INVALID_ARGUMENT;
		}
	}
	tbc_code rc = TBC_OK;
	void *outs[256];
	void *ins[256];
	if (model->n_inputs > 256 || model->n_outputs > 256) return TBC_ERR_UNSUPPORTED;
	for (uint32_t i = 0; i < model->n_inputs; i++) ins[i] = inputs[i]->data;
	for (uint32_t i = 0; i < model->n_outputs && rc == TBC_OK; i++) {
		const tbc_abi_tensor *t = &model->outputs[i];
		int64_t dims[TBC_MAX_RANK];
		for (int k = 0; k < t->rank; k++) dims[k] = t->dims[k] >= 0 ? t->dims[k] : syms[t->sym[k]];
		out_outputs[i] = tbc_tensor_create((tbc_dtype)t->dtype, t->rank, dims);
		if (!out_outputs[i]) rc = TBC_ERR_NO_MEMORY;
		else outs[i] = out_outputs[i]->data;
	}
	serial_host h = {.d = d};
	void *arena = NULL;
	if (rc == TBC_OK) {
		uint64_t bytes = model->arena_bytes(syms);
		arena = aligned_alloc(64, (size_t)(bytes + 64) / 64 * 64);
		if (!arena) rc = TBC_ERR_NO_MEMORY;
	}
	if (rc == TBC_OK) {
		tbc_abi_host host = {&h, serial_parallel_for, serial_alloc, serial_error};
		if (model->run(&host, syms, ins, outs, arena, model->weights) != 0) rc = TBC_ERR_RUNTIME;
	}
	free(arena);
	for (size_t i = 0; i < h.n_allocs; i++) free(h.allocs[i]);
	free(h.allocs);
	if (rc != TBC_OK)
		for (size_t i = 0; i < n_outputs; i++) {
			tbc_tensor_destroy(out_outputs[i]);
			out_outputs[i] = NULL;
		}
	return rc;
}

tbc_code tbc_run_cpu(const tbc_module *m, tbc_tensor *const *inputs, size_t n_inputs, tbc_tensor **out_outputs,
		     size_t n_outputs, tbc_diags *d) {
	for (size_t i = 0; i < n_outputs; i++) out_outputs[i] = NULL;
	tbc_jit *jit = NULL;
	tbc_code rc = tbc_jit_compile(m, NULL, d, &jit);
	if (rc != TBC_OK) return rc;
	rc = tbc_abi_run_serial(tbc_jit_descriptor(jit), inputs, n_inputs, out_outputs, n_outputs, d);
	tbc_jit_destroy(jit);
	return rc;
}
