/*  blob: reference-counted immutable bytes, backed by malloc, a ZeroMQ
    message, a read-only file mapping, a shared memory segment (memfd), or
    a list of such blobs (joined). */
#include "blob.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { S_HEAP, S_MSG, S_MAP, S_JOIN, S_SHM } s_backing_t;

struct _sq_blob_t {
    atomic_uint refs;
    s_backing_t backing;
    size_t size;
    void *data;                 //  NULL for S_JOIN
    zmq_msg_t msg;              //  S_MSG only
    sq_blob_t **parts;          //  S_JOIN only: flat, non-empty, in order
    size_t *ends;               //  S_JOIN only: offset after each part
    size_t n_parts;
    int fd;                     //  S_SHM only: the memory file
    uint64_t shm_id;            //  S_SHM only
};

static atomic_uint_fast64_t s_shm_ids = 1;

sq_blob_t *
sq_blob_new (size_t size)
{
    sq_blob_t *self = (sq_blob_t *) calloc (1, sizeof *self);
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
    sq_blob_t *self = (sq_blob_t *) calloc (1, sizeof *self);
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
    sq_blob_t *self = (sq_blob_t *) calloc (1, sizeof *self);
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
sq_blob_join (sq_blob_t **parts, size_t n_parts)
{
    size_t n = 0;
    for (size_t i = 0; i < n_parts; i++) {
        assert (parts [i]->backing != S_JOIN);
        if (parts [i]->size)
            parts [n++] = parts [i];
        else
            sq_blob_unref (&parts [i]);
    }
    if (n == 0)
        return sq_blob_new (0);
    if (n == 1)
        return parts [0];
    sq_blob_t *self = (sq_blob_t *) calloc (1, sizeof *self);
    if (self) {
        self->parts = (sq_blob_t **) malloc (n * sizeof (sq_blob_t *));
        self->ends = (size_t *) malloc (n * sizeof (size_t));
    }
    if (!self || !self->parts || !self->ends) {
        if (self) {
            free (self->parts);
            free (self->ends);
            free (self);
        }
        for (size_t i = 0; i < n; i++)
            sq_blob_unref (&parts [i]);
        return NULL;
    }
    atomic_init (&self->refs, 1);
    self->backing = S_JOIN;
    for (size_t i = 0; i < n; i++) {
        self->parts [i] = parts [i];
        self->size += parts [i]->size;
        self->ends [i] = self->size;
    }
    self->n_parts = n;
    return self;
}

//  Index of the part of a joined blob holding byte `offset` (< size).
static size_t
s_part_of (const sq_blob_t *self, size_t offset)
{
    size_t low = 0, high = self->n_parts - 1;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (self->ends [mid] <= offset)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
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
    if (self->backing == S_MAP)
        munmap (self->data, self->size);
    else
    if (self->backing == S_SHM) {
        munmap (self->data, self->size);
        close (self->fd);
    }
    else {
        for (size_t i = 0; i < self->n_parts; i++)
            sq_blob_unref (&self->parts [i]);
        free (self->parts);
        free (self->ends);
    }
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

bool
sq_blob_flat (const sq_blob_t *self)
{
    return self->backing != S_JOIN;
}

const void *
sq_blob_span (const sq_blob_t *self, size_t offset, size_t *len)
{
    assert (offset < self->size);
    if (self->backing != S_JOIN) {
        *len = self->size - offset;
        return (const char *) self->data + offset;
    }
    size_t i = s_part_of (self, offset);
    size_t start = self->ends [i] - self->parts [i]->size;
    *len = self->ends [i] - offset;
    return (const char *) self->parts [i]->data + (offset - start);
}

void
sq_blob_read (const sq_blob_t *self, size_t offset, void *dest, size_t size)
{
    assert (offset <= self->size && size <= self->size - offset);
    char *to = (char *) dest;
    while (size > 0) {
        size_t len;
        const void *from = sq_blob_span (self, offset, &len);
        if (len > size)
            len = size;
        memcpy (to, from, len);
        to += len;
        offset += len;
        size -= len;
    }
}

sq_blob_t *
sq_blob_flatten (sq_blob_t *self)
{
    if (self->backing != S_JOIN)
        return sq_blob_ref (self);
    sq_blob_t *flat = sq_blob_new (self->size);
    if (flat)
        sq_blob_read (self, 0, flat->data, self->size);
    return flat;
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
    return sq_blob_msg_range (self, 0, self->size, msg);
}

int
sq_blob_msg_range (sq_blob_t *self, size_t offset, size_t size, zmq_msg_t *msg)
{
    if (offset > self->size || size > self->size - offset)
        return -1;
    //  The blob holding the range in one piece, and where in it.
    sq_blob_t *holder = self;
    size_t start = offset;
    if (self->backing == S_JOIN && size) {
        size_t i = s_part_of (self, offset);
        holder = size <= self->ends [i] - offset? self->parts [i]: NULL;
        start = offset - (self->ends [i] - self->parts [i]->size);
    }
    //  Tiny payloads are cheaper copied than reference-counted; ranges
    //  across parts have to be.
    if (size <= 64 || !holder) {
        if (zmq_msg_init_size (msg, size))
            return -1;
        if (size)
            sq_blob_read (self, offset, zmq_msg_data (msg), size);
        return 0;
    }
    sq_blob_ref (holder);
    if (zmq_msg_init_data (msg, (char *) holder->data + start, size, s_release, holder)) {
        sq_blob_unref (&holder);
        return -1;
    }
    return 0;
}

unsigned
sq_blob_refs (const sq_blob_t *self)
{
    unsigned refs = atomic_load_explicit (&((sq_blob_t *) self)->refs, memory_order_acquire);
    for (size_t i = 0; i < self->n_parts; i++)
        refs += atomic_load_explicit (&self->parts [i]->refs, memory_order_acquire) - 1;
    return refs;
}

bool
sq_blob_mapped (const sq_blob_t *self)
{
    return self->backing == S_MAP;
}

//  --------------------------------------------------------------------------
//  Shared segments

//  The seals that make a segment's bytes final, beside F_SEAL_WRITE.
#define S_SEALS_FIXED (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static sq_blob_t *
s_shm_blob (int fd, void *data, size_t size)
{
    sq_blob_t *self = (sq_blob_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    atomic_init (&self->refs, 1);
    self->backing = S_SHM;
    self->data = data;
    self->size = size;
    self->fd = fd;
    self->shm_id = atomic_fetch_add (&s_shm_ids, 1);
    return self;
}

//  The blob of a memory file mapped at data (MAP_FAILED if it could not
//  be); else NULL with errno set, and the file closed and unmapped.
static sq_blob_t *
s_shm_take (int fd, void *data, size_t size)
{
    sq_blob_t *self = data != MAP_FAILED? s_shm_blob (fd, data, size): NULL;
    if (!self) {
        int saved = errno;
        if (data != MAP_FAILED)
            munmap (data, size);
        close (fd);
        errno = saved? saved: ENOMEM;
    }
    return self;
}

//  Seals the file against writes and maps it read-only: F_SEAL_WRITE, not
//  F_SEAL_FUTURE_WRITE, so that another governor of this host may take it
//  (LCOPY, sq_blob_shm_adopt there). The kernel refuses F_SEAL_WRITE while
//  any shared mapping that may write exists, a read-only one of our
//  writable descriptor included: the file is mapped only once sealed, its
//  pages filled in at once (MAP_POPULATE: no fault per page later).
static void *
s_shm_seal_map (int fd, size_t size)
{
    if (fcntl (fd, F_ADD_SEALS, F_SEAL_WRITE | S_SEALS_FIXED))
        return MAP_FAILED;
    return mmap (NULL, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
}

sq_blob_t *
sq_blob_shm_copy (const sq_blob_t *source)
{
    size_t size = sq_blob_size (source);
    if (size == 0) {
        errno = EINVAL;
        return NULL;
    }
    int fd = memfd_create ("squall-object", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return NULL;
    //  Written, not mapped writable: no fault per page, and no writable
    //  mapping to take down before F_SEAL_WRITE.
    size_t offset = 0;
    while (offset < size) {
        size_t len;
        const uint8_t *span = (const uint8_t *) sq_blob_span (source, offset, &len);
        ssize_t n = write (fd, span, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        offset += (size_t) n;
    }
    return s_shm_take (fd, offset == size? s_shm_seal_map (fd, size): MAP_FAILED, size);
}

sq_blob_t *
sq_blob_shm_adopt (int fd, size_t size)
{
    struct stat st;
    int seals = fcntl (fd, F_GET_SEALS);
    //  Sealed against writes first, then checked: a size or bytes looked
    //  at before could still change. F_SEAL_WRITE, which fails while the
    //  writer still maps it writable (F_SEAL_FUTURE_WRITE would let that
    //  mapping write on).
    if (seals < 0 || fstat (fd, &st) || !S_ISREG (st.st_mode) || size == 0
    ||  (!(seals & F_SEAL_WRITE)
         && fcntl (fd, F_ADD_SEALS, F_SEAL_WRITE | S_SEALS_FIXED))
    ||  fstat (fd, &st) || (uint64_t) st.st_size != size) {
        int saved = errno;
        close (fd);
        errno = saved && saved != EAGAIN? saved: EINVAL;
        return NULL;
    }
    //  Already sealed by the writer: the fixed seals too, or its size
    //  could still change.
    if ((fcntl (fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
        close (fd);
        errno = EINVAL;
        return NULL;
    }
    void *data = mmap (NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    return s_shm_take (fd, data, size);
}

int
sq_blob_shm_fd (const sq_blob_t *self)
{
    return self->backing == S_SHM? self->fd: -1;
}

uint64_t
sq_blob_shm_id (const sq_blob_t *self)
{
    return self->backing == S_SHM? self->shm_id: 0;
}
