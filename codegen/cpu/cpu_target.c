/* The CPU target: a lowered program -> LLVM module -> LLVM's new pass
 * manager (default<O0..O3>) -> object code for x86-64 or AArch64.  The host
 * CPU and its features are used unless --target / --cpu say otherwise. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen/cpu/cpu.h"
#include "codegen/tuning.h"

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

static char llvm_version[32];
static pthread_once_t llvm_version_once = PTHREAD_ONCE_INIT;
static void format_llvm_version(void) {
	unsigned major, minor, patch;
	LLVMGetVersion(&major, &minor, &patch);
	snprintf(llvm_version, sizeof llvm_version, "%u.%u.%u", major, minor, patch);
}

const char *tbc_llvm_version(void) {
	pthread_once(&llvm_version_once, format_llvm_version);
	return llvm_version;
}

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
	LLVMCodeGenOptLevel level = o->opt_level <= 0 ? LLVMCodeGenLevelNone
				    : o->opt_level == 1 ? LLVMCodeGenLevelLess
				    : o->opt_level == 2 ? LLVMCodeGenLevelDefault
							: LLVMCodeGenLevelAggressive;
	m->tm = LLVMCreateTargetMachine(target, m->triple, m->cpu, m->features, level, LLVMRelocPIC,
					LLVMCodeModelDefault);
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

static kir_tuning tuning_of(const char *triple, const char *features) {
	kir_tuning t = kir_tuning_default();
	if (!strncmp(triple, "aarch64", 7) || !strncmp(triple, "arm64", 5)) t = (kir_tuning){16, 32};
	else if (has_feature(features, "avx512f")) t = (kir_tuning){64, 32};
	return t;
}

kir_tuning tbc_cpu_tuning(const tbc_compile_options *o) {
	/* A machine the emitter would refuse gets the defaults; the emitter
	 * reports why. */
	tbc_diags *scratch = tbc_diags_create();
	machine m;
	LLVMTargetRef target;
	kir_tuning t = kir_tuning_default();
	if (scratch && machine_resolve(o, scratch, &m, &target) == TBC_OK) {
		t = tuning_of(m.triple, m.features);
		machine_free(&m);
	}
	tbc_diags_destroy(scratch);
	return t;
}

/* LLVM's remarks and warnings (a loop the vectorizer declined) are not the
 * user's business; errors reach us through return values. */
static void quiet_diagnostics(LLVMDiagnosticInfoRef info, void *user) {
	(void)info;
	(void)user;
}

static tbc_code cpu_emit(const kir_program *p, const tbc_compile_options *o, const tbc_emit_info *info,
			 tbc_diags *d, void **out_data, size_t *out_size) {
	*out_data = NULL;
	*out_size = 0;
	machine m;
	tbc_code rc = machine_new(o, d, &m);
	if (rc != TBC_OK) return rc;
	cpu_cx c = {.d = d};
	c.ctx = LLVMContextCreate();
	LLVMContextSetDiagnosticHandler(c.ctx, quiet_diagnostics, NULL);
	c.mod = LLVMModuleCreateWithNameInContext(info->prefix, c.ctx);
	c.b = LLVMCreateBuilderInContext(c.ctx);
	c.i1 = LLVMInt1TypeInContext(c.ctx);
	c.i8 = LLVMInt8TypeInContext(c.ctx);
	c.i16 = LLVMInt16TypeInContext(c.ctx);
	c.i32 = LLVMInt32TypeInContext(c.ctx);
	c.i64 = LLVMInt64TypeInContext(c.ctx);
	c.f32 = LLVMFloatTypeInContext(c.ctx);
	c.f64 = LLVMDoubleTypeInContext(c.ctx);
	c.ptr = LLVMPointerTypeInContext(c.ctx, 0);
	c.void_t = LLVMVoidTypeInContext(c.ctx);
	LLVMTypeRef host_fields[4] = {c.ptr, c.ptr, c.ptr, c.ptr};
	c.host_t = LLVMStructTypeInContext(c.ctx, host_fields, 4, 0);
	LLVMTypeRef body_params[3] = {c.ptr, c.i64, c.i64};
	c.par_body_t = LLVMFunctionType(c.void_t, body_params, 3, 0);
	LLVMTypeRef pf_params[5] = {c.ptr, c.ptr, c.ptr, c.i64, c.i64};
	c.par_for_t = LLVMFunctionType(c.void_t, pf_params, 5, 0);
	c.loop_md_kind = LLVMGetMDKindIDInContext(c.ctx, "llvm.loop", 9);
	c.vector_bytes = tuning_of(m.triple, m.features).vector_bytes;
	LLVMSetTarget(c.mod, m.triple);
	LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(m.tm);
	LLVMSetModuleDataLayout(c.mod, dl);
	LLVMDisposeTargetData(dl);

	/* A device-only artifact has no CPU code, so it needs no CPU feature. */
	char *features = info->no_cpu_code ? calloc(1, 1) : cpu_listed_features(m.triple, m.features);
	bool ok = features && cpu_emit_program(&c, p, info, m.triple, features);
	free(features);
	char *err = NULL;
	if (ok && LLVMVerifyModule(c.mod, LLVMReturnStatusAction, &err)) {
		tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "cpu backend: invalid LLVM IR: %.400s",
			      err ? err : "");
		ok = false;
	}
	LLVMDisposeMessage(err);
	err = NULL;
	if (ok) {
		char passes[32];
		int level = o->opt_level < 0 ? 0 : o->opt_level > 3 ? 3 : o->opt_level;
		snprintf(passes, sizeof passes, "default<O%d>", level);
		LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
		LLVMPassBuilderOptionsSetLoopVectorization(po, level >= 2);
		LLVMPassBuilderOptionsSetSLPVectorization(po, level >= 2);
		LLVMPassBuilderOptionsSetLoopUnrolling(po, level >= 2);
		LLVMErrorRef e = LLVMRunPasses(c.mod, passes, m.tm, po);
		LLVMDisposePassBuilderOptions(po);
		if (e) {
			char *msg = LLVMGetErrorMessage(e);
			tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "cpu backend: passes: %s", msg);
			LLVMDisposeErrorMessage(msg);
			ok = false;
		}
	}
	if (ok && info->emit_llvm_ir) {
		char *text = LLVMPrintModuleToString(c.mod);
		size_t n = strlen(text);
		*out_data = malloc(n + 1);
		if (*out_data) {
			memcpy(*out_data, text, n + 1);
			*out_size = n;
		} else {
			ok = false;
		}
		LLVMDisposeMessage(text);
	} else if (ok) {
		LLVMMemoryBufferRef buf = NULL;
		if (LLVMTargetMachineEmitToMemoryBuffer(m.tm, c.mod, LLVMObjectFile, &err, &buf)) {
			tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "cpu backend: emitting code: %s",
				      err ? err : "");
			LLVMDisposeMessage(err);
			ok = false;
		} else {
			size_t n = LLVMGetBufferSize(buf);
			*out_data = malloc(n ? n : 1);
			if (*out_data) {
				memcpy(*out_data, LLVMGetBufferStart(buf), n);
				*out_size = n;
			} else {
				ok = false;
			}
			LLVMDisposeMemoryBuffer(buf);
		}
	}
	LLVMDisposeBuilder(c.b);
	LLVMDisposeModule(c.mod);
	LLVMContextDispose(c.ctx);
	machine_free(&m);
	if (ok) return TBC_OK;
	tbc_code first = tbc_diags_first_code(d);
	return first != TBC_OK ? first : TBC_ERR_NO_MEMORY;
}

const tbc_target tbc_target_cpu = {"cpu", cpu_emit};
