/*  route: the inproc protocol between a governor's threads (governor.h).
    A message between the receive, compute and balance threads is a
    ZeroMQ multipart message whose first frame says where it came from or
    goes (GOV_ROUTE_*), or is one control word (GOV_TERM, GOV_DONE,
    GOV_REATTACH); the rest is the wire message itself, moved frame by frame
    without copying. Only what every thread's file needs, so that none of
    them includes the governor's lifecycle (governor.h). */
#ifndef GOV_ROUTE_H
#define GOV_ROUTE_H

#include <stdint.h>
#include <stdio.h>
#include <zmq.h>

//  First frame of inproc messages. Into compute: where the message came
//  from (broker, data channel, serve socket + identity frame). Out of
//  compute and balance: where it goes (broker, "P"+endpoint to a peer,
//  serve + identity frame).
#define GOV_ROUTE_BROKER 'B'
#define GOV_ROUTE_DATA 'D'
#define GOV_ROUTE_PEER 'P'
#define GOV_ROUTE_SERVE 'S'
//  Control: receive -> thread "$TERM"; thread -> receive "$DONE" (last).
#define GOV_TERM "$TERM"
#define GOV_DONE "$DONE"
//  receive -> compute: the broker took us back after a loss (reattach):
//  list what we hold and run (reattach inventory), drop what waits.
#define GOV_REATTACH "$REATTACH"

//  A peer's data socket as compute names it for the receive thread: its
//  endpoint, preceded by 'K' and its public key in Z85 when the broker
//  gave one (keys on): "tcp://h:p" or "K<40 chars>tcp://h:p". Into
//  compute, data messages come behind GOV_ROUTE_DATA followed by the
//  sender's key in Z85 when the connection is CURVE.
#define GOV_PEER_KEYED 'K'
static inline int
gov_peer_address (char *out, size_t size, const uint8_t *key, const char *endpoint,
                  size_t endpoint_len)
{
    char z85 [41];
    if (key)
        zmq_z85_encode (z85, key, 32);
    int n = snprintf (out, size, "%s%s%.*s", key? "K": "", key? z85: "", (int) endpoint_len,
                      endpoint);
    return n < 0 || (size_t) n >= size? -1: n;
}

//  Messages queued per inproc pipe before the sender waits.
#define GOV_PIPE_HWM 10000

#endif
