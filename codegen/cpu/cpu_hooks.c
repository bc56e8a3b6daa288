/* How kernel bodies meet the CPU host (include/tbc/abi.h's tbc_abi_host):
 * the hooks the shared LLVM emitter (codegen/llvm/llvm_kernel.h) calls.
 *
 * A kernel's first parameter is the host table.  The outermost parallel
 * loop is outlined into a function of (closure, begin, end) and called
 * through host->parallel_for, which splits [0, n) into chunks over the
 * host's threads; the loops inside run in the thread.  A failed check
 * calls tbc.fail, which reports the run's first failure through
 * host->error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cpu/cpu.h"

#define PAR_GRAIN_WORK 16384 /* elements of work a parallel chunk should hold at least */

/* Iterations of the loops inside s whose trip counts are constants. */
static int64_t inner_work(const kir_stmt *s) {
	int64_t w = 1;
	for (; s; s = s->next) {
		/* a byte dot-product tile (kir_dot4), bf16 tiles (kir_tile2) or
		 * a multiply-add tile (kir_fma_tile): a GEMM's, whose generator
		 * sized the chunks */
		if ((s->kind == KIR_S_DOT4 || s->kind == KIR_S_TILE2 || s->kind == KIR_S_FMA_TILE) && w < PAR_GRAIN_WORK)
			w = PAR_GRAIN_WORK;
		if (s->kind != KIR_S_FOR) continue;
		int64_t lo, hi, n = 1;
		if (kir_e_const_index(s->lo, &lo) && kir_e_const_index(s->hi, &hi) && hi > lo) n = (hi - lo + s->step - 1) / s->step;
		int64_t inner = inner_work(s->body);
		if (n > 0 && inner > 0 && n < INT64_MAX / inner) {
			int64_t t = n * inner;
			if (t > w) w = t;
		}
	}
	return w;
}

/* The closure of a parallel loop: host, buffers, sizes, the variables the
 * kernel has used before the loop (cap), lo, status.  A variable the body
 * uses first is set there before it is read: the loop's iterations are
 * independent, so no value flows into them through it.  (A GEMM's tiles are
 * hundreds of such variables, a sum and a stored value per element, in
 * each of its nests: copying them all in was most of an outlined body's
 * code before LLVM removed it again.) */
static LLVMTypeRef closure_type(llvm_fn *f, const bool *cap) {
	llvm_cx *c = f->c;
	const kir_kernel *k = f->k;
	int n = 1 + k->n_buffers + k->n_sizes + k->n_vars + 2;
	LLVMTypeRef *fields = calloc((size_t)n, sizeof *fields);
	if (!fields) return NULL;
	int j = 0;
	fields[j++] = c->ptr;
	for (int i = 0; i < k->n_buffers; i++) fields[j++] = c->buf_ptr;
	for (int i = 0; i < k->n_sizes; i++) fields[j++] = c->i64;
	for (int i = 0; i < k->n_vars; i++)
		if (cap[i]) fields[j++] = llvm_type(c, k->vars[i]->type);
	fields[j++] = c->i64;
	fields[j++] = c->buf_ptr; /* status */
	LLVMTypeRef t = LLVMStructTypeInContext(c->ctx, fields, (unsigned)j, 0);
	free(fields);
	return t;
}

LLVMTypeRef cpu_host_type(llvm_cx *c) {
	LLVMTypeRef fields[4] = {c->ptr, c->ptr, c->ptr, c->ptr};
	return LLVMStructTypeInContext(c->ctx, fields, 4, 0);
}

/* The outermost parallel loop s: its body outlined into a function of
 * (closure, begin, end) running iterations [begin, end), which the host's
 * parallel_for calls for chunks of [0, trip count). */
