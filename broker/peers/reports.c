/*  reports: what governors tell the broker (UPDATE events, LOAD,
    reattach inventories) and the uploaded constants whose SUBMIT and
    confirmation meet here. */
#include "broker_internal.h"
#include "jobs.h"
#include "place.h"
#include "drain.h"

//  --------------------------------------------------------------------------
//  Uploaded constants (uploads.h): counted as copies once the SUBMIT that
//  claims one and the governor's UPLOADED agree.

//  FETCHes parked on key go to the watches now (the upload is a copy, or
//  has failed).
void
bx_fetches_release (broker_t *self, uint64_t key)
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
            bx_reply_error (self, peer->identity, peer->identity_size, fetch->req, SQ_E_SESSION,
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

bool
bx_fetch_park (broker_t *self, peer_t *peer, uint64_t key, uint32_t req, int64_t deadline)
{
    object_t *object = graph_object (self->graph, key);
    if (!object || !object->keep
    ||  !(uploads_awaited (self->uploads, key) || (self->recovering && s_unlocated (object))))
        return false;
    s_fetch_t *fetch = (s_fetch_t *) calloc (1, sizeof *fetch);
    if (!fetch)
        return false;
    fetch->key = key;
    bx_identity_key (peer->identity, peer->identity_size, fetch->peer);
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
    bx_object_undeliverable (self, object, gov, true, message);
    bx_fetches_release (self, object->key);
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
void
bx_upload_claimed (broker_t *self, object_t *object, gov_t *gov, uint64_t size, int64_t now)
{
    uint32_t drop_gov;
    uint64_t other;
    uploads_result_t rc = uploads_claim (self->uploads, object->key, gov->id, size, now,
                                         &drop_gov, &other);
    gov_t *orphan = drop_gov? bx_gov_by_id (self, drop_gov): NULL;
    if (orphan)
        bx_drop (orphan, object->key);
    //  Until confirmed it is a copy on its way: tasks there wait for it,
    //  copies elsewhere are ordered from there (bx_assign).
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
                                           bx_now (), &drop_gov, &claimed);
    gov_t *orphan = drop_gov? bx_gov_by_id (self, drop_gov): NULL;
    if (orphan)
        bx_drop (orphan, key);
    if (!object && rc != UPLOADS_WAITING) {
        bx_drop (gov, key);      //  claimed by a session closed since
        bx_fetches_release (self, key);
        return;
    }
    if (rc == UPLOADS_MATCHED && object->state == OBJ_FINISHED && !object->released) {
        eventlog_object (self->events, EV_OBJECT_LOCATED, object, gov, NULL);
        graph_object_add_location (self->graph, object, gov, true);
        bx_fetches_release (self, key);
        place_object_changed (self, object);    //  a PLACE waiting for the upload
    }
    else
    if (rc == UPLOADS_MISMATCH)
        s_upload_mismatch (self, object, gov, size, claimed);
    else
    if (rc != UPLOADS_WAITING) {
        //  Nobody will claim it, it came too late, or for an object gone.
        location_t *loc = graph_object_location (object, gov);
        if (!loc || !loc->arrived)
            bx_drop (gov, key);
    }
}

//  Claims never confirmed fail what needs them; uploads never claimed are
//  dropped. Returns the next deadline, -1 if none.
int64_t
bx_uploads_expire (broker_t *self, int64_t now)
{
    uint64_t key;
    uint32_t id;
    bool claim;
    while (uploads_expired (self->uploads, now, &key, &id, &claim)) {
        gov_t *gov = bx_gov_by_id (self, id);
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
            bx_drop (gov, key);
        }
        if (claim)
            bx_fetches_release (self, key);
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
        bx_timer_soon (self, BX_TIMER_REBALANCE);  //  a newcomer gets queued work at once
        persist_reattached (self->persist, gov->id);
        sq_info ("governor %u (%s) reattached: %zu objects held again, %zu tasks found "
                 "finished there, %zu running tasks kept; %zu objects dropped, %zu tasks "
                 "stopped", gov->id, gov->name, stats.located, stats.finished, stats.adopted,
                 stats.dropped, stats.stopped);
    }
}

