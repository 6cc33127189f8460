/*  store: an idmap of entries, each a blob reference and a content type,
    on an LRU list (most recently used at the tail) for spilling. */
#include "store.h"
#include "idmap.h"
#include "files.h"
#include "log.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct _s_entry_t s_entry_t;
struct _s_entry_t {
    uint64_t key;
    uint32_t version;           //  producer attempt of this copy (reattach inventory)
    uint64_t gen;               //  which put made it (store_generation)
    sq_blob_t *blob;
    char *content_type;
    bool shared;                //  its segment went to or came from another
                                //  governor of this host (store_set_shared)
    s_entry_t *prev, *next;     //  LRU list
};

struct _store_t {
    sq_idmap_t *map;
    uint64_t bytes;
    uint64_t memory;            //  of blobs that are not file mappings
    uint64_t shared;            //  of those, in entries marked shared
    uint64_t limit;             //  0: none
    char *spill_dir;
    uint64_t spill_seq;
    bool spill_broken;          //  a spill write failed: stop trying for a while
    s_entry_t *head, *tail;
    //  The box (store_set_box), and when and at what memory it was last
    //  looked at.
    uint64_t box_limit;
    store_beside_fn *beside;
    store_relieve_fn *relieve;
    void *beside_arg;
    uint64_t box_checked_ms;
    uint64_t box_checked_memory;
    uint64_t gen;               //  puts so far
    store_forget_fn *forget;    //  store_set_forget
    void *forget_arg;
};

static void
s_account (store_t *self, sq_blob_t *blob, bool add)
{
    uint64_t size = sq_blob_size (blob);
    if (add) {
        self->bytes += size;
        if (!sq_blob_mapped (blob))
            self->memory += size;
    }
    else {
        self->bytes -= size;
        if (!sq_blob_mapped (blob))
            self->memory -= size;
    }
}

//  The entry's bytes stop being the segment another governor holds (its
//  blob is replaced or freed).
static void
s_unshare (store_t *self, s_entry_t *entry)
{
    if (entry->shared) {
        self->shared -= sq_blob_size (entry->blob);
        entry->shared = false;
    }
}

static void
s_unlink (store_t *self, s_entry_t *entry)
{
    if (entry->prev)
        entry->prev->next = entry->next;
    else
        self->head = entry->next;
    if (entry->next)
        entry->next->prev = entry->prev;
    else
        self->tail = entry->prev;
    entry->prev = entry->next = NULL;
}

static void
s_append (store_t *self, s_entry_t *entry)
{
    entry->next = NULL;
    entry->prev = self->tail;
    if (self->tail)
        self->tail->next = entry;
    else
        self->head = entry;
    self->tail = entry;
}

static void
s_entry_destroy (store_t *self, s_entry_t **entry_p)
{
    s_entry_t *entry = *entry_p;
    if (self->forget)
        self->forget (self->forget_arg, entry->key, entry->gen);
    s_unshare (self, entry);
    s_account (self, entry->blob, false);
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
    s_entry_t *entry = self->head;
    while (entry) {
        s_entry_t *next = entry->next;
        s_entry_destroy (self, &entry);
        entry = next;
    }
    sq_idmap_destroy (&self->map);
    free (self->spill_dir);
    free (self);
    *self_p = NULL;
}

uint64_t
store_budget (uint64_t memory, uint32_t cpus, uint64_t heap_keep)
{
    if (memory == 0)
        return 0;
    uint64_t floor = memory / 4;
    //  Each term is checked against what is left: no overflow, no wrap.
    uint64_t left = memory;
    uint64_t execs = (uint64_t) cpus * STORE_EXEC_RESERVE;
    uint64_t reserves [] = { heap_keep, execs, STORE_BASE_RESERVE };
    for (size_t i = 0; i < sizeof reserves / sizeof reserves [0]; i++)
        left = reserves [i] < left? left - reserves [i]: 0;
    return left > floor? left: floor;
}

int
store_configure (store_t *self, uint64_t memory_limit, const char *spill_dir)
{
    char *dir = spill_dir? strdup (spill_dir): NULL;
    if (spill_dir && !dir)
        return -1;
    free (self->spill_dir);
    self->spill_dir = dir;
    self->limit = memory_limit;
    return 0;
}

int
store_spill_path (store_t *self, char *path, size_t size)
{
    if (!self->spill_dir)
        return -1;
    int n = snprintf (path, size, "%s/spill-%" PRIu64, self->spill_dir, ++self->spill_seq);
    return n < 0 || (size_t) n >= size? -1: 0;
}

