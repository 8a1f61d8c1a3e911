// One `temper train` per run directory (issue 43 item 4): a second holder is refused naming the first's pid, and a
// lock whose holder is gone (its descriptor closed, as when the process is killed) is taken over.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "common/error_of.h"
#include "temper/app/run_lock.h"

using namespace temper;

TEST(RunLock, ASecondHolderIsRefusedNamingThePidAndAStaleLockIsTakenOver) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("temper_lock_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto first = std::make_unique<app::RunLock>(dir.string());
  std::ifstream f(dir / ".lock");
  std::string pid;
  f >> pid;
  EXPECT_EQ(pid, std::to_string(getpid()));
  const std::string e = test::error_of([&] { app::RunLock second(dir.string()); });
  EXPECT_NE(e.find("another temper train (pid " + std::to_string(getpid()) + ") is using this run directory"),
            std::string::npos)
      << e;
  first.reset();  // the holder is gone; its .lock file stays behind
  EXPECT_TRUE(std::filesystem::exists(dir / ".lock"));
  EXPECT_NO_THROW(app::RunLock again(dir.string()));
  std::filesystem::remove_all(dir);
}
