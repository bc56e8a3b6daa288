/* Kernels and shape rules of the reduce family (rows of ir/ops.def). */
#include "kernels.h"

bool tbc_shape_ReduceL1(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceL1(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceL2(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceL2(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceLogSum(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceLogSum(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceLogSumExp(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceLogSumExp(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceMax(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceMax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceMean(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceMean(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceMin(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceMin(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceProd(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceProd(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceSum(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceSum(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ReduceSumSquare(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ReduceSumSquare(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ArgMax(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ArgMax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_ArgMin(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_ArgMin(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_CumSum(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_CumProd(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_TopK(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_TopK(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Softmax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_LogSoftmax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_Hardmax(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_BatchNormalization(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_BatchNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_LayerNormalization(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_LayerNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_GroupNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_InstanceNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_RMSNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_LpNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_LRN(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
int tbc_interp_MeanVarianceNormalization(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_NegativeLogLikelihoodLoss(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_NegativeLogLikelihoodLoss(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_SoftmaxCrossEntropyLoss(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_SoftmaxCrossEntropyLoss(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_MatMul(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_MatMul(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Gemm(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Gemm(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Einsum(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Einsum(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_Det(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_Det(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_MatMulInteger(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_MatMulInteger(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
bool tbc_shape_QLinearMatMul(tbc_infer *cx, tbc_op *op) { return tbc_infer_error(cx, op, "shape inference not implemented"); }
int tbc_interp_QLinearMatMul(tbc_interp *ip, const tbc_op *op, const tbc_tensor *const *in, tbc_tensor **out) { (void)in; (void)out; return tbc_interp_unsupported(ip, op); }
