// The math-answer checker's \boxed extraction on adversarial text: N unclosed "\boxed{" in a row (a degenerate
// completion). Prints the seconds one extract_boxed call takes. Usage: extract_boxed [N] (default 100000).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "temper/reward/math_answer.h"

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
  std::string text;
  for (long i = 0; i < n; ++i) text += "\\boxed{";
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = temper::reward::extract_boxed(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"unclosed\":%ld,\"seconds\":%.6f,\"found\":%s}\n", n, s, r ? "true" : "false");
  return 0;
}
