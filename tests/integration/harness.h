/*  harness: starts a real broker and governors on loopback for one
    integration test, hands out connected clients, and speaks the raw wire
    protocol for the tests that must send what the client library never
    would.

    Processes are found through the environment (SQUALL_BROKER_BIN,
    SQUALL_GOVERNOR_BIN, set by ctest). Start-up waits for the LISTENING /
    READY lines on each child's stdout with a deadline, never for a fixed
    time. Every child is killed if the test exits early, aborts or is killed
    (atexit, fatal-signal handlers and PR_SET_PDEATHSIG).

    SQUALL_LOG_LEVEL (default "warn") is passed to every child.
*/
#ifndef SQ_HARNESS_H
#define SQ_HARNESS_H

//  1 in AddressSanitizer builds, where tests use smaller data.
#if defined(__SANITIZE_ADDRESS__)
#define HARNESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARNESS_SANITIZED 1
#endif
#endif
#ifndef HARNESS_SANITIZED
#define HARNESS_SANITIZED 0
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <czmq.h>
#include "squall.h"
#include "proto.h"
#include "wire.h"

typedef struct _harness_t harness_t;

//  Starts a broker and `governors` governors with `cpus` cpus each and waits
//  until all of them are up; the test fails (exit 1) if they do not come.
harness_t *harness_new (int governors, int cpus);
//  Same with extra broker arguments (NULL-terminated list, may be NULL).
harness_t *harness_new_args (int governors, int cpus, const char *const *broker_args);
//  Starts one more governor with the given name and waits for it; returns
//  its index.
int harness_add_governor (harness_t *self, const char *name, int cpus);
//  Same with extra governor arguments (NULL-terminated list).
int harness_add_governor_args (harness_t *self, const char *name, int cpus,
                               const char *const *extra);
//  Same with extra arguments per governor: governor_args [i] is a
//  NULL-terminated list for governor i, or NULL (so is governor_args).
harness_t *harness_new_govs (int governors, int cpus, const char *const *broker_args,
                             const char *const *const *governor_args);
const char *harness_endpoint (harness_t *self);
pid_t harness_broker_pid (harness_t *self);
pid_t harness_governor_pid (harness_t *self, int i);
//  Governor id and name as printed on its READY line.
uint32_t harness_governor_id (harness_t *self, int i);
//  A new client connected to the broker (10 s timeout); fails the test
//  otherwise. It becomes the client whose errmsg CHECK prints.
sq_client_t *harness_client (harness_t *self);
//  Destroys a client and forgets it as CHECK's client.
void harness_client_destroy (sq_client_t **client_p);
//  Sends a signal to governor i; with SIGKILL/SIGTERM also reaps it and
//  does not count its exit status as a failure.
void harness_kill_governor (harness_t *self, int i, int signal);
//  Waits up to timeout_ms for governor i to exit by itself (after a signal
//  the test sent it); its exit status, or -1 if it did not exit in time or
//  died of a signal. Its end is not counted as a failure.
int harness_governor_exit (harness_t *self, int i, int timeout_ms);
//  True while the broker process exists and has not exited.
bool harness_broker_alive (harness_t *self);
//  Kills the broker (SIGKILL) and starts a new one on the same endpoint,
//  with the extra arguments set by harness_set_restart_args (if any).
int harness_restart_broker (harness_t *self);
void harness_set_restart_args (harness_t *self, const char *const *args);
//  Waits (with the start-up deadline) for governor i to print a line
//  starting with prefix, e.g. a new "READY " after it reconnected.
void harness_governor_expect (harness_t *self, int i, const char *prefix);
//  Keys (docs/security.md). With SQUALL_TEST_SECURE=1 (the "secure" ctest
//  label) the broker, the governors and harness_client use CURVE keys made
//  for the test run: harness_key ("broker.key" | "broker.pub" |
//  "governor.key" | "governor.pub" | "client.key" | "client.pub") gives
//  their paths. harness_keygen makes one more authorized key (returns the
//  .key path); harness_reload_keys sends the broker SIGHUP.
bool harness_secure (void);
const char *harness_keys_dir (void);
const char *harness_key (const char *file);
const char *harness_keygen (const char *name, const char *role, const char *tenant);
//  The .pub file of the harness governor with this public key (each has
//  its own: slot 0 governor.pub, slot i gov-i.pub; raw governors fake.pub).
const char *harness_governor_pub (const uint8_t *key);
int harness_reload_keys (harness_t *self);
//  SIGTERM to all, waits (10 s) then SIGKILL. Returns 0 when the broker
//  and every governor that was not killed on purpose exited with status 0,
//  else -1 after printing why: a crashed broker fails the test.
int harness_destroy (harness_t **self_p);

//  --------------------------------------------------------------------------
//  Checks: print file:line, the condition, a message and the current
//  client's error, then exit(1) (the atexit handler stops the processes).

void harness_set_client (sq_client_t *client);
void harness_fail (const char *file, int line, const char *cond, const char *format, ...)
    __attribute__ ((format (printf, 4, 5), noreturn));
void harness_note (const char *format, ...) __attribute__ ((format (printf, 1, 2)));

#define CHECK(cond, ...) do { \
    if (!(cond)) harness_fail (__FILE__, __LINE__, #cond, __VA_ARGS__); \
} while (0)
//  An sq_* call that must return `want` (SQ_OK or an error code).
#define CHECK_RC(expr, want, ...) do { \
    int rc_ = (expr); \
    if (rc_ != (int) (want)) { \
        char what_ [512]; \
        snprintf (what_, sizeof what_, __VA_ARGS__); \
        harness_fail (__FILE__, __LINE__, #expr, "%s: returned %d (%s), expected %d (%s)", \
                      what_, rc_, sq_strerror (rc_), (int) (want), sq_strerror ((int) (want))); \
    } \
} while (0)

