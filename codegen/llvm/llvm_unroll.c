/* A loop of independent iterations unrolled with its loads first
 * (llvm_kernel.h, llvm_interleaved_loop): for GPUs, where a work-item that
 * loads, computes and stores one element at a time keeps one load in flight,
 * and a memory-bound kernel then runs well below the memory's bandwidth
 * (docs/gpu.md, "Kernels against the peer").
 *
 * Each trip of the loop runs n iterations, at var, var + stride, ...,
 * var + (n - 1) stride, and emits each statement of the body for all n
 * before the next statement; a store's address and value (with the loads
 * they need) for all n before any of the n stores.  So the n iterations'
 * loads come before any store in the code, and the GPU's compiler (ptxas,
 * which cannot tell that a store does not alias a later load) issues them
 * together.  Reordering across iterations this way is what a parallel
 * loop's contract allows (codegen/kir/kir.h: no iteration reads what
 * another stores, no two store one element); each iteration keeps its own
 * order.  The scalars the body sets get a slot per iteration.
 *
 * Only straight-line bodies (stores, sets, checks and ifs of those) are
 * unrolled, and only small ones: a body with loops is already long per
 * iteration, and copies of a large body cost registers and code. */
#include <stdlib.h>

#include "codegen/llvm/llvm_emit.h"

/* Expression nodes past which a body is not copied (a fused chain of a
 * dozen ops with broadcast indices is well under it). */
enum { MAX_NODES = 400 };

static int expr_nodes(const kir_expr *e) {
	if (!e) return 0;
	return 1 + expr_nodes(e->a) + expr_nodes(e->b) + expr_nodes(e->c);
}

/* Nodes of a straight-line statement list, or -1 when it has a loop, a
 * barrier or a warp's matrix multiply (collective, as a barrier is). */
static int straight_nodes(const kir_stmt *s) {
	int n = 0;
	for (; s; s = s->next) {
		if (s->kind == KIR_S_FOR || s->kind == KIR_S_BARRIER || s->kind == KIR_S_MMA || s->kind == KIR_S_DOT2 ||
		    s->kind == KIR_S_TILE2 || s->kind == KIR_S_DOT4 || s->kind == KIR_S_FMA_TILE)
			return -1;
		int inner = 0;
		if (s->kind == KIR_S_IF) {
			int a = straight_nodes(s->body), b = straight_nodes(s->orelse);
			if (a < 0 || b < 0) return -1;
			inner = a + b;
		}
		n += inner + expr_nodes(s->index) + expr_nodes(s->value) + expr_nodes(s->cond);
	}
	return n;
}

bool llvm_can_interleave(const kir_stmt *body) {
	int n = straight_nodes(body);
	return n >= 0 && n <= MAX_NODES;
}

static void mark_set_vars(const kir_stmt *s, bool *set) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_SET) set[s->var->id] = true;
		mark_set_vars(s->body, set);
		mark_set_vars(s->orelse, set);
	}
}

/* The statements from s on, for the n iterations whose variable slots are
 * vars[0..n-1]. */
static void interleave(llvm_fn *f, const kir_stmt *s, LLVMValueRef **vars, int n) {
	LLVMValueRef *own = f->vars;
	LLVMValueRef ptr[LLVM_MAX_INTERLEAVE], val[LLVM_MAX_INTERLEAVE];
	for (; s && !f->c->failed; s = s->next) {
		if (s->kind == KIR_S_STORE) {
			bool ok = true;
			for (int j = 0; j < n && ok; j++) {
				f->vars = vars[j];
				llvm_memo_clear(f); /* a node's value differs per iteration */
				ok = llvm_store_operands(f, s, &ptr[j], &val[j]);
			}
			for (int j = 0; j < n && ok; j++) llvm_store_emit(f, s, ptr[j], val[j]);
		} else {
			for (int j = 0; j < n; j++) {
				f->vars = vars[j];
				llvm_stmt(f, s); /* clears the memo before and after */
			}
		}
		llvm_memo_clear(f);
	}
	f->vars = own;
}

void llvm_interleaved_loop(llvm_fn *f, const kir_var *var, LLVMValueRef hi, LLVMValueRef stride, int n,
			   const kir_stmt *body) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	const kir_kernel *k = f->k;
	if (n > LLVM_MAX_INTERLEAVE) n = LLVM_MAX_INTERLEAVE;
	bool *set = calloc((size_t)k->n_vars + 1, sizeof *set);
	LLVMValueRef *slots = calloc((size_t)n * (size_t)k->n_vars + 1, sizeof *slots);
	LLVMValueRef *vars[LLVM_MAX_INTERLEAVE];
	if (!set || !slots) {
		free(set);
		free(slots);
		llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		return;
	}
	mark_set_vars(body, set);
	set[var->id] = true;
	/* Iteration j's slots: its own for the loop variable and the scalars the
	 * body sets, made in the entry block (mem2reg turns them into
	 * registers); the function's for the rest, which the body only reads. */
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
	LLVMBuilderRef eb = LLVMCreateBuilderInContext(c->ctx);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first) LLVMPositionBuilderBefore(eb, first);
	else LLVMPositionBuilderAtEnd(eb, entry);
	for (int j = 0; j < n; j++) {
		vars[j] = slots + (size_t)j * (size_t)k->n_vars;
		for (int v = 0; v < k->n_vars; v++) {
			vars[j][v] = f->vars[v];
			if (set[v] && f->vars[v]) vars[j][v] = LLVMBuildAlloca(eb, llvm_type(c, k->vars[v]->type), k->vars[v]->name);
		}
	}
	LLVMDisposeBuilder(eb);

	/* while (i + (n - 1) stride < hi) { iterations i .. i + (n - 1) stride; i += n stride } */
	LLVMValueRef slot = f->vars[var->id];
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "trip");
	LLVMBasicBlockRef bodyb = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "iterations");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "rest");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMValueRef i = LLVMBuildLoad2(b, c->i64, slot, "");
	LLVMValueRef last = LLVMBuildNSWAdd(b, i, LLVMBuildNSWMul(b, stride, LLVMConstInt(c->i64, (unsigned)(n - 1), 0), ""), "");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, last, hi, ""), bodyb, exit);
	LLVMPositionBuilderAtEnd(b, bodyb);
	i = LLVMBuildLoad2(b, c->i64, slot, "");
	for (int j = 0; j < n; j++) {
		LLVMValueRef at = LLVMBuildNSWAdd(b, i, LLVMBuildNSWMul(b, stride, LLVMConstInt(c->i64, (unsigned)j, 0), ""), "");
		LLVMBuildStore(b, at, vars[j][var->id]);
		/* a scalar the body reads before setting starts as the function's */
		for (int v = 0; v < k->n_vars; v++)
			if (set[v] && v != var->id && vars[j][v] != f->vars[v]) {
				LLVMTypeRef t = llvm_type(c, k->vars[v]->type);
				LLVMBuildStore(b, LLVMBuildLoad2(b, t, f->vars[v], ""), vars[j][v]);
			}
	}
	interleave(f, body, vars, n);
	LLVMValueRef next = LLVMBuildNSWMul(b, stride, LLVMConstInt(c->i64, (unsigned)n, 0), "");
	LLVMBuildStore(b, LLVMBuildNSWAdd(b, LLVMBuildLoad2(b, c->i64, slot, ""), next, ""), slot);
	llvm_mark_loop(f, LLVMBuildBr(b, head), false);
	LLVMPositionBuilderAtEnd(b, exit);
	free(set);
	free(slots);
}
