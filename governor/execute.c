/*  execute: the program started by sandbox_spawn, a pidfd to watch the child. */
#include "execute.h"
#include "sandbox.h"
#include <dirent.h>
#include "dirobj.h"
#include "files.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define S_STDERR_TAIL 2000

struct _execute_t {
    pid_t pid;                  //  0 once reaped
    int pidfd;
    int status;
    char *dir;                  //  the task's own directory
    char *cwd;                  //  the program's: dir, beneath it or elsewhere
    char *stdin_path;           //  files beside it, outside the program's view
    char *stdout_path;
    char *stderr_path;
    bool stderr_logged;         //  stderr_path is the task's log (tasklog.c), not ours
    const int *log_fds;         //  while it starts: its fds 1 and 2, or NULL
    char *argv0;
    char *home;                 //  "HOME=dir"
    //  Streams: the governor's ends of the pipes that are the program's
    //  stdin and stdout when those are streams, -1 otherwise (or once
    //  taken by execute_take_pipe).
    int stdin_pipe;
    int stdout_pipe;
    bool sigpipe_ok;
    sandbox_id_t id;            //  who the program runs as (sandbox.h)
};

static char *
s_printf (const char *format, ...) __attribute__ ((format (printf, 1, 2)));
static char *
s_printf (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    char *text = NULL;
    if (vasprintf (&text, format, args) < 0)
        text = NULL;
    va_end (args);
    return text;
}

static char *
s_join (const char *dir, mpr_str_t name)
{
    return s_printf ("%s/%.*s", dir, (int) name.len, name.ptr);
}

char *
execute_expand_cwd (const char *text, size_t len, const char *cwd)
{
    static const char mark [] = "%{CWD}";
    size_t cwd_len = strlen (cwd), n = 0;
    for (size_t i = 0; i + 6 <= len; i++)
        if (memcmp (text + i, mark, 6) == 0) {
            n++;
            i += 5;
        }
    //  Lengths are the config's (at most SQ_MAX_CONFIG each) and the
    //  directory's: the product cannot overflow a size_t.
    char *out = (char *) malloc (len + n * cwd_len + 1);
    if (!out)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < len; ) {
        if (i + 6 <= len && memcmp (text + i, mark, 6) == 0) {
            memcpy (out + at, cwd, cwd_len);
            at += cwd_len;
            i += 6;
        }
        else
            out [at++] = text [i++];
    }
    out [at] = 0;
    return out;
}

//  NULL-terminated array of NUL-terminated copies, %{CWD} replaced by cwd,
//  `extra` slots at the end left for the caller (environ is appended that
//  way).
static char **
s_strv (const mpr_str_t *strings, uint32_t n, size_t extra, const char *cwd)
{
    char **v = (char **) calloc (n + extra + 1, sizeof (char *));
    if (!v)
        return NULL;
    for (uint32_t i = 0; i < n; i++)
        if (!(v [i] = execute_expand_cwd (strings [i].ptr, strings [i].len, cwd))) {
            for (uint32_t j = 0; j < i; j++)
                free (v [j]);
            free (v);
            return NULL;
        }
    return v;
}

static void
s_strv_free (char **v, uint32_t n_owned)
{
    for (uint32_t i = 0; v && i < n_owned; i++)
        free (v [i]);
    free (v);
}

//  stdin's file, beside the task's directory: the governor's, readable by
//  nobody else (called with the task's file-system identity).
static int
s_write_beside (execute_t *self, const char *path, const sq_blob_t *blob)
{
    sandbox_fs_leave (&self->id);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = fd < 0 || files_write_fd (fd, blob)? -1: 0;
    int saved = errno;
    if (fd >= 0)
        close (fd);
    sandbox_fs_enter (&self->id);
    errno = saved;
    return rc;
}

