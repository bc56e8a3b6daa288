/* Kernel IR -> LLVM IR: a kernel's function, its statements and loops.
 *
 * A kernel becomes an internal function over its buffers and sizes (and
 * the target's pointer, llvm_hooks.env_param).  Sequential and vector loops
 * are emitted here: innermost parallel and vector loops carry llvm.loop
 * metadata asking for vectorization, and LLVM's loop vectorizer does the
 * rest.  A parallel loop not inside another one is the target's
 * (llvm_hooks.parallel_loop), as is reporting a failed check
 * (llvm_hooks.report_error); expressions are llvm_expr.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>
#include <llvm-c/IRReader.h>

#include "codegen/llvm/llvm_emit.h"

/* A distinct empty metadata node (an access group).  The C API makes only
 * uniqued nodes, so it comes from parsing a one-line module; metadata nodes
 * belong to the context and outlive that module.  NULL when parsing fails
 * (the loops then just keep LLVM's own checks). */
static LLVMMetadataRef distinct_node(llvm_cx *c) {
	static const char ir[] = "!tbc.group = !{!0}\n!0 = distinct !{}\n";
	LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, sizeof ir - 1, "tbc.group");
	LLVMModuleRef m = NULL;
	char *err = NULL;
	if (!mb) return NULL;
	if (LLVMParseIRInContext(c->ctx, mb, &m, &err)) { /* takes mb either way */
		LLVMDisposeMessage(err);
		return NULL;
	}
	LLVMMetadataRef md = NULL;
	if (LLVMGetNamedMetadataNumOperands(m, "tbc.group") == 1) {
		LLVMValueRef op;
		LLVMGetNamedMetadataOperands(m, "tbc.group", &op);
		md = LLVMValueAsMetadata(op);
	}
	LLVMDisposeModule(m);
	return md;
}

bool llvm_has_loop(const kir_stmt *s) {
	for (; s; s = s->next) {
		if (s->kind == KIR_S_FOR || s->kind == KIR_S_DOT4 || s->kind == KIR_S_TILE2 || s->kind == KIR_S_FMA_TILE)
			return true; /* loops over k */
		if (s->kind == KIR_S_IF && (llvm_has_loop(s->body) || llvm_has_loop(s->orelse))) return true;
	}
	return false;
}

/* llvm.loop metadata: a distinct self-referencing node with the hints;
 * unroll > 1 asks LLVM to unroll the loop that many times (with a
 * remainder when the trip count is not a multiple), unroll < 0 not to
 * unroll it. */
static void mark_loop(llvm_fn *f, LLVMValueRef latch_br, bool vectorize, int unroll) {
	llvm_cx *c = f->c;
	LLVMMetadataRef tmp = LLVMTemporaryMDNode(c->ctx, NULL, 0);
	LLVMMetadataRef ops[6];
	unsigned n = 0;
	ops[n++] = tmp;
	LLVMMetadataRef mp = LLVMMDStringInContext2(c->ctx, "llvm.loop.mustprogress", 22);
	ops[n++] = LLVMMDNodeInContext2(c->ctx, &mp, 1);
	if (unroll > 1) {
		LLVMMetadataRef u[2] = {LLVMMDStringInContext2(c->ctx, "llvm.loop.unroll.count", 22),
					LLVMValueAsMetadata(LLVMConstInt(c->i32, (unsigned)unroll, 0))};
		ops[n++] = LLVMMDNodeInContext2(c->ctx, u, 2);
	}
	if (unroll < 0) {
		LLVMMetadataRef u = LLVMMDStringInContext2(c->ctx, "llvm.loop.unroll.disable", 24);
		ops[n++] = LLVMMDNodeInContext2(c->ctx, &u, 1);
	}
	if (vectorize) {
		LLVMMetadataRef v[2] = {LLVMMDStringInContext2(c->ctx, "llvm.loop.vectorize.enable", 26),
					LLVMValueAsMetadata(LLVMConstInt(c->i1, 1, 0))};
		ops[n++] = LLVMMDNodeInContext2(c->ctx, v, 2);
		if (f->group) {
			LLVMMetadataRef pa[2] = {LLVMMDStringInContext2(c->ctx, "llvm.loop.parallel_accesses", 27), f->group};
			ops[n++] = LLVMMDNodeInContext2(c->ctx, pa, 2);
		}
	}
	LLVMMetadataRef node = LLVMMDNodeInContext2(c->ctx, ops, n);
	LLVMMetadataReplaceAllUsesWith(tmp, node);
	LLVMSetMetadata(latch_br, c->loop_md_kind, LLVMMetadataAsValue(c->ctx, node));
}

void llvm_mark_loop(llvm_fn *f, LLVMValueRef latch_br, bool vectorize) { mark_loop(f, latch_br, vectorize, 0); }

static bool stores(const kir_stmt *s) {
	for (; s; s = s->next)
		if (s->kind == KIR_S_STORE || stores(s->body) || stores(s->orelse)) return true;
	return false;
}

