/*  proto: the squall wire protocol, in one place.

    Over 800 lines: the struct and codec of every message, in one header
    by design, so that the protocol is read in one place.

    Every message is a ZeroMQ multipart message: frame 0 is a msgpack array
    [type, fields...]; any further frames are raw payloads (constants, inline
    object data) referenced from frame 0 by index (1 = the first payload
    frame). Fields are positional; docs/protocol.md is the description of
    every message, and it must change together with this file.

    Decoders are strict: exact field counts, exact types, bounded lengths, no
    trailing bytes. They never assert and never allocate more than the frame
    can justify. On error they return -1 and fill `err` with a message naming
    the field.

    Strings in decoded structs point into the frame they came from (mpr_str_t,
    not NUL-terminated): keep the frame alive while using them.
*/
#ifndef SQ_PROTO_H
#define SQ_PROTO_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <msgpack.h>
#include "mpreader.h"
#include "squall_codes.h"

//  Message types (element 0 of frame 0): SQ_MSG_HELLO ..., from the table
#define SQ_MSG(NAME, number) SQ_MSG_##NAME = number,
#define SQ_BEGIN(NAME, number, type_t, check) SQ_MSG_##NAME = number,
#define SQ_REQUEST(NAME, number) SQ_MSG_##NAME = number,
#define SQ_BATCH(NAME, number, RECORD) SQ_MSG_##NAME = number,
typedef enum {
#include "proto_messages.def"
} sq_msg_type_t;

//  Events inside UPDATE, from the table: SQ_EV_FINISHED ...
#define SQ_EVENT(NAME, number) SQ_##NAME = number,
typedef enum {
#include "proto_messages.def"
} sq_event_type_t;

//  WAIT modes
typedef enum {
    SQ_WAIT_SESSION = 0,        //  every task of the session
    SQ_WAIT_ALL = 1,            //  all of the ids
    SQ_WAIT_SOME = 2            //  at least one of the ids
} sq_wait_mode_t;

//  States reported per id in WAIT replies
typedef enum {
    SQ_STATE_PENDING = 0,
    SQ_STATE_FINISHED = 1,
    SQ_STATE_FAILED = 2,
    SQ_STATE_CANCELLED = 3
} sq_done_state_t;

//  Object flags in SUBMIT
#define SQ_OBJ_KEEP 1
#define SQ_OBJ_STREAM 2             //  read while produced, never stored ("Streams")

//  Limits (see docs/protocol.md: Limits)
#define SQ_MAX_NAME 4096            //  names, kinds, endpoints, content types
#define SQ_MAX_MESSAGE 65536        //  error messages
#define SQ_MAX_CONFIG (16u << 20)   //  one task's config
#define SQ_MAX_RESOURCES 16         //  resource kinds per task or governor
#define SQ_MAX_FRAMES 65536         //  frames in one message
#define SQ_MAX_STREAM_CONSUMERS 64  //  tasks reading one stream
#define SQ_DEFAULT_MAX_HEADER (256u << 20)
#define SQ_DEFAULT_INLINE_MAX 4096  //  objects up to this ride in control msgs

//  Key of a task or object in the whole cluster: session << 32 | id.
static inline uint64_t
sq_key (uint32_t session, uint32_t id)
{
    return ((uint64_t) session << 32) | id;
}
static inline uint32_t sq_key_session (uint64_t key) { return (uint32_t) (key >> 32); }
static inline uint32_t sq_key_id (uint64_t key) { return (uint32_t) key; }

//  Error buffer filled by decoders
typedef struct {
    char text [256];
} sq_errbuf_t;

//  The name of a message type as docs/protocol.md writes it ("SUBMIT");
//  NULL for a type that is not one.
const char *sq_msg_name (uint32_t type);

//  Type and request id of a message, read from frame 0 without decoding the
//  rest. req is 0 for messages that carry none.
int sq_proto_peek (const void *data, size_t size, uint32_t *type, uint32_t *req);

//  --------------------------------------------------------------------------
//  Encoding helpers (msgpack-c)

typedef struct {
    msgpack_sbuffer buf;
    msgpack_packer pk;
} sq_wbuf_t;

//  Iterating readers: one message holds many elements. next returns 1 with
//  an element, 0 at the (validated) end, -1 on error.
typedef struct {
    mpr_t r;
    uint32_t left;
    void *scratch;
    size_t scratch_cap;
    sq_errbuf_t *err;
    const void *batch;          //  sq_batch_begin: the batch's description
} sq_iter_t;

void sq_wbuf_init (sq_wbuf_t *self);
void sq_wbuf_reset (sq_wbuf_t *self);
void sq_wbuf_release (sq_wbuf_t *self);
void sq_pack_cstr (msgpack_packer *pk, const char *s);
void sq_pack_mstr (msgpack_packer *pk, mpr_str_t s);

//  --------------------------------------------------------------------------
//  The message table (proto_messages.def) as data, and its codec.
//  Kinds of fields (proto_messages.def lists what each is on the wire):
typedef enum {
    SQK_U32, SQK_U64, SQK_I64, SQK_BOOL, SQK_STR, SQK_NAME, SQK_BIN, SQK_OBIN,
    SQK_IDS, SQK_JOB, SQK_OPTIONS, SQK_OUTPUTS, SQK_EXIT, SQK_OSTR, SQK_OU32,
    SQK_OWHERE, SQK_KEYLIST, SQK_OINT, SQK_OU64, SQK_ESTR, SQK_TSTATE, SQK_RESOURCES,
    SQK_PREVIOUS, SQK_RAW, SQK_INPUTS, SQK_OUTDECLS, SQK_WHERE,
    SQK_I32, SQK_FRAME, SQK_IDLIST, SQK_RESLIST, SQK_ARRAY, SQK_TOPTIONS, SQK_OBJECTS,
    SQK_TASKS, SQK_BODY
} sq_field_kind_t;

//  An int or nil (the kind OINT)
typedef struct {
    bool has;                   //  false: nil
    int64_t value;
} sq_opt_int_t;

typedef struct {
    const char *name;           //  as errors and docs/protocol.md say it
    sq_field_kind_t kind;
    bool optional;              //  trailing, absent when empty
    size_t offset;              //  of its member in the message's struct
    int64_t min;                //  bounds (max 0: none), else fail with why
    uint64_t max;
    const char *why;
} sq_field_desc_t;

typedef struct {
    uint32_t type;
    const char *name;           //  "CHUNK"
    bool request;               //  a client request [type, req, ...] in sq_request_t
    size_t size;                //  of its struct (0 for messages coded by hand)
    const sq_field_desc_t *fields;
    uint32_t n_fields;          //  0 and fields NULL: coded by hand
    int (*check) (mpr_t *r, const void *msg);
    uint32_t n_required;        //  fields before the optional trailing ones
    //  Its fields' code, made from its rows (proto_table.c): read those
    //  of an array of n elements after its head; pack the first n.
    void (*read) (mpr_t *r, void *msg, uint32_t n);
    void (*pack) (msgpack_packer *pk, const void *msg, uint32_t n);
    int32_t element;            //  SQ_BATCH: its record (SQ_REC_...), else -1
    bool bare;                  //  SQ_RECORD_BARE: its one field, no array
} sq_msg_desc_t;

