/*  persist: journal records from the broker's state, and back.

    Over 800 lines: a journal record is written from the broker's state and
    replayed back into it here, side by side, so that its two ends change
    together. */
#include "persist.h"
#include "gov.h"
#include "taskconf.h"
#include "log.h"
#include "grow.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Governors the table remembers: the connected ones and those a restart
//  still expects back, which stay until they return or are gone, so they
//  gather across restarts beyond the GOV_MAX connected at once.
#define S_MAX_GOVERNORS (16 * GOV_MAX)

struct _persist_t {
    graph_t *graph;
    journal_t *journal;
    bool replaying;
    persist_gov_t *govs;
    size_t n_govs, cap_govs;
    uint32_t next_peer;
    uint64_t skipped;           //  replayed records that referred to nothing
};

persist_t *
persist_new (graph_t *graph)
{
    persist_t *self = (persist_t *) calloc (1, sizeof *self);
    if (self) {
        self->graph = graph;
        self->next_peer = 1;
    }
    return self;
}

static void
s_gov_free (persist_gov_t *gov)
{
    free (gov->name);
    free (gov->key);
}

void
persist_destroy (persist_t **self_p)
{
    persist_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_govs; i++)
        s_gov_free (&self->govs [i]);
    free (self->govs);
    free (self);
    *self_p = NULL;
}

void
persist_attach (persist_t *self, journal_t *journal)
{
    self->journal = journal;
}

bool
persist_replaying (persist_t *self)
{
    return self->replaying;
}

bool
persist_on (persist_t *self)
{
    return self->journal && !self->replaying;
}

uint32_t
persist_next_peer (persist_t *self)
{
    return self->next_peer;
}

//  --------------------------------------------------------------------------
//  Governors known from the journal

persist_gov_t *
persist_known (persist_t *self, uint32_t id)
{
    for (size_t i = 0; i < self->n_govs; i++)
        if (self->govs [i].id == id)
            return &self->govs [i];
    return NULL;
}

static void
s_gov_forget (persist_t *self, uint32_t id)
{
    for (size_t i = 0; i < self->n_govs; i++)
        if (self->govs [i].id == id) {
            s_gov_free (&self->govs [i]);
            self->govs [i] = self->govs [--self->n_govs];
            return;
        }
}

static void
s_gov_remember (persist_t *self, uint32_t id, uint64_t incarnation, mpr_str_t name,
                mpr_str_t key, bool expected)
{
    //  A governor that reattaches is still expected until its inventory is in.
    persist_gov_t *old = persist_known (self, id);
    expected |= old && old->expected;
    s_gov_forget (self, id);
    if (self->n_govs == S_MAX_GOVERNORS)
        return;
    if (self->n_govs == self->cap_govs
    &&  sq_grow ((void **) &self->govs, &self->cap_govs, self->n_govs + 1, sizeof *self->govs,
                 16, S_MAX_GOVERNORS))
        return;
    persist_gov_t *gov = &self->govs [self->n_govs];
    gov->id = id;
    gov->incarnation = incarnation;
    gov->name = mpr_strdup (name);
    gov->key = key.len? mpr_strdup (key): NULL;
    gov->expected = expected;
    if (gov->name)
        self->n_govs++;
    else
        free (gov->key);
}

size_t
persist_expected (persist_t *self)
{
    size_t n = 0;
    for (size_t i = 0; i < self->n_govs; i++)
        n += self->govs [i].expected;
    return n;
}

void
persist_reattached (persist_t *self, uint32_t id)
{
    persist_gov_t *gov = persist_known (self, id);
    if (gov)
        gov->expected = false;
}

void
persist_expect_none (persist_t *self)
{
    for (size_t i = 0; i < self->n_govs; i++)
        self->govs [i].expected = false;
}

//  --------------------------------------------------------------------------
//  Replay

static bool
s_any_resource (void *arg, mpr_str_t name, uint64_t amount)
{
    (void) arg;
    (void) name;
    (void) amount;
    return true;                //  judged when it was submitted
}

