/* In-process compilation: the object code the CPU target emits for the host
 * is linked in memory by LLVM ORC's LLJIT; no file is written.  libm and
 * libc resolve from the process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <llvm-c/Core.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>

#include "codegen/compile.h"
#include "tbc/abi.h"

void tbc_cpu_init_llvm(void);

struct tbc_jit {
	LLVMOrcLLJITRef jit;
	const tbc_abi_model *model;
};

static tbc_code jit_error(tbc_diags *d, LLVMErrorRef e, const char *what) {
	char *msg = LLVMGetErrorMessage(e);
	tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "jit: %s: %s", what, msg);
	LLVMDisposeErrorMessage(msg);
	return TBC_ERR_INTERNAL;
}

/* Code with AMX tiles (kir_tile2) needs the tile state, which Linux gives a
 * process only when asked (arch_prctl ARCH_REQ_XCOMP_PERM for
 * XFEATURE_XTILEDATA, 18; the runtime asks the same before running an
 * artifact that lists amx-tile: runtime/cpu.c).  0 or the errno. */
static int amx_request(const char *features) {
	if (!features || !strstr(features, "+amx-tile")) return 0;
#if defined(__x86_64__) && defined(__linux__) && defined(SYS_arch_prctl)
	return syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 0 : errno;
#else
	return ENOSYS;
#endif
}

tbc_code tbc_jit_compile(const tbc_module *m, const tbc_compile_options *o, tbc_diags *d, tbc_jit **out_jit) {
	*out_jit = NULL;
	tbc_compile_options opts;
	if (o) opts = *o;
	else tbc_compile_options_init(&opts);
	/* The JIT runs here: always the host. */
	opts.target_triple = NULL;
	opts.weights = TBC_WEIGHTS_EMBED;
	const char *prefix = "model";
	tbc_emit_info info = {.prefix = prefix, .export_generic = false};
	tbc_objects objs;
	tbc_code rc = tbc_codegen(m, &opts, &info, d, NULL, NULL, &objs);
	if (rc != TBC_OK) return rc;
	tbc_cpu_init_llvm();
	tbc_jit *j = calloc(1, sizeof *j);
	if (!j) {
		tbc_objects_free(&objs);
		return TBC_ERR_NO_MEMORY;
	}
	LLVMErrorRef e = LLVMOrcCreateLLJIT(&j->jit, NULL);
	if (e) {
		tbc_objects_free(&objs);
		free(j);
		return jit_error(d, e, "creating LLJIT");
	}
	LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
	LLVMOrcDefinitionGeneratorRef gen = NULL;
	e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL);
	if (e) {
		tbc_objects_free(&objs);
		tbc_jit_destroy(j);
		return jit_error(d, e, "process symbols");
	}
	LLVMOrcJITDylibAddGenerator(jd, gen);
	/* The objects of the modules compiled in parallel, in one JITDylib: the
	 * host module's calls find the kernels' (hidden) symbols there. */
	for (int i = 0; i < objs.n && !e; i++) {
		char name[32];
		snprintf(name, sizeof name, "tbc-model.%d.o", i);
		LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(objs.data[i], objs.size[i], name);
		e = LLVMOrcLLJITAddObjectFile(j->jit, jd, buf);
	}
	tbc_objects_free(&objs);
	if (e) {
		tbc_jit_destroy(j);
		return jit_error(d, e, "adding the object");
	}
	LLVMOrcExecutorAddress addr = 0;
	e = LLVMOrcLLJITLookup(j->jit, &addr, "model_descriptor");
	if (e) {
		tbc_jit_destroy(j);
		return jit_error(d, e, "looking up the descriptor");
	}
	tbc_abi_descriptor_fn fn;
	memcpy(&fn, &(void *){(void *)(uintptr_t)addr}, sizeof fn);
	j->model = fn();
	int amx = amx_request(j->model->cpu_features);
	if (amx) {
		tbc_jit_destroy(j);
		tbc_diags_add(d, TBC_ERR_UNSUPPORTED, NULL, NULL, NULL, NULL,
			      "jit: the code uses AMX tiles, and the kernel refused this process the tile state (arch_prctl "
			      "ARCH_REQ_XCOMP_PERM): %s; TBC_AMX=0 compiles without them",
			      strerror(amx));
		return TBC_ERR_UNSUPPORTED;
	}
	*out_jit = j;
	return TBC_OK;
}

const tbc_abi_model *tbc_jit_descriptor(const tbc_jit *jit) { return jit ? jit->model : NULL; }

void tbc_jit_destroy(tbc_jit *jit) {
	if (!jit) return;
	if (jit->jit) {
		LLVMErrorRef e = LLVMOrcDisposeLLJIT(jit->jit);
		if (e) LLVMConsumeError(e);
	}
	free(jit);
}
