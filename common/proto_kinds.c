/*  proto_kinds: the kinds of fields of the message table that fill members
    of a struct every message of a family shares (proto_table.c has the
    kinds of one member each): a client request's (sq_request_t: IDS, JOB,
    OPTIONS), an UPDATE event's (sq_event_t: OUTPUTS, EXIT) and an ASSIGN
    task's (sq_assign_t: INPUTS, OUTDECLS),
    and the kinds of a list or a record in a field (KEYLIST, WHERE,
    RESOURCES, PREVIOUS). SUBMIT's kinds are in proto_client.c, REPLY's
    BODY in proto.c, TSTATE in proto_jobs.c.
    proto_table.c's s_kinds names them; the nil-or-value kinds (OU32, OU64,
    OINT, OSTR, ESTR, OBIN) are one wrapper there around a base kind. */
#include "proto_internal.h"
#include <stddef.h>

//  Requests' kinds: members of sq_request_t
void
sqp_kind_read_ids (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_request_t *q = (sq_request_t *) msg;
    if (sqp_ids (r, &q->ids, &q->n_ids) == 0
    &&  ((f->max && q->n_ids > f->max) || q->n_ids < f->min))
        mpr_fail (r, f->why);
}

void
sqp_kind_pack_ids (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_request_t *q = (const sq_request_t *) msg;
    sqp_pack_ids (pk, q->ids, q->n_ids);
}

//  A job's name: 1 to SQ_JOB_NAME_MAX bytes, no control characters (it is
//  printed in listings and terminals).
static void
s_job_name (mpr_t *r, mpr_str_t *name)
{
    if (mpr_str (r, name, SQ_JOB_NAME_MAX))
        return;
    if (name->len == 0)
        mpr_fail (r, "empty");
    for (uint32_t i = 0; i < name->len && mpr_ok (r); i++)
        if ((uint8_t) name->ptr [i] < 0x20 || name->ptr [i] == 0x7f)
            mpr_fail (r, "a control character");
}

void
sqp_kind_read_job (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_request_t *q = (sq_request_t *) msg;
    if (!mpr_try_nil (r)) {
        q->has_name = true;
        s_job_name (r, &q->name);
    }
}

void
sqp_kind_pack_job (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_request_t *q = (const sq_request_t *) msg;
    if (q->has_name)
        sq_pack_mstr (pk, q->name);
    else
        msgpack_pack_nil (pk);
}

//  SESSION_OPEN's options map: known keys, each at most once.
void
sqp_kind_read_options (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_request_t *self = (sq_request_t *) msg;
    uint32_t n;
    if (mpr_map (r, &n))
        return;
    bool seen_name = false, seen_detached = false;
    for (uint32_t i = 0; i < n && mpr_ok (r); i++) {
        mpr_str_t key;
        mpr_field (r, "options key");
        if (mpr_str (r, &key, 64))
            return;
        if (mpr_str_eq (key, "name") && !seen_name) {
            seen_name = true;
            mpr_field (r, "name");
            self->has_name = true;
            s_job_name (r, &self->name);
        }
        else
        if (mpr_str_eq (key, "detached") && !seen_detached) {
            seen_detached = true;
            mpr_field (r, "detached");
            mpr_bool (r, &self->detached);
        }
        else
        if (mpr_str_eq (key, "after") && !self->ids) {
            //  Jobs whose end its tasks wait for (in ids, n_ids).
            uint32_t count;
            mpr_field (r, "after");
            if (mpr_array (r, &count))
                return;
            if (count == 0 || count > SQ_AFTER_MAX) {
                mpr_fail (r, "1 to 64 job ids");
                return;
            }
            self->ids = (uint32_t *) calloc (count, sizeof (uint32_t));
            if (!self->ids) {
                mpr_fail (r, "out of memory");
                return;
            }
            for (uint32_t j = 0; j < count && mpr_ok (r); j++) {
                if (mpr_u32 (r, &self->ids [j]) == 0 && self->ids [j] == 0)
                    mpr_fail (r, "job id 0");
                self->n_ids = j + 1;
            }
        }
        else
            mpr_fail (r, "unknown or repeated key");
    }
}

