/*  proto_client: the client plane, client <-> broker: requests (SESSION_OPEN
    .. UPLOAD), SUBMIT, and the bodies of their replies (docs/protocol.md
    sections 5 and 6); INFO's body is the table's (proto_maps.c). The
    other planes are proto_governor.c and proto_data.c. */
#include "proto_internal.h"

void
sq_pack_session_opened (msgpack_packer *pk, uint32_t session, const uint8_t *token)
{
    sq_opened_t m = { session, { (const char *) token, SQ_TOKEN_LEN } };
    sq_record_pack (pk, SQ_REC_OPENED, &m);
}

int
sqp_session_body_decode (uint32_t record, const char *what, const uint8_t *body, size_t size,
                         uint32_t *max_id, uint32_t *session, uint8_t *token,
                         sq_errbuf_t *err)
{
    union { sq_opened_t opened; sq_attached_t attached; } m;
    if (sq_record_decode (record, &m, body, size, what, err))
        return -1;
    bool attached = record == SQ_REC_ATTACHED;
    *session = attached? m.attached.session: m.opened.session;
    if (max_id)
        *max_id = attached? m.attached.max_id: 0;
    memcpy (token, attached? m.attached.token.ptr: m.opened.token.ptr, SQ_TOKEN_LEN);
    return 0;
}

int
sq_session_opened_decode (const uint8_t *body, size_t size, uint32_t *session,
                          uint8_t *token, sq_errbuf_t *err)
{
    return sqp_session_body_decode (SQ_REC_OPENED, "SESSION_OPEN reply", body, size, NULL,
                                    session, token, err);
}

static sq_where_t
s_where (uint32_t governor, const char *endpoint, const uint8_t *key,
         const uint8_t *capability, size_t capability_size)
{
    return (sq_where_t) { governor, { endpoint, endpoint? (uint32_t) strlen (endpoint): 0 },
                          { (const char *) key, key? 32: 0 },
                          { (const char *) capability, capability? (uint32_t) capability_size: 0 } };
}

void
sq_pack_where (msgpack_packer *pk, uint32_t governor, const char *endpoint,
               const uint8_t *key, const uint8_t *capability, size_t capability_size)
{
    sq_where_t m = s_where (governor, endpoint, key, capability, capability_size);
    sq_record_pack (pk, SQ_REC_WHERE, &m);
}

int
sq_where_read (mpr_t *r, sq_where_t *where)
{
    return sq_record_read (r, SQ_REC_WHERE, where, "where");
}

int
sq_where_decode (sq_where_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err)
{
    return sq_record_decode (SQ_REC_WHERE, self, body, size, "UPLOAD reply", err);
}

//  A reply's body that holds a WHERE or nil (FETCH's, LOG's): located
//  says which
static int
s_where_body_decode (uint32_t record, void *self, const sq_where_t *where, bool *located,
                     const uint8_t *body, size_t size, const char *what, sq_errbuf_t *err)
{
    int rc = sq_record_decode (record, self, body, size, what, err);
    *located = rc == 0 && where->endpoint.ptr != NULL;
    return rc;
}

int
sq_fetched_decode (sq_fetched_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err)
{
    return s_where_body_decode (SQ_REC_FETCHED, self, &self->where, &self->located,
                                body, size, "FETCH reply", err);
}

void
sq_pack_logwhere_head (msgpack_packer *pk, uint32_t attempt, const char *state)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint32 (pk, attempt);
    sq_pack_cstr (pk, state);
}

int
sq_logwhere_decode (sq_logwhere_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err)
{
    return s_where_body_decode (SQ_REC_LOGWHERE, self, &self->where, &self->located,
                                body, size, "LOG reply", err);
}

//  --------------------------------------------------------------------------
//  SUBMIT

