/*  reswait: see reswait.h. Entries in an array (swap-remove), found by key
    through an idmap holding index + 1. */
#include "reswait.h"
#include "idmap.h"
#include <stdlib.h>

typedef struct {
    uint64_t key;
    int64_t left_ms;
} s_entry_t;

struct _reswait_t {
    s_entry_t *entries;
    size_t n;
    size_t max;
    int64_t budget_ms;
    int64_t last_ms;            //  the last tick, -1 before the first
    sq_idmap_t *index;          //  key -> position + 1
};

reswait_t *
reswait_new (size_t max, int64_t budget_ms)
{
    reswait_t *self = (reswait_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->entries = (s_entry_t *) calloc (max? max: 1, sizeof (s_entry_t));
    self->index = sq_idmap_new ();
    if (!self->entries || !self->index) {
        reswait_destroy (&self);
        return NULL;
    }
    self->max = max;
    self->budget_ms = budget_ms;
    self->last_ms = -1;
    return self;
}

void
reswait_destroy (reswait_t **self_p)
{
    reswait_t *self = *self_p;
    if (!self)
        return;
    free (self->entries);
    sq_idmap_destroy (&self->index);
    free (self);
    *self_p = NULL;
}

int
reswait_add (reswait_t *self, uint64_t key)
{
    if (sq_idmap_lookup (self->index, key))
        return 0;
    if (self->n >= self->max)
        return -1;
    if (sq_idmap_insert (self->index, key, (void *) (uintptr_t) (self->n + 1)))
        return -1;
    self->entries [self->n++] = (s_entry_t) { key, self->budget_ms };
    return 0;
}

static void
s_remove_at (reswait_t *self, size_t i)
{
    sq_idmap_remove (self->index, self->entries [i].key);
    if (i != --self->n) {
        self->entries [i] = self->entries [self->n];
        //  The moved entry's index changes; its key is present, so the
        //  insert only updates it.
        sq_idmap_remove (self->index, self->entries [i].key);
        sq_idmap_insert (self->index, self->entries [i].key, (void *) (uintptr_t) (i + 1));
    }
}

void
reswait_remove (reswait_t *self, uint64_t key)
{
    uintptr_t pos = (uintptr_t) sq_idmap_lookup (self->index, key);
    if (pos)
        s_remove_at (self, pos - 1);
}

size_t
reswait_count (reswait_t *self)
{
    return self->n;
}

void
reswait_get (reswait_t *self, size_t i, uint64_t *key, int64_t *left_ms)
{
    *key = i < self->n? self->entries [i].key: 0;
    *left_ms = i < self->n? self->entries [i].left_ms: 0;
}

void
reswait_tick (reswait_t *self, int64_t now_ms, bool counting, reswait_fn *fn, void *arg)
{
    int64_t elapsed = self->last_ms < 0 || now_ms < self->last_ms? 0: now_ms - self->last_ms;
    self->last_ms = now_ms;
    if (!counting || elapsed == 0)
        return;
    for (size_t i = 0; i < self->n; i++)
        self->entries [i].left_ms -= elapsed;
    //  Removed before fn runs, so that fn may add or remove entries.
    size_t i = 0;
    while (i < self->n)
        if (self->entries [i].left_ms <= 0) {
            uint64_t key = self->entries [i].key;
            s_remove_at (self, i);      //  another entry moved to i: look again
            fn (arg, key);
        }
        else
            i++;
}
