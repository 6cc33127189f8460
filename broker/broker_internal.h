/*  broker_internal: the broker's state and what its files share, each
    function under the name of the file that defines it: broker.c (the
    reactor, dispatch, timers, start and stop), peers.c (connections,
    HELLO), requests.c (client requests), reports.c (what governors report,
    uploads), orders.c (graph hooks, assignment), streams.c (stream
    readers). One thread touches all of it. Not for use outside broker/. */
#ifndef SQ_BROKER_INTERNAL_H
#define SQ_BROKER_INTERNAL_H
#include "broker.h"
#include "graph.h"
#include "gov.h"
#include "scheduler.h"
#include "watch.h"
#include "eventlog.h"
#include "uploads.h"
#include "http.h"
#include "auth.h"
#include "tenancy.h"
#include "conns.h"
#include "persist.h"
#include "journal.h"
#include "reattach.h"
#include "capability.h"
#include "zap.h"
#include "wire.h"
#include "taskconf.h"
#include "log.h"
#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S_MAX_PER_TURN 2000     //  messages read before scheduling again
#define S_MAX_DECLARED 64       //  resource names remembered for refusals
#define S_REBALANCE_MS 100      //  work stealing looks at loads this often
#define S_SUSPECT_MS 5000       //  probing a peer whose connection may be gone
#define S_HANDSHAKE_MS 5000     //  a connection's ZMTP handshake, at most
#define S_FD_RESERVE 192        //  descriptors kept from connections (files, dashboard)
#define S_MAX_SESSIONS 4096     //  open sessions per client connection
#define S_MAX_RECOPIES 3        //  copies to one governor ordered again after LOST
#define S_GRACE_CHECK_MS 250    //  detached sessions are looked at this often
//  Tasks that may wait for a governor with the resources they need
//  (--resource-wait); past this many, such a task fails at once.
#define S_RESOURCE_WAITS_MAX 65536
//  Waiting tasks INFO lists (their number is in "tasks"/"ready").
#define S_INFO_WAITS 16

//  A ROUTER identity (at most 255 bytes) as hex text (bx_identity_key):
//  the key of `peers`.
#define BX_KEY_SIZE 520

typedef enum { PEER_CLIENT, PEER_GOVERNOR } peer_kind_t;

//  The reactor's periodic jobs, in the order they run (broker.c's table).
typedef enum {
    BX_TIMER_HEARTBEAT, BX_TIMER_REBALANCE, BX_TIMER_RELOAD, BX_TIMER_RECOVER,
    BX_TIMER_GRACE, BX_TIMER_JOURNAL, BX_TIMER_DRAIN, BX_TIMER_PLACE, BX_TIMER_CONNS,
    BX_TIMER_WATCHES, BX_TIMER_UPLOADS, BX_TIMER_JOBS, BX_TIMERS
} bx_timer_t;

typedef struct {
    peer_kind_t kind;
    uint32_t id;
    char *name;
    uint8_t identity [256];
    size_t identity_size;
    int fd;
    int64_t suspect_since;      //  ms; 0 unless its connection may be gone
    gov_t *gov;                 //  PEER_GOVERNOR
    uint32_t *sessions;         //  PEER_CLIENT: ids of its open sessions
    uint32_t n_sessions;
    uint32_t cap_sessions;
    uint32_t outstanding;       //  parked waits and fetches
    bool said_bye;              //  a client that said BYE: its sessions close at once
    //  With keys (auth.h): the key the transport vouches for (Z85, "" without
    //  keys), its role and tenant, and the keyring generation they were
    //  checked against.
    char key [SQ_Z85_LEN + 1];
    uint8_t key_bin [SQ_KEY_LEN];
    sq_role_t role;
    char *tenant;
    uint64_t auth_gen;
    //  Its key is a task's (auth.h, task keys): checked at every message,
    //  since it dies with the task's attempt.
    bool task_key;
} peer_t;

typedef struct {
    char *name;
    uint64_t amount;            //  the most any governor ever declared
} s_declared_t;

//  A FETCH of an uploaded constant its governor has not confirmed yet: the
//  client's FETCH may overtake the governor's UPLOADED (they travel
//  different connections), and must not be told the object is nowhere.
//  Handed to the watches once the upload is confirmed or has failed.
typedef struct _s_fetch_t s_fetch_t;
struct _s_fetch_t {
    s_fetch_t *next;
    uint64_t key;
    char peer [BX_KEY_SIZE];            //  identity key: the peer may go meanwhile
    uint32_t req;
    int64_t deadline;
};