//  A task's options map {"governors": [u32...], "loose": bool}, each key
//  at most once, no other. Fills t (governors into its pool slot, room
//  for SQ_MAX_TASK_GOVERNORS) unless t is NULL (the counting pass);
//  returns the number of governors read.
static uint32_t
s_options (mpr_t *r, sq_task_spec_t *t)
{
    uint32_t n = 0, n_governors = 0;
    bool seen_governors = false, seen_loose = false;
    mpr_field (r, "task.options");
    mpr_map (r, &n);
    for (uint32_t k = 0; k < n && mpr_ok (r); k++) {
        mpr_str_t key;
        mpr_str (r, &key, SQ_MAX_NAME);
        if (!mpr_ok (r))
            break;
        if (mpr_str_eq (key, "governors") && !seen_governors) {
            seen_governors = true;
            mpr_field (r, "task.options.governors");
            if (mpr_array (r, &n_governors) == 0
            &&  (n_governors == 0 || n_governors > SQ_MAX_TASK_GOVERNORS))
                mpr_fail (r, "1 to 64 governors");
            for (uint32_t g = 0; g < n_governors && mpr_ok (r); g++) {
                uint32_t id = 0;
                mpr_u32 (r, &id);
                if (mpr_ok (r) && id == 0)
                    mpr_fail (r, "governor id 0");
                if (t)
                    t->governors [g] = id;
            }
        }
        else
        if (mpr_str_eq (key, "loose") && !seen_loose) {
            seen_loose = true;
            bool loose = false;
            mpr_field (r, "task.options.loose");
            mpr_bool (r, &loose);
            if (t)
                t->loose = loose;
        }
        else
            mpr_fail (r, "unknown or repeated key");
    }
    if (mpr_ok (r) && !seen_governors)
        mpr_fail (r, "governors missing");
    if (!mpr_ok (r))
        return 0;
    if (t)
        t->n_governors = n_governors;
    return n_governors;
}

//  Counts the ids and resources of n tasks on a copy of the reader; leaves
//  the counts alone unless the whole list reads cleanly.
static void
s_submit_count (mpr_t r, uint32_t n_tasks, size_t *n_ids, size_t *n_res)
{
    size_t ids = 0, res = 0;
    for (uint32_t i = 0; i < n_tasks && mpr_ok (&r); i++) {
        uint32_t n, fields = 0;
        if (mpr_array (&r, &fields) == 0 && fields != 10 && fields != 11 && fields != 12)
            mpr_fail (&r, "a task of neither 10, 11 nor 12 fields");
        mpr_skip (&r, NULL, NULL);                  //  id
        mpr_skip (&r, NULL, NULL);                  //  kind
        for (int list = 0; list < 2; list++) {      //  inputs, outputs
            if (mpr_array (&r, &n) == 0) {
                ids += n;
                for (uint32_t j = 0; j < n; j++)
                    mpr_skip (&r, NULL, NULL);
            }
        }
        mpr_skip (&r, NULL, NULL);                  //  config
        if (!mpr_try_nil (&r) && mpr_map (&r, &n) == 0) {
            res += n;
            for (uint32_t j = 0; j < 2 * n; j++)
                mpr_skip (&r, NULL, NULL);
        }
        //  priority .. name (, array); fields is 10, 11 or 12 unless r failed
        for (uint32_t j = 0; j < 4 + (fields >= 11) && mpr_ok (&r); j++)
            mpr_skip (&r, NULL, NULL);
        if (fields == 12)                           //  options: its governors
            ids += s_options (&r, NULL);
    }
    if (mpr_ok (&r)) {
        *n_ids = ids;
        *n_res = res;
    }
}

