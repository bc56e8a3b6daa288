/* The CUDA device's place in the registry.  The driver API is reached only
 * through dlopen("libcuda.so.1"), never linked, so a machine without the
 * driver loads libtbcrt and reports "cuda" as unavailable.  The device
 * itself (buffers, PTX modules, launches) comes in a later issue; until
 * then a driver that is present is reported, with its version and device
 * count, as not supported yet. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../device.h"

typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_int_fn)(int *out);

tbcrt_status tbcrt__cuda_enumerate(tbcrt_context *c, tbcrt__registry *r) {
	tbcrt_device_info info;
	void *h = tbcrt__driver_open(&info, "cuda", TBCRT_DEVICE_CUDA, "libcuda.so.1", "CUDA driver");
	if (!h) return tbcrt__registry_add(r, NULL, &info, NULL, NULL);
	cu_init_fn init = (cu_init_fn)dlsym(h, "cuInit");
	cu_int_fn version = (cu_int_fn)dlsym(h, "cuDriverGetVersion");
	cu_int_fn count = (cu_int_fn)dlsym(h, "cuDeviceGetCount");
	int v = 0, n = 0, err = -1;
	if (init && version && count && (err = init(0)) == 0) {
		(void)version(&v);
		(void)count(&n);
		snprintf(info.version, sizeof info.version, "CUDA driver %d.%d", v / 1000, v % 1000 / 10);
		snprintf(info.unavailable_reason, sizeof info.unavailable_reason,
			 "CUDA driver %d.%d with %d device(s) found; libtbcrt's cuda device is not implemented yet",
			 v / 1000, v % 1000 / 10, n);
	} else {
		snprintf(info.unavailable_reason, sizeof info.unavailable_reason,
			 "libcuda.so.1 found, but %s (error %d)", init ? "cuInit failed" : "it lacks cuInit", err);
	}
	dlclose(h);
	return tbcrt__registry_add(r, NULL, &info, NULL, NULL);
}