//  The table entry of a type, NULL if none; all of them (in table order).
const sq_msg_desc_t *sq_msg_desc (uint32_t type);
const sq_msg_desc_t *sq_msg_descs (size_t *count);
//  The kind's name as proto_messages.def writes it ("U32").
const char *sq_field_kind_name (sq_field_kind_t kind);
//  Decode a flat message of the table into msg (its struct, zeroed first);
//  encode one from it. The named sq_chunk_decode etc. are these.
int sq_msg_decode (uint32_t type, void *msg, const void *data, size_t size, sq_errbuf_t *err);
void sq_msg_encode (sq_wbuf_t *w, uint32_t type, const void *msg);
//  Frees what a decoded message of the table owns (its SQ_RELEASE row;
//  nothing for most)
void sq_msg_free_fields (uint32_t type, void *msg);

//  Where an object is, or where to upload one: the FETCH reply's `where`
//  and the UPLOAD reply body. [governor_id, serve_endpoint, serve_key|nil,
//  capability|nil]: the governor's public key (32 bytes) when keys are on,
//  and the capability (capability.h) to present in GREAD / GFETCH / PUT.
typedef struct {
    uint32_t governor;
    mpr_str_t endpoint;
    mpr_str_t key;              //  empty if nil
    mpr_str_t capability;       //  empty if nil
} sq_where_t;

//  A list of public keys (32 bytes each, pointing into the frame)
typedef struct {
    const uint8_t *const *keys;
    uint32_t n;
} sq_keylist_t;

//  The kind RAW: any msgpack value, kept as its bytes in the frame (a
//  task's config); none packs nil
typedef struct {
    const uint8_t *ptr;
    size_t size;
} sq_raw_t;

//  A resource a task needs or a governor offers (gpus in thousandths)
typedef struct {
    mpr_str_t name;
    uint64_t amount;
} sq_resource_t;

//  The kind RESOURCES: a map {name: amount} or nil (none), at most
//  SQ_MAX_RESOURCES, names non-empty and distinct; gpus in thousandths.
typedef struct {
    uint32_t n;
    sq_resource_t items [SQ_MAX_RESOURCES];
} sq_resources_t;

//  The kind PREVIOUS: [cluster (non-empty), governor id] or nil (an empty
//  cluster)
typedef struct {
    mpr_str_t cluster;
    uint32_t id;
} sq_previous_t;

//  The kinds IDLIST and RESLIST (SUBMIT's tasks): an array of u32, a map of
//  resources as RESOURCES, their items in the decoded SUBMIT's blocks
typedef struct {
    uint32_t n;
    uint32_t *ids;
} sq_idlist_t;

typedef struct {
    uint32_t n;
    sq_resource_t *items;
} sq_reslist_t;

//  The structs of the flat messages (sq_chunk_t ...) and their codecs
//  (sq_chunk_decode, sq_chunk_encode ...), made from the table.
#define SQ_CT_U32 uint32_t
#define SQ_CT_U64 uint64_t
#define SQ_CT_I64 int64_t
#define SQ_CT_BOOL bool
#define SQ_CT_STR mpr_str_t         //  strings and bins point into the frame
#define SQ_CT_NAME mpr_str_t
#define SQ_CT_BIN mpr_str_t
#define SQ_CT_OBIN mpr_str_t        //  empty if nil
#define SQ_CT_IDS uint32_t *        //  requests: their layouts, as structs no
#define SQ_CT_JOB mpr_str_t         //  code uses (sq_request_t holds them)
#define SQ_CT_OPTIONS mpr_str_t
#define SQ_CT_OSTR mpr_str_t
#define SQ_CT_OWHERE sq_where_t
#define SQ_CT_WHERE sq_where_t
#define SQ_CT_KEYLIST sq_keylist_t
#define SQ_CT_OU32 uint32_t
#define SQ_CT_OUTPUTS struct sq_output_ref_s *   //  events' (sq_event_t)
#define SQ_CT_EXIT int32_t
#define SQ_CT_OINT sq_opt_int_t
#define SQ_CT_OU64 uint64_t
#define SQ_CT_ESTR mpr_str_t
#define SQ_CT_TSTATE uint32_t
#define SQ_CT_RESOURCES sq_resources_t     //  HELLO's (declared with it)
#define SQ_CT_PREVIOUS sq_previous_t
#define SQ_CT_RAW sq_raw_t
#define SQ_CT_INPUTS struct sq_input_ref_s *     //  ASSIGN's (sq_assign_t)
#define SQ_CT_OUTDECLS struct sq_out_decl_s *
#define SQ_CT_I32 int32_t
#define SQ_CT_FRAME int32_t             //  SUBMIT's (sq_object_spec_t, sq_task_spec_t,
#define SQ_CT_IDLIST sq_idlist_t        //  sq_submit_t, declared with SUBMIT)
#define SQ_CT_RESLIST sq_reslist_t
#define SQ_CT_ARRAY uint8_t
#define SQ_CT_TOPTIONS uint32_t
#define SQ_CT_OBJECTS struct sq_object_spec_s *
#define SQ_CT_TASKS struct sq_task_spec_s *
#define SQ_CT_BODY sq_raw_t             //  REPLY's (sq_reply_t)
#define SQ_BEGIN(NAME, number, type_t, check) typedef struct sqp_##NAME type_t; struct sqp_##NAME {
#define SQ_FIELD(NAME, KIND, member, name, min, max, why, optional) SQ_CT_##KIND member;
#define SQ_END(NAME) };
#define SQ_REQUEST(NAME, number) struct sqp_req_##NAME {
#define SQ_RECORD(NAME, type_t, check) SQ_BEGIN (NAME, 0, type_t, check)
#define SQ_RECORD_IN(NAME, type_t, check) struct sqp_in_##NAME {
#define SQ_BEGIN_IN(NAME, number, type_t, check) struct sqp_in_##NAME {
#define SQ_EVENT(NAME, number) struct sqp_ev_##NAME {
#define SQ_CODEC(NAME, fn) \
    int sq_##fn##_decode (struct sqp_##NAME *self, const void *data, size_t size, \
                          sq_errbuf_t *err); \
    void sq_##fn##_encode (sq_wbuf_t *w, const struct sqp_##NAME *msg);
#define SQ_DECODER(NAME, fn) \
    int sq_##fn##_decode (struct sqp_##NAME *self, const void *data, size_t size, \
                          sq_errbuf_t *err);
#include "proto_messages.def"

//  Records (SQ_RECORD rows): an array of fields with no type, an element
//  of a batch or a reply's body. Their numbers, SQ_REC_STOP_TASK ...
#define SQ_RECORD(NAME, type_t, check) SQ_REC_##NAME,
#define SQ_RECORD_IN(NAME, type_t, check) SQ_REC_##NAME,
typedef enum {
#include "proto_messages.def"
    SQ_REC_COUNT_
} sq_record_t;

//  The record's description (type 0; fields as a message's), NULL if none;
//  all of them.
const sq_msg_desc_t *sq_record_desc (uint32_t record);
const sq_msg_desc_t *sq_record_descs (size_t *count);
//  Reads one record at r into msg (its struct, zeroed first), naming it
//  `what` in errors; 0 or -1 (r failed).
int sq_record_read (mpr_t *r, uint32_t record, void *msg, const char *what);
void sq_record_pack (msgpack_packer *pk, uint32_t record, const void *msg);
//  A reply body that is one record and nothing more; errors say `what`.
int sq_record_decode (uint32_t record, void *msg, const void *data, size_t size,
                      const char *what, sq_errbuf_t *err);
