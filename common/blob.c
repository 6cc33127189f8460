/*  blob: reference-counted immutable bytes, backed by malloc, a ZeroMQ
    message or a read-only file mapping. */
#include "blob.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { S_HEAP, S_MSG, S_MAP } s_backing_t;

struct _sq_blob_t {
    atomic_uint refs;
    s_backing_t backing;
    size_t size;
    void *data;
    zmq_msg_t msg;              //  S_MSG only
};

sq_blob_t *
sq_blob_new (size_t size)
{
    sq_blob_t *self = (sq_blob_t *) malloc (sizeof *self);
    if (!self)
        return NULL;
    //  malloc (0) may return NULL; keep a valid pointer for empty blobs.
    self->data = malloc (size? size: 1);
    if (!self->data) {
        free (self);
        return NULL;
    }
    atomic_init (&self->refs, 1);
    self->backing = S_HEAP;
    self->size = size;
    return self;
}

sq_blob_t *
sq_blob_copy (const void *data, size_t size)
{
    sq_blob_t *self = sq_blob_new (size);
    if (self && size)
        memcpy (self->data, data, size);
    return self;
}

sq_blob_t *
sq_blob_from_msg (zmq_msg_t *msg)
{
    sq_blob_t *self = (sq_blob_t *) malloc (sizeof *self);
    if (!self) {
        zmq_msg_close (msg);
        return NULL;
    }
    atomic_init (&self->refs, 1);
    self->backing = S_MSG;
    zmq_msg_init (&self->msg);
    zmq_msg_move (&self->msg, msg);
    zmq_msg_close (msg);
    self->data = zmq_msg_data (&self->msg);
    self->size = zmq_msg_size (&self->msg);
    return self;
}

sq_blob_t *
sq_blob_map_file (const char *path)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat (fd, &st) || !S_ISREG (st.st_mode)) {
        close (fd);
        return NULL;
    }
    if (st.st_size == 0) {
        close (fd);
        return sq_blob_new (0);
    }
    void *data = mmap (NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close (fd);
    if (data == MAP_FAILED)
        return NULL;
    sq_blob_t *self = (sq_blob_t *) malloc (sizeof *self);
    if (!self) {
        munmap (data, (size_t) st.st_size);
        return NULL;
    }
    atomic_init (&self->refs, 1);
    self->backing = S_MAP;
    self->data = data;
    self->size = (size_t) st.st_size;
    return self;
}

sq_blob_t *
sq_blob_ref (sq_blob_t *self)
{
    atomic_fetch_add_explicit (&self->refs, 1, memory_order_relaxed);
    return self;
}

void
sq_blob_unref (sq_blob_t **self_p)
{
    sq_blob_t *self = *self_p;
    if (!self)
        return;
    *self_p = NULL;
    if (atomic_fetch_sub_explicit (&self->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (self->backing == S_HEAP)
        free (self->data);
    else
    if (self->backing == S_MSG)
        zmq_msg_close (&self->msg);
    else
        munmap (self->data, self->size);
    free (self);
}

const void *
sq_blob_data (const sq_blob_t *self)
{
    return self->data;
}

void *
sq_blob_wdata (sq_blob_t *self)
{
    return self->data;
}

size_t
sq_blob_size (const sq_blob_t *self)
{
    return self->size;
}

static void
s_release (void *data, void *hint)
{
    (void) data;
    sq_blob_t *blob = (sq_blob_t *) hint;
    sq_blob_unref (&blob);
}

int
sq_blob_msg (sq_blob_t *self, zmq_msg_t *msg)
{
    //  Tiny payloads are cheaper copied than reference-counted.
    if (self->size <= 64) {
        if (zmq_msg_init_size (msg, self->size))
            return -1;
        if (self->size)
            memcpy (zmq_msg_data (msg), self->data, self->size);
        return 0;
    }
    sq_blob_ref (self);
    if (zmq_msg_init_data (msg, self->data, self->size, s_release, self)) {
        sq_blob_unref (&self);
        return -1;
    }
    return 0;
}

int
sq_blob_msg_range (sq_blob_t *self, size_t offset, size_t size, zmq_msg_t *msg)
{
    if (offset > self->size || size > self->size - offset)
        return -1;
    const char *start = (const char *) self->data + offset;
    if (size <= 64) {
        if (zmq_msg_init_size (msg, size))
            return -1;
        if (size)
            memcpy (zmq_msg_data (msg), start, size);
        return 0;
    }
    sq_blob_ref (self);
    if (zmq_msg_init_data (msg, (void *) start, size, s_release, self)) {
        sq_blob_unref (&self);
        return -1;
    }
    return 0;
}

unsigned
sq_blob_refs (const sq_blob_t *self)
{
    return atomic_load_explicit (&((sq_blob_t *) self)->refs, memory_order_acquire);
}

bool
sq_blob_mapped (const sq_blob_t *self)
{
    return self->backing == S_MAP;
}
