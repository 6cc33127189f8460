/*  governor/stream.c alone: both ends of streams over real pipes, with the
    data channel replaced by an inproc pair read and fed here.
    Over 800 lines: a writer and a reader are checked talking to each
    other, through the one fake data channel this file sets up.

    Writer: nothing is read from its pipe before every reader is named
    (STREAM) or given up (UNSTREAM); then each read goes to every named
    reader as one SCHUNK, at most STREAM_WINDOW ahead of SCREDITs; the
    pipe's end is reported, and the end chunk goes only at
    stream_writer_end; a writer whose readers all left is deserted.
    Reader: chunks reach its pipe in order and are credited as written;
    chunks before the reader's ASSIGN wait and are adopted; chunks of
    another writer attempt, or for a reader that ended, are refused with
    SCREDIT 0; one out of order breaks the stream. Nothing is left at the
    end (under ASan: no leak).
    Same host (a stream directory): the writer's pipe goes to the reader's
    governor, which splices it into the reader's pipe, exact, and says its
    end; the reader's end waits for the writer's end chunk; a reader that
    leaves deserts the writer; pipes sent by a stranger are never taken
    for a writer's (a token only a governor sends is needed), bounded, and
    refused unless a pipe's read end; with no socket there, or a pipe
    lost, chunks go as ever. */
#include "stream.h"
#include "transfer.h"
#include "store.h"
#include "files.h"
#include "route.h"
#include "fdpass.h"
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    exit (1); } } while (0)

static void *s_out;             //  what the streams send (route, header, payload)
static void *s_in;              //  their end
static uint64_t s_done_bytes;
static int s_done_count;
static bool s_was_deserted;

static void
s_done (void *arg, uint64_t task, uint32_t attempt, uint64_t bytes, bool deserted)
{
    (void) arg;
    (void) task;
    (void) attempt;
    s_done_bytes = bytes;
    s_done_count++;
    s_was_deserted = deserted;
}

//  Polls the streams' pipes once (what can move, moves).
static void
s_turn (stream_t *streams, int timeout_ms)
{
    zmq_pollitem_t items [16];
    size_t n = stream_items (streams, items, 16);
    int rc = n? zmq_poll (items, (int) n, timeout_ms): 0;
    stream_poll (streams, items, rc > 0? n: 0);
}

static size_t
s_items (stream_t *streams)
{
    zmq_pollitem_t items [16];
    return stream_items (streams, items, 16);
}

