/* Kernels and shape rules of the conv family (rows of ir/ops.def). */
#include "kernels.h"

bool tbc_shape_Conv(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Conv(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ConvTranspose(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ConvTranspose(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_DeformConv(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_DeformConv(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ConvInteger(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ConvInteger(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_QLinearConv(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_QLinearConv(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_CausalConvWithState(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_CausalConvWithState(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_AveragePool(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_AveragePool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_MaxPool(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_MaxPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_LpPool(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_LpPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_GlobalAveragePool(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_GlobalAveragePool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_GlobalMaxPool(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_GlobalMaxPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_GlobalLpPool(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_GlobalLpPool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_MaxUnpool(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_MaxUnpool(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_RoiAlign(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_RoiAlign(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Col2Im(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Col2Im(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_GridSample(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_GridSample(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_AffineGrid(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_AffineGrid(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Resize(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Resize(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_QuantizeLinear(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_QuantizeLinear(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_DequantizeLinear(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_DequantizeLinear(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_DynamicQuantizeLinear(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_DynamicQuantizeLinear(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
