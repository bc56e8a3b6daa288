/* `tbc check`: runs a model on several targets with the same inputs and
 * compares their outputs (tools/check.c, docs/check.md). */
#ifndef TBC_TOOLS_CHECK_H
#define TBC_TOOLS_CHECK_H

/* argv holds what follows "check"; returns the exit status. */
int tbc_cmd_check(int argc, char **argv);

#endif
