/*  zap: the handler side of ZeroMQ's authentication protocol (ZAP, RFC 27)
    for CURVE, shared by the broker and the governors.

    libzmq asks the handler bound at inproc://zeromq.zap.01 in the socket's
    context about every CURVE handshake: which domain (the socket), which
    client key. The handler answers 200 with a User-Id (the key's Z85 text,
    which every message from that connection then carries as its "User-Id"
    property) or 400. Who decides is the caller: the handler only decodes
    and answers. The decoder is strict and bounded (it is fuzzed): the
    request comes from libzmq, but its frames are the client's bytes.

    Ownership: sq_zap_bind returns a socket the caller closes. */
#ifndef SQ_ZAP_H
#define SQ_ZAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "keys.h"
#include "wire.h"

#define SQ_ZAP_ENDPOINT "inproc://zeromq.zap.01"

typedef struct {
    uint8_t request_id [256];
    size_t request_id_size;
    char domain [256];          //  the socket's ZMQ_ZAP_DOMAIN
    char mechanism [32];        //  "CURVE", "NULL", "PLAIN"
    bool curve;
    uint8_t key [SQ_KEY_LEN];   //  curve: the client's public key
    char z85 [SQ_Z85_LEN + 1];
} sq_zap_request_t;

//  Decodes a ZAP request from its frames. 0, or -1 with a message.
int sq_zap_decode (sq_zap_request_t *self, const void *const *frames, const size_t *sizes,
                   size_t n, char *err, size_t err_size);
//  The same from a received message.
int sq_zap_decode_msg (sq_zap_request_t *self, sq_msg_t *msg, char *err, size_t err_size);
//  Answers a request: 200 with user_id, or 400 with a reason.
int sq_zap_reply (void *socket, const sq_zap_request_t *request, bool allow,
                  const char *user_id, const char *reason);
//  A REP socket bound as the context's ZAP handler; NULL (logged) if the
//  endpoint is taken.
void *sq_zap_bind (void *ctx);

//  Makes `socket` a CURVE server with the given secret key, asking the
//  context's ZAP handler with `domain`. 0 or -1.
int sq_curve_server (void *socket, const uint8_t *secret_key, const char *domain);
//  Makes `socket` a CURVE client of a server with `server_key`. 0 or -1.
int sq_curve_client (void *socket, const uint8_t *public_key, const uint8_t *secret_key,
                     const uint8_t *server_key);
//  The User-Id property of a received frame (the peer's Z85 key when the
//  connection is CURVE), or NULL.
const char *sq_msg_user (zmq_msg_t *frame);

#endif