static int
s_write_inputs (execute_t *self, task_t *task, store_t *store, char *err, size_t err_size)
{
    for (uint32_t i = 0; i < task->n_inputs; i++) {
        if ((int32_t) i == task->stream_in)
            continue;           //  a pipe, fed as the stream comes
        const char *type = NULL;
        sq_blob_t *blob = store_get (store, task->inputs [i], &type);
        bool is_stdin = (int32_t) i == task->conf.stdin_input;
        mpr_str_t rel = task->conf.in_paths [i];
        if (rel.len == 0 && !is_stdin)
            continue;
        if (dirobj_is (type)) {
            //  A directory object becomes a directory tree at its path.
            char *dir = rel.len? s_join (self->cwd, rel): NULL;
            int rc = -1;
            if (!dir)
                snprintf (err, err_size, "execute: input %u is a directory: it needs an in_path", i);
            else
            if (files_mkparents (dir))
                snprintf (err, err_size, "execute: cannot write input %u to '%.*s': %s", i,
                          (int) rel.len, rel.ptr, strerror (errno));
            else
            if (!(blob = store_get_flat (store, task->inputs [i], NULL)))
                snprintf (err, err_size, "execute: out of memory for input %u", i);
            else
                rc = dirobj_unpack (sq_blob_data (blob), sq_blob_size (blob), dir, err, err_size);
            free (dir);
            if (rc)
                return -1;
            continue;
        }
        char *path = rel.len? s_join (self->cwd, rel): strdup (self->stdin_path);
        if (!path
        ||  (rel.len? files_mkparents (path) || files_write (path, blob)
                    : s_write_beside (self, path, blob))) {
            snprintf (err, err_size, "execute: cannot write input %u to '%.*s': %s", i,
                      (int) rel.len, rel.ptr, strerror (errno));
            free (path);
            return -1;
        }
        if (is_stdin && rel.len) {
            free (self->stdin_path);
            self->stdin_path = path;        //  the program's own file is its stdin
        }
        else
            free (path);
    }
    return 0;
}

