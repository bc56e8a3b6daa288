/* Kernels and shape rules of the elementwise family (rows of ir/ops.def). */
#include "kernels.h"

int tbc_interp_Abs(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Acos(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Acosh(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Asin(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Asinh(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Atan(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Atanh(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Ceil(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Cos(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Cosh(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Erf(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Exp(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Floor(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Log(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Neg(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Reciprocal(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Round(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Sign(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Sin(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Sinh(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Sqrt(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Tan(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Tanh(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Not(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_BitwiseNot(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_IsInf(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_IsInf(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_IsNaN(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_IsNaN(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Relu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_LeakyRelu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Elu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Celu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Selu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Sigmoid(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_HardSigmoid(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_HardSwish(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Softplus(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Softsign(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Mish(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Gelu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Swish(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_ThresholdedRelu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Shrink(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Clip(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Add(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Sub(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Mul(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Div(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Pow(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Mod(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_PRelu(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_BitShift(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_BitwiseAnd(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_BitwiseOr(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_BitwiseXor(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_And(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Or(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Xor(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Equal(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Greater(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_GreaterOrEqual(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Less(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_LessOrEqual(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Max(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Min(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Mean(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Sum(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Where(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Where(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Cast(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Cast(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_CastLike(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_CastLike(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_BitCast(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_BitCast(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Dropout(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Dropout(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_SwiGLU(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_SwiGLU(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