static void
s_replay_submit (persist_t *self, const sq_rec_t *rec)
{
    session_t *session = graph_session (self->graph, rec->session);
    if (!session) {
        self->skipped++;
        return;
    }
    sq_submit_t submit;
    sq_errbuf_t err;
    if (sq_submit_decode (&submit, rec->frame0.ptr, rec->frame0.len, &err)) {
        sq_warn ("journal: a SUBMIT of session %u does not decode (%s); skipped",
                 rec->session, err.text);
        return;
    }
    zmq_msg_t *payloads = rec->n_payloads
        ? (zmq_msg_t *) calloc (rec->n_payloads, sizeof (zmq_msg_t)): NULL;
    size_t made = 0;
    for (; payloads && made < rec->n_payloads; made++) {
        if (zmq_msg_init_size (&payloads [made], rec->payloads [made].len))
            break;
        if (rec->payloads [made].len)
            memcpy (zmq_msg_data (&payloads [made]), rec->payloads [made].ptr,
                    rec->payloads [made].len);
    }
    char message [512];
    uint32_t bad_id;
    int rc = rec->n_payloads && made != rec->n_payloads? SQ_E_NOMEM
           : graph_submit (self->graph, session, &submit, payloads, made, s_any_resource, NULL,
                           message, sizeof message, &bad_id);
    if (rc)
        sq_warn ("journal: a SUBMIT of session %u is refused now (%s); skipped", rec->session,
                 rc == SQ_E_NOMEM? "out of memory": message);
    for (size_t i = 0; i < made; i++)
        zmq_msg_close (&payloads [i]);
    free (payloads);
    sq_submit_release (&submit);
}

static void
s_replay_finished (persist_t *self, const sq_rec_t *rec)
{
    task_t *task = graph_task (self->graph, rec->key);
    if (!task || task->n_outputs != rec->n_outputs) {
        self->skipped++;
        return;
    }
    uint64_t sizes_small [16];
    sq_blob_t *data_small [16];
    uint64_t *sizes = rec->n_outputs <= 16? sizes_small
                    : (uint64_t *) malloc (rec->n_outputs * sizeof *sizes);
    sq_blob_t **data = rec->n_outputs <= 16? data_small
                     : (sq_blob_t **) calloc (rec->n_outputs, sizeof *data);
    if (sizes && data) {
        for (uint32_t i = 0; i < rec->n_outputs; i++) {
            sizes [i] = rec->outputs [i].size;
            data [i] = rec->outputs [i].data.ptr
                ? sq_blob_copy (rec->outputs [i].data.ptr, rec->outputs [i].data.len): NULL;
        }
        graph_task_restore_finished (self->graph, task, NULL, rec->attempt, sizes, data,
                                     rec->n_outputs);
    }
    if (sizes != sizes_small)
        free (sizes);
    if (data != data_small)
        free (data);
}

static void
s_replay_attempt (persist_t *self, const sq_rec_t *rec)
{
    task_t *task = graph_task (self->graph, rec->key);
    task_extra_t *extra = task? graph_task_extra (task): NULL;
    if (!extra) {
        self->skipped++;
        return;
    }
    if (rec->attempt > task->attempt)
        task->attempt = rec->attempt;
    extra->retries = (uint16_t) (rec->retries > UINT16_MAX? UINT16_MAX: rec->retries);
    extra->crashes = (uint16_t) (rec->crashes > UINT16_MAX? UINT16_MAX: rec->crashes);
    for (uint32_t r = 0; rec->memory && r < extra->n_resources; r++)
        if (mpr_str_eq (extra->resources [r].name, "memory"))
            extra->resources [r].amount = rec->memory;
}

static void
s_replay_ids (persist_t *self, const sq_rec_t *rec)
{
    session_t *session = graph_session (self->graph, rec->session);
    if (!session) {
        self->skipped++;
        return;
    }
    if (rec->type == SQ_REC_CANCEL && rec->n_ids == 0) {
        size_t cursor = 0;
        task_t *task;
        while ((task = graph_session_next_task (session, &cursor)))
            graph_cancel (self->graph, task);
        return;
    }
    for (uint32_t i = 0; i < rec->n_ids; i++) {
        uint64_t key = sq_key (session->id, rec->ids [i]);
        if (rec->type == SQ_REC_CANCEL) {
            task_t *task = graph_task (self->graph, key);
            if (task)
                graph_cancel (self->graph, task);
            continue;
        }
        object_t *object = graph_object (self->graph, key);
        if (rec->type == SQ_REC_DELETE) {
            char message [120];
            snprintf (message, sizeof message, "object %u was deleted by its client (DELETE)",
                      rec->ids [i]);
            if (object)
                graph_object_delete (self->graph, object, message);
            continue;
        }
        if (object && !(rec->type == SQ_REC_KEEP && object->released))
            graph_keep (self->graph, object, rec->type == SQ_REC_KEEP);
    }
}

