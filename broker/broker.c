/*  broker: the reactor and the dispatch of every message.

    One thread, one ROUTER socket. Each turn of the reactor (broker_run):
    take connection events, take a bounded batch of messages (governor
    updates and client requests, in arrival order), run the scheduler if it
    has something to decide, flush each governor's batched orders, and fire
    timers (heartbeats, dead governors, wait deadlines).

    Peers are known by their ROUTER identity. Disconnects are seen through a
    socket monitor: every peer's connection file descriptor is learnt from
    its messages (ZMQ_SRCFD), and a DISCONNECTED event on that descriptor
    makes the peer a suspect. Monitor events and messages travel different
    pipes, and descriptors are reused, so an event alone cannot say which
    connection it was about: the suspect is probed, by sending it an empty
    message with ZMQ_ROUTER_MANDATORY, until ZeroMQ says its identity is
    gone (EHOSTUNREACH: the peer ends) or it shows it is alive.
*/
#include "broker.h"
#include "graph.h"
#include "gov.h"
#include "scheduler.h"
#include "watch.h"
#include "eventlog.h"
#include "uploads.h"
#include "http.h"
#include "auth.h"
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
#define S_MAX_SESSIONS 4096     //  open sessions per client connection
#define S_MAX_RECOPIES 3        //  copies to one governor ordered again after LOST
#define S_GRACE_CHECK_MS 250    //  detached sessions are looked at this often

typedef enum { PEER_CLIENT, PEER_GOVERNOR } peer_kind_t;

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
    char peer [520];            //  identity key: the peer may go meanwhile
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
    gov_t *govs [4096];
    size_t n_govs;
    uint32_t next_peer_id;
    s_declared_t declared [S_MAX_DECLARED];
    size_t n_declared;
    sq_msg_t msg;
    sq_wbuf_t out;
    int64_t next_heartbeat;
    int64_t next_rebalance;
    atomic_int stopping;
    uint64_t messages;
    eventlog_t *events;         //  event log, task stream, metrics counters
    uploads_t *uploads;         //  uploaded constants: claims and confirmations waiting
    s_fetch_t *fetches;         //  FETCHes waiting for an upload's confirmation
    http_t *http;               //  dashboard, or NULL
    auth_t *auth;               //  keys and the ZAP handler, or NULL (no keys)
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
    int64_t next_grace_check;
};

static int64_t
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
broker_config_defaults (broker_config_t *config)
{
    config->listen = "tcp://*:7760";
    config->heartbeat_ms = 1000;
    config->liveness = 5;
    config->inline_max = SQ_DEFAULT_INLINE_MAX;
    config->max_message = SQ_DEFAULT_MAX_HEADER;
    config->prefetch = 1024;
    config->max_requests = 1024;
    config->http = NULL;
    config->event_log = NULL;
    config->allowed_failures = 3;
    config->upload_timeout_ms = 10000;
    config->http_token = NULL;
    config->secret_key = NULL;
    config->authorized_keys = NULL;
    config->insecure = false;
    config->capability_ttl_ms = 60000;
    config->journal = NULL;
    config->journal_sync_ms = 100;
    config->journal_compact = 64u << 20;
    config->session_grace_ms = 60000;
    config->reattach_wait_ms = 15000;
    config->resource_wait_ms = 60000;
}

//  Tasks that may wait for a governor with the resources they need
//  (--resource-wait); past this many, such a task fails at once.
#define S_RESOURCE_WAITS_MAX 65536
//  Waiting tasks INFO lists (their number is in "tasks"/"ready").
#define S_INFO_WAITS 16

//  --------------------------------------------------------------------------
//  Sending

static void
s_identity_key (const void *identity, size_t size, char *key)
{
    static const char hex [] = "0123456789abcdef";
    const uint8_t *bytes = (const uint8_t *) identity;
    for (size_t i = 0; i < size; i++) {
        key [2 * i] = hex [bytes [i] >> 4];
        key [2 * i + 1] = hex [bytes [i] & 15];
    }
    key [2 * size] = 0;
}

//  Replies never block the reactor: a client that does not read its
//  replies loses them (ZeroMQ's high-water mark), not the broker its turn.
static void
s_send_to (broker_t *self, const void *identity, size_t identity_size,
           sq_wbuf_t *header, zmq_msg_t *payload)
{
    //  What a peer is told has happened must be in the journal first, so a
    //  broker that dies a moment later still knows it (journal.h).
    if (self->journal && journal_pending (self->journal))
        journal_flush (self->journal);
    if (sq_send (self->router, identity, identity_size, header, payload,
                 payload? 1: 0, ZMQ_DONTWAIT))
        sq_debug ("reply not sent: %s", zmq_strerror (errno));
}

static void
s_reply_error (broker_t *self, const void *identity, size_t identity_size,
               uint32_t req, int code, const char *message, uint32_t id)
{
    sq_wbuf_reset (&self->out);
    sq_reply_encode_error (&self->out, req, code, message, id, 0);
    s_send_to (self, identity, identity_size, &self->out, NULL);
}

