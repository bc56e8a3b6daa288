/* rt_nonzero.c linked into the tests as rt_nonzero_descriptor (the .o + .h path). */
#define RT_DESCRIPTOR rt_nonzero_descriptor
#include "rt_nonzero.c"
