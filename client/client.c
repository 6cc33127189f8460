/*  client: the connection to the broker, request / reply matching, errors,
    direct fetches from governors, INFO as JSON.

    Over 800 lines: every call here changes the one connection state
    (sockets, pending requests, resume, governor links), which split files
    would all reach into. */
#include "sq_client_private.h"
#include "keys.h"
#include "zap.h"
#include "json.h"
#include "args.h"
#include "grow.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

//  Send queues are generous: a submit may carry many constants, and a
//  request must never fail only because the peer is slow to read.
#define S_HWM 100000
#define S_HELLO_LOST (-2)       //  s_await: see there
//  Deepest INFO document converted to JSON.

static const char *s_errnames [SQ_E_COUNT_] = {
    "ok", "protocol error", "version mismatch", "no hello", "invalid argument",
    "duplicate id", "unknown id", "cycle", "no producer", "unknown kind",
    "bad config", "bad session", "not kept", "task failed", "upstream failed",
    "cancelled", "timeout", "too large", "busy", "no resources",
    "connection error", "out of memory", "internal error", "lost", "denied",
    "actor lost", "deleted"
};

const char *
sq_strerror (int code)
{
    if (code >= 0 && code < SQ_E_COUNT_)
        return s_errnames [code];
    return "unknown error";
}

void
sq_free (void *ptr)
{
    //  Big fetch buffers are kept for the next fetch (client/buffers.c).
    if (ptr && !sq_client_buffer_give (ptr))
        free (ptr);
}

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  --------------------------------------------------------------------------

sq_client_t *
sq_client_new (void)
{
    sq_client_t *self = (sq_client_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->ctx = zmq_ctx_new ();
    if (!self->ctx) {
        free (self);
        return NULL;
    }
    sq_wbuf_init (&self->w);
    sq_msg_init (&self->msg);
    self->next_req = 1;
    self->resume_ms = 60000;
    self->local_dirfd = -1;
    snprintf (self->errmsg, sizeof self->errmsg, "no error");
    //  A malformed size is not taken for 0 (off) nor ignored: connect
    //  fails naming it, and nothing else changes meanwhile.
    const char *cache = getenv ("SQUALL_CONSTANT_CACHE");
    uint64_t limit = SQ_CONSTANTS_DEFAULT;
    if (cache && *cache && sq_parse_size (cache, &limit)) {
        snprintf (self->constants_env_bad, sizeof self->constants_env_bad, "%s", cache);
        limit = SQ_CONSTANTS_DEFAULT;
    }
    self->constants = sq_constants_new (limit);
    if (!self->constants) {
        zmq_ctx_term (self->ctx);
        free (self);
        return NULL;
    }
    sq_client_buffers_hold (true);
    return self;
}

static void
s_close_socket (void **socket_p)
{
    if (*socket_p) {
        int linger = 0;
        zmq_setsockopt (*socket_p, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close (*socket_p);
        *socket_p = NULL;
    }
}

static void
s_governor_close (sq_govlink_t *link)
{
    s_close_socket (&link->socket);
    free (link->endpoint);
    link->endpoint = NULL;
}

//  Closes the broker connection (not the governor links).
static void
s_disconnect (sq_client_t *self)
{
    if (self->dealer && self->monitor)
        zmq_socket_monitor (self->dealer, NULL, 0);
    s_close_socket (&self->monitor);
    s_close_socket (&self->dealer);
    free (self->endpoint);
    self->endpoint = NULL;
    self->connected = false;
    self->broken = false;
}

void
sq_client_destroy (sq_client_t **self_p)
{
    sq_client_t *self = *self_p;
    if (!self)
        return;
    *self_p = NULL;
    //  A goodbye: the broker closes our sessions now instead of keeping
    //  them for us to resume.
    if (self->dealer && self->connected && !self->broken) {
        sq_wbuf_reset (&self->w);
        sq_bare_encode (&self->w, SQ_MSG_BYE);
        int linger = 200;
        zmq_setsockopt (self->dealer, ZMQ_LINGER, &linger, sizeof linger);
        sq_send (self->dealer, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT);
    }
    //  Sessions the caller did not destroy keep working as far as freeing
    //  goes, but no longer talk to anyone.
    for (size_t i = 0; i < self->n_sessions; i++)
        sq_session_orphan (self->sessions [i]);
    free (self->sessions);
    s_disconnect (self);
    for (size_t i = 0; i < self->n_governors; i++)
        s_governor_close (&self->governors [i]);
    sq_msg_close (&self->msg);
    free (self->msg.frames);
    sq_wbuf_release (&self->w);
    zmq_ctx_term (self->ctx);
    memset (self->secret_key, 0, sizeof self->secret_key);
    if (self->local_dirfd >= 0)
        close (self->local_dirfd);
    sq_constants_destroy (&self->constants);
    free (self);
    sq_client_buffers_hold (false);
}

int
sq_client_set_keys (sq_client_t *self, const char *secret_key_file, const char *broker_key_file)
{
    if (!self)
        return SQ_E_INVALID;
    if (!secret_key_file || !broker_key_file)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "both key files are needed");
    char err [700];
    if (sq_cert_load_pair (secret_key_file, broker_key_file, "secret key", "broker key",
                           self->public_key, self->secret_key, self->broker_key, err, sizeof err))
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "%s", err);
    self->has_keys = true;
    return 0;
}