static bool expr_reads_global(const kir_expr *e) {
	if (!e) return false;
	if (e->kind == KIR_E_LOAD && e->buf && e->buf->space == KIR_MEM_GLOBAL) return true;
	return expr_reads_global(e->a) || expr_reads_global(e->b) || expr_reads_global(e->c);
}

/* Whether the statements load from global memory (not a work-group's). */
static bool reads_global(const kir_stmt *s) {
	for (; s; s = s->next)
		if (expr_reads_global(s->index) || expr_reads_global(s->value) || expr_reads_global(s->cond) ||
		    reads_global(s->body) || reads_global(s->orelse))
			return true;
	return false;
}

/* for var = lo .. hi step: body, with the bounds evaluated once. */
static void emit_loop(llvm_fn *f, const kir_var *var, LLVMValueRef lo, LLVMValueRef hi, int64_t step,
		      const kir_stmt *body, bool vectorize) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef slot = f->vars[var->id];
	LLVMBuildStore(b, lo, slot);
	/* An innermost parallel loop of a work-item (a GPU's; the CPU
	 * vectorizes it): several iterations per trip, loads first, then this
	 * loop for the rest. */
	if (vectorize && c->hooks->interleave > 1 && llvm_can_interleave(body))
		llvm_interleaved_loop(f, var, hi, LLVMConstInt(c->i64, (unsigned long long)step, 0), c->hooks->interleave, body);
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "loop");
	LLVMBasicBlockRef bodyb = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "body");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "exit");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMValueRef i = LLVMBuildLoad2(b, c->i64, slot, "");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, hi, ""), bodyb, exit);
	LLVMPositionBuilderAtEnd(b, bodyb);
	bool was = f->in_parallel;
	f->in_parallel = vectorize; /* vectorize: an innermost parallel or vector loop */
	f->lane_epoch++; /* the body's own block: no vector from before it (an interleaved copy's) */
	llvm_stmts(f, body);
	f->in_parallel = was;
	LLVMValueRef i2 = LLVMBuildLoad2(b, c->i64, slot, "");
	LLVMBuildStore(b, LLVMBuildNSWAdd(b, i2, LLVMConstInt(c->i64, (unsigned long long)step, 0), ""), slot);
	LLVMValueRef br = LLVMBuildBr(b, head);
	/* A work-item's innermost loop that only loads from global memory and
	 * accumulates (a reduction's pass over its share of a row): unrolled,
	 * its loads do not wait for each other's sums, so several are in
	 * flight (llvm_unroll.c says why a GPU needs that).  The sums stay in
	 * order.  Not a loop over a work-group's memory (a GEMM's products of
	 * staged tiles): its loads are short, and unrolling it cost an H200's
	 * scalar GEMMs 4 to 37% (docs/gpu.md, run 10). */
	bool unroll = c->hooks->interleave > 1 && !vectorize && !llvm_has_loop(body) && !stores(body) &&
		      reads_global(body);
	/* A CPU's vector loop of 16 or more iterations known when compiling
	 * stays a loop for LLVM's loop vectorizer: fully unrolled first (its
	 * full unroll runs before the vectorizer), the copies are scalar code
	 * that the SLP vectorizer left scalar where it did not pack them (rows
	 * of 31 in im2col: the README's example ran 0.048 -> 0.038 ms at one
	 * thread with them kept; docs/performance.md). */
	int64_t trips = 0;
	if (LLVMIsAConstantInt(lo) && LLVMIsAConstantInt(hi))
		trips = (LLVMConstIntGetSExtValue(hi) - LLVMConstIntGetSExtValue(lo)) / step;
	bool keep = vectorize && c->vector_bytes >= 16 && trips >= 16;
	mark_loop(f, br, vectorize, unroll ? c->hooks->interleave : keep ? -1 : 0);
	LLVMPositionBuilderAtEnd(b, exit);
}

LLVMValueRef llvm_new_function(llvm_cx *c, const char *name, LLVMTypeRef ty) {
	LLVMValueRef fn = LLVMAddFunction(c->mod, name, ty);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	unsigned kind = LLVMGetEnumAttributeKindForName("nounwind", 8);
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, kind, 0));
	return fn;
}

void llvm_prefer_tiled_width(const llvm_fn *f, LLVMValueRef fn) {
	llvm_cx *c = f->c;
	if (!f->k->contract || c->vector_bytes < 64) return;
	char v[16];
	snprintf(v, sizeof v, "%d", c->vector_bytes * 8);
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
				LLVMCreateStringAttribute(c->ctx, "prefer-vector-width", 19, v, (unsigned)strlen(v)));
}

/* var's slot now holds lane `lane` of v (llvm_fn.lane_vec). */
static void lane_record(llvm_fn *f, const kir_var *var, LLVMValueRef v, int lane) {
	int id = var->id;
	f->lane_vec[id] = v, f->lane_at[id] = lane, f->lane_gen[id] = f->lane_epoch, f->lane_slot[id] = f->vars[id];
}

static LLVMValueRef vars_lanes(const llvm_fn *f, struct kir_var *const *vars, int n);

