#include "report.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

namespace prefixd::hybrid {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string TokensLabel(int64_t n) {
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n / 1024) + "K";
  return std::to_string(n);
}

std::string MsLabel(double ms) {
  if (ms >= 1000) return Fixed(ms / 1000, ms >= 10000 ? 0 : 1) + " s";
  if (ms >= 1) return Fixed(ms, 0) + " ms";
  return Fixed(ms, 1) + " ms";
}

}  // namespace

std::string CsvHeader() {
  return "prefix_tokens,cold_ttft_ms,warm_ttft_ms,speedup,state_bytes,fetch_ms,hydrate_ms,"
         "suffix_ms,states_bitexact,token_agreement\n";
}

std::string CsvRow(const SweepRow& r) {
  std::ostringstream out;
  out << r.prefix_tokens << ',' << Fixed(r.cold_ttft_ms, 3) << ',' << Fixed(r.warm_ttft_ms, 3)
      << ',' << Fixed(r.speedup(), 2) << ',' << r.state_bytes << ',' << Fixed(r.fetch_ms, 3) << ','
      << Fixed(r.hydrate_ms, 3) << ',' << Fixed(r.suffix_ms, 3) << ','
      << (r.states_bitexact() ? "true" : "false") << ',' << r.agreeing_tokens << '/'
      << r.total_tokens << '\n';
  return out.str();
}

std::string MarkdownTable(const std::vector<SweepRow>& rows, double loopback_gbps) {
  std::ostringstream out;
  out << "| prefix tokens | cold TTFT ms | warm TTFT ms | speedup | state MB | fetch ms | "
         "hydrate ms | suffix ms | target ms | bit-exact layers | tokens agree |\n"
      << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const SweepRow& r : rows) {
    const double target = r.target_ms(loopback_gbps);
    out << "| " << r.prefix_tokens << " | " << Fixed(r.cold_ttft_ms, 1) << " | "
        << Fixed(r.warm_ttft_ms, 1) << " | **" << Fixed(r.speedup(), 1) << "×** | "
        << Fixed(static_cast<double>(r.state_bytes) / 1e6, 1) << " | " << Fixed(r.fetch_ms, 1)
        << " | " << Fixed(r.hydrate_ms, 1) << " | " << Fixed(r.suffix_ms, 1) << " | "
        << Fixed(target, 1) << (r.warm_ttft_ms <= target ? " ✓" : " ✗") << " | "
        << r.bitexact_layers << "/" << r.total_layers << " | " << r.agreeing_tokens << "/"
        << r.total_tokens << " |";
    if (!r.warm_hit) out << " (warm missed: " << r.miss_reason << ")";
    out << "\n";
  }
  return out.str();
}

std::string SvgOpen(double width, double height, std::string_view title) {
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << ' ' << height
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
      << title << "</text>\n";
  return svg.str();
}

