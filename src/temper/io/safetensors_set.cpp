#include "temper/io/safetensors_set.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/json_file.h"

namespace temper::io {
namespace fs = std::filesystem;

SafetensorsSet::SafetensorsSet(SafetensorsFile single) {
  path_ = single.path();
  add(std::move(single));
}

void SafetensorsSet::add(SafetensorsFile f) {
  size_t idx = files_.size();
  for (const std::string& n : f.names()) {
    auto it = where_.find(n);
    TEMPER_CHECK(it == where_.end()) << f.path() << ": tensor '" << n << "' is also in " << files_[it->second].path();
    where_[n] = idx;
  }
  files_.push_back(std::move(f));
}

SafetensorsSet SafetensorsSet::open(const std::string& path) {
  fs::path p(path);
  if (fs::is_directory(p)) {
    if (fs::exists(p / "model.safetensors.index.json")) return open((p / "model.safetensors.index.json").string());
    TEMPER_CHECK(fs::exists(p / "model.safetensors"))
        << path << ": no model.safetensors or model.safetensors.index.json in this directory";
    return SafetensorsSet(SafetensorsFile::open((p / "model.safetensors").string()));
  }
  std::string name = p.filename().string();
  if (name.size() < 11 || name.compare(name.size() - 11, 11, ".index.json") != 0)
    return SafetensorsSet(SafetensorsFile::open(path));
  nlohmann::json j = read_json_file(path);
  TEMPER_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object())
      << path << ": field 'weight_map' (an object of tensor name -> shard file) is missing";
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto& [tensor, shard] : j["weight_map"].items()) {
    TEMPER_CHECK(shard.is_string()) << path << ": weight_map['" << tensor << "'] must be a file name, got " << shard.dump();
    std::string s = shard.get<std::string>();
    TEMPER_CHECK(s.find('/') == std::string::npos && s != "..")
        << path << ": weight_map['" << tensor << "'] = '" << s << "' must be a file beside the index";
    by_shard[s].push_back(tensor);
  }
  TEMPER_CHECK(!by_shard.empty()) << path << ": weight_map is empty";
  SafetensorsSet set;
  set.path_ = path;
  for (auto& [shard, tensors] : by_shard) {
    std::string sp = (p.parent_path() / shard).string();
    TEMPER_CHECK(fs::exists(sp)) << path << ": shard '" << shard << "' listed in weight_map does not exist";
    SafetensorsFile f = SafetensorsFile::open(sp);
    for (const std::string& t : tensors)
      TEMPER_CHECK(f.has(t)) << path << ": weight_map puts '" << t << "' in " << shard << ", which does not have it";
    set.add(std::move(f));
  }
  return set;
}

Tensor SafetensorsSet::get(const std::string& name) const {
  auto it = where_.find(name);
  TEMPER_CHECK(it != where_.end()) << path_ << ": no tensor named '" << name << "'";
  return files_[it->second].get(name);
}

void SafetensorsSet::release(const std::string& name) const {
  auto it = where_.find(name);
  TEMPER_CHECK(it != where_.end()) << path_ << ": no tensor named '" << name << "'";
  files_[it->second].release(name);
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> v;
  for (auto& [k, i] : where_) v.push_back(k);
  return v;
}

const std::string& SafetensorsSet::file_of(const std::string& name) const {
  auto it = where_.find(name);
  TEMPER_CHECK(it != where_.end()) << path_ << ": no tensor named '" << name << "'";
  return files_[it->second].path();
}

}  // namespace temper::io