//  What an attempt that no longer counts stored here (it finished after
//  the broker failed or moved its task: an input found wrong meanwhile, a
//  STOP that came too late) is nobody's: without a DROP it would stay on
//  the governor for ever. Kept: an object the graph knows there, and the
//  outputs of the current attempt given to this governor, which writes
//  them again.
static void
s_drop_stale_outputs (broker_t *self, gov_t *gov, task_t *task, const sq_event_t *ev)
{
    if (task && task->gov == gov && (task->state == TASK_ASSIGNED || task->state == TASK_RUNNING))
        return;
    for (uint32_t i = 0; i < ev->n_outputs; i++) {
        object_t *object = graph_object (self->graph, ev->outputs [i].key);
        if (!object || !graph_object_location (object, gov))
            bx_drop (gov, ev->outputs [i].key);
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
                if (object && !bx_recopy (self, object, gov))
                    graph_object_lost (self->graph, object, gov);
            }
            else
            if (object && object->state == OBJ_FINISHED && !object->released
            &&  ev.size == object->size) {
                eventlog_object (self->events, EV_OBJECT_LOCATED, object, gov, NULL);
                graph_object_add_location (self->graph, object, gov, true);
                scheduler_note_copy (self->scheduler, ev.size, ev.duration_us);
                sq_idmap_remove (gov->recopies, ev.key);
                if (ev.local) {
                    //  INFO shows a tenant its own (and an admin all).
                    session_t *session = graph_session (self->graph, sq_key_session (ev.key));
                    self->copies_local++;
                    if (session && session->share)
                        session->share->copies_local++;
                }
            }
            else
                bx_drop (gov, ev.key);   //  a copy nobody wants any more
            if (object)
                place_object_changed (self, object);
            continue;
        }
        if (ev.type == SQ_EV_STREAMLOCAL) {
            //  INFO shows a tenant its own (and an admin all).
            session_t *session = graph_session (self->graph, sq_key_session (ev.key));
            self->streams_local++;
            if (session && session->share)
                session->share->streams_local++;
            continue;
        }
        if (ev.type == SQ_EV_STREAMED) {
            //  Progress of a stream its producer writes here (the dashboard).
            bx_stream_progress (self, gov, ev.key, ev.size);
            continue;
        }
        if (ev.type == SQ_EV_UPLOADED) {
            //  Counted per tenant too, as streams_local is.
            self->uploads_local += ev.local;
            session_t *session = ev.local? graph_session (self->graph, sq_key_session (ev.key)): NULL;
            if (session && session->share)
                session->share->uploads_local += ev.local;
            s_upload_confirmed (self, gov, ev.key, ev.size);
            continue;
        }
        if (ev.type == SQ_EV_REFRESHED) {
            //  RESTART: no more than were sent can be confirmed.
            if (ev.key > gov->refreshed && ev.key <= gov->refresh_sent)
                gov->refreshed = ev.key;
            bx_fanouts_check (self, bx_now ());
            continue;
        }
        if (ev.type == SQ_EV_RAN) {
            bx_run_answered (self, gov, ev.key, ev.attempt, ev.size);
            continue;
        }
        if (ev.type == SQ_EV_LOGTAIL) {
            //  The dashboard's request for a task's last output (http.c).
            if (self->http)
                http_log_tail_done (self->http, (uint32_t) ev.size, gov->id,
                                    ev.message.ptr, ev.message.len);
            continue;
        }
        task_t *task = graph_task (self->graph, ev.key);
        //  Only the current attempt, on the governor it was given to, counts:
        //  anything else is a stale or confused report and changes nothing.
        if (!task || task->gov != gov || task->attempt != ev.attempt
        ||  (task->state != TASK_ASSIGNED && task->state != TASK_RUNNING)) {
            sq_debug ("governor %u: ignoring event %u for task %llx attempt %u",
                      gov->id, ev.type, (unsigned long long) ev.key, ev.attempt);
            if (ev.type == SQ_EV_FINISHED)
                s_drop_stale_outputs (self, gov, task, &ev);
            continue;
        }
        if (ev.type == SQ_EV_SECEDED) {
            //  A nested task waiting on its children: its slot is free for them.
            gov_task_secede (gov, task, ev.seceded);
            continue;
        }
        if (ev.type == SQ_EV_TASKKEY) {
            bx_task_key (self, gov, task, (const uint8_t *) ev.public_key.ptr);
            continue;
        }
        if (ev.type == SQ_EV_STARTED) {
            eventlog_task (self->events, EV_TASK_STARTED, task, gov, NULL, 0);
            graph_task_started (self->graph, task);
            jobs_task_started (self, task, gov);
            bx_streams_started (self, task);
        }
        else
        if (ev.type == SQ_EV_RETRACTED) {
            //  Given back unstarted (work stealing): place it again, elsewhere.
            gov_task_remove (gov, task->key);
            task_extra_t *extra = graph_task_extra (task);
            if (extra)
                extra->last_gov = gov->id;
            graph_task_requeue (self->graph, task);
        }
        else {
            gov_task_remove (gov, task->key);
            gov->tasks_done++;
            gov_note_duration (gov, ev.duration_us);
            if (ev.type == SQ_EV_FINISHED)
                eventlog_task_ended (self->events, EV_TASK_FINISHED, task, gov, NULL, 0,
                                     ev.duration_us);
            else
                eventlog_task_ended (self->events, EV_TASK_FAILED, task, gov,
                                     ev.message.ptr, ev.message.len, ev.duration_us);
            jobs_task_ran (self, task, gov,
                           ev.type == SQ_EV_FINISHED? task->kind == SQ_KIND_EXECUTE
                                                    : ev.has_exit_code,
                           ev.type == SQ_EV_FINISHED? 0: ev.exit_code);
            if (ev.type == SQ_EV_FINISHED)
                graph_task_finished (self->graph, task, gov, ev.outputs, ev.n_outputs,
                                     payloads, n_payloads, self->config.inline_max);
            else {
                char message [SQ_MAX_MESSAGE / 4];
                snprintf (message, sizeof message, "%.*s", (int) ev.message.len, ev.message.ptr);
                graph_outcome_t outcome = graph_task_attempt_failed (
                    self->graph, task, gov->id, ev.reason, message, self->config.allowed_failures);
                if (outcome != GRAPH_FAILED) {
                    sq_info ("task %u of session %u: %.200s; %s", sq_key_id (task->key),
                             sq_key_session (task->key), message,
                             outcome == GRAPH_RETRY_MEMORY? "retrying with twice the memory"
                                                          : "retrying");
                    persist_attempt (self->persist, task);
                }
            }
        }
    }
    if (rc < 0)
        sq_warn ("governor %u: %s", gov->id, err.text);
    sq_iter_release (&it);
}