//  Batched messages (SQ_BATCH rows) [type, [elements]]: begin, then next
//  for each element (1: one read into elem, 0: the validated end, -1).
int sq_batch_begin (sq_iter_t *self, uint32_t type, const void *data, size_t size,
                    sq_errbuf_t *err);
int sq_batch_next (sq_iter_t *self, uint32_t type, void *elem);
struct sq_event_s;
//  UPDATE's events (SQ_EVENT rows): the description of an event type, NULL
//  if none; read one into ev at self's reader (outputs in self's scratch);
//  pack one, with its first n fields (-1: all but empty optional ones).
const sq_msg_desc_t *sq_event_desc (uint32_t type);
int sq_event_read (sq_iter_t *self, struct sq_event_s *ev);
void sq_event_pack (msgpack_packer *pk, const struct sq_event_s *ev, int n);

//  --------------------------------------------------------------------------
//  HELLO [1, req, version, role, name, <governor fields>]
//  governor fields: incarnation, data_endpoint, serve_endpoint, resources

//  The fields after role are the records HELLO_CLIENT and HELLO_GOVERNOR
//  of the table; the unions name the table's members (resource_list,
//  previous) and the names callers use, which alias them.
typedef struct {
    uint32_t req;
    uint32_t version;
    bool governor;
    mpr_str_t name;
    uint64_t incarnation;
    mpr_str_t data_endpoint;
    mpr_str_t serve_endpoint;
    union {
        sq_resources_t resource_list;
        struct {
            uint32_t n_resources;
            sq_resource_t resources [SQ_MAX_RESOURCES];
        };
    };
    //  A governor that kept its objects and tasks through a lost broker
    //  names the cluster and the id it had there (reattach); else the
    //  cluster is empty.
    union {
        sq_previous_t previous;
        struct {
            mpr_str_t previous_cluster;
            uint32_t previous_id;
        };
    };
} sq_hello_t;

//  The version is checked before anything else so that a peer speaking
//  another version gets SQ_E_VERSION (returned in *code) with a message.
int sq_hello_decode (sq_hello_t *self, const void *data, size_t size,
                     int *code, sq_errbuf_t *err);
void sq_hello_encode_client (sq_wbuf_t *w, uint32_t req, const char *name);
//  previous_cluster NULL: a fresh governor; else it asks to reattach as
//  previous_id of that cluster. At most SQ_MAX_RESOURCES resources are
//  sent (the broker refuses more).
void sq_hello_encode_governor (sq_wbuf_t *w, uint32_t req, const char *name,
                               uint64_t incarnation, const char *data_endpoint,
                               const char *serve_endpoint,
                               const sq_resource_t *resources, uint32_t n,
                               const char *previous_cluster, uint32_t previous_id);

//  The body of the broker's OK reply to HELLO (the "welcome"):
//    client   [client_id, inline_max, cluster, epoch, tenant|nil]
//    governor [governor_id, heartbeat_ms, inline_max, cluster, epoch,
//              reattached, secret|nil, broker_ms]
//  cluster: the broker's cluster id (32 hex digits), the same across
//  restarts on one journal; epoch: counts those restarts. reattached: the
//  governor keeps what it holds and sends its inventory. secret: 32 bytes
//  that check the broker's capabilities (capability.h), nil without keys.
//  broker_ms: the broker's wall clock, which capabilities expire by.
#define SQ_CLUSTER_ID_LEN 32
#define SQ_SECRET_LEN 32
typedef struct {
    uint32_t id;
    uint32_t heartbeat_ms;      //  governor
    uint64_t inline_max;
    mpr_str_t cluster;
    uint64_t epoch;
    mpr_str_t tenant;           //  client; empty if nil
    bool reattached;            //  governor
    mpr_str_t secret;           //  governor; empty if nil
    uint64_t broker_ms;         //  governor
} sq_welcome_t;

void sq_welcome_encode_client (sq_wbuf_t *w, uint32_t req, uint32_t id, uint64_t inline_max,
                               const char *cluster, uint64_t epoch, const char *tenant);
void sq_welcome_encode_governor (sq_wbuf_t *w, uint32_t req, uint32_t id,
                                 uint32_t heartbeat_ms, uint64_t inline_max,
                                 const char *cluster, uint64_t epoch, bool reattached,
                                 const uint8_t *secret, uint64_t broker_ms);
//  Decode the body of an OK reply (sq_reply_t body) to a client's or a
//  governor's HELLO.
int sq_welcome_decode (sq_welcome_t *self, bool governor, const uint8_t *body, size_t size,
                       sq_errbuf_t *err);

//  --------------------------------------------------------------------------
//  REPLY [2, req, code, body]
//  code 0: body depends on the request. Otherwise body = [message, id, root]
//  (id and root are nil or uint).

//  The message REPLY of the table (SQ_BEGIN_IN); the unions name the
//  table's members (body_raw, fault) and the names callers use.
typedef struct {
    uint32_t req;
    uint32_t code;
    union {
        sq_raw_t body_raw;
        struct {
            const uint8_t *body;        //  raw msgpack of the body (code 0)
            size_t body_size;
        };
    };
    union {
        sq_fault_t fault;
        struct {
            mpr_str_t message;          //  code != 0
            uint32_t err_id;
            uint32_t err_root;
        };
    };
} sq_reply_t;

int sq_reply_decode (sq_reply_t *self, const void *data, size_t size, sq_errbuf_t *err);
//  Starts an OK reply; the caller packs exactly one body value next.
void sq_reply_begin (sq_wbuf_t *w, uint32_t req);
void sq_reply_encode_error (sq_wbuf_t *w, uint32_t req, int code,
                            const char *message, uint32_t id, uint32_t root);

//  --------------------------------------------------------------------------
//  Simple client requests
//    SESSION_OPEN [10, req]                       body: session id
//    SESSION_CLOSE [11, req, session]              body: nil
//    KEEP / UNKEEP / CANCEL [t, req, session, [ids]]  body: nil
//    WAIT [15, req, session, mode, [ids], timeout_ms]
//    FETCH [16, req, session, id, timeout_ms]
//    INFO [18, req] / PING [19, req]

//    RETIRE [22, req, governor]                   body: nil (the drain started)
//    RESTART [88, req] or [88, req, timeout_ms]    body: nil once every governor
//           said REFRESHED; SQ_E_TIMEOUT naming those that did not
#define SQ_RESTART_DEFAULT_MS 30000
//    RUN [86, req, timeout_ms, fn: bin]  (fn: at most SQ_RUN_FN_MAX bytes)
//           body: [run, {governor id: [answers, size, where]}] once every governor
//           sent RAN; SQ_E_TIMEOUT naming those that did not. The answers
//           stay on each governor: RUNREAD there (where's capability, right
//           SQ_CAP_RUN over the run's id) reads their `size` bytes.
#define SQ_RUN_FN_MAX (1u << 20)
//  What a governor keeps of answers to runs, all its runs together (those
//  still answering and those kept for their client to read): an answer that
//  would pass it is replaced by an error saying so.
#define SQ_RUN_RESULTS_MAX (64u << 20)
#define SQ_RUN_EXECS_MAX 256
//  RUN's body: sq_reply_begin_ran, then one sq_pack_ran_where per governor.
void sq_reply_begin_ran (sq_wbuf_t *w, uint32_t req, uint64_t run, uint32_t n);
void sq_pack_ran_where (msgpack_packer *pk, uint32_t gov, uint32_t answers, uint64_t size,
                        const char *endpoint, const uint8_t *key, const uint8_t *capability,
                        size_t capability_size);
