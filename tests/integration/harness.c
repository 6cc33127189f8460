/*  harness: real processes on loopback for the integration tests.

    Over 800 lines: every integration test links this one harness (brokers,
    governors, keys, a client's raw socket, waiting for a condition), whose
    parts share its table of started processes and their clean-up. */
#include "harness.h"
#include "keys.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_GOVERNORS 16
#define S_START_TIMEOUT_MS 20000
#define S_STOP_TIMEOUT_MS 10000

typedef struct {
    pid_t pid;                  //  0 once reaped
    int out_fd;                 //  read end of its stdout, -1 when closed
    char buf [1024];            //  partial line read so far
    size_t len;
    bool expected_death;        //  killed on purpose by the test
    int status;                 //  waitpid status once reaped
    char label [32];
} s_proc_t;

struct _harness_t {
    const char *const *restart_args;    //  harness_restart_broker's extra arguments
    s_proc_t broker;
    s_proc_t governor [S_MAX_GOVERNORS];
    int n_governors;
    uint32_t governor_id [S_MAX_GOVERNORS];
    char endpoint [256];
};

//  Every child of every harness, for the emergency cleanup. Plain pids
//  so the signal handler can kill them without touching the heap.
static volatile pid_t s_children [S_MAX_GOVERNORS + 8];
static bool s_cleanup_installed;
static sq_client_t *s_client;           //  whose errmsg CHECK prints

static void
s_track (pid_t pid)
{
    for (size_t i = 0; i < sizeof s_children / sizeof s_children [0]; i++)
        if (s_children [i] == 0) {
            s_children [i] = pid;
            return;
        }
}

static void
s_untrack (pid_t pid)
{
    for (size_t i = 0; i < sizeof s_children / sizeof s_children [0]; i++)
        if (s_children [i] == pid)
            s_children [i] = 0;
}

//  Async-signal-safe: only kill().
static void
s_kill_all (void)
{
    for (size_t i = 0; i < sizeof s_children / sizeof s_children [0]; i++)
        if (s_children [i] > 0)
            kill (s_children [i], SIGKILL);
}

static void
s_atexit (void)
{
    s_kill_all ();
    for (size_t i = 0; i < sizeof s_children / sizeof s_children [0]; i++)
        if (s_children [i] > 0) {
            waitpid (s_children [i], NULL, 0);
            s_children [i] = 0;
        }
}

static void
s_fatal_signal (int sig)
{
    s_kill_all ();
    signal (sig, SIG_DFL);
    raise (sig);
}

static void
s_install_cleanup (void)
{
    if (s_cleanup_installed)
        return;
    s_cleanup_installed = true;
    atexit (s_atexit);
    int sigs [] = { SIGINT, SIGTERM, SIGHUP, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs [0]; i++)
        signal (sigs [i], s_fatal_signal);
    //  Writing to a peer that went away must be an error, not a death.
    signal (SIGPIPE, SIG_IGN);
    //  Make the test's own output interleave sensibly with children's logs.
    setvbuf (stdout, NULL, _IOLBF, 0);
}

double
harness_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

void
harness_pause (int ms)
{
    struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
    while (nanosleep (&ts, &ts) && errno == EINTR)
        ;
}

//  --------------------------------------------------------------------------
//  Checks

void
harness_set_client (sq_client_t *client)
{
    s_client = client;
}

void
harness_fail (const char *file, int line, const char *cond, const char *format, ...)
{
    char text [2048];
    va_list args;
    va_start (args, format);
    vsnprintf (text, sizeof text, format, args);
    va_end (args);
    fprintf (stdout, "FAIL %s:%d: %s\n    check: %s\n", file, line, text, cond);
    if (s_client)
        fprintf (stdout, "    client: code %d (%s), errid %u, errroot %u, errmsg \"%s\"\n",
                 sq_client_errcode (s_client), sq_strerror (sq_client_errcode (s_client)),
                 sq_client_errid (s_client), sq_client_errroot (s_client),
                 sq_client_errmsg (s_client));
    fflush (stdout);
    exit (1);
}

void
harness_note (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    fputs ("  ok: ", stdout);
    vfprintf (stdout, format, args);
    fputc ('\n', stdout);
    fflush (stdout);
    va_end (args);
}

//  --------------------------------------------------------------------------
//  Keys: with SQUALL_TEST_SECURE=1 every connection is CURVE. One key pair
//  each for the broker, the governors (all share it) and the clients, in a
//  private directory made on first use (authorized/ holds what the broker
//  accepts) and removed at exit.

static char s_keys [256];

static void
s_keys_remove (void)
{
    if (!s_keys [0])
        return;
    char cmd [400];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_keys);
    if (system (cmd) != 0)
        fprintf (stderr, "harness: could not remove %s\n", s_keys);
}

bool
harness_secure (void)
{
    const char *secure = getenv ("SQUALL_TEST_SECURE");
    return secure && *secure && strcmp (secure, "0");
}