LLVMValueRef llvm_vars_vector(llvm_fn *f, struct kir_var *const *vars, int n, LLVMTypeRef elt) {
	llvm_cx *c = f->c;
	/* the vector whose lanes they are, where a run of sets made one */
	LLVMValueRef v = vars_lanes(f, vars, n);
	if (v && LLVMTypeOf(v) == LLVMVectorType(elt, (unsigned)n)) return v;
	v = LLVMGetUndef(LLVMVectorType(elt, (unsigned)n));
	for (int l = 0; l < n; l++) {
		LLVMValueRef s = LLVMBuildLoad2(c->b, elt, f->vars[vars[l]->id], "");
		v = LLVMBuildInsertElement(c->b, v, s, LLVMConstInt(c->i32, (unsigned long long)l, 0), "");
	}
	return v;
}

void llvm_vector_vars(llvm_fn *f, LLVMValueRef v, struct kir_var *const *vars, int n) {
	llvm_cx *c = f->c;
	for (int l = 0; l < n; l++) {
		LLVMBuildStore(c->b, LLVMBuildExtractElement(c->b, v, LLVMConstInt(c->i32, (unsigned long long)l, 0), ""),
			       f->vars[vars[l]->id]);
		lane_record(f, vars[l], v, l);
	}
}

void llvm_var_slots(llvm_fn *f) {
	for (int i = 0; i < f->k->n_vars; i++) {
		LLVMTypeRef t = llvm_type(f->c, f->k->vars[i]->type);
		f->vars[i] = t ? LLVMBuildAlloca(f->c->b, t, f->k->vars[i]->name) : NULL;
	}
}

/* f's lane table, empty (llvm_fn.lane_vec). */
static bool lanes_alloc(llvm_fn *f) {
	size_t n = (size_t)f->k->n_vars + 1;
	f->lane_vec = calloc(n, sizeof *f->lane_vec);
	f->lane_at = calloc(n, sizeof *f->lane_at);
	f->lane_gen = calloc(n, sizeof *f->lane_gen);
	f->lane_slot = calloc(n, sizeof *f->lane_slot);
	f->lane_epoch = 1;
	const char *e = getenv("TBC_SET_LANES");
	f->set_lanes = f->c->hooks->row_stores && !(e && !strcmp(e, "0"));
	return f->lane_vec && f->lane_at && f->lane_gen && f->lane_slot;
}

bool llvm_fn_part(llvm_fn *part, const llvm_fn *f, LLVMValueRef fn) {
	const kir_kernel *k = f->k;
	*part = *f;
	part->fn = fn;
	part->memo = NULL;
	part->memo_cap = part->memo_n = 0;
	part->bufs = calloc((size_t)k->n_buffers + 1, sizeof *part->bufs);
	part->sizes = calloc((size_t)k->n_sizes + 1, sizeof *part->sizes);
	part->vars = calloc((size_t)k->n_vars + 1, sizeof *part->vars);
	part->locals = calloc((size_t)k->n_locals + 1, sizeof *part->locals);
	if (part->locals && f->locals) memcpy(part->locals, f->locals, (size_t)k->n_locals * sizeof *part->locals);
	if (part->bufs && part->sizes && part->vars && part->locals && lanes_alloc(part)) return true;
	return llvm_fail(f->c, TBC_ERR_NO_MEMORY, "out of memory");
}

void llvm_fn_free(llvm_fn *f) {
	free(f->bufs);
	free(f->sizes);
	free(f->vars);
	free(f->locals);
	free(f->memo);
	free(f->lane_vec);
	free(f->lane_at);
	free(f->lane_gen);
	free(f->lane_slot);
	f->lane_vec = f->lane_slot = NULL, f->lane_at = NULL, f->lane_gen = NULL;
	f->bufs = f->sizes = f->vars = f->locals = NULL;
	f->memo = NULL;
	f->memo_cap = f->memo_n = 0;
}

/* Branch weights: the first successor is almost never taken. */
static void set_unlikely(llvm_cx *c, LLVMValueRef br) {
	LLVMMetadataRef ops[3] = {LLVMMDStringInContext2(c->ctx, "branch_weights", 14),
				  LLVMValueAsMetadata(LLVMConstInt(c->i32, 1, 0)),
				  LLVMValueAsMetadata(LLVMConstInt(c->i32, 1048575, 0))};
	LLVMSetMetadata(br, LLVMGetMDKindIDInContext(c->ctx, "prof", 4),
			LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, ops, 3)));
}

bool llvm_store_operands(llvm_fn *f, const kir_stmt *s, LLVMValueRef *ptr, LLVMValueRef *value) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMValueRef i = llvm_expr(f, s->index), v = llvm_expr(f, s->value);
	LLVMTypeRef mt = llvm_mem_type(c, s->buf->dtype);
	if (!i || !v || !mt) return false;
	if (s->buf->dtype == TBC_DT_BOOL) v = LLVMBuildZExt(b, v, c->i8, "");
	/* tbc_store_i64: a signed sub-byte integer fills its byte with its sign. */
	if (llvm_is_sub_byte_int(s->buf->dtype))
		v = tbc_dtype_is_unsigned(s->buf->dtype) ? LLVMBuildZExt(b, v, c->i8, "") : LLVMBuildSExt(b, v, c->i8, "");
	LLVMValueRef base = s->buf->space == KIR_MEM_LOCAL ? f->locals[s->buf->id] : f->bufs[s->buf->id];
	*ptr = LLVMBuildInBoundsGEP2(b, mt, base, &i, 1, "");
	*value = v;
	return true;
}

