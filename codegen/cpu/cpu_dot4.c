/* Kernel IR's byte dot-product tile (kir_dot4, codegen/kir/kir.h) as
 * vpdpbusd: AVX-512 VNNI's on 512-bit vectors of L = 16 lanes, or
 * AVX-VNNI's on 256-bit vectors of L = 8 (llvm_cx.dot4_lanes):
 *
 *   the mr x nc sums live in mr * nc / L vector registers across a loop
 *   over the groups of 4 along k: per group, each row's 4 bytes of a are
 *   loaded as one i32 (its sign bits flipped for an i8 a) and broadcast,
 *   each L-column slice of b's group (4 L bytes: L columns x 4) loaded
 *   once, and every (row, slice) pair updated by one vpdpbusd;
 *   the sums come from and go back to the accumulators' scalar locals
 *   before and after the loop, so the rest of the kernel (the epilogue,
 *   the k tail) is ordinary kernel IR.
 *
 * Only a target whose description declares dot4 receives one
 * (tbc_target_desc.dot4_u8s8, from the machine's avx512vnni or avxvnni), and the
 * artifact then lists that feature among the features the runtime checks
 * before it runs any code. */
#include <string.h>

#include "codegen/cpu/cpu.h"

#define DOT4_MAX_VECS (KIR_DOT4_MAX_MR * 8) /* nc 64 in 8-lane vectors */

void cpu_emit_dot4(llvm_fn *f, const kir_dot4 *m) {
	llvm_cx *c = f->c;
	LLVMBuilderRef b = c->b;
	const int L = c->dot4_lanes == 8 ? 8 : 16;
	LLVMTypeRef v16 = LLVMVectorType(c->i32, (unsigned)L);
	int nv = m->nc / L, n = m->mr * nv;
	/* the 256-bit form is AVX-VNNI's VEX encoding where the machine has no AVX-512 */
	const char *iname = L == 16 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256";
	unsigned id = LLVMLookupIntrinsicID(iname, strlen(iname));
	LLVMValueRef ifn = LLVMGetIntrinsicDeclaration(c->mod, id, NULL, 0);
	LLVMTypeRef ity = LLVMIntrinsicGetType(c->ctx, id, NULL, 0);
	LLVMValueRef arow[KIR_DOT4_MAX_MR];
	for (int r = 0; r < m->mr; r++) {
		LLVMValueRef at = llvm_expr(f, m->a_at[r]);
		if (!at) return;
		arow[r] = LLVMBuildInBoundsGEP2(b, c->i8, f->bufs[m->a->id], &at, 1, "arow");
	}
	LLVMValueRef bat = llvm_expr(f, m->b_at), groups = llvm_expr(f, m->groups);
	if (!bat || !groups) return;
	LLVMValueRef bbase = LLVMBuildInBoundsGEP2(b, c->i8, f->bufs[m->b->id], &bat, 1, "bpanel");

	/* The sums in, as vectors. */
	LLVMValueRef init[DOT4_MAX_VECS];
	for (int r = 0; r < m->mr; r++)
		for (int j = 0; j < nv; j++) init[r * nv + j] = llvm_vars_vector(f, &m->acc[r * m->nc + L * j], L, c->i32);

	LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
	LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "dot4.loop");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, f->fn, "dot4.done");
	LLVMValueRef zero = LLVMConstInt(c->i64, 0, 0);
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, groups, zero, ""), loop, done);

	LLVMPositionBuilderAtEnd(b, loop);
	LLVMValueRef g = LLVMBuildPhi(b, c->i64, "g");
	LLVMValueRef acc[DOT4_MAX_VECS], next[DOT4_MAX_VECS];
	for (int i = 0; i < n; i++) acc[i] = LLVMBuildPhi(b, v16, "acc");
	LLVMValueRef koff = LLVMBuildShl(b, g, LLVMConstInt(c->i64, 2, 0), "");
	LLVMValueRef boff = LLVMBuildMul(b, g, LLVMConstInt(c->i64, (unsigned long long)m->ldb, 0), "");
	LLVMValueRef bvec[8];
	for (int j = 0; j < nv; j++) {
		LLVMValueRef off = LLVMBuildAdd(b, boff, LLVMConstInt(c->i64, (unsigned long long)(4 * L * j), 0), "");
		LLVMValueRef p = LLVMBuildInBoundsGEP2(b, c->i8, bbase, &off, 1, "");
		bvec[j] = LLVMBuildLoad2(b, v16, p, "b");
		LLVMSetAlignment(bvec[j], 1);
	}
	for (int r = 0; r < m->mr; r++) {
		LLVMValueRef p = LLVMBuildInBoundsGEP2(b, c->i8, arow[r], &koff, 1, "");
		LLVMValueRef a = LLVMBuildLoad2(b, c->i32, p, "a");
		LLVMSetAlignment(a, 1);
		/* ua(x) = x + 128 for a signed byte: its sign bit flipped */
		if (m->a->dtype == TBC_DT_I8) a = LLVMBuildXor(b, a, LLVMConstInt(c->i32, 0x80808080u, 0), "");
		LLVMValueRef ab = llvm_splat(c, a, (unsigned)L);
		for (int j = 0; j < nv; j++) {
			LLVMValueRef args[3] = {acc[r * nv + j], ab, bvec[j]};
			next[r * nv + j] = LLVMBuildCall2(b, ity, ifn, args, 3, "");
		}
	}
	LLVMValueRef g1 = LLVMBuildAdd(b, g, LLVMConstInt(c->i64, 1, 0), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
	LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, g1, groups, ""), loop, done);
	LLVMAddIncoming(g, &zero, &pre, 1);
	LLVMAddIncoming(g, &g1, &latch, 1);
	for (int i = 0; i < n; i++) {
		LLVMAddIncoming(acc[i], &init[i], &pre, 1);
		LLVMAddIncoming(acc[i], &next[i], &latch, 1);
	}

	/* The sums out, into the scalar locals. */
	LLVMPositionBuilderAtEnd(b, done);
	LLVMValueRef out[DOT4_MAX_VECS];
	for (int i = 0; i < n; i++) {
		out[i] = LLVMBuildPhi(b, v16, "sum");
		LLVMAddIncoming(out[i], &init[i], &pre, 1);
		LLVMAddIncoming(out[i], &next[i], &latch, 1);
	}
	for (int i = 0; i < n; i++) llvm_vector_vars(f, out[i], &m->acc[(i / nv) * m->nc + L * (i % nv)], L);
}
