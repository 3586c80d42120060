#include "io/exec_sandbox.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace troupe::io {

namespace fs = std::filesystem;

namespace {

// Enough of /etc for a shell and the common tools (users and groups, the dynamic loader's cache,
// Debian's alternatives, certificates, locale and time zone data); the rest of /etc may hold
// secrets (troupe's own configuration, shadow passwords) and stays out.
constexpr const char* etc_entries[] = {
  "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd",
  "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/ssl", "/etc/ca-certificates",
  "/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/os-release", "/etc/debian_version",
  "/etc/protocols", "/etc/services", "/etc/inputrc", "/etc/magic",
};

// The merged-/usr top-level entries: a symlink on Debian 12, a directory elsewhere.
constexpr const char* usr_links[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

bool within(const std::string& path, const std::string& base) {
  return path == base || (path.size() > base.size() && path.compare(0, base.size(), base) == 0 &&
                          (base == "/" || path[base.size()] == '/'));
}

std::string normal(const std::string& path) {
  std::error_code ec;
  auto p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? std::string() : p.lexically_normal().string();
}

} // namespace

exec_sandbox::exec_sandbox(exec_sandbox_options options) : options_(std::move(options)) {
  if (!options_.enabled)
    return;
  const char* path = std::getenv("PATH");
  bwrap_path_ = find_in_path(options_.bwrap, path ? path : "");
  if (bwrap_path_.empty() || ::access(bwrap_path_.c_str(), X_OK) != 0)
    unavailable_ = "bubblewrap (" + options_.bwrap +
                   ") is not installed or not on troupe's PATH; install the Debian package bubblewrap, "
                   "or set tools.exec.sandbox to \"none\" to run commands without a sandbox";
}

std::vector<std::string> exec_sandbox::bwrap_args(const std::string& workspace, const std::string& cwd,
                                                  const std::vector<std::string>& env) const {
  std::vector<std::string> a;
  std::vector<std::string> visible; // host paths bound inside, read-only
  auto ro_bind = [&](const std::string& path) {
    a.insert(a.end(), {"--ro-bind-try", path, path});
    visible.push_back(normal(path));
  };
  ro_bind("/usr");
  for (const char* entry : usr_links) {
    std::error_code ec;
    auto st = fs::symlink_status(entry, ec);
    if (ec)
      continue;
    if (fs::is_symlink(st)) {
      auto target = fs::read_symlink(entry, ec);
      if (!ec)
        a.insert(a.end(), {"--symlink", target.string(), entry});
    } else if (fs::is_directory(st)) {
      ro_bind(entry);
    }
  }
  for (const char* entry : etc_entries) {
    std::error_code ec;
    if (fs::exists(entry, ec))
      ro_bind(entry);
  }
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  // A hidden directory that a read-only bind would show is covered by an empty tmpfs; elsewhere it
  // is simply not there.
  for (const auto& hidden : options_.hidden) {
    std::string path = normal(hidden);
    if (path.empty() || path == "/")
      continue;
    for (const auto& v : visible)
      if (within(path, v)) {
        a.insert(a.end(), {"--tmpfs", path});
        break;
      }
  }
  // The root bwrap builds is a tmpfs of its own: read-only, so that the workspace and the private
  // /tmp are the only places a command can write.
  a.insert(a.end(), {"--bind", workspace, workspace, "--remount-ro", "/", "--chdir", cwd});
  // --unshare-all: user, ipc, pid, net, uts and cgroup namespaces. The command reaches no network.
  a.insert(a.end(), {"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"});
  for (const auto& entry : env) {
    auto eq = entry.find('=');
    if (eq != std::string::npos)
      a.insert(a.end(), {"--setenv", entry.substr(0, eq), entry.substr(eq + 1)});
  }
  return a;
}

spawn_spec exec_sandbox::shell(const std::string& command, const std::string& workspace, const std::string& cwd,
                               const std::vector<std::string>& env) const {
  spawn_spec spec;
  if (!options_.enabled) {
    spec.program = "/bin/sh";
    spec.args = {"-c", command};
    spec.env = env;
    spec.working_dir = cwd;
    return spec;
  }
  // bwrap itself gets an empty environment: what the command sees as /proc/1/environ holds nothing.
  spec.program = bwrap_path_;
  spec.args = bwrap_args(workspace, cwd, env);
  spec.args.insert(spec.args.end(), {"--", "/bin/sh", "-c", command});
  spec.working_dir = cwd;
  return spec;
}

spawn_spec exec_sandbox::contain(spawn_spec spec) const {
  // A fresh /proc: the namespace's pids are what the program sees as its own (getpid() and
  // /proc/self agree). bwrap's child passes `env` on, so no --setenv is needed.
  std::vector<std::string> args = {"--dev-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--die-with-parent",
                                   "--", spec.program};
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  spec.program = bwrap_path_;
  spec.args = std::move(args);
  return spec;
}

const std::string& exec_sandbox::probe(const std::string& scratch) {
  if (!options_.enabled || !unavailable_.empty())
    return unavailable_;
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    unavailable_ = std::string("cannot check bubblewrap: ") + std::strerror(errno);
    return unavailable_;
  }
  unique_fd err_read(err_pipe[0]), err_write(err_pipe[1]);
  spawn_spec spec = shell("true", scratch, scratch, {"PATH=/usr/bin:/bin"});
  spec.stderr_fd = err_write.get();
  std::string error;
  child_process child = child_process::spawn(spec, error);
  err_write.reset();
  if (!child) {
    unavailable_ = "bubblewrap cannot start: " + error;
    return unavailable_;
  }
  if (!child.wait_exit(std::chrono::seconds(10))) {
    child.terminate(std::chrono::milliseconds(0));
    unavailable_ = "bubblewrap did not run `true` within 10 seconds";
    return unavailable_;
  }
  child.reap();
  if (child.exit_code() == 0)
    return unavailable_;
  // bwrap says why on stderr ("bwrap: No permissions to create new namespace, ..."): its first line.
  std::string said;
  ::fcntl(err_read.get(), F_SETFL, O_NONBLOCK);
  char buf[1024];
  ssize_t n = ::read(err_read.get(), buf, sizeof buf);
  if (n > 0)
    said.assign(buf, static_cast<std::size_t>(n));
  if (auto nl = said.find('\n'); nl != std::string::npos)
    said.resize(nl);
  unavailable_ = "bubblewrap cannot create the sandbox (" + child.exit_description() + ")" +
                 (said.empty() ? std::string() : ": " + said);
  return unavailable_;
}

} // namespace troupe::io