static int
s_spawn (execute_t *self, task_t *task, char *err, size_t err_size)
{
    size_t n_environ = 0;
    while (environ [n_environ])
        n_environ++;
    //  The devices it holds (governor --gpus) come before everything: a
    //  task's own CUDA_VISIBLE_DEVICES must not reach another's device.
    uint32_t n_gpu = task->gpu_names? 2: 0;
    uint32_t n_own = task->conf.n_env + n_gpu;
    char **argv = s_strv (task->conf.args, task->conf.n_args, 0, self->cwd);
    char **envp = s_strv (task->conf.env, task->conf.n_env, n_gpu + n_environ + 1, self->cwd);
    if (envp && n_gpu) {
        memmove (envp + n_gpu, envp, task->conf.n_env * sizeof (char *));
        envp [0] = s_printf ("CUDA_VISIBLE_DEVICES=%s", task->gpu_names);
        envp [1] = s_printf ("SQUALL_GPUS=%s", task->gpu_names);
    }
    if (!argv || !envp || (n_gpu && (!envp [0] || !envp [1]))) {
        s_strv_free (argv, task->conf.n_args);
        s_strv_free (envp, envp? n_own: 0);
        snprintf (err, err_size, "execute: out of memory");
        return -1;
    }
    //  The task's entries come first: getenv takes the first match, so they
    //  override the governor's own variables of the same name. A program
    //  under a user id of its own has its directory as HOME (the
    //  governor's is not its to write).
    size_t at = n_own;
    if (self->id.switched)
        envp [at++] = self->home;
    for (size_t i = 0; i < n_environ; i++)
        if (!self->id.switched || strncmp (environ [i], "HOME=", 5))
            envp [at++] = environ [i];      //  shells take a name's last entry
    //  Only one of each: sh takes the last of the same name, getenv the first.
    if (n_gpu) {
        size_t out = n_gpu;
        uint32_t owned = n_own;
        for (size_t i = n_gpu; envp [i]; i++) {
            if (strncmp (envp [i], "CUDA_VISIBLE_DEVICES=", 21) == 0
            ||  strncmp (envp [i], "SQUALL_GPUS=", 12) == 0) {
                if (i < n_own) {
                    free (envp [i]);
                    owned--;
                }
                continue;
            }
            envp [out++] = envp [i];
        }
        envp [out] = NULL;
        n_own = owned;
    }

    //  Streams are pipes: the program's ends go to it, ours stay here.
    int in_pipe [2] = { -1, -1 }, out_pipe [2] = { -1, -1 };
    if ((task->stream_in >= 0 && pipe2 (in_pipe, O_CLOEXEC))
    ||  (task->stream_out >= 0 && pipe2 (out_pipe, O_CLOEXEC))) {
        snprintf (err, err_size, "execute: cannot make a pipe: %s", strerror (errno));
        for (int i = 0; i < 2; i++) {
            if (in_pipe [i] >= 0)
                close (in_pipe [i]);
            if (out_pipe [i] >= 0)
                close (out_pipe [i]);
        }
        s_strv_free (argv, task->conf.n_args);
        s_strv_free (envp, n_own);
        return -1;
    }
    if (out_pipe [0] >= 0)
        fcntl (out_pipe [0], F_SETPIPE_SZ, 1 << 20);    //  fuller chunks; best effort
    if (in_pipe [1] >= 0)
        fcntl (in_pipe [1], F_SETPIPE_SZ, 1 << 20);
    //  stdout and stderr are the governor's files beside the directory
    //  (opened before the identity changes), readable by nobody else: a
    //  task of another tenant may guess their names.
    sandbox_fd_t fds [3] = {
        in_pipe [0] >= 0? (sandbox_fd_t) { 0, in_pipe [0], NULL, 0, 0 }
            : (sandbox_fd_t) { 0, -1, task->conf.stdin_input >= 0? self->stdin_path: "/dev/null",
                               O_RDONLY, 0 },
        out_pipe [1] >= 0? (sandbox_fd_t) { 1, out_pipe [1], NULL, 0, 0 }
            : task->conf.stdout_output < 0 && self->log_fds
            ? (sandbox_fd_t) { 1, self->log_fds [0], NULL, 0, 0 }
            : (sandbox_fd_t) { 1, -1, task->conf.stdout_output >= 0? self->stdout_path: "/dev/null",
                               O_WRONLY | O_CREAT | O_TRUNC, 0600 },
        self->log_fds? (sandbox_fd_t) { 2, self->log_fds [1], NULL, 0, 0 }
            : (sandbox_fd_t) { 2, -1, self->stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600 }
    };
    //  In its own process group, so that a kill takes its children too.
    sandbox_spawn_t how = {
        .id = &self->id, .argv = argv, .envp = envp, .search_path = true,
        .cwd = self->cwd, .fds = fds, .n_fds = 3, .new_pgroup = true, .own_dir = self->dir
    };
    char why [512];
    int rc = sandbox_spawn (&how, &self->pid, why, sizeof why);
    s_strv_free (argv, task->conf.n_args);
    s_strv_free (envp, n_own);
    //  The program's ends are its own now: ours must not hold them open.
    if (in_pipe [0] >= 0)
        close (in_pipe [0]);
    if (out_pipe [1] >= 0)
        close (out_pipe [1]);
    self->stdin_pipe = in_pipe [1];
    self->stdout_pipe = out_pipe [0];
    if (rc) {
        self->pid = 0;
        if (strncmp (why, "chdir:", 6) == 0)
            snprintf (err, err_size, "execute: cannot run '%s' in its working directory "
                      "'%s': %s", self->argv0, self->cwd, why + 7);
        else
            snprintf (err, err_size, "execute: cannot run '%s': %s", self->argv0, why);
        return -1;
    }
    self->pidfd = (int) syscall (SYS_pidfd_open, self->pid, 0);
    if (self->pidfd >= 0)
        fcntl (self->pidfd, F_SETFD, FD_CLOEXEC);
    return 0;
}

