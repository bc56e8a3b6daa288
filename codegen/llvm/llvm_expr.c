/* Expressions: the walk over a kernel IR expression tree, constants,
 * variables and buffer loads; operations are llvm_arith.c's.  A node used
 * twice in one statement (kernel IR shares subtrees) is emitted once: the
 * memo maps nodes to their values until the statement ends: the next one
 * may run in another block, or after a set or a store changes what a node
 * reads. */
#include <stdlib.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"

struct llvm_memo_entry {
	const kir_expr *e;
	LLVMValueRef v;
};

void llvm_memo_clear(llvm_fn *f) {
	if (f->memo_n) memset(f->memo, 0, f->memo_cap * sizeof *f->memo);
	f->memo_n = 0;
}

static size_t memo_slot(const llvm_fn *f, const kir_expr *e) {
	size_t h = (size_t)(uintptr_t)e;
	h ^= h >> 17;
	h *= 0x9E3779B97F4A7C15ull;
	return h & (f->memo_cap - 1);
}

static LLVMValueRef memo_get(const llvm_fn *f, const kir_expr *e) {
	if (!f->memo_cap) return NULL;
	for (size_t i = memo_slot(f, e);; i = (i + 1) & (f->memo_cap - 1)) {
		if (!f->memo[i].e) return NULL;
		if (f->memo[i].e == e) return f->memo[i].v;
	}
}

static void memo_put(llvm_fn *f, const kir_expr *e, LLVMValueRef v) {
	if ((f->memo_n + 1) * 2 > f->memo_cap) {
		size_t cap = f->memo_cap ? f->memo_cap * 2 : 256;
		llvm_memo_entry *old = f->memo;
		size_t old_cap = f->memo_cap;
		f->memo = calloc(cap, sizeof *f->memo);
		if (!f->memo) {
			f->memo = old;
			return;
		}
		f->memo_cap = cap;
		f->memo_n = 0;
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].e) memo_put(f, old[i].e, old[i].v);
		free(old);
	}
	size_t i = memo_slot(f, e);
	while (f->memo[i].e) i = (i + 1) & (f->memo_cap - 1);
	f->memo[i] = (llvm_memo_entry){e, v};
	f->memo_n++;
}

void llvm_mark_access(llvm_fn *f, LLVMValueRef inst) {
	if (!f->in_parallel || !f->group) return;
	llvm_cx *c = f->c;
	LLVMSetMetadata(inst, LLVMGetMDKindIDInContext(c->ctx, "llvm.access.group", 17),
			LLVMMetadataAsValue(c->ctx, f->group));
}

static LLVMValueRef cint(llvm_cx *c, LLVMTypeRef t, int64_t v) { return LLVMConstInt(t, (unsigned long long)v, 1); }

static LLVMValueRef load(llvm_fn *f, const kir_expr *e) {
	llvm_cx *c = f->c;
	LLVMValueRef i = llvm_expr(f, e->a);
	tbc_dtype dt = e->buf->dtype;
	LLVMTypeRef mt = llvm_mem_type(c, dt);
	if (!i || !mt) return NULL;
	LLVMValueRef base = e->buf->space == KIR_MEM_LOCAL ? f->locals[e->buf->id] : f->bufs[e->buf->id];
	LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, mt, base, &i, 1, "");
	LLVMValueRef v = LLVMBuildLoad2(c->b, mt, p, "");
	LLVMSetAlignment(v, (unsigned)tbc_dtype_size(dt));
	llvm_mark_access(f, v);
	if (dt == TBC_DT_BOOL) v = LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstInt(c->i8, 0, 0), "");
	/* A sub-byte integer is the low bits of its byte (a signed one keeps
	 * its sign in the whole byte, but only the low bits count, as
	 * tbc_load_i64 reads them); f4e2m1 is the low nibble. */
	if (llvm_is_sub_byte_int(dt)) v = LLVMBuildTrunc(c->b, v, llvm_type(c, dt), "");
	if (dt == TBC_DT_F4E2M1) v = LLVMBuildAnd(c->b, v, LLVMConstInt(c->i8, 0xf, 0), "");
	return v;
}

LLVMValueRef llvm_expr(llvm_fn *f, const kir_expr *e) {
	llvm_cx *c = f->c;
	if (c->failed) return NULL;
	LLVMValueRef v = memo_get(f, e);
	if (v) return v;
	switch (e->kind) {
	case KIR_E_INT: {
		LLVMTypeRef t = llvm_type(c, e->type);
		v = t ? cint(c, t, e->i) : NULL;
		break;
	}
	case KIR_E_FLOAT: {
		LLVMTypeRef t = llvm_type(c, e->type);
		if (t && kir_type_is_narrow_float(e->type)) v = llvm_narrow_const(c, e->type, e->f);
		else v = t ? LLVMConstReal(t, e->f) : NULL;
		break;
	}
	case KIR_E_VAR: {
		LLVMTypeRef t = llvm_type(c, e->var->type);
		v = t ? LLVMBuildLoad2(c->b, t, f->vars[e->var->id], "") : NULL;
		break;
	}
	case KIR_E_SIZE: v = f->sizes[e->size]; break;
	case KIR_E_LOAD: v = load(f, e); break;
	case KIR_E_UNARY: v = llvm_unary(f, e); break;
	case KIR_E_BINARY: v = llvm_binary(f, e); break;
	case KIR_E_CMP: v = llvm_compare(f, e); break;
	case KIR_E_SELECT: {
		if ((v = llvm_nan_clamp(f, e))) break;
		LLVMValueRef cond = llvm_expr(f, e->a), a = llvm_expr(f, e->b), b = llvm_expr(f, e->c);
		v = cond && a && b ? LLVMBuildSelect(c->b, cond, a, b, "") : NULL;
		break;
	}
	case KIR_E_CAST: v = llvm_cast(f, e); break;
	case KIR_E_LOCAL_ID: v = c->hooks->local_id(f, e->size); break; /* present: llvm_emit_kernel */
	}
	if (v) memo_put(f, e, v);
	return v;
}
