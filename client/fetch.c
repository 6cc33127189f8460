/*  fetch: reading an object straight from a governor's serve socket.

    The client keeps a window of GREAD requests outstanding, one range each
    (SQ_FETCH_CHUNK bytes), so that the governor streams the object at wire
    speed while never having more than the window in flight: the window is
    the credit, and a slow client only slows its own fetch. The governor
    sends every range zero-copy from its store; the client copies each once
    from the ZeroMQ frame into the result buffer (which sq_free must be able
    to free, so it cannot be the frames themselves), whose memory is reused
    from earlier fetches the caller freed (client/buffers.c). */
#include "sq_client_private.h"
#include "fdpass.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  Waits for the reply to one of the window of requests [first_req,
//  first_req + n) not yet answered (`done` of them are), skipping stale
//  replies. 0 with the reply decoded in *reply (its code unchecked), or
//  the recorded error: silence for timeout_ms, or a malformed reply.
static int
s_next_reply (sq_client_t *self, void *socket, const char *endpoint, uint64_t key,
              uint32_t first_req, uint64_t n, uint64_t done, int timeout_ms,
              const char *what, sq_msg_t *msg, sq_reply_t *reply, uint32_t *req)
{
    int64_t deadline = s_now_ms () + timeout_ms;
    while (1) {
        int64_t left = deadline - s_now_ms ();
        zmq_pollitem_t item = { socket, 0, ZMQ_POLLIN, 0 };
        int ready = left > 0? zmq_poll (&item, 1, (long) left): 0;
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            //  Silent: as good as unreachable; reconnect next time.
            sq_client_governor_forget (self, endpoint);
            return sq_client_seterr (self, SQ_E_CONNECTION, sq_key_id (key), 0,
                                     "governor at %s stopped answering %s", endpoint, what);
        }
        if (sq_msg_recv (msg, socket, ZMQ_DONTWAIT, SQ_CLIENT_MAX_FRAMES))
            continue;
        uint32_t type;
        if (msg->n == 0 || sq_proto_peek (sq_msg_data (msg, 0), sq_msg_size (msg, 0), &type, req)
        ||  *req - first_req >= n || *req - first_req < done) {
            sq_msg_close (msg);
            continue;           //  a stale reply to an older request
        }
        sq_errbuf_t err;
        if (msg->truncated || sq_reply_decode (reply, sq_msg_data (msg, 0), sq_msg_size (msg, 0), &err))
            return sq_client_seterr (self, SQ_E_PROTOCOL, sq_key_id (key), 0,
                                     "malformed reply from %s to %s", endpoint, what);
        return 0;
    }
}

//  One request a range, [0, n_ranges), on `socket`: `send` sends range i
//  as request first_req + i while fewer than SQ_FETCH_WINDOW are
//  unanswered, and `take` handles each reply in turn (its code unchecked;
//  `take` says what a refusal means). 0, or the first error recorded;
//  then, with replies still on their way, the link is renewed (their
//  request ids are never used again, but a broken link is better renewed).
typedef int (s_range_send_fn) (sq_client_t *self, void *socket, uint32_t req, uint64_t index,
                               void *arg);
typedef int (s_range_take_fn) (sq_client_t *self, sq_msg_t *msg, sq_reply_t *reply,
                               uint64_t index, void *arg);

