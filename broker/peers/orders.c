/*  orders: what the graph's state changes and the scheduler's decisions
    become on governors (ASSIGN with inline inputs, SEND, DROP, STOP) and
    for clients (watches answered); copies lost on their way ordered again. */
#include "broker_internal.h"
#include "jobs.h"

//  --------------------------------------------------------------------------
//  Graph hooks: turn state changes into governor orders and client replies

void
bx_hook_task_ready (void *arg, task_t *task)
{
    broker_t *self = (broker_t *) arg;
    if (jobs_hold (self, task))
        return;                 //  its job waits for others (--after)
    eventlog_task_ready (self->events, task);
    //  An actor's calls go to its host's governor (graph_actors_settle),
    //  stream readers where streams.c puts them.
    if (task->stream_in) {
        if (bx_stream_ready (self, task))
            sq_error ("out of memory: stream reader %u of session %u is not placed",
                      sq_key_id (task->key), sq_key_session (task->key));
    }
    else
    if (task->array_parent)
        jobs_array_ready (self, task);
    else
    if (!task->actor_call)
        scheduler_task_ready (self->scheduler, task);
}

void
bx_hook_task_stop (void *arg, task_t *task)
{
    gov_t *gov = task->gov;
    (void) arg;
    if (!gov)
        return;
    gov_task_remove (gov, task->key);
    gov_order_stop (gov, task->key, task->attempt);
}

void
bx_hook_task_done (void *arg, task_t *task)
{
    broker_t *self = (broker_t *) arg;
    jobs_task_ending (self, task);
    persist_task_done (self->persist, task);
    watches_task_done (self->watches, task);
    jobs_task_done (self, task);
}

gov_t *
bx_gov_by_id (broker_t *self, uint32_t id)
{
    for (size_t i = 0; i < self->n_govs; i++)
        if (self->govs [i]->id == id)
            return self->govs [i];
    return NULL;
}

void
bx_drop (gov_t *gov, uint64_t key)
{
    gov_order_drop (gov, key);
    sq_idmap_remove (gov->recopies, key);
}

void
bx_hook_object_drop (void *arg, object_t *object)
{
    (void) arg;
    for (uint32_t i = 0; i < object->n_locations; i++)
        bx_drop (object_locations (object) [i].gov, object->key);
}

void
bx_hook_object_copy (void *arg, object_t *object, gov_t *from, gov_t *to)
{
    (void) arg;
    gov_order_send (from, object->key, object->version, to);
}

//  An object cannot be had on `gov` (NULL: a governor gone): the tasks
//  that need it fail with `message` (SQ_E_LOST), all of them, or only
//  those given to `gov`; its location there goes.
void
bx_object_undeliverable (broker_t *self, object_t *object, gov_t *gov, bool all,
                        const char *message)
{
    sq_warn ("%s", message);
    for (uint32_t c = 0; c < object->n_consumers; c++) {
        task_t *consumer = object_consumers (object) [c];
        if (all || (gov && consumer->gov == gov))
            graph_task_failed (self->graph, consumer, SQ_E_LOST, message);
    }
    if (gov)
        bx_drop (gov, object->key);
    graph_object_lost_why (self->graph, object, gov, message);
}

//  Data plane: a copy ordered to `gov` did not arrive (it came short, corrupt
//  or from a sender that went silent): order it again, from a holder picked
//  at random so that a second try tends to use another one, at most
//  S_MAX_RECOPIES times per version (a governor that cannot take it would
//  be sent it for ever). False when the location was not a copy on its
//  way, no holder is left (then the object is lost there, and recomputed
//  if needed) or the tries are spent (then the tasks there that need it
//  fail, saying so).
bool
bx_recopy (broker_t *self, object_t *object, gov_t *gov)
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
        bx_object_undeliverable (self, object, gov, false, message);
        return true;
    }
    sq_idmap_remove (gov->recopies, object->key);
    if (sq_idmap_insert (gov->recopies, object->key, (void *) (uintptr_t) (tries + 1)))
        return false;           //  out of memory: as if no holder were left
    uint32_t pick = (uint32_t) rand () % n;
    for (uint32_t i = 0; i < object->n_locations; i++)
        if (locations [i].arrived && locations [i].gov != gov && pick-- == 0) {
            bx_hook_object_copy (self, object, locations [i].gov, gov);
            return true;
        }
    return false;
}

void
bx_watch_reply (void *arg, void *client, sq_wbuf_t *header, zmq_msg_t *payload)
{
    broker_t *self = (broker_t *) arg;
    peer_t *peer = (peer_t *) client;
    bx_send_to (self, peer->identity, peer->identity_size, header, payload);
}

void
bx_watch_released (void *arg, void *client)
{
    (void) arg;
    peer_t *peer = (peer_t *) client;
    if (peer->outstanding)
        peer->outstanding--;
}

//  --------------------------------------------------------------------------
//  Assignment (the scheduler's decisions)

void
bx_assign (void *arg, task_t *task, gov_t *gov)
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
        if (input->stream) {
            //  Read as written: its producer's governor sends it here. The
            //  size field names the producer attempt whose bytes to read.
            ref->frame = SQ_FRAME_STREAM;
            ref->size = input->producer->attempt;
            gov_order_stream (input->producer->gov, input->key, input->producer->attempt,
                              task->key, gov);
            continue;
        }
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
            source = uploaded? bx_gov_by_id (self, uploaded): NULL;
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
        outputs [i].stream = output->stream;
        outputs [i].consumers = output->stream? graph_stream_consumers (output): 0;
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
    //  The governor runs each tenant's tasks under an identity of its own.
    session_t *session = graph_session (self->graph, sq_key_session (task->key));
    if (session && session->tenant)
        a.tenant = (mpr_str_t) { session->tenant, (uint32_t) strlen (session->tenant) };
    for (uint32_t r = 0; r < extra->n_resources && r < SQ_MAX_RESOURCES; r++)
        a.resources [a.n_resources++] = extra->resources [r];
    sq_pack_assign (&gov->assign.elements.pk, &a);
    gov->assign.count++;
    eventlog_task (self->events, EV_TASK_ASSIGNED, task, gov, NULL, 0);
    graph_task_assigned (self->graph, task, gov);
    gov_task_add (gov, task);
done:
    if (inputs != inputs_small)
        free (inputs);
    if (outputs != outputs_small)
        free (outputs);
}
