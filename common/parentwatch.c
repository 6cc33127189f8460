/*  parentwatch: see parentwatch.h. */
#include "parentwatch.h"
#include "log.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct _parentwatch_t {
    int fd;                     //  the parent's pipe (borrowed)
    int wake [2];               //  destroy writes here to end the thread
    pthread_t thread;
};

//  Waits on one descriptor for up to timeout_ms (-1: for ever), retrying
//  on EINTR. The poll result.
static int
s_poll (struct pollfd *items, nfds_t n, int timeout_ms)
{
    int rc;
    do
        rc = poll (items, n, timeout_ms);
    while (rc < 0 && errno == EINTR);
    return rc;
}

static void *
s_watch (void *arg)
{
    parentwatch_t *self = (parentwatch_t *) arg;
    //  The SIGTERM below must be taken by a thread that acts on it (the
    //  broker's main thread, the governor's signalfd), never by this one.
    sigset_t all;
    sigfillset (&all);
    pthread_sigmask (SIG_BLOCK, &all, NULL);
    struct pollfd items [2] = {
        { self->fd, POLLIN, 0 }, { self->wake [0], POLLIN, 0 }
    };
    while (true) {
        if (s_poll (items, 2, -1) < 0)
            return NULL;
        if (items [1].revents)
            return NULL;                //  destroyed: the process stops anyway
        if (items [0].revents & (POLLHUP | POLLERR | POLLNVAL))
            break;
        if (items [0].revents & POLLIN) {
            char buf [64];
            ssize_t n = read (self->fd, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                break;
            //  Bytes from the starter mean nothing; keep watching.
        }
    }
    sq_warn ("the process that started this one went away (%s closed); stopping",
             PARENTWATCH_ENV);
    kill (getpid (), SIGTERM);
    //  A clean stop ends with parentwatch_destroy, which wakes us; if the
    //  process is still here after the grace period, it leaves anyway.
    struct pollfd wake = { self->wake [0], POLLIN, 0 };
    if (s_poll (&wake, 1, SQ_STOP_GRACE_S * 1000) == 0) {
        static const char text [] = "parentwatch: the stop took too long; leaving now\n";
        if (write (STDERR_FILENO, text, sizeof text - 1) < 0)
            _exit (1);
        _exit (1);
    }
    return NULL;
}

parentwatch_t *
parentwatch_new (int fd, char *err, size_t err_size)
{
    struct stat st;
    if (fd < 0 || fcntl (fd, F_GETFD) < 0 || fstat (fd, &st)) {
        snprintf (err, err_size, "%s=%d is not an open file descriptor", PARENTWATCH_ENV, fd);
        return NULL;
    }
    if (!S_ISFIFO (st.st_mode) && !S_ISSOCK (st.st_mode)) {
        snprintf (err, err_size, "%s=%d is not a pipe or socket (the starter keeps the "
                  "write end of a pipe and passes the read end)", PARENTWATCH_ENV, fd);
        return NULL;
    }
    //  Programs and executors started from here must not hold it.
    fcntl (fd, F_SETFD, fcntl (fd, F_GETFD) | FD_CLOEXEC);
    parentwatch_t *self = (parentwatch_t *) calloc (1, sizeof *self);
    if (!self || pipe (self->wake)) {
        snprintf (err, err_size, "cannot watch %s: %s", PARENTWATCH_ENV, strerror (errno));
        free (self);
        return NULL;
    }
    fcntl (self->wake [0], F_SETFD, FD_CLOEXEC);
    fcntl (self->wake [1], F_SETFD, FD_CLOEXEC);
    self->fd = fd;
    int rc = pthread_create (&self->thread, NULL, s_watch, self);
    if (rc) {
        snprintf (err, err_size, "cannot watch %s: %s", PARENTWATCH_ENV, strerror (rc));
        close (self->wake [0]);
        close (self->wake [1]);
        free (self);
        return NULL;
    }
    return self;
}

int
parentwatch_from_env (parentwatch_t **self_p, char *err, size_t err_size)
{
    *self_p = NULL;
    const char *text = getenv (PARENTWATCH_ENV);
    if (!text || !*text)
        return 0;
    char *end = NULL;
    errno = 0;
    long fd = strtol (text, &end, 10);
    if (errno || *end || end == text || fd < 0 || fd > INT_MAX) {
        snprintf (err, err_size, "%s must be a file descriptor number, not '%.64s'",
                  PARENTWATCH_ENV, text);
        return -1;
    }
    //  Not passed on: a program this process starts has other descriptors
    //  under that number.
    unsetenv (PARENTWATCH_ENV);
    *self_p = parentwatch_new ((int) fd, err, err_size);
    return *self_p? 0: -1;
}

void
parentwatch_destroy (parentwatch_t **self_p)
{
    parentwatch_t *self = *self_p;
    if (!self)
        return;
    char byte = 1;
    while (write (self->wake [1], &byte, 1) < 0 && errno == EINTR)
        ;
    pthread_join (self->thread, NULL);
    close (self->wake [0]);
    close (self->wake [1]);
    free (self);
    *self_p = NULL;
}
