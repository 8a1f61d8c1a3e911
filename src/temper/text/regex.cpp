// PCRE2 wrapper (see regex.h). Match data is allocated per call so one Regex can be shared by
// threads; when the JIT stack is too small for a pathological subject, the match is retried
// with the interpreter (heap-backed).
#include "temper/text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "temper/core/error.h"

namespace temper::text {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    TEMPER_CHECK(md != nullptr) << "PCRE2: out of memory creating match data";
  }
  ~MatchData() { pcre2_match_data_free(md); }
};

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;

  // One match at or after `start`; returns false on no match.
  bool match(std::string_view s, size_t start, uint32_t options, MatchData& m, size_t& b, size_t& e) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    int rc = pcre2_match(code, subject, s.size(), start, options, m.md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(code, subject, s.size(), start, options | PCRE2_NO_JIT, m.md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    TEMPER_CHECK(rc >= 0) << "PCRE2 match failed: " << pcre2_message(rc) << " (subject of " << s.size() << " bytes)";
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
    b = ov[0];
    e = ov[1];
    return true;
  }
};

Regex::Regex(const std::string& pattern, const std::string& what, bool literal)
    : impl_(std::make_unique<Impl>()), pattern_(pattern), literal_(literal) {
  int err = 0;
  PCRE2_SIZE off = 0;
  uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  // PCRE2_LITERAL refuses PCRE2_UCP (it has no character classes to make Unicode-aware anyway).
  opts |= literal ? PCRE2_LITERAL : PCRE2_UCP;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err, &off, nullptr);
  TEMPER_CHECK(impl_->code != nullptr) << what << ": regex does not compile: " << pcre2_message(err) << " at offset "
                                       << off << " of '" << pattern << "'";
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  MatchData m(impl_->code);
  size_t start = 0, b = 0, e = 0;
  while (start <= s.size() && impl_->match(s, start, 0, m, b, e)) {
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step over one character (a UTF-8 sequence, or one byte if invalid).
      if (b >= s.size()) break;
      size_t n = 1;
      while (b + n < s.size() && (static_cast<unsigned char>(s[b + n]) & 0xC0) == 0x80 && n < 4) ++n;
      start = b + n;
    }
  }
}

bool Regex::matches_at(std::string_view s, size_t at) const {
  MatchData m(impl_->code);
  size_t b = 0, e = 0;
  return impl_->match(s, at, PCRE2_ANCHORED, m, b, e);
}

}  // namespace temper::text