//  A Slurm job step: the stream directory squall's governor jobs of this
//  user use on this node (bindings/python/squall/slurm.py,
//  governor_script), when it is there and the user's alone; a node with no
//  governor of ours has no socket in it, and uploads go by PUT.
static void
s_slurm_local_dir (sq_client_t *self)
{
    const char *run = getenv ("XDG_RUNTIME_DIR");
    char dir [4096];
    int n = snprintf (dir, sizeof dir, "%s/squall-streams-%u", run && *run? run: "/tmp",
                      (unsigned) geteuid ());
    struct stat st;
    if (n > 0 && (size_t) n < sizeof dir && lstat (dir, &st) == 0 && S_ISDIR (st.st_mode)
    &&  st.st_uid == geteuid () && !(st.st_mode & 077))
        sq_client_set_local_dir (self, dir);
}

int
sq_client_set_local_dir (sq_client_t *self, const char *dir)
{
    if (!self)
        return SQ_E_INVALID;
    if (!dir || !*dir)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "no directory given");
    //  Ours and closed to others, as the governors check it: whoever could
    //  make a socket there would be handed our constants.
    struct stat st;
    int fd = open (dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat (fd, &st) || st.st_uid != geteuid () || (st.st_mode & 077)) {
        if (fd >= 0)
            close (fd);
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "local directory %s: not a "
                                 "directory of ours closed to others (mode 0700)", dir);
    }
    if (self->local_dirfd >= 0)
        close (self->local_dirfd);
    self->local_dirfd = fd;
    return 0;
}

void
sq_client_set_constant_cache (sq_client_t *self, uint64_t bytes)
{
    if (!self)
        return;
    sq_constants_set_limit (self->constants, bytes);
    self->constants_env_bad [0] = 0;
}

int
sq_client_constant_cache_stats (sq_client_t *self, sq_constant_cache_stats_t *stats)
{
    if (!self)
        return SQ_E_INVALID;
    if (!stats)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "no stats to fill in");
    sq_constants_stats (self->constants, stats);
    return 0;
}

void
sq_client_set_resume (sq_client_t *self, int timeout_ms)
{
    if (self)
        self->resume_ms = timeout_ms < 0? 0: timeout_ms;
}

int
sq_keygen (const char *name, const char *dir, const char *role, const char *tenant,
           char *err, size_t err_size)
{
    char why [600];
    if (sq_keys_generate (name, dir, role, tenant, why, sizeof why)) {
        if (err && err_size)
            snprintf (err, err_size, "%s", why);
        return SQ_E_INVALID;
    }
    return 0;
}

int
sq_client_seterr (sq_client_t *self, int code, uint32_t id, uint32_t root,
                  const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (self->errmsg, sizeof self->errmsg, format, args);
    va_end (args);
    self->errcode = code;
    self->errid = id;
    self->errroot = root;
    return code;
}

const char *
sq_client_errmsg (sq_client_t *self)
{
    return self? self->errmsg: "no client";
}

int
sq_client_errcode (sq_client_t *self)
{
    return self? self->errcode: SQ_E_INVALID;
}

uint32_t
sq_client_errid (sq_client_t *self)
{
    return self? self->errid: 0;
}

uint32_t
sq_client_errroot (sq_client_t *self)
{
    return self? self->errroot: 0;
}

uint32_t
sq_client_next_req (sq_client_t *self)
{
    uint32_t req = self->next_req++;
    if (self->next_req == 0)
        self->next_req = 1;     //  0 means "no request id" on the wire
    return req;
}

int
sq_client_attach (sq_client_t *self, sq_session_t *session)
{
    if (self->n_sessions == self->sessions_cap
    &&  sq_grow ((void **) &self->sessions, &self->sessions_cap, self->n_sessions + 1,
                 sizeof *self->sessions, 8, SIZE_MAX))
        return -1;
    self->sessions [self->n_sessions++] = session;
    return 0;
}

void
sq_client_detach (sq_client_t *self, sq_session_t *session)
{
    for (size_t i = 0; i < self->n_sessions; i++)
        if (self->sessions [i] == session) {
            self->sessions [i] = self->sessions [--self->n_sessions];
            return;
        }
}

//  --------------------------------------------------------------------------
//  Connection loss

static int
s_lost (sq_client_t *self)
{
    self->broken = true;
    return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0,
                             "connection to broker %s lost", self->endpoint);
}

static int s_resume (sq_client_t *self, int64_t deadline);

//  The ZeroMQ handshake with the broker failed: a broker with keys and a
//  client without (or the other way round), or a key it does not accept.
//  Said at once, instead of the silence ZeroMQ's retries would leave until
//  the timeout. Records the error; SQ_E_DENIED.
static int
s_handshake_failed (sq_client_t *self, uint16_t event, uint32_t value)
{
    const char *at = self->endpoint? self->endpoint: "?";
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return sq_client_seterr (self, SQ_E_DENIED, 0, 0, "the broker at %s refused this "
                                 "client's key (it is not among the broker's authorized keys, "
                                 "docs/security.md)", at);
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
    &&  value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        return self->has_keys?
            sq_client_seterr (self, SQ_E_DENIED, 0, 0, "the broker at %s does not use keys: "
                              "connect without them", at):
            sq_client_seterr (self, SQ_E_DENIED, 0, 0, "the broker at %s requires keys: give "
                              "this client its key pair and the broker's public key "
                              "($SQUALL_SECRET_KEY and $SQUALL_BROKER_KEY, or secret_key= and "
                              "broker_key=; docs/security.md)", at);
    return sq_client_seterr (self, SQ_E_DENIED, 0, 0, "the handshake with the broker at %s "
                             "failed (ZeroMQ event 0x%x, 0x%x): %s", at, event, value,
                             self->has_keys? "is the broker's public key the right one?":
                             "does the broker require keys?");
}

