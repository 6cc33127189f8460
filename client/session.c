/*  session: graph building, SUBMIT, KEEP / UNKEEP, WAIT, FETCH, CANCEL.

    The batch recorded since the last submit holds every id from batch_first
    up to next_id: objects (constants and task outputs) and tasks, found by
    id through `slots`. Ids are never reused, even when a submit fails.

    Over 800 lines: every request a session makes shares the batch, the
    id bookkeeping and the resend-after-resume logic, which would otherwise
    be spread over files that all reach into the session. */
#include "sq_client_private.h"
#include "grow.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t id;
    uint32_t flags;
    char *content_type;         //  NULL: ""
    int32_t frame;              //  payload index, -1: produced by a task
    sq_blob_t *blob;            //  constants
    uint32_t uploaded_to;       //  governor holding the constant, 0: none
    uint32_t governor;          //  sq_object_set_governor: upload it there, 0: any
    bool preferred;             //  governor only preferred (sq_object_prefer_governor)
} s_object_t;

typedef struct {
    char *name;
    uint64_t amount;
} s_res_t;

//  Kept small: a batch may hold millions. Inputs sit in the batch's pool,
//  the kind is shared with the task before when it is the same, resources
//  take room only once one is set.
typedef struct {
    uint32_t id;
    uint32_t n_inputs;
    uint32_t n_outputs;
    uint32_t n_resources;
    size_t inputs_at;           //  index into the session's input pool
    char *kind;                 //  owned unless kind_shared
    uint8_t *config;
    size_t config_size;
    s_res_t *resources;         //  NULL, or room for SQ_MAX_RESOURCES
    char *name;
    int32_t priority;
    uint32_t max_retries;
    uint32_t timeout_ms;
    uint32_t *governors;        //  sq_task_set_governors, NULL: any
    uint32_t n_governors;
    bool loose;
    bool kind_shared;           //  kind belongs to an earlier task of the batch
    struct s_array *array;      //  an array task, or NULL
} s_task_t;

//  An array task's elements (sq_task_set_array*): a range, or its items as
//  the msgpack array SUBMIT carries.
struct s_array {
    uint8_t kind;               //  SQ_ARRAY_RANGE, SQ_ARRAY_ITEMS
    uint32_t first, last, step;
    uint8_t *items;
    size_t items_size;
};

//  What an id of the batch is: index into objects or tasks.
typedef struct {
    bool task;
    uint32_t index;
} s_slot_t;

struct _sq_session_t {
    sq_client_t *client;        //  NULL once the client is gone
    uint32_t id;
    uint8_t token [SQ_TOKEN_LEN];   //  what RESUME presents
    int lost;                   //  the error that made it unusable (a failed resume), 0
    uint32_t known_max;         //  the largest id the broker knew at the last resume
    //  sq_session_replay: ids up to this one were made by an earlier
    //  client in the same order; submits do not send them again.
    uint32_t replay_max;
    uint32_t next_id;
    uint32_t batch_first;
    s_object_t *objects;
    size_t n_objects, objects_cap;
    s_task_t *tasks;
    size_t n_tasks, tasks_cap;
    s_slot_t *slots;            //  [id - batch_first]
    size_t slots_cap;
    uint32_t *inputs;           //  every task's inputs, one after another
    size_t n_inputs, inputs_cap;
    uint32_t n_payloads;
};

//  Records an error on the client (if any is left) and returns the code.
#define s_err(self, code, id, ...) \
    ((self)->client? sq_client_seterr ((self)->client, (code), (id), 0, __VA_ARGS__): (code))

static void
s_batch_clear (sq_session_t *self)
{
    for (size_t i = 0; i < self->n_objects; i++) {
        free (self->objects [i].content_type);
        sq_blob_unref (&self->objects [i].blob);
    }
    for (size_t i = 0; i < self->n_tasks; i++) {
        s_task_t *t = &self->tasks [i];
        if (!t->kind_shared)
            free (t->kind);
        free (t->config);
        free (t->name);
        if (t->array) {
            free (t->array->items);
            free (t->array);
        }
        for (uint32_t j = 0; j < t->n_resources; j++)
            free (t->resources [j].name);
        free (t->resources);
        free (t->governors);
    }
    self->n_objects = 0;
    self->n_tasks = 0;
    self->n_inputs = 0;
    self->n_payloads = 0;
    self->batch_first = self->next_id;
}

static int
s_call_simple (sq_session_t *self, sq_request_t *request, int timeout_ms, sq_reply_t *reply)
{
    sq_client_t *client = self->client;
    request->req = sq_client_next_req (client);
    request->session = self->id;
    sq_wbuf_reset (&client->w);
    sq_request_encode (&client->w, request);
    //  SESSION_OPEN has no session yet: nothing to lose.
    return sq_client_call_submit (client, request->req, NULL, 0, timeout_ms, reply,
                                  request->type == SQ_MSG_SESSION_OPEN
                                  || request->type == SQ_MSG_ATTACH? NULL: self, 0);
}

//  The body of an OK reply must be nil.
static int
s_expect_nil (sq_session_t *self, const sq_reply_t *reply, const char *what)
{
    sq_errbuf_t err;
    if (sq_nil_decode (reply->body, reply->body_size, &err))
        return s_err (self, SQ_E_PROTOCOL, 0, "malformed %s %s", what, err.text);
    return 0;
}

//  Opens a session (name NULL: none), or with attach_id or attach_name
//  takes an existing one onto this client (ATTACH).
static sq_session_t *
s_session_open (sq_client_t *client, const char *name, bool detached,
                uint32_t attach_id, const char *attach_name,
                const uint32_t *after, size_t n_after)
{
    if (!client)
        return NULL;
    if (n_after > SQ_AFTER_MAX || (n_after && !after)) {
        sq_client_seterr (client, SQ_E_INVALID, 0, 0, "a job waits for at most %d jobs",
                          SQ_AFTER_MAX);
        return NULL;
    }
    if ((name && (!*name || strlen (name) > SQ_JOB_NAME_MAX))
    ||  (attach_name && (!*attach_name || strlen (attach_name) > SQ_JOB_NAME_MAX))) {
        sq_client_seterr (client, SQ_E_INVALID, 0, 0, "a job name is 1 to %d bytes",
                          SQ_JOB_NAME_MAX);
        return NULL;
    }
    if (sq_client_check (client))
        return NULL;
    sq_session_t *self = (sq_session_t *) calloc (1, sizeof *self);
    if (!self || sq_client_attach (client, self)) {
        free (self);
        sq_client_seterr (client, SQ_E_NOMEM, 0, 0, "out of memory");
        return NULL;
    }
    self->client = client;
    self->next_id = 1;
    self->batch_first = 1;
    bool attach = attach_id || attach_name;
    sq_request_t request = { .type = attach? SQ_MSG_ATTACH: SQ_MSG_SESSION_OPEN };
    const char *which = attach? attach_name: name;
    if (which) {
        request.has_name = true;
        request.name = (mpr_str_t) { which, (uint32_t) strlen (which) };
    }
    request.detached = detached;
    request.ids = (uint32_t *) after;
    request.n_ids = (uint32_t) n_after;
    sq_reply_t reply;
    //  s_call_simple puts self->id in the request: the id ATTACH asks for.
    self->id = attach_id;
    if (s_call_simple (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply)) {
        sq_client_detach (client, self);
        free (self);
        return NULL;
    }
    sq_errbuf_t err;
    uint32_t max_id = 0;
    self->id = 0;
    int rc = attach? sq_attached_decode (reply.body, reply.body_size, &max_id, &self->id,
                                         self->token, &err)
                   : sq_session_opened_decode (reply.body, reply.body_size, &self->id,
                                               self->token, &err);
    if (rc || self->id == 0 || max_id == UINT32_MAX) {
        sq_client_seterr (client, SQ_E_PROTOCOL, 0, 0, "malformed %s reply: %s",
                          attach? "ATTACH": "SESSION_OPEN",
                          rc? err.text: self->id? "no id left": "session id 0");
        sq_client_detach (client, self);
        free (self);
        return NULL;
    }
    //  A session taken over continues its ids above those it has.
    self->known_max = max_id;
    self->next_id = max_id + 1;
    self->batch_first = max_id + 1;
    return self;
}