//  A task's array: nil, [first, last, step], or a list of strings.
static void
s_array_spec (mpr_t *r, sq_task_spec_t *t)
{
    if (mpr_try_nil (r))
        return;
    uint32_t n;
    size_t start = r->pos;
    if (mpr_array (r, &n))
        return;
    if (n == 0) {
        mpr_fail (r, "an empty array");
        return;
    }
    if (mpr_peek (r) == MPR_UINT) {
        if (n != 3) {
            mpr_fail (r, "a range is [first, last, step]");
            return;
        }
        mpr_u32 (r, &t->array_first);
        mpr_u32 (r, &t->array_last);
        mpr_u32 (r, &t->array_step);
        if (!mpr_ok (r))
            return;
        if (t->array_first > t->array_last || t->array_step == 0) {
            mpr_fail (r, "a range needs first <= last and a step of at least 1");
            return;
        }
        if ((t->array_last - t->array_first) / t->array_step >= SQ_ARRAY_MAX) {
            mpr_fail (r, "more than 2^24 elements");
            return;
        }
        t->array = SQ_ARRAY_RANGE;
        t->array_size = (t->array_last - t->array_first) / t->array_step + 1;
        return;
    }
    if (n > SQ_ARRAY_MAX) {
        mpr_fail (r, "more than 2^24 elements");
        return;
    }
    for (uint32_t i = 0; i < n && mpr_ok (r); i++) {
        mpr_str_t item;
        if (mpr_str (r, &item, SQ_MAX_NAME) == 0 && memchr (item.ptr, 0, item.len))
            mpr_fail (r, "an item with a NUL");
    }
    if (!mpr_ok (r))
        return;
    t->array = SQ_ARRAY_ITEMS;
    t->array_size = n;
    t->array_items = r->data + start;
    t->array_items_size = r->pos - start;
}

//  A task's array of ids, into the pool (sized by the counting pass)
static uint32_t *
s_pooled_ids (mpr_t *r, uint32_t *pool, size_t *used, uint32_t *n)
{
    uint32_t *ids = pool + *used;
    if (mpr_array (r, n))
        return NULL;
    for (uint32_t j = 0; j < *n; j++)
        mpr_u32 (r, &pool [(*used)++]);
    return ids;
}