//  The next message the streams sent, or false if none waits: its route
//  (after 'P') in route, its header decoded as a SCHUNK or SCREDIT.
static bool
s_next (char *route, size_t route_size, uint32_t *type, sq_schunk_t *chunk, sq_scredit_t *credit,
        size_t *payload)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    if (sq_msg_recv (&msg, s_out, ZMQ_DONTWAIT, 8)) {
        sq_msg_release (&msg);
        return false;
    }
    size_t len = sq_msg_size (&msg, 0);
    CHECK (len >= 2 && len < route_size && *(char *) sq_msg_data (&msg, 0) == GOV_ROUTE_PEER);
    memcpy (route, (char *) sq_msg_data (&msg, 0) + 1, len - 1);
    route [len - 1] = 0;
    uint32_t req;
    CHECK (sq_proto_peek (sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), type, &req) == 0);
    sq_errbuf_t err;
    if (*type == SQ_MSG_SCHUNK) {
        CHECK (msg.n == 3);
        CHECK (sq_schunk_decode (chunk, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
        chunk->reply_to = (mpr_str_t) { NULL, 0 };
        *payload = sq_msg_size (&msg, 2);
    }
    else
    if (*type == SQ_MSG_SLOCAL)
        CHECK (msg.n == 2);
    else {
        CHECK (*type == SQ_MSG_SCREDIT && msg.n == 2);
        CHECK (sq_scredit_decode (credit, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
    }
    sq_msg_release (&msg);
    return true;
}

//  A message as the data socket hands it over: [D] [header] [payload].
static void
s_feed (stream_t *streams, sq_wbuf_t *header, const void *payload, size_t size, bool chunk)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    msg.frames = (zmq_msg_t *) calloc (3, sizeof (zmq_msg_t));
    msg.cap = 3;
    msg.n = chunk? 3: 2;
    zmq_msg_init_size (&msg.frames [0], 1);
    *(char *) zmq_msg_data (&msg.frames [0]) = GOV_ROUTE_DATA;
    zmq_msg_init_size (&msg.frames [1], header->buf.size);
    memcpy (zmq_msg_data (&msg.frames [1]), header->buf.data, header->buf.size);
    if (chunk) {
        zmq_msg_init_size (&msg.frames [2], size);
        if (size)
            memcpy (zmq_msg_data (&msg.frames [2]), payload, size);
        stream_on_chunk (streams, &msg);
    }
    else
        stream_on_credit (streams, &msg);
    sq_msg_release (&msg);
    sq_wbuf_reset (header);
}

static void
s_order (stream_t *streams, uint32_t type, uint64_t object, uint32_t version, uint64_t reader,
         const char *endpoint)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_batch_header (&w, type, 1);
    if (type == SQ_MSG_STREAM)
        sq_pack_stream (&w.pk, object, version, reader, 2, endpoint, NULL);
    else
        sq_pack_unstream (&w.pk, object, version, reader);
    sq_msg_t msg;
    sq_msg_init (&msg);
    msg.frames = (zmq_msg_t *) calloc (2, sizeof (zmq_msg_t));
    msg.cap = 2;
    msg.n = 2;
    zmq_msg_init_size (&msg.frames [0], 1);
    *(char *) zmq_msg_data (&msg.frames [0]) = GOV_ROUTE_BROKER;
    zmq_msg_init_size (&msg.frames [1], w.buf.size);
    memcpy (zmq_msg_data (&msg.frames [1]), w.buf.data, w.buf.size);
    stream_on_order (streams, type, &msg);
    sq_msg_release (&msg);
    sq_wbuf_release (&w);
}

static void
s_write (int fd, size_t size)
{
    char buf [4096];
    memset (buf, 'x', sizeof buf);
    while (size) {
        ssize_t n = write (fd, buf, size < sizeof buf? size: sizeof buf);
        CHECK (n > 0);
        size -= (size_t) n;
    }
}

static void
s_test_writer (stream_t *streams)
{
    char route [256];
    uint32_t type;
    sq_schunk_t chunk;
    sq_scredit_t credit;
    size_t payload;
    int fds [2];
    CHECK (pipe (fds) == 0);
    //  A reader of three gives up before its writer starts here.
    s_order (streams, SQ_MSG_UNSTREAM, 10, 3, 102, NULL);
    CHECK (stream_writer_add (streams, 1, 3, 10, 3, fds [0]) == 0);
    s_write (fds [1], 1000);
    CHECK (s_items (streams) == 0);         //  no reader named yet
    s_order (streams, SQ_MSG_STREAM, 10, 3, 100, "tcp://a:1");
    s_order (streams, SQ_MSG_STREAM, 10, 2, 101, "tcp://b:1");     //  another attempt
    CHECK (s_items (streams) == 0);         //  two of three
    s_order (streams, SQ_MSG_UNSTREAM, 10, 3, 101, NULL);
    CHECK (s_items (streams) == 1);
    s_turn (streams, 1000);
    CHECK (s_next (route, sizeof route, &type, &chunk, &credit, &payload));
    CHECK (type == SQ_MSG_SCHUNK && strcmp (route, "tcp://a:1") == 0 && chunk.key == 10
           && chunk.version == 3 && chunk.consumer == 100 && chunk.offset == 0 && !chunk.end
           && payload == 1000);
    CHECK (!s_next (route, sizeof route, &type, &chunk, &credit, &payload));
    //  Three more chunks fill the window; the fifth waits for a credit.
    for (int i = 0; i < STREAM_WINDOW - 1; i++) {
        s_write (fds [1], 10);
        s_turn (streams, 1000);
        CHECK (s_next (route, sizeof route, &type, &chunk, &credit, &payload)
               && chunk.offset == 1000 + 10 * (uint64_t) i && payload == 10);
    }
    s_write (fds [1], 10);
    CHECK (s_items (streams) == 0);
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_scredit_t more = { 10, 3, 100, 1 };
    sq_scredit_encode (&w, &more);
    s_feed (streams, &w, NULL, 0, false);
    CHECK (s_items (streams) == 1);
    s_turn (streams, 1000);
    CHECK (s_next (route, sizeof route, &type, &chunk, &credit, &payload) && payload == 10);
    //  Its end: reported, but no end chunk before the writer's success.
    close (fds [1]);
    more.credits = 4;
    sq_scredit_encode (&w, &more);
    s_feed (streams, &w, NULL, 0, false);
    s_turn (streams, 1000);
    CHECK (s_done_count == 1 && s_done_bytes == 1040 && !s_was_deserted);
    CHECK (!s_next (route, sizeof route, &type, &chunk, &credit, &payload));
    stream_writer_end (streams, 1);
    CHECK (s_next (route, sizeof route, &type, &chunk, &credit, &payload)
           && chunk.end && payload == 0 && chunk.offset == 1040);
    stream_writer_remove (streams, 1);

    //  Deserted: its one reader says it reads no more.
    CHECK (pipe (fds) == 0);
    CHECK (stream_writer_add (streams, 2, 0, 11, 1, fds [0]) == 0);
    s_order (streams, SQ_MSG_STREAM, 11, 0, 200, "tcp://a:1");
    sq_scredit_t stop = { 11, 0, 200, 0 };
    sq_scredit_encode (&w, &stop);
    s_feed (streams, &w, NULL, 0, false);
    s_turn (streams, 0);
    CHECK (s_done_count == 2 && s_was_deserted);
    signal (SIGPIPE, SIG_IGN);
    CHECK (write (fds [1], "x", 1) == -1 && errno == EPIPE);
    close (fds [1]);
    stream_writer_remove (streams, 2);
    sq_wbuf_release (&w);
}

static void
s_chunk (stream_t *streams, uint64_t reader, uint32_t version, uint64_t offset, size_t size,
         bool end)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    char data [2000];
    memset (data, 'y', sizeof data);
    sq_schunk_t c = { 20, version, reader, offset, end, 7, { "tcp://w:1", 9 }, { NULL, 0 } };
    sq_schunk_encode (&w, &c);
    s_feed (streams, &w, data, size, true);
    sq_wbuf_release (&w);
}