static int
s_window (sq_client_t *self, void *socket, const char *endpoint, uint64_t key,
          uint64_t n_ranges, int timeout_ms, const char *what,
          s_range_send_fn *send, s_range_take_fn *take, void *arg)
{
    //  Request ids of the run are consecutive: range i has first_req + i.
    uint32_t first_req = sq_client_next_req (self);
    for (uint64_t i = 1; i < n_ranges; i++)
        sq_client_next_req (self);
    uint64_t sent = 0, answered = 0;
    sq_msg_t msg;
    sq_msg_init (&msg);
    int rc = 0;
    while (answered < n_ranges && rc == 0) {
        while (sent < n_ranges && sent - answered < SQ_FETCH_WINDOW) {
            if ((rc = send (self, socket, first_req + (uint32_t) sent, sent, arg))) {
                rc = sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to governor at %s: %s",
                                       endpoint, zmq_strerror (errno));
                break;
            }
            sent++;
        }
        if (rc)
            break;
        uint32_t req;
        sq_reply_t reply;
        if ((rc = s_next_reply (self, socket, endpoint, key, first_req, n_ranges, answered,
                                timeout_ms, what, &msg, &reply, &req)))
            break;
        rc = take (self, &msg, &reply, req - first_req, arg);
        answered++;
        sq_msg_close (&msg);
    }
    sq_msg_release (&msg);
    if (rc && sent > answered)
        sq_client_governor_forget (self, endpoint);
    return rc;
}

//  A fetch's ranges: GREAD i reads [i * chunk, (i + 1) * chunk) into buffer.
typedef struct {
    const sq_target_t *target;
    uint64_t key, size, received;
    char *buffer;
} s_fetch_t;

static int
s_gread_send (sq_client_t *self, void *socket, uint32_t req, uint64_t index, void *arg)
{
    s_fetch_t *fetch = (s_fetch_t *) arg;
    sq_gread_t gread = {
        .req = req, .key = fetch->key,
        .offset = index * SQ_FETCH_CHUNK, .length = SQ_FETCH_CHUNK,
        .capability = { (const char *) fetch->target->capability,
                        (uint32_t) fetch->target->capability_size }
    };
    sq_wbuf_reset (&self->w);
    sq_gread_encode (&self->w, &gread);
    return sq_send (socket, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT);
}

static int
s_gread_take (sq_client_t *self, sq_msg_t *msg, sq_reply_t *reply, uint64_t index, void *arg)
{
    s_fetch_t *fetch = (s_fetch_t *) arg;
    uint64_t key = fetch->key;
    if (reply->code != SQ_OK)
        return sq_client_seterr (self, (int) reply->code, sq_key_id (key), 0, "%.*s",
                                 (int) reply->message.len, reply->message.ptr);
    //  Ranges come back in order (one DEALER, one governor thread).
    uint64_t offset = index * SQ_FETCH_CHUNK, size = fetch->size;
    uint64_t want = size - offset < SQ_FETCH_CHUNK? size - offset: SQ_FETCH_CHUNK;
    sq_served_t served;
    sq_errbuf_t err;
    if (sq_record_decode (SQ_REC_SERVED, &served, reply->body, reply->body_size, "GREAD reply",
                          &err)
    ||  index != fetch->received || served.size != size || msg->n != 2
    ||  sq_msg_size (msg, 1) != want)
        return sq_client_seterr (self, SQ_E_PROTOCOL, sq_key_id (key), 0,
                                 "governor at %s sent a wrong range of object %u",
                                 fetch->target->endpoint, sq_key_id (key));
    if (want)
        memcpy (fetch->buffer + offset, sq_msg_data (msg, 1), (size_t) want);
    fetch->received++;
    return 0;
}

int
sq_client_gread (sq_client_t *self, const sq_target_t *target, uint64_t key, uint64_t size,
                 int timeout_ms, void **data)
{
    const char *endpoint = target->endpoint;
    *data = NULL;
    if (size > SIZE_MAX - 1)
        return sq_client_seterr (self, SQ_E_TOO_LARGE, sq_key_id (key), 0,
                                 "object of %llu bytes is too large for memory",
                                 (unsigned long long) size);
    void *socket = sq_client_governor_socket (self, target);
    if (!socket)
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot connect to governor at %s: %s",
                                 endpoint, errno == EACCES? "the cluster uses keys and this "
                                 "client has none": zmq_strerror (errno));
    char *buffer = (char *) sq_client_buffer ((size_t) size);
    if (!buffer)
        return sq_client_seterr (self, SQ_E_NOMEM, sq_key_id (key), 0, "out of memory for %llu bytes",
                                 (unsigned long long) size);
    uint64_t chunk = SQ_FETCH_CHUNK;
    s_fetch_t fetch = { target, key, size, 0, buffer };
    int rc = s_window (self, socket, endpoint, key, size? (size + chunk - 1) / chunk: 1,
                       timeout_ms, "a fetch", s_gread_send, s_gread_take, &fetch);
    if (rc) {
        sq_free (buffer);
        return rc;
    }
    *data = buffer;
    return 0;
}

