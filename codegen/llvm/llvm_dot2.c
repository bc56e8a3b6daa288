/* kir_dot2 -> vdpbf16ps (x86 AVX512_BF16), for targets whose description
 * declares it (tbc_target_desc.dot_bf16; llvm_cx.dot_bf16).
 *
 * The micro-tile's mr x 16 nv f32 sums live in mr x nv zmm registers for
 * the whole k loop: each pair step loads nv vectors of b (16 columns' k
 * pairs, 64 bytes each, laid out so by lowering), broadcasts each row's
 * a pair as one 32-bit word, and issues mr x nv vdpbf16ps.  An odd kn's last
 * pair broadcasts the 16-bit a element with a zero above it (the second
 * element reads as +0; b's is the layout's zero padding).  The instruction's
 * arithmetic is what kernel IR's evaluator computes for the statement
 * (kir.h): the sums come back to the scalar locals after the loop, where the
 * GEMM's epilogue reads them. */
#include <string.h>

#include "codegen/llvm/llvm_emit.h"

enum { MAX_ACC = 32 };

void llvm_dot2(llvm_fn *f, const kir_dot2 *m) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	int nacc = m->mr * m->nv, nc = 16 * m->nv;
	if (nacc > MAX_ACC || m->mr > 8) {
		llvm_fail(c, TBC_ERR_INTERNAL, "a dot2 of %d x %d vectors", m->mr, m->nv);
		return;
	}
	static const char name[] = "llvm.x86.avx512bf16.dpbf16ps.512";
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	if (!id) {
		llvm_fail(c, TBC_ERR_INTERNAL, "LLVM has no %s", name);
		return;
	}
	LLVMValueRef dp = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
	LLVMTypeRef dp_t = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
	LLVMTypeRef v16f = LLVMVectorType(c->f32, 16);
	LLVMTypeRef v32bf = LLVMVectorType(LLVMBFloatTypeInContext(c->ctx), 32);

	LLVMValueRef a_at[8], b_at = llvm_expr(f, m->b_at), ldb = llvm_expr(f, m->ldb), kn = llvm_expr(f, m->kn);
	for (int r = 0; r < m->mr; r++)
		if (!(a_at[r] = llvm_expr(f, m->a_at[r]))) return;
	if (!b_at || !ldb || !kn) return;
	LLVMValueRef abuf = f->bufs[m->a->id], bbuf = f->bufs[m->b->id];

	/* The sums into vectors. */
	LLVMValueRef acc0[MAX_ACC];
	for (int r = 0; r < m->mr; r++)
		for (int v = 0; v < m->nv; v++) acc0[r * m->nv + v] = llvm_vars_vector(f, &m->acc[r * nc + v * 16], 16, c->f32);
	LLVMValueRef one = LLVMConstInt(c->i64, 1, 0);
	LLVMValueRef pairs = LLVMBuildAShr(b, kn, one, "pairs");
	LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, kn, one, ""), LLVMConstInt(c->i64, 0, 0), "odd");

	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "dot2");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "dot2_pair");
	LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "dot2_tail");
	LLVMBasicBlockRef last = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "dot2_odd");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "dot2_done");
	LLVMBuildBr(b, head);
	LLVMPositionBuilderAtEnd(b, head);
	LLVMValueRef p = LLVMBuildPhi(b, c->i64, "p"), acc[MAX_ACC];
	for (int i = 0; i < nacc; i++) acc[i] = LLVMBuildPhi(b, v16f, "acc");
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, p, pairs, ""), body, tail);

	/* One pair step at p; a_pair gives row r's broadcast word.  Returns
	 * the new sums in out. */
	LLVMValueRef next[MAX_ACC], odd_acc[MAX_ACC];
	for (int step = 0; step < 2; step++) {
		LLVMPositionBuilderAtEnd(b, step == 0 ? body : last);
		LLVMValueRef at = step == 0 ? p : pairs;
		LLVMValueRef row = LLVMBuildAdd(b, b_at, LLVMBuildMul(b, at, ldb, ""), "");
		LLVMValueRef bv[4];
		for (int v = 0; v < m->nv; v++) {
			LLVMValueRef i = LLVMBuildAdd(b, row, LLVMConstInt(c->i64, (unsigned long long)(32 * v), 0), "");
			LLVMValueRef ptr = LLVMBuildInBoundsGEP2(b, c->i16, bbuf, &i, 1, "");
			LLVMValueRef ld = LLVMBuildLoad2(b, v32bf, ptr, "b");
			LLVMSetAlignment(ld, 2);
			bv[v] = ld;
		}
		for (int r = 0; r < m->mr; r++) {
			LLVMValueRef i = LLVMBuildAdd(b, a_at[r], LLVMBuildShl(b, at, one, ""), "");
			LLVMValueRef ptr = LLVMBuildInBoundsGEP2(b, c->i16, abuf, &i, 1, "");
			LLVMValueRef word;
			if (step == 0) {
				word = LLVMBuildLoad2(b, c->i32, ptr, "a");
			} else { /* the odd kn's last element, +0 above it */
				word = LLVMBuildZExt(b, LLVMBuildLoad2(b, c->i16, ptr, "a"), c->i32, "");
			}
			LLVMSetAlignment(step == 0 ? word : LLVMGetOperand(word, 0), 2);
			LLVMValueRef av = LLVMBuildBitCast(b, llvm_splat(c, word, 16), v32bf, "");
			for (int v = 0; v < m->nv; v++) {
				LLVMValueRef args[3] = {acc[r * m->nv + v], av, bv[v]};
				LLVMValueRef out = LLVMBuildCall2(b, dp_t, dp, args, 3, "");
				(step == 0 ? next : odd_acc)[r * m->nv + v] = out;
			}
		}
		if (step == 0) {
			LLVMValueRef p1 = LLVMBuildAdd(b, p, one, "");
			LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
			llvm_mark_loop(f, LLVMBuildBr(b, head), false);
			LLVMBasicBlockRef in[2] = {pre, from};
			LLVMValueRef pv[2] = {LLVMConstInt(c->i64, 0, 0), p1};
			LLVMAddIncoming(p, pv, in, 2);
			for (int k = 0; k < nacc; k++) {
				LLVMValueRef av2[2] = {acc0[k], next[k]};
				LLVMAddIncoming(acc[k], av2, in, 2);
			}
		} else {
			LLVMBuildBr(b, done);
		}
	}
	LLVMPositionBuilderAtEnd(b, tail);
	LLVMBuildCondBr(b, odd, last, done);
	LLVMPositionBuilderAtEnd(b, done);
	LLVMValueRef sums[MAX_ACC];
	for (int k = 0; k < nacc; k++) { /* the phis first: the top of the block */
		sums[k] = LLVMBuildPhi(b, v16f, "sums");
		LLVMValueRef vals[2] = {acc[k], odd_acc[k]};
		LLVMBasicBlockRef in[2] = {tail, last};
		LLVMAddIncoming(sums[k], vals, in, 2);
	}
	for (int r = 0; r < m->mr; r++)
		for (int v = 0; v < m->nv; v++) llvm_vector_vars(f, sums[r * m->nv + v], &m->acc[r * nc + v * 16], 16);
}