static void
s_reply_nil (broker_t *self, peer_t *peer, uint32_t req)
{
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    msgpack_pack_nil (&self->out.pk);
    s_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  --------------------------------------------------------------------------
//  Graph hooks: turn state changes into governor orders and client replies

static void
s_hook_task_ready (void *arg, task_t *task)
{
    broker_t *self = (broker_t *) arg;
    eventlog_task_ready (self->events, task);
    scheduler_task_ready (self->scheduler, task);
}

static void
s_hook_task_stop (void *arg, task_t *task)
{
    gov_t *gov = task->gov;
    (void) arg;
    if (!gov)
        return;
    sq_idmap_remove (gov->tasks, task->key);
    gov_order_stop (gov, task->key, task->attempt);
}

static void
s_hook_task_done (void *arg, task_t *task)
{
    broker_t *self = (broker_t *) arg;
    persist_task_done (self->persist, task);
    watches_task_done (self->watches, task);
}

static gov_t *
s_gov_by_id (broker_t *self, uint32_t id)
{
    for (size_t i = 0; i < self->n_govs; i++)
        if (self->govs [i]->id == id)
            return self->govs [i];
    return NULL;
}

static void
s_drop (gov_t *gov, uint64_t key)
{
    gov_order_drop (gov, key);
    sq_idmap_remove (gov->recopies, key);
}

static void
s_hook_object_drop (void *arg, object_t *object)
{
    (void) arg;
    for (uint32_t i = 0; i < object->n_locations; i++)
        s_drop (object_locations (object) [i].gov, object->key);
}

static void
s_hook_object_copy (void *arg, object_t *object, gov_t *from, gov_t *to)
{
    (void) arg;
    gov_order_send (from, object->key, object->version, to);
}

//  An object cannot be had on `gov` (NULL: a governor gone): the tasks
//  that need it fail with `message` (SQ_E_LOST), all of them, or only
//  those given to `gov`; its location there goes.
static void
s_object_undeliverable (broker_t *self, object_t *object, gov_t *gov, bool all,
                        const char *message)
{
    sq_warn ("%s", message);
    for (uint32_t c = 0; c < object->n_consumers; c++) {
        task_t *consumer = object_consumers (object) [c];
        if (all || (gov && consumer->gov == gov))
            graph_task_failed (self->graph, consumer, SQ_E_LOST, message);
    }
    if (gov)
        s_drop (gov, object->key);
    graph_object_lost (self->graph, object, gov);
}

//  Data plane: a copy ordered to `gov` did not arrive (it came short, corrupt
//  or from a sender that went silent): order it again, from a holder picked
//  at random so that a second try tends to use another one, at most
//  S_MAX_RECOPIES times per version (a governor that cannot take it would
//  be sent it for ever). False when the location was not a copy on its
//  way, no holder is left (then the object is lost there, and recomputed
//  if needed) or the tries are spent (then the tasks there that need it
//  fail, saying so).
static bool
s_recopy (broker_t *self, object_t *object, gov_t *gov)
{
    location_t *loc = graph_object_location (object, gov);
    if (!loc || loc->arrived || object->state != OBJ_FINISHED || object->released)
        return false;
    location_t *locations = object_locations (object);
    uint32_t n = 0;
    for (uint32_t i = 0; i < object->n_locations; i++)
        n += locations [i].arrived && locations [i].gov != gov;
    if (n == 0)
        return false;
    uint64_t tries = (uint64_t) (uintptr_t) sq_idmap_lookup (gov->recopies, object->key);
    if (tries >> 32 != object->version)
        tries = (uint64_t) object->version << 32;
    if ((uint32_t) tries >= S_MAX_RECOPIES) {
        char message [300];
        snprintf (message, sizeof message, "object %u could not be copied to governor %u (%s): "
                  "%u copies were lost on the way", sq_key_id (object->key), gov->id, gov->name,
                  S_MAX_RECOPIES + 1);
        sq_idmap_remove (gov->recopies, object->key);
        s_object_undeliverable (self, object, gov, false, message);
        return true;
    }
    sq_idmap_remove (gov->recopies, object->key);
    if (sq_idmap_insert (gov->recopies, object->key, (void *) (uintptr_t) (tries + 1)))
        return false;           //  out of memory: as if no holder were left
    uint32_t pick = (uint32_t) rand () % n;
    for (uint32_t i = 0; i < object->n_locations; i++)
        if (locations [i].arrived && locations [i].gov != gov && pick-- == 0) {
            s_hook_object_copy (self, object, locations [i].gov, gov);
            return true;
        }
    return false;
}

static void
s_watch_reply (void *arg, void *client, sq_wbuf_t *header, zmq_msg_t *payload)
{
    broker_t *self = (broker_t *) arg;
    peer_t *peer = (peer_t *) client;
    s_send_to (self, peer->identity, peer->identity_size, header, payload);
}

static void
s_watch_released (void *arg, void *client)
{
    (void) arg;
    peer_t *peer = (peer_t *) client;
    if (peer->outstanding)
        peer->outstanding--;
}

//  --------------------------------------------------------------------------
//  Peers

static void
s_peer_destroy (peer_t **peer_p)
{
    peer_t *peer = *peer_p;
    if (peer) {
        free (peer->name);
        free (peer->sessions);
        free (peer->tenant);
        free (peer);
        *peer_p = NULL;
    }
}

static void
s_governor_lost (broker_t *self, peer_t *peer, const char *why)
{
    gov_t *gov = peer->gov;
    sq_warn ("governor %u (%s) lost: %s", gov->id, gov->name, why);
    eventlog_governor (self->events, EV_GOV_LEFT, gov, why);
    scheduler_governor_remove (self->scheduler, gov);
    for (size_t i = 0; i < self->n_govs; i++)
        if (self->govs [i] == gov) {
            self->govs [i] = self->govs [--self->n_govs];
            break;
        }
    //  Its tasks go back to the scheduler with a new attempt; anything it
    //  still reports under the old attempt is then ignored. A task that was
    //  running through several governor deaths is suspected of causing
    //  them (Dask's allowed-failures) and fails instead.
    size_t cursor = 0;
    size_t n = sq_idmap_size (gov->tasks), k = 0;
    task_t **tasks = (task_t **) malloc ((n + 1) * sizeof (task_t *));
    task_t *task;
    while (tasks && (task = (task_t *) sq_idmap_next (gov->tasks, &cursor, NULL)))
        tasks [k++] = task;
    for (size_t i = 0; i < k; i++) {
        task = tasks [i];
        task_extra_t *extra = task->state == TASK_RUNNING? graph_task_extra (task): NULL;
        if (task->state == TASK_RUNNING
        &&  (!extra || ++extra->crashes >= self->config.allowed_failures)) {
            char message [200];
            snprintf (message, sizeof message,
                      "task was running on %u governors that died; suspected of killing them",
                      extra? extra->crashes: 1);
            sq_idmap_remove (gov->tasks, task->key);
            task->gov = NULL;   //  nothing to stop: its governor is gone
            graph_task_failed (self->graph, task, SQ_E_TASK_FAILED, message);
        }
        else {
            graph_task_requeue (self->graph, task);
            if (extra)
                persist_attempt (self->persist, task);
        }
    }
    free (tasks);
    persist_gone (self->persist, gov->id);
    graph_forget_governor (self->graph, gov);
    gov_destroy (&peer->gov);
}

static void
s_session_close (broker_t *self, session_t *session)
{
    persist_close (self->persist, session->id);
    watches_drop_session (self->watches, session);
    graph_session_close (self->graph, &session);
}

//  A client that said BYE closes its sessions; one whose connection just
//  went leaves them detached for --session-grace ms, in case it comes back
//  (a lost link, a broker restart) and RESUMEs them.
static void
s_client_gone (broker_t *self, peer_t *peer)
{
    watches_drop_client (self->watches, peer);
    bool close = peer->said_bye || self->config.session_grace_ms == 0;
    int64_t now = s_now ();
    for (uint32_t i = 0; i < peer->n_sessions; i++) {
        session_t *session = graph_session (self->graph, peer->sessions [i]);
        if (session && close)
            s_session_close (self, session);
        else
        if (session) {
            session->client = NULL;
            session->detached_at = now;
        }
    }
    sq_info ("client %u (%s) left; %u session(s) %s", peer->id, peer->name, peer->n_sessions,
             close? "closed": "kept for it to resume");
}

//  Detached sessions whose client did not come back in time are closed.
static void
s_sessions_expire (broker_t *self, int64_t now)
{
    size_t cursor = 0;
    session_t *session, *expired [64];
    size_t n = 0;
    while (n < 64 && (session = graph_session_next (self->graph, &cursor)))
        if (!session->client && session->detached_at
        &&  now - session->detached_at >= self->config.session_grace_ms)
            expired [n++] = session;
    for (size_t i = 0; i < n; i++) {
        sq_info ("session %u closed: its client did not come back within %d ms",
                 expired [i]->id, self->config.session_grace_ms);
        s_session_close (self, expired [i]);
    }
}

//  Ends a peer: its sessions close or its tasks go elsewhere.
static void
s_peer_end (broker_t *self, peer_t *peer, const char *why)
{
    char key [520];
    s_identity_key (peer->identity, peer->identity_size, key);
    if (peer->fd >= 0 && sq_idmap_lookup (self->by_fd, (uint64_t) peer->fd) == peer)
        sq_idmap_remove (self->by_fd, (uint64_t) peer->fd);
    if (peer->kind == PEER_GOVERNOR)
        s_governor_lost (self, peer, why);
    else
        s_client_gone (self, peer);
    zhashx_delete (self->peers, key);     //  destructor frees the peer
}

static void
s_drain_monitor (broker_t *self)
{
    sq_msg_t event;
    sq_msg_init (&event);
    while (sq_msg_recv (&event, self->monitor, ZMQ_DONTWAIT, 4) == 0) {
        if (event.n < 1 || sq_msg_size (&event, 0) < 6)
            continue;
        uint16_t type;
        uint32_t value;
        memcpy (&type, sq_msg_data (&event, 0), 2);
        memcpy (&value, (uint8_t *) sq_msg_data (&event, 0) + 2, 4);
        if (type != ZMQ_EVENT_DISCONNECTED)
            continue;
        peer_t *peer = (peer_t *) sq_idmap_remove (self->by_fd, value);
        if (peer && !peer->suspect_since)
            peer->suspect_since = s_now ();
    }
    sq_msg_release (&event);
}

//  Whether the ROUTER still has a connection for this identity. An empty
//  message is what the peer receives if so (clients and governors ignore
//  it, docs/protocol.md).
static bool
s_probe (broker_t *self, peer_t *peer)
{
    if (zmq_send (self->router, peer->identity, peer->identity_size,
                  ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return errno != EHOSTUNREACH;
    zmq_send (self->router, "", 0, ZMQ_DONTWAIT);
    return true;
}

//  Probes suspects; ends those ZeroMQ no longer knows, clears those that
//  outlived the doubt.
static void
s_check_suspects (broker_t *self, int64_t now)
{
    peer_t *peer = (peer_t *) zhashx_first (self->peers);
    while (peer) {
        peer_t *next = (peer_t *) zhashx_next (self->peers);
        if (peer->suspect_since) {
            if (!s_probe (self, peer)) {
                //  zhashx_delete inside s_peer_end invalidates the cursor.
                s_peer_end (self, peer, "connection closed");
                peer = (peer_t *) zhashx_first (self->peers);
                continue;
            }
            if (now - peer->suspect_since > S_SUSPECT_MS)
                peer->suspect_since = 0;
        }
        peer = next;
    }
}

//  --------------------------------------------------------------------------
//  HELLO

//  Records the descriptor a peer's messages come on. Another peer mapped to
//  it had its connection closed (the descriptor was reused): it becomes a
//  suspect.
static void
s_learn_fd (broker_t *self, peer_t *peer, int fd)
{
    if (fd < 0)
        return;
    peer_t *old = (peer_t *) sq_idmap_lookup (self->by_fd, (uint64_t) fd);
    if (old == peer)
        return;
    if (old) {
        sq_idmap_remove (self->by_fd, (uint64_t) fd);
        if (!old->suspect_since)
            old->suspect_since = s_now ();
    }
    if (peer->fd >= 0 && sq_idmap_lookup (self->by_fd, (uint64_t) peer->fd) == peer)
        sq_idmap_remove (self->by_fd, (uint64_t) peer->fd);
    peer->fd = fd;
    sq_idmap_insert (self->by_fd, (uint64_t) fd, peer);
}

static bool
s_resource_ok (void *arg, mpr_str_t name, uint64_t amount)
{
    broker_t *self = (broker_t *) arg;
    if (self->n_declared == 0)
        return true;            //  no governor yet: nothing to judge by
    for (size_t i = 0; i < self->n_declared; i++)
        if (mpr_str_eq (name, self->declared [i].name))
            return amount <= self->declared [i].amount;
    return amount == 0;
}

static void
s_declare (broker_t *self, const char *name, uint64_t amount)
{
    for (size_t i = 0; i < self->n_declared; i++)
        if (strcmp (self->declared [i].name, name) == 0) {
            if (amount > self->declared [i].amount)
                self->declared [i].amount = amount;
            return;
        }
    if (self->n_declared < S_MAX_DECLARED) {
        self->declared [self->n_declared].name = strdup (name);
        self->declared [self->n_declared].amount = amount;
        if (self->declared [self->n_declared].name)
            self->n_declared++;
    }
}

//  The keys a governor must accept on its data and serve sockets (KEYS).
static void
s_send_keys (broker_t *self, gov_t *gov)
{
    const uint8_t *const *governors, *const *clients;
    uint32_t n_governors, n_clients;
    auth_keysets (self->auth, &governors, &n_governors, &clients, &n_clients);
    sq_wbuf_reset (&self->out);
    sq_keyset_encode (&self->out, governors, n_governors, clients, n_clients);
    s_send_to (self, gov->identity, gov->identity_size, &self->out, NULL);
}

static void s_peer_end (broker_t *self, peer_t *peer, const char *why);
static void s_governor_lost (broker_t *self, peer_t *peer, const char *why);

//  Whether a governor's HELLO may reattach: it names this cluster and an
//  id this broker remembers, with the same incarnation and key. A
//  connection of it the broker still holds is stale (the governor lost
//  the broker first): it is let go, what it held to be reported again.
static bool
s_may_reattach (broker_t *self, const sq_hello_t *hello, const char *key)
{
    if (!hello->previous_cluster.len)
        return false;
    const char *why = NULL;
    persist_gov_t *known = persist_known (self->persist, hello->previous_id);
    if (!self->journal)
        why = "this broker keeps no journal";
    else
    if (!mpr_str_eq (hello->previous_cluster, self->cluster))
        why = "another cluster";
    else
    if (!known || known->incarnation != hello->incarnation)
        why = "not a governor this broker knows";
    else
    if (self->auth && (!known->key || strcmp (known->key, key)))
        why = "another key";
    if (why) {
        sq_info ("governor %.*s asks to reattach as governor %u: %s; it starts afresh",
                 (int) hello->name.len, hello->name.ptr, hello->previous_id, why);
        return false;
    }
    gov_t *stale = s_gov_by_id (self, hello->previous_id);
    if (stale) {
        char hex [520];
        s_identity_key (stale->identity, stale->identity_size, hex);
        peer_t *old = (peer_t *) zhashx_lookup (self->peers, hex);
        if (old) {
            //  Not forgotten: the inventory takes back what it still holds.
            if (old->fd >= 0 && sq_idmap_lookup (self->by_fd, (uint64_t) old->fd) == old)
                sq_idmap_remove (self->by_fd, (uint64_t) old->fd);
            s_governor_lost (self, old, "reattached on a new connection");
            zhashx_delete (self->peers, hex);
        }
    }
    return true;
}

static void
s_hello (broker_t *self, sq_msg_t *msg, const char *key)
{
    const void *identity = sq_msg_data (msg, 0);
    size_t identity_size = sq_msg_size (msg, 0);
    uint32_t type = 0, req = 0;
    sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req);
    if (type != SQ_MSG_HELLO) {
        s_reply_error (self, identity, identity_size, req, SQ_E_HELLO,
                       "say HELLO first (this connection is unknown to the broker)", 0);
        return;
    }
    sq_hello_t hello;
    sq_errbuf_t err;
    int code;
    if (sq_hello_decode (&hello, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &code, &err)) {
        sq_info ("HELLO refused: %s", err.text);
        s_reply_error (self, identity, identity_size, req, code, err.text, 0);
        return;
    }
    //  Who it is comes from the transport (its CURVE key), and what it may
    //  be from the keyring: never from anything it wrote.
    const sq_keyentry_t *entry = NULL;
    if (self->auth) {
        const char *user = sq_msg_user (&msg->frames [1]);
        entry = user? auth_find (self->auth, user, strlen (user)): NULL;
        const char *why = !entry? "this key is not authorized (any more)"
            : hello.governor && entry->role != SQ_ROLE_GOVERNOR? "this key is not a governor's"
            : !hello.governor && entry->role == SQ_ROLE_GOVERNOR? "a governor's key cannot be a client"
            : NULL;
        if (why) {
            sq_info ("HELLO refused: %s", why);
            s_reply_error (self, identity, identity_size, req, SQ_E_DENIED, why, 0);
            return;
        }
    }
    bool reattach = hello.governor && s_may_reattach (self, &hello, entry? entry->z85: "");
    peer_t *peer = (peer_t *) calloc (1, sizeof *peer);
    if (!peer) {
        s_reply_error (self, identity, identity_size, req, SQ_E_NOMEM, "out of memory", 0);
        return;
    }
    peer->id = reattach? hello.previous_id: self->next_peer_id++;
    peer->kind = hello.governor? PEER_GOVERNOR: PEER_CLIENT;
    peer->name = mpr_strdup (hello.name);
    memcpy (peer->identity, identity, identity_size);
    peer->identity_size = identity_size;
    peer->fd = msg->srcfd;
    if (entry) {
        memcpy (peer->key, entry->z85, sizeof peer->key);
        memcpy (peer->key_bin, entry->key, SQ_KEY_LEN);
        peer->role = entry->role;
        peer->tenant = entry->tenant [0]? strdup (entry->tenant): NULL;
        peer->auth_gen = auth_generation (self->auth);
    }
    if (hello.governor) {
        if (self->n_govs == sizeof self->govs / sizeof self->govs [0]) {
            s_peer_destroy (&peer);
            s_reply_error (self, identity, identity_size, req, SQ_E_BUSY, "too many governors", 0);
            return;
        }
        peer->gov = gov_new (peer->id, &hello, identity, identity_size, self->config.prefetch);
        if (!peer->gov || (reattach && reattach_begin (peer->gov))) {
            gov_destroy (&peer->gov);
            s_peer_destroy (&peer);
            s_reply_error (self, identity, identity_size, req, SQ_E_NOMEM, "out of memory", 0);
            return;
        }
        gov_t *gov = peer->gov;
        if (entry) {
            gov->has_key = true;
            memcpy (gov->key, entry->key, SQ_KEY_LEN);
            memcpy (gov->key_z85, entry->z85, sizeof gov->key_z85);
            sq_random (gov->secret, sizeof gov->secret);
        }
        gov->fd = msg->srcfd;
        gov->last_recv = gov->last_send = s_now ();
        gov->joined = (int64_t) time (NULL);
        self->govs [self->n_govs++] = gov;
        s_declare (self, SQ_RES_CPUS, gov->cpus);
        for (uint32_t i = 0; i < gov->n_resources; i++)
            s_declare (self, gov->resources [i].name.ptr, gov->resources [i].amount);
        //  A reattaching governor is placed on once its inventory is in
        //  (and a restarted broker waits for it until then).
        if (!reattach)
            scheduler_governor_add (self->scheduler, gov);
        persist_governor (self->persist, gov->id, gov->incarnation, gov->name,
                          entry? entry->z85: NULL);
        eventlog_governor (self->events, EV_GOV_JOINED, gov, NULL);
        sq_info ("governor %u (%s) %s: %u cpus, data %s", peer->id, gov->name,
                 reattach? "reattached": "joined", gov->cpus, gov->data_endpoint);
    }
    else
        sq_info ("client %u (%s) connected%s%s", peer->id, peer->name ? peer->name: "?",
                 peer->tenant? ", tenant ": "", peer->tenant? peer->tenant: "");
    zhashx_insert (self->peers, key, peer);
    s_learn_fd (self, peer, msg->srcfd);
    sq_wbuf_reset (&self->out);
    if (hello.governor)
        sq_welcome_encode_governor (&self->out, req, peer->id, (uint32_t) self->config.heartbeat_ms,
                                    self->config.inline_max, self->cluster, self->epoch, reattach,
                                    self->auth? peer->gov->secret: NULL, sq_wall_ms ());
    else
        sq_welcome_encode_client (&self->out, req, peer->id, self->config.inline_max,
                                  self->cluster, self->epoch, peer->tenant);
    s_send_to (self, identity, identity_size, &self->out, NULL);
    if (hello.governor && self->auth)
        s_send_keys (self, peer->gov);
}

//  --------------------------------------------------------------------------
//  Assignment (the scheduler's decisions)

static void
s_assign (void *arg, task_t *task, gov_t *gov)
{
    broker_t *self = (broker_t *) arg;
    sq_input_ref_t inputs_small [16];
    sq_out_decl_t outputs_small [16];
    sq_input_ref_t *inputs = task->n_inputs <= 16? inputs_small
                           : (sq_input_ref_t *) malloc (task->n_inputs * sizeof *inputs);
    sq_out_decl_t *outputs = task->n_outputs <= 16? outputs_small
                           : (sq_out_decl_t *) malloc (task->n_outputs * sizeof *outputs);
    if (!inputs || !outputs) {
        graph_task_failed (self->graph, task, SQ_E_NOMEM, "broker out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        object_t *input = task->io [i];
        sq_input_ref_t *ref = &inputs [i];
        ref->key = input->key;
        ref->size = input->size;
        ref->frame = -1;
        ref->content_type.ptr = input->content_type? input->content_type: "";
        ref->content_type.len = (uint32_t) strlen (ref->content_type.ptr);
        if (graph_object_location (input, gov))
            continue;           //  there, or on its way
        if (input->state == OBJ_UNFINISHED)
            continue;           //  overbooked: its producer runs on this governor
        if (input->data) {
            ref->frame = gov_attach (gov, input->data);
            if (ref->frame < 0) {
                graph_task_failed (self->graph, task, SQ_E_NOMEM, "broker out of memory");
                goto done;
            }
            graph_object_add_location (self->graph, input, gov, true);
            continue;
        }
        //  Copy it from a governor that has it, straight to this one; an
        //  upload not confirmed yet is sent once its governor has it.
        gov_t *source = NULL;
        for (uint32_t l = 0; l < input->n_locations && !source; l++)
            if (object_locations (input) [l].arrived)
                source = object_locations (input) [l].gov;
        if (!source) {
            uint32_t uploaded = uploads_awaited (self->uploads, input->key);
            source = uploaded? s_gov_by_id (self, uploaded): NULL;
            if (source && !graph_object_location (input, source))
                source = NULL;
        }
        if (!source) {
            graph_task_failed (self->graph, task, SQ_E_LOST, "an input has no copy left");
            goto done;
        }
        gov_order_send (source, input->key, input->version, gov);
        graph_object_add_location (self->graph, input, gov, false);
        eventlog_object (self->events, EV_OBJECT_COPY, input, gov, source);
    }
    for (uint32_t i = 0; i < task->n_outputs; i++) {
        object_t *output = task->io [task->n_inputs + i];
        outputs [i].key = output->key;
        outputs [i].content_type.ptr = output->content_type? output->content_type: "";
        outputs [i].content_type.len = (uint32_t) strlen (outputs [i].content_type.ptr);
    }
    const char *kind = sq_kind_name ((sq_kind_t) task->kind);
    const task_extra_t *extra = task_extra (task);
    sq_assign_t a = {
        .key = task->key, .attempt = task->attempt,
        .kind = { kind, (uint32_t) strlen (kind) },
        .config = task_config (task), .config_size = task->config_size,
        .n_inputs = task->n_inputs, .inputs = inputs,
        .n_outputs = task->n_outputs, .outputs = outputs,
        .cpus = extra->cpus, .timeout_ms = extra->timeout_ms,
        .name = { extra->name? extra->name: "", extra->name? (uint32_t) strlen (extra->name): 0 }
    };
    for (uint32_t r = 0; r < extra->n_resources && r < SQ_MAX_RESOURCES; r++)
        a.resources [a.n_resources++] = extra->resources [r];
    sq_pack_assign (&gov->assign.elements.pk, &a);
    gov->assign.count++;
    eventlog_task (self->events, EV_TASK_ASSIGNED, task, gov, NULL, 0);
    graph_task_assigned (self->graph, task, gov);
    sq_idmap_insert (gov->tasks, task->key, task);
done:
    if (inputs != inputs_small)
        free (inputs);
    if (outputs != outputs_small)
        free (outputs);
}

//  --------------------------------------------------------------------------
//  Uploaded constants (uploads.h): counted as copies once the SUBMIT that
//  claims one and the governor's UPLOADED agree.

//  FETCHes parked on key go to the watches now (the upload is a copy, or
//  has failed).
static void
s_fetches_release (broker_t *self, uint64_t key)
{
    s_fetch_t **link = &self->fetches;
    while (*link) {
        s_fetch_t *fetch = *link;
        if (fetch->key != key) {
            link = &fetch->next;
            continue;
        }
        *link = fetch->next;
        peer_t *peer = (peer_t *) zhashx_lookup (self->peers, fetch->peer);
        session_t *session = graph_session (self->graph, sq_key_session (key));
        if (peer && session && session->client == peer)
            watches_fetch (self->watches, peer, fetch->req, session, sq_key_id (key),
                           fetch->deadline);
        else
        if (peer) {
            peer->outstanding--;
            s_reply_error (self, peer->identity, peer->identity_size, fetch->req, SQ_E_SESSION,
                           "the session was closed", 0);
        }
        free (fetch);
    }
}

//  Parks a FETCH of an upload not confirmed yet. False when it is not one.
//  An object finished in an earlier life of the broker that no governor
//  has said it holds yet: while governors reattach, a FETCH of it waits.
static bool
s_unlocated (object_t *object)
{
    if (object->state != OBJ_FINISHED || object->data)
        return false;
    for (uint32_t i = 0; i < object->n_locations; i++)
        if (object_locations (object) [i].arrived)
            return false;
    return true;
}

static bool
s_fetch_park (broker_t *self, peer_t *peer, uint64_t key, uint32_t req, int64_t deadline)
{
    object_t *object = graph_object (self->graph, key);
    if (!object || !object->keep
    ||  !(uploads_awaited (self->uploads, key) || (self->recovering && s_unlocated (object))))
        return false;
    s_fetch_t *fetch = (s_fetch_t *) calloc (1, sizeof *fetch);
    if (!fetch)
        return false;
    fetch->key = key;
    s_identity_key (peer->identity, peer->identity_size, fetch->peer);
    fetch->req = req;
    fetch->deadline = deadline;
    fetch->next = self->fetches;
    self->fetches = fetch;
    return true;
}

//  An upload that will not be had: what needs it fails, saying why.
static void
s_upload_failed (broker_t *self, object_t *object, gov_t *gov, const char *why)
{
    char message [400];
    snprintf (message, sizeof message, "constant object %u, uploaded to governor %u, %s; "
              "submit it again", sq_key_id (object->key), gov? gov->id: 0, why);
    s_object_undeliverable (self, object, gov, true, message);
    s_fetches_release (self, object->key);
}

static void
s_upload_mismatch (broker_t *self, object_t *object, gov_t *gov, uint64_t has, uint64_t said)
{
    char why [120];
    snprintf (why, sizeof why, "has %llu bytes there, not the %llu its SUBMIT said",
              (unsigned long long) has, (unsigned long long) said);
    s_upload_failed (self, object, gov, why);
}

//  What the SUBMIT of an object with frame [governor, size] does, once
//  the whole SUBMIT is accepted.
static void
s_upload_claimed (broker_t *self, object_t *object, gov_t *gov, uint64_t size, int64_t now)
{
    uint32_t drop_gov;
    uint64_t other;
    uploads_result_t rc = uploads_claim (self->uploads, object->key, gov->id, size, now,
                                         &drop_gov, &other);
    gov_t *orphan = drop_gov? s_gov_by_id (self, drop_gov): NULL;
    if (orphan)
        s_drop (orphan, object->key);
    //  Until confirmed it is a copy on its way: tasks there wait for it,
    //  copies elsewhere are ordered from there (s_assign).
    graph_object_add_location (self->graph, object, gov, rc == UPLOADS_MATCHED);
    if (rc == UPLOADS_MISMATCH)
        s_upload_mismatch (self, object, gov, other, size);
    else
    if (rc == UPLOADS_FULL)
        s_upload_failed (self, object, gov, "cannot be tracked (too many uploads waiting)");
}

//  A governor's UPLOADED event.
static void
s_upload_confirmed (broker_t *self, gov_t *gov, uint64_t key, uint64_t size)
{
    object_t *object = graph_object (self->graph, key);
    uint32_t drop_gov;
    uint64_t claimed;
    uploads_result_t rc = uploads_confirm (self->uploads, key, gov->id, size, object != NULL,
                                           s_now (), &drop_gov, &claimed);
    gov_t *orphan = drop_gov? s_gov_by_id (self, drop_gov): NULL;
    if (orphan)
        s_drop (orphan, key);
    if (!object && rc != UPLOADS_WAITING) {
        s_drop (gov, key);      //  claimed by a session closed since
        s_fetches_release (self, key);
        return;
    }
    if (rc == UPLOADS_MATCHED && object->state == OBJ_FINISHED && !object->released) {
        eventlog_object (self->events, EV_OBJECT_LOCATED, object, gov, NULL);
        graph_object_add_location (self->graph, object, gov, true);
        s_fetches_release (self, key);
    }
    else
    if (rc == UPLOADS_MISMATCH)
        s_upload_mismatch (self, object, gov, size, claimed);
    else
    if (rc != UPLOADS_WAITING) {
        //  Nobody will claim it, it came too late, or for an object gone.
        location_t *loc = graph_object_location (object, gov);
        if (!loc || !loc->arrived)
            s_drop (gov, key);
    }
}

//  Claims never confirmed fail what needs them; uploads never claimed are
//  dropped. Returns the next deadline, -1 if none.
static int64_t
s_uploads_expire (broker_t *self, int64_t now)
{
    uint64_t key;
    uint32_t id;
    bool claim;
    while (uploads_expired (self->uploads, now, &key, &id, &claim)) {
        gov_t *gov = s_gov_by_id (self, id);
        object_t *object = claim? graph_object (self->graph, key): NULL;
        location_t *loc = object && gov? graph_object_location (object, gov): NULL;
        if (object && !(loc && loc->arrived)) {
            char why [120];
            snprintf (why, sizeof why, "was not confirmed by that governor within %d ms "
                      "(the upload did not complete there, or the governor restarted)",
                      self->config.upload_timeout_ms);
            s_upload_failed (self, object, loc? gov: NULL, why);
        }
        else
        if (!claim && gov) {
            sq_info ("upload of object %u/%u to governor %u never claimed by a SUBMIT: dropped",
                     sq_key_session (key), sq_key_id (key), id);
            s_drop (gov, key);
        }
        if (claim)
            s_fetches_release (self, key);
    }
    return uploads_next_deadline (self->uploads);
}

//  --------------------------------------------------------------------------
//  Governor messages

//  The inventory of a reattaching governor (reattach.h). Events of it
//  from a governor that is not reattaching are ignored.
static void
s_governor_inventory (broker_t *self, gov_t *gov, const sq_event_t *ev)
{
    if (!gov->inventory) {
        sq_warn ("governor %u: inventory event %u outside a reattach; ignored", gov->id, ev->type);
        return;
    }
    if (ev->type == SQ_EV_HELD && !graph_object (self->graph, ev->key)
    &&  graph_session (self->graph, sq_key_session (ev->key)))
        //  Not in the graph, in a session that is: an upload whose SUBMIT
        //  has not come (again) yet. It waits for it like any upload, and
        //  is dropped if none comes (uploads.h).
        s_upload_confirmed (self, gov, ev->key, ev->size);
    else
    if (ev->type == SQ_EV_HELD)
        reattach_held (self->graph, gov, ev->key, ev->attempt, ev->size);
    else
    if (ev->type == SQ_EV_RUNNING)
        reattach_running (gov, ev->key, ev->attempt);
    else {
        reattach_stats_t stats;
        reattach_end (self->graph, gov, &stats);
        scheduler_governor_add (self->scheduler, gov);
        persist_reattached (self->persist, gov->id);
        sq_info ("governor %u (%s) reattached: %zu objects held again, %zu tasks found "
                 "finished there, %zu running tasks kept; %zu objects dropped, %zu tasks "
                 "stopped", gov->id, gov->name, stats.located, stats.finished, stats.adopted,
                 stats.dropped, stats.stopped);
    }
}

static void
s_governor_update (broker_t *self, peer_t *peer, sq_msg_t *msg)
{
    gov_t *gov = peer->gov;
    sq_iter_t it;
    sq_errbuf_t err;
    sq_event_t ev;
    int rc;
    zmq_msg_t *payloads = msg->frames + 2;
    size_t n_payloads = msg->n - 2;
    //  A malformed UPDATE changes nothing: it is read through once before
    //  any of its events is applied.
    if (sq_update_begin (&it, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        sq_warn ("governor %u: %s", gov->id, err.text);
        return;
    }
    while ((rc = sq_update_next (&it, &ev)) == 1)
        ;
    sq_iter_release (&it);
    if (rc < 0) {
        sq_warn ("governor %u: UPDATE ignored: %s", gov->id, err.text);
        return;
    }
    sq_update_begin (&it, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err);
    while ((rc = sq_update_next (&it, &ev)) == 1) {
        if (ev.type == SQ_EV_HELD || ev.type == SQ_EV_RUNNING || ev.type == SQ_EV_INVENTORY) {
            s_governor_inventory (self, gov, &ev);
            continue;
        }
        if (ev.type == SQ_EV_LOCATED || ev.type == SQ_EV_LOST) {
            object_t *object = graph_object (self->graph, ev.key);
            if (ev.type == SQ_EV_LOST) {
                if (object && !s_recopy (self, object, gov))
                    graph_object_lost (self->graph, object, gov);
            }
            else
            if (object && object->state == OBJ_FINISHED && !object->released
            &&  ev.size == object->size) {
                eventlog_object (self->events, EV_OBJECT_LOCATED, object, gov, NULL);
                graph_object_add_location (self->graph, object, gov, true);
                sq_idmap_remove (gov->recopies, ev.key);
            }
            else
                s_drop (gov, ev.key);   //  a copy nobody wants any more
            continue;
        }
        if (ev.type == SQ_EV_UPLOADED) {
            s_upload_confirmed (self, gov, ev.key, ev.size);
            continue;
        }
        task_t *task = graph_task (self->graph, ev.key);
        //  Only the current attempt, on the governor it was given to, counts:
        //  anything else is a stale or confused report and changes nothing.
        if (!task || task->gov != gov || task->attempt != ev.attempt
        ||  (task->state != TASK_ASSIGNED && task->state != TASK_RUNNING)) {
            sq_debug ("governor %u: ignoring event %u for task %llx attempt %u",
                      gov->id, ev.type, (unsigned long long) ev.key, ev.attempt);
            continue;
        }
        if (ev.type == SQ_EV_STARTED) {
            eventlog_task (self->events, EV_TASK_STARTED, task, gov, NULL, 0);
            graph_task_started (self->graph, task);
        }
        else
        if (ev.type == SQ_EV_RETRACTED) {
            //  Given back unstarted (work stealing): place it again, elsewhere.
            sq_idmap_remove (gov->tasks, task->key);
            task_extra_t *extra = graph_task_extra (task);
            if (extra)
                extra->last_gov = gov->id;
            graph_task_requeue (self->graph, task);
        }
        else {
            task_extra_t *extra;
            sq_idmap_remove (gov->tasks, task->key);
            gov->tasks_done++;
            gov_note_duration (gov, ev.duration_us);
            if (ev.type == SQ_EV_FINISHED)
                eventlog_task (self->events, EV_TASK_FINISHED, task, gov, NULL, 0);
            else
                eventlog_task (self->events, EV_TASK_FAILED, task, gov,
                               ev.message.ptr, ev.message.len);
            if (ev.type == SQ_EV_FINISHED)
                graph_task_finished (self->graph, task, gov, ev.outputs, ev.n_outputs,
                                     payloads, n_payloads, self->config.inline_max);
            else
            if (ev.reason == SQ_FAIL_MEMORY && task_extra (task)->crashes < self->config.allowed_failures
            &&  (extra = graph_task_extra (task))) {
                //  Killed for using more memory than it asked for: ask for
                //  twice as much, and go to a governor that has it (not this
                //  one if another can).
                extra->crashes++;
                extra->last_gov = gov->id;
                for (uint32_t r = 0; r < extra->n_resources; r++)
                    if (mpr_str_eq (extra->resources [r].name, "memory"))
                        extra->resources [r].amount *= 2;
                sq_info ("task %u of session %u: %.*s; retrying with twice the memory",
                         sq_key_id (task->key), sq_key_session (task->key),
                         (int) (ev.message.len > 200? 200: ev.message.len), ev.message.ptr);
                graph_task_requeue (self->graph, task);
                persist_attempt (self->persist, task);
            }
            else
            if (task_extra (task)->retries < task_extra (task)->max_retries
            &&  (extra = graph_task_extra (task))) {
                //  Its own code failed: try again, elsewhere if possible.
                extra->retries++;
                extra->last_gov = gov->id;
                sq_info ("task %u of session %u failed (retry %u of %u): %.*s",
                         sq_key_id (task->key), sq_key_session (task->key), extra->retries,
                         extra->max_retries, (int) (ev.message.len > 200? 200: ev.message.len),
                         ev.message.ptr);
                graph_task_requeue (self->graph, task);
                persist_attempt (self->persist, task);
            }
            else {
                char message [SQ_MAX_MESSAGE / 4];
                snprintf (message, sizeof message, "%.*s", (int) ev.message.len, ev.message.ptr);
                graph_task_failed (self->graph, task, SQ_E_TASK_FAILED, message);
            }
        }
    }
    if (rc < 0)
        sq_warn ("governor %u: %s", gov->id, err.text);
    sq_iter_release (&it);
}

static void
s_governor_message (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t type)
{
    sq_errbuf_t err;
    peer->gov->last_recv = s_now ();
    switch (type) {
        case SQ_MSG_UPDATE:
            s_governor_update (self, peer, msg);
            break;
        case SQ_MSG_LOAD:
            if (sq_load_decode (&peer->gov->load, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err))
                sq_warn ("governor %u: %s", peer->id, err.text);
            break;
        case SQ_MSG_HEARTBEAT:
            break;
        case SQ_MSG_BYE:
            s_peer_end (self, peer, "said goodbye");
            break;
        default:
            sq_warn ("governor %u: unexpected message type %u ignored", peer->id, type);
    }
}

//  --------------------------------------------------------------------------
//  Client requests

//  Whether a session may be seen by this peer: always without keys; else
//  a session of its own tenant (an admin key sees every tenant).
static bool
s_same_tenant (const peer_t *peer, const session_t *session)
{
    if (!session->tenant || peer->role == SQ_ROLE_ADMIN)
        return true;
    return peer->tenant && strcmp (peer->tenant, session->tenant) == 0;
}

static session_t *
s_client_session (broker_t *self, peer_t *peer, uint32_t id, uint32_t req)
{
    session_t *session = graph_session (self->graph, id);
    if (session && session->client == peer)
        return session;
    char message [160];
    int code = SQ_E_SESSION;
    if (session && session->tenant && !(peer->tenant && strcmp (peer->tenant, session->tenant) == 0)) {
        //  Says nothing of whose it is.
        code = SQ_E_DENIED;
        snprintf (message, sizeof message, "session %u: access denied", id);
    }
    else
    if (session)
        snprintf (message, sizeof message, "session %u is not open on this connection "
                  "(RESUME it with its token)", id);
    else
        snprintf (message, sizeof message, "session %u is not open on this connection", id);
    s_reply_error (self, peer->identity, peer->identity_size, req, code, message, 0);
    return NULL;
}

static void
s_client_submit (broker_t *self, peer_t *peer, sq_msg_t *msg)
{
    sq_submit_t submit;
    sq_errbuf_t err;
    uint32_t type, req = 0;
    sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req);
    if (sq_submit_decode (&submit, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        s_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_PROTOCOL, err.text, 0);
        return;
    }
    session_t *session = s_client_session (self, peer, submit.session, submit.req);
    if (session) {
        char message [512];
        uint32_t bad_id = 0;
        int rc = SQ_OK;
        //  Data plane: constants the client uploaded to a governor must name
        //  one we know; they become copies there once it confirms them.
        uint32_t n_uploads = 0;
        for (uint32_t i = 0; i < submit.n_objects && rc == SQ_OK; i++)
            if (submit.objects [i].frame == SQ_FRAME_UPLOADED) {
                n_uploads++;
                if (!s_gov_by_id (self, submit.objects [i].governor)) {
                    rc = SQ_E_INVALID;
                    bad_id = submit.objects [i].id;
                    snprintf (message, sizeof message, "object %u was uploaded to governor %u, "
                              "which is not connected", bad_id, submit.objects [i].governor);
                }
            }
        if (rc == SQ_OK && uploads_count (self->uploads) + n_uploads > UPLOADS_MAX) {
            rc = SQ_E_BUSY;
            snprintf (message, sizeof message, "too many uploads waiting for confirmation "
                      "(%u); try again", UPLOADS_MAX);
        }
        if (rc == SQ_OK)
            rc = graph_submit (self->graph, session, &submit, msg->frames + 2, msg->n - 2,
                               s_resource_ok, self, message, sizeof message, &bad_id);
        int64_t now = s_now ();
        for (uint32_t i = 0; i < submit.n_objects && n_uploads; i++) {
            if (submit.objects [i].frame != SQ_FRAME_UPLOADED)
                continue;
            uint64_t key = sq_key (session->id, submit.objects [i].id);
            gov_t *gov = s_gov_by_id (self, submit.objects [i].governor);
            object_t *object = graph_object (self->graph, key);
            if (rc == SQ_OK && object && gov)
                s_upload_claimed (self, object, gov, submit.objects [i].size, now);
            else
            if (rc != SQ_OK && !object && gov) {
                //  Refused: the bytes uploaded for it are nobody's (unless
                //  the id is an object of the session, refused as a duplicate).
                uploads_forget (self->uploads, key);
                s_drop (gov, key);
            }
        }
        if (rc == SQ_OK) {
            persist_submit (self->persist, session->id, msg);
            eventlog_submit (self->events, session->id, submit.n_tasks, submit.n_objects);
            sq_debug ("session %u: %u tasks, %u objects submitted", session->id,
                      submit.n_tasks, submit.n_objects);
            s_reply_nil (self, peer, submit.req);
        }
        else
            s_reply_error (self, peer->identity, peer->identity_size, submit.req, rc,
                           message, bad_id);
    }
    sq_submit_release (&submit);
}

static void
s_pack_kv_u64 (msgpack_packer *pk, const char *key, uint64_t value)
{
    sq_pack_cstr (pk, key);
    msgpack_pack_uint64 (pk, value);
}

static void s_pack_info (broker_t *self, msgpack_packer *pk, const peer_t *viewer);
static bool s_local_endpoint (const char *endpoint);

static void
s_client_info (broker_t *self, peer_t *peer, uint32_t req)
{
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    s_pack_info (self, &self->out.pk, peer);
    s_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  INFO's map; also the dashboard's view of the cluster (http.c), which
//  sees every tenant.
void
broker_pack_info (broker_t *self, msgpack_packer *pk)
{
    s_pack_info (self, pk, NULL);
}

//  viewer: the client asking (NULL: everything). With keys, a client sees
//  the tasks, sessions and clients of its own tenant only.
static void
s_pack_info (broker_t *self, msgpack_packer *pk, const peer_t *viewer)
{
    bool all = !viewer || !self->auth || viewer->role == SQ_ROLE_ADMIN;
    size_t clients = 0, sessions = 0;
    uint64_t counts [TASK_STATE_COUNT_] = { 0 };
    for (peer_t *p = (peer_t *) zhashx_first (self->peers); p; p = (peer_t *) zhashx_next (self->peers))
        clients += p->kind == PEER_CLIENT
                && (all || (p->tenant && viewer->tenant && strcmp (p->tenant, viewer->tenant) == 0));
    if (all) {
        for (int s = 0; s < TASK_STATE_COUNT_; s++)
            counts [s] = graph_task_count (self->graph, (task_state_t) s);
        sessions = graph_session_count (self->graph);
    }
    else {
        size_t cursor = 0;
        session_t *session;
        while ((session = graph_session_next (self->graph, &cursor)))
            if (s_same_tenant (viewer, session)) {
                sessions++;
                for (int s = 0; s < TASK_STATE_COUNT_; s++)
                    counts [s] += session->counts [s];
            }
    }
    journal_stats_t js = { 0 };
    if (self->journal)
        journal_stats (self->journal, &js);
    msgpack_pack_map (pk, 19);
    sq_pack_cstr (pk, "cluster");
    sq_pack_cstr (pk, self->cluster);
    s_pack_kv_u64 (pk, "epoch", self->epoch);
    s_pack_kv_u64 (pk, "recovering", self->recovering);
    s_pack_kv_u64 (pk, "secure", self->auth != NULL);
    s_pack_kv_u64 (pk, "insecure", !self->auth && self->config.insecure
                                   && !s_local_endpoint (self->config.listen));
    s_pack_kv_u64 (pk, "journal_bytes", js.bytes);
    s_pack_kv_u64 (pk, "journal_errors", js.errors);
    sq_pack_cstr (pk, "version");
    sq_pack_cstr (pk, "0.1.0");
    sq_pack_cstr (pk, "governors");
    msgpack_pack_array (pk, self->n_govs);
    for (size_t i = 0; i < self->n_govs; i++) {
        gov_t *gov = self->govs [i];
        msgpack_pack_map (pk, 15);
        s_pack_kv_u64 (pk, "id", gov->id);
        sq_pack_cstr (pk, "name");
        sq_pack_cstr (pk, gov->name);
        s_pack_kv_u64 (pk, "cpus", gov->cpus);
        sq_pack_cstr (pk, "resources");
        msgpack_pack_map (pk, gov->n_resources);
        for (uint32_t r = 0; r < gov->n_resources; r++)
            s_pack_kv_u64 (pk, gov->resources [r].name.ptr, gov->resources [r].amount);
        s_pack_kv_u64 (pk, "assigned", sq_idmap_size (gov->tasks));
        s_pack_kv_u64 (pk, "running", gov->load.running);
        s_pack_kv_u64 (pk, "queued", gov->load.queued);
        s_pack_kv_u64 (pk, "memory", gov->load.memory);
        s_pack_kv_u64 (pk, "spilled", gov->load.spilled);
        s_pack_kv_u64 (pk, "objects", gov->load.objects);
        s_pack_kv_u64 (pk, "tasks_done", gov->tasks_done);
        s_pack_kv_u64 (pk, "tasks_run", gov->load.tasks);
        s_pack_kv_u64 (pk, "joined", (uint64_t) gov->joined);
        sq_pack_cstr (pk, "data_endpoint");
        sq_pack_cstr (pk, gov->data_endpoint);
        sq_pack_cstr (pk, "serve_endpoint");
        sq_pack_cstr (pk, gov->serve_endpoint);
    }
    sq_pack_cstr (pk, "tasks");
    msgpack_pack_map (pk, TASK_STATE_COUNT_);
    for (int s = 0; s < TASK_STATE_COUNT_; s++)
        s_pack_kv_u64 (pk, task_state_name ((task_state_t) s), counts [s]);
    s_pack_kv_u64 (pk, "ready_queue", scheduler_ready_count (self->scheduler));
    s_pack_kv_u64 (pk, "blocked", scheduler_blocked_count (self->scheduler));
    //  Tasks waiting for a governor that fits (--resource-wait), the first
    //  S_INFO_WAITS of them (of the viewer's tenant) with what they need.
    sq_pack_cstr (pk, "resource_waits");
    size_t n_waits = scheduler_waiting_count (self->scheduler), shown = 0;
    uint64_t wait_keys [S_INFO_WAITS];
    int64_t wait_left [S_INFO_WAITS];
    char wait_needs [S_INFO_WAITS][160];
    for (size_t i = 0; i < n_waits && shown < S_INFO_WAITS; i++) {
        if (!scheduler_waiting_get (self->scheduler, i, &wait_keys [shown], &wait_left [shown],
                                    wait_needs [shown], sizeof wait_needs [shown]))
            break;
        session_t *ws = graph_session (self->graph, sq_key_session (wait_keys [shown]));
        if (all || (ws && s_same_tenant (viewer, ws)))
            shown++;
    }
    msgpack_pack_array (pk, shown);
    for (size_t i = 0; i < shown; i++) {
        msgpack_pack_map (pk, 4);
        s_pack_kv_u64 (pk, "session", sq_key_session (wait_keys [i]));
        s_pack_kv_u64 (pk, "task", sq_key_id (wait_keys [i]));
        sq_pack_cstr (pk, "needs");
        sq_pack_cstr (pk, wait_needs [i]);
        s_pack_kv_u64 (pk, "left_ms", wait_left [i] > 0? (uint64_t) wait_left [i]: 0);
    }
    s_pack_kv_u64 (pk, "sessions", sessions);
    s_pack_kv_u64 (pk, "clients", clients);
    s_pack_kv_u64 (pk, "objects", graph_object_count (self->graph));
    s_pack_kv_u64 (pk, "watches", watches_count (self->watches));
    s_pack_kv_u64 (pk, "recomputed", graph_recomputed (self->graph));
    s_pack_kv_u64 (pk, "uploads", uploads_count (self->uploads));
}

//  KEEP / UNKEEP / CANCEL: every id is checked before anything changes.
static void
s_client_ids (broker_t *self, peer_t *peer, sq_request_t *q, session_t *session)
{
    char message [200];
    for (uint32_t i = 0; i < q->n_ids; i++) {
        uint64_t key = sq_key (session->id, q->ids [i]);
        object_t *object = graph_object (self->graph, key);
        bool found = q->type == SQ_MSG_CANCEL? graph_task (self->graph, key) != NULL
                   : q->type == SQ_MSG_KEEP? object && !object->released
                   : object != NULL;
        if (!found) {
            snprintf (message, sizeof message, q->type == SQ_MSG_CANCEL
                      ? "id %u is not a task of session %u"
                      : "id %u is not an object of session %u (or was already released)",
                      q->ids [i], session->id);
            s_reply_error (self, peer->identity, peer->identity_size, q->req,
                           SQ_E_UNKNOWN_ID, message, q->ids [i]);
            return;
        }
    }
    persist_ids (self->persist, q->type == SQ_MSG_CANCEL? SQ_REC_CANCEL
                 : q->type == SQ_MSG_KEEP? SQ_REC_KEEP: SQ_REC_UNKEEP, session->id, q->ids, q->n_ids);
    if (q->type == SQ_MSG_CANCEL && q->n_ids == 0) {
        size_t cursor = 0;
        task_t *task;
        while ((task = graph_session_next_task (session, &cursor)))
            graph_cancel (self->graph, task);
    }
    for (uint32_t i = 0; i < q->n_ids; i++) {
        uint64_t key = sq_key (session->id, q->ids [i]);
        if (q->type == SQ_MSG_CANCEL) {
            task_t *task = graph_task (self->graph, key);
            if (task)
                graph_cancel (self->graph, task);
        }
        else {
            //  An earlier UNKEEP in this list may have freed it.
            object_t *object = graph_object (self->graph, key);
            if (object)
                graph_keep (self->graph, object, q->type == SQ_MSG_KEEP);
        }
    }
    s_reply_nil (self, peer, q->req);
}

static bool
s_peer_add_session (peer_t *peer, uint32_t id)
{
    if (peer->n_sessions >= S_MAX_SESSIONS)
        return false;
    if (peer->n_sessions == peer->cap_sessions) {
        uint32_t cap = peer->cap_sessions? peer->cap_sessions * 2: 4;
        uint32_t *p = (uint32_t *) realloc (peer->sessions, cap * sizeof *p);
        if (!p)
            return false;
        peer->sessions = p;
        peer->cap_sessions = cap;
    }
    peer->sessions [peer->n_sessions++] = id;
    return true;
}

static void
s_peer_remove_session (peer_t *peer, uint32_t id)
{
    for (uint32_t i = 0; i < peer->n_sessions; i++)
        if (peer->sessions [i] == id) {
            peer->sessions [i] = peer->sessions [--peer->n_sessions];
            return;
        }
}

static void
s_client_open (broker_t *self, peer_t *peer, uint32_t req)
{
    if (peer->n_sessions >= S_MAX_SESSIONS) {
        s_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_BUSY,
                       "too many sessions open on this connection", 0);
        return;
    }
    session_t *opened = graph_session_open (self->graph, peer);
    if (opened && (peer->tenant || peer->key [0])) {
        opened->tenant = peer->tenant? strdup (peer->tenant): NULL;
        opened->owner = strdup (peer->key);
    }
    if (!opened || (peer->tenant && !opened->tenant) || (peer->key [0] && !opened->owner)
    ||  !s_peer_add_session (peer, opened->id)) {
        if (opened)
            graph_session_close (self->graph, &opened);
        s_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_NOMEM,
                       "out of memory", 0);
        return;
    }
    sq_random (opened->token, SQ_TOKEN_LEN);
    persist_session (self->persist, opened);
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    sq_pack_session_opened (&self->out.pk, opened->id, opened->token);
    s_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  RESUME: a client back after a lost connection (or a broker restart)
//  takes its session again, with the token it was given.
static void
s_client_resume (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    session_t *session = graph_session (self->graph, q->session);
    char message [300];
    if (!session) {
        snprintf (message, sizeof message, "session %u is not known to this broker: it was "
                  "closed, its client did not come back within the session grace, or the "
                  "broker restarted without its journal", q->session);
        s_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_SESSION, message, 0);
        return;
    }
    //  Constant time: the token is a secret.
    uint8_t diff = 0;
    for (int i = 0; i < SQ_TOKEN_LEN; i++)
        diff |= (uint8_t) (session->token [i] ^ (uint8_t) q->token.ptr [i]);
    bool tenant_ok = !session->tenant
                  || (peer->tenant && strcmp (peer->tenant, session->tenant) == 0);
    if (diff || !tenant_ok) {
        snprintf (message, sizeof message, "session %u: access denied", q->session);
        s_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_DENIED, message, 0);
        return;
    }
    if (session->client != peer) {
        if (!s_peer_add_session (peer, session->id)) {
            s_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_BUSY,
                           "too many sessions open on this connection", 0);
            return;
        }
        if (session->client) {
            //  Its old connection is gone but not noticed yet.
            peer_t *old = (peer_t *) session->client;
            s_peer_remove_session (old, session->id);
            watches_drop_session (self->watches, session);
        }
        session->client = peer;
        session->detached_at = 0;
        sq_info ("session %u resumed by client %u (%s)", session->id, peer->id, peer->name);
    }
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    msgpack_pack_array (&self->out.pk, 1);
    msgpack_pack_uint32 (&self->out.pk, session->max_id);
    s_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  UPLOAD: which governor a constant goes to (the one with the least
//  memory in use), and with keys the capability to PUT it there.
static void
s_client_upload (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    gov_t *best = NULL;
    if (q->governor && !(best = s_gov_by_id (self, q->governor))) {
        char message [120];
        snprintf (message, sizeof message, "governor %u is not connected", q->governor);
        s_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                       message, q->id);
        return;
    }
    for (size_t i = 0; i < self->n_govs && !q->governor; i++) {
        gov_t *gov = self->govs [i];
        if (gov->inventory)
            continue;
        if (!best || gov->load.memory < best->load.memory
        ||  (gov->load.memory == best->load.memory && gov->load.objects < best->load.objects))
            best = gov;
    }
    if (!best) {
        s_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_RESOURCES,
                       "no governor is connected to upload to", q->id);
        return;
    }
    uint8_t cap [SQ_CAP_SIZE];
    if (self->auth)
        sq_cap_mint (best->secret, peer->key_bin, sq_key (session->id, q->id),
                     sq_wall_ms () + (uint64_t) self->config.capability_ttl_ms, SQ_CAP_WRITE, cap);
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_pack_where (&self->out.pk, best->id, best->serve_endpoint, best->has_key? best->key: NULL,
                   self->auth? cap: NULL, SQ_CAP_SIZE);
    s_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

static void
s_client_message (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t type, uint32_t req)
{
    if (type == SQ_MSG_SUBMIT) {
        s_client_submit (self, peer, msg);
        return;
    }
    if (type == SQ_MSG_BYE) {
        //  An orderly goodbye: its sessions close now rather than wait.
        peer->said_bye = true;
        s_peer_end (self, peer, "said goodbye");
        return;
    }
    sq_request_t q;
    sq_errbuf_t err;
    if (sq_request_decode (&q, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        int code = type == SQ_MSG_HELLO? SQ_E_HELLO: SQ_E_PROTOCOL;
        s_reply_error (self, peer->identity, peer->identity_size, req, code,
                       type == SQ_MSG_HELLO? "HELLO was already said on this connection": err.text, 0);
        return;
    }
    session_t *session = NULL;
    if (q.type != SQ_MSG_SESSION_OPEN && q.type != SQ_MSG_INFO && q.type != SQ_MSG_PING
    &&  q.type != SQ_MSG_RESUME) {
        session = s_client_session (self, peer, q.session, q.req);
        if (!session) {
            sq_request_release (&q);
            return;
        }
    }
    int64_t deadline = q.timeout_ms < 0? -1: s_now () + q.timeout_ms;
    switch (q.type) {
        case SQ_MSG_SESSION_OPEN:
            s_client_open (self, peer, q.req);
            break;
        case SQ_MSG_SESSION_CLOSE:
            s_peer_remove_session (peer, session->id);
            s_session_close (self, session);
            s_reply_nil (self, peer, q.req);
            break;
        case SQ_MSG_RESUME:
            s_client_resume (self, peer, &q);
            break;
        case SQ_MSG_UPLOAD:
            s_client_upload (self, peer, &q, session);
            break;
        case SQ_MSG_KEEP: case SQ_MSG_UNKEEP: case SQ_MSG_CANCEL:
            s_client_ids (self, peer, &q, session);
            break;
        case SQ_MSG_WAIT: case SQ_MSG_FETCH:
            if (peer->outstanding >= self->config.max_requests) {
                s_reply_error (self, peer->identity, peer->identity_size, q.req, SQ_E_BUSY,
                               "too many waits and fetches outstanding on this connection", 0);
                break;
            }
            peer->outstanding++;
            if (q.type == SQ_MSG_WAIT)
                watches_wait (self->watches, peer, q.req, session, q.mode, q.ids, q.n_ids, deadline);
            else
            if (!s_fetch_park (self, peer, sq_key (session->id, q.id), q.req, deadline))
                watches_fetch (self->watches, peer, q.req, session, q.id, deadline);
            break;
        case SQ_MSG_INFO:
            s_client_info (self, peer, q.req);
            break;
        case SQ_MSG_PING:
            s_reply_nil (self, peer, q.req);
            break;
        default:
            break;
    }
    sq_request_release (&q);
}

//  --------------------------------------------------------------------------
//  One message from the ROUTER

//  With keys, every message is checked against the key its connection
//  authenticated with: the peer's key must be the one it said HELLO with,
//  and still in the keyring. True if the message was refused (answered).
static bool
s_auth_refused (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t req)
{
    const char *user = sq_msg_user (&msg->frames [1]);
    if (!user || strcmp (user, peer->key)) {
        //  Another connection took the identity of one that is gone.
        s_peer_end (self, peer, "its connection was replaced by another key's");
        s_reply_error (self, sq_msg_data (msg, 0), sq_msg_size (msg, 0), req, SQ_E_HELLO,
                       "say HELLO first (this connection is unknown to the broker)", 0);
        return true;
    }
    uint64_t generation = auth_generation (self->auth);
    if (peer->auth_gen == generation)
        return false;
    const sq_keyentry_t *entry = auth_find (self->auth, peer->key, strlen (peer->key));
    if (entry && entry->role == peer->role) {
        peer->auth_gen = generation;
        return false;
    }
    sq_info ("%s %u (%s): its key was removed from the authorized keys", peer->kind == PEER_CLIENT?
             "client": "governor", peer->id, peer->name);
    s_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_DENIED,
                   "this key is no longer authorized", 0);
    s_peer_end (self, peer, "its key is no longer authorized");
    return true;
}

static void
s_handle (broker_t *self, sq_msg_t *msg)
{
    if (msg->n < 2)
        return;                 //  identity only: nothing to answer
    const void *identity = sq_msg_data (msg, 0);
    size_t identity_size = sq_msg_size (msg, 0);
    if (identity_size == 0 || identity_size > 255)
        return;
    uint32_t type = 0, req = 0;
    bool readable = sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req) == 0;
    if (msg->truncated) {
        s_reply_error (self, identity, identity_size, req, SQ_E_TOO_LARGE,
                       "message has more frames than the broker accepts", 0);
        return;
    }
    char key [520];
    s_identity_key (identity, identity_size, key);
    peer_t *peer = (peer_t *) zhashx_lookup (self->peers, key);
    if (peer && self->auth && s_auth_refused (self, peer, msg, req))
        return;
    if (!peer) {
        if (!readable)
            s_reply_error (self, identity, identity_size, 0, SQ_E_PROTOCOL,
                           "frame 0 is not a msgpack array starting with a message type", 0);
        else
            s_hello (self, msg, key);
        return;
    }
    if (!readable) {
        if (peer->kind == PEER_CLIENT)
            s_reply_error (self, identity, identity_size, 0, SQ_E_PROTOCOL,
                           "frame 0 is not a msgpack array starting with a message type", 0);
        else
            sq_warn ("governor %u: unreadable message ignored", peer->id);
        return;
    }
    if (msg->srcfd != peer->fd)
        s_learn_fd (self, peer, msg->srcfd);
    if (peer->kind == PEER_GOVERNOR)
        s_governor_message (self, peer, msg, type);
    else
        s_client_message (self, peer, msg, type, req);
}