const char *
harness_keys_dir (void)
{
    if (s_keys [0])
        return s_keys;
    snprintf (s_keys, sizeof s_keys, "/tmp/squall-test-keys-XXXXXX");
    char authorized [300], err [600];
    if (!mkdtemp (s_keys)) {
        fprintf (stdout, "FAIL harness: mkdtemp: %s\n", strerror (errno));
        exit (1);
    }
    atexit (s_keys_remove);
    snprintf (authorized, sizeof authorized, "%s/authorized", s_keys);
    if (mkdir (authorized, 0700)
    ||  sq_keygen ("broker", s_keys, "broker", NULL, err, sizeof err)
    ||  sq_keygen ("governor", authorized, "governor", NULL, err, sizeof err)
    ||  sq_keygen ("client", authorized, "client", NULL, err, sizeof err)) {
        fprintf (stdout, "FAIL harness: keys: %s\n", err);
        exit (1);
    }
    //  One key per governor (the broker refuses a key already connected as
    //  a governor): governor slot 0 says HELLO with governor.key, slot i
    //  with gov-i.key; the tests' own raw governors with fake.key.
    if (sq_keygen ("fake", authorized, "governor", NULL, err, sizeof err)) {
        fprintf (stdout, "FAIL harness: keys: %s\n", err);
        exit (1);
    }
    for (int i = 1; i < S_MAX_GOVERNORS; i++) {
        char name [16];
        snprintf (name, sizeof name, "gov-%d", i);
        if (sq_keygen (name, authorized, "governor", NULL, err, sizeof err)) {
            fprintf (stdout, "FAIL harness: keys: %s\n", err);
            exit (1);
        }
    }
    return s_keys;
}

const char *
harness_key (const char *file)
{
    static char paths [8][400];
    static int next;
    char *path = paths [next++ % 8];
    bool in_authorized = strcmp (file, "broker.key") && strcmp (file, "broker.pub");
    snprintf (path, 400, "%s/%s%s", harness_keys_dir (), in_authorized? "authorized/": "", file);
    return path;
}

//  The key of governor slot i (made with the keys directory).
static const char *
s_governor_key (int i)
{
    char file [32];
    snprintf (file, sizeof file, i? "gov-%d.key": "governor.key", i);
    return harness_key (file);
}

static void s_public_key (const char *file, uint8_t *key);

const char *
harness_governor_pub (const uint8_t *key)
{
    for (int i = 0; i < S_MAX_GOVERNORS; i++) {
        char file [32];
        uint8_t mine [32];
        snprintf (file, sizeof file, i? "gov-%d.pub": "governor.pub", i);
        s_public_key (harness_key (file), mine);
        if (memcmp (mine, key, 32) == 0)
            return harness_key (file);
    }
    fprintf (stdout, "FAIL harness: no harness governor has that key\n");
    exit (1);
}

const char *
harness_keygen (const char *name, const char *role, const char *tenant)
{
    char err [600];
    if (sq_keygen (name, harness_key (""), role, tenant, err, sizeof err)) {
        fprintf (stdout, "FAIL harness: keygen %s: %s\n", name, err);
        exit (1);
    }
    char file [128];
    snprintf (file, sizeof file, "%s.key", name);
    return harness_key (file);
}

int
harness_reload_keys (harness_t *self)
{
    return kill (self->broker.pid, SIGHUP);
}

//  The public key in a key file.
static void
s_public_key (const char *file, uint8_t *key)
{
    sq_cert_t cert;
    char err [600];
    if (sq_cert_load (&cert, file, err, sizeof err)) {
        fprintf (stdout, "FAIL harness: %s\n", err);
        exit (1);
    }
    memcpy (key, cert.public_key, 32);
}

//  --------------------------------------------------------------------------
//  Processes

static void
s_spawn (s_proc_t *proc, const char *label, char *const argv [])
{
    int fds [2];
    if (pipe2 (fds, O_CLOEXEC)) {
        fprintf (stdout, "FAIL harness: pipe: %s\n", strerror (errno));
        exit (1);
    }
    fflush (stdout);
    fflush (stderr);
    pid_t parent = getpid ();
    pid_t pid = fork ();
    if (pid < 0) {
        fprintf (stdout, "FAIL harness: fork: %s\n", strerror (errno));
        exit (1);
    }
    if (pid == 0) {
        //  The child dies with the test even if the test is SIGKILLed.
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (127);
        dup2 (fds [1], STDOUT_FILENO);      //  dup2 clears CLOEXEC on fd 1
        signal (SIGPIPE, SIG_DFL);
        execv (argv [0], argv);
        fprintf (stderr, "harness: cannot exec %s: %s\n", argv [0], strerror (errno));
        _exit (127);
    }
    close (fds [1]);
    memset (proc, 0, sizeof *proc);
    proc->pid = pid;
    proc->out_fd = fds [0];
    snprintf (proc->label, sizeof proc->label, "%s", label);
    s_track (pid);
}

