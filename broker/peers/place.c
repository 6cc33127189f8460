/*  place: objects moved by hand: PLACE (replicate, move, who has it) and
    DELETE. */
#include "place.h"

#define S_PLACE_TICK_MS 100     //  timeouts and governors gone are looked at this often
#define S_PLACE_REORDERS 3      //  copies of one PLACE ordered again at most this often

typedef struct _s_place_t s_place_t;
struct _s_place_t {
    s_place_t *next;
    uint64_t key;
    char peer [BX_KEY_SIZE];            //  identity key: the peer may go meanwhile
    uint32_t req;
    int64_t deadline;           //  -1: none
    bool move;
    uint32_t orders;            //  times copies were ordered again (S_PLACE_REORDERS)
    uint32_t n_targets;
    uint32_t targets [];        //  governor ids that must hold a copy
};

//  The governors holding an arrived copy of the object.
static uint32_t
s_holders (object_t *object, uint32_t *ids, uint32_t max)
{
    uint32_t n = 0;
    location_t *locations = object_locations (object);
    for (uint32_t i = 0; i < object->n_locations && n < max; i++)
        if (locations [i].arrived)
            ids [n++] = locations [i].gov->id;
    return n;
}

static void
s_reply_holders (broker_t *self, const void *identity, size_t identity_size, uint32_t req,
                 object_t *object)
{
    static uint32_t ids [SQ_PLACE_MAX];     //  4 KiB; one thread
    uint32_t n = s_holders (object, ids, SQ_PLACE_MAX);
    sq_wbuf_reset (&self->out);
    sq_reply_begin (&self->out, req);
    sq_pack_holders (&self->out.pk, ids, n);
    bx_send_to (self, identity, identity_size, &self->out, NULL);
}

//  The error a PLACE on a failed (or deleted) object gets.
static void
s_reply_failed (broker_t *self, const void *identity, size_t identity_size, uint32_t req,
                object_t *object)
{
    char message [SQ_MAX_MESSAGE / 4];
    failure_t *f = object->failure;
    snprintf (message, sizeof message, "object %u: %s", sq_key_id (object->key),
              f && f->message? f->message: "failed");
    bx_reply_error (self, identity, identity_size, req, f? f->code: SQ_E_LOST, message,
                    sq_key_id (object->key));
}

static bool
s_targeted (const uint32_t *targets, uint32_t n, uint32_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (targets [i] == id)
            return true;
    return false;
}

//  A governor that would hold a new copy: not counted or taken already.
typedef struct {
    object_t *object;
    const uint32_t *targets;
    uint32_t n_targets;
} s_new_copy_t;

static bool
s_new_copy (void *arg, const gov_t *gov)
{
    s_new_copy_t *wanted = (s_new_copy_t *) arg;
    return !s_targeted (wanted->targets, wanted->n_targets, gov->id)
        && !graph_object_location (wanted->object, (gov_t *) gov);
}

//  Whether a task placed on gov and not done still needs the object there.
static bool
s_needed_on (object_t *object, gov_t *gov)
{
    for (uint32_t c = 0; c < object->n_consumers; c++) {
        task_t *consumer = object_consumers (object) [c];
        if (consumer->gov == gov
        &&  (consumer->state == TASK_ASSIGNED || consumer->state == TASK_RUNNING))
            return true;
    }
    return false;
}

//  Every target holds a copy: with move, every other copy goes, except
//  where a task placed there still needs it (it goes with the object's
//  release). Then the reply.
static void
s_complete (broker_t *self, const void *identity, size_t identity_size, uint32_t req,
            object_t *object, const uint32_t *targets, uint32_t n_targets, bool move)
{
    if (move) {
        static gov_t *drop [sizeof self->govs / sizeof self->govs [0]];
        size_t n_drop = 0;
        location_t *locations = object_locations (object);
        for (uint32_t i = 0; i < object->n_locations; i++) {
            gov_t *gov = locations [i].gov;
            if (locations [i].arrived && !s_targeted (targets, n_targets, gov->id)
            &&  !s_needed_on (object, gov))
                drop [n_drop++] = gov;
        }
        for (size_t i = 0; i < n_drop; i++) {
            bx_drop (drop [i], object->key);
            graph_object_lost (self->graph, object, drop [i]);
        }
    }
    s_reply_holders (self, identity, identity_size, req, object);
}