//  Writes the entry's bytes to a file, maps it and swaps the blob. 0 or -1.
static int
s_spill (store_t *self, s_entry_t *entry)
{
    char path [4096];
    if (store_spill_path (self, path, sizeof path))
        return -1;
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        sq_warn ("cannot create spill file %s: %s", path, strerror (errno));
        return -1;
    }
    if (files_write_fd (fd, entry->blob)) {
        sq_warn ("cannot write spill file %s: %s", path, strerror (errno));
        close (fd);
        unlink (path);
        return -1;
    }
    close (fd);
    sq_blob_t *mapped = sq_blob_map_file (path);
    //  Unlinked at once: the mapping holds the bytes as long as it lives.
    unlink (path);
    if (!mapped) {
        sq_warn ("cannot map spill file %s: %s", path, strerror (errno));
        return -1;
    }
    s_unshare (self, entry);
    s_account (self, entry->blob, false);
    sq_blob_unref (&entry->blob);
    entry->blob = mapped;
    s_account (self, entry->blob, true);
    sq_debug ("spilled object %" PRIx64 " (%zu bytes)", entry->key, sq_blob_size (mapped));
    return 0;
}

//  Spills least recently used unreferenced objects until memory + need is
//  at most `target` bytes. True when it is. Objects whose segment another
//  governor of this host holds too (entry->shared) go last: their pages
//  stay in memory while that governor keeps them, so spilling them frees
//  nothing but the file's duplicate on disk; only when spilling the rest
//  is not enough are they spilled, least recently used first as well
//  (they may be the last holders: the other let go unseen).
static bool
s_spill_to (store_t *self, uint64_t need, uint64_t target)
{
    for (int pass = 0; pass < 2; pass++) {
        bool shared = pass == 1;
        if (shared && self->shared == 0)
            break;
        s_entry_t *entry = self->head;
        while (self->memory + need > target && entry && !self->spill_broken) {
            s_entry_t *next = entry->next;
            //  Tiny objects are not worth a file each.
            if (entry->shared == shared
            &&  !sq_blob_mapped (entry->blob) && sq_blob_size (entry->blob) >= 4096
            &&  sq_blob_refs (entry->blob) == 1 && s_spill (self, entry))
                self->spill_broken = true;
            entry = next;
        }
    }
    return self->memory + need <= target;
}

//  Keeps the store's memory + need + what is beside it in the box under
//  STORE_BOX_HIGH percent of the box. `always`: look now, else only when
//  due. True if it spilled.
static bool
s_box (store_t *self, uint64_t need, bool always)
{
    if (!self->beside || !self->spill_dir)
        return false;
    uint64_t now = (uint64_t) sq_now_ms ();
    if (!always && need < self->box_limit / 64
    &&  now < self->box_checked_ms + STORE_BOX_CHECK_MS
    &&  self->memory < self->box_checked_memory + self->box_limit / 64)
        return false;
    self->box_checked_ms = now;
    self->box_checked_memory = self->memory;
    uint64_t beside = self->beside (self->beside_arg, self->memory);
    uint64_t high = self->box_limit / 100 * STORE_BOX_HIGH;
    if (self->memory + need + beside <= high)
        return false;
    uint64_t low = self->box_limit / 100 * STORE_BOX_LOW;
    uint64_t target = low > beside + need? low - beside - need: 0;
    if (self->memory <= target)
        return false;           //  nothing of ours to give: the rest is theirs
    uint64_t before = self->memory;
    s_spill_to (self, 0, target);
    self->box_checked_memory = self->memory;
    if (self->memory < before && self->relieve)
        self->relieve (self->beside_arg);
    if (self->memory < before)
        sq_info ("store: %" PRIu64 " MiB in use beside the store in a box of %" PRIu64
                 " MiB: spilled %" PRIu64 " MiB", beside >> 20, self->box_limit >> 20,
                 (before - self->memory) >> 20);
    return self->memory < before;
}

static void
s_maybe_spill (store_t *self)
{
    if (self->limit && self->spill_dir && self->memory > self->limit / 100 * STORE_SPILL_HIGH)
        s_spill_to (self, 0, self->limit / 100 * STORE_SPILL_LOW);
    s_box (self, 0, false);
}

void
store_set_box (store_t *self, uint64_t box_limit, store_beside_fn *beside,
                store_relieve_fn *relieve, void *arg)
{
    self->box_limit = box_limit;
    self->beside = box_limit? beside: NULL;
    self->relieve = relieve;
    self->beside_arg = arg;
    self->box_checked_ms = 0;
    self->box_checked_memory = 0;
}

bool
store_check_box (store_t *self)
{
    self->spill_broken = false;
    return s_box (self, 0, true);
}