//  --------------------------------------------------------------------------
//  Upload: big constants go straight to a governor's serve socket in PUT
//  ranges (a window outstanding, sent zero-copy from the blob), and the
//  SUBMIT names that governor instead of carrying the bytes.

//  Asks the broker where to upload object `object` of `session` (UPLOAD):
//  a governor (`governor`, or 0: the broker picks), and with keys the
//  capability to write there. 0, or -1.
int
sq_client_upload_target (sq_client_t *self, uint32_t session, uint32_t object, uint64_t size,
                         uint32_t governor, sq_target_t *target)
{
    uint32_t req = sq_client_next_req (self);
    sq_request_t request = {
        .type = SQ_MSG_UPLOAD, .req = req, .session = session, .id = object, .size = size,
        .governor = governor
    };
    sq_wbuf_reset (&self->w);
    sq_request_encode (&self->w, &request);
    sq_reply_t reply;
    sq_where_t where;
    sq_errbuf_t err;
    if (sq_client_call (self, req, NULL, 0, SQ_CLIENT_CALL_TIMEOUT, &reply)
    ||  sq_where_decode (&where, reply.body, reply.body_size, &err)
    ||  where.endpoint.len < 7 || memcmp (where.endpoint.ptr, "tcp://", 6)
    ||  sq_target_from (target, &where))
        return -1;
    return 0;
}

//  A memory file holding the blob's bytes, written (never mapped: the
//  governor's seal against writes fails while a writable mapping exists),
//  or -1.
static int
s_memfd_of (sq_blob_t *blob)
{
    int fd = memfd_create ("squall-put", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    size_t size = sq_blob_size (blob), at = 0;
    while (at < size) {
        size_t len;
        const char *span = (const char *) sq_blob_span (blob, at, &len);
        ssize_t n = span? write (fd, span, len): -1;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close (fd);
            return -1;
        }
        at += (size_t) n;
    }
    return fd;
}

//  The path of the governor's socket for clients in the local directory
//  (governor/stream.c names it): 0 if there is one, else -1.
static int
s_local_path (sq_client_t *self, const sq_target_t *target, struct sockaddr_un *to)
{
    if (self->local_dirfd < 0)
        return -1;
    //  "put-" and FNV-1a of its serve endpoint, as governor/stream.c makes it
    uint64_t hash = 14695981039346656037ull;
    for (const char *c = target->endpoint; *c; c++)
        hash = (hash ^ (uint8_t) *c) * 1099511628211ull;
    memset (to, 0, sizeof *to);
    to->sun_family = AF_UNIX;
    int n = snprintf (to->sun_path, sizeof to->sun_path, "/proc/self/fd/%d/put-%016" PRIx64 ".sock",
                      self->local_dirfd, hash);
    struct stat st;
    if (n < 0 || (size_t) n >= sizeof to->sun_path || stat (to->sun_path, &st)
    ||  !S_ISSOCK (st.st_mode))
        return -1;              //  not a governor of this host
    return 0;
}

