/*  proto_table: the codec made from the message table (proto_messages.def):
    the field descriptions of every flat message and client request, one
    decoder and one encoder that walk them, the named sq_chunk_decode etc.,
    sq_msg_name. A kind is read, packed and seen empty here, once. */
#include "proto_internal.h"
#include <stddef.h>

//  --------------------------------------------------------------------------
//  The kinds

typedef struct {
    const char *name;
    //  The value a trailing optional field leaves out.
    bool (*empty) (const void *msg, const sq_field_desc_t *f);
} s_kind_t;

//  Empty: 0, false, no bytes, no ids, no name. For a nil-or-value kind,
//  the value that packs as nil (OSTR: no pointer, "" is a value).
static inline __attribute__ ((always_inline)) bool
s_is_empty (const void *msg, const sq_field_desc_t *f)
{
    return f->kind == SQK_U32 || f->kind == SQK_OU32 || f->kind == SQK_TSTATE?
               *SQP_CAT (uint32_t, msg, f) == 0:
           f->kind == SQK_I32 || f->kind == SQK_FRAME? *SQP_CAT (int32_t, msg, f) == 0:
           f->kind == SQK_IDLIST? SQP_CAT (sq_idlist_t, msg, f)->n == 0:
           f->kind == SQK_RESLIST? SQP_CAT (sq_reslist_t, msg, f)->n == 0:
           f->kind == SQK_OBJECTS? ((const sq_submit_t *) msg)->n_objects == 0:
           f->kind == SQK_TASKS? ((const sq_submit_t *) msg)->n_tasks == 0:
           f->kind == SQK_BOOL? !*SQP_CAT (bool, msg, f):
           f->kind == SQK_U64 || f->kind == SQK_I64 || f->kind == SQK_OU64?
               *SQP_CAT (uint64_t, msg, f) == 0:
           f->kind == SQK_OINT? !SQP_CAT (sq_opt_int_t, msg, f)->has:
           f->kind == SQK_OSTR? !SQP_CAT (mpr_str_t, msg, f)->ptr:
           f->kind == SQK_IDS? ((const sq_request_t *) msg)->n_ids == 0:
           f->kind == SQK_JOB? !((const sq_request_t *) msg)->has_name:
           f->kind == SQK_OUTPUTS? ((const sq_event_t *) msg)->n_outputs == 0:
           f->kind == SQK_OWHERE? !SQP_CAT (sq_where_t, msg, f)->endpoint.ptr:
           f->kind == SQK_KEYLIST? SQP_CAT (sq_keylist_t, msg, f)->n == 0:
           f->kind == SQK_RESOURCES? SQP_CAT (sq_resources_t, msg, f)->n == 0:
           f->kind == SQK_PREVIOUS? SQP_CAT (sq_previous_t, msg, f)->cluster.len == 0:
           f->kind == SQK_RAW || f->kind == SQK_BODY? SQP_CAT (sq_raw_t, msg, f)->size == 0:
           SQP_CAT (mpr_str_t, msg, f)->len == 0;
}

static bool
s_zero_empty (const void *msg, const sq_field_desc_t *f)
{
    return s_is_empty (msg, f);
}

static const s_kind_t s_kinds [] = {
    [SQK_U32] = { "U32", s_zero_empty },
    [SQK_U64] = { "U64", s_zero_empty },
    [SQK_I64] = { "I64", s_zero_empty },
    [SQK_BOOL] = { "BOOL", s_zero_empty },
    [SQK_STR] = { "STR", s_zero_empty },
    [SQK_NAME] = { "NAME", s_zero_empty },
    [SQK_BIN] = { "BIN", s_zero_empty },
    [SQK_OBIN] = { "OBIN", s_zero_empty },
    [SQK_IDS] = { "IDS", s_zero_empty },
    [SQK_JOB] = { "JOB", s_zero_empty },
    [SQK_OPTIONS] = { "OPTIONS", sqp_kind_options_empty },
    [SQK_OSTR] = { "OSTR", s_zero_empty },
    [SQK_OU32] = { "OU32", s_zero_empty },
    [SQK_OWHERE] = { "OWHERE", s_zero_empty },
    [SQK_KEYLIST] = { "KEYLIST", s_zero_empty },
    [SQK_OUTPUTS] = { "OUTPUTS", s_zero_empty },
    [SQK_EXIT] = { "EXIT", sqp_kind_exit_empty },
    [SQK_OINT] = { "OINT", s_zero_empty },
    [SQK_OU64] = { "OU64", s_zero_empty },
    [SQK_ESTR] = { "ESTR", s_zero_empty },
    [SQK_TSTATE] = { "TSTATE", s_zero_empty },
    [SQK_RESOURCES] = { "RESOURCES", s_zero_empty },
    [SQK_PREVIOUS] = { "PREVIOUS", s_zero_empty },
    [SQK_RAW] = { "RAW", s_zero_empty },
    [SQK_INPUTS] = { "INPUTS", s_zero_empty },
    [SQK_OUTDECLS] = { "OUTDECLS", s_zero_empty },
    [SQK_WHERE] = { "WHERE", s_zero_empty },
    [SQK_I32] = { "I32", s_zero_empty },
    [SQK_FRAME] = { "FRAME", s_zero_empty },
    [SQK_IDLIST] = { "IDLIST", s_zero_empty },
    [SQK_RESLIST] = { "RESLIST", s_zero_empty },
    [SQK_ARRAY] = { "ARRAY", sqp_kind_array_empty },
    [SQK_TOPTIONS] = { "TOPTIONS", sqp_kind_toptions_empty },
    [SQK_OBJECTS] = { "OBJECTS", s_zero_empty },
    [SQK_TASKS] = { "TASKS", s_zero_empty },
    [SQK_BODY] = { "BODY", s_zero_empty },
};

