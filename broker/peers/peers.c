/*  peers: the broker's connections: clients and governors by ROUTER
    identity, disconnects from the socket monitor, suspects probed, HELLO
    (roles from keys, reattach), a peer's end. */
#include "broker_internal.h"
#include "jobs.h"

//  --------------------------------------------------------------------------
//  Peers

void
bx_peer_destroy (peer_t **peer_p)
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
    //  A goodbye is how every clean stop ends, not a loss.
    if (strcmp (why, BX_GOODBYE) == 0)
        sq_info ("governor %u (%s) left: %s", gov->id, gov->name, why);
    else
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
        if (task->state == TASK_RUNNING && task->actor_host) {
            //  An actor's instance is gone with its state: it starts again
            //  only as often as its max_retries (restarts) allows.
            if (extra && extra->retries < extra->max_retries) {
                extra->retries++;
                graph_task_requeue (self->graph, task);
                persist_attempt (self->persist, task);
                continue;
            }
            char message [300];
            snprintf (message, sizeof message, "actor %u was lost with governor %u (%s) after "
                      "%u restart(s)", sq_key_id (task->key), gov->id, gov->name,
                      extra? extra->retries: 0);
            gov_task_remove (gov, task->key);
            task->gov = NULL;
            graph_task_failed (self->graph, task, SQ_E_ACTOR_LOST, message);
            continue;
        }
        if (task->state == TASK_RUNNING
        &&  (!extra || ++extra->crashes >= self->config.allowed_failures)) {
            char message [200];
            snprintf (message, sizeof message,
                      "task was running on %u governors that died; suspected of killing them",
                      extra? extra->crashes: 1);
            gov_task_remove (gov, task->key);
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
    //  Kept outputs whose only copy it held are computed again (lineage):
    //  said, so that tasks seen running twice after a governor left (a
    //  second SIGTERM, a crash) are explained in the log.
    uint64_t recomputed = graph_recomputed (self->graph);
    graph_forget_governor (self->graph, gov);
    recomputed = graph_recomputed (self->graph) - recomputed;
    if (recomputed > 0)
        sq_warn ("governor %u (%s) held the only copy of outputs still needed: "
                 "%llu task(s) run again", gov->id, gov->name,
                 (unsigned long long) recomputed);
    gov_destroy (&peer->gov);
}

void
bx_session_close (broker_t *self, session_t *session)
{
    persist_close (self->persist, session->id);
    watches_drop_session (self->watches, session);
    jobs_session_closing (self, session);
    graph_session_close (self->graph, &session);
}

//  A client that said BYE closes its sessions; one whose connection just
//  went leaves them detached for --session-grace ms, in case it comes back
//  (a lost link, a broker restart) and RESUMEs them.
static void
s_client_gone (broker_t *self, peer_t *peer)
{
    watches_drop_client (self->watches, peer);
    jobs_drop_client (self, peer);
    bx_fanouts_drop_client (self, peer);
    //  A task's client (its key dies with the task's attempt) does not come
    //  back: its sessions close now, cancelling the children nobody waits
    //  for (its task was cancelled or lost, or returned without them).
    bool close = peer->said_bye || peer->task_key || self->config.session_grace_ms == 0;
    int64_t now = bx_now ();
    for (uint32_t i = 0; i < peer->n_sessions; i++) {
        session_t *session = graph_session (self->graph, peer->sessions [i]);
        if (session && jobs_kept (session)) {
            //  A job outlives its client: no grace, it is kept.
            session->client = NULL;
            session->detached_at = 0;
            sq_info ("job %u goes on without its client", session->id);
        }
        else
        if (session && close)
            bx_session_close (self, session);
        else
        if (session) {
            session->client = NULL;
            session->detached_at = now;
            sq_info ("session %u waits %d ms for its client to resume it (`squall cancel %u` "
                     "ends it now)", session->id, self->config.session_grace_ms, session->id);
        }
    }
    sq_info ("client %u (%s) left; %u session(s) %s", peer->id, peer->name, peer->n_sessions,
             close? "closed": "kept for it to resume");
}

//  Detached sessions whose client did not come back in time are closed.
void
bx_sessions_expire (broker_t *self, int64_t now)
{
    size_t cursor = 0;
    session_t *session, *expired [64];
    size_t n = 0;
    while (n < 64 && (session = graph_session_next (self->graph, &cursor)))
        if (!session->client && session->detached_at && !jobs_kept (session)
        &&  now - session->detached_at >= self->config.session_grace_ms)
            expired [n++] = session;
    for (size_t i = 0; i < n; i++) {
        sq_info ("session %u closed: its client did not come back within %d ms",
                 expired [i]->id, self->config.session_grace_ms);
        bx_session_close (self, expired [i]);
    }
    jobs_expire (self);
}

