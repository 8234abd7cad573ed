#include "commands/exec_gate.h"

#include <atomic>

namespace prefixd::commands {
namespace {

std::atomic<size_t> next_stripe{0};
thread_local const size_t this_thread_stripe =
    next_stripe.fetch_add(1, std::memory_order_relaxed) % ExecGate::kStripes;
// Whether this thread holds a gate now: a nested hold takes nothing (the stripes are not
// recursive, and EXEC's commands run under EXEC's hold).
thread_local bool holding = false;

}  // namespace

ExecGate::Hold::Hold(ExecGate& gate, bool exclusive) {
  if (holding) return;
  holding = true;
  gate_ = &gate, exclusive_ = exclusive;
  if (!exclusive) {
    stripe_ = this_thread_stripe;
    gate.stripes_[stripe_].mu.lock();
    return;
  }
  // Always in ascending order: two EXECs never wait on each other crosswise.
  for (Stripe& s : gate.stripes_) s.mu.lock();
}

ExecGate::Hold::~Hold() {
  if (gate_ == nullptr) return;
  if (!exclusive_) {
    gate_->stripes_[stripe_].mu.unlock();
  } else {
    for (size_t i = kStripes; i-- > 0;) gate_->stripes_[i].mu.unlock();
  }
  holding = false;
}

}  // namespace prefixd::commands
