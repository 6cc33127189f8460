/*  squall_codes: the versions and the error codes every squall program
    shares: libsquall's callers (squall.h includes this file), the broker
    and the governors (common/proto.h). The error numbers travel on the
    wire (docs/protocol.md, "Replies and error codes"). Installed beside
    squall.h. */
#ifndef SQUALL_CODES_H
#define SQUALL_CODES_H

#define SQUALL_VERSION_MAJOR 0
#define SQUALL_VERSION_MINOR 1
#define SQUALL_VERSION_PATCH 0
//  Version of the wire protocol; a peer speaking another one is refused.
#define SQUALL_PROTOCOL_VERSION 2

//  Error codes: the same numbers travel on the wire (docs/protocol.md).
typedef enum {
    SQ_OK = 0,
    SQ_E_PROTOCOL = 1,          //  malformed message
    SQ_E_VERSION = 2,           //  protocol version mismatch
    SQ_E_HELLO = 3,             //  peer has not said HELLO, or said it twice
    SQ_E_INVALID = 4,           //  invalid argument or field value
    SQ_E_DUPLICATE_ID = 5,      //  id used twice in a session
    SQ_E_UNKNOWN_ID = 6,        //  id not in the session (or already released)
    SQ_E_CYCLE = 7,             //  submitted tasks depend on each other in a cycle
    SQ_E_NO_PRODUCER = 8,       //  data object with neither data nor producer task
    SQ_E_UNKNOWN_KIND = 9,      //  task kind no governor knows
    SQ_E_BAD_CONFIG = 10,       //  task configuration invalid for its kind
    SQ_E_SESSION = 11,          //  unknown or closed session
    SQ_E_NOT_KEPT = 12,         //  fetch of an object that is not kept
    SQ_E_TASK_FAILED = 13,      //  the task itself failed
    SQ_E_UPSTREAM_FAILED = 14,  //  a task it depends on failed
    SQ_E_CANCELLED = 15,        //  cancelled by the client or session close
    SQ_E_TIMEOUT = 16,          //  wait or fetch timed out
    SQ_E_TOO_LARGE = 17,        //  message, frame or value over a limit
    SQ_E_BUSY = 18,             //  too many outstanding requests
    SQ_E_RESOURCES = 19,        //  no governor could ever run the task
    SQ_E_CONNECTION = 20,       //  broker or governor unreachable / lost
    SQ_E_NOMEM = 21,            //  out of memory
    SQ_E_INTERNAL = 22,         //  a bug in squall: please report
    SQ_E_LOST = 23,             //  object lost and could not be recomputed
    SQ_E_DENIED = 24,           //  the peer's key may not do this (security)
    SQ_E_ACTOR_LOST = 25,       //  an actor's governor or executor was lost
    SQ_E_DELETED = 26,          //  the object was deleted by a client (DELETE)
    SQ_E_COUNT_
} sq_err_t;

//  PLACE (sq_place): with SQ_PLACE_MOVE every copy but those asked for is
//  dropped once they are there. At most SQ_PLACE_MAX governors per request
//  and in a reply.
#define SQ_PLACE_MOVE 1u
#define SQ_PLACE_MAX 1024

#endif