sq_session_t *
sq_session_new (sq_client_t *client)
{
    return s_session_open (client, NULL, false, 0, NULL, NULL, 0);
}

sq_session_t *
sq_session_new_job (sq_client_t *client, const char *name, bool detached)
{
    return s_session_open (client, name, detached, 0, NULL, NULL, 0);
}

sq_session_t *
sq_session_new_job_after (sq_client_t *client, const char *name, bool detached,
                          const uint32_t *after, size_t n_after)
{
    return s_session_open (client, name, detached, 0, NULL, after, n_after);
}

sq_session_t *
sq_session_attach (sq_client_t *client, uint32_t session, const char *name)
{
    if (client && (session != 0) == (name != NULL)) {
        sq_client_seterr (client, SQ_E_INVALID, 0, 0, "attach by id or by name: one of them");
        return NULL;
    }
    return s_session_open (client, NULL, false, session, name, NULL, 0);
}

static int s_session_check (sq_session_t *self);

int
sq_session_replay (sq_session_t *self)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if (self->n_objects || self->n_tasks || self->next_id != self->known_max + 1)
        return s_err (self, SQ_E_INVALID, 0, "replay: only on a session just attached");
    self->replay_max = self->known_max;
    self->next_id = 1;
    self->batch_first = 1;
    return 0;
}

void
sq_session_detach (sq_session_t **self_p)
{
    sq_session_t *self = *self_p;
    if (!self)
        return;
    //  Freed as if its client were gone: no SESSION_CLOSE.
    if (self->client)
        sq_client_detach (self->client, self);
    self->client = NULL;
    sq_session_destroy (self_p);
}

uint32_t
sq_session_resume_info (sq_session_t *self, const uint8_t **token)
{
    *token = self->token;
    return self->lost? 0: self->id;
}

void
sq_session_resumed (sq_session_t *self, int code, uint32_t max_id)
{
    self->lost = code;
    self->known_max = max_id;
}

uint32_t
sq_session_known_max (sq_session_t *self)
{
    return self->known_max;
}

bool
sq_session_lost (sq_session_t *self)
{
    return self->lost != 0;
}

void
sq_session_orphan (sq_session_t *self)
{
    self->client = NULL;
}

void
sq_session_destroy (sq_session_t **self_p)
{
    sq_session_t *self = *self_p;
    if (!self)
        return;
    *self_p = NULL;
    if (self->client) {
        sq_client_t *client = self->client;
        if (client->connected && !client->broken) {
            //  Errors here are only recorded: the session is going anyway,
            //  and the broker closes it with the connection at worst.
            sq_request_t request = { .type = SQ_MSG_SESSION_CLOSE };
            sq_reply_t reply;
            s_call_simple (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply);
        }
        sq_client_detach (client, self);
    }
    s_batch_clear (self);
    free (self->objects);
    free (self->tasks);
    free (self->slots);
    free (self->inputs);
    free (self);
}

uint32_t
sq_session_id (sq_session_t *self)
{
    return self? self->id: 0;
}

//  --------------------------------------------------------------------------
//  Graph building

//  Room for `need` items, 0 or -1 (no memory). An array is allocated even
//  for nothing, so that it is never NULL once a batch has begun.
static inline int
s_room (void *array_p, size_t *cap, size_t need, size_t item)
{
    if (need == 0)
        need = 1;
    return need <= *cap? 0: sq_grow ((void **) array_p, cap, need, item, 16, SIZE_MAX);
}

//  Reserves ids [next_id, next_id + count) in the batch; 0 or -1.
static int
s_reserve_ids (sq_session_t *self, uint64_t count)
{
    if ((uint64_t) self->next_id + count > UINT32_MAX) {
        s_err (self, SQ_E_TOO_LARGE, 0, "session %u ran out of ids", self->id);
        return -1;
    }
    size_t need = (size_t) (self->next_id - self->batch_first) + (size_t) count;
    if (s_room (&self->slots, &self->slots_cap, need, sizeof *self->slots)) {
        s_err (self, SQ_E_NOMEM, 0, "out of memory");
        return -1;
    }
    return 0;
}

static s_object_t *
s_new_object (sq_session_t *self)
{
    if (s_room (&self->objects, &self->objects_cap, self->n_objects + 1, sizeof *self->objects)) {
        s_err (self, SQ_E_NOMEM, 0, "out of memory");
        return NULL;
    }
    s_object_t *o = &self->objects [self->n_objects];
    memset (o, 0, sizeof *o);
    o->id = self->next_id;
    o->frame = -1;
    self->slots [self->next_id - self->batch_first] = (s_slot_t) { false, (uint32_t) self->n_objects };
    self->n_objects++;
    self->next_id++;
    return o;
}

static bool
s_name_ok (const char *s)
{
    return strlen (s) <= SQ_MAX_NAME;
}

//  The size from which a governor hands an object to its executors as a
//  segment (docs/architecture.md, "Shared objects"): below, the memory
//  file would be copied out again.
#define S_SEGMENT_MIN (1u << 20)

//  sq_blob and sq_blob_gather: the constant's bytes are the n parts one
//  after the other, copied once into the blob the session keeps (on a
//  governor's host, a large one into a memory file, or one of the same
//  bytes reused: client/constants.c).
static uint32_t
s_blob_parts (sq_session_t *self, const void *const *parts, const size_t *sizes, size_t n,
              const char *content_type, const char *what)
{
    if (!self)
        return 0;
    size_t size = 0;
    bool bad = (n && (!parts || !sizes)) || (content_type && !s_name_ok (content_type));
    for (size_t i = 0; i < n && !bad; i++) {
        bad = !parts [i] && sizes [i];
        if (sizes [i] > SIZE_MAX - size)
            size = SIZE_MAX;
        else
            size += sizes [i];
    }
    if (bad) {
        s_err (self, SQ_E_INVALID, 0, "%s: invalid data or content type", what);
        return 0;
    }
    if (size > UINT32_MAX) {
        //  A frame can be larger, but nobody should push 4 GB through the
        //  broker in one constant: load it from a file instead.
        s_err (self, SQ_E_TOO_LARGE, 0, "%s: constant of %zu bytes is too large", what, size);
        return 0;
    }
    if (self->n_payloads + 1 >= SQ_MAX_FRAMES) {
        s_err (self, SQ_E_TOO_LARGE, 0, "%s: too many constants in one submit (max %d)",
               what, SQ_MAX_FRAMES - 1);
        return 0;
    }
    if (s_reserve_ids (self, 1))
        return 0;
    //  For a governor of this host, a large constant is written once into
    //  the memory file it will be handed over as (sq_client_put_local),
    //  not into memory first and the file then; or not at all when the
    //  client still has a file of exactly these bytes.
    sq_blob_t *blob = self->client && self->client->local_dirfd >= 0 && size >= S_SEGMENT_MIN?
                      sq_constants_segment (self->client->constants, parts, sizes, n, size): NULL;
    if (!blob)
        blob = n == 1? sq_blob_copy (parts [0], size): sq_blob_new (size);
    else
        n = 1;                  //  written
    if (blob && n != 1) {
        char *p = (char *) sq_blob_wdata (blob);
        for (size_t i = 0; i < n; i++) {
            if (sizes [i])
                memcpy (p, parts [i], sizes [i]);
            p += sizes [i];
        }
    }
    char *ct = content_type && *content_type? strdup (content_type): NULL;
    if (!blob || (content_type && *content_type && !ct)) {
        sq_blob_unref (&blob);
        free (ct);
        s_err (self, SQ_E_NOMEM, 0, "out of memory");
        return 0;
    }
    s_object_t *o = s_new_object (self);
    if (!o) {
        sq_blob_unref (&blob);
        free (ct);
        return 0;
    }
    o->blob = blob;
    o->content_type = ct;
    o->frame = (int32_t) ++self->n_payloads;
    return o->id;
}

uint32_t
sq_blob (sq_session_t *self, const void *data, size_t size, const char *content_type)
{
    return s_blob_parts (self, &data, &size, 1, content_type, "sq_blob");
}

uint32_t
sq_blob_gather (sq_session_t *self, const void *const *parts, const size_t *sizes,
                size_t n_parts, const char *content_type)
{
    return s_blob_parts (self, parts, sizes, n_parts, content_type, "sq_blob_gather");
}

