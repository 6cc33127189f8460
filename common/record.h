/*  record: the records of the broker's journal (broker/persist/journal.c), framed
    and encoded in one place like every message.

    A journal file is the 8 bytes SQ_REC_MAGIC, then records. A record is
    a little-endian u32 body length, a little-endian u32 CRC-32C of the
    body, then the body: one msgpack array [type, fields...]. A torn or
    corrupt tail is found by its length or checksum (sq_rec_next) and cut
    off by the loader; a body that frames correctly but does not decode is
    refused by sq_rec_decode with a message. Both are fuzzed.

    Bodies (docs/protocol.md, "The broker's journal"):
      HEADER   [1, format, cluster, epoch]       first record of every file
      EPOCH    [2, epoch]                        the broker restarted
      SESSION  [3, session, token, tenant|nil, owner|nil]
      SUBMIT   [4, session, frame0: bin, [payload: bin...]]
      KEEP     [5, session, [ids]]   UNKEEP [6, ...]   CANCEL [7, ...]
      CLOSE    [8, session]
      FINISHED [9, task, attempt, [[size, data: bin|nil]...]]
      FAILED   [10, task, attempt, code, message]
      ATTEMPT  [11, task, attempt, retries, crashes, memory]
      GOVERNOR [12, id, incarnation, name, key|nil]
      GONE     [13, id]
      IDS      [14, next_session, next_peer]

    Ownership: decoded records point into the body they came from; ids and
    payload arrays are owned by the record (sq_rec_release). */
#ifndef SQ_RECORD_H
#define SQ_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>
#include "mpreader.h"

#define SQ_REC_MAGIC "SQJRNL01"
#define SQ_REC_MAGIC_LEN 8
#define SQ_REC_HEAD 8               //  length + checksum
#define SQ_REC_MAX (1u << 30)       //  largest body accepted
#define SQ_REC_FORMAT 1

typedef enum {
    SQ_REC_HEADER = 1,
    SQ_REC_EPOCH,
    SQ_REC_SESSION,
    SQ_REC_SUBMIT,
    SQ_REC_KEEP,
    SQ_REC_UNKEEP,
    SQ_REC_CANCEL,
    SQ_REC_CLOSE,
    SQ_REC_FINISHED,
    SQ_REC_FAILED,
    SQ_REC_ATTEMPT,
    SQ_REC_GOVERNOR,
    SQ_REC_GONE,
    SQ_REC_IDS,
    SQ_REC_DELETE,              //  [type, session, ids]: objects deleted by hand
    SQ_REC_JOB,                 //  16: a session's job options
    SQ_REC_ELEMENT,             //  17: an array element's outcome
    SQ_REC_UNUSED_18,           //  (refused)
    SQ_REC_RESUBMIT,            //  19: [type, session, ids]
    SQ_REC_ENDED,               //  20: a job task's run: exit status, governor, times
    SQ_REC_TYPES_
} sq_rec_type_t;

typedef struct {
    uint64_t size;
    mpr_str_t data;             //  bin; ptr NULL when nil
} sq_rec_output_t;

typedef struct {
    uint32_t type;
    uint64_t epoch;             //  HEADER, EPOCH
    mpr_str_t cluster;          //  HEADER
    uint32_t session;           //  SESSION .. CLOSE; IDS: next session
    mpr_str_t token;            //  SESSION (SQ_TOKEN_LEN bytes)
    mpr_str_t tenant;           //  SESSION; empty if nil
    mpr_str_t owner;            //  SESSION; empty if nil
    mpr_str_t frame0;           //  SUBMIT
    uint32_t n_payloads;
    mpr_str_t *payloads;        //  SUBMIT, owned
    uint32_t n_ids;
    uint32_t *ids;              //  KEEP, UNKEEP, CANCEL, JOB's after, owned
    uint64_t key;               //  FINISHED, FAILED, ATTEMPT
    uint32_t attempt;
    uint32_t n_outputs;
    sq_rec_output_t *outputs;   //  FINISHED, owned
    uint32_t code;              //  FAILED
    mpr_str_t message;          //  FAILED
    uint32_t retries, crashes;  //  ATTEMPT
    uint64_t memory;            //  ATTEMPT
    uint32_t id;                //  GOVERNOR, GONE; IDS: next peer
    uint64_t incarnation;       //  GOVERNOR
    mpr_str_t name;             //  GOVERNOR
    mpr_str_t key_z85;          //  GOVERNOR; empty if nil
    //  JOB: name (in `name`, empty if nil), detached, created; ELEMENT:
    //  session, task id in `id`, position k, state, exit, governor,
    //  attempts, times; ENDED: key, exit, governor, times.
    bool detached;
    uint64_t created_ms, started_ms, ended_ms;
    uint64_t k;
    uint32_t state;
    bool has_exit_code;
    int32_t exit_code;
    uint32_t governor;
    uint32_t attempts;
} sq_rec_t;

