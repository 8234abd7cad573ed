// PrefixReceipt: the value receipt of the attention-layer substrate: KV.PREFIX hits and misses,
// the tokens and bytes they served and the prefill time they avoided, plus V.FETCH traffic.
// Reported by INFO (# Pion, # Vstore), PION.STATS and KV.PREFIX.INFO. Any io thread may bump or
// read the counters; they live in memory only, like Pion's.
#pragma once

#include "common/striped_counter.h"

namespace prefixd::commands {

struct PrefixReceipt {
  StripedCounter hits;
  StripedCounter misses;
  // Hits whose prefill time the client reported (LOOKUP or REGISTER ... PREFILL_MS).
  StripedCounter hits_measured;
  StripedCounter tokens_served;
  StripedCounter bytes_served;
  // Every hit's credited prefill time, and the part of it that clients reported.
  StripedCounter prefill_us_saved;
  StripedCounter prefill_us_measured;
  StripedCounter fetches;      // V.FETCH calls answered with rows
  StripedCounter fetch_bytes;  // their payload bytes

  void Reset() {
    for (StripedCounter* c : {&hits, &misses, &hits_measured, &tokens_served, &bytes_served,
                              &prefill_us_saved, &prefill_us_measured, &fetches, &fetch_bytes}) {
      c->Reset();
    }
  }
};

}  // namespace prefixd::commands