void llvm_store_emit(llvm_fn *f, const kir_stmt *s, LLVMValueRef ptr, LLVMValueRef value) {
	LLVMValueRef st = LLVMBuildStore(f->c->b, value, ptr);
	LLVMSetAlignment(st, (unsigned)tbc_dtype_size(s->buf->dtype));
	llvm_mark_access(f, st);
}

void llvm_stmt(llvm_fn *f, const kir_stmt *s) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	if (c->failed) return;
	llvm_memo_clear(f);
	/* Control flow: the vectors of lanes from before it may not dominate
	 * its blocks or what follows.  A tile's own loop starts from the block
	 * it is in and ends in one its start dominates, where it records its
	 * sums' vectors. */
	bool flow = s->kind != KIR_S_SET && s->kind != KIR_S_STORE && s->kind != KIR_S_FMA_TILE &&
		    s->kind != KIR_S_DOT2 && s->kind != KIR_S_DOT4; /* tile2 sets its sums as scalars: flow */
	if (flow) f->lane_epoch++;
	switch (s->kind) {
	case KIR_S_FOR: {
		bool mapped_kind = s->loop == KIR_LOOP_PARALLEL || s->loop == KIR_LOOP_GRID ||
				   (s->loop == KIR_LOOP_VECTOR && c->hooks->map_vector_loops);
		if (mapped_kind && !f->parallel_mapped) {
			c->hooks->parallel_loop(f, s);
			break;
		}
		LLVMValueRef lo = llvm_expr(f, s->lo), hi = llvm_expr(f, s->hi);
		if (!lo || !hi) return;
		emit_loop(f, s->var, lo, hi, s->step, s->body, s->loop != KIR_LOOP_SEQUENTIAL && !llvm_has_loop(s->body));
		break;
	}
	case KIR_S_STORE: {
		LLVMValueRef p, v;
		if (!llvm_store_operands(f, s, &p, &v)) return;
		llvm_store_emit(f, s, p, v);
		break;
	}
	case KIR_S_SET: {
		LLVMValueRef v = llvm_expr(f, s->value);
		if (!v) return;
		if (s->var->reassoc && LLVMIsAInstruction(v) && LLVMGetInstructionOpcode(v) == LLVMFAdd)
			LLVMSetFastMathFlags(v, LLVMGetFastMathFlags(v) | LLVMFastMathAllowReassoc);
		LLVMBuildStore(b, v, f->vars[s->var->id]);
		f->lane_gen[s->var->id] = 0;
		break;
	}
	case KIR_S_ERROR: {
		LLVMValueRef cond = llvm_expr(f, s->cond);
		if (!cond || !f->status) {
			if (cond) llvm_fail(c, TBC_ERR_INTERNAL, "an error statement in a kernel without status");
			return;
		}
		LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "fail");
		LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "cont");
		LLVMValueRef br = LLVMBuildCondBr(b, cond, fail, cont);
		set_unlikely(c, br);
		LLVMPositionBuilderAtEnd(b, fail);
		c->hooks->report_error(f, s);
		LLVMBuildBr(b, cont);
		LLVMPositionBuilderAtEnd(b, cont);
		llvm_memo_clear(f);
		break;
	}
	case KIR_S_IF: {
		LLVMValueRef cond = llvm_expr(f, s->cond);
		if (!cond) return;
		LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "then");
		LLVMBasicBlockRef els = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "else");
		LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "join");
		LLVMBuildCondBr(b, cond, then, els);
		LLVMPositionBuilderAtEnd(b, then);
		llvm_stmts(f, s->body);
		llvm_memo_clear(f);
		f->lane_epoch++; /* the then branch's vectors are not the else branch's */
		LLVMBuildBr(b, join);
		LLVMPositionBuilderAtEnd(b, els);
		llvm_stmts(f, s->orelse);
		llvm_memo_clear(f);
		LLVMBuildBr(b, join);
		LLVMPositionBuilderAtEnd(b, join);
		break;
	}
	case KIR_S_BARRIER:
		c->hooks->barrier(f); /* present: grouped kernels need it (llvm_emit_kernel) */
		break;
	case KIR_S_MMA:
		if (!c->hooks->mma) {
			llvm_fail(c, TBC_ERR_UNSUPPORTED, "kernel %s holds a matrix multiply-accumulate (mma), which this target has not",
				  f->k->name);
			return;
		}
		c->hooks->mma(f, s->mma);
		break;
	case KIR_S_DOT2:
		if (!c->dot_bf16) {
			llvm_fail(c, TBC_ERR_UNSUPPORTED, "kernel %s holds a bf16 pair dot product (dot2), which this target has not",
				  f->k->name);
			return;
		}
		llvm_dot2(f, s->dot2);
		break;
	case KIR_S_TILE2:
		if (!c->hooks->tile2 || !(kir_tile2_is_int8(s->tile2) ? c->tile_i8 : c->tile_bf16)) {
			llvm_fail(c, TBC_ERR_UNSUPPORTED, "kernel %s holds dot-product tiles (tile2), which this target has not",
				  f->k->name);
			return;
		}
		c->hooks->tile2(f, s->tile2);
		break;
	case KIR_S_DOT4:
		if (!c->hooks->dot4 || !c->dot4_lanes) {
			llvm_fail(c, TBC_ERR_UNSUPPORTED, "kernel %s holds a byte dot product (dot4), which this target has not",
				  f->k->name);
			return;
		}
		c->hooks->dot4(f, s->dot4);
		break;
	case KIR_S_FMA_TILE:
		if (!c->hooks->fma_tile) {
			llvm_fail(c, TBC_ERR_UNSUPPORTED, "kernel %s holds a multiply-add tile (fma), which this target has not",
				  f->k->name);
			return;
		}
		llvm_fma_tile(f, s->fma_tile);
		break;
	}
	if (flow) f->lane_epoch++;
	llvm_memo_clear(f);
}

