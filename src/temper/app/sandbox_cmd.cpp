#include "temper/app/sandbox_cmd.h"

#include <cctype>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "temper/core/error.h"
#include "temper/sandbox/python_tests.h"

namespace temper::app {
namespace {

using nlohmann::json;

sandbox::SandboxLimits read_limits(const json& j) {
  sandbox::SandboxLimits l;
  if (j.is_null()) return l;
  TEMPER_CHECK(j.is_object()) << "temper sandbox: \"limits\": expected an object, got " << j.dump();
  for (const auto& [key, v] : j.items()) {
    TEMPER_CHECK(v.is_number()) << "temper sandbox: \"limits\"." << key << ": expected a number, got " << v.dump();
    if (key == "cpu_s")
      l.cpu_s = v.get<double>();
    else if (key == "wall_s")
      l.wall_s = v.get<double>();
    else if (key == "memory_mb")
      l.memory_mb = v.get<int64_t>();
    else if (key == "max_procs")
      l.max_procs = v.get<int64_t>();
    else if (key == "file_mb")
      l.file_mb = v.get<int64_t>();
    else if (key == "open_files")
      l.open_files = v.get<int64_t>();
    else if (key == "output_kb")
      l.output_kb = v.get<int64_t>();
    else
      TEMPER_FAIL() << "temper sandbox: \"limits\": unknown key '" << key
                    << "' (expected cpu_s, wall_s, memory_mb, max_procs, file_mb, open_files, output_kb)";
  }
  l.validate();
  return l;
}

}  // namespace

int sandbox_cmd() {
  int requests = 0;
  for (;;) {
    int c;
    while ((c = std::cin.peek()) != EOF && std::isspace(c)) std::cin.get();
    if (c == EOF) break;
    json req;
    try {
      std::cin >> req;
    } catch (const json::exception& e) {
      std::fprintf(stderr, "temper sandbox: request %d is not JSON: %s\n", requests + 1, e.what());
      return 2;
    }
    std::string code;
    std::vector<std::string> tests;
    sandbox::SandboxLimits limits;
    try {
      TEMPER_CHECK(req.is_object()) << "temper sandbox: expected a JSON object {\"code\": ..., \"tests\": [...]}, got "
                                    << req.dump().substr(0, 80);
      for (const auto& [key, v] : req.items())
        TEMPER_CHECK(key == "code" || key == "tests" || key == "limits")
            << "temper sandbox: unknown field '" << key << "' (expected code, tests, limits)";
      TEMPER_CHECK(req.contains("code") && req["code"].is_string()) << "temper sandbox: \"code\": expected a string";
      code = req["code"].get<std::string>();
      TEMPER_CHECK(req.contains("tests") && req["tests"].is_array())
          << "temper sandbox: \"tests\": expected a list of Python statements";
      for (const json& t : req["tests"]) {
        TEMPER_CHECK(t.is_string()) << "temper sandbox: \"tests\": expected strings, got " << t.dump();
        tests.push_back(t.get<std::string>());
      }
      limits = read_limits(req.value("limits", json()));
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    sandbox::TestOutcome o = sandbox::run_python_tests(code, tests, limits);
    std::cout << sandbox::test_outcome_json(o) << std::endl;
    ++requests;
  }
  if (requests == 0) {
    std::fprintf(stderr,
                 "temper sandbox: no request on stdin (expected {\"code\": \"...\", \"tests\": [\"assert ...\"]})\n");
    return 2;
  }
  return 0;
}

}  // namespace temper::app