//  The slot of an id in the current batch, NULL if it is not in it.
static s_slot_t *
s_slot (sq_session_t *self, uint32_t id)
{
    if (id < self->batch_first || id >= self->next_id)
        return NULL;
    return &self->slots [id - self->batch_first];
}

static s_task_t *
s_pending_task (sq_session_t *self, uint32_t id, const char *what)
{
    if (!self)
        return NULL;
    s_slot_t *slot = s_slot (self, id);
    if (!slot || !slot->task) {
        s_err (self, SQ_E_INVALID, id, "%s: %u is not a task of the unsubmitted batch", what, id);
        return NULL;
    }
    return &self->tasks [slot->index];
}

uint32_t
sq_task (sq_session_t *self, const char *kind, const uint32_t *inputs, size_t n_inputs,
         uint32_t n_outputs, const void *config, size_t config_size)
{
    if (!self)
        return 0;
    if (!kind || !*kind || !s_name_ok (kind)) {
        s_err (self, SQ_E_INVALID, 0, "sq_task: invalid kind");
        return 0;
    }
    if ((n_inputs && !inputs) || n_inputs > UINT32_MAX) {
        s_err (self, SQ_E_INVALID, 0, "sq_task: invalid inputs");
        return 0;
    }
    for (size_t i = 0; i < n_inputs; i++) {
        uint32_t in = inputs [i];
        s_slot_t *slot = s_slot (self, in);
        if (in == 0 || (in >= self->next_id && in < SQ_BROKER_IDS) || (slot && slot->task)) {
            s_err (self, SQ_E_INVALID, in, "sq_task: input %zu (%u) is not an object of session %u",
                   i, in, self->id);
            return 0;
        }
    }
    if (config && config_size) {
        //  The config is embedded raw in the SUBMIT frame: it must be
        //  exactly one msgpack value or it would corrupt the message.
        if (sq_opaque_check (config, config_size)) {
            s_err (self, SQ_E_BAD_CONFIG, 0, "sq_task: config is not one msgpack value%s",
                   config_size > SQ_MAX_CONFIG? " (too large)": "");
            return 0;
        }
    }
    if (s_reserve_ids (self, 1 + (uint64_t) n_outputs))
        return 0;
    bool room = s_room (&self->tasks, &self->tasks_cap, self->n_tasks + 1, sizeof *self->tasks) == 0;
    room &= s_room (&self->objects, &self->objects_cap, self->n_objects + n_outputs,
                    sizeof *self->objects) == 0;
    room &= s_room (&self->inputs, &self->inputs_cap, self->n_inputs + n_inputs,
                    sizeof *self->inputs) == 0;
    s_task_t t;
    memset (&t, 0, sizeof t);
    s_task_t *before = self->n_tasks? &self->tasks [self->n_tasks - 1]: NULL;
    if (before && strcmp (before->kind, kind) == 0) {
        t.kind = before->kind;
        t.kind_shared = true;
    }
    else
        t.kind = strdup (kind);
    t.config = config && config_size? (uint8_t *) malloc (config_size): NULL;
    if (!room || !t.kind || (config && config_size && !t.config)) {
        if (!t.kind_shared)
            free (t.kind);
        free (t.config);
        s_err (self, SQ_E_NOMEM, 0, "out of memory");
        return 0;
    }
    t.inputs_at = self->n_inputs;
    if (n_inputs)
        memcpy (self->inputs + self->n_inputs, inputs, n_inputs * sizeof (uint32_t));
    self->n_inputs += n_inputs;
    if (t.config) {
        memcpy (t.config, config, config_size);
        t.config_size = config_size;
    }
    t.n_inputs = (uint32_t) n_inputs;
    t.n_outputs = n_outputs;
    t.id = self->next_id;
    self->slots [self->next_id - self->batch_first] = (s_slot_t) { true, (uint32_t) self->n_tasks };
    self->tasks [self->n_tasks++] = t;
    self->next_id++;
    for (uint32_t i = 0; i < n_outputs; i++)
        s_new_object (self);        //  room reserved above: cannot fail
    return t.id;
}

//  The model's settings on a clone (sq_tasks_like). 0, or an error code.
static int s_set_resource (sq_session_t *self, uint32_t task, const char *name,
                           uint64_t amount, const char *fn);

static int
s_copy_settings (sq_session_t *self, const s_task_t *model, uint32_t id)
{
    int rc = 0;
    if (model->name && (rc = sq_task_set_name (self, id, model->name)))
        return rc;
    for (uint32_t r = 0; r < model->n_resources && !rc; r++)
        rc = s_set_resource (self, id, model->resources [r].name,
                             model->resources [r].amount, "sq_tasks_like");
    s_task_t *t = s_pending_task (self, id, "sq_tasks_like");
    if (rc || !t)
        return rc? rc: SQ_E_INTERNAL;
    t->priority = model->priority;
    t->max_retries = model->max_retries;
    t->timeout_ms = model->timeout_ms;
    if (model->n_governors)
        return sq_task_set_governors (self, id, model->governors, model->n_governors,
                                      model->loose);
    return 0;
}

int
sq_tasks_like (sq_session_t *self, uint32_t model, size_t n, const void *configs,
               const size_t *ends, uint32_t *first)
{
    if (!self)
        return SQ_E_INVALID;
    s_slot_t *slot = s_slot (self, model);
    if (!slot || !slot->task)
        return s_err (self, SQ_E_INVALID, model,
                      "sq_tasks_like: %u is not a task of the unsubmitted batch", model);
    if (n && (!configs || !ends || !first))
        return s_err (self, SQ_E_INVALID, model, "sq_tasks_like: NULL configs, ends or first");
    //  Every config checked first, so that a refusal adds nothing.
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (ends [i] < at)
            return s_err (self, SQ_E_INVALID, model, "sq_tasks_like: ends must not decrease");
        if (ends [i] > at && sq_opaque_check ((const uint8_t *) configs + at, ends [i] - at))
            return s_err (self, SQ_E_BAD_CONFIG, model,
                          "sq_tasks_like: config %zu is not one msgpack value", i);
        at = ends [i];
    }
    //  The model's inputs, kind and outputs, copied: adding tasks moves the
    //  arrays they live in.
    s_task_t m = self->tasks [slot->index];
    uint32_t inputs_small [16];
    uint32_t *inputs = m.n_inputs <= 16? inputs_small
                     : (uint32_t *) malloc (m.n_inputs * sizeof (uint32_t));
    char *kind = strdup (m.kind);
    if (!inputs || !kind) {
        if (inputs != inputs_small)
            free (inputs);
        free (kind);
        return s_err (self, SQ_E_NOMEM, model, "out of memory");
    }
    memcpy (inputs, self->inputs + m.inputs_at, m.n_inputs * sizeof (uint32_t));
    int rc = 0;
    size_t start = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t id = sq_task (self, kind, inputs, m.n_inputs, m.n_outputs,
                               (const uint8_t *) configs + start, ends [i] - start);
        if (!id) {
            rc = sq_client_errcode (self->client)? sq_client_errcode (self->client): SQ_E_INVALID;
            break;
        }
        if (i == 0)
            *first = id;
        start = ends [i];
        //  Settings and outputs as the model's (model's slot: the arrays moved).
        const s_task_t *mt = &self->tasks [s_slot (self, model)->index];
        if ((rc = s_copy_settings (self, mt, id)))
            break;
        for (uint32_t j = 0; j < m.n_outputs && !rc; j++) {
            const s_object_t *mo = &self->objects [s_slot (self, model + 1 + j)->index];
            s_object_t *o = &self->objects [s_slot (self, id + 1 + j)->index];
            o->flags = mo->flags;
            if (mo->content_type && !(o->content_type = strdup (mo->content_type)))
                rc = s_err (self, SQ_E_NOMEM, id, "out of memory");
        }
    }
    if (inputs != inputs_small)
        free (inputs);
    free (kind);
    return rc;
}

uint32_t
sq_output (uint32_t task_id, uint32_t i)
{
    return task_id + 1 + i;
}