static void emit_parallel(llvm_fn *f, const kir_stmt *s) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	const kir_kernel *k = f->k;
	LLVMValueRef lo = llvm_expr(f, s->lo), hi = llvm_expr(f, s->hi);
	if (!lo || !hi) return;
	/* the variables the kernel's code so far has stored or read */
	bool *cap = calloc((size_t)k->n_vars + 1, sizeof *cap);
	for (int i = 0; cap && i < k->n_vars; i++) cap[i] = f->vars[i] && LLVMGetFirstUse(f->vars[i]);
	LLVMTypeRef ct = cap ? closure_type(f, cap) : NULL;
	if (!ct) {
		free(cap);
		llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		return;
	}
	/* Trip count; nothing to run when it is not positive. */
	LLVMValueRef step = LLVMConstInt(c->i64, (unsigned long long)s->step, 0);
	LLVMValueRef n = LLVMBuildSDiv(
		b, LLVMBuildAdd(b, LLVMBuildSub(b, hi, lo, ""), LLVMConstInt(c->i64, (unsigned long long)s->step - 1, 0), ""),
		step, "");
	/* The closure lives in the entry block's frame. */
	LLVMBasicBlockRef cur = LLVMGetInsertBlock(b);
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
	LLVMPositionBuilderBefore(b, LLVMGetFirstInstruction(entry));
	LLVMValueRef clo = LLVMBuildAlloca(b, ct, "closure");
	LLVMPositionBuilderAtEnd(b, cur);
	int j = 0;
	LLVMBuildStore(b, f->env, LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	for (int i = 0; i < k->n_buffers; i++) LLVMBuildStore(b, f->bufs[i], LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	for (int i = 0; i < k->n_sizes; i++) LLVMBuildStore(b, f->sizes[i], LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	for (int i = 0; i < k->n_vars; i++) {
		if (!cap[i]) continue;
		LLVMTypeRef t = llvm_type(c, k->vars[i]->type);
		LLVMBuildStore(b, LLVMBuildLoad2(b, t, f->vars[i], ""), LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	}
	LLVMBuildStore(b, lo, LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));
	LLVMBuildStore(b, f->status ? f->status : LLVMConstNull(c->buf_ptr), LLVMBuildStructGEP2(b, ct, clo, (unsigned)j++, ""));

	/* The outlined body. */
	char name[128];
	snprintf(name, sizeof name, "tbc.k%d.%s.par%d", f->index, k->name, f->n_outlined++);
	LLVMTypeRef body_params[3] = {c->ptr, c->i64, c->i64};
	LLVMValueRef body_fn = llvm_new_function(c, name, LLVMFunctionType(c->void_t, body_params, 3, 0));
	llvm_prefer_tiled_width(f, body_fn);
	llvm_fn g;
	if (llvm_fn_part(&g, f, body_fn)) {
		g.parallel_mapped = true;
		LLVMBasicBlockRef saved = LLVMGetInsertBlock(b);
		LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(c->ctx, body_fn, "entry"));
		llvm_var_slots(&g);
		LLVMValueRef cl = LLVMGetParam(body_fn, 0);
		j = 0;
		g.env = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), "host");
		for (int i = 0; i < k->n_buffers; i++)
			g.bufs[i] = LLVMBuildLoad2(b, c->buf_ptr, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), k->buffers[i]->name);
		for (int i = 0; i < k->n_sizes; i++)
			g.sizes[i] = LLVMBuildLoad2(b, c->i64, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), k->size_names[i]);
		for (int i = 0; i < k->n_vars; i++) {
			if (!cap[i]) continue;
			LLVMTypeRef t = llvm_type(c, k->vars[i]->type);
			LLVMBuildStore(b, LLVMBuildLoad2(b, t, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), ""), g.vars[i]);
		}
		LLVMValueRef glo = LLVMBuildLoad2(b, c->i64, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j++, ""), "lo");
		if (f->status) g.status = LLVMBuildLoad2(b, c->buf_ptr, LLVMBuildStructGEP2(b, ct, cl, (unsigned)j, ""), "status");
		j++;
		/* t in [begin, end): var = lo + t * step */
		LLVMValueRef tslot = LLVMBuildAlloca(b, c->i64, "t");
		LLVMValueRef begin = LLVMGetParam(body_fn, 1), end = LLVMGetParam(body_fn, 2);
		LLVMBuildStore(b, begin, tslot);
		LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, body_fn, "loop");
		LLVMBasicBlockRef bodyb = LLVMAppendBasicBlockInContext(c->ctx, body_fn, "body");
		LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c->ctx, body_fn, "exit");
		LLVMBuildBr(b, head);
		LLVMPositionBuilderAtEnd(b, head);
		LLVMValueRef t = LLVMBuildLoad2(b, c->i64, tslot, "");
		LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t, end, ""), bodyb, exit);
		LLVMPositionBuilderAtEnd(b, bodyb);
		LLVMBuildStore(b, LLVMBuildNSWAdd(b, glo, LLVMBuildNSWMul(b, t, step, ""), ""), g.vars[s->var->id]);
		g.in_parallel = !llvm_has_loop(s->body);
		llvm_stmts(&g, s->body);
		g.in_parallel = false;
		LLVMValueRef t2 = LLVMBuildLoad2(b, c->i64, tslot, "");
		LLVMBuildStore(b, LLVMBuildNSWAdd(b, t2, LLVMConstInt(c->i64, 1, 0), ""), tslot);
		LLVMValueRef br = LLVMBuildBr(b, head);
		llvm_mark_loop(&g, br, !llvm_has_loop(s->body));
		LLVMPositionBuilderAtEnd(b, exit);
		LLVMBuildRetVoid(b);
		LLVMPositionBuilderAtEnd(b, saved);
	}
	llvm_fn_free(&g);
	free(cap);
	f->n_outlined = g.n_outlined;

	/* host->parallel_for(host->ctx, body, closure, n, grain) when n > 0 */
	int64_t work = inner_work(s->body);
	int64_t grain = work >= PAR_GRAIN_WORK ? 1 : (PAR_GRAIN_WORK + work - 1) / work;
	/* GEMM and convolution kernels (the contracting ones) size their chunks
	 * themselves (row tiles x column blocks x K, about 16 of them): the
	 * estimate above sees only the K loop (the tile loops have run-time
	 * bounds) and would hand every chunk to one thread. */
	if (k->contract) grain = 1;
	LLVMBasicBlockRef call_b = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "par");
	LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "after");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, LLVMConstInt(c->i64, 0, 0), ""), call_b, after);
	LLVMPositionBuilderAtEnd(b, call_b);
	LLVMTypeRef host_t = cpu_host_type(c);
	LLVMValueRef ctx = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, host_t, f->env, 0, ""), "ctx");
	LLVMValueRef pf = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, host_t, f->env, 1, ""), "parallel_for");
	LLVMValueRef args[5] = {ctx, body_fn, clo, n, LLVMConstInt(c->i64, (unsigned long long)grain, 0)};
	LLVMTypeRef pf_params[5] = {c->ptr, c->ptr, c->ptr, c->i64, c->i64};
	LLVMBuildCall2(b, LLVMFunctionType(c->void_t, pf_params, 5, 0), pf, args, 5, "");
	LLVMBuildBr(b, after);
	LLVMPositionBuilderAtEnd(b, after);
}