struct _broker_t {
    broker_config_t config;
    char endpoint [256];
    void *ctx;
    void *router;
    void *monitor;
    graph_t *graph;
    scheduler_t *scheduler;
    watches_t *watches;
    zhashx_t *peers;            //  identity (hex) -> peer_t
    sq_idmap_t *by_fd;          //  connection fd -> peer_t
    conns_t *conns;             //  every connection, limits (conns.h)
    gov_t *govs [GOV_MAX];
    size_t n_govs;
    uint32_t next_peer_id;
    s_declared_t declared [S_MAX_DECLARED];
    size_t n_declared;
    sq_msg_t msg;
    sq_wbuf_t out;
    int64_t timer_due [BX_TIMERS];     //  the reactor's periodic jobs (broker.c)
    int64_t next_drain;         //  drain.c: -1 while no governor drains
    atomic_int stopping;
    uint64_t messages;
    eventlog_t *events;         //  event log, task stream, metrics counters
    uploads_t *uploads;         //  uploaded constants: claims and confirmations waiting
    s_fetch_t *fetches;         //  FETCHes waiting for an upload's confirmation
    struct _s_place_t *places;  //  PLACEs waiting for their copies (place.c)
    size_t n_places;
    int64_t next_place;         //  place.c: -1 while nothing is parked
    http_t *http;               //  dashboard, or NULL
    auth_t *auth;               //  keys and the ZAP handler, or NULL (no keys)
    tenancy_t *tenancy;         //  tenants' quotas and shares (after the graph goes)
    atomic_int reload;          //  SIGHUP: re-read the keys
    persist_t *persist;         //  journal records (persist.h)
    journal_t *journal;         //  or NULL
    char cluster [SQ_CLUSTER_ID_LEN + 1];
    uint64_t epoch;
    //  A restarted broker waits for its governors to reattach before it
    //  schedules (or until recover_deadline), so that nothing they hold is
    //  recomputed.
    bool recovering;
    int64_t recover_deadline;
    //  Streams being written (keys, streams.c), for INFO
    uint64_t open_streams [256];
    size_t n_open_streams;
    uint64_t streams_local;     //  went over the same-host path (INFO)
    uint64_t uploads_local;     //  constants handed over on their governor's host (INFO)
    uint64_t copies_local;      //  copies handed over between governors of one host (INFO)
    //  Stream consumers ready to be placed (streams.c), by key
    uint64_t *stream_ready;
    size_t n_stream_ready, cap_stream_ready;
    //  jobs.c: SESSION_WAITs parked until their session stops running
    struct _jobwait_t *jobwaits;
    size_t n_jobwaits, cap_jobwaits;
    bool jobs_dirty;            //  some array may have elements to make or has ended
    //  jobs.c: children's sessions by their task's key (-> session id), and
    //  the keys of such tasks that ended, for jobs_settle
    sq_idmap_t *nested;
    uint64_t *nested_ended;
    size_t n_nested_ended, cap_nested_ended;
    //  fanout.c: RESTARTs and RUNs waiting for their governors, bounded by
    //  each connection's outstanding requests
    struct _bx_fanout_t *fanouts;
    size_t n_fanouts, cap_fanouts;
    uint64_t last_run;
};

//  --------------------------------------------------------------------------
//  broker.c: the reactor, sending, the periodic jobs

int64_t bx_now (void);
//  The monotonic ms at which a client's timeout ends; -1 for none (< 0).
int64_t bx_deadline (int64_t timeout_ms);
//  The job runs at the reactor's next turn, whatever its deadline.
void bx_timer_soon (broker_t *self, bx_timer_t timer);
void bx_identity_key (const void *identity, size_t size, char *key);
bool bx_local_endpoint (const char *endpoint);
void bx_send_to (broker_t *self, const void *identity, size_t identity_size, sq_wbuf_t *header, zmq_msg_t *payload);
void bx_reply_error (broker_t *self, const void *identity, size_t identity_size, uint32_t req, int code, const char *message, uint32_t id);
void bx_reply_nil (broker_t *self, peer_t *peer, uint32_t req);

//  --------------------------------------------------------------------------
//  peers.c: connections, HELLO, a peer's end

void bx_hello (broker_t *self, sq_msg_t *msg, const char *key);
void bx_learn_fd (broker_t *self, peer_t *peer, int fd);
void bx_drain_monitor (broker_t *self);
void bx_check_suspects (broker_t *self, int64_t now);
void bx_peer_end (broker_t *self, peer_t *peer, const char *why);
void bx_peer_destroy (peer_t **peer_p);
bool bx_resource_ok (void *arg, mpr_str_t name, uint64_t amount);
void bx_send_keys (broker_t *self, gov_t *gov);
void bx_session_close (broker_t *self, session_t *session);
void bx_sessions_expire (broker_t *self, int64_t now);

//  --------------------------------------------------------------------------
//  requests.c: client requests, a client's sessions

void bx_client_message (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t type, uint32_t req);

//  --------------------------------------------------------------------------
//  fanout.c: RESTART and RUN, sent to every governor, answered once each did