int
sq_task_set_name (sq_session_t *self, uint32_t task, const char *name)
{
    s_task_t *t = s_pending_task (self, task, "sq_task_set_name");
    if (!t)
        return SQ_E_INVALID;
    if (!name || !s_name_ok (name))
        return s_err (self, SQ_E_INVALID, task, "sq_task_set_name: invalid name");
    char *copy = strdup (name);
    if (!copy)
        return s_err (self, SQ_E_NOMEM, task, "out of memory");
    free (t->name);
    t->name = copy;
    return 0;
}

//  amount as kept (gpus in thousandths, SQ_GPU_MILLI).
static int
s_set_resource (sq_session_t *self, uint32_t task, const char *name, uint64_t amount,
                const char *fn)
{
    s_task_t *t = s_pending_task (self, task, fn);
    if (!t)
        return SQ_E_INVALID;
    if (!name || !*name || !s_name_ok (name))
        return s_err (self, SQ_E_INVALID, task, "%s: invalid resource name", fn);
    //  No map on the wire means cpus=1; once there is a map, cpus must be in
    //  it explicitly or the task would ask for none.
    if (!t->resources) {
        t->resources = (s_res_t *) calloc (SQ_MAX_RESOURCES, sizeof (s_res_t));
        if (!t->resources)
            return s_err (self, SQ_E_NOMEM, task, "out of memory");
    }
    if (t->n_resources == 0 && strcmp (name, SQ_RES_CPUS) != 0) {
        t->resources [0].name = strdup (SQ_RES_CPUS);
        if (!t->resources [0].name)
            return s_err (self, SQ_E_NOMEM, task, "out of memory");
        t->resources [0].amount = 1;
        t->n_resources = 1;
    }
    for (uint32_t i = 0; i < t->n_resources; i++)
        if (strcmp (t->resources [i].name, name) == 0) {
            t->resources [i].amount = amount;
            return 0;
        }
    if (t->n_resources == SQ_MAX_RESOURCES)
        return s_err (self, SQ_E_INVALID, task, "%s: at most %d resource kinds",
                      fn, SQ_MAX_RESOURCES);
    char *copy = strdup (name);
    if (!copy)
        return s_err (self, SQ_E_NOMEM, task, "out of memory");
    t->resources [t->n_resources].name = copy;
    t->resources [t->n_resources++].amount = amount;
    return 0;
}

int
sq_task_set_resource (sq_session_t *self, uint32_t task, const char *name, uint64_t amount)
{
    if (name && strcmp (name, SQ_RES_GPUS) == 0) {
        if (amount > UINT64_MAX / SQ_GPU_MILLI)
            return s_err (self, SQ_E_INVALID, task, "sq_task_set_resource: too many gpus");
        amount *= SQ_GPU_MILLI;
    }
    return s_set_resource (self, task, name, amount, "sq_task_set_resource");
}

int
sq_task_set_gpus (sq_session_t *self, uint32_t task, double gpus)
{
    int64_t milli = gpus == 0? 0: sq_gpus_milli (gpus);
    if (milli < 0)
        return s_err (self, SQ_E_INVALID, task, "sq_task_set_gpus: %g gpus: a whole number, "
                      "or a fraction below 1 in thousandths", gpus);
    return s_set_resource (self, task, SQ_RES_GPUS, (uint64_t) milli, "sq_task_set_gpus");
}

int
sq_task_set_priority (sq_session_t *self, uint32_t task, int32_t priority)
{
    s_task_t *t = s_pending_task (self, task, "sq_task_set_priority");
    if (!t)
        return SQ_E_INVALID;
    t->priority = priority;
    return 0;
}

static int
s_set_array (sq_session_t *self, uint32_t task, struct s_array *array)
{
    s_task_t *t = s_pending_task (self, task, "sq_task_set_array");
    if (!t) {
        free (array->items);
        free (array);
        return SQ_E_INVALID;
    }
    if (t->array) {
        free (t->array->items);
        free (t->array);
    }
    t->array = array;
    return 0;
}

int
sq_task_set_array (sq_session_t *self, uint32_t task, uint32_t first, uint32_t last,
                   uint32_t step)
{
    if (!self)
        return SQ_E_INVALID;
    if (first > last || step == 0 || (last - first) / step >= SQ_ARRAY_MAX)
        return s_err (self, SQ_E_INVALID, task, "sq_task_set_array: first <= last, step >= 1 "
                      "and at most %u elements", SQ_ARRAY_MAX);
    struct s_array *array = (struct s_array *) calloc (1, sizeof *array);
    if (!array)
        return s_err (self, SQ_E_NOMEM, task, "out of memory");
    *array = (struct s_array) { SQ_ARRAY_RANGE, first, last, step, NULL, 0 };
    return s_set_array (self, task, array);
}

int
sq_task_set_array_items (sq_session_t *self, uint32_t task, const char *const *items, size_t n)
{
    if (!self)
        return SQ_E_INVALID;
    if (n == 0 || n > SQ_ARRAY_MAX || !items)
        return s_err (self, SQ_E_INVALID, task, "sq_task_set_array_items: 1 to %u items",
                      SQ_ARRAY_MAX);
    for (size_t i = 0; i < n; i++)
        if (!items [i] || strlen (items [i]) > SQ_MAX_NAME)
            return s_err (self, SQ_E_INVALID, task, "sq_task_set_array_items: item %zu is "
                          "NULL or longer than %u bytes", i, SQ_MAX_NAME);
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&buf);
    msgpack_packer_init (&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_array (&pk, (uint32_t) n);
    for (size_t i = 0; i < n; i++)
        sq_pack_cstr (&pk, items [i]);
    struct s_array *array = (struct s_array *) calloc (1, sizeof *array);
    if (!array || !buf.data) {
        free (array);
        msgpack_sbuffer_destroy (&buf);
        return s_err (self, SQ_E_NOMEM, task, "out of memory");
    }
    *array = (struct s_array) { SQ_ARRAY_ITEMS, 0, 0, 0, (uint8_t *) buf.data, buf.size };
    //  The buffer is the array's now.
    return s_set_array (self, task, array);
}

int
sq_task_set_governors (sq_session_t *self, uint32_t task, const uint32_t *governors,
                       size_t n, bool loose)
{
    s_task_t *t = s_pending_task (self, task, "sq_task_set_governors");
    if (!t)
        return SQ_E_INVALID;
    if (n > SQ_MAX_TASK_GOVERNORS || (n && !governors))
        return s_err (self, SQ_E_INVALID, task,
                      "sq_task_set_governors: at most %d governors", SQ_MAX_TASK_GOVERNORS);
    for (size_t g = 0; g < n; g++)
        if (governors [g] == 0)
            return s_err (self, SQ_E_INVALID, task, "sq_task_set_governors: governor id 0");
    uint32_t *copy = NULL;
    if (n && !(copy = (uint32_t *) malloc (n * sizeof (uint32_t))))
        return s_err (self, SQ_E_NOMEM, task, "out of memory");
    if (n)
        memcpy (copy, governors, n * sizeof (uint32_t));
    free (t->governors);
    t->governors = copy;
    t->n_governors = (uint32_t) n;
    t->loose = n && loose;
    return 0;
}

int
sq_task_set_max_retries (sq_session_t *self, uint32_t task, uint32_t retries)
{
    s_task_t *t = s_pending_task (self, task, "sq_task_set_max_retries");
    if (!t)
        return SQ_E_INVALID;
    t->max_retries = retries;
    return 0;
}

int
sq_task_set_timeout (sq_session_t *self, uint32_t task, double seconds)
{
    s_task_t *t = s_pending_task (self, task, "sq_task_set_timeout");
    if (!t)
        return SQ_E_INVALID;
    if (!isfinite (seconds) || seconds < 0 || seconds * 1000.0 > (double) UINT32_MAX)
        return s_err (self, SQ_E_INVALID, task,
                      "sq_task_set_timeout: %g s is not between 0 and %u s", seconds,
                      UINT32_MAX / 1000);
    //  Round up so that a tiny positive timeout does not become "none" (0).
    t->timeout_ms = (uint32_t) ceil (seconds * 1000.0);
    return 0;
}