//  --------------------------------------------------------------------------
//  Timers: heartbeats both ways, dead governors, work stealing, wait
//  deadlines

static void
s_retract (void *arg, task_t *task)
{
    (void) arg;
    gov_order_retract (task->gov, task->key, task->attempt);
}

//  SIGHUP: the keyring is read again; governors learn the new keys, and
//  peers whose key went are refused at their next message (s_auth_refused).
static void
s_reload_keys (broker_t *self)
{
    if (!self->auth) {
        sq_info ("SIGHUP: no keys to reload (the broker runs without --authorized-keys)");
        return;
    }
    if (auth_reload (self->auth))
        return;
    for (size_t i = 0; i < self->n_govs; i++)
        s_send_keys (self, self->govs [i]);
}

//  The governors of an earlier life came back, or had their time: what
//  none of them holds is recomputed, and scheduling starts.
static void
s_recovered (broker_t *self)
{
    size_t missing = persist_expected (self->persist);
    persist_expect_none (self->persist);
    size_t lost = graph_recover_sweep (self->graph);
    self->recovering = false;
    //  FETCHes that waited for the governors go to the watches now (an
    //  object none of them held is being recomputed: they wait for that).
    while (self->fetches) {
        s_fetch_t *fetch = self->fetches;
        while (fetch && uploads_awaited (self->uploads, fetch->key))
            fetch = fetch->next;
        if (!fetch)
            break;
        s_fetches_release (self, fetch->key);
    }
    sq_info ("recovered (epoch %llu): %s; %zu objects no governor holds are recomputed",
             (unsigned long long) self->epoch, missing? "some governors did not come back"
             : "every governor came back", lost);
}

