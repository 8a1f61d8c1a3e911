// The weights of a model as one set of tensors, whether one safetensors file or shards listed by
// model.safetensors.index.json (the HF sharded layout). The index is validated: every shard it
// names exists and holds the tensors the index says; a tensor may not live in two shards.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "temper/io/safetensors.h"

namespace temper::io {

class SafetensorsSet {
 public:
  // path: a .safetensors file, a *.safetensors.index.json, or a directory with model.safetensors or
  // model.safetensors.index.json.
  static SafetensorsSet open(const std::string& path);
  SafetensorsSet(SafetensorsFile single);  // NOLINT: a single file is a set of one

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  Tensor get(const std::string& name) const;
  void release(const std::string& name) const;  // SafetensorsFile::release
  std::vector<std::string> names() const;
  const std::string& file_of(const std::string& name) const;
  size_t num_files() const { return files_.size(); }

 private:
  SafetensorsSet() = default;
  void add(SafetensorsFile f);
  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;
};

}  // namespace temper::io