//  Calls fn for each governor in RUN's body; fn returns 0, or -1 to fail
//  ("out of memory").
typedef int (sq_ran_where_fn) (void *arg, uint64_t run, uint32_t gov, uint32_t answers,
                               uint64_t size, const sq_where_t *where);
int sq_ran_reply_each (const void *body, size_t size, uint64_t *run, sq_ran_where_fn *fn,
                       void *arg, sq_errbuf_t *err);
//  Calls fn for each executor's answer in what RUNREAD read (size bytes of
//  a packed array of RAN_RESULT records); fn returns 0, or -1 to fail.
typedef int (sq_ran_item_fn) (void *arg, uint64_t pid, bool ok, mpr_str_t bytes);
int sq_ran_results_each (const void *data, size_t size, sq_ran_item_fn *fn, void *arg,
                         sq_errbuf_t *err);
//    RESUME [20, req, session, token]             body: [next_id]
//    UPLOAD [21, req, session, id, size, governor] body: where (below);
//           governor 0: the broker picks one
//    DELETE [23, req, session, [ids]]             body: nil
//    PLACE [24, req, session, id, [governors], copies, flags, timeout_ms]
//           body: [governor ids holding it] once the copies asked for are there
//    LOG [25, req, session, task, attempt: i64 (-1: the latest), stream]
//           body: sq_pack_logwhere (below)
#define SQ_LOG_STDOUT 1
#define SQ_LOG_STDERR 2
typedef struct {
    uint32_t type;
    uint32_t req;
    uint32_t session;
    uint32_t mode;              //  WAIT
    uint32_t id;                //  FETCH, UPLOAD, LOG (the task)
    int64_t attempt;            //  LOG: -1 the latest
    uint32_t stream;            //  LOG: SQ_LOG_STDOUT or SQ_LOG_STDERR
    int64_t timeout_ms;         //  WAIT, FETCH: < 0 for ever
    uint64_t size;              //  UPLOAD
    uint32_t governor;          //  UPLOAD: where the client wants it, 0 any; RETIRE
    uint32_t copies;            //  PLACE: at least this many governors hold it
    uint32_t flags;             //  PLACE: SQ_PLACE_MOVE
    mpr_str_t token;            //  RESUME (bin, points into the frame)
    mpr_str_t fn;               //  RUN: the pickled call (bin, points into the frame)
    //  Jobs (docs/protocol.md, "Jobs"). SESSION_OPEN's options: a name
    //  (SESSIONS, ATTACH: the one asked for), detached; SESSIONS and TASKS'
    //  state filter (bits, 0 any), TASKS' page.
    bool has_name;
    mpr_str_t name;             //  points into the frame
    bool detached;
    uint32_t states;
    uint64_t offset;
    uint32_t limit;
    uint32_t n_ids;             //  KEEP, UNKEEP, CANCEL, WAIT, DELETE; PLACE: governors
    uint32_t *ids;              //  owned: free with sq_request_release
} sq_request_t;

//    SESSION_OPEN [10, req, {name, detached, after}]  (options, optional;
//                 after: job ids in ids / n_ids, at most SQ_AFTER_MAX)
//    SESSIONS [26, req, states, session, name|nil]  body: [job...]
//    ATTACH [27, req, session, name|nil]           body: [max_id, session, token]
//    SESSION_WAIT [28, req, session, timeout_ms]   body: job
//    TASKS [29, req, session, states, offset, limit] body: [total, [record...]]
//    RESUBMIT [80, req, session, [ids]]            body: [n]
//    FORGET [81, req, session] / JOB_CANCEL [82, req, session]  body: nil
//    ADOPT [85, req, session, [ids]]               body: [parent session, new ids...]
//           (as PLACE's: sq_pack_holders / sq_holders_decode)
#define SQ_ADOPT_MAX 1024           //  ids one ADOPT names
//  Ids from here up are the broker's to give in a session (array elements,
//  ADOPT's objects); a client allocates its own below.
#define SQ_BROKER_IDS 0xC0000000u
#define SQ_JOB_NAME_MAX 128
#define SQ_AFTER_MAX 64             //  jobs one job waits for (SESSION_OPEN after)
#define SQ_JOBS_MAX 100000          //  jobs one SESSIONS reply lists
#define SQ_TASKS_PAGE_MAX 10000     //  records one TASKS reply holds
int sq_request_decode (sq_request_t *self, const void *data, size_t size, sq_errbuf_t *err);
void sq_request_release (sq_request_t *self);
void sq_request_encode (sq_wbuf_t *w, const sq_request_t *request);

//  INFO reply body: a map (docs/protocol.md lists every key). The broker
//  fills these from its state; sq_pack_info is the one place the map is
//  made. Strings are borrowed for the call.
typedef struct {
    uint32_t id;
    bool draining;
    const char *name;
    uint32_t cpus;
    const sq_resource_t *resources;     //  besides cpus
    uint32_t n_resources;
    uint64_t assigned, running, queued, piped, memory, spilled, objects, tasks_done, tasks_run;
    int64_t joined;                     //  Unix seconds
    const char *data_endpoint;
    const char *serve_endpoint;
    uint64_t shared;                    //  of memory, LOAD's shared
} sq_info_gov_t;

typedef struct {
    uint32_t session, task;
    const char *needs;
    uint64_t left_ms;
} sq_info_wait_t;

typedef struct {
    uint32_t session, object, governor;
    uint64_t bytes;
} sq_info_stream_t;

typedef struct {
    const char *name;                   //  "" for the keyless tenant
    uint64_t weight;
    uint64_t cpus, stored, constants, sessions;                 //  in use
    uint64_t max_cpus, max_stored, max_constants, max_sessions; //  0: no limit
} sq_info_tenant_t;

typedef struct {
    const char *cluster;
    uint64_t epoch, recovering, secure, insecure, journal_bytes, journal_errors;
    const char *version;
    const sq_info_gov_t *govs;
    size_t n_govs;
    const char *const *state_names;     //  task states, with their counts
    const uint64_t *state_counts;
    size_t n_states;
    uint64_t ready_queue, blocked;
    const sq_info_wait_t *waits;
    size_t n_waits;
    const sq_info_stream_t *streams;    //  being written now
    size_t n_streams;
    uint64_t sessions, clients, objects, watches, recomputed, uploads;
    uint64_t copy_rate;         //  bytes/s placement assumes a copy moves
    uint64_t streams_local;     //  streams that went over the same-host path
    uint64_t uploads_local;     //  constants handed over on their governor's host (PUTLOCAL)
    uint64_t copies_local;      //  copies handed over between governors of one host (LCOPY)
    //  The asker's tenant: its usage and limits (0: none); NULL packs nil.
    const sq_info_tenant_t *tenant;
} sq_info_t;

void sq_pack_info (msgpack_packer *pk, const sq_info_t *info);

//  The dashboard's sessions (its JSON API, docs/dashboard.md): an array of
//  maps, one per open session.
typedef struct {
    uint32_t id, client;
    const char *client_name;
    uint64_t tasks, unfinished, finished, failed;
} sq_info_session_t;

void sq_pack_sessions (msgpack_packer *pk, const sq_info_session_t *sessions, size_t n);

