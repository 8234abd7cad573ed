#include "commands/cold_reply.h"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace prefixd::commands {
namespace {

[[noreturn]] void ReadFailed(const std::string& error) {
  throw std::runtime_error("reading a stored value from disk failed: " + error);
}

// One bulk of cold extents, read into each window of the reply as it is written, or, when it is
// a single extent of a file, sent from the file.
class ColdBulk : public protocol::ReplyProducer {
 public:
  ColdBulk(std::shared_ptr<ColdPlan> plan, size_t first, size_t count)
      : plan_(std::move(plan)), index_(first), end_(first + count) {}

  void Produce(std::span<uint8_t> out) override {
    while (!out.empty()) {
      const store::ColdExtent& e = plan_->extent(index_);
      const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), e.length - sent_));
      if (e.file == nullptr) {
        std::fill_n(out.data(), n, uint8_t{0});
      } else if (std::string error; !e.file->ReadInto(e.offset + sent_, out.first(n), error)) {
        ReadFailed(error);
      }
      out = out.subspan(n);
      sent_ += n;
      if (sent_ == e.length && index_ + 1 < end_) ++index_, sent_ = 0;
    }
  }

  // Nothing stored is pinned: the bytes are on disk, and the window is the writer's.
  size_t pinned_bytes() const override { return 0; }

  // Sent straight from the file (sendfile): the page cache is the only buffer.
  int file_descriptor() const override {
    if (end_ - index_ != 1 || plan_->extent(index_).file == nullptr) return -1;
    return plan_->extent(index_).file->descriptor();
  }
  uint64_t file_offset() const override { return plan_->extent(index_).offset; }

 private:
  std::shared_ptr<ColdPlan> plan_;
  size_t index_, end_;  // the extent being written, and one past the last
  uint64_t sent_ = 0;   // of extent index_
};

}  // namespace

ColdPlan::ColdPlan(std::vector<store::ColdExtent> extents) : extents_(std::move(extents)) {
  for (const store::ColdExtent& e : extents_) {
    std::string error;
    if (e.file != nullptr && !e.file->Holds(e.offset, e.length, error)) ReadFailed(error);
  }
}

void BulkCold(protocol::ReplyWriter& reply, const std::shared_ptr<ColdPlan>& plan, size_t first,
              size_t count) {
  uint64_t size = 0;
  for (size_t i = first; i < first + count; ++i) size += plan->extent(i).length;
  reply.BulkProduced(size, std::make_unique<ColdBulk>(plan, first, count));
}

}  // namespace prefixd::commands
