/*  proto_internal: the helpers proto.c shares with proto_client.c,
    proto_governor.c and proto_data.c (the encoders and decoders of each
    plane). Not for use outside common/proto*.c. */
#ifndef SQ_PROTO_INTERNAL_H
#define SQ_PROTO_INTERNAL_H

#include "proto.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Records a decode error with the field it happened in; returns -1.
int sqp_error (mpr_t *r, sq_errbuf_t *err, const char *what);
int sqp_semantic (sq_errbuf_t *err, const char *text);
//  The end of what r reads: 0, or -1 with the error recorded if more follows
int sqp_end (mpr_t *r, sq_errbuf_t *err, const char *what);
//  Opens frame 0: an array of exactly `fields` whose first element is `type`.
int sqp_begin (mpr_t *r, const void *data, size_t size, uint32_t type, uint32_t fields);
int sqp_resources (mpr_t *r, sq_resource_t *out, uint32_t *n_out, uint32_t max);
void sqp_pack_resources (msgpack_packer *pk, const sq_resource_t *res, uint32_t n);
int sqp_ids (mpr_t *r, uint32_t **ids, uint32_t *n_ids);
int sqp_u32s (mpr_t *r, uint32_t *ids, uint32_t n);       //  n u32s into ids
void sqp_pack_ids (msgpack_packer *pk, const uint32_t *ids, uint32_t n);
//  Batched messages [type, [elements]]: begin, then more (1: an element
//  follows, 0: the validated end, -1: error) before reading each one.
int sqp_iter_begin (sq_iter_t *self, const void *data, size_t size, uint32_t type,
                    sq_errbuf_t *err, const char *what);
int sqp_iter_more (sq_iter_t *self, const char *what);
void *sqp_scratch (sq_iter_t *self, size_t bytes);
//  Replies' lists [head..., [elements]] (proto.c, sqp_list_begin)
int sqp_list_begin (sq_iter_t *self, const uint8_t *body, size_t size, const char *what,
                    const char *const *heads, uint64_t *values, uint32_t n_heads,
                    const char *list, uint32_t max, const char *too_many, uint32_t *count,
                    sq_errbuf_t *err);
int sqp_list_next (sq_iter_t *self, uint32_t record, void *elem, const char *entry,
                   const char *what);
void sqp_pack_list_head (msgpack_packer *pk, const uint64_t *heads, uint32_t n_heads,
                         uint32_t listed);
int sqp_frame_index (mpr_t *r, int32_t *frame);
//  SESSION_OPEN's and ATTACH's bodies (OPENED, ATTACHED): the session,
//  its token and (ATTACHED's) max_id
int sqp_session_body_decode (uint32_t record, const char *what, const uint8_t *body,
                             size_t size, uint32_t *max_id, uint32_t *session,
                             uint8_t *token, sq_errbuf_t *err);

//  Checks between fields that the table's rows name (proto_data.c,
//  proto_jobs.c), run after the last field
int sqp_offset_in_chunk (mpr_t *r, const void *msg);
int sqp_offset_in_put (mpr_t *r, const void *msg);
int sqp_task_of_element (mpr_t *r, const void *msg);

//  A field's member in its message's struct (proto_table.c, proto_kinds.c)
#define SQP_AT(type, msg, f) ((type *) ((char *) (msg) + (f)->offset))
#define SQP_CAT(type, msg, f) ((const type *) ((const char *) (msg) + (f)->offset))
//  The kinds of proto_kinds.c (tstate: proto_jobs.c; SUBMIT's, frame ..
//  tasks: proto_client.c; body: proto.c): read a field into
//  msg, pack it (proto_table.c's s_read and s_pack dispatch to them)
#define SQP_FN_KINDS(X) \
    X (IDS, ids) X (JOB, job) X (OPTIONS, options) X (OUTPUTS, outputs) X (WHERE, where) \
    X (KEYLIST, keylist) X (EXIT, exit) X (TSTATE, tstate) X (RESOURCES, resources) \
    X (PREVIOUS, previous) X (INPUTS, inputs) X (OUTDECLS, outdecls) X (FRAME, frame) \
    X (IDLIST, idlist) X (RESLIST, reslist) X (ARRAY, array) X (TOPTIONS, toptions) \
    X (OBJECTS, objects) X (TASKS, tasks) X (BODY, body)
#define SQP_KIND(KIND, kind) \
    void sqp_kind_read_##kind (mpr_t *r, void *msg, const sq_field_desc_t *f); \
    void sqp_kind_pack_##kind (msgpack_packer *pk, const void *msg, const sq_field_desc_t *f);
SQP_FN_KINDS (SQP_KIND)
#undef SQP_KIND
bool sqp_kind_options_empty (const void *msg, const sq_field_desc_t *f);
bool sqp_kind_exit_empty (const void *msg, const sq_field_desc_t *f);
bool sqp_kind_array_empty (const void *msg, const sq_field_desc_t *f);
bool sqp_kind_toptions_empty (const void *msg, const sq_field_desc_t *f);
//  A record into msg as it is (zeroed by the caller, who may have set
//  members the record's kinds use: a SUBMIT task's blocks)
int sqp_record_read_zeroed (mpr_t *r, uint32_t record, void *msg, const char *what);
//  The decoders of SQ_BEGIN_IN rows (proto_table.c): sqp_decode_SUBMIT ...
#define SQ_BEGIN_IN(NAME, number, type_t, check) \
    int sqp_decode_##NAME (type_t *msg, const void *data, size_t size, sq_errbuf_t *err);
#include "proto_messages.def"
//  The blocks a decoded SUBMIT's tasks' lists are in (proto_kinds.c)
typedef struct sqp_block_s sqp_block_t;
void sqp_blocks_free (sqp_block_t **blocks);

//  Each record's packer (proto_table.c): [its fields]
#define SQ_RECORD(NAME, type_t, check) \
    void sqp_pack_##NAME (msgpack_packer *pk, const void *msg);
#define SQ_RECORD_IN(NAME, type_t, check) SQ_RECORD (NAME, type_t, check)
#include "proto_messages.def"
//  Each map's packer (proto_maps.c): {its keys}
#define SQ_MAP(NAME, type_t) void sqp_pack_map_##NAME (msgpack_packer *pk, const type_t *m);
#include "proto_messages.def"
//  ... and the reader of each map that is read: 0, or -1 with r failed
#define SQ_MAP_RW(NAME, type_t) \
    int sqp_read_map_##NAME (mpr_t *r, type_t *m); \
    void sqp_pack_map_##NAME (msgpack_packer *pk, const type_t *m);
#include "proto_messages.def"
//  The job map's own HOWs (proto_jobs.c): a job state's name, the counts
//  of a job's tasks by state
int sqp_read_job_state (mpr_t *r, uint32_t *bit);
void sqp_pack_job_state (msgpack_packer *pk, uint32_t bit);
int sqp_read_task_counts (mpr_t *r, uint64_t *counts);
void sqp_pack_task_counts (msgpack_packer *pk, const uint64_t *counts);
//  Each event's packer (proto_table.c): [number, its first n fields]
#define SQ_EVENT(NAME, number) \
    void sqp_pack_##NAME (msgpack_packer *pk, const sq_event_t *ev, uint32_t n);
#include "proto_messages.def"

#endif
