/*  wire: whole-message receive and send over raw zmq_msg_t frames. */
#include "wire.h"
#include "grow.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void
sq_msg_init (sq_msg_t *self)
{
    memset (self, 0, sizeof *self);
    self->srcfd = -1;
}

static int
s_reserve (sq_msg_t *self)
{
    if (self->n < self->cap)
        return 0;
    return sq_grow ((void **) &self->frames, &self->cap, self->n + 1, sizeof *self->frames, 4, SIZE_MAX);
}

int
sq_msg_recv (sq_msg_t *self, void *socket, int flags, size_t max_frames)
{
    sq_msg_close (self);
    self->srcfd = -1;
    while (1) {
        zmq_msg_t frame;
        zmq_msg_init (&frame);
        int rc = zmq_msg_recv (&frame, socket, self->n == 0 && !self->truncated? flags: 0);
        if (rc < 0) {
            int saved = errno;
            zmq_msg_close (&frame);
            //  A failure after the first frame cannot leave half a message
            //  behind in ZeroMQ (parts arrive atomically); report it anyway.
            sq_msg_close (self);
            errno = saved;
            return -1;
        }
        //  A ROUTER's identity frame is made locally and carries no
        //  descriptor; the first frame from the wire does.
        if (self->srcfd < 0)
            self->srcfd = zmq_msg_get (&frame, ZMQ_SRCFD);
        int more = zmq_msg_more (&frame);
        if (self->n < max_frames && s_reserve (self) == 0)
            self->frames [self->n++] = frame;       //  zmq_msg_t moves by value
        else {
            zmq_msg_close (&frame);
            self->truncated = true;
        }
        if (!more)
            return 0;
    }
}

void
sq_msg_close (sq_msg_t *self)
{
    for (size_t i = 0; i < self->n; i++)
        zmq_msg_close (&self->frames [i]);
    self->n = 0;
    self->truncated = false;
}

void
sq_msg_release (sq_msg_t *self)
{
    sq_msg_close (self);
    free (self->frames);
    self->frames = NULL;
    self->cap = 0;
}

static void
s_free (void *data, void *hint)
{
    (void) hint;
    free (data);
}

int
sq_send (void *socket, const void *identity, size_t identity_size,
         sq_wbuf_t *header, zmq_msg_t *payloads, size_t n_payloads, int flags)
{
    int rc = 0;
    if (identity) {
        if (zmq_send (socket, identity, identity_size, ZMQ_SNDMORE | flags) < 0)
            rc = -1;
    }
    zmq_msg_t head;
    size_t size = header->buf.size;
    char *data = msgpack_sbuffer_release (&header->buf);
    if (!data) {
        //  An empty sbuffer has no buffer yet; send a valid empty frame.
        zmq_msg_init (&head);
    }
    else
    if (zmq_msg_init_data (&head, data, size, s_free, NULL)) {
        free (data);
        rc = -1;
        zmq_msg_init (&head);
    }
    if (rc == 0 && zmq_msg_send (&head, socket, (n_payloads? ZMQ_SNDMORE: 0) | flags) < 0)
        rc = -1;
    zmq_msg_close (&head);
    for (size_t i = 0; i < n_payloads; i++) {
        if (rc == 0
        &&  zmq_msg_send (&payloads [i], socket, (i + 1 < n_payloads? ZMQ_SNDMORE: 0) | flags) < 0)
            rc = -1;
        zmq_msg_close (&payloads [i]);
    }
    return rc;
}
