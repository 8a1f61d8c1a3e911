// Checkpoints carry checksums (issue 43 item 6): checksums.sha256 lists every file of checkpoints/step-N in
// sha256sum's format; verify_checkpoint finds a flipped byte, a deleted file and an unlisted weight file; a
// resume offers (or, with fallback, takes) the previous good checkpoint when the newest is damaged; a checkpoint
// from before checksums is accepted unverified; a damaged step-N is replaced by a new save of the same step.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error_of.h"
#include "common/models.h"
#include "common/scratch.h"
#include "temper/app/checkpoint.h"
#include "temper/io/sha256_file.h"

using namespace temper;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_all(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

void flip_byte(const fs::path& p, std::streamoff at) {
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x10));
}

bool have_sha256sum() {
  return std::system("command -v sha256sum >/dev/null 2>&1") == 0;
}

// A tiny model, its optimiser (with moments that are not zero) and a reference, saved as run/checkpoints/step-N.
struct SavedRun {
  ModelConfig cfg = test::small_config(Arch::qwen3, 64);
  Transformer model{cfg}, reference{cfg};
  OptimizerConfig oc;
  Optimizer opt{model, oc};
  std::string dir;
  explicit SavedRun(const std::string& name) : dir(test::scratch_path("ckpt_sums", name)) {
    model.init_random(3, 0.1f);
    reference.init_random(4, 0.1f);
    for (int64_t i = 0; i < opt.size(); ++i) opt.m()[i] = 1e-3f * static_cast<float>(i % 7), opt.v()[i] = 1e-4f;
    opt.moments_updated();
  }
  std::string save(int64_t step) {
    std::string d = (fs::path(dir) / "checkpoints" / ("step-" + std::to_string(step))).string();
    app::TrainState st;
    st.step = step;
    app::save_checkpoint(d, model, io::HfExportOptions{}, &opt, &reference, st, "[run]\nseed = 1\n");
    return d;
  }
};

}  // namespace

