/*  wire: receiving and sending whole multipart messages with raw zmq_msg_t
    frames (no per-frame heap objects, payloads never copied).

    Ownership: an sq_msg_t owns its frames until sq_msg_close; sending moves
    payload frames out of the caller's hands (they are closed on return). */
#ifndef SQ_WIRE_H
#define SQ_WIRE_H

#include <stddef.h>
#include <stdbool.h>
#include <zmq.h>
#include "proto.h"

typedef struct {
    size_t n;                   //  frames held
    size_t cap;
    zmq_msg_t *frames;
    bool truncated;             //  more frames came than max_frames: rest dropped
    int srcfd;                  //  file descriptor the first frame came on
} sq_msg_t;

void sq_msg_init (sq_msg_t *self);
//  Receives one whole multipart message. Frames past max_frames are read and
//  dropped (self->truncated). 0, or -1 with errno (EAGAIN, ETERM, EINTR).
int sq_msg_recv (sq_msg_t *self, void *socket, int flags, size_t max_frames);
//  Closes the frames but keeps the array for the next receive.
void sq_msg_close (sq_msg_t *self);
//  Closes the frames and frees the array.
void sq_msg_release (sq_msg_t *self);
static inline void *sq_msg_data (sq_msg_t *self, size_t i) { return zmq_msg_data (&self->frames [i]); }
static inline size_t sq_msg_size (sq_msg_t *self, size_t i) { return zmq_msg_size (&self->frames [i]); }

//  Sends [identity?] [header] [payloads...]. The header's bytes are taken over
//  from the wbuf without copying (the wbuf is left empty and reusable).
//  identity may be NULL (DEALER/PUSH). Payload frames are moved. flags are
//  added to every zmq_msg_send (ZMQ_DONTWAIT to never block). 0 or -1.
int sq_send (void *socket, const void *identity, size_t identity_size,
             sq_wbuf_t *header, zmq_msg_t *payloads, size_t n_payloads, int flags);

#endif
