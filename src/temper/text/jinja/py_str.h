// Python str operations on UTF-8 strings, counted in code points as Python counts them: len,
// indexing and slicing, strip/split/replace/find/count, case mapping (utf8proc's simple mappings;
// Python's special cases such as 'ß'.upper() == 'SS' are left out), splitlines, and Jinja's
// title filter. Invalid UTF-8 is read as U+FFFD.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace temper::text::jinja {

std::u32string py_decode(std::string_view s);
std::string py_encode(std::u32string_view s);
int64_t py_len(std::string_view s);

// s[i] (negative from the end); nullopt when out of range.
std::optional<std::string> py_index(std::string_view s, int64_t i);

// Python's slice indices for a sequence of length n: the positions s[start:stop:step] visits.
std::vector<int64_t> py_slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                      std::optional<int64_t> step);

// chars nullopt: Unicode whitespace (str.isspace); else any code point of *chars.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

// sep nullopt: runs of whitespace, empty pieces dropped. maxsplit < 0: no limit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s);

std::string py_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);
int64_t py_find(std::string_view s, std::string_view x, bool reverse);  // code point index or -1
int64_t py_count(std::string_view s, std::string_view x);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);     // str.title()
std::string jinja_title(std::string_view s);  // Jinja's |title: words split at [-\s({\[<]+

bool py_isspace(char32_t cp);

}  // namespace temper::text::jinja
