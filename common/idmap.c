/*  idmap: open addressing with linear probing and backward-shift delete. */
#include "idmap.h"
#include <stdlib.h>

typedef struct {
    uint64_t key;
    void *value;                //  NULL: empty slot
} s_slot_t;

struct _sq_idmap_t {
    s_slot_t *slots;
    size_t mask;                //  capacity - 1, capacity a power of two
    size_t size;
};

//  splitmix64 finaliser: session ids sit in the high bits of keys and ids
//  are dense in the low bits, so the hash must mix both halves well.
static inline size_t
s_hash (uint64_t key)
{
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebULL;
    key ^= key >> 31;
    return (size_t) key;
}

sq_idmap_t *
sq_idmap_new (void)
{
    sq_idmap_t *self = (sq_idmap_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->slots = (s_slot_t *) calloc (16, sizeof (s_slot_t));
    if (!self->slots) {
        free (self);
        return NULL;
    }
    self->mask = 15;
    return self;
}

void
sq_idmap_destroy (sq_idmap_t **self_p)
{
    if (*self_p) {
        free ((*self_p)->slots);
        free (*self_p);
        *self_p = NULL;
    }
}

static int
s_grow (sq_idmap_t *self)
{
    size_t capacity = (self->mask + 1) * 2;
    s_slot_t *slots = (s_slot_t *) calloc (capacity, sizeof (s_slot_t));
    if (!slots)
        return -1;
    for (size_t i = 0; i <= self->mask; i++) {
        s_slot_t *old = &self->slots [i];
        if (!old->value)
            continue;
        size_t j = s_hash (old->key) & (capacity - 1);
        while (slots [j].value)
            j = (j + 1) & (capacity - 1);
        slots [j] = *old;
    }
    free (self->slots);
    self->slots = slots;
    self->mask = capacity - 1;
    return 0;
}

int
sq_idmap_reserve (sq_idmap_t *self, size_t more)
{
    while ((self->size + more) * 4 > (self->mask + 1) * 3)
        if (s_grow (self))
            return -1;
    return 0;
}

int
sq_idmap_insert (sq_idmap_t *self, uint64_t key, void *value)
{
    if (!value)
        return -1;
    if ((self->size + 1) * 4 > (self->mask + 1) * 3 && s_grow (self))
        return -1;
    size_t i = s_hash (key) & self->mask;
    while (self->slots [i].value) {
        if (self->slots [i].key == key)
            return -1;
        i = (i + 1) & self->mask;
    }
    self->slots [i].key = key;
    self->slots [i].value = value;
    self->size++;
    return 0;
}

void *
sq_idmap_lookup (sq_idmap_t *self, uint64_t key)
{
    size_t i = s_hash (key) & self->mask;
    while (self->slots [i].value) {
        if (self->slots [i].key == key)
            return self->slots [i].value;
        i = (i + 1) & self->mask;
    }
    return NULL;
}

void *
sq_idmap_remove (sq_idmap_t *self, uint64_t key)
{
    size_t i = s_hash (key) & self->mask;
    while (self->slots [i].value && self->slots [i].key != key)
        i = (i + 1) & self->mask;
    void *value = self->slots [i].value;
    if (!value)
        return NULL;
    //  Backward shift: pull later members of the probe run into the hole
    //  when their home slot lies at or before it (cyclically).
    size_t hole = i;
    size_t j = i;
    while (1) {
        j = (j + 1) & self->mask;
        if (!self->slots [j].value)
            break;
        size_t home = s_hash (self->slots [j].key) & self->mask;
        if (((j - home) & self->mask) >= ((j - hole) & self->mask)) {
            self->slots [hole] = self->slots [j];
            hole = j;
        }
    }
    self->slots [hole].value = NULL;
    self->slots [hole].key = 0;
    self->size--;
    return value;
}

size_t
sq_idmap_size (sq_idmap_t *self)
{
    return self->size;
}

size_t
sq_idmap_footprint (sq_idmap_t *self)
{
    return sizeof *self + (self->mask + 1) * sizeof (s_slot_t);
}

void *
sq_idmap_next (sq_idmap_t *self, size_t *cursor, uint64_t *key)
{
    while (*cursor <= self->mask) {
        s_slot_t *slot = &self->slots [(*cursor)++];
        if (slot->value) {
            if (key)
                *key = slot->key;
            return slot->value;
        }
    }
    return NULL;
}
