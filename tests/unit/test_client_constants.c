/*  The client's constant cache (client/constants.c): a constant of exactly
    the bytes of a cached memory file reuses it, however its parts are cut;
    one byte different anywhere (also where the fingerprint does not look)
    never does; entries and bytes stay within their bounds, least recently
    used evicted first; 0 turns it off; $SQUALL_CONSTANT_CACHE sets the
    bound at sq_client_new, and a malformed one fails the connect. */
#include "sq_client_private.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    return 1; } } while (0)

#define MIB ((size_t) 1 << 20)

static sq_constant_cache_stats_t
s_stats (sq_constants_t *cache)
{
    sq_constant_cache_stats_t stats;
    sq_constants_stats (cache, &stats);
    return stats;
}

static sq_blob_t *
s_one (sq_constants_t *cache, const void *data, size_t size)
{
    return sq_constants_segment (cache, &data, &size, 1, size);
}

static ino_t
s_inode (const sq_blob_t *blob)
{
    struct stat st;
    return fstat (sq_blob_shm_fd (blob), &st)? 0: st.st_ino;
}

static void
s_fill (uint8_t *data, size_t size, uint32_t seed)
{
    for (size_t i = 0; i < size; i++) {
        seed = seed * 1103515245u + 12345u;
        data [i] = (uint8_t) (seed >> 16);
    }
}

static int
s_exactness (void)
{
    size_t size = 3 * MIB + 5;
    uint8_t *data = (uint8_t *) malloc (size);
    CHECK (data);
    s_fill (data, size, 1);
    sq_constants_t *cache = sq_constants_new (SQ_CONSTANTS_DEFAULT);
    CHECK (cache);
    sq_blob_t *a = s_one (cache, data, size);
    CHECK (a && sq_blob_size (a) == size && memcmp (sq_blob_data (a), data, size) == 0);
    CHECK (fcntl (sq_blob_shm_fd (a), F_GET_SEALS) & F_SEAL_WRITE);
    CHECK (s_stats (cache).misses == 1 && s_stats (cache).bytes_written == size);

    //  The same bytes cut otherwise (sq_blob_gather's parts, an empty one
    //  among them): the same file.
    const void *parts [] = { data, data + 10, NULL, data + MIB };
    size_t sizes [] = { 10, MIB - 10, 0, size - MIB };
    sq_blob_t *b = sq_constants_segment (cache, parts, sizes, 4, size);
    CHECK (b == a && s_inode (b) == s_inode (a));
    CHECK (s_stats (cache).hits == 1 && s_stats (cache).bytes_reused == size);
    CHECK (s_stats (cache).misses == 1 && s_stats (cache).entries == 1);

    //  One byte changed where no sample reads: the fingerprint is the same,
    //  the compare refuses it, and the new file holds the new bytes.
    uint64_t print = sq_constants_fingerprint ((const void *const *) &data, &size, 1, size);
    size_t at = size / 2 + 3;
    data [at] ^= 0x5a;
    CHECK (sq_constants_fingerprint ((const void *const *) &data, &size, 1, size) == print);
    sq_blob_t *c = s_one (cache, data, size);
    CHECK (c && c != a && s_inode (c) != s_inode (a));
    CHECK (memcmp (sq_blob_data (c), data, size) == 0);
    CHECK (((const uint8_t *) sq_blob_data (a)) [at] != data [at]);
    CHECK (s_stats (cache).collisions == 1 && s_stats (cache).hits == 1);
    CHECK (s_stats (cache).misses == 2 && s_stats (cache).entries == 2);
    //  ... and both are found again, each by its own bytes.
    sq_blob_t *d = s_one (cache, data, size);
    CHECK (d == c);
    data [at] ^= 0x5a;
    sq_blob_t *e = s_one (cache, data, size);
    CHECK (e == a);
    //  The last byte, which the strides may miss, and the first.
    data [size - 1] ^= 1;
    sq_blob_t *f = s_one (cache, data, size);
    CHECK (f != a && f != c && memcmp (sq_blob_data (f), data, size) == 0);
    data [size - 1] ^= 1;
    data [0] ^= 1;
    sq_blob_t *g = s_one (cache, data, size);
    CHECK (g != a && g != c && g != f && memcmp (sq_blob_data (g), data, size) == 0);
    data [0] ^= 1;
    //  Shorter by one byte, same prefix: never the longer one.
    size_t shorter = size - 1;
    sq_blob_t *h = s_one (cache, data, shorter);
    CHECK (h && h != a && sq_blob_size (h) == shorter);

    //  The cache's references outlive the callers', the callers' the cache.
    sq_blob_unref (&a);
    sq_blob_unref (&b);
    sq_blob_t *again = s_one (cache, data, size);
    CHECK (again && memcmp (sq_blob_data (again), data, size) == 0);
    CHECK (s_stats (cache).hits == 4);
    sq_constants_destroy (&cache);
    CHECK (cache == NULL);
    CHECK (memcmp (sq_blob_data (again), data, size) == 0);
    sq_blob_unref (&again);
    sq_blob_unref (&c), sq_blob_unref (&d), sq_blob_unref (&e);
    sq_blob_unref (&f), sq_blob_unref (&g), sq_blob_unref (&h);
    free (data);
    return 0;
}

