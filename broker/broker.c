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

    Over 800 lines: the reactor's turn, its timers, the reply helpers and
    the dispatch of every message type, so that what one turn does reads in
    one file; the handlers are in the files broker_internal.h names.
*/
#include "broker_internal.h"
#include "jobs.h"
#include "drain.h"
#include "place.h"
#include "grow.h"

int64_t
bx_now (void)
{
    return sq_now_ms ();
}

int64_t
bx_deadline (int64_t timeout_ms)
{
    if (timeout_ms < 0)
        return -1;
    int64_t now = bx_now ();
    //  A client may say "in 2^63 ms": that is for ever, not an overflow.
    return timeout_ms > INT64_MAX - now? INT64_MAX: now + timeout_ms;
}

void
broker_config_defaults (broker_config_t *config)
{
    memset (config, 0, sizeof *config);
    config->listen = "tcp://*:7760";
    config->heartbeat_ms = 1000;
    config->liveness = 5;
    config->inline_max = SQ_DEFAULT_INLINE_MAX;
    config->max_message = SQ_DEFAULT_MAX_HEADER;
    config->prefetch = 1024;
    config->queue_us = GOV_QUEUE_US;
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
    config->job_retention_ms = 7 * 86400000LL;
    config->job_limit = 10000;
    config->reattach_wait_ms = 15000;
    config->resource_wait_ms = 60000;
}

//  --------------------------------------------------------------------------
//  Sending