//  Reads one line from the child's stdout within the deadline. Returns a
//  pointer into a static buffer, or NULL on timeout / EOF.
static const char *
s_read_line (s_proc_t *proc, double deadline)
{
    static char line [1024];
    while (1) {
        char *nl = (char *) memchr (proc->buf, '\n', proc->len);
        if (nl) {
            size_t n = (size_t) (nl - proc->buf);
            memcpy (line, proc->buf, n);
            line [n] = 0;
            memmove (proc->buf, nl + 1, proc->len - n - 1);
            proc->len -= n + 1;
            return line;
        }
        if (proc->len == sizeof proc->buf - 1)
            proc->len = 0;          //  absurdly long line: drop it
        double left = deadline - harness_now ();
        if (left <= 0)
            return NULL;
        struct pollfd pfd = { proc->out_fd, POLLIN, 0 };
        int rc = poll (&pfd, 1, (int) (left * 1000) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return NULL;
        ssize_t got = read (proc->out_fd, proc->buf + proc->len, sizeof proc->buf - 1 - proc->len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return NULL;            //  EOF: the process closed stdout or died
        proc->len += (size_t) got;
    }
}

//  Waits for a line starting with `prefix`; other lines are echoed.
static const char *
s_expect_line (s_proc_t *proc, const char *prefix)
{
    double deadline = harness_now () + S_START_TIMEOUT_MS / 1000.0;
    while (1) {
        const char *line = s_read_line (proc, deadline);
        if (!line) {
            int status;
            if (waitpid (proc->pid, &status, WNOHANG) == proc->pid) {
                s_untrack (proc->pid);
                proc->pid = 0;
                fprintf (stdout, "FAIL harness: %s exited (status 0x%x) before printing '%s'\n",
                         proc->label, status, prefix);
            }
            else
                fprintf (stdout, "FAIL harness: %s did not print '%s' within %d ms\n",
                         proc->label, prefix, S_START_TIMEOUT_MS);
            exit (1);
        }
        if (strncmp (line, prefix, strlen (prefix)) == 0)
            return line;
        fprintf (stdout, "  [%s stdout] %s\n", proc->label, line);
    }
}

static const char *
s_bin (const char *var)
{
    const char *path = getenv (var);
    if (!path || !*path) {
        fprintf (stdout, "FAIL harness: %s is not set (run through ctest)\n", var);
        exit (1);
    }
    if (access (path, X_OK)) {
        fprintf (stdout, "FAIL harness: %s=%s is not executable\n", var, path);
        exit (1);
    }
    return path;
}

static const char *
s_log_level (void)
{
    const char *level = getenv ("SQUALL_LOG_LEVEL");
    return level && *level? level: "warn";
}

//  Tasks run as the test's user unless $SQUALL_TEST_TASK_UIDS says
//  otherwise: several tests share a private directory of theirs with their
//  tasks (test_isolation.py tests the other users for real).
static const char *
s_task_uids (void)
{
    const char *uids = getenv ("SQUALL_TEST_TASK_UIDS");
    return uids && *uids? uids: "none";
}

harness_t *
harness_new (int governors, int cpus)
{
    return harness_new_args (governors, cpus, NULL);
}

harness_t *
harness_new_args (int governors, int cpus, const char *const *broker_args)
{
    return harness_new_govs (governors, cpus, broker_args, NULL);
}

harness_t *
harness_new_govs (int governors, int cpus, const char *const *broker_args,
                  const char *const *const *governor_args)
{
    s_install_cleanup ();
    if (governors < 0 || governors > S_MAX_GOVERNORS) {
        fprintf (stdout, "FAIL harness: %d governors is too many\n", governors);
        exit (1);
    }
    harness_t *self = (harness_t *) calloc (1, sizeof *self);
    const char *broker_bin = s_bin ("SQUALL_BROKER_BIN");
    const char *governor_bin = s_bin ("SQUALL_GOVERNOR_BIN");
    double started = harness_now ();

    char *argv [64];
    int argc = 0;
    argv [argc++] = (char *) broker_bin;
    argv [argc++] = (char *) "--listen";
    argv [argc++] = (char *) "tcp://127.0.0.1:*";
    argv [argc++] = (char *) "--log-level";
    argv [argc++] = (char *) s_log_level ();
    if (harness_secure ()) {
        argv [argc++] = (char *) "--secret-key";
        argv [argc++] = (char *) harness_key ("broker.key");
        argv [argc++] = (char *) "--authorized-keys";
        argv [argc++] = (char *) harness_key ("");
    }
    for (int i = 0; broker_args && broker_args [i] && argc < 60; i++)
        argv [argc++] = (char *) broker_args [i];
    argv [argc] = NULL;
    s_spawn (&self->broker, "broker", argv);
    const char *line = s_expect_line (&self->broker, "LISTENING ");
    snprintf (self->endpoint, sizeof self->endpoint, "%s", line + strlen ("LISTENING "));
    if (strncmp (self->endpoint, "tcp://127.0.0.1:", 16) || strchr (self->endpoint, '*')) {
        fprintf (stdout, "FAIL harness: broker printed a strange endpoint '%s'\n", self->endpoint);
        exit (1);
    }

    //  Start all governors first, then collect their READY lines, so they
    //  come up in parallel.
    char cpus_text [16];
    snprintf (cpus_text, sizeof cpus_text, "%d", cpus);
    for (int i = 0; i < governors; i++) {
        char name [16], label [32];
        snprintf (name, sizeof name, "g%d", i);
        snprintf (label, sizeof label, "governor %s", name);
        char *gargv [64] = {
            (char *) governor_bin, (char *) "--broker", self->endpoint,
            (char *) "--cpus", cpus_text, (char *) "--name", name,
            (char *) "--listen-host", (char *) "127.0.0.1",
            (char *) "--advertise", (char *) "127.0.0.1",
            (char *) "--log-level", (char *) s_log_level (), (char *) "--task-uids",
            (char *) s_task_uids (), NULL
        };
        int gargc = 15;
        if (harness_secure ()) {
            gargv [gargc++] = (char *) "--secret-key";
            gargv [gargc++] = (char *) s_governor_key (i);
            gargv [gargc++] = (char *) "--broker-key";
            gargv [gargc++] = (char *) harness_key ("broker.pub");
        }
        for (int a = 0; governor_args && governor_args [i] && governor_args [i][a] && gargc < 63; a++)
            gargv [gargc++] = (char *) governor_args [i][a];
        gargv [gargc] = NULL;
        s_spawn (&self->governor [i], label, gargv);
        self->n_governors = i + 1;
    }
    for (int i = 0; i < governors; i++) {
        line = s_expect_line (&self->governor [i], "READY ");
        unsigned long id = 0;
        char name [64] = "";
        if (sscanf (line, "READY %lu %63s", &id, name) != 2) {
            fprintf (stdout, "FAIL harness: governor %d printed a strange line '%s'\n", i, line);
            exit (1);
        }
        char want [32];
        snprintf (want, sizeof want, "g%d", i);
        if (strcmp (name, want)) {
            fprintf (stdout, "FAIL harness: governor %d said READY with name '%s', not '%s'\n",
                     i, name, want);
            exit (1);
        }
        self->governor_id [i] = (uint32_t) id;
    }
    fprintf (stdout, "harness: broker %s (pid %d) and %d governor(s) x %d cpus up in %.2f s\n",
             self->endpoint, (int) self->broker.pid, governors, cpus, harness_now () - started);
    return self;
}

int
harness_add_governor (harness_t *self, const char *name, int cpus)
{
    return harness_add_governor_args (self, name, cpus, NULL);
}

int
harness_add_governor_args (harness_t *self, const char *name, int cpus,
                           const char *const *extra)
{
    if (self->n_governors >= S_MAX_GOVERNORS) {
        fprintf (stdout, "FAIL harness: too many governors\n");
        exit (1);
    }
    int i = self->n_governors++;
    char cpus_text [16], label [64];
    snprintf (cpus_text, sizeof cpus_text, "%d", cpus);
    snprintf (label, sizeof label, "governor %s", name);
    char *gargv [64] = {
        (char *) s_bin ("SQUALL_GOVERNOR_BIN"), (char *) "--broker", self->endpoint,
        (char *) "--cpus", cpus_text, (char *) "--name", (char *) name,
        (char *) "--listen-host", (char *) "127.0.0.1",
        (char *) "--advertise", (char *) "127.0.0.1",
        (char *) "--log-level", (char *) s_log_level (), (char *) "--task-uids",
        (char *) s_task_uids (), NULL
    };
    int at = 15;
    if (harness_secure ()) {
        gargv [at++] = (char *) "--secret-key";
        gargv [at++] = (char *) s_governor_key (i);
        gargv [at++] = (char *) "--broker-key";
        gargv [at++] = (char *) harness_key ("broker.pub");
    }
    for (int a = 0; extra && extra [a] && at < 62; a++)
        gargv [at++] = (char *) extra [a];
    s_spawn (&self->governor [i], label, gargv);
    const char *line = s_expect_line (&self->governor [i], "READY ");
    unsigned long id = 0;
    if (sscanf (line, "READY %lu", &id) != 1) {
        fprintf (stdout, "FAIL harness: governor %s printed a strange line '%s'\n", name, line);
        exit (1);
    }
    self->governor_id [i] = (uint32_t) id;
    return i;
}

const char *
harness_endpoint (harness_t *self)
{
    return self->endpoint;
}

pid_t
harness_broker_pid (harness_t *self)
{
    return self->broker.pid;
}

pid_t
harness_governor_pid (harness_t *self, int i)
{
    return i >= 0 && i < self->n_governors? self->governor [i].pid: 0;
}

uint32_t
harness_governor_id (harness_t *self, int i)
{
    return i >= 0 && i < self->n_governors? self->governor_id [i]: 0;
}

sq_client_t *
harness_client (harness_t *self)
{
    sq_client_t *client = sq_client_new ();
    CHECK (client, "sq_client_new");
    harness_set_client (client);
    if (harness_secure ())
        CHECK_RC (sq_client_set_keys (client, harness_key ("client.key"), harness_key ("broker.pub")),
                  SQ_OK, "client keys");
    CHECK_RC (sq_client_connect (client, self->endpoint, 10000), SQ_OK,
              "connect to %s", self->endpoint);
    return client;
}

void
harness_client_destroy (sq_client_t **client_p)
{
    if (*client_p == s_client)
        s_client = NULL;
    sq_client_destroy (client_p);
}

static bool
s_reap (s_proc_t *proc, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    while (proc->pid) {
        int status;
        pid_t rc = waitpid (proc->pid, &status, WNOHANG);
        if (rc == proc->pid || (rc < 0 && errno == ECHILD)) {
            s_untrack (proc->pid);
            proc->pid = 0;
            proc->status = rc < 0? 0: status;
            break;
        }
        if (harness_now () > deadline)
            return false;
        harness_pause (10);
    }
    if (proc->out_fd >= 0) {
        close (proc->out_fd);
        proc->out_fd = -1;
    }
    return true;
}

void
harness_kill_governor (harness_t *self, int i, int sig)
{
    if (i < 0 || i >= self->n_governors || !self->governor [i].pid)
        return;
    s_proc_t *proc = &self->governor [i];
    kill (proc->pid, sig);
    if (sig == SIGKILL || sig == SIGTERM) {
        proc->expected_death = true;
        if (!s_reap (proc, S_STOP_TIMEOUT_MS)) {
            kill (proc->pid, SIGKILL);
            s_reap (proc, S_STOP_TIMEOUT_MS);
        }
    }
}

int
harness_governor_exit (harness_t *self, int i, int timeout_ms)
{
    if (i < 0 || i >= self->n_governors)
        return -1;
    s_proc_t *proc = &self->governor [i];
    proc->expected_death = true;
    if (proc->pid && !s_reap (proc, timeout_ms))
        return -1;
    return WIFEXITED (proc->status)? WEXITSTATUS (proc->status): -1;
}

void
harness_set_restart_args (harness_t *self, const char *const *args)
{
    self->restart_args = args;
}

int
harness_restart_broker (harness_t *self)
{
    if (self->broker.pid) {
        kill (self->broker.pid, SIGKILL);
        self->broker.expected_death = true;
        s_reap (&self->broker, S_STOP_TIMEOUT_MS);
    }
    if (self->broker.out_fd >= 0)
        close (self->broker.out_fd);
    char *argv [16] = {
        (char *) s_bin ("SQUALL_BROKER_BIN"), (char *) "--listen", self->endpoint,
        (char *) "--log-level", (char *) s_log_level (), NULL
    };
    int argc = 5;
    if (harness_secure ()) {
        argv [argc++] = (char *) "--secret-key";
        argv [argc++] = (char *) harness_key ("broker.key");
        argv [argc++] = (char *) "--authorized-keys";
        argv [argc++] = (char *) harness_key ("");
    }
    for (int i = 0; self->restart_args && self->restart_args [i] && argc < 15; i++)
        argv [argc++] = (char *) self->restart_args [i];
    argv [argc] = NULL;
    s_spawn (&self->broker, "broker", argv);
    s_expect_line (&self->broker, "LISTENING ");
    return 0;
}

void
harness_governor_expect (harness_t *self, int i, const char *prefix)
{
    if (i < 0 || i >= self->n_governors) {
        fprintf (stdout, "FAIL harness: no governor %d\n", i);
        exit (1);
    }
    s_expect_line (&self->governor [i], prefix);
}

bool
harness_broker_alive (harness_t *self)
{
    if (!self->broker.pid)
        return false;
    int status;
    if (waitpid (self->broker.pid, &status, WNOHANG) == self->broker.pid) {
        s_untrack (self->broker.pid);
        self->broker.pid = 0;
        self->broker.status = status;
        fprintf (stdout, "  broker exited: status 0x%x (%s %d)\n", status,
                 WIFSIGNALED (status)? "signal": "exit code",
                 WIFSIGNALED (status)? WTERMSIG (status): WEXITSTATUS (status));
        return false;
    }
    return kill (self->broker.pid, 0) == 0;
}

//  Stops one process, returns 0 if it exited cleanly.
static int
s_stop (s_proc_t *proc)
{
    if (!proc->pid && proc->out_fd < 0)
        return 0;
    bool was_running = proc->pid != 0;
    if (proc->pid)
        kill (proc->pid, SIGTERM);
    bool timely = s_reap (proc, S_STOP_TIMEOUT_MS);
    if (!timely) {
        fprintf (stdout, "FAIL harness: %s did not exit within %d ms of SIGTERM; killing it\n",
                 proc->label, S_STOP_TIMEOUT_MS);
        kill (proc->pid, SIGKILL);
        s_reap (proc, S_STOP_TIMEOUT_MS);
        return proc->expected_death? 0: -1;
    }
    (void) was_running;
    if (proc->expected_death)
        return 0;
    int status = proc->status;
    if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        return 0;
    if (WIFSIGNALED (status))
        fprintf (stdout, "FAIL harness: %s died of signal %d (%s)\n",
                 proc->label, WTERMSIG (status), strsignal (WTERMSIG (status)));
    else
        fprintf (stdout, "FAIL harness: %s exited with status %d\n",
                 proc->label, WEXITSTATUS (status));
    return -1;
}

int
harness_destroy (harness_t **self_p)
{
    harness_t *self = *self_p;
    if (!self)
        return 0;
    int rc = 0;
    //  Governors first so that the broker sees them leave, then the broker.
    //  SIGINT: they leave at once (SIGTERM would drain them into each
    //  other, as an autoscaler's stop should).
    for (int i = 0; i < self->n_governors; i++)
        if (self->governor [i].pid)
            kill (self->governor [i].pid, SIGINT);
    for (int i = 0; i < self->n_governors; i++)
        if (s_stop (&self->governor [i]))
            rc = -1;
    if (s_stop (&self->broker))
        rc = -1;
    free (self);
    *self_p = NULL;
    return rc;
}

//  --------------------------------------------------------------------------
//  INFO JSON

char *
harness_info (sq_client_t *client)
{
    char *json = NULL;
    CHECK_RC (sq_client_info (client, &json), SQ_OK, "INFO");
    CHECK (json && *json == '{', "INFO returned a JSON object (got '%.80s')", json? json: "(null)");
    return json;
}

//  Skips one JSON value starting at p (string-aware); returns the end.
static const char *
s_skip_value (const char *p)
{
    int depth = 0;
    bool in_string = false;
    for (; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p [1])
                p++;
            else
            if (*p == '"')
                in_string = false;
            continue;
        }
        if (*p == '"')
            in_string = true;
        else
        if (*p == '{' || *p == '[')
            depth++;
        else
        if (*p == '}' || *p == ']') {
            if (depth == 0)
                return p;
            if (--depth == 0)
                return p + 1;
        }
        else
        if (depth == 0 && (*p == ',' ))
            return p;
    }
    return p;
}