/* ---- Runs of sets as vectors --------------------------------------------------
 * A GEMM tile's epilogue is a set per sum, v = f(acc, row, col), row after
 * row, and the row's stores then store those values (emit_row_run).  Each
 * set emitted alone extracts its sum from the tile's vector and the row
 * store inserts the values back: hundreds of scalar instructions per tile
 * that LLVM's SLP vectorizer packed again, a large part of its time on a
 * convolution at -O1.  A run of sets of the same form is emitted as one
 * vector expression instead: lanes() evaluates n expressions of the same
 * shape as one vector, the vector whose lanes are the variables' (a tile's
 * sums) where they are, a splat where all n are the same expression, a
 * vector load where n loads are consecutive elements, else lane by lane.
 * The values are those of the sets one by one: each lane's expression is
 * the set's, and no set in a run reads a variable set before it in the
 * run. */

/* The vector var's last set left it a lane of, and the lane; NULL where
 * none is known here.  (The slot is compared too: an interleaved loop's
 * copies give a variable slots of their own, llvm_unroll.c.) */
static LLVMValueRef lane_vector(const llvm_fn *f, const kir_var *var, int *lane) {
	int id = var->id;
	if (f->lane_gen[id] != f->lane_epoch || f->lane_slot[id] != f->vars[id]) return NULL;
	*lane = f->lane_at[id];
	return f->lane_vec[id];
}

/* The vector whose lanes 0..n-1 the n variables are, if one is. */
static LLVMValueRef vars_lanes(const llvm_fn *f, struct kir_var *const *vars, int n) {
	int lane;
	LLVMValueRef v = lane_vector(f, vars[0], &lane);
	if (!v || lane != 0 || LLVMGetVectorSize(LLVMTypeOf(v)) != (unsigned)n) return NULL;
	for (int l = 1; l < n; l++) {
		int at;
		if (lane_vector(f, vars[l], &at) != v || at != l) return NULL;
	}
	return v;
}

static bool same_expr(const kir_expr *a, const kir_expr *b) {
	if (a == b) return true;
	if (!a || !b || a->kind != b->kind || a->type != b->type || a->op != b->op) return false;
	switch (a->kind) {
	case KIR_E_INT: return a->i == b->i;
	case KIR_E_FLOAT: return a->f == b->f || (a->f != a->f && b->f != b->f);
	case KIR_E_VAR: return a->var == b->var;
	case KIR_E_SIZE:
	case KIR_E_LOCAL_ID: return a->size == b->size;
	case KIR_E_LOAD: return a->buf == b->buf && same_expr(a->a, b->a);
	default: return same_expr(a->a, b->a) && same_expr(a->b, b->b) && same_expr(a->c, b->c);
	}
}

/* Whether index b is index a plus d, d a constant (the forms GEMM stores
 * and loads take: base + c, (base + c) + d ...). */
static bool index_offset(const kir_expr *a, const kir_expr *b, int64_t *d) {
	if (same_expr(a, b)) return *d = 0, true;
	/* base against base + d, and back */
	if (b->kind == KIR_E_BINARY && b->op == KIR_ADD && b->b->kind == KIR_E_INT && same_expr(a, b->a))
		return *d = b->b->i, true;
	if (a->kind == KIR_E_BINARY && a->op == KIR_ADD && a->b->kind == KIR_E_INT && same_expr(a->a, b))
		return *d = -a->b->i, true;
	if (a->kind != b->kind || a->type != b->type) return false;
	if (a->kind == KIR_E_INT) return *d = b->i - a->i, true;
	if (a->kind != KIR_E_BINARY || a->op != b->op || (a->op != KIR_ADD && a->op != KIR_SUB)) return false;
	if (same_expr(a->b, b->b)) return index_offset(a->a, b->a, d);
	if (a->op == KIR_ADD && same_expr(a->a, b->a)) return index_offset(a->b, b->b, d);
	return false;
}