/* void tbc.fail(host, i32 *status, message): the first failure of a run
 * (status 0 -> TBC_ERR_RUNTIME, atomically: parallel chunks may race)
 * reports its message through host->error; run() returns the status after
 * the kernel. */
static LLVMValueRef fail_fn(llvm_cx *c, LLVMTypeRef *out_ty) {
	LLVMTypeRef params[3] = {c->ptr, c->buf_ptr, c->ptr};
	LLVMTypeRef fty = LLVMFunctionType(c->void_t, params, 3, 0);
	*out_ty = fty;
	LLVMValueRef fn = LLVMGetNamedFunction(c->mod, "tbc.fail");
	if (fn) return fn;
	fn = LLVMAddFunction(c->mod, "tbc.fail", fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	const char *attrs[] = {"noinline", "cold", "nounwind"};
	for (int i = 0; i < 3; i++)
		LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
					LLVMCreateEnumAttribute(c->ctx, LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
	LLVMBuilderRef b = LLVMCreateBuilderInContext(c->ctx);
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, fn, "entry");
	LLVMBasicBlockRef report = LLVMAppendBasicBlockInContext(c->ctx, fn, "report");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, fn, "done");
	LLVMPositionBuilderAtEnd(b, entry);
	LLVMValueRef host = LLVMGetParam(fn, 0), status = LLVMGetParam(fn, 1), msg = LLVMGetParam(fn, 2);
	LLVMValueRef code = LLVMConstInt(c->i32, TBC_ERR_RUNTIME, 0);
	LLVMValueRef x = LLVMBuildAtomicCmpXchg(b, status, LLVMConstInt(c->i32, 0, 0), code, LLVMAtomicOrderingMonotonic,
						LLVMAtomicOrderingMonotonic, 0);
	LLVMBuildCondBr(b, LLVMBuildExtractValue(b, x, 1, ""), report, done);
	LLVMPositionBuilderAtEnd(b, report);
	LLVMTypeRef host_t = cpu_host_type(c);
	LLVMValueRef ctx = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, host_t, host, 0, ""), "ctx");
	LLVMValueRef err = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, host_t, host, 3, ""), "error");
	LLVMTypeRef eparams[3] = {c->ptr, c->i32, c->ptr};
	LLVMValueRef args[3] = {ctx, code, msg};
	LLVMBuildCall2(b, LLVMFunctionType(c->i32, eparams, 3, 0), err, args, 3, "");
	LLVMBuildBr(b, done);
	LLVMPositionBuilderAtEnd(b, done);
	LLVMBuildRetVoid(b);
	LLVMDisposeBuilder(b);
	return fn;
}

/* A failed check: tbc.fail(host, status, message). */
static void report_error(llvm_fn *f, const kir_stmt *check) {
	llvm_cx *c = f->c;
	LLVMTypeRef fty;
	LLVMValueRef fn = fail_fn(c, &fty);
	LLVMValueRef args[3] = {f->env, f->status, llvm_message(c, check->message)};
	LLVMBuildCall2(c->b, fty, fn, args, 3, "");
}


const llvm_hooks cpu_llvm_hooks = {
	.name = "cpu",
	.buffer_addrspace = 0,
	.libm = true,
	.env_param = true,
	.parallel_loop = emit_parallel,
	.report_error = report_error,
	.dot4 = cpu_emit_dot4,
	.tile2 = cpu_emit_tile2,
	.fma_tile = true,
	.row_stores = true,
};
