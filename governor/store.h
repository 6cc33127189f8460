/*  store: the governor's in-memory object store, key -> bytes + content type.

    Objects are refcounted blobs, so handing one to a task, a peer or a
    client costs a reference, never a copy; removing an object that is still
    being sent only drops the store's reference.

    Ownership: the store owns one reference per object and a copy of each
    content type. store_put takes over the caller's reference. Pointers
    returned by store_get are borrowed: valid until the object is removed or
    replaced (take a reference to keep the blob longer). One thread only. */
#ifndef GOV_STORE_H
#define GOV_STORE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "blob.h"

typedef struct _store_t store_t;

store_t *store_new (void);
void store_destroy (store_t **self_p);
//  Stores or replaces an object. Takes over `blob` (even on failure).
//  content_type may be NULL (""); it is copied. 0, or -1 out of memory.
int store_put (store_t *self, uint64_t key, sq_blob_t *blob,
               const char *content_type, size_t content_type_len);
//  The object's blob (borrowed) and content type, NULL if absent.
sq_blob_t *store_get (store_t *self, uint64_t key, const char **content_type);
bool store_has (store_t *self, uint64_t key);
//  0 if removed, -1 if it was not there.
int store_remove (store_t *self, uint64_t key);
size_t store_count (store_t *self);
//  Bytes of object data held.
uint64_t store_bytes (store_t *self);

#endif
