/*  Unit test of common/grow: doubling from the first capacity, contents kept,
    no reallocation when there is room, the bound (clamped to, never passed),
    sizes that would overflow refused with the array unchanged, the 32-bit
    variant's own bound. */
#include "grow.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_failures = 0;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        s_failures++; \
    } \
} while (0)

static void
s_test_doubling (void)
{
    int *items = NULL;
    size_t cap = 0;
    CHECK (sq_grow ((void **) &items, &cap, 1, sizeof *items, 16, SIZE_MAX) == 0);
    CHECK (items && cap == 16);
    for (int i = 0; i < 16; i++)
        items [i] = i * 7;
    //  Room already: nothing moves
    int *before = items;
    CHECK (sq_grow ((void **) &items, &cap, 16, sizeof *items, 16, SIZE_MAX) == 0);
    CHECK (items == before && cap == 16);
    //  One more doubles; contents kept
    CHECK (sq_grow ((void **) &items, &cap, 17, sizeof *items, 16, SIZE_MAX) == 0);
    CHECK (cap == 32);
    for (int i = 0; i < 16; i++)
        CHECK (items [i] == i * 7);
    //  A need far past the capacity doubles as often as it takes
    CHECK (sq_grow ((void **) &items, &cap, 1000, sizeof *items, 16, SIZE_MAX) == 0);
    CHECK (cap == 1024);
    items [999] = 1;
    for (int i = 0; i < 16; i++)
        CHECK (items [i] == i * 7);
    free (items);

    //  A first capacity below the need, and none at all
    items = NULL;
    cap = 0;
    CHECK (sq_grow ((void **) &items, &cap, 5, sizeof *items, 4, SIZE_MAX) == 0);
    CHECK (cap == 8);
    free (items);
    items = NULL;
    cap = 0;
    CHECK (sq_grow ((void **) &items, &cap, 1, sizeof *items, 0, SIZE_MAX) == 0);
    CHECK (cap == 1);
    free (items);
}

static void
s_test_bound (void)
{
    int *items = NULL;
    size_t cap = 0;
    //  Clamped to the bound, which is reached and never passed
    CHECK (sq_grow ((void **) &items, &cap, 7, sizeof *items, 6, 10) == 0);
    CHECK (cap == 10);
    int *before = items;
    CHECK (sq_grow ((void **) &items, &cap, 10, sizeof *items, 6, 10) == 0);
    CHECK (items == before && cap == 10);
    items [9] = 42;
    CHECK (sq_grow ((void **) &items, &cap, 11, sizeof *items, 6, 10) == -1);
    CHECK (items == before && cap == 10 && items [9] == 42);
    free (items);

    //  A first capacity past the bound is cut to it
    items = NULL;
    cap = 0;
    CHECK (sq_grow ((void **) &items, &cap, 2, sizeof *items, 64, 3) == 0);
    CHECK (cap == 3);
    free (items);

    //  Nothing allocated when the first need passes the bound
    items = NULL;
    cap = 0;
    CHECK (sq_grow ((void **) &items, &cap, 5, sizeof *items, 4, 4) == -1);
    CHECK (items == NULL && cap == 0);
}

static void
s_test_overflow (void)
{
    char *items = NULL;
    size_t cap = 0;
    //  need * item_size overflows size_t: refused, nothing allocated
    CHECK (sq_grow ((void **) &items, &cap, 3, SIZE_MAX / 2, 1, SIZE_MAX) == -1);
    CHECK (items == NULL && cap == 0);
    //  Doubling near the top of size_t stops at the bound instead of wrapping
    CHECK (sq_grow ((void **) &items, &cap, 4, 1, 4, SIZE_MAX) == 0);
    CHECK (cap == 4);
    char *before = items;
    CHECK (sq_grow ((void **) &items, &cap, SIZE_MAX / 2 + 2, 2, 4, SIZE_MAX) == -1);
    CHECK (items == before && cap == 4);
    //  An item of no size is a caller's mistake, not a zero-byte array
    CHECK (sq_grow ((void **) &items, &cap, 8, 0, 4, SIZE_MAX) == -1);
    CHECK (items == before && cap == 4);
    free (items);
}

static void
s_test_grow32 (void)
{
    uint64_t *items = NULL;
    uint32_t cap = 0;
    CHECK (sq_grow32 ((void **) &items, &cap, 3, sizeof *items, 2, UINT32_MAX) == 0);
    CHECK (cap == 4);
    items [3] = 9;
    CHECK (sq_grow32 ((void **) &items, &cap, 5, sizeof *items, 2, UINT32_MAX) == 0);
    CHECK (cap == 8 && items [3] == 9);
    //  A bound past 32 bits is cut to them: a count past them is refused
    uint64_t *before = items;
    CHECK (sq_grow32 ((void **) &items, &cap, (size_t) UINT32_MAX + 1, 1, 2, SIZE_MAX) == -1);
    CHECK (items == before && cap == 8);
    CHECK (sq_grow32 ((void **) &items, &cap, 9, sizeof *items, 2, 8) == -1);
    CHECK (items == before && cap == 8);
    free (items);
}

int
main (void)
{
    s_test_doubling ();
    s_test_bound ();
    s_test_overflow ();
    s_test_grow32 ();
    if (s_failures) {
        fprintf (stderr, "test_common_grow: %d failures\n", s_failures);
        return 1;
    }
    printf ("test_common_grow: ok\n");
    return 0;
}
