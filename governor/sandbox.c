/*  sandbox: tasks' identities and the spawning of their processes. */
#include "sandbox.h"
#include "grow.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/landlock.h>

//  Rights newer than the header may know (ABI 3, 5).
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define S_LL_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE \
                   | LANDLOCK_ACCESS_FS_READ_DIR)
//  What may be given on a file rather than a directory.
#define S_LL_FILE (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE \
                   | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE \
                   | LANDLOCK_ACCESS_FS_IOCTL_DEV)

//  Set once by sandbox_landlock_start before any thread, read only after.
static struct {
    int abi;
    uint64_t handled;           //  every right this kernel knows
    char **read;                //  NULL-terminated
    char **write;
} s_landlock;

#define S_STACK_SIZE (256u << 10)

typedef struct {
    char *tenant;
    uint32_t uid;
} s_entry_t;

struct _sandbox_t {
    uint32_t first;
    uint32_t count;
    s_entry_t *entries;         //  tenants seen, in no order
    size_t n_entries;
    size_t cap_entries;
};

sandbox_t *
sandbox_new (uint32_t first, uint32_t count)
{
    sandbox_t *self = (sandbox_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->first = first;
    self->count = count;
    return self;
}

void
sandbox_destroy (sandbox_t **self_p)
{
    sandbox_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->n_entries; i++)
        free (self->entries [i].tenant);
    free (self->entries);
    free (self);
    *self_p = NULL;
}

bool
sandbox_switching (const sandbox_t *self)
{
    return self && self->count > 0;
}

//  FNV-1a: the same tenant lands on the same id on every governor.
static uint32_t
s_hash (const char *text)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *) text; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

int
sandbox_identity (sandbox_t *self, const char *tenant, sandbox_id_t *id,
                  char *err, size_t err_size)
{
    *id = (sandbox_id_t) { false, getuid (), getgid () };
    if (!sandbox_switching (self))
        return 0;
    for (size_t i = 0; i < self->n_entries; i++)
        if (strcmp (self->entries [i].tenant, tenant) == 0) {
            *id = (sandbox_id_t) { true, self->entries [i].uid, self->entries [i].uid };
            return 0;
        }
    if (self->n_entries == self->count) {
        snprintf (err, err_size, "this governor's --task-uids range holds %" PRIu32 " tenants, "
                  "all taken: no user id left to run this tenant's tasks apart", self->count);
        return -1;
    }
    //  Probed on from the hash's slot: each tenant has an id no other has.
    uint32_t slot = s_hash (tenant) % self->count;
    for (bool taken = true; taken; ) {
        taken = false;
        for (size_t i = 0; i < self->n_entries && !taken; i++)
            taken = self->entries [i].uid == self->first + slot;
        if (taken)
            slot = (slot + 1) % self->count;
    }
    if (self->n_entries == self->cap_entries
    &&  sq_grow ((void **) &self->entries, &self->cap_entries, self->n_entries + 1,
                 sizeof *self->entries, 8, SIZE_MAX)) {
        snprintf (err, err_size, "out of memory on the governor");
        return -1;
    }
    char *copy = strdup (tenant);
    if (!copy) {
        snprintf (err, err_size, "out of memory on the governor");
        return -1;
    }
    self->entries [self->n_entries++] = (s_entry_t) { copy, self->first + slot };
    *id = (sandbox_id_t) { true, self->first + slot, self->first + slot };
    return 0;
}

//  setfsuid is per thread in the kernel (glibc does not broadcast it to
//  the other threads, unlike setuid): only the compute thread changes.
void
sandbox_fs_enter (const sandbox_id_t *id)
{
    if (!id->switched)
        return;
    syscall (SYS_setfsgid, id->gid);
    syscall (SYS_setfsuid, id->uid);
}

void
sandbox_fs_leave (const sandbox_id_t *id)
{
    if (!id->switched)
        return;
    syscall (SYS_setfsuid, geteuid ());
    syscall (SYS_setfsgid, getegid ());
}

int
sandbox_mkdir (const sandbox_id_t *id, const char *path)
{
    if (mkdir (path, 0700))
        return -1;
    if (!id->switched)
        return 0;
    //  Ours until given: nothing of the task can have raced into it.
    if (chown (path, id->uid, id->gid)) {
        int saved = errno;
        rmdir (path);
        errno = saved;
        return -1;
    }
    return 0;
}

