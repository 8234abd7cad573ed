// Descriptor passing on a unix socket (SCM_RIGHTS): the message that sends descriptors with a
// message's bytes, and the descriptors a received message carries. Its own small library, linked
// by the server's connections and by the client library (as common/key_slot is); any thread.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <span>
#include <vector>

namespace prefixd {

// A sendmsg(2) message of `bytes` with `fds` passed on them: the kernel hands the descriptors to
// the read that holds the message's first byte. Borrows `bytes` and copies `fds`; the descriptors
// stay the caller's to close once it is sent.
class DescriptorMessage {
 public:
  DescriptorMessage(const void* bytes, size_t size, std::span<const int> fds);
  DescriptorMessage(const DescriptorMessage&) = delete;
  DescriptorMessage& operator=(const DescriptorMessage&) = delete;

  const msghdr* get() const { return &message_; }

 private:
  std::vector<char> control_;  // operator new's alignment suits cmsghdr
  iovec iov_{};
  msghdr message_{};
};

// Appends to `out` every descriptor `message`'s control data carries (SCM_RIGHTS), in order.
void ReceivedDescriptors(msghdr& message, std::vector<int>& out);

}  // namespace prefixd