//  Orders a copy to every target that has none, arrived or on its way,
//  from the governors holding an arrived copy. Returns how many it
//  ordered, or -1 if some target needs one and there is no copy to send
//  from (yet: an upload not confirmed, a copy still on its way).
static int
s_order (broker_t *self, object_t *object, const uint32_t *targets, uint32_t n_targets)
{
    static gov_t *sources [sizeof self->govs / sizeof self->govs [0]];
    size_t n_sources = 0, next = 0;
    int ordered = 0;
    location_t *locations = object_locations (object);
    for (uint32_t i = 0; i < object->n_locations; i++)
        if (locations [i].arrived && !locations [i].gov->leaving)
            sources [n_sources++] = locations [i].gov;
    for (uint32_t t = 0; t < n_targets; t++) {
        gov_t *gov = bx_gov_by_id (self, targets [t]);
        if (!gov || graph_object_location (object, gov))
            continue;
        if (n_sources == 0)
            return -1;
        //  Round robin over the holders: a broadcast from several copies
        //  spreads the sending.
        gov_t *from = sources [next++ % n_sources];
        bx_hook_object_copy (self, object, from, gov);
        graph_object_add_location (self->graph, object, gov, false);
        ordered++;
    }
    return ordered;
}

//  Done: every target holds an arrived copy, and so does some governor
//  (an upload not confirmed yet is no copy: "where" waits for it).
static bool
s_done (object_t *object, broker_t *self, const uint32_t *targets, uint32_t n_targets)
{
    bool any = false;
    for (uint32_t i = 0; i < object->n_locations; i++)
        any |= object_locations (object) [i].arrived;
    if (!any)
        return false;
    for (uint32_t t = 0; t < n_targets; t++) {
        gov_t *gov = bx_gov_by_id (self, targets [t]);
        location_t *loc = gov? graph_object_location (object, gov): NULL;
        if (!loc || !loc->arrived)
            return false;
    }
    return true;
}

void
place_request (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    char message [300];
    object_t *object = graph_object (self->graph, sq_key (session->id, q->id));
    //  A stream is one before, while and after it is written (released).
    if (object && object->stream) {
        snprintf (message, sizeof message, "object %u is a stream: it has no copies to place", q->id);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        message, q->id);
        return;
    }
    if (!object || (object->released && object->state != OBJ_FAILED)) {
        bool task = graph_task (self->graph, sq_key (session->id, q->id)) != NULL;
        snprintf (message, sizeof message, task
                  ? "id %u is a task; place one of its output objects"
                  : "object %u is not in session %u (never declared, or released because "
                    "nobody kept it)", q->id, session->id);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_UNKNOWN_ID,
                        message, q->id);
        return;
    }
    if (object->state == OBJ_FAILED) {
        s_reply_failed (self, peer->identity, peer->identity_size, q->req, object);
        return;
    }
    if (object->state == OBJ_UNFINISHED) {
        snprintf (message, sizeof message, "object %u is not finished yet: wait for it, "
                  "then place it", q->id);
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        message, q->id);
        return;
    }
    bool move = (q->flags & SQ_PLACE_MOVE) != 0;
    if (move && q->n_ids == 0 && q->copies == 0) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                        "a move needs a governor to move to, or a number of copies to keep "
                        "(use DELETE to drop every copy)", q->id);
        return;
    }
    //  Targets: the governors named, then (up to `copies`) those holding it
    //  already, then the ones with the least memory in use.
    static uint32_t targets [SQ_PLACE_MAX];
    uint32_t n_targets = 0;
    for (uint32_t i = 0; i < q->n_ids; i++) {
        gov_t *gov = bx_gov_by_id (self, q->ids [i]);
        if (!gov || !scheduler_usable (gov)) {
            snprintf (message, sizeof message, gov
                      ? "governor %u is leaving (or rejoining): it takes no copies"
                      : "governor %u is not connected", q->ids [i]);
            bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_INVALID,
                            message, q->ids [i]);
            return;
        }
        if (!s_targeted (targets, n_targets, gov->id))
            targets [n_targets++] = gov->id;
    }
    //  Without MOVE the copies there are count; copies on their way come
    //  next (a PLACE asked again, after a timeout, picks the same ones).
    location_t *locations = object_locations (object);
    uint32_t have = n_targets;
    if (!move)
        for (uint32_t i = 0; i < object->n_locations; i++)
            have += locations [i].arrived && !s_targeted (targets, n_targets, locations [i].gov->id);
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < object->n_locations && have < q->copies
                             && n_targets < SQ_PLACE_MAX; i++) {
            bool arrived = locations [i].arrived;
            if (arrived != (pass == 0) || (arrived && !move)
            ||  !scheduler_usable (locations [i].gov)
            ||  s_targeted (targets, n_targets, locations [i].gov->id))
                continue;
            targets [n_targets++] = locations [i].gov->id;
            have++;
        }
    while (have < q->copies && n_targets < SQ_PLACE_MAX) {
        s_new_copy_t wanted = { object, targets, n_targets };
        gov_t *best = scheduler_place_copy (self->scheduler, s_new_copy, &wanted);
        if (!best)
            break;              //  as many as there are governors
        targets [n_targets++] = best->id;
        have++;
    }
    if (object->n_locations == 0) {
        //  No governor has a copy, nor one coming: the broker holds its
        //  bytes (a constant sent inside SUBMIT, a small output) and gives
        //  them with every task that needs them; nothing to copy from.
        s_reply_holders (self, peer->identity, peer->identity_size, q->req, object);
        return;
    }
    s_order (self, object, targets, n_targets);     //  -1: once a copy arrives
    if (s_done (object, self, targets, n_targets)) {
        s_complete (self, peer->identity, peer->identity_size, q->req, object,
                    targets, n_targets, move);
        return;
    }
    if (self->n_places >= PLACE_MAX || peer->outstanding >= self->config.max_requests) {
        //  The copies are ordered anyway; only the reply cannot wait.
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_BUSY,
                        "too many requests waiting for copies; the copies were ordered, "
                        "ask again to learn when they are there", q->id);
        return;
    }
    s_place_t *place = (s_place_t *) calloc (1, sizeof *place + n_targets * sizeof (uint32_t));
    if (!place) {
        bx_reply_error (self, peer->identity, peer->identity_size, q->req, SQ_E_NOMEM,
                        "out of memory", q->id);
        return;
    }
    place->key = object->key;
    bx_identity_key (peer->identity, peer->identity_size, place->peer);
    place->req = q->req;
    place->deadline = bx_deadline (q->timeout_ms);
    place->move = move;
    place->n_targets = n_targets;
    memcpy (place->targets, targets, n_targets * sizeof (uint32_t));
    place->next = self->places;
    self->places = place;
    self->n_places++;
    peer->outstanding++;
    if (self->next_place < 0)
        self->next_place = bx_now () + S_PLACE_TICK_MS;
}