//  Reads one monitor event: 1 if it says the connection went down, -1 if
//  the handshake failed (the error recorded), 0 otherwise.
static int
s_monitor_event (sq_client_t *self)
{
    int result = 0;
    bool first = true;
    while (1) {
        zmq_msg_t frame;
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, self->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&frame);
            return result;
        }
        //  Frame 1: uint16 event, uint32 value (host order, libzmq 4.x)
        if (first && zmq_msg_size (&frame) >= 6) {
            uint16_t event;
            uint32_t value;
            memcpy (&event, zmq_msg_data (&frame), sizeof event);
            memcpy (&value, (uint8_t *) zmq_msg_data (&frame) + 2, sizeof value);
            if (event & ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
                self->handshaken = true;
            else
            if (event & ZMQ_EVENT_DISCONNECTED) {
                result = 1;
                self->handshaken = false;
            }
            else
            if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {
                s_handshake_failed (self, event, value);
                result = -1;
            }
        }
        first = false;
        int more = zmq_msg_more (&frame);
        zmq_msg_close (&frame);
        if (!more)
            return result;
    }
}

//  Drains pending monitor events without blocking.
static void
s_monitor_poll (sq_client_t *self)
{
    if (!self->monitor || !self->connected)
        return;
    zmq_pollitem_t item = { self->monitor, 0, ZMQ_POLLIN, 0 };
    while (zmq_poll (&item, 1, 0) > 0 && (item.revents & ZMQ_POLLIN))
        if (s_monitor_event (self))
            self->broken = true;
}

int
sq_client_check (sq_client_t *self)
{
    if (!self->endpoint)
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "client is not connected");
    s_monitor_poll (self);
    if (self->broken && self->resume_ms > 0)
        return s_resume (self, s_now_ms () + self->resume_ms);
    if (self->broken)
        return s_lost (self);
    if (!self->connected)
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "client is not connected");
    return 0;
}

//  --------------------------------------------------------------------------
//  Request / reply

//  Waits for the REPLY to req on socket, discarding stale replies to older
//  requests. monitor may be NULL. 0 with the decoded reply (of any code), or
//  an error recorded: SQ_E_TIMEOUT, SQ_E_CONNECTION, SQ_E_PROTOCOL, and
//  S_HELLO_LOST (not recorded) before HELLO is answered when a connection
//  whose handshake had succeeded ends: the HELLO may have gone with it.
static int
s_await (sq_client_t *self, void *socket, void *monitor, uint32_t req,
         int timeout_ms, const char *peer, sq_reply_t *reply)
{
    int64_t deadline = timeout_ms < 0? -1: s_now_ms () + timeout_ms;
    while (1) {
        zmq_pollitem_t items [2] = {
            { socket, 0, ZMQ_POLLIN, 0 },
            { monitor, 0, ZMQ_POLLIN, 0 }
        };
        long wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - s_now_ms ();
            wait = left > 0? (long) left: 0;
        }
        int rc = zmq_poll (items, monitor? 2: 1, wait);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0,
                                     "waiting for %s: %s", peer, zmq_strerror (errno));
        }
        if (monitor && (items [1].revents & ZMQ_POLLIN)) {
            bool handshaken = self->handshaken;
            int event = s_monitor_event (self);
            if (event < 0)
                return SQ_E_DENIED;
            if (event > 0 && self->connected)
                return s_lost (self);
            if (event > 0 && handshaken)
                return S_HELLO_LOST;
        }
        if (items [0].revents & ZMQ_POLLIN) {
            if (sq_msg_recv (&self->msg, socket, ZMQ_DONTWAIT, SQ_CLIENT_MAX_FRAMES)) {
                if (errno == EAGAIN || errno == EINTR)
                    continue;
                return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0,
                                         "receiving from %s: %s", peer, zmq_strerror (errno));
            }
            uint32_t type, got;
            if (self->msg.n == 0
            ||  sq_proto_peek (sq_msg_data (&self->msg, 0), sq_msg_size (&self->msg, 0), &type, &got)
            ||  got != req)
                continue;       //  unreadable, or a stale reply to an older request
            sq_errbuf_t err;
            if (self->msg.truncated)
                return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0,
                                         "reply from %s has too many frames", peer);
            if (sq_reply_decode (reply, sq_msg_data (&self->msg, 0), sq_msg_size (&self->msg, 0), &err))
                return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0,
                                         "malformed reply from %s: %s", peer, err.text);
            return 0;
        }
        if (rc == 0 && deadline >= 0 && s_now_ms () >= deadline)
            return sq_client_seterr (self, SQ_E_TIMEOUT, 0, 0,
                                     "no reply from %s within %d ms", peer, timeout_ms);
    }
}

//  Records the error a REPLY carries.
static int
s_reply_error (sq_client_t *self, const sq_reply_t *reply)
{
    return sq_client_seterr (self, (int) reply->code, reply->err_id, reply->err_root,
                             "%.*s", (int) reply->message.len, reply->message.ptr);
}

static void
s_close_all (zmq_msg_t *msgs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        zmq_msg_close (&msgs [i]);
}

//  A broker's reply's code as the call's result: a broker that does not
//  know us (restarted) means the connection is lost; an error is said.
static int
s_reply_code (sq_client_t *self, sq_reply_t *reply)
{
    if (reply->code == SQ_E_HELLO)
        return s_lost (self);
    if (reply->code != SQ_OK)
        return s_reply_error (self, reply);
    return 0;
}

