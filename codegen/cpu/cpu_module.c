/* The program-level parts of a compiled module (include/tbc/abi.h): run()
 * places every buffer (inputs, outputs, weights + offset, arena + offset) and
 * calls the kernels in order; arena_bytes() computes the arena size from the
 * symbols; init() computes the load-time values (codegen/lower/load_time.c)
 * that run reads and no longer computes; the descriptor is constant data
 * naming them.  The arena layout is
 * kir_program_layout's, computed here in IR for symbolic sizes.
 *
 * Determinism: every symbol name comes from positions in the program, never
 * from pointers or hash order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cpu/cpu.h"
#include "tbc/abi.h"
#include "tbc/abi_hash.h"

static int sym_index(const kir_program *p, const char *name) {
	for (int s = 0; s < p->n_syms; s++)
		if (!strcmp(p->sym_names[s], name)) return s;
	return -1;
}

/* Bytes of b from the symbol values in syms (i64 values). */
static LLVMValueRef buf_bytes(llvm_cx *c, const kir_program *p, const kir_pbuf *b, LLVMValueRef *syms) {
	LLVMBuilderRef B = c->b;
	LLVMValueRef n = LLVMConstInt(c->i64, tbc_dtype_size(b->type.dtype), 0);
	for (int d = 0; d < b->type.rank; d++) {
		tbc_dim dim = b->type.dims[d];
		LLVMValueRef x = dim.sym ? syms[sym_index(p, dim.sym)] : LLVMConstInt(c->i64, (unsigned long long)dim.size, 0);
		n = LLVMBuildMul(B, n, x, "");
	}
	return n;
}

static LLVMValueRef align64(llvm_cx *c, LLVMValueRef x) {
	LLVMBuilderRef B = c->b;
	LLVMValueRef a = LLVMBuildAdd(B, x, LLVMConstInt(c->i64, KIR_ALIGN - 1, 0), "");
	return LLVMBuildAnd(B, a, LLVMConstInt(c->i64, ~(unsigned long long)(KIR_ALIGN - 1), 0), "");
}

/* Loads the symbols from the syms array argument. */
static LLVMValueRef *load_syms(llvm_cx *c, const kir_program *p, LLVMValueRef arr) {
	LLVMValueRef *syms = calloc((size_t)p->n_syms + 1, sizeof *syms);
	if (!syms) return NULL;
	for (int s = 0; s < p->n_syms; s++) {
		LLVMValueRef i = LLVMConstInt(c->i64, (unsigned long long)s, 0);
		LLVMValueRef ptr = LLVMBuildInBoundsGEP2(c->b, c->i64, arr, &i, 1, "");
		syms[s] = LLVMBuildLoad2(c->b, c->i64, ptr, p->sym_names[s]);
	}
	return syms;
}

/* Where each arena part starts and the product of its symbols
 * (kir_program_layout); returns the end of the last part.  base and scale
 * hold p->n_parts values. */
static LLVMValueRef part_bases(llvm_cx *c, const kir_program *p, LLVMValueRef *syms, LLVMValueRef *base,
			       LLVMValueRef *scale) {
	LLVMValueRef end = LLVMConstInt(c->i64, 0, 0);
	for (int j = 0; j < p->n_parts; j++) {
		const kir_part *q = &p->parts[j];
		LLVMValueRef prod = LLVMConstInt(c->i64, 1, 0);
		for (int i = 0; i < q->n_syms; i++) prod = LLVMBuildMul(c->b, prod, syms[q->syms[i]], "");
		base[j] = end;
		scale[j] = prod;
		end = LLVMBuildAdd(c->b, end, LLVMBuildMul(c->b, LLVMConstInt(c->i64, (unsigned long long)q->bytes, 0), prod, ""),
				   "");
	}
	return end;
}

