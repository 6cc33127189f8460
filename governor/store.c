/*  store: an idmap of entries, each a blob reference and a content type. */
#include "store.h"
#include "idmap.h"
#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    sq_blob_t *blob;
    char *content_type;
} s_entry_t;

struct _store_t {
    sq_idmap_t *map;
    uint64_t bytes;
};

static void
s_entry_destroy (store_t *self, s_entry_t **entry_p)
{
    s_entry_t *entry = *entry_p;
    self->bytes -= sq_blob_size (entry->blob);
    sq_blob_unref (&entry->blob);
    free (entry->content_type);
    free (entry);
    *entry_p = NULL;
}

store_t *
store_new (void)
{
    store_t *self = (store_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->map = sq_idmap_new ();
    if (!self->map) {
        free (self);
        return NULL;
    }
    return self;
}

void
store_destroy (store_t **self_p)
{
    store_t *self = *self_p;
    if (!self)
        return;
    size_t cursor = 0;
    s_entry_t *entry;
    while ((entry = (s_entry_t *) sq_idmap_next (self->map, &cursor, NULL)))
        s_entry_destroy (self, &entry);
    sq_idmap_destroy (&self->map);
    free (self);
    *self_p = NULL;
}

int
store_put (store_t *self, uint64_t key, sq_blob_t *blob,
           const char *content_type, size_t content_type_len)
{
    assert (blob);
    s_entry_t *entry = (s_entry_t *) calloc (1, sizeof *entry);
    char *type = strndup (content_type? content_type: "", content_type? content_type_len: 0);
    if (!entry || !type) {
        free (entry);
        free (type);
        sq_blob_unref (&blob);
        return -1;
    }
    entry->blob = blob;
    entry->content_type = type;
    s_entry_t *old = (s_entry_t *) sq_idmap_remove (self->map, key);
    if (old)
        s_entry_destroy (self, &old);
    if (sq_idmap_insert (self->map, key, entry)) {
        self->bytes += sq_blob_size (blob);
        s_entry_destroy (self, &entry);
        return -1;
    }
    self->bytes += sq_blob_size (blob);
    return 0;
}

sq_blob_t *
store_get (store_t *self, uint64_t key, const char **content_type)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    if (!entry)
        return NULL;
    if (content_type)
        *content_type = entry->content_type;
    return entry->blob;
}

bool
store_has (store_t *self, uint64_t key)
{
    return sq_idmap_lookup (self->map, key) != NULL;
}

int
store_remove (store_t *self, uint64_t key)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_remove (self->map, key);
    if (!entry)
        return -1;
    s_entry_destroy (self, &entry);
    return 0;
}

size_t
store_count (store_t *self)
{
    return sq_idmap_size (self->map);
}

uint64_t
store_bytes (store_t *self)
{
    return self->bytes;
}
