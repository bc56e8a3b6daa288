/* The OpenCL ICD loader, opened with dlopen so that libtbcrt has no
 * link-time dependency on OpenCL: an application on a machine without it
 * still loads libtbcrt and sees the OpenCL device as unavailable.  The
 * Khronos headers give the types and prototypes only. */
#ifndef TBCRT_CL_LOADER_H
#define TBCRT_CL_LOADER_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#define TBCRT_CL_FUNCTIONS(X) \
	X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext) \
	X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer) \
	X(clCreateSubBuffer) X(clReleaseMemObject) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) \
	X(clEnqueueCopyBuffer) X(clCreateProgramWithSource) X(clCreateProgramWithBinary) X(clBuildProgram) \
	X(clGetProgramBuildInfo) X(clReleaseProgram) X(clCreateKernel) X(clReleaseKernel) X(clSetKernelArg) \
	X(clGetKernelWorkGroupInfo) X(clEnqueueNDRangeKernel) X(clFinish)

typedef struct tbcrt__cl {
#define TBCRT_CL_POINTER(f) __typeof__(&f) f;
	TBCRT_CL_FUNCTIONS(TBCRT_CL_POINTER)
#undef TBCRT_CL_POINTER
} tbcrt__cl;

/* The entry points, loaded once per process and never unloaded (the ICD
 * loader keeps its vendors loaded too); NULL when the loader is missing or
 * lacks one, with *out_reason saying which.  The library is
 * $TBCRT_OPENCL_LIBRARY when set, else libOpenCL.so.1. */
const tbcrt__cl *tbcrt__cl_load(const char **out_reason);
/* "CL_OUT_OF_RESOURCES", ...; "CL error -N" in buf for a code it does not know. */
const char *tbcrt__cl_error_name(cl_int code, char *buf, size_t size);

#endif
