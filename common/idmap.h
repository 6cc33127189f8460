/*  idmap: an open-addressing hash map from 64-bit keys to pointers.

    Why not zhashx: the broker holds one entry per task and per object, up to
    millions; zhashx allocates an item and a key string per entry, this map
    keeps 16 bytes per slot in one array. Linear probing, deletion by backward
    shift (no tombstones), load factor at most 3/4.

    Ownership: the map never owns the values. NULL values cannot be stored. */
#ifndef SQ_IDMAP_H
#define SQ_IDMAP_H

#include <stdint.h>
#include <stddef.h>

typedef struct _sq_idmap_t sq_idmap_t;

sq_idmap_t *sq_idmap_new (void);
void sq_idmap_destroy (sq_idmap_t **self_p);
//  0 on success, -1 if the key is present already or memory ran out.
int sq_idmap_insert (sq_idmap_t *self, uint64_t key, void *value);
//  Makes room for `more` inserts that then cannot fail for lack of memory.
int sq_idmap_reserve (sq_idmap_t *self, size_t more);
void *sq_idmap_lookup (sq_idmap_t *self, uint64_t key);
//  Removes and returns the value, NULL if absent.
void *sq_idmap_remove (sq_idmap_t *self, uint64_t key);
size_t sq_idmap_size (sq_idmap_t *self);
//  Bytes of memory the map holds (for measurements).
size_t sq_idmap_footprint (sq_idmap_t *self);
//  Iteration: *cursor starts at 0; returns the next value or NULL at the end.
//  The map must not change during an iteration.
void *sq_idmap_next (sq_idmap_t *self, size_t *cursor, uint64_t *key);

#endif
