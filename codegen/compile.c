/* The compiler library's entry points for native code: options, lowering a
 * module into a program and handing it to a target, and a minimal serial
 * host that runs a compiled model on host tensors (tests and tools; the
 * runtime library has the threaded one). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/compile.h"
#include "codegen/lower/lower.h"
#include "codegen/device/device_targets.h"
#include "codegen/test_fault.h"
#include "passes/passes.h"
#include "passes/util.h"
#include "tbc/abi.h"
#include "ir/clock.h"

void tbc_compile_options_init(tbc_compile_options *o) {
	memset(o, 0, sizeof *o);
	o->opt_level = 2;
	o->weights = TBC_WEIGHTS_EMBED;
	o->precision = TBC_DT_F32;
	o->keep_io_types = 1;
}

/* Bytes of the main graph's constants (the weights as the graph holds them). */
static int64_t const_bytes(const tbc_module *m) {
	int64_t n = 0;
	for (int i = 0; i < m->main->n_consts; i++) {
		int64_t b = pass_value_bytes(m->main->consts[i]);
		n += b > 0 ? b : 0;
	}
	return n;
}

static void print_stats(FILE *f, const tbc_compile_stats *st) {
	for (int i = 0; i < st->n_passes; i++)
		fprintf(f, "tbc: pass %-8s %8.3f ms\n", st->passes[i].name, st->passes[i].seconds * 1e3);
	if (st->lowered)
	{
		fprintf(f, "tbc: lowering %8.3f ms (%d kernels), LLVM %8.3f ms\n", st->lower_seconds * 1e3, st->n_kernels,
			st->codegen_seconds * 1e3);
		if (st->llvm_modules)
			fprintf(f, "tbc: LLVM: %d modules on %d threads in %.3f ms; the modules' own times %.3f ms, of "
				   "which building the IR %.3f ms\n",
				st->llvm_modules, st->llvm_threads, st->llvm_compile_seconds * 1e3, st->llvm_module_seconds * 1e3,
				st->llvm_ir_seconds * 1e3);
	}
	else
		fprintf(f, "tbc: lowering failed; the arena below is memory planning's\n");
	double ratio = st->lower_bound > 0 ? (double)st->arena_bytes / (double)st->lower_bound : 1.0;
	fprintf(f, "tbc: arena %" PRId64 " bytes, lower bound %" PRId64 " bytes (ratio %.3f)\n", st->arena_bytes,
		st->lower_bound, ratio);
	if (st->memory_budget_bytes)
		fprintf(f, "tbc: memory budget %" PRId64 " bytes: planned values %" PRId64 " -> %" PRId64
			   " bytes, %d ops recomputed, %.4g extra FLOPs (%.1f%% of %.4g)\n",
			st->memory_budget_bytes, st->plan_bytes_unconstrained, st->plan_bytes, st->recompute_ops,
			st->recompute_flops, st->flops > st->recompute_flops ? 100.0 * st->recompute_flops / (st->flops - st->recompute_flops) : 0.0,
			st->flops - st->recompute_flops);
	if (st->precision_ops || st->precision_casts)
		fprintf(f, "tbc: precision: %d ops in the low type, %d casts; weights %" PRId64 " -> %" PRId64 " bytes (%.3fx)\n",
			st->precision_ops, st->precision_casts, st->weights_bytes_fp32, st->weights_bytes_lowered,
			st->weights_bytes_fp32 ? (double)st->weights_bytes_lowered / (double)st->weights_bytes_fp32 : 1.0);
	if (st->precision_e5m2)
		fprintf(f, "tbc: precision: %d fp8 weights stored as e5m2 (closer to the float32 weight than e4m3)\n",
			st->precision_e5m2);
	fprintf(f, "tbc: planned values %" PRId64 " bytes (%" PRId64 " without reuse), scratch %" PRId64
		   " bytes; weights %" PRIu64 " bytes\n",
		st->plan_bytes, st->unshared_bytes, st->arena_bytes - st->plan_bytes, st->weights_bytes);
}