/* uint64_t arena_bytes(const int64_t *syms) */
static LLVMValueRef emit_arena_bytes(llvm_cx *c, const kir_program *p, const char *name) {
	LLVMTypeRef fty = LLVMFunctionType(c->i64, &c->ptr, 1, 0);
	LLVMValueRef fn = LLVMAddFunction(c->mod, name, fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
	LLVMValueRef *syms = load_syms(c, p, LLVMGetParam(fn, 0));
	LLVMValueRef *base = calloc((size_t)p->n_parts + 1, sizeof *base);
	LLVMValueRef *scale = calloc((size_t)p->n_parts + 1, sizeof *scale);
	if (!syms || !base || !scale) {
		free(syms);
		free(base);
		free(scale);
		return NULL;
	}
	LLVMValueRef end = part_bases(c, p, syms, base, scale);
	for (int i = 0; i < p->n_bufs; i++) {
		const kir_pbuf *b = p->bufs[i];
		if (b->role != KIR_BUF_TEMP || b->alias_of >= 0 || b->part >= 0 || b->dynamic) continue;
		end = LLVMBuildAdd(c->b, end, align64(c, buf_bytes(c, p, b, syms)), "");
	}
	LLVMBuildRet(c->b, end);
	free(syms);
	free(base);
	free(scale);
	return fn;
}

typedef struct run_cx {
	llvm_cx *c;
	const kir_program *p;
	LLVMValueRef fn, host, outputs, syms_arg;
	LLVMValueRef *syms, *ptrs;
	/* Dynamic roots: where their memory and its size in bytes are kept (entry
	 * allocas), since a region may need more of it than a use before. */
	LLVMValueRef *slot, *slot_bytes;
} run_cx;

/* Dynamic buffer i (a root) at this point: memory from host->alloc when it
 * has none yet or its size, from the symbols as they are now, grew (a
 * region computes sizes again); an output's pointer goes to outputs[] for
 * the caller.  Out of memory fails the run. */
static void run_alloc(run_cx *r, int i) {
	llvm_cx *c = r->c;
	LLVMBuilderRef B = c->b;
	const kir_pbuf *b = r->p->bufs[i];
	/* At least one byte, so an empty tensor gets a pointer too. */
	LLVMValueRef bytes = buf_bytes(c, r->p, b, r->syms);
	LLVMValueRef is0 = LLVMBuildICmp(B, LLVMIntEQ, bytes, LLVMConstInt(c->i64, 0, 0), "");
	bytes = LLVMBuildSelect(B, is0, LLVMConstInt(c->i64, 1, 0), bytes, "");
	LLVMValueRef have = LLVMBuildLoad2(B, c->i64, r->slot_bytes[i], "");
	LLVMBasicBlockRef grow = LLVMAppendBasicBlockInContext(c->ctx, r->fn, "grow");
	LLVMBasicBlockRef placed = LLVMAppendBasicBlockInContext(c->ctx, r->fn, "placed");
	LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSGT, bytes, have, ""), grow, placed);
	LLVMPositionBuilderAtEnd(B, grow);
	if (b->keep) { /* at least twice what it had: rows added one at a time cost O(1) each */
		LLVMValueRef twice = LLVMBuildMul(B, have, LLVMConstInt(c->i64, 2, 0), "");
		bytes = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, twice, bytes, ""), twice, bytes, "");
	}
	LLVMTypeRef host_t = cpu_host_type(c);
	LLVMValueRef ctx = LLVMBuildLoad2(B, c->ptr, LLVMBuildStructGEP2(B, host_t, r->host, 0, ""), "ctx");
	LLVMValueRef alloc = LLVMBuildLoad2(B, c->ptr, LLVMBuildStructGEP2(B, host_t, r->host, 2, ""), "alloc");
	LLVMTypeRef aparams[2] = {c->ptr, c->i64};
	LLVMValueRef args[2] = {ctx, bytes};
	LLVMValueRef mem = LLVMBuildCall2(B, LLVMFunctionType(c->ptr, aparams, 2, 0), alloc, args, 2, b->name);
	LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(c->ctx, r->fn, "no_memory");
	LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(c->ctx, r->fn, "allocated");
	LLVMBuildCondBr(B, LLVMBuildIsNull(B, mem, ""), fail, next);
	LLVMPositionBuilderAtEnd(B, fail);
	char text[160];
	snprintf(text, sizeof text, "out of memory for %s (its size is known only while running)", b->name);
	LLVMValueRef err = LLVMBuildLoad2(B, c->ptr, LLVMBuildStructGEP2(B, host_t, r->host, 3, ""), "error");
	LLVMTypeRef eparams[3] = {c->ptr, c->i32, c->ptr};
	LLVMValueRef eargs[3] = {ctx, LLVMConstInt(c->i32, TBC_ERR_NO_MEMORY, 0), llvm_message(c, text)};
	LLVMBuildCall2(B, LLVMFunctionType(c->i32, eparams, 3, 0), err, eargs, 3, "");
	LLVMBuildRet(B, LLVMConstInt(c->i32, TBC_ERR_NO_MEMORY, 0));
	LLVMPositionBuilderAtEnd(B, next);
	if (b->role == KIR_BUF_OUTPUT) {
		LLVMValueRef idx = LLVMConstInt(c->i64, (unsigned long long)b->io_index, 0);
		LLVMBuildStore(B, mem, LLVMBuildInBoundsGEP2(B, c->ptr, r->outputs, &idx, 1, ""));
	}
	if (b->keep) /* what it held (nothing the first time: have is 0) */
		LLVMBuildMemCpy(B, mem, 1, LLVMBuildLoad2(B, c->ptr, r->slot[i], ""), 1, have);
	LLVMBuildStore(B, mem, r->slot[i]);
	LLVMBuildStore(B, bytes, r->slot_bytes[i]);
	LLVMBuildBr(B, placed);
	LLVMPositionBuilderAtEnd(B, placed);
	r->ptrs[i] = LLVMBuildLoad2(B, c->ptr, r->slot[i], b->name);
}

/* After a kernel computed symbols or at the start of a region's block: the
 * computed symbols as they are in memory now, and every dynamic buffer
 * checked again at its next use. */
static void run_refresh(run_cx *r) {
	llvm_cx *c = r->c;
	const kir_program *p = r->p;
	for (int s = 0; s < p->n_syms; s++) {
		if (!p->sym_computed[s]) continue;
		LLVMValueRef i = LLVMConstInt(c->i64, (unsigned long long)s, 0);
		r->syms[s] = LLVMBuildLoad2(c->b, c->i64, LLVMBuildInBoundsGEP2(c->b, c->i64, r->syms_arg, &i, 1, ""),
					    p->sym_names[s]);
	}
	for (int i = 0; i < p->n_bufs; i++)
		if (p->bufs[i]->dynamic && p->bufs[i]->alias_of < 0) r->ptrs[i] = NULL;
}

/* The blocks of the regions open while emitting run(). */
typedef struct run_frame {
	LLVMBasicBlockRef head, exit; /* LOOP: the test, after the loop; IF: else, join */
} run_frame;

