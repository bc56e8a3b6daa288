/* The CPU target: a lowered program -> LLVM module (kernel bodies by
 * codegen/llvm/ with the CPU's hooks, the host program by cpu_module.c) ->
 * LLVM's new pass manager -> object code for x86-64 or AArch64
 * (codegen/llvm/llvm_machine.h).  What is the CPU's own here: the target
 * machine, the host CPU and its features unless --target / --cpu say
 * otherwise, and the description lowering reads. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Core.h>

#include "codegen/cpu/cpu.h"
#include "codegen/llvm/llvm_machine.h"
#include "ir/clock.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Only the two targets tbc generates code for. */
static void init_llvm(void) {
	LLVMInitializeX86TargetInfo();
	LLVMInitializeX86Target();
	LLVMInitializeX86TargetMC();
	LLVMInitializeX86AsmPrinter();
	LLVMInitializeAArch64TargetInfo();
	LLVMInitializeAArch64Target();
	LLVMInitializeAArch64TargetMC();
	LLVMInitializeAArch64AsmPrinter();
}

void tbc_cpu_init_llvm(void);
void tbc_cpu_init_llvm(void) { pthread_once(&init_once, init_llvm); }

/* The architecture part of a triple ("x86_64", "aarch64"). */
static size_t arch_len(const char *triple) {
	const char *dash = strchr(triple, '-');
	return dash ? (size_t)(dash - triple) : strlen(triple);
}

typedef struct machine {
	LLVMTargetMachineRef tm;
	char *triple, *cpu, *features;
} machine;

static void machine_free(machine *m) {
	if (m->tm) LLVMDisposeTargetMachine(m->tm);
	LLVMDisposeMessage(m->triple);
	LLVMDisposeMessage(m->cpu);
	LLVMDisposeMessage(m->features);
	memset(m, 0, sizeof *m);
}

/* The triple, CPU and features o asks for (the host's unless --target,
 * --cpu or --features say otherwise), checked: LLVM must know the CPU and
 * every feature.  A CPU named without --features gets the features it has
 * that the runtime can check (cpu_named_features), so the artifact records
 * them.  Without --target and --cpu, the host's CPU and features. */
static tbc_code machine_resolve(const tbc_compile_options *o, tbc_diags *d, machine *m, LLVMTargetRef *target) {
	memset(m, 0, sizeof *m);
	tbc_cpu_init_llvm();
	char *host = LLVMGetDefaultTargetTriple();
	m->triple = o->target_triple ? LLVMNormalizeTargetTriple(o->target_triple) : LLVMNormalizeTargetTriple(host);
	bool is_host = arch_len(host) == arch_len(m->triple) && !strncmp(host, m->triple, arch_len(host));
	LLVMDisposeMessage(host);
	tbc_code rc = TBC_OK;
	char *err = NULL, bad[128];
	if (strncmp(m->triple, "x86_64", 6) && strncmp(m->triple, "aarch64", 7) && strncmp(m->triple, "arm64", 5)) {
		rc = TBC_ERR_UNSUPPORTED;
		tbc_diags_add(d, rc, NULL, NULL, NULL, NULL, "target %s is not supported (x86_64 and aarch64 are)",
			      m->triple);
	} else if (o->cpu && !cpu_name_known(m->triple, o->cpu)) {
		rc = TBC_ERR_INVALID_ARGUMENT;
		tbc_diags_add(d, rc, NULL, NULL, NULL, NULL,
			      "--cpu %s: LLVM knows no such CPU for %.*s (llc-19 -mtriple=%s -mcpu=help lists them)",
			      o->cpu, (int)arch_len(m->triple), m->triple, m->triple);
	} else if (o->features && !cpu_features_known(m->triple, o->features, bad, sizeof bad)) {
		rc = TBC_ERR_INVALID_ARGUMENT;
		tbc_diags_add(d, rc, NULL, NULL, NULL, NULL,
			      "--features: '%s' is not +NAME or -NAME of a feature LLVM knows for %.*s "
			      "(llc-19 -mtriple=%s -mattr=help lists them)",
			      bad, (int)arch_len(m->triple), m->triple, m->triple);
	} else if (LLVMGetTargetFromTriple(m->triple, target, &err)) {
		rc = TBC_ERR_UNSUPPORTED;
		tbc_diags_add(d, rc, NULL, NULL, NULL, NULL, "target %s: %s", m->triple, err ? err : "");
	}
	LLVMDisposeMessage(err);
	if (rc != TBC_OK) {
		machine_free(m);
		return rc;
	}
	bool host_cpu = is_host && !o->cpu;
	m->cpu = host_cpu ? LLVMGetHostCPUName() : LLVMCreateMessage(o->cpu ? o->cpu : "generic");
	m->features = o->features ? LLVMCreateMessage(o->features)
		      : host_cpu  ? LLVMGetHostCPUFeatures()
		      : o->cpu    ? cpu_named_features(*target, m->triple, o->cpu)
				  : LLVMCreateMessage("");
	if (!m->features) {
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
		machine_free(m);
		return TBC_ERR_NO_MEMORY;
	}
	return TBC_OK;
}

