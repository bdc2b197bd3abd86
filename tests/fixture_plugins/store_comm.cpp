// store_comm.cpp — a test fixture: the comm plugin "store_check", which exists only to prove that
// the host's rendezvous store crosses process boundaries, and that the host gives each comm its
// own key namespace. Its init sets "<store_prefix>rank/<rank>" to its rank
// as text and reads every other rank's key (10 s each), failing init with a status that names
// the missing or wrong key. Its collectives move no data between ranks (all-reduce copies send to
// recv, requests complete at once), so a case using it runs but does not train as one.
// Rank 0 also plays a stranger on the store's address: a connection without the case's secret
// must be refused (PERMISSION_DENIED, then closed, no value), and a store on 127.0.0.1 must not
// answer on 127.0.0.2 (it listens on the ranks' address, not on every one).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <dlhost/dlhost.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

namespace sdk = dlhost::sdk;

struct Comm {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string prefix;  // dlhost_comm_init_args.store_prefix (ABI 1.2), "" from an older host
};

constexpr int64_t kWaitMs = 10000;

size_t dtype_bytes(int32_t dtype) {
  const size_t bytes = sdk::dtype_size(dtype);
  if (bytes == 0) sdk::invalid("store_check: unknown dtype " + std::to_string(dtype));
  return bytes;
}

// Every request is already complete; this one stands for all of them.
dlhost_request* done_request() {
  static int token = 0;
  return reinterpret_cast<dlhost_request*>(&token);
}

void check_peer(const Comm& c, int32_t peer) {
  const int32_t rank = c.rank;
  std::string key = c.prefix + "rank/" + std::to_string(peer);
  char buf[64] = {};
  size_t size = 0;
  dlhost_status* s = sdk::host()->store_get(key.c_str(), kWaitMs, buf, sizeof(buf), &size);
  if (s != nullptr) {
    auto code = static_cast<dlhost_code>(sdk::host()->status_code(s));
    std::string message = sdk::host()->status_message(s);
    sdk::host()->status_destroy(s);
    sdk::fail(code, "store_check: rank " + std::to_string(rank) + " did not get '" + key +
                        "' from the rendezvous store: " + message);
  }
  std::string got(buf, size);
  if (got != std::to_string(peer))
    sdk::fail(DLHOST_CODE_DATA_LOSS, "store_check: rank " + std::to_string(rank) + " read '" + key +
                                         "' = '" + got + "', expected '" + std::to_string(peer) +
                                         "'");
}

// A TCP connection to HOST:PORT (numeric HOST), reads bounded to 5 s; -1 with errno set.
int connect_to(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) {
    errno = EINVAL;
    return -1;
  }
  int fd = socket(found->ai_family, SOCK_STREAM, 0);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    errno = err;
    return -1;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Rank 0's stranger checks against DLHOST_STORE=SECRET@HOST:PORT.
void play_stranger(const std::string& own_key) {
  const char* variable = std::getenv("DLHOST_STORE");
  if (variable == nullptr) return;  // one process: the in-process store
  std::string store = variable;
  size_t at = store.find('@'), colon = store.rfind(':');
  if (at == std::string::npos || at < 32 || colon == std::string::npos || colon < at)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
              "store_check: DLHOST_STORE='" + store.substr(at == std::string::npos ? 0 : at) +
                  "' carries no secret of 128 bits (SECRET@HOST:PORT)");
  std::string host = store.substr(at + 1, colon - at - 1), port = store.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  int fd = connect_to(host, port);
  if (fd < 0)
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "store_check: cannot reach the store at " + host + ":" +
                                           port + ": " + std::strerror(errno));
  // The old protocol's GET of our own key, with no hello.
  std::string request(1, '\x02');
  for (int shift = 24; shift >= 0; shift -= 8)
    request.push_back(static_cast<char>(own_key.size() >> shift));
  request += own_key;
  request += std::string(7, '\0') + '\0';           // timeout_ms 0
  request += std::string(6, '\0') + "\x01" + '\0';  // capacity 256
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buf[4096];
  ssize_t n = 0;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  // One answer, head and message only: no value bytes reach a stranger.
  size_t message_len = 0;
  for (size_t i = 9; i < 13 && i < answer.size(); ++i)
    message_len = (message_len << 8) | static_cast<unsigned char>(answer[i]);
  if (n != 0 || answer.size() < 13 || answer[0] != DLHOST_CODE_PERMISSION_DENIED ||
      answer.size() != 13 + message_len)
    sdk::fail(
        DLHOST_CODE_INTERNAL,
        "store_check: a connection without the secret was not refused and closed (answer of " +
            std::to_string(answer.size()) + " bytes, code " +
            std::to_string(answer.empty() ? -1 : answer[0]) + ")");
  if (host == "127.0.0.1") {
    int other = connect_to("127.0.0.2", port);
    if (other >= 0) {
      close(other);
      sdk::fail(DLHOST_CODE_INTERNAL,
                "store_check: the store also answers on 127.0.0.2: it listens on more than the "
                "ranks' address");
    }
  }
  sdk::log(DLHOST_LOG_INFO, "store_check",
           "rank 0: a connection without the store's secret was refused");
}

