/*  sq_client_private: what client.c and session.c share inside libsquall.
    Not installed; nothing here is part of the public API.

    A call is: take a request id (sq_client_next_req), encode the request into
    client->w with the proto.h encoders, then sq_client_call, which sends it
    and waits for the REPLY carrying that id. The decoded reply points into
    client->msg and stays valid until the next call on the client. */
#ifndef SQ_CLIENT_PRIVATE_H
#define SQ_CLIENT_PRIVATE_H

#include "squall.h"
#include "proto.h"
#include "wire.h"
#include "blob.h"

//  Governor serve sockets cached for direct fetches; the oldest goes when
//  the cache is full (a client rarely talks to more governors at once).
#define SQ_CLIENT_MAX_GOVERNORS 8
//  Our own receive timeout for requests the broker answers at once. Calls
//  that wait on the cluster (WAIT, FETCH) add a margin to the broker's
//  timeout instead, so that the broker's answer normally decides.
#define SQ_CLIENT_CALL_TIMEOUT 60000
#define SQ_CLIENT_WAIT_MARGIN 5000
//  Frames accepted in one reply: header plus at most one payload.
#define SQ_CLIENT_MAX_FRAMES 4

//  The cache of a client's large constants' memory files (client/constants.c;
//  its bounds in squall.h, sq_client_set_constant_cache). Ownership: the
//  client owns the cache, the cache one reference to each blob it holds.
#define SQ_CONSTANTS_DEFAULT ((uint64_t) 256 << 20)
#define SQ_CONSTANTS_ENTRIES 64
typedef struct _sq_constants_t sq_constants_t;
//  NULL only when out of memory.
sq_constants_t *sq_constants_new (uint64_t limit);
void sq_constants_destroy (sq_constants_t **self_p);
//  A new bound in bytes (0: nothing is cached); evicts down to it.
void sq_constants_set_limit (sq_constants_t *self, uint64_t limit);
//  The constant of the n parts (`size` bytes in all, > 0) as a sealed
//  memory file: a new reference to a cached one holding exactly these
//  bytes, else one written now (and cached if it fits the bound). NULL if
//  no file could be made (the caller copies into memory instead).
sq_blob_t *sq_constants_segment (sq_constants_t *self, const void *const *parts,
                                 const size_t *sizes, size_t n, size_t size);
void sq_constants_stats (const sq_constants_t *self, sq_constant_cache_stats_t *stats);
//  The sampled fingerprint that picks the candidates (tests: which bytes
//  it does not see).
uint64_t sq_constants_fingerprint (const void *const *parts, const size_t *sizes, size_t n,
                                   size_t size);

typedef struct {
    char *endpoint;
    void *socket;
    bool has_key;               //  a CURVE link to a governor with this key
    uint8_t key [32];
} sq_govlink_t;

//  A governor the broker named (FETCH's where, UPLOAD's reply), copied out
//  of the reply.
typedef struct {
    uint32_t governor;
    char endpoint [SQ_MAX_NAME + 1];
    bool has_key;
    uint8_t key [32];
    uint8_t capability [SQ_CAP_MAX];
    size_t capability_size;
} sq_target_t;

//  Copies a decoded where; -1 if it does not fit.
int sq_target_from (sq_target_t *target, const sq_where_t *where);

struct _sq_client_t {
    void *ctx;
    void *dealer;               //  to the broker
    void *monitor;              //  PAIR receiving the dealer's socket events
    char *endpoint;
    bool connected;             //  HELLO answered
    bool broken;                //  connection lost: the next call resumes, or fails
    bool handshaken;            //  the link's handshake succeeded (HELLO may be out)
    //  Keys (sq_client_set_keys): ours and the broker's public key.
    bool has_keys;
    uint8_t public_key [32];
    uint8_t secret_key [32];
    uint8_t broker_key [32];
    //  Who the broker is: the same cluster across its restarts.
    char cluster [SQ_CLUSTER_ID_LEN + 1];
    uint64_t epoch;
    int resume_ms;              //  how long a lost broker is waited for (sq_client_set_resume)
    int local_dirfd;            //  sq_client_set_local_dir (O_PATH), or -1
    sq_constants_t *constants;  //  large constants' memory files, reused
    //  $SQUALL_CONSTANT_CACHE when it is no size (truncated): connect fails
    char constants_env_bad [65];
    bool cluster_changed;       //  the last HELLO found another cluster: sessions are lost
    uint32_t next_req;
    uint32_t client_id;
    uint32_t inline_max;
    sq_wbuf_t w;                //  request being encoded
    sq_msg_t msg;               //  last reply received
    sq_govlink_t governors [SQ_CLIENT_MAX_GOVERNORS];
    size_t n_governors;
    sq_session_t **sessions;    //  open sessions, detached on destroy
    size_t n_sessions;
    size_t sessions_cap;
    int errcode;
    uint32_t errid;
    uint32_t errroot;
    char errmsg [SQ_MAX_MESSAGE + 256];
};