int
sandbox_parse_range (const char *text, uint32_t *first, uint32_t *count)
{
    if (strcmp (text, "none") == 0) {
        *first = *count = 0;
        return 0;
    }
    char *end;
    errno = 0;
    if (*text < '0' || *text > '9')
        return -1;
    unsigned long long a = strtoull (text, &end, 10);
    if (errno || *end != '-' || end [1] < '0' || end [1] > '9')
        return -1;
    unsigned long long b = strtoull (end + 1, &end, 10);
    if (errno || *end || a == 0 || b < a || b >= UINT32_MAX || b - a >= (1ull << 31))
        return -1;
    *first = (uint32_t) a;
    *count = (uint32_t) (b - a + 1);
    return 0;
}

//  Whether [first, first + count) lies in one line of a /proc/self/*_map.
static bool
s_mapped (const char *file, uint32_t first, uint32_t count)
{
    FILE *f = fopen (file, "re");
    if (!f)
        return false;
    unsigned long long inside, outside, length;
    bool ok = false;
    while (!ok && fscanf (f, "%llu %llu %llu", &inside, &outside, &length) == 3)
        ok = first >= inside && (unsigned long long) first + count <= inside + length;
    fclose (f);
    return ok;
}

int
sandbox_check_range (uint32_t first, uint32_t count, char *err, size_t err_size)
{
    if (count == 0)
        return 0;
    if (geteuid () != 0) {
        snprintf (err, err_size, "running tasks as other users needs root (this governor "
                  "runs as uid %d)", (int) geteuid ());
        return -1;
    }
    if (!s_mapped ("/proc/self/uid_map", first, count)
    ||  !s_mapped ("/proc/self/gid_map", first, count)) {
        snprintf (err, err_size, "user ids %" PRIu32 "-%" PRIu32 " are not all mapped in this "
                  "user namespace (/proc/self/uid_map, gid_map)", first, first + count - 1);
        return -1;
    }
    return 0;
}

int
sandbox_can_run (uint32_t uid, const char *program, char *err, size_t err_size)
{
    char path [PATH_MAX];
    bool found = false;
    if (strchr (program, '/'))
        found = snprintf (path, sizeof path, "%s", program) < (int) sizeof path;
    const char *dirs = getenv ("PATH");
    for (const char *dir = dirs? dirs: "/usr/bin:/bin"; !found && *dir; ) {
        size_t len = strcspn (dir, ":");
        if (snprintf (path, sizeof path, "%.*s/%s", (int) len, len? dir: ".", program)
                < (int) sizeof path)
            found = access (path, X_OK) == 0;
        dir += len + (dir [len] == ':');
    }
    if (!found) {
        snprintf (err, err_size, "%s: not found", program);
        return -1;
    }
    //  Looked at with the task's rights (the file-system uid is this
    //  thread's, and AT_EACCESS checks with it): every directory on the
    //  way, and the file.
    sandbox_id_t id = { true, uid, uid };
    sandbox_fs_enter (&id);
    int rc = faccessat (AT_FDCWD, path, X_OK, AT_EACCESS);
    int saved = errno;
    sandbox_fs_leave (&id);
    if (rc) {
        snprintf (err, err_size, "%s is out of reach of user id %u: %s", path, uid,
                  strerror (saved));
        return -1;
    }
    return 0;
}