//  SESSION_OPEN reply body: [session, token]; the token (SQ_TOKEN_LEN
//  random bytes) is what RESUME must present.
#define SQ_TOKEN_LEN 16
void sq_pack_session_opened (msgpack_packer *pk, uint32_t session, const uint8_t *token);
int sq_session_opened_decode (const uint8_t *body, size_t size, uint32_t *session,
                              uint8_t *token, sq_errbuf_t *err);

//  sq_where_t: above, with the table's structs (a record's field is one)

void sq_pack_where (msgpack_packer *pk, uint32_t governor, const char *endpoint,
                    const uint8_t *key, const uint8_t *capability, size_t capability_size);
int sq_where_read (mpr_t *r, sq_where_t *where);
int sq_where_decode (sq_where_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err);
//  FETCH reply body [size, content_type, where|nil]; where NULL packs nil
//  (the bytes are payload frame 1).
typedef struct {
    uint64_t size;
    mpr_str_t content_type;
    bool located;               //  where is set; else the data is inline
    sq_where_t where;
} sq_fetched_t;
int sq_fetched_decode (sq_fetched_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err);

//  KEYS [45, governors, clients] (broker -> governor): the public keys (32
//  bytes each) that may connect to the governor's data socket (governors)
//  and to its serve socket (clients). Replaces the previous lists. Its
//  struct sq_keyset_t {governors, clients} is the table's; each an
//  sq_keylist_t (above), its array owned (sq_keyset_release).
#define SQ_MAX_KEYS 65536
int sq_keyset_decode (sq_keyset_t *self, const void *data, size_t size, sq_errbuf_t *err);
void sq_keyset_release (sq_keyset_t *self);
void sq_keyset_encode (sq_wbuf_t *w, const uint8_t *const *governors, uint32_t n_governors,
                     const uint8_t *const *clients, uint32_t n_clients);

//  DROP's element: an object's key, bare (SQ_RECORD_BARE)
typedef struct {
    uint64_t key;
} sq_drop_key_t;

//  WAIT reply body: [n_finished, n_failed, [[id, state, root|nil, message|nil]...]]
//  For SQ_WAIT_SESSION the list holds failures only (at most 64).
typedef struct {
    uint32_t id;
    uint32_t state;             //  sq_done_state_t
    uint32_t root;              //  failed: the task that failed first
    mpr_str_t message;
} sq_done_t;

//  Encoding: the head, then `listed` entries. message NULL packs root and
//  message as nil (an id that finished).
void sq_pack_wait_head (msgpack_packer *pk, uint32_t finished, uint32_t failed, uint32_t listed);
void sq_pack_done (msgpack_packer *pk, uint32_t id, uint32_t state, uint32_t root,
                   const char *message);
//  Decoding: begin reads the counts (max_listed: more entries are an
//  error), next gives each entry (1), then 0 at the validated end, -1 on
//  error (err says why).
int sq_wait_reply_begin (sq_iter_t *self, const uint8_t *body, size_t size, uint32_t max_listed,
                         uint64_t *finished, uint64_t *failed, sq_errbuf_t *err);
int sq_wait_reply_next (sq_iter_t *self, sq_done_t *done);

//  FETCH reply body [size, content_type, where|nil]: inline (the bytes are
//  payload frame 1) or located (where, as sq_pack_where).
void sq_pack_fetched_inline (msgpack_packer *pk, uint64_t size, const char *content_type);
//  Located: the head, then one sq_pack_where.
void sq_pack_fetched_head (msgpack_packer *pk, uint64_t size, const char *content_type);

//  A job as SESSIONS and SESSION_WAIT describe it (a map, docs/protocol.md
//  "Jobs"). state: 1 running, 2 finished, 4 failed, 8 cancelled (the bits
//  of a filter); tasks: waiting, running, finished, failed, cancelled.
typedef struct {
    uint32_t id;
    mpr_str_t name;             //  empty: nil
    uint32_t state;
    bool detached;
    bool attached;
    uint64_t tasks [5];
    uint64_t created_ms;
    uint64_t ended_ms;          //  0: nil (running)
} sq_job_info_t;
#define SQ_JOBSTATE_RUNNING 1
#define SQ_JOBSTATE_FINISHED 2
#define SQ_JOBSTATE_FAILED 4
#define SQ_JOBSTATE_CANCELLED 8
//  The names of job states (one bit) and task states (bits 1 waiting, 2
//  running, 4 finished, 8 failed, 16 cancelled); NULL for others.
const char *sq_job_state_name (uint32_t bit);
const char *sq_task_state_bit_name (uint32_t bit);
void sq_pack_job (msgpack_packer *pk, const sq_job_info_t *job);
int sq_job_read (mpr_t *r, sq_job_info_t *job);
int sq_job_decode (sq_job_info_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err);
//  SESSIONS reply: an array header of n, then n sq_pack_job. Decoding:
//  begin gives the count (at most SQ_JOBS_MAX), next each job.
int sq_jobs_reply_begin (sq_iter_t *self, const uint8_t *body, size_t size,
                         uint32_t *n, sq_errbuf_t *err);
int sq_jobs_reply_next (sq_iter_t *self, sq_job_info_t *job);
//  ATTACH reply body [max_id, session, token].
void sq_pack_attached (msgpack_packer *pk, uint32_t max_id, uint32_t session,
                       const uint8_t *token);
int sq_attached_decode (const uint8_t *body, size_t size, uint32_t *max_id,
                        uint32_t *session, uint8_t *token, sq_errbuf_t *err);
//  A TASKS record [id, index|nil, state, exit_code|nil, governor|nil,
//  attempts, started|nil, ended|nil, error|nil, name(, task)] (the table's
//  TASK_INFO); task, an element's own task id, only when it has one (else 0).
typedef struct {
    uint32_t id;
    sq_opt_int_t index;         //  an element's; nil for a plain task
    uint32_t state;             //  one task state bit
    sq_opt_int_t exit_code;     //  an i32, or nil
    uint32_t governor;          //  0: nil
    uint32_t attempts;
    uint64_t started_ms;        //  0: nil
    uint64_t ended_ms;          //  0: nil
    mpr_str_t error;            //  empty: nil
    mpr_str_t name;
    uint32_t task;              //  an element's task id (LOG names it); 0: none
} sq_task_info_t;
//  TASKS reply: the head [total, [ then n records.
void sq_pack_tasks_head (msgpack_packer *pk, uint64_t total, uint32_t n);
void sq_pack_task_info (msgpack_packer *pk, const sq_task_info_t *task);
int sq_tasks_reply_begin (sq_iter_t *self, const uint8_t *body, size_t size,
                          uint64_t *total, uint32_t *n, sq_errbuf_t *err);
int sq_tasks_reply_next (sq_iter_t *self, sq_task_info_t *task);
//  RESUBMIT reply body [n]: the record COUNT (sq_count_t), with
//  sq_record_pack / sq_record_decode.
//  LOG reply body [attempt: u32, state: str, where|nil]: state "waiting"
//  (not started: where nil), "running" or "ended"; where as sq_pack_where
//  (the capability's right SQ_CAP_LOG, for the task's key).
void sq_pack_logwhere_head (msgpack_packer *pk, uint32_t attempt, const char *state);
typedef struct {
    uint32_t attempt;
    mpr_str_t state;
    bool located;
    sq_where_t where;
} sq_logwhere_t;
int sq_logwhere_decode (sq_logwhere_t *self, const uint8_t *body, size_t size, sq_errbuf_t *err);