/* Whether expression b may be lane i of a run whose lane 0 is a: the same
 * shape, variables and constants free to differ, loads of the same buffer
 * at the same index or i elements on. */
static bool lane_of(const kir_expr *a, const kir_expr *b, int i) {
	if (a == b) return true;
	if (!a || !b || a->kind != b->kind || a->type != b->type || a->op != b->op) return false;
	switch (a->kind) {
	case KIR_E_INT:
	case KIR_E_FLOAT:
	case KIR_E_VAR: return true;
	case KIR_E_SIZE:
	case KIR_E_LOCAL_ID: return a->size == b->size;
	case KIR_E_LOAD: {
		int64_t d;
		return a->buf == b->buf && index_offset(a->a, b->a, &d) && (d == 0 || d == i);
	}
	default: return lane_of(a->a, b->a, i) && lane_of(a->b, b->b, i) && lane_of(a->c, b->c, i);
	}
}

static bool reads_var(const kir_expr *e, const kir_var *v) {
	if (!e) return false;
	if (e->kind == KIR_E_VAR) return e->var == v;
	return reads_var(e->a, v) || reads_var(e->b, v) || reads_var(e->c, v);
}

LLVMValueRef llvm_splat(llvm_cx *c, LLVMValueRef x, unsigned lanes) {
	LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), lanes);
	LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetUndef(vt), x, LLVMConstInt(c->i32, 0, 0), "");
	return LLVMBuildShuffleVector(c->b, v, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(c->i32, lanes)), "splat");
}

/* The n expressions e[0..n) (of one shape: lane_of) as one <n x T>. */
static LLVMValueRef lanes(llvm_fn *f, const kir_expr *const *e, int n) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	const kir_expr *e0 = e[0];
	bool same = true;
	for (int i = 1; i < n && same; i++) same = same_expr(e0, e[i]);
	if (same) {
		LLVMValueRef x = llvm_expr(f, e0);
		return x ? llvm_splat(c, x, (unsigned)n) : NULL;
	}
	const kir_expr *sub[64];
	switch (e0->kind) {
	case KIR_E_VAR: {
		struct kir_var *vars[64];
		for (int i = 0; i < n; i++) vars[i] = e[i]->var;
		LLVMValueRef v = vars_lanes(f, vars, n);
		if (v) return v;
		break;
	}
	case KIR_E_LOAD: {
		int64_t d;
		bool consecutive = e0->buf->space == KIR_MEM_GLOBAL && (e0->type == TBC_DT_F32 || e0->type == TBC_DT_F64) &&
				   e0->buf->dtype == e0->type;
		for (int i = 1; i < n && consecutive; i++) consecutive = index_offset(e0->a, e[i]->a, &d) && d == i;
		if (!consecutive) break;
		LLVMValueRef at = llvm_expr(f, e0->a);
		if (!at) return NULL;
		LLVMTypeRef et = llvm_type(c, e0->type);
		LLVMValueRef ld = LLVMBuildLoad2(b, LLVMVectorType(et, (unsigned)n), LLVMBuildInBoundsGEP2(b, et, f->bufs[e0->buf->id], &at, 1, ""), "");
		LLVMSetAlignment(ld, (unsigned)tbc_dtype_size(e0->type));
		llvm_mark_access(f, ld);
		return ld;
	}
	case KIR_E_BINARY: {
		if (!llvm_is_float(e0->a->type)) break;
		for (int i = 0; i < n; i++) sub[i] = e[i]->a;
		LLVMValueRef x = lanes(f, sub, n);
		for (int i = 0; i < n; i++) sub[i] = e[i]->b;
		LLVMValueRef y = x ? lanes(f, sub, n) : NULL;
		if (!y) return NULL;
		LLVMValueRef v = llvm_float_arith(f, (kir_binop)e0->op, x, y);
		if (v) return v;
		break;
	}
	case KIR_E_SELECT: {
		bool one_cond = true;
		for (int i = 1; i < n && one_cond; i++) one_cond = same_expr(e0->a, e[i]->a);
		LLVMValueRef cond;
		if (one_cond) {
			cond = llvm_expr(f, e0->a);
		} else {
			for (int i = 0; i < n; i++) sub[i] = e[i]->a;
			cond = lanes(f, sub, n);
		}
		for (int i = 0; i < n; i++) sub[i] = e[i]->b;
		LLVMValueRef x = cond ? lanes(f, sub, n) : NULL;
		for (int i = 0; i < n; i++) sub[i] = e[i]->c;
		LLVMValueRef y = x ? lanes(f, sub, n) : NULL;
		return y ? LLVMBuildSelect(b, cond, x, y, "") : NULL;
	}
	default: break;
	}
	/* lane by lane */
	LLVMValueRef v = NULL;
	for (int i = 0; i < n; i++) {
		LLVMValueRef x = llvm_expr(f, e[i]);
		if (!x) return NULL;
		if (!v) v = LLVMGetUndef(LLVMVectorType(LLVMTypeOf(x), (unsigned)n));
		v = LLVMBuildInsertElement(b, v, x, LLVMConstInt(c->i32, (unsigned long long)i, 0), "");
	}
	return v;
}