int
sq_client_call_submit (sq_client_t *self, uint32_t req, zmq_msg_t *payloads,
                       size_t n_payloads, int timeout_ms, sq_reply_t *reply,
                       sq_session_t *session, uint32_t batch_max)
{
    //  What goes out is kept until the reply, to be sent again if the
    //  connection is lost and resumed meanwhile (a resume uses client->w
    //  for its own requests): the header's bytes (the send takes the buffer
    //  over) and references to the payload frames.
    bool keep = self->resume_ms > 0;
    size_t size = self->w.buf.size;
    char *header = keep? (char *) malloc (size? size: 1): NULL;
    zmq_msg_t *copies = keep && n_payloads? (zmq_msg_t *) calloc (n_payloads, sizeof (zmq_msg_t)): NULL;
    if (keep && (!header || (n_payloads && !copies))) {
        free (header);
        free (copies);
        s_close_all (payloads, n_payloads);
        sq_wbuf_reset (&self->w);
        return sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "out of memory");
    }
    if (keep) {
        memcpy (header, self->w.buf.data, size);
        for (size_t i = 0; i < n_payloads; i++) {
            zmq_msg_init (&copies [i]);
            zmq_msg_copy (&copies [i], &payloads [i]);
        }
    }
    int rc = sq_client_check (self);
    if (rc == 0 && session && sq_session_lost (session))
        rc = sq_session_lost_error (session);
    if (rc == 0 && keep) {
        sq_wbuf_reset (&self->w);
        msgpack_sbuffer_write (&self->w.buf, header, size);
    }
    if (rc) {
        s_close_all (payloads, n_payloads);
        s_close_all (copies, copies? n_payloads: 0);
        free (header);
        free (copies);
        sq_wbuf_reset (&self->w);
        return rc;
    }
    char peer [SQ_MAX_NAME + 16];
    snprintf (peer, sizeof peer, "broker %s", self->endpoint);
    int64_t resume_deadline = -1;
    while (1) {
        if (sq_send (self->dealer, NULL, 0, &self->w, payloads, n_payloads, ZMQ_DONTWAIT))
            rc = sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to broker %s: %s",
                                   self->endpoint, zmq_strerror (errno));
        else
            rc = s_await (self, self->dealer, self->monitor, req, timeout_ms, peer, reply);
        bool lost = (rc == SQ_E_CONNECTION && self->broken)
                 || (rc == 0 && reply->code == SQ_E_HELLO);
        if (!lost || !keep)
            break;
        //  The broker no longer knows this connection (it restarted, or the
        //  link broke): reconnect, take the sessions back, try again.
        if (resume_deadline < 0)
            resume_deadline = s_now_ms () + self->resume_ms;
        self->broken = true;
        if ((rc = s_resume (self, resume_deadline)))
            break;
        if (session && sq_session_lost (session)) {
            //  Its broker forgot it: nothing is sent again into it.
            rc = sq_session_lost_error (session);
            break;
        }
        if (session && batch_max && sq_session_known_max (session) >= batch_max) {
            //  The broker had the SUBMIT before the connection went.
            static const uint8_t nil = 0xc0;
            memset (reply, 0, sizeof *reply);
            reply->req = req;
            reply->body = &nil;
            reply->body_size = 1;
            break;
        }
        sq_wbuf_reset (&self->w);
        msgpack_sbuffer_write (&self->w.buf, header, size);
        for (size_t i = 0; i < n_payloads; i++) {
            zmq_msg_init (&payloads [i]);
            zmq_msg_copy (&payloads [i], &copies [i]);
        }
    }
    free (header);
    s_close_all (copies, copies? n_payloads: 0);
    free (copies);
    return rc? rc: s_reply_code (self, reply);
}

int
sq_client_call (sq_client_t *self, uint32_t req, zmq_msg_t *payloads,
                size_t n_payloads, int timeout_ms, sq_reply_t *reply)
{
    return sq_client_call_submit (self, req, payloads, n_payloads, timeout_ms, reply, NULL, 0);
}

int
sq_client_nil_reply (sq_client_t *self, int rc, const sq_reply_t *reply)
{
    if (rc)
        return rc;
    sq_errbuf_t err;
    if (sq_nil_decode (reply->body, reply->body_size, &err))
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed %s", err.text);
    return 0;
}

int
sq_client_send_only (sq_client_t *self)
{
    int rc = sq_client_check (self);
    if (rc) {
        sq_wbuf_reset (&self->w);
        return rc;
    }
    if (sq_send (self->dealer, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT))
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to broker %s: %s",
                                 self->endpoint, zmq_strerror (errno));
    return 0;
}

int
sq_client_await (sq_client_t *self, uint32_t req, int timeout_ms, sq_reply_t *reply)
{
    char peer [SQ_MAX_NAME + 16];
    snprintf (peer, sizeof peer, "broker %s", self->endpoint);
    int rc = s_await (self, self->dealer, self->monitor, req, timeout_ms, peer, reply);
    return rc? rc: s_reply_code (self, reply);
}

int
sq_target_from (sq_target_t *target, const sq_where_t *where)
{
    memset (target, 0, sizeof *target);
    if (where->endpoint.len == 0 || where->endpoint.len >= sizeof target->endpoint
    ||  where->capability.len > sizeof target->capability)
        return -1;
    target->governor = where->governor;
    memcpy (target->endpoint, where->endpoint.ptr, where->endpoint.len);
    if (where->key.len == 32) {
        target->has_key = true;
        memcpy (target->key, where->key.ptr, 32);
    }
    if (where->capability.len)      //  memcpy from NULL is undefined even for 0 bytes
        memcpy (target->capability, where->capability.ptr, where->capability.len);
    target->capability_size = where->capability.len;
    return 0;
}