//  RESUME reply body [max_id]: the record RESUMED (sq_resumed_t), with
//  sq_record_pack / sq_record_decode.
//  PLACE's reply: the governors holding the object, at most SQ_PLACE_MAX
//  of them. The decoder fills ids (room for `max`) and *n.
void sq_pack_holders (msgpack_packer *pk, const uint32_t *ids, uint32_t n);
int sq_holders_decode (const uint8_t *body, size_t size, uint32_t *ids, uint32_t max,
                       uint32_t *n, sq_errbuf_t *err);

//  Replies whose body is nil (most requests): encoding and checking.
void sq_reply_encode_nil (sq_wbuf_t *w, uint32_t req);
int sq_nil_decode (const uint8_t *body, size_t size, sq_errbuf_t *err);

//  A task's config is embedded raw in SUBMIT and ASSIGN: it must be one
//  msgpack value of at most SQ_MAX_CONFIG bytes. 0 if it is.
int sq_opaque_check (const void *data, size_t size);

//  --------------------------------------------------------------------------
//  SUBMIT [12, req, session, [objects], [tasks]] + constant payload frames
//    object: [id, flags, content_type, frame, name]   frame: payload index or -1
//    task:   [id, kind, [inputs], [outputs], config, resources, priority,
//             max_retries, timeout_ms, name (, options)]   resources: map or nil
//             options: {"governors": [u32...], "loose": bool}, packed only
//             when the task names governors

//  object.frame of a constant uploaded to a governor: on the wire the frame
//  field is then [governor, size] instead of an index (docs/protocol.md).
#define SQ_FRAME_UPLOADED (-2)

//  The record SUBMIT_OBJECT of the table
typedef struct sq_object_spec_s {
    uint32_t id;
    uint32_t flags;
    mpr_str_t content_type;
    int32_t frame;              //  -1: produced by a task; SQ_FRAME_UPLOADED
    mpr_str_t name;
    uint32_t governor;          //  SQ_FRAME_UPLOADED: where it is
    uint64_t size;              //  SQ_FRAME_UPLOADED: its size
    bool uploaded;              //  frame is [governor, size] (SQ_FRAME_UPLOADED)
} sq_object_spec_t;

//  The record SUBMIT_TASK of the table; the unions name the table's
//  members (input_list ...) and the names callers use, which alias them.
typedef struct sq_task_spec_s {
    uint32_t id;
    mpr_str_t kind;
    union {
        sq_idlist_t input_list;
        struct {
            uint32_t n_inputs;
            uint32_t *inputs;   //  into sq_submit_t's blocks
        };
    };
    union {
        sq_idlist_t output_list;
        struct {
            uint32_t n_outputs;
            uint32_t *outputs;
        };
    };
    union {
        sq_raw_t config_raw;
        struct {
            const uint8_t *config;      //  raw msgpack value (nil if none)
            size_t config_size;
        };
    };
    union {
        sq_reslist_t resource_list;
        struct {
            uint32_t n_resources;
            sq_resource_t *resources;   //  into sq_submit_t's blocks; none = cpus 1
        };
    };
    int32_t priority;
    uint32_t max_retries;
    uint32_t timeout_ms;
    mpr_str_t name;
    //  An array task (docs/protocol.md, "Array tasks"): SQ_ARRAY_RANGE with
    //  first, last, step, or SQ_ARRAY_ITEMS with the raw msgpack array of
    //  its strings (into the message); array_size elements.
    uint8_t array;
    uint32_t array_first, array_last, array_step;
    uint32_t array_size;
    const uint8_t *array_items;
    size_t array_items_size;
    //  Options (element 11, may be absent; element 10 is then the array or nil): the governors it may run on
    //  (none: any), or only prefers when `loose`.
    uint32_t n_governors;
    uint32_t *governors;        //  into sq_submit_t's blocks
    bool loose;
    //  Decoding only: the blocks its lists go into (its SUBMIT's)
    struct sqp_block_s **blocks;
} sq_task_spec_t;
#define SQ_ARRAY_NONE 0
#define SQ_ARRAY_RANGE 1
#define SQ_ARRAY_ITEMS 2
#define SQ_ARRAY_MAX (1u << 24)     //  elements of one array task

//  Governors one task may name in its options.
#define SQ_MAX_TASK_GOVERNORS 64

//  The message SUBMIT of the table (SQ_BEGIN_IN: declared here)
typedef struct {
    uint32_t req;
    uint32_t session;
    uint32_t n_objects;
    sq_object_spec_t *objects;
    uint32_t n_tasks;
    sq_task_spec_t *tasks;
    //  The tasks' lists of ids and resources (blocks owned, freed by
    //  sq_submit_release)
    struct sqp_block_s *blocks;
} sq_submit_t;

int sq_submit_decode (sq_submit_t *self, const void *data, size_t size, sq_errbuf_t *err);
void sq_submit_release (sq_submit_t *self);
//  Encoding: begin, then pack an array of n objects (sq_pack_object_spec
//  each), then an array of n tasks (sq_pack_task_spec each).
void sq_pack_submit_begin (msgpack_packer *pk, uint32_t req, uint32_t session);
//  The heads of the two lists that follow the begin.
void sq_pack_submit_objects (msgpack_packer *pk, uint32_t n_objects);
void sq_pack_submit_tasks (msgpack_packer *pk, uint32_t n_tasks);
void sq_pack_object_spec (msgpack_packer *pk, uint32_t id, uint32_t flags,
                          const char *content_type, int32_t frame, const char *name);
//  A constant already uploaded to `governor` (PUT on its serve socket).
void sq_pack_object_uploaded (msgpack_packer *pk, uint32_t id, uint32_t flags,
                              const char *content_type, uint32_t governor, uint64_t size,
                              const char *name);
//  resources: n_resources pairs; config NULL packs nil.
void sq_pack_task_spec (msgpack_packer *pk, const sq_task_spec_t *task);

//  --------------------------------------------------------------------------
//  Governor <-> broker
//    UPDATE [30, [events]] + inline payload frames
//      [1 FINISHED, task, attempt, [[object, size, frame]...], duration_us]
//      [2 FAILED, task, attempt, message, duration_us, reason]
//          reason: SQ_FAIL_TASK (its own failure) or SQ_FAIL_MEMORY (killed
//          for using more memory than it asked for, or than was free)
//      [3 STARTED, task, attempt]
//      [4 LOCATED, object, size]      a copy arrived; [4, object, size,
//          duration_us] says how long it took (transfer.h), which the
//          broker learns the cluster's copy rate from
//      [5 LOST, object]               a copy could not be had or kept
//      [6 RETRACTED, task, attempt]   given back unstarted (after RETRACT)
//      [7 UPLOADED, object, size]     a client's upload (PUT) is complete here;
//          [7, object, size, true]: handed over on the governor's host (PUTLOCAL)
//    HEARTBEAT [31]   BYE [33]
//    LOAD [32, running, queued, memory_bytes, spilled_bytes, objects, tasks, piped]

typedef struct sq_output_ref_s {
    uint64_t key;
    uint64_t size;
    int32_t frame;              //  payload index, -1: not inline
} sq_output_ref_t;

#define SQ_FAIL_TASK 0
#define SQ_FAIL_MEMORY 1

