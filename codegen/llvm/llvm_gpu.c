/* Kernels for GPUs through LLVM (llvm_gpu.h): the hooks that map a
 * kernel's loops as its launch plan says, its checks onto the status word
 * and its local buffers onto the local address space, and the module of a
 * device program's kernels. */
#include "codegen/llvm/llvm_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/llvm/llvm_emit.h"
#include "tbc/tbc.h"

LLVMValueRef llvm_gpu_intrinsic(llvm_cx *c, const char *name, LLVMValueRef *args, unsigned n) {
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
	return LLVMBuildCall2(c->b, LLVMIntrinsicGetType(c->ctx, id, NULL, 0), fn, args, n, "");
}

void llvm_gpu_fn_attr(llvm_cx *c, LLVMValueRef fn, const char *key, const char *value) {
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
				LLVMCreateStringAttribute(c->ctx, key, (unsigned)strlen(key), value, (unsigned)strlen(value)));
}

static void enum_attr(llvm_cx *c, LLVMValueRef fn, const char *name) {
	unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, kind, 0));
}

static const llvm_gpu_state *state(const llvm_fn *f) { return f->c->target; }

static LLVMValueRef wide(llvm_cx *c, LLVMValueRef v) { return LLVMBuildZExt(c->b, v, c->i64, ""); }

/* The global id along dim 0: group id * group size + item id. */
static LLVMValueRef global_id(llvm_cx *c, const llvm_gpu_arch *a) {
	LLVMValueRef g = LLVMBuildNUWMul(c->b, wide(c, a->group_id(c, 0)), wide(c, a->group_size(c, 0)), "");
	return LLVMBuildNUWAdd(c->b, g, wide(c, a->item_id(c, 0)), "gid");
}

/* Whether a work-item's innermost parallel loops are interleaved as
 * grid-stride loops are: TBC_GPU_INTERLEAVE_ITEMS=0 when compiling keeps
 * them one iteration at a time, for measuring (docs/gpu.md). */
static bool item_loops_interleave(void) {
	const char *e = getenv("TBC_GPU_INTERLEAVE_ITEMS");
	return !e || strcmp(e, "0") != 0;
}

/* A parallel, vector or grid loop not inside a mapped one (llvm_hooks.
 * parallel_loop): strided over the grid as the plan says, or an ordinary
 * loop of the work-item. */
static void gpu_parallel_loop(llvm_fn *f, const kir_stmt *s) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	const llvm_gpu_state *st = state(f);
	const llvm_gpu_arch *a = st->arch;
	int dim = tbc_dev_plan_dim(st->plan, s);
	LLVMValueRef lo = llvm_expr(f, s->lo), hi = llvm_expr(f, s->hi);
	if (!lo || !hi) return;
	LLVMValueRef step = LLVMConstInt(c->i64, (unsigned long long)s->step, 0);
	LLVMValueRef start = lo, stride = step;
	bool mapped = true; /* loops inside run in the item */
	if (dim >= 0 && st->plan->shape == TBC_DEV_GRID) {
		start = LLVMBuildNSWAdd(b, lo, LLVMBuildNSWMul(b, global_id(c, a), step, ""), "");
		stride = LLVMBuildNSWMul(b, wide(c, a->global_size(c, 0)), step, "");
	} else if (dim >= 0) { /* a grid loop of a grouped kernel: groups stride */
		start = LLVMBuildNSWAdd(b, lo, LLVMBuildNSWMul(b, wide(c, a->group_id(c, dim)), step, ""), "");
		stride = LLVMBuildNSWMul(b, wide(c, a->n_groups(c, dim)), step, "");
		mapped = f->parallel_mapped; /* the grid loops inside are mapped too */
	}
	LLVMValueRef slot = f->vars[s->var->id];
	LLVMBuildStore(b, start, slot);
	bool innermost = !llvm_has_loop(s->body);
	/* A grid-stride loop, or an innermost parallel loop of the work-item:
	 * several iterations per trip with their loads first, then this loop
	 * for the last few (fewer than interleave). */
	bool grid = dim >= 0 && st->plan->shape == TBC_DEV_GRID;
	if ((grid || (dim < 0 && innermost && item_loops_interleave())) && c->hooks->interleave > 1 &&
	    llvm_can_interleave(s->body))
		llvm_interleaved_loop(f, s->var, hi, stride, c->hooks->interleave, s->body);
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, f->fn, dim >= 0 ? "grid" : "loop");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "body");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "exit");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildLoad2(b, c->i64, slot, ""), hi, ""), body, exit);
	LLVMPositionBuilderAtEnd(b, body);
	bool was_mapped = f->parallel_mapped, was_in = f->in_parallel;
	f->parallel_mapped = mapped;
	f->in_parallel = dim < 0 && innermost;
	f->lane_epoch++; /* the body's own block (llvm_fn.lane_vec) */
	llvm_stmts(f, s->body);
	f->parallel_mapped = was_mapped;
	f->in_parallel = was_in;
	LLVMBuildStore(b, LLVMBuildNSWAdd(b, LLVMBuildLoad2(b, c->i64, slot, ""), stride, ""), slot);
	llvm_mark_loop(f, LLVMBuildBr(b, head), dim < 0 && innermost);
	LLVMPositionBuilderAtEnd(b, exit);
}