//  Returns the cached link to a governor, opening it if needed: CURVE with
//  the key the broker gave for it, when there is one.
static void *
s_governor_socket (sq_client_t *self, const sq_target_t *target)
{
    for (size_t i = 0; i < self->n_governors; i++) {
        sq_govlink_t *link = &self->governors [i];
        if (strcmp (link->endpoint, target->endpoint) == 0 && link->has_key == target->has_key
        &&  (!link->has_key || memcmp (link->key, target->key, 32) == 0))
            return link->socket;
    }
    if (self->n_governors == SQ_CLIENT_MAX_GOVERNORS) {
        s_governor_close (&self->governors [0]);
        memmove (&self->governors [0], &self->governors [1],
                 (SQ_CLIENT_MAX_GOVERNORS - 1) * sizeof (sq_govlink_t));
        self->n_governors--;
    }
    sq_govlink_t link = { strdup (target->endpoint), zmq_socket (self->ctx, ZMQ_DEALER),
                          target->has_key, { 0 } };
    memcpy (link.key, target->key, 32);
    int hwm = S_HWM, linger = 0;
    if (target->has_key && !self->has_keys) {
        s_governor_close (&link);
        errno = EACCES;         //  the cluster wants keys we do not have
        return NULL;
    }
    if (!link.endpoint || !link.socket
    ||  zmq_setsockopt (link.socket, ZMQ_LINGER, &linger, sizeof linger)
    ||  zmq_setsockopt (link.socket, ZMQ_RCVHWM, &hwm, sizeof hwm)
    ||  zmq_setsockopt (link.socket, ZMQ_SNDHWM, &hwm, sizeof hwm)
    ||  (target->has_key
         && sq_curve_client (link.socket, self->public_key, self->secret_key, target->key))
    ||  zmq_connect (link.socket, target->endpoint)) {
        s_governor_close (&link);
        return NULL;
    }
    self->governors [self->n_governors++] = link;
    return link.socket;
}

static void
s_governor_forget (sq_client_t *self, const char *endpoint)
{
    for (size_t i = 0; i < self->n_governors; ) {
        if (strcmp (self->governors [i].endpoint, endpoint) == 0) {
            s_governor_close (&self->governors [i]);
            self->governors [i] = self->governors [--self->n_governors];
        }
        else
            i++;
    }
}

//  --------------------------------------------------------------------------
//  Connect

//  A new DEALER to self->endpoint (CURVE with keys) and HELLO on it; or
//  S_HELLO_LOST.
static int
s_open_once (sq_client_t *self, int timeout_ms)
{
    const char *endpoint = self->endpoint;
    self->dealer = zmq_socket (self->ctx, ZMQ_DEALER);
    self->monitor = zmq_socket (self->ctx, ZMQ_PAIR);
    if (!self->dealer || !self->monitor)
        return sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "cannot create sockets: %s",
                                 zmq_strerror (errno));
    int hwm = S_HWM, linger = 0;
    zmq_setsockopt (self->dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt (self->dealer, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt (self->dealer, ZMQ_SNDHWM, &hwm, sizeof hwm);
    //  Nothing the broker sends is larger than what it accepts (a constant
    //  sent in a SUBMIT), at most 4 GiB (its --max-message): a larger frame
    //  is not from a broker and closes the connection before it is read.
    int64_t max_frame = ((int64_t) 1 << 32) + 65536;     //  and what CURVE adds
    zmq_setsockopt (self->dealer, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
    if (self->has_keys
    &&  sq_curve_client (self->dealer, self->public_key, self->secret_key, self->broker_key))
        return sq_client_seterr (self, SQ_E_INTERNAL, 0, 0, "this libzmq cannot do CURVE: %s",
                                 zmq_strerror (errno));
    //  The monitor must watch before connecting, or an early loss is missed.
    char monitor_ep [64];
    //  Unique per client and per connect: the old monitor endpoint may still
    //  be bound while ZeroMQ tears it down.
    static atomic_uint s_monitors;
    snprintf (monitor_ep, sizeof monitor_ep, "inproc://squall-monitor-%p-%u",
              (void *) self, atomic_fetch_add (&s_monitors, 1));
    //  A handshake failing without detail (a peer closing midway, as a
    //  stopping broker does) is left to the retries and the timeout.
    self->handshaken = false;
    if (zmq_socket_monitor (self->dealer, monitor_ep, ZMQ_EVENT_DISCONNECTED
                            | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
                            | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                            | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    ||  zmq_connect (self->monitor, monitor_ep))
        return sq_client_seterr (self, SQ_E_INTERNAL, 0, 0, "cannot monitor socket: %s",
                                 zmq_strerror (errno));
    if (zmq_connect (self->dealer, endpoint))
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot connect to %s: %s",
                                 endpoint, zmq_strerror (errno));
    char host [256] = "";
    gethostname (host, sizeof host - 1);
    char name [300];
    snprintf (name, sizeof name, "%s-%d", *host? host: "client", (int) getpid ());

    uint32_t req = sq_client_next_req (self);
    sq_wbuf_reset (&self->w);
    sq_hello_encode_client (&self->w, req, name);
    if (sq_send (self->dealer, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT))
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to %s: %s",
                                 endpoint, zmq_strerror (errno));
    //  Until HELLO is answered a connection dropped during its handshake
    //  is only retried by ZeroMQ (the HELLO still waits in the socket's
    //  queue), so s_await ignores such disconnects (connected is false)
    //  and the timeout decides; one dropped after it is S_HELLO_LOST.
    char peer [SQ_MAX_NAME + 16];
    snprintf (peer, sizeof peer, "broker %s", endpoint);
    sq_reply_t reply;
    int rc = s_await (self, self->dealer, self->monitor, req, timeout_ms, peer, &reply);
    if (rc)
        return rc;
    if (reply.code != SQ_OK)
        return s_reply_error (self, &reply);
    sq_welcome_t welcome;
    sq_errbuf_t err;
    if (sq_welcome_decode (&welcome, false, reply.body, reply.body_size, &err))
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed HELLO reply from broker %s: %s",
                                 endpoint, err.text);
    //  Another cluster (a broker restarted without its journal): the
    //  connection is good, the sessions of the old one are lost.
    self->cluster_changed = self->cluster [0] && !mpr_str_eq (welcome.cluster, self->cluster);
    self->client_id = welcome.id;
    self->inline_max = welcome.inline_max > UINT32_MAX? UINT32_MAX: (uint32_t) welcome.inline_max;
    snprintf (self->cluster, sizeof self->cluster, "%.*s", (int) welcome.cluster.len,
              welcome.cluster.ptr);
    self->epoch = welcome.epoch;
    self->connected = true;
    self->broken = false;
    return 0;
}