void
sqp_kind_pack_options (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_request_t *q = (const sq_request_t *) msg;
    msgpack_pack_map (pk, (q->has_name? 1: 0) + 1 + (q->n_ids? 1: 0));
    if (q->has_name) {
        sq_pack_cstr (pk, "name");
        sq_pack_mstr (pk, q->name);
    }
    sq_pack_cstr (pk, "detached");
    if (q->detached)
        msgpack_pack_true (pk);
    else
        msgpack_pack_false (pk);
    if (q->n_ids) {
        sq_pack_cstr (pk, "after");
        msgpack_pack_array (pk, q->n_ids);
        for (uint32_t i = 0; i < q->n_ids; i++)
            msgpack_pack_uint32 (pk, q->ids [i]);
    }
}

bool
sqp_kind_options_empty (const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_request_t *q = (const sq_request_t *) msg;
    return !q->has_name && !q->detached && !q->n_ids;
}

//  The lists of ASSIGN's tasks and of FINISHED events, in the scratch of
//  the iterator whose reader r is (r is its first member; sq_batch_next,
//  sq_event_read): opens the array, of at most one element per min_bytes
//  left (so the scratch is bounded by the frame), and makes room for
//  `before` bytes (kept) and its n elements after them; NULL with r failed.
static char *
s_list_open (mpr_t *r, size_t before, size_t elem, size_t min_bytes, uint32_t *n,
             const char *too_many)
{
    if (mpr_array (r, n))
        return NULL;
    if (*n > (r->size - r->pos) / min_bytes) {
        mpr_fail (r, too_many);
        return NULL;
    }
    return (char *) sqp_scratch ((sq_iter_t *) r, before + elem * (*n + 1));
}

//  A list of inputs' or outputs' references: [object, size, frame] each,
//  and an input's content type after them; an output's frame is not a
//  stream's (-2). An input begins as an output does, so one reader and
//  one packer serve both, with the element's size.
_Static_assert (offsetof (sq_input_ref_t, key) == offsetof (sq_output_ref_t, key)
                && offsetof (sq_input_ref_t, size) == offsetof (sq_output_ref_t, size)
                && offsetof (sq_input_ref_t, frame) == offsetof (sq_output_ref_t, frame),
                "an input's reference begins as an output's");
#define S_REF(items, i, inputs) ((sq_output_ref_t *) ((char *) (items) \
    + (i) * ((inputs)? sizeof (sq_input_ref_t): sizeof (sq_output_ref_t))))
#define S_REF_CT(ref) ((mpr_str_t *) ((char *) (ref) + offsetof (sq_input_ref_t, content_type)))

//  (Inlined in each kind, where `inputs` is a constant: the outputs of
//  UPDATE's FINISHED are read and packed twice a task.)
//  Reads the list into the scratch after `before` bytes: its elements, or
//  NULL (*n_items 0) on error
static inline __attribute__ ((always_inline)) void *
s_refs_read (mpr_t *r, size_t before, uint32_t *n_items, bool inputs)
{
    uint32_t n;
    char *block = s_list_open (r, before, inputs? sizeof (sq_input_ref_t): sizeof (sq_output_ref_t),
                               inputs? 5: 4, &n,
                               inputs? "more inputs than bytes": "more outputs than bytes");
    char *refs = block? block + before: NULL;
    for (uint32_t i = 0; refs && i < n && !r->error; i++) {
        sq_output_ref_t *ref = S_REF (refs, i, inputs);
        mpr_array_exact (r, inputs? 4: 3);
        mpr_uint (r, &ref->key);
        mpr_uint (r, &ref->size);
        if (sqp_frame_index (r, &ref->frame) == 0 && !inputs && ref->frame == SQ_FRAME_STREAM)
            mpr_fail (r, "an output frame index of -2");
        if (inputs)
            mpr_str (r, S_REF_CT (ref), SQ_MAX_NAME);
    }
    *n_items = refs? n: 0;
    return refs;
}

