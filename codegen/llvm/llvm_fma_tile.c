/* kir_fma_tile -> llvm.fma on vectors, for targets whose description
 * declares it (tbc_target_desc.fma_tile; llvm_hooks.fma_tile: a CPU with
 * FMA).
 *
 * The tile's mr x nc sums live in mr x nv vectors of the description's
 * width (llvm_cx.vector_bytes: 16 f32 on AVX-512, 8 on AVX2; the last
 * vector of a row holds what is left of nc) for the whole k loop: each k
 * step loads nv vectors of b (a row's nc contiguous columns), broadcasts
 * each row's element of a, and issues mr x nv llvm.fma calls -- one
 * rounding per product, the statement's semantics (kir.h) exactly.  The
 * sums come from the scalar locals (or, resuming a K block, from vector
 * loads of y) and go back to them after the loop, where the GEMM's
 * epilogue reads them.  Written so, LLVM has no scalar sums to pack (its
 * SLP vectorizer, with the stores to and loads from 256 locals, took most
 * of its time on a convolution). */
#include "codegen/llvm/llvm_emit.h"

enum { MAX_VECS = KIR_FMA_TILE_MAX_MR * KIR_FMA_TILE_MAX_NC };

/* The declaration of llvm.fma for vectors of type vt. */
static LLVMValueRef fma_decl(llvm_cx *c, LLVMTypeRef vt, LLVMTypeRef *fn_type) {
	static const char name[] = "llvm.fma";
	unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
	*fn_type = LLVMIntrinsicGetType(c->ctx, id, &vt, 1);
	return LLVMGetIntrinsicDeclaration(c->mod, id, &vt, 1);
}