//  Hands the blob's bytes over as a memory file with a new token (out):
//  0, or -1 (nothing the governor could claim was sent).
static int
s_hand_over (const struct sockaddr_un *path, sq_blob_t *blob, uint8_t *token)
{
    if (sq_blob_size (blob) == 0 || getrandom (token, 16, 0) != 16)
        return -1;
    //  A constant made a sealed memory file already (client/constants.c,
    //  maybe one handed over before) goes as it is: the governor maps the
    //  same pages.
    int own = sq_blob_shm_fd (blob);
    int fd = own >= 0? own: s_memfd_of (blob);
    if (fd < 0)
        return -1;
    int sock = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    //  Blocking: a full socket buffer is a governor busy for a moment.
    //  Sent before the PUTLOCAL, so the file is there when that comes.
    ssize_t sent = sock >= 0? sq_fdpass_send (sock, path, sizeof *path, token, 16, &fd, 1, 0): -1;
    if (sock >= 0)
        close (sock);
    if (fd != own)
        close (fd);             //  the governor has its own now, or nobody
    return sent == 16? 0: -1;
}

static void
s_encode_putlocal (sq_client_t *self, const sq_target_t *target, uint32_t req, uint64_t key,
                   sq_blob_t *blob, const char *content_type, const uint8_t *token)
{
    const char *ct = content_type? content_type: "";
    sq_putlocal_t put = {
        .req = req, .key = key, .size = sq_blob_size (blob),
        .content_type = { ct, (uint32_t) strlen (ct) },
        .capability = { (const char *) target->capability, (uint32_t) target->capability_size },
        .token = { (const char *) token, 16 }
    };
    sq_wbuf_reset (&self->w);
    sq_putlocal_encode (&self->w, &put);
}

int
sq_client_put_local (sq_client_t *self, const sq_target_t *target, uint64_t key,
                     sq_blob_t *blob, const char *content_type, int timeout_ms)
{
    struct sockaddr_un to;
    uint8_t token [16];
    if (s_local_path (self, target, &to) || s_hand_over (&to, blob, token))
        return 1;
    void *socket = sq_client_governor_socket (self, target);
    if (!socket)
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot connect to governor at %s: %s",
                                 target->endpoint, zmq_strerror (errno));
    uint32_t req = sq_client_next_req (self);
    s_encode_putlocal (self, target, req, key, blob, content_type, token);
    if (sq_send (socket, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT))
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to governor at %s: %s",
                                 target->endpoint, zmq_strerror (errno));
    sq_msg_t msg;
    sq_msg_init (&msg);
    sq_reply_t reply;
    uint32_t got;
    int rc = s_next_reply (self, socket, target->endpoint, key, req, 1, 0, timeout_ms,
                           "an upload", &msg, &reply, &got);
    if (rc == 0 && reply.code != SQ_OK)
        rc = sq_client_seterr (self, (int) reply.code, sq_key_id (key), 0, "%.*s",
                               (int) reply.message.len, reply.message.ptr);
    sq_msg_release (&msg);
    return rc;
}

//  An upload's ranges: PUT i carries [i * chunk, (i + 1) * chunk) of the
//  blob, sent zero-copy.
typedef struct {
    const sq_target_t *target;
    uint64_t key;
    sq_blob_t *blob;
    const char *content_type;
} s_upload_t;

static int
s_put_send (sq_client_t *self, void *socket, uint32_t req, uint64_t index, void *arg)
{
    s_upload_t *upload = (s_upload_t *) arg;
    uint64_t size = sq_blob_size (upload->blob), offset = index * SQ_FETCH_CHUNK;
    uint64_t len = size - offset < SQ_FETCH_CHUNK? size - offset: SQ_FETCH_CHUNK;
    const char *ct = upload->content_type;
    sq_put_t put = {
        .req = req, .key = upload->key, .offset = offset, .size = size,
        .content_type = { ct, (uint32_t) strlen (ct) },
        .capability = { (const char *) upload->target->capability,
                        (uint32_t) upload->target->capability_size }
    };
    sq_wbuf_reset (&self->w);
    sq_put_encode (&self->w, &put);
    zmq_msg_t payload;
    if (sq_blob_msg_range (upload->blob, (size_t) offset, (size_t) len, &payload))
        return -1;
    return sq_send (socket, NULL, 0, &self->w, &payload, 1, ZMQ_DONTWAIT);
}