//  The working directory of the config: made beneath the task's own
//  directory when relative; else one the task may enter, and reach under
//  Landlock. 0, or -1 with err (called as the governor).
static int
s_working_dir (execute_t *self, task_t *task, char *err, size_t err_size)
{
    mpr_str_t cwd = task->conf.cwd;
    if (cwd.len == 0) {
        if ((self->cwd = strdup (self->dir)))
            return 0;
        snprintf (err, err_size, "execute: out of memory");
        return -1;
    }
    if (cwd.ptr [0] != '/') {
        //  files_mkparents makes the parents of a file: of "cwd/.".
        self->cwd = s_printf ("%s/%.*s", self->dir, (int) cwd.len, cwd.ptr);
        char *dot = self->cwd? s_printf ("%s/.", self->cwd): NULL;
        int rc = -1;
        if (dot) {
            sandbox_fs_enter (&self->id);
            rc = files_mkparents (dot);
            sandbox_fs_leave (&self->id);
            if (rc)
                snprintf (err, err_size, "execute: cannot create its working directory "
                          "'%.*s': %s", (int) cwd.len, cwd.ptr, strerror (errno));
        }
        else
            snprintf (err, err_size, "execute: out of memory");
        free (dot);
        return rc;
    }
    if (!(self->cwd = mpr_strdup (cwd))) {
        snprintf (err, err_size, "execute: out of memory");
        return -1;
    }
    //  Entered with the task's rights: a directory only the governor may
    //  enter is no way around them.
    sandbox_fs_enter (&self->id);
    int fd = open (self->cwd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int saved = errno;
    sandbox_fs_leave (&self->id);
    if (fd < 0) {
        snprintf (err, err_size, "execute: working directory '%s': %s", self->cwd,
                  strerror (saved));
        return -1;
    }
    //  Under Landlock the kernel would let the program enter it and then
    //  refuse every file: said now, once. The real path: a link must not
    //  lead elsewhere than it seems.
    char link [64], real [4096];
    snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink (link, real, sizeof real - 1);
    close (fd);
    if (sandbox_landlock_on () && !self->id.switched
    &&  (n <= 0 || (real [n] = 0, !sandbox_landlock_reaches (real)))) {
        snprintf (err, err_size, "execute: working directory '%s' is out of the tasks' reach "
                  "on this governor (Landlock: its --task-read paths, /tmp, /var/tmp)", self->cwd);
        return -1;
    }
    return 0;
}

execute_t *
execute_new (task_t *task, const char *workdir, sandbox_t *sandbox, char *err, size_t err_size)
{
    execute_t *self = (execute_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_size, "execute: out of memory");
        return NULL;
    }
    self->pidfd = -1;
    self->stdin_pipe = self->stdout_pipe = -1;
    self->dir = s_printf ("%s/task-%" PRIx64 "-%u", workdir, task->key, task->attempt);
    self->stdin_path = s_printf ("%s.stdin", self->dir? self->dir: "");
    self->stdout_path = s_printf ("%s.stdout", self->dir? self->dir: "");
    self->stderr_path = s_printf ("%s.stderr", self->dir? self->dir: "");
    self->argv0 = mpr_strdup (task->conf.args [0]);
    self->home = s_printf ("HOME=%s", self->dir? self->dir: "");
    if (!self->dir || !self->stdin_path || !self->stdout_path || !self->stderr_path
    ||  !self->argv0 || !self->home) {
        snprintf (err, err_size, "execute: out of memory");
        execute_destroy (&self);
        return NULL;
    }
    //  A leftover of an earlier governor with the same pid must not leak in.
    files_rmtree (self->dir);
    if (sandbox_identity (sandbox, task->tenant, &self->id, err, err_size)) {
        execute_destroy (&self);
        return NULL;
    }
    if (sandbox_mkdir (&self->id, self->dir)) {
        snprintf (err, err_size, "execute: cannot create '%s': %s", self->dir, strerror (errno));
        execute_destroy (&self);
        return NULL;
    }
    if (s_working_dir (self, task, err, err_size)) {
        execute_destroy (&self);
        return NULL;
    }
    return self;
}

const char *
execute_cwd (execute_t *self)
{
    return self->cwd;
}

