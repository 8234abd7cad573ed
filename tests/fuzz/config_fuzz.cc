// libFuzzer target for the config-file parser (src/app/config_text.h): any text is applied or
// refused with a message naming its line; it never crashes, and what it accepted reads back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "app/config_text.h"
#include "common/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace prefixd;
  Settings settings;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string err = app::ApplyConfigText(text, "fuzz.conf", settings);
  if (!err.empty() && err.rfind("fuzz.conf:", 0) != 0) __builtin_trap();
  for (size_t i = 0; i < Settings::Specs().size(); ++i) (void)settings.Get(static_cast<Setting>(i));
  return 0;
}