static int
s_bounds (void)
{
    //  Bytes: room for 3 constants of 1 MiB, not 4.
    uint64_t limit = 3 * MIB + MIB / 2;
    sq_constants_t *cache = sq_constants_new (limit);
    uint8_t *data [6];
    for (uint32_t i = 0; i < 6; i++) {
        data [i] = (uint8_t *) malloc (MIB);
        CHECK (data [i]);
        s_fill (data [i], MIB, i + 100);
    }
    sq_blob_t *blobs [6] = { NULL };
    for (int i = 0; i < 3; i++) {
        blobs [i] = s_one (cache, data [i], MIB);
        CHECK (blobs [i]);
    }
    CHECK (s_stats (cache).entries == 3 && s_stats (cache).bytes == 3 * MIB);
    sq_blob_t *hit = s_one (cache, data [0], MIB);     //  0 is now the most recent
    CHECK (hit == blobs [0]);
    sq_blob_unref (&hit);
    blobs [3] = s_one (cache, data [3], MIB);           //  evicts 1, the oldest
    CHECK (s_stats (cache).entries == 3 && s_stats (cache).bytes <= limit);
    sq_blob_t *one = s_one (cache, data [1], MIB);     //  gone: written anew (evicts 2)
    CHECK (one && one != blobs [1] && s_stats (cache).misses == 5);
    sq_blob_t *zero = s_one (cache, data [0], MIB);    //  still there
    CHECK (zero == blobs [0]);
    sq_blob_t *two = s_one (cache, data [2], MIB);
    CHECK (two != blobs [2]);
    CHECK (s_stats (cache).bytes <= limit && s_stats (cache).entries == 3);
    sq_blob_unref (&one), sq_blob_unref (&zero), sq_blob_unref (&two);

    //  Larger than the bound: written, not cached.
    uint8_t *big = (uint8_t *) malloc (4 * MIB);
    CHECK (big);
    s_fill (big, 4 * MIB, 7);
    sq_blob_t *b1 = s_one (cache, big, 4 * MIB);
    sq_blob_t *b2 = s_one (cache, big, 4 * MIB);
    CHECK (b1 && b2 && b1 != b2 && s_stats (cache).bytes <= limit);
    sq_blob_unref (&b1), sq_blob_unref (&b2);
    free (big);

    //  A lower bound evicts down to it; 0 empties and turns it off.
    sq_constants_set_limit (cache, MIB);
    CHECK (s_stats (cache).entries == 1 && s_stats (cache).bytes == MIB);
    sq_constants_set_limit (cache, 0);
    CHECK (s_stats (cache).entries == 0 && s_stats (cache).bytes == 0);
    uint64_t hits = s_stats (cache).hits;
    sq_blob_t *x1 = s_one (cache, data [5], MIB);
    sq_blob_t *x2 = s_one (cache, data [5], MIB);
    CHECK (x1 && x2 && x1 != x2 && s_inode (x1) != s_inode (x2));
    CHECK (s_stats (cache).hits == hits && s_stats (cache).entries == 0);
    sq_blob_unref (&x1), sq_blob_unref (&x2);
    for (int i = 0; i < 6; i++) {
        sq_blob_unref (&blobs [i]);
        free (data [i]);
    }
    sq_constants_destroy (&cache);

    //  Entries: at most SQ_CONSTANTS_ENTRIES, the oldest going first.
    cache = sq_constants_new (SQ_CONSTANTS_DEFAULT);
    uint32_t words [SQ_CONSTANTS_ENTRIES + 6];
    for (uint32_t i = 0; i < SQ_CONSTANTS_ENTRIES + 6; i++) {
        words [i] = i * 2654435761u;
        sq_blob_t *blob = s_one (cache, &words [i], sizeof words [i]);
        CHECK (blob);
        sq_blob_unref (&blob);
        CHECK (s_stats (cache).entries <= SQ_CONSTANTS_ENTRIES);
    }
    CHECK (s_stats (cache).entries == SQ_CONSTANTS_ENTRIES);
    uint64_t misses = s_stats (cache).misses;
    sq_blob_t *newest = s_one (cache, &words [SQ_CONSTANTS_ENTRIES + 5], 4);
    CHECK (s_stats (cache).misses == misses);
    sq_blob_t *oldest = s_one (cache, &words [0], 4);
    CHECK (s_stats (cache).misses == misses + 1);
    sq_blob_unref (&newest), sq_blob_unref (&oldest);
    sq_constants_destroy (&cache);
    return 0;
}