/* Emits control marker la (codegen/lower/lower.h's kir_ctl semantics). */
static void run_control(run_cx *r, const kir_launch *la, run_frame *stack, int *depth) {
	llvm_cx *c = r->c;
	LLVMBuilderRef B = c->b;
	const int *cs = la->ctl_sym;
	LLVMValueRef zero = LLVMConstInt(c->i64, 0, 0);
	LLVMValueRef ci = LLVMConstInt(c->i64, (unsigned long long)(cs[0] < 0 ? 0 : cs[0]), 0);
	LLVMValueRef counter = LLVMBuildInBoundsGEP2(B, c->i64, r->syms_arg, &ci, 1, "");
	switch (la->ctl) {
	case KIR_CTL_IF: {
		run_frame f = {LLVMAppendBasicBlockInContext(c->ctx, r->fn, "else"),
			       LLVMAppendBasicBlockInContext(c->ctx, r->fn, "endif")};
		LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(c->ctx, r->fn, "then");
		LLVMValueRef cond = LLVMBuildLoad2(B, c->i64, counter, "");
		LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, cond, zero, ""), then, f.head);
		stack[(*depth)++] = f;
		LLVMPositionBuilderAtEnd(B, then);
		break;
	}
	case KIR_CTL_ELSE:
		LLVMBuildBr(B, stack[*depth - 1].exit);
		LLVMPositionBuilderAtEnd(B, stack[*depth - 1].head);
		break;
	case KIR_CTL_END_IF:
		LLVMBuildBr(B, stack[*depth - 1].exit);
		LLVMPositionBuilderAtEnd(B, stack[--*depth].exit);
		break;
	case KIR_CTL_LOOP: {
		run_frame f = {LLVMAppendBasicBlockInContext(c->ctx, r->fn, "loop"),
			       LLVMAppendBasicBlockInContext(c->ctx, r->fn, "endloop")};
		LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, r->fn, "body");
		LLVMBuildStore(B, zero, counter);
		LLVMBuildBr(B, f.head);
		LLVMPositionBuilderAtEnd(B, f.head);
		run_refresh(r);
		LLVMValueRef more = LLVMConstInt(c->i1, 1, 0);
		if (cs[1] >= 0) more = LLVMBuildAnd(B, more, LLVMBuildICmp(B, LLVMIntSLT, r->syms[cs[0]], r->syms[cs[1]], ""), "");
		if (cs[2] >= 0) more = LLVMBuildAnd(B, more, LLVMBuildICmp(B, LLVMIntNE, r->syms[cs[2]], zero, ""), "");
		LLVMBuildCondBr(B, more, body, f.exit);
		stack[(*depth)++] = f;
		LLVMPositionBuilderAtEnd(B, body);
		break;
	}
	case KIR_CTL_END_LOOP: {
		LLVMValueRef i = LLVMBuildLoad2(B, c->i64, counter, "");
		LLVMBuildStore(B, LLVMBuildAdd(B, i, LLVMConstInt(c->i64, 1, 0), ""), counter);
		LLVMBuildBr(B, stack[*depth - 1].head);
		LLVMPositionBuilderAtEnd(B, stack[--*depth].exit);
		break;
	}
	case KIR_CTL_KERNEL: return;
	}
	run_refresh(r);
}

/* The pointer of buffer i at this point of run (allocating a dynamic root). */
static LLVMValueRef run_ptr(run_cx *r, int i) {
	const kir_pbuf *b = r->p->bufs[i];
	int root = b->alias_of >= 0 ? b->alias_of : i;
	if (!r->ptrs[root]) run_alloc(r, root);
	return r->ptrs[root];
}

/* After a kernel that can fail: return its status from fn when it is not 0. */
static void return_if_failed(llvm_cx *c, LLVMValueRef fn, LLVMValueRef status) {
	LLVMBuilderRef B = c->b;
	LLVMValueRef st = LLVMBuildLoad2(B, c->i32, status, "");
	LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(c->ctx, fn, "failed");
	LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(c->ctx, fn, "next");
	LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, st, LLVMConstInt(c->i32, 0, 0), ""), fail, next);
	LLVMPositionBuilderAtEnd(B, fail);
	LLVMBuildRet(B, st);
	LLVMPositionBuilderAtEnd(B, next);
}

