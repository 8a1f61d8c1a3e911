// The program that is running (/proc/self/exe), to start explorer processes of it (`temper flow explore`, [rl.async]'s
// `temper train --fd 3`); TEMPER_SPOTLIGHT_EXE names another, for tests whose binary is not `temper`.
#pragma once

#include <string>

namespace temper::app {

// `who` names the caller in the error when the program cannot be found.
std::string this_program(const std::string& who);

}  // namespace temper::app