void
bx_identity_key (const void *identity, size_t size, char *key)
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
void
bx_send_to (broker_t *self, const void *identity, size_t identity_size,
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

void
bx_reply_error (broker_t *self, const void *identity, size_t identity_size,
               uint32_t req, int code, const char *message, uint32_t id)
{
    sq_wbuf_reset (&self->out);
    sq_reply_encode_error (&self->out, req, code, message, id, 0);
    bx_send_to (self, identity, identity_size, &self->out, NULL);
}

void
bx_reply_nil (broker_t *self, peer_t *peer, uint32_t req)
{
    sq_wbuf_reset (&self->out);
    sq_reply_encode_nil (&self->out, req);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  --------------------------------------------------------------------------
//  One message from the ROUTER

//  A handshake is answered only once the monitor's events before it are
//  read: a connection over the limits is closed before it can finish its
//  handshake, not just after (its HELLO would be lost; auth.h).
static void
s_before_answer (void *arg)
{
    bx_drain_monitor ((broker_t *) arg);
}

//  A task key lives while its task attempt runs on the governor that
//  registered it (auth.h).
static bool
s_task_key_live (void *arg, const auth_taskref_t *ref)
{
    broker_t *self = (broker_t *) arg;
    task_t *task = graph_task (self->graph, ref->task);
    return task && task->attempt == ref->attempt && task->gov && task->gov->id == ref->gov
        && (task->state == TASK_ASSIGNED || task->state == TASK_RUNNING);
}

//  With keys, every message is checked against the key its connection
//  authenticated with: the peer's key must be the one it said HELLO with,
//  and still in the keyring. True if the message was refused (answered).
static bool
s_auth_refused (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t req)
{
    const char *user = sq_msg_user (&msg->frames [1]);
    if (!user || strcmp (user, peer->key)) {
        //  Another connection took the identity of one that is gone.
        bx_peer_end (self, peer, "its connection was replaced by another key's");
        bx_reply_error (self, sq_msg_data (msg, 0), sq_msg_size (msg, 0), req, SQ_E_HELLO,
                       "say HELLO first (this connection is unknown to the broker)", 0);
        return true;
    }
    uint64_t generation = auth_generation (self->auth);
    if (peer->auth_gen == generation && !peer->task_key)
        return false;
    const sq_keyentry_t *entry = auth_find (self->auth, peer->key, strlen (peer->key));
    if (!entry && peer->task_key) {
        //  The task that was given this key ended (or its key expired).
        sq_info ("client %u (%s): its task's key is no longer valid", peer->id, peer->name);
        bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_DENIED,
                        "this task's key is no longer valid: the task attempt it was made "
                        "for ended (or it expired)", 0);
        bx_peer_end (self, peer, "its task's key is no longer valid");
        return true;
    }
    bool same_tenant = entry && strcmp (entry->tenant, peer->tenant? peer->tenant: "") == 0;
    if (entry && entry->role == peer->role && same_tenant) {
        peer->auth_gen = generation;
        return false;
    }
    //  A key whose role or tenant changed is treated as revoked: the
    //  connection ends and the client must connect again to be the new
    //  tenant (its sessions stay the old tenant's: it cannot resume them).
    const char *why = !entry? "its key was removed from the authorized keys"
                    : entry->role != peer->role? "its key's role changed"
                    : "its key's tenant changed";
    sq_info ("%s %u (%s): %s", peer->kind == PEER_CLIENT? "client": "governor", peer->id,
             peer->name, why);
    bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_DENIED,
                   !entry? "this key is no longer authorized"
                   : "this key's role or tenant changed: connect again", 0);
    bx_peer_end (self, peer, !entry? "its key is no longer authorized": why);
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
        bx_reply_error (self, identity, identity_size, req, SQ_E_TOO_LARGE,
                       "message has more frames than the broker accepts", 0);
        return;
    }
    char key [BX_KEY_SIZE];
    bx_identity_key (identity, identity_size, key);
    peer_t *peer = (peer_t *) zhashx_lookup (self->peers, key);
    if (peer && self->auth && s_auth_refused (self, peer, msg, req))
        return;
    if (!peer) {
        if (!readable)
            bx_reply_error (self, identity, identity_size, 0, SQ_E_PROTOCOL,
                           "frame 0 is not a msgpack array starting with a message type", 0);
        else
            bx_hello (self, msg, key);
        //  A connection whose HELLO was accepted is no longer one a flood
        //  of strangers can push out (conns.h).
        conns_active (self->conns, msg->srcfd, zhashx_lookup (self->peers, key) != NULL,
                      bx_now ());
        return;
    }
    if (!readable) {
        if (peer->kind == PEER_CLIENT)
            bx_reply_error (self, identity, identity_size, 0, SQ_E_PROTOCOL,
                           "frame 0 is not a msgpack array starting with a message type", 0);
        else
            sq_warn ("governor %u: unreadable message ignored", peer->id);
        return;
    }
    if (msg->srcfd != peer->fd) {
        bx_learn_fd (self, peer, msg->srcfd);
        conns_active (self->conns, msg->srcfd, true, bx_now ());
    }
    if (peer->kind == PEER_GOVERNOR)
        bx_governor_message (self, peer, msg, type);
    else
        bx_client_message (self, peer, msg, type, req);
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
        bx_send_keys (self, self->govs [i]);
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
    jobs_recovered (self);
    //  FETCHes that waited for the governors go to the watches now (an
    //  object none of them held is being recomputed: they wait for that).
    while (self->fetches) {
        s_fetch_t *fetch = self->fetches;
        while (fetch && uploads_awaited (self->uploads, fetch->key))
            fetch = fetch->next;
        if (!fetch)
            break;
        bx_fetches_release (self, fetch->key);
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

//  --------------------------------------------------------------------------
//  The reactor's periodic jobs. Each tick returns when it wants to run next
//  (ms, -1: not until something happens).

//  Governors that missed their heartbeats end; the others hear from us if
//  they heard nothing for a heartbeat; suspect connections are probed.
static int64_t
s_tick_heartbeats (broker_t *self, int64_t now)
{
    int64_t dead_after = (int64_t) self->config.heartbeat_ms * self->config.liveness;
    for (size_t i = 0; i < self->n_govs; ) {
        gov_t *gov = self->govs [i];
        if (now - gov->last_recv > dead_after) {
            char key [BX_KEY_SIZE];
            bx_identity_key (gov->identity, gov->identity_size, key);
            peer_t *peer = (peer_t *) zhashx_lookup (self->peers, key);
            if (peer) {
                bx_peer_end (self, peer, "missed heartbeats");
                continue;   //  slot i now holds another governor
            }
        }
        if (now - gov->last_send >= self->config.heartbeat_ms) {
            sq_wbuf_reset (&self->out);
            sq_bare_encode (&self->out, SQ_MSG_HEARTBEAT);
            bx_send_to (self, gov->identity, gov->identity_size, &self->out, NULL);
            gov->last_send = now;
        }
        i++;
    }
    if (self->n_fanouts)
        bx_fanouts_check (self, now);
    bx_check_suspects (self, now);
    return now + self->config.heartbeat_ms / 4 + 1;
}

static int64_t
s_tick_rebalance (broker_t *self, int64_t now)
{
    if (!self->recovering)
        scheduler_rebalance (self->scheduler, s_retract, self);
    return now + S_REBALANCE_MS;
}

static int64_t
s_tick_reload (broker_t *self, int64_t now)
{
    (void) now;
    if (atomic_exchange (&self->reload, 0))
        s_reload_keys (self);
    return -1;
}

static int64_t
s_tick_recover (broker_t *self, int64_t now)
{
    if (self->recovering
    &&  (persist_expected (self->persist) == 0 || now >= self->recover_deadline))
        s_recovered (self);
    return self->recovering? self->recover_deadline: -1;
}

static int64_t
s_tick_grace (broker_t *self, int64_t now)
{
    bx_sessions_expire (self, now);
    return now + S_GRACE_CHECK_MS;
}

static int64_t
s_tick_journal (broker_t *self, int64_t now)
{
    (void) now;
    if (self->journal) {
        journal_tick (self->journal);
        if (journal_compaction_due (self->journal))
            s_compact (self);
    }
    return -1;
}

static int64_t
s_tick_conns (broker_t *self, int64_t now)
{
    return conns_tick (self->conns, now);
}

static int64_t
s_tick_watches (broker_t *self, int64_t now)
{
    return watches_expire (self->watches, now);
}

//  In the order they run. A job `every_turn` is asked each turn, since a
//  message may have moved its deadline (a new wait, a drain begun); the
//  others run when their deadline comes (or bx_timer_soon).
static const struct {
    int64_t (*tick) (broker_t *self, int64_t now);
    bool every_turn;
} s_timer_table [BX_TIMERS] = {
    [BX_TIMER_HEARTBEAT] = { s_tick_heartbeats, false },
    [BX_TIMER_REBALANCE] = { s_tick_rebalance, false },
    [BX_TIMER_RELOAD]    = { s_tick_reload, true },
    [BX_TIMER_RECOVER]   = { s_tick_recover, true },
    [BX_TIMER_GRACE]     = { s_tick_grace, false },
    [BX_TIMER_JOURNAL]   = { s_tick_journal, true },
    [BX_TIMER_DRAIN]     = { drain_tick, true },
    [BX_TIMER_PLACE]     = { place_tick, true },
    [BX_TIMER_CONNS]     = { s_tick_conns, true },
    [BX_TIMER_WATCHES]   = { s_tick_watches, true },
    [BX_TIMER_UPLOADS]   = { bx_uploads_expire, true },
    [BX_TIMER_JOBS]      = { jobs_tick, true },
};

void
bx_timer_soon (broker_t *self, bx_timer_t timer)
{
    self->timer_due [timer] = 0;
}

//  Runs the jobs that are due; returns the earliest next deadline.
static int64_t
s_timers (broker_t *self, int64_t now)
{
    int64_t next = INT64_MAX;
    for (int i = 0; i < BX_TIMERS; i++) {
        if (s_timer_table [i].every_turn || now >= self->timer_due [i])
            self->timer_due [i] = s_timer_table [i].tick (self, now);
        if (self->timer_due [i] >= 0 && self->timer_due [i] < next)
            next = self->timer_due [i];
    }
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
        char key [BX_KEY_SIZE];
        bx_identity_key (gov->identity, gov->identity_size, key);
        peer_t *peer = (peer_t *) zhashx_lookup (self->peers, key);
        if (peer)
            bx_peer_end (self, peer, "unreachable (not reading, or gone)");
        else
            i++;
    }
}

