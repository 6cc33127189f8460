/*  grow: the one way an array that fills up gets bigger.

    An array of `*cap` items of `item_size` bytes, of which the caller counts
    the used ones, is reallocated to at least `need` items: its capacity
    starts at `first` and doubles, but never passes `max`, the array's bound
    (every queue is bounded: a caller without a bound of its own passes the
    largest its count type holds). Sizes are checked for overflow.

    Returns 0 when the array holds at least `need` items (at once when it
    already did); -1 when `need` passes `max`, a size would overflow or
    memory is short: then `*items` and `*cap` are as they were, and the
    items in them too. `*items` may be NULL with `*cap` 0. The caller owns
    the array, as before. */
#ifndef SQ_GROW_H
#define SQ_GROW_H

#include <stddef.h>
#include <stdint.h>

int sq_grow (void **items, size_t *cap, size_t need, size_t item_size,
             size_t first, size_t max);
//  The same for a capacity kept in 32 bits; `max` is at most UINT32_MAX.
int sq_grow32 (void **items, uint32_t *cap, size_t need, size_t item_size,
               size_t first, size_t max);

#endif
