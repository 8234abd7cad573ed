#include "report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace prefixd::llama {
namespace {

std::string Fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

// A chart's frame: plot area [x0, x1] × [y0, y1] in pixels.
struct Frame {
  double width = 760, height = 420;
  double x0 = 70, x1 = 730, y0 = 60, y1 = 360;
};

std::string Open(const Frame& f, std::string_view title) {
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Fixed(f.width, 0) +
                    "\" height=\"" + Fixed(f.height, 0) + "\" font-family=\"sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + Fixed(f.width / 2, 0) + "\" y=\"28\" text-anchor=\"middle\" " +
         "font-size=\"16\">" + Escape(title) + "</text>\n";
  svg += "<line x1=\"" + Fixed(f.x0, 0) + "\" y1=\"" + Fixed(f.y1, 0) + "\" x2=\"" +
         Fixed(f.x1, 0) + "\" y2=\"" + Fixed(f.y1, 0) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + Fixed(f.x0, 0) + "\" y1=\"" + Fixed(f.y0, 0) + "\" x2=\"" +
         Fixed(f.x0, 0) + "\" y2=\"" + Fixed(f.y1, 0) + "\" stroke=\"black\"/>\n";
  return svg;
}

std::string Text(double x, double y, std::string_view text, std::string_view anchor = "middle",
                 int size = 11) {
  return "<text x=\"" + Fixed(x, 1) + "\" y=\"" + Fixed(y, 1) + "\" text-anchor=\"" +
         std::string(anchor) + "\" font-size=\"" + std::to_string(size) + "\">" + Escape(text) +
         "</text>\n";
}

std::string Legend(const Frame& f, const std::vector<std::pair<std::string, std::string>>& items) {
  std::string svg;
  double x = f.x0 + 10;
  for (const auto& [label, colour] : items) {
    svg += "<rect x=\"" + Fixed(x, 0) + "\" y=\"40\" width=\"12\" height=\"12\" fill=\"" + colour +
           "\"/>\n";
    svg += Text(x + 16, 50, label, "start");
    x += 30 + 7.0 * static_cast<double>(label.size());
  }
  return svg;
}

// A log-scale axis: pixel of `v` between `lo` and `hi` mapped onto [p0, p1].
double LogScale(double v, double lo, double hi, double p0, double p1) {
  const double t = (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  return p0 + t * (p1 - p0);
}

}  // namespace

std::string ChatCsv(const std::vector<ChatRow>& rows) {
  std::string csv =
      "turn,prompt_tokens,matched_tokens,prefilled_tokens,cold_ttft_ms,warm_ttft_ms,speedup,"
      "states_bitexact,token_agreement,block_bytes_stored,tail_bytes_stored,state_bytes_stored,"
      "store_prefill_ms\n";
  for (const ChatRow& r : rows) {
    csv += std::to_string(r.turn) + "," + std::to_string(r.prompt_tokens) + "," +
           std::to_string(r.matched_tokens) + "," + std::to_string(r.prefilled_tokens) + "," +
           Fixed(r.cold_ttft_ms, 3) + "," + Fixed(r.warm_ttft_ms, 3) + "," + Fixed(r.speedup(), 2) +
           "," + (r.states_bitexact ? "yes" : "no") + "," + std::to_string(r.agreeing_tokens) +
           "/" + std::to_string(r.total_tokens) + "," + std::to_string(r.block_bytes_stored) + "," +
           std::to_string(r.tail_bytes_stored) + "," + std::to_string(r.state_bytes_stored) + "," +
           Fixed(r.store_prefill_ms, 3) + "\n";
  }
  return csv;
}

std::string SweepCsv(const std::vector<SweepRow>& rows) {
  std::string csv =
      "prefix_tokens,suffix_tokens,cold_ttft_ms,warm_ttft_ms,speedup,restored_tokens,state_bytes,"
      "match_ms,fetch_ms,assemble_ms,load_ms,restore_ms,suffix_ms,file_load_ms,restore_vs_file,"
      "states_bitexact,token_agreement,store_prefill_ms,first_restore_ms,first_file_load_ms,"
      "transport,socket_fetch_ms,socket_restore_ms,save_ms,save_transport\n";
  for (const SweepRow& r : rows) {
    csv += std::to_string(r.prefix_tokens) + "," + std::to_string(r.suffix_tokens) + "," +
           Fixed(r.cold_ttft_ms, 3) + "," + Fixed(r.warm_ttft_ms, 3) + "," + Fixed(r.speedup(), 2) +
           "," + std::to_string(r.restored_tokens) + "," + std::to_string(r.state_bytes) + "," +
           Fixed(r.match_ms, 3) + "," + Fixed(r.fetch_ms, 3) + "," + Fixed(r.assemble_ms, 3) + "," +
           Fixed(r.load_ms, 3) + "," + Fixed(r.restore_ms(), 3) + "," + Fixed(r.suffix_ms, 3) +
           "," + Fixed(r.file_load_ms, 3) + "," +
           Fixed(r.file_load_ms > 0 ? r.restore_ms() / r.file_load_ms : 0, 2) + "," +
           (r.states_bitexact ? "yes" : "no") + "," + std::to_string(r.agreeing_tokens) + "/" +
           std::to_string(r.total_tokens) + "," + Fixed(r.store_prefill_ms, 3) + "," +
           Fixed(r.first_restore_ms, 3) + "," + Fixed(r.first_file_load_ms, 3) + "," +
           (r.shared_memory ? "shm" : "socket") + "," + Fixed(r.socket_fetch_ms, 3) + "," +
           Fixed(r.socket_restore_ms, 3) + "," + Fixed(r.save_ms, 3) + "," +
           (r.save_shared_memory ? "shm" : "socket") + "\n";
  }
  return csv;
}

std::string ChatSvg(const std::vector<ChatRow>& rows, std::string_view title) {
  const Frame f;
  std::string svg = Open(f, title);
  double top = 1e-3;
  for (const ChatRow& r : rows) top = std::max({top, r.cold_ttft_ms, r.warm_ttft_ms});
  top *= 1.1;
  const double slot = (f.x1 - f.x0) / static_cast<double>(std::max<size_t>(1, rows.size()));
  const double bar = slot * 0.35;
  auto y_of = [&](double v) { return f.y1 - (v / top) * (f.y1 - f.y0); };
  for (int i = 0; i <= 4; ++i) {
    const double v = top * i / 4;
    svg += Text(f.x0 - 6, y_of(v) + 4, Fixed(v, v < 10 ? 1 : 0), "end");
  }
  svg += Text(20, (f.y0 + f.y1) / 2, "ms", "middle");
  for (size_t i = 0; i < rows.size(); ++i) {
    const ChatRow& r = rows[i];
    const double x = f.x0 + slot * static_cast<double>(i) + slot * 0.15;
    svg += "<rect x=\"" + Fixed(x, 1) + "\" y=\"" + Fixed(y_of(r.cold_ttft_ms), 1) + "\" width=\"" +
           Fixed(bar, 1) + "\" height=\"" + Fixed(f.y1 - y_of(r.cold_ttft_ms), 1) +
           "\" fill=\"#c0504d\"/>\n";
    svg += "<rect x=\"" + Fixed(x + bar, 1) + "\" y=\"" + Fixed(y_of(r.warm_ttft_ms), 1) +
           "\" width=\"" + Fixed(bar, 1) + "\" height=\"" + Fixed(f.y1 - y_of(r.warm_ttft_ms), 1) +
           "\" fill=\"#4f81bd\"/>\n";
    svg += Text(x + bar, f.y1 + 16, std::to_string(r.turn));
    svg += Text(x + bar, y_of(r.cold_ttft_ms) - 4, Fixed(r.speedup(), 1) + "x", "middle", 10);
  }
  svg += Text((f.x0 + f.x1) / 2, f.y1 + 36, "turn");
  svg += Legend(f, {{"cold prefill", "#c0504d"}, {"warm (prefixd restore + suffix)", "#4f81bd"}});
  return svg + "</svg>\n";
}

std::string SweepSvg(const std::vector<SweepRow>& rows, std::string_view title) {
  const Frame f;
  std::string svg = Open(f, title);
  if (rows.empty()) return svg + "</svg>\n";
  double lo = 1e9, hi = 0, xlo = 1e18, xhi = 0;
  for (const SweepRow& r : rows) {
    for (double v : {r.cold_ttft_ms, r.warm_ttft_ms, r.file_load_ms}) {
      if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    xlo = std::min(xlo, static_cast<double>(r.prefix_tokens));
    xhi = std::max(xhi, static_cast<double>(r.prefix_tokens));
  }
  lo = std::pow(10.0, std::floor(std::log10(std::max(lo, 1e-3))));
  hi = std::pow(10.0, std::ceil(std::log10(std::max(hi, lo * 10))));
  if (xhi <= xlo) xhi = xlo * 2;
  auto x_of = [&](double v) { return LogScale(v, xlo, xhi, f.x0 + 20, f.x1 - 20); };
  auto y_of = [&](double v) { return LogScale(std::max(v, lo), lo, hi, f.y1, f.y0); };
  for (double v = lo; v <= hi * 1.001; v *= 10) {
    svg += Text(f.x0 - 6, y_of(v) + 4, Fixed(v, v < 1 ? 3 : 0), "end");
  }
  svg += Text(20, (f.y0 + f.y1) / 2, "ms");
  for (const SweepRow& r : rows) {
    svg += Text(x_of(static_cast<double>(r.prefix_tokens)), f.y1 + 16,
                std::to_string(r.prefix_tokens));
  }
  svg += Text((f.x0 + f.x1) / 2, f.y1 + 36, "prefix tokens");
  auto line = [&](auto value, const char* colour) {
    std::string points;
    for (const SweepRow& r : rows) {
      const double v = value(r);
      if (v <= 0) continue;
      points +=
          Fixed(x_of(static_cast<double>(r.prefix_tokens)), 1) + "," + Fixed(y_of(v), 1) + " ";
      svg += "<circle cx=\"" + Fixed(x_of(static_cast<double>(r.prefix_tokens)), 1) + "\" cy=\"" +
             Fixed(y_of(v), 1) + "\" r=\"3\" fill=\"" + colour + "\"/>\n";
    }
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(colour) +
           "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
  };
  line([](const SweepRow& r) { return r.cold_ttft_ms; }, "#c0504d");
  line([](const SweepRow& r) { return r.warm_ttft_ms; }, "#4f81bd");
  line([](const SweepRow& r) { return r.file_load_ms; }, "#9bbb59");
  svg += Legend(f, {{"cold TTFT", "#c0504d"},
                    {"warm TTFT (prefixd)", "#4f81bd"},
                    {"llama.cpp file slot load", "#9bbb59"}});
  return svg + "</svg>\n";
}

ProgressBar::ProgressBar(int total_steps) : total_(total_steps), tty_(isatty(STDERR_FILENO) != 0) {}

void ProgressBar::Update(int step, std::string_view what) {
  const int width = 30;
  const int done = total_ > 0 ? width * step / total_ : width;
  std::string bar(static_cast<size_t>(done), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "%s[%s] %d/%d %.*s%s", tty_ ? "\r\033[K" : "", bar.c_str(), step, total_,
               static_cast<int>(what.size()), what.data(), tty_ ? "" : "\n");
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  Update(total_, "done");
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace prefixd::llama
