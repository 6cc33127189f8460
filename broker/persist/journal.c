/*  journal: the broker's log file, its syncer thread and compaction. */
#include "journal.h"
#include "private.h"
#include "capability.h"
#include "proto.h"
#include "log.h"
#include "fdpass.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_PENDING (512u << 20)  //  buffered and unwritten: past it, records are lost
#define S_MAX_TAIL (512u << 20)     //  appended during a compaction: past it, it is abandoned
#define S_GROWTH 4                  //  compact when the file is this many snapshots big

struct _journal_t {
    char *path;
    char *tmp_path;
    int fd;
    char cluster [SQ_CLUSTER_ID_LEN + 1];
    uint64_t epoch;
    bool restarted;
    uint64_t compact_min;
    msgpack_sbuffer pending;    //  records not yet written
    msgpack_packer pk;
    uint64_t file_bytes;
    uint64_t snapshot_bytes;    //  size of the last snapshot (live state)
    bool broken;                //  a write failed: warned once until it works
    journal_stats_t stats;

    //  Shared with the syncer, under lock.
    pthread_t syncer;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    int sync_ms;
    uint64_t written;           //  bytes written to fd so far
    uint64_t synced;
    int old_fd;                 //  after a compaction: sync and close it
    bool sync_dir;
    uint64_t syncs;
    uint64_t sync_errors;
    msgpack_sbuffer *job;       //  a snapshot to write to tmp_path
    int job_fd;                 //  its file once written and synced, -1 on failure
    bool job_done;
    //  The reactor's side of a compaction under way.
    bool compacting;
    msgpack_sbuffer tail;       //  what was appended since it started
};

//  --------------------------------------------------------------------------
//  Writing

static void
s_sync_dir (const char *path)
{
    char dir [4096];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (slash == dir)
        dir [1] = 0;
    else
    if (slash)
        *slash = 0;
    else
        snprintf (dir, sizeof dir, ".");
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync (fd);
        close (fd);
    }
}

