/*  http: the broker's web dashboard, /metrics (Prometheus text format) and
    the JSON API the page is built on, served by libmicrohttpd.

    libmicrohttpd runs in "external polling" mode with its own epoll
    descriptor: the reactor polls that one descriptor next to its ZeroMQ
    sockets and calls http_run when it is readable or a timeout is due, so
    every request is answered on the reactor thread from the live graph
    without locks. Each answer is built at once into memory (bounded: the
    INFO map, at most EVENTLOG_RING events) and written out by libmicrohttpd
    without blocking; a slow client costs a connection slot (64 at most,
    closed after 10 s idle), never the reactor's time.

    Endpoints:
      GET /               the dashboard page (broker/dashboard/index.html,
                          embedded at build time)
      GET /api/state      {"info": INFO map, "sessions": [...], "stats": {...}}
      GET /api/events?since=SEQ   task events after SEQ (live task stream)
      GET /api/errors     the last failures
      GET /api/log?session=S&task=T[&stream=stderr]   the last 4 KiB of a
                          task's output, asked of its governor (LOGTAIL):
                          the request waits (suspended, at most 16 at once,
                          3 s) for the governor's answer
      GET /metrics        Prometheus text format 0.0.4

    Ownership: http_new returns a server the caller destroys; it borrows the
    broker and the event log, which must outlive it. */
#ifndef SQ_HTTP_H
#define SQ_HTTP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct _http_t http_t;
typedef struct _broker_t broker_t;
typedef struct _eventlog_t eventlog_t;

//  Whether the broker was built with libmicrohttpd.
bool http_available (void);
//  address: "PORT" (127.0.0.1 only), "*:PORT" (every interface) or
//  "HOST:PORT"; port 0 picks a free one, a busy one is an error naming it.
//  token: when not NULL, every request but /metrics must carry it
//  (Authorization: Bearer, the cookie the page sets, or ?token=); when
//  NULL, only requests whose Host is this machine (a loopback name or
//  address, or the address bound) are answered (DNS rebinding). open: the
//  broker has keys or --insecure; without it only a loopback address may
//  be served. NULL (with a logged reason) if it cannot listen.
http_t *http_new (const char *address, const char *token, bool open, broker_t *broker,
                  eventlog_t *events);
void http_destroy (http_t **self_p);
//  The port actually bound.
uint16_t http_port (http_t *self);
//  Descriptor for the reactor's poll (readable: call http_run).
int http_fd (http_t *self);
//  Milliseconds until libmicrohttpd needs http_run even without input
//  (idle connections to close), or -1. Remembers the deadline.
long http_timeout (http_t *self);
//  If the descriptor was readable or the deadline passed: accepts, reads,
//  answers and writes what is ready, without blocking.
void http_run (http_t *self, bool readable);
//  A governor's answer to a LOGTAIL the dashboard asked for
//  (broker_log_tail): the request `req` made of governor `governor`, and
//  the bytes (any, at most SQ_LOGTAIL_MAX). Unknown or late answers are
//  dropped.
#include <stddef.h>
void http_log_tail_done (http_t *self, uint32_t req, uint32_t governor, const char *data,
                         size_t size);

#endif
