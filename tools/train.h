/* `tbc train`: runs training steps compiled with `tbc compile --train`
 * (tools/train.c, docs/training.md). */
#ifndef TBC_TOOLS_TRAIN_H
#define TBC_TOOLS_TRAIN_H

/* argv holds what follows "train"; returns the exit status. */
int tbc_cmd_train(int argc, char **argv);

#endif