int
sq_object_set_content_type (sq_session_t *self, uint32_t object, const char *content_type)
{
    if (!self)
        return SQ_E_INVALID;
    s_slot_t *slot = s_slot (self, object);
    if (!slot || slot->task)
        return s_err (self, SQ_E_INVALID, object,
                      "sq_object_set_content_type: %u is not an object of the unsubmitted batch",
                      object);
    if (!content_type || !s_name_ok (content_type))
        return s_err (self, SQ_E_INVALID, object, "sq_object_set_content_type: invalid content type");
    char *copy = NULL;
    if (*content_type && !(copy = strdup (content_type)))
        return s_err (self, SQ_E_NOMEM, object, "out of memory");
    s_object_t *o = &self->objects [slot->index];
    free (o->content_type);
    o->content_type = copy;
    return 0;
}

int
sq_object_set_stream (sq_session_t *self, uint32_t object)
{
    if (!self)
        return SQ_E_INVALID;
    s_slot_t *slot = s_slot (self, object);
    if (!slot || slot->task || self->objects [slot->index].blob)
        return s_err (self, SQ_E_INVALID, object,
                      "sq_object_set_stream: %u is not a task output of the unsubmitted batch",
                      object);
    self->objects [slot->index].flags |= SQ_OBJ_STREAM;
    return 0;
}

//  Where a constant of the unsubmitted batch goes: required, or preferred.
static int
s_constant_governor (sq_session_t *self, uint32_t object, uint32_t governor, bool preferred,
                     const char *caller)
{
    if (!self)
        return SQ_E_INVALID;
    s_slot_t *slot = s_slot (self, object);
    if (!slot || slot->task || !self->objects [slot->index].blob)
        return s_err (self, SQ_E_INVALID, object,
                      "%s: %u is not a constant of the unsubmitted batch", caller, object);
    self->objects [slot->index].governor = governor;
    self->objects [slot->index].preferred = preferred;
    return 0;
}

int
sq_object_set_governor (sq_session_t *self, uint32_t object, uint32_t governor)
{
    return s_constant_governor (self, object, governor, false, "sq_object_set_governor");
}

int
sq_object_prefer_governor (sq_session_t *self, uint32_t object, uint32_t governor)
{
    return s_constant_governor (self, object, governor, governor != 0,
                                "sq_object_prefer_governor");
}

//  --------------------------------------------------------------------------
//  Requests on submitted ids

//  Ids a request names must have been submitted already.
static int
s_check_submitted (sq_session_t *self, const uint32_t *ids, size_t n, const char *what)
{
    if (n && !ids)
        return s_err (self, SQ_E_INVALID, 0, "%s: ids is NULL", what);
    if (n > UINT32_MAX)
        return s_err (self, SQ_E_INVALID, 0, "%s: too many ids", what);
    for (size_t i = 0; i < n; i++) {
        //  Ids the broker made (ADOPT): it says whether they exist.
        if (ids [i] >= SQ_BROKER_IDS)
            continue;
        if (ids [i] == 0 || ids [i] >= self->next_id)
            return s_err (self, SQ_E_UNKNOWN_ID, ids [i], "%s: id %u does not exist in session %u",
                          what, ids [i], self->id);
        if (ids [i] >= self->batch_first)
            return s_err (self, SQ_E_INVALID, ids [i],
                          "%s: id %u is not submitted yet (call sq_submit first)", what, ids [i]);
    }
    return 0;
}

int
sq_session_lost_error (sq_session_t *self)
{
    return s_err (self, self->lost, 0, "session %u is lost: the broker did not take it back "
                  "after the connection was lost (%s): it was closed, its client did not come "
                  "back within the broker's session grace, or the broker restarted without "
                  "its journal", self->id, sq_strerror (self->lost));
}

static int
s_session_check (sq_session_t *self)
{
    if (!self)
        return SQ_E_INVALID;
    if (!self->client)
        return SQ_E_CONNECTION;
    if (self->lost)
        return sq_session_lost_error (self);
    return 0;
}

static int
s_keep_request (sq_session_t *self, uint32_t object, bool keep)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    const char *what = keep? "sq_keep": "sq_unkeep";
    s_slot_t *slot = s_slot (self, object);
    if (slot) {
        if (slot->task)
            return s_err (self, SQ_E_INVALID, object, "%s: %u is a task, not an object", what, object);
        s_object_t *o = &self->objects [slot->index];
        if (keep)
            o->flags |= SQ_OBJ_KEEP;
        else
            o->flags &= ~(uint32_t) SQ_OBJ_KEEP;
        return 0;
    }
    if ((rc = s_check_submitted (self, &object, 1, what)))
        return rc;
    sq_request_t request = { .type = keep? SQ_MSG_KEEP: SQ_MSG_UNKEEP, .ids = &object, .n_ids = 1 };
    sq_reply_t reply;
    if ((rc = s_call_simple (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply)))
        return rc;
    return s_expect_nil (self, &reply, keep? "KEEP": "UNKEEP");
}

int
sq_keep (sq_session_t *self, uint32_t object)
{
    return s_keep_request (self, object, true);
}

int
sq_unkeep (sq_session_t *self, uint32_t object)
{
    return s_keep_request (self, object, false);
}

int
sq_unkeep_many (sq_session_t *self, const uint32_t *objects, size_t n)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if (n == 0)
        return 0;
    //  Objects of the unsubmitted batch just lose their keep flag.
    uint32_t *sent = (uint32_t *) malloc (n * sizeof (uint32_t));
    if (!sent)
        return s_err (self, SQ_E_NOMEM, 0, "out of memory");
    size_t n_sent = 0;
    for (size_t i = 0; i < n; i++) {
        s_slot_t *slot = s_slot (self, objects [i]);
        if (slot && !slot->task)
            self->objects [slot->index].flags &= ~(uint32_t) SQ_OBJ_KEEP;
        else
            sent [n_sent++] = objects [i];
    }
    if (n_sent && !(rc = s_check_submitted (self, sent, n_sent, "sq_unkeep_many"))) {
        sq_request_t request = { .type = SQ_MSG_UNKEEP, .ids = sent, .n_ids = (uint32_t) n_sent };
        sq_reply_t reply;
        if (!(rc = s_call_simple (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply)))
            rc = s_expect_nil (self, &reply, "UNKEEP");
    }
    free (sent);
    return rc;
}

//  Silence of a governor after which an upload gives up (and the constant
//  goes through the broker after all).
#define S_UPLOAD_TIMEOUT 10000

static bool
s_to_upload (sq_session_t *self, const s_object_t *o)
{
    bool required = o->governor && !o->preferred;
    return o->blob && o->id > self->replay_max && (required || sq_blob_size (o->blob) >= SQ_UPLOAD_MIN);
}

//  One at a time, each its own UPLOAD and upload: the objects `left`
//  marks (all if NULL).
static int
s_upload_each (sq_session_t *self, const bool *left)
{
    sq_client_t *client = self->client;
    sq_target_t target;
    bool fallback = false;
    for (size_t i = 0; i < self->n_objects; i++) {
        s_object_t *o = &self->objects [i];
        bool required = o->governor && !o->preferred;
        if (!s_to_upload (self, o) || (left && !left [i]) || (!required && fallback))
            continue;
        //  Each upload its own: with keys, the right to write is per object.
        //  A preferred governor that is gone: where the broker picks.
        if ((sq_client_upload_target (client, self->id, o->id, sq_blob_size (o->blob),
                                      o->governor, &target)
             && (required || sq_client_upload_target (client, self->id, o->id,
                                                      sq_blob_size (o->blob), 0, &target)))
        ||  (sq_client_put_local (client, &target, sq_key (self->id, o->id), o->blob,
                                  o->content_type, S_UPLOAD_TIMEOUT) != 0
             && sq_client_put (client, &target, sq_key (self->id, o->id), o->blob,
                               o->content_type, S_UPLOAD_TIMEOUT))) {
            if (required) {
                int code = sq_client_errcode (client);
                return s_err (self, code? code: SQ_E_CONNECTION, o->id,
                              "object %u could not be put on governor %u: %s", o->id,
                              o->governor, sq_client_errmsg (client));
            }
            fallback = true;
            continue;
        }
        o->uploaded_to = target.governor;
    }
    return 0;
}

