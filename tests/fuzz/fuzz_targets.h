/*  fuzz_targets: the decoders fuzz_proto exercises, selected by the first
    byte of each input (modulo FZ_COUNT). make_corpus writes seed inputs
    with the same selector bytes, so the two must agree: both include this
    file.

    Input layout: [selector] [frame bytes...], except FZ_TASKCONF whose
    layout is [selector] [kind] [n_inputs] [n_outputs] [config bytes...]
    and FZ_ZAP whose frames are each [u8 length] [bytes].
*/
#ifndef SQ_FUZZ_TARGETS_H
#define SQ_FUZZ_TARGETS_H

typedef enum {
    FZ_PEEK = 0,                //  sq_proto_peek
    FZ_HELLO = 1,               //  sq_hello_decode
    FZ_REPLY = 2,               //  sq_reply_decode, then the body as values
    FZ_REQUEST = 3,             //  sq_request_decode
    FZ_SUBMIT = 4,              //  sq_submit_decode, then every task config
    FZ_UPDATE = 5,              //  sq_update_begin / next
    FZ_LOAD = 6,                //  sq_load_decode
    FZ_BARE = 7,                //  sq_bare_decode (HEARTBEAT, BYE, DRAIN, LEAVE)
    FZ_ASSIGN = 8,              //  sq_assign_begin / next, then every config
    FZ_SEND = 9,                //  sq_batch_begin / next of SEND
    FZ_DROP = 10,               //  sq_batch_begin + sq_drop_next
    FZ_STOP = 11,               //  sq_batch_begin + sq_stop_next
    FZ_OBJECT = 12,             //  sq_object_decode
    FZ_GFETCH = 13,             //  sq_gfetch_decode
    FZ_TASKCONF = 14,           //  sq_taskconf_decode, any kind
    FZ_MPR = 15,                //  the mpr_* cursor, value by value
    FZ_CHUNK = 16,              //  sq_chunk_decode
    FZ_CREDIT = 17,             //  sq_credit_decode
    FZ_GREAD = 18,              //  sq_gread_decode
    FZ_PUT = 19,                //  sq_put_decode
    FZ_ZAP = 20,                //  sq_zap_decode: frames as [u8 length, bytes]...
    FZ_CERT = 21,               //  sq_cert_parse: a key file's text
    FZ_RECORD = 22,             //  a journal's bytes: sq_rec_next + sq_rec_decode
    FZ_KEYS = 23,               //  sq_keyset_decode (KEYS)
    FZ_WELCOME = 24,            //  sq_welcome_decode, both roles; SESSION_OPEN reply
    FZ_WHERE = 25,              //  sq_fetched_decode and sq_where_decode
    FZ_REPLIES = 26,            //  reply bodies a client reads: WAIT, RESUME, nil, GREAD;
                                //  sq_json_from_msgpack (INFO)
    FZ_STREAM = 27,             //  sq_batch_begin / next, as STREAM and as UNSTREAM
    FZ_SCHUNK = 28,             //  sq_schunk_decode
    FZ_SCREDIT = 29,            //  sq_scredit_decode
    //  Any message of the table (proto_messages.def), by its type: the
    //  selectors of LOAD, OBJECT, GFETCH, CHUNK, CREDIT, GREAD, PUT, SCHUNK
    //  and SCREDIT above are this too (their seeds were written before).
    FZ_TABLE = 30,
    FZ_COUNT
} fz_target_t;

#endif
