/*  requests: what clients ask the broker (docs/protocol.md section 5),
    with the tenancy checks every request on a session goes through.

    Over 800 lines: one handler per client request, each short, sharing the
    session lookup and tenancy check (RESTART's and RUN's wait for their
    governors: fanout.c). */
#include "broker_internal.h"
#include "drain.h"
#include "place.h"
#include "jobs.h"
#include "grow.h"

//  --------------------------------------------------------------------------
//  Client requests

//  Whether a session may be seen by this peer: always without keys; else
//  a session of its own tenant (an admin key sees every tenant).
bool
bx_same_tenant (const peer_t *peer, const session_t *session)
{
    if (!session->tenant || peer->role == SQ_ROLE_ADMIN)
        return true;
    return peer->tenant && strcmp (peer->tenant, session->tenant) == 0;
}

//  Tenants are counted with keys (tenants share the broker) or quotas;
//  otherwise nothing is, and the graph's hot paths skip it.
static bool
s_tenancy_on (broker_t *self)
{
    return self->auth || self->config.n_tenant_quotas;
}

int
bx_session_share (broker_t *self, session_t *session)
{
    if (session->share || !s_tenancy_on (self))
        return 0;
    share_t *share = tenancy_share (self->tenancy, session->tenant);
    if (!share)
        return -1;
    graph_session_set_share (self->graph, session, share);
    return 0;
}

//  Whether the session is another tenant's: to that peer it does not exist
//  (the same answer as an unknown session, so that no reply tells a tenant
//  which sessions others have).
static bool
s_foreign (const peer_t *peer, const session_t *session)
{
    return session->tenant && !(peer->tenant && strcmp (peer->tenant, session->tenant) == 0);
}

static session_t *
s_client_session (broker_t *self, peer_t *peer, uint32_t id, uint32_t req)
{
    session_t *session = graph_session (self->graph, id);
    if (session && session->client == peer)
        return session;
    char message [160];
    if (session && !s_foreign (peer, session))
        snprintf (message, sizeof message, "session %u is not open on this connection "
                  "(RESUME it with its token)", id);
    else
        snprintf (message, sizeof message, "session %u is not open on this connection", id);
    bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_SESSION, message, 0);
    return NULL;
}

//  A SUBMIT under its tenant's quotas: the constants it adds must fit, and
//  the results the tenant holds on governors must be under their cap (what
//  a task will store is not known before it runs). SQ_OK, or SQ_E_BUSY
//  with the message.
static int
s_submit_quota (broker_t *self, session_t *session, const sq_submit_t *submit, zmq_msg_t *payloads,
                size_t n_payloads, char *message, size_t size)
{
    (void) self;
    share_t *share = session->share;
    if (!share || (!share->max_constants && !share->max_stored))
        return SQ_OK;
    uint64_t constants = 0;
    for (uint32_t i = 0; i < submit->n_objects; i++) {
        const sq_object_spec_t *object = &submit->objects [i];
        if (object->frame == SQ_FRAME_UPLOADED)
            constants += object->size;
        else
        if (object->frame > 0 && (size_t) object->frame <= n_payloads)
            constants += zmq_msg_size (&payloads [object->frame - 1]);
    }
    if (share->max_constants && constants
    &&  share->constants + constants > share->max_constants) {
        tenancy_refusal (share, "constants", share->max_constants, share->constants, constants,
                         true, message, size);
        return SQ_E_BUSY;
    }
    if (share->max_stored) {
        uint64_t stored = share->stored;
        if (stored >= share->max_stored) {
            tenancy_refusal (share, "stored", share->max_stored, stored, 0, true, message, size);
            return SQ_E_BUSY;
        }
    }
    return SQ_OK;
}

