// ExecGate: what keeps EXEC whole. Every command holds the stripe of its own thread while it runs
// (a flag no other thread normally touches: taking it is one uncontended exchange on a cache line
// the thread owns, giving it back a plain store); EXEC holds every stripe, so no other client's
// command runs between, or during, the commands of its queue. Any thread (io threads, the active
// expiry thread).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>

namespace prefixd::commands {

class ExecGate {
 public:
  // Threads get stripes in the order they first take the gate; past this many, two share one
  // (still correct, only no longer uncontended).
  static constexpr size_t kStripes = 64;

  // Holds the gate for one command: its thread's stripe, or every stripe (`exclusive`: EXEC).
  // A thread that already holds the gate (a command run inside EXEC) takes nothing more.
  class Hold {
   public:
    Hold(ExecGate& gate, bool exclusive);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    ExecGate* gate_ = nullptr;  // null: nothing taken
    bool exclusive_ = false;
    size_t stripe_ = 0;
  };

 private:
  struct alignas(64) Stripe {
    std::atomic<bool> held{false};
  };
  static void Lock(Stripe& s) {
    if (!s.held.exchange(true, std::memory_order_acquire)) return;
    LockContended(s);
  }
  // Waits for the holder: a command (EXEC waits for it to finish) or an EXEC (the command waits
  // for its queue); yields, then sleeps.
  static void LockContended(Stripe& s);
  // Waits while an EXEC waits for the stripes.
  void YieldToExclusive();
  static void Unlock(Stripe& s) { s.held.store(false, std::memory_order_release); }

  std::array<Stripe, kStripes> stripes_;
  // EXECs waiting for the stripes: a command about to take its stripe lets them go first, so
  // a thread busy with a long pipeline cannot keep an EXEC waiting for ever. Written only by
  // EXEC, so commands read it from their own cache's copy.
  alignas(64) std::atomic<int> exclusive_waiting_{0};
};

}  // namespace prefixd::commands
