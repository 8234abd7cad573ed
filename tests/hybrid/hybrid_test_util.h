// Helpers shared by the hybrid reference client's tests: reading a result file, running the
// prefixd-hybrid program as a second process, and naming parameterised family tests. Any thread.
#pragma once

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace prefixd::hybrid::test {

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the program at `binary` with `args`; its exit status (-1 if it did not exit normally).
inline int RunProgram(const std::string& binary, std::vector<std::string> args) {
  args.insert(args.begin(), binary);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// "mamba2-tiny" → "mamba2_tiny": a model name as a gtest parameter name.
struct ModelParamName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    std::string n = info.param;
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
  }
};

}  // namespace prefixd::hybrid::test