typedef struct sq_event_s {
    uint32_t type;              //  sq_event_type_t
    uint32_t reason;            //  FAILED: SQ_FAIL_*
    uint64_t key;               //  task (FINISHED/FAILED/STARTED/RUNNING) or object
    uint32_t attempt;           //  a task's; HELD: the object's version
    uint64_t size;              //  LOCATED, UPLOADED, HELD; LOGTAIL: its request number
    mpr_str_t message;          //  FAILED; LOGTAIL: the bytes (bin)
    bool has_exit_code;         //  FAILED: an execute program's exit status was said
    int32_t exit_code;          //  negative: the signal that killed it
    uint64_t duration_us;
    uint32_t n_outputs;
    sq_output_ref_t *outputs;   //  scratch owned by the reader
    bool seceded;               //  SECEDED: true, or false (rejoined)
    bool local;                 //  UPLOADED: handed over on the governor's host (PUTLOCAL)
    mpr_str_t public_key;       //  TASKKEY: 32 bytes
} sq_event_t;


//  LOGTAIL [49, req, task, attempt, stream] (broker -> governor): the last
//  at most SQ_LOGTAIL_MAX bytes of a task's output (the dashboard), answered
//  with the event [12 LOGTAIL, task, attempt, req, bytes: bin].
#define SQ_LOGTAIL_MAX 4096
void sq_pack_logtail_event (msgpack_packer *pk, uint64_t task, uint32_t attempt, uint32_t req,
                            const void *data, size_t size);

int sq_update_begin (sq_iter_t *self, const void *data, size_t size, sq_errbuf_t *err);
int sq_update_next (sq_iter_t *self, sq_event_t *event);
void sq_iter_release (sq_iter_t *self);

void sq_pack_finished (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                       const sq_output_ref_t *outputs, uint32_t n,
                       uint64_t duration_us);
void sq_pack_failed (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                     const char *message, uint64_t duration_us);
void sq_pack_failed_reason (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                            const char *message, uint64_t duration_us, uint32_t reason);
//  An execute program's own failure with its exit status (negative: the
//  signal that killed it), reason SQ_FAIL_TASK.
void sq_pack_failed_exit (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                          const char *message, uint64_t duration_us, int32_t exit_code);
void sq_pack_started (msgpack_packer *pk, uint64_t task, uint32_t attempt);
void sq_pack_located (msgpack_packer *pk, uint64_t object, uint64_t size);
void sq_pack_located_in (msgpack_packer *pk, uint64_t object, uint64_t size, uint64_t duration_us);
void sq_pack_located_local (msgpack_packer *pk, uint64_t object, uint64_t size);
void sq_pack_lost (msgpack_packer *pk, uint64_t object);
void sq_pack_uploaded (msgpack_packer *pk, uint64_t object, uint64_t size);
void sq_pack_uploaded_local (msgpack_packer *pk, uint64_t object, uint64_t size);
void sq_pack_retracted (msgpack_packer *pk, uint64_t task, uint32_t attempt);
//  REFRESHED [18, refreshes]: the Python executors retired by the first
//  `refreshes` REFRESH messages have all stopped.
void sq_pack_refreshed (msgpack_packer *pk, uint64_t refreshes);
//  RAN [19, run, answers, size]: every executor answered GRUN `run`; the
//  governor keeps the answers (decoded: key, attempt = answers, size).
void sq_pack_ran (msgpack_packer *pk, uint64_t run, uint32_t answers, uint64_t size);
//  One executor's answer, as the governor keeps it for RUNREAD (bytes: its
//  pickled result, or its exception if not ok).
void sq_pack_ran_result (msgpack_packer *pk, uint64_t pid, bool ok, const void *data, size_t size);
//  SECEDED of a running task attempt (seceded true), or rejoined (false).
void sq_pack_seceded (msgpack_packer *pk, uint64_t task, uint32_t attempt, bool seceded);
//  TASKKEY: the public key (32 bytes) a running task attempt's client uses.
void sq_pack_taskkey (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                      const uint8_t *public_key);
//  Reattach inventory (after a HELLO welcomed with reattached = true):
//  HELD [8, object, version, size], RUNNING [9, task, attempt], then
//  INVENTORY [10] once everything was listed.
void sq_pack_held (msgpack_packer *pk, uint64_t object, uint32_t version, uint64_t size);
void sq_pack_running (msgpack_packer *pk, uint64_t task, uint32_t attempt);
void sq_pack_inventory_end (msgpack_packer *pk);

//  Messages that are only a type: HEARTBEAT, BYE, DRAIN [34], LEAVE [46]
void sq_bare_encode (sq_wbuf_t *w, uint32_t type);
int sq_bare_decode (const void *data, size_t size, uint32_t type, sq_errbuf_t *err);
//  REFRESH [52, tenant]: the tenant's Python executors are not given
//  another task ("" without keys); tenant points into the frame.
void sq_refresh_encode (sq_wbuf_t *w, const char *tenant);
int sq_refresh_decode (const void *data, size_t size, mpr_str_t *tenant, sq_errbuf_t *err);

//  ASSIGN [40, [tasks]] + inline payload frames
//    task: [task, attempt, kind, config, [inputs], [outputs], cpus,
//           timeout_ms, name, resources, tenant]     resources: map or nil
//    tenant: the tenant of the task's session ("" without keys): the
//           governor runs tenants' tasks apart (docs/security.md)
//    input: [object, size, frame, content_type]  frame -1: local or arriving,
//           SQ_FRAME_STREAM: a stream, read as its producer writes it
//    output: [object, content_type], or [object, content_type, consumers]
//           for a stream output: how many consumers will read it
#define SQ_FRAME_STREAM (-2)

typedef struct sq_input_ref_s {
    uint64_t key;
    uint64_t size;
    int32_t frame;
    mpr_str_t content_type;
} sq_input_ref_t;

typedef struct sq_out_decl_s {
    uint64_t key;
    mpr_str_t content_type;
    bool stream;
    uint32_t consumers;         //  of a stream: consumers that will read it
} sq_out_decl_t;

//  The record ASSIGN_TASK of the table; the unions name the table's
//  members (config_raw, resource_list) and the names callers use.
typedef struct {
    uint64_t key;
    uint32_t attempt;
    mpr_str_t kind;
    union {
        sq_raw_t config_raw;
        struct {
            const uint8_t *config;
            size_t config_size;
        };
    };
    uint32_t n_inputs;
    sq_input_ref_t *inputs;     //  scratch owned by the reader
    uint32_t n_outputs;
    sq_out_decl_t *outputs;     //  scratch owned by the reader
    uint32_t cpus;
    uint32_t timeout_ms;
    mpr_str_t name;
    //  Requests besides cpus ("memory" in bytes, "gpus", custom names): the
    //  governor runs the task only while they fit, and kills it if it uses
    //  more memory than it asked for.
    union {
        sq_resources_t resource_list;
        struct {
            uint32_t n_resources;
            sq_resource_t resources [SQ_MAX_RESOURCES];
        };
    };
    mpr_str_t tenant;           //  at most SQ_MAX_NAME bytes
} sq_assign_t;

//  ASSIGN is the table's batch of ASSIGN_TASK records
static inline int
sq_assign_begin (sq_iter_t *self, const void *data, size_t size, sq_errbuf_t *err)
{
    return sq_batch_begin (self, SQ_MSG_ASSIGN, data, size, err);
}