/* A failed check: its number into the status word, if that is still 0. */
static void gpu_report_error(llvm_fn *f, const kir_stmt *check) {
	llvm_cx *c = f->c;
	int code = tbc_dev_plan_error(state(f)->plan, check);
	if (code <= 0) {
		llvm_fail(c, TBC_ERR_INTERNAL, "a check the launch plan does not number");
		return;
	}
	LLVMBuildAtomicCmpXchg(c->b, f->status, LLVMConstInt(c->i32, 0, 0), LLVMConstInt(c->i32, (unsigned)code, 0),
			       LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
}

static LLVMValueRef gpu_local_buffer(llvm_fn *f, const kir_buffer *lb) {
	llvm_cx *c = f->c;
	int64_t n = 1;
	for (int d = 0; d < lb->rank; d++) {
		int64_t dim;
		if (!kir_e_const_index(lb->dims[d], &dim) || dim < 0) {
			llvm_fail(c, TBC_ERR_INTERNAL, "local buffer %s of %s has a dim that is not a constant", lb->name, f->k->name);
			return NULL;
		}
		n *= dim;
	}
	LLVMTypeRef mt = llvm_mem_type(c, lb->dtype);
	if (!mt) return NULL;
	char name[160];
	snprintf(name, sizeof name, "tbc.k%d.%s.l%d", f->index, f->k->name, lb->id);
	LLVMTypeRef at = LLVMArrayType2(mt, (uint64_t)(n > 0 ? n : 1));
	LLVMValueRef g = LLVMAddGlobalInAddressSpace(c->mod, at, name, state(f)->arch->local_as);
	LLVMSetInitializer(g, LLVMGetUndef(at)); /* local memory starts unstored */
	LLVMSetLinkage(g, LLVMInternalLinkage);
	LLVMSetAlignment(g, 16);
	return g;
}

static LLVMValueRef gpu_local_id(llvm_fn *f, int d) { return wide(f->c, state(f)->arch->item_id(f->c, d)); }

static void gpu_barrier(llvm_fn *f) { state(f)->arch->barrier(f->c); }

/* Iterations per trip of a work-item's independent loops (llvm_unroll.c):
 * 4 loads in flight per work-item, what a GPU's copy kernels keep too.
 * TBC_GPU_INTERLEAVE=N (1 to 8; 1: one at a time) replaces it when
 * compiling, for measuring. */
static int interleave(void) {
	const char *e = getenv("TBC_GPU_INTERLEAVE");
	int n = e ? atoi(e) : 0;
	return n >= 1 && n <= LLVM_MAX_INTERLEAVE ? n : 4;
}

static void gpu_mma(llvm_fn *f, const kir_mma *m) { state(f)->arch->mma(f, m); }

llvm_hooks llvm_gpu_hooks(const llvm_gpu_arch *a) {
	return (llvm_hooks){
		.name = a->name,
		.buffer_addrspace = a->global_as,
		.libm = false,
		.soft_math = true,
		.env_param = false,
		.parallel_loop = gpu_parallel_loop,
		.map_vector_loops = true,
		.interleave = interleave(),
		.report_error = gpu_report_error,
		.local_buffer = gpu_local_buffer,
		.local_id = gpu_local_id,
		.barrier = gpu_barrier,
		.mma = a->mma ? gpu_mma : NULL,
	};
}

/* The entry of kernel index: calls the body, on global id 0 alone for a
 * SINGLE plan. */
static bool emit_entry(llvm_cx *c, const llvm_gpu_arch *a, const tbc_dev_kernel *dk, LLVMValueRef body) {
	LLVMTypeRef fty = LLVMGlobalGetValueType(body);
	if (LLVMGetNamedFunction(c->mod, dk->name))
		return llvm_fail(c, TBC_ERR_INTERNAL, "two kernels named %s", dk->name);
	LLVMValueRef fn = LLVMAddFunction(c->mod, dk->name, fty);
	LLVMSetFunctionCallConv(fn, a->kernel_cc);
	enum_attr(c, fn, "nounwind");
	unsigned n = LLVMCountParams(fn);
	LLVMValueRef *args = calloc((size_t)n + 1, sizeof *args);
	if (!args) return llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
	for (unsigned i = 0; i < n; i++) {
		args[i] = LLVMGetParam(fn, i);
		LLVMValueRef bp = LLVMGetParam(body, i);
		size_t len;
		const char *pname = LLVMGetValueName2(bp, &len);
		if (len) LLVMSetValueName2(args[i], pname, len);
	}
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, fn, "entry");
	LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(c->ctx, fn, "run");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, fn, "done");
	LLVMPositionBuilderAtEnd(c->b, entry);
	if (dk->plan.shape == TBC_DEV_SINGLE)
		LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, global_id(c, a), LLVMConstInt(c->i64, 0, 0), ""), run, done);
	else
		LLVMBuildBr(c->b, run);
	LLVMPositionBuilderAtEnd(c->b, run);
	LLVMBuildCall2(c->b, fty, body, args, n, "");
	LLVMBuildBr(c->b, done);
	LLVMPositionBuilderAtEnd(c->b, done);
	LLVMBuildRetVoid(c->b);
	free(args);
	a->mark_kernel(c, fn, dk);
	return !c->failed;
}