static int
s_put_take (sq_client_t *self, sq_msg_t *msg, sq_reply_t *reply, uint64_t index, void *arg)
{
    (void) msg;
    (void) index;
    if (reply->code != SQ_OK)
        return sq_client_seterr (self, (int) reply->code, sq_key_id (((s_upload_t *) arg)->key), 0,
                                 "%.*s", (int) reply->message.len, reply->message.ptr);
    return 0;
}

int
sq_client_put (sq_client_t *self, const sq_target_t *target, uint64_t key, sq_blob_t *blob,
               const char *content_type, int timeout_ms)
{
    const char *endpoint = target->endpoint;
    void *socket = sq_client_governor_socket (self, target);
    if (!socket)
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot connect to governor at %s: %s",
                                 endpoint, zmq_strerror (errno));
    uint64_t size = sq_blob_size (blob), chunk = SQ_FETCH_CHUNK;
    s_upload_t upload = { target, key, blob, content_type? content_type: "" };
    return s_window (self, socket, endpoint, key, size? (size + chunk - 1) / chunk: 1, timeout_ms,
                     "an upload", s_put_send, s_put_take, &upload);
}

void
sq_client_put_many (sq_client_t *self, sq_upload_t *items, size_t n, int timeout_ms)
{
    if (n == 0)
        return;
    const char *endpoint = items [0].target->endpoint;
    struct sockaddr_un to;
    bool local = s_local_path (self, items [0].target, &to) == 0;
    //  Request i of the run is first_req + i; what each is: its item, and
    //  its range's offset (PUTLOCAL: UINT64_MAX).
    uint64_t chunk = SQ_FETCH_CHUNK, total = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t size = sq_blob_size (items [i].blob);
        items [i].rc = 0;
        total += local && size? 1: size? (size + chunk - 1) / chunk: 1;
    }
    size_t *req_item = (size_t *) malloc (total * sizeof (size_t));
    uint64_t *req_offset = (uint64_t *) malloc (total * sizeof (uint64_t));
    bool *retry = (bool *) calloc (n, sizeof (bool));
    void *socket = req_item && req_offset && retry?
                   sq_client_governor_socket (self, items [0].target): NULL;
    int rc = 0;
    if (!socket) {
        rc = sq_client_seterr (self, req_item && req_offset && retry? SQ_E_CONNECTION: SQ_E_NOMEM,
                               0, 0, "cannot upload to governor at %s", endpoint);
        for (size_t i = 0; i < n; i++)
            items [i].rc = rc;
        free (req_item);
        free (req_offset);
        free (retry);
        return;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t size = sq_blob_size (items [i].blob);
        if (local && size) {
            req_item [at] = i, req_offset [at++] = UINT64_MAX;
            continue;
        }
        for (uint64_t off = 0; off < size || (size == 0 && off == 0); off += chunk) {
            req_item [at] = i, req_offset [at++] = off;
            if (size == 0)
                break;
        }
    }
    uint32_t first_req = sq_client_next_req (self);
    for (uint64_t i = 1; i < total; i++)
        sq_client_next_req (self);
    uint64_t sent = 0, answered = 0;
    sq_msg_t msg;
    sq_msg_init (&msg);
    while (rc == 0 && answered < total) {
        while (sent < total && sent - answered < SQ_FETCH_WINDOW) {
            sq_upload_t *item = &items [req_item [sent]];
            uint32_t req = first_req + (uint32_t) sent;
            uint64_t offset = req_offset [sent];
            int sent_rc = 0;
            if (item->rc)
                ;               //  failed already: its other ranges are not sent
            else
            if (offset == UINT64_MAX) {
                uint8_t token [16];
                if (s_hand_over (&to, item->blob, token)) {
                    retry [req_item [sent]] = true;     //  by PUT, afterwards
                    item->rc = SQ_E_INVALID;
                }
                else {
                    s_encode_putlocal (self, item->target, req, item->key, item->blob,
                                       item->content_type, token);
                    sent_rc = sq_send (socket, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT);
                }
            }
            else {
                uint64_t size = sq_blob_size (item->blob);
                uint64_t len = size - offset < chunk? size - offset: chunk;
                const char *ct = item->content_type? item->content_type: "";
                sq_put_t put = {
                    .req = req, .key = item->key, .offset = offset, .size = size,
                    .content_type = { ct, (uint32_t) strlen (ct) },
                    .capability = { (const char *) item->target->capability,
                                    (uint32_t) item->target->capability_size }
                };
                sq_wbuf_reset (&self->w);
                sq_put_encode (&self->w, &put);
                zmq_msg_t payload;
                sent_rc = sq_blob_msg_range (item->blob, (size_t) offset, (size_t) len, &payload)
                       || sq_send (socket, NULL, 0, &self->w, &payload, 1, ZMQ_DONTWAIT);
            }
            if (sent_rc) {
                rc = sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to governor at %s: %s",
                                       endpoint, zmq_strerror (errno));
                break;
            }
            if (item->rc) {
                //  Nothing went for this request: count it answered, in
                //  order, if every one before it was.
                if (answered == sent)
                    answered++;
                else
                    req_offset [sent] = UINT64_MAX - 1;     //  skipped when its turn comes
            }
            sent++;
        }
        while (rc == 0 && answered < sent && req_offset [answered] == UINT64_MAX - 1)
            answered++;
        if (rc || answered == total)
            break;
        if (answered == sent)
            continue;
        uint32_t req;
        sq_reply_t reply;
        if ((rc = s_next_reply (self, socket, endpoint, items [req_item [answered]].key,
                                first_req, total, answered, timeout_ms, "an upload", &msg,
                                &reply, &req)))
            break;
        //  Replies come in order (one DEALER, one governor thread).
        size_t which = req_item [req - first_req];
        if (req - first_req == answered && reply.code != SQ_OK && items [which].rc == 0) {
            items [which].rc = (int) reply.code;
            retry [which] = req_offset [answered] == UINT64_MAX;
        }
        answered++;
        sq_msg_close (&msg);
    }
    sq_msg_release (&msg);
    if (rc) {
        if (sent > answered)
            sq_client_governor_forget (self, endpoint);
        for (uint64_t i = answered; i < total; i++)
            if (items [req_item [i]].rc == 0)
                items [req_item [i]].rc = rc;
    }
    //  Refused as memory files (pushed out of the governor's slots, say):
    //  by PUT, one by one.
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (retry [i])
            items [i].rc = sq_client_put (self, items [i].target, items [i].key, items [i].blob,
                                          items [i].content_type, timeout_ms);
    free (req_item);
    free (req_offset);
    free (retry);
}

