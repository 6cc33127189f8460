/*  constants: a client's cache of the sealed memory files of its recent
    large constants.

    On a governor's host a large constant is written into a memory file
    that is handed over as it is (sq_client_put_local). Writing 48 MiB of
    fresh pages cost about 22 ms on the 2-core test machine, and a program
    that computes the same collection again writes the same bytes again;
    comparing them with pages that are already there costs about a quarter
    of that. A sealed file never changes (F_SEAL_WRITE, F_SEAL_SEAL: not
    through any descriptor of any process), so the file of a constant of
    exactly the same bytes may be handed over again, to any governor, in
    any session.

    Exact or nothing: the sampled fingerprint only picks candidates (same
    size, same sampled bytes); a full compare of the new bytes with the
    cached file's read-only mapping is the only proof that one is reused.

    Bounded: at most SQ_CONSTANTS_ENTRIES files and `limit` bytes, least
    recently used evicted first; a constant larger than the limit is not
    cached. The cache holds one blob reference per file: its pages stay
    alive after the cluster freed the object, up to the bound, and go with
    sq_constants_destroy (or with the process: nothing is left anywhere
    once its descriptors are closed).

    Not locked: it is its client's, and a client and its sessions belong
    to one thread at a time (squall.h; the Python Client holds its lock for
    every call into the library). Sessions may outlive the cache: they
    hold references of their own. */
#include "sq_client_private.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

//  Words sampled by the fingerprint: 512 bytes read, nothing against the
//  compare a candidate costs.
#define S_SAMPLES 64

typedef struct {
    sq_blob_t *blob;            //  sealed segment, ours
    uint64_t fingerprint;
    uint64_t used;              //  tick of the last find or add
} s_entry_t;

struct _sq_constants_t {
    s_entry_t entries [SQ_CONSTANTS_ENTRIES];
    size_t n_entries;
    uint64_t bytes;             //  of the entries
    uint64_t limit;
    uint64_t tick;
    uint64_t hits, misses, collisions, bytes_reused, bytes_written;
};

sq_constants_t *
sq_constants_new (uint64_t limit)
{
    sq_constants_t *self = (sq_constants_t *) calloc (1, sizeof *self);
    if (self)
        self->limit = limit;
    return self;
}

void
sq_constants_destroy (sq_constants_t **self_p)
{
    sq_constants_t *self = *self_p;
    if (!self)
        return;
    *self_p = NULL;
    for (size_t i = 0; i < self->n_entries; i++)
        sq_blob_unref (&self->entries [i].blob);
    free (self);
}

static void
s_evict (sq_constants_t *self, size_t index)
{
    self->bytes -= sq_blob_size (self->entries [index].blob);
    sq_blob_unref (&self->entries [index].blob);
    self->entries [index] = self->entries [--self->n_entries];
}

//  Evicts the least recently used until `room` more bytes and one more
//  entry fit.
static void
s_make_room (sq_constants_t *self, uint64_t room, size_t entries)
{
    while (self->n_entries
    &&    (self->bytes + room > self->limit || self->n_entries + entries > SQ_CONSTANTS_ENTRIES)) {
        size_t oldest = 0;
        for (size_t i = 1; i < self->n_entries; i++)
            if (self->entries [i].used < self->entries [oldest].used)
                oldest = i;
        s_evict (self, oldest);
    }
}

void
sq_constants_set_limit (sq_constants_t *self, uint64_t limit)
{
    self->limit = limit;
    s_make_room (self, 0, 0);
}

//  Reads the parts as one run of bytes, forward only.
typedef struct {
    const void *const *parts;
    const size_t *sizes;
    size_t n, part, start;      //  part holding `start` .. start + sizes [part]
} s_cursor_t;