//  The syncer: fdatasync every sync_ms when bytes were written, and the
//  compaction's snapshot file.
static void *
s_syncer (void *arg)
{
    journal_t *self = (journal_t *) arg;
    pthread_mutex_lock (&self->lock);
    while (!self->stop) {
        struct timespec until;
        clock_gettime (CLOCK_REALTIME, &until);
        until.tv_nsec += (long) (self->sync_ms % 1000) * 1000000L;
        until.tv_sec += self->sync_ms / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait (&self->wake, &self->lock, &until);
        if (self->job && !self->job_done) {
            msgpack_sbuffer *job = self->job;
            pthread_mutex_unlock (&self->lock);
            //  Made anew: a file or symlink planted under that name is
            //  never written through.
            unlink (self->tmp_path);
            int fd = open (self->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           0600);
            if (fd >= 0 && (sq_write_all (fd, job->data, job->size) || fdatasync (fd))) {
                sq_error ("journal compaction: cannot write %s: %s", self->tmp_path,
                          strerror (errno));
                close (fd);
                unlink (self->tmp_path);
                fd = -1;
            }
            pthread_mutex_lock (&self->lock);
            self->job_fd = fd;
            self->job_done = true;
        }
        if (self->old_fd >= 0) {
            int fd = self->old_fd;
            self->old_fd = -1;
            pthread_mutex_unlock (&self->lock);
            fdatasync (fd);
            close (fd);
            pthread_mutex_lock (&self->lock);
        }
        if (self->sync_dir) {
            self->sync_dir = false;
            pthread_mutex_unlock (&self->lock);
            s_sync_dir (self->path);
            pthread_mutex_lock (&self->lock);
        }
        if (self->written > self->synced) {
            uint64_t target = self->written;
            int fd = self->fd;
            //  The fd is not closed while we sync it: the reactor hands an
            //  old one over through old_fd, under this lock.
            pthread_mutex_unlock (&self->lock);
            int rc = fdatasync (fd);
            pthread_mutex_lock (&self->lock);
            if (rc == 0) {
                self->synced = target;
                self->syncs++;
            }
            else {
                self->sync_errors++;
                sq_error ("journal: fdatasync failed: %s", strerror (errno));
            }
        }
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

int
journal_flush (journal_t *self)
{
    if (self->pending.size == 0)
        return 0;
    if (sq_write_all (self->fd, self->pending.data, self->pending.size)) {
        self->stats.errors++;
        if (!self->broken)
            sq_error ("journal: cannot write %s: %s (records are kept in memory and "
                      "written when it works again)", self->path, strerror (errno));
        self->broken = true;
        if (self->pending.size > S_MAX_PENDING) {
            sq_error ("journal: %zu bytes could not be written: they are lost; a restart "
                      "will not see them", self->pending.size);
            msgpack_sbuffer_clear (&self->pending);
        }
        return -1;
    }
    if (self->broken)
        sq_info ("journal: writing again");
    self->broken = false;
    if (self->compacting) {
        if (self->tail.size + self->pending.size > S_MAX_TAIL) {
            sq_warn ("journal: compaction abandoned (too much appended meanwhile)");
            self->compacting = false;
            msgpack_sbuffer_clear (&self->tail);
        }
        else
            msgpack_sbuffer_write (&self->tail, self->pending.data, self->pending.size);
    }
    self->file_bytes += self->pending.size;
    pthread_mutex_lock (&self->lock);
    self->written += self->pending.size;
    pthread_mutex_unlock (&self->lock);
    msgpack_sbuffer_clear (&self->pending);
    return 0;
}

msgpack_packer *
journal_packer (journal_t *self)
{
    return &self->pk;
}

size_t
journal_begin (journal_t *self)
{
    return sq_rec_begin (&self->pending);
}

void
journal_end (journal_t *self, size_t offset)
{
    sq_rec_end (&self->pending, offset);
    self->stats.records++;
}

bool
journal_pending (journal_t *self)
{
    return self->pending.size > 0;
}

//  --------------------------------------------------------------------------
//  Compaction

bool
journal_compaction_due (journal_t *self)
{
    return !self->compacting && self->file_bytes > self->compact_min
        && self->file_bytes > S_GROWTH * self->snapshot_bytes;
}

void
journal_compact (journal_t *self, msgpack_sbuffer *snapshot)
{
    if (self->compacting) {
        msgpack_sbuffer_free (snapshot);
        return;
    }
    journal_flush (self);
    self->compacting = true;
    msgpack_sbuffer_clear (&self->tail);
    self->snapshot_bytes = snapshot->size;
    pthread_mutex_lock (&self->lock);
    self->job = snapshot;
    self->job_done = false;
    self->job_fd = -1;
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
}

void
journal_tick (journal_t *self)
{
    pthread_mutex_lock (&self->lock);
    if (!self->job || !self->job_done) {
        pthread_mutex_unlock (&self->lock);
        return;
    }
    msgpack_sbuffer *job = self->job;
    int fd = self->job_fd;
    self->job = NULL;
    self->job_done = false;
    pthread_mutex_unlock (&self->lock);
    uint64_t snapshot_size = job->size;
    msgpack_sbuffer_free (job);
    journal_flush (self);
    if (fd < 0 || !self->compacting
    ||  sq_write_all (fd, self->tail.data, self->tail.size)
    ||  rename (self->tmp_path, self->path)) {
        if (fd >= 0) {
            close (fd);
            unlink (self->tmp_path);
        }
        if (self->compacting)
            sq_warn ("journal: compaction failed; the journal goes on as it was");
        self->compacting = false;
        msgpack_sbuffer_clear (&self->tail);
        self->stats.errors++;
        return;
    }
    uint64_t before = self->file_bytes;
    self->file_bytes = snapshot_size + self->tail.size;
    self->compacting = false;
    msgpack_sbuffer_clear (&self->tail);
    //  From now on records go to the new file; the old one is synced and
    //  closed by the syncer, which also makes the rename durable.
    pthread_mutex_lock (&self->lock);
    self->old_fd = self->fd;
    self->fd = fd;
    self->synced = snapshot_size;
    self->written = self->file_bytes;
    self->sync_dir = true;
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
    self->stats.compactions++;
    sq_info ("journal compacted: %llu bytes -> %llu", (unsigned long long) before,
             (unsigned long long) self->file_bytes);
}

//  --------------------------------------------------------------------------
//  Opening and replay

static void
s_new_cluster (char *cluster)
{
    static const char hex [] = "0123456789abcdef";
    uint8_t bytes [SQ_CLUSTER_ID_LEN / 2];
    sq_random (bytes, sizeof bytes);
    for (size_t i = 0; i < sizeof bytes; i++) {
        cluster [2 * i] = hex [bytes [i] >> 4];
        cluster [2 * i + 1] = hex [bytes [i] & 15];
    }
    cluster [SQ_CLUSTER_ID_LEN] = 0;
}

//  Replays the file's records; returns the offset where the good records
//  end (a torn tail starts there), or -1 with a message.
static int64_t
s_replay (journal_t *self, const uint8_t *data, size_t size, journal_replay_fn *replay,
          void *arg, char *err, size_t err_size)
{
    size_t pos = SQ_REC_MAGIC_LEN, good = pos;
    const uint8_t *body;
    size_t body_size;
    const char *why = NULL;
    bool header = false;
    uint64_t n = 0;
    int rc;
    while ((rc = sq_rec_next (data, size, &pos, &body, &body_size, &why)) == 1) {
        sq_rec_t rec;
        char decode_err [300];
        if (sq_rec_decode (&rec, body, body_size, decode_err, sizeof decode_err)) {
            //  It framed and checksummed: not a torn write but a record this
            //  broker cannot read. Cutting there would lose good records.
            snprintf (err, err_size, "%s: record at byte %zu: %s", self->path, good, decode_err);
            return -1;
        }
        if (!header) {
            if (rec.type != SQ_REC_HEADER) {
                snprintf (err, err_size, "%s: the first record is not a header", self->path);
                sq_rec_release (&rec);
                return -1;
            }
            header = true;
            memcpy (self->cluster, rec.cluster.ptr, SQ_CLUSTER_ID_LEN);
            self->cluster [SQ_CLUSTER_ID_LEN] = 0;
        }
        if (rec.type == SQ_REC_HEADER || rec.type == SQ_REC_EPOCH)
            self->epoch = rec.epoch;
        replay (arg, &rec);
        sq_rec_release (&rec);
        good = pos;
        n++;
    }
    if (!header && rc == -1) {
        //  Not a torn write: the header itself is damaged, and what follows
        //  may be good. Starting afresh would throw it all away.
        snprintf (err, err_size, "%s: the journal's header is damaged (%s); refusing to start "
                  "(move the file away to start a new cluster)", self->path, why);
        return -1;
    }
    if (rc < 0)
        sq_warn ("%s: %s at byte %zu: the %zu bytes from there on are cut off (%s)", self->path,
                 why, pos, size - pos, rc == -2? "a write the broker did not finish"
                 : "damaged on disk");
    if (!header)
        return 0;               //  not even a header was written whole: start afresh
    sq_info ("journal %s: %llu records replayed (cluster %s, epoch %llu)", self->path,
             (unsigned long long) n, self->cluster, (unsigned long long) self->epoch);
    return (int64_t) good;
}

//  What a journal holds besides its files and its syncer thread.
static void
s_free (journal_t *self)
{
    msgpack_sbuffer_destroy (&self->pending);
    msgpack_sbuffer_destroy (&self->tail);
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->wake);
    free (self->path);
    free (self->tmp_path);
    free (self);
}

journal_t *
journal_open (const char *path, int sync_ms, uint64_t compact_min, journal_replay_fn *replay,
              void *arg, char *err, size_t err_size)
{
    journal_t *self = (journal_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_size, "out of memory");
        return NULL;
    }
    self->fd = self->old_fd = self->job_fd = -1;
    self->sync_ms = sync_ms > 0? sync_ms: 1;
    self->compact_min = compact_min;
    self->path = strdup (path);
    size_t tmp_len = strlen (path) + 16;
    self->tmp_path = (char *) malloc (tmp_len);
    msgpack_sbuffer_init (&self->pending);
    msgpack_sbuffer_init (&self->tail);
    msgpack_packer_init (&self->pk, &self->pending, msgpack_sbuffer_write);
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->wake, NULL);
    if (!self->path || !self->tmp_path) {
        snprintf (err, err_size, "out of memory");
        goto fail;
    }
    snprintf (self->tmp_path, tmp_len, "%s.compact", path);
    unlink (self->tmp_path);    //  a compaction a crash interrupted
    //  Every tenant's graphs and RESUME tokens: the owner's alone.
    self->fd = sq_open_private (path, O_RDWR | O_CREAT, err, err_size);
    if (self->fd < 0)
        goto fail;
    struct stat st;
    if (fstat (self->fd, &st) || !S_ISREG (st.st_mode)) {
        snprintf (err, err_size, "%s is not a regular file", path);
        goto fail;
    }
    int64_t good = 0;
    if (st.st_size > 0) {
        if (st.st_size < SQ_REC_MAGIC_LEN) {
            sq_warn ("%s: %lld bytes, not even the magic: starting a new journal", path,
                     (long long) st.st_size);
        }
        else {
            void *map = mmap (NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, self->fd, 0);
            if (map == MAP_FAILED) {
                snprintf (err, err_size, "cannot read %s: %s", path, strerror (errno));
                goto fail;
            }
            if (memcmp (map, SQ_REC_MAGIC, SQ_REC_MAGIC_LEN)) {
                munmap (map, (size_t) st.st_size);
                snprintf (err, err_size, "%s is not a squall journal (refusing to touch it)", path);
                goto fail;
            }
            madvise (map, (size_t) st.st_size, MADV_SEQUENTIAL);
            good = s_replay (self, (const uint8_t *) map, (size_t) st.st_size, replay, arg,
                             err, err_size);
            munmap (map, (size_t) st.st_size);
            if (good < 0)
                goto fail;
        }
    }
    if (good > 0) {
        self->restarted = true;
        self->epoch++;
        if (ftruncate (self->fd, (off_t) good) || lseek (self->fd, 0, SEEK_END) < 0) {
            snprintf (err, err_size, "cannot cut %s: %s", path, strerror (errno));
            goto fail;
        }
        self->file_bytes = (uint64_t) good;
        size_t offset = journal_begin (self);
        sq_rec_pack_epoch (&self->pk, self->epoch);
        journal_end (self, offset);
    }
    else {
        s_new_cluster (self->cluster);
        self->epoch = 1;
        if (ftruncate (self->fd, 0) || lseek (self->fd, 0, SEEK_SET) < 0) {
            snprintf (err, err_size, "cannot write %s: %s", path, strerror (errno));
            goto fail;
        }
        msgpack_sbuffer_write (&self->pending, SQ_REC_MAGIC, SQ_REC_MAGIC_LEN);
        size_t offset = journal_begin (self);
        sq_rec_pack_header (&self->pk, self->cluster, self->epoch);
        journal_end (self, offset);
    }
    if (journal_flush (self) || fdatasync (self->fd)) {
        snprintf (err, err_size, "cannot write %s: %s", path, strerror (errno));
        goto fail;
    }
    s_sync_dir (path);
    self->synced = self->written;
    if (pthread_create (&self->syncer, NULL, s_syncer, self)) {
        snprintf (err, err_size, "cannot start the journal's syncer thread");
        goto fail;
    }
    return self;