int
sq_submit_decode (sq_submit_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    mpr_t r;
    memset (self, 0, sizeof *self);
    sqp_begin (&r, data, size, SQ_MSG_SUBMIT, 5);
    mpr_field (&r, "req");
    mpr_u32 (&r, &self->req);
    mpr_field (&r, "session");
    mpr_u32 (&r, &self->session);
    mpr_field (&r, "objects");
    uint32_t n_objects = 0;
    mpr_array (&r, &n_objects);
    if (!mpr_ok (&r))
        return sqp_error (&r, err, "SUBMIT");
    if (n_objects) {
        self->objects = (sq_object_spec_t *) calloc (n_objects, sizeof (sq_object_spec_t));
        if (!self->objects)
            mpr_fail (&r, "out of memory");
    }
    for (uint32_t i = 0; i < n_objects && mpr_ok (&r); i++) {
        sq_object_spec_t *o = &self->objects [i];
        int64_t frame;
        mpr_field (&r, "object");
        mpr_array_exact (&r, 5);
        mpr_field (&r, "object.id");
        mpr_u32 (&r, &o->id);
        mpr_field (&r, "object.flags");
        mpr_u32 (&r, &o->flags);
        mpr_field (&r, "object.content_type");
        mpr_str (&r, &o->content_type, SQ_MAX_NAME);
        mpr_field (&r, "object.frame");
        if (mpr_peek (&r) == MPR_ARRAY) {
            //  [governor, size]: a constant the client uploaded there.
            mpr_array_exact (&r, 2);
            mpr_field (&r, "object.frame.governor");
            mpr_u32 (&r, &o->governor);
            mpr_field (&r, "object.frame.size");
            mpr_uint (&r, &o->size);
            frame = SQ_FRAME_UPLOADED;
        }
        else {
            mpr_int (&r, &frame);
            if (mpr_ok (&r) && (frame < -1 || frame >= SQ_MAX_FRAMES))
                mpr_fail (&r, "frame index out of range");
        }
        o->frame = (int32_t) frame;
        mpr_field (&r, "object.name");
        mpr_str (&r, &o->name, SQ_MAX_NAME);
        self->n_objects = i + 1;
    }
    mpr_field (&r, "tasks");
    uint32_t n_tasks = 0;
    mpr_array (&r, &n_tasks);
    if (!mpr_ok (&r)) {
        sq_submit_release (self);
        return sqp_error (&r, err, "SUBMIT");
    }
    //  A first, counting pass sizes the id and resource pools exactly: a
    //  bound from the bytes left would reserve several times the message
    //  for the usual task with one output and no resources. If it stops
    //  early (malformed input), the bound is used and the real pass below
    //  reports the error: every id takes at least one byte, a resource two.
    size_t left = r.size - r.pos, n_ids = left + 1, n_res = left / 2 + 1;
    s_submit_count (r, n_tasks, &n_ids, &n_res);
    if (n_tasks) {
        self->tasks = (sq_task_spec_t *) calloc (n_tasks, sizeof (sq_task_spec_t));
        self->id_pool = (uint32_t *) malloc (sizeof (uint32_t) * (n_ids + 1));
        self->res_pool = (sq_resource_t *) malloc (sizeof (sq_resource_t) * (n_res + 1));
        if (!self->tasks || !self->id_pool || !self->res_pool)
            mpr_fail (&r, "out of memory");
    }
    size_t ids_used = 0, res_used = 0;
    for (uint32_t i = 0; i < n_tasks && mpr_ok (&r); i++) {
        sq_task_spec_t *t = &self->tasks [i];
        int64_t priority;
        uint32_t fields = 0;
        mpr_field (&r, "task");
        if (mpr_array (&r, &fields) == 0 && fields != 10 && fields != 11 && fields != 12)
            mpr_fail (&r, "a task of neither 10, 11 nor 12 fields");
        mpr_field (&r, "task.id");
        mpr_u32 (&r, &t->id);
        mpr_field (&r, "task.kind");
        mpr_str (&r, &t->kind, SQ_MAX_NAME);
        mpr_field (&r, "task.inputs");
        t->inputs = s_pooled_ids (&r, self->id_pool, &ids_used, &t->n_inputs);
        mpr_field (&r, "task.outputs");
        t->outputs = s_pooled_ids (&r, self->id_pool, &ids_used, &t->n_outputs);
        mpr_field (&r, "task.config");
        mpr_skip (&r, &t->config, &t->config_size);
        if (mpr_ok (&r) && t->config_size > SQ_MAX_CONFIG)
            mpr_fail (&r, "config too large");
        mpr_field (&r, "task.resources");
        t->resources = self->res_pool + res_used;
        sqp_resources (&r, t->resources, &t->n_resources, SQ_MAX_RESOURCES);
        res_used += t->n_resources;
        mpr_field (&r, "task.priority");
        mpr_int (&r, &priority);
        if (mpr_ok (&r) && (priority < INT32_MIN || priority > INT32_MAX))
            mpr_fail (&r, "priority out of 32-bit range");
        t->priority = (int32_t) priority;
        mpr_field (&r, "task.max_retries");
        mpr_u32 (&r, &t->max_retries);
        mpr_field (&r, "task.timeout_ms");
        mpr_u32 (&r, &t->timeout_ms);
        mpr_field (&r, "task.name");
        mpr_str (&r, &t->name, SQ_MAX_NAME);
        if (fields >= 11) {
            mpr_field (&r, "task.array");
            s_array_spec (&r, t);
        }
        if (fields == 12 && mpr_ok (&r)) {
            //  Counted with the ids (or within the bound of the bytes
            //  left: each takes one at least).
            mpr_field (&r, "task.options");
            t->governors = self->id_pool + ids_used;
            ids_used += s_options (&r, t);
        }
        self->n_tasks = i + 1;
    }
    if (sqp_end (&r, err, "SUBMIT")) {
        sq_submit_release (self);
        return -1;
    }
    return 0;
}

void
sq_submit_release (sq_submit_t *self)
{
    free (self->objects);
    free (self->tasks);
    free (self->id_pool);
    free (self->res_pool);
    memset (self, 0, sizeof *self);
}

void
sq_pack_submit_begin (msgpack_packer *pk, uint32_t req, uint32_t session)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, SQ_MSG_SUBMIT);
    msgpack_pack_uint32 (pk, req);
    msgpack_pack_uint32 (pk, session);
}

void
sq_pack_object_spec (msgpack_packer *pk, uint32_t id, uint32_t flags,
                     const char *content_type, int32_t frame, const char *name)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, id);
    msgpack_pack_uint32 (pk, flags);
    sq_pack_cstr (pk, content_type);
    msgpack_pack_int32 (pk, frame);
    sq_pack_cstr (pk, name);
}

