// The table of methods: every method a recipe section can turn on, each listed once
// (rl/method_spec.h). Adding a method: its folder's files and one line in registry.cpp.
#pragma once

#include <span>

#include "temper/rl/method_spec.h"

namespace temper::rl {

std::span<const MethodSpec* const> method_table();

}  // namespace temper::rl