static tbc_code machine_new(const tbc_compile_options *o, tbc_diags *d, machine *m) {
	LLVMTargetRef target;
	tbc_code rc = machine_resolve(o, d, m, &target);
	if (rc != TBC_OK) return rc;
	m->tm = LLVMCreateTargetMachine(target, m->triple, m->cpu, m->features, llvm_codegen_level(o->opt_level),
					LLVMRelocPIC, LLVMCodeModelDefault);
	if (!m->tm) {
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, NULL, NULL, NULL, NULL, "no target machine for %s (cpu %s)", m->triple,
			      m->cpu);
		machine_free(m);
		return TBC_ERR_UNSUPPORTED;
	}
	return TBC_OK;
}

/* Whether the feature list ("+avx2,-avx512f,...") turns name on. */
static bool has_feature(const char *features, const char *name) {
	size_t n = strlen(name);
	for (const char *s = features; s && *s;) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (l == n + 1 && s[0] == '+' && !strncmp(s + 1, name, n)) return true;
		s += l;
		if (*s == ',') s++;
	}
	return false;
}

/* Whether the environment variable name is "0" (a switch turned off, for
 * measuring one path against another). */
static bool getenv_off(const char *name) {
	const char *e = getenv(name);
	return e && e[0] == '0' && !e[1];
}

/* The vectors of the machine: AArch64's 16-byte NEON (32 registers),
 * AVX-512's 64 bytes (32 registers), else AVX2's 32 bytes (16). */
static void describe_machine(const char *triple, const char *cpu, const char *features, tbc_target_desc *t) {
	*t = tbc_target_desc_cpu_default();
	if (!strncmp(triple, "aarch64", 7) || !strncmp(triple, "arm64", 5)) t->vector_bytes = 16, t->vector_regs = 32;
	else if (has_feature(features, "avx512f")) t->vector_bytes = 64, t->vector_regs = 32;
	/* vdpbf16ps on zmm registers: the artifact then lists avx512bf16 among
	 * its features, and the runtime refuses it on a CPU without them, as
	 * it does any feature the code was compiled for (no SIGILL). */
	t->dot_bf16 = t->vector_bytes == 64 && has_feature(features, "avx512bf16") && !strstr(features, "-evex512");
	/* Where bf16 GEMMs take dot2 without being asked: AMD's cores (Zen 4
	 * and later), which have AVX512_BF16 and no AMX (docs/decisions.md). */
	t->dot_bf16_default = t->dot_bf16 && cpu && !strncmp(cpu, "znver", 5);
	/* AMX tiles (tdpbf16ps): 16 x 16 x 32 multiply-adds per instruction.
	 * The artifact lists amx-tile and amx-bf16; the runtime asks Linux for
	 * the tile state before running it.  TBC_AMX=0: off (for measuring). */
	t->tile_bf16 = t->dot_bf16 && has_feature(features, "amx-tile") && has_feature(features, "amx-bf16") &&
		       !getenv_off("TBC_AMX");
	/* vpdpbusd on zmm registers (AVX-512 VNNI), or on ymm registers where
	 * the machine has AVX-VNNI and no AVX-512 (the artifact lists the
	 * feature, so the runtime refuses a host without it:
	 * runtime/cpu_features.def). */
	t->dot4_u8s8 = ((t->vector_bytes == 64 && has_feature(features, "avx512vnni") && has_feature(features, "avx512bw")) ||
			(t->vector_bytes == 32 && has_feature(features, "avxvnni"))) &&
		       !getenv_off("TBC_VNNI");
	/* and AMX-INT8 beside VNNI (dot4, for what tiles do not take) */
	t->tile_i8 = t->dot4_u8s8 && t->vector_bytes == 64 && has_feature(features, "amx-tile") &&
		     has_feature(features, "amx-int8") && !getenv_off("TBC_AMX");
	t->fma = !strncmp(triple, "aarch64", 7) || !strncmp(triple, "arm64", 5) || has_feature(features, "fma");
	/* GEMM register tiles as kir_fma_tile: vector fused multiply-adds the
	 * emitter writes itself, not scalar sums for LLVM's SLP vectorizer to
	 * pack (LLVM's time, and -O1's code: docs/performance.md).
	 * TBC_FMA_TILE=0: off (for measuring). */
	t->fma_tile = t->fma && !getenv_off("TBC_FMA_TILE");
	/* the tile resuming from y itself (K blocks); TBC_FMA_TILE_Y=0: off */
	t->fma_tile_y = t->fma_tile && !getenv_off("TBC_FMA_TILE_Y");
	/* a GEMM tile's rows stored as vectors; TBC_ROW_STORES=0: off */
	t->gemm_row_stores = !getenv_off("TBC_ROW_STORES");
}

