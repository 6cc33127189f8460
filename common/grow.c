/*  grow: an array's capacity doubled up to its bound, with checked sizes. */
#include "grow.h"
#include <stdlib.h>

int
sq_grow (void **items, size_t *cap, size_t need, size_t item_size,
         size_t first, size_t max)
{
    if (need <= *cap)
        return 0;
    if (need > max || item_size == 0)
        return -1;
    size_t grown = *cap? *cap: (first? first: 1);
    while (grown < need)
        grown = grown > max / 2? max: grown * 2;
    if (grown > max)
        grown = max;
    if (grown > SIZE_MAX / item_size)
        return -1;
    void *p = realloc (*items, grown * item_size);
    if (!p)
        return -1;
    *items = p;
    *cap = grown;
    return 0;
}

int
sq_grow32 (void **items, uint32_t *cap, size_t need, size_t item_size,
           size_t first, size_t max)
{
    size_t wide = *cap;
    if (sq_grow (items, &wide, need, item_size, first, max < UINT32_MAX? max: UINT32_MAX))
        return -1;
    *cap = (uint32_t) wide;
    return 0;
}
