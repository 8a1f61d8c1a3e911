// Fuzz harness: any bytes as a TOML recipe must be read the way `temper train` reads one (Recipe::parse,
// read_run_config over the table of methods, check_all_read) or throw temper::Error. A recipe that reads must
// also read again from its resolved text (config.toml, what --resume loads), to the same resolved text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "temper/app/recipe.h"
#include "temper/app/run_config.h"
#include "temper/core/error.h"
#include "temper/rl/methods/registry.h"

namespace {

std::string read_resolved(const std::string& text, const std::string& source) {
  temper::app::Recipe r = temper::app::Recipe::parse(text, source);
  (void)temper::app::read_run_config(r, temper::rl::method_table());
  r.check_all_read();
  (void)r.resolved_toml(true);
  return r.resolved_toml();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string resolved;
  try {
    resolved = read_resolved(text, "fuzz.toml");
  } catch (const temper::Error&) {
    return 0;
  }
  std::string again;
  try {
    again = read_resolved(resolved, "config.toml");
  } catch (const temper::Error& e) {
    std::fprintf(stderr, "the resolved recipe does not read back: %s\n--- resolved:\n%s\n", e.what(), resolved.c_str());
    std::abort();
  }
  if (again != resolved) {
    std::fprintf(stderr, "the resolved recipe changes when read back\n--- first:\n%s\n--- again:\n%s\n",
                 resolved.c_str(), again.c_str());
    std::abort();
  }
  return 0;
}
