/*  sandbox: who a task's process runs as (docs/security.md, "Tasks on a
    governor").

    A governor running as root runs every program and Python executor of a
    tenant under a user id of its own, taken from a range (--task-uids,
    default SANDBOX_DEFAULT_FIRST + SANDBOX_DEFAULT_COUNT), with a group
    id of the same number and no supplementary groups: tasks cannot read
    the governor's key (a file of its own, its /proc entries, its memory,
    its descriptors) nor another tenant's files, processes or executors.
    Tenants are given ids by a hash of their name, probed on in the range
    on a collision, so that governors sharing a machine (and the same
    range) agree on them; a range smaller than the tenants seen fails the
    tasks of the tenants it cannot hold, saying so.

    Without root (or with --task-uids none) tasks keep the governor's
    identity, confined by Landlock when the kernel has it (--task-landlock,
    sandbox_landlock_start); what still holds then is said in
    docs/security.md.

    Every spawned process also starts with no descriptor but those it is
    given, default signal dispositions and an empty mask, and with
    no_new_privs when its identity was switched (a setuid program cannot
    take it back to root).

    Ownership: the sandbox owns its tenant table; one thread (compute) uses
    it. sandbox_fs_enter / leave change that thread's file-system identity
    only (setfsuid), so what the governor writes into or reads from a
    task's directory is checked as if the task did it (a symlink a task
    planted cannot make the governor read the governor's own files). */
#ifndef GOV_SANDBOX_H
#define GOV_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SANDBOX_DEFAULT_FIRST 2000000000u
#define SANDBOX_DEFAULT_COUNT 65536u

typedef struct {
    bool switched;              //  false: the governor's own identity
    uid_t uid;
    gid_t gid;
} sandbox_id_t;

typedef struct _sandbox_t sandbox_t;

//  Tasks run as uids first .. first + count - 1; count 0: as the governor.
sandbox_t *sandbox_new (uint32_t first, uint32_t count);
void sandbox_destroy (sandbox_t **self_p);

//  Whether tasks run under identities other than the governor's.
bool sandbox_switching (const sandbox_t *self);

//  The identity the tenant's tasks run as. 0, or -1 with err (the range
//  holds no id for another tenant).
int sandbox_identity (sandbox_t *self, const char *tenant, sandbox_id_t *id,
                      char *err, size_t err_size);

//  This thread's file-system identity becomes the task's, until leave.
void sandbox_fs_enter (const sandbox_id_t *id);
void sandbox_fs_leave (const sandbox_id_t *id);

//  A directory for the task's own files, made by the governor (in a
//  directory only it may write) and then given to the task's identity,
//  mode 0700. 0, or -1 with errno.
int sandbox_mkdir (const sandbox_id_t *id, const char *path);

//  --task-uids: "FIRST-LAST" or "none" (count 0). 0, or -1 if malformed
//  (a range that includes 0 or wraps, or over 2^31 ids).
int sandbox_parse_range (const char *text, uint32_t *first, uint32_t *count);
//  Whether this process may switch to every id of the range (root, and the
//  range inside its user namespace's uid and gid maps). -1 with err if not.
int sandbox_check_range (uint32_t first, uint32_t count, char *err, size_t err_size);

//  Whether the uid `uid` may run `program` (a path, or a name looked up in
//  $PATH), or enter it if it is a directory: 0, or -1 with err naming what
//  it cannot reach.
int sandbox_can_run (uint32_t uid, const char *program, char *err, size_t err_size);

//  One descriptor the child gets: `from` duplicated to `fd`, or, with
//  from -1, `path` opened (flags, mode) as `fd` before the identity
//  changes (the governor's own files beside the task's directory).
typedef struct {
    int fd;
    int from;
    const char *path;
    int flags;
    mode_t mode;
} sandbox_fd_t;

typedef struct {
    const sandbox_id_t *id;
    char *const *argv;
    char *const *envp;
    bool search_path;           //  argv [0] looked up in PATH (of envp)
    const char *cwd;            //  entered as the task's identity, or NULL
    const sandbox_fd_t *fds;    //  applied in order; any other descriptor
    size_t n_fds;               //  above the highest is closed
    bool new_pgroup;            //  leader of a process group of its own
    //  Under Landlock (sandbox_landlock_start, identity not switched): the
    //  task's own directory (read, write, execute) and one more file it
    //  may read (the executor's script); either NULL.
    const char *own_dir;
    const char *own_file;
} sandbox_spawn_t;

//  Starts the process (clone with CLONE_VM | CLONE_VFORK, as posix_spawn
//  does, so a big governor costs nothing to fork). 0 with *pid, or -1
//  with err saying which step failed and why.
int sandbox_spawn (const sandbox_spawn_t *how, pid_t *pid, char *err, size_t err_size);

//  Landlock (docs/security.md, "Tasks on a governor"): the kernel's ABI
//  version, 0 if it has none (or it is disabled).
int sandbox_landlock_abi (void);

//  From now on every process spawned under the governor's own identity
//  may reach only `read` (read and execute), `write` (everything) and its
//  own_dir / own_file: the governor's other files, its key among them, and
//  other tasks' directories are refused by the kernel. Called once, before
//  any thread starts; the lists are copied (NULL-terminated). 0, or -1
//  with err (no Landlock here, or out of memory).
int sandbox_landlock_start (const char *const *read, const char *const *write,
                            char *err, size_t err_size);
//  Whether sandbox_landlock_start was called; the list tasks may read.
bool sandbox_landlock_on (void);
//  The first of the paths tasks may read or write that holds `path`, or
//  NULL (path made absolute and real by the caller).
const char *sandbox_landlock_reaches (const char *path);
void sandbox_landlock_stop (void);

#endif