//  Finds member `name` of the object that starts at `obj` ('{'), at its top
//  level only; returns a pointer to the value or NULL.
static const char *
s_member (const char *obj, const char *name, size_t name_len)
{
    const char *p = obj;
    while (*p && *p != '{')
        p++;
    if (!*p)
        return NULL;
    p++;
    while (*p) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',')
            p++;
        if (*p != '"')
            return NULL;
        const char *key = p + 1;
        const char *q = key;
        while (*q && *q != '"') {
            if (*q == '\\' && q [1])
                q++;
            q++;
        }
        if (!*q)
            return NULL;
        size_t key_len = (size_t) (q - key);
        p = q + 1;
        while (*p == ' ' || *p == ':' || *p == '\n' || *p == '\t')
            p++;
        if (key_len == name_len && memcmp (key, name, name_len) == 0)
            return p;
        p = s_skip_value (p);
        if (*p == '}')
            return NULL;
    }
    return NULL;
}

long
harness_json_long (const char *json, const char *path)
{
    if (strcmp (path, "tasks.busy") == 0) {
        long assigned = harness_json_long (json, "tasks.assigned");
        long running = harness_json_long (json, "tasks.running");
        return assigned < 0 || running < 0? -1: assigned + running;
    }
    const char *value = json;
    while (value && *path) {
        const char *dot = strchr (path, '.');
        size_t len = dot? (size_t) (dot - path): strlen (path);
        value = s_member (value, path, len);
        path += len + (dot? 1: 0);
    }
    if (!value)
        return -1;
    if (*value == '[') {
        //  An array: count its elements.
        const char *p = value + 1;
        long count = 0;
        while (*p == ' ' || *p == '\n')
            p++;
        if (*p == ']')
            return 0;
        while (*p) {
            count++;
            p = s_skip_value (p);
            if (*p == ']' || !*p)
                break;
            p++;
        }
        return count;
    }
    char *end;
    long number = strtol (value, &end, 10);
    return end == value? -1: number;
}