//  s_open_once until HELLO is answered or the time is up. A broker over its
//  connection limits closes newcomers (docs/security.md, "Limits"); one
//  closed after its handshake took the HELLO with it: the HELLO is said
//  again on a new socket (on the same one it could still be queued, and
//  go twice).
static int
s_open (sq_client_t *self, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0? -1: s_now_ms () + timeout_ms;
    while (1) {
        int64_t left = deadline < 0? -1: deadline - s_now_ms ();
        int rc = deadline >= 0 && left <= 0? SQ_E_TIMEOUT
               : s_open_once (self, left > INT32_MAX? INT32_MAX: (int) left);
        if (rc == S_HELLO_LOST) {
            zmq_socket_monitor (self->dealer, NULL, 0);
            s_close_socket (&self->monitor);
            s_close_socket (&self->dealer);
            left = deadline < 0? 100: deadline - s_now_ms ();
            zmq_pollitem_t none = { NULL, -1, 0, 0 };
            zmq_poll (&none, 0, left < 100? (left > 0? (long) left: 0): 100);
            continue;
        }
        if (rc == SQ_E_TIMEOUT)
            return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0,
                                     "no answer from broker at %s within %d ms%s", self->endpoint,
                                     timeout_ms, self->has_keys? " (are the keys right?)": "");
        return rc;
    }
}

int
sq_client_connect (sq_client_t *self, const char *endpoint, int timeout_ms)
{
    if (!self)
        return SQ_E_INVALID;
    if (!endpoint || !*endpoint || strlen (endpoint) > SQ_MAX_NAME)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "invalid broker endpoint");
    //  "host:port" as users write it gets its tcp://; a port out of range
    //  is refused here (ZeroMQ would take 99999 as 34463).
    char normal [SQ_MAX_NAME + 8], err [300];
    if (sq_parse_endpoint (endpoint, normal, sizeof normal, err, sizeof err))
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "invalid broker endpoint %s", err);
    endpoint = normal;
    if (*self->constants_env_bad)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "SQUALL_CONSTANT_CACHE=%s is not a "
                                 "size (bytes, or with K, M, G or T: 256M)",
                                 self->constants_env_bad);
    //  Keys from the environment when none were set, as the Python
    //  package and the squall command do: a program then needs no change
    //  to join a cluster with keys.
    const char *secret = getenv ("SQUALL_SECRET_KEY"), *broker = getenv ("SQUALL_BROKER_KEY");
    if (!self->has_keys && secret && *secret && broker && *broker) {
        int rc = sq_client_set_keys (self, secret, broker);
        if (rc)
            return rc;
    }
    const char *local = getenv ("SQUALL_LOCAL_DIR");
    if (self->local_dirfd < 0 && local && *local)
        sq_client_set_local_dir (self, local);  //  else by PUT, as elsewhere
    else
    if (self->local_dirfd < 0 && getenv ("SLURM_JOB_ID"))
        s_slurm_local_dir (self);
    s_disconnect (self);
    self->cluster [0] = 0;
    self->endpoint = strdup (endpoint);
    if (!self->endpoint)
        return sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "out of memory");
    int rc = s_open (self, timeout_ms);
    if (rc) {
        s_disconnect (self);
        return rc;
    }
    return 0;
}

//  --------------------------------------------------------------------------
//  Resuming: the broker was lost (a broken link, a restart on its journal).
//  A new connection says HELLO, checks it is the same cluster, and takes
//  each session back with its token (RESUME). Sessions the broker no longer
//  knows are marked lost and fail with a message naming them.

static int
s_resume_sessions (sq_client_t *self)
{
    for (size_t i = 0; i < self->n_sessions; i++) {
        sq_session_t *session = self->sessions [i];
        const uint8_t *token;
        uint32_t id = sq_session_resume_info (session, &token);
        if (!id)
            continue;           //  already lost
        if (self->cluster_changed) {
            sq_session_resumed (session, SQ_E_SESSION, 0);
            continue;
        }
        uint32_t req = sq_client_next_req (self);
        sq_request_t request = {
            .type = SQ_MSG_RESUME, .req = req, .session = id,
            .token = { (const char *) token, SQ_TOKEN_LEN }
        };
        sq_wbuf_reset (&self->w);
        sq_request_encode (&self->w, &request);
        if (sq_send (self->dealer, NULL, 0, &self->w, NULL, 0, ZMQ_DONTWAIT))
            return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "cannot send to %s",
                                     self->endpoint);
        char peer [SQ_MAX_NAME + 16];
        snprintf (peer, sizeof peer, "broker %s", self->endpoint);
        sq_reply_t reply;
        int rc = s_await (self, self->dealer, self->monitor, req, SQ_CLIENT_CALL_TIMEOUT, peer,
                          &reply);
        if (rc)
            return rc;
        sq_resumed_t resumed = { 0 };
        if (reply.code == SQ_OK) {
            sq_errbuf_t err;
            if (sq_record_decode (SQ_REC_RESUMED, &resumed, reply.body, reply.body_size,
                                  "RESUME reply", &err))
                return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed %s", err.text);
        }
        else
            s_reply_error (self, &reply);
        sq_session_resumed (session, (int) reply.code, resumed.max_id);
    }
    return 0;
}

