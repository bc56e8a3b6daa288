/* The module being emitted: its LLVM context and types, the LLVM type of
 * each kernel IR type, diagnostics and the constant strings of error
 * messages. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"

/* LLVM's remarks and warnings (a loop the vectorizer declined) are not the
 * user's business; errors reach us through return values. */
static void quiet_diagnostics(LLVMDiagnosticInfoRef info, void *user) {
	(void)info;
	(void)user;
}

void llvm_cx_init(llvm_cx *c, const char *module_name, const llvm_hooks *hooks, int vector_bytes, tbc_diags *d) {
	memset(c, 0, sizeof *c);
	c->d = d;
	c->hooks = hooks;
	c->vector_bytes = vector_bytes;
	c->ctx = LLVMContextCreate();
	LLVMContextSetDiagnosticHandler(c->ctx, quiet_diagnostics, NULL);
	c->mod = LLVMModuleCreateWithNameInContext(module_name, c->ctx);
	c->b = LLVMCreateBuilderInContext(c->ctx);
	c->i1 = LLVMInt1TypeInContext(c->ctx);
	c->i8 = LLVMInt8TypeInContext(c->ctx);
	c->i16 = LLVMInt16TypeInContext(c->ctx);
	c->i32 = LLVMInt32TypeInContext(c->ctx);
	c->i64 = LLVMInt64TypeInContext(c->ctx);
	c->f32 = LLVMFloatTypeInContext(c->ctx);
	c->f64 = LLVMDoubleTypeInContext(c->ctx);
	c->ptr = LLVMPointerTypeInContext(c->ctx, 0);
	c->buf_ptr = LLVMPointerTypeInContext(c->ctx, hooks->buffer_addrspace);
	c->void_t = LLVMVoidTypeInContext(c->ctx);
	c->loop_md_kind = LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9);
}

void llvm_cx_dispose(llvm_cx *c) {
	LLVMDisposeBuilder(c->b);
	LLVMDisposeModule(c->mod);
	LLVMContextDispose(c->ctx);
	memset(c, 0, sizeof *c);
}

bool llvm_fail(llvm_cx *c, tbc_code code, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!c->failed) tbc_diags_add(c->d, code, NULL, NULL, NULL, NULL, "%s backend: %s", c->hooks->name, msg);
	c->failed = true;
	return false;
}

LLVMTypeRef llvm_type(llvm_cx *c, tbc_dtype t) {
	switch ((int)t) {
	case KIR_INDEX:
	case TBC_DT_I64:
	case TBC_DT_U64: return c->i64;
	case TBC_DT_I32:
	case TBC_DT_U32: return c->i32;
	case TBC_DT_I16:
	case TBC_DT_U16: return c->i16;
	case TBC_DT_I8:
	case TBC_DT_U8: return c->i8;
	case TBC_DT_BOOL: return c->i1;
	case TBC_DT_F32: return c->f32;
	case TBC_DT_F64: return c->f64;
	/* Narrow floats are their bits (llvm_narrow.c): no LLVM half type, which
	 * x86 without F16C would convert through compiler-rt.  Sub-byte integers
	 * compute in their own width (LLVM wraps i4 as kernel IR does) and are
	 * one per byte in memory. */
	case TBC_DT_F16:
	case TBC_DT_BF16: return c->i16;
	case TBC_DT_F8E4M3FN:
	case TBC_DT_F8E4M3FNUZ:
	case TBC_DT_F8E5M2:
	case TBC_DT_F8E5M2FNUZ:
	case TBC_DT_F8E8M0:
	case TBC_DT_F4E2M1: return c->i8;
	case TBC_DT_I4:
	case TBC_DT_U4: return LLVMIntTypeInContext(c->ctx, 4);
	case TBC_DT_I2:
	case TBC_DT_U2: return LLVMIntTypeInContext(c->ctx, 2);
	default:
		llvm_fail(c, TBC_ERR_UNSUPPORTED, "%s has no code generation in this backend yet", tbc_dtype_name(t));
		return NULL;
	}
}

LLVMTypeRef llvm_mem_type(llvm_cx *c, tbc_dtype t) {
	return t == TBC_DT_BOOL || llvm_is_sub_byte_int(t) ? c->i8 : llvm_type(c, t);
}

LLVMValueRef llvm_message(llvm_cx *c, const char *text) {
	char name[64];
	snprintf(name, sizeof name, "tbc.msg.%d", c->n_messages++);
	LLVMValueRef init = LLVMConstStringInContext2(c->ctx, text, strlen(text), 0);
	LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(g, init);
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
	return g;
}