uint32_t sq_crc32c (uint32_t crc, const void *data, size_t size);

//  Appends one record to buf: sq_rec_begin reserves the head and returns
//  its offset, the caller packs the body with pk, sq_rec_end fills the head.
size_t sq_rec_begin (msgpack_sbuffer *buf);
void sq_rec_end (msgpack_sbuffer *buf, size_t offset);

//  Frames the record at *pos of a journal's bytes (after the magic): 1 with
//  its body (and *pos past it), 0 at a clean end, -2 at a record cut short
//  (a write that did not finish), -1 at a corrupt one (a length out of
//  range, a checksum that does not match); *why says which and *pos is
//  left at its start.
int sq_rec_next (const uint8_t *data, size_t size, size_t *pos,
                 const uint8_t **body, size_t *body_size, const char **why);
//  Decodes a body. 0, or -1 with a message.
int sq_rec_decode (sq_rec_t *self, const uint8_t *body, size_t size, char *err, size_t err_size);
void sq_rec_release (sq_rec_t *self);

//  Packers of the bodies (each one whole record between begin and end).
void sq_rec_pack_header (msgpack_packer *pk, const char *cluster, uint64_t epoch);
void sq_rec_pack_epoch (msgpack_packer *pk, uint64_t epoch);
void sq_rec_pack_session (msgpack_packer *pk, uint32_t session, const uint8_t *token,
                          const char *tenant, const char *owner);
//  frame0 and the payload frames of an accepted SUBMIT, as they came.
void sq_rec_pack_submit (msgpack_packer *pk, uint32_t session, const void *frame0,
                         size_t frame0_size, const void *const *payloads,
                         const size_t *sizes, size_t n_payloads);
void sq_rec_pack_ids (msgpack_packer *pk, uint32_t type, uint32_t session,
                      const uint32_t *ids, uint32_t n);
void sq_rec_pack_close (msgpack_packer *pk, uint32_t session);
//  FINISHED: begin with the count, then one output each.
void sq_rec_pack_finished_begin (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                                 uint32_t n_outputs);
void sq_rec_pack_output (msgpack_packer *pk, uint64_t size, const void *data, size_t data_size);
void sq_rec_pack_failed (msgpack_packer *pk, uint64_t task, uint32_t attempt, uint32_t code,
                         const char *message);
void sq_rec_pack_attempt (msgpack_packer *pk, uint64_t task, uint32_t attempt,
                          uint32_t retries, uint32_t crashes, uint64_t memory);
void sq_rec_pack_governor (msgpack_packer *pk, uint32_t id, uint64_t incarnation,
                           const char *name, const char *key_z85);
void sq_rec_pack_gone (msgpack_packer *pk, uint32_t id);
void sq_rec_pack_ids_counters (msgpack_packer *pk, uint32_t next_session, uint32_t next_peer);
//  JOB: with n_after, a sixth field, the jobs it waits for (in ids on decode).
void sq_rec_pack_job (msgpack_packer *pk, uint32_t session, const char *name, bool detached,
                      uint64_t created_ms, const uint32_t *after, uint32_t n_after);
//  ELEMENT and ENDED take the fields of a decoded record (the caller fills
//  session, id, k, state, exit, governor, attempts, times / key).
void sq_rec_pack_element (msgpack_packer *pk, const sq_rec_t *rec);
void sq_rec_pack_ended (msgpack_packer *pk, const sq_rec_t *rec);

#endif