/* int32_t run(host, syms, inputs, outputs, arena, weights) */
static LLVMValueRef emit_run(llvm_cx *c, const kir_program *p, LLVMValueRef *kernels, const char *name) {
	LLVMTypeRef params[6] = {c->ptr, c->ptr, c->ptr, c->ptr, c->ptr, c->ptr};
	LLVMTypeRef fty = LLVMFunctionType(c->i32, params, 6, 0);
	LLVMValueRef fn = LLVMAddFunction(c->mod, name, fty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	LLVMBuilderRef B = c->b;
	LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
	LLVMValueRef host = LLVMGetParam(fn, 0), inputs = LLVMGetParam(fn, 2), outputs = LLVMGetParam(fn, 3);
	LLVMValueRef arena = LLVMGetParam(fn, 4), weights = LLVMGetParam(fn, 5);
	LLVMValueRef *syms = load_syms(c, p, LLVMGetParam(fn, 1));
	LLVMValueRef *ptrs = calloc((size_t)p->n_bufs + 1, sizeof *ptrs);
	LLVMValueRef *base = calloc((size_t)p->n_parts + 1, sizeof *base);
	LLVMValueRef *scale = calloc((size_t)p->n_parts + 1, sizeof *scale);
	LLVMValueRef *slot = calloc((size_t)p->n_bufs * 2 + 1, sizeof *slot);
	run_frame *stack = calloc((size_t)p->n_launches + 1, sizeof *stack);
	int depth = 0;
	if (!syms || !ptrs || !base || !scale || !slot || !stack) {
		free(syms);
		free(ptrs);
		free(base);
		free(scale);
		free(slot);
		free(stack);
		llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		return NULL;
	}
	run_cx r = {c, p, fn, host, outputs, LLVMGetParam(fn, 1), syms, ptrs, slot, slot + p->n_bufs};
	for (int i = 0; i < p->n_bufs; i++) {
		if (!p->bufs[i]->dynamic || p->bufs[i]->alias_of >= 0) continue;
		r.slot[i] = LLVMBuildAlloca(B, c->ptr, "");
		r.slot_bytes[i] = LLVMBuildAlloca(B, c->i64, "");
		LLVMBuildStore(B, LLVMConstNull(c->ptr), r.slot[i]);
		LLVMBuildStore(B, LLVMConstInt(c->i64, 0, 0), r.slot_bytes[i]);
	}
	LLVMValueRef dyn = part_bases(c, p, syms, base, scale);
	for (int i = 0; i < p->n_bufs; i++) { /* aliases and dynamic buffers: at their first use */
		const kir_pbuf *b = p->bufs[i];
		if (b->alias_of >= 0 || b->dynamic) continue;
		LLVMValueRef idx;
		switch (b->role) {
		case KIR_BUF_INPUT:
		case KIR_BUF_OUTPUT:
			idx = LLVMConstInt(c->i64, (unsigned long long)b->io_index, 0);
			ptrs[i] = LLVMBuildLoad2(B, c->ptr,
						 LLVMBuildInBoundsGEP2(B, c->ptr, b->role == KIR_BUF_INPUT ? inputs : outputs, &idx, 1, ""),
						 b->name);
			break;
		case KIR_BUF_CONST:
			idx = LLVMConstInt(c->i64, (unsigned long long)b->offset, 0);
			ptrs[i] = LLVMBuildInBoundsGEP2(B, c->i8, weights, &idx, 1, b->name);
			break;
		case KIR_BUF_SYMS: ptrs[i] = r.syms_arg; break;
		case KIR_BUF_TEMP:
			if (b->part >= 0) {
				idx = LLVMBuildAdd(B, base[b->part],
						   LLVMBuildMul(B, LLVMConstInt(c->i64, (unsigned long long)b->part_offset, 0),
								scale[b->part], ""),
						   "");
			} else {
				idx = dyn;
				dyn = LLVMBuildAdd(B, dyn, align64(c, buf_bytes(c, p, b, syms)), "");
			}
			ptrs[i] = LLVMBuildInBoundsGEP2(B, c->i8, arena, &idx, 1, b->name);
			break;
		}
	}
	/* The run's error status (0: fine), set by a kernel's failed check. */
	LLVMValueRef status = LLVMBuildAlloca(B, c->i32, "status");
	LLVMBuildStore(B, LLVMConstInt(c->i32, 0, 0), status);
	for (int l = 0; l < p->n_launches; l++) {
		const kir_launch *la = &p->launches[l];
		const kir_kernel *k = la->kernel;
		if (la->ctl != KIR_CTL_KERNEL) {
			run_control(&r, la, stack, &depth);
			continue;
		}
		if (la->init) continue; /* init computed it when the session began */
		bool can_fail = kir_kernel_can_fail(k);
		int n = 1 + k->n_buffers + k->n_sizes + (can_fail ? 1 : 0);
		LLVMValueRef *args = calloc((size_t)n, sizeof *args);
		if (!args) break;
		args[0] = host;
		bool computes_syms = false;
		for (int a = 0; a < k->n_buffers; a++) {
			args[1 + a] = run_ptr(&r, la->args[a]);
			computes_syms |= la->args[a] == p->syms_buf;
		}
		for (int s = 0; s < k->n_sizes; s++) args[1 + k->n_buffers + s] = syms[la->syms[s]];
		if (can_fail) args[n - 1] = status;
		LLVMBuildCall2(B, LLVMGlobalGetValueType(kernels[l]), kernels[l], args, (unsigned)n, "");
		free(args);
		if (can_fail) return_if_failed(c, fn, status); /* stop at the first failed kernel */
		if (computes_syms) run_refresh(&r); /* the computed symbols, as the kernel left them */
	}
	for (int i = 0; i < p->n_outputs; i++) run_ptr(&r, p->outputs[i]); /* an empty output no launch wrote */
	LLVMBuildRet(B, LLVMConstInt(c->i32, 0, 0));
	free(slot);
	free(stack);
	free(syms);
	free(ptrs);
	free(base);
	free(scale);
	return fn;
}

/* int32_t init(host, arena, weights): the load-time launches (kir_launch.init)
 * in order, storing into the arena's bytes [init_begin, init_end) only.
 * Their buffers are weights and part-0 temporaries: no symbol, input or
 * output.  NULL when the program has none. */
static LLVMValueRef emit_init(llvm_cx *c, const kir_program *p, LLVMValueRef *kernels, const char *name) {
	bool any = false;
	for (int l = 0; l < p->n_launches; l++) any |= p->launches[l].init;
	if (!any) return NULL;
	LLVMTypeRef params[3] = {c->ptr, c->ptr, c->ptr};
	LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->i32, params, 3, 0));
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	LLVMBuilderRef B = c->b;
	LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
	LLVMValueRef host = LLVMGetParam(fn, 0), arena = LLVMGetParam(fn, 1), weights = LLVMGetParam(fn, 2);
	LLVMValueRef status = LLVMBuildAlloca(B, c->i32, "status");
	LLVMBuildStore(B, LLVMConstInt(c->i32, 0, 0), status);
	for (int l = 0; l < p->n_launches; l++) {
		const kir_launch *la = &p->launches[l];
		if (!la->init) continue;
		const kir_kernel *k = la->kernel;
		bool can_fail = kir_kernel_can_fail(k);
		int n = 1 + k->n_buffers + (can_fail ? 1 : 0);
		LLVMValueRef *args = calloc((size_t)n, sizeof *args);
		if (!args) {
			llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
			return NULL;
		}
		args[0] = host;
		for (int a = 0; a < k->n_buffers; a++) {
			const kir_pbuf *b = p->bufs[la->args[a]];
			LLVMValueRef idx = LLVMConstInt(c->i64, (unsigned long long)b->offset, 0);
			args[1 + a] = LLVMBuildInBoundsGEP2(B, c->i8, b->role == KIR_BUF_CONST ? weights : arena, &idx, 1, b->name);
		}
		if (can_fail) args[n - 1] = status;
		LLVMBuildCall2(B, LLVMGlobalGetValueType(kernels[l]), kernels[l], args, (unsigned)n, "");
		free(args);
		if (can_fail) return_if_failed(c, fn, status);
	}
	LLVMBuildRet(B, LLVMConstInt(c->i32, 0, 0));
	return fn;
}