//  Reconnects within the resume window. 0 once resumed; else the error.
static int
s_resume (sq_client_t *self, int64_t deadline)
{
    int rc = SQ_E_CONNECTION;
    int backoff = 100;
    while (1) {
        int64_t left = deadline - s_now_ms ();
        if (left <= 0)
            break;
        if (self->dealer && self->monitor)
            zmq_socket_monitor (self->dealer, NULL, 0);
        s_close_socket (&self->monitor);
        s_close_socket (&self->dealer);
        self->connected = false;
        rc = s_open (self, left < 2000? (int) left: 2000);
        if (rc == 0 && (rc = s_resume_sessions (self)) == 0)
            return 0;
        if (rc == SQ_E_SESSION || rc == SQ_E_DENIED || rc == SQ_E_VERSION || rc == SQ_E_NOMEM)
            break;              //  nothing to wait for
        //  Not there yet (or gone again): try again, backing off a little.
        zmq_pollitem_t none = { NULL, -1, 0, 0 };
        zmq_poll (&none, 0, backoff < left? backoff: (long) left);
        backoff = backoff * 2 > 1000? 1000: backoff * 2;
    }
    self->connected = false;
    self->broken = true;
    if (rc == SQ_E_CONNECTION || rc == SQ_E_TIMEOUT)
        return sq_client_seterr (self, SQ_E_CONNECTION, 0, 0, "connection to broker %s lost "
                                 "and not resumed within %d ms", self->endpoint, self->resume_ms);
    return rc;
}

//  --------------------------------------------------------------------------

//  Sends a request that needs no session and waits for its OK reply.
static int
s_call (sq_client_t *self, sq_request_t *request, sq_reply_t *reply)
{
    request->req = sq_client_next_req (self);
    sq_wbuf_reset (&self->w);
    sq_request_encode (&self->w, request);
    return sq_client_call (self, request->req, NULL, 0, SQ_CLIENT_CALL_TIMEOUT, reply);
}

int
sq_client_info (sq_client_t *self, char **json)
{
    if (!self || !json)
        return self? sq_client_seterr (self, SQ_E_INVALID, 0, 0, "json is NULL"): SQ_E_INVALID;
    *json = NULL;
    sq_request_t request = { .type = SQ_MSG_INFO };
    sq_reply_t reply;
    int rc = s_call (self, &request, &reply);
    if (rc)
        return rc;
    sq_errbuf_t err;
    rc = sq_json_from_msgpack (reply.body, reply.body_size, true, json, &err);
    if (rc == -2)
        return sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "out of memory");
    if (rc)
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed INFO reply: %s", err.text);
    return 0;
}

//  A request whose reply body is nil.
static int
s_call_nil (sq_client_t *self, sq_request_t *request)
{
    sq_reply_t reply;
    int rc = s_call (self, request, &reply);
    return sq_client_nil_reply (self, rc, &reply);
}

int
sq_client_retire (sq_client_t *self, uint32_t governor)
{
    if (!self)
        return SQ_E_INVALID;
    sq_request_t request = { .type = SQ_MSG_RETIRE, .governor = governor };
    return s_call_nil (self, &request);
}

int
sq_client_restart (sq_client_t *self)
{
    return sq_client_restart_wait (self, SQ_RESTART_DEFAULT_MS);
}

//  A request the broker sends on to every governor and answers once each
//  one did (RESTART, RUN): the broker's timeout (timeout_ms) speaks first,
//  this call's own wait a call's timeout longer.
static int
s_call_governors (sq_client_t *self, sq_request_t *request, sq_reply_t *reply)
{
    request->req = sq_client_next_req (self);
    sq_wbuf_reset (&self->w);
    sq_request_encode (&self->w, request);
    int call_ms = request->timeout_ms > INT32_MAX - SQ_CLIENT_CALL_TIMEOUT? -1
                : (int) request->timeout_ms + SQ_CLIENT_CALL_TIMEOUT;
    return sq_client_call (self, request->req, NULL, 0, call_ms, reply);
}

int
sq_client_restart_wait (sq_client_t *self, int timeout_ms)
{
    if (!self)
        return SQ_E_INVALID;
    if (timeout_ms < 0)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "sq_client_restart_wait: a timeout "
                                 "of 0 ms or more");
    sq_request_t request = { .type = SQ_MSG_RESTART, .timeout_ms = timeout_ms };
    sq_reply_t reply;
    int rc = s_call_governors (self, &request, &reply);
    return sq_client_nil_reply (self, rc, &reply);
}

int
sq_client_close_session (sq_client_t *self, uint32_t session)
{
    if (!self)
        return SQ_E_INVALID;
    if (session == 0)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "session ids start at 1");
    sq_request_t request = { .type = SQ_MSG_SESSION_CLOSE, .session = session };
    return s_call_nil (self, &request);
}

void *
sq_client_governor_socket (sq_client_t *self, const sq_target_t *target)
{
    return s_governor_socket (self, target);
}