int
broker_run (broker_t *self)
{
    int64_t next_timer = bx_now ();
    while (!atomic_load (&self->stopping) && !zsys_interrupted) {
        int64_t now = bx_now ();
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
        bx_drain_monitor (self);
        for (int n = 0; n < S_MAX_PER_TURN; n++) {
            if (sq_msg_recv (&self->msg, self->router, ZMQ_DONTWAIT, SQ_MAX_FRAMES + 1))
                break;
            self->messages++;
            s_handle (self, &self->msg);
        }
        sq_msg_close (&self->msg);
        if (!self->recovering && scheduler_has_work (self->scheduler)) {
            eventlog_tick (self->events);
            scheduler_run (self->scheduler, bx_assign, self);
        }
        now = bx_now ();
        if (!self->recovering)
            scheduler_tick (self->scheduler, now);
        next_timer = s_timers (self, now);
        //  Actors' calls go after everything that could change their hosts.
        if (!self->recovering && graph_actors_pending (self->graph)) {
            graph_actors_settle (self->graph, bx_assign, self);
            if (graph_actors_pending (self->graph))
                next_timer = now;
        }
        //  Array elements: made tasks as others end.
        if (self->jobs_dirty && !self->recovering) {
            if (jobs_settle (self) || self->jobs_dirty)
                next_timer = now;
        }
        //  Stream readers whose producers started this turn.
        if (!self->recovering && self->n_stream_ready) {
            bx_streams_place (self);
            if (self->n_stream_ready)
                next_timer = now + 100;
        }
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
    bx_peer_destroy ((peer_t **) item);
}

//  Endpoints only this machine can reach: without keys the broker binds
//  nothing else, unless told it is fine (--insecure).
bool
bx_local_endpoint (const char *endpoint)
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
    //  Restored sessions count in their tenants' shares from now on.
    size_t cursor = 0;
    session_t *session;
    while ((session = graph_session_next (self->graph, &cursor)))
        if (bx_session_share (self, session)) {
            sq_error ("journal: out of memory");
            return -1;
        }
    if (journal_restarted (self->journal)) {
        persist_replayed (self->persist, bx_now ());
        jobs_after_replayed (self);
        self->recovering = true;
        self->recover_deadline = bx_now () + self->config.reattach_wait_ms;
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
    self->next_drain = -1;
    self->next_place = -1;
    sq_msg_init (&self->msg);
    sq_wbuf_init (&self->out);
    graph_hooks_t hooks = {
        self, bx_hook_task_ready, bx_hook_task_stop, bx_hook_task_done, bx_hook_object_drop,
        bx_hook_object_copy, bx_hook_stream_unread
    };
    watches_hooks_t whooks = { self, bx_watch_reply, bx_watch_released, s_watch_where };
    self->graph = graph_new (&hooks);
    self->scheduler = self->graph? scheduler_new (self->graph): NULL;
    if (self->scheduler
    &&  scheduler_set_resource_wait (self->scheduler, config->resource_wait_ms, S_RESOURCE_WAITS_MAX))
        scheduler_destroy (&self->scheduler);
    self->watches = self->graph? watches_new (self->graph, &whooks): NULL;
    self->persist = self->graph? persist_new (self->graph): NULL;
    self->peers = zhashx_new ();
    self->by_fd = sq_idmap_new ();
    //  Connections stay below the descriptors this process may have, so
    //  that libzmq never fails to accept (it would spin): the soft limit
    //  goes up to the hard one first.
    conns_limits_t limits;
    conns_limits_for (conns_raise_nofile (), S_FD_RESERVE, &limits);
    self->conns = conns_new (&limits, "broker");
    self->uploads = uploads_new (config->upload_timeout_ms);
    self->tenancy = tenancy_new (config->tenant_quotas, config->n_tenant_quotas);
    self->ctx = zmq_ctx_new ();
    if (!self->graph || !self->scheduler || !self->watches || !self->peers || !self->persist
    ||  !self->by_fd || !self->conns || !self->uploads || !self->tenancy || !self->ctx) {
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
    if (!config->secret_key && !config->insecure && !bx_local_endpoint (config->listen)) {
        sq_error ("refusing to listen on %s without keys: anyone who reaches it could run any "
                  "program on every governor. Give --secret-key and --authorized-keys "
                  "(docs/security.md), listen on 127.0.0.1, or accept it with --insecure",
                  config->listen);
        broker_destroy (&self);
        return NULL;
    }
    if (!config->secret_key && config->insecure && !bx_local_endpoint (config->listen))
        sq_warn ("INSECURE: listening on %s without keys: anyone who reaches it can run "
                 "any program on every governor", config->listen);
    //  The ZAP handler must be bound before the first handshake can come.
    if (config->secret_key
    &&  !(self->auth = auth_new (self->ctx, config->secret_key, config->authorized_keys))) {
        broker_destroy (&self);
        return NULL;
    }
    if (self->auth) {
        auth_set_live (self->auth, s_task_key_live, self);
        auth_set_before_answer (self->auth, s_before_answer, self);
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
    //  A connection that has not finished its handshake in a few seconds
    //  is closed: idle connections cannot pile up (conns.h).
    int handshake_ms = S_HANDSHAKE_MS;
    zmq_setsockopt (self->router, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof handshake_ms);
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
    //  libzmq's I/O thread sends each event with a blocking send while it
    //  holds the monitor's lock: a full pipe would stall every socket of
    //  the broker until the reactor reads. A deep one (two events per
    //  connection that comes and goes) absorbs a long reactor turn.
    int events_hwm = 100000;
    self->monitor = zmq_socket (self->ctx, ZMQ_PAIR);
    zmq_setsockopt (self->monitor, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt (self->monitor, ZMQ_RCVHWM, &events_hwm, sizeof events_hwm);
    zmq_connect (self->monitor, monitor_endpoint);
    if (zmq_bind (self->router, config->listen)) {
        if (errno == EADDRINUSE)
            sq_error ("cannot listen on %s: the port is in use (another program, or another "
                      "squall broker, holds it)", config->listen);
        else
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
    if (config->http && !(self->http = http_new (config->http, token [0]? token: NULL,
                                                  config->secret_key || config->insecure,
                                                  self, self->events))) {
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
    tenancy_destroy (&self->tenancy);
    scheduler_destroy (&self->scheduler);
    if (self->peers) {
        for (peer_t *p = (peer_t *) zhashx_first (self->peers); p; p = (peer_t *) zhashx_next (self->peers))
            gov_destroy (&p->gov);
        zhashx_destroy (&self->peers);
    }
    sq_idmap_destroy (&self->by_fd);
    sq_idmap_destroy (&self->nested);
    free (self->nested_ended);
    bx_fanouts_destroy (self);
    conns_destroy (&self->conns);
    uploads_destroy (&self->uploads);
    free (self->stream_ready);
    persist_destroy (&self->persist);
    auth_destroy (&self->auth);
    while (self->fetches) {
        s_fetch_t *next = self->fetches->next;
        free (self->fetches);
        self->fetches = next;
    }
    place_destroy_all (self);
    free (self->jobwaits);
    for (size_t i = 0; i < self->n_declared; i++)
        free (self->declared [i].name);
    sq_msg_release (&self->msg);
    sq_wbuf_release (&self->out);
    //  The monitor stops while its reader still exists: closed first, an
    //  event sent to it (peers leave as we stop) would block the I/O
    //  thread with the monitor's lock held, and zmq_socket_monitor would
    //  wait for that lock for ever. Reading what is pending first frees a
    //  send blocked on a full pipe.
    if (self->router && self->monitor) {
        sq_msg_t event;
        sq_msg_init (&event);
        while (sq_msg_recv (&event, self->monitor, ZMQ_DONTWAIT, 4) == 0)
            ;
        sq_msg_release (&event);
        zmq_socket_monitor (self->router, NULL, 0);
    }
    if (self->monitor)
        zmq_close (self->monitor);
    if (self->router)
        zmq_close (self->router);
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
    size_t n = 0, cap = 0;
    sq_info_session_t *rows = NULL;
    for (peer_t *p = (peer_t *) zhashx_first (self->peers); p; p = (peer_t *) zhashx_next (self->peers)) {
        if (p->kind != PEER_CLIENT)
            continue;
        for (uint32_t i = 0; i < p->n_sessions; i++) {
            session_t *session = graph_session (self->graph, p->sessions [i]);
            if (!session)
                continue;
            if (n == cap && sq_grow ((void **) &rows, &cap, n + 1, sizeof *rows, 64, SIZE_MAX))
                break;                  //  out of memory: the dashboard shows fewer
            rows [n++] = (sq_info_session_t) {
                session->id, p->id, p->name? p->name: "", session->n_tasks,
                session->unfinished, session->finished, session->failed
            };
        }
    }
    sq_pack_sessions (pk, rows, n);
    free (rows);
}
