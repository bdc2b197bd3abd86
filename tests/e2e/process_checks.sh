# process_checks.sh — sourced by the end-to-end tests that kill or interrupt processes
# (isolation_e2e.sh, run_hardening_e2e.sh): whether a process has ended. POSIX sh.

# A process has ended when it is gone or a zombie: an orphan is reaped by PID 1, which in a
# container may be slow to do it. Exiting a large worker takes a moment under load: 5 s.
gone_within_5s() {  # PID
  for _ in $(seq 50); do
    state=$(ps -o stat= -p "$1" 2>/dev/null || true)
    case "$state" in "" | Z*) return 0 ;; esac
    sleep 0.1
  done
  return 1
}
