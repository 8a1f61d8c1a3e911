// RFC 4648 base64 with '=' padding: binary inside text files (trainer_state.json's async state, report.html's
// inline images).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace temper {

std::string base64_encode(std::string_view bytes);
// std::nullopt when `text` is not padded base64 (length not a multiple of 4, a foreign character, '=' inside).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace temper
