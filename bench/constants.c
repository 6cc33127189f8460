/*  constants: what a client's large constant costs written into a new
    memory file (the constant cache off, or a miss) and found in the cache
    (a hit: the sampled fingerprint and the compare of every byte with the
    cached file), in the same run, alternated: bench/data_heavy.py's
    groupby data, 48 MiB in 8 parts of 6 MiB (sq_blob_gather's parts).

    usage: squall-bench-constants [ROUNDS]
    Prints each round's ms of both and their ratio (hit / write), then the
    best of each. The cached file is compared once before the rounds, so
    that its pages are in the client's mapping, as after a program's first
    hit. */
#include "sq_client_private.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define S_PARTS 8
#define S_PART ((size_t) 6 << 20)

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int
main (int argc, char **argv)
{
    int rounds = argc > 1? atoi (argv [1]): 10;
    const void *parts [S_PARTS];
    size_t sizes [S_PARTS], size = S_PARTS * S_PART;
    for (size_t i = 0; i < S_PARTS; i++) {
        unsigned char *p = (unsigned char *) malloc (S_PART);
        if (!p)
            return 1;
        for (size_t j = 0; j < S_PART; j++)
            p [j] = (unsigned char) (j * 31 + i);
        parts [i] = p;
        sizes [i] = S_PART;
    }
    sq_constants_t *off = sq_constants_new (0);
    sq_constants_t *on = sq_constants_new (SQ_CONSTANTS_DEFAULT);
    for (int i = 0; i < 2; i++) {
        sq_blob_t *warm = sq_constants_segment (on, parts, sizes, S_PARTS, size);
        if (!warm)
            return 1;
        sq_blob_unref (&warm);
    }
    double best_write = 1e9, best_hit = 1e9;
    for (int r = 0; r < rounds; r++) {
        double t0 = s_now ();
        sq_blob_t *written = sq_constants_segment (off, parts, sizes, S_PARTS, size);
        double t1 = s_now ();
        sq_blob_t *hit = sq_constants_segment (on, parts, sizes, S_PARTS, size);
        double t2 = s_now ();
        if (!written || !hit)
            return 1;
        sq_blob_unref (&written);
        sq_blob_unref (&hit);
        printf ("write %.2f ms  hit %.2f ms  hit/write %.3f\n",
                (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t2 - t1) / (t1 - t0));
        best_write = t1 - t0 < best_write? t1 - t0: best_write;
        best_hit = t2 - t1 < best_hit? t2 - t1: best_hit;
    }
    sq_constant_cache_stats_t stats;
    sq_constants_stats (on, &stats);
    printf ("48 MiB in 8 parts, best of %d: write %.2f ms, hit %.2f ms (%.3f); hits %llu\n",
            rounds, best_write * 1e3, best_hit * 1e3, best_hit / best_write,
            (unsigned long long) stats.hits);
    sq_constants_destroy (&off);
    sq_constants_destroy (&on);
    for (size_t i = 0; i < S_PARTS; i++)
        free ((void *) parts [i]);
    return 0;
}