int
sandbox_landlock_abi (void)
{
    long abi = syscall (SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi > 0? (int) abi: 0;
}

static char **
s_strv_copy (const char *const *list)
{
    size_t n = 0;
    while (list && list [n])
        n++;
    char **copy = (char **) calloc (n + 1, sizeof *copy);
    for (size_t i = 0; copy && i < n; i++)
        if (!(copy [i] = strdup (list [i]))) {
            while (i--)
                free (copy [i]);
            free (copy);
            return NULL;
        }
    return copy;
}

static void
s_strv_destroy (char ***list_p)
{
    for (size_t i = 0; *list_p && (*list_p) [i]; i++)
        free ((*list_p) [i]);
    free (*list_p);
    *list_p = NULL;
}

int
sandbox_landlock_start (const char *const *read, const char *const *write,
                        char *err, size_t err_size)
{
    int abi = sandbox_landlock_abi ();
    if (abi == 0) {
        snprintf (err, err_size, "this kernel has no Landlock (or it is disabled): %s",
                  strerror (errno));
        return -1;
    }
    //  ABI 1 knows rights 0-12; 2 adds REFER, 3 TRUNCATE, 5 IOCTL_DEV.
    uint64_t handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;
    if (abi >= 2)
        handled |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        handled |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    sandbox_landlock_stop ();
    s_landlock.read = s_strv_copy (read);
    s_landlock.write = s_strv_copy (write);
    if (!s_landlock.read || !s_landlock.write) {
        sandbox_landlock_stop ();
        snprintf (err, err_size, "out of memory on the governor");
        return -1;
    }
    s_landlock.abi = abi;
    s_landlock.handled = handled;
    return 0;
}

bool
sandbox_landlock_on (void)
{
    return s_landlock.abi > 0;
}

//  Whether `path` is `top` or lies beneath it.
static bool
s_beneath (const char *path, const char *top)
{
    size_t len = strlen (top);
    while (len > 1 && top [len - 1] == '/')
        len--;
    if (len == 1 && top [0] == '/')
        return true;
    return strncmp (path, top, len) == 0 && (path [len] == 0 || path [len] == '/');
}

const char *
sandbox_landlock_reaches (const char *path)
{
    for (size_t i = 0; s_landlock.read && s_landlock.read [i]; i++)
        if (s_beneath (path, s_landlock.read [i]))
            return s_landlock.read [i];
    for (size_t i = 0; s_landlock.write && s_landlock.write [i]; i++)
        if (s_beneath (path, s_landlock.write [i]))
            return s_landlock.write [i];
    return NULL;
}

void
sandbox_landlock_stop (void)
{
    s_strv_destroy (&s_landlock.read);
    s_strv_destroy (&s_landlock.write);
    s_landlock.abi = 0;
    s_landlock.handled = 0;
}

//  --------------------------------------------------------------------------
//  The child, between clone and exec. It shares the governor's memory (the
//  parent thread waits, CLONE_VFORK) and so calls only system calls: the
//  credentials by raw syscall, since glibc's setuid would try to change
//  every thread of the governor too.

typedef struct {
    const sandbox_spawn_t *how;
    int max_fd;
    int error;                  //  errno of the step that failed, 0 if none
    const char *step;
} s_child_t;

//  In the child: `rights` beneath `path` (only a file's rights on a
//  file). A path that does not exist is skipped: not every system has
//  /lib32. 0, or -1 with errno.
__attribute__ ((no_sanitize_address))
static int
s_ll_rule (int ruleset, const char *path, uint64_t rights)
{
    int fd = open (path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == EACCES? 0: -1;
    struct stat st;
    if (fstat (fd, &st)) {
        close (fd);
        return -1;
    }
    if (!S_ISDIR (st.st_mode))
        rights &= S_LL_FILE;
    struct landlock_path_beneath_attr beneath = {
        .allowed_access = rights & s_landlock.handled, .parent_fd = fd
    };
    long rc = syscall (SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0);
    int saved = errno;
    close (fd);
    errno = saved;
    return rc? -1: 0;
}

//  In the child, after no_new_privs: the file system it may reach from
//  now on, it and all it starts. A fresh ruleset each time (one shared
//  would gather every task's directory).
__attribute__ ((no_sanitize_address))
static int
s_ll_restrict (const sandbox_spawn_t *how)
{
    struct landlock_ruleset_attr attr = { .handled_access_fs = s_landlock.handled };
    int ruleset = (int) syscall (SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && s_landlock.read [i]; i++)
        rc = s_ll_rule (ruleset, s_landlock.read [i], S_LL_READ);
    for (size_t i = 0; rc == 0 && s_landlock.write [i]; i++)
        rc = s_ll_rule (ruleset, s_landlock.write [i], ~0ull);
    //  Device nodes are read and written (/dev/null, a terminal), never made.
    if (rc == 0)
        rc = s_ll_rule (ruleset, "/dev", S_LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE
                        | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV);
    if (rc == 0 && how->own_dir)
        rc = s_ll_rule (ruleset, how->own_dir, ~0ull);
    if (rc == 0 && how->own_file)
        rc = s_ll_rule (ruleset, how->own_file, S_LL_READ);
    if (rc == 0)
        rc = syscall (SYS_landlock_restrict_self, ruleset, 0)? -1: 0;
    int saved = errno;
    close (ruleset);
    errno = saved;
    return rc;
}

__attribute__ ((no_sanitize_address))
static int
s_child (void *arg)
{
    s_child_t *c = (s_child_t *) arg;
    const sandbox_spawn_t *how = c->how;
    struct sigaction dfl;
    memset (&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction (sig, &dfl, NULL);
    if (how->new_pgroup && setpgid (0, 0)) {
        c->step = "setpgid";
        goto fail;
    }
    for (size_t i = 0; i < how->n_fds; i++) {
        const sandbox_fd_t *f = &how->fds [i];
        if (f->from >= 0) {
            if (f->from == f->fd) {
                if (fcntl (f->fd, F_SETFD, 0) < 0) {
                    c->step = "fcntl";
                    goto fail;
                }
            }
            else
            if (dup2 (f->from, f->fd) < 0) {
                c->step = "dup2";
                goto fail;
            }
            continue;
        }
        int fd = open (f->path, f->flags, f->mode);
        if (fd < 0) {
            c->step = f->path;
            goto fail;
        }
        if (fd != f->fd) {
            if (dup2 (fd, f->fd) < 0) {
                c->step = "dup2";
                goto fail;
            }
            close (fd);
        }
    }
    //  Nothing of the governor's stays open (its sockets, its lifeline
    //  pipe, any file it has open), close-on-exec or not.
    if (syscall (SYS_close_range, (unsigned) c->max_fd + 1, ~0u, 0) && errno == ENOSYS) {
        struct rlimit lim;
        long max = getrlimit (RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                 ? (long) lim.rlim_cur: 65536;
        for (long fd = c->max_fd + 1; fd < max; fd++)
            close ((int) fd);
    }
    if (how->id->switched) {
        gid_t gid = how->id->gid;
        uid_t uid = how->id->uid;
        if (syscall (SYS_setgroups, 0, NULL)
        ||  syscall (SYS_setresgid, gid, gid, gid)
        ||  syscall (SYS_setresuid, uid, uid, uid)) {
            c->step = "switching to the task's user id";
            goto fail;
        }
        if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
            c->step = "prctl (PR_SET_NO_NEW_PRIVS)";
            goto fail;
        }
    }
    else
    if (s_landlock.abi > 0) {
        //  Landlock needs no_new_privs without CAP_SYS_ADMIN.
        if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
            c->step = "prctl (PR_SET_NO_NEW_PRIVS)";
            goto fail;
        }
        if (s_ll_restrict (how)) {
            c->step = "Landlock";
            goto fail;
        }
    }
    if (how->cwd && chdir (how->cwd)) {
        c->step = "chdir";
        goto fail;
    }
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    if (how->search_path)
        execvpe (how->argv [0], how->argv, how->envp);
    else
        execve (how->argv [0], how->argv, how->envp);
    c->step = NULL;             //  exec itself: the caller names the program
fail:
    c->error = errno? errno: EINVAL;
    _exit (127);
}

int
sandbox_spawn (const sandbox_spawn_t *how, pid_t *pid, char *err, size_t err_size)
{
    s_child_t c = { how, 2, 0, NULL };
    for (size_t i = 0; i < how->n_fds; i++)
        if (how->fds [i].fd > c.max_fd)
            c.max_fd = how->fds [i].fd;
    void *stack = mmap (NULL, S_STACK_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        snprintf (err, err_size, "cannot start the process: %s", strerror (errno));
        return -1;
    }
    //  No handler of ours may run in the child before it resets them.
    sigset_t all, saved;
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &saved);
    int child = clone (s_child, (char *) stack + S_STACK_SIZE,
                       CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
    int clone_errno = errno;
    pthread_sigmask (SIG_SETMASK, &saved, NULL);
    munmap (stack, S_STACK_SIZE);
    if (child < 0) {
        snprintf (err, err_size, "cannot start the process: clone: %s", strerror (clone_errno));
        return -1;
    }
    if (c.error) {
        //  It did not get to exec: reap it here, it is nobody's to watch.
        while (waitpid (child, NULL, 0) < 0 && errno == EINTR)
            ;
        if (c.step)
            snprintf (err, err_size, "%s: %s", c.step, strerror (c.error));
        else
            snprintf (err, err_size, "%s", strerror (c.error));
        errno = c.error;
        return -1;
    }
    *pid = child;
    return 0;
}