static void
s_cursor_read (s_cursor_t *c, size_t offset, uint8_t *dest, size_t len)
{
    while (len) {
        while (offset >= c->start + c->sizes [c->part]) {
            c->start += c->sizes [c->part];
            c->part++;
        }
        size_t at = offset - c->start, take = c->sizes [c->part] - at;
        if (take > len)
            take = len;
        memcpy (dest, (const uint8_t *) c->parts [c->part] + at, take);
        dest += take, offset += take, len -= take;
    }
}

//  splitmix64's finaliser: every input bit reaches every output bit.
static uint64_t
s_mix (uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t
sq_constants_fingerprint (const void *const *parts, const size_t *sizes, size_t n, size_t size)
{
    uint64_t hash = s_mix (size);
    if (size < 8)
        return hash;
    s_cursor_t cursor = { parts, sizes, n, 0, 0 };
    for (size_t i = 0; i < S_SAMPLES; i++) {
        uint64_t word;
        s_cursor_read (&cursor, (size - 8) / (S_SAMPLES - 1) * i, (uint8_t *) &word, 8);
        hash = s_mix (hash ^ word);
    }
    //  The last word too: the strides leave up to S_SAMPLES - 2 bytes
    //  unsampled at the end.
    uint64_t last;
    s_cursor_read (&cursor, size - 8, (uint8_t *) &last, 8);
    return s_mix (hash ^ last);
}

static bool
s_equal (const sq_blob_t *blob, const void *const *parts, const size_t *sizes, size_t n)
{
    const uint8_t *data = (const uint8_t *) sq_blob_data (blob);
    for (size_t i = 0; i < n; i++) {
        if (sizes [i] && memcmp (data, parts [i], sizes [i]))
            return false;
        data += sizes [i];
    }
    return true;
}

//  A sealed memory file holding the parts, written (never mapped
//  writable: the governor seals it against writes too, and F_SEAL_WRITE
//  is refused while a writable mapping exists) and then mapped read-only;
//  NULL if that fails.
static sq_blob_t *
s_segment_write (const void *const *parts, const size_t *sizes, size_t n, size_t size)
{
    int fd = memfd_create ("squall-put", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *) parts [i];
        size_t left = sizes [i];
        while (left) {
            ssize_t w = write (fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                close (fd);
                return NULL;
            }
            p += w;
            left -= (size_t) w;
        }
    }
    return sq_blob_shm_adopt (fd, size);        //  closes fd on failure
}

sq_blob_t *
sq_constants_segment (sq_constants_t *self, const void *const *parts, const size_t *sizes,
                      size_t n, size_t size)
{
    if (size == 0)
        return NULL;
    bool caching = self->limit >= size;
    uint64_t fingerprint = caching? sq_constants_fingerprint (parts, sizes, n, size): 0;
    for (size_t i = 0; caching && i < self->n_entries; i++) {
        s_entry_t *entry = &self->entries [i];
        if (entry->fingerprint != fingerprint || sq_blob_size (entry->blob) != size)
            continue;
        if (!s_equal (entry->blob, parts, sizes, n)) {
            self->collisions++;
            continue;
        }
        entry->used = ++self->tick;
        self->hits++;
        self->bytes_reused += size;
        return sq_blob_ref (entry->blob);
    }
    sq_blob_t *blob = s_segment_write (parts, sizes, n, size);
    if (!blob)
        return NULL;
    self->misses++;
    self->bytes_written += size;
    if (caching) {
        s_make_room (self, size, 1);
        self->entries [self->n_entries++] = (s_entry_t) {
            sq_blob_ref (blob), fingerprint, ++self->tick
        };
        self->bytes += size;
    }
    return blob;
}

void
sq_constants_stats (const sq_constants_t *self, sq_constant_cache_stats_t *stats)
{
    *stats = (sq_constant_cache_stats_t) {
        .hits = self->hits, .misses = self->misses, .collisions = self->collisions,
        .bytes_reused = self->bytes_reused, .bytes_written = self->bytes_written,
        .entries = self->n_entries, .bytes = self->bytes, .limit = self->limit
    };
}