//  Compaction (journal.h): the live state as a new journal.
static void
s_compact (broker_t *self)
{
    msgpack_sbuffer *snapshot = persist_snapshot (self->persist, self->cluster, self->epoch,
                                                  self->next_peer_id);
    if (snapshot)
        journal_compact (self->journal, snapshot);
    else
        sq_warn ("journal: out of memory making a snapshot; compaction postponed");
}

static int64_t
s_timers (broker_t *self, int64_t now)
{
    if (now >= self->next_heartbeat) {
        int64_t dead_after = (int64_t) self->config.heartbeat_ms * self->config.liveness;
        for (size_t i = 0; i < self->n_govs; ) {
            gov_t *gov = self->govs [i];
            if (now - gov->last_recv > dead_after) {
                char key [520];
                s_identity_key (gov->identity, gov->identity_size, key);
                peer_t *peer = (peer_t *) zhashx_lookup (self->peers, key);
                if (peer) {
                    s_peer_end (self, peer, "missed heartbeats");
                    continue;   //  slot i now holds another governor
                }
            }
            if (now - gov->last_send >= self->config.heartbeat_ms) {
                sq_wbuf_reset (&self->out);
                sq_bare_encode (&self->out, SQ_MSG_HEARTBEAT);
                s_send_to (self, gov->identity, gov->identity_size, &self->out, NULL);
                gov->last_send = now;
            }
            i++;
        }
        self->next_heartbeat = now + self->config.heartbeat_ms / 4 + 1;
        s_check_suspects (self, now);
    }
    if (now >= self->next_rebalance) {
        if (!self->recovering)
            scheduler_rebalance (self->scheduler, s_retract, self);
        self->next_rebalance = now + S_REBALANCE_MS;
    }
    if (atomic_exchange (&self->reload, 0))
        s_reload_keys (self);
    if (self->recovering
    &&  (persist_expected (self->persist) == 0 || now >= self->recover_deadline))
        s_recovered (self);
    if (now >= self->next_grace_check) {
        s_sessions_expire (self, now);
        self->next_grace_check = now + S_GRACE_CHECK_MS;
    }
    if (self->journal) {
        journal_tick (self->journal);
        if (journal_compaction_due (self->journal))
            s_compact (self);
    }
    int64_t next = self->next_heartbeat < self->next_rebalance? self->next_heartbeat
                                                               : self->next_rebalance;
    if (self->recovering && self->recover_deadline < next)
        next = self->recover_deadline;
    int64_t deadline = watches_expire (self->watches, now);
    if (deadline >= 0 && deadline < next)
        next = deadline;
    deadline = s_uploads_expire (self, now);
    if (deadline >= 0 && deadline < next)
        next = deadline;
    return next;
}

