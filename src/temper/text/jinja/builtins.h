// Jinja's builtin filters and tests, attribute/item lookup with the methods chat templates call on
// strings and dicts, and the global functions (range, namespace, dict, raise_exception). Python's
// semantics where output depends on them; what the immutable sandbox forbids (list.append,
// dict.update...) is an EvalError, as it is a SecurityError for transformers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "temper/text/jinja/value.h"

namespace temper::text::jinja {

// {{ v | name(args) }}; an unknown filter is an EvalError naming it.
Value apply_filter(const std::string& name, const Value& v, CallArgs& args);

// {{ v is name(args) }}; an unknown test is an EvalError naming it.
bool apply_test(const std::string& name, const Value& v, CallArgs& args);

// obj.name: a namespace's attribute, a str/dict method (bound), else a dict's key; undefined when
// absent (an EvalError on undefined itself, as Jinja's UndefinedError).
Value get_attr(const Value& obj, const std::string& name);

// obj[key]: list/str index (negative from the end), dict key; undefined when absent.
Value get_item(const Value& obj, const Value& key);

Value get_slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
                std::optional<int64_t> step);

// The items a for loop visits: a list's items, a dict's keys, a string's characters; undefined
// visits nothing. Anything else is an EvalError.
List iterate(const Value& v);

// Python's len(); undefined is 0.
int64_t length(const Value& v);

// Python's `in`: substring, list membership, dict key.
bool contains(const Value& container, const Value& item);

// str.replace with the result's size checked first (16 MiB): replace('', x) multiplies text.
std::string checked_replace(std::string_view s, std::string_view old, std::string_view with, int64_t count);

// markupsafe.escape: & < > " ' as &amp; &lt; &gt; &#34; &#39;.
std::string html_escape(std::string_view s);

// range, namespace, dict, raise_exception (the template's message becomes an EvalError with raised set).
Dict builtin_globals();

}  // namespace temper::text::jinja
