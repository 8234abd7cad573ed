// Writes the seed corpus of tests/fuzz/llama_state_fuzz.cc: for each model given, the sequence
// state llama.cpp writes after a few tokens, in the fuzz target's input form (memory kind, token
// count, tokens, state), and the state's stored layout. Run by hand when llama.cpp's state format
// changes: prefixd-llama-fuzz-seeds OUT_DIR KIND:MODEL.gguf ... (KIND 0 attention, 1 recurrent,
// 2 hybrid).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "llama/runner.h"
#include "llama/seq_state.h"

int main(int argc, char** argv) {
  using namespace prefixd::llama;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR KIND:MODEL.gguf ...\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto kind = static_cast<uint8_t>(arg[0] - '0');
    RunnerOptions o;
    o.model_path = arg.substr(2);
    o.n_ctx = 256;
    o.n_batch = 64;
    o.threads = 1;
    auto runner = Runner::Load(o);
    if (!runner.ok()) {
      std::fprintf(stderr, "%s\n", runner.status().ToString().c_str());
      return 1;
    }
    const std::vector<llama_token> tokens = RandomTokens(1, 5, (*runner)->vocab());
    if (!(*runner)->Decode(0, tokens, 0, tokens.size()).ok()) return 1;
    std::vector<uint8_t> state(llama_state_seq_get_size_ext((*runner)->ctx(), 0, 0));
    llama_state_seq_get_data_ext((*runner)->ctx(), state.data(), state.size(), 0, 0);
    std::vector<uint8_t> input{kind, static_cast<uint8_t>(tokens.size())};
    const auto* t = reinterpret_cast<const uint8_t*>(tokens.data());
    input.insert(input.end(), t, t + 4 * tokens.size());
    input.insert(input.end(), state.begin(), state.end());
    const std::string name = out + "/state-" + std::to_string(i - 1);
    std::ofstream(name, std::ios::binary)
        .write(reinterpret_cast<const char*>(input.data()),
               static_cast<std::streamsize>(input.size()));
    auto parsed = SequenceState::Parse(state, static_cast<MemoryKind>(kind), tokens);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s: %s\n", o.model_path.c_str(), parsed.status().ToString().c_str());
      return 1;
    }
    const std::string layout = parsed->layout().Encode();
    std::string layout_input{static_cast<char>(kind), 0};
    layout_input += layout;
    std::ofstream(out + "/layout-" + std::to_string(i - 1), std::ios::binary) << layout_input;
  }
  return 0;
}