static size_t
s_drain (int fd)
{
    char buf [65536];
    size_t total = 0;
    ssize_t n;
    while ((n = read (fd, buf, sizeof buf)) > 0)
        total += (size_t) n;
    return total;
}

static void
s_test_reader (stream_t *streams)
{
    char route [256];
    uint32_t type;
    sq_schunk_t chunk;
    sq_scredit_t credit;
    size_t payload;
    int fds [2];
    CHECK (pipe2 (fds, O_NONBLOCK) == 0);
    //  A chunk before the reader's ASSIGN waits, then goes to its pipe.
    s_chunk (streams, 5, 1, 0, 1000, false);
    CHECK (stream_bytes (streams) == 1000);
    CHECK (stream_reader_add (streams, 5, 20, 1, fds [1]) == 0);
    s_turn (streams, 1000);
    CHECK (s_drain (fds [0]) == 1000);
    CHECK (s_next (route, sizeof route, &type, &chunk, &credit, &payload)
           && type == SQ_MSG_SCREDIT && strcmp (route, "tcp://w:1") == 0
           && credit.consumer == 5 && credit.version == 1 && credit.credits == 1);
    //  Another writer attempt's chunk: refused, nothing written.
    s_chunk (streams, 5, 0, 1000, 10, false);
    CHECK (s_next (route, sizeof route, &type, &chunk, &credit, &payload)
           && type == SQ_MSG_SCREDIT && credit.credits == 0 && credit.version == 0);
    //  The end: the pipe closes.
    s_chunk (streams, 5, 1, 1000, 500, false);
    s_chunk (streams, 5, 1, 1500, 0, true);
    s_turn (streams, 1000);
    s_turn (streams, 0);
    CHECK (s_drain (fds [0]) == 500);
    char c;
    CHECK (read (fds [0], &c, 1) == 0);     //  end of file
    CHECK (!stream_reader_broken (streams, 5));
    stream_reader_remove (streams, 5);
    close (fds [0]);
    while (s_next (route, sizeof route, &type, &chunk, &credit, &payload))
        ;
    //  A chunk of a reader that ended here: SCREDIT 0 at once.
    s_chunk (streams, 5, 1, 1500, 10, false);
    CHECK (s_next (route, sizeof route, &type, &chunk, &credit, &payload)
           && type == SQ_MSG_SCREDIT && credit.credits == 0 && stream_bytes (streams) == 0);
    //  Out of order: broken, and the writer is told.
    CHECK (pipe2 (fds, O_NONBLOCK) == 0);
    CHECK (stream_reader_add (streams, 6, 20, 1, fds [1]) == 0);
    s_chunk (streams, 6, 1, 0, 100, false);
    s_chunk (streams, 6, 1, 900, 100, false);
    CHECK (stream_reader_broken (streams, 6));
    bool cancelled = false;
    while (s_next (route, sizeof route, &type, &chunk, &credit, &payload))
        cancelled |= type == SQ_MSG_SCREDIT && credit.credits == 0 && credit.consumer == 6;
    CHECK (cancelled);
    stream_reader_remove (streams, 6);
    close (fds [0]);
}

static bool
s_polls (stream_t *streams, int fd)
{
    zmq_pollitem_t items [16];
    size_t n = stream_items (streams, items, 16);
    for (size_t i = 0; i < n; i++)
        if (items [i].fd == fd)
            return true;
    return false;
}

