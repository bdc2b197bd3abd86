// test_hosts.cpp — see test_hosts.h. Every change to the network is an `ip` or `tc` command
// (iproute2), run with posix_spawn and its output kept for the error message.
#include "launch/test_hosts.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "core/environment.h"
#include "core/link_profiles.h"

extern char** environ;

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr const char* kPrefix = "dlhn";  // + pid: every name this module gives

struct ToolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// The absolute path of an iproute2 tool: PATH first, then the sbin folders a non-login root
// shell may lack in PATH.
std::string find_tool(const std::string& name) {
  std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    fs::path p = fs::path(dir) / name;
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

ToolResult run_tool(const std::vector<std::string>& argv) {
  ToolResult r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.output = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    r.output = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == ' '))
    r.output.pop_back();
  return r;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs an ip/tc command; throws with the command and what it printed when it fails.
std::string must(const std::vector<std::string>& argv) {
  ToolResult r = run_tool(argv);
  if (r.exit_code != 0)
    throw std::runtime_error("'" + joined(argv) + "' failed: " +
                             (r.output.empty() ? "exit " + std::to_string(r.exit_code) : r.output));
  return r.output;
}

const std::string& ip_tool() {
  static const std::string path = find_tool("ip");
  return path;
}
const std::string& tc_tool() {
  static const std::string path = find_tool("tc");
  return path;
}

// Kills every process in namespace `ns` (a rank or orted the launcher left behind).
void end_processes_in(const std::string& ns) {
  for (int round = 0; round < 20; ++round) {
    ToolResult r = run_tool({ip_tool(), "netns", "pids", ns});
    if (r.exit_code != 0 || r.output.empty()) return;
    std::stringstream pids(r.output);
    for (long pid; pids >> pid;)
      if (pid > 1) kill(static_cast<pid_t>(pid), SIGKILL);
    usleep(50 * 1000);
  }
}

// Whether `pid` is a running dlhost (a reused pid of another program does not count).
bool dlhost_alive(long pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  return comm && std::getline(comm, name) && name.rfind("dlhost", 0) == 0;
}

// The pid in a name this module gave ("dlhn1234h0" -> 1234); -1 for another name.
long owner_pid(const std::string& name) {
  static const std::regex re("^dlhn([0-9]+)[bhv][0-9]*$");
  std::smatch m;
  return std::regex_match(name, m, re) ? std::stol(m[1]) : -1;
}