void
bx_governor_message (broker_t *self, peer_t *peer, sq_msg_t *msg, uint32_t type)
{
    sq_errbuf_t err;
    peer->gov->last_recv = bx_now ();
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
        case SQ_MSG_DRAIN:
            if (sq_bare_decode (sq_msg_data (msg, 1), sq_msg_size (msg, 1), SQ_MSG_DRAIN, &err))
                sq_warn ("governor %u: %s", peer->id, err.text);
            else
                drain_start (self, peer->gov, "it is stopping");
            break;
        case SQ_MSG_BYE:
            //  Answered, after all we sent it: the governor reads up to
            //  this and so closes with no message of ours half-received.
            sq_wbuf_reset (&self->out);
            sq_bare_encode (&self->out, SQ_MSG_BYE);
            bx_send_to (self, peer->identity, peer->identity_size, &self->out, NULL);
            bx_peer_end (self, peer, BX_GOODBYE);
            break;
        default:
            sq_warn ("governor %u: unexpected message type %u ignored", peer->id, type);
    }
}

//  The hard limit of a task key's life, whatever its task does.
#define S_TASK_KEY_TTL_MS (24ll * 3600 * 1000)

void
bx_task_key (broker_t *self, gov_t *gov, task_t *task, const uint8_t *public_key)
{
    if (!self->auth)
        return;                 //  without keys a task's client just connects
    session_t *session = graph_session (self->graph, sq_key_session (task->key));
    auth_taskref_t ref = { task->key, task->attempt, gov->id, bx_now () + S_TASK_KEY_TTL_MS };
    if (!session || auth_task_key_add (self->auth, public_key,
                                       session->tenant? session->tenant: "", &ref))
        sq_warn ("governor %u: task %llx attempt %u: its key is refused (%zu task keys "
                 "held, at most %d; or the key is known)", gov->id,
                 (unsigned long long) task->key, task->attempt, auth_task_keys (self->auth),
                 AUTH_TASK_KEYS_MAX);
}