//  Moves the next message the streams sent to `to`, as its data socket
//  would hand it over; returns its type (0: none), the SCHUNK's header in
//  chunk if one.
static uint32_t
s_relay (stream_t *to, sq_schunk_t *chunk, size_t *payload)
{
    sq_msg_t msg;
    sq_msg_init (&msg);
    if (sq_msg_recv (&msg, s_out, ZMQ_DONTWAIT, 8)) {
        sq_msg_release (&msg);
        return 0;
    }
    uint32_t type, req;
    CHECK (sq_proto_peek (sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &type, &req) == 0);
    sq_errbuf_t err;
    if (type == SQ_MSG_SCHUNK && chunk) {
        CHECK (sq_schunk_decode (chunk, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1), &err) == 0);
        *payload = sq_msg_size (&msg, 2);
    }
    //  Frame 0 becomes the data route (the sender's address is in reply_to).
    zmq_msg_close (&msg.frames [0]);
    zmq_msg_init_size (&msg.frames [0], 1);
    *(char *) zmq_msg_data (&msg.frames [0]) = GOV_ROUTE_DATA;
    if (type == SQ_MSG_SCHUNK)
        stream_on_chunk (to, &msg);
    else
    if (type == SQ_MSG_SCREDIT)
        stream_on_credit (to, &msg);
    else
        stream_on_local (to, &msg);
    //  The header's frame is the caller's once a handler returns: whatever
    //  pointed into it must have been copied (a frame's memory may outlive
    //  its release in a pool, where no sanitizer sees a late read).
    if (sq_msg_size (&msg, 1))
        memset (zmq_msg_data (&msg.frames [1]), 0xa5, sq_msg_size (&msg, 1));
    sq_msg_release (&msg);
    return type;
}

static int s_local_count;

static void
s_local (void *arg, uint64_t object)
{
    (void) arg;
    (void) object;
    s_local_count++;
}

//  Sends fd (or none) with a token to the socket named `name` in dir, as
//  a stranger would: through the directory's descriptor, as governors do
//  (the directory's own path is longer than a socket address).
static int
s_send_to (const char *dir, const char *name, int fd, const char *token)
{
    int dfd = open (dir, O_PATH | O_DIRECTORY);
    CHECK (dfd >= 0);
    struct sockaddr_un to = { .sun_family = AF_UNIX };
    CHECK (snprintf (to.sun_path, sizeof to.sun_path, "/proc/self/fd/%d/%s", dfd, name)
           < (int) sizeof to.sun_path);
    int sock = socket (AF_UNIX, SOCK_DGRAM, 0);
    ssize_t n = sq_fdpass_send (sock, &to, sizeof to, token, 16, &fd, fd >= 0? 1: 0, 0);
    close (sock);
    close (dfd);
    return n == 16? 0: -1;
}

//  Sends fd with a token to the (last listed) socket in dir.
static int
s_stranger_sends (const char *dir, int fd, const char *token)
{
    DIR *d = opendir (dir);
    CHECK (d);
    char name [256] = "";
    struct dirent *e;
    while ((e = readdir (d)))
        if (strstr (e->d_name, ".sock"))
            snprintf (name, sizeof name, "%s", e->d_name);
    closedir (d);
    CHECK (*name);
    return s_send_to (dir, name, fd, token);
}