static void
s_client_submit (broker_t *self, peer_t *peer, sq_msg_t *msg)
{
    sq_submit_t submit;
    sq_errbuf_t err;
    uint32_t type, req = 0;
    sq_proto_peek (sq_msg_data (msg, 1), sq_msg_size (msg, 1), &type, &req);
    if (sq_submit_decode (&submit, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_PROTOCOL, err.text, 0);
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
                if (!bx_gov_by_id (self, submit.objects [i].governor)) {
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
            rc = s_submit_quota (self, session, &submit, msg->frames + 2, msg->n - 2,
                                 message, sizeof message);
        if (rc == SQ_OK)
            rc = graph_submit (self->graph, session, &submit, msg->frames + 2, msg->n - 2,
                               bx_resource_ok, self, message, sizeof message, &bad_id);
        int64_t now = bx_now ();
        for (uint32_t i = 0; i < submit.n_objects && n_uploads; i++) {
            if (submit.objects [i].frame != SQ_FRAME_UPLOADED)
                continue;
            uint64_t key = sq_key (session->id, submit.objects [i].id);
            gov_t *gov = bx_gov_by_id (self, submit.objects [i].governor);
            object_t *object = graph_object (self->graph, key);
            if (rc == SQ_OK && object && gov)
                bx_upload_claimed (self, object, gov, submit.objects [i].size, now);
            else
            if (rc != SQ_OK && !object && gov) {
                //  Refused: the bytes uploaded for it are nobody's (unless
                //  the id is an object of the session, refused as a duplicate).
                uploads_forget (self->uploads, key);
                bx_drop (gov, key);
            }
        }
        if (rc == SQ_OK) {
            persist_submit (self->persist, session->id, msg);
            jobs_submitted (self, session);
            eventlog_submit (self->events, session->id, submit.n_tasks, submit.n_objects);
            sq_debug ("session %u: %u tasks, %u objects submitted", session->id,
                      submit.n_tasks, submit.n_objects);
            bx_reply_nil (self, peer, submit.req);
        }
        else
            bx_reply_error (self, peer->identity, peer->identity_size, submit.req, rc,
                           message, bad_id);
    }
    sq_submit_release (&submit);
}

static void s_pack_info (broker_t *self, msgpack_packer *pk, const peer_t *viewer);

static void
s_client_info (broker_t *self, peer_t *peer, uint32_t req)
{
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    s_pack_info (self, &self->out.pk, peer);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  INFO's map; also the dashboard's view of the cluster (http.c), which
//  sees every tenant.
void
broker_pack_info (broker_t *self, msgpack_packer *pk)
{
    s_pack_info (self, pk, NULL);
}

//  viewer: the client asking (NULL: everything). With keys, a client sees
//  its own tenant's tasks, sessions, clients, objects, ready tasks, waits
//  and streams only. Counters summed over the cluster that name no session
//  (governors' load, watches, uploads, recomputed, blocked, the journal's)
//  are shown to all. Everyone sees its own tenant's usage and limits.
static void
s_pack_info (broker_t *self, msgpack_packer *pk, const peer_t *viewer)
{
    bool all = !viewer || !self->auth || viewer->role == SQ_ROLE_ADMIN;
    size_t clients = 0, sessions = 0;
    uint64_t objects = 0;
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
            if (bx_same_tenant (viewer, session)) {
                sessions++;
                objects += session->live_objects;
                for (int s = 0; s < TASK_STATE_COUNT_; s++)
                    counts [s] += session->counts [s];
            }
    }
    journal_stats_t js = { 0 };
    if (self->journal)
        journal_stats (self->journal, &js);
    //  Static: up to GOV_MAX governors is too much for the stack; one thread.
    static sq_info_gov_t govs [sizeof self->govs / sizeof self->govs [0]];
    for (size_t i = 0; i < self->n_govs; i++) {
        gov_t *gov = self->govs [i];
        govs [i] = (sq_info_gov_t) {
            .id = gov->id, .draining = gov->draining, .name = gov->name, .cpus = gov->cpus,
            .resources = gov->resources, .n_resources = gov->n_resources,
            .assigned = sq_idmap_size (gov->tasks), .running = gov->load.running,
            .queued = gov->load.queued, .piped = gov->load.piped, .memory = gov->load.memory,
            .spilled = gov->load.spilled, .shared = gov->load.shared, .objects = gov->load.objects,
            .tasks_done = gov->tasks_done, .tasks_run = gov->load.tasks, .joined = gov->joined,
            .data_endpoint = gov->data_endpoint, .serve_endpoint = gov->serve_endpoint
        };
    }
    const char *state_names [TASK_STATE_COUNT_];
    for (int s = 0; s < TASK_STATE_COUNT_; s++)
        state_names [s] = task_state_name ((task_state_t) s);
    //  Tasks waiting for a governor that fits (--resource-wait), the first
    //  S_INFO_WAITS of them (of the viewer's tenant) with what they need.
    size_t n_waits = scheduler_waiting_count (self->scheduler), shown = 0;
    uint64_t wait_key;
    int64_t wait_left;
    char wait_needs [S_INFO_WAITS][160];
    sq_info_wait_t waits [S_INFO_WAITS];
    for (size_t i = 0; i < n_waits && shown < S_INFO_WAITS; i++) {
        if (!scheduler_waiting_get (self->scheduler, i, &wait_key, &wait_left,
                                    wait_needs [shown], sizeof wait_needs [shown]))
            break;
        session_t *ws = graph_session (self->graph, sq_key_session (wait_key));
        if (all || (ws && bx_same_tenant (viewer, ws))) {
            waits [shown] = (sq_info_wait_t) {
                sq_key_session (wait_key), sq_key_id (wait_key), wait_needs [shown],
                wait_left > 0? (uint64_t) wait_left: 0
            };
            shown++;
        }
    }
    sq_info_stream_t streams [64];
    size_t n_streams = bx_streams_info (self, viewer, all, streams, 64);
    sq_info_t info = {
        .cluster = self->cluster, .epoch = self->epoch, .recovering = self->recovering,
        .secure = self->auth != NULL,
        .insecure = !self->auth && self->config.insecure && !bx_local_endpoint (self->config.listen),
        .journal_bytes = js.bytes, .journal_errors = js.errors, .version = "0.1.0",
        .govs = govs, .n_govs = self->n_govs,
        .state_names = state_names, .state_counts = counts, .n_states = TASK_STATE_COUNT_,
        .ready_queue = scheduler_ready_count (self->scheduler),
        .blocked = scheduler_blocked_count (self->scheduler),
        .waits = waits, .n_waits = shown,
        .streams = streams, .n_streams = n_streams,
        .sessions = sessions, .clients = clients, .objects = graph_object_count (self->graph),
        .watches = watches_count (self->watches), .recomputed = graph_recomputed (self->graph),
        .uploads = uploads_count (self->uploads),
        .copy_rate = (uint64_t) scheduler_copy_rate (self->scheduler),
        .streams_local = self->streams_local,
        .uploads_local = self->uploads_local,
        .copies_local = self->copies_local
    };
    share_t *share = viewer && s_tenancy_on (self)? tenancy_share (self->tenancy, viewer->tenant): NULL;
    if (!all) {
        //  Its own numbers only.
        info.ready_queue = counts [TASK_READY];
        info.objects = objects;
        info.streams_local = share? share->streams_local: 0;
        info.uploads_local = share? share->uploads_local: 0;
        info.copies_local = share? share->copies_local: 0;
    }
    uint64_t stored = share? share->stored: 0;
    sq_info_tenant_t tenant;
    if (share) {
        tenant = (sq_info_tenant_t) {
            .name = share->name, .weight = share->weight, .cpus = share->cpus,
            .stored = stored, .constants = share->constants,
            .sessions = share->sessions, .max_cpus = share->max_cpus,
            .max_stored = share->max_stored, .max_constants = share->max_constants,
            .max_sessions = share->max_sessions
        };
        info.tenant = &tenant;
    }
    sq_pack_info (pk, &info);
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
        //  A stream is one before, while and after it is written (released).
        if (q->type == SQ_MSG_KEEP && object && object->stream) {
            snprintf (message, sizeof message, "object %u is a stream: it cannot be kept, "
                      "only read while it is written", q->ids [i]);
            bx_reply_error (self, peer->identity, peer->identity_size, q->req,
                           SQ_E_INVALID, message, q->ids [i]);
            return;
        }
        if (!found) {
            snprintf (message, sizeof message, q->type == SQ_MSG_CANCEL
                      ? "id %u is not a task of session %u"
                      : "id %u is not an object of session %u (or was already released)",
                      q->ids [i], session->id);
            bx_reply_error (self, peer->identity, peer->identity_size, q->req,
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
    bx_reply_nil (self, peer, q->req);
}

bool
bx_peer_add_session (peer_t *peer, uint32_t id)
{
    if (peer->n_sessions >= S_MAX_SESSIONS)
        return false;
    if (peer->n_sessions == peer->cap_sessions
    &&  sq_grow32 ((void **) &peer->sessions, &peer->cap_sessions, (size_t) peer->n_sessions + 1,
                   sizeof *peer->sessions, 4, S_MAX_SESSIONS))
        return false;
    peer->sessions [peer->n_sessions++] = id;
    return true;
}

void
bx_peer_remove_session (peer_t *peer, uint32_t id)
{
    for (uint32_t i = 0; i < peer->n_sessions; i++)
        if (peer->sessions [i] == id) {
            peer->sessions [i] = peer->sessions [--peer->n_sessions];
            return;
        }
}

//  RESUME and ATTACH: the session moves onto this connection; its old one,
//  gone but not noticed yet, keeps it no longer (nor its watches).
int
bx_session_take (broker_t *self, peer_t *peer, session_t *session, uint32_t req,
                 const char *how)
{
    if (session->client == peer)
        return 0;
    if (!bx_peer_add_session (peer, session->id)) {
        bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_BUSY,
                        "too many sessions open on this connection", 0);
        return -1;
    }
    if (session->client) {
        peer_t *old = (peer_t *) session->client;
        bx_peer_remove_session (old, session->id);
        watches_drop_session (self->watches, session);
    }
    session->client = peer;
    session->detached_at = 0;
    sq_info ("session %u %s by client %u (%s)", session->id, how, peer->id, peer->name);
    return 0;
}

static void
s_client_open (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    uint32_t req = q->req;
    if (peer->n_sessions >= S_MAX_SESSIONS) {
        bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_BUSY,
                       "too many sessions open on this connection", 0);
        return;
    }
    bool counted = s_tenancy_on (self);
    share_t *share = counted? tenancy_share (self->tenancy, peer->tenant): NULL;
    if (share && share->max_sessions && share->sessions >= share->max_sessions) {
        char message [300];
        tenancy_refusal (share, "sessions", share->max_sessions, share->sessions, 0, false,
                         message, sizeof message);
        bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_BUSY, message, 0);
        return;
    }
    session_t *opened = share || !counted? graph_session_open (self->graph, peer): NULL;
    if (opened && (peer->tenant || peer->key [0])) {
        opened->tenant = peer->tenant? strdup (peer->tenant): NULL;
        opened->owner = strdup (peer->key);
    }
    if (opened && share)
        graph_session_set_share (self->graph, opened, share);
    if (!opened || (peer->tenant && !opened->tenant) || (peer->key [0] && !opened->owner)
    ||  !bx_peer_add_session (peer, opened->id)) {
        if (opened)
            graph_session_close (self->graph, &opened);
        bx_reply_error (self, peer->identity, peer->identity_size, req, SQ_E_NOMEM,
                       "out of memory", 0);
        return;
    }
    char message [300];
    int code = jobs_open (self, peer, opened, q, message, sizeof message);
    if (code) {
        bx_peer_remove_session (peer, opened->id);
        graph_session_close (self->graph, &opened);
        bx_reply_error (self, peer->identity, peer->identity_size, req, code, message, 0);
        return;
    }
    sq_random (opened->token, SQ_TOKEN_LEN);
    persist_session (self->persist, opened);
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    sq_pack_session_opened (&self->out.pk, opened->id, opened->token);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  RESUME: a client back after a lost connection (or a broker restart)
//  takes its session again, with the token it was given.
static void
s_client_resume (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    session_t *session = graph_session (self->graph, q->session);
    char message [300];
    if (!session || s_foreign (peer, session)) {
        snprintf (message, sizeof message, "session %u is not known to this broker: it was "
                  "closed, its client did not come back within the session grace, or the "
                  "broker restarted without its journal", q->session);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_SESSION, message, 0);
        return;
    }
    //  Constant time: the token is a secret.
    uint8_t diff = 0;
    for (int i = 0; i < SQ_TOKEN_LEN; i++)
        diff |= (uint8_t) (session->token [i] ^ (uint8_t) q->token.ptr [i]);
    if (diff) {
        snprintf (message, sizeof message, "session %u: access denied", q->session);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_DENIED, message, 0);
        return;
    }
    if (bx_session_take (self, peer, session, q->req, "resumed"))
        return;
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_record_pack (&self->out.pk, SQ_REC_RESUMED, &(sq_resumed_t) { session->max_id });
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  SESSION_CLOSE of a session open on another connection, or detached (its
//  client was killed and it waits --session-grace): a client of the same
//  tenant, or an admin, ends it by its id (`squall cancel SESSION`) instead
//  of letting its tasks run on. Without keys any client may.
static void
s_client_close_other (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    session_t *session = graph_session (self->graph, q->session);
    if (!session || !bx_same_tenant (peer, session)) {
        //  s_client_session's answer: denied, or not known, saying nothing
        //  of whose it is.
        s_client_session (self, peer, q->session, q->req);
        return;
    }
    char message [200];
    int code = jobs_close_check (session, message, sizeof message);
    if (code) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, code, message, 0);
        return;
    }
    peer_t *owner = (peer_t *) session->client;
    if (owner)
        bx_peer_remove_session (owner, session->id);
    sq_info ("session %u closed by client %u (%s)%s", session->id, peer->id, peer->name,
             owner? "": ", its own client gone");
    bx_session_close (self, session);
    bx_reply_nil (self, peer, q->req);
}