/* ---- Constant data ---------------------------------------------------------*/
typedef struct data_cx {
	llvm_cx *c;
	const char *prefix;
	int n_globals;
} data_cx;

static LLVMValueRef global_const(data_cx *dc, LLVMValueRef init, const char *what) {
	char name[160];
	snprintf(name, sizeof name, "%s.%s.%d", dc->prefix, what, dc->n_globals++);
	LLVMValueRef g = LLVMAddGlobal(dc->c->mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(g, init);
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
	return g;
}

static LLVMValueRef cstring(data_cx *dc, const char *s) {
	if (!s) return LLVMConstNull(dc->c->ptr);
	return global_const(dc, LLVMConstStringInContext2(dc->c->ctx, s, strlen(s), 0), "str");
}

static LLVMValueRef tensor_array(data_cx *dc, const kir_program *p, const int *bufs, int n, LLVMTypeRef tensor_t) {
	llvm_cx *c = dc->c;
	if (n == 0) return LLVMConstNull(c->ptr);
	LLVMValueRef *elems = calloc((size_t)n, sizeof *elems);
	if (!elems) return NULL;
	for (int i = 0; i < n; i++) {
		const kir_pbuf *b = p->bufs[bufs[i]];
		int r = b->type.rank;
		LLVMValueRef dims[TBC_MAX_RANK], sy[TBC_MAX_RANK];
		for (int d = 0; d < r; d++) {
			tbc_dim dim = b->type.dims[d];
			dims[d] = LLVMConstInt(c->i64, dim.sym ? (unsigned long long)-1 : (unsigned long long)dim.size, 1);
			sy[d] = LLVMConstInt(c->i32, dim.sym ? (unsigned long long)sym_index(p, dim.sym) : (unsigned long long)-1, 1);
		}
		LLVMValueRef fields[5] = {
			cstring(dc, b->onnx_name ? b->onnx_name : b->name),
			LLVMConstInt(c->i32, (unsigned long long)b->type.dtype, 0),
			LLVMConstInt(c->i32, (unsigned long long)r, 0),
			r ? global_const(dc, LLVMConstArray2(c->i64, dims, (uint64_t)r), "dims") : LLVMConstNull(c->ptr),
			r ? global_const(dc, LLVMConstArray2(c->i32, sy, (uint64_t)r), "syms") : LLVMConstNull(c->ptr),
		};
		elems[i] = LLVMConstNamedStruct(tensor_t, fields, 5);
	}
	LLVMValueRef arr = global_const(dc, LLVMConstArray2(tensor_t, elems, (uint64_t)n), "tensors");
	free(elems);
	return arr;
}

/* The descriptor function: const tbc_abi_model *name(void). */
static void emit_descriptor_fn(llvm_cx *c, const char *name, LLVMValueRef model) {
	LLVMTypeRef fty = LLVMFunctionType(c->ptr, NULL, 0, 0);
	LLVMValueRef fn = LLVMAddFunction(c->mod, name, fty);
	LLVMSetLinkage(fn, LLVMExternalLinkage);
	LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
	LLVMBuildRet(c->b, model);
}

/* FNV-1a 64 of a string. */
static uint64_t text_hash(const char *t) {
	uint64_t h = 1469598103934665603u;
	for (; *t; t++) h = (h ^ (unsigned char)*t) * 1099511628211u;
	return h;
}

void cpu_kernel_plan_free(cpu_kernel_plan *plan) {
	free(plan->same_as);
	free(plan->module);
	memset(plan, 0, sizeof *plan);
}

/* Launches whose kernels print the same canonical text (kir_print_canonical:
 * the same code over the buffers they are given, as the convolutions of one
 * shape in a DenseNet block) share one function, which LLVM then compiles
 * once.  The distinct kernels are spread over the modules by the length of
 * that text (a measure of their LLVM work), the longest first, each to the
 * module with the least so far; the split depends on the program alone. */
bool cpu_plan_kernels(const kir_program *p, cpu_kernel_plan *plan) {
	memset(plan, 0, sizeof *plan);
	int n = p->n_launches;
	char **texts = calloc((size_t)n + 1, sizeof *texts);
	uint64_t *hashes = calloc((size_t)n + 1, sizeof *hashes);
	size_t *cost = calloc((size_t)n + 1, sizeof *cost);
	int *order = calloc((size_t)n + 1, sizeof *order);
	plan->same_as = calloc((size_t)n + 1, sizeof *plan->same_as);
	plan->module = calloc((size_t)n + 1, sizeof *plan->module);
	bool ok = texts && hashes && cost && order && plan->same_as && plan->module;
	int n_distinct = 0;
	size_t total = 0;
	for (int l = 0; ok && l < n; l++) {
		plan->same_as[l] = -1;
		plan->module[l] = -1;
		const kir_kernel *k = p->launches[l].kernel;
		if (!k) continue;
		if (!(texts[l] = kir_print_canonical(k))) {
			ok = false;
			break;
		}
		hashes[l] = text_hash(texts[l]);
		for (int e = 0; e < l && plan->same_as[l] < 0; e++)
			if (texts[e] && plan->same_as[e] < 0 && hashes[e] == hashes[l] && !strcmp(texts[e], texts[l]))
				plan->same_as[l] = e;
		if (plan->same_as[l] >= 0) continue;
		cost[l] = strlen(texts[l]);
		total += cost[l];
		order[n_distinct++] = l;
	}
	if (ok && total >= CPU_MODULE_MIN_COST) {
		size_t m = total / CPU_MODULE_MIN_COST;
		plan->n_modules = (int)(m < CPU_MAX_KERNEL_MODULES ? m : CPU_MAX_KERNEL_MODULES);
		if (plan->n_modules > n_distinct) plan->n_modules = n_distinct;
		/* longest first (insertion sort: stable, so ties keep launch order) */
		for (int i = 1; i < n_distinct; i++)
			for (int j = i; j > 0 && cost[order[j]] > cost[order[j - 1]]; j--) {
				int t = order[j];
				order[j] = order[j - 1];
				order[j - 1] = t;
			}
		size_t load[CPU_MAX_KERNEL_MODULES] = {0};
		for (int i = 0; i < n_distinct; i++) {
			int best = 0;
			for (int q = 1; q < plan->n_modules; q++)
				if (load[q] < load[best]) best = q;
			plan->module[order[i]] = best;
			load[best] += cost[order[i]];
		}
	}
	for (int l = 0; texts && l < n; l++) free(texts[l]);
	free(texts);
	free(hashes);
	free(cost);
	free(order);
	if (!ok) cpu_kernel_plan_free(plan);
	return ok;
}

/* The name of launch l's kernel in a kernel module (external there and
 * hidden, so that no two artifacts' kernels meet in a program). */
static void module_kernel_name(char *name, size_t size, const char *prefix, int l, const kir_kernel *k) {
	snprintf(name, size, "%s.k%d.%s", prefix, l, k->name);
}

bool cpu_emit_kernel_module(llvm_cx *c, const cpu_kernel_plan *plan, int module, const kir_program *p,
			    const char *prefix) {
	for (int l = 0; l < p->n_launches && !c->failed; l++) {
		const kir_kernel *k = p->launches[l].kernel;
		if (!k || plan->same_as[l] >= 0 || plan->module[l] != module) continue;
		LLVMValueRef fn = llvm_emit_kernel(c, k, l);
		if (!fn) break;
		char name[200];
		module_kernel_name(name, sizeof name, prefix, l, k);
		LLVMSetValueName2(fn, name, strlen(name));
		LLVMSetLinkage(fn, LLVMExternalLinkage);
		LLVMSetVisibility(fn, LLVMHiddenVisibility);
	}
	return !c->failed;
}

/* Every launch's kernel as an LLVM function of c->mod: those plan puts in
 * the host module emitted here, the others declared (cpu_emit_kernel_module
 * defines them).  False when emitting failed (the message in c). */
static bool emit_kernels(llvm_cx *c, const cpu_kernel_plan *plan, const kir_program *p, const char *prefix,
			 LLVMValueRef *kernels) {
	for (int l = 0; l < p->n_launches && !c->failed; l++) {
		const kir_kernel *k = p->launches[l].kernel;
		if (!k) continue;
		if (plan->same_as[l] >= 0) {
			kernels[l] = kernels[plan->same_as[l]];
		} else if (plan->module[l] < 0) {
			kernels[l] = llvm_emit_kernel(c, k, l);
		} else {
			char name[200];
			module_kernel_name(name, sizeof name, prefix, l, k);
			LLVMTypeRef t = llvm_kernel_type(c, k);
			if (!t) return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
			kernels[l] = LLVMAddFunction(c->mod, name, t);
			LLVMSetVisibility(kernels[l], LLVMHiddenVisibility);
		}
	}
	return !c->failed;
}

/* A large constant (the weights, the device code) at align: with blobs,
 * declared here (hidden, external) and added to blobs for the data object,
 * its bytes data or what fill writes (cpu_data_blob); else a private global
 * of c->mod holding data. */
static LLVMValueRef big_constant(llvm_cx *c, const char *name, const void *data, void (*fill)(void *, void *),
				 void *fill_ctx, size_t size, size_t align, cpu_data_blob *blobs, int *n_blobs) {
	LLVMValueRef g;
	if (blobs) {
		g = LLVMAddGlobal(c->mod, LLVMArrayType2(c->i8, size), name);
		LLVMSetVisibility(g, LLVMHiddenVisibility);
		blobs[(*n_blobs)++] = (cpu_data_blob){
			.symbol = name, .data = data, .fill = fill, .fill_ctx = fill_ctx, .size = size, .align = align};
	} else {
		LLVMValueRef init = LLVMConstStringInContext2(c->ctx, data, size, 1);
		g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
		LLVMSetInitializer(g, init);
		LLVMSetLinkage(g, LLVMPrivateLinkage);
	}
	LLVMSetGlobalConstant(g, 1);
	LLVMSetAlignment(g, (unsigned)align);
	return g;
}

static void fill_weights(void *program, void *dst) {
	kir_program_weights(program, dst);
}

bool cpu_emit_program(llvm_cx *c, const cpu_kernel_plan *plan, const kir_program *p, const tbc_emit_info *info,
		      const char *triple, const char *features, void **data_obj, size_t *data_obj_size) {
	char name[160];
	LLVMValueRef run = LLVMConstNull(c->ptr), arena_bytes = LLVMConstNull(c->ptr), init = LLVMConstNull(c->ptr);
	uint64_t init_begin = 0, init_end = 0;
	if (!info->no_cpu_code) { /* a device-only artifact: the descriptor alone */
		LLVMValueRef *kernels = calloc((size_t)p->n_launches + 1, sizeof *kernels);
		if (!kernels) return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		if (!emit_kernels(c, plan, p, info->prefix, kernels)) {
			free(kernels);
			return false;
		}
		if (c->failed) {
			free(kernels);
			return false;
		}
		snprintf(name, sizeof name, "%s.run", info->prefix);
		run = emit_run(c, p, kernels, name);
		snprintf(name, sizeof name, "%s.arena_bytes", info->prefix);
		arena_bytes = emit_arena_bytes(c, p, name);
		snprintf(name, sizeof name, "%s.init", info->prefix);
		LLVMValueRef init_fn = emit_init(c, p, kernels, name);
		if (init_fn) {
			init = init_fn;
			init_begin = p->init_begin;
			init_end = p->init_end;
		}
		free(kernels);
		if (!run || !arena_bytes || c->failed) return false;
	}

	data_cx dc = {c, info->prefix, 0};
	/* Weights: one 64-byte aligned blob, hashed for the descriptor (XXH64,
	 * include/tbc/abi_hash.h).  In a data object of our own they are written
	 * straight into their section and hashed there; else (an external file,
	 * an LLVM constant) into a blob of their own. */
	cpu_data_blob blobs[2];
	size_t blob_offsets[2];
	int n_blobs = 0, weights_blob = -1;
	bool own_object = data_obj && cpu_elf_machine(triple);
	bool embedded = !info->external_weights && p->weights_size;
	LLVMValueRef weights = LLVMConstNull(c->ptr);
	uint64_t hash = tbc_abi_xxh64(NULL, 0);
	void *blob = NULL;
	if (!(own_object && embedded) && p->weights_size) {
		if (!(blob = malloc((size_t)p->weights_size))) return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		kir_program_weights(p, blob);
		hash = tbc_abi_xxh64(blob, p->weights_size);
	}
	char weights_name[160];
	snprintf(weights_name, sizeof weights_name, "%s.weights", info->prefix);
	if (embedded) {
		weights_blob = own_object ? n_blobs : -1;
		weights = big_constant(c, weights_name, blob, own_object ? fill_weights : NULL, (void *)p,
				       (size_t)p->weights_size, KIR_ALIGN, own_object ? blobs : NULL, &n_blobs);
	}

	LLVMTypeRef tensor_t = LLVMStructCreateNamed(c->ctx, "tbc_abi_tensor");
	LLVMTypeRef tfields[5] = {c->ptr, c->i32, c->i32, c->ptr, c->ptr};
	LLVMStructSetBody(tensor_t, tfields, 5, 0);
	LLVMTypeRef model_t = LLVMStructCreateNamed(c->ctx, "tbc_abi_model");
	LLVMTypeRef mfields[28] = {c->i32, c->i32, c->ptr, c->ptr, c->ptr, c->i32, c->i32, c->i32, c->ptr,
				   c->ptr, c->ptr, c->ptr, c->ptr, c->ptr, c->ptr, c->i64, c->i64, c->ptr,
				   c->ptr, c->ptr, c->i64, c->ptr, c->i64, c->i64, c->i64, c->ptr, c->i32, c->ptr};
	LLVMStructSetBody(model_t, mfields, 28, 0);

	/* A training step's state (ABI 6): input, output, the offset of its
	 * first value in the weights. */
	LLVMValueRef state = LLVMConstNull(c->ptr);
	if (p->n_state) {
		LLVMTypeRef state_t = LLVMStructCreateNamed(c->ctx, "tbc_abi_state");
		LLVMTypeRef sfields[5] = {c->i32, c->i32, c->i64, c->i32, c->i32};
		LLVMStructSetBody(state_t, sfields, 5, 0);
		LLVMValueRef *rows = calloc((size_t)p->n_state, sizeof *rows);
		if (!rows) return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		for (int i = 0; i < p->n_state; i++) {
			const kir_state *st = &p->state[i];
			uint64_t off = st->init_buf >= 0 ? (uint64_t)p->bufs[st->init_buf]->offset : TBC_ABI_STATE_ZEROS;
			LLVMValueRef f[5] = {LLVMConstInt(c->i32, (unsigned long long)st->input, 0),
					     LLVMConstInt(c->i32, (unsigned long long)st->output, 0), LLVMConstInt(c->i64, off, 0),
					     LLVMConstInt(c->i32, st->weight ? TBC_ABI_STATE_WEIGHT : TBC_ABI_STATE_OPTIMIZER, 0),
					     LLVMConstInt(c->i32, 0, 0)};
			rows[i] = LLVMConstNamedStruct(state_t, f, 5);
		}
		state = global_const(&dc, LLVMConstArray2(state_t, rows, (uint64_t)p->n_state), "state");
		free(rows);
	}

	/* Device code: the table as 8-byte aligned constant bytes. */
	LLVMValueRef device_code = LLVMConstNull(c->ptr);
	char device_name[160];
	snprintf(device_name, sizeof device_name, "%s.device_code", info->prefix);
	if (info->device_code && info->device_code_size)
		device_code = big_constant(c, device_name, info->device_code, NULL, NULL, info->device_code_size, 8,
					   own_object ? blobs : NULL, &n_blobs);
	if (n_blobs && !cpu_data_object(cpu_elf_machine(triple), blobs, n_blobs, data_obj, data_obj_size, blob_offsets))
		llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
	else if (weights_blob >= 0)
		hash = tbc_abi_xxh64((const char *)*data_obj + blob_offsets[weights_blob], p->weights_size);
	free(blob);

	/* Derived symbols: their polynomials as a table the runtime checks and
	 * evaluates before the run (tbc_abi_derive_syms). */
	LLVMValueRef sym_derived = LLVMConstNull(c->ptr), sym_poly = LLVMConstNull(c->ptr);
	size_t poly_len = 0;
	{
		int32_t *derived = malloc(((size_t)p->n_syms + 1) * sizeof *derived);
		int64_t *poly = NULL;
		if (!derived || !kir_program_derived_table(p, derived, &poly, &poly_len)) {
			free(derived);
			return llvm_fail(c, TBC_ERR_INTERNAL, "a derived symbol's name does not read back, or out of memory");
		}
		size_t n_vals = poly_len > (size_t)p->n_syms ? poly_len : (size_t)p->n_syms;
		LLVMValueRef *vals = poly_len ? calloc(n_vals, sizeof *vals) : NULL;
		if (poly_len && !vals) {
			free(derived);
			free(poly);
			return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		}
		if (poly_len) {
			for (int s = 0; s < p->n_syms; s++) vals[s] = LLVMConstInt(c->i32, (unsigned long long)(int64_t)derived[s], 1);
			sym_derived = global_const(&dc, LLVMConstArray2(c->i32, vals, (uint64_t)p->n_syms), "sym_derived");
			for (size_t i = 0; i < poly_len; i++) vals[i] = LLVMConstInt(c->i64, (unsigned long long)poly[i], 1);
			sym_poly = global_const(&dc, LLVMConstArray2(c->i64, vals, (uint64_t)poly_len), "sym_poly");
		}
		free(vals);
		free(derived);
		free(poly);
	}

	LLVMValueRef sym_names = LLVMConstNull(c->ptr), sym_computed = LLVMConstNull(c->ptr);
	if (p->n_syms) {
		LLVMValueRef *names = calloc((size_t)p->n_syms, sizeof *names);
		LLVMValueRef *zeros = calloc((size_t)p->n_syms, sizeof *zeros);
		if (!names || !zeros) {
			free(names);
			free(zeros);
			return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		}
		for (int s = 0; s < p->n_syms; s++) {
			names[s] = cstring(&dc, p->sym_names[s]);
			zeros[s] = LLVMConstInt(c->i8, p->sym_computed && p->sym_computed[s] ? 1 : 0, 0);
		}
		sym_names = global_const(&dc, LLVMConstArray2(c->ptr, names, (uint64_t)p->n_syms), "sym_names");
		sym_computed = global_const(&dc, LLVMConstArray2(c->i8, zeros, (uint64_t)p->n_syms), "sym_computed");
		free(names);
		free(zeros);
	}
	LLVMValueRef ins = tensor_array(&dc, p, p->inputs, p->n_inputs, tensor_t);
	LLVMValueRef outs = tensor_array(&dc, p, p->outputs, p->n_outputs, tensor_t);
	if (!ins || !outs) return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
	LLVMValueRef mvals[28] = {
		LLVMConstInt(c->i32, TBC_ABI_MAGIC, 0),
		LLVMConstInt(c->i32, TBC_ABI_VERSION, 0),
		cstring(&dc, p->name),
		cstring(&dc, triple),
		cstring(&dc, features ? features : ""),
		LLVMConstInt(c->i32, (unsigned long long)p->n_inputs, 0),
		LLVMConstInt(c->i32, (unsigned long long)p->n_outputs, 0),
		LLVMConstInt(c->i32, (unsigned long long)p->n_syms, 0),
		ins,
		outs,
		sym_names,
		sym_computed,
		arena_bytes,
		weights,
		info->external_weights ? cstring(&dc, info->weights_file) : LLVMConstNull(c->ptr),
		LLVMConstInt(c->i64, p->weights_size, 0),
		LLVMConstInt(c->i64, hash, 0),
		run,
		sym_derived,
		sym_poly,
		LLVMConstInt(c->i64, (unsigned long long)poly_len, 0),
		device_code,
		LLVMConstInt(c->i64, info->device_code ? (unsigned long long)info->device_code_size : 0, 0),
		LLVMConstInt(c->i64, init_begin, 0),
		LLVMConstInt(c->i64, init_end, 0),
		init,
		LLVMConstInt(c->i32, (unsigned long long)p->n_state, 0),
		state,
	};
	snprintf(name, sizeof name, "%s.model", info->prefix);
	LLVMValueRef model = LLVMAddGlobal(c->mod, model_t, name);
	LLVMSetInitializer(model, LLVMConstNamedStruct(model_t, mvals, 28));
	LLVMSetGlobalConstant(model, 1);
	LLVMSetLinkage(model, LLVMPrivateLinkage);
	snprintf(name, sizeof name, "%s_descriptor", info->prefix);
	emit_descriptor_fn(c, name, model);
	if (info->export_generic) emit_descriptor_fn(c, "tbc_model_descriptor", model);
	return !c->failed;
}