static void
s_test_local (void)
{
    char dir [] = "/tmp/test-stream-dir-XXXXXX";
    CHECK (mkdtemp (dir));
    //  Deeper than a socket address's 108 bytes (a cluster's key directory
    //  under a long log path): the sockets are named through the
    //  directory's descriptor.
    char deep [200], sub [256];
    snprintf (deep, sizeof deep, "%s/%s", dir,
              "a-directory-name-long-enough-that-its-sockets-paths-would-not-fit-in-sun-path");
    CHECK (mkdir (deep, 0700) == 0);
    snprintf (sub, sizeof sub, "%s/streams", deep);
    CHECK (strlen (sub) + strlen ("/0123456789abcdef.sock") >= sizeof ((struct sockaddr_un *) 0)->sun_path);
    stream_dir_t *wdir = stream_dir_new (sub, "tcp://w:1", NULL);
    stream_dir_t *rdir = stream_dir_new (sub, "tcp://r:1", NULL);
    CHECK (wdir && rdir);
    stream_args_t wargs = { .pipe = s_in, .governor_id = 1, .data_endpoint = "tcp://w:1",
                            .done = s_done, .local = s_local, .dir = wdir };
    stream_args_t rargs = { .pipe = s_in, .governor_id = 2, .data_endpoint = "tcp://r:1",
                            .done = s_done, .dir = rdir };
    stream_t *w = stream_new (&wargs), *r = stream_new (&rargs);
    CHECK (w && r);
    struct stat st;
    CHECK (stat (sub, &st) == 0 && (st.st_mode & 0777) == 0700);
    sq_schunk_t chunk;
    size_t payload;
    int wp [2], rp [2];
    char buf [65536];

    //  Handed over: the bytes go pipe to pipe, exact.
    CHECK (pipe (wp) == 0 && pipe2 (rp, O_NONBLOCK) == 0);
    CHECK (stream_writer_add (w, 30, 1, 40, 1, wp [0]) == 0);
    for (int i = 0; i < 60000; i++)
        buf [i] = (char) ('a' + i % 26);
    CHECK (write (wp [1], buf, 60000) == 60000);
    CHECK (stream_reader_add (r, 50, 40, 1, rp [1]) == 0);
    int done = s_done_count;
    s_order (w, SQ_MSG_STREAM, 40, 1, 50, "tcp://r:1");
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK);
    CHECK (chunk.token.len == 16 && chunk.offset == 0 && !chunk.end && payload == 0);
    CHECK (!s_polls (w, wp [0]));           //  the writer reads its pipe no more
    CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SLOCAL && s_local_count == 1);
    char got [65536];
    size_t total = 0;
    while (total < 60000) {
        s_turn (r, 1000);
        ssize_t n = read (rp [0], got + total, sizeof got - total);
        if (n > 0)
            total += (size_t) n;
    }
    CHECK (total == 60000 && memcmp (got, buf, 60000) == 0);
    //  The writer's program ends: the pipe's end is reported with its bytes,
    //  but the reader sees its end only with the writer's end chunk.
    close (wp [1]);
    s_turn (r, 1000);
    CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SLOCAL);
    CHECK (s_done_count == done + 1 && s_done_bytes == 60000 && !s_was_deserted);
    s_turn (r, 0);
    CHECK (read (rp [0], got, 1) == -1 && errno == EAGAIN);
    stream_writer_end (w, 30);
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.end && chunk.offset == 60000);
    s_turn (r, 0);
    CHECK (read (rp [0], got, 1) == 0);     //  end of file
    CHECK (!stream_reader_broken (r, 50));
    stream_reader_remove (r, 50);
    stream_writer_remove (w, 30);
    close (rp [0]);
    while (s_relay (w, NULL, NULL))
        ;

    //  The token's chunk comes before the reader is assigned here (early):
    //  kept with a copy of its token (its frame is gone), the pipe is taken
    //  when the reader comes. (The token pointed into the freed frame.)
    CHECK (pipe (wp) == 0 && pipe2 (rp, O_NONBLOCK) == 0);
    CHECK (stream_writer_add (w, 34, 1, 44, 1, wp [0]) == 0);
    CHECK (write (wp [1], "early", 5) == 5);
    int local_before = s_local_count;
    s_order (w, SQ_MSG_STREAM, 44, 1, 54, "tcp://r:1");
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK);     //  no reader 54 yet
    CHECK (s_relay (w, NULL, NULL) == 0);                       //  nothing said yet
    CHECK (stream_reader_add (r, 54, 44, 1, rp [1]) == 0);
    CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SLOCAL && s_local_count == local_before + 1);
    s_turn (r, 1000);
    CHECK (read (rp [0], got, sizeof got) == 5 && memcmp (got, "early", 5) == 0);
    close (wp [1]);
    close (rp [0]);
    stream_reader_remove (r, 54);
    stream_writer_remove (w, 34);
    while (s_relay (w, NULL, NULL) || s_relay (r, NULL, NULL))
        ;

    //  The reader leaves (closes its stdin): the writer is deserted, and
    //  only then its program's pipe breaks.
    signal (SIGPIPE, SIG_IGN);
    CHECK (pipe (wp) == 0 && pipe2 (rp, O_NONBLOCK) == 0);
    CHECK (stream_writer_add (w, 31, 1, 41, 1, wp [0]) == 0);
    CHECK (stream_reader_add (r, 51, 41, 1, rp [1]) == 0);
    s_order (w, SQ_MSG_STREAM, 41, 1, 51, "tcp://r:1");
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.token.len == 16);
    CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SLOCAL && s_local_count == 3);
    close (rp [0]);
    CHECK (write (wp [1], "x", 1) == 1);
    s_turn (r, 1000);
    CHECK (write (wp [1], "x", 1) == 1);    //  the writer's governor holds it still
    CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SCREDIT);
    s_turn (w, 0);
    CHECK (s_done_count == done + 2 && s_was_deserted);
    CHECK (write (wp [1], "x", 1) == -1 && errno == EPIPE);
    close (wp [1]);
    stream_reader_remove (r, 51);
    stream_writer_remove (w, 31);

    //  Two readers on one host: each gets a pipe of its own, which the
    //  writer's governor fills (a tee) once both took theirs; the writer is
    //  done once both saw their pipe's end, and the stream counts once.
    {
        int tp [2][2];
        CHECK (pipe (wp) == 0 && pipe2 (tp [0], O_NONBLOCK) == 0 && pipe2 (tp [1], O_NONBLOCK) == 0);
        CHECK (stream_writer_add (w, 35, 1, 45, 2, wp [0]) == 0);
        CHECK (stream_reader_add (r, 55, 45, 1, tp [0][1]) == 0);
        CHECK (stream_reader_add (r, 56, 45, 1, tp [1][1]) == 0);
        int local_before = s_local_count, done_before = s_done_count;
        s_order (w, SQ_MSG_STREAM, 45, 1, 55, "tcp://r:1");
        CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.token.len == 16);
        CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SLOCAL && s_local_count == local_before + 1);
        CHECK (!s_polls (w, wp [0]));       //  one reader not named yet
        s_order (w, SQ_MSG_STREAM, 45, 1, 56, "tcp://r:1");
        CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.token.len == 16);
        CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SLOCAL);
        CHECK (s_local_count == local_before + 1);
        CHECK (s_polls (w, wp [0]));        //  both took theirs: it reads
        for (int i = 0; i < 60000; i++)
            buf [i] = (char) ('A' + i % 26);
        CHECK (write (wp [1], buf, 60000) == 60000);
        close (wp [1]);
        size_t totals [2] = { 0, 0 };
        char gots [2][65536];
        for (int turns = 0; turns < 1000 && (totals [0] < 60000 || totals [1] < 60000); turns++) {
            s_turn (w, 10);
            s_turn (r, 10);
            for (int k = 0; k < 2; k++) {
                ssize_t n = read (tp [k][0], gots [k] + totals [k], sizeof gots [k] - totals [k]);
                if (n > 0)
                    totals [k] += (size_t) n;
            }
        }
        CHECK (totals [0] == 60000 && memcmp (gots [0], buf, 60000) == 0);
        CHECK (totals [1] == 60000 && memcmp (gots [1], buf, 60000) == 0);
        //  Both pipes' ends reported: the writer is done, with every byte.
        for (int turns = 0; turns < 100 && s_done_count == done_before; turns++) {
            s_turn (r, 10);
            while (s_relay (w, NULL, NULL))
                ;
            s_turn (w, 10);
        }
        CHECK (s_done_count == done_before + 1 && s_done_bytes == 60000 && !s_was_deserted);
        stream_writer_end (w, 35);
        CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.end && chunk.offset == 60000);
        CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.end && chunk.offset == 60000);
        s_turn (r, 0);
        CHECK (read (tp [0][0], gots [0], 1) == 0 && read (tp [1][0], gots [1], 1) == 0);
        CHECK (!stream_reader_broken (r, 55) && !stream_reader_broken (r, 56));
        stream_reader_remove (r, 55);
        stream_reader_remove (r, 56);
        stream_writer_remove (w, 35);
        close (tp [0][0]);
        close (tp [1][0]);
        while (s_relay (w, NULL, NULL) || s_relay (r, NULL, NULL))
            ;
    }

    //  Strangers: a pipe's write end, a socket, no descriptor are refused
    //  (closed at once: our read end sees its end of file)...
    int sp [2];
    CHECK (pipe (sp) == 0);
    CHECK (s_stranger_sends (sub, sp [1], "0123456789abcdef") == 0);
    close (sp [1]);
    s_turn (r, 0);
    CHECK (read (sp [0], got, 1) == 0);
    close (sp [0]);
    CHECK (s_stranger_sends (sub, -1, "0123456789abcdef") == 0);
    s_turn (r, 0);
    //  ... and pipes' read ends are kept, 64 at most, never given to a
    //  reader whose writer's governor did not send their token.
    int strays [100];
    for (int i = 0; i < 100; i++) {
        CHECK (pipe (sp) == 0);
        CHECK (write (sp [1], "EVIL", 4) == 4);
        CHECK (s_stranger_sends (sub, sp [0], "0123456789abcdef") == 0);
        close (sp [0]);
        strays [i] = sp [1];
        s_turn (r, 0);                      //  its socket's queue is short
    }
    s_turn (r, 0);
    int closed = 0;
    for (int i = 0; i < 100; i++) {
        closed += write (strays [i], "x", 1) == -1 && errno == EPIPE;
        close (strays [i]);
    }
    CHECK (closed >= 100 - 64);
    //  A writer's own pipe pushed out by them: refused, and chunks go.
    CHECK (pipe (wp) == 0 && pipe2 (rp, O_NONBLOCK) == 0);
    CHECK (stream_writer_add (w, 32, 1, 42, 1, wp [0]) == 0);
    CHECK (stream_reader_add (r, 52, 42, 1, rp [1]) == 0);
    int counted = s_local_count;
    s_order (w, SQ_MSG_STREAM, 42, 1, 52, "tcp://r:1");
    s_turn (r, 0);                          //  takes the writer's pipe in
    for (int i = 0; i < 64; i++) {
        CHECK (pipe (sp) == 0);
        CHECK (s_stranger_sends (sub, sp [0], "fedcba9876543210") == 0);
        close (sp [0]);
        close (sp [1]);
        s_turn (r, 0);
    }
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.token.len == 16);
    CHECK (s_relay (w, NULL, NULL) == SQ_MSG_SLOCAL && s_local_count == counted);
    CHECK (write (wp [1], "hello", 5) == 5);
    s_turn (w, 1000);
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.token.len == 0
           && chunk.offset == 0 && payload == 5);
    s_turn (r, 1000);
    CHECK (read (rp [0], got, sizeof got) == 5 && memcmp (got, "hello", 5) == 0);
    close (wp [1]);
    close (rp [0]);
    stream_reader_remove (r, 52);
    stream_writer_remove (w, 32);
    while (s_relay (w, NULL, NULL))
        ;

    //  No socket of the reader's governor there (another host): chunks.
    CHECK (pipe (wp) == 0);
    CHECK (stream_writer_add (w, 33, 1, 43, 1, wp [0]) == 0);
    s_order (w, SQ_MSG_STREAM, 43, 1, 53, "tcp://elsewhere:1");
    CHECK (write (wp [1], "abc", 3) == 3);
    s_turn (w, 1000);
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.token.len == 0 && payload == 3);
    close (wp [1]);
    stream_writer_remove (w, 33);
    while (s_relay (w, NULL, NULL))
        ;
    stream_destroy (&w);
    stream_destroy (&r);
    //  The sockets go with their directories' holders, not with a stream_t
    //  (a governor's next incarnation keeps its socket).
    CHECK (access (sub, F_OK) == 0);
    stream_dir_destroy (&wdir);
    stream_dir_destroy (&rdir);
    CHECK (!wdir && !rdir);

    //  A good directory where the writer's socket cannot be bound (its name
    //  taken by a directory; the same path as a host without /proc): the
    //  governor starts all the same, and its streams go as chunks even to a
    //  reader whose governor has a socket there.
    char taken [320];
    uint64_t hash = 14695981039346656037ull;
    for (const char *c = "tcp://w:1"; *c; c++)
        hash = (hash ^ (uint8_t) *c) * 1099511628211ull;
    snprintf (taken, sizeof taken, "%s/%016" PRIx64 ".sock", sub, hash);
    CHECK (mkdir (taken, 0700) == 0);
    wdir = stream_dir_new (sub, "tcp://w:1", NULL);
    rdir = stream_dir_new (sub, "tcp://r:1", NULL);
    CHECK (wdir && rdir);
    wargs.dir = wdir;
    rargs.dir = rdir;
    r = stream_new (&rargs);
    w = stream_new (&wargs);
    CHECK (w && r);
    CHECK (pipe (wp) == 0 && pipe2 (rp, O_NONBLOCK) == 0);
    CHECK (stream_writer_add (w, 34, 1, 44, 1, wp [0]) == 0);
    CHECK (stream_reader_add (r, 54, 44, 1, rp [1]) == 0);
    s_order (w, SQ_MSG_STREAM, 44, 1, 54, "tcp://r:1");
    CHECK (write (wp [1], "xyz", 3) == 3);
    s_turn (w, 1000);
    CHECK (s_relay (r, &chunk, &payload) == SQ_MSG_SCHUNK && chunk.token.len == 0
           && chunk.offset == 0 && payload == 3);
    s_turn (r, 1000);
    CHECK (read (rp [0], got, sizeof got) == 3 && memcmp (got, "xyz", 3) == 0);
    close (wp [1]);
    close (rp [0]);
    stream_reader_remove (r, 54);
    stream_writer_remove (w, 34);
    while (s_relay (w, NULL, NULL))
        ;
    stream_destroy (&w);
    stream_destroy (&r);
    stream_dir_destroy (&wdir);
    stream_dir_destroy (&rdir);
    CHECK (rmdir (taken) == 0);

    //  A directory open to others is refused.
    CHECK (chmod (sub, 0755) == 0);
    CHECK (!stream_dir_new (sub, "tcp://w:1", NULL));
    CHECK (rmdir (sub) == 0 && rmdir (deep) == 0 && rmdir (dir) == 0);
}

