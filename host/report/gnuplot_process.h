// gnuplot_process.h — runs gnuplot on a script the report wrote, fenced so that nothing in the
// script can start another program. The scripts' strings are made inert where they are written
// (plots.cpp); this is the second fence, for a mistake there: gnuplot can run a shell through
// system(), `!`, backquotes, `load '<...'`, `plot '<...'` and `set print/output '|...'`, and every
// one of them must first create a process. The child gets a seccomp filter that refuses to create
// a process (threads stay allowed) before it becomes gnuplot, so each of those calls fails.
// Called from one thread at a time.
#pragma once

#include <string>

namespace dlhost::report {

struct GnuplotRun {
  int exit_code = -1;   // gnuplot's exit status; -1 when it did not end by itself
  std::string message;  // what went wrong, for the report: its stderr, or why it did not run
};

// Runs `program -d script` (no init file read) in `folder`, with standard input from /dev/null,
// standard output discarded and standard error kept in `log` (a path). A run past
// `timeout_seconds` is killed. On a machine where the filter cannot be installed gnuplot is not
// run at all, and the message says why.
GnuplotRun run_gnuplot_fenced(const std::string& program, const std::string& folder,
                              const std::string& script, const std::string& log,
                              int timeout_seconds = 120);

}  // namespace dlhost::report