//  UPLOAD: which governor a constant goes to (the one with the least
//  memory in use), and with keys the capability to PUT it there.
static void
s_client_upload (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    gov_t *best = NULL;
    if (q->governor && !(best = bx_gov_by_id (self, q->governor))) {
        char message [120];
        snprintf (message, sizeof message, "governor %u is not connected", q->governor);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
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
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_RESOURCES,
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
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

//  RETIRE: drain a governor and let it leave (drain.h). With keys, only an
//  admin key may: it takes capacity from every tenant.
static void
s_client_retire (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    if (self->auth && peer->role != SQ_ROLE_ADMIN) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_DENIED,
                        "only an admin key may retire a governor", 0);
        return;
    }
    gov_t *gov = bx_gov_by_id (self, q->governor);
    if (!gov) {
        char message [80];
        snprintf (message, sizeof message, "governor %u is not connected", q->governor);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        message, q->governor);
        return;
    }
    char why [120];
    snprintf (why, sizeof why, "retired by client %u", peer->id);
    drain_start (self, gov, why);
    bx_reply_nil (self, peer, q->req);
}

//  LOG: where to read a task's output. Any session of the client's tenant
//  (a shell reads what a program submitted); another tenant's is answered
//  as an unknown one.
static void
s_client_log (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    char message [200];
    session_t *session = graph_session (self->graph, q->session);
    if (!session || s_foreign (peer, session)) {
        snprintf (message, sizeof message, "session %u is not open", q->session);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_SESSION, message, 0);
        return;
    }
    task_t *task = graph_task (self->graph, sq_key (session->id, q->id));
    if (!task) {
        snprintf (message, sizeof message, "%u is not a task of session %u", q->id, session->id);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_UNKNOWN_ID,
                        message, q->id);
        return;
    }
    //  The latest: the current attempt while the task is not done (it may
    //  wait to run again), else the last that ran.
    uint32_t attempt = q->attempt >= 0? (uint32_t) q->attempt
                     : task->state < TASK_FINISHED || !task->ran_gov? task->attempt
                     : task->ran_attempt;
    gov_t *gov = NULL;
    const char *state;
    if (task->ran_gov && attempt == task->ran_attempt) {
        gov = bx_gov_by_id (self, task->ran_gov);
        if (!gov) {
            snprintf (message, sizeof message, "log lost with governor %u (attempt %u of task %u)",
                      task->ran_gov, attempt, q->id);
            bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_LOST,
                            message, q->id);
            return;
        }
        bool current = task->gov == gov && task->attempt == attempt;
        state = current && task->state == TASK_RUNNING? "running"
              : current && task->state == TASK_ASSIGNED? "assigned": "ended";
    }
    else
    if (attempt == task->attempt && task->state < TASK_FINISHED)
        state = "waiting";      //  not given to a governor yet
    else
    if (attempt == task->attempt)
        state = "ended";        //  ended without running here (cancelled, upstream failed)
    else
    if (attempt > task->attempt) {
        snprintf (message, sizeof message, "task %u has no attempt %u (its latest is %u)",
                  q->id, attempt, task->attempt);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_UNKNOWN_ID,
                        message, q->id);
        return;
    }
    else {
        snprintf (message, sizeof message, "where attempt %u of task %u ran is not known "
                  "(only the latest attempt's governor is kept)", attempt, q->id);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_UNKNOWN_ID,
                        message, q->id);
        return;
    }
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, q->req);
    sq_pack_logwhere_head (&self->out.pk, attempt, state);
    if (gov) {
        uint8_t cap [SQ_CAP_SIZE];
        if (self->auth)
            sq_cap_mint (gov->secret, peer->key_bin, task->key,
                         sq_wall_ms () + (uint64_t) self->config.capability_ttl_ms, SQ_CAP_LOG, cap);
        sq_pack_where (&self->out.pk, gov->id, gov->serve_endpoint, gov->has_key? gov->key: NULL,
                       self->auth? cap: NULL, SQ_CAP_SIZE);
    }
    else
        msgpack_pack_nil (&self->out.pk);
    bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
}

