/*  gpus: device assignment for tasks that ask for gpus. */
#include "gpus.h"
#include "proto.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _gpus_t {
    uint32_t n;
    char *names [GPUS_MAX];
    uint32_t used [GPUS_MAX];   //  thousandths held by running tasks
};

static bool
s_name_char (char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || c == '-' || c == '_' || c == ':';
}

gpus_t *
gpus_new (const char *list, char *err, size_t err_size)
{
    gpus_t *self = (gpus_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_size, "out of memory");
        return NULL;
    }
    const char *p = list;
    while (*p) {
        size_t len = 0;
        while (p [len] && p [len] != ',')
            len++;
        bool ok = len > 0 && len <= 64;
        for (size_t i = 0; ok && i < len; i++)
            ok = s_name_char (p [i]);
        if (!ok) {
            snprintf (err, err_size, "a device name has 1 to 64 letters, digits, '-', '_' or ':'");
            gpus_destroy (&self);
            return NULL;
        }
        for (uint32_t i = 0; i < self->n; i++)
            if (strlen (self->names [i]) == len && memcmp (self->names [i], p, len) == 0) {
                snprintf (err, err_size, "device %.*s named twice", (int) len, p);
                gpus_destroy (&self);
                return NULL;
            }
        if (self->n == GPUS_MAX) {
            snprintf (err, err_size, "at most %d devices", GPUS_MAX);
            gpus_destroy (&self);
            return NULL;
        }
        if (!(self->names [self->n++] = strndup (p, len))) {
            snprintf (err, err_size, "out of memory");
            gpus_destroy (&self);
            return NULL;
        }
        p += len;
        if (*p == ',' && !*++p) {
            snprintf (err, err_size, "the list ends with a comma");
            gpus_destroy (&self);
            return NULL;
        }
    }
    return self;
}

void
gpus_destroy (gpus_t **self_p)
{
    if (!*self_p)
        return;
    for (uint32_t i = 0; i < (*self_p)->n; i++)
        free ((*self_p)->names [i]);
    free (*self_p);
    *self_p = NULL;
}

uint32_t
gpus_count (const gpus_t *self)
{
    return self->n;
}

//  A fraction goes to the fullest device it fits on, so that whole devices
//  stay free for whole-device tasks. -1 if none.
static int
s_share (const gpus_t *self, uint64_t milli)
{
    int best = -1;
    for (uint32_t i = 0; i < self->n; i++)
        if (self->used [i] + milli <= SQ_GPU_MILLI
        &&  (best < 0 || self->used [i] > self->used [best]))
            best = (int) i;
    return best;
}

bool
gpus_fit (const gpus_t *self, uint64_t milli)
{
    if (milli == 0)
        return true;
    if (milli < SQ_GPU_MILLI)
        return s_share (self, milli) >= 0;
    uint64_t free_devices = 0;
    for (uint32_t i = 0; i < self->n; i++)
        free_devices += self->used [i] == 0;
    return free_devices >= milli / SQ_GPU_MILLI;
}

uint64_t
gpus_take (gpus_t *self, uint64_t milli)
{
    uint64_t mask = 0;
    if (milli == 0 || self->n == 0)
        return 0;
    if (milli < SQ_GPU_MILLI) {
        int i = s_share (self, milli);
        if (i < 0) {            //  let run alone: the least used device
            i = 0;
            for (uint32_t j = 1; j < self->n; j++)
                if (self->used [j] < self->used [i])
                    i = (int) j;
        }
        self->used [i] += (uint32_t) milli;
        return 1ull << i;
    }
    uint64_t want = milli / SQ_GPU_MILLI;
    //  Free devices first; short of them (let run alone), any.
    for (int pass = 0; pass < 2 && want; pass++)
        for (uint32_t i = 0; i < self->n && want; i++)
            if (!(mask & (1ull << i)) && (pass || self->used [i] == 0)) {
                mask |= 1ull << i;
                self->used [i] += SQ_GPU_MILLI;
                want--;
            }
    return mask;
}

void
gpus_give (gpus_t *self, uint64_t milli, uint64_t mask)
{
    uint32_t each = milli < SQ_GPU_MILLI? (uint32_t) milli: SQ_GPU_MILLI;
    for (uint32_t i = 0; i < self->n; i++)
        if (mask & (1ull << i))
            self->used [i] = self->used [i] > each? self->used [i] - each: 0;
}

char *
gpus_names (const gpus_t *self, uint64_t mask)
{
    char *out = (char *) malloc (GPUS_MAX * 65 + 1);
    if (!out)
        return NULL;
    size_t len = 0;
    out [0] = 0;
    for (uint32_t i = 0; i < self->n; i++)
        if (mask & (1ull << i))
            len += (size_t) sprintf (out + len, "%s%s", len? ",": "", self->names [i]);
    return out;
}

char *
gpus_detect (void)
{
    //  A CUDA_VISIBLE_DEVICES we were started with is what we may use (a
    //  Slurm job's devices, say), even where nvidia-smi lists more.
    const char *visible = getenv ("CUDA_VISIBLE_DEVICES");
    if (visible)
        return strdup (visible);
    //  "GPU 0: NVIDIA A100 (UUID: GPU-...)": the indexes, in order.
    FILE *smi = popen ("nvidia-smi -L 2>/dev/null", "r");
    char line [512];
    char *out = (char *) calloc (1, GPUS_MAX * 8 + 1);
    if (!out) {
        if (smi)
            pclose (smi);
        return NULL;
    }
    size_t len = 0, n = 0;
    while (smi && fgets (line, sizeof line, smi)) {
        unsigned index;
        if (n < GPUS_MAX && sscanf (line, "GPU %u:", &index) == 1 && index < 1000000) {
            len += (size_t) sprintf (out + len, "%s%u", len? ",": "", index);
            n++;
        }
    }
    if (smi)
        pclose (smi);
    return out;
}
