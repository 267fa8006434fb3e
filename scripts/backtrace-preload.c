/* A preload for diagnosing crashes and hangs of test binaries on machines without gdb
 * (scripts/device-stress.sh builds it here and carries it). Each thread that receives
 * SIGSEGV, SIGBUS, SIGILL or SIGABRT prints its name and its stack (glibc's backtrace, as
 * "binary(+offset)": scripts/device-stress.sh symbolize turns the offsets into functions),
 * then dies of the signal as it would have. SIGUSR1 prints the same and carries on: the
 * stress script sends it to every thread of a hung process. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void report(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  char buf[256];
  char name[32] = "?";
  int fd = open("/proc/thread-self/comm", O_RDONLY);
  if (fd >= 0) {
    ssize_t n = read(fd, name, sizeof name - 1);
    name[n > 0 ? n - 1 : 0] = 0; /* drop the newline */
    close(fd);
  }
  int n = snprintf(buf, sizeof buf, "\n=== signal %d (address %p) in thread %ld \"%s\"\n", sig,
                   si->si_addr, (long)syscall(SYS_gettid), name);
  if (write(2, buf, n) < 0) return;
  void *frames[64];
  int k = backtrace(frames, 64);
  backtrace_symbols_fd(frames, k, 2);
  if (sig == SIGUSR1) return;
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = report;
  sa.sa_flags = SA_SIGINFO;
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGUSR1};
  for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, 0);
}