static inline __attribute__ ((always_inline)) void
s_refs_pack (msgpack_packer *pk, const void *items, uint32_t n, bool inputs)
{
    msgpack_pack_array (pk, n);
    for (uint32_t i = 0; i < n; i++) {
        const sq_output_ref_t *ref = S_REF (items, i, inputs);
        msgpack_pack_array (pk, inputs? 4: 3);
        msgpack_pack_uint64 (pk, ref->key);
        msgpack_pack_uint64 (pk, ref->size);
        msgpack_pack_int32 (pk, ref->frame);
        if (inputs)
            sq_pack_mstr (pk, *S_REF_CT (ref));
    }
}

//  Events' kinds: members of sq_event_t. Each output takes 4 bytes at least.
void
sqp_kind_read_outputs (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_event_t *ev = (sq_event_t *) msg;
    ev->outputs = (sq_output_ref_t *) s_refs_read (r, 0, &ev->n_outputs, false);
}

void
sqp_kind_pack_outputs (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_event_t *ev = (const sq_event_t *) msg;
    s_refs_pack (pk, ev->outputs, ev->n_outputs, false);
}

void
sqp_kind_read_exit (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_event_t *ev = (sq_event_t *) msg;
    int64_t code = 0;
    if (mpr_int (r, &code) == 0 && (code < INT32_MIN || code > INT32_MAX))
        mpr_fail (r, "not an i32");
    ev->has_exit_code = true;
    ev->exit_code = (int32_t) code;
}

void
sqp_kind_pack_exit (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    msgpack_pack_int32 (pk, ((const sq_event_t *) msg)->exit_code);
}

bool
sqp_kind_exit_empty (const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    return !((const sq_event_t *) msg)->has_exit_code;
}

//  ASSIGN's tasks' kinds: members of sq_assign_t. The inputs and the
//  outputs share the iterator's scratch: inputs first, the outputs after
//  them. An input takes 5 bytes at least, an output 3.
void
sqp_kind_read_inputs (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_assign_t *t = (sq_assign_t *) msg;
    t->inputs = (sq_input_ref_t *) s_refs_read (r, 0, &t->n_inputs, true);
}

void
sqp_kind_pack_inputs (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_assign_t *t = (const sq_assign_t *) msg;
    s_refs_pack (pk, t->inputs, t->n_inputs, true);
}

void
sqp_kind_read_outdecls (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    (void) f;
    sq_assign_t *t = (sq_assign_t *) msg;
    uint32_t n;
    //  After the inputs, which move with the scratch
    size_t in_bytes = sizeof (sq_input_ref_t) * (t->n_inputs + 1);
    char *block = s_list_open (r, in_bytes, sizeof (sq_out_decl_t), 3, &n,
                               "more outputs than bytes");
    if (!block)
        return;
    t->inputs = (sq_input_ref_t *) block;
    sq_out_decl_t *outs = (sq_out_decl_t *) (block + in_bytes);
    for (uint32_t i = 0; i < n && !r->error; i++) {
        uint32_t fields = 0;
        mpr_array (r, &fields);
        if (!r->error && fields != 2 && fields != 3)
            mpr_fail (r, "an output is [object, content_type] or [object, content_type, consumers]");
        mpr_uint (r, &outs [i].key);
        mpr_str (r, &outs [i].content_type, SQ_MAX_NAME);
        outs [i].stream = fields == 3;
        outs [i].consumers = 0;
        if (fields == 3 && mpr_u32 (r, &outs [i].consumers) == 0
        &&  outs [i].consumers > SQ_MAX_STREAM_CONSUMERS)
            mpr_fail (r, "more stream consumers than allowed");
    }
    t->outputs = outs;
    t->n_outputs = n;
}

