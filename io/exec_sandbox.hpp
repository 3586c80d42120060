// Where an `exec` command runs: inside bubblewrap (tools.exec.sandbox "bwrap"), or, when the
// operator opted out ("none"), as a plain child of troupe.
#pragma once

#include "io/child_process.hpp"

#include <string>
#include <vector>

namespace troupe::io {

struct exec_sandbox_options {
  bool enabled = true;           // tools.exec.sandbox: "bwrap" (true) or "none"
  std::string bwrap = "bwrap";   // a path, or a name looked up in troupe's PATH
  // Directories the command must not see (the data directory, the workspaces root): each is an
  // empty tmpfs inside, with only the caller's workspace bound back into it.
  std::vector<std::string> hidden;
};

// In bwrap the command gets a PID namespace of its own (troupe and every other host process are
// invisible, and everything it starts dies with the call), a fresh /proc, no capabilities, no new
// privileges, no network, the system directories read-only, a minimal /etc, an empty /tmp, and the
// workspace as its only writable path (with a private, empty /tmp).
class exec_sandbox {
public:
  explicit exec_sandbox(exec_sandbox_options options = {});

  bool enabled() const { return options_.enabled; }
  // Why the sandbox cannot run commands ("" when it can): bwrap not found, or its start-up check
  // failed. Set at construction and by probe().
  const std::string& unavailable() const { return unavailable_; }

  // Runs `true` in the sandbox, with `scratch` (an existing directory) as its workspace, once, and
  // records why it failed. Returns unavailable().
  const std::string& probe(const std::string& scratch);

  // What to spawn for `/bin/sh -c command` with `workspace` writable and `cwd` (inside it) as the
  // working directory; `env` is the command's whole environment.
  spawn_spec shell(const std::string& command, const std::string& workspace, const std::string& cwd,
                   const std::vector<std::string>& env) const;

  // Whether contain() can be used: the sandbox is enabled and bwrap starts.
  bool can_contain() const { return enabled() && unavailable_.empty(); }
  // What to spawn so that `spec` runs in a PID namespace of its own and nothing else changes: it sees
  // the host's files, network and its own `env` as before, but whatever it starts (even in a session
  // of its own) dies when it exits, and it dies with troupe. Its death by signal N comes back as exit
  // code 128 + N (bwrap reports it so).
  spawn_spec contain(spawn_spec spec) const;

private:
  std::vector<std::string> bwrap_args(const std::string& workspace, const std::string& cwd,
                                      const std::vector<std::string>& env) const;

  exec_sandbox_options options_;
  std::string bwrap_path_;
  std::string unavailable_;
};

} // namespace troupe::io
