/* rt_scale.c linked into the tests as rt_scale_descriptor (the .o + .h path). */
#define RT_DESCRIPTOR rt_scale_descriptor
#include "rt_scale.c"
