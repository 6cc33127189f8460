/*  blob: an immutable, reference-counted byte buffer.

    Objects in a governor's store, inline data in the broker, and payload
    frames on the wire are all blobs, so an object is sent or handed to
    another thread without copying: sq_blob_msg makes a ZeroMQ message that
    points at the blob and holds a reference until ZeroMQ is done with it.
    The count is atomic, so blobs may be shared by threads; their bytes must
    not change once shared (write them only right after sq_blob_new).

    A blob is *flat* (one contiguous range: sq_blob_data) or *joined*: the
    parts of an object that arrived in chunks, kept as the received frames
    (sq_blob_join) so that nothing copies them into one buffer. Joined
    blobs are read with sq_blob_span / sq_blob_read, sent range by range
    (zero-copy within a part), and made flat only by a reader that needs
    contiguous bytes (sq_blob_flatten, a copy).

    Ownership: sq_blob_new / sq_blob_from_msg / sq_blob_join return one
    reference; each sq_blob_ref adds one; sq_blob_unref drops one and nulls
    the pointer; the memory goes with the last. */
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
//  The parts in order as one blob, without copying: takes over the
//  parts' references (also on failure); each part must be flat, empty
//  parts are dropped, one part is returned as it is. NULL if out of memory.
sq_blob_t *sq_blob_join (sq_blob_t **parts, size_t n_parts);
sq_blob_t *sq_blob_ref (sq_blob_t *self);
void sq_blob_unref (sq_blob_t **self_p);
//  The bytes of a flat blob; NULL for a joined one.
const void *sq_blob_data (const sq_blob_t *self);
//  Writable bytes of a blob made by sq_blob_new and not yet shared.
void *sq_blob_wdata (sq_blob_t *self);
//  True when the bytes are contiguous (sq_blob_data has them all).
bool sq_blob_flat (const sq_blob_t *self);
//  The contiguous bytes from `offset` (< size) to the end of the part
//  holding it, and their count in *len: how a joined blob is read in order.
const void *sq_blob_span (const sq_blob_t *self, size_t offset, size_t *len);
//  Copies bytes [offset, offset + size), which must lie inside the blob.
void sq_blob_read (const sq_blob_t *self, size_t offset, void *dest, size_t size);
//  A flat blob of the same bytes: a new reference to self when it is
//  flat, else a copy. NULL if out of memory.
sq_blob_t *sq_blob_flatten (sq_blob_t *self);
size_t sq_blob_size (const sq_blob_t *self);
//  Initialises `msg` to point at the blob's bytes (zero-copy), holding a
//  reference that ZeroMQ drops when it is done; a joined blob of several
//  parts is copied into the message. 0 or -1.
int sq_blob_msg (sq_blob_t *self, zmq_msg_t *msg);
//  Same for bytes [offset, offset + size) of the blob (a chunk of a copy),
//  which must lie inside it: zero-copy when they lie in one part of a
//  joined blob, else copied into the message. 0 or -1.
int sq_blob_msg_range (sq_blob_t *self, size_t offset, size_t size, zmq_msg_t *msg);
//  References held right now (by any thread: a snapshot), counting for a
//  joined blob those held on its parts alone (a part being sent). 1 means
//  only the caller's, so nobody else reads it (the store spills only such
//  blobs).
unsigned sq_blob_refs (const sq_blob_t *self);
//  True for a file mapping: its pages are the kernel's to drop, not memory
//  the process must hold.
bool sq_blob_mapped (const sq_blob_t *self);

//  Shared segments: a blob whose bytes live in an anonymous memory file
//  (memfd), so that another process given its descriptor (SCM_RIGHTS) can
//  map them instead of receiving a copy. Once sealed, nobody (not the
//  process that made it, not one it was handed to) can change or resize
//  its bytes: readers may map it read-only and keep the mapping for as
//  long as they like. The memory goes when the last blob reference is
//  dropped and no process maps it any more (the kernel's count). Segments
//  count as memory, not as mappings (sq_blob_mapped is false).
//
//  A segment holding a copy of `source`'s bytes (any blob of at least one
//  byte), written into the file rather than through a mapping and then
//  sealed against writes through any mapping (F_SEAL_WRITE), so that
//  another process may take it as sq_blob_shm_adopt does; NULL with errno
//  set.
sq_blob_t *sq_blob_shm_copy (const sq_blob_t *source);
//  A segment of `size` bytes that another process wrote (a memory file
//  made with MFD_ALLOW_SEALING): takes over `fd` (closed on failure),
//  seals it and maps it read-only. Fails (NULL, errno) when fd is not
//  such a file, its size is not `size`, or a writer still maps it
//  writable (it could change the bytes after they are checked).
sq_blob_t *sq_blob_shm_adopt (int fd, size_t size);
//  The segment's descriptor (borrowed), -1 for other blobs.
int sq_blob_shm_fd (const sq_blob_t *self);
//  A number naming the segment for the life of the process (unique, not 0);
//  0 for other blobs.
uint64_t sq_blob_shm_id (const sq_blob_t *self);

#endif
