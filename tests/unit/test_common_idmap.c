/*  Unit test of common/idmap: 1M keys over mixed sessions, removal while
    probing checked against a simple reference, duplicates, iteration. */
#include "idmap.h"
#include "proto.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        if (++s_failures > 20) exit (1); \
    } \
} while (0)

//  Values are never dereferenced: encode the key's index as a pointer.
static void *
s_value (size_t i)
{
    return (void *) (uintptr_t) (i + 1);
}

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static uint64_t
s_random (void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

static void
s_test_million (void)
{
    const size_t n = 1000000;
    uint64_t *keys = (uint64_t *) malloc (n * sizeof (uint64_t));
    //  Dense ids in a few sessions, sparse ids in many, like the broker sees
    for (size_t i = 0; i < n; i++) {
        if (i % 2)
            keys [i] = sq_key ((uint32_t) (1 + i % 7), (uint32_t) (i / 2 + 1));
        else
            keys [i] = sq_key ((uint32_t) (1000 + i / 2), (uint32_t) (i % 13 + 1));
    }
    sq_idmap_t *map = sq_idmap_new ();
    CHECK (map);
    for (size_t i = 0; i < n; i++)
        CHECK (sq_idmap_insert (map, keys [i], s_value (i)) == 0);
    CHECK (sq_idmap_size (map) == n);
    CHECK (sq_idmap_footprint (map) >= n * 16);
    for (size_t i = 0; i < n; i++)
        CHECK (sq_idmap_lookup (map, keys [i]) == s_value (i));
    CHECK (sq_idmap_lookup (map, sq_key (9, 9999999)) == NULL);
    //  Duplicates refused, value unchanged
    CHECK (sq_idmap_insert (map, keys [123], s_value (999)) == -1);
    CHECK (sq_idmap_lookup (map, keys [123]) == s_value (123));
    CHECK (sq_idmap_insert (map, 42, NULL) == -1);
    CHECK (sq_idmap_size (map) == n);

    //  Iteration visits every key once
    unsigned char *seen = (unsigned char *) calloc (n, 1);
    size_t cursor = 0, count = 0;
    uint64_t key;
    void *value;
    while ((value = sq_idmap_next (map, &cursor, &key))) {
        size_t i = (size_t) (uintptr_t) value - 1;
        CHECK (i < n && keys [i] == key && !seen [i]);
        if (i < n)
            seen [i] = 1;
        count++;
    }
    CHECK (count == n);
    free (seen);

    //  Remove every other key, check the rest, then remove all
    for (size_t i = 0; i < n; i += 2)
        CHECK (sq_idmap_remove (map, keys [i]) == s_value (i));
    CHECK (sq_idmap_size (map) == n / 2);
    for (size_t i = 0; i < n; i++)
        CHECK (sq_idmap_lookup (map, keys [i]) == (i % 2? s_value (i): NULL));
    CHECK (sq_idmap_remove (map, keys [0]) == NULL);
    for (size_t i = 1; i < n; i += 2)
        CHECK (sq_idmap_remove (map, keys [i]) == s_value (i));
    CHECK (sq_idmap_size (map) == 0);
    cursor = 0;
    CHECK (sq_idmap_next (map, &cursor, &key) == NULL);
    //  Reusable after emptying
    CHECK (sq_idmap_insert (map, keys [5], s_value (5)) == 0);
    CHECK (sq_idmap_lookup (map, keys [5]) == s_value (5));
    sq_idmap_destroy (&map);
    CHECK (map == NULL);
    sq_idmap_destroy (&map);            //  twice is harmless
    free (keys);
}

//  Random inserts and removes over a small key space (long probe runs and
//  wrap-around at the end of the table), checked after every step against a
//  plain array.
static void
s_test_reference (void)
{
    const size_t space = 3000;
    void **reference = (void **) calloc (space, sizeof (void *));
    sq_idmap_t *map = sq_idmap_new ();
    size_t size = 0;
    for (int step = 0; step < 400000; step++) {
        size_t i = (size_t) (s_random () % space);
        //  Keys that collide in the low bits and span sessions
        uint64_t key = sq_key ((uint32_t) (i % 3), (uint32_t) (i * 4096));
        if (s_random () % 3) {
            int rc = sq_idmap_insert (map, key, s_value (i));
            CHECK (rc == (reference [i]? -1: 0));
            if (!reference [i]) {
                reference [i] = s_value (i);
                size++;
            }
        }
        else {
            void *got = sq_idmap_remove (map, key);
            CHECK (got == reference [i]);
            if (reference [i]) {
                reference [i] = NULL;
                size--;
            }
        }
        CHECK (sq_idmap_size (map) == size);
        if (step % 5000 == 0)
            for (size_t j = 0; j < space; j++)
                CHECK (sq_idmap_lookup (map, sq_key ((uint32_t) (j % 3), (uint32_t) (j * 4096))) == reference [j]);
    }
    for (size_t j = 0; j < space; j++)
        CHECK (sq_idmap_lookup (map, sq_key ((uint32_t) (j % 3), (uint32_t) (j * 4096))) == reference [j]);
    size_t cursor = 0, count = 0;
    while (sq_idmap_next (map, &cursor, NULL))
        count++;
    CHECK (count == size);
    sq_idmap_destroy (&map);
    free (reference);
}

//  Key 0 and the largest key are ordinary keys
static void
s_test_edges (void)
{
    sq_idmap_t *map = sq_idmap_new ();
    CHECK (sq_idmap_insert (map, 0, s_value (0)) == 0);
    CHECK (sq_idmap_insert (map, UINT64_MAX, s_value (1)) == 0);
    CHECK (sq_idmap_lookup (map, 0) == s_value (0));
    CHECK (sq_idmap_lookup (map, UINT64_MAX) == s_value (1));
    CHECK (sq_idmap_remove (map, 0) == s_value (0));
    CHECK (sq_idmap_lookup (map, 0) == NULL);
    CHECK (sq_idmap_lookup (map, UINT64_MAX) == s_value (1));
    sq_idmap_destroy (&map);
}

//  After reserve (n), n inserts never grow the map (they cannot fail for
//  lack of memory, which graph.c relies on once a submit is accepted).
static void
s_test_reserve (void)
{
    sq_idmap_t *map = sq_idmap_new ();
    CHECK (sq_idmap_insert (map, 7, s_value (7)) == 0);
    CHECK (sq_idmap_reserve (map, 1000) == 0);
    size_t footprint = sq_idmap_footprint (map);
    for (uint64_t k = 100; k < 1100; k++)
        CHECK (sq_idmap_insert (map, k, s_value (k)) == 0);
    CHECK (sq_idmap_footprint (map) == footprint);
    CHECK (sq_idmap_size (map) == 1001);
    CHECK (sq_idmap_lookup (map, 7) == s_value (7) && sq_idmap_lookup (map, 1099) == s_value (1099));
    CHECK (sq_idmap_reserve (map, 0) == 0 && sq_idmap_footprint (map) == footprint);
    sq_idmap_destroy (&map);
}

int
main (void)
{
    s_test_reserve ();
    s_test_edges ();
    s_test_reference ();
    s_test_million ();
    if (s_failures) {
        fprintf (stderr, "test_common_idmap: %d check(s) failed\n", s_failures);
        return 1;
    }
    printf ("test_common_idmap: OK\n");
    return 0;
}