int
broker_log_tail (broker_t *self, uint32_t session_id, uint32_t task_id, uint32_t stream,
                 uint32_t req, uint32_t *attempt, char *why, size_t why_size)
{
    session_t *session = graph_session (self->graph, session_id);
    task_t *task = session? graph_task (self->graph, sq_key (session->id, task_id)): NULL;
    if (!task) {
        snprintf (why, why_size, "no task %u in session %u", task_id, session_id);
        return -1;
    }
    if (!task->ran_gov) {
        snprintf (why, why_size, "task %u has not run yet", task_id);
        return -1;
    }
    gov_t *gov = bx_gov_by_id (self, task->ran_gov);
    if (!gov) {
        snprintf (why, why_size, "log lost with governor %u", task->ran_gov);
        return -1;
    }
    *attempt = task->ran_attempt;
    sq_logtail_t q = { req, task->key, task->ran_attempt, stream };
    sq_wbuf_reset (&self->out);
    sq_logtail_encode (&self->out, &q);
    bx_send_to (self, gov->identity, gov->identity_size, &self->out, NULL);
    return 0;
}

//  RESTART: every governor retires the Python executors of the client's
//  tenant (only its: executors are keyed by tenant). Sent now rather than
//  batched: what this client submits after the reply is assigned later,
//  so it runs in fresh executors. RUN: every governor's live executors of
//  the tenant run its function. Both wait for every governor (fanout.c).
static void
s_client_run (broker_t *self, peer_t *peer, const sq_request_t *q)
{
    if (q->fn.len == 0)
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        "run: no function", 0);
    else
        bx_fanout_start (self, peer, q, BX_FANOUT_RUN);
}