/* The program's arena with every symbol 1. */
static int64_t arena_at_one(const kir_program *p) {
	int64_t *syms = malloc(((size_t)p->n_syms + 1) * sizeof *syms);
	if (!syms) return -1;
	for (int i = 0; i < p->n_syms; i++) syms[i] = 1;
	int64_t n = kir_program_layout(p, syms, NULL);
	free(syms);
	return n;
}

static tbc_code codegen(const tbc_module *m, const tbc_compile_options *o, const tbc_target_desc *lower_for,
		       const tbc_emit_info *info, tbc_diags *d, tbc_program_fn with_program, void *user, tbc_objects *out);

/* Whether the device program dp can share the artifact's descriptor, which
 * p (the CPU's) makes: the same symbols, and every constant at the same
 * place in the one weights blob (lowering lays constants out whatever the
 * target: a GEMM operand's padded rows depend on its shape alone). */
static bool shares_descriptor(const kir_program *p, const kir_program *dp, tbc_diags *d) {
	bool ok = p->n_syms == dp->n_syms && p->weights_size == dp->weights_size && p->n_inputs == dp->n_inputs &&
		  p->n_outputs == dp->n_outputs;
	for (int s = 0; ok && s < p->n_syms; s++)
		ok = !strcmp(p->sym_names[s], dp->sym_names[s]) && p->sym_computed[s] == dp->sym_computed[s] &&
		     p->sym_derived[s] == dp->sym_derived[s];
	for (int b = 0; ok && b < dp->n_bufs; b++) {
		const kir_pbuf *db = dp->bufs[b];
		if (db->role != KIR_BUF_CONST) continue;
		bool found = false;
		for (int c = 0; !found && c < p->n_bufs; c++) {
			const kir_pbuf *cb = p->bufs[c];
			found = cb->role == KIR_BUF_CONST && cb->constant == db->constant && cb->offset == db->offset &&
				cb->lay.rows == db->lay.rows && cb->lay.cols == db->lay.cols && cb->lay.pitch == db->lay.pitch &&
				cb->lay.transpose == db->lay.transpose && cb->lay.pairs == db->lay.pairs &&
				cb->lay.panel == db->lay.panel;
		}
		ok = found;
	}
	if (!ok)
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL,
			      "the device program's symbols or weights differ from the CPU program's (a bug in lowering)");
	return ok;
}

static const char *kind_name(int kind) {
	return kind == TBC_ABI_DEVICE_OPENCL_C ? "OpenCL C source (.cl)"
	       : kind == TBC_ABI_DEVICE_PTX    ? "PTX (.ptx)"
					       : "an AMDGPU code object (.hsaco)";
}

/* The targets o asks for: the CPU's code, and for each device target
 * (codegen/device/device_targets.h) its device program, whose tables go
 * into the descriptor (or whose code is the output).  Each device's kernels
 * are lowered again, for its description (work-groups, local memory:
 * codegen/target_desc.h), into a program of their own that shares the CPU
 * program's symbols and weights. */
