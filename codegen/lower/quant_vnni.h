/* Integer GEMMs of 8-bit operands made of kernel IR's byte dot product
 * (kir_dot4: u8 x i8 in groups of 4 summed into int32), for targets that
 * declare it (tbc_target_desc.dot4_u8s8: AVX-512 VNNI).  See
 * codegen/lower/quant_vnni.c. */
#ifndef TBC_CODEGEN_LOWER_QUANT_VNNI_H
#define TBC_CODEGEN_LOWER_QUANT_VNNI_H

#include "codegen/lower/lower_gemm.h"

/* The operands of y = sum_k (a - a_zp)(b - b_zp): b a constant K x N
 * matrix (packed for the kernel when lowering), the zero points NULL
 * (none), per tensor, per row of a (az_row) or per column of b (bz_col).
 * Or b packed by a kernel (bpk: a convolution's activations,
 * quant_conv.c): batch t's B at t * bstride, its group g of 4 rows at
 * g * ldb, column c's 4 bytes at 4 c (i8: b's values less cb, 128 where b
 * is u8; 0 past N), bcs its column sums less K zb' (zb' = b_zp - cb) at
 * t * ncs + c; K and N given; a's per-row zero point of batch t at
 * (t mod a_groups) M + row.  za_add is added to a's zero point (a's
 * values moved by that much when lowering). */
typedef struct qgemm_vnni {
	const tbc_value *b;
	kir_buffer *az, *bz; /* the zero points' buffers in the kernel, or NULL */
	const tbc_value *bzv; /* b's zero point, to fold when it is a constant */
	bool az_row, bz_col;
	kir_buffer *bpk, *bcs;
	int64_t K, N, bstride, ldb, ncs, cb, a_groups, za_add;
} qgemm_vnni;

/* The columns of the register tile qgemm_vnni_generate takes for N
 * columns (a multiple of 16): B packed by a kernel is read a tile's
 * columns at a time, so its columns are padded to a multiple of this. */
int qgemm_vnni_tile_cols(const lower_cx *cx, int64_t N);

/* Whether the target, the operand types and shapes take this form: a u8 or
 * i8, b a 2-D u8 or i8 constant of static K >= 4 and N >= 16, y's batch
 * matrices contiguous.  TBC_VNNI=0 in the environment: never (the float
 * form, for measuring one against the other). */
bool qgemm_vnni_wanted(const lower_cx *cx, const tbc_value *a, const tbc_value *b);
/* The same rule for operand types a and b of K x N, whatever b is (a
 * convolution's activations, packed by a kernel). */
bool qgemm_vnni_fits(const lower_cx *cx, tbc_dtype a, tbc_dtype b, int64_t K, int64_t N);

/* The kernel's nest for s (s->ct int32; s->a, s->y, s->base, s->epi as the
 * scalar form has them; s->b unused: b is packed from q->b).  NULL when out
 * of memory. */
kir_stmt *qgemm_vnni_generate(lk *l, const gemm_spec *s, const qgemm_vnni *q);

#endif