void
persist_replay (void *arg, const sq_rec_t *rec)
{
    persist_t *self = (persist_t *) arg;
    self->replaying = true;
    switch (rec->type) {
        case SQ_REC_SESSION: {
            session_t *session = graph_session_open_as (self->graph, rec->session, NULL);
            if (!session) {
                self->skipped++;
                break;
            }
            memcpy (session->token, rec->token.ptr, SQ_TOKEN_LEN);
            session->tenant = rec->tenant.len? mpr_strdup (rec->tenant): NULL;
            session->owner = rec->owner.len? mpr_strdup (rec->owner): NULL;
            break;
        }
        case SQ_REC_JOB: {
            session_t *session = graph_session (self->graph, rec->session);
            if (!session) {
                self->skipped++;
                break;
            }
            free (session->name);
            session->name = rec->name.len? mpr_strdup (rec->name): NULL;
            session->job = rec->detached;
            session->created_ms = (int64_t) rec->created_ms;
            session->ended_ms = session->created_ms;
            if (rec->n_ids && jobs_set_after (session, rec->ids, rec->n_ids))
                self->skipped++;
            break;
        }
        case SQ_REC_ELEMENT: case SQ_REC_RESUBMIT:
            if (jobs_replay (self->graph, rec))
                self->skipped++;
            break;
        case SQ_REC_ENDED: {
            task_t *task = graph_task (self->graph, rec->key);
            task_extra_t *extra = task? graph_task_extra (task): NULL;
            if (!extra) {
                self->skipped++;
                break;
            }
            extra->has_exit_code = rec->has_exit_code;
            extra->exit_code = rec->exit_code;
            extra->run_gov = rec->governor;
            if (rec->governor) {
                //  Where its output is (LOG): that governor, if it comes back.
                task->ran_gov = rec->governor;
                task->ran_attempt = task->attempt;
            }
            extra->runs = task->attempt + 1;
            extra->run_attempt = task->attempt + 1;
            extra->started_ms = (int64_t) rec->started_ms;
            extra->ended_ms = (int64_t) rec->ended_ms;
            if (!task->session->unfinished)
                task->session->ended_ms = (int64_t) rec->ended_ms;
            break;
        }
        case SQ_REC_SUBMIT:
            s_replay_submit (self, rec);
            break;
        case SQ_REC_KEEP: case SQ_REC_UNKEEP: case SQ_REC_CANCEL: case SQ_REC_DELETE:
            s_replay_ids (self, rec);
            break;
        case SQ_REC_CLOSE: {
            session_t *session = graph_session (self->graph, rec->session);
            if (session)
                graph_session_close (self->graph, &session);
            break;
        }
        case SQ_REC_FINISHED:
            s_replay_finished (self, rec);
            break;
        case SQ_REC_FAILED: {
            task_t *task = graph_task (self->graph, rec->key);
            if (!task) {
                self->skipped++;
                break;
            }
            char message [SQ_MAX_MESSAGE + 1];
            snprintf (message, sizeof message, "%.*s", (int) rec->message.len, rec->message.ptr);
            task->attempt = rec->attempt;
            graph_task_failed (self->graph, task, (int) rec->code, message);
            break;
        }
        case SQ_REC_ATTEMPT:
            s_replay_attempt (self, rec);
            break;
        case SQ_REC_GOVERNOR:
            s_gov_remember (self, rec->id, rec->incarnation, rec->name, rec->key_z85, true);
            if (rec->id >= self->next_peer)
                self->next_peer = rec->id + 1;
            break;
        case SQ_REC_GONE:
            s_gov_forget (self, rec->id);
            break;
        case SQ_REC_IDS:
            graph_set_next_session (self->graph, rec->session);
            if (rec->id > self->next_peer)
                self->next_peer = rec->id;
            break;
        default:
            break;
    }
    self->replaying = false;
}