/* The sets from s on that form one vector: float variables, not reassociated,
 * each value lane i of the first's shape reading no variable set before it
 * in the run, at most a vector's width.  1 where s starts no run. */
static int set_run(const llvm_fn *f, const kir_stmt *s) {
	if (s->kind != KIR_S_SET || (s->var->type != TBC_DT_F32 && s->var->type != TBC_DT_F64) || s->var->reassoc)
		return 1;
	int L = f->c->vector_bytes / (int)tbc_dtype_size(s->var->type);
	if (L > 64) L = 64;
	const kir_stmt *run[64];
	int n = 0;
	for (const kir_stmt *t = s; t && n < L; t = t->next) {
		if (t->kind != KIR_S_SET || t->var->type != s->var->type || t->var->reassoc || !lane_of(s->value, t->value, n))
			break;
		bool reads = false;
		for (int i = 0; i < n && !reads; i++) reads = run[i]->var == t->var || reads_var(t->value, run[i]->var);
		if (reads) break;
		run[n++] = t;
	}
	return n > 0 ? n : 1;
}

/* A run of n sets (set_run) as one vector, each variable's slot given its
 * lane, and the lanes remembered for the stores after them. */
static const kir_stmt *emit_set_run(llvm_fn *f, const kir_stmt *s, int n) {
	llvm_cx *c = f->c;
	const kir_expr *vals[64] = {0};
	const kir_stmt *t = s;
	for (int i = 0; i < n; i++, t = t->next) vals[i] = t->value;
	llvm_memo_clear(f);
	LLVMValueRef v = lanes(f, vals, n);
	llvm_memo_clear(f);
	if (!v) return NULL;
	for (int i = 0; i < n; i++, s = s->next) {
		int id = s->var->id;
		LLVMBuildStore(c->b, LLVMBuildExtractElement(c->b, v, LLVMConstInt(c->i32, (unsigned long long)i, 0), ""), f->vars[id]);
		lane_record(f, s->var, v, i);
	}
	return s;
}

/* A store of a local's value to buf[v + c] (v a local, c a constant; the
 * index v alone: c = 0): its v and c; false for any other store. */
static bool row_store(const kir_stmt *s, const kir_var **v, int64_t *c) {
	if (s->kind != KIR_S_STORE || s->buf->space != KIR_MEM_GLOBAL || s->value->kind != KIR_E_VAR ||
	    (s->buf->dtype != TBC_DT_F32 && s->buf->dtype != TBC_DT_F64))
		return false;
	const kir_expr *i = s->index;
	*c = 0;
	if (i->kind == KIR_E_BINARY && i->op == KIR_ADD && i->b->kind == KIR_E_INT) *c = i->b->i, i = i->a;
	*v = i->kind == KIR_E_VAR ? i->var : NULL;
	return *v != NULL;
}

/* The stores from s on that store locals to buf[v + c], buf[v + c + 1],
 * ...: how many (1 where s starts no run).  Their values are locals, so
 * storing them all at once reads what storing them one by one would. */
static int row_run(const kir_stmt *s) {
	const kir_var *v, *w;
	int64_t c0, c;
	if (!row_store(s, &v, &c0)) return 1;
	int n = 1;
	for (const kir_stmt *t = s->next; t && n < 64 && row_store(t, &w, &c) && t->buf == s->buf && w == v && c == c0 + n;
	     t = t->next)
		n++;
	return n;
}

/* A run of n row stores as vectors of the description's width (the last
 * one narrower): the values a build vector, which LLVM's SLP vectorizer
 * starts from, and a store per vector rather than per element (its
 * dead-store elimination over a GEMM tile's hundreds of scalar stores was
 * a quarter of -O2's time on a convolution). */
static const kir_stmt *emit_row_run(llvm_fn *f, const kir_stmt *s, int n) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	const kir_buffer *buf = s->buf;
	LLVMTypeRef et = llvm_mem_type(c, buf->dtype);
	int es = (int)tbc_dtype_size(buf->dtype), L = c->vector_bytes / es > 1 ? c->vector_bytes / es : 1;
	LLVMValueRef at = llvm_expr(f, s->index);
	if (!at || !et) return NULL;
	for (int j = 0; j < n; j += L) {
		int w = n - j < L ? n - j : L;
		const kir_expr *vals[64] = {0};
		for (int l = 0; l < w; l++, s = s->next) vals[l] = s->value;
		LLVMValueRef v = lanes(f, vals, w);
		if (!v) return NULL;
		LLVMValueRef i = LLVMBuildAdd(b, at, LLVMConstInt(c->i64, (unsigned long long)j, 0), "");
		LLVMValueRef st = LLVMBuildStore(b, v, LLVMBuildInBoundsGEP2(b, et, f->bufs[buf->id], &i, 1, ""));
		LLVMSetAlignment(st, (unsigned)es);
		llvm_mark_access(f, st);
	}
	return s;
}