uint32_t sq_client_next_req (sq_client_t *self);
//  Records an error and returns its code.
int sq_client_seterr (sq_client_t *self, int code, uint32_t id, uint32_t root,
                      const char *format, ...) __attribute__ ((format (printf, 5, 6)));
//  Fails with SQ_E_CONNECTION when not connected or the connection was lost.
int sq_client_check (sq_client_t *self);
//  Sends client->w (plus payloads, which are moved) and waits up to
//  timeout_ms (< 0: for ever) for the REPLY to req. 0 with an OK reply in
//  *reply; else the error (the broker's, or the library's own) is recorded
//  and returned.
int sq_client_call (sq_client_t *self, uint32_t req, zmq_msg_t *payloads,
                    size_t n_payloads, int timeout_ms, sq_reply_t *reply);
//  rc, a call's outcome, or when it is 0 the check that the reply's body
//  is nil (a request that answers nothing more). 0, or the error recorded.
int sq_client_nil_reply (sq_client_t *self, int rc, const sq_reply_t *reply);
//  Requests in flight together (uploads' UPLOADs): sq_client_send_only
//  sends client->w to the broker, sq_client_await waits for the reply to
//  req as sq_client_call does (replies come in the order of the
//  requests); neither sends again after a resume: a caller falls back to
//  sq_client_call on any error. 0, or the error recorded.
int sq_client_send_only (sq_client_t *self);
int sq_client_await (sq_client_t *self, uint32_t req, int timeout_ms, sq_reply_t *reply);
//  The same for a request on `session` (NULL: none): if the connection is
//  lost and resumed before the reply came, it is sent again, unless the
//  session was lost meanwhile, or it is a SUBMIT (batch_max: its largest
//  id, else 0) the broker already has.
int sq_client_call_submit (sq_client_t *self, uint32_t req, zmq_msg_t *payloads,
                           size_t n_payloads, int timeout_ms, sq_reply_t *reply,
                           sq_session_t *session, uint32_t batch_max);
//  The cached DEALER to the governor serving at endpoint (opened if need
//  be), NULL on failure; and forgetting it (closed, reconnected next time).
void *sq_client_governor_socket (sq_client_t *self, const sq_target_t *target);
void sq_client_governor_forget (sq_client_t *self, const char *endpoint);
//  Direct fetch (client/fetch.c): reads object `key` of `size` bytes from
//  the governor at endpoint with a window of GREAD ranges. 0 with *data
//  (malloc'd); else the error is recorded and returned. timeout_ms bounds
//  the silence between two replies.
#define SQ_FETCH_CHUNK (4u << 20)
#define SQ_FETCH_WINDOW 8
//  A governor silent this long during a direct fetch is taken for gone: the
//  fetch asks the broker again (another copy, or one recomputed).
#define SQ_FETCH_SILENCE_MS 5000
#define SQ_FETCH_ATTEMPTS 10
int sq_client_gread (sq_client_t *self, const sq_target_t *target, uint64_t key,
                     uint64_t size, int timeout_ms, void **data);