void
persist_replayed (persist_t *self, int64_t now)
{
    size_t cursor = 0;
    session_t *session;
    while ((session = graph_session_next (self->graph, &cursor))) {
        session->detached_at = now;
        size_t t = 0;
        task_t *task;
        //  An earlier life may have handed out attempts it never wrote
        //  down; new ones start past them.
        while ((task = graph_session_next_task (session, &t)))
            if (task->state < TASK_FINISHED)
                task->attempt++;
    }
    if (self->skipped)
        sq_warn ("journal: %llu records referred to sessions or tasks that were gone",
                 (unsigned long long) self->skipped);
}

//  --------------------------------------------------------------------------
//  Writing

#define S_RECORD(self, pack) do {                                           \
    if (persist_on (self)) {                                                \
        size_t offset_ = journal_begin ((self)->journal);                   \
        msgpack_packer *pk = journal_packer ((self)->journal);              \
        pack;                                                               \
        journal_end ((self)->journal, offset_);                             \
    }                                                                       \
} while (0)

void
persist_session (persist_t *self, session_t *session)
{
    S_RECORD (self, sq_rec_pack_session (pk, session->id, session->token, session->tenant,
                                         session->owner));
    if (session->name || session->job)
        S_RECORD (self, sq_rec_pack_job (pk, session->id, session->name, session->job,
                                         (uint64_t) session->created_ms, jobs_after (session),
                                         jobs_n_after (session)));
}

//  A job's task ran: its exit status, governor and times (TASKS).
static bool
s_ended_record (const task_t *task, sq_rec_t *rec)
{
    const task_extra_t *extra = task->extra;
    if (!task->session->job || !extra || !extra->runs)
        return false;
    memset (rec, 0, sizeof *rec);
    rec->type = SQ_REC_ENDED;
    rec->key = task->key;
    rec->has_exit_code = extra->has_exit_code;
    rec->exit_code = extra->exit_code;
    rec->governor = extra->run_gov;
    rec->started_ms = (uint64_t) extra->started_ms;
    rec->ended_ms = (uint64_t) extra->ended_ms;
    return true;
}

void
persist_record (persist_t *self, void (*pack) (msgpack_packer *, const sq_rec_t *),
                const sq_rec_t *rec)
{
    S_RECORD (self, pack (pk, rec));
}

void
persist_submit (persist_t *self, uint32_t session, sq_msg_t *msg)
{
    if (!persist_on (self))
        return;
    const void *small [16];
    size_t small_sizes [16];
    size_t n = msg->n - 2;
    const void **payloads = n <= 16? small: (const void **) malloc (n * sizeof (void *));
    size_t *sizes = n <= 16? small_sizes: (size_t *) malloc (n * sizeof (size_t));
    if (payloads && sizes) {
        for (size_t i = 0; i < n; i++) {
            payloads [i] = sq_msg_data (msg, 2 + i);
            sizes [i] = sq_msg_size (msg, 2 + i);
        }
        S_RECORD (self, sq_rec_pack_submit (pk, session, sq_msg_data (msg, 1),
                                            sq_msg_size (msg, 1), payloads, sizes, n));
    }
    else
        sq_error ("journal: out of memory: a SUBMIT of session %u is not journaled", session);
    if (payloads != small)
        free (payloads);
    if (sizes != small_sizes)
        free (sizes);
}

void
persist_ids (persist_t *self, uint32_t type, uint32_t session, const uint32_t *ids, uint32_t n)
{
    S_RECORD (self, sq_rec_pack_ids (pk, type, session, ids, n));
}

void
persist_close (persist_t *self, uint32_t session)
{
    S_RECORD (self, sq_rec_pack_close (pk, session));
}

static void
s_pack_task_done (msgpack_packer *pk, task_t *task)
{
    if (task->state == TASK_FINISHED) {
        sq_rec_pack_finished_begin (pk, task->key, task->attempt, task->n_outputs);
        for (uint32_t i = 0; i < task->n_outputs; i++) {
            object_t *o = task->io [task->n_inputs + i];
            sq_rec_pack_output (pk, o->size, o->data? sq_blob_data (o->data): NULL,
                                o->data? sq_blob_size (o->data): 0);
        }
    }
    else
        sq_rec_pack_failed (pk, task->key, task->attempt, (uint32_t) task->failure->code,
                            task->failure->message? task->failure->message: "");
}

