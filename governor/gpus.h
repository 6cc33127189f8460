/*  gpus: the devices a governor offers (--gpus), and which of them each
    running task holds. A task asks for gpus in thousandths of a device
    (SQ_GPU_MILLI): 1000 or more takes that many whole devices nobody else
    uses; less shares one device with other fractions, never above a whole
    device in all. Devices are named as CUDA_VISIBLE_DEVICES names them.

    Ownership: gpus_new returns an object the caller owns; gpus_destroy
    frees it. Strings returned by gpus_names are the caller's to free. */
#ifndef GOV_GPUS_H
#define GOV_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPUS_MAX 64             //  devices per governor (a task's mask)

typedef struct _gpus_t gpus_t;

//  From a comma-separated list of device names ("0,1,3"): distinct, each
//  1 to 64 of [A-Za-z0-9_:-], at most GPUS_MAX. NULL with err filled if the
//  list is bad (or out of memory).
gpus_t *gpus_new (const char *list, char *err, size_t err_size);
void gpus_destroy (gpus_t **self_p);
uint32_t gpus_count (const gpus_t *self);

//  Whether a task asking for `milli` could take its devices now.
bool gpus_fit (const gpus_t *self, uint64_t milli);
//  Takes devices for `milli` (what fits: a task bigger than the governor,
//  let run alone, gets every device) and returns them as a mask.
uint64_t gpus_take (gpus_t *self, uint64_t milli);
//  Gives back what gpus_take returned for the same `milli`.
void gpus_give (gpus_t *self, uint64_t milli, uint64_t mask);
//  "0,3": the names of the devices in mask; NULL if out of memory.
char *gpus_names (const gpus_t *self, uint64_t mask);

//  What --gpus auto finds: $CUDA_VISIBLE_DEVICES if set, else the indexes
//  `nvidia-smi -L` lists, else "" (none). Returns a string to free, NULL if
//  out of memory.
char *gpus_detect (void);

#endif