TEST(Sha256File, KnownDigestsAndAFileLongerThanOneChunk) {
  EXPECT_EQ(io::sha256_file_hex(test::write_scratch("ckpt_sums", "abc", "abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(io::sha256_file_hex(test::write_scratch("ckpt_sums", "empty", "")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // 9 MiB + 5 bytes: two whole 4 MiB chunks and a partial one, against sha256sum.
  std::string big(size_t{9} << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  big += "tail!";
  const std::string p = test::write_scratch("ckpt_sums", "big", big);
  const std::string got = io::sha256_file_hex(p);
  EXPECT_EQ(got.size(), 64u);
  EXPECT_NE(got, io::sha256_file_hex(test::write_scratch("ckpt_sums", "big2", big.substr(0, big.size() - 1))));
  if (have_sha256sum()) {
    std::FILE* f = ::popen(("sha256sum " + p).c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[65] = {0};
    ASSERT_EQ(std::fread(buf, 1, 64, f), 64u);
    ::pclose(f);
    EXPECT_EQ(got, std::string(buf));
  }
  EXPECT_NE(test::error_of([&] { io::sha256_file_hex(p + ".nope"); }).find(p + ".nope: cannot open to checksum"),
            std::string::npos);
}

TEST(CheckpointChecksums, EveryFileIsListedSortedInSha256sumFormatAndVerifies) {
  SavedRun r("listed");
  const std::string d = r.save(2);
  const std::string text = read_all(fs::path(d) / "checksums.sha256");
  std::vector<std::string> names;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    ASSERT_GT(line.size(), 66u) << line;
    EXPECT_EQ(line.substr(64, 2), "  ") << line;
    names.push_back(line.substr(66));
    EXPECT_EQ(line.substr(0, 64), io::sha256_file_hex((fs::path(d) / names.back()).string())) << line;
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(d))
    if (e.path().filename() != "checksums.sha256") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(names, files);  // every file but the list itself, sorted
  for (const char* f : {"config.json", "config.toml", "model.safetensors", "reference.safetensors",
                        "trainer_state.json", "trainer_state.safetensors"})
    EXPECT_NE(std::find(names.begin(), names.end(), f), names.end()) << f;
  app::CheckpointCheck c = app::verify_checkpoint(d);
  EXPECT_TRUE(c.ok) << c.problem;
  EXPECT_FALSE(c.unverified);
  EXPECT_EQ(c.problem, "");
  if (have_sha256sum()) {
    EXPECT_EQ(std::system(("cd '" + d + "' && sha256sum --quiet -c checksums.sha256").c_str()), 0);
    flip_byte(fs::path(d) / "config.toml", 3);
    EXPECT_NE(std::system(("cd '" + d + "' && sha256sum --quiet -c checksums.sha256 >/dev/null 2>&1").c_str()), 0);
  }
}

TEST(CheckpointChecksums, AFlippedByteDeletedFileOrUnlistedWeightsAreReported) {
  SavedRun r("damage");
  const fs::path d = r.save(2);
  const fs::path model = d / "model.safetensors";
  const std::string want = io::sha256_file_hex(model.string());
  flip_byte(model, static_cast<std::streamoff>(fs::file_size(model) / 2));  // inside the weights
  app::CheckpointCheck c = app::verify_checkpoint(d.string());
  EXPECT_FALSE(c.ok);
  EXPECT_FALSE(c.unverified);
  EXPECT_EQ(c.problem, "model.safetensors: SHA-256 mismatch (checksums.sha256 says " + want + ", the file hashes to " +
                           io::sha256_file_hex(model.string()) + ")");
  flip_byte(model, static_cast<std::streamoff>(fs::file_size(model) / 2));  // back
  EXPECT_TRUE(app::verify_checkpoint(d.string()).ok);

  write_all(d / "notes.txt", "an extra file nobody listed");  // ignored
  EXPECT_TRUE(app::verify_checkpoint(d.string()).ok);

  const std::string state = read_all(d / "trainer_state.safetensors");
  fs::remove(d / "trainer_state.safetensors");
  c = app::verify_checkpoint(d.string());
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.problem, "trainer_state.safetensors: listed in checksums.sha256 but missing");
  write_all(d / "trainer_state.safetensors", state);
  EXPECT_TRUE(app::verify_checkpoint(d.string()).ok);

  // The list edited to leave the weights out: a file a resume loads must be listed.
  const std::string list = read_all(d / "checksums.sha256");
  std::string cut;
  std::istringstream in(list);
  for (std::string line; std::getline(in, line);)
    if (line.find("  model.safetensors") == std::string::npos) cut += line + "\n";
  write_all(d / "checksums.sha256", cut);
  EXPECT_EQ(app::verify_checkpoint(d.string()).problem,
            "model.safetensors: present but not listed in checksums.sha256");
  write_all(d / "checksums.sha256", "not a checksum line\n");
  EXPECT_EQ(app::verify_checkpoint(d.string()).problem,
            "checksums.sha256: line 1 is not '<64 hex digits>  <file name>' (a sha256sum line)");
  write_all(d / "checksums.sha256", list);
  EXPECT_TRUE(app::verify_checkpoint(d.string()).ok);
}

TEST(CheckpointChecksums, ADamagedNewestIsRefusedNamingThePreviousGoodOneOrSkippedWithFallback) {
  SavedRun r("choose");
  EXPECT_EQ(app::choose_resume_checkpoint(r.dir, false), "");  // no checkpoint: the caller's case
  const std::string s2 = r.save(2), s4 = r.save(4), s6 = r.save(6);
  EXPECT_EQ(app::choose_resume_checkpoint(r.dir, false), s6);
  const fs::path m6 = fs::path(s6) / "model.safetensors";
  flip_byte(m6, static_cast<std::streamoff>(fs::file_size(m6) - 5));
  std::string e = test::error_of([&] { app::choose_resume_checkpoint(r.dir, false); });
  EXPECT_EQ(e.find(s6 + ": damaged: model.safetensors: SHA-256 mismatch (checksums.sha256 says "), 0u) << e;
  EXPECT_NE(e.find(". The previous good checkpoint is " + s4 +
                   " (step 4): resume from it with `temper train --resume " + r.dir + " --fallback`"),
            std::string::npos)
      << e;
  EXPECT_EQ(app::choose_resume_checkpoint(r.dir, true), s4);

  fs::remove(fs::path(s4) / "config.toml");  // two damaged: the message counts the one between
  e = test::error_of([&] { app::choose_resume_checkpoint(r.dir, false); });
  EXPECT_NE(e.find("The previous good checkpoint is " + s2 + " (step 2) (1 between them are damaged too)"),
            std::string::npos)
      << e;
  EXPECT_EQ(app::choose_resume_checkpoint(r.dir, true), s2);

  fs::remove(fs::path(s2) / "trainer_state.json");  // none good; still a (damaged) checkpoint, not a partial one
  EXPECT_EQ(app::latest_checkpoint(r.dir), s6);
  e = test::error_of([&] { app::choose_resume_checkpoint(r.dir, false); });
  EXPECT_NE(e.find(s6 + ": damaged: model.safetensors: SHA-256 mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("; no earlier good checkpoint in " + r.dir + "/checkpoints (3 checked)"), std::string::npos) << e;
  e = test::error_of([&] { app::choose_resume_checkpoint(r.dir, true); });
  EXPECT_NE(e.find("no earlier good checkpoint"), std::string::npos) << e;
  EXPECT_EQ(app::remove_partial_checkpoints(r.dir), 0);
  EXPECT_TRUE(fs::exists(fs::path(s2) / "checksums.sha256"));
}

TEST(CheckpointChecksums, ACheckpointWithoutChecksumsIsAcceptedUnverified) {
  SavedRun r("old");
  const std::string s2 = r.save(2);
  fs::remove(fs::path(s2) / "checksums.sha256");  // as a temper before checksums wrote it
  app::CheckpointCheck c = app::verify_checkpoint(s2);
  EXPECT_TRUE(c.ok);
  EXPECT_TRUE(c.unverified);
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(app::choose_resume_checkpoint(r.dir, false), s2);
}

TEST(CheckpointChecksums, SavingTheSameStepReplacesADamagedCheckpoint) {
  // A run resumed from an older checkpoint writes the damaged one's step again.
  SavedRun r("replace");
  const std::string s2 = r.save(2);
  const fs::path m = fs::path(s2) / "model.safetensors";
  flip_byte(m, static_cast<std::streamoff>(fs::file_size(m) / 3));
  ASSERT_FALSE(app::verify_checkpoint(s2).ok);
  r.model.init_random(9, 0.1f);
  EXPECT_EQ(r.save(2), s2);
  app::CheckpointCheck c = app::verify_checkpoint(s2);
  EXPECT_TRUE(c.ok) << c.problem;
  Transformer back(r.cfg);
  app::load_weights(m.string(), back);
  EXPECT_EQ(std::vector<float>(back.params(), back.params() + back.flat_size()),
            std::vector<float>(r.model.params(), r.model.params() + r.model.flat_size()));
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(r.dir) / "checkpoints")) ++n, (void)e;
  EXPECT_EQ(n, 1);  // nothing left beside it (no .old / .tmp)
}