int
execute_start (execute_t *self, task_t *task, store_t *store, const int *log_fds,
               const char *stderr_log, char *err, size_t err_size)
{
    if (log_fds && stderr_log) {
        char *path = strdup (stderr_log);
        if (!path) {
            snprintf (err, err_size, "execute: out of memory");
            return -1;
        }
        free (self->stderr_path);
        self->stderr_path = path;
        self->stderr_logged = true;
        self->log_fds = log_fds;
    }
    //  Inputs are written with the task's rights, and so owned by it.
    sandbox_fs_enter (&self->id);
    int rc = s_write_inputs (self, task, store, err, err_size);
    sandbox_fs_leave (&self->id);
    rc = rc || s_spawn (self, task, err, err_size);
    self->log_fds = NULL;       //  the caller's
    return rc? -1: 0;
}

void
execute_destroy (execute_t **self_p)
{
    execute_t *self = *self_p;
    if (!self)
        return;
    if (self->pid > 0) {
        execute_kill (self);
        while (waitpid (self->pid, &self->status, 0) < 0 && errno == EINTR)
            ;
    }
    if (self->pidfd >= 0)
        close (self->pidfd);
    if (self->stdin_pipe >= 0)
        close (self->stdin_pipe);
    if (self->stdout_pipe >= 0)
        close (self->stdout_pipe);
    if (self->dir) {
        files_rmtree (self->dir);
        unlink (self->stdout_path);
        if (!self->stderr_logged)
            unlink (self->stderr_path);
        //  stdin_path may be the program's own input file, inside dir.
        unlink (self->stdin_path);
    }
    free (self->dir);
    free (self->cwd);
    free (self->stdin_path);
    free (self->stdout_path);
    free (self->stderr_path);
    free (self->argv0);
    free (self->home);
    free (self);
    *self_p = NULL;
}

void
execute_allow_sigpipe (execute_t *self)
{
    self->sigpipe_ok = true;
}

int
execute_take_pipe (execute_t *self, bool input)
{
    int *fd = input? &self->stdin_pipe: &self->stdout_pipe;
    int taken = *fd;
    *fd = -1;
    return taken;
}

int
execute_fd (execute_t *self)
{
    return self->pidfd;
}

int
execute_poll (execute_t *self)
{
    if (self->pid <= 0)
        return 1;
    pid_t rc = waitpid (self->pid, &self->status, WNOHANG);
    if (rc == self->pid || (rc < 0 && errno == ECHILD)) {
        self->pid = 0;
        return 1;
    }
    return 0;
}

void
execute_kill (execute_t *self)
{
    if (self->pid > 0) {
        kill (-self->pid, SIGKILL);
        kill (self->pid, SIGKILL);
    }
}

//  The last bytes of the program's stderr, for the failure message.
static void
s_stderr_tail (execute_t *self, char *tail, size_t tail_size)
{
    tail [0] = 0;
    int fd = open (self->stderr_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat (fd, &st) == 0) {
        off_t from = st.st_size > (off_t) (tail_size - 1)? st.st_size - (off_t) (tail_size - 1): 0;
        ssize_t n = pread (fd, tail, tail_size - 1, from);
        tail [n > 0? n: 0] = 0;
    }
    close (fd);
}

//  Output j of a task whose program exited well, into task->results.
static int
s_output (execute_t *self, task_t *task, uint32_t j, char *err, size_t err_size)
{
    mpr_str_t rel = task->conf.out_paths [j];
    bool is_stdout = (int32_t) j == task->conf.stdout_output;
    char *path = is_stdout? strdup (self->stdout_path): s_join (self->cwd, rel);
    if (!path) {
        snprintf (err, err_size, "execute: out of memory");
        return -1;
    }
    struct stat st;
    if (stat (path, &st) && errno == ENOENT) {
        snprintf (err, err_size, "execute: output file '%.*s' was not produced",
                  (int) rel.len, rel.ptr);
        free (path);
        return -1;
    }
    if (dirobj_is (task->out_types [j])) {
        //  Declared a directory object: the tree at its path, packed.
        task->results [j] = S_ISDIR (st.st_mode)? dirobj_pack (path, err, err_size): NULL;
        if (!task->results [j] && !S_ISDIR (st.st_mode))
            snprintf (err, err_size, "execute: output '%.*s' is declared \"dir\" but is "
                      "not a directory", (int) rel.len, rel.ptr);
        free (path);
        return task->results [j]? 0: -1;
    }
    //  The mapping outlives the file, which goes with the directory.
    task->results [j] = sq_blob_map_file (path);
    if (!task->results [j]) {
        snprintf (err, err_size, "execute: cannot read output '%.*s': %s",
                  (int) rel.len, rel.ptr,
                  errno? strerror (errno): "not a regular file");
        free (path);
        return -1;
    }
    free (path);
    return 0;
}