long
harness_governor_field (const char *json, const char *name, const char *field)
{
    char pattern [80];
    const char *p = strstr (json, "\"governors\"");
    if (p && name) {
        snprintf (pattern, sizeof pattern, "\"%.64s\"", name);
        p = strstr (p, pattern);
    }
    snprintf (pattern, sizeof pattern, "\"%.64s\":", field);
    p = p? strstr (p, pattern): NULL;
    return p? strtol (p + strlen (pattern), NULL, 10): -1;
}

long
harness_tasks_done (const char *json, const char *name)
{
    return harness_governor_field (json, name, "tasks_done");
}

long
harness_info_long (sq_client_t *client, const char *path)
{
    char *json = harness_info (client);
    long value = harness_json_long (json, path);
    sq_free (json);
    return value;
}

long
harness_info_wait (sq_client_t *client, const char *path, long value, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    long seen;
    while (1) {
        seen = harness_info_long (client, path);
        if (seen == value || harness_now () > deadline)
            return seen;
        harness_pause (50);
    }
}

long
harness_info_wait_min (sq_client_t *client, const char *path, long value, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    long seen;
    while (1) {
        seen = harness_info_long (client, path);
        if (seen >= value || harness_now () > deadline)
            return seen;
        harness_pause (50);
    }
}