std::string rate_text(double gbit) {
  return std::to_string(static_cast<long long>(std::llround(gbit * 1e6))) + "kbit";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// Serialises the subnet choice and creation between dlhost processes (ctest runs tests in
// parallel): two bridges on one subnet would steal each other's routes. Waited for at most
// kLockWaitS: making test hosts takes well under a second, so a holder that long is stuck, and
// this case fails saying so instead of waiting with no timeout (the case's own starts later).
class CreationLock {
 public:
  static constexpr int kLockWaitS = 60;
  CreationLock() {
    const char* path = "/run/lock/dlhost-test-hosts.lock";
    fd_ = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      path = "/tmp/dlhost-test-hosts.lock";
      fd_ = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    }
    if (fd_ < 0) return;
    for (int waited_ms = 0; flock(fd_, LOCK_EX | LOCK_NB) != 0; waited_ms += 50) {
      if (errno != EWOULDBLOCK && errno != EINTR) return;
      if (waited_ms >= kLockWaitS * 1000) {
        close(fd_);
        fd_ = -1;
        throw std::runtime_error(std::string("test hosts: another dlhost has held ") + path +
                                 " for " + std::to_string(kLockWaitS) +
                                 " s while making its test hosts");
      }
      usleep(50 * 1000);
    }
  }
  ~CreationLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  CreationLock(const CreationLock&) = delete;
  CreationLock& operator=(const CreationLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

Interconnect link_profile(const std::string& profile, double link_gbit, double link_latency_us) {
  Interconnect link;
  link.profile = profile;
  // The bandwidth only: the latency is the veth's and bridge's (no netem qdisc needed).
  if (const LinkProfile* named = find_link_profile(link.profile)) link.gbit = named->gbit;
  if (link.profile == "custom") {
    link.gbit = link_gbit;
    link.latency_us = link_latency_us;
  }
  return link;
}

int test_host_count(int64_t ranks, int64_t ranks_per_host) {
  return static_cast<int>((ranks + ranks_per_host - 1) / ranks_per_host);
}

std::string test_hosts_unavailable(const Interconnect& link) {
  // The probe: a scratch namespace, a veth in it, and the qdiscs the link would need.
  static std::map<bool, std::string> answers;
  const bool netem = link.latency_us > 0;
  if (auto it = answers.find(netem); it != answers.end()) return it->second;
  std::string why;
  if (geteuid() != 0) {
    why = "test hosts (network namespaces) need root";
  } else if (ip_tool().empty() || tc_tool().empty()) {
    why = "test hosts need iproute2's ip and tc, not found in PATH (apt-get install iproute2)";
  } else {
    const std::string ns = std::string(kPrefix) + std::to_string(getpid()) + "h99";
    ToolResult made = run_tool({ip_tool(), "netns", "add", ns});
    if (made.exit_code != 0) {
      why = "cannot make a network namespace here (" + made.output + ")";
    } else {
      ToolResult veth = run_tool(
          {ip_tool(), "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"});
      if (veth.exit_code != 0) why = "cannot make a veth pair here (" + veth.output + ")";
      std::vector<std::string> qdisc = {tc_tool(), "-n", ns, "qdisc", "add", "dev", "p0", "root"};
      if (netem) {
        qdisc.insert(qdisc.end(), {"netem", "delay", "100us"});
      } else {
        qdisc.insert(qdisc.end(), {"tbf", "rate", "1gbit", "burst", "64kb", "latency", "50ms"});
      }
      ToolResult q = why.empty() ? run_tool(qdisc) : ToolResult{0, ""};
      if (q.exit_code != 0)
        why = netem ? "link latency cannot be emulated here: this kernel has no netem qdisc ('" +
                          joined(qdisc) + "': " + q.output + ")"
                    : "cannot shape a link here ('" + joined(qdisc) + "': " + q.output + ")";
      run_tool({ip_tool(), "netns", "delete", ns});
    }
  }
  answers[netem] = why;
  return why;
}

void remove_stale_test_hosts() {
  if (ip_tool().empty()) return;
  ToolResult nss = run_tool({ip_tool(), "netns", "list"});
  std::stringstream lines(nss.output);
  for (std::string line; std::getline(lines, line);) {
    std::string name = line.substr(0, line.find(' '));
    long pid = owner_pid(name);
    if (pid < 0 || dlhost_alive(pid)) continue;
    end_processes_in(name);
    run_tool({ip_tool(), "netns", "delete", name});
  }
  ToolResult links = run_tool({ip_tool(), "-o", "link", "show"});
  std::stringstream link_lines(links.output);
  static const std::regex re("^[0-9]+: ([^:@ ]+)");
  for (std::string line; std::getline(link_lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    long pid = owner_pid(m[1]);
    if (pid >= 0 && !dlhost_alive(pid)) run_tool({ip_tool(), "link", "delete", m[1]});
  }
}

TestHosts::TestHosts(int hosts, int slots, const Interconnect& link)
    : prefix_(std::string(kPrefix) + std::to_string(getpid())), slots_(slots), link_(link) {
  if (hosts < 1 || hosts > 200) throw std::runtime_error("test hosts: need 1 to 200 hosts");
  if (std::string why = test_hosts_unavailable(link); !why.empty()) throw std::runtime_error(why);
  hosts_.resize(static_cast<size_t>(hosts));
  try {
    make(link);
  } catch (...) {
    remove();
    throw;
  }
}

TestHosts::~TestHosts() { remove(); }

void TestHosts::make(const Interconnect& link) {
  CreationLock lock;
  remove_stale_test_hosts();
  // A /24 no address or route of this machine uses yet.
  const std::string used = must({ip_tool(), "-o", "-4", "addr", "show"}) + "\n" +
                           must({ip_tool(), "-4", "route", "show"});
  for (int k = 0; k < 256 && subnet_.empty(); ++k) {
    std::string candidate = "10.213." + std::to_string((getpid() + k) % 256);
    if (used.find(candidate + ".") == std::string::npos) subnet_ = candidate;
  }
  if (subnet_.empty()) throw std::runtime_error("test hosts: no free subnet in 10.213.0.0/16");
  parent_address_ = subnet_ + ".1";
  bridge_ = prefix_ + "b";
  must({ip_tool(), "link", "add", bridge_, "type", "bridge"});
  bridge_made_ = true;
  must({ip_tool(), "addr", "add", parent_address_ + "/24", "dev", bridge_});
  must({ip_tool(), "link", "set", bridge_, "up"});
  for (size_t i = 0; i < hosts_.size(); ++i) {
    Host& h = hosts_[i];
    h.ns = prefix_ + "h" + std::to_string(i);
    h.veth = prefix_ + "v" + std::to_string(i);
    h.address = subnet_ + "." + std::to_string(i + 2);
    run_tool({ip_tool(), "link", "delete", h.veth});  // one this process left (it is ours)
    must({ip_tool(), "netns", "add", h.ns});
    // The host's end is eth0 in its namespace, as on a real node.
    must({ip_tool(), "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns});
    must({ip_tool(), "link", "set", h.veth, "master", bridge_, "up"});
    must({ip_tool(), "-n", h.ns, "addr", "add", h.address + "/24", "dev", "eth0"});
    must({ip_tool(), "-n", h.ns, "link", "set", "eth0", "up"});
    must({ip_tool(), "-n", h.ns, "link", "set", "lo", "up"});
    // Both directions of the link: the host's sending side and the bridge's side towards it.
    shape(h.ns, "eth0", link);
    shape("", h.veth, link);
  }
  folder_ = (fs::path(temp_folder()) / (prefix_ + "-hosts")).string();
  fs::remove_all(folder_);
  fs::create_directories(folder_);
  std::ofstream hostfile(folder_ + "/hostfile");
  for (const Host& h : hosts_) hostfile << h.address << " slots=" << slots_ << "\n";
  std::ofstream agent(folder_ + "/agent");
  agent << "#!/bin/sh\n"
           "# Open MPI's remote agent for dlhost's test hosts (generated): runs what mpirun\n"
           "# asks of a host in that host's network namespace, as ssh would on a real node.\n"
           "host=$1; shift\n"
           "case \"$host\" in\n";
  for (const Host& h : hosts_) agent << "  " << h.address << ") ns=" << h.ns << " ;;\n";
  // The daemon runs attached (launcher_args: orte_leave_session_attached), so this script lives
  // as long as it does: a daemon that fails, even after it started, ends the script with its
  // status, which mpirun reports at once (a detached daemon's death goes unseen and mpirun waits
  // for it forever), and the script names the host.
  agent
      << "  *) echo \"dlhost test-host agent: no test host '$host'\" >&2; exit 255 ;;\n"
         "esac\n"
      // Each host gets its own temporary folder, as a real node has its own /tmp: the daemons of
      // all test hosts share this machine's name, so in one /tmp they race to make the same Open
      // MPI session folder (/tmp/ompi.HOST.UID/jf.N); the loser's orte_init fails ("mkdir ...
      // File exists", seen under load) and, daemonized, it died unseen.
      << "TMPDIR=" << folder_
      << "/tmp-$ns; export TMPDIR\n"
         "mkdir -p \"$TMPDIR\" || exit 255\n"
      << ip_tool()
      << " netns exec \"$ns\" /bin/sh -c \"$*\"\n"
         "rc=$?\n"
         "[ $rc -eq 0 ] || echo \"dlhost test-host agent: the MPI daemon on test host $ns ($host) "
         "ended with status $rc\" >&2\n"
         "exit $rc\n";
  agent.close();
  hostfile.close();
  if (!agent || !hostfile) throw std::runtime_error("test hosts: cannot write into " + folder_);
  fs::permissions(folder_ + "/agent", fs::perms::owner_all);
}

void TestHosts::shape(const std::string& ns, const std::string& dev, const Interconnect& link) {
  if (link.gbit <= 0 && link.latency_us <= 0) return;
  std::vector<std::string> cmd = {tc_tool()};
  if (!ns.empty()) cmd.insert(cmd.end(), {"-n", ns});
  cmd.insert(cmd.end(), {"qdisc", "add", "dev", dev, "root"});
  if (link.latency_us > 0) {
    // Host to host crosses two of these queues (the sender's and the receiver's link): half each.
    cmd.insert(cmd.end(), {"netem", "delay", number_text(link.latency_us / 2) + "us"});
    if (link.gbit > 0) cmd.insert(cmd.end(), {"rate", rate_text(link.gbit)});
    cmd.insert(cmd.end(), {"limit", "100000"});
  } else {
    // A token bucket: what its burst holds passes at once, faster than the wire, so a message
    // that fits in it crosses for free (a real link has no such bucket); too small a burst and
    // the qdisc's timer, late on a busy machine, cannot keep up with the rate. 2 ms of the rate
    // (250 KB at 1 Gbit/s), at least a 64 KiB GSO packet: measured with bench/link_tcp.sh at a
    // load of 11 on 2 cores, 941 Mbit/s TCP goodput at 1gbe (as a real 1 GbE link), where 1 ms
    // gave 902 and 64 KiB 551; the 4 ms taken before also gave 940 but let 500 KB through free.
    const double bytes_per_s = link.gbit * 1e9 / 8;
    const long long burst = std::max<long long>(65536, std::llround(bytes_per_s * 0.002));
    cmd.insert(cmd.end(), {"tbf", "rate", rate_text(link.gbit), "burst", std::to_string(burst),
                           "latency", "100ms"});
  }
  must(cmd);
  // Recorded as the qdisc alone ("tbf rate ..."): the same on every link and direction.
  if (shaping_.empty())
    shaping_ =
        joined(std::vector<std::string>(std::find(cmd.begin(), cmd.end(), "root") + 1, cmd.end()));
}

void TestHosts::remove() noexcept {
  try {
    for (const Host& h : hosts_) {
      if (h.ns.empty()) continue;
      end_processes_in(h.ns);
      // The pair (and its qdiscs) goes now: a namespace's own teardown is asynchronous and
      // would keep the names taken for the next case.
      run_tool({ip_tool(), "link", "delete", h.veth});
      run_tool({ip_tool(), "netns", "delete", h.ns});
    }
    if (bridge_made_) run_tool({ip_tool(), "link", "delete", bridge_});
    bridge_made_ = false;
    hosts_.clear();
    if (!folder_.empty()) {
      std::error_code ec;
      fs::remove_all(folder_, ec);
    }
  } catch (...) {
    // A destructor's cleanup: what could not be removed is found by remove_stale_test_hosts.
  }
}

std::vector<std::string> TestHosts::launcher_args() const {
  const std::string cidr = subnet_ + ".0/24";
  return {"--hostfile", folder_ + "/hostfile", "--mca", "plm_rsh_agent", folder_ + "/agent",
          // mpirun starts every host's daemon itself, through the agent.
          "--mca", "plm_rsh_no_tree_spawn", "1",
          // The daemons stay attached to their agent instead of daemonizing: one that dies
          // before it reports to mpirun (seen on a loaded machine) fails the job at once with
          // its own error on stderr, instead of leaving mpirun waiting for it with no timeout.
          "--mca", "orte_leave_session_attached", "1", "--mca", "btl", "self,vader,tcp", "--mca",
          "btl_tcp_if_include", cidr, "--mca", "oob_tcp_if_include", cidr};
}

json TestHosts::describe() const {
  json hosts = json::array();
  for (size_t i = 0; i < hosts_.size(); ++i)
    hosts.push_back({{"name", hosts_[i].ns},
                     {"address", hosts_[i].address},
                     {"first_rank", static_cast<int>(i) * slots_}});
  return {{"profile", link_.profile},
          {"link_gbit", link_.gbit > 0 ? json(link_.gbit) : json(nullptr)},
          {"link_latency_us", link_.latency_us > 0 ? json(link_.latency_us) : json(nullptr)},
          {"ranks_per_host", slots_},
          {"parent_address", parent_address_},
          {"hosts", hosts},
          {"shaping", shaping_.empty() ? json(nullptr) : json(shaping_)}};
}

std::string TestHosts::link_faults() const {
  std::string out;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const Host& h = hosts_[i];
    // The bridge's end sees both cuts: its own `link set down`, and the host's end going down.
    std::ifstream state("/sys/class/net/" + h.veth + "/operstate");
    std::string s;
    std::getline(state, s);
    if (s == "up") continue;
    const int first = static_cast<int>(i) * slots_;
    std::string ranks =
        slots_ == 1 ? "rank " + std::to_string(first)
                    : "ranks " + std::to_string(first) + "-" + std::to_string(first + slots_ - 1);
    out += (out.empty() ? "" : "; ") + std::string("test host ") + h.ns + " at " + h.address +
           " (" + ranks + ") lost its link (" + h.veth + " is " + (s.empty() ? "gone" : s) + ")";
  }
  return out;
}

std::string TestHosts::host_text(int host) const {
  const Host& h = hosts_.at(host);
  return "test host " + h.ns + " at " + h.address;
}

std::vector<std::string> TestHosts::run_on_host(int host) const {
  return {ip_tool(), "netns", "exec", hosts_.at(host).ns};
}

std::string TestHosts::rank_host(int rank, bool processes) const {
  const size_t i = static_cast<size_t>(std::max(rank, 0) / std::max(slots_, 1));
  if (i >= hosts_.size()) return "no test host";
  const Host& h = hosts_[i];
  std::string out = "test host " + h.ns + " at " + h.address;
  if (!processes) return out;
  ToolResult r = run_tool({ip_tool(), "netns", "pids", h.ns});
  std::stringstream pids(r.output);
  std::map<std::string, int> names;  // command name -> how many
  for (long pid; pids >> pid;) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    if (comm && std::getline(comm, name)) ++names[name];
  }
  std::string list;
  for (const auto& [name, n] : names)
    list += (list.empty() ? "" : ", ") + name + (n > 1 ? " x" + std::to_string(n) : "");
  return out + (list.empty() ? "; nothing running there" : "; running there: " + list);
}

}  // namespace dlhost
