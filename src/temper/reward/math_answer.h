// Final answers of math-style completions: extraction (GSM8K "#### x", LaTeX \boxed{...}, "The answer is X")
// and equivalence (numbers with commas/sign/decimals/exponent, fractions a/b and \frac{a}{b}, percent, relative
// tolerance; otherwise a normalised string compare). Leaves out symbolic equivalence (no CAS: "x+1" and "1+x"
// differ) and units beyond a trailing plain word. Follows the usual GSM8K / Hendrycks-MATH evaluation practice.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace temper::reward {

// Text after the last "####" (rest of that line, trimmed); nullopt if absent or empty.
std::optional<std::string> extract_gsm8k(std::string_view text);
// Content of the last well-formed \boxed{...} or \fbox{...} (nested braces kept), or "\boxed 5" (to space or '$').
std::optional<std::string> extract_boxed(std::string_view text);
// After the last "answer is" (any case, optional ':'), to the end of the line or sentence ('. '), without a
// trailing '.'; a \boxed{} inside is unwrapped.
std::optional<std::string> extract_answer_is(std::string_view text);
// The first that finds something of: extract_gsm8k, extract_boxed, extract_answer_is. No "last number in the
// text" fallback: a completion must state its answer.
std::optional<std::string> extract_math_answer(std::string_view text);

struct MathNumber {
  double value = 0;
  bool percent = false;  // written with a trailing % (value is the number before it: "50%" -> 50)
};
// "1,234", "+5", "-0.5", ".5", "1e-3", "3/4", "-\frac{3}{4}", "\dfrac{1}{2}", "\frac12", "50%", "$18.00",
// "x = 5", "18 dollars"; nullopt if the text is not one number.
std::optional<MathNumber> parse_math_number(std::string_view s);

// Trim, drop '$' and "\text{..}" wrappers, lowercase, drop a trailing '.', remove all whitespace.
std::string normalize_answer_text(std::string_view s);

struct MathEquivOptions {
  double rel_tol = 1e-6;            // |a-b| <= rel_tol * max(|a|, |b|)
  double abs_tol = 0;               // or |a-b| <= abs_tol
  bool percent_as_fraction = true;  // "50%" also equals 0.5 (it always equals 50)
};
// a and b are final answers (already extracted). Both numbers: numeric compare; else normalised text compare.
bool math_answers_equal(std::string_view a, std::string_view b, const MathEquivOptions& opt = {});

}  // namespace temper::reward