void llvm_stmts(llvm_fn *f, const kir_stmt *s) {
	while (s && !f->c->failed) {
		/* Not in a loop LLVM's loop vectorizer is to widen (in_parallel):
		 * a vector value in its body stops it ("instruction return type
		 * cannot be vectorized"), and the loop then ran scalar -- a
		 * max pool's loop over a padded plane, whose first two taps
		 * were a run (docs/performance.md, 2026-11-27). */
		bool pack = !f->in_parallel;
		int sets = f->set_lanes && pack ? set_run(f, s) : 1;
		if (sets > 1) {
			s = emit_set_run(f, s, sets);
			continue;
		}
		int n = f->c->hooks->row_stores && pack ? row_run(s) : 1;
		if (n == 1) {
			llvm_stmt(f, s);
			s = s->next;
		} else {
			llvm_memo_clear(f);
			s = emit_row_run(f, s, n);
		}
	}
}

/* The parameters of kernel k's function: the hooks' environment (the
 * host table) when they have one, a pointer per buffer, an i64 per size, and
 * the status pointer of a kernel that can fail.  params holds n_params(k). */
static int kernel_params(llvm_cx *c, const kir_kernel *k, LLVMTypeRef *params) {
	int first = c->hooks->env_param ? 1 : 0;
	int n = first + k->n_buffers + k->n_sizes + (kir_kernel_can_fail(k) ? 1 : 0);
	if (!params) return n;
	if (first) params[0] = c->ptr;
	for (int i = 0; i < k->n_buffers; i++) params[first + i] = c->buf_ptr;
	for (int i = 0; i < k->n_sizes; i++) params[first + k->n_buffers + i] = c->i64;
	if (kir_kernel_can_fail(k)) params[n - 1] = c->buf_ptr;
	return n;
}

LLVMTypeRef llvm_kernel_type(llvm_cx *c, const kir_kernel *k) {
	int n = kernel_params(c, k, NULL);
	LLVMTypeRef *params = calloc((size_t)n + 1, sizeof *params);
	if (!params) return NULL;
	kernel_params(c, k, params);
	LLVMTypeRef t = LLVMFunctionType(c->void_t, params, (unsigned)n, 0);
	free(params);
	return t;
}

LLVMValueRef llvm_emit_kernel(llvm_cx *c, const kir_kernel *k, int index) {
	bool can_fail = kir_kernel_can_fail(k);
	int first = c->hooks->env_param ? 1 : 0; /* the first buffer's parameter */
	int n_params = kernel_params(c, k, NULL);
	LLVMTypeRef *params = calloc((size_t)n_params + 1, sizeof *params);
	llvm_fn f = {.c = c, .k = k, .index = index};
	f.bufs = calloc((size_t)k->n_buffers + 1, sizeof *f.bufs);
	f.sizes = calloc((size_t)k->n_sizes + 1, sizeof *f.sizes);
	f.vars = calloc((size_t)k->n_vars + 1, sizeof *f.vars);
	f.locals = calloc((size_t)k->n_locals + 1, sizeof *f.locals);
	LLVMValueRef fn = NULL;
	if (!params || !f.bufs || !f.sizes || !f.vars || !f.locals || !lanes_alloc(&f)) {
		llvm_fail(c, TBC_ERR_NO_MEMORY, "out of memory");
		goto done;
	}
	for (int i = 0; i < k->n_buffers; i++)
		if (!llvm_mem_type(c, k->buffers[i]->dtype)) goto done;
	const llvm_hooks *h = c->hooks;
	bool groups = h->local_buffer && h->local_id && h->barrier;
	if ((kir_kernel_is_grouped(k) || k->n_locals) && !groups) { /* the parallel form: this target has no work-groups */
		llvm_fail(c, TBC_ERR_UNSUPPORTED, "kernel %s has work-groups, which this target does not run", k->name);
		goto done;
	}
	kernel_params(c, k, params);
	char name[128];
	snprintf(name, sizeof name, "tbc.k%d.%s", index, k->name);
	fn = llvm_new_function(c, name, LLVMFunctionType(c->void_t, params, (unsigned)n_params, 0));
	f.fn = fn;
	f.group = distinct_node(c);
	llvm_prefer_tiled_width(&f, fn);
	if (first) f.env = LLVMGetParam(fn, 0);
	for (int i = 0; i < k->n_buffers; i++) {
		f.bufs[i] = LLVMGetParam(fn, (unsigned)(first + i));
		LLVMSetValueName2(f.bufs[i], k->buffers[i]->name, strlen(k->buffers[i]->name));
	}
	for (int i = 0; i < k->n_sizes; i++) f.sizes[i] = LLVMGetParam(fn, (unsigned)(first + k->n_buffers + i));
	if (can_fail) f.status = LLVMGetParam(fn, (unsigned)(n_params - 1));
	LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
	llvm_var_slots(&f);
	for (int i = 0; i < k->n_locals && !c->failed; i++) f.locals[i] = h->local_buffer(&f, k->locals[i]);
	if (!c->failed) llvm_stmts(&f, k->body);
	LLVMBuildRetVoid(c->b);
done:
	free(params);
	llvm_fn_free(&f);
	return c->failed ? NULL : fn;
}
