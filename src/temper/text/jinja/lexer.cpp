// Jinja2 lexer (see lexer.h). Text between tags is cut with jinja2's rules: `-` strips all
// whitespace on its side, lstrip_blocks strips spaces/tabs between a line start and a block or
// comment tag, trim_blocks drops one newline after a block or comment tag.
#include "temper/text/jinja/lexer.h"

#include <algorithm>
#include <cstring>

#include "temper/core/error.h"
#include "temper/text/utf8.h"

namespace temper::text::jinja {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// \r\n and \r become \n; one trailing newline is dropped (keep_trailing_newline=False).
std::string normalise_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python str.rstrip(): trailing Unicode whitespace.
std::string_view rstrip_python(std::string_view s) {
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = utf8_next(s, i);
    i += c.len;
    if (!c.valid || !is_python_whitespace(c.cp)) end = i;
  }
  return s.substr(0, end);
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name) : src_(normalise_newlines(source)), name_(name) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (at_ < src_.size()) {
      const size_t tag = find_tag(at_);
      if (tag == std::string::npos) {
        push_text(at_, src_.substr(at_));
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      std::string_view text = std::string_view(src_).substr(at_, tag - at_);
      if (sign == '-') {
        text = rstrip_python(text);
      } else if (sign != '+' && kind != '{') {
        text = lstrip_block(text, line_starting);
      }
      push_text(at_, text);
      at_ = tag + 2 + (sign ? 1 : 0);
      std::string_view end;
      if (kind == '#') {
        end = comment();
      } else if (kind == '%' && raw_block(tag)) {
        end = last_end_;
      } else {
        end = tag_tokens(kind == '{', tag);
      }
      line_starting = !end.empty() && end.back() == '\n';
    }
    toks_.push_back({Tok::kEof, "", pos(src_.size())});
    return std::move(toks_);
  }

 private:
  Pos pos(size_t off) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off) - 1;
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(off - *it) + 1};
  }

  [[noreturn]] void fail(size_t off, const std::string& msg) const {
    const Pos p = pos(off);
    TEMPER_FAIL() << name_ << ":" << p.line << ":" << p.col << ": " << msg;
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // lstrip_blocks: spaces/tabs between the start of a line and the tag are dropped.
  static std::string_view lstrip_block(std::string_view text, bool line_starting) {
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting) return text;
    const std::string_view tail = text.substr(l_pos);
    if (tail.empty() || !std::all_of(tail.begin(), tail.end(), is_space)) return text;
    return text.substr(0, l_pos);
  }

  void push_text(size_t off, std::string_view text) {
    if (!text.empty()) toks_.push_back({Tok::kText, std::string(text), pos(off)});
  }

  // After `%}` or `#}`: `-` eats all whitespace, `+` nothing, otherwise one newline (trim_blocks).
  std::string_view consume_block_end(size_t close_at, char sign) {
    const size_t start = sign ? close_at - 1 : close_at;
    size_t e = close_at + 2;
    if (sign == '-') {
      while (e < src_.size() && is_space(src_[e])) ++e;
    } else if (sign != '+' && e < src_.size() && src_[e] == '\n') {
      ++e;
    }
    at_ = e;
    return std::string_view(src_).substr(start, e - start);
  }

  std::string_view comment() {
    const size_t close = src_.find("#}", at_);
    if (close == std::string::npos) fail(at_, "missing end of comment tag '#}'");
    const char sign = close > at_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return consume_block_end(close, sign);
  }

  // `{% raw %}...{% endraw %}`: the content is text. Returns false when the tag is not `raw`.
  bool raw_block(size_t tag) {
    size_t p = at_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < src_.size() && is_space(src_[p])) ++p;
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    for (size_t q = src_.find("{%", p); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t r = q + 2;
      const char sign = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r++] : 0;
      while (r < src_.size() && is_space(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && is_space(src_[r])) ++r;
      std::string_view body = std::string_view(src_).substr(p, q - p);
      body = sign == '-' ? rstrip_python(body) : sign == '+' ? body : lstrip_block(body, false);
      push_text(p, body);
      const char end_sign = src_[r] == '-' || src_[r] == '+' ? src_[r] : 0;
      if (src_.compare(r + (end_sign ? 1 : 0), 2, "%}") != 0) fail(r, "expected '%}' after endraw");
      last_end_ = consume_block_end(r + (end_sign ? 1 : 0), end_sign);
      return true;
    }
    fail(tag, "missing {% endraw %} for this {% raw %}");
  }

  std::string_view tag_tokens(bool variable, size_t tag) {
    toks_.push_back({variable ? Tok::kVarBegin : Tok::kBlockBegin, variable ? "{{" : "{%", pos(tag)});
    std::vector<char> balance;
    while (true) {
      while (at_ < src_.size() && is_space(src_[at_])) ++at_;
      if (at_ >= src_.size()) fail(tag, std::string("unterminated ") + (variable ? "'{{'" : "'{%'") + " tag");
      if (balance.empty()) {
        const std::string_view end = end_delimiter(variable);
        if (!end.empty()) return end;
      }
      const char c = src_[at_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        name_token();
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number_token();
      } else if (c == '\'' || c == '"') {
        string_token();
      } else {
        op_token(balance);
      }
    }
  }

  std::string_view end_delimiter(bool variable) {
    const size_t start = at_;
    if (variable) {
      if (src_.compare(at_, 3, "-}}") == 0) {
        at_ += 3;
        while (at_ < src_.size() && is_space(src_[at_])) ++at_;
      } else if (src_.compare(at_, 2, "}}") == 0) {
        at_ += 2;
      } else {
        return {};
      }
      toks_.push_back({Tok::kVarEnd, "}}", pos(start)});
      return std::string_view(src_).substr(start, at_ - start);
    }
    const char sign = src_[at_] == '-' || src_[at_] == '+' ? src_[at_] : 0;
    if (src_.compare(at_ + (sign ? 1 : 0), 2, "%}") != 0) return {};
    toks_.push_back({Tok::kBlockEnd, "%}", pos(start)});
    return consume_block_end(at_ + (sign ? 1 : 0), sign);
  }

  void name_token() {
    const size_t s = at_;
    while (at_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[at_])) || src_[at_] == '_')) ++at_;
    toks_.push_back({Tok::kName, src_.substr(s, at_ - s), pos(s)});
  }

  std::string digits() {
    std::string d;
    while (at_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[at_])) ||
                                 (src_[at_] == '_' && at_ + 1 < src_.size() && std::isdigit(src_[at_ + 1])))) {
      if (src_[at_] != '_') d += src_[at_];
      ++at_;
    }
    return d;
  }

  void number_token() {
    const size_t s = at_;
    std::string num = digits();
    bool is_float = false;
    if (at_ + 1 < src_.size() && src_[at_] == '.' && std::isdigit(static_cast<unsigned char>(src_[at_ + 1]))) {
      ++at_;
      num += "." + digits();
      is_float = true;
    }
    if (at_ < src_.size() && (src_[at_] == 'e' || src_[at_] == 'E')) {
      size_t q = at_ + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        num += src_.substr(at_, q - at_);
        at_ = q;
        num += digits();
        is_float = true;
      }
    }
    Token t{is_float ? Tok::kFloat : Tok::kInt, src_.substr(s, at_ - s), pos(s)};
    try {
      if (is_float) {
        t.float_value = std::stod(num);
      } else {
        t.int_value = std::stoll(num);
      }
    } catch (const std::exception&) {
      fail(s, "number out of range: " + t.text);
    }
    toks_.push_back(std::move(t));
  }

  size_t hex_escape(size_t p, int n, std::string& out) const {
    if (p + n > src_.size()) fail(p, "truncated \\x/\\u escape in a string literal");
    const std::string hex = src_.substr(p, n);
    if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      fail(p, "bad \\x/\\u escape '" + hex + "' in a string literal");
    }
    const unsigned long cp = std::stoul(hex, nullptr, 16);
    if (cp > 0x10FFFF) fail(p, "escape beyond U+10FFFF in a string literal");
    utf8_append(out, static_cast<char32_t>(cp));
    return p + n;
  }

  // Python's unicode-escape decoding of the literal's body.
  void string_token() {
    const size_t s = at_;
    const char q = src_[at_++];
    std::string out;
    while (true) {
      if (at_ >= src_.size()) fail(s, "unterminated string literal");
      const char c = src_[at_++];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= src_.size()) fail(s, "unterminated string literal");
      const char e = src_[at_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          break;
        case 'x':
          at_ = hex_escape(at_, 2, out);
          break;
        case 'u':
          at_ = hex_escape(at_, 4, out);
          break;
        case 'U':
          at_ = hex_escape(at_, 8, out);
          break;
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int k = 0; k < 2 && at_ < src_.size() && src_[at_] >= '0' && src_[at_] <= '7'; ++k) {
              v = v * 8 + (src_[at_++] - '0');
            }
            utf8_append(out, static_cast<char32_t>(v));
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    toks_.push_back({Tok::kString, std::move(out), pos(s)});
  }

  void op_token(std::vector<char>& balance) {
    static constexpr const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    const size_t s = at_;
    for (const char* op : kTwo) {
      if (src_.compare(at_, 2, op) == 0) {
        at_ += 2;
        toks_.push_back({Tok::kOp, op, pos(s)});
        return;
      }
    }
    const char c = src_[at_];
    if (!std::strchr("+-/*%~[](){}=.:|,;<>", c)) fail(s, std::string("unexpected character '") + c + "'");
    ++at_;
    if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty() || balance.back() != c) fail(s, std::string("unexpected '") + c + "'");
      balance.pop_back();
    }
    toks_.push_back({Tok::kOp, std::string(1, c), pos(s)});
  }

  std::string src_;
  const std::string& name_;
  std::vector<size_t> line_starts_;
  std::vector<Token> toks_;
  size_t at_ = 0;
  std::string_view last_end_;
};

}  // namespace

std::vector<Token> jinja_lex(std::string_view source, const std::string& name) {
  return Lexer(source, name).run();
}

}  // namespace temper::text::jinja