static tbc_code emit(const tbc_module *work, const kir_program *p, const tbc_target_desc *desc, tbc_arena *arena,
		     const tbc_compile_options *o, const tbc_emit_info *info, tbc_diags *d, tbc_objects *out) {
	unsigned targets = o->targets ? o->targets : TBC_TARGETS_CPU;
	tbc_device_choice dev[TBC_MAX_DEVICE_TARGETS];
	int n_dev = 0;
	if (!tbc_device_choices(o, dev, &n_dev, d)) return tbc_diags_first_code(d);
	int code_of = -1; /* the device target whose code is the output */
	for (int i = 0; i < n_dev && info->device_code_of && code_of < 0; i++)
		if (dev[i].target->kind == info->device_code_of) code_of = i;
	if (info->device_code_of && code_of < 0) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "%s asked of a compile without such a target",
			      kind_name(info->device_code_of));
		return TBC_ERR_INVALID_ARGUMENT;
	}
	if (!n_dev) return tbc_target_cpu.emit(p, desc, o, info, d, out);
	/* Node names by position in the main graph, for the kernels' names. */
	int n_ops = 0;
	for (const tbc_op *op = work->main->first; op; op = op->next) n_ops++;
	const char **names = calloc((size_t)n_ops + 1, sizeof *names);
	tbc_dev_program progs[TBC_MAX_DEVICE_TARGETS];
	memset(progs, 0, sizeof progs);
	if (!names) return TBC_ERR_NO_MEMORY;
	int i = 0;
	for (const tbc_op *op = work->main->first; op; op = op->next) names[i++] = op->name;
	tbc_code rc = TBC_OK;
	int made = 0;
	for (; rc == TBC_OK && made < n_dev; made++) {
		if (code_of >= 0 && made != code_of) continue;
		tbc_target_desc dd;
		kir_program *dp = NULL;
		if (!dev[made].target->describe(dev[made].arch, &dd, d)) rc = tbc_diags_first_code(d);
		if (rc == TBC_OK) rc = kir_lower(work, &dd, arena, d, &dp);
		if (rc == TBC_OK && !shares_descriptor(p, dp, d)) rc = TBC_ERR_INTERNAL;
		if (rc == TBC_OK &&
		    !dev[made].target->make(dp, work->main->name, names, n_ops, dev[made].arch, &progs[made], d))
			rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_INTERNAL;
		if (rc == TBC_OK && code_of < 0 && !tbc_device_add_binary(o, &dev[made], &progs[made], d))
			rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_INTERNAL;
	}
	free(names);
	if (rc == TBC_OK && code_of >= 0) {
		out->n = 1;
		out->data[0] = progs[code_of].code;
		out->size[0] = progs[code_of].code_size;
		progs[code_of].code = NULL;
	} else if (rc == TBC_OK) {
		tbc_emit_info with = *info;
		size_t size = 0;
		void *code = tbc_device_code_pack(progs, n_dev, &size);
		if (!code) rc = TBC_ERR_NO_MEMORY;
		with.device_code = code;
		with.device_code_size = size;
		with.no_cpu_code = !(targets & TBC_TARGETS_CPU);
		if (rc == TBC_OK) rc = tbc_target_cpu.emit(p, desc, o, &with, d, out);
		free(code);
	}
	for (int j = 0; j < n_dev; j++) tbc_dev_program_free(&progs[j]);
	return rc;
}

void tbc_objects_free(tbc_objects *objs) {
	for (int i = 0; i < objs->n; i++) free(objs->data[i]);
	memset(objs, 0, sizeof *objs);
}

tbc_code tbc_codegen(const tbc_module *m, const tbc_compile_options *o, const tbc_emit_info *info, tbc_diags *d,
		     tbc_program_fn with_program, void *user, tbc_objects *out) {
	return codegen(m, o, NULL, info, d, with_program, user, out);
}

tbc_code tbc_codegen_for(const tbc_module *m, const tbc_compile_options *o, const tbc_target_desc *t, tbc_diags *d,
			 tbc_program_fn with_program, void *user) {
	tbc_objects none;
	return codegen(m, o, t, NULL, d, with_program, user, &none);
}