void llvm_fma_tile(llvm_fn *f, const kir_fma_tile *m) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	LLVMTypeRef et = m->a->dtype == TBC_DT_F64 ? c->f64 : c->f32;
	int es = m->a->dtype == TBC_DT_F64 ? 8 : 4;
	int L = c->vector_bytes / es > 0 ? c->vector_bytes / es : 1;
	if (L > m->nc) L = m->nc;
	/* vectors of a row: nv - 1 of L lanes, the last of w (1 .. L) */
	int nv = (m->nc + L - 1) / L, w = m->nc - (nv - 1) * L, n = m->mr * nv;
	if (n > MAX_VECS) {
		llvm_fail(c, TBC_ERR_INTERNAL, "an fma tile of %d x %d vectors", m->mr, nv);
		return;
	}
	LLVMTypeRef vt = LLVMVectorType(et, (unsigned)L), wt = LLVMVectorType(et, (unsigned)w);
	LLVMTypeRef fma_t, fmaw_t;
	LLVMValueRef fma = fma_decl(c, vt, &fma_t), fmaw = fma_decl(c, wt, &fmaw_t);

	LLVMValueRef a_at[KIR_FMA_TILE_MAX_MR];
	for (int r = 0; r < m->mr; r++)
		if (!(a_at[r] = llvm_expr(f, m->a_at[r]))) return;
	LLVMValueRef a_ks = llvm_expr(f, m->a_ks), b_at = llvm_expr(f, m->b_at), ldb = llvm_expr(f, m->ldb);
	LLVMValueRef klo = llvm_expr(f, m->klo), khi = llvm_expr(f, m->khi);
	if (!a_ks || !b_at || !ldb || !klo || !khi) return;
	LLVMValueRef abuf = f->bufs[m->a->id], bbuf = f->bufs[m->b->id];

	/* The sums in, as vectors: from the locals, or from y where the tile
	 * resumes -- a vector load of each row's contiguous columns and one
	 * select per vector, not a load and a select per sum. */
	LLVMValueRef init[MAX_VECS];
	LLVMValueRef resume = m->y ? llvm_expr(f, m->resume) : NULL, y_at[KIR_FMA_TILE_MAX_MR];
	if (m->y) {
		if (!resume) return;
		for (int r = 0; r < m->mr; r++)
			if (!(y_at[r] = llvm_expr(f, m->y_at[r]))) return;
	}
	for (int i = 0; i < n; i++) {
		int r = i / nv, j = i % nv;
		init[i] = llvm_vars_vector(f, &m->acc[r * m->nc + j * L], j == nv - 1 ? w : L, et);
		if (m->y) {
			LLVMValueRef at = LLVMBuildAdd(b, y_at[r], LLVMConstInt(c->i64, (unsigned long long)(j * L), 0), "");
			LLVMValueRef y = LLVMBuildLoad2(b, j == nv - 1 ? wt : vt, LLVMBuildInBoundsGEP2(b, et, f->bufs[m->y->id], &at, 1, ""), "y");
			LLVMSetAlignment(y, (unsigned)es);
			init[i] = LLVMBuildSelect(b, resume, y, init[i], "");
		}
	}

	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "fma.loop");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "fma.done");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, klo, khi, ""), loop, done);

	LLVMPositionBuilderAtEnd(b, loop);
	LLVMValueRef k = LLVMBuildPhi(b, c->i64, "k");
	LLVMValueRef acc[MAX_VECS], next[MAX_VECS];
	for (int i = 0; i < n; i++) acc[i] = LLVMBuildPhi(b, i % nv == nv - 1 ? wt : vt, "acc");
	LLVMValueRef brow = LLVMBuildAdd(b, b_at, LLVMBuildMul(b, k, ldb, ""), "");
	LLVMValueRef bv[KIR_FMA_TILE_MAX_NC];
	for (int j = 0; j < nv; j++) {
		LLVMValueRef at = LLVMBuildAdd(b, brow, LLVMConstInt(c->i64, (unsigned long long)(j * L), 0), "");
		LLVMValueRef p = LLVMBuildInBoundsGEP2(b, et, bbuf, &at, 1, "");
		bv[j] = LLVMBuildLoad2(b, j == nv - 1 ? wt : vt, p, "b");
		LLVMSetAlignment(bv[j], (unsigned)es);
	}
	LLVMValueRef koff = LLVMBuildMul(b, k, a_ks, "");
	for (int r = 0; r < m->mr; r++) {
		LLVMValueRef at = LLVMBuildAdd(b, a_at[r], koff, "");
		LLVMValueRef a = LLVMBuildLoad2(b, et, LLVMBuildInBoundsGEP2(b, et, abuf, &at, 1, ""), "a");
		LLVMSetAlignment(a, (unsigned)es);
		LLVMValueRef av = llvm_splat(c, a, (unsigned)L), aw = w == L ? av : llvm_splat(c, a, (unsigned)w);
		for (int j = 0; j < nv; j++) {
			bool last = j == nv - 1;
			LLVMValueRef args[3] = {last ? aw : av, bv[j], acc[r * nv + j]};
			next[r * nv + j] = LLVMBuildCall2(b, last ? fmaw_t : fma_t, last ? fmaw : fma, args, 3, "");
		}
	}
	LLVMValueRef k1 = LLVMBuildAdd(b, k, LLVMConstInt(c->i64, 1, 0), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
	llvm_mark_loop(f, LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, k1, khi, ""), loop, done), false);
	LLVMAddIncoming(k, &klo, &pre, 1);
	LLVMAddIncoming(k, &k1, &latch, 1);
	for (int i = 0; i < n; i++) {
		LLVMAddIncoming(acc[i], &init[i], &pre, 1);
		LLVMAddIncoming(acc[i], &next[i], &latch, 1);
	}

	/* The sums out, into the scalar locals. */
	LLVMPositionBuilderAtEnd(b, done);
	LLVMValueRef out[MAX_VECS];
	for (int i = 0; i < n; i++) {
		out[i] = LLVMBuildPhi(b, LLVMTypeOf(init[i]), "sum");
		LLVMAddIncoming(out[i], &init[i], &pre, 1);
		LLVMAddIncoming(out[i], &next[i], &latch, 1);
	}
	for (int i = 0; i < n; i++) {
		int r = i / nv, j = i % nv;
		llvm_vector_vars(f, out[i], &m->acc[r * m->nc + j * L], j == nv - 1 ? w : L);
	}
}