fail:
    if (self->fd >= 0)
        close (self->fd);
    s_free (self);
    return NULL;
}

void
journal_destroy (journal_t **self_p)
{
    journal_t *self = *self_p;
    if (!self)
        return;
    journal_flush (self);
    pthread_mutex_lock (&self->lock);
    self->stop = true;
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
    pthread_join (self->syncer, NULL);
    if (self->job) {
        if (self->job_done && self->job_fd >= 0) {
            close (self->job_fd);
            unlink (self->tmp_path);
        }
        msgpack_sbuffer_free (self->job);
    }
    else
    if (self->compacting)
        unlink (self->tmp_path);
    if (self->old_fd >= 0)
        close (self->old_fd);
    if (fdatasync (self->fd))
        sq_error ("journal: last fdatasync failed: %s", strerror (errno));
    close (self->fd);
    s_free (self);
    *self_p = NULL;
}

const char *
journal_cluster (journal_t *self)
{
    return self->cluster;
}

uint64_t
journal_epoch (journal_t *self)
{
    return self->epoch;
}

bool
journal_restarted (journal_t *self)
{
    return self->restarted;
}

void
journal_stats (journal_t *self, journal_stats_t *stats)
{
    *stats = self->stats;
    pthread_mutex_lock (&self->lock);
    stats->syncs = self->syncs;
    stats->errors += self->sync_errors;
    pthread_mutex_unlock (&self->lock);
    stats->bytes = self->file_bytes;
}