//  Unlinks and frees a parked request, answering it with `code`
//  (SQ_OK: done; the holders) unless its client is gone.
static void
s_finish (broker_t *self, s_place_t **link, object_t *object, int code, const char *message)
{
    s_place_t *place = *link;
    *link = place->next;
    self->n_places--;
    peer_t *peer = (peer_t *) zhashx_lookup (self->peers, place->peer);
    if (peer) {
        peer->outstanding--;
        if (code == SQ_OK)
            s_complete (self, peer->identity, peer->identity_size, place->req, object,
                        place->targets, place->n_targets, place->move);
        else
        if (object && object->state == OBJ_FAILED)
            s_reply_failed (self, peer->identity, peer->identity_size, place->req, object);
        else
            bx_reply_error (self, peer->identity, peer->identity_size, place->req, code,
                            message, sq_key_id (place->key));
    }
    free (place);
}

//  Where a parked request stands: SQ_OK done, -1 still waiting, else the
//  error that ends it (message filled).
static int
s_check (broker_t *self, s_place_t *place, object_t **object_p, int64_t now,
         char *message, size_t size)
{
    session_t *session = graph_session (self->graph, sq_key_session (place->key));
    peer_t *peer = (peer_t *) zhashx_lookup (self->peers, place->peer);
    object_t *object = session? graph_object (self->graph, place->key): NULL;
    *object_p = object;
    if (!session || !peer || session->client != peer) {
        snprintf (message, size, "session %u was closed (or moved to another connection)",
                  sq_key_session (place->key));
        return SQ_E_SESSION;
    }
    if (!object || object->state == OBJ_FAILED || object->released) {
        snprintf (message, size, "object %u was released", sq_key_id (place->key));
        return object && object->state == OBJ_FAILED? SQ_E_LOST: SQ_E_UNKNOWN_ID;
    }
    if (object->state == OBJ_UNFINISHED) {
        //  Every copy went and it is being recomputed: the copies asked
        //  for will not come by themselves.
        snprintf (message, size, "object %u was lost and is being recomputed: place it again "
                  "once it is finished", sq_key_id (place->key));
        return SQ_E_LOST;
    }
    for (uint32_t t = 0; t < place->n_targets; t++)
        if (!bx_gov_by_id (self, place->targets [t])) {
            snprintf (message, size, "governor %u left before its copy of object %u arrived",
                      place->targets [t], sq_key_id (place->key));
            return SQ_E_LOST;
        }
    //  Copies that could not be ordered yet (no copy to send from), or
    //  that were lost on their way (their location went): ordered now,
    //  a few times at most.
    int ordered = s_order (self, object, place->targets, place->n_targets);
    if (ordered > 0 && place->orders++ >= S_PLACE_REORDERS) {
        snprintf (message, size, "the copies of object %u were lost on their way %d times",
                  sq_key_id (place->key), S_PLACE_REORDERS);
        return SQ_E_LOST;
    }
    if (ordered < 0 && object->n_locations == 0) {
        snprintf (message, size, "object %u has no copy left to copy from",
                  sq_key_id (place->key));
        return SQ_E_LOST;
    }
    if (s_done (object, self, place->targets, place->n_targets))
        return SQ_OK;
    if (place->deadline >= 0 && now >= place->deadline) {
        snprintf (message, size, "the copies of object %u did not all arrive in time "
                  "(they stay ordered)", sq_key_id (place->key));
        return SQ_E_TIMEOUT;
    }
    return -1;
}

