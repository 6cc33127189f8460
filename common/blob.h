/*  blob: an immutable, reference-counted byte buffer.

    Objects in a governor's store, inline data in the broker, and payload
    frames on the wire are all blobs, so an object is sent or handed to
    another thread without copying: sq_blob_msg makes a ZeroMQ message that
    points at the blob and holds a reference until ZeroMQ is done with it.
    The count is atomic, so blobs may be shared by threads; their bytes must
    not change once shared (write them only right after sq_blob_new).

    Ownership: sq_blob_new / sq_blob_from_msg return one reference; each
    sq_blob_ref adds one; sq_blob_unref drops one and nulls the pointer; the
    memory goes with the last. */
#ifndef SQ_BLOB_H
#define SQ_BLOB_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <zmq.h>

typedef struct _sq_blob_t sq_blob_t;

//  A writable blob of `size` bytes (uninitialised); NULL if out of memory.
sq_blob_t *sq_blob_new (size_t size);
//  A blob holding a copy of data.
sq_blob_t *sq_blob_copy (const void *data, size_t size);
//  Takes over a received ZeroMQ message without copying its bytes; `msg` is
//  left empty (closed) either way. NULL if out of memory.
sq_blob_t *sq_blob_from_msg (zmq_msg_t *msg);
//  Maps a file read-only (for spilled objects and files read by load);
//  NULL with errno set on failure. The file may be unlinked afterwards.
sq_blob_t *sq_blob_map_file (const char *path);
sq_blob_t *sq_blob_ref (sq_blob_t *self);
void sq_blob_unref (sq_blob_t **self_p);
const void *sq_blob_data (const sq_blob_t *self);
//  Writable bytes of a blob made by sq_blob_new and not yet shared.
void *sq_blob_wdata (sq_blob_t *self);
size_t sq_blob_size (const sq_blob_t *self);
//  Initialises `msg` to point at the blob's bytes (zero-copy), holding a
//  reference that ZeroMQ drops when it is done. 0 or -1.
int sq_blob_msg (sq_blob_t *self, zmq_msg_t *msg);
//  Same for bytes [offset, offset + size) of the blob (a chunk of a copy),
//  which must lie inside it. 0 or -1.
int sq_blob_msg_range (sq_blob_t *self, size_t offset, size_t size, zmq_msg_t *msg);
//  References held right now (by any thread: a snapshot). 1 means only the
//  caller's, so nobody else reads it (the store spills only such blobs).
unsigned sq_blob_refs (const sq_blob_t *self);
//  True for a file mapping: its pages are the kernel's to drop, not memory
//  the process must hold.
bool sq_blob_mapped (const sq_blob_t *self);

#endif
