// store_server.cpp — serves one rendezvous store (host/distributed/rendezvous_store.h) on
// 127.0.0.1 with a fresh secret and prints the value of DLHOST_STORE for it
// (SECRET@127.0.0.1:PORT), so that a test can run `dlhost comm-bench --comm gloo` under a bare
// mpirun, which (unlike `dlhost run`) serves no store. Serves until it is sent SIGTERM or SIGINT.
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
  dlhost::RendezvousServer server(dlhost::make_store_secret(), "127.0.0.1");
  std::printf("%s\n", server.variable_value("127.0.0.1").c_str());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop, &signal);
  return 0;
}