long
harness_json_active (const char *json)
{
    const char *states [] = { "tasks.waiting", "tasks.ready", "tasks.assigned", "tasks.running" };
    long sum = 0;
    for (size_t i = 0; i < 4; i++) {
        long n = harness_json_long (json, states [i]);
        if (n > 0)
            sum += n;
    }
    return sum;
}

//  --------------------------------------------------------------------------
//  Data

void
harness_pattern (void *buf, size_t size, uint32_t seed)
{
    //  xorshift per 4 bytes: cheap and every offset differs.
    uint8_t *p = (uint8_t *) buf;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < size; i++) {
        if ((i & 3) == 0) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
        }
        p [i] = (uint8_t) (x >> ((i & 3) * 8));
    }
}

void
harness_fetch_expect_at (const char *file, int line, sq_session_t *session,
                         uint32_t id, const void *data, size_t size, int timeout_ms)
{
    void *got = NULL;
    size_t got_size = 0;
    int rc = sq_fetch (session, id, timeout_ms, &got, &got_size, NULL);
    if (rc != SQ_OK)
        harness_fail (file, line, "sq_fetch", "fetch of object %u returned %d (%s)",
                      id, rc, sq_strerror (rc));
    if (got_size != size)
        harness_fail (file, line, "size", "object %u: %zu bytes, expected %zu", id, got_size, size);
    if (size && memcmp (got, data, size)) {
        size_t i = 0;
        while (((const uint8_t *) got) [i] == ((const uint8_t *) data) [i])
            i++;
        harness_fail (file, line, "memcmp", "object %u: bytes differ first at offset %zu "
                      "(got 0x%02x, expected 0x%02x)", id, i,
                      ((const uint8_t *) got) [i], ((const uint8_t *) data) [i]);
    }
    sq_free (got);
}