//  Monotonic time in seconds.
double harness_now (void);
//  Sleeps a short while (ms) between attempts of an "eventually" poll.
void harness_pause (int ms);

//  --------------------------------------------------------------------------
//  INFO JSON, parsed just enough. Keys are dotted paths of object members
//  ("tasks.running", "sessions"); a number gives its value, an array its
//  element count. -1 when the key is missing. The pseudo-key "tasks.busy"
//  is tasks.assigned + tasks.running: tasks on a governor, whether or not
//  its STARTED event has been counted yet.

char *harness_info (sq_client_t *client);
long harness_json_long (const char *json, const char *path);
long harness_info_long (sq_client_t *client, const char *path);
//  A numeric field of the governor named `name` (NULL: the first one) in an
//  INFO JSON, -1 if absent.
long harness_governor_field (const char *json, const char *name, const char *field);
//  tasks_done of the governor named `name`, -1 if absent.
long harness_tasks_done (const char *json, const char *name);
//  Polls INFO until path == value or timeout_ms passes; returns the last
//  value seen (== value on success).
long harness_info_wait (sq_client_t *client, const char *path, long value, int timeout_ms);
//  Same, until path >= value.
long harness_info_wait_min (sq_client_t *client, const char *path, long value, int timeout_ms);
//  Sum of tasks in the unfinished states (waiting, ready, assigned, running).
long harness_json_active (const char *json);

//  --------------------------------------------------------------------------
//  Data helpers

//  Patterned bytes that differ for different seeds and offsets.
void harness_pattern (void *buf, size_t size, uint32_t seed);
//  Fetches a kept object and compares it byte-exact with the expectation.
void harness_fetch_expect_at (const char *file, int line, sq_session_t *session,
                              uint32_t id, const void *data, size_t size,
                              int timeout_ms);
#define FETCH_EXPECT(session, id, data, size) \
    harness_fetch_expect_at (__FILE__, __LINE__, (session), (id), (data), (size), 30000)
//  sq_task that must succeed; frees `config` (from sq_config_*, may be
//  NULL) with sq_free. Returns the task id.
uint32_t harness_task (sq_session_t *session, const char *kind,
                       const uint32_t *inputs, size_t n_inputs, uint32_t n_outputs,
                       void *config, size_t config_size);
//  Same for a task with one output: returns the output's id.
uint32_t harness_task1 (sq_session_t *session, const char *kind,
                        const uint32_t *inputs, size_t n_inputs,
                        void *config, size_t config_size);
//  sq_blob that must succeed.
uint32_t harness_blob (sq_session_t *session, const void *data, size_t size);
uint32_t harness_blob_str (sq_session_t *session, const char *text);
//  Builds a config map from a msgpack packer callback; returns malloc'd bytes.
typedef void (harness_pack_fn) (msgpack_packer *pk, void *arg);
void *harness_pack (harness_pack_fn *fn, void *arg, size_t *size);

//  --------------------------------------------------------------------------
//  Raw protocol peer: a DEALER that speaks the wire protocol by hand.

typedef struct {
    zsock_t *sock;
    void *handle;               //  the libzmq socket under sock
    uint32_t req;               //  last request id used
    uint32_t session;           //  opened by raw_session_open
    uint8_t token [SQ_TOKEN_LEN];   //  its token (RESUME)
    sq_msg_t msg;               //  last reply received
    sq_reply_t reply;           //  decoded from msg frame 0
} raw_t;

raw_t *raw_new (const char *endpoint);
//  A raw peer of a governor's serve socket (keys on: CURVE to the
//  governors' key), a raw peer that is a governor (the governors' key), and
//  one with any key pair and server key files (NULL: plain).
raw_t *raw_new_serve (const char *endpoint);
raw_t *raw_new_governor (const char *endpoint);
raw_t *raw_new_keyed (const char *endpoint, int rcvhwm, const char *key_file,
                      const char *server_file);
//  UPLOAD on the raw peer's session (said HELLO, session open): object id
//  of size bytes to `governor` (0: the broker picks). The reply code; on
//  success the capability (empty without keys) in cap / *cap_len.
int raw_upload_where (raw_t *self, uint32_t id, uint64_t size, uint32_t governor, uint8_t *cap,
                      size_t *cap_len);
//  With a receive high-water mark (0: unlimited, the raw_new default); a
//  small one makes a peer that does not read push back on the broker.
raw_t *raw_new_hwm (const char *endpoint, int rcvhwm);
void raw_destroy (raw_t **self_p);
//  Sends one frame of bytes (more: another frame follows).
int raw_send_bytes (raw_t *self, const void *data, size_t size, bool more);
//  Sends a message built in w (+ payload frames), moves the payloads.
int raw_send (raw_t *self, sq_wbuf_t *w, zmq_msg_t *payloads, size_t n);
//  Waits for a REPLY with request id req (skipping others); 0 and
//  self->reply filled, or -1 on timeout / undecodable reply.
int raw_wait_reply (raw_t *self, uint32_t req, int timeout_ms);
//  Drains whatever arrived without blocking; returns messages read.
int raw_drain (raw_t *self);
//  HELLO as a client; returns the reply code (or -1 on no reply).
int raw_hello (raw_t *self);
//  SESSION_OPEN; returns the session id (fails the test on error).
uint32_t raw_session_open (raw_t *self);
//  Sends the request and waits for its reply: the reply code, or -1.
int raw_request (raw_t *self, sq_request_t *request, int timeout_ms);
//  Next request id.
static inline uint32_t raw_next_req (raw_t *self) { return ++self->req; }
//  Copy of the reply's error message (caller frees).
char *raw_reply_message (raw_t *self);

#endif
