/* The HIP (ROCm) device's place in the registry: libamdhip64.so through
 * dlopen, never linked.  As for CUDA, the device itself comes in a later
 * issue; a runtime that is present is reported with its version and device
 * count, as not supported yet. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../device.h"

typedef int (*hip_int_fn)(int *out);

tbcrt_status tbcrt__hip_enumerate(tbcrt_context *c, tbcrt__registry *r) {
	tbcrt_device_info info;
	void *h = tbcrt__driver_open(&info, "hip", TBCRT_DEVICE_HIP, "libamdhip64.so", "HIP runtime");
	if (!h) return tbcrt__registry_add(r, NULL, &info, NULL, NULL);
	hip_int_fn version = (hip_int_fn)dlsym(h, "hipDriverGetVersion");
	hip_int_fn count = (hip_int_fn)dlsym(h, "hipGetDeviceCount");
	int v = 0, n = 0, err = -1;
	if (version && count && (err = count(&n)) == 0) {
		(void)version(&v);
		snprintf(info.version, sizeof info.version, "HIP driver %d", v);
		snprintf(info.unavailable_reason, sizeof info.unavailable_reason,
			 "HIP runtime (driver %d) with %d device(s) found; libtbcrt's hip device is not implemented yet", v,
			 n);
	} else {
		snprintf(info.unavailable_reason, sizeof info.unavailable_reason,
			 "libamdhip64.so found, but %s (error %d)", count ? "hipGetDeviceCount failed" : "it lacks hipGetDeviceCount",
			 err);
	}
	dlclose(h);
	return tbcrt__registry_add(r, NULL, &info, NULL, NULL);
}