bool
execute_exit_code (execute_t *self, int32_t *code)
{
    if (WIFEXITED (self->status))
        *code = WEXITSTATUS (self->status);
    else
    if (WIFSIGNALED (self->status))
        *code = -WTERMSIG (self->status);
    else
        return false;
    return true;
}

int
execute_finish (execute_t *self, task_t *task, char *err, size_t err_size)
{
    bool sigpipe = (WIFSIGNALED (self->status) && WTERMSIG (self->status) == SIGPIPE)
                || (WIFEXITED (self->status) && WEXITSTATUS (self->status) == 128 + SIGPIPE);
    if ((!WIFEXITED (self->status) || WEXITSTATUS (self->status) != 0)
    &&  !(self->sigpipe_ok && sigpipe)) {
        char tail [S_STDERR_TAIL + 1];
        s_stderr_tail (self, tail, sizeof tail);
        if (WIFSIGNALED (self->status))
            snprintf (err, err_size, "execute: '%s' killed by signal %d; stderr: %s",
                      self->argv0, WTERMSIG (self->status), tail);
        else
            snprintf (err, err_size, "execute: '%s' exited with status %d; stderr: %s",
                      self->argv0, WEXITSTATUS (self->status), tail);
        return -1;
    }
    for (uint32_t j = 0; j < task->n_outputs; j++) {
        if ((int32_t) j == task->stream_out)
            continue;           //  streamed as it was written
        if ((int32_t) j == task->conf.done_output) {
            //  Says only that the program exited well: what waits on it
            //  reads no data (a job file's deps on a task without outputs).
            if (!(task->results [j] = sq_blob_new (0))) {
                snprintf (err, err_size, "execute: out of memory");
                return -1;
            }
            continue;
        }
        //  Read with the task's rights: an output that is a link to what
        //  only the governor may read stays unread. stdout is our own file.
        bool as_task = (int32_t) j != task->conf.stdout_output;
        if (as_task)
            sandbox_fs_enter (&self->id);
        int rc = s_output (self, task, j, err, err_size);
        if (as_task)
            sandbox_fs_leave (&self->id);
        if (rc)
            return -1;
    }
    return 0;
}

uint64_t
execute_rss (execute_t *self)
{
    //  The program is the leader of its own process group (a shell and what
    //  it starts): its memory is that of the whole group.
    if (self->pid <= 0)
        return 0;
    DIR *proc = opendir ("/proc");
    if (!proc)
        return 0;
    uint64_t pages = 0;
    struct dirent *entry;
    while ((entry = readdir (proc))) {
        if (entry->d_name [0] < '0' || entry->d_name [0] > '9')
            continue;
        char path [300], line [512];
        snprintf (path, sizeof path, "/proc/%s/stat", entry->d_name);
        FILE *file = fopen (path, "r");
        if (!file)
            continue;
        size_t got = fread (line, 1, sizeof line - 1, file);
        fclose (file);
        line [got] = 0;
        //  Fields after the command name (which may hold spaces): state,
        //  ppid, pgrp, ... rss is the 24th field overall.
        char *close_paren = strrchr (line, ')');
        long pgrp = 0, rss = 0;
        if (close_paren
        &&  sscanf (close_paren + 2, "%*c %*d %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
                    "%*d %*d %*d %*d %*d %*d %*u %*u %ld", &pgrp, &rss) == 2
        &&  pgrp == self->pid && rss > 0)
            pages += (uint64_t) rss;
    }
    closedir (proc);
    return pages * (uint64_t) sysconf (_SC_PAGESIZE);
}
