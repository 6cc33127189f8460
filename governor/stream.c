/*  stream: streams' writers and readers on one governor (see stream.h).
    Over 800 lines: a writer and a reader each go by chunks or, on one host,
    by their pipe handed over, and the two ways share each end's state (its
    credits, its end, its failures), which one file keeps private. */
#include "stream.h"
#include "route.h"
#include "transfer.h"
#include "task.h"
#include "blob.h"
#include "idmap.h"
#include "log.h"
#include "fdpass.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define S_ENDED_RING 256
#define S_UNREAD_RING 1024
#define S_PROGRESS_NS 1000000000ull
#define S_TICK_MS 1000
#define S_TOKEN 16                      //  bytes of a hand-over's token
#define S_HANDS_MAX 64                  //  pipes handed to us, not claimed yet
#define S_SPLICES 16                    //  per poll, so that nothing waits behind one
//  A hand-over that found the reader's governor's socket queue full (the
//  kernel's net.unix.max_dgram_qlen datagrams, 10 by default: more readers
//  of one writer on one governor than that, handed over in one turn) is
//  tried again, every 1 ms at first, doubling up to S_HANDING_STEP_MS, for
//  S_HANDING_MS at most: then chunks (its governor is stuck; the writer
//  must not wait for it for ever).
#define S_HANDING_STEP_MS 32
#define S_HANDING_MS 5000

//  A reader of a writer's stream: named by STREAM (endpoint), or gone
//  (UNSTREAM, or its SCREDIT 0).
typedef struct {
    uint64_t consumer;
    char *endpoint;             //  NULL until named
    uint32_t credits;
    bool gone;
    bool local;                 //  our pipe went to it (same host): no chunks
    bool taken;                 //  and it said it took it
    //  Its governor's socket was full: tried again at handing_next_ns (the
    //  writer reads nothing meanwhile), until handing_until_ns.
    bool handing;
    uint32_t handing_ms;        //  the wait before the next try
    uint64_t handing_next_ns, handing_until_ns;
    //  One of several readers on this host: a pipe of its own (`tee`), its
    //  read end handed over, its write end here, into which the writer's
    //  governor copies what the program wrote; what did not fit waits.
    bool tee;
    bool ended;                 //  its governor saw the pipe's end (SLOCAL)
    int tee_fd;                 //  the write end, -1 once closed (tee only)
    sq_blob_t *pending;         //  bytes not written into it yet, or NULL
    size_t pending_at, pending_len;
} s_reader_at_t;

typedef struct {
    uint64_t task;
    uint32_t attempt;
    uint64_t object;
    int fd;                     //  -1 once at its end
    uint32_t readers;           //  expected, from ASSIGN
    s_reader_at_t dests [SQ_MAX_STREAM_CONSUMERS];
    uint32_t n_dests;
    uint64_t offset;            //  bytes sent
    uint64_t told;              //  bytes last reported as progress
    uint64_t told_ns;
    bool eof;                   //  its pipe ended; its tees drain (then done)
    bool counted;               //  reported as gone over the same-host path
} s_writer_t;

typedef struct _s_chunk_t s_chunk_t;
struct _s_chunk_t {
    zmq_msg_t bytes;
    size_t done;                //  written into the pipe so far
    bool end;
    s_chunk_t *next;
};

typedef struct {
    uint64_t consumer;
    uint64_t object;
    uint32_t version;
    int fd;                     //  -1 once closed
    char *reply_to;             //  the writer's address, from the first chunk
    s_chunk_t *head, *tail;
    uint32_t n_queued;
    uint64_t queued_bytes;
    uint64_t expect;            //  offset of the next chunk
    bool got_end;
    bool cancelled;             //  said SCREDIT 0: what still comes is dropped
    //  Same host: the writer's pipe itself (its read end), spliced into fd.
    bool local;
    int src;                    //  -1 if none, or at its end
    bool src_end;
    bool want_out;              //  the writer's pipe has bytes, ours is full
    uint64_t passed;            //  bytes spliced
    uint64_t told;
    uint64_t told_ns;
} s_reader_t;

//  A pipe handed to us, waiting for its token's chunk; or a client's
//  memory file (a same-host upload), waiting for its PUTLOCAL.
typedef struct {
    uint8_t token [S_TOKEN];
    int fd;                     //  -1: a free slot
    bool segment;               //  a memory file, not a pipe
    uint64_t at_ns;
} s_hand_t;

//  A chunk of a reader not assigned here yet.
typedef struct _s_early_t s_early_t;
struct _s_early_t {
    sq_schunk_t chunk;          //  reply_to points nowhere: see address;
                                //  token points into token_copy
    uint8_t token_copy [S_TOKEN];
    char *address;
    zmq_msg_t bytes;
    uint64_t at_ns;
    s_early_t *next;
};

struct _stream_t {
    void *pipe;
    uint32_t governor_id;
    char *data_endpoint;
    stream_done_fn *done;
    stream_progress_fn *progress;
    stream_local_fn *local;
    void *arg;
    int dirfd;                  //  the stream directory (O_PATH), or -1 (borrowed)
    int sock;                   //  our socket there, or -1 (borrowed)
    s_hand_t hands [S_HANDS_MAX];
    sq_idmap_t *writers;        //  task key -> s_writer_t
    sq_idmap_t *by_object;      //  object key -> s_writer_t
    sq_idmap_t *readers;        //  consumer task key -> s_reader_t
    s_early_t *early_head, *early_tail;
    size_t n_early;
    uint64_t early_bytes;
    //  Readers that ended here, and the writer attempt they read: a new
    //  attempt of the same reader reads a new attempt of the writer.
    struct { uint64_t consumer; uint32_t version; } ended [S_ENDED_RING];
    size_t ended_next;
    //  UNSTREAMs for writers not started yet (a reader failed while its
    //  writer waited for cpus here): applied when the writer starts.
    struct { uint64_t object, consumer; uint32_t version; } unread [S_UNREAD_RING];
    size_t unread_next;
    //  What stream_items put in the poll set, in order: task keys (the
    //  writer or reader may be gone by the time stream_poll looks).
    uint64_t *polled;
    uint8_t *polled_kind;       //  S_POLL_*
    size_t cap_polled;
};

enum { S_POLL_READER, S_POLL_WRITER, S_POLL_SOCKET, S_POLL_TEE };

//  Our socket in the stream directory is named after the data endpoint the
//  broker gives writers in STREAM orders: FNV-1a of it, in hex. The path
//  goes through the directory's descriptor (/proc/self/fd/N), so that a
//  directory deeper than a socket address's 108 bytes works, and the one
//  whose owner and mode were checked is the one used.
static int
s_sock_path (char *out, size_t size, int dirfd, const char *endpoint, size_t len)
{
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++)
        hash = (hash ^ (uint8_t) endpoint [i]) * 1099511628211ull;
    int n = snprintf (out, size, "/proc/self/fd/%d/%016" PRIx64 ".sock", dirfd, hash);
    return n < 0 || (size_t) n >= size? -1: 0;
}

//  The same socket's name for clients: "put-" and FNV-1a of the serve
//  endpoint they are given (client/fetch.c makes the same name).
static int
s_put_path (char *out, size_t size, int dirfd, const char *endpoint)
{
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; endpoint [i]; i++)
        hash = (hash ^ (uint8_t) endpoint [i]) * 1099511628211ull;
    int n = snprintf (out, size, "/proc/self/fd/%d/put-%016" PRIx64 ".sock", dirfd, hash);
    return n < 0 || (size_t) n >= size? -1: 0;
}