static void
s_flush_governors (broker_t *self, int64_t now)
{
    for (size_t i = 0; i < self->n_govs; ) {
        gov_t *gov = self->govs [i];
        if (gov_flush (gov, self->router, now) == 0) {
            i++;
            continue;
        }
        char key [520];
        s_identity_key (gov->identity, gov->identity_size, key);
        peer_t *peer = (peer_t *) zhashx_lookup (self->peers, key);
        if (peer)
            s_peer_end (self, peer, "unreachable (not reading, or gone)");
        else
            i++;
    }
}

int
broker_run (broker_t *self)
{
    int64_t next_timer = s_now ();
    while (!atomic_load (&self->stopping) && !zsys_interrupted) {
        int64_t now = s_now ();
        long timeout = next_timer > now? (long) (next_timer - now): 0;
        zmq_pollitem_t items [] = {
            { self->router, 0, ZMQ_POLLIN, 0 },
            { self->monitor, 0, ZMQ_POLLIN, 0 },
            { self->auth? auth_socket (self->auth): NULL, -1, ZMQ_POLLIN, 0 },
            { NULL, self->http? http_fd (self->http): -1, ZMQ_POLLIN, 0 }
        };
        long http_ms = self->http? http_timeout (self->http): -1;
        if (http_ms >= 0 && http_ms < timeout)
            timeout = http_ms;
        if (zmq_poll (items, self->http? 4: 3, timeout) < 0 && errno != EINTR)
            break;
        eventlog_tick (self->events);
        //  Handshakes first: a peer's first message waits on its answer.
        if (self->auth)
            auth_handle (self->auth);
        //  Dashboard requests are answered between batches of messages,
        //  from the graph as it stands (http.h).
        if (self->http)
            http_run (self->http, items [3].revents != 0);
        s_drain_monitor (self);
        for (int n = 0; n < S_MAX_PER_TURN; n++) {
            if (sq_msg_recv (&self->msg, self->router, ZMQ_DONTWAIT, SQ_MAX_FRAMES + 1))
                break;
            self->messages++;
            s_handle (self, &self->msg);
        }
        sq_msg_close (&self->msg);
        if (!self->recovering && scheduler_has_work (self->scheduler)) {
            eventlog_tick (self->events);
            scheduler_run (self->scheduler, s_assign, self);
        }
        now = s_now ();
        if (!self->recovering)
            scheduler_tick (self->scheduler, now);
        next_timer = s_timers (self, now);
        //  The turn's records reach the file before its orders leave.
        if (self->journal)
            journal_flush (self->journal);
        s_flush_governors (self, now);
        eventlog_flush (self->events);
    }
    return 0;
}