uint32_t
harness_task (sq_session_t *session, const char *kind,
              const uint32_t *inputs, size_t n_inputs, uint32_t n_outputs,
              void *config, size_t config_size)
{
    uint32_t id = sq_task (session, kind, inputs, n_inputs, n_outputs, config, config_size);
    sq_free (config);
    CHECK (id, "sq_task (%s, %zu inputs, %u outputs)", kind, n_inputs, n_outputs);
    return id;
}

uint32_t
harness_task1 (sq_session_t *session, const char *kind,
               const uint32_t *inputs, size_t n_inputs,
               void *config, size_t config_size)
{
    return sq_output (harness_task (session, kind, inputs, n_inputs, 1, config, config_size), 0);
}

uint32_t
harness_blob (sq_session_t *session, const void *data, size_t size)
{
    uint32_t id = sq_blob (session, data, size, NULL);
    CHECK (id, "sq_blob of %zu bytes", size);
    return id;
}

uint32_t
harness_blob_str (sq_session_t *session, const char *text)
{
    return harness_blob (session, text, strlen (text));
}

void *
harness_pack (harness_pack_fn *fn, void *arg, size_t *size)
{
    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&buf);
    msgpack_packer_init (&pk, &buf, msgpack_sbuffer_write);
    fn (&pk, arg);
    *size = buf.size;
    return msgpack_sbuffer_release (&buf);
}

//  --------------------------------------------------------------------------
//  Raw peer

raw_t *
raw_new (const char *endpoint)
{
    return raw_new_hwm (endpoint, 0);
}

raw_t *
raw_new_hwm (const char *endpoint, int rcvhwm)
{
    if (harness_secure ())
        return raw_new_keyed (endpoint, rcvhwm, harness_key ("client.key"), harness_key ("broker.pub"));
    return raw_new_keyed (endpoint, rcvhwm, NULL, NULL);
}

raw_t *
raw_new_serve (const char *endpoint)
{
    if (harness_secure ())
        return raw_new_keyed (endpoint, 0, harness_key ("client.key"), harness_key ("governor.pub"));
    return raw_new_keyed (endpoint, 0, NULL, NULL);
}

raw_t *
raw_new_governor (const char *endpoint)
{
    if (harness_secure ())
        return raw_new_keyed (endpoint, 0, harness_key ("fake.key"), harness_key ("broker.pub"));
    return raw_new_keyed (endpoint, 0, NULL, NULL);
}

raw_t *
raw_new_keyed (const char *endpoint, int rcvhwm, const char *key_file, const char *server_file)
{
    raw_t *self = (raw_t *) calloc (1, sizeof *self);
    self->sock = zsock_new (ZMQ_DEALER);
    CHECK (self->sock, "raw DEALER socket");
    if (key_file) {
        sq_cert_t mine;
        char err [600];
        CHECK (sq_cert_load (&mine, key_file, err, sizeof err) == 0 && mine.has_secret,
               "raw peer key %s: %s", key_file, err);
        uint8_t server [32];
        s_public_key (server_file, server);

        void *handle = zsock_resolve (self->sock);
        CHECK (zmq_setsockopt (handle, ZMQ_CURVE_SERVERKEY, server, 32) == 0
            && zmq_setsockopt (handle, ZMQ_CURVE_PUBLICKEY, mine.public_key, 32) == 0
            && zmq_setsockopt (handle, ZMQ_CURVE_SECRETKEY, mine.secret_key, 32) == 0,
               "raw peer CURVE options");
    }
    zsock_set_linger (self->sock, 0);
    //  Big sends must not block the test for ever if the broker stops
    //  reading; they fail instead.
    zsock_set_sndtimeo (self->sock, 10000);
    zsock_set_sndhwm (self->sock, 0);
    zsock_set_rcvhwm (self->sock, rcvhwm);
    if (rcvhwm)
        zsock_set_rcvbuf (self->sock, 4096);
    CHECK (zsock_connect (self->sock, "%s", endpoint) == 0, "raw connect %s", endpoint);
    self->handle = zsock_resolve (self->sock);
    sq_msg_init (&self->msg);
    return self;
}