struct _stream_dir_t {
    int dirfd;                  //  the directory (O_PATH)
    int sock;                   //  our socket in it, bound
    char *sock_path;
    char *put_path;             //  its second name, for clients (or NULL)
};

//  The directory must be ours and closed to everyone else: whoever can
//  make a socket there could stand in for a governor's (docs/security.md);
//  such a directory is fatal (a misconfiguration to mend, not to run past).
//  A bind that fails in a good directory (no /proc to name the socket
//  through, the name taken by something not a socket) only costs speed:
//  warned, and this governor's streams go as chunks, as without a
//  directory (writers here too: they hand pipes through our socket).
//  Made once per process, before the broker knows the governor: a writer's
//  governor told to hand a pipe to us must find our socket there, or its
//  stream goes as chunks (so it did when compute bound it, after HELLO).
stream_dir_t *
stream_dir_new (const char *dir, const char *endpoint, const char *serve_endpoint)
{
    stream_dir_t *self = (stream_dir_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->sock = -1;
    self->dirfd = -1;
    if (mkdir (dir, 0700) && errno != EEXIST) {
        sq_error ("--stream-dir %s: %s", dir, strerror (errno));
        stream_dir_destroy (&self);
        return NULL;
    }
    struct stat st;
    self->dirfd = open (dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (self->dirfd < 0 || fstat (self->dirfd, &st) || !S_ISDIR (st.st_mode)
    ||  st.st_uid != geteuid () || (st.st_mode & 077)) {
        sq_error ("--stream-dir %s: not a directory of ours closed to others (mode 0700)", dir);
        stream_dir_destroy (&self);
        return NULL;
    }
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (s_sock_path (addr.sun_path, sizeof addr.sun_path, self->dirfd, endpoint,
                     strlen (endpoint))) {
        sq_error ("--stream-dir %s: too long for a socket's path", dir);
        stream_dir_destroy (&self);
        return NULL;
    }
    self->sock_path = strdup (addr.sun_path);
    if (!self->sock_path) {
        stream_dir_destroy (&self);
        return NULL;
    }
    self->sock = socket (AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int on = 1;
    unlink (addr.sun_path);             //  one of a governor gone
    bool bound = false;
    if (self->sock < 0
    ||  !(bound = bind (self->sock, (struct sockaddr *) &addr, sizeof addr) == 0)
    ||  chmod (addr.sun_path, 0600)
    ||  setsockopt (self->sock, SOL_SOCKET, SO_PASSCRED, &on, sizeof on)) {
        sq_warn ("--stream-dir %s: cannot bind %s: %s; streams go as chunks", dir,
                 addr.sun_path, strerror (errno));
        if (self->sock >= 0)
            close (self->sock);
        if (bound)
            unlink (addr.sun_path);
        self->sock = -1;
        free (self->sock_path);
        self->sock_path = NULL;
        close (self->dirfd);
        self->dirfd = -1;
        return self;
    }
    //  A second name (a hard link to the same socket), which clients find
    //  from the serve endpoint they know; without it they upload by PUT.
    char put [sizeof addr.sun_path];
    if (serve_endpoint && *serve_endpoint
    &&  s_put_path (put, sizeof put, self->dirfd, serve_endpoint) == 0) {
        unlink (put);
        if (link (addr.sun_path, put) == 0)
            self->put_path = strdup (put);
        else
            sq_warn ("--stream-dir %s: cannot link %s: %s (clients of this host will upload "
                     "by PUT)", dir, put, strerror (errno));
    }
    return self;
}

void
stream_dir_destroy (stream_dir_t **self_p)
{
    stream_dir_t *self = *self_p;
    if (!self)
        return;
    if (self->sock >= 0) {
        close (self->sock);
        unlink (self->sock_path);
    }
    if (self->put_path)
        unlink (self->put_path);
    free (self->sock_path);
    free (self->put_path);
    if (self->dirfd >= 0)
        close (self->dirfd);
    free (self);
    *self_p = NULL;
}

stream_t *
stream_new (const stream_args_t *args)
{
    stream_t *self = (stream_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pipe = args->pipe;
    self->governor_id = args->governor_id;
    self->done = args->done;
    self->progress = args->progress;
    self->local = args->local;
    self->arg = args->arg;
    self->sock = -1;
    self->dirfd = -1;
    for (size_t i = 0; i < S_HANDS_MAX; i++)
        self->hands [i].fd = -1;
    self->data_endpoint = strdup (args->data_endpoint? args->data_endpoint: "");
    self->writers = sq_idmap_new ();
    self->by_object = sq_idmap_new ();
    self->readers = sq_idmap_new ();
    if (args->dir) {
        self->dirfd = args->dir->dirfd;
        self->sock = args->dir->sock;
    }
    if (!self->data_endpoint || !self->writers || !self->by_object || !self->readers)
        stream_destroy (&self);
    return self;
}

static void
s_writer_free (s_writer_t **w_p)
{
    s_writer_t *w = *w_p;
    if (w->fd >= 0)
        close (w->fd);
    for (uint32_t i = 0; i < w->n_dests; i++) {
        free (w->dests [i].endpoint);
        if (w->dests [i].tee && w->dests [i].tee_fd >= 0)
            close (w->dests [i].tee_fd);
        sq_blob_unref (&w->dests [i].pending);
    }
    free (w);
    *w_p = NULL;
}

static void
s_reader_free (s_reader_t **r_p)
{
    s_reader_t *r = *r_p;
    while (r->head) {
        s_chunk_t *c = r->head;
        r->head = c->next;
        zmq_msg_close (&c->bytes);
        free (c);
    }
    if (r->fd >= 0)
        close (r->fd);
    if (r->src >= 0)
        close (r->src);
    free (r->reply_to);
    free (r);
    *r_p = NULL;
}

static void
s_early_free (s_early_t **e_p)
{
    s_early_t *e = *e_p;
    zmq_msg_close (&e->bytes);
    free (e->address);
    free (e);
    *e_p = NULL;
}

void
stream_destroy (stream_t **self_p)
{
    stream_t *self = *self_p;
    if (!self)
        return;
    size_t cursor = 0;
    void *item;
    while (self->writers && (item = sq_idmap_next (self->writers, &cursor, NULL))) {
        s_writer_t *w = (s_writer_t *) item;
        s_writer_free (&w);
    }
    cursor = 0;
    while (self->readers && (item = sq_idmap_next (self->readers, &cursor, NULL))) {
        s_reader_t *r = (s_reader_t *) item;
        s_reader_free (&r);
    }
    while (self->early_head) {
        s_early_t *e = self->early_head;
        self->early_head = e->next;
        s_early_free (&e);
    }
    sq_idmap_destroy (&self->writers);
    sq_idmap_destroy (&self->by_object);
    sq_idmap_destroy (&self->readers);
    for (size_t i = 0; i < S_HANDS_MAX; i++)
        if (self->hands [i].fd >= 0)
            close (self->hands [i].fd);
    free (self->polled);
    free (self->polled_kind);
    free (self->data_endpoint);
    free (self);
    *self_p = NULL;
}

static int
s_nonblocking (int fd)
{
    int flags = fcntl (fd, F_GETFL);
    return flags < 0? -1: fcntl (fd, F_SETFL, flags | O_NONBLOCK);
}

//  --------------------------------------------------------------------------
//  Writer

int
stream_writer_add (stream_t *self, uint64_t task, uint32_t attempt, uint64_t object,
                   uint32_t readers, int fd)
{
    s_writer_t *w = (s_writer_t *) calloc (1, sizeof *w);
    if (!w || s_nonblocking (fd) || readers > SQ_MAX_STREAM_CONSUMERS
    ||  sq_idmap_lookup (self->by_object, object)) {
        free (w);
        close (fd);
        return -1;
    }
    w->task = task;
    w->attempt = attempt;
    w->object = object;
    w->fd = fd;
    w->readers = readers;
    w->told_ns = task_now_ns ();
    if (sq_idmap_insert (self->writers, task, w)) {
        s_writer_free (&w);
        return -1;
    }
    if (sq_idmap_insert (self->by_object, object, w)) {
        sq_idmap_remove (self->writers, task);
        s_writer_free (&w);
        return -1;
    }
    for (size_t i = 0; i < S_UNREAD_RING && w->n_dests < SQ_MAX_STREAM_CONSUMERS; i++)
        if (self->unread [i].object == object && self->unread [i].version == attempt
        &&  self->unread [i].consumer) {
            w->dests [w->n_dests++] = (s_reader_at_t) { .consumer = self->unread [i].consumer, .gone = true, .tee_fd = -1 };
            self->unread [i].consumer = 0;
        }
    return 0;
}

void
stream_writer_remove (stream_t *self, uint64_t task)
{
    s_writer_t *w = (s_writer_t *) sq_idmap_remove (self->writers, task);
    if (!w)
        return;
    sq_idmap_remove (self->by_object, w->object);
    s_writer_free (&w);
}

static s_reader_at_t *
s_dest (s_writer_t *w, uint64_t consumer)
{
    for (uint32_t i = 0; i < w->n_dests; i++)
        if (w->dests [i].consumer == consumer)
            return &w->dests [i];
    return NULL;
}

//  Every reader named or gone: the writer may read its pipe.
static bool
s_all_named (const s_writer_t *w)
{
    return w->n_dests >= w->readers;
}

//  Named readers all gone (or none at all): nobody wants more bytes.
static bool
s_deserted (const s_writer_t *w)
{
    if (!s_all_named (w))
        return false;
    for (uint32_t i = 0; i < w->n_dests; i++)
        if (!w->dests [i].gone)
            return false;
    return true;
}

//  A tee's reader stopped: its pipe closes (its governor sees the end).
static void
s_tee_close (s_reader_at_t *dest)
{
    if (dest->tee_fd >= 0)
        close (dest->tee_fd);
    dest->tee_fd = -1;
    sq_blob_unref (&dest->pending);
}

//  Every reader can take the next read: chunks' in credit, tees' taken by
//  their governors and written out. A reader given the writer's own pipe
//  (its only reader) reads it itself.
static bool
s_writable (const s_writer_t *w)
{
    if (w->fd < 0 || !s_all_named (w))
        return false;
    for (uint32_t i = 0; i < w->n_dests; i++) {
        const s_reader_at_t *d = &w->dests [i];
        if (d->gone)
            continue;
        if (d->handing || (d->tee? !d->taken || d->pending: d->credits == 0 || d->local))
            return false;
    }
    return true;
}

//  Writes what waits for a tee; -1 when its reader is gone (EPIPE).
static int
s_tee_flush (s_reader_at_t *dest)
{
    while (dest->pending) {
        ssize_t n = write (dest->tee_fd,
                           (const char *) sq_blob_data (dest->pending) + dest->pending_at,
                           dest->pending_len - dest->pending_at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n < 0)
            return -1;
        dest->pending_at += (size_t) n;
        if (dest->pending_at == dest->pending_len)
            sq_blob_unref (&dest->pending);
    }
    return 0;
}

static void s_send_chunk (stream_t *self, s_writer_t *w, s_reader_at_t *dest, sq_blob_t *blob,
                          size_t size, bool end, const uint8_t *token);

//  Whether two tcp:// endpoints name one host (their text up to the port).
static bool
s_same_host (const char *ours, const char *theirs, size_t len)
{
    const char *colon = strrchr (ours, ':');
    size_t host = colon? (size_t) (colon - ours): strlen (ours);
    return len > host && memcmp (ours, theirs, host) == 0 && theirs [host] == ':';
}

//  Same host: the pipe's read end goes to the reader's governor through
//  its socket in the stream directory, the token through the CURVE
//  channel (the first chunk). Nothing was read from the pipe yet (every
//  reader is named first). A writer's only reader gets the writer's pipe
//  itself; one of several, a pipe of its own that the writer's governor
//  fills (a tee). On any failure (no such socket: another host, or no
//  directory there) chunks go as ever.
static void
s_hand_over (stream_t *self, s_writer_t *w, s_reader_at_t *dest, const char *endpoint,
             size_t len)
{
    int tee [2] = { -1, -1 };
    if (w->readers > 1) {
        if (pipe2 (tee, O_CLOEXEC | O_NONBLOCK)) {
            sq_warn ("stream %" PRIx64 ": chunks, not a pipe: %s", w->object, strerror (errno));
            return;
        }
        //  A chunk's worth in flight, as the writer's own pipe would hold
        //  (best effort: the system's limit may be lower).
        fcntl (tee [1], F_SETPIPE_SZ, (int) STREAM_CHUNK);
    }
    int fd = w->readers > 1? tee [0]: w->fd;
    struct sockaddr_un to = { .sun_family = AF_UNIX };
    uint8_t token [S_TOKEN];
    const char *wrong = s_sock_path (to.sun_path, sizeof to.sun_path, self->dirfd, endpoint, len)
                      ? "its reader's socket path is too long"
                      : getrandom (token, sizeof token, 0) != (ssize_t) sizeof token
                      ? "no random token": NULL;
    if (wrong) {
        sq_warn ("stream %" PRIx64 ": chunks, not a pipe: %s", w->object, wrong);
        if (tee [0] >= 0) {
            close (tee [0]);
            close (tee [1]);
        }
        return;
    }
    bool sent = sq_fdpass_send (self->sock, &to, sizeof to, token, sizeof token, &fd, 1,
                                MSG_DONTWAIT) == (ssize_t) sizeof token;
    int sent_errno = errno;
    if (tee [0] >= 0) {
        close (tee [0]);                //  theirs now, if it went
        if (!sent)
            close (tee [1]);
    }
    errno = sent_errno;
    if (!sent && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        //  Its queue is full: again a little later (stream_poll), within
        //  a bound.
        uint64_t now = task_now_ns ();
        if (!dest->handing) {
            dest->handing = true;
            dest->handing_ms = 1;
            dest->handing_until_ns = now + S_HANDING_MS * 1000000ull;
        }
        else
        if (dest->handing_ms < S_HANDING_STEP_MS)
            dest->handing_ms *= 2;
        if (now < dest->handing_until_ns) {
            dest->handing_next_ns = now + dest->handing_ms * 1000000ull;
            return;
        }
        dest->handing = false;
        sq_warn ("stream %" PRIx64 ": chunks, not a pipe: %s's queue stayed full for %d ms",
                 w->object, to.sun_path, S_HANDING_MS);
        return;
    }
    dest->handing = false;
    if (!sent) {
        //  No socket of that name: the reader's governor is on another
        //  host (no fallback: said at info), or at our own address with
        //  another directory, or not started (a fallback: warned).
        if (errno == ENOENT && !s_same_host (self->data_endpoint, endpoint, len))
            sq_info ("stream %" PRIx64 ": reader's governor not in our stream directory "
                     "(another host): chunks", w->object);
        else
            sq_warn ("stream %" PRIx64 ": chunks, not a pipe: cannot hand it to %s: %s",
                     w->object, to.sun_path, strerror (errno));
        return;
    }
    sq_debug ("stream %" PRIx64 ": pipe handed to %s", w->object, to.sun_path);
    dest->local = true;
    if (tee [1] >= 0) {
        dest->tee = true;
        dest->tee_fd = tee [1];
    }
    s_send_chunk (self, w, dest, NULL, 0, false, token);
}

//  Hand-overs whose governor's socket was full, tried again when due;
//  returns the ms until the next one is (or -1: none waits).
static long
s_handing_retry (stream_t *self, s_writer_t *w, uint64_t now)
{
    long next = -1;
    for (uint32_t i = 0; i < w->n_dests; i++) {
        s_reader_at_t *d = &w->dests [i];
        if (!d->handing)
            continue;
        if (d->gone || w->fd < 0) {
            d->handing = false;
            continue;
        }
        if (now >= d->handing_next_ns) {
            //  Its endpoint as STREAM gave it: the route's, past the key
            //  (gov_peer_address).
            const char *endpoint = d->endpoint [0] == 'K'? d->endpoint + 41: d->endpoint;
            s_hand_over (self, w, d, endpoint, strlen (endpoint));
        }
        if (d->handing) {
            long ms = d->handing_next_ns > now
                    ? (long) ((d->handing_next_ns - now + 999999) / 1000000): 0;
            next = next < 0 || ms < next? ms: next;
        }
    }
    return next;
}

void
stream_on_order (stream_t *self, uint32_t type, sq_msg_t *msg)
{
    sq_errbuf_t err;
    sq_iter_t it;
    sq_stream_order_t order;
    int rc = sq_batch_begin (&it, type, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while (rc == 0 && (rc = sq_batch_next (&it, type, &order)) == 1) {
        rc = 0;
        s_writer_t *w = (s_writer_t *) sq_idmap_lookup (self->by_object, order.key);
        if (!w && type == SQ_MSG_UNSTREAM) {
            //  Its writer has not started: remembered until it does.
            size_t slot = self->unread_next++ % S_UNREAD_RING;
            self->unread [slot].object = order.key;
            self->unread [slot].version = order.version;
            self->unread [slot].consumer = order.consumer;
            continue;
        }
        if (!w || w->attempt != order.version)
            continue;           //  an attempt already gone
        s_reader_at_t *dest = s_dest (w, order.consumer);
        if (type == SQ_MSG_UNSTREAM) {
            if (dest)
                dest->gone = true;
            else
            if (w->n_dests < SQ_MAX_STREAM_CONSUMERS)
                w->dests [w->n_dests++] = (s_reader_at_t) { .consumer = order.consumer, .gone = true, .tee_fd = -1 };
            continue;
        }
        if (dest || w->n_dests >= w->readers) {
            sq_warn ("STREAM of %" PRIx64 " to reader %" PRIx64 ": %s; ignored", order.key,
                     order.consumer, dest? "named twice": "more readers than announced");
            continue;
        }
        char address [SQ_MAX_NAME + 48];
        if (gov_peer_address (address, sizeof address,
                              order.to_key.len? (const uint8_t *) order.to_key.ptr: NULL,
                              order.endpoint.ptr, order.endpoint.len) < 0)
            continue;
        char *endpoint = strdup (address);
        //  Out of memory, the reader counts as gone: the writer must not
        //  wait for it for ever (it fails, having read nothing).
        dest = &w->dests [w->n_dests++];
        *dest = (s_reader_at_t) {
            .consumer = order.consumer, .endpoint = endpoint, .credits = STREAM_WINDOW,
            .gone = !endpoint, .tee_fd = -1
        };
        if (self->sock >= 0 && endpoint && w->offset == 0 && w->fd >= 0)
            s_hand_over (self, w, dest, order.endpoint.ptr, order.endpoint.len);
    }
    if (rc < 0)
        sq_warn ("bad %s: %s", sq_msg_name (type), err.text);
    sq_iter_release (&it);
}

//  Frame 1 of msg ([route][message]...), a message of the table of
//  `type`, decoded into `out`; msg must have `frames` frames (else
//  `frames_why`). A bad one is warned of and dropped: -1.
static int
s_decode (uint32_t type, void *out, sq_msg_t *msg, size_t frames, const char *frames_why)
{
    sq_errbuf_t err;
    if (msg->n == frames
    &&  sq_msg_decode (type, out, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err) == 0)
        return 0;
    sq_warn ("bad %s: %s", sq_msg_name (type), msg->n != frames? frames_why: err.text);
    return -1;
}

//  The reader `consumer` of the writer of `key` in its attempt `version`
//  (*writer: that writer, or NULL), or NULL: a late message.
static s_reader_at_t *
s_dest_of (stream_t *self, uint64_t key, uint32_t version, uint64_t consumer, s_writer_t **writer)
{
    s_writer_t *w = (s_writer_t *) sq_idmap_lookup (self->by_object, key);
    *writer = w;
    return w && w->attempt == version? s_dest (w, consumer): NULL;
}

void
stream_on_credit (stream_t *self, sq_msg_t *msg)
{
    sq_scredit_t credit;
    if (s_decode (SQ_MSG_SCREDIT, &credit, msg, 2, "payload frames"))
        return;
    s_writer_t *w;
    s_reader_at_t *dest = s_dest_of (self, credit.key, credit.version, credit.consumer, &w);
    if (!dest || dest->gone)
        return;                 //  late
    if (credit.credits == 0) {
        dest->gone = true;
        if (dest->tee)
            s_tee_close (dest);
        return;
    }
    uint64_t credits = (uint64_t) dest->credits + credit.credits;
    dest->credits = credits > STREAM_WINDOW? STREAM_WINDOW: (uint32_t) credits;
}

static void
s_send_chunk (stream_t *self, s_writer_t *w, s_reader_at_t *dest, sq_blob_t *blob, size_t size,
              bool end, const uint8_t *token)
{
    char route [SQ_MAX_NAME + 50];
    int route_len = snprintf (route, sizeof route, "%c%s", GOV_ROUTE_PEER, dest->endpoint);
    sq_schunk_t chunk = {
        .key = w->object, .version = w->attempt, .consumer = dest->consumer,
        .offset = w->offset, .end = end, .from = self->governor_id,
        .reply_to = { self->data_endpoint, (uint32_t) strlen (self->data_endpoint) },
        .token = { (const char *) token, token? S_TOKEN: 0 }
    };
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_schunk_encode (&header, &chunk);
    zmq_msg_t payload;
    int rc = blob? sq_blob_msg_range (blob, 0, size, &payload): zmq_msg_init (&payload);
    if (rc == 0)
        rc = sq_send (self->pipe, route, (size_t) route_len, &header, &payload, 1, 0);
    sq_wbuf_release (&header);
    if (rc) {
        //  The reader stalls; its end fails it, and the group runs again.
        sq_warn ("cannot send stream %" PRIx64 " to %s: %s", w->object, dest->endpoint,
                 zmq_strerror (errno));
        dest->gone = true;
    }
    if (!end && !token && dest->credits)
        dest->credits--;
}

//  The writer's pipe is done with: at its end, or deserted (closing it
//  then gives the program SIGPIPE, as a shell pipeline would).
static void
s_writer_close (stream_t *self, s_writer_t *w, bool deserted)
{
    if (w->fd >= 0)
        close (w->fd);
    w->fd = -1;
    w->eof = false;
    if (self->progress)
        self->progress (self->arg, w->object, w->offset);
    if (self->done)
        self->done (self->arg, w->task, w->attempt, w->offset, deserted);
}

//  Every tee's reader has all the bytes (its governor saw its pipe end),
//  or left.
static bool
s_tees_ended (const s_writer_t *w)
{
    for (uint32_t i = 0; i < w->n_dests; i++)
        if (w->dests [i].tee && !w->dests [i].gone && !w->dests [i].ended)
            return false;
    return true;
}

//  Writes what waits for the writer's tees; a tee whose bytes are all
//  written once its writer's pipe ended is closed (its end).
static void
s_writer_tees (s_writer_t *w)
{
    for (uint32_t i = 0; i < w->n_dests; i++) {
        s_reader_at_t *d = &w->dests [i];
        if (!d->tee || d->gone || d->tee_fd < 0)
            continue;
        if (s_tee_flush (d)) {
            d->gone = true;     //  its governor closed it: the reader left
            s_tee_close (d);
        }
        else
        if (!d->pending && w->eof)
            s_tee_close (d);
    }
}

//  Reads what the pipe has (up to a chunk) and sends it to every reader;
//  at its end, the last chunk.
static void
s_writer_read (stream_t *self, s_writer_t *w)
{
    sq_blob_t *blob = sq_blob_new (STREAM_CHUNK);
    if (!blob)
        return;                 //  tried again at the next poll
    char *data = (char *) sq_blob_wdata (blob);
    size_t got = 0;
    bool eof = false;
    while (got < STREAM_CHUNK) {
        ssize_t n = read (w->fd, data + got, STREAM_CHUNK - got);
        if (n > 0)
            got += (size_t) n;
        else
        if (n < 0 && errno == EINTR)
            continue;
        else {
            eof = n == 0 || errno != EAGAIN;
            break;
        }
    }
    if (got) {
        for (uint32_t i = 0; i < w->n_dests; i++) {
            s_reader_at_t *d = &w->dests [i];
            if (d->gone)
                continue;
            if (d->tee) {
                d->pending = sq_blob_ref (blob);
                d->pending_at = 0;
                d->pending_len = got;
            }
            else
                s_send_chunk (self, w, d, blob, got, false, NULL);
        }
        w->offset += got;
    }
    sq_blob_unref (&blob);
    if (eof)
        w->eof = true;
    s_writer_tees (w);
    if (!eof)
        return;
    //  With tees, done once their readers have it all.
    close (w->fd);
    w->fd = -1;
    if (s_tees_ended (w))
        s_writer_close (self, w, false);
}

void
stream_on_local (stream_t *self, sq_msg_t *msg)
{
    sq_slocal_t local;
    if (s_decode (SQ_MSG_SLOCAL, &local, msg, 2, "payload frames"))
        return;
    s_writer_t *w;
    s_reader_at_t *dest = s_dest_of (self, local.key, local.version, local.consumer, &w);
    if (!dest || dest->gone || !dest->local || (w->fd < 0 && !dest->tee))
        return;                 //  late, or never handed over
    if (local.state == SQ_SLOCAL_REFUSED) {
        if (dest->taken)
            return;             //  it said otherwise before
        sq_warn ("stream %" PRIx64 ": chunks, not a pipe: reader %" PRIx64 "'s governor "
                 "refused it (its log says why)", w->object, local.consumer);
        dest->local = false;    //  chunks after all, from the start (nothing
        if (dest->tee) {        //  is read before every tee is taken)
            s_tee_close (dest);
            dest->tee = false;
        }
        return;
    }
    if (!dest->taken) {
        dest->taken = true;
        if (self->local && !w->counted)
            self->local (self->arg, w->object);
        w->counted = true;
    }
    if (dest->tee) {
        //  Its progress is ours to know; its end, that the bytes are there.
        dest->ended |= local.state == SQ_SLOCAL_END;
        return;
    }
    if (local.bytes > w->offset)
        w->offset = local.bytes;
    if (local.state == SQ_SLOCAL_END)
        s_writer_close (self, w, false);
}

void
stream_writer_end (stream_t *self, uint64_t task)
{
    s_writer_t *w = (s_writer_t *) sq_idmap_lookup (self->writers, task);
    for (uint32_t i = 0; w && i < w->n_dests; i++)
        if (!w->dests [i].gone)
            s_send_chunk (self, w, &w->dests [i], NULL, 0, true, NULL);
}

//  --------------------------------------------------------------------------
//  Reader

static void
s_scredit (stream_t *self, const char *address, uint64_t object, uint32_t version,
          uint64_t consumer, uint32_t credits)
{
    char route [SQ_MAX_NAME + 50];
    int len = snprintf (route, sizeof route, "%c%s", GOV_ROUTE_PEER, address);
    sq_scredit_t credit = { object, version, consumer, credits };
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_scredit_encode (&header, &credit);
    if (sq_send (self->pipe, route, (size_t) len, &header, NULL, 0, 0))
        sq_warn ("cannot pass SCREDIT on: %s", zmq_strerror (errno));
    sq_wbuf_release (&header);
}

static void
s_slocal (stream_t *self, s_reader_t *r, uint32_t state)
{
    char route [SQ_MAX_NAME + 50];
    int len = snprintf (route, sizeof route, "%c%s", GOV_ROUTE_PEER, r->reply_to);
    sq_slocal_t local = { r->object, r->version, r->consumer, state, r->passed };
    sq_wbuf_t header;
    sq_wbuf_init (&header);
    sq_slocal_encode (&header, &local);
    if (sq_send (self->pipe, route, (size_t) len, &header, NULL, 0, 0))
        sq_warn ("cannot pass SLOCAL on: %s", zmq_strerror (errno));
    sq_wbuf_release (&header);
    r->told = r->passed;
    r->told_ns = task_now_ns ();
}

static void
s_close_fds (struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR (mh); cm; cm = CMSG_NXTHDR (mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++) {
                int fd;
                memcpy (&fd, CMSG_DATA (cm) + i * sizeof (int), sizeof fd);
                close (fd);
            }
}

//  Pipes handed to us: kept (by token) only if they come from a process of
//  our uid (the kernel's word, SCM_CREDENTIALS) as one pipe's read end
//  with a token. Still useless without the token from a governor. A
//  client's memory file (a regular file) is kept the same way, useless
//  without its token from a client's CURVE channel (PUTLOCAL); that it is
//  a sealed memory file of the right size is checked when it is claimed
//  (sq_blob_shm_adopt).
static void
s_local_recv (stream_t *self)
{
    size_t dropped = 0;
    while (self->sock >= 0) {
        uint8_t token [S_TOKEN + 1];
        union {
            char buf [CMSG_SPACE (4 * sizeof (int)) + CMSG_SPACE (sizeof (struct ucred))];
            struct cmsghdr align;
        } control;
        struct iovec iov = { token, sizeof token };
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1,
            .msg_control = control.buf, .msg_controllen = sizeof control.buf
        };
        ssize_t n = recvmsg (self->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        struct ucred cred = { 0, (uid_t) -1, (gid_t) -1 };
        int fd = -1, n_fds = 0;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR (&mh); cm; cm = CMSG_NXTHDR (&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET)
                continue;
            if (cm->cmsg_type == SCM_CREDENTIALS && cm->cmsg_len == CMSG_LEN (sizeof cred))
                memcpy (&cred, CMSG_DATA (cm), sizeof cred);
            if (cm->cmsg_type == SCM_RIGHTS) {
                n_fds += (int) ((cm->cmsg_len - CMSG_LEN (0)) / sizeof (int));
                memcpy (&fd, CMSG_DATA (cm), sizeof fd);
            }
        }
        struct stat st;
        int flags = n_fds == 1? fcntl (fd, F_GETFL): -1;
        bool segment = n_fds == 1 && fstat (fd, &st) == 0 && S_ISREG (st.st_mode);
        const char *wrong = cred.uid != geteuid ()? "from another user"
                          : n != S_TOKEN || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
                            || n_fds != 1? "not a token and one descriptor"
                          : segment? NULL
                          : fstat (fd, &st) || !S_ISFIFO (st.st_mode) || flags < 0
                            || (flags & O_ACCMODE) != O_RDONLY? "not a pipe's read end": NULL;
        if (wrong) {
            sq_warn ("stream directory: a hand-over %s (pid %d, uid %d) refused", wrong,
                     (int) cred.pid, (int) cred.uid);
            s_close_fds (&mh);
            continue;
        }
        //  Full (pipes no chunk claimed): the oldest goes. Its writer's
        //  governor is told so when its chunk comes, and sends chunks.
        s_hand_t *slot = &self->hands [0];
        for (size_t i = 0; i < S_HANDS_MAX && slot->fd >= 0; i++)
            if (self->hands [i].fd < 0 || self->hands [i].at_ns < slot->at_ns)
                slot = &self->hands [i];
        if (slot->fd >= 0) {
            dropped++;
            close (slot->fd);
        }
        memcpy (slot->token, token, S_TOKEN);
        slot->fd = fd;
        slot->segment = segment;
        slot->at_ns = task_now_ns ();
    }
    if (dropped)
        sq_warn ("stream directory: more than %d pipes handed over wait for their chunks; "
                 "the %zu oldest dropped (their streams go as chunks)", S_HANDS_MAX, dropped);
}

//  The pipe (or memory file) handed over with this token, taken out; -1
//  if none.
static int
s_hand_take (stream_t *self, const uint8_t *token, bool segment)
{
    s_local_recv (self);        //  sent before the chunk that names it
    for (size_t i = 0; i < S_HANDS_MAX; i++)
        if (self->hands [i].fd >= 0 && self->hands [i].segment == segment
        &&  memcmp (self->hands [i].token, token, S_TOKEN) == 0) {
            int fd = self->hands [i].fd;
            self->hands [i].fd = -1;
            return fd;
        }
    return -1;
}

int
stream_take_segment (stream_t *self, const uint8_t *token)
{
    return s_hand_take (self, token, true);
}

int
stream_hand_segment (stream_t *self, const char *endpoint, size_t len, int fd, uint8_t *token)
{
    struct sockaddr_un to = { .sun_family = AF_UNIX };
    if (self->sock < 0 || fd < 0
    ||  s_sock_path (to.sun_path, sizeof to.sun_path, self->dirfd, endpoint, len)
    ||  getrandom (token, S_TOKEN, 0) != (ssize_t) S_TOKEN)
        return -1;
    if (sq_fdpass_send (self->sock, &to, sizeof to, token, S_TOKEN, &fd, 1, MSG_DONTWAIT)
        != (ssize_t) S_TOKEN) {
        //  Not in our directory (another host, or another directory here):
        //  said at debug only, as copies are many (a stream's warning is
        //  once per stream).
        if (errno == ENOENT)
            sq_debug ("copy to %.*s: not in our stream directory: chunks", (int) len, endpoint);
        else
            sq_warn ("copy to %.*s: chunks, not a hand-over: %s", (int) len, endpoint,
                     strerror (errno));
        return -1;
    }
    return 0;
}

size_t
stream_segments_waiting (stream_t *self)
{
    s_local_recv (self);
    size_t n = 0;
    for (size_t i = 0; i < S_HANDS_MAX; i++)
        n += self->hands [i].fd >= 0 && self->hands [i].segment;
    return n;
}

static bool
s_ended (stream_t *self, uint64_t consumer, uint32_t version)
{
    for (size_t i = 0; i < S_ENDED_RING; i++)
        if (self->ended [i].consumer == consumer && self->ended [i].version == version)
            return true;
    return false;
}

//  The reader stops reading: the writer is told, the rest is dropped.
static void
s_reader_cancel (stream_t *self, s_reader_t *r)
{
    if (r->reply_to && !r->got_end && !r->cancelled)
        s_scredit (self, r->reply_to, r->object, r->version, r->consumer, 0);
    r->cancelled = true;
    while (r->head) {
        s_chunk_t *c = r->head;
        r->head = c->next;
        zmq_msg_close (&c->bytes);
        free (c);
    }
    r->tail = NULL;
    r->n_queued = 0;
    r->queued_bytes = 0;
    if (r->fd >= 0) {
        close (r->fd);
        r->fd = -1;
    }
    if (r->src >= 0) {
        close (r->src);
        r->src = -1;
    }
}

//  The stream cannot be read whole: the pipe closes early and the task,
//  which would run on part of it, is failed (through its program, killed
//  when its pipe breaks; see compute_tasks.c).
static void
s_reader_break (stream_t *self, s_reader_t *r, const sq_schunk_t *chunk, const char *why)
{
    sq_warn ("stream %" PRIx64 " to reader %" PRIx64 " broken: %s", chunk->key,
             chunk->consumer, why);
    s_reader_cancel (self, r);
    r->expect = UINT64_MAX;             //  marks it broken
}

//  A chunk of a reader that has, or asks for, the writer's pipe itself:
//  the token first (the one it was handed with), then only the end, at the
//  bytes passed on. `bytes` is taken.
static void
s_reader_take_local (stream_t *self, s_reader_t *r, const sq_schunk_t *chunk, zmq_msg_t *bytes)
{
    size_t size = zmq_msg_size (bytes);
    zmq_msg_close (bytes);
    if (chunk->token.len && !r->local) {
        if (r->expect || r->got_end || chunk->offset || chunk->end || size) {
            s_reader_break (self, r, chunk, "a hand-over after bytes");
            return;
        }
        int fd = s_hand_take (self, (const uint8_t *) chunk->token.ptr, false);
        if (fd < 0 || s_nonblocking (fd)) {
            sq_warn ("stream %" PRIx64 " to reader %" PRIx64 ": pipe refused, chunks instead: "
                     "%s", chunk->key, chunk->consumer, fd < 0
                     ? "no pipe came with its token": "cannot make it non-blocking");
            if (fd >= 0)
                close (fd);
            s_slocal (self, r, SQ_SLOCAL_REFUSED);      //  chunks then
            return;
        }
        r->local = true;
        r->src = fd;
        s_slocal (self, r, SQ_SLOCAL_PASSED);
        return;
    }
    if (chunk->token.len || !chunk->end || size || r->got_end || chunk->offset != r->passed
    ||  !r->src_end) {
        s_reader_break (self, r, chunk, "a chunk beside a pipe handed over");
        return;
    }
    r->got_end = true;
}

//  A chunk for this reader: queued in order. `bytes` is taken.
static void
s_reader_take (stream_t *self, s_reader_t *r, const sq_schunk_t *chunk, const char *address,
               zmq_msg_t *bytes)
{
    if (chunk->key != r->object || chunk->version != r->version || r->cancelled) {
        //  Another stream or attempt (a stale sender), or after we stopped.
        s_scredit (self, address, chunk->key, chunk->version, chunk->consumer, 0);
        zmq_msg_close (bytes);
        return;
    }
    if (!r->reply_to && !(r->reply_to = strdup (address))) {
        zmq_msg_close (bytes);
        return;
    }
    if (chunk->token.len || r->local) {
        s_reader_take_local (self, r, chunk, bytes);
        return;
    }
    const char *wrong = r->got_end? "a chunk after the end"
                      : chunk->offset != r->expect? "a chunk out of order"
                      : r->n_queued >= 2 * STREAM_WINDOW? "more chunks than its window": NULL;
    s_chunk_t *c = wrong? NULL: (s_chunk_t *) calloc (1, sizeof *c);
    if (!c) {
        zmq_msg_close (bytes);
        s_reader_break (self, r, chunk, wrong? wrong: "out of memory");
        return;
    }
    zmq_msg_init (&c->bytes);
    zmq_msg_move (&c->bytes, bytes);
    c->end = chunk->end;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
    r->n_queued++;
    r->queued_bytes += zmq_msg_size (&c->bytes);
    r->expect += zmq_msg_size (&c->bytes);
    r->got_end = chunk->end;
}

int
stream_reader_add (stream_t *self, uint64_t consumer, uint64_t object, uint32_t version, int fd)
{
    s_reader_t *r = (s_reader_t *) calloc (1, sizeof *r);
    if (!r || s_nonblocking (fd) || sq_idmap_lookup (self->readers, consumer)) {
        free (r);
        close (fd);
        return -1;
    }
    r->consumer = consumer;
    r->object = object;
    r->version = version;
    r->fd = fd;
    r->src = -1;
    if (sq_idmap_insert (self->readers, consumer, r)) {
        s_reader_free (&r);
        return -1;
    }
    //  Chunks that came before the ASSIGN, in order.
    s_early_t **link = &self->early_head, *last = NULL;
    while (*link) {
        s_early_t *e = *link;
        if (e->chunk.consumer != consumer) {
            last = e;
            link = &e->next;
            continue;
        }
        *link = e->next;
        if (self->early_tail == e)
            self->early_tail = last;
        self->n_early--;
        self->early_bytes -= zmq_msg_size (&e->bytes);
        s_reader_take (self, r, &e->chunk, e->address, &e->bytes);
        s_early_free (&e);
    }
    return 0;
}

bool
stream_reader_broken (stream_t *self, uint64_t consumer)
{
    s_reader_t *r = (s_reader_t *) sq_idmap_lookup (self->readers, consumer);
    return r && r->expect == UINT64_MAX;
}

void
stream_reader_remove (stream_t *self, uint64_t consumer)
{
    s_reader_t *r = (s_reader_t *) sq_idmap_remove (self->readers, consumer);
    if (!r)
        return;
    s_reader_cancel (self, r);
    size_t slot = self->ended_next++ % S_ENDED_RING;
    self->ended [slot].consumer = consumer;
    self->ended [slot].version = r->version;
    s_reader_free (&r);
}

void
stream_on_chunk (stream_t *self, sq_msg_t *msg)
{
    sq_schunk_t chunk;
    if (s_decode (SQ_MSG_SCHUNK, &chunk, msg, 3, "not one payload frame"))
        return;
    zmq_msg_t *bytes = &msg->frames [2];
    if (zmq_msg_size (bytes) > SQ_CHUNK_MAX) {
        sq_warn ("SCHUNK of %zu bytes refused", zmq_msg_size (bytes));
        return;
    }
    char *address = transfer_reply_address (msg, chunk.reply_to);
    if (!address)
        return;
    s_reader_t *r = (s_reader_t *) sq_idmap_lookup (self->readers, chunk.consumer);
    if (r)
        s_reader_take (self, r, &chunk, address, bytes);
    else
    if (s_ended (self, chunk.consumer, chunk.version) || self->n_early >= STREAM_MAX_EARLY
    ||  self->early_bytes + zmq_msg_size (bytes) > STREAM_MAX_EARLY_BYTES)
        s_scredit (self, address, chunk.key, chunk.version, chunk.consumer, 0);
    else {
        s_early_t *e = (s_early_t *) calloc (1, sizeof *e);
        if (!e) {
            s_scredit (self, address, chunk.key, chunk.version, chunk.consumer, 0);
            free (address);
            return;
        }
        //  The header's frame goes when we return: what the chunk points
        //  into is copied (a hand-over's token; reply_to is the address)
        e->chunk = chunk;
        e->chunk.reply_to = (mpr_str_t) { NULL, 0 };
        if (chunk.token.len == S_TOKEN) {
            memcpy (e->token_copy, chunk.token.ptr, S_TOKEN);
            e->chunk.token.ptr = (const char *) e->token_copy;
        }
        else
            e->chunk.token = (mpr_str_t) { NULL, 0 };
        e->address = address;
        address = NULL;
        zmq_msg_init (&e->bytes);
        zmq_msg_move (&e->bytes, bytes);
        e->at_ns = task_now_ns ();
        if (self->early_tail)
            self->early_tail->next = e;
        else
            self->early_head = e;
        self->early_tail = e;
        self->n_early++;
        self->early_bytes += zmq_msg_size (&e->bytes);
    }
    free (address);
}

//  Writes queued chunks into the reader's pipe while it takes them.
static void
s_reader_write (stream_t *self, s_reader_t *r)
{
    while (r->head && r->fd >= 0) {
        s_chunk_t *c = r->head;
        size_t size = zmq_msg_size (&c->bytes);
        if (c->done < size) {
            ssize_t n = write (r->fd, (const char *) zmq_msg_data (&c->bytes) + c->done,
                               size - c->done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                return;
            if (n < 0) {
                //  The program closed its stdin (EPIPE): it wants no more.
                s_reader_cancel (self, r);
                return;
            }
            c->done += (size_t) n;
            if (c->done < size)
                continue;
        }
        r->head = c->next;
        if (!r->head)
            r->tail = NULL;
        r->n_queued--;
        r->queued_bytes -= size;
        bool end = c->end;
        zmq_msg_close (&c->bytes);
        free (c);
        if (end) {
            close (r->fd);      //  the program sees the end of its input
            r->fd = -1;
        }
        else
            s_scredit (self, r->reply_to, r->object, r->version, r->consumer, 1);
    }
}

//  Moves what the writer's pipe has into the reader's, page references
//  rather than bytes (splice between two pipes copies nothing).
static void
s_reader_splice (stream_t *self, s_reader_t *r)
{
    for (int i = 0; i < S_SPLICES && r->src >= 0 && r->fd >= 0; i++) {
        ssize_t n = splice (r->src, NULL, r->fd, NULL, STREAM_CHUNK,
                            SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
            r->passed += (uint64_t) n;
            r->want_out = false;
        }
        else
        if (n == 0) {
            //  Its end (every writer of it closed it): the writer's
            //  governor sends our end once the program exited well.
            close (r->src);
            r->src = -1;
            r->src_end = true;
            s_slocal (self, r, SQ_SLOCAL_END);
        }
        else
        if (errno == EAGAIN) {
            //  Which side: bytes waiting mean that ours is full.
            int waiting = 0;
            r->want_out = ioctl (r->src, FIONREAD, &waiting) == 0 && waiting > 0;
            return;
        }
        else
        if (errno != EINTR) {
            //  The program closed its stdin (EPIPE): it wants no more.
            s_reader_cancel (self, r);
            return;
        }
    }
}

//  --------------------------------------------------------------------------
//  Polling

size_t
stream_items (stream_t *self, zmq_pollitem_t *items, size_t max)
{
    size_t want = sq_idmap_size (self->writers) * (1 + SQ_MAX_STREAM_CONSUMERS)
                + sq_idmap_size (self->readers) + 1;
    if (want > self->cap_polled) {
        uint64_t *polled = (uint64_t *) realloc (self->polled, want * sizeof *polled);
        if (polled)
            self->polled = polled;
        uint8_t *kinds = (uint8_t *) realloc (self->polled_kind, want * sizeof *kinds);
        if (kinds)
            self->polled_kind = kinds;
        if (polled && kinds)
            self->cap_polled = want;
    }
    if (max > self->cap_polled)
        max = self->cap_polled;
    size_t n = 0, cursor = 0;
    void *item;
    if (n < max && self->sock >= 0) {
        items [n] = (zmq_pollitem_t) { NULL, self->sock, ZMQ_POLLIN, 0 };
        self->polled [n] = 0;
        self->polled_kind [n++] = S_POLL_SOCKET;
    }
    while (n < max && (item = sq_idmap_next (self->writers, &cursor, NULL))) {
        s_writer_t *w = (s_writer_t *) item;
        for (uint32_t i = 0; i < w->n_dests && n < max; i++)
            if (w->dests [i].pending && w->dests [i].tee_fd >= 0 && !w->dests [i].gone) {
                items [n] = (zmq_pollitem_t) { NULL, w->dests [i].tee_fd, ZMQ_POLLOUT, 0 };
                self->polled [n] = w->task;
                self->polled_kind [n++] = S_POLL_TEE;
            }
        if (n >= max || !s_writable (w))
            continue;
        items [n] = (zmq_pollitem_t) { NULL, w->fd, ZMQ_POLLIN, 0 };
        self->polled [n] = w->task;
        self->polled_kind [n++] = S_POLL_WRITER;
    }
    cursor = 0;
    while (n < max && (item = sq_idmap_next (self->readers, &cursor, NULL))) {
        s_reader_t *r = (s_reader_t *) item;
        if (r->fd < 0 || (r->local? r->src < 0: !r->head))
            continue;
        items [n] = r->local && !r->want_out
                  ? (zmq_pollitem_t) { NULL, r->src, ZMQ_POLLIN, 0 }
                  : (zmq_pollitem_t) { NULL, r->fd, ZMQ_POLLOUT, 0 };
        self->polled [n] = r->consumer;
        self->polled_kind [n++] = S_POLL_READER;
    }
    return n;
}

long
stream_poll (stream_t *self, zmq_pollitem_t *items, size_t n_items)
{
    for (size_t i = 0; i < n_items; i++) {
        if (!items [i].revents)
            continue;
        if (self->polled_kind [i] == S_POLL_SOCKET)
            s_local_recv (self);
        else
        if (self->polled_kind [i] == S_POLL_WRITER) {
            s_writer_t *w = (s_writer_t *) sq_idmap_lookup (self->writers, self->polled [i]);
            if (w && w->fd == items [i].fd && s_writable (w))
                s_writer_read (self, w);
        }
        else
        if (self->polled_kind [i] == S_POLL_TEE) {
            //  Its tees are written together: the next read waits for all.
            s_writer_t *w = (s_writer_t *) sq_idmap_lookup (self->writers, self->polled [i]);
            if (w)
                s_writer_tees (w);
        }
        else {
            s_reader_t *r = (s_reader_t *) sq_idmap_lookup (self->readers, self->polled [i]);
            if (r && r->local && (r->fd == items [i].fd || r->src == items [i].fd))
                s_reader_splice (self, r);
            else
            if (r && r->fd == items [i].fd)
                s_reader_write (self, r);
        }
    }
    uint64_t now = task_now_ns ();
    bool timers = false;
    long soonest = -1;
    //  A reader whose queue just got an end with nothing before it closes
    //  now, without waiting for the pipe to be writable.
    //  A reader of a pipe handed over closes once both the pipe and its
    //  writer's governor said it ended; until then it says its progress.
    size_t cursor = 0;
    void *item;
    while ((item = sq_idmap_next (self->readers, &cursor, NULL))) {
        s_reader_t *r = (s_reader_t *) item;
        if (r->fd >= 0 && r->head && r->head->end && zmq_msg_size (&r->head->bytes) == 0)
            s_reader_write (self, r);
        if (r->local && r->fd >= 0 && r->src_end && r->got_end) {
            close (r->fd);
            r->fd = -1;
        }
        if (r->local && r->src >= 0 && !r->cancelled) {
            timers = true;
            if (r->passed != r->told && now - r->told_ns >= S_PROGRESS_NS)
                s_slocal (self, r, SQ_SLOCAL_PASSED);
        }
    }
    //  Pipes handed over whose chunk never came (its reader ended, or a
    //  stranger's) are not kept.
    for (size_t i = 0; i < S_HANDS_MAX; i++)
        if (self->hands [i].fd >= 0) {
            if (now - self->hands [i].at_ns > STREAM_EARLY_MS * 1000000ull) {
                sq_warn ("stream directory: a pipe handed over %d s ago was never claimed "
                         "by its chunk; closed", STREAM_EARLY_MS / 1000);
                close (self->hands [i].fd);
                self->hands [i].fd = -1;
            }
            else
                timers = true;
        }
    while (self->early_head && now - self->early_head->at_ns > STREAM_EARLY_MS * 1000000ull) {
        s_early_t *e = self->early_head;
        self->early_head = e->next;
        if (!self->early_head)
            self->early_tail = NULL;
        self->n_early--;
        self->early_bytes -= zmq_msg_size (&e->bytes);
        sq_warn ("stream %" PRIx64 ": no reader %" PRIx64 " here; refused", e->chunk.key,
                 e->chunk.consumer);
        s_scredit (self, e->address, e->chunk.key, e->chunk.version, e->chunk.consumer, 0);
        s_early_free (&e);
    }
    timers |= self->early_head != NULL;
    cursor = 0;
    while ((item = sq_idmap_next (self->writers, &cursor, NULL))) {
        s_writer_t *w = (s_writer_t *) item;
        if (w->fd >= 0 && s_deserted (w))
            s_writer_close (self, w, true);
        if (w->eof) {
            //  Its pipe ended; its tees' readers take the rest.
            s_writer_tees (w);
            if (s_tees_ended (w))
                s_writer_close (self, w, false);
            else
                timers = true;
        }
        if (w->fd < 0)
            continue;
        timers = true;
        long ms = s_handing_retry (self, w, now);
        if (ms >= 0 && (soonest < 0 || ms < soonest))
            soonest = ms;
        if (w->offset != w->told && now - w->told_ns >= S_PROGRESS_NS && self->progress) {
            self->progress (self->arg, w->object, w->offset);
            w->told = w->offset;
            w->told_ns = now;
        }
    }
    if (soonest >= 0 && soonest < S_TICK_MS)
        return soonest;
    return timers? S_TICK_MS: -1;
}

uint64_t
stream_bytes (stream_t *self)
{
    uint64_t bytes = self->early_bytes;
    size_t cursor = 0;
    void *item;
    while ((item = sq_idmap_next (self->readers, &cursor, NULL)))
        bytes += ((s_reader_t *) item)->queued_bytes;
    return bytes;
}