std::string SvgChart(const std::vector<SweepRow>& rows, std::string_view title) {
  const double width = 760, height = 440;
  const double left = 80, right = 80, top = 56, bottom = 56;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  std::ostringstream svg;
  svg << SvgOpen(width, height, title);
  if (rows.empty()) {
    svg << "</svg>\n";
    return svg.str();
  }
  // x: log2 of the prefix length.
  double x_min = std::log2(static_cast<double>(rows.front().prefix_tokens));
  double x_max = std::log2(static_cast<double>(rows.back().prefix_tokens));
  if (x_max - x_min < 1) {
    x_min -= 0.5;
    x_max += 0.5;
  }
  auto px = [&](int64_t n) {
    return left + (std::log2(static_cast<double>(n)) - x_min) / (x_max - x_min) * plot_w;
  };
  // Left y: log10 of milliseconds, whole decades.
  double lo = 1e300, hi = 0, best = 0;
  for (const SweepRow& r : rows) {
    lo = std::min({lo, r.cold_ttft_ms, r.warm_ttft_ms});
    hi = std::max({hi, r.cold_ttft_ms, r.warm_ttft_ms});
    best = std::max(best, r.speedup());
  }
  const double y_min = std::floor(std::log10(std::max(lo, 1e-3)));
  const double y_max = std::max(y_min + 1, std::ceil(std::log10(std::max(hi, 1e-3))));
  auto py = [&](double ms) {
    return top + plot_h - (std::log10(std::max(ms, 1e-3)) - y_min) / (y_max - y_min) * plot_h;
  };
  // Right y: speedup, linear from 0 to a round number.
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(best, 1.0))));
  double s_max = std::ceil(best / mag) * mag;
  if (s_max <= 0) s_max = 1;
  auto ps = [&](double s) { return top + plot_h - s / s_max * plot_h; };

  svg << "<g stroke=\"#ddd\">\n";
  for (double d = y_min; d <= y_max + 1e-9; d += 1) {
    const double y = py(std::pow(10.0, d));
    svg << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + plot_w << "\" y2=\""
        << y << "\"/>\n";
  }
  svg << "</g>\n<g stroke=\"#333\">\n"
      << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
      << top + plot_h << "\"/>\n"
      << "<line x1=\"" << left + plot_w << "\" y1=\"" << top << "\" x2=\"" << left + plot_w
      << "\" y2=\"" << top + plot_h << "\"/>\n"
      << "<line x1=\"" << left << "\" y1=\"" << top + plot_h << "\" x2=\"" << left + plot_w
      << "\" y2=\"" << top + plot_h << "\"/>\n</g>\n";
  for (double d = y_min; d <= y_max + 1e-9; d += 1) {
    svg << "<text x=\"" << left - 8 << "\" y=\"" << py(std::pow(10.0, d)) + 4
        << "\" text-anchor=\"end\">" << MsLabel(std::pow(10.0, d)) << "</text>\n";
  }
  for (int i = 0; i <= 4; ++i) {
    const double s = s_max * i / 4;
    svg << "<text x=\"" << left + plot_w + 8 << "\" y=\"" << ps(s) + 4 << "\" fill=\"#2ca02c\">"
        << Fixed(s, s_max >= 20 ? 0 : 1) << "×</text>\n";
  }
  for (const SweepRow& r : rows) {
    svg << "<text x=\"" << px(r.prefix_tokens) << "\" y=\"" << top + plot_h + 18
        << "\" text-anchor=\"middle\">" << TokensLabel(r.prefix_tokens) << "</text>\n";
  }
  svg << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << height - 14
      << "\" text-anchor=\"middle\">prefix length (tokens)</text>\n"
      << "<text transform=\"translate(20," << top + plot_h / 2
      << ") rotate(-90)\" text-anchor=\"middle\">time to first token (log scale)</text>\n"
      << "<text transform=\"translate(" << width - 18 << "," << top + plot_h / 2
      << ") rotate(90)\" text-anchor=\"middle\" fill=\"#2ca02c\">speedup (cold ÷ warm)</text>\n";

  struct Series {
    const char* name;
    const char* color;
    bool dashed;
    bool speedup;
    double (*value)(const SweepRow&);
  };
  const Series series[] = {
      {"cold TTFT", "#d62728", false, false, [](const SweepRow& r) { return r.cold_ttft_ms; }},
      {"warm TTFT", "#1f77b4", false, false, [](const SweepRow& r) { return r.warm_ttft_ms; }},
      {"speedup", "#2ca02c", true, true, [](const SweepRow& r) { return r.speedup(); }},
  };
  int legend = 0;
  for (const Series& s : series) {
    svg << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (const SweepRow& r : rows) {
      const double v = s.value(r);
      svg << px(r.prefix_tokens) << ',' << (s.speedup ? ps(v) : py(v)) << ' ';
    }
    svg << "\"/>\n";
    for (const SweepRow& r : rows) {
      const double v = s.value(r);
      svg << "<circle cx=\"" << px(r.prefix_tokens) << "\" cy=\"" << (s.speedup ? ps(v) : py(v))
          << "\" r=\"3.5\" fill=\"" << s.color << "\"/>\n";
    }
    const double ly = top + 14 + 18 * legend++;
    svg << "<line x1=\"" << left + 12 << "\" y1=\"" << ly << "\" x2=\"" << left + 40 << "\" y2=\""
        << ly << "\" stroke=\"" << s.color << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << "/>\n"
        << "<text x=\"" << left + 46 << "\" y=\"" << ly + 4 << "\">" << s.name << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

double MeasureLoopbackGbps(uint64_t bytes, int repeats) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listener);
    return 0;
  }
  constexpr size_t kChunk = size_t{1} << 20;
  // Source and sink as large as the transfer (up to 256 MiB), so the bytes come from and go to
  // memory as a state fetch's do, rather than from one cache-resident buffer.
  const size_t span = static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{256} << 20));
  std::vector<char> source(std::max<size_t>(span, kChunk), 'x');
  std::vector<char> sink(source.size(), 0);
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const int sender = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sender < 0 || ::connect(sender, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (sender >= 0) ::close(sender);
      break;
    }
    const int receiver = ::accept(listener, nullptr, nullptr);
    if (receiver < 0) {
      ::close(sender);
      break;
    }
    uint64_t received = 0;
    std::thread reader([&] {
      for (;;) {
        const ssize_t n =
            ::recv(receiver, sink.data() + received % sink.size(),
                   std::min<uint64_t>(kChunk, sink.size() - received % sink.size()), 0);
        if (n <= 0) break;
        received += static_cast<uint64_t>(n);
      }
    });
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t sent = 0; sent < bytes;) {
      const uint64_t at = sent % source.size();
      const ssize_t n =
          ::send(sender, source.data() + at,
                 std::min<uint64_t>({kChunk, bytes - sent, source.size() - at}), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<uint64_t>(n);
    }
    ::shutdown(sender, SHUT_WR);
    reader.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::close(sender);
    ::close(receiver);
    if (received == bytes && seconds > 0) {
      best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
    }
  }
  ::close(listener);
  return best;
}

ProgressBar::ProgressBar(int total_steps)
    : total_(std::max(total_steps, 1)), tty_(::isatty(STDERR_FILENO) != 0) {}

void ProgressBar::Update(int step, std::string_view what, double fraction) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  if (!tty_) {
    if (what != last_what_)
      std::fprintf(stderr, "[%d/%d] %.*s\n", step + 1, total_, static_cast<int>(what.size()),
                   what.data());
    last_what_ = std::string(what);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (what == last_what_ && fraction < 1.0 && now - last_draw_ < std::chrono::milliseconds(100)) {
    return;
  }
  last_what_ = std::string(what);
  last_draw_ = now;
  constexpr int kWidth = 30;
  const double overall = (step + fraction) / total_;
  const int filled = static_cast<int>(overall * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r\033[K[%s] %3.0f%%  %d/%d  %.*s %3.0f%%", bar.c_str(), overall * 100,
               step + 1, total_, static_cast<int>(what.size()), what.data(), fraction * 100);
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (tty_) std::fprintf(stderr, "\r\033[K");
}

}  // namespace prefixd::hybrid