//  --------------------------------------------------------------------------
//  Task output (LOG to the broker, then LOGREAD on the governor that ran
//  it): the broker only says where; the bytes come from the governor.

//  A live governor answers a log read at once, from memory; one that just
//  died never does, and the broker may not know yet. A shorter wait than a
//  call's, so that the caller asks again soon and the broker then says the
//  log was lost with it, instead of `squall log` hanging for a minute.
#define S_LOGREAD_TIMEOUT 10000

int
sq_client_log (sq_client_t *self, uint32_t session, uint32_t task, int64_t attempt, int stream,
               uint64_t offset, size_t max, char **data, size_t *size, uint64_t *next,
               uint32_t *attempt_out, int *state)
{
    *data = NULL;
    *size = 0;
    *next = offset;
    *state = SQ_LOG_WAITING;
    if ((stream != SQ_LOG_STDOUT && stream != SQ_LOG_STDERR) || attempt < -1
    ||  attempt > UINT32_MAX)
        return sq_client_seterr (self, SQ_E_INVALID, task, 0,
                                 "stream must be 1 (stdout) or 2 (stderr), attempt -1 or one");
    if (max == 0 || max > SQ_LOGREAD_MAX)
        max = SQ_LOGREAD_MAX;
    uint32_t req = sq_client_next_req (self);
    sq_request_t request = {
        .type = SQ_MSG_LOG, .req = req, .session = session, .id = task,
        .attempt = attempt, .stream = (uint32_t) stream
    };
    sq_wbuf_reset (&self->w);
    sq_request_encode (&self->w, &request);
    sq_reply_t reply;
    sq_logwhere_t where;
    sq_errbuf_t err;
    if (sq_client_call (self, req, NULL, 0, SQ_CLIENT_CALL_TIMEOUT, &reply))
        return sq_client_errcode (self);
    if (sq_logwhere_decode (&where, reply.body, reply.body_size, &err))
        return sq_client_seterr (self, SQ_E_PROTOCOL, task, 0, "malformed LOG reply: %s", err.text);
    if (attempt_out)
        *attempt_out = where.attempt;
    bool ended = mpr_str_eq (where.state, "ended");
    bool assigned = mpr_str_eq (where.state, "assigned");
    if (!where.located) {
        *state = ended? SQ_LOG_NONE: SQ_LOG_WAITING;
        return 0;
    }
    sq_target_t target;
    if (where.where.endpoint.len < 7 || memcmp (where.where.endpoint.ptr, "tcp://", 6)
    ||  sq_target_from (&target, &where.where))
        return sq_client_seterr (self, SQ_E_PROTOCOL, task, 0, "malformed LOG reply: endpoint");
    void *socket = sq_client_governor_socket (self, &target);
    if (!socket)
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot connect to governor at %s: %s",
                                 target.endpoint, zmq_strerror (errno));
    uint64_t key = sq_key (session, task);
    req = sq_client_next_req (self);
    sq_logread_t q = {
        .req = req, .key = key, .attempt = where.attempt, .stream = (uint32_t) stream,
        .offset = offset, .length = max,
        .capability = { (const char *) target.capability, (uint32_t) target.capability_size }
    };
    sq_wbuf_reset (&self->w);
    sq_logread_encode (&self->w, &q);
    if (sq_send (socket, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT))
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to governor at %s: %s",
                                 target.endpoint, zmq_strerror (errno));
    sq_msg_t msg;
    sq_msg_init (&msg);
    uint32_t got_req;
    int rc = s_next_reply (self, socket, target.endpoint, key, req, 1, 0,
                           S_LOGREAD_TIMEOUT, "a log read", &msg, &reply, &got_req);
    if (rc == 0 && reply.code == SQ_E_UNKNOWN_ID && assigned)
        *state = SQ_LOG_WAITING;        //  given to it, not started there yet
    else
    if (rc == 0 && reply.code != SQ_OK)
        rc = sq_client_seterr (self, (int) reply.code, task, 0, "%.*s",
                               (int) reply.message.len, reply.message.ptr);
    else
    if (rc == 0) {
        uint64_t total;
        bool done;
        if (sq_logpart_decode (reply.body, reply.body_size, next, &total, &done, &err)
        ||  msg.n != 2 || sq_msg_size (&msg, 1) > max + 256)
            rc = sq_client_seterr (self, SQ_E_PROTOCOL, task, 0,
                                   "governor at %s sent a malformed log read reply",
                                   target.endpoint);
        else {
            size_t n = sq_msg_size (&msg, 1);
            *data = (char *) malloc (n + 1);
            if (!*data)
                rc = sq_client_seterr (self, SQ_E_NOMEM, task, 0, "out of memory");
            else {
                memcpy (*data, sq_msg_data (&msg, 1), n);
                (*data) [n] = 0;
                *size = n;
                *state = done? SQ_LOG_DONE: SQ_LOG_RUNNING;
            }
        }
    }
    sq_msg_release (&msg);
    return rc;
}