//  The nil-or-value kinds: each is one generic wrapper around a base kind
//  (s_read, s_pack). Nil reads as the empty value (every reader zeroed the
//  struct) and an empty value packs as nil; else the base kind's value, at
//  `at` within the member (OINT's value, beside its has). OSTR and ESTR
//  differ in what is empty: no pointer, or no bytes; OWHERE's empty is no
//  endpoint's pointer.
#define S_OPTIONAL(X) \
    X (OU32, U32, 0) X (OU64, U64, 0) X (OINT, I64, offsetof (sq_opt_int_t, value)) \
    X (OSTR, STR, 0) X (ESTR, STR, 0) X (OBIN, BIN, 0) X (OWHERE, WHERE, 0)

//  A kind's base and where in the member its value is: the kind itself at
//  0 but for the nil-or-value kinds. (Returned by value: a descriptor
//  copied into a local whose address is taken, inlined for every field,
//  made the sanitizer's build of this file sixteen times slower.)
typedef struct {
    sq_field_kind_t kind;
    size_t at;
} s_base_t;

static inline __attribute__ ((always_inline)) s_base_t
s_base (sq_field_kind_t kind)
{
    switch (kind) {
#define S_CASE(KIND, BASE, at) case SQK_##KIND: return (s_base_t) { SQK_##BASE, at };
        S_OPTIONAL (S_CASE)
#undef S_CASE
        default: return (s_base_t) { kind, 0 };
    }
}

const char *
sq_field_kind_name (sq_field_kind_t kind)
{
    return kind < sizeof s_kinds / sizeof s_kinds [0]? s_kinds [kind].name: NULL;
}

//  --------------------------------------------------------------------------
//  The table, made from proto_messages.def

//  Each message's struct, by its name, for offsetof
#define SQ_BEGIN(NAME, number, type_t, check) typedef type_t s_t_##NAME;
#define SQ_REQUEST(NAME, number) typedef sq_request_t s_t_##NAME;
#define SQ_RECORD(NAME, type_t, check) typedef type_t s_t_##NAME;
#define SQ_RECORD_IN(NAME, type_t, check) typedef type_t s_t_##NAME;
#define SQ_EVENT(NAME, number) typedef sq_event_t s_t_##NAME;
#include "proto_messages.def"