//  Several constants: their UPLOADs in flight together (replies in
//  order), then each governor's uploads pipelined (sq_client_put_many),
//  so that N constants cost about one round trip to the broker and a
//  window's worth to each governor, not 2N. What this way could not do
//  (an UPLOAD refused, a preferred governor gone, a required governor's
//  upload failing) is done again one at a time, as before.
static int
s_upload_together (sq_session_t *self, size_t n)
{
    sq_client_t *client = self->client;
    size_t *which = (size_t *) malloc (n * sizeof (size_t));
    sq_target_t *targets = (sq_target_t *) calloc (n, sizeof (sq_target_t));
    bool *got = (bool *) calloc (n, sizeof (bool));
    bool *left = (bool *) calloc (self->n_objects, sizeof (bool));
    sq_upload_t *items = (sq_upload_t *) calloc (n, sizeof (sq_upload_t));
    if (!which || !targets || !got || !left || !items) {
        free (which), free (targets), free (got), free (left), free (items);
        return s_upload_each (self, NULL);
    }
    size_t k = 0;
    for (size_t i = 0; i < self->n_objects && k < n; i++)
        if (s_to_upload (self, &self->objects [i]))
            which [k++] = i;
    uint32_t first_req = 0;
    size_t sent = 0;
    for (; sent < n; sent++) {
        s_object_t *o = &self->objects [which [sent]];
        uint32_t req = sq_client_next_req (client);
        if (sent == 0)
            first_req = req;
        sq_request_t request = {
            .type = SQ_MSG_UPLOAD, .req = req, .session = self->id, .id = o->id,
            .size = sq_blob_size (o->blob), .governor = o->governor
        };
        sq_wbuf_reset (&client->w);
        sq_request_encode (&client->w, &request);
        if (sq_client_send_only (client))
            break;
    }
    for (size_t i = 0; i < sent; i++) {
        sq_reply_t reply;
        sq_where_t where;
        sq_errbuf_t err;
        int rc = sq_client_await (client, first_req + (uint32_t) i, SQ_CLIENT_CALL_TIMEOUT, &reply);
        got [i] = rc == 0 && sq_where_decode (&where, reply.body, reply.body_size, &err) == 0
               && where.endpoint.len >= 7 && memcmp (where.endpoint.ptr, "tcp://", 6) == 0
               && sq_target_from (&targets [i], &where) == 0;
        if (rc == SQ_E_CONNECTION || rc == SQ_E_TIMEOUT)
            break;              //  the rest one at a time (with a resume)
    }
    //  Each governor's in one run, in the order of the batch.
    for (size_t i = 0; i < n; i++) {
        if (!got [i] || items [i].target)
            continue;
        size_t m = 0;
        for (size_t j = i; j < n; j++)
            if (got [j] && !items [j].target
            &&  strcmp (targets [j].endpoint, targets [i].endpoint) == 0
            &&  targets [j].has_key == targets [i].has_key
            &&  memcmp (targets [j].key, targets [i].key, 32) == 0) {
                s_object_t *o = &self->objects [which [j]];
                items [j] = (sq_upload_t) {
                    &targets [j], sq_key (self->id, o->id), o->blob, o->content_type, 0
                };
                m++;
            }
        //  put_many wants them side by side: gather this governor's.
        sq_upload_t *run = (sq_upload_t *) malloc (m * sizeof (sq_upload_t));
        size_t *at = (size_t *) malloc (m * sizeof (size_t));
        size_t r = 0;
        for (size_t j = i; run && at && j < n && r < m; j++)
            if (items [j].target && items [j].rc == 0 && got [j]
            &&  strcmp (targets [j].endpoint, targets [i].endpoint) == 0) {
                run [r] = items [j];
                at [r++] = j;
                got [j] = false;        //  taken into a run
            }
        if (run && at)
            sq_client_put_many (client, run, r, S_UPLOAD_TIMEOUT);
        for (size_t x = 0; x < r; x++) {
            s_object_t *o = &self->objects [which [at [x]]];
            if (run && at && run [x].rc == 0)
                o->uploaded_to = targets [at [x]].governor;
            else
            if (o->governor && !o->preferred)
                left [which [at [x]]] = true;   //  required: tried again, or the submit fails
        }
        free (run);
        free (at);
    }
    //  UPLOAD refused or never answered: one at a time, as before.
    for (size_t i = 0; i < n; i++)
        if (!items [i].target)
            left [which [i]] = true;
    int rc = s_upload_each (self, left);
    free (which), free (targets), free (got), free (left), free (items);
    return rc;
}

//  Data plane: constants of SQ_UPLOAD_MIN bytes or more go straight to a
//  governor before the SUBMIT, which then only names it. On any failure the
//  rest ride in the SUBMIT as before; but a constant put on a governor by
//  name (sq_object_set_governor) goes there or the submit fails (one only
//  preferred there, sq_object_prefer_governor, goes elsewhere).
static int
s_upload (sq_session_t *self)
{
    size_t n = 0;
    for (size_t i = 0; i < self->n_objects; i++)
        n += s_to_upload (self, &self->objects [i]);
    return n > 1? s_upload_together (self, n): s_upload_each (self, NULL);
}

int
sq_submit (sq_session_t *self)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if (self->n_objects == 0 && self->n_tasks == 0)
        return 0;
    //  Replayed ids (sq_session_replay) are in the session already.
    size_t n_objects = 0, n_tasks = 0;
    for (size_t i = 0; i < self->n_objects; i++)
        n_objects += self->objects [i].id > self->replay_max;
    for (size_t i = 0; i < self->n_tasks; i++)
        n_tasks += self->tasks [i].id > self->replay_max;
    if (n_objects == 0 && n_tasks == 0) {
        s_batch_clear (self);
        return 0;
    }
    sq_client_t *client = self->client;
    if ((rc = sq_client_check (client))) {
        s_batch_clear (self);
        return rc;
    }
    zmq_msg_t *payloads = self->n_payloads?
        (zmq_msg_t *) malloc (self->n_payloads * sizeof (zmq_msg_t)): NULL;
    if (self->n_payloads && !payloads) {
        s_batch_clear (self);
        return s_err (self, SQ_E_NOMEM, 0, "out of memory");
    }
    if ((rc = s_upload (self))) {
        free (payloads);
        s_batch_clear (self);
        return rc;
    }
    uint32_t req = sq_client_next_req (client);
    msgpack_packer *pk = &client->w.pk;
    sq_wbuf_reset (&client->w);
    sq_pack_submit_begin (pk, req, self->id);
    sq_pack_submit_objects (pk, (uint32_t) n_objects);
    size_t n_payloads = 0;
    uint64_t payload_bytes = 0;
    for (size_t i = 0; i < self->n_objects; i++) {
        s_object_t *o = &self->objects [i];
        if (o->id <= self->replay_max)
            continue;
        if (o->uploaded_to) {
            sq_pack_object_uploaded (pk, o->id, o->flags, o->content_type, o->uploaded_to,
                                     sq_blob_size (o->blob), "");
            continue;
        }
        //  Frames are numbered among the constants not uploaded.
        sq_pack_object_spec (pk, o->id, o->flags, o->content_type,
                             o->blob? (int32_t) n_payloads + 1: o->frame, "");
        if (o->blob) {
            //  Constants go out zero-copy: ZeroMQ holds a blob reference
            //  until the bytes are on the wire.
            if (sq_blob_msg (o->blob, &payloads [n_payloads])) {
                rc = s_err (self, SQ_E_NOMEM, o->id, "out of memory");
                break;
            }
            payload_bytes += sq_blob_size (o->blob);
            n_payloads++;
        }
    }
    sq_pack_submit_tasks (pk, (uint32_t) n_tasks);
    for (size_t i = 0; i < self->n_tasks && rc == 0; i++) {
        s_task_t *t = &self->tasks [i];
        if (t->id <= self->replay_max)
            continue;
        sq_resource_t resources [SQ_MAX_RESOURCES];
        uint32_t outputs_stack [64];
        uint32_t *outputs = t->n_outputs <= 64? outputs_stack:
                            (uint32_t *) malloc (t->n_outputs * sizeof (uint32_t));
        if (!outputs) {
            rc = s_err (self, SQ_E_NOMEM, t->id, "out of memory");
            break;
        }
        for (uint32_t j = 0; j < t->n_outputs; j++)
            outputs [j] = sq_output (t->id, j);
        for (uint32_t j = 0; j < t->n_resources; j++)
            resources [j] = (sq_resource_t) {
                { t->resources [j].name, (uint32_t) strlen (t->resources [j].name) },
                t->resources [j].amount
            };
        sq_task_spec_t spec = {
            .id = t->id,
            .kind = { t->kind, (uint32_t) strlen (t->kind) },
            .n_inputs = t->n_inputs, .inputs = self->inputs + t->inputs_at,
            .n_outputs = t->n_outputs, .outputs = outputs,
            .config = t->config, .config_size = t->config_size,
            .n_resources = t->n_resources, .resources = resources,
            .priority = t->priority, .max_retries = t->max_retries,
            .timeout_ms = t->timeout_ms,
            .name = { t->name? t->name: "", t->name? (uint32_t) strlen (t->name): 0 },
            .n_governors = t->n_governors, .governors = t->governors, .loose = t->loose
        };
        if (t->array) {
            spec.array = t->array->kind;
            spec.array_first = t->array->first;
            spec.array_last = t->array->last;
            spec.array_step = t->array->step;
            spec.array_items = t->array->items;
            spec.array_items_size = t->array->items_size;
        }
        sq_pack_task_spec (pk, &spec);
        if (outputs != outputs_stack)
            free (outputs);
    }
    if (rc == 0 && client->w.buf.size > SQ_DEFAULT_MAX_HEADER)
        rc = s_err (self, SQ_E_TOO_LARGE, 0, "submit header of %zu bytes is over the %u byte limit",
                    client->w.buf.size, SQ_DEFAULT_MAX_HEADER);
    if (rc) {
        for (size_t i = 0; i < n_payloads; i++)
            zmq_msg_close (&payloads [i]);
        free (payloads);
        sq_wbuf_reset (&client->w);
        s_batch_clear (self);
        return rc;
    }
    //  The broker answers after taking in the whole message, so give the
    //  transfer time: a second per 10 MB on top of the usual timeout.
    uint64_t timeout = SQ_CLIENT_CALL_TIMEOUT + (payload_bytes + client->w.buf.size) / 10000;
    sq_reply_t reply;
    rc = sq_client_call_submit (client, req, payloads, n_payloads,
                                timeout > INT32_MAX? -1: (int) timeout, &reply, self,
                                self->next_id - 1);
    free (payloads);
    s_batch_clear (self);
    if (rc)
        return rc;
    return s_expect_nil (self, &reply, "SUBMIT");
}