void
bx_client_message (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t type, uint32_t req)
{
    if (type == SQ_MSG_SUBMIT) {
        s_client_submit (self, peer, msg);
        return;
    }
    if (type == SQ_MSG_BYE) {
        //  An orderly goodbye: its sessions close now rather than wait.
        peer->said_bye = true;
        bx_peer_end (self, peer, BX_GOODBYE);
        return;
    }
    sq_request_t q;
    sq_errbuf_t err;
    if (sq_request_decode (&q, sq_msg_data (msg, 1), sq_msg_size (msg, 1), &err)) {
        int code = type == SQ_MSG_HELLO? SQ_E_HELLO: SQ_E_PROTOCOL;
        bx_reply_error (self, peer->identity, peer->identity_size, req, code,
                       type == SQ_MSG_HELLO? "HELLO was already said on this connection": err.text, 0);
        return;
    }
    if (jobs_request (self, peer, &q)) {
        sq_request_release (&q);
        return;
    }
    session_t *session = NULL;
    if (q.type == SQ_MSG_SESSION_CLOSE) {
        session_t *own = graph_session (self->graph, q.session);
        if (!own || own->client != peer) {
            s_client_close_other (self, peer, &q);
            sq_request_release (&q);
            return;
        }
    }
    if (q.type != SQ_MSG_SESSION_OPEN && q.type != SQ_MSG_INFO && q.type != SQ_MSG_PING
    &&  q.type != SQ_MSG_RESUME && q.type != SQ_MSG_RETIRE && q.type != SQ_MSG_LOG
    &&  q.type != SQ_MSG_RESTART && q.type != SQ_MSG_RUN) {
        session = s_client_session (self, peer, q.session, q.req);
        if (!session) {
            sq_request_release (&q);
            return;
        }
    }
    int64_t deadline = bx_deadline (q.timeout_ms);
    switch (q.type) {
        case SQ_MSG_SESSION_OPEN:
            s_client_open (self, peer, &q);
            break;
        case SQ_MSG_SESSION_CLOSE: {
            char message [200];
            int code = jobs_close_check (session, message, sizeof message);
            if (code) {
                bx_reply_error (self, peer->identity, peer->identity_size, q.req, code,
                                message, 0);
                break;
            }
            bx_peer_remove_session (peer, session->id);
            bx_session_close (self, session);
            bx_reply_nil (self, peer, q.req);
            break;
        }
        case SQ_MSG_RESUME:
            s_client_resume (self, peer, &q);
            break;
        case SQ_MSG_UPLOAD:
            s_client_upload (self, peer, &q, session);
            break;
        case SQ_MSG_RETIRE:
            s_client_retire (self, peer, &q);
            break;
        case SQ_MSG_RESTART:
            bx_fanout_start (self, peer, &q, BX_FANOUT_RESTART);
            break;
        case SQ_MSG_RUN:
            s_client_run (self, peer, &q);
            break;
        case SQ_MSG_KEEP: case SQ_MSG_UNKEEP: case SQ_MSG_CANCEL:
            s_client_ids (self, peer, &q, session);
            break;
        case SQ_MSG_ADOPT:
            jobs_adopt (self, peer, &q, session);
            break;
        case SQ_MSG_DELETE:
            place_delete (self, peer, &q, session);
            break;
        case SQ_MSG_PLACE:
            place_request (self, peer, &q, session);
            break;
        case SQ_MSG_WAIT: case SQ_MSG_FETCH: {
            object_t *stream = q.type == SQ_MSG_FETCH
                             ? graph_object (self->graph, sq_key (session->id, q.id)): NULL;
            if (stream && stream->stream) {
                char message [200];
                snprintf (message, sizeof message, "object %u is a stream: it is read only "
                          "while it is written; have a task store it to fetch it", q.id);
                bx_reply_error (self, peer->identity, peer->identity_size, q.req,
                                SQ_E_INVALID, message, q.id);
                break;
            }
            if (peer->outstanding >= self->config.max_requests) {
                bx_reply_error (self, peer->identity, peer->identity_size, q.req, SQ_E_BUSY,
                               "too many waits and fetches outstanding on this connection", 0);
                break;
            }
            peer->outstanding++;
            if (q.type == SQ_MSG_WAIT)
                watches_wait (self->watches, peer, q.req, session, q.mode, q.ids, q.n_ids, deadline);
            else
            if (!bx_fetch_park (self, peer, sq_key (session->id, q.id), q.req, deadline))
                watches_fetch (self->watches, peer, q.req, session, q.id, deadline);
            break;
        }
        case SQ_MSG_LOG:
            s_client_log (self, peer, &q);
            break;
        case SQ_MSG_INFO:
            s_client_info (self, peer, q.req);
            break;
        case SQ_MSG_PING:
            bx_reply_nil (self, peer, q.req);
            break;
        default:
            break;
    }
    sq_request_release (&q);
}