//  --------------------------------------------------------------------------

static void
s_peer_free (void **item)
{
    s_peer_destroy ((peer_t **) item);
}

//  Endpoints only this machine can reach: without keys the broker binds
//  nothing else, unless told it is fine (--insecure).
static bool
s_local_endpoint (const char *endpoint)
{
    if (strncmp (endpoint, "ipc://", 6) == 0 || strncmp (endpoint, "inproc://", 9) == 0)
        return true;
    if (strncmp (endpoint, "tcp://", 6))
        return false;
    const char *host = endpoint + 6;
    return strncmp (host, "127.", 4) == 0 || strncmp (host, "localhost:", 10) == 0
        || strncmp (host, "[::1]:", 6) == 0;
}

//  The dashboard's token (--http-token): with keys there must be one, since
//  the dashboard shows every tenant. 0, or -1 (logged).
static int
s_read_token (broker_t *self, char *token, size_t size)
{
    const char *file = self->config.http_token;
    if (!file) {
        if (!self->config.secret_key)
            return 0;
        sq_error ("--http with keys needs --http-token FILE: the dashboard shows every tenant");
        return -1;
    }
    FILE *f = fopen (file, "r");
    size_t n = f? fread (token, 1, size - 1, f): 0;
    if (f)
        fclose (f);
    token [n] = 0;
    while (n && (token [n - 1] == '\n' || token [n - 1] == '\r' || token [n - 1] == ' '))
        token [--n] = 0;
    bool ok = n >= 16;
    for (size_t i = 0; i < n; i++)
        ok &= token [i] > ' ' && token [i] < 127 && token [i] != ';';
    if (!ok) {
        sq_error ("--http-token %s: %s", file, f? "needs 16 to 255 printable characters "
                  "(no spaces or ';')": strerror (errno));
        return -1;
    }
    return 0;
}