void
sqp_kind_pack_outdecls (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    (void) f;
    const sq_assign_t *t = (const sq_assign_t *) msg;
    msgpack_pack_array (pk, t->n_outputs);
    for (uint32_t i = 0; i < t->n_outputs; i++) {
        msgpack_pack_array (pk, t->outputs [i].stream? 3: 2);
        msgpack_pack_uint64 (pk, t->outputs [i].key);
        sq_pack_mstr (pk, t->outputs [i].content_type);
        if (t->outputs [i].stream)
            msgpack_pack_uint32 (pk, t->outputs [i].consumers);
    }
}

//  Public keys: an owned array of pointers into the frame
void
sqp_kind_read_keylist (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_keylist_t *v = SQP_AT (sq_keylist_t, msg, f);
    uint32_t n;
    if (mpr_array (r, &n))
        return;
    if (n > SQ_MAX_KEYS) {
        mpr_fail (r, "too many keys");
        return;
    }
    if (n == 0)
        return;
    const uint8_t **keys = (const uint8_t **) malloc (n * sizeof (uint8_t *));
    if (!keys) {
        mpr_fail (r, "out of memory");
        return;
    }
    v->keys = keys;
    for (uint32_t i = 0; i < n && !r->error; i++) {
        mpr_str_t key;
        if (mpr_bin (r, &key, 32) == 0 && key.len != 32)
            mpr_fail (r, "a key is not 32 bytes");
        keys [i] = (const uint8_t *) key.ptr;
        v->n = i + 1;
    }
}

void
sqp_kind_pack_keylist (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    const sq_keylist_t *v = SQP_CAT (sq_keylist_t, msg, f);
    msgpack_pack_array (pk, v->n);
    for (uint32_t i = 0; i < v->n; i++) {
        msgpack_pack_bin (pk, 32);
        msgpack_pack_bin_body (pk, v->keys [i], 32);
    }
}

//  A WHERE record (OWHERE is one or nil: proto_table.c's S_OPTIONAL)
void
sqp_kind_read_where (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_record_read (r, SQ_REC_WHERE, SQP_AT (sq_where_t, msg, f), "where");
}

void
sqp_kind_pack_where (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    sq_record_pack (pk, SQ_REC_WHERE, SQP_CAT (sq_where_t, msg, f));
}

//  Resources: a map {name: amount} or nil (proto.c's sqp_resources, which
//  ASSIGN and SUBMIT's tasks read too)
void
sqp_kind_read_resources (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_resources_t *v = SQP_AT (sq_resources_t, msg, f);
    sqp_resources (r, v->items, &v->n, SQ_MAX_RESOURCES);
}

void
sqp_kind_pack_resources (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    const sq_resources_t *v = SQP_CAT (sq_resources_t, msg, f);
    sqp_pack_resources (pk, v->items, v->n);
}

//  A governor's previous place, [cluster, governor] or nil: the cluster
//  is not empty, so that an empty one means nil
void
sqp_kind_read_previous (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    sq_previous_t *v = SQP_AT (sq_previous_t, msg, f);
    if (mpr_try_nil (r) || mpr_array_exact (r, 2))
        return;
    mpr_field (r, "previous.cluster");
    if (mpr_str (r, &v->cluster, SQ_MAX_NAME) == 0 && v->cluster.len == 0)
        mpr_fail (r, "empty");
    mpr_field (r, "previous.governor");
    mpr_u32 (r, &v->id);
}

void
sqp_kind_pack_previous (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    const sq_previous_t *v = SQP_CAT (sq_previous_t, msg, f);
    if (v->cluster.len) {
        msgpack_pack_array (pk, 2);
        sq_pack_mstr (pk, v->cluster);
        msgpack_pack_uint32 (pk, v->id);
    }
    else
        msgpack_pack_nil (pk);
}