//  Only what cannot be derived: a finish, or the task that failed first
//  (its dependents fail again by propagation; cancellations come from the
//  CANCEL and CLOSE records).
static bool
s_worth_a_record (task_t *task)
{
    return task->state == TASK_FINISHED
        || (task->state == TASK_FAILED && task->failure
            && task->failure->root == sq_key_id (task->key));
}

void
persist_task_done (persist_t *self, task_t *task)
{
    if (task->array_element)
        return;                 //  an ELEMENT record says it (jobs.c)
    if (s_worth_a_record (task))
        S_RECORD (self, s_pack_task_done (pk, task));
    sq_rec_t ended;
    if (s_ended_record (task, &ended))
        S_RECORD (self, sq_rec_pack_ended (pk, &ended));
}

static uint64_t
s_memory (const task_t *task)
{
    const task_extra_t *extra = task_extra (task);
    for (uint32_t r = 0; r < extra->n_resources; r++)
        if (mpr_str_eq (extra->resources [r].name, "memory"))
            return extra->resources [r].amount;
    return 0;
}

void
persist_attempt (persist_t *self, task_t *task)
{
    if (task->array_element)
        return;
    const task_extra_t *extra = task_extra (task);
    S_RECORD (self, sq_rec_pack_attempt (pk, task->key, task->attempt, extra->retries,
                                         extra->crashes, s_memory (task)));
}

void
persist_governor (persist_t *self, uint32_t id, uint64_t incarnation, const char *name,
                  const char *key)
{
    if (!self->journal)
        return;
    mpr_str_t n = { name, (uint32_t) strlen (name) };
    mpr_str_t k = { key? key: "", key? (uint32_t) strlen (key): 0 };
    s_gov_remember (self, id, incarnation, n, k, false);
    S_RECORD (self, sq_rec_pack_governor (pk, id, incarnation, name, key));
}

void
persist_gone (persist_t *self, uint32_t id)
{
    if (!self->journal)
        return;
    s_gov_forget (self, id);
    S_RECORD (self, sq_rec_pack_gone (pk, id));
}

//  --------------------------------------------------------------------------
//  Snapshot

static void
s_begin (msgpack_sbuffer *buf, size_t *offset)
{
    *offset = sq_rec_begin (buf);
}

//  An ADOPT task (graph_adopt): its input is another session's object,
//  which a SUBMIT of this session cannot name. The journal keeps its output
//  as a constant on a governor instead: found again when the governor that
//  holds it reattaches, else reported lost (SQ_E_LOST), never wired to an
//  object of this session that happens to have the same id.
static inline bool
s_adopting (const task_t *task)
{
    return task && task->n_inputs == 1 && task->io [0]->session != task->session;
}

