/* Diagnosis aid for process aborts that Python's faulthandler cannot see (aborts inside C exit
   handlers, after the interpreter has finalised). Preload it:
       gcc -shared -fPIC -O1 -o /tmp/abort_backtrace.so scripts/abort_backtrace.c
       LD_PRELOAD=/tmp/abort_backtrace.so python3 program.py
   On SIGABRT or SIGSEGV it writes the native call stack (backtrace_symbols_fd: library, symbol or
   +offset) and the process's executable mappings to stderr, then re-raises the signal with the default
   action, so the exit status is unchanged. Offsets resolve with `addr2line -e LIB 0xOFFSET` or by
   nm/objdump of the library named. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void dump_maps(void) {
  char buf[4096];
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return;
  ssize_t n;
  /* only the executable mappings matter for resolving frames; filtering line by line needs a parser,
     so the whole map is written (a few hundred lines) */
  while ((n = read(fd, buf, sizeof buf)) > 0) (void)!write(2, buf, (size_t)n);
  close(fd);
}

static void on_fatal(int sig) {
  static const char head[] = "\n==== abort_backtrace: fatal signal, native stack follows ====\n";
  (void)!write(2, head, sizeof head - 1);
  void *frames[128];
  int n = backtrace(frames, 128);
  backtrace_symbols_fd(frames, n, 2);
  static const char mid[] = "==== abort_backtrace: /proc/self/maps ====\n";
  (void)!write(2, mid, sizeof mid - 1);
  dump_maps();
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void *warm[1];
  backtrace(warm, 1); /* loads libgcc_s now, not inside the handler */
  signal(SIGABRT, on_fatal);
  signal(SIGSEGV, on_fatal);
}