void
sq_client_governor_forget (sq_client_t *self, const char *endpoint)
{
    s_governor_forget (self, endpoint);
}

//  RUN: the answers, fetched from the governors that keep them and
//  flattened for callers without msgpack.
typedef struct {
    sq_client_t *client;
    uint32_t gov;               //  whose answers are being flattened
    char *data;
    size_t size, cap;
} s_flat_t;

static int
s_flat_item (void *arg, uint64_t pid, bool ok, mpr_str_t bytes)
{
    s_flat_t *f = (s_flat_t *) arg;
    size_t need = f->size + 17 + bytes.len;
    if (need > f->cap && sq_grow ((void **) &f->data, &f->cap, need, 1, 256, SIZE_MAX))
        return -1;
    uint8_t *p = (uint8_t *) f->data + f->size;
    for (int i = 0; i < 4; i++)
        *p++ = (uint8_t) (f->gov >> (8 * i));
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t) (pid >> (8 * i));
    *p++ = ok? 1: 0;
    for (int i = 0; i < 4; i++)
        *p++ = (uint8_t) (bytes.len >> (8 * i));
    memcpy (p, bytes.ptr, bytes.len);
    f->size = need;
    return 0;
}

//  The governors of RUN's reply with answers, their reads begun.
typedef struct {
    sq_client_t *client;
    uint32_t *govs;
    sq_client_ranread_t *reads;
    uint32_t n, cap;
} s_reads_t;

static int
s_read_begin (void *arg, uint64_t run, uint32_t gov, uint32_t answers, uint64_t size,
              const sq_where_t *where)
{
    s_reads_t *reads = (s_reads_t *) arg;
    if (answers == 0)
        return 0;
    //  Two arrays side by side: both grow from one capacity
    uint32_t cap_govs = reads->cap;
    if (reads->n == reads->cap
    &&  (sq_grow32 ((void **) &reads->govs, &cap_govs, (size_t) reads->n + 1, sizeof *reads->govs,
                    8, UINT32_MAX)
    ||   sq_grow32 ((void **) &reads->reads, &reads->cap, (size_t) reads->n + 1, sizeof *reads->reads,
                    8, UINT32_MAX)))
        return -1;
    reads->govs [reads->n] = gov;
    sq_client_ranread_begin (reads->client, &reads->reads [reads->n++], run, where, size);
    return 0;
}

//  One governor's answers, read and flattened. Ones that cannot be read
//  (the governor gone, its answers expired) become one answer of pid 0,
//  not ok, saying why: the others' still count.
static int
s_flat_governor (s_flat_t *f, sq_client_ranread_t *r)
{
    char *data;
    char why [600];
    sq_errbuf_t err;
    if (sq_client_ranread_end (f->client, r, &data)) {
        snprintf (why, sizeof why, "the answers of governor %u were lost: %s", f->gov,
                  sq_client_errmsg (f->client));
        return s_flat_item (f, 0, false, (mpr_str_t) { why, (uint32_t) strlen (why) });
    }
    int rc = 0;
    size_t at = f->size;
    if (sq_ran_results_each (data, (size_t) r->size, s_flat_item, f, &err)) {
        f->size = at;           //  none of a malformed lot
        snprintf (why, sizeof why, "governor %u sent malformed answers: %s", f->gov, err.text);
        rc = s_flat_item (f, 0, false, (mpr_str_t) { why, (uint32_t) strlen (why) });
    }
    free (data);
    return rc;
}

int
sq_client_run (sq_client_t *self, int timeout_ms, const void *fn, size_t size,
               char **out, size_t *out_size)
{
    if (!self)
        return SQ_E_INVALID;
    if (!out || !out_size || !fn || size == 0 || size > SQ_RUN_FN_MAX || timeout_ms < 0)
        return sq_client_seterr (self, SQ_E_INVALID, 0, 0, "sq_client_run: a function of 1 "
                                 "byte to 1 MiB, out and out_size, a timeout of 0 ms or more");
    *out = NULL;
    *out_size = 0;
    sq_request_t request = { .type = SQ_MSG_RUN, .timeout_ms = timeout_ms,
                             .fn = { (const char *) fn, (uint32_t) size } };
    sq_reply_t reply;
    int rc = s_call_governors (self, &request, &reply);
    if (rc)
        return rc;
    //  Every governor's first read goes out before any is waited for. The
    //  reply points into the client's receive buffer, which the reads do
    //  not touch (their own sockets and frames).
    s_reads_t reads = { self, NULL, NULL, 0, 0 };
    s_flat_t flat = { self, 0, NULL, 0, 0 };
    sq_errbuf_t err;
    uint64_t run;
    int bad = sq_ran_reply_each (reply.body, reply.body_size, &run, s_read_begin, &reads, &err);
    for (uint32_t i = 0; i < reads.n; i++) {
        flat.gov = reads.govs [i];
        if (bad) {
            char *data;
            sq_client_ranread_end (self, &reads.reads [i], &data);
            free (data);
        }
        else
        if (s_flat_governor (&flat, &reads.reads [i]))
            bad = -1, snprintf (err.text, sizeof err.text, "out of memory");
    }
    free (reads.govs);
    free (reads.reads);
    if (bad) {
        free (flat.data);
        return sq_client_seterr (self, SQ_E_PROTOCOL, 0, 0, "malformed %s", err.text);
    }
    *out = flat.data? flat.data: (char *) calloc (1, 1);
    *out_size = flat.size;
    return *out? 0: sq_client_seterr (self, SQ_E_NOMEM, 0, 0, "out of memory");
}
