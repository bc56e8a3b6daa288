/* Private to the conv family (ir/kernels/conv*.c): the sliding-window
 * geometry that Conv, ConvInteger, QLinearConv, DeformConv and the pools
 * share (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode), and
 * small helpers their shape rules and kernels both use, so that the shape a
 * rule infers and the shape a kernel produces come from one computation. */
#ifndef TBC_IR_KERNELS_CONV_UTIL_H
#define TBC_IR_KERNELS_CONV_UTIL_H

#include "kernels.h"

#define CONV_MAX_SPATIAL (TBC_MAX_RANK - 2)

typedef enum conv_autopad { AUTOPAD_NOTSET, AUTOPAD_SAME_UPPER, AUTOPAD_SAME_LOWER, AUTOPAD_VALID } conv_autopad;

/* One sliding window over nsp spatial dims.  in/out are -1 where unknown
 * (a symbolic dim at shape-inference time). */
typedef struct conv_geom {
	int nsp;
	conv_autopad auto_pad;
	bool ceil_mode;
	int64_t kernel[CONV_MAX_SPATIAL];
	int64_t stride[CONV_MAX_SPATIAL];
	int64_t dil[CONV_MAX_SPATIAL];
	int64_t pad_begin[CONV_MAX_SPATIAL]; /* explicit pads, then the resolved ones */
	int64_t pad_end[CONV_MAX_SPATIAL];
	int64_t in[CONV_MAX_SPATIAL];
	int64_t out[CONV_MAX_SPATIAL];
	bool keeps[CONV_MAX_SPATIAL]; /* out[i] == in[i] whatever in[i] is */
} conv_geom;

/* Reads kernel_shape (or takes kernel when the attribute is absent; kernel
 * may be NULL, then kernel_shape is required), strides, dilations (only when
 * use_dilations), pads, auto_pad and ceil_mode (only when use_ceil), and
 * validates them.  Returns NULL, or a message saying what is wrong. */
const char *conv_geom_read(conv_geom *g, const tbc_op *op, int nsp, const int64_t *kernel, bool use_dilations,
			   bool use_ceil);
/* Resolves the pads for auto_pad and computes out[] from in[] (in[i] -1:
 * out[i] -1).  Returns NULL, or a message (window larger than the input). */
const char *conv_geom_resolve(conv_geom *g);
/* Reads an auto_pad attribute; false when its value is unknown. */
bool conv_read_autopad(const tbc_op *op, conv_autopad *out);

/* ConvTranspose's geometry (ir/kernels/conv_transpose.c): pads resolved
 * from auto_pad or output_shape, out[] from in[] (kernel[i] < 0 where the
 * weight's dim is unknown; in[i] < 0 gives out[i] < 0 unless output_shape
 * fixes it).  Shared with its CPU lowering (codegen/lower/conv_more.c). */
typedef struct tconv_geom {
	int nsp;
	int64_t kernel[CONV_MAX_SPATIAL], stride[CONV_MAX_SPATIAL], dil[CONV_MAX_SPATIAL];
	int64_t out_pad[CONV_MAX_SPATIAL], pad_begin[CONV_MAX_SPATIAL], pad_end[CONV_MAX_SPATIAL];
	int64_t in[CONV_MAX_SPATIAL], out[CONV_MAX_SPATIAL];
	bool keeps[CONV_MAX_SPATIAL];
} tconv_geom;
const char *tconv_geom_make(tconv_geom *g, const tbc_op *op, int nsp, const int64_t *wk, const int64_t *in);

/* Sets dims[2..] of an output type from g: static where known, the input's
 * own dim where the window maps it to itself, fresh symbols otherwise. */
void conv_geom_type_dims(tbc_infer *cx, const conv_geom *g, const tbc_type *x, tbc_type *y);

/* A string attribute, dflt when absent (or malformed: never NULL). */
const char *conv_attr_str(const tbc_op *op, const char *name, const char *dflt);

/* Product of dims[from..rank). */
int64_t conv_prod(int from, int rank, const int64_t *dims);

/* Loads a whole tensor as doubles (malloc'd; NULL on failure). */
double *conv_load_all(const tbc_tensor *t);

/* float32 convolution by packed GEMM (conv_gemm.c): y = conv(x, w) + bias
 * for the resolved geometry g.  Sets *oom when scratch memory runs out. */
void conv_gemm_f32(const conv_geom *g, int64_t N, int64_t C, int64_t M, int64_t group, const float *x,
		   const float *w, const float *bias, float *y, bool *oom);

/* Largest finite value of a float dtype (0 for float64 and non-floats):
 * what the reference's saturating casts clip to. */
double conv_dtype_float_max(tbc_dtype dt);

/* Dtype sets. */
bool conv_is_float_dtype(tbc_dtype dt); /* f16, bf16, f32, f64 */
bool conv_is_int8_dtype(tbc_dtype dt);  /* int8, uint8 */

#endif
