/*  files: the few file-system chores of a governor (its working directory,
    task directories, writing inputs for execute).

    Ownership: nothing is kept; paths are the caller's. */
#ifndef GOV_FILES_H
#define GOV_FILES_H

#include <stddef.h>
#include "blob.h"

//  Removes a file or a directory tree; never follows symlinks. 0 or -1.
int files_rmtree (const char *path);
//  Creates the parent directories of `path` (which is under an existing
//  directory). 0 or -1 with errno.
int files_mkparents (const char *path);
//  Creates or truncates `path` (0644) holding exactly the blob's bytes.
//  0 or -1 with errno.
int files_write (const char *path, const sq_blob_t *blob);
//  Writes all of the blob's bytes to fd, part by part. 0 or -1 with errno.
int files_write_fd (int fd, const sq_blob_t *blob);

#endif
