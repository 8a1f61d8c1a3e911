// Normalizer steps (see normalizer.h), as tokenizers' normalizers/{unicode,prepend,replace}.rs do
// them: Prepend only touches non-empty text, Replace is a left-to-right literal replace-all.
#include "temper/text/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "temper/core/error.h"

namespace temper::text {

std::string nfc_normalize(std::string_view s) {
  std::string in(s);
  utf8proc_uint8_t* out = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(in.c_str()));
  if (!out) return in;
  std::string r(reinterpret_cast<char*>(out));
  std::free(out);
  return r;
}

std::string replace_all(std::string_view s, std::string_view pattern, std::string_view content) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (true) {
    const size_t j = s.find(pattern, i);
    if (j == std::string_view::npos) break;
    out.append(s.substr(i, j - i));
    out.append(content);
    i = j + pattern.size();
  }
  out.append(s.substr(i));
  return out;
}

void Normalizer::add_replace(std::string pattern, std::string content) {
  TEMPER_CHECK(!pattern.empty()) << "normalizer Replace: the pattern is empty";
  steps_.push_back({NormalizerKind::kReplace, std::move(pattern), std::move(content)});
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerKind::kNfc:
        s = nfc_normalize(s);
        break;
      case NormalizerKind::kPrepend:
        if (!s.empty()) s.insert(0, step.content);
        break;
      case NormalizerKind::kReplace:
        s = replace_all(s, step.pattern, step.content);
        break;
    }
  }
  return s;
}

std::string Normalizer::describe() const {
  std::string d;
  for (const NormalizerStep& step : steps_) {
    if (!d.empty()) d += " -> ";
    switch (step.kind) {
      case NormalizerKind::kNfc:
        d += "NFC";
        break;
      case NormalizerKind::kPrepend:
        d += "Prepend(" + step.content + ")";
        break;
      case NormalizerKind::kReplace:
        d += "Replace('" + step.pattern + "' -> '" + step.content + "')";
        break;
    }
  }
  return d.empty() ? "(none)" : d;
}

}  // namespace temper::text
