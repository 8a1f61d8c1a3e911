// Token ids as users type them on the command line: "1,2,3" or a JSON list "[1, 2, 3]".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::app {

std::vector<int32_t> parse_id_list(const std::string& text, const char* what);  // throws naming `what`

}  // namespace temper::app