/* The machine o compiles for: the host unless o->target_triple / o->cpu
 * say otherwise. */
static tbc_code cpu_describe(const tbc_compile_options *o, tbc_target_desc *out, tbc_diags *d) {
	*out = tbc_target_desc_cpu_default();
	machine m;
	LLVMTargetRef target;
	tbc_code rc = machine_resolve(o, d, &m, &target);
	if (rc != TBC_OK) return rc;
	describe_machine(m.triple, m.cpu, m.features, out);
	machine_free(&m);
	return TBC_OK;
}

/* Threads for LLVM's work: o's, else one per CPU of this machine. */
static int compile_threads(const tbc_compile_options *o) {
	if (o->compile_threads > 0) return o->compile_threads;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* An LLVM module for m, in a context of its own, with what t declares. */
static void module_cx(llvm_cx *c, const char *name, const tbc_target_desc *t, const machine *m, tbc_diags *d) {
	/* t->vector_bytes: the width lowering tiled GEMMs for */
	llvm_cx_init(c, name, &cpu_llvm_hooks, t->vector_bytes, d);
	llvm_module_set_machine(c->mod, m->tm, m->triple);
	c->dot_bf16 = t->dot_bf16;
	c->tile_bf16 = t->tile_bf16;
	c->tile_i8 = t->tile_i8;
	if (t->dot4_u8s8 && strncmp(m->triple, "x86_64", 6) == 0)
		c->dot4_lanes = t->vector_bytes == 64 && has_feature(m->features, "avx512vnni") ? 16
				: has_feature(m->features, "avxvnni")				    ? 8
												    : 0;
	c->f16_hw = (strncmp(m->triple, "x86_64", 6) == 0 && m->features && strstr(m->features, "+f16c")) ||
		    strncmp(m->triple, "aarch64", 7) == 0;
}

/* One module's part of the program, built on its job's thread. */
typedef struct module_job {
	llvm_cx cx;
	int module; /* the kernel module, or -1: the host module */
	const kir_program *p;
	const cpu_kernel_plan *plan;
	const tbc_emit_info *info;
	const char *triple, *features;
	void *data_obj; /* the host's: its weights and device code, as an object */
	size_t data_obj_size;
} module_job;

static bool build_module(llvm_job *j) {
	module_job *m = j->user;
	if (m->module < 0)
		return cpu_emit_program(&m->cx, m->plan, m->p, m->info, m->triple, m->features,
					m->info->emit_llvm_ir || m->info->one_object ? NULL : &m->data_obj,
					&m->data_obj_size);
	return cpu_emit_kernel_module(&m->cx, m->plan, m->module, m->p, m->info->prefix);
}

/* The program as LLVM modules -- the host program (run, init, the
 * descriptor, the weights) and, for a program of some size, its kernels
 * split over modules of their own (cpu_plan_kernels) -- each built,
 * verified, optimized and emitted as an object on a thread of its own
 * (llvm_jobs_run): LLVM's passes are most of a compile's time, and one
 * module keeps one core busy.  Text IR is one module. */
static tbc_code cpu_emit(const kir_program *p, const tbc_target_desc *t, const tbc_compile_options *o,
			 const tbc_emit_info *info, tbc_diags *d, tbc_objects *out) {
	memset(out, 0, sizeof *out);
	machine m;
	tbc_code rc = machine_new(o, d, &m);
	if (rc != TBC_OK) return rc;
	double t0 = tbc_seconds_now();
	cpu_kernel_plan plan;
	if (!cpu_plan_kernels(p, &plan)) {
		machine_free(&m);
		tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
		return TBC_ERR_NO_MEMORY;
	}
	if (info->emit_llvm_ir || info->no_cpu_code || info->one_object) { /* one module */
		plan.n_modules = 0;
		for (int l = 0; l < p->n_launches; l++) plan.module[l] = -1;
	}
	/* A device-only artifact has no CPU code, so it needs no CPU feature. */
	char *features = info->no_cpu_code ? calloc(1, 1) : cpu_listed_features(m.triple, m.features);
	int n = 1 + plan.n_modules;
	/* -O1 emits without loop strength reduction (docs/compile-time.md;
	 * TBC_O1_LSR=1 keeps it, for measuring) */
	const char *o1_lsr = getenv("TBC_O1_LSR");
	bool strength_reduce = o->opt_level != 1 || (o1_lsr && strcmp(o1_lsr, "0") != 0);
	module_job mj[1 + CPU_MAX_KERNEL_MODULES];
	memset(mj, 0, sizeof mj);
	llvm_job jobs[1 + CPU_MAX_KERNEL_MODULES];
	memset(jobs, 0, sizeof jobs);
	bool ok = features != NULL;
	for (int i = 0; i < n; i++) {
		char name[160];
		if (i) snprintf(name, sizeof name, "%s.kernels.%d", info->prefix, i - 1);
		jobs[i] = (llvm_job){.build = build_module, .user = &mj[i], .tm = i ? NULL : m.tm,
				     .opt_level = o->opt_level, .what = info->emit_llvm_ir ? LLVM_OUT_IR : LLVM_OUT_OBJECT,
				     .strength_reduce = strength_reduce, .backend = "cpu", .d = tbc_diags_create()};
		mj[i] = (module_job){.module = i - 1, .p = p, .plan = &plan, .info = info, .triple = m.triple,
				     .features = features};
		module_cx(&mj[i].cx, i ? name : info->prefix, t, &m, jobs[i].d);
		jobs[i].mod = mj[i].cx.mod;
		if (i) { /* a target machine of its own: one is not used by two threads */
			LLVMTargetRef target;
			char *err = NULL;
			if (!LLVMGetTargetFromTriple(m.triple, &target, &err))
				jobs[i].tm = LLVMCreateTargetMachine(target, m.triple, m.cpu, m.features,
								     llvm_codegen_level(o->opt_level), LLVMRelocPIC,
								     LLVMCodeModelDefault);
			LLVMDisposeMessage(err);
		}
		ok &= jobs[i].tm != NULL && jobs[i].d != NULL;
	}
	if (!ok) tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "no target machine, or out of memory");
	int threads = compile_threads(o);
	double t1 = tbc_seconds_now();
	ok = ok && llvm_jobs_run(jobs, n, threads);
	double t2 = tbc_seconds_now();
	if (info->times) {
		info->times->ir_seconds = t1 - t0;
		info->times->compile_seconds = t2 - t1;
		info->times->modules = n;
		info->times->threads = threads < n ? threads : n;
		for (int i = 0; i < n; i++) {
			info->times->module_seconds += jobs[i].seconds;
			info->times->ir_seconds += jobs[i].build_seconds;
		}
	}
	for (int i = 0; i < n; i++) {
		for (size_t k = 0; jobs[i].d && k < tbc_diags_count(jobs[i].d); k++) {
			const tbc_diag *g = tbc_diags_get(jobs[i].d, k);
			tbc_diags_add(d, g->code, g->file, g->node, g->op_type, g->tensor, "%s", g->message);
		}
		tbc_diags_destroy(jobs[i].d);
		out->data[i] = jobs[i].data;
		out->size[i] = jobs[i].size;
		if (i && jobs[i].tm) LLVMDisposeTargetMachine(jobs[i].tm);
		llvm_cx_dispose(&mj[i].cx);
	}
	out->n = n;
	if (mj[0].data_obj) { /* the data object after the code */
		out->data[out->n] = mj[0].data_obj;
		out->size[out->n++] = mj[0].data_obj_size;
	}
	free(features);
	cpu_kernel_plan_free(&plan);
	machine_free(&m);
	if (ok) return TBC_OK;
	tbc_objects_free(out);
	tbc_code first = tbc_diags_first_code(d);
	return first != TBC_OK ? first : TBC_ERR_NO_MEMORY;
}

const tbc_target tbc_target_cpu = {.name = "cpu", .describe = cpu_describe, .emit = cpu_emit};