//  --------------------------------------------------------------------------
//  A run's answers (RUN to the broker, then RUNREAD on each governor that
//  keeps some): the broker only says where; the bytes come from the
//  governor, in ranges of at most SQ_LOGREAD_MAX.

//  Sends the RUNREAD of the next range; 0 or the recorded error.
static int
s_runread_send (sq_client_t *self, sq_client_ranread_t *r)
{
    uint64_t left = r->size - r->offset;
    r->length = left < SQ_LOGREAD_MAX? left: SQ_LOGREAD_MAX;
    r->req = sq_client_next_req (self);
    sq_runread_t q = {
        .req = r->req, .run = r->run, .offset = r->offset, .length = r->length,
        .capability = { (const char *) r->target.capability, (uint32_t) r->target.capability_size }
    };
    sq_wbuf_reset (&self->w);
    sq_runread_encode (&self->w, &q);
    if (sq_send (r->socket, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT))
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to governor at %s: %s",
                                 r->target.endpoint, zmq_strerror (errno));
    return 0;
}

int
sq_client_ranread_begin (sq_client_t *self, sq_client_ranread_t *r, uint64_t run,
                         const sq_where_t *where, uint64_t size)
{
    memset (r, 0, sizeof *r);
    r->run = run;
    r->size = size;
    if (where->endpoint.len < 7 || memcmp (where->endpoint.ptr, "tcp://", 6)
    ||  sq_target_from (&r->target, where))
        return r->rc = sq_client_seterr (self, SQ_E_LOST, 0, 0, "the governor is gone");
    r->socket = sq_client_governor_socket (self, &r->target);
    if (!r->socket)
        return r->rc = sq_client_seterr (self, SQ_E_CONNECTION, 0, 0,
                                         "cannot connect to governor at %s: %s",
                                         r->target.endpoint, zmq_strerror (errno));
    r->buffer = (char *) malloc (size? (size_t) size: 1);
    if (!r->buffer)
        return r->rc = sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "out of memory");
    return r->rc = s_runread_send (self, r);
}

