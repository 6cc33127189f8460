/*  segment_copy: what making a governor's own segment costs (a stored
    object copied into a memory file for its executors, store_get_shared)
    the way it is made now, sq_blob_shm_copy (written with write(), sealed
    F_SEAL_WRITE, mapped read-only and populated), next to the way it was
    made before (git 626d9c8: mapped writable, filled by memcpy, sealed
    F_SEAL_FUTURE_WRITE with the writable mapping kept), in the same run,
    alternated. Then one read of every page, as an executor's or a send's.

    usage: squall-bench-segment-copy [ROUNDS]
    Prints per size: the best µs of each way and their ratio (new / old).
    The machine's load moves both alike; compare the ratio. */
#include "blob.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile unsigned s_sink;

static void
s_touch (const unsigned char *data, size_t size)
{
    for (size_t i = 0; i < size; i += 4096)
        s_sink += data [i];
}

//  The way before, kept here as the yardstick.
static int
s_old_way (const sq_blob_t *source)
{
    size_t size = sq_blob_size (source);
    int fd = memfd_create ("bench-old", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate (fd, (off_t) size))
        return -1;
    unsigned char *data = mmap (NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED)
        return -1;
    sq_blob_read (source, 0, data, size);
    int rc = fcntl (fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW
                                     | F_SEAL_SEAL);
    s_touch (data, size);
    munmap (data, size);
    close (fd);
    return rc;
}

static int
s_new_way (const sq_blob_t *source)
{
    sq_blob_t *copy = sq_blob_shm_copy (source);
    if (!copy)
        return -1;
    s_touch ((const unsigned char *) sq_blob_data (copy), sq_blob_size (copy));
    sq_blob_unref (&copy);
    return 0;
}

int
main (int argc, char **argv)
{
    int rounds = argc > 1? atoi (argv [1]): 20;
    size_t sizes [] = { 1u << 20, 2u << 20, 8u << 20, 32u << 20 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes [0]; s++) {
        sq_blob_t *source = sq_blob_new (sizes [s]);
        if (!source)
            return 1;
        memset (sq_blob_wdata (source), 7, sizes [s]);
        double best_old = 1e9, best_new = 1e9;
        for (int r = 0; r < rounds; r++) {
            double t0 = s_now ();
            if (s_old_way (source))
                return 1;
            double t1 = s_now ();
            if (s_new_way (source))
                return 1;
            double t2 = s_now ();
            if (t1 - t0 < best_old)
                best_old = t1 - t0;
            if (t2 - t1 < best_new)
                best_new = t2 - t1;
        }
        printf ("%5zu MiB: before %8.1f us, now %8.1f us, now / before %.2f\n",
                sizes [s] >> 20, best_old * 1e6, best_new * 1e6, best_new / best_old);
        sq_blob_unref (&source);
    }
    return 0;
}