//  Every member has its kind's size (SQ_RECORD_IN's structs are declared
//  by hand)
#define SQ_FIELD(NAME, KIND, member, name, min, max, why, optional) \
    _Static_assert (sizeof (((s_t_##NAME *) 0)->member) == sizeof (SQ_CT_##KIND), \
                    #NAME "." #member ": not the size of its kind");
#include "proto_messages.def"

//  One field, by kind. Each message's reader and packer below are made
//  from its rows as straight-line code calling these with constant
//  descriptions: inlined, the switches and the description fold away and
//  the code is what a hand-written codec would be (bench/codec.c measures
//  both). Numbers and lengths are bounded when max is set.
#define S_MEMBER(type) ((type *) ((char *) msg + offset))
static inline __attribute__ ((always_inline)) void
s_read_value (mpr_t *r, void *msg, const sq_field_desc_t *f, sq_field_kind_t kind,
              size_t offset)
{
    switch (kind) {
        case SQK_U32: {
            uint32_t *v = S_MEMBER (uint32_t);
            if (mpr_u32 (r, v) == 0 && f->max && (*v < (uint64_t) f->min || *v > f->max))
                mpr_fail (r, f->why);
            break;
        }
        case SQK_U64: {
            uint64_t *v = S_MEMBER (uint64_t);
            if (mpr_uint (r, v) == 0 && f->max && (*v < (uint64_t) f->min || *v > f->max))
                mpr_fail (r, f->why);
            break;
        }
        case SQK_I64: {
            int64_t *v = S_MEMBER (int64_t);
            if (mpr_int (r, v) == 0 && f->max && (*v < f->min || *v > (int64_t) f->max))
                mpr_fail (r, f->why);
            break;
        }
        case SQK_I32: {         //  bounded by min..max if max, else to 32 bits
            int64_t v;
            if (mpr_int (r, &v) == 0
            &&  (f->max? v < f->min || v > (int64_t) f->max: v < INT32_MIN || v > INT32_MAX))
                mpr_fail (r, f->why? f->why: "not an i32");
            *S_MEMBER (int32_t) = (int32_t) v;
            break;
        }
        case SQK_BOOL: mpr_bool (r, S_MEMBER (bool)); break;
        case SQK_STR:
        case SQK_NAME: {
            mpr_str_t *v = S_MEMBER (mpr_str_t);
            if (mpr_str (r, v, f->max? (uint32_t) f->max: SQ_MAX_NAME) == 0
            &&  kind == SQK_NAME && v->len && memchr (v->ptr, 0, v->len))
                mpr_fail (r, f->why? f->why: "a NUL byte");
            break;
        }
        case SQK_BIN: {
            mpr_str_t *v = S_MEMBER (mpr_str_t);
            if (mpr_bin (r, v, (uint32_t) f->max) == 0 && f->min && v->len != (uint64_t) f->min)
                mpr_fail (r, f->why? f->why: "wrong number of bytes");
            break;
        }
        case SQK_RAW: {
            sq_raw_t *v = S_MEMBER (sq_raw_t);
            if (mpr_skip (r, &v->ptr, &v->size) == 0 && f->max && v->size > f->max)
                mpr_fail (r, f->why);
            break;
        }
#define S_CASE(KIND, kind) case SQK_##KIND: sqp_kind_read_##kind (r, msg, f); break;
        SQP_FN_KINDS (S_CASE)
#undef S_CASE
        default: break;         //  the nil-or-value kinds: s_read
    }
}

static inline __attribute__ ((always_inline)) void
s_read (mpr_t *r, void *msg, const sq_field_desc_t *f)
{
    //  A nil-or-value kind's nil leaves the member empty
    s_base_t base = s_base (f->kind);
    if (base.kind != f->kind && mpr_try_nil (r))
        return;
    if (f->kind == SQK_OINT)
        SQP_AT (sq_opt_int_t, msg, f)->has = true;
    s_read_value (r, msg, f, base.kind, f->offset + base.at);
}

#define S_CMEMBER(type) ((const type *) ((const char *) msg + offset))
static inline __attribute__ ((always_inline)) void
s_pack_value (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f,
              sq_field_kind_t kind, size_t offset)
{
    switch (kind) {
        case SQK_U32: msgpack_pack_uint32 (pk, *S_CMEMBER (uint32_t)); break;
        case SQK_U64: msgpack_pack_uint64 (pk, *S_CMEMBER (uint64_t)); break;
        case SQK_I64: msgpack_pack_int64 (pk, *S_CMEMBER (int64_t)); break;
        case SQK_I32: msgpack_pack_int32 (pk, *S_CMEMBER (int32_t)); break;
        case SQK_BOOL:
            if (*S_CMEMBER (bool))
                msgpack_pack_true (pk);
            else
                msgpack_pack_false (pk);
            break;
        case SQK_STR:
        case SQK_NAME:
        case SQK_BIN: {
            mpr_str_t v = *S_CMEMBER (mpr_str_t);
            if (kind == SQK_BIN) {
                msgpack_pack_bin (pk, v.len);
                msgpack_pack_bin_body (pk, v.len? v.ptr: "", v.len);
            }
            else {
                msgpack_pack_str (pk, v.len);
                msgpack_pack_str_body (pk, v.len? v.ptr: "", v.len);
            }
            break;
        }
        case SQK_RAW: {         //  the bytes as they were read
            sq_raw_t v = *S_CMEMBER (sq_raw_t);
            if (v.ptr && v.size)
                msgpack_pack_str_body (pk, v.ptr, v.size);
            else
                msgpack_pack_nil (pk);
            break;
        }
#define S_CASE(KIND, kind) case SQK_##KIND: sqp_kind_pack_##kind (pk, msg, f); break;
        SQP_FN_KINDS (S_CASE)
#undef S_CASE
        default: break;         //  the nil-or-value kinds: s_pack
    }
}

static inline __attribute__ ((always_inline)) void
s_pack (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f)
{
    s_base_t base = s_base (f->kind);
    if (base.kind != f->kind && s_is_empty (msg, f))
        msgpack_pack_nil (pk);          //  a nil-or-value kind's empty value
    else
        s_pack_value (pk, msg, f, base.kind, f->offset + base.at);
}

//  Each message's reader: its fields after the array's head (n elements
//  in the array, of which `at` are read), then its check; and its packer
//  of the first n fields.
#define S_DESC(NAME, KIND, member, name, min, max, why, optional) \
    &(const sq_field_desc_t) { name, SQK_##KIND, optional, offsetof (s_t_##NAME, member), \
                               min, max, why }
#define SQ_BEGIN(NAME, number, type_t, check) \
    static void s_read_##NAME (mpr_t *r, void *msg, uint32_t n) { \
        uint32_t at = 1; int (*check_fn) (mpr_t *, const void *) = check;
#define SQ_REQUEST(NAME, number) \
    static void s_read_##NAME (mpr_t *r, void *msg, uint32_t n) { \
        uint32_t at = 2; int (*check_fn) (mpr_t *, const void *) = NULL;
#define SQ_RECORD(NAME, type_t, check) \
    static void s_read_##NAME (mpr_t *r, void *msg, uint32_t n) { \
        uint32_t at = 0; int (*check_fn) (mpr_t *, const void *) = check;
#define SQ_RECORD_IN(NAME, type_t, check) SQ_RECORD (NAME, type_t, check)
#define SQ_EVENT(NAME, number) \
    static void s_read_##NAME (mpr_t *r, void *msg, uint32_t n) { \
        uint32_t at = 1; int (*check_fn) (mpr_t *, const void *) = NULL;
#define SQ_FIELD(NAME, KIND, member, name, min, max, why, optional) \
        if (!r->error && (!(optional) || at < n)) { \
            r->field = name; \
            s_read (r, msg, S_DESC (NAME, KIND, member, name, min, max, why, optional)); \
        } \
        at++;
#define SQ_END(NAME) \
        (void) at; (void) n; \
        if (check_fn && !r->error) \
            check_fn (r, msg); \
    }
#include "proto_messages.def"

#define SQ_BEGIN(NAME, number, type_t, check) \
    static void s_pack_##NAME (msgpack_packer *pk, const void *msg, uint32_t n) { \
        uint32_t at = 0;
#define SQ_REQUEST(NAME, number) SQ_BEGIN (NAME, number, sq_request_t, NULL)
#define SQ_RECORD(NAME, type_t, check) SQ_BEGIN (NAME, 0, type_t, check)
#define SQ_RECORD_IN(NAME, type_t, check) SQ_BEGIN (NAME, 0, type_t, check)
#define SQ_EVENT(NAME, number) SQ_BEGIN (NAME, number, sq_event_t, NULL)
#define SQ_FIELD(NAME, KIND, member, name, min, max, why, optional) \
        if (!(optional) || at < n) \
            s_pack (pk, msg, S_DESC (NAME, KIND, member, name, min, max, why, optional)); \
        at++;
#define SQ_END(NAME) (void) at; (void) n; (void) pk; (void) msg; }
#include "proto_messages.def"

//  Each event's packer, by name, for proto_governor.c's sq_pack_started
//  etc.: straight-line, no description looked up (the governor packs two
//  events a task)
#define SQ_EVENT(NAME, number) \
    void sqp_pack_##NAME (msgpack_packer *pk, const sq_event_t *ev, uint32_t n) \
    { \
        msgpack_pack_array (pk, 1 + n); \
        msgpack_pack_uint32 (pk, number); \
        s_pack_##NAME (pk, ev, n); \
    }
#include "proto_messages.def"

//  Each message's fields
#define SQ_BEGIN(NAME, number, type_t, check) static const sq_field_desc_t s_fields_##NAME [] = {
#define SQ_REQUEST(NAME, number) static const sq_field_desc_t s_fields_##NAME [] = {
#define SQ_RECORD(NAME, type_t, check) static const sq_field_desc_t s_fields_##NAME [] = {
#define SQ_RECORD_IN(NAME, type_t, check) static const sq_field_desc_t s_fields_##NAME [] = {
#define SQ_EVENT(NAME, number) static const sq_field_desc_t s_fields_##NAME [] = {
#define SQ_FIELD(NAME, KIND, member, name, min, max, why, optional) \
    { name, SQK_##KIND, optional, offsetof (s_t_##NAME, member), min, max, why },
#define SQ_END(NAME) { NULL, SQK_U32, 0, 0, 0, 0, NULL } };
#include "proto_messages.def"

//  Each message's count of required fields (optional ones trail)
#define SQ_BEGIN(NAME, number, type_t, check) enum { S_REQUIRED_##NAME = 0
#define SQ_REQUEST(NAME, number) enum { S_REQUIRED_##NAME = 0
#define SQ_RECORD(NAME, type_t, check) enum { S_REQUIRED_##NAME = 0
#define SQ_RECORD_IN(NAME, type_t, check) enum { S_REQUIRED_##NAME = 0
#define SQ_EVENT(NAME, number) enum { S_REQUIRED_##NAME = 0
#define SQ_FIELD(NAME, KIND, member, name, min, max, why, optional) + !(optional)
#define SQ_END(NAME) };
#include "proto_messages.def"

//  Each row's count of fields
#define SQ_BEGIN(NAME, number, type_t, check) enum { S_ALL_##NAME = 0
#define SQ_REQUEST(NAME, number) enum { S_ALL_##NAME = 0
#define SQ_EVENT(NAME, number) enum { S_ALL_##NAME = 0
#define SQ_RECORD(NAME, type_t, check) enum { S_ALL_##NAME = 0
#define SQ_RECORD_IN(NAME, type_t, check) enum { S_ALL_##NAME = 0
#define SQ_FIELD(NAME, KIND, member, name, min, max, why, optional) + 1
#define SQ_END(NAME) };
#include "proto_messages.def"

#define S_FIELDS(NAME) s_fields_##NAME, sizeof s_fields_##NAME / sizeof s_fields_##NAME [0] - 1
#define S_DESC_OF(NAME, number_, request_, type_t, check_) \
    { .type = number_, .name = #NAME, .request = request_, .size = sizeof (type_t), \
      .fields = s_fields_##NAME, \
      .n_fields = sizeof s_fields_##NAME / sizeof s_fields_##NAME [0] - 1, \
      .check = check_, .n_required = S_REQUIRED_##NAME, \
      .read = s_read_##NAME, .pack = s_pack_##NAME, .element = -1 },
static const sq_msg_desc_t s_records [] = {
#define SQ_RECORD(NAME, type_t, check) S_DESC_OF (NAME, 0, false, type_t, check)
#define SQ_RECORD_IN(NAME, type_t, check) S_DESC_OF (NAME, 0, false, type_t, check)
#define SQ_RECORD_BARE(NAME, type_t) \
    { .type = 0, .name = #NAME, .size = sizeof (type_t), .fields = s_fields_##NAME, \
      .n_fields = 1, .n_required = 1, .read = s_read_##NAME, .pack = s_pack_##NAME, \
      .element = -1, .bare = true },
#include "proto_messages.def"
};
//  A bare record is its one required field
#define SQ_RECORD_BARE(NAME, type_t) \
    _Static_assert (S_ALL_##NAME == 1 && S_REQUIRED_##NAME == 1, \
                    #NAME ": a bare record has one required field");
#include "proto_messages.def"

static const sq_msg_desc_t s_events [] = {
#define SQ_EVENT(NAME, number_) S_DESC_OF (NAME, number_, false, sq_event_t, NULL)
#include "proto_messages.def"
};
#define S_EVENTS (sizeof s_events / sizeof s_events [0])

//  Each event type's place in s_events, plus one
enum {
#define SQ_EVENT(NAME, number) S_AT_##NAME,
#include "proto_messages.def"
};
#define S_EVENT_TYPES 64
static const uint8_t s_event_index [S_EVENT_TYPES] = {
#define SQ_EVENT(NAME, number) [number] = S_AT_##NAME + 1,
#include "proto_messages.def"
};

static const sq_msg_desc_t s_messages [] = {
#define SQ_MSG(NAME, number_) { .type = number_, .name = #NAME, .element = -1 },
#define SQ_BATCH(NAME, number_, RECORD) \
    { .type = number_, .name = #NAME, .element = SQ_REC_##RECORD },
#define SQ_BEGIN(NAME, number, type_t, check) S_DESC_OF (NAME, number, false, type_t, check)
#define SQ_REQUEST(NAME, number) S_DESC_OF (NAME, number, true, sq_request_t, NULL)
#include "proto_messages.def"
};
#define S_MESSAGES (sizeof s_messages / sizeof s_messages [0])

const sq_msg_desc_t *
sq_msg_descs (size_t *count)
{
    *count = S_MESSAGES;
    return s_messages;
}

//  Each type's place in s_messages, plus one (0: none), so that a decoder
//  finds its description without a search.
enum {
#define SQ_MSG(NAME, number) S_AT_##NAME,
#define SQ_BEGIN(NAME, number, type_t, check) S_AT_##NAME,
#define SQ_REQUEST(NAME, number) S_AT_##NAME,
#define SQ_BATCH(NAME, number, RECORD) S_AT_##NAME,
#include "proto_messages.def"
};
#define S_TYPES 256
static const uint8_t s_index [S_TYPES] = {
#define SQ_MSG(NAME, number) [number] = S_AT_##NAME + 1,
#define SQ_BEGIN(NAME, number, type_t, check) [number] = S_AT_##NAME + 1,
#define SQ_REQUEST(NAME, number) [number] = S_AT_##NAME + 1,
#define SQ_BATCH(NAME, number, RECORD) [number] = S_AT_##NAME + 1,
#include "proto_messages.def"
};

const sq_msg_desc_t *
sq_msg_desc (uint32_t type)
{
    return type < S_TYPES && s_index [type]? &s_messages [s_index [type] - 1]: NULL;
}

const sq_msg_desc_t *
sq_record_desc (uint32_t record)
{
    return record < SQ_REC_COUNT_? &s_records [record]: NULL;
}

const sq_msg_desc_t *
sq_record_descs (size_t *count)
{
    *count = SQ_REC_COUNT_;
    return s_records;
}

static inline const sq_msg_desc_t *
s_event_desc (uint32_t type)
{
    return type < S_EVENT_TYPES && s_event_index [type]? &s_events [s_event_index [type] - 1]: NULL;
}

const sq_msg_desc_t *
sq_event_desc (uint32_t type)
{
    return s_event_desc (type);
}

const char *
sq_msg_name (uint32_t type)
{
    const sq_msg_desc_t *d = sq_msg_desc (type);
    return d? d->name: NULL;
}

//  --------------------------------------------------------------------------
//  The codec

//  Fields the message has on the wire: trailing optional ones that are
//  empty are left out.
static uint32_t
s_present (const sq_msg_desc_t *d, const void *msg)
{
    uint32_t n = d->n_fields;
    while (n > d->n_required
       &&  s_kinds [d->fields [n - 1].kind].empty (msg, &d->fields [n - 1]))
        n--;
    return n;
}

//  Reads the rest of a message of d into msg, already zeroed, from r
//  where its type was read (n: elements in its array); the caller reports.
static inline __attribute__ ((always_inline)) int
s_decode_rest (const sq_msg_desc_t *d, void *msg, mpr_t *r, uint32_t n)
{
    uint32_t head = d->request? 2: 1;       //  type (and req)
    if (n < head + d->n_required || n > head + d->n_fields) {
        r->field = "message";
        mpr_fail (r, "wrong number of fields");
    }
    else
    if (d->request) {
        r->field = "req";
        mpr_u32 (r, &((sq_request_t *) msg)->req);
    }
    if (!r->error)
        d->read (r, msg, n);
    mpr_field (r, NULL);
    return mpr_end (r);
}

static inline __attribute__ ((always_inline)) int
s_decode (const sq_msg_desc_t *d, void *msg, const void *data, size_t size, mpr_t *r)
{
    uint32_t n = 0;
    uint64_t type;
    mpr_init (r, data, size);
    mpr_field (r, "message");
    if (mpr_array (r, &n) == 0 && (n < (d->request? 2: 1) + d->n_required
                               ||  n > (d->request? 2: 1) + d->n_fields))
        mpr_fail (r, "wrong number of fields");
    mpr_field (r, "type");
    if (mpr_uint (r, &type) == 0 && type != d->type)
        mpr_fail (r, "unexpected message type");
    if (r->error)
        return -1;
    return s_decode_rest (d, msg, r, n);
}

//  A message of d into msg, or an error with its struct freed
static inline __attribute__ ((always_inline)) int
s_msg_decode (const sq_msg_desc_t *d, uint32_t type, void *msg, const void *data, size_t size,
              sq_errbuf_t *err)
{
    memset (msg, 0, d->size);
    mpr_t r;
    if (s_decode (d, msg, data, size, &r)) {
        sq_msg_free_fields (type, msg);
        return sqp_error (&r, err, d->name);
    }
    return 0;
}

int
sq_msg_decode (uint32_t type, void *msg, const void *data, size_t size, sq_errbuf_t *err)
{
    const sq_msg_desc_t *d = sq_msg_desc (type);
    if (!d || !d->fields)
        return sqp_semantic (err, "not a message of the table");
    return s_msg_decode (d, type, msg, data, size, err);
}

//  The decoders of the messages whose structs are by hand (SUBMIT,
//  REPLY: every request's answer): their description and reader
//  constants, folded into one straight-line decoder each
#define SQ_BEGIN_IN(NAME, number, type_t, check) \
    int sqp_decode_##NAME (type_t *msg, const void *data, size_t size, sq_errbuf_t *err) \
    { \
        static const sq_msg_desc_t d [] = { S_DESC_OF (NAME, number, false, type_t, check) }; \
        return s_msg_decode (d, number, msg, data, size, err); \
    }
#include "proto_messages.def"

void
sq_msg_free_fields (uint32_t type, void *msg)
{
    switch (type) {
#define SQ_RELEASE(NAME, fn) case SQ_MSG_##NAME: fn ((s_t_##NAME *) msg); break;
#include "proto_messages.def"
        default: break;
    }
}

void
sq_msg_encode (sq_wbuf_t *w, uint32_t type, const void *msg)
{
    const sq_msg_desc_t *d = sq_msg_desc (type);
    uint32_t n = d && d->fields? s_present (d, msg): 0;
    bool request = !d || d->request;
    msgpack_pack_array (&w->pk, (request? 2: 1) + n);
    msgpack_pack_uint32 (&w->pk, type);
    if (request)
        msgpack_pack_uint32 (&w->pk, ((const sq_request_t *) msg)->req);
    if (n)
        d->pack (&w->pk, msg, n);
}

//  Client requests: every type of SQ_REQUEST, into one sq_request_t
int
sq_request_decode (sq_request_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    uint32_t type, n;
    mpr_t r;
    memset (self, 0, sizeof *self);
    mpr_init (&r, data, size);
    if (mpr_array (&r, &n) || n < 1 || mpr_u32 (&r, &type))
        return sqp_semantic (err, "request: not a msgpack array starting with a type");
    const sq_msg_desc_t *d = sq_msg_desc (type);
    if (!d || !d->request)
        return sqp_semantic (err, "unknown message type (not a client request)");
    self->type = type;
    if (s_decode_rest (d, self, &r, n)) {
        sq_request_release (self);
        return sqp_error (&r, err, d->name);
    }
    return 0;
}

void
sq_request_release (sq_request_t *self)
{
    free (self->ids);
    self->ids = NULL;
    self->n_ids = 0;
}

void
sq_request_encode (sq_wbuf_t *w, const sq_request_t *q)
{
    sq_msg_encode (w, q->type, q);
}

//  Records and batches ------------------------------------------------------

//  One record at r into msg, its size and reader given (constants in
//  sq_batch_next, where the cost of a call per element shows: the zeroing
//  of the struct and its reader then inline).
static inline __attribute__ ((always_inline)) int
s_record_read_as (const sq_msg_desc_t *d, mpr_t *r, void *msg, const char *what, size_t size,
                  void (*read) (mpr_t *, void *, uint32_t))
{
    uint32_t n = 0;
    memset (msg, 0, size);
    mpr_field (r, what);
    if (d->bare)
        n = 1;
    else
    if (mpr_array (r, &n) == 0 && (n < d->n_required || n > d->n_fields))
        mpr_fail (r, "wrong number of fields");
    if (!r->error)
        read (r, msg, n);
    return r->error? -1: 0;
}

static inline int
s_record_read (const sq_msg_desc_t *d, mpr_t *r, void *msg, const char *what)
{
    return s_record_read_as (d, r, msg, what, d->size, d->read);
}

int
sqp_record_read_zeroed (mpr_t *r, uint32_t record, void *msg, const char *what)
{
    return s_record_read_as (&s_records [record], r, msg, what, 0, s_records [record].read);
}

//  Each record's packer, by name (sqp_pack_STOP_TASK ...): straight-line
#define SQ_RECORD(NAME, type_t, check) \
    void sqp_pack_##NAME (msgpack_packer *pk, const void *msg) \
    { \
        uint32_t n = (int) S_REQUIRED_##NAME == (int) S_ALL_##NAME? (uint32_t) S_ALL_##NAME \
                   : s_present (&s_records [SQ_REC_##NAME], msg); \
        msgpack_pack_array (pk, n); \
        s_pack_##NAME (pk, msg, n); \
    }
#define SQ_RECORD_IN(NAME, type_t, check) SQ_RECORD (NAME, type_t, check)
#define SQ_RECORD_BARE(NAME, type_t) \
    void sqp_pack_##NAME (msgpack_packer *pk, const void *msg) \
    { \
        s_pack_##NAME (pk, msg, 1); \
    }
#include "proto_messages.def"

int
sq_record_read (mpr_t *r, uint32_t record, void *msg, const char *what)
{
    return s_record_read (&s_records [record], r, msg, what);
}

void
sq_record_pack (msgpack_packer *pk, uint32_t record, const void *msg)
{
    //  Each record's packer called directly (as sq_batch_next's readers)
    switch (record) {
#define SQ_RECORD(NAME, type_t, check) case SQ_REC_##NAME: sqp_pack_##NAME (pk, msg); return;
#define SQ_RECORD_IN(NAME, type_t, check) SQ_RECORD (NAME, type_t, check)
#define SQ_RECORD_BARE(NAME, type_t) SQ_RECORD (NAME, type_t, NULL)
#include "proto_messages.def"
        default: break;
    }
}

int
sq_record_decode (uint32_t record, void *msg, const void *data, size_t size,
                  const char *what, sq_errbuf_t *err)
{
    mpr_t r;
    mpr_init (&r, data, size);
    sq_record_read (&r, record, msg, "body");
    return sqp_end (&r, err, what);
}

int
sq_batch_begin (sq_iter_t *self, uint32_t type, const void *data, size_t size,
                sq_errbuf_t *err)
{
    const sq_msg_desc_t *d = sq_msg_desc (type);
    int rc = sqp_iter_begin (self, data, size, type, err, d? d->name: "message");
    self->batch = d;
    return rc;
}

int
sq_batch_next (sq_iter_t *self, uint32_t type, void *elem)
{
    const sq_msg_desc_t *d = (const sq_msg_desc_t *) self->batch;
    if (!d || d->type != type)
        d = sq_msg_desc (type);
    if (!d || d->element < 0)
        return sqp_semantic (self->err, "not a batched message of the table");
    int more = sqp_iter_more (self, d->name);
    if (more <= 0)
        return more;
    //  Each record's reader by its number: its size and reader constants
    int rc = -1;
    switch (d->element) {
#define SQ_RECORD(NAME, type_t, check) \
        case SQ_REC_##NAME: \
            rc = s_record_read_as (&s_records [SQ_REC_##NAME], &self->r, elem, "element", \
                                   sizeof (type_t), s_read_##NAME); \
            break;
#define SQ_RECORD_IN(NAME, type_t, check) SQ_RECORD (NAME, type_t, check)
#define SQ_RECORD_BARE(NAME, type_t) SQ_RECORD (NAME, type_t, NULL)
#include "proto_messages.def"
        default: break;
    }
    if (rc)
        return sqp_error (&self->r, self->err, d->name);
    return 1;
}

//  UPDATE's events -------------------------------------------------------

int
sq_event_read (sq_iter_t *self, sq_event_t *ev)
{
    mpr_t *r = &self->r;
    uint32_t n = 0;
    memset (ev, 0, sizeof *ev);
    if (r->error)
        return -1;
    r->field = "event";
    if (mpr_array (r, &n))
        return -1;
    r->field = "event.type";
    if (n == 0)
        return mpr_fail (r, "empty");
    if (mpr_u32 (r, &ev->type))
        return -1;
    //  Each event's reader called directly, its counts constants
    switch (ev->type) {
#define SQ_EVENT(NAME, number) \
        case number: \
            if (n < 1 + S_REQUIRED_##NAME || n > 1 + S_ALL_##NAME) \
                break; \
            s_read_##NAME (r, ev, n); \
            return r->error? -1: 0;
#include "proto_messages.def"
        default:
            return mpr_fail (r, "unknown event type");
    }
    r->field = "event";
    return mpr_fail (r, "wrong number of fields");
}

void
sq_event_pack (msgpack_packer *pk, const sq_event_t *ev, int n)
{
    const sq_msg_desc_t *d = s_event_desc (ev->type);
    uint32_t fields = n >= 0? (uint32_t) n:
                      d->n_required == d->n_fields? d->n_fields: s_present (d, ev);
    msgpack_pack_array (pk, 1 + fields);
    msgpack_pack_uint32 (pk, ev->type);
    d->pack (pk, ev, fields);
}

//  The named codecs of the table's SQ_CODEC and SQ_DECODER rows
#define SQ_DECODER(NAME, fn) \
    int sq_##fn##_decode (struct sqp_##NAME *self, const void *data, size_t size, \
                          sq_errbuf_t *err) \
    { return sq_msg_decode (SQ_MSG_##NAME, self, data, size, err); }
#define SQ_CODEC(NAME, fn) SQ_DECODER (NAME, fn) \
    void sq_##fn##_encode (sq_wbuf_t *w, const struct sqp_##NAME *msg) \
    { sq_msg_encode (w, SQ_MSG_##NAME, msg); }
#include "proto_messages.def"