typedef enum { BX_FANOUT_RESTART, BX_FANOUT_RUN } bx_fanout_kind_t;
//  One governor a fan-out waits for.
typedef struct {
    uint32_t gov;
    uint64_t seq;               //  RESTART: the REFRESH its REFRESHED must reach
    bool answered;
    uint32_t answers;           //  RUN: its RAN (the answers stay on the governor)
    uint64_t size;
} bx_fanout_gov_t;
typedef struct _bx_fanout_t {
    bx_fanout_kind_t kind;
    peer_t *peer;
    uint32_t req;
    int64_t deadline;
    uint64_t id;                //  RUN: GRUN's run
    uint32_t n;
    bx_fanout_gov_t *govs;      //  owned
} bx_fanout_t;
//  Sends the request's order (REFRESH, GRUN) to every governor and waits
//  (or answers an error at once: SQ_E_BUSY, SQ_E_NOMEM).
void bx_fanout_start (broker_t *self, peer_t *peer, const sq_request_t *q, bx_fanout_kind_t kind);
//  Those all of whose governors answered (those that left are left out)
//  are answered, those past their deadline answered SQ_E_TIMEOUT naming
//  the others.
void bx_fanouts_check (broker_t *self, int64_t now);
//  A governor's RAN for run `run`: how many answers it keeps, how large.
void bx_run_answered (broker_t *self, gov_t *gov, uint64_t run, uint32_t answers,
                      uint64_t size);
//  A client left: its fan-outs are forgotten.
void bx_fanouts_drop_client (broker_t *self, peer_t *peer);
void bx_fanouts_destroy (broker_t *self);

//  Whether the peer may see the session: always without keys, else one of
//  its tenant's (an admin sees all).
bool bx_same_tenant (const peer_t *peer, const session_t *session);
//  A client's list of the sessions it holds (at most S_MAX_SESSIONS).
bool bx_peer_add_session (peer_t *peer, uint32_t id);
void bx_peer_remove_session (peer_t *peer, uint32_t id);
//  RESUME, ATTACH: the session onto the peer's connection, off its old one
//  (`how` is for the log: "resumed"). 0, or -1 answered BUSY to req.
int bx_session_take (broker_t *self, peer_t *peer, session_t *session, uint32_t req,
                     const char *how);
//  Counts the session in its tenant's share (tenancy.h). 0, or -1 out of memory.
int bx_session_share (broker_t *self, session_t *session);

//  --------------------------------------------------------------------------
//  reports.c: what governors report, uploads

void bx_governor_message (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t type);
//  TASKKEY: the governor running the task (attempt checked) made a key
//  pair for its squall.get_client(); the public key becomes a client's of
//  the task's session's tenant while that attempt runs there (auth.h).
void bx_task_key (broker_t *self, gov_t *gov, task_t *task, const uint8_t *public_key);
void bx_upload_claimed (broker_t *self, object_t *object, gov_t *gov, uint64_t size, int64_t now);
int64_t bx_uploads_expire (broker_t *self, int64_t now);
bool bx_fetch_park (broker_t *self, peer_t *peer, uint64_t key, uint32_t req, int64_t deadline);
void bx_fetches_release (broker_t *self, uint64_t key);

//  --------------------------------------------------------------------------
//  orders.c: the graph's hooks, assignment, copies and drops

void bx_assign (void *arg, task_t *task, gov_t *gov);
gov_t *bx_gov_by_id (broker_t *self, uint32_t id);
void bx_hook_task_ready (void *arg, task_t *task);
void bx_hook_task_done (void *arg, task_t *task);
void bx_hook_task_stop (void *arg, task_t *task);
void bx_hook_object_copy (void *arg, object_t *object, gov_t *from, gov_t *to);
void bx_hook_object_drop (void *arg, object_t *object);
void bx_object_undeliverable (broker_t *self, object_t *object, gov_t *gov, bool all, const char *message);
bool bx_recopy (broker_t *self, object_t *object, gov_t *gov);
void bx_drop (gov_t *gov, uint64_t key);
void bx_watch_reply (void *arg, void *client, sq_wbuf_t *header, zmq_msg_t *payload);
void bx_watch_released (void *arg, void *client);

//  --------------------------------------------------------------------------
//  streams.c: stream readers placed, streams listed

int bx_stream_ready (broker_t *self, task_t *task);
size_t bx_streams_place (broker_t *self);
//  A task started: its streams are listed in INFO from now on.
void bx_streams_started (broker_t *self, task_t *producer);
void bx_hook_stream_unread (void *arg, object_t *stream, task_t *consumer);
void bx_stream_progress (broker_t *self, gov_t *gov, uint64_t key, uint64_t bytes);
//  The streams being written now (of the viewer's tenant unless `all`):
//  at most max, into out. Returns how many.
size_t bx_streams_info (broker_t *self, const peer_t *viewer, bool all, sq_info_stream_t *out,
                        size_t max);

#endif