static tbc_code codegen(const tbc_module *m, const tbc_compile_options *o, const tbc_target_desc *lower_for,
		       const tbc_emit_info *info, tbc_diags *d, tbc_program_fn with_program, void *user, tbc_objects *out) {
	memset(out, 0, sizeof *out);
	tbc_compile_options dflt;
	if (!o) {
		tbc_compile_options_init(&dflt);
		o = &dflt;
	}
	if (o->stats_out) memset(o->stats_out, 0, sizeof *o->stats_out);
	if (!m || !m->main) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL, "no module to compile");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	/* An accuracy budget: the search decides the exclusions, then this
	 * compile runs with them (and its figures kept in the stats). */
	tbc_compile_stats budget_st;
	memset(&budget_st, 0, sizeof budget_st);
	char *budget_exclude = NULL;
	tbc_compile_options with_budget;
	if (o->accuracy_budget) {
		with_budget = *o;
		with_budget.stats_out = &budget_st;
		tbc_code brc = tbc_precision_search(m, &with_budget, d, &budget_exclude);
		if (brc != TBC_OK) return brc;
		with_budget.stats_out = o->stats_out;
		with_budget.accuracy_budget = NULL;
		with_budget.precision_exclude = budget_exclude;
		o = &with_budget;
	}
	/* The passes work on a copy: the caller keeps its module as it was. */
	tbc_module *work = tbc_module_clone(m);
	tbc_arena *arena = tbc_arena_create();
	if (!work || !arena) {
		tbc_module_destroy(work);
		tbc_arena_destroy(arena);
		free(budget_exclude);
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, m->path, NULL, NULL, NULL, "out of memory copying the module");
		return TBC_ERR_NO_MEMORY;
	}
	tbc_pipeline_stats pst;
	memset(&pst, 0, sizeof pst);
	tbc_pipeline_options po = tbc_pipeline_defaults();
	po.opt_level = o->opt_level < 0 ? 0 : o->opt_level;
	po.dump_after = o->dump_after;
	po.dump_file = o->dump_file;
	po.stats = &pst;
	tbc_precision_options prec = {.low = (tbc_dtype)o->precision, .keep_io_types = o->keep_io_types != 0, .exclude = o->precision_exclude};
	po.precision = &prec;
	po.qdq_fusion = o->qdq_fusion != 0;
	tbc_remat_options remat = {o->memory_budget_bytes, o->memory_budget_percent};
	if (o->memory_budget_bytes || o->memory_budget_percent) po.remat = &remat;
	int64_t fp32_bytes = const_bytes(work);
	tbc_code rc = TBC_OK;
	if (o->test_perturb_node && !tbc_test_perturb_node(work, o->test_perturb_node, d)) /* TEST ONLY */
		rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_INTERNAL;
	if (rc == TBC_OK && o->train && !tbc_train_build(work, o->train, d))
		rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_INTERNAL;
	if (rc == TBC_OK && !tbc_run_pipeline(work, &po, d)) rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_INTERNAL;
	double t0 = tbc_seconds_now();
	kir_program *p = NULL;
	tbc_target_desc desc;
	if (rc == TBC_OK) {
		if (lower_for) desc = *lower_for;
		else rc = tbc_target_cpu.describe(o, &desc, d);
		/* Device programs (OpenCL, or the GPUs of gpu_targets) share the
		 * CPU program's weights, laid out alike (emit): B panels in bf16
		 * pairs (dot2), column panels (matrix-vector products) and VNNI
		 * packing of int8 weights are the CPU's layouts alone. */
		bool devices = (o->targets & ~(unsigned)TBC_TARGETS_CPU) || (o->gpu_targets && *o->gpu_targets);
		if (devices)
			desc.dot_bf16 = desc.dot_bf16_default = desc.tile_bf16 = desc.gemv_panels = desc.dot4_u8s8 =
				desc.tile_i8 = false;
		if (rc == TBC_OK) rc = kir_lower(work, &desc, arena, d, &p);
	}
	double t1 = tbc_seconds_now();
	if (rc == TBC_OK && with_program && !with_program(p, user, d))
		rc = tbc_diags_first_code(d) != TBC_OK ? tbc_diags_first_code(d) : TBC_ERR_IO;
	tbc_llvm_times times;
	memset(&times, 0, sizeof times);
	if (rc == TBC_OK && info) {
		tbc_emit_info timed = *info;
		timed.times = &times;
		rc = emit(work, p, &desc, arena, o, &timed, d, out);
	}
	double t2 = tbc_seconds_now();
	/* Statistics whenever the passes ran: a model that does not lower yet
	 * still shows its plan. */
	if (pst.n_passes && (o->stats || o->stats_out)) {
		tbc_compile_stats st;
		memset(&st, 0, sizeof st);
		for (int i = 0; i < pst.n_passes && i < TBC_STATS_MAX_PASSES; i++) {
			st.passes[i].name = pst.passes[i].name;
			st.passes[i].seconds = pst.passes[i].seconds;
			st.n_passes++;
		}
		st.lower_seconds = t1 - t0;
		st.codegen_seconds = t2 - t1;
		st.llvm_ir_seconds = times.ir_seconds;
		st.llvm_compile_seconds = times.compile_seconds;
		st.llvm_module_seconds = times.module_seconds;
		st.llvm_modules = times.modules;
		st.llvm_threads = times.threads;
		st.n_kernels = p ? p->n_launches : 0;
		st.weights_bytes = p ? p->weights_size : 0;
		st.arena_bytes = p ? arena_at_one(p) : pst.memplan.arena_bytes ? pst.memplan.arena_bytes : pst.remat.arena_after;
		st.lowered = p != NULL;
		/* A budget out of reach stops the pipeline before memplan is measured. */
		st.plan_bytes = pst.memplan.arena_bytes ? pst.memplan.arena_bytes : pst.remat.arena_after;
		st.lower_bound = pst.memplan.lower_bound;
		st.unshared_bytes = pst.memplan.total_bytes;
		st.weights_bytes_fp32 = fp32_bytes;
		st.weights_bytes_lowered = const_bytes(work);
		st.precision_ops = pst.precision.ops_lowered;
		st.precision_casts = pst.precision.casts_inserted;
		st.precision_e5m2 = pst.precision.weights_e5m2;
		st.budget_compiles = budget_st.budget_compiles;
		st.budget_kept = budget_st.budget_kept;
		st.budget_seconds = budget_st.budget_seconds;
		st.flops = tbc_module_flops(work);
		st.recompute_flops = pst.remat.recompute_flops;
		st.plan_bytes_unconstrained = pst.remat.arena_before;
		st.memory_budget_bytes = pst.remat.budget;
		st.recompute_ops = pst.remat.ops_cloned;
		tbc_memplan_profile prof;
		if (tbc_memplan_profile_make(work, &prof)) {
			st.op_lower_bound = prof.op_bound;
			tbc_memplan_profile_free(&prof);
		}
		if (o->stats) print_stats(o->stats_file ? o->stats_file : stderr, &st);
		if (o->stats_out) *o->stats_out = st;
	}
	free(budget_exclude);
	tbc_arena_destroy(arena);
	tbc_module_destroy(work);
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
	if (tbc_abi_derive_syms(model->n_syms, model->sym_derived, model->sym_poly, syms) < model->n_syms) {
		tbc_diags_add(d, TBC_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL,
			      "the inputs' sizes make a derived symbol negative or too large");
		return TBC_ERR_INVALID_ARGUMENT;
	}
	tbc_code rc = TBC_OK;
	void *outs[256];
	void *ins[256];
	if (model->n_inputs > 256 || model->n_outputs > 256) return TBC_ERR_UNSUPPORTED;
	for (uint32_t i = 0; i < model->n_inputs; i++) ins[i] = inputs[i]->data;
	/* Outputs of known size are made now; one with a computed dim is
	 * allocated by run (host->alloc) and copied out after it. */
	bool computed[256] = {false};
	for (uint32_t i = 0; i < model->n_outputs && rc == TBC_OK; i++) {
		const tbc_abi_tensor *t = &model->outputs[i];
		int64_t dims[TBC_MAX_RANK];
		outs[i] = NULL;
		for (int k = 0; k < t->rank; k++) {
			dims[k] = t->dims[k] >= 0 ? t->dims[k] : syms[t->sym[k]];
			if (t->dims[k] < 0 && model->sym_computed && model->sym_computed[t->sym[k]]) computed[i] = true;
		}
		if (computed[i]) continue;
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
		/* A one-run arena: its load-time values first (ABI 5). */
		if (model->abi_version >= 5 && model->init && model->init(&host, arena, model->weights) != 0)
			rc = TBC_ERR_RUNTIME;
		else if (model->run(&host, syms, ins, outs, arena, model->weights) != 0)
			rc = TBC_ERR_RUNTIME;
	}
	for (uint32_t i = 0; i < model->n_outputs && rc == TBC_OK; i++) {
		if (!computed[i]) continue;
		const tbc_abi_tensor *t = &model->outputs[i];
		int64_t dims[TBC_MAX_RANK];
		for (int k = 0; k < t->rank; k++) dims[k] = t->dims[k] >= 0 ? t->dims[k] : syms[t->sym[k]];
		out_outputs[i] = outs[i] ? tbc_tensor_create((tbc_dtype)t->dtype, t->rank, dims) : NULL;
		if (!out_outputs[i]) {
			tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, t->name,
				      "the model did not compute output %u or its shape", i);
			rc = TBC_ERR_INTERNAL;
		} else if (out_outputs[i]->numel) {
			memcpy(out_outputs[i]->data, outs[i], (size_t)out_outputs[i]->numel * tbc_dtype_size((tbc_dtype)t->dtype));
		}
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