//  One session's graph as the SUBMIT that would build it.
static int
s_pack_session_submit (persist_t *self, session_t *session, msgpack_sbuffer *frame0,
                       sq_blob_t ***payloads, size_t *n_payloads)
{
    (void) self;
    msgpack_packer pk;
    msgpack_packer_init (&pk, frame0, msgpack_sbuffer_write);
    size_t cap = 0;
    *payloads = NULL;
    *n_payloads = 0;
    sq_pack_submit_begin (&pk, 0, session->id);
    sq_pack_submit_objects (&pk, session->n_objects);
    size_t cursor = 0;
    object_t *o;
    while ((o = graph_session_next_object (session, &cursor))) {
        uint32_t flags = o->keep? SQ_OBJ_KEEP: 0;
        const char *type = o->content_type? o->content_type: "";
        if (o->producer && !s_adopting (o->producer))
            sq_pack_object_spec (&pk, sq_key_id (o->key), flags, type, -1, "");
        else
        if (o->data) {
            if (*n_payloads == cap
            &&  sq_grow ((void **) payloads, &cap, *n_payloads + 1, sizeof **payloads, 16, SIZE_MAX))
                return -1;
            (*payloads) [(*n_payloads)++] = o->data;
            sq_pack_object_spec (&pk, sq_key_id (o->key), flags, type, (int32_t) *n_payloads, "");
        }
        else {
            //  Uploaded to a governor: a copy is found again when it reattaches.
            uint32_t gov = 0;
            sq_pack_object_uploaded (&pk, sq_key_id (o->key), flags, type, gov, o->size, "");
        }
    }
    //  Array elements are not tasks to the journal: their array task is,
    //  and ELEMENT records say how they ended.
    uint32_t n_tasks = 0;
    cursor = 0;
    task_t *task;
    while ((task = graph_session_next_task (session, &cursor)))
        n_tasks += !task->array_element && !s_adopting (task);
    sq_pack_submit_tasks (&pk, n_tasks);
    cursor = 0;
    while ((task = graph_session_next_task (session, &cursor))) {
        if (task->array_element || s_adopting (task))
            continue;
        const task_extra_t *extra = task_extra (task);
        uint32_t ids_small [32];
        uint32_t n_io = task->n_inputs + task->n_outputs;
        uint32_t *ids = n_io <= 32? ids_small: (uint32_t *) malloc (n_io * sizeof *ids);
        sq_resource_t res [SQ_MAX_RESOURCES + 1];
        uint32_t n_res = 0;
        if (!ids)
            return -1;
        for (uint32_t i = 0; i < n_io; i++)
            ids [i] = sq_key_id (task->io [i]->key);
        if (extra->cpus != 1)
            res [n_res++] = (sq_resource_t) { { SQ_RES_CPUS, 4 }, extra->cpus };
        for (uint32_t r = 0; r < extra->n_resources && n_res < SQ_MAX_RESOURCES; r++)
            res [n_res++] = extra->resources [r];
        const char *kind = sq_kind_name ((sq_kind_t) task->kind);
        sq_task_spec_t spec = {
            .id = sq_key_id (task->key),
            .kind = { kind, (uint32_t) strlen (kind) },
            .n_inputs = task->n_inputs, .inputs = ids,
            .n_outputs = task->n_outputs, .outputs = ids + task->n_inputs,
            .config = task_config (task), .config_size = task->config_size,
            .n_resources = n_res, .resources = res,
            .priority = extra->priority, .max_retries = extra->max_retries,
            .timeout_ms = extra->timeout_ms,
            .name = { extra->name? extra->name: "", extra->name? (uint32_t) strlen (extra->name): 0 },
            .n_governors = extra->n_governors, .governors = extra->governors,
            .loose = extra->loose
        };
        if (extra->array)
            jobarray_spec (extra->array, &spec);
        sq_pack_task_spec (&pk, &spec);
        if (ids != ids_small)
            free (ids);
    }
    return 0;
}

//  Appends to a growing list of ids; -1 out of memory.
static int
s_push_id (uint32_t **ids, uint32_t *n, uint32_t *cap, uint32_t id)
{
    if (*n == *cap && sq_grow32 ((void **) ids, cap, (size_t) *n + 1, sizeof **ids, 16, UINT32_MAX))
        return -1;
    (*ids) [(*n)++] = id;
    return 0;
}

