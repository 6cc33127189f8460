/*  tasklog: tasks' stdout and stderr, per attempt, head and tail kept
    (tasklog.h). */
#include "tasklog.h"
#include "files.h"
#include "idmap.h"
#include "log.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void s_path (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream,
                    char *out, size_t size);

//  Ended attempts whose logs are kept; older ones go first.
#define S_KEEP_MAX 4096
//  Punched ranges are whole pages: the file system frees whole blocks.
#define S_PAGE 4096u

typedef struct _s_entry_t s_entry_t;
struct _s_entry_t {
    uint64_t key;
    uint32_t attempt;
    uint64_t limit;
    bool ended;
    //  While it runs: its memory files (memfd), read-write (reads, trims);
    //  -1 after. Ended: on_disk says which streams were kept in a file
    //  (those the task wrote to; an empty one leaves none).
    int fds [2];
    bool on_disk [2];
    uint64_t punched [2];       //  end of the range punched so far
    s_entry_t *older;           //  earlier attempts of the same task
    s_entry_t *next_ended;      //  FIFO of ended entries, oldest first
};

struct _tasklog_t {
    char *dir;
    uint64_t limit;
    sq_idmap_t *tasks;          //  key -> newest attempt's entry
    s_entry_t *ended_head, *ended_tail;
    size_t n_ended;
};

static s_entry_t *s_find (tasklog_t *self, uint64_t key, uint32_t attempt);

void
tasklog_path (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream, char *out, size_t size)
{
    s_entry_t *entry = s_find (self, key, attempt);
    if (entry && !entry->ended && (stream == 1 || stream == 2) && entry->fds [stream - 1] >= 0)
        snprintf (out, size, "/proc/%d/fd/%d", (int) getpid (), entry->fds [stream - 1]);
    else
        s_path (self, key, attempt, stream, out, size);
}

static void
s_path (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream, char *out, size_t size)
{
    snprintf (out, size, "%s/%016" PRIx64 "-%u.%s", self->dir, key, attempt,
              stream == 1? "out": "err");
}

