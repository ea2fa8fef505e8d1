// gleaner_fault_shim: an LD_PRELOAD library that makes real syscalls of a real process fail, for
// black-box storage-fault tests (a failing disk, a full disk) of the running coordinator.
//
// It interposes write, pwrite, pwrite64, writev, fsync, fdatasync, rename, renameat and
// renameat2. Nothing is injected unless GLEANER_FAULT_FILE names a control file; that file is
// re-read on every intercepted call (so a test arms, changes and clears faults while the process
// runs) and holds one line:
//
//   <ops> <path-prefix> <nth> <count> <errno>
//
//   ops      comma-separated: write (write/pwrite/pwrite64/writev), fsync (fsync/fdatasync),
//            rename (rename/renameat/renameat2), or "none"
//   prefix   only calls on files whose absolute path starts with it count (the open file's path
//            from /proc/self/fd for descriptors, the source path for renames)
//   nth      the first matching call that fails (1 = the next one)
//   count    how many matching calls fail from the nth on (0 = every one: a full disk)
//   errno    EIO, ENOSPC or EDQUOT
//
// Counting starts afresh whenever the line changes. A missing or empty file injects nothing.
// Every injected failure is reported on stderr as one line
// "gleaner-fault-shim: <call> <path>: <errno name>", so a test can tell that its fault fired.
// Linux only (it reads /proc/self/fd). Thread-safe (one mutex around the counter).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { kOpWrite = 1, kOpFsync = 2, kOpRename = 4 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_line[PATH_MAX + 128];  // the control line the counter belongs to
static long g_seen;                  // matching calls since the line last changed

static void* Next(const char* name) {
  return dlsym(RTLD_NEXT, name);
}

// Reads the control file with raw syscalls (open/read are not interposed here).
static int ReadControl(char* buf, size_t cap) {
  const char* path = getenv("GLEANER_FAULT_FILE");
  if (path == NULL || *path == '\0') return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char* nl = strchr(buf, '\n');
  if (nl != NULL) *nl = '\0';
  return buf[0] != '\0';
}

static int ParseErrno(const char* name) {
  if (strcmp(name, "ENOSPC") == 0) return ENOSPC;
  if (strcmp(name, "EDQUOT") == 0) return EDQUOT;
  return EIO;
}

static const char* ErrnoName(int e) {
  return e == ENOSPC ? "ENOSPC" : e == EDQUOT ? "EDQUOT" : "EIO";
}

static void Report(const char* call, const char* path, int err) {
  static ssize_t (*real_write)(int, const void*, size_t);
  if (real_write == NULL) real_write = (ssize_t(*)(int, const void*, size_t))Next("write");
  char msg[PATH_MAX + 96];
  int n = snprintf(msg, sizeof msg, "gleaner-fault-shim: %s %s: %s\n", call, path, ErrnoName(err));
  if (n > 0 && real_write != NULL) {
    ssize_t ignored = real_write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    (void)ignored;
  }
}

// 0: let the call through; otherwise the errno to fail it with.
static int Decide(int op, const char* call, const char* path) {
  char line[sizeof g_line];
  if (path == NULL || !ReadControl(line, sizeof line)) return 0;
  char ops[64], prefix[PATH_MAX], err_name[16];
  long nth = 0, count = 0;
  if (sscanf(line, "%63s %4095s %ld %ld %15s", ops, prefix, &nth, &count, err_name) != 5) return 0;
  int mask = 0;
  char* save = NULL;
  for (char* tok = strtok_r(ops, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (strcmp(tok, "write") == 0) mask |= kOpWrite;
    if (strcmp(tok, "fsync") == 0) mask |= kOpFsync;
    if (strcmp(tok, "rename") == 0) mask |= kOpRename;
  }
  if (!(mask & op) || strncmp(path, prefix, strlen(prefix)) != 0) return 0;
  int fail = 0;
  pthread_mutex_lock(&g_mu);
  if (strcmp(line, g_line) != 0) {
    memcpy(g_line, line, sizeof g_line);
    g_seen = 0;
  }
  long index = ++g_seen;
  if (index >= nth && (count <= 0 || index < nth + count)) fail = ParseErrno(err_name);
  pthread_mutex_unlock(&g_mu);
  if (fail) Report(call, path, fail);
  return fail;
}

static int DecideFd(int op, const char* call, int fd) {
  if (getenv("GLEANER_FAULT_FILE") == NULL) return 0;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return Decide(op, call, path);
}

static int DecidePath(const char* call, int dirfd, const char* path) {
  if (getenv("GLEANER_FAULT_FILE") == NULL || path == NULL) return 0;
  if (path[0] == '/' || dirfd != AT_FDCWD) return Decide(kOpRename, call, path);
  char full[PATH_MAX];
  if (getcwd(full, sizeof full) == NULL) return 0;
  size_t len = strlen(full);
  snprintf(full + len, sizeof full - len, "/%s", path);
  return Decide(kOpRename, call, full);
}

ssize_t write(int fd, const void* buf, size_t n) {
  static ssize_t (*real)(int, const void*, size_t);
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t))Next("write");
  int err = fd > 2 ? DecideFd(kOpWrite, "write", fd) : 0;
  if (err) {
    errno = err;
    return -1;
  }
  return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t, off_t))Next("pwrite");
  int err = DecideFd(kOpWrite, "pwrite", fd);
  if (err) {
    errno = err;
    return -1;
  }
  return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  static ssize_t (*real)(int, const void*, size_t, off64_t);
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t, off64_t))Next("pwrite64");
  int err = DecideFd(kOpWrite, "pwrite64", fd);
  if (err) {
    errno = err;
    return -1;
  }
  return real(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  static ssize_t (*real)(int, const struct iovec*, int);
  if (real == NULL) real = (ssize_t(*)(int, const struct iovec*, int))Next("writev");
  int err = fd > 2 ? DecideFd(kOpWrite, "writev", fd) : 0;
  if (err) {
    errno = err;
    return -1;
  }
  return real(fd, iov, iovcnt);
}

int fsync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))Next("fsync");
  int err = DecideFd(kOpFsync, "fsync", fd);
  if (err) {
    errno = err;
    return -1;
  }
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))Next("fdatasync");
  int err = DecideFd(kOpFsync, "fdatasync", fd);
  if (err) {
    errno = err;
    return -1;
  }
  return real(fd);
}

int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*);
  if (real == NULL) real = (int (*)(const char*, const char*))Next("rename");
  int err = DecidePath("rename", AT_FDCWD, from);
  if (err) {
    errno = err;
    return -1;
  }
  return real(from, to);
}

int renameat(int fromfd, const char* from, int tofd, const char* to) {
  static int (*real)(int, const char*, int, const char*);
  if (real == NULL) real = (int (*)(int, const char*, int, const char*))Next("renameat");
  int err = DecidePath("renameat", fromfd, from);
  if (err) {
    errno = err;
    return -1;
  }
  return real(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char* from, int tofd, const char* to, unsigned int flags) {
  static int (*real)(int, const char*, int, const char*, unsigned int);
  if (real == NULL) {
    real = (int (*)(int, const char*, int, const char*, unsigned int))Next("renameat2");
  }
  int err = DecidePath("renameat2", fromfd, from);
  if (err) {
    errno = err;
    return -1;
  }
  return real(fromfd, from, tofd, to, flags);
}
