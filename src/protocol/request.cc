#include "protocol/request.h"

namespace prefixd::protocol {

std::string_view Request::operator[](size_t i) const {
  const Slot& s = slots_[i];
  if (s.large) return large_[s.offset].view();
  return std::string_view(arena_).substr(s.offset, s.length);
}

Bytes Request::TakeBytes(size_t i) const {
  const Slot& s = slots_[i];
  if (s.large) return large_[s.offset];
  return Bytes::CopyOf((*this)[i]);
}

void Request::Clear() {
  arena_.clear();
  slots_.clear();
  large_.clear();
  payload_bytes_ = 0;
  inline_ = false;
}

void Request::AddSmall(std::string_view arg) {
  BeginSmall(arg.size());
  AppendSmall(arg);
}

void Request::BeginSmall(size_t length) {
  slots_.push_back(Slot{static_cast<uint32_t>(arena_.size()), 0, static_cast<uint32_t>(length)});
  payload_bytes_ += length;
}

void Request::AppendSmall(std::string_view part) { arena_.append(part); }

void Request::AddLarge(Bytes arg) {
  payload_bytes_ += arg.size();
  slots_.push_back(Slot{static_cast<uint32_t>(large_.size()), 1, 0});
  large_.push_back(std::move(arg));
}

}  // namespace prefixd::protocol