tasklog_t *
tasklog_new (const char *dir, uint64_t limit)
{
    tasklog_t *self = (tasklog_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->dir = strdup (dir);
    self->limit = limit? limit: TASKLOG_LIMIT_DEFAULT;
    self->tasks = sq_idmap_new ();
    if (!self->dir || !self->tasks) {
        tasklog_destroy (&self);
        return NULL;
    }
    files_rmtree (self->dir);
    if (mkdir (self->dir, 0700) && errno != EEXIST) {
        sq_error ("cannot create the task log directory '%s': %s", self->dir, strerror (errno));
        tasklog_destroy (&self);
        return NULL;
    }
    return self;
}

static void
s_entry_free (tasklog_t *self, s_entry_t *entry, bool unlink_files)
{
    char path [4096];
    for (uint32_t s = 1; s <= 2; s++) {
        if (entry->fds [s - 1] >= 0)
            close (entry->fds [s - 1]);
        if (unlink_files && entry->on_disk [s - 1]) {
            s_path (self, entry->key, entry->attempt, s, path, sizeof path);
            unlink (path);
        }
    }
    free (entry);
}

void
tasklog_destroy (tasklog_t **self_p)
{
    tasklog_t *self = *self_p;
    if (!self)
        return;
    if (self->tasks) {
        size_t cursor = 0;
        uint64_t key;
        s_entry_t *entry;
        while ((entry = (s_entry_t *) sq_idmap_next (self->tasks, &cursor, &key)))
            while (entry) {
                s_entry_t *older = entry->older;
                s_entry_free (self, entry, false);
                entry = older;
            }
        sq_idmap_destroy (&self->tasks);
    }
    if (self->dir)
        files_rmtree (self->dir);
    free (self->dir);
    free (self);
    *self_p = NULL;
}

//  The map's entry of a key becomes `entry` (NULL: none). Never fails: an
//  insert right after a remove needs no room.
static void
s_set (tasklog_t *self, uint64_t key, s_entry_t *entry)
{
    sq_idmap_remove (self->tasks, key);
    if (entry)
        sq_idmap_insert (self->tasks, key, entry);
}

static s_entry_t *
s_find (tasklog_t *self, uint64_t key, uint32_t attempt)
{
    s_entry_t *entry = (s_entry_t *) sq_idmap_lookup (self->tasks, key);
    while (entry && entry->attempt != attempt)
        entry = entry->older;
    return entry;
}

//  Unlinks an entry from its task's chain (and the map when it was the
//  only one) and frees it with its files.
static void
s_forget (tasklog_t *self, s_entry_t *entry)
{
    s_entry_t *first = (s_entry_t *) sq_idmap_lookup (self->tasks, entry->key);
    if (first == entry)
        s_set (self, entry->key, entry->older);
    else
        for (s_entry_t *e = first; e; e = e->older)
            if (e->older == entry) {
                e->older = entry->older;
                break;
            }
    s_entry_free (self, entry, true);
}

int
tasklog_start (tasklog_t *self, uint64_t key, uint32_t attempt, uint64_t limit,
               int fds [2], char *err, size_t err_size)
{
    fds [0] = fds [1] = -1;
    s_entry_t *entry = s_find (self, key, attempt);
    if (entry) {
        //  The same attempt again (a piped task handed back unrun): its
        //  log starts afresh.
        if (entry->ended) {
            s_entry_t **p = &self->ended_head, *prev = NULL;
            while (*p && *p != entry)
                prev = *p, p = &(*p)->next_ended;
            if (*p) {
                *p = entry->next_ended;
                if (self->ended_tail == entry)
                    self->ended_tail = prev;
                self->n_ended--;
            }
        }
        s_forget (self, entry);
    }
    {
        entry = (s_entry_t *) calloc (1, sizeof *entry);
        if (!entry) {
            snprintf (err, err_size, "task log: out of memory");
            return -1;
        }
        entry->key = key;
        entry->attempt = attempt;
        entry->limit = limit? limit: self->limit;
        entry->fds [0] = entry->fds [1] = -1;
        //  In memory while it runs: a file on disk costs its creation
        //  (milliseconds on a busy disk) for every task, most of which
        //  print nothing; trims keep it at about the limit.
        for (uint32_t s = 1; s <= 2; s++) {
            entry->fds [s - 1] = memfd_create (s == 1? "squall-stdout": "squall-stderr", MFD_CLOEXEC);
            if (entry->fds [s - 1] < 0) {
                snprintf (err, err_size, "task log: cannot make a memory file: %s", strerror (errno));
                s_entry_free (self, entry, true);
                return -1;
            }
        }
        entry->older = (s_entry_t *) sq_idmap_lookup (self->tasks, key);
        if (entry->older)
            s_set (self, key, entry);       //  an earlier attempt's log stays behind it
        else
        if (sq_idmap_insert (self->tasks, key, entry)) {
            snprintf (err, err_size, "task log: out of memory");
            s_entry_free (self, entry, true);
            return -1;
        }
    }
    //  The task's descriptors share the memory file's offset: only the
    //  task writes (the governor reads with pread), so writes append.
    for (uint32_t s = 1; s <= 2; s++) {
        fds [s - 1] = fcntl (entry->fds [s - 1], F_DUPFD_CLOEXEC, 3);
        if (fds [s - 1] < 0) {
            snprintf (err, err_size, "task log: cannot duplicate a descriptor: %s", strerror (errno));
            if (fds [0] >= 0)
                close (fds [0]);
            fds [0] = -1;
            s_forget (self, entry);
            return -1;
        }
    }
    return 0;
}

static uint64_t
s_size (int fd)
{
    struct stat st;
    return fd >= 0 && fstat (fd, &st) == 0 && st.st_size > 0? (uint64_t) st.st_size: 0;
}

//  Frees the disk blocks of the dropped middle [head, total - tail).
static void
s_punch (s_entry_t *entry, uint32_t s)
{
    int fd = entry->fds [s - 1];
    uint64_t total = s_size (fd);
    if (total <= entry->limit)
        return;
    uint64_t head = entry->limit / 2, tail = entry->limit - head;
    uint64_t from = (head + S_PAGE - 1) / S_PAGE * S_PAGE;
    if (from < entry->punched [s - 1])
        from = entry->punched [s - 1];
    uint64_t to = (total - tail) / S_PAGE * S_PAGE;
    if (to <= from)
        return;
    if (fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) from, (off_t) (to - from)) == 0)
        entry->punched [s - 1] = to;
}

static size_t s_pread (int fd, uint8_t *buf, size_t size, uint64_t offset);

//  An ended stream that holds anything goes to a file of the log
//  directory, its kept head and tail at their own offsets (the middle a
//  hole), so that reads are the same as while it ran.
static void
s_keep (tasklog_t *self, s_entry_t *entry, uint32_t s)
{
    int from = entry->fds [s - 1];
    uint64_t total = s_size (from);
    if (total == 0)
        return;
    char path [4096];
    s_path (self, entry->key, entry->attempt, s, path, sizeof path);
    int to = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (to < 0) {
        sq_warn ("task log: cannot keep '%s': %s", path, strerror (errno));
        return;
    }
    uint64_t head = entry->limit / 2, tail = entry->limit - head;
    uint64_t ranges [2][2] = { { 0, total }, { 0, 0 } };
    if (total > entry->limit) {
        ranges [0][1] = head;
        ranges [1][0] = total - tail;
        ranges [1][1] = total;
    }
    uint8_t buf [65536];
    bool ok = true;
    for (int r = 0; r < 2 && ok; r++)
        for (uint64_t at = ranges [r][0]; at < ranges [r][1] && ok; ) {
            size_t want = ranges [r][1] - at < sizeof buf? (size_t) (ranges [r][1] - at): sizeof buf;
            size_t got = s_pread (from, buf, want, at);
            ok = got == want && pwrite (to, buf, got, (off_t) at) == (ssize_t) got;
            at += got;
        }
    ok = ok && ftruncate (to, (off_t) total) == 0;
    close (to);
    if (ok)
        entry->on_disk [s - 1] = true;
    else {
        sq_warn ("task log: cannot keep '%s': %s", path, strerror (errno));
        unlink (path);
    }
}