void
place_object_changed (broker_t *self, object_t *object)
{
    if (self->n_places == 0)
        return;
    char message [300];
    s_place_t **link = &self->places;
    while (*link) {
        object_t *o;
        int rc;
        if ((*link)->key != object->key
        ||  (rc = s_check (self, *link, &o, bx_now (), message, sizeof message)) < 0)
            link = &(*link)->next;
        else
            s_finish (self, link, o, rc, message);
    }
}

int64_t
place_tick (broker_t *self, int64_t now)
{
    if (self->n_places == 0) {
        self->next_place = -1;
        return -1;
    }
    if (now < self->next_place)
        return self->next_place;
    char message [300];
    s_place_t **link = &self->places;
    while (*link) {
        object_t *o;
        int rc = s_check (self, *link, &o, now, message, sizeof message);
        if (rc < 0)
            link = &(*link)->next;
        else
            s_finish (self, link, o, rc, message);
    }
    self->next_place = self->n_places? now + S_PLACE_TICK_MS: -1;
    return self->next_place;
}

void
place_destroy_all (broker_t *self)
{
    while (self->places) {
        s_place_t *place = self->places;
        self->places = place->next;
        free (place);
    }
    self->n_places = 0;
}

void
place_delete (broker_t *self, peer_t *peer, const sq_request_t *q, session_t *session)
{
    char message [300];
    for (uint32_t i = 0; i < q->n_ids; i++) {
        uint64_t key = sq_key (session->id, q->ids [i]);
        object_t *object = graph_object (self->graph, key);
        int code = SQ_OK;
        if (object && object->stream) {       //  ended (released) or not
            code = SQ_E_INVALID;
            snprintf (message, sizeof message, "object %u is a stream: it has no copies to "
                      "delete", q->ids [i]);
        }
        else
        if (!object || object->released) {
            code = SQ_E_UNKNOWN_ID;
            snprintf (message, sizeof message, graph_task (self->graph, key)
                      ? "id %u is a task; delete its output objects"
                      : "id %u is not an object of session %u (or was already released)",
                      q->ids [i], session->id);
        }
        else
        if (object->state != OBJ_FINISHED) {
            code = SQ_E_INVALID;
            snprintf (message, sizeof message, object->state == OBJ_FAILED
                      ? "object %u failed: there is nothing to delete"
                      : "object %u is not finished yet: cancel its producer, or delete it "
                        "once it is finished", q->ids [i]);
        }
        if (code != SQ_OK) {
            bx_reply_error (self, peer->identity, peer->identity_size, q->req, code, message,
                            q->ids [i]);
            return;
        }
    }
    persist_ids (self->persist, SQ_REC_DELETE, session->id, q->ids, q->n_ids);
    for (uint32_t i = 0; i < q->n_ids; i++) {
        object_t *object = graph_object (self->graph, sq_key (session->id, q->ids [i]));
        if (!object || object->state != OBJ_FINISHED)
            continue;           //  named twice
        snprintf (message, sizeof message, "object %u was deleted by its client (DELETE)",
                  q->ids [i]);
        uploads_forget (self->uploads, object->key);
        graph_object_delete (self->graph, object, message);
        place_object_changed (self, object);
        bx_fetches_release (self, object->key);
    }
    bx_reply_nil (self, peer, q->req);
}
