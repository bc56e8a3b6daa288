#include <stdio.h>

#include "tbc/tbc.h"

int main(void) {
	puts("tbc " TBC_VERSION_STRING);
	return 0;
}