static inline int
sq_assign_next (sq_iter_t *self, sq_assign_t *task)
{
    return sq_batch_next (self, SQ_MSG_ASSIGN, task);
}

//  Packs one task; inputs/outputs as in the struct.
static inline void
sq_pack_assign (msgpack_packer *pk, const sq_assign_t *task)
{
    sq_record_pack (pk, SQ_REC_ASSIGN_TASK, task);
}

//  SEND [41, [[object, version, to_governor, to_endpoint]...]]
//  DROP [42, [objects]]
//  STOP [43, [[task, attempt]...]]
//  SEND elements: [object, version, to_governor, to_endpoint, to_key|nil];
//  to_key is the receiver's public key (32 bytes) when keys are on.
typedef struct {
    uint64_t key;
    uint32_t version;           //  producer attempt of the copy to send
    uint32_t to;
    mpr_str_t endpoint;
    mpr_str_t to_key;           //  empty if nil
} sq_send_t;

//  Read with sq_batch_begin / sq_batch_next (SQ_MSG_SEND, sq_send_t).
void sq_pack_send (msgpack_packer *pk, uint64_t key, uint32_t version,
                   uint32_t to, const char *endpoint, const uint8_t *to_key);
//  STREAM [47, [[object, version, consumer, to_governor, to_endpoint,
//  to_key|nil]...]]: the consumer task `consumer` on that governor reads
//  the stream `object` of the producer attempt `version` made here.
//  UNSTREAM [48, [[object, version, consumer]...]]: that consumer will not
//  read it (it ended, or will never be placed).
typedef struct {
    uint64_t key;
    uint32_t version;
    uint64_t consumer;
    uint32_t to;                //  UNSTREAM: 0
    mpr_str_t endpoint;         //  UNSTREAM: empty
    mpr_str_t to_key;           //  empty if nil
} sq_stream_order_t;

//  Read with sq_batch_begin / sq_batch_next (SQ_MSG_STREAM or
//  SQ_MSG_UNSTREAM, sq_stream_order_t).
void sq_pack_stream (msgpack_packer *pk, uint64_t key, uint32_t version, uint64_t consumer,
                     uint32_t to, const char *endpoint, const uint8_t *to_key);
void sq_pack_unstream (msgpack_packer *pk, uint64_t key, uint32_t version, uint64_t consumer);
//  UPDATE's STREAMED event [11, object, bytes].
void sq_pack_streamed (msgpack_packer *pk, uint64_t object, uint64_t bytes);
//  UPDATE's STREAMLOCAL event [21, object].
void sq_pack_streamlocal (msgpack_packer *pk, uint64_t object);

//  DROP elements are object keys; STOP and RETRACT elements [task, attempt]
//  (read RETRACT with sq_stop_next). RETRACT [44, [[task, attempt]...]]:
//  the governor gives back each task it has not started (a RETRACTED
//  event) and ignores the others, which run and finish as usual.
//  Begun with sq_batch_begin. Elements of those batches (after
//  sq_batch_header).
void sq_pack_drop (msgpack_packer *pk, uint64_t object);
void sq_pack_stop (msgpack_packer *pk, uint64_t task, uint32_t attempt);
int sq_drop_next (sq_iter_t *self, uint64_t *key);
int sq_stop_next (sq_iter_t *self, uint64_t *key, uint32_t *attempt);

//  Frame 0 of a batched message: [type, [elements]] where the elements were
//  packed into `elements` (count of them given).
void sq_batch_header (sq_wbuf_t *w, uint32_t type, uint32_t count);

//  --------------------------------------------------------------------------
//  Data channel: OBJECT [60, object, version, size, content_type, from] + payload
//  Serve socket: GFETCH [70, req, object] -> REPLY body [size, content_type]
//  + payload frame


//  GFETCH [70, req, object, capability|nil]; its decoder is the table's.
void sq_gfetch_encode (sq_wbuf_t *w, uint32_t req, uint64_t key,
                       const uint8_t *capability, size_t capability_size);

//  Chunked copies on the data channel (docs/protocol.md section 10).
//    CHUNK [61, transfer, object, version, offset, size, content_type, from,
//           reply_to] + one payload frame holding bytes [offset, offset+len)
//    CREDIT [62, transfer, object, credits]   credits 0 = cancel the copy
//  `transfer` is chosen by the sender, unique among its copies; the receiver
//  names a copy by (from, transfer) and sends CREDIT to reply_to, the
//  sender's data endpoint.
#define SQ_CHUNK_MAX (64u << 20)    //  largest chunk or GREAD range accepted
#define SQ_CAP_MAX 256              //  largest capability accepted (capability.h)



//  Streams on the data channel (docs/protocol.md section 10, "Streams").
//    SCHUNK [63, object, version, consumer, offset, end, from, reply_to]
//           + one payload frame holding the stream's bytes [offset, offset+len)
//    SCREDIT [64, object, version, consumer, credits]   credits 0: the
//           consumer reads no more
//    SCHUNK's optional `token`: the writer's pipe itself went to the
//    reader's governor (same host, the stream directory), which answers
//    SLOCAL [65, object, version, consumer, state, bytes]:
#define SQ_SLOCAL_REFUSED 0     //  no such pipe here: send chunks after all
#define SQ_SLOCAL_PASSED 1      //  taken; bytes passed on so far (progress)
#define SQ_SLOCAL_END 2         //  the pipe reached its end after bytes


//  The OK reply body of GREAD and GFETCH: [size, content_type] (the bytes
//  are its payload frame): the record SERVED (sq_served_t), with
//  sq_record_pack / sq_record_decode.

//  Serve socket: GREAD [71, req, object, offset, length, capability|nil]
//  -> REPLY body [size, content_type] + one payload frame holding bytes
//  [offset, min (offset + length, size)). length at most SQ_CHUNK_MAX.

//  Serve socket: PUT [72, req, object, offset, size, content_type,
//  capability|nil] + one payload frame with bytes [offset, offset + len) of
//  a constant of `size` bytes the client uploads (in order, from offset 0)
//  -> REPLY body nil.

//  Serve socket: LOGREAD [73, req, task: key, attempt, stream, offset,
//  length, capability|nil] -> REPLY body [next: uint, total: uint, done:
//  bool] + one payload frame: the task's output from `offset` (a marker
//  line where bytes were dropped over the log limit); read on from `next`.
//  length at most SQ_LOGREAD_MAX.
#define SQ_LOGREAD_MAX (4u << 20)
void sq_pack_logpart (msgpack_packer *pk, uint64_t next, uint64_t total, bool done);
int sq_logpart_decode (const uint8_t *body, size_t size, uint64_t *next, uint64_t *total,
                       bool *done, sq_errbuf_t *err);

//  Resource names: "cpus" is the one every governor and task has.
#define SQ_RES_CPUS "cpus"
//  "gpus" may be fractional (0.5: half a device, shared): every process
//  counts them in thousandths of a device (sq_resource_t.amount 500), the
//  wire in devices (a float when fractional; above 1, whole devices).
#define SQ_RES_GPUS "gpus"
#define SQ_GPU_MILLI 1000
//  gpus (as the user writes them) into thousandths: -1 unless finite, at
//  least 0.001, a whole number of thousandths, and whole above 1.
int64_t sq_gpus_milli (double gpus);
//  "name=amount" as the user wrote it ("gpus=0.5", "memory=1024"), cut to size.
void sq_resource_format (const sq_resource_t *res, char *out, size_t size);

#endif