int
sq_client_ranread_end (sq_client_t *self, sq_client_ranread_t *r, char **data)
{
    *data = NULL;
    int rc = r->rc;
    while (rc == 0) {
        sq_msg_t msg;
        sq_msg_init (&msg);
        sq_reply_t reply;
        uint32_t got_req;
        sq_errbuf_t err;
        uint64_t next, total;
        bool done;
        rc = s_next_reply (self, r->socket, r->target.endpoint, 0, r->req, 1, 0,
                           S_LOGREAD_TIMEOUT, "a run's answers", &msg, &reply, &got_req);
        if (rc == 0 && reply.code != SQ_OK)
            rc = sq_client_seterr (self, (int) reply.code, 0, 0, "%.*s",
                                   (int) reply.message.len, reply.message.ptr);
        else
        if (rc == 0
        &&  (sq_logpart_decode (reply.body, reply.body_size, &next, &total, &done, &err)
             || msg.n != 2 || total != r->size || sq_msg_size (&msg, 1) == 0
             || sq_msg_size (&msg, 1) > r->length || next != r->offset + sq_msg_size (&msg, 1)))
            rc = sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0,
                                   "governor at %s sent a malformed reply to RUNREAD",
                                   r->target.endpoint);
        else
        if (rc == 0) {
            memcpy (r->buffer + r->offset, sq_msg_data (&msg, 1), sq_msg_size (&msg, 1));
            r->offset = next;
        }
        sq_msg_release (&msg);
        if (rc || r->offset == r->size)
            break;
        rc = s_runread_send (self, r);
    }
    if (rc)
        free (r->buffer);
    else
        *data = r->buffer;
    r->buffer = NULL;
    return rc;
}