void
sq_pack_object_uploaded (msgpack_packer *pk, uint32_t id, uint32_t flags,
                         const char *content_type, uint32_t governor, uint64_t size,
                         const char *name)
{
    msgpack_pack_array (pk, 5);
    msgpack_pack_uint32 (pk, id);
    msgpack_pack_uint32 (pk, flags);
    sq_pack_cstr (pk, content_type);
    msgpack_pack_array (pk, 2);
    msgpack_pack_uint32 (pk, governor);
    msgpack_pack_uint64 (pk, size);
    sq_pack_cstr (pk, name);
}

void
sq_pack_task_spec (msgpack_packer *pk, const sq_task_spec_t *t)
{
    msgpack_pack_array (pk, t->n_governors? 12: t->array? 11: 10);
    msgpack_pack_uint32 (pk, t->id);
    sq_pack_mstr (pk, t->kind);
    sqp_pack_ids (pk, t->inputs, t->n_inputs);
    sqp_pack_ids (pk, t->outputs, t->n_outputs);
    if (t->config && t->config_size)
        msgpack_pack_str_body (pk, t->config, t->config_size);   //  raw bytes
    else
        msgpack_pack_nil (pk);
    sqp_pack_resources (pk, t->resources, t->n_resources);
    msgpack_pack_int32 (pk, t->priority);
    msgpack_pack_uint32 (pk, t->max_retries);
    msgpack_pack_uint32 (pk, t->timeout_ms);
    sq_pack_mstr (pk, t->name);
    if (t->array == SQ_ARRAY_RANGE) {
        msgpack_pack_array (pk, 3);
        msgpack_pack_uint32 (pk, t->array_first);
        msgpack_pack_uint32 (pk, t->array_last);
        msgpack_pack_uint32 (pk, t->array_step);
    }
    else
    if (t->array == SQ_ARRAY_ITEMS)
        msgpack_pack_str_body (pk, t->array_items, t->array_items_size);    //  raw
    else
    if (t->n_governors)
        msgpack_pack_nil (pk);
    if (t->n_governors) {
        msgpack_pack_map (pk, t->loose? 2: 1);
        sq_pack_cstr (pk, "governors");
        sqp_pack_ids (pk, t->governors, t->n_governors);
        if (t->loose) {
            sq_pack_cstr (pk, "loose");
            msgpack_pack_true (pk);
        }
    }
}

//  --------------------------------------------------------------------------
//  Reply bodies of client requests and of the serve socket

void
sq_pack_wait_head (msgpack_packer *pk, uint32_t finished, uint32_t failed, uint32_t listed)
{
    sqp_pack_list_head (pk, (uint64_t []) { finished, failed }, 2, listed);
}

void
sq_pack_done (msgpack_packer *pk, uint32_t id, uint32_t state, uint32_t root, const char *message)
{
    //  An id that finished packs root and message as nil
    sq_done_t d = { id, state, message? root: 0,
                    { message, message? (uint32_t) strlen (message): 0 } };
    sqp_pack_DONE (pk, &d);
}

int
sq_wait_reply_begin (sq_iter_t *self, const uint8_t *body, size_t size, uint32_t max_listed,
                     uint64_t *finished, uint64_t *failed, sq_errbuf_t *err)
{
    static const char *heads [] = { "n_finished", "n_failed" };
    uint64_t values [2] = { 0, 0 };
    int rc = sqp_list_begin (self, body, size, "WAIT reply", heads, values, 2, "states",
                             max_listed, "more states than ids asked for", NULL, err);
    *finished = values [0];
    *failed = values [1];
    return rc;
}

int
sq_wait_reply_next (sq_iter_t *self, sq_done_t *done)
{
    return sqp_list_next (self, SQ_REC_DONE, done, "state entry", "WAIT reply");
}

void
sq_pack_fetched_inline (msgpack_packer *pk, uint64_t size, const char *content_type)
{
    sq_pack_fetched_head (pk, size, content_type);
    msgpack_pack_nil (pk);
}

