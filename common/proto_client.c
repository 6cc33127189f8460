/*  proto_client: the client plane, client <-> broker: requests (SESSION_OPEN
    .. UPLOAD), SUBMIT's kinds of fields and its packers (its rows are the
    table's), and the bodies of their replies (docs/protocol.md sections 5
    and 6); INFO's body is the table's (proto_maps.c). The
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
//  SUBMIT's kinds: its lists of objects and tasks (members of sq_submit_t),
//  an object's frame (of sq_object_spec_t), a task's pooled lists, its
//  array and its options (of sq_task_spec_t).

//  A task's lists of ids and resources go into blocks the decoded SUBMIT
//  owns: a list never spans two, so what points into one stays good as
//  more come; each block twice the last (at least the list), so a SUBMIT
//  takes a few allocations and about its lists' bytes, with no first pass
//  to count them.
struct sqp_block_s {
    struct sqp_block_s *next;
    size_t used, cap;           //  bytes
    uint64_t data [];
};

static uint32_t s_no_ids [1];
static sq_resource_t s_no_resources [1];

//  bytes of the task's blocks (a new block if the last has no room), or
//  NULL with r failed
static void *
s_block_take (mpr_t *r, sq_task_spec_t *t, size_t bytes)
{
    if (!t->blocks) {
        mpr_fail (r, "a task read outside SUBMIT");
        return NULL;
    }
    bytes = (bytes + 7) & ~(size_t) 7;
    sqp_block_t *b = *t->blocks;
    if (!b || b->cap - b->used < bytes) {
        size_t cap = b? 2 * b->cap: 1024;
        if (cap < bytes)
            cap = bytes;
        b = (sqp_block_t *) malloc (sizeof *b + cap);
        if (!b) {
            mpr_fail (r, "out of memory");
            return NULL;
        }
        b->next = *t->blocks;
        b->used = 0;
        b->cap = cap;
        *t->blocks = b;
    }
    void *at = (char *) b->data + b->used;
    b->used += bytes;
    return at;
}

void
sqp_blocks_free (sqp_block_t **blocks)
{
    while (*blocks) {
        sqp_block_t *next = (*blocks)->next;
        free (*blocks);
        *blocks = next;
    }
}

//  An array of u32 into the blocks
void
sqp_kind_read_idlist (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_idlist_t *v = SQP_AT (sq_idlist_t, msg, f);
    uint32_t n;
    if (mpr_array (r, &n))
        return;
    v->ids = n? (uint32_t *) s_block_take (r, (sq_task_spec_t *) msg, n * sizeof (uint32_t))
              : s_no_ids;
    if (v->ids && sqp_u32s (r, v->ids, n) == 0)
        v->n = n;
}

void
sqp_kind_pack_idlist (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    const sq_idlist_t *v = SQP_CAT (sq_idlist_t, msg, f);
    sqp_pack_ids (pk, v->ids, v->n);
}

//  Resources as RESOURCES reads them, into the blocks: as many as the map
//  says, seen ahead on a copy of the reader (sqp_resources refuses a map
//  of more before it writes one).
void
sqp_kind_read_reslist (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_reslist_t *v = SQP_AT (sq_reslist_t, msg, f);
    mpr_t ahead = *r;
    uint32_t n = 0;
    if (mpr_try_nil (&ahead) || mpr_map (&ahead, &n) || n > SQ_MAX_RESOURCES)
        n = 0;
    v->items = n? (sq_resource_t *) s_block_take (r, (sq_task_spec_t *) msg,
                                                  n * sizeof (sq_resource_t))
                : s_no_resources;
    if (v->items)
        sqp_resources (r, v->items, &v->n, SQ_MAX_RESOURCES);
}

void
sqp_kind_pack_reslist (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    const sq_reslist_t *v = SQP_CAT (sq_reslist_t, msg, f);
    sqp_pack_resources (pk, v->items, v->n);
}

//  An object's frame: a payload frame's index (min..max: -1, produced by a
//  task, to the last frame), or [governor, size] of a constant uploaded
//  there (SQ_FRAME_UPLOADED)
void
sqp_kind_read_frame (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_object_spec_t *o = (sq_object_spec_t *) msg;
    if (mpr_peek (r) == MPR_ARRAY) {
        mpr_array_exact (r, 2);
        mpr_field (r, "frame.governor");
        mpr_u32 (r, &o->governor);
        mpr_field (r, "frame.size");
        mpr_uint (r, &o->size);
        o->frame = SQ_FRAME_UPLOADED;
        o->uploaded = true;
        return;
    }
    int64_t frame;
    if (mpr_int (r, &frame) == 0 && (frame < f->min || frame > (int64_t) f->max))
        mpr_fail (r, f->why);
    o->frame = (int32_t) frame;
}

void
sqp_kind_pack_frame (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_object_spec_t *o = (const sq_object_spec_t *) msg;
    if (o->uploaded) {
        msgpack_pack_array (pk, 2);
        msgpack_pack_uint32 (pk, o->governor);
        msgpack_pack_uint64 (pk, o->size);
    }
    else
        msgpack_pack_int32 (pk, o->frame);
}

//  A task's array, one of three shapes: nil, [first, last, step], or a
//  list of strings (kept as its bytes)
void
sqp_kind_read_array (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_task_spec_t *t = (sq_task_spec_t *) msg;
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

void
sqp_kind_pack_array (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_task_spec_t *t = (const sq_task_spec_t *) msg;
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
        msgpack_pack_nil (pk);
}

//  A task's options map {"governors": [u32...], "loose": bool}, governors
//  required, each key at most once, no other; the governors into the
//  blocks.
void
sqp_kind_read_toptions (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_task_spec_t *t = (sq_task_spec_t *) msg;
    uint32_t n = 0;
    bool seen_governors = false, seen_loose = false;
    mpr_map (r, &n);
    for (uint32_t k = 0; k < n && mpr_ok (r); k++) {
        mpr_str_t key;
        if (mpr_str (r, &key, SQ_MAX_NAME))
            break;
        if (mpr_str_eq (key, "governors") && !seen_governors) {
            uint32_t count = 0;
            seen_governors = true;
            mpr_field (r, "options.governors");
            if (mpr_array (r, &count) == 0
            &&  (count == 0 || count > SQ_MAX_TASK_GOVERNORS))
                mpr_fail (r, "1 to 64 governors");
            if (!mpr_ok (r))
                break;
            t->governors = (uint32_t *) s_block_take (r, t, count * sizeof (uint32_t));
            for (uint32_t g = 0; t->governors && g < count && mpr_ok (r); g++)
                if (mpr_u32 (r, &t->governors [g]) == 0 && t->governors [g] == 0)
                    mpr_fail (r, "governor id 0");
            t->n_governors = count;
        }
        else
        if (mpr_str_eq (key, "loose") && !seen_loose) {
            seen_loose = true;
            mpr_field (r, "options.loose");
            mpr_bool (r, &t->loose);
        }
        else
            mpr_fail (r, "unknown or repeated key");
    }
    if (mpr_ok (r) && !seen_governors)
        mpr_fail (r, "governors missing");
}

void
sqp_kind_pack_toptions (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_task_spec_t *t = (const sq_task_spec_t *) msg;
    msgpack_pack_map (pk, t->loose? 2: 1);
    sq_pack_cstr (pk, "governors");
    sqp_pack_ids (pk, t->governors, t->n_governors);
    if (t->loose) {
        sq_pack_cstr (pk, "loose");
        msgpack_pack_true (pk);
    }
}

//  SUBMIT's objects and tasks: arrays of the records SUBMIT_OBJECT and
//  SUBMIT_TASK, each read in the scope "object" or "task" (errors name
//  "task.inputs"), into arrays it owns; a task's lists into its blocks.
//  Returns the array (NULL if none) with *read the records read whole.
static void *
s_list_read (mpr_t *r, uint32_t record, size_t size, const char *scope, uint32_t *read,
             sqp_block_t **blocks)
{
    uint32_t n;
    if (mpr_array (r, &n) || n == 0)
        return NULL;
    char *items = (char *) calloc (n, size);
    if (!items) {
        mpr_fail (r, "out of memory");
        return NULL;
    }
    r->scope = scope;
    for (uint32_t i = 0; i < n; i++) {
        sq_task_spec_t *task = blocks? (sq_task_spec_t *) (items + i * size): NULL;
        if (task)
            task->blocks = blocks;      //  (calloc zeroed the rest)
        int rc = sqp_record_read_zeroed (r, record, items + i * size, scope);
        if (task)
            task->blocks = NULL;
        if (rc)
            return items;
        *read = i + 1;
    }
    r->scope = NULL;
    return items;
}

static void
s_list_pack (msgpack_packer *pk, uint32_t record, const void *items, size_t size, uint32_t n)
{
    msgpack_pack_array (pk, n);
    for (uint32_t i = 0; i < n; i++)
        sq_record_pack (pk, record, (const char *) items + i * size);
}

void
sqp_kind_read_objects (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_submit_t *s = (sq_submit_t *) msg;
    s->objects = (sq_object_spec_t *) s_list_read (r, SQ_REC_SUBMIT_OBJECT,
                                                   sizeof (sq_object_spec_t), "object",
                                                   &s->n_objects, NULL);
}

void
sqp_kind_pack_objects (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_submit_t *s = (const sq_submit_t *) msg;
    s_list_pack (pk, SQ_REC_SUBMIT_OBJECT, s->objects, sizeof (sq_object_spec_t), s->n_objects);
}

void
sqp_kind_read_tasks (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_submit_t *s = (sq_submit_t *) msg;
    s->tasks = (sq_task_spec_t *) s_list_read (r, SQ_REC_SUBMIT_TASK, sizeof (sq_task_spec_t),
                                               "task", &s->n_tasks, &s->blocks);
}

void
sqp_kind_pack_tasks (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_submit_t *s = (const sq_submit_t *) msg;
    s_list_pack (pk, SQ_REC_SUBMIT_TASK, s->tasks, sizeof (sq_task_spec_t), s->n_tasks);
}

bool
sqp_kind_array_empty (const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    return ((const sq_task_spec_t *) msg)->array == SQ_ARRAY_NONE;
}

bool
sqp_kind_toptions_empty (const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    return ((const sq_task_spec_t *) msg)->n_governors == 0;
}

//  --------------------------------------------------------------------------
//  SUBMIT: the table's (SUBMIT, its records SUBMIT_OBJECT and SUBMIT_TASK,
//  proto_kinds.c's kinds OBJECTS .. TOPTIONS); callers pack it piece by
//  piece, as they walk their own lists.

int
sq_submit_decode (sq_submit_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return sqp_decode_SUBMIT (self, data, size, err);
}

void
sq_submit_release (sq_submit_t *self)
{
    free (self->objects);
    free (self->tasks);
    sqp_blocks_free (&self->blocks);
    memset (self, 0, sizeof *self);
}

static mpr_str_t
s_mstr (const char *s)
{
    return (mpr_str_t) { s, s? (uint32_t) strlen (s): 0 };
}

//  Its head: the type and the two fields before the lists (req, session:
//  U32s), which the caller packs after it
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
    sq_object_spec_t o = { .id = id, .flags = flags, .content_type = s_mstr (content_type),
                           .frame = frame, .name = s_mstr (name) };
    sqp_pack_SUBMIT_OBJECT (pk, &o);
}

void
sq_pack_object_uploaded (msgpack_packer *pk, uint32_t id, uint32_t flags,
                         const char *content_type, uint32_t governor, uint64_t size,
                         const char *name)
{
    sq_object_spec_t o = { .id = id, .flags = flags, .content_type = s_mstr (content_type),
                           .frame = SQ_FRAME_UPLOADED, .name = s_mstr (name),
                           .governor = governor, .size = size, .uploaded = true };
    sqp_pack_SUBMIT_OBJECT (pk, &o);
}

void
sq_pack_task_spec (msgpack_packer *pk, const sq_task_spec_t *t)
{
    sqp_pack_SUBMIT_TASK (pk, t);
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