msgpack_sbuffer *
persist_snapshot (persist_t *self, const char *cluster, uint64_t epoch, uint32_t next_peer)
{
    msgpack_sbuffer *buf = msgpack_sbuffer_new ();
    msgpack_sbuffer frame0;
    msgpack_packer pk;
    size_t offset;
    if (!buf)
        return NULL;
    msgpack_sbuffer_init (&frame0);
    msgpack_packer_init (&pk, buf, msgpack_sbuffer_write);
    msgpack_sbuffer_write (buf, SQ_REC_MAGIC, SQ_REC_MAGIC_LEN);
    s_begin (buf, &offset);
    sq_rec_pack_header (&pk, cluster, epoch);
    sq_rec_end (buf, offset);
    s_begin (buf, &offset);
    sq_rec_pack_ids_counters (&pk, graph_next_session (self->graph), next_peer);
    sq_rec_end (buf, offset);
    //  Connected governors, and those still expected back.
    for (size_t i = 0; i < self->n_govs; i++) {
        s_begin (buf, &offset);
        sq_rec_pack_governor (&pk, self->govs [i].id, self->govs [i].incarnation,
                              self->govs [i].name, self->govs [i].key);
        sq_rec_end (buf, offset);
    }
    size_t cursor = 0;
    session_t *session;
    while ((session = graph_session_next (self->graph, &cursor))) {
        s_begin (buf, &offset);
        sq_rec_pack_session (&pk, session->id, session->token, session->tenant, session->owner);
        sq_rec_end (buf, offset);
        if (session->name || session->job) {
            s_begin (buf, &offset);
            sq_rec_pack_job (&pk, session->id, session->name, session->job,
                             (uint64_t) session->created_ms, jobs_after (session),
                             jobs_n_after (session));
            sq_rec_end (buf, offset);
        }
        sq_blob_t **payloads = NULL;
        size_t n_payloads = 0;
        msgpack_sbuffer_clear (&frame0);
        if (s_pack_session_submit (self, session, &frame0, &payloads, &n_payloads)) {
            free (payloads);
            msgpack_sbuffer_destroy (&frame0);
            msgpack_sbuffer_free (buf);
            return NULL;
        }
        const void **data = (const void **) malloc ((n_payloads + 1) * sizeof (void *));
        size_t *sizes = (size_t *) malloc ((n_payloads + 1) * sizeof (size_t));
        if (!data || !sizes) {
            free (data);
            free (sizes);
            free (payloads);
            msgpack_sbuffer_destroy (&frame0);
            msgpack_sbuffer_free (buf);
            return NULL;
        }
        for (size_t i = 0; i < n_payloads; i++) {
            data [i] = sq_blob_data (payloads [i]);
            sizes [i] = sq_blob_size (payloads [i]);
        }
        s_begin (buf, &offset);
        sq_rec_pack_submit (&pk, session->id, frame0.data, frame0.size, data, sizes, n_payloads);
        sq_rec_end (buf, offset);
        free (data);
        free (sizes);
        free (payloads);
        //  What happened to the tasks since.
        size_t t = 0;
        task_t *task;
        uint32_t *cancelled = NULL;
        uint32_t n_cancelled = 0, cap_cancelled = 0;
        while ((task = graph_session_next_task (session, &t))) {
            const task_extra_t *extra = task_extra (task);
            if (task->array_element)
                continue;
            if (extra->retries || extra->crashes || task->attempt) {
                s_begin (buf, &offset);
                sq_rec_pack_attempt (&pk, task->key, task->attempt, extra->retries,
                                     extra->crashes, s_memory (task));
                sq_rec_end (buf, offset);
            }
            if (s_worth_a_record (task)) {
                s_begin (buf, &offset);
                s_pack_task_done (&pk, task);
                sq_rec_end (buf, offset);
            }
            sq_rec_t ended;
            if (task->state >= TASK_FINISHED && s_ended_record (task, &ended)) {
                s_begin (buf, &offset);
                sq_rec_pack_ended (&pk, &ended);
                sq_rec_end (buf, offset);
            }
            if (extra->array && jobarray_snapshot (extra->array, buf, &pk))
                break;
            else
            if (task->state == TASK_CANCELLED && task->failure
            &&  task->failure->root == sq_key_id (task->key)
            &&  s_push_id (&cancelled, &n_cancelled, &cap_cancelled, sq_key_id (task->key)))
                break;
        }
        if (n_cancelled) {
            s_begin (buf, &offset);
            sq_rec_pack_ids (&pk, SQ_REC_CANCEL, session->id, cancelled, n_cancelled);
            sq_rec_end (buf, offset);
        }
        //  Objects deleted by hand, after the FINISHED records that make
        //  them deletable again on replay (the list reuses `cancelled`).
        n_cancelled = 0;
        size_t o = 0;
        object_t *object;
        while ((object = graph_session_next_object (session, &o)))
            if (object->state == OBJ_FAILED && object->failure
            &&  object->failure->code == SQ_E_DELETED
            &&  object->failure->root == sq_key_id (object->key)
            &&  s_push_id (&cancelled, &n_cancelled, &cap_cancelled, sq_key_id (object->key)))
                break;
        if (n_cancelled) {
            s_begin (buf, &offset);
            sq_rec_pack_ids (&pk, SQ_REC_DELETE, session->id, cancelled, n_cancelled);
            sq_rec_end (buf, offset);
        }
        free (cancelled);
    }
    msgpack_sbuffer_destroy (&frame0);
    return buf;
}
