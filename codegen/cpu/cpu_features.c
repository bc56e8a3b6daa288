/* CPU and feature names: which ones LLVM knows, and which features a CPU
 * named with --cpu has.
 *
 * The names LLVM knows come from `llc -mcpu=help` at build time
 * (cmake/llvm_names.cmake writes llvm_names.h): LLVM only warns about an
 * unknown name, and an unknown x86-64 CPU then aborts the process ("64-bit
 * code requested on a subtarget that doesn't support it"), so tbc refuses
 * such names itself.
 *
 * The features of a named CPU: LLVM's C API does not list them, but its
 * inliner asks the target whether a callee's features are a subset of the
 * caller's (X86TTIImpl / AArch64TTIImpl::areInlineCompatible, from LLVM's own
 * CPU tables).  So a probe module has a caller compiled for the CPU and, for
 * each feature the runtime can check (runtime/cpu_features.def), an empty
 * callee for the same CPU plus that feature; after LLVM's inliner runs, the
 * callees still called are the features the CPU lacks.  The artifact lists
 * the others, and the runtime refuses it on a host without one of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen/cpu/cpu.h"
#include "llvm_names.h"

static const char *const x86_checked[] = {
#define X86_FEATURE(name, leaf, reg, bit, state) name,
#include "runtime/cpu_features.def"
#undef X86_FEATURE
};
static const char *const a64_checked[] = {
#define A64_FEATURE(name, word, bit) name,
#include "runtime/cpu_features.def"
#undef A64_FEATURE
};

static const char *const x86_intrinsic_only[] = {
#define X86_INTRINSIC_ONLY(name) name,
#include "runtime/cpu_features.def"
#undef X86_INTRINSIC_ONLY
	NULL,
};
static const char *const a64_intrinsic_only[] = {
#define A64_INTRINSIC_ONLY(name) name,
#include "runtime/cpu_features.def"
#undef A64_INTRINSIC_ONLY
	NULL,
};

static bool is_x86(const char *triple) { return !strncmp(triple, "x86_64", 6); }

static bool listed(const char *const *list, const char *name, size_t len) {
	for (; *list; list++)
		if (strlen(*list) == len && !memcmp(*list, name, len)) return true;
	return false;
}

bool cpu_name_known(const char *triple, const char *cpu) {
	return listed(is_x86(triple) ? tbc_llvm_cpus_x86_64 : tbc_llvm_cpus_aarch64, cpu, strlen(cpu));
}

bool cpu_features_known(const char *triple, const char *features, char *bad, size_t bad_size) {
	const char *const *known = is_x86(triple) ? tbc_llvm_features_x86_64 : tbc_llvm_features_aarch64;
	for (const char *s = features; *s;) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		const char *name = s + (l && (s[0] == '+' || s[0] == '-'));
		size_t n = l - (size_t)(name - s);
		if (!n || name == s || !listed(known, name, n)) {
			snprintf(bad, bad_size, "%.*s", (int)l, s);
			return false;
		}
		s += l;
		if (*s == ',') s++;
	}
	return true;
}

static void add_string_attr(LLVMContextRef ctx, LLVMValueRef fn, const char *key, const char *value) {
	LLVMAttributeRef a = LLVMCreateStringAttribute(ctx, key, (unsigned)strlen(key), value, (unsigned)strlen(value));
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

char *cpu_named_features(LLVMTargetRef target, const char *triple, const char *cpu) {
	bool x86 = is_x86(triple);
	const char *const *checked = x86 ? x86_checked : a64_checked;
	size_t n = x86 ? sizeof x86_checked / sizeof *x86_checked : sizeof a64_checked / sizeof *a64_checked;
	const char *const *known = x86 ? tbc_llvm_features_x86_64 : tbc_llvm_features_aarch64;
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, "", LLVMCodeGenLevelDefault,
							  LLVMRelocPIC, LLVMCodeModelDefault);
	LLVMContextRef ctx = LLVMContextCreate();
	LLVMModuleRef m = LLVMModuleCreateWithNameInContext("tbc.features", ctx);
	LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
	LLVMValueRef *callee = calloc(n, sizeof *callee);
	size_t cap = 1;
	for (size_t i = 0; i < n; i++) cap += strlen(checked[i]) + 2;
	char *out = malloc(cap);
	if (!tm || !callee || !out) goto fail;
	LLVMSetTarget(m, triple);
	LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(m, dl);
	LLVMDisposeTargetData(dl);
	LLVMTypeRef fn_t = LLVMFunctionType(LLVMVoidTypeInContext(ctx), NULL, 0, 0);
	LLVMValueRef caller = LLVMAddFunction(m, "probe", fn_t);
	add_string_attr(ctx, caller, "target-cpu", cpu);
	for (size_t i = 0; i < n; i++) {
		if (!listed(known, checked[i], strlen(checked[i]))) continue; /* not a feature of this LLVM */
		char name[32], feature[64];
		snprintf(name, sizeof name, "f%zu", i);
		snprintf(feature, sizeof feature, "+%s", checked[i]);
		callee[i] = LLVMAddFunction(m, name, fn_t);
		LLVMSetLinkage(callee[i], LLVMInternalLinkage);
		add_string_attr(ctx, callee[i], "target-cpu", cpu);
		add_string_attr(ctx, callee[i], "target-features", feature);
		LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, callee[i], "entry"));
		LLVMBuildRetVoid(b);
	}
	LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, caller, "entry"));
	for (size_t i = 0; i < n; i++)
		if (callee[i]) LLVMBuildCall2(b, fn_t, callee[i], NULL, 0, "");
	LLVMBuildRetVoid(b);

	LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
	LLVMErrorRef err = LLVMRunPasses(m, "cgscc(inline)", tm, po);
	LLVMDisposePassBuilderOptions(po);
	if (err) {
		LLVMConsumeError(err);
		goto fail;
	}
	/* A call left in the caller: the CPU lacks that callee's feature. */
	bool *lacks = calloc(n, sizeof *lacks);
	if (!lacks) goto fail;
	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(caller); bb; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
			if (LLVMGetInstructionOpcode(in) != LLVMCall) continue;
			LLVMValueRef f = LLVMGetCalledValue(in);
			for (size_t i = 0; i < n; i++)
				if (callee[i] == f) lacks[i] = true;
		}
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		if (!callee[i] || lacks[i]) continue;
		len += (size_t)sprintf(out + len, "%s+%s", len ? "," : "", checked[i]);
	}
	out[len] = 0;
	free(lacks);
	char *result = LLVMCreateMessage(out);
	free(out);
	free(callee);
	LLVMDisposeBuilder(b);
	LLVMDisposeModule(m);
	LLVMContextDispose(ctx);
	LLVMDisposeTargetMachine(tm);
	return result;
fail:
	free(out);
	free(callee);
	LLVMDisposeBuilder(b);
	LLVMDisposeModule(m);
	LLVMContextDispose(ctx);
	if (tm) LLVMDisposeTargetMachine(tm);
	return NULL;
}

char *cpu_listed_features(const char *triple, const char *all) {
	const char *const *skip = is_x86(triple) ? x86_intrinsic_only : a64_intrinsic_only;
	char *out = malloc(strlen(all) + 1);
	if (!out) return NULL;
	size_t len = 0;
	for (const char *s = all; *s;) {
		const char *e = strchr(s, ',');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (l > 1 && s[0] == '+' && !listed(skip, s + 1, l - 1)) {
			if (len) out[len++] = ',';
			memcpy(out + len, s, l);
			len += l;
		}
		s += l;
		if (*s == ',') s++;
	}
	out[len] = 0;
	return out;
}