dlhost_status* init(const dlhost_comm_init_args* args, dlhost_comm** out) {
  return sdk::guard([&] {
    auto* c = new Comm{args->rank, args->world_size, {}};
    if (DLHOST_HAS_FIELD(args, dlhost_comm_init_args, store_prefix) && args->store_prefix)
      c->prefix = args->store_prefix;
    try {
      std::string key = c->prefix + "rank/" + std::to_string(c->rank);
      std::string value = std::to_string(c->rank);
      sdk::check(sdk::host()->store_set(key.c_str(), value.data(), value.size()));
      for (int32_t peer = 0; peer < c->world_size; ++peer)
        if (peer != c->rank) check_peer(*c, peer);
      if (c->rank == 0 && c->world_size > 1) play_stranger(key);
    } catch (...) {
      delete c;
      throw;
    }
    sdk::log(DLHOST_LOG_INFO, "store_check",
             "rank " + std::to_string(c->rank) + " read every rank's key through the store");
    *out = reinterpret_cast<dlhost_comm*>(c);
  });
}

const dlhost_comm_api kApi = [] {
  auto t = sdk::make_struct<dlhost_comm_api>(DLHOST_COMM_API_STRUCT_SIZE);
  t.capabilities = [](dlhost_comm_caps* out) {
    return sdk::guard([&] {
      out->host_memory = 1;
      out->device_memory = 0;
      out->dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_F64) | (1u << DLHOST_DTYPE_I32) |
                    (1u << DLHOST_DTYPE_I64);
      out->library = "store_check fixture";
    });
  };
  t.init = init;
  t.finalize = [](dlhost_comm* c) { delete reinterpret_cast<Comm*>(c); };
  t.all_reduce = [](dlhost_comm*, const void* send, void* recv, uint64_t count, int32_t dtype,
                    int32_t, int32_t, dlhost_request** request) {
    return sdk::guard([&] {
      if (send != recv) std::memmove(recv, send, count * dtype_bytes(dtype));
      *request = done_request();
    });
  };
  t.broadcast = [](dlhost_comm*, void*, uint64_t, int32_t, int32_t, int32_t,
                   dlhost_request** request) {
    return sdk::guard([&] { *request = done_request(); });
  };
  t.all_gather = [](dlhost_comm* c, const void* send, void* recv, uint64_t count, int32_t dtype,
                    int32_t, dlhost_request** request) {
    return sdk::guard([&] {
      size_t bytes = count * dtype_bytes(dtype);
      auto rank = static_cast<size_t>(reinterpret_cast<Comm*>(c)->rank);
      std::memmove(static_cast<char*>(recv) + rank * bytes, send, bytes);
      *request = done_request();
    });
  };
  t.barrier = [](dlhost_comm*, dlhost_request** request) {
    return sdk::guard([&] { *request = done_request(); });
  };
  t.test = [](dlhost_request*, int32_t* done) { return sdk::guard([&] { *done = 1; }); };
  t.wait = [](dlhost_request*) -> dlhost_status* { return nullptr; };
  t.request_free = [](dlhost_request*) {};
  return t;
}();

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!sdk::attach_host(host, "store_check")) return nullptr;
  static const dlhost_plugin plugin = [] {
    auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
    p.abi_major = DLHOST_ABI_MAJOR;
    p.abi_minor = DLHOST_ABI_MINOR;
    p.kind = DLHOST_PLUGIN_COMM;
    p.name = "store_check";
    p.version = "0";
    p.description = "test fixture: checks that the rendezvous store reaches every rank";
    p.backend = nullptr;
    p.comm = &kApi;
    return p;
  }();
  return &plugin;
}