//  A run's answers kept on the governor at where (RUN's reply): all `size`
//  bytes of them, by RUNREAD ranges. _begin sends the first (so that the
//  reads of several governors overlap), _end reads the rest into *data
//  (malloc'd). Each returns 0, or the error recorded and returned
//  (SQ_E_LOST: the broker named no endpoint, the governor having gone);
//  _end is called after every _begin, failed or not (it frees).
typedef struct {
    sq_target_t target;
    void *socket;
    uint64_t run, size, offset, length;
    uint32_t req;               //  the range asked for
    char *buffer;
    int rc;                     //  _begin's
} sq_client_ranread_t;
int sq_client_ranread_begin (sq_client_t *self, sq_client_ranread_t *r, uint64_t run,
                             const sq_where_t *where, uint64_t size);
int sq_client_ranread_end (sq_client_t *self, sq_client_ranread_t *r, char **data);
//  Buffers of fetched objects (client/buffers.c): one of at least
//  SQ_CLIENT_BUFFER_MIN bytes comes back through sq_free, which keeps it
//  for the next fetch (up to 2 buffers, 256 MiB, while a client exists).
#define SQ_CLIENT_BUFFER_MIN (1u << 20)
void *sq_client_buffer (size_t size);
//  True when ptr came from sq_client_buffer: it is kept or freed now.
bool sq_client_buffer_give (void *ptr);
//  Counts clients (new: true, destroy: false); the last one's destroy
//  frees the buffers kept.
void sq_client_buffers_hold (bool hold);
//  Bytes kept for reuse (tests).
size_t sq_client_buffers_kept (void);
//  Upload (client/fetch.c): constants of at least SQ_UPLOAD_MIN bytes go
//  to the governor the broker names (UPLOAD: the one with the least memory
//  in use, with the capability to write there) in PUT ranges, and SUBMIT
//  names it. Below that, a constant rides in the SUBMIT: one message
//  through the broker costs less than the extra round trips.
#define SQ_UPLOAD_MIN (64u << 10)
int sq_client_upload_target (sq_client_t *self, uint32_t session, uint32_t object,
                             uint64_t size, uint32_t governor, sq_target_t *target);
//  Uploads the blob as object `key`. 0, or the error recorded and returned.
//  The same on this host (PUTLOCAL): the bytes in a memory file handed to
//  the governor's socket in the local directory. 0; 1 when there is no
//  such path (no directory, no socket of that governor there: nothing was
//  sent); else an error recorded (the governor refused, or is silent):
//  the caller then PUTs.
int sq_client_put_local (sq_client_t *self, const sq_target_t *target, uint64_t key,
                         sq_blob_t *blob, const char *content_type, int timeout_ms);
//  Uploads of several constants to one governor (targets of one endpoint
//  and key), pipelined: a window of SQ_FETCH_WINDOW requests in flight
//  across them (PUT ranges; PUTLOCAL where `local` and a socket of that
//  governor is in the local directory), no round trip per constant. Each
//  item's rc says how it went (0, or an error code: then the caller sends
//  it some other way); a PUTLOCAL refused is done again by PUT.
typedef struct {
    const sq_target_t *target;
    uint64_t key;
    sq_blob_t *blob;
    const char *content_type;
    int rc;                     //  out
} sq_upload_t;
void sq_client_put_many (sq_client_t *self, sq_upload_t *items, size_t n, int timeout_ms);
int sq_client_put (sq_client_t *self, const sq_target_t *target, uint64_t key, sq_blob_t *blob,
                   const char *content_type, int timeout_ms);
int sq_client_attach (sq_client_t *self, sq_session_t *session);
void sq_client_detach (sq_client_t *self, sq_session_t *session);
//  Called by sq_client_destroy on every session still open.
void sq_session_orphan (sq_session_t *self);
//  Resuming after a lost connection (client.c): what RESUME needs of a
//  session, and what came of it (code 0 with the largest id the broker
//  knows in it, or the error that makes the session unusable).
uint32_t sq_session_resume_info (sq_session_t *self, const uint8_t **token);
void sq_session_resumed (sq_session_t *self, int code, uint32_t max_id);
uint32_t sq_session_known_max (sq_session_t *self);
//  Whether a resume lost it, and recording that error (naming it) on the
//  client; returns the error code.
bool sq_session_lost (sq_session_t *self);
int sq_session_lost_error (sq_session_t *self);

#endif
