/* rt_scale.c with external weights, linked into the tests as rt_scale_external_descriptor. */
#define RT_DESCRIPTOR rt_scale_external_descriptor
#define RT_EXTERNAL 1
#include "rt_scale.c"