static int
s_client_setting (void)
{
    setenv ("SQUALL_CONSTANT_CACHE", "64M", 1);
    sq_client_t *client = sq_client_new ();
    sq_constant_cache_stats_t stats;
    CHECK (client && sq_client_constant_cache_stats (client, &stats) == 0);
    CHECK (stats.limit == 64 * MIB && stats.entries == 0 && stats.misses == 0);
    sq_client_set_constant_cache (client, 0);
    CHECK (sq_client_constant_cache_stats (client, &stats) == 0 && stats.limit == 0);
    sq_client_destroy (&client);

    unsetenv ("SQUALL_CONSTANT_CACHE");
    client = sq_client_new ();
    CHECK (sq_client_constant_cache_stats (client, &stats) == 0);
    CHECK (stats.limit == SQ_CONSTANTS_DEFAULT);
    CHECK (sq_client_constant_cache_stats (client, NULL) == SQ_E_INVALID);
    CHECK (sq_client_constant_cache_stats (NULL, &stats) == SQ_E_INVALID);
    sq_client_set_constant_cache (NULL, 1);
    sq_client_destroy (&client);

    //  Malformed: the default bound, and the connect fails naming it
    //  before it tries anything; setting the bound clears that.
    setenv ("SQUALL_CONSTANT_CACHE", "lots", 1);
    client = sq_client_new ();
    unsetenv ("SQUALL_CONSTANT_CACHE");
    CHECK (sq_client_constant_cache_stats (client, &stats) == 0);
    CHECK (stats.limit == SQ_CONSTANTS_DEFAULT);
    CHECK (sq_client_connect (client, "tcp://127.0.0.1:1", 100) == SQ_E_INVALID);
    CHECK (strstr (sq_client_errmsg (client), "SQUALL_CONSTANT_CACHE=lots"));
    sq_client_set_constant_cache (client, 8 * MIB);
    CHECK (sq_client_connect (client, "tcp://127.0.0.1:1", 100) == SQ_E_CONNECTION);
    sq_client_destroy (&client);
    return 0;
}

int
main (void)
{
    if (s_exactness () || s_bounds () || s_client_setting ())
        return 1;
    printf ("ok\n");
    return 0;
}
