#include "engine/exec_gate.h"

#include <chrono>
#include <thread>

namespace prefixd::commands {
namespace {

std::atomic<size_t> next_stripe{0};
// This thread's stripe plus one (0: none yet); constant-initialised, so reading it costs no
// guard.
thread_local size_t this_thread_stripe = 0;
// Whether this thread holds a gate now: a nested hold takes nothing (EXEC's commands run under
// EXEC's hold).
thread_local bool holding = false;

size_t ThisThreadStripe() {
  if (this_thread_stripe == 0) {
    this_thread_stripe =
        next_stripe.fetch_add(1, std::memory_order_relaxed) % ExecGate::kStripes + 1;
  }
  return this_thread_stripe - 1;
}

}  // namespace

void ExecGate::LockContended(Stripe& s) {
  for (int tries = 0;; ++tries) {
    if (!s.held.load(std::memory_order_relaxed) &&
        !s.held.exchange(true, std::memory_order_acquire)) {
      return;
    }
    if (tries < 100) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void ExecGate::YieldToExclusive() {
  for (int tries = 0; exclusive_waiting_.load(std::memory_order_relaxed) != 0; ++tries) {
    if (tries < 100) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

ExecGate::Hold::Hold(ExecGate& gate, bool exclusive) {
  if (holding) return;
  holding = true;
  gate_ = &gate, exclusive_ = exclusive;
  if (!exclusive) {
    stripe_ = ThisThreadStripe();
    if (gate.exclusive_waiting_.load(std::memory_order_relaxed) != 0) gate.YieldToExclusive();
    Lock(gate.stripes_[stripe_]);
    return;
  }
  // Always in ascending order: two EXECs never wait on each other crosswise.
  gate.exclusive_waiting_.fetch_add(1, std::memory_order_relaxed);
  for (Stripe& s : gate.stripes_) Lock(s);
  gate.exclusive_waiting_.fetch_sub(1, std::memory_order_relaxed);
}

ExecGate::Hold::~Hold() {
  if (gate_ == nullptr) return;
  if (!exclusive_) {
    Unlock(gate_->stripes_[stripe_]);
  } else {
    for (Stripe& s : gate_->stripes_) Unlock(s);
  }
  holding = false;
}

}  // namespace prefixd::commands