//  Where the graph's state comes back from after a restart (persist.h).
static int
s_open_journal (broker_t *self)
{
    char err [600];
    self->journal = journal_open (self->config.journal, self->config.journal_sync_ms,
                                  self->config.journal_compact, persist_replay, self->persist,
                                  err, sizeof err);
    if (!self->journal) {
        sq_error ("journal: %s", err);
        return -1;
    }
    persist_attach (self->persist, self->journal);
    snprintf (self->cluster, sizeof self->cluster, "%s", journal_cluster (self->journal));
    self->epoch = journal_epoch (self->journal);
    if (persist_next_peer (self->persist) > self->next_peer_id)
        self->next_peer_id = persist_next_peer (self->persist);
    if (journal_restarted (self->journal)) {
        persist_replayed (self->persist, s_now ());
        self->recovering = true;
        self->recover_deadline = s_now () + self->config.reattach_wait_ms;
        sq_info ("restarted as epoch %llu of cluster %s: %zu sessions, %zu governors "
                 "expected back within %d ms", (unsigned long long) self->epoch, self->cluster,
                 graph_session_count (self->graph), persist_expected (self->persist),
                 self->config.reattach_wait_ms);
    }
    return 0;
}

static void
s_watch_where (void *arg, void *client, object_t *object, gov_t *gov, msgpack_packer *pk)
{
    broker_t *self = (broker_t *) arg;
    peer_t *peer = (peer_t *) client;
    uint8_t cap [SQ_CAP_SIZE];
    //  Only this client, for this object, for a while (capability.h).
    if (self->auth)
        sq_cap_mint (gov->secret, peer->key_bin, object->key,
                     sq_wall_ms () + (uint64_t) self->config.capability_ttl_ms, SQ_CAP_READ, cap);
    sq_pack_where (pk, gov->id, gov->serve_endpoint, gov->has_key? gov->key: NULL,
                   self->auth? cap: NULL, SQ_CAP_SIZE);
}