void
raw_destroy (raw_t **self_p)
{
    raw_t *self = *self_p;
    if (!self)
        return;
    sq_msg_close (&self->msg);
    free (self->msg.frames);
    zsock_destroy (&self->sock);
    free (self);
    *self_p = NULL;
}

int
raw_send_bytes (raw_t *self, const void *data, size_t size, bool more)
{
    return zmq_send (self->handle, data, size, more? ZMQ_SNDMORE: 0) < 0? -1: 0;
}

int
raw_send (raw_t *self, sq_wbuf_t *w, zmq_msg_t *payloads, size_t n)
{
    return sq_send (self->handle, NULL, 0, w, payloads, n, 0);
}

int
raw_wait_reply (raw_t *self, uint32_t req, int timeout_ms)
{
    double deadline = harness_now () + timeout_ms / 1000.0;
    while (1) {
        double left = deadline - harness_now ();
        if (left <= 0)
            return -1;
        zmq_pollitem_t item = { self->handle, 0, ZMQ_POLLIN, 0 };
        int rc = zmq_poll (&item, 1, (long) (left * 1000) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        if (sq_msg_recv (&self->msg, self->handle, ZMQ_DONTWAIT, SQ_MAX_FRAMES))
            continue;
        if (self->msg.n == 0)
            continue;
        sq_errbuf_t err;
        if (sq_reply_decode (&self->reply, sq_msg_data (&self->msg, 0),
                             sq_msg_size (&self->msg, 0), &err)) {
            fprintf (stdout, "  raw: undecodable message from broker: %s\n", err.text);
            return -1;
        }
        if (self->reply.req == req)
            return 0;
    }
}

int
raw_drain (raw_t *self)
{
    int count = 0;
    while (sq_msg_recv (&self->msg, self->handle, ZMQ_DONTWAIT, SQ_MAX_FRAMES) == 0)
        count++;
    return count;
}

int
raw_hello (raw_t *self)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    uint32_t req = raw_next_req (self);
    sq_hello_encode_client (&w, req, "raw-test-peer");
    int rc = raw_send (self, &w, NULL, 0);
    sq_wbuf_release (&w);
    if (rc || raw_wait_reply (self, req, 10000))
        return -1;
    return (int) self->reply.code;
}

uint32_t
raw_session_open (raw_t *self)
{
    sq_request_t q = { .type = SQ_MSG_SESSION_OPEN, .req = raw_next_req (self) };
    int code = raw_request (self, &q, 10000);
    CHECK (code == SQ_OK, "raw SESSION_OPEN replied %d", code);
    uint32_t session = 0;
    sq_errbuf_t err;
    CHECK (sq_session_opened_decode (self->reply.body, self->reply.body_size, &session,
                                     self->token, &err) == 0 && session,
           "SESSION_OPEN body is [session id, token]");
    self->session = session;
    return session;
}

int
raw_request (raw_t *self, sq_request_t *request, int timeout_ms)
{
    sq_wbuf_t w;
    sq_wbuf_init (&w);
    sq_request_encode (&w, request);
    int rc = raw_send (self, &w, NULL, 0);
    sq_wbuf_release (&w);
    if (rc || raw_wait_reply (self, request->req, timeout_ms))
        return -1;
    return (int) self->reply.code;
}

char *
raw_reply_message (raw_t *self)
{
    return mpr_strdup (self->reply.message);
}

int
raw_upload_where (raw_t *self, uint32_t id, uint64_t size, uint32_t governor, uint8_t *cap,
                  size_t *cap_len)
{
    sq_request_t q = { .type = SQ_MSG_UPLOAD, .req = raw_next_req (self), .session = self->session,
                       .id = id, .size = size, .governor = governor };
    int code = raw_request (self, &q, 10000);
    *cap_len = 0;
    if (code != SQ_OK)
        return code;
    sq_where_t where;
    sq_errbuf_t err;
    CHECK (sq_where_decode (&where, self->reply.body, self->reply.body_size, &err) == 0,
           "UPLOAD reply: %s", err.text);
    CHECK (where.capability.len <= SQ_CAP_MAX, "capability size");
    if (where.capability.len)
        memcpy (cap, where.capability.ptr, where.capability.len);
    *cap_len = where.capability.len;
    return 0;
}
