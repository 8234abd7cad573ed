#include "common/descriptor_passing.h"

#include <cstring>

namespace prefixd {

DescriptorMessage::DescriptorMessage(const void* bytes, size_t size, std::span<const int> fds)
    : control_(CMSG_SPACE(sizeof(int) * fds.size()), 0) {
  iov_.iov_base = const_cast<void*>(bytes);
  iov_.iov_len = size;
  message_.msg_iov = &iov_;
  message_.msg_iovlen = 1;
  message_.msg_control = control_.data();
  message_.msg_controllen = control_.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message_);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
}

void ReceivedDescriptors(msghdr& message, std::vector<int>& out) {
  if (message.msg_controllen == 0) return;
  for (cmsghdr* h = CMSG_FIRSTHDR(&message); h != nullptr; h = CMSG_NXTHDR(&message, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
      out.push_back(fd);
    }
  }
}

}  // namespace prefixd