//  --------------------------------------------------------------------------
//  WAIT

static int
s_wait_timeout (int timeout_ms)
{
    if (timeout_ms < 0 || timeout_ms > INT32_MAX - SQ_CLIENT_WAIT_MARGIN)
        return -1;
    return timeout_ms + SQ_CLIENT_WAIT_MARGIN;
}

//  Turns a failed or cancelled entry into the error the caller sees.
static int
s_done_error (sq_session_t *self, const sq_done_t *d)
{
    int msg_len = (int) d->message.len;
    const char *msg = d->message.len? d->message.ptr: "";
    if (d->state == SQ_STATE_CANCELLED) {
        int rc = s_err (self, SQ_E_CANCELLED, d->id, "task %u was cancelled%s%.*s", d->id,
                        msg_len? ": ": "", msg_len, msg);
        if (self->client)
            self->client->errroot = d->root;
        return rc;
    }
    if (d->root == 0 || d->root == d->id) {
        int rc = s_err (self, SQ_E_TASK_FAILED, d->id, "task %u failed: %.*s", d->id, msg_len, msg);
        if (self->client)
            self->client->errroot = d->id;
        return rc;
    }
    int rc = s_err (self, SQ_E_UPSTREAM_FAILED, d->id, "task %u failed: upstream task %u failed: %.*s",
                    d->id, d->root, msg_len, msg);
    if (self->client)
        self->client->errroot = d->root;
    return rc;
}

//  Sends WAIT and reads the reply. For WAIT_SOME the done ids go to done[]
//  (room for max_done); otherwise the first failure becomes the error.
static int
s_wait (sq_session_t *self, uint32_t mode, const uint32_t *ids, size_t n, int timeout_ms,
        uint32_t *done, size_t max_done, size_t *n_done)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    const char *what = mode == SQ_WAIT_SOME? "sq_wait_some": mode == SQ_WAIT_ALL? "sq_wait": "sq_wait_all";
    if ((rc = s_check_submitted (self, ids, n, what)))
        return rc;
    sq_request_t request = {
        .type = SQ_MSG_WAIT, .mode = mode, .ids = (uint32_t *) ids, .n_ids = (uint32_t) n,
        .timeout_ms = timeout_ms < 0? -1: timeout_ms
    };
    sq_reply_t reply;
    if ((rc = s_call_simple (self, &request, s_wait_timeout (timeout_ms), &reply)))
        return rc;
    uint64_t n_finished, n_failed;
    sq_iter_t it;
    sq_errbuf_t err;
    uint32_t max_listed = mode == SQ_WAIT_SESSION? UINT32_MAX: (uint32_t) n;
    sq_done_t first_bad = { 0, 0, 0, { NULL, 0 } };
    size_t count = 0;
    int more = sq_wait_reply_begin (&it, reply.body, reply.body_size, max_listed,
                                    &n_finished, &n_failed, &err);
    sq_done_t d;
    while (more == 0 && (more = sq_wait_reply_next (&it, &d)) == 1) {
        if (d.state != SQ_STATE_PENDING && done && count < max_done)
            done [count++] = d.id;
        if ((d.state == SQ_STATE_FAILED || d.state == SQ_STATE_CANCELLED)
        &&  (first_bad.state == 0
          || (first_bad.state == SQ_STATE_CANCELLED && d.state == SQ_STATE_FAILED)))
            first_bad = d;
        more = 0;
    }
    sq_iter_release (&it);
    if (more < 0)
        return s_err (self, SQ_E_PROTOCOL, 0, "malformed %s", err.text);
    if (n_done)
        *n_done = count;
    if (mode == SQ_WAIT_SOME)
        return 0;
    if (first_bad.state)
        return s_done_error (self, &first_bad);
    if (n_failed)
        return s_err (self, SQ_E_TASK_FAILED, 0, "%llu task(s) of session %u failed",
                      (unsigned long long) n_failed, self->id);
    return 0;
}

int
sq_wait (sq_session_t *self, const uint32_t *ids, size_t n, int timeout_ms)
{
    if (n == 0)
        return s_session_check (self);
    return s_wait (self, SQ_WAIT_ALL, ids, n, timeout_ms, NULL, 0, NULL);
}

int
sq_wait_all (sq_session_t *self, int timeout_ms)
{
    return s_wait (self, SQ_WAIT_SESSION, NULL, 0, timeout_ms, NULL, 0, NULL);
}

int
sq_wait_some (sq_session_t *self, const uint32_t *ids, size_t n, int timeout_ms,
              uint32_t *done, size_t *n_done)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if (n_done)
        *n_done = 0;
    if (n == 0 || !done || !n_done)
        return s_err (self, SQ_E_INVALID, 0, "sq_wait_some: needs ids, done and n_done");
    return s_wait (self, SQ_WAIT_SOME, ids, n, timeout_ms, done, n, n_done);
}

//  --------------------------------------------------------------------------
//  FETCH

//  Reads [size, content_type] from a body (the governor's reply, or the
//  broker's first two fields); the reader is left on the next field.
static int
s_copy_out (sq_session_t *self, sq_msg_t *msg, uint64_t size, mpr_str_t content_type,
            const char *from, void **data, size_t *size_out, char **content_type_out)
{
    if (msg->n != 2)
        return s_err (self, SQ_E_PROTOCOL, 0, "FETCH reply from %s: expected 1 payload frame, got %zu",
                      from, msg->n? msg->n - 1: 0);
    if (sq_msg_size (msg, 1) != size)
        return s_err (self, SQ_E_PROTOCOL, 0, "FETCH reply from %s: payload of %zu bytes, %llu announced",
                      from, sq_msg_size (msg, 1), (unsigned long long) size);
    //  The caller frees it with sq_free: the bytes must be copied out of the frame.
    void *bytes = malloc (size? size: 1);
    char *ct = content_type_out? mpr_strdup (content_type): NULL;
    if (!bytes || (content_type_out && !ct)) {
        free (bytes);
        free (ct);
        return s_err (self, SQ_E_NOMEM, 0, "out of memory");
    }
    if (size)
        memcpy (bytes, sq_msg_data (msg, 1), size);
    *data = bytes;
    *size_out = (size_t) size;
    if (content_type_out)
        *content_type_out = ct;
    return 0;
}

