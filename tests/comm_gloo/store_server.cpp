// store_server.cpp — serves one rendezvous store (host/distributed/rendezvous_store.h) on
// 127.0.0.1 and prints its port, so that a test can run `dlhost comm-bench --comm gloo` under a
// bare mpirun, which (unlike `dlhost run`) serves no store: the ranks find it through
// DLHOST_STORE=127.0.0.1:PORT. Serves until it is sent SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>

#include "distributed/rendezvous_store.h"

int main() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  // Blocked before the server's thread starts, so only sigwait below takes them.
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  dlhost::RendezvousServer server("127.0.0.1");
  std::printf("%u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop, &signal);
  return 0;
}