//  Clients' uploads on one host (PUTLOCAL): a memory file handed to the
//  socket's second name, put-FNV(serve endpoint).sock, is given out only
//  for its token, once, and never as a stream's pipe; a pipe handed with
//  a token is never given out as a memory file.
static void
s_test_segments (void)
{
    char dir [] = "/tmp/test-stream-put-XXXXXX";
    CHECK (mkdtemp (dir));
    char sub [128];
    snprintf (sub, sizeof sub, "%s/streams", dir);
    stream_dir_t *gdir = stream_dir_new (sub, "tcp://g:1", "tcp://127.0.0.1:5555");
    CHECK (gdir);
    stream_args_t args = { .pipe = s_in, .governor_id = 3, .data_endpoint = "tcp://g:1",
                           .done = s_done, .dir = gdir };
    stream_t *g = stream_new (&args);
    CHECK (g);
    //  FNV-1a 64 of "tcp://127.0.0.1:5555", as client/fetch.c makes it
    uint64_t hash = 14695981039346656037ull;
    for (const char *c = "tcp://127.0.0.1:5555"; *c; c++)
        hash = (hash ^ (uint8_t) *c) * 1099511628211ull;
    char name [64], path [256];
    snprintf (name, sizeof name, "put-%016" PRIx64 ".sock", hash);
    snprintf (path, sizeof path, "%s/%s", sub, name);
    struct stat st;
    CHECK (stat (path, &st) == 0 && S_ISSOCK (st.st_mode));
    int mfd = memfd_create ("test-put", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK (mfd >= 0 && write (mfd, "segment", 7) == 7);
    CHECK (s_send_to (sub, name, mfd, "AAAAAAAAAAAAAAAA") == 0);
    close (mfd);
    int sp [2];
    CHECK (pipe (sp) == 0);
    CHECK (s_send_to (sub, name, sp [0], "PPPPPPPPPPPPPPPP") == 0);
    close (sp [0]);
    CHECK (stream_segments_waiting (g) == 1);
    //  Another token, or a pipe's: nothing
    CHECK (stream_take_segment (g, (const uint8_t *) "BBBBBBBBBBBBBBBB") == -1);
    CHECK (stream_take_segment (g, (const uint8_t *) "PPPPPPPPPPPPPPPP") == -1);
    int got = stream_take_segment (g, (const uint8_t *) "AAAAAAAAAAAAAAAA");
    CHECK (got >= 0 && fstat (got, &st) == 0 && S_ISREG (st.st_mode) && st.st_size == 7);
    char bytes [8];
    CHECK (pread (got, bytes, 7, 0) == 7 && memcmp (bytes, "segment", 7) == 0);
    close (got);
    CHECK (stream_take_segment (g, (const uint8_t *) "AAAAAAAAAAAAAAAA") == -1);
    CHECK (stream_segments_waiting (g) == 0);
    //  A file left unclaimed is closed with the stream (and the name goes
    //  with the directory's holder)
    mfd = memfd_create ("test-put", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CHECK (mfd >= 0 && s_send_to (sub, name, mfd, "CCCCCCCCCCCCCCCC") == 0);
    CHECK (stream_segments_waiting (g) == 1);
    stream_destroy (&g);
    stream_dir_destroy (&gdir);
    CHECK (stat (path, &st) == -1 && errno == ENOENT);
    //  The kernel's count: only our own descriptor is left (the stream's
    //  went), so the file's pages go once we close it.
    close (mfd);
    close (sp [1]);
    CHECK (rmdir (sub) == 0 && rmdir (dir) == 0);
}

int
main (void)
{
    void *ctx = zmq_ctx_new ();
    s_in = zmq_socket (ctx, ZMQ_PAIR);
    s_out = zmq_socket (ctx, ZMQ_PAIR);
    CHECK (zmq_bind (s_out, "inproc://streams") == 0 && zmq_connect (s_in, "inproc://streams") == 0);
    stream_args_t args = { .pipe = s_in, .governor_id = 7, .data_endpoint = "tcp://w:1",
                           .done = s_done };
    stream_t *streams = stream_new (&args);
    CHECK (streams);
    s_test_writer (streams);
    s_test_reader (streams);
    //  A chunk nobody will take is still held at the end: freed with the rest.
    s_chunk (streams, 99, 1, 0, 10, false);
    stream_destroy (&streams);
    CHECK (!streams);
    s_test_local ();
    s_test_segments ();
    zmq_close (s_in);
    zmq_close (s_out);
    zmq_ctx_term (ctx);
    printf ("test_governor_stream: writers wait for their readers and their credits; readers "
            "take chunks in order, early ones too, and refuse the others; on one host the pipe is "
            "handed over, to governors only; clients' memory files only for their token: OK\n");
    return 0;
}