//  Ends a peer: its sessions close or its tasks go elsewhere.
void
bx_peer_end (broker_t *self, peer_t *peer, const char *why)
{
    char key [BX_KEY_SIZE];
    bx_identity_key (peer->identity, peer->identity_size, key);
    if (peer->fd >= 0 && sq_idmap_lookup (self->by_fd, (uint64_t) peer->fd) == peer)
        sq_idmap_remove (self->by_fd, (uint64_t) peer->fd);
    if (peer->kind == PEER_GOVERNOR)
        s_governor_lost (self, peer, why);
    else
        s_client_gone (self, peer);
    zhashx_delete (self->peers, key);     //  destructor frees the peer
}

//  A dropped connection's peer becomes a suspect (bx_check_suspects probes it).
static void
s_monitor_event (void *arg, uint16_t type, uint32_t value)
{
    broker_t *self = (broker_t *) arg;
    if (type != ZMQ_EVENT_DISCONNECTED)
        return;
    peer_t *peer = (peer_t *) sq_idmap_remove (self->by_fd, value);
    if (peer && !peer->suspect_since)
        peer->suspect_since = bx_now ();
}

void
bx_drain_monitor (broker_t *self)
{
    conns_drain (self->conns, self->monitor, SIZE_MAX, bx_now (), s_monitor_event, self);
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
void
bx_check_suspects (broker_t *self, int64_t now)
{
    peer_t *peer = (peer_t *) zhashx_first (self->peers);
    while (peer) {
        peer_t *next = (peer_t *) zhashx_next (self->peers);
        if (peer->suspect_since) {
            if (!s_probe (self, peer)) {
                //  zhashx_delete inside bx_peer_end invalidates the cursor.
                bx_peer_end (self, peer, "connection closed");
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
void
bx_learn_fd (broker_t *self, peer_t *peer, int fd)
{
    if (fd < 0)
        return;
    peer_t *old = (peer_t *) sq_idmap_lookup (self->by_fd, (uint64_t) fd);
    if (old == peer)
        return;
    if (old) {
        sq_idmap_remove (self->by_fd, (uint64_t) fd);
        if (!old->suspect_since)
            old->suspect_since = bx_now ();
    }
    if (peer->fd >= 0 && sq_idmap_lookup (self->by_fd, (uint64_t) peer->fd) == peer)
        sq_idmap_remove (self->by_fd, (uint64_t) peer->fd);
    peer->fd = fd;
    sq_idmap_insert (self->by_fd, (uint64_t) fd, peer);
}

bool
bx_resource_ok (void *arg, mpr_str_t name, uint64_t amount)
{
    broker_t *self = (broker_t *) arg;
    //  A request above what every governor seen offered may still be met:
    //  a cluster starting, or one that grows with its work (`squall alloc`
    //  starting a gpu governor once gpu tasks wait). It waits like any
    //  task no connected governor fits (scheduler.h); only without a wait
    //  is it refused here, at once.
    if (self->config.resource_wait_ms > 0)
        return true;
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
void
bx_send_keys (broker_t *self, gov_t *gov)
{
    const uint8_t *const *governors, *const *clients;
    uint32_t n_governors, n_clients;
    auth_keysets (self->auth, &governors, &n_governors, &clients, &n_clients);
    sq_wbuf_reset (&self->out);
    sq_keyset_encode (&self->out, governors, n_governors, clients, n_clients);
    bx_send_to (self, gov->identity, gov->identity_size, &self->out, NULL);
}

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
    gov_t *stale = bx_gov_by_id (self, hello->previous_id);
    if (stale) {
        char hex [BX_KEY_SIZE];
        bx_identity_key (stale->identity, stale->identity_size, hex);
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

//  With keys: a connection whose key was removed from the keyring (SIGHUP)
//  outlives its peer, which its first message after ended (ZeroMQ cannot
//  close one connection of a ROUTER). Everything it sends is refused as
//  such, never taken for a connection the broker forgot (SQ_E_HELLO, which
//  a client answers by reconnecting and resuming). True if refused.
static bool
s_key_revoked (broker_t *self, sq_msg_t *msg, uint32_t req)
{
    if (!self->auth)
        return false;
    const char *user = sq_msg_user (&msg->frames [1]);
    if (user && auth_find (self->auth, user, strlen (user)))
        return false;
    bx_reply_error (self, sq_msg_data (msg, 0), sq_msg_size (msg, 0), req, SQ_E_DENIED,
                    "this key is no longer authorized", 0);
    return true;
}

//  A governor connected with this key, if any. One whose connection is
//  gone (ZeroMQ no longer knows its identity) is ended first: a governor
//  restarted at once after a crash is its own successor, not a second
//  one. A mere suspect (the socket monitor saw some connection on its
//  descriptor close) still counts while the probe reaches it: else a
//  stolen key, timed well, could push the real governor out.
static const gov_t *
s_live_governor (broker_t *self, const uint8_t *key)
{
    for (size_t i = 0; i < self->n_govs; i++) {
        gov_t *gov = self->govs [i];
        if (!gov->has_key || memcmp (gov->key, key, SQ_KEY_LEN))
            continue;
        char hex [BX_KEY_SIZE];
        bx_identity_key (gov->identity, gov->identity_size, hex);
        peer_t *peer = (peer_t *) zhashx_lookup (self->peers, hex);
        if (!peer)
            return gov;
        if (!s_probe (self, peer)) {
            bx_peer_end (self, peer, "its key said HELLO again on a new connection");
            i = (size_t) -1;    //  the list changed: look again
            continue;
        }
        return gov;
    }
    return NULL;
}

void
bx_hello (broker_t *self, sq_msg_t *msg, const char *key)
{
    const void *identity = sq_msg_data (msg, 0);
    size_t identity_size = sq_msg_size (msg, 0);
    uint32_t type = 0, req = 0;
    sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req);
    if (type != SQ_MSG_HELLO && s_key_revoked (self, msg, req))
        return;
    if (type != SQ_MSG_HELLO) {
        bx_reply_error (self, identity, identity_size, req, SQ_E_HELLO,
                       "say HELLO first (this connection is unknown to the broker)", 0);
        return;
    }
    sq_hello_t hello;
    sq_errbuf_t err;
    int code;
    if (sq_hello_decode (&hello, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &code, &err)) {
        sq_info ("HELLO refused: %s", err.text);
        bx_reply_error (self, identity, identity_size, req, code, err.text, 0);
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
            bx_reply_error (self, identity, identity_size, req, SQ_E_DENIED, why, 0);
            return;
        }
    }
    bool reattach = hello.governor && s_may_reattach (self, &hello, entry? entry->z85: "");
    if (hello.governor && entry && !self->config.shared_governor_keys) {
        const gov_t *live = s_live_governor (self, entry->key);
        if (live) {
            char why [600];
            snprintf (why, sizeof why, "this governor key is already connected as governor "
                      "%u (%s): one governor, one key", live->id, live->name);
            sq_warn ("HELLO of governor %.*s refused: %s", (int) hello.name.len, hello.name.ptr,
                     why);
            bx_reply_error (self, identity, identity_size, req, SQ_E_DENIED, why, 0);
            return;
        }
    }
    peer_t *peer = (peer_t *) calloc (1, sizeof *peer);
    if (!peer) {
        bx_reply_error (self, identity, identity_size, req, SQ_E_NOMEM, "out of memory", 0);
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
        peer->task_key = auth_is_task_key (self->auth, entry->z85, SQ_Z85_LEN);
    }
    if (hello.governor) {
        if (self->n_govs == sizeof self->govs / sizeof self->govs [0]) {
            bx_peer_destroy (&peer);
            bx_reply_error (self, identity, identity_size, req, SQ_E_BUSY, "too many governors", 0);
            return;
        }
        peer->gov = gov_new (peer->id, &hello, identity, identity_size, self->config.prefetch);
        if (peer->gov)
            peer->gov->queue_us = self->config.queue_us;
        if (!peer->gov || (reattach && reattach_begin (peer->gov))) {
            gov_destroy (&peer->gov);
            bx_peer_destroy (&peer);
            bx_reply_error (self, identity, identity_size, req, SQ_E_NOMEM, "out of memory", 0);
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
        gov->last_recv = gov->last_send = bx_now ();
        gov->joined = (int64_t) time (NULL);
        self->govs [self->n_govs++] = gov;
        s_declare (self, SQ_RES_CPUS, gov->cpus);
        for (uint32_t i = 0; i < gov->n_resources; i++)
            s_declare (self, gov->resources [i].name.ptr, gov->resources [i].amount);
        //  A reattaching governor is placed on once its inventory is in
        //  (and a restarted broker waits for it until then).
        if (!reattach) {
            scheduler_governor_add (self->scheduler, gov);
            bx_timer_soon (self, BX_TIMER_REBALANCE);  //  a newcomer gets queued work at once
        }
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
    bx_learn_fd (self, peer, msg->srcfd);
    sq_wbuf_reset (&self->out);
    if (hello.governor)
        sq_welcome_encode_governor (&self->out, req, peer->id, (uint32_t) self->config.heartbeat_ms,
                                    self->config.inline_max, self->cluster, self->epoch, reattach,
                                    self->auth? peer->gov->secret: NULL, sq_wall_ms ());
    else
        sq_welcome_encode_client (&self->out, req, peer->id, self->config.inline_max,
                                  self->cluster, self->epoch, peer->tenant);
    bx_send_to (self, identity, identity_size, &self->out, NULL);
    if (hello.governor && self->auth)
        bx_send_keys (self, peer->gov);
}
