// prefixd-llama's output: the rows of `chat` and `sweep` as CSV and as an SVG chart, and a
// progress bar on stderr. Plain functions; a ProgressBar belongs to one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::llama {

// One turn of `chat`; the CSV's first nine columns are those of `prefixd-hybrid chat`.
struct ChatRow {
  int turn = 0;
  uint64_t prompt_tokens = 0;
  uint64_t matched_tokens = 0;    // restored by the warm process
  uint64_t prefilled_tokens = 0;  // decoded by the warm process
  double cold_ttft_ms = 0;        // the whole prompt prefilled as llama.cpp does without a cache
  double warm_ttft_ms = 0;        // restore + the rest, in the other process
  double store_prefill_ms = 0;    // the saving prefill (block-sized chunks) with its stores
  bool states_bitexact = false;   // warm logits equal to a cold run split at the same place
  int agreeing_tokens = 0;        // greedy tokens equal to the whole-prompt cold run's
  int total_tokens = 0;
  uint64_t block_bytes_stored = 0;  // K/V of new blocks sent by the saving process this turn
  uint64_t tail_bytes_stored = 0;   // K/V of checkpoints' partial blocks sent this turn
  uint64_t state_bytes_stored = 0;  // recurrent state sent this turn

  double speedup() const { return warm_ttft_ms > 0 ? cold_ttft_ms / warm_ttft_ms : 0; }
};

// One prefix length of `sweep`.
struct SweepRow {
  uint64_t prefix_tokens = 0;
  uint64_t suffix_tokens = 0;
  double cold_ttft_ms = 0;          // the whole prompt prefilled as llama.cpp does without a cache
  double warm_ttft_ms = 0;          // restore of the prefix + the suffix, in the other process
  double store_prefill_ms = 0;      // the prefix's saving prefill (block-sized chunks) and stores
  double save_ms = 0;               // of it, the save (SaveReport::ms: state read, match, stores)
  bool save_shared_memory = false;  // the stores went through a memfd (SHM.CALL)
  uint64_t restored_tokens = 0;
  uint64_t state_bytes = 0;
  double match_ms = 0, fetch_ms = 0, assemble_ms = 0, load_ms = 0;
  double suffix_ms = 0;
  double file_load_ms = 0;        // llama_state_seq_load_file of the same prefix, page cache warm
  double first_restore_ms = 0;    // the warm process's first restore (memory not yet faulted in)
  double first_file_load_ms = 0;  // the warm process's first load of the slot file
  bool states_bitexact = false;
  int agreeing_tokens = 0;
  int total_tokens = 0;
  bool shared_memory = false;  // the restore fetched through the shared arenas
  // --compare-transports: the same restore over the socket (0 when not asked for).
  double socket_fetch_ms = 0, socket_restore_ms = 0;

  double restore_ms() const { return match_ms + fetch_ms + assemble_ms + load_ms; }
  double speedup() const { return warm_ttft_ms > 0 ? cold_ttft_ms / warm_ttft_ms : 0; }
};

std::string ChatCsv(const std::vector<ChatRow>& rows);
std::string SweepCsv(const std::vector<SweepRow>& rows);

// Cold and warm time to first token per turn (bars, left axis).
std::string ChatSvg(const std::vector<ChatRow>& rows, std::string_view title);
// Cold and warm time to first token and the file slot's load against the prefix length (log
// scales).
std::string SweepSvg(const std::vector<SweepRow>& rows, std::string_view title);

// A one-line progress bar on stderr, redrawn in place on a terminal and printed as plain lines
// otherwise.
class ProgressBar {
 public:
  explicit ProgressBar(int total_steps);
  void Update(int step, std::string_view what);
  void Finish();

 private:
  int total_;
  bool tty_;
};

}  // namespace prefixd::llama
