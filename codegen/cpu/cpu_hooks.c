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

/* ---- The work of one iteration of a parallel loop ----------------------
 *
 * One unit per statement run (a store, a set, one multiply-add of a tile);
 * a loop multiplies its body's work by its trip count, an if takes the
 * larger branch.  A trip count is exact where the bounds are constants or
 * depend on the kernel's sizes alone (computed when the kernel runs), an
 * upper bound where the loop runs over one tile of a range, `lo .. min(lo +
 * c, end)` (a GEMM's row and column tiles), and 1 otherwise.  The grain
 * (the fewest iterations a chunk runs) is ceil(CPU_PAR_GRAIN_WORK / the
 * work of an iteration), so a loop with less work in all runs on the
 * calling thread: handing a microsecond's work to another thread costs more
 * than it saves (the hand-off, and the data it reads and writes crossing
 * between the cores' caches).  This replaced an estimate that multiplied
 * only constant trip counts, took the largest of sibling loops and did not
 * look into ifs: im2col's copies (in an if per row) were estimated at a
 * thirtieth of their work and ran on one thread, while a GEMM's chunks,
 * however small, were always split (grain 1). */

static bool same_expr(const kir_expr *a, const kir_expr *b) {
	if (a == b) return true;
	if (!a || !b || a->kind != b->kind || a->type != b->type) return false;
	switch (a->kind) {
	case KIR_E_INT: return a->i == b->i;
	case KIR_E_FLOAT: return a->f == b->f;
	case KIR_E_VAR: return a->var == b->var;
	case KIR_E_SIZE:
	case KIR_E_LOCAL_ID: return a->size == b->size;
	case KIR_E_LOAD: return a->buf == b->buf && same_expr(a->a, b->a);
	default: return a->op == b->op && same_expr(a->a, b->a) && same_expr(a->b, b->b) && same_expr(a->c, b->c);
	}
}

/* Whether e reads nothing but the kernel's sizes and constants. */
static bool sizes_only(const kir_expr *e) {
	if (!e) return true;
	switch (e->kind) {
	case KIR_E_VAR:
	case KIR_E_LOAD:
	case KIR_E_LOCAL_ID: return false;
	default: return sizes_only(e->a) && sizes_only(e->b) && sizes_only(e->c);
	}
}

/* An upper bound of hi - lo from their form: hi = lo + c, or the min of
 * such; -1 when the form says nothing. */
static int64_t span_bound(const kir_expr *lo, const kir_expr *hi) {
	int64_t x, y;
	if (kir_e_const_index(lo, &x) && kir_e_const_index(hi, &y)) return y > x ? y - x : 0;
	if (hi->kind != KIR_E_BINARY) return -1;
	if (hi->op == KIR_MIN) {
		int64_t a = span_bound(lo, hi->a), b = span_bound(lo, hi->b);
		return a < 0 ? b : b < 0 ? a : a < b ? a : b;
	}
	if (hi->op == KIR_ADD) {
		if (kir_e_const_index(hi->b, &y) && same_expr(hi->a, lo)) return y > 0 ? y : 0;
		if (kir_e_const_index(hi->a, &y) && same_expr(hi->b, lo)) return y > 0 ? y : 0;
	}
	return -1;
}

static LLVMValueRef i64c(llvm_cx *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 0); }

static LLVMValueRef max_value(llvm_cx *c, LLVMValueRef a, LLVMValueRef b) {
	return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, a, b, ""), a, b, "");
}

/* Iterations of [lo, hi) by step (lo NULL: 0): exact, bounded, or 1
 * (above; *known then false). */
static LLVMValueRef trips_value(llvm_fn *f, const kir_expr *lo, const kir_expr *hi, int64_t step, bool *known) {
	llvm_cx *c = f->c;
	if (sizes_only(lo) && sizes_only(hi)) {
		LLVMValueRef l = lo ? llvm_expr(f, lo) : i64c(c, 0), h = llvm_expr(f, hi);
		if (l && h) {
			LLVMValueRef span = LLVMBuildAdd(c->b, LLVMBuildSub(c->b, h, l, ""), i64c(c, step - 1), "");
			return max_value(c, LLVMBuildSDiv(c->b, span, i64c(c, step), ""), i64c(c, 0));
		}
	}
	int64_t span = lo ? span_bound(lo, hi) : -1;
	if (span < 0) *known = false;
	return i64c(c, span < 0 ? 1 : (span + step - 1) / step);
}

static LLVMValueRef work_value(llvm_fn *f, const kir_stmt *s, bool *known) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef w = i64c(c, 0);
	for (; s; s = s->next) {
		LLVMValueRef t;
		switch (s->kind) {
		case KIR_S_FOR: t = LLVMBuildMul(b, trips_value(f, s->lo, s->hi, s->step, known), work_value(f, s->body, known), ""); break;
		case KIR_S_IF: t = max_value(c, work_value(f, s->body, known), work_value(f, s->orelse, known)); break;
		case KIR_S_FMA_TILE: {
			const kir_fma_tile *m = s->fma_tile;
			t = LLVMBuildMul(b, i64c(c, (int64_t)m->mr * m->nc), trips_value(f, m->klo, m->khi, 1, known), "");
			break;
		}
		case KIR_S_DOT4: {
			const kir_dot4 *m = s->dot4;
			t = LLVMBuildMul(b, i64c(c, (int64_t)m->mr * m->nc), trips_value(f, NULL, m->groups, 1, known), "");
			break;
		}
		case KIR_S_DOT2: {
			const kir_dot2 *m = s->dot2;
			t = LLVMBuildMul(b, i64c(c, (int64_t)m->mr * m->nv * 16), trips_value(f, NULL, m->kn, 2, known), "");
			break;
		}
		case KIR_S_TILE2: t = i64c(c, (int64_t)256 * s->tile2->mt * s->tile2->nt * s->tile2->kn / 2); break;
		default: t = i64c(c, 1); break;
		}
		w = LLVMBuildAdd(b, w, t, "");
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

	/* host->parallel_for(host->ctx, body, closure, n, grain) when n > 0,
	 * grain = ceil(CPU_PAR_GRAIN_WORK / work of an iteration).  Where a loop's
	 * trip count is unknown, a GEMM's or a reduction's generator, which
	 * marks its kernel contract, sized the chunks itself: grain 1. */
	bool known = true;
	LLVMValueRef work = max_value(c, work_value(f, s->body, &known), i64c(c, 1));
	LLVMValueRef grain = !known && k->contract ? i64c(c, 1)
		: LLVMBuildSDiv(b, LLVMBuildAdd(b, work, i64c(c, CPU_PAR_GRAIN_WORK - 1), ""), work, "grain");
	LLVMBasicBlockRef call_b = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "par");
	LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "after");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, n, LLVMConstInt(c->i64, 0, 0), ""), call_b, after);
	LLVMPositionBuilderAtEnd(b, call_b);
	LLVMTypeRef host_t = cpu_host_type(c);
	LLVMValueRef ctx = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, host_t, f->env, 0, ""), "ctx");
	LLVMValueRef pf = LLVMBuildLoad2(b, c->ptr, LLVMBuildStructGEP2(b, host_t, f->env, 1, ""), "parallel_for");
	LLVMValueRef args[5] = {ctx, body_fn, clo, n, grain};
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
