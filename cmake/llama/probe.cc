// Configure-time probe (cmake/Llama.cmake): built against llama.cpp's headers and linked with its
// libraries, prints the libraries' ggml version, commit and the file libllama was loaded from.
#include <dlfcn.h>

#include <cstdio>

#include "ggml.h"
#include "llama.h"

int main() {
  llama_model_params params = llama_model_default_params();
  (void)params;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&llama_model_default_params), &info) == 0 ||
      info.dli_fname == nullptr) {
    return 1;
  }
  std::printf("%s %s %s\n", ggml_version(), ggml_commit(), info.dli_fname);
  return 0;
}
