// A child process that holds SHM leases on a value until it is killed, for the tests that check
// what a client killed with SIGKILL leaves behind (its leases must end with its socket). Called
// from the test's own thread.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>

#include "prefixd/shm.h"

namespace prefixd::it {

struct LeaseHolder {
  pid_t pid = -1;
  int held = -1;  // the leases the child took; -1 when it could not say
};

// Forks a child that connects to the unix socket at `path`, reads `key` with SHM.GET `count`
// times (a lease each), says how many leases it got, and waits to be killed.
inline LeaseHolder ForkLeaseHolder(const std::string& path, const std::string& key, int count) {
  LeaseHolder holder;
  int ready[2];
  if (::pipe(ready) != 0) return holder;
  holder.pid = ::fork();
  if (holder.pid == 0) {
    ShmClient client;
    int held = 0;
    if (client.Connect(path).ok()) {
      for (int i = 0; i < count; ++i) {
        ShmView view;
        if (client.Get(key, view).ok() && view.lease != 0) ++held;
      }
    }
    const char byte = static_cast<char>(held);
    (void)!::write(ready[1], &byte, 1);
    while (true) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  if (holder.pid > 0 && ::read(ready[0], &byte, 1) == 1) holder.held = byte;
  ::close(ready[0]);
  return holder;
}

}  // namespace prefixd::it