//  One FETCH through the broker and, for an object on a governor, one direct
//  read from it. SQ_E_CONNECTION means the governor went away meanwhile.
static int
s_fetch_once (sq_session_t *self, uint32_t object, int timeout_ms, void **data, size_t *size,
              char **content_type)
{
    int rc;
    sq_client_t *client = self->client;
    sq_request_t request = {
        .type = SQ_MSG_FETCH, .id = object, .timeout_ms = timeout_ms < 0? -1: timeout_ms
    };
    sq_reply_t reply;
    if ((rc = s_call_simple (self, &request, s_wait_timeout (timeout_ms), &reply)))
        return rc;
    sq_fetched_t fetched;
    sq_errbuf_t err;
    if (sq_fetched_decode (&fetched, reply.body, reply.body_size, &err))
        return s_err (self, SQ_E_PROTOCOL, object, "malformed FETCH reply: %s", err.text);
    uint64_t length = fetched.size;
    if (length > SIZE_MAX)
        return s_err (self, SQ_E_TOO_LARGE, object, "object %u is too large for memory", object);
    if (!fetched.located)
        return s_copy_out (self, &client->msg, length, fetched.content_type, "broker", data,
                           size, content_type);

    //  The bytes live on a governor: fetch them from it directly. Where it
    //  is and the content type point into the broker's reply, which the
    //  next receive replaces: copy them first.
    sq_target_t *target = (sq_target_t *) malloc (sizeof *target);
    char *ct_copy = mpr_strdup (fetched.content_type);
    if (!target || !ct_copy) {
        free (target);
        free (ct_copy);
        return s_err (self, SQ_E_NOMEM, object, "out of memory");
    }
    if (sq_target_from (target, &fetched.where)) {
        free (target);
        free (ct_copy);
        return s_err (self, SQ_E_PROTOCOL, object, "malformed FETCH reply: bad where");
    }
    //  Chunked, with a window of ranges outstanding: see client/fetch.c.
    void *bytes = NULL;
    rc = sq_client_gread (client, target, sq_key (self->id, object), length,
                          SQ_FETCH_SILENCE_MS, &bytes);
    if (rc == 0) {
        *data = bytes;
        *size = (size_t) length;
        if (content_type) {
            *content_type = ct_copy;
            ct_copy = NULL;
        }
    }
    else
    if (self->client && self->client->errid == 0)
        self->client->errid = object;
    free (target);
    free (ct_copy);
    return rc;
}

int
sq_fetch (sq_session_t *self, uint32_t object, int timeout_ms, void **data, size_t *size,
          char **content_type)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if (!data || !size)
        return s_err (self, SQ_E_INVALID, object, "sq_fetch: data and size are required");
    *data = NULL;
    *size = 0;
    if (content_type)
        *content_type = NULL;
    if ((rc = s_check_submitted (self, &object, 1, "sq_fetch")))
        return rc;
    //  A governor that dies or drops the object while we read from it does
    //  not fail the fetch: the broker is asked again, and answers with
    //  another copy, or once the object is recomputed (the caller just
    //  waits longer). Errors from the broker itself are final.
    //  A governor that refuses the capability (it expired, or the governor
    //  reattached to a restarted broker and has a new secret) is asked again
    //  the same way.
    for (int attempt = 1; ; attempt++) {
        rc = s_fetch_once (self, object, timeout_ms, data, size, content_type);
        bool governor_trouble = (rc == SQ_E_CONNECTION || rc == SQ_E_DENIED)
                              && self->client && !self->client->broken;
        if (!governor_trouble || attempt == SQ_FETCH_ATTEMPTS)
            return rc;
    }
}

//  --------------------------------------------------------------------------

int
sq_delete (sq_session_t *self, const uint32_t *ids, size_t n)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if ((rc = s_check_submitted (self, ids, n, "sq_delete")))
        return rc;
    sq_request_t request = { .type = SQ_MSG_DELETE, .ids = (uint32_t *) ids, .n_ids = (uint32_t) n };
    sq_reply_t reply;
    if ((rc = s_call_simple (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply)))
        return rc;
    return s_expect_nil (self, &reply, "DELETE");
}

int
sq_place (sq_session_t *self, uint32_t object, const uint32_t *governors, size_t n_governors,
          uint32_t copies, uint32_t flags, int timeout_ms,
          uint32_t *holders, size_t max_holders, size_t *n_holders)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if (n_holders)
        *n_holders = 0;
    if ((rc = s_check_submitted (self, &object, 1, "sq_place")))
        return rc;
    if (n_governors > SQ_PLACE_MAX || (n_governors && !governors))
        return s_err (self, SQ_E_INVALID, object, "sq_place: at most %d governors, not NULL",
                      SQ_PLACE_MAX);
    if (flags & ~(uint32_t) SQ_PLACE_MOVE)
        return s_err (self, SQ_E_INVALID, object, "sq_place: unknown flags");
    sq_request_t request = {
        .type = SQ_MSG_PLACE, .id = object, .ids = (uint32_t *) governors,
        .n_ids = (uint32_t) n_governors, .copies = copies, .flags = flags,
        .timeout_ms = timeout_ms
    };
    sq_reply_t reply;
    //  The reply waits for the copies: the call waits as long, and a little
    //  more so that the broker's timeout is the one that speaks.
    int call_ms = timeout_ms < 0 || timeout_ms > INT32_MAX - SQ_CLIENT_CALL_TIMEOUT? -1
                : timeout_ms + SQ_CLIENT_CALL_TIMEOUT;
    if ((rc = s_call_simple (self, &request, call_ms, &reply)))
        return rc;
    static __thread uint32_t ids [SQ_PLACE_MAX];
    uint32_t n = 0;
    sq_errbuf_t err;
    if (sq_holders_decode (reply.body, reply.body_size, ids, SQ_PLACE_MAX, &n, &err))
        return s_err (self, SQ_E_PROTOCOL, object, "malformed PLACE reply: %s", err.text);
    for (uint32_t i = 0; i < n && i < max_holders && holders; i++)
        holders [i] = ids [i];
    if (n_holders)
        *n_holders = n;
    return 0;
}

int
sq_adopt (sq_session_t *self, const uint32_t *ids, size_t n, uint32_t *session,
          uint32_t *adopted)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if (n == 0 || n > SQ_ADOPT_MAX || !session || !adopted)
        return s_err (self, SQ_E_INVALID, 0, "sq_adopt: 1 to %d ids, session and adopted "
                      "not NULL", SQ_ADOPT_MAX);
    if ((rc = s_check_submitted (self, ids, n, "sq_adopt")))
        return rc;
    sq_request_t request = { .type = SQ_MSG_ADOPT, .ids = (uint32_t *) ids, .n_ids = (uint32_t) n };
    sq_reply_t reply;
    if ((rc = s_call_simple (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply)))
        return rc;
    static __thread uint32_t got [SQ_ADOPT_MAX + 1];
    uint32_t count = 0;
    sq_errbuf_t err;
    if (sq_holders_decode (reply.body, reply.body_size, got, SQ_ADOPT_MAX + 1, &count, &err))
        return s_err (self, SQ_E_PROTOCOL, 0, "malformed ADOPT reply: %s", err.text);
    if (count != n + 1)
        return s_err (self, SQ_E_PROTOCOL, 0, "malformed ADOPT reply: %u ids for %zu",
                      count, n);
    *session = got [0];
    for (size_t i = 0; i < n; i++)
        adopted [i] = got [i + 1];
    return 0;
}

int
sq_cancel (sq_session_t *self, const uint32_t *ids, size_t n)
{
    int rc = s_session_check (self);
    if (rc)
        return rc;
    if ((rc = s_check_submitted (self, ids, n, "sq_cancel")))
        return rc;
    sq_request_t request = { .type = SQ_MSG_CANCEL, .ids = (uint32_t *) ids, .n_ids = (uint32_t) n };
    sq_reply_t reply;
    if ((rc = s_call_simple (self, &request, SQ_CLIENT_CALL_TIMEOUT, &reply)))
        return rc;
    return s_expect_nil (self, &reply, "CANCEL");
}