bool llvm_gpu_compile(const llvm_gpu_arch *a, LLVMTargetMachineRef tm, const char *module_name,
		      const tbc_dev_kernel *ks, int n, int opt_level, llvm_output what, void **code, size_t *size,
		      tbc_diags *d) {
	*code = NULL;
	*size = 0;
	llvm_hooks hooks = llvm_gpu_hooks(a);
	llvm_gpu_state st = {a, NULL};
	llvm_cx c;
	/* 4-byte vectors: a work-item computes scalars (target_desc.h) */
	llvm_cx_init(&c, module_name, &hooks, 4, d);
	c.target = &st;
	llvm_module_set_machine(c.mod, tm, a->triple);
	c.f16_hw = true; /* cvt.f32.f16 / cvt.rn.f16.f32 (sm_53 on), v_cvt_f32_f16 / v_cvt_f16_f32 */
	bool ok = a->prepare_module(&c);
	for (int i = 0; ok && i < n; i++) {
		st.plan = &ks[i].plan;
		LLVMValueRef body = llvm_emit_kernel(&c, ks[i].k, i);
		ok = body != NULL;
		if (!ok) break;
		enum_attr(&c, body, "alwaysinline");
		if (kir_kernel_is_grouped(ks[i].k)) enum_attr(&c, body, "convergent"); /* it holds barriers */
		ok = emit_entry(&c, a, &ks[i], body);
	}
	st.plan = NULL;
	if (!ok && !tbc_diags_first_code(d)) tbc_diags_add(d, TBC_ERR_INTERNAL, NULL, NULL, NULL, NULL, "%s backend failed", a->name);
	ok = ok && llvm_module_verify(c.mod, a->name, d);
	ok = ok && llvm_module_optimize(c.mod, tm, opt_level, a->name, d);
	ok = ok && llvm_module_emit(c.mod, tm, what, true, a->name, d, code, size);
	if (!ok && !tbc_diags_first_code(d)) tbc_diags_add(d, TBC_ERR_NO_MEMORY, NULL, NULL, NULL, NULL, "out of memory");
	llvm_cx_dispose(&c);
	return ok;
}