void
tasklog_end (tasklog_t *self, uint64_t key, uint32_t attempt)
{
    s_entry_t *entry = s_find (self, key, attempt);
    if (!entry || entry->ended)
        return;
    for (uint32_t s = 1; s <= 2; s++) {
        s_keep (self, entry, s);
        close (entry->fds [s - 1]);
        entry->fds [s - 1] = -1;
    }
    entry->ended = true;
    if (self->ended_tail)
        self->ended_tail->next_ended = entry;
    else
        self->ended_head = entry;
    self->ended_tail = entry;
    if (++self->n_ended > S_KEEP_MAX) {
        s_entry_t *old = self->ended_head;
        self->ended_head = old->next_ended;
        if (!self->ended_head)
            self->ended_tail = NULL;
        self->n_ended--;
        s_forget (self, old);
    }
}

void
tasklog_trim (tasklog_t *self)
{
    size_t cursor = 0;
    uint64_t key;
    s_entry_t *entry;
    while ((entry = (s_entry_t *) sq_idmap_next (self->tasks, &cursor, &key)))
        for (; entry; entry = entry->older)
            if (!entry->ended)
                for (uint32_t s = 1; s <= 2; s++)
                    s_punch (entry, s);
}

//  A stream's descriptor for reading: its memory file while it runs (not
//  to be closed), its kept file once ended (the caller closes it); -1: an
//  ended stream that held nothing (reads as empty), -2: a kept file gone.
static int
s_open (tasklog_t *self, s_entry_t *entry, uint32_t stream)
{
    if (!entry->ended)
        return entry->fds [stream - 1];
    if (!entry->on_disk [stream - 1])
        return -1;
    char path [4096];
    s_path (self, entry->key, entry->attempt, stream, path, sizeof path);
    int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    return fd < 0? -2: fd;
}

//  pread of exactly what is there, into buf; the count read.
static size_t
s_pread (int fd, uint8_t *buf, size_t size, uint64_t offset)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread (fd, buf + got, size - got, (off_t) (offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    return got;
}

int
tasklog_read (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream,
              uint64_t offset, uint64_t length, uint8_t **data, size_t *size,
              uint64_t *next, uint64_t *total, bool *done)
{
    *data = NULL;
    *size = 0;
    s_entry_t *entry = s_find (self, key, attempt);
    if (!entry || (stream != 1 && stream != 2))
        return -1;
    int fd = s_open (self, entry, stream);
    if (fd == -2)
        return -1;
    uint64_t t = s_size (fd);
    uint64_t head = entry->limit / 2, tail = entry->limit - head;
    *total = t;
    if (offset > t)
        offset = t;
    uint64_t end = t;           //  of the range readable from offset
    char marker [160];
    size_t n_marker = 0;
    if (t > entry->limit) {
        if (offset < head)
            end = head;
        else
        if (offset < t - tail) {
            //  In the dropped middle: say how much, go on at the tail. A
            //  marker of its own line, even after a cut one.
            uint8_t before = '\n';
            if (offset > 0)
                s_pread (fd, &before, 1, offset - 1);
            n_marker = (size_t) snprintf (marker, sizeof marker,
                "%s[squall: %" PRIu64 " bytes dropped (log limit %" PRIu64 " bytes)]\n",
                before == '\n'? "": "\n", t - tail - offset, entry->limit);
            offset = t - tail;
        }
    }
    uint64_t want = end - offset < length? end - offset: length;
    if (n_marker + want) {
        *data = (uint8_t *) malloc (n_marker + want);
        if (!*data) {
            if (fd >= 0 && entry->ended)
                close (fd);
            return -1;
        }
        memcpy (*data, marker, n_marker);
        *size = n_marker + s_pread (fd, *data + n_marker, (size_t) want, offset);
        offset += *size - n_marker;
    }
    if (fd >= 0 && entry->ended)
        close (fd);
    *next = offset;
    *done = entry->ended && offset >= t;
    return 0;
}

void
tasklog_tail (tasklog_t *self, uint64_t key, uint32_t attempt, uint32_t stream,
              char *out, size_t out_size)
{
    out [0] = 0;
    s_entry_t *entry = s_find (self, key, attempt);
    if (!entry || out_size < 2 || (stream != 1 && stream != 2))
        return;
    int fd = s_open (self, entry, stream);
    if (fd < 0)
        return;
    uint64_t t = s_size (fd);
    uint64_t from = t > out_size - 1? t - (out_size - 1): 0;
    uint64_t kept = entry->limit - entry->limit / 2;
    if (t > entry->limit && from < t - kept)
        from = t - kept;        //  never into the dropped middle
    size_t n = s_pread (fd, (uint8_t *) out, (size_t) (t - from), from);
    out [n] = 0;
    //  NUL bytes of the program's would cut the text short: shown as '?'.
    for (size_t i = 0; i < n; i++)
        if (out [i] == 0)
            out [i] = '?';
    if (entry->ended)
        close (fd);
}
