/* Kernels and shape rules of the data family (rows of ir/ops.def). */
#include "kernels.h"

int tbc_interp_Identity(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Reshape(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Reshape(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Flatten(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Flatten(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Squeeze(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Squeeze(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Unsqueeze(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Unsqueeze(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Transpose(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Transpose(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Shape(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Shape(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Size(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Size(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Concat(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Concat(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Split(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Split(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Slice(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Slice(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Gather(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Gather(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_GatherElements(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_GatherElements(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_GatherND(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_GatherND(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_ScatterElements(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_ScatterND(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_TensorScatter(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Pad(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Pad(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Tile(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Tile(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Expand(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Expand(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_DepthToSpace(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_DepthToSpace(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_SpaceToDepth(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_SpaceToDepth(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Compress(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Compress(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_NonZero(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_NonZero(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Unique(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Unique(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Range(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Range(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_OneHot(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_OneHot(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Trilu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_EyeLike(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_EyeLike(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_ReverseSequence(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_CenterCropPad(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_CenterCropPad(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ConstantOfShape(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ConstantOfShape(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
