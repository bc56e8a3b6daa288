/* rt_add.c linked into the tests as rt_add_descriptor (the .o + .h path). */
#define RT_DESCRIPTOR rt_add_descriptor
#include "rt_add.c"