void
sq_pack_fetched_head (msgpack_packer *pk, uint64_t size, const char *content_type)
{
    msgpack_pack_array (pk, 3);
    msgpack_pack_uint64 (pk, size);
    sq_pack_cstr (pk, content_type);
}

void
sq_pack_holders (msgpack_packer *pk, const uint32_t *ids, uint32_t n)
{
    sqp_pack_ids (pk, ids, n);
}

int
sq_holders_decode (const uint8_t *body, size_t size, uint32_t *ids, uint32_t max,
                   uint32_t *n, sq_errbuf_t *err)
{
    mpr_t r;
    uint32_t count = 0;
    *n = 0;
    mpr_init (&r, body, size);
    mpr_field (&r, "body");
    mpr_array (&r, &count);
    if (mpr_ok (&r) && count > max)
        mpr_fail (&r, "more governors than room for them");
    if (mpr_ok (&r))
        sqp_u32s (&r, ids, count);
    if (sqp_end (&r, err, "PLACE reply"))
        return -1;
    *n = count;
    return 0;
}

void
sq_pack_submit_objects (msgpack_packer *pk, uint32_t n_objects)
{
    msgpack_pack_array (pk, n_objects);
}

void
sq_pack_submit_tasks (msgpack_packer *pk, uint32_t n_tasks)
{
    msgpack_pack_array (pk, n_tasks);
}

//  RUN's reply ---------------------------------------------------------

void
sq_reply_begin_ran (sq_wbuf_t *w, uint32_t req, uint64_t run, uint32_t n)
{
    sq_reply_begin (w, req);
    msgpack_pack_array (&w->pk, 2);
    msgpack_pack_uint64 (&w->pk, run);
    msgpack_pack_map (&w->pk, n);
}

void
sq_pack_ran_where (msgpack_packer *pk, uint32_t gov, uint32_t answers, uint64_t size,
                   const char *endpoint, const uint8_t *key, const uint8_t *capability,
                   size_t capability_size)
{
    sq_ran_where_t m = { answers, size, s_where (gov, endpoint, key, capability, capability_size) };
    msgpack_pack_uint32 (pk, gov);
    sqp_pack_RAN_WHERE (pk, &m);
}

int
sq_ran_reply_each (const void *body, size_t size, uint64_t *run, sq_ran_where_fn *fn, void *arg,
                   sq_errbuf_t *err)
{
    mpr_t r;
    uint32_t n_govs;
    mpr_init (&r, body, size);
    mpr_field (&r, "body");
    mpr_array_exact (&r, 2);
    mpr_field (&r, "run");
    mpr_uint (&r, run);
    mpr_field (&r, "governors");
    mpr_map (&r, &n_govs);
    for (uint32_t g = 0; mpr_ok (&r) && g < n_govs; g++) {
        uint32_t gov;
        sq_ran_where_t m;
        mpr_field (&r, "governor");
        if (mpr_u32 (&r, &gov) == 0
        &&  sq_record_read (&r, SQ_REC_RAN_WHERE, &m, "answers") == 0
        &&  fn (arg, *run, gov, m.answers, m.size, &m.where) != 0)
            mpr_fail (&r, "out of memory");
    }
    return sqp_end (&r, err, "RUN reply");
}

int
sq_ran_results_each (const void *data, size_t size, sq_ran_item_fn *fn, void *arg,
                     sq_errbuf_t *err)
{
    mpr_t r;
    uint32_t n;
    mpr_init (&r, data, size);
    mpr_field (&r, "answers");
    if (mpr_array (&r, &n) == 0 && n > SQ_RUN_EXECS_MAX)
        mpr_fail (&r, "more than 256 executors");
    sq_ran_result_t res;
    for (uint32_t i = 0; mpr_ok (&r) && i < n; i++)
        if (sq_record_read (&r, SQ_REC_RAN_RESULT, &res, "answer") == 0
        &&  fn (arg, res.pid, res.ok, res.bytes) != 0)
            mpr_fail (&r, "out of memory");
    return sqp_end (&r, err, "run's answers");
}
