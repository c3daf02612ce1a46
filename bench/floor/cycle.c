/*
 * The system calls of one uncontended acquire+release of the core's lock, replayed in order with
 * nothing between them: the floor of the protocol, what the kernel charges before any JavaScript
 * runs (bench/README.md, part a). The list is the one strace shows for a cycle of
 * `acquire(staticDir, tag)` then `release()` on an area with a counter and a history segment
 * (on release the record moved into the work directory, which is moved aside and removed once
 * the lock is gone).
 *
 *   cc -O2 -o cycle cycle.c && ./cycle STATIC_DIR CYCLES   prints microseconds per cycle
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char buf[32768];

static void must(int ok, const char *what) {
  if (!ok) {
    perror(what);
    exit(1);
  }
}

/* A listing as the core makes it: open, fstat, getdents until empty, close. */
static void list(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_DIRECTORY);
  must(fd >= 0, path);
  struct stat st;
  fstat(fd, &st);
  while (syscall(SYS_getdents64, fd, buf, sizeof buf) > 0) {
  }
  close(fd);
}

/* The mount a descriptor is on, as the core reads it: open, one read, close. */
static void mount_id(int fd) {
  char p[64];
  snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd);
  int m = open(p, O_RDONLY | O_CLOEXEC);
  if (m < 0) return;
  pread(m, buf, 512, 0);
  close(m);
}

static void cycle(const char *area, int segment, long n) {
  char p[512], q[512], t[512];
  struct stat st;
  int a = open(area, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY);
  must(a >= 0, area);
  fstat(a, &st);
  snprintf(p, sizeof p, "%s/../.devserver-staging/queue", area);
  lstat(p, &st);
  snprintf(p, sizeof p, "/proc/self/fd/%d/staged.timestamp", a);
  int ts = open(p, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (ts >= 0) close(ts);
  snprintf(p, sizeof p, "/proc/self/fd/%d/.devserver-staging.fence", a);
  lstat(p, &st);
  list(p);
  getuid();
  snprintf(p, sizeof p, "/proc/self/fd/%d/devserver.lock.new.host.1.%ld", a, n);
  must(mkdir(p, 0777) == 0, "mkdir new");
  int lock = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY);
  snprintf(q, sizeof q, "/proc/self/fd/%d/owner.json", lock);
  int rec = open(q, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  must(rec >= 0, "owner.json");
  memset(t, 'x', 375);
  write(rec, t, 375);
  close(rec);
  snprintf(q, sizeof q, "/proc/self/fd/%d/work.token%ld", lock, n);
  mkdir(q, 0755);
  snprintf(q, sizeof q, "/proc/self/fd/%d/devserver.lock", a);
  must(rename(p, q) == 0, "rename into place");
  fstat(lock, &st);
  snprintf(p, sizeof p, "/proc/self/fd/%d/.", a);
  list(p);
  snprintf(p, sizeof p, "/proc/self/fd/%d/.devserver-staging.fence", a);
  lstat(p, &st);
  list(p);
  snprintf(p, sizeof p, "/proc/self/fd/%d/.devserver-staging.fence/%ld", a, n);
  snprintf(q, sizeof q, "/proc/self/fd/%d/devserver.lock/work.token%ld/fence.%ld", a, n, n);
  must(rename(p, q) == 0, "consume the counter");
  snprintf(p, sizeof p, "/proc/self/fd/%d/.devserver-staging.fence/%ld", a, n + 1);
  must(rename(q, p) == 0, "publish the counter");
  fstat(segment, &st);
  snprintf(p, sizeof p, "/proc/self/fd/%d", segment);
  readlink(p, t, sizeof t);
  memset(t, 'x', 166);
  write(segment, t, 166);
  snprintf(p, sizeof p, "/proc/self/fd/%d/devserver.lock", a);
  lstat(p, &st);
  snprintf(p, sizeof p, "/proc/self/fd/%d/devserver.lock/work.token%ld/commit.json", a, n);
  lstat(p, &st);
  /* The record into the work directory, the work directory aside, then the lock taken apart. */
  snprintf(p, sizeof p, "/proc/self/fd/%d/owner.json", lock);
  snprintf(q, sizeof q, "/proc/self/fd/%d/work.token%ld/owner.json", lock, n);
  must(rename(p, q) == 0, "record into the work directory");
  snprintf(p, sizeof p, "/proc/self/fd/%d/work.token%ld", lock, n);
  snprintf(q, sizeof q, "/proc/self/fd/%d/devserver.lock.trash.host.1.%ld", a, n);
  must(rename(p, q) == 0, "work directory aside");
  snprintf(p, sizeof p, "/proc/self/fd/%d/devserver.lock", a);
  lstat(p, &st);
  close(lock);
  must(rmdir(p) == 0, "rmdir lock");
  lstat(q, &st);
  int w = open(q, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY);
  fstat(w, &st);
  snprintf(p, sizeof p, "/proc/self/fd/%d/.", w);
  list(p);
  /* Not empty (the record): each side's mount, by its descriptor, before anything in it is removed. */
  mount_id(a);
  mount_id(w);
  snprintf(p, sizeof p, "/proc/self/fd/%d/owner.json", w);
  lstat(p, &st);
  must(unlink(p) == 0, "unlink record");
  close(w);
  must(rmdir(q) == 0, "rmdir work");
  fstat(segment, &st);
  write(segment, t, 164);
  close(a);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s STATIC_DIR CYCLES\n", argv[0]);
    return 2;
  }
  char area[512], p[600];
  snprintf(area, sizeof area, "%s/floor", argv[1]);
  mkdir(area, 0755);
  snprintf(p, sizeof p, "%s/.devserver-staging.fence", area);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/.devserver-staging.fence/1", area);
  close(open(p, O_WRONLY | O_CREAT | O_EXCL, 0644));
  snprintf(p, sizeof p, "%s/history.jsonl", argv[1]);
  int segment = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  long cycles = atol(argv[2]);
  long n = 1;
  for (int i = 0; i < 100; i++) cycle(area, segment, n++);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < cycles; i++) cycle(area, segment, n++);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / cycles);
  return 0;
}
