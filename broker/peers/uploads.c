/*  uploads: an idmap of entries on a FIFO by deadline. */
#include "uploads.h"
#include "idmap.h"
#include <stdlib.h>

typedef struct _s_entry_t s_entry_t;
struct _s_entry_t {
    uint64_t key;
    uint32_t gov;
    uint64_t size;
    int64_t deadline;
    bool claim;                 //  from a SUBMIT, else from UPLOADED
    s_entry_t *prev, *next;
};

struct _uploads_t {
    int64_t timeout_ms;
    sq_idmap_t *map;            //  key -> s_entry_t
    s_entry_t *head, *tail;     //  oldest first
};

uploads_t *
uploads_new (int64_t timeout_ms)
{
    uploads_t *self = (uploads_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->timeout_ms = timeout_ms;
    self->map = sq_idmap_new ();
    if (!self->map) {
        free (self);
        return NULL;
    }
    return self;
}

void
uploads_destroy (uploads_t **self_p)
{
    uploads_t *self = *self_p;
    if (!self)
        return;
    while (self->head) {
        s_entry_t *next = self->head->next;
        free (self->head);
        self->head = next;
    }
    sq_idmap_destroy (&self->map);
    free (self);
    *self_p = NULL;
}

static void
s_unlink (uploads_t *self, s_entry_t *entry)
{
    if (entry->prev)
        entry->prev->next = entry->next;
    else
        self->head = entry->next;
    if (entry->next)
        entry->next->prev = entry->prev;
    else
        self->tail = entry->prev;
}

static void
s_remove (uploads_t *self, s_entry_t *entry)
{
    sq_idmap_remove (self->map, entry->key);
    s_unlink (self, entry);
    free (entry);
}

//  A new entry at the tail (the latest deadline). UPLOADS_WAITING, or
//  UPLOADS_FULL.
static uploads_result_t
s_add (uploads_t *self, uint64_t key, uint32_t gov, uint64_t size, bool claim, int64_t now)
{
    if (sq_idmap_size (self->map) >= UPLOADS_MAX)
        return UPLOADS_FULL;
    s_entry_t *entry = (s_entry_t *) calloc (1, sizeof *entry);
    if (!entry)
        return UPLOADS_FULL;
    *entry = (s_entry_t) { key, gov, size, now + self->timeout_ms, claim, self->tail, NULL };
    if (sq_idmap_insert (self->map, key, entry)) {
        free (entry);
        return UPLOADS_FULL;
    }
    if (self->tail)
        self->tail->next = entry;
    else
        self->head = entry;
    self->tail = entry;
    return UPLOADS_WAITING;
}

uploads_result_t
uploads_claim (uploads_t *self, uint64_t key, uint32_t gov, uint64_t size, int64_t now,
               uint32_t *drop_gov, uint64_t *other_size)
{
    *drop_gov = 0;
    *other_size = 0;
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    if (entry && !entry->claim && entry->gov == gov) {
        uint64_t confirmed = entry->size;
        s_remove (self, entry);
        *other_size = confirmed;
        return confirmed == size? UPLOADS_MATCHED: UPLOADS_MISMATCH;
    }
    if (entry) {
        //  A confirmation from another governor (the client uploaded
        //  twice?), or a claim of a key already claimed (the graph refuses
        //  duplicate ids before this): the new claim wins.
        if (!entry->claim)
            *drop_gov = entry->gov;
        s_remove (self, entry);
    }
    return s_add (self, key, gov, size, true, now);
}

uploads_result_t
uploads_confirm (uploads_t *self, uint64_t key, uint32_t gov, uint64_t size, bool claimed,
                 int64_t now, uint32_t *drop_gov, uint64_t *other_size)
{
    *drop_gov = 0;
    *other_size = 0;
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    if (entry && entry->claim) {
        if (entry->gov != gov) {
            *drop_gov = gov;
            return UPLOADS_WAITING;
        }
        uint64_t claimed_size = entry->size;
        s_remove (self, entry);
        *other_size = claimed_size;
        return claimed_size == size? UPLOADS_MATCHED: UPLOADS_MISMATCH;
    }
    if (entry) {
        //  Confirmed twice: the later one stands, the earlier is nobody's.
        if (entry->gov != gov)
            *drop_gov = entry->gov;
        s_remove (self, entry);
    }
    if (claimed)
        return UPLOADS_UNAWAITED;
    return s_add (self, key, gov, size, false, now);
}

uint32_t
uploads_awaited (uploads_t *self, uint64_t key)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    return entry && entry->claim? entry->gov: 0;
}

void
uploads_forget (uploads_t *self, uint64_t key)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    if (entry)
        s_remove (self, entry);
}

int
uploads_expired (uploads_t *self, int64_t now, uint64_t *key, uint32_t *gov, bool *claim)
{
    s_entry_t *entry = self->head;
    if (!entry || entry->deadline > now)
        return 0;
    *key = entry->key;
    *gov = entry->gov;
    *claim = entry->claim;
    s_remove (self, entry);
    return 1;
}

int64_t
uploads_next_deadline (uploads_t *self)
{
    return self->head? self->head->deadline: -1;
}

size_t
uploads_count (uploads_t *self)
{
    return sq_idmap_size (self->map);
}