bool
store_make_room (store_t *self, uint64_t need)
{
    //  The box first: what fits the store's limit may not fit beside the
    //  rest. (Never a refusal: the box's others are not ours to hold back.)
    self->spill_broken = false;
    s_box (self, need, false);
    if (self->limit == 0)
        return true;
    self->spill_broken = false;
    uint64_t high = self->limit / 100 * STORE_SPILL_HIGH;
    if (self->memory + need <= high)
        return true;
    uint64_t low = self->limit / 100 * STORE_SPILL_LOW;
    return s_spill_to (self, need, need < low? low: need) || self->memory + need <= high;
}

bool
store_too_big (store_t *self, uint64_t size)
{
    return self->limit && self->spill_dir && size > self->limit / 2;
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
    entry->key = key;
    entry->gen = ++self->gen;
    entry->blob = blob;
    entry->content_type = type;
    s_entry_t *old = (s_entry_t *) sq_idmap_remove (self->map, key);
    if (old) {
        s_unlink (self, old);
        s_entry_destroy (self, &old);
    }
    s_account (self, blob, true);
    if (sq_idmap_insert (self->map, key, entry)) {
        s_entry_destroy (self, &entry);
        return -1;
    }
    s_append (self, entry);
    //  A new object may leave everything over the mark; spilling is retried
    //  after a failure only when objects come in.
    self->spill_broken = false;
    s_maybe_spill (self);
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
    if (entry != self->tail) {
        s_unlink (self, entry);
        s_append (self, entry);
    }
    return entry->blob;
}

sq_blob_t *
store_get_flat (store_t *self, uint64_t key, const char **content_type)
{
    sq_blob_t *blob = store_get (self, key, content_type);
    if (!blob || sq_blob_flat (blob))
        return blob;
    sq_blob_t *flat = sq_blob_flatten (blob);
    if (!flat)
        return NULL;
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    s_unshare (self, entry);
    s_account (self, entry->blob, false);
    sq_blob_unref (&entry->blob);
    entry->blob = flat;
    s_account (self, flat, true);
    return flat;
}

sq_blob_t *
store_get_shared (store_t *self, uint64_t key, const char **content_type)
{
    sq_blob_t *blob = store_get (self, key, content_type);
    if (!blob || sq_blob_size (blob) == 0)
        return NULL;
    if (sq_blob_shm_fd (blob) >= 0)
        return sq_blob_ref (blob);
    //  Sealed against writes as an executor's result is: served to a
    //  governor of this host as the file itself (LCOPY), not in chunks.
    sq_blob_t *shared = sq_blob_shm_copy (blob);
    if (!shared)
        return NULL;
    if (!sq_blob_mapped (blob)) {
        s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
        s_unshare (self, entry);
        s_account (self, entry->blob, false);
        sq_blob_unref (&entry->blob);
        entry->blob = sq_blob_ref (shared);
        s_account (self, shared, true);
    }
    return shared;
}

bool
store_has (store_t *self, uint64_t key)
{
    return sq_idmap_lookup (self->map, key) != NULL;
}

uint64_t
store_generation (store_t *self, uint64_t key)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    return entry? entry->gen: 0;
}

void
store_set_forget (store_t *self, store_forget_fn *forget, void *arg)
{
    self->forget = forget;
    self->forget_arg = arg;
}

void
store_set_shared (store_t *self, uint64_t key, const sq_blob_t *blob)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    if (!entry || entry->shared || entry->blob != blob || sq_blob_mapped (blob)
    ||  sq_blob_shm_fd (blob) < 0)
        return;
    entry->shared = true;
    self->shared += sq_blob_size (blob);
}

void
store_set_version (store_t *self, uint64_t key, uint32_t version)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->map, key);
    if (entry)
        entry->version = version;
}

bool
store_next (store_t *self, size_t *cursor, uint64_t *key, uint32_t *version, uint64_t *size)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_next (self->map, cursor, NULL);
    if (!entry)
        return false;
    *key = entry->key;
    *version = entry->version;
    *size = sq_blob_size (entry->blob);
    return true;
}

int
store_remove (store_t *self, uint64_t key)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_remove (self->map, key);
    if (!entry)
        return -1;
    s_unlink (self, entry);
    s_entry_destroy (self, &entry);
    return 0;
}

size_t
store_count (store_t *self)
{
    return sq_idmap_size (self->map);
}

uint64_t
store_memory (store_t *self)
{
    return self->memory;
}

uint64_t
store_spilled (store_t *self)
{
    return self->bytes - self->memory;
}

uint64_t
store_shared (store_t *self)
{
    return self->shared;
}

uint64_t
store_limit (store_t *self)
{
    return self->limit;
}