broker_t *
broker_new (const broker_config_t *config)
{
    broker_t *self = (broker_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->config = *config;
    self->next_peer_id = 1;
    sq_msg_init (&self->msg);
    sq_wbuf_init (&self->out);
    graph_hooks_t hooks = {
        self, s_hook_task_ready, s_hook_task_stop, s_hook_task_done, s_hook_object_drop,
        s_hook_object_copy
    };
    watches_hooks_t whooks = { self, s_watch_reply, s_watch_released, s_watch_where };
    self->graph = graph_new (&hooks);
    self->scheduler = self->graph? scheduler_new (self->graph): NULL;
    if (self->scheduler
    &&  scheduler_set_resource_wait (self->scheduler, config->resource_wait_ms, S_RESOURCE_WAITS_MAX))
        scheduler_destroy (&self->scheduler);
    self->watches = self->graph? watches_new (self->graph, &whooks): NULL;
    self->persist = self->graph? persist_new (self->graph): NULL;
    self->peers = zhashx_new ();
    self->by_fd = sq_idmap_new ();
    self->uploads = uploads_new (config->upload_timeout_ms);
    self->ctx = zmq_ctx_new ();
    if (!self->graph || !self->scheduler || !self->watches || !self->peers || !self->persist
    ||  !self->by_fd || !self->uploads || !self->ctx) {
        sq_error ("out of memory");
        broker_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->peers, s_peer_free);
    //  Before the journal: replaying it makes tasks ready, which it notes.
    self->events = eventlog_new (config->event_log);
    if (!self->events) {
        broker_destroy (&self);
        return NULL;
    }
    if (!config->secret_key != !config->authorized_keys) {
        sq_error ("--secret-key and --authorized-keys go together");
        broker_destroy (&self);
        return NULL;
    }
    if (!config->secret_key && !config->insecure && !s_local_endpoint (config->listen)) {
        sq_error ("refusing to listen on %s without keys: anyone who reaches it could run any "
                  "program on every governor. Give --secret-key and --authorized-keys "
                  "(docs/security.md), listen on 127.0.0.1, or accept it with --insecure",
                  config->listen);
        broker_destroy (&self);
        return NULL;
    }
    if (!config->secret_key && config->insecure && !s_local_endpoint (config->listen))
        sq_warn ("INSECURE: listening on %s without keys: anyone who reaches it can run "
                 "any program on every governor", config->listen);
    //  The ZAP handler must be bound before the first handshake can come.
    if (config->secret_key
    &&  !(self->auth = auth_new (self->ctx, config->secret_key, config->authorized_keys))) {
        broker_destroy (&self);
        return NULL;
    }
    if (config->journal) {
        if (s_open_journal (self)) {
            broker_destroy (&self);
            return NULL;
        }
    }
    else {
        //  Without a journal, a cluster id of this run only.
        static const char hex [] = "0123456789abcdef";
        uint8_t bytes [SQ_CLUSTER_ID_LEN / 2];
        sq_random (bytes, sizeof bytes);
        for (size_t i = 0; i < sizeof bytes; i++) {
            self->cluster [2 * i] = hex [bytes [i] >> 4];
            self->cluster [2 * i + 1] = hex [bytes [i] & 15];
        }
        self->epoch = 1;
    }
    self->router = zmq_socket (self->ctx, ZMQ_ROUTER);
    if (self->auth && sq_curve_server (self->router, auth_cert (self->auth)->secret_key, "squall")) {
        sq_error ("cannot make the socket a CURVE server: %s", zmq_strerror (errno));
        broker_destroy (&self);
        return NULL;
    }
    int one = 1, zero = 0, hwm = 100000;
    int64_t max_size = (int64_t) config->max_message;
    int ivl = config->heartbeat_ms, ttl = config->heartbeat_ms * config->liveness;
    zmq_setsockopt (self->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt (self->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt (self->router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt (self->router, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt (self->router, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size);
    //  ZMTP heartbeats close connections to peers that vanished without a
    //  FIN (cut links), which the monitor then reports.
    zmq_setsockopt (self->router, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt (self->router, ZMQ_HEARTBEAT_TIMEOUT, &ttl, sizeof ttl);
    char monitor_endpoint [64];
    snprintf (monitor_endpoint, sizeof monitor_endpoint, "inproc://broker-monitor-%p", (void *) self);
    if (zmq_socket_monitor (self->router, monitor_endpoint,
                            ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED)) {
        sq_error ("cannot monitor the socket: %s", zmq_strerror (errno));
        broker_destroy (&self);
        return NULL;
    }
    self->monitor = zmq_socket (self->ctx, ZMQ_PAIR);
    zmq_setsockopt (self->monitor, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect (self->monitor, monitor_endpoint);
    if (zmq_bind (self->router, config->listen)) {
        sq_error ("cannot listen on %s: %s", config->listen, zmq_strerror (errno));
        broker_destroy (&self);
        return NULL;
    }
    size_t size = sizeof self->endpoint;
    zmq_getsockopt (self->router, ZMQ_LAST_ENDPOINT, self->endpoint, &size);
    char token [256] = "";
    if (config->http && s_read_token (self, token, sizeof token)) {
        broker_destroy (&self);
        return NULL;
    }
    if (config->http && !(self->http = http_new (config->http, token [0]? token: NULL, self,
                                                  self->events))) {
        broker_destroy (&self);
        return NULL;
    }
    return self;
}

void
broker_destroy (broker_t **self_p)
{
    broker_t *self = *self_p;
    if (!self)
        return;
    http_destroy (&self->http);
    //  The journal is written and synced on the way out (the reactor has
    //  stopped: nothing more comes).
    journal_destroy (&self->journal);
    if (self->watches)
        watches_destroy (&self->watches);
    //  Governors are freed with their peers; the graph's pointers to them
    //  die with the graph, which goes first.
    graph_destroy (&self->graph);
    scheduler_destroy (&self->scheduler);
    if (self->peers) {
        for (peer_t *p = (peer_t *) zhashx_first (self->peers); p; p = (peer_t *) zhashx_next (self->peers))
            gov_destroy (&p->gov);
        zhashx_destroy (&self->peers);
    }
    sq_idmap_destroy (&self->by_fd);
    uploads_destroy (&self->uploads);
    persist_destroy (&self->persist);
    auth_destroy (&self->auth);
    while (self->fetches) {
        s_fetch_t *next = self->fetches->next;
        free (self->fetches);
        self->fetches = next;
    }
    for (size_t i = 0; i < self->n_declared; i++)
        free (self->declared [i].name);
    sq_msg_release (&self->msg);
    sq_wbuf_release (&self->out);
    if (self->monitor)
        zmq_close (self->monitor);
    if (self->router) {
        zmq_socket_monitor (self->router, NULL, 0);
        zmq_close (self->router);
    }
    if (self->ctx)
        zmq_ctx_term (self->ctx);
    eventlog_destroy (&self->events);
    free (self);
    *self_p = NULL;
}

const char *
broker_endpoint (broker_t *self)
{
    return self->endpoint;
}

void
broker_stop (broker_t *self)
{
    atomic_store (&self->stopping, 1);
}

void
broker_reload (broker_t *self)
{
    atomic_store (&self->reload, 1);
}

unsigned
broker_http_port (broker_t *self)
{
    return self->http? http_port (self->http): 0;
}

//  Open sessions for the dashboard: id, owning client, task counts.
void
broker_pack_sessions (broker_t *self, msgpack_packer *pk)
{
    size_t n = 0;
    for (peer_t *p = (peer_t *) zhashx_first (self->peers); p; p = (peer_t *) zhashx_next (self->peers))
        if (p->kind == PEER_CLIENT)
            for (uint32_t i = 0; i < p->n_sessions; i++)
                n += graph_session (self->graph, p->sessions [i]) != NULL;
    msgpack_pack_array (pk, n);
    for (peer_t *p = (peer_t *) zhashx_first (self->peers); p; p = (peer_t *) zhashx_next (self->peers)) {
        if (p->kind != PEER_CLIENT)
            continue;
        for (uint32_t i = 0; i < p->n_sessions; i++) {
            session_t *session = graph_session (self->graph, p->sessions [i]);
            if (!session)
                continue;
            msgpack_pack_map (pk, 7);
            s_pack_kv_u64 (pk, "id", session->id);
            s_pack_kv_u64 (pk, "client", p->id);
            sq_pack_cstr (pk, "client_name");
            sq_pack_cstr (pk, p->name? p->name: "");
            s_pack_kv_u64 (pk, "tasks", session->n_tasks);
            s_pack_kv_u64 (pk, "unfinished", session->unfinished);
            s_pack_kv_u64 (pk, "finished", session->finished);
            s_pack_kv_u64 (pk, "failed", session->failed);
        }
    }
}
