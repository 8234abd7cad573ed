// Output of the warm-vs-cold sweep: one row per prefix length, rendered as CSV, a markdown table
// and an SVG chart, plus the terminal progress bar and the loopback bandwidth probe the sweep's
// target is measured against. Plain functions; ProgressBar belongs to one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::hybrid {

struct SweepRow {
  int64_t prefix_tokens = 0;
  double cold_ttft_ms = 0;
  double warm_ttft_ms = 0;
  uint64_t state_bytes = 0;
  double fetch_ms = 0;
  double hydrate_ms = 0;
  double suffix_ms = 0;  // the warm process's suffix prefill (to the first token)
  int bitexact_layers = 0;
  int total_layers = 0;
  int agreeing_tokens = 0;
  int total_tokens = 0;
  bool warm_hit = false;
  std::string miss_reason;
  double cold_prefill_ms = 0;  // the cold process's prefix part
  double store_ms = 0;

  double speedup() const { return warm_ttft_ms > 0 ? cold_ttft_ms / warm_ttft_ms : 0; }
  bool states_bitexact() const { return total_layers > 0 && bitexact_layers == total_layers; }
  // The sweep's target: 1.5 × (state bytes ÷ loopback bandwidth + suffix time).
  double target_ms(double loopback_gbps) const {
    return 1.5 * (static_cast<double>(state_bytes) / (loopback_gbps * 1e6) + suffix_ms);
  }
};

// The CSV columns, exactly: prefix_tokens, cold_ttft_ms, warm_ttft_ms, speedup, state_bytes,
// fetch_ms, hydrate_ms, suffix_ms, states_bitexact, token_agreement.
std::string CsvHeader();
std::string CsvRow(const SweepRow& row);

// A markdown table with the CSV's figures plus the target and where the warm time goes.
std::string MarkdownTable(const std::vector<SweepRow>& rows, double loopback_gbps);

// Cold and warm TTFT (log scale, left axis) and speedup (right axis) against the prefix length
// (log scale). Self-contained SVG 1.1, no scripts or external fonts.
std::string SvgChart(const std::vector<SweepRow>& rows, std::string_view title);

// The opening of a chart: the <svg> element of `width` × `height` pixels on a white ground, with
// `title` centred at the top. The caller draws and closes it with "</svg>".
std::string SvgOpen(double width, double height, std::string_view title);

// Loopback TCP bandwidth in GB/s (10^9 B/s): the best of `repeats` one-stream transfers of
// `bytes` through 127.0.0.1 in 1 MiB writes, from and into buffers as large as the transfer (up
// to 256 MiB), i.e. memory to memory as a state fetch moves them. 0 when sockets fail.
double MeasureLoopbackGbps(uint64_t bytes, int repeats);

// A one-line progress bar on stderr, redrawn in place when stderr is a terminal and printed as
// plain lines (at most one per stage) otherwise.
class ProgressBar {
 public:
  explicit ProgressBar(int total_steps);
  // `step` of total (0-based), what it is doing, and how far that step has got (0..1).
  void Update(int step, std::string_view what, double fraction);
  void Finish();

 private:
  int total_;
  bool tty_;
  std::string last_what_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace prefixd::hybrid
